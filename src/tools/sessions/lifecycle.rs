//! `session_create`, `session_list` and `session_close`.

use std::collections::BTreeMap;
use std::fmt::Write;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::session::CreateOptions;
use crate::tools::Terminal;
use crate::tools::ToolError;
use crate::tools::replies::reply::{Facts, Reply};

/// Arguments of `session_create`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// A name for the session (letters, digits, '_', '-'); by default the first free of t1, t2, …
    #[serde(default)]
    pub name: Option<String>,
    /// What the pane runs: omit (or "bash") for a bash with shell integration, which gives exact exit statuses; "zsh" for a zsh with it (the user's own zsh files are read); anything else is run with sh -c.
    #[serde(default)]
    pub command: Option<String>,
    /// Width in columns (default 120).
    #[serde(default)]
    pub cols: Option<u16>,
    /// Height in rows (default 40).
    #[serde(default)]
    pub rows: Option<u16>,
    /// Working directory to start in.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Extra environment variables for the session.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Delete the session's logs as soon as it closes (default false: they are kept some days after it closes).
    #[serde(default)]
    pub delete_logs_on_close: bool,
    /// A regex matching the session's prompt where the built-in ones (`$ `, `# `, `> `, `(gdb) `, `>>> `, ...) do not, e.g. "^myapp\\[\\d+\\]: $"; lines typed into programs end at it.
    /// A regex matching the session's prompt where the built-in ones (`$ `, `# `, `> `, `(gdb) `, `>>> `, ...) do not, e.g. "^myapp: $"; lines typed into programs end at it.
    pub prompt_pattern: Option<String>,
    /// false: show secrets in this session's replies as they are (default true: each secret shows as a placeholder ‹secret:KIND:N›, which run, send and expect type back as the value).
    #[serde(default)]
    pub redact: Option<bool>,
}

/// Arguments of `session_close`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseParams {
    /// The session's name.
    pub session: String,
    /// Close every pane of the session's window (the sessions split from it, or it from), not only its own.
    #[serde(default)]
    pub window: bool,
}

/// Arguments of `session_split`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitParams {
    /// The session whose pane is split; the new one is named after its window, e.g. "t1+1".
    pub session: String,
    /// Put the new pane beside it (side by side) rather than below it (default false: below).
    #[serde(default)]
    pub beside: bool,
    /// The new pane's width (beside) or height (below) in cells; by default half.
    #[serde(default)]
    pub size: Option<u16>,
    /// What the new pane runs: omit (or "bash") for a bash with shell integration; anything else is run with sh -c.
    #[serde(default)]
    pub command: Option<String>,
    /// Working directory to start in.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Extra environment variables for the new pane.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
}

/// Arguments of `session_resize`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeParams {
    /// The session's name.
    pub session: String,
    /// Width in columns (2 to 1000); the current width when only rows is given.
    #[serde(default)]
    pub cols: Option<u16>,
    /// Height in rows (2 to 1000); the current height when only cols is given.
    #[serde(default)]
    pub rows: Option<u16>,
    /// true: stop pinning and follow the attached clients' size again (give no cols or rows then).
    #[serde(default)]
    pub follow: bool,
}

/// Arguments of `session_list` (none).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

#[tool_router(router = session_router, vis = "pub(crate)")]
impl Terminal {
    /// Makes a session.
    #[tool(
        name = "session_create",
        description = crate::docent::texts::tool::SESSION_CREATE.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn session_create(&self, Parameters(p): Parameters<CreateParams>) -> CallToolResult {
        let name = p.name.clone();
        self.call(crate::tools::ToolName::SessionCreate, name.as_deref(), self.create_body(p)).await
    }

    /// Lists sessions.
    #[tool(
        name = "session_list",
        description = crate::docent::texts::tool::SESSION_LIST.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn session_list(&self, Parameters(_): Parameters<ListParams>) -> CallToolResult {
        self.call(crate::tools::ToolName::SessionList, None, self.list_body()).await
    }

    /// Closes a session.
    #[tool(
        name = "session_close",
        description = crate::docent::texts::tool::SESSION_CLOSE.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn session_close(&self, Parameters(p): Parameters<CloseParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call(crate::tools::ToolName::SessionClose, Some(&name), self.close_body(p)).await
    }

    /// Splits a session's pane into a new session.
    #[tool(
        name = "session_split",
        description = crate::docent::texts::tool::SESSION_SPLIT.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn session_split(&self, Parameters(p): Parameters<SplitParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call(crate::tools::ToolName::SessionSplit, Some(&name), self.split_body(p)).await
    }

    /// Sets or frees a session's size.
    #[tool(
        name = "session_resize",
        description = crate::docent::texts::tool::SESSION_RESIZE.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn session_resize(&self, Parameters(p): Parameters<ResizeParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call(crate::tools::ToolName::SessionResize, Some(&name), self.resize_body(p)).await
    }
}

impl Terminal {
    async fn create_body(&self, p: CreateParams) -> Result<Reply, ToolError> {
        let redact = p.redact.unwrap_or(true);
        let env = p.env.clone().unwrap_or_default();
        let opts = CreateOptions {
            name: p.name,
            command: p.command,
            cols: p.cols,
            rows: p.rows,
            cwd: p.cwd,
            env: p.env.unwrap_or_default(),
            delete_logs_on_close: p.delete_logs_on_close,
            prompt_pattern: p.prompt_pattern,
        };
        let (s, status) = self.sessions().create(opts).await?;
        let mut text = self.ready_text(&s, &status, "");
        let secrets = &self.inner.secrets;
        if !redact {
            crate::tools::replies::secrets::Secrets::turn_off(&s.dir).map_err(|e| {
                ToolError::Failed(format!(
                    "session {} made, but redaction could not be turned off: {e}; close it",
                    s.name
                ))
            })?;
            text.push_str("redaction: off for this session (redact=false): its replies show secrets as they are\n");
        } else if !secrets.on {
            text.push_str("redaction: off for this server (DOCENT_TERMINAL_MCP_REDACT=0)\n");
        }
        secrets.learn_session(&s.dir, s.pane.pane_pid, &env);
        Ok(Reply { text, facts: Facts { created: Some(s.name), ..Facts::default() } })
    }

    /// The reply for a session just made: what it runs, how to watch it, its log.
    fn ready_text(&self, s: &crate::session::Session, status: &dtmcp_core::protocol::Status, whence: &str) -> String {
        let mut out = format!("session {} ready{whence}", s.name);
        if s.meta.integrated {
            let at = if status.shell.at_prompt { "at its prompt" } else { "starting (no prompt yet)" };
            let shell = s.meta.command.first().map_or("bash", String::as_str);
            let _ = write!(out, ": {shell} with shell integration, {at}");
        } else {
            let command = s.meta.command.last().map(String::as_str).unwrap_or("");
            let _ = write!(out, ": {command}");
            // What the pane runs now (the command may have exec'd a shell).
            // (A shell running a command string or a script is no prompt.)
            let job = crate::tools::typing::target::job(s).ok();
            let comm = job.filter(dtmcp_core::procs::Job::shell_for_a_person).map(|j| j.comm).unwrap_or_default();
            if let Some(shell) = Some(comm.as_str()).filter(|c| dtmcp_core::procs::is_shell_name(c)) {
                let _ = write!(
                    out,
                    "\n{shell} here has no shell integration: run goes by its prompt (the usual `$ `, `# `, `% `, `> ` endings, or prompt_pattern), and exit statuses are unknown. {}",
                    match shell {
                        "bash" | "zsh" => format!("shell_integrate session={} adds the integration.", s.name),
                        _ => "For exact statuses start bash or zsh in it and call shell_integrate.".to_string(),
                    }
                );
            }
        }
        let _ = writeln!(out, "\nwatch or join: {}", self.sessions().attach_command(&s.pane.tmux_session));
        let _ = writeln!(out, "log: {}", s.dir.display());
        out
    }

    async fn split_body(&self, p: SplitParams) -> Result<String, ToolError> {
        if p.size.is_some_and(|n| !(2..=1000).contains(&n)) {
            return Err(ToolError::BadInput("size must be between 2 and 1000 cells".into()));
        }
        let env = p.env.clone().unwrap_or_default();
        let opts = CreateOptions {
            command: p.command,
            cwd: p.cwd,
            env: p.env.unwrap_or_default(),
            ..CreateOptions::default()
        };
        let split = crate::session::Split { beside: p.beside, size: p.size };
        let (s, status) = self.sessions().split(&p.session, split, opts).await?;
        self.inner.secrets.learn_session(&s.dir, s.pane.pane_pid, &env);
        let whence = format!(" (split from {}, {})", p.session, if p.beside { "beside it" } else { "below it" });
        Ok(self.ready_text(&s, &status, &whence))
    }

    async fn resize_body(&self, p: ResizeParams) -> Result<String, ToolError> {
        use crate::session::Size;
        let bad = |why: &str| Err(ToolError::BadInput(why.to_string()));
        let size = match (p.follow, p.cols, p.rows) {
            (true, None, None) => Size::Follow,
            (true, _, _) => return bad("give follow=true alone, or cols and rows to pin a size"),
            (false, None, None) => return bad("give cols and/or rows to pin a size, or follow=true"),
            (false, cols, rows) => {
                if [cols, rows].iter().flatten().any(|n| !(2..=1000).contains(n)) {
                    return bad("cols and rows must be between 2 and 1000");
                }
                let s = self.sessions().resolve(&p.session).await?;
                let cur = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
                Size::Pinned {
                    cols: cols.unwrap_or(cur(s.pane.pane_width)),
                    rows: rows.unwrap_or(cur(s.pane.pane_height)),
                }
            }
        };
        let (w, h) = self.sessions().resize(&p.session, size).await?;
        Ok(match size {
            Size::Follow => {
                format!("{} follows the attached clients' size again; now {w}x{h} (columns x rows)", p.session)
            }
            Size::Pinned { .. } => format!(
                "{} is now {w}x{h} (columns x rows), pinned: attaching clients do not resize it; follow=true lets it follow them again",
                p.session
            ),
        })
    }

    async fn close_body(&self, p: CloseParams) -> Result<String, ToolError> {
        let actor = crate::agents::caller::Caller::current().actor;
        match p.window {
            true => self.close_window(&p.session, false, actor.as_deref()).await,
            false => self.close_session(&p.session, false, actor.as_deref()).await,
        }
    }
}

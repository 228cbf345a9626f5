//! `session_create`, `session_list` and `session_close`.

use std::collections::BTreeMap;
use std::fmt::Write;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use super::Terminal;
use crate::session::CreateOptions;

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
}

/// Arguments of tools that take only a session.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionParams {
    /// The session's name.
    pub session: String,
}

/// Arguments of `session_list` (none).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {}

#[tool_router(router = session_router, vis = "pub(super)")]
impl Terminal {
    /// Makes a session.
    #[tool(
        name = "session_create",
        description = crate::docent::texts::tool::SESSION_CREATE.trim_end(),
        meta = super::always_load()
    )]
    pub async fn session_create(&self, Parameters(p): Parameters<CreateParams>) -> CallToolResult {
        let name = p.name.clone();
        self.call("session_create", name.as_deref(), self.create_body(p)).await
    }

    /// Lists sessions.
    #[tool(
        name = "session_list",
        description = crate::docent::texts::tool::SESSION_LIST.trim_end(),
        annotations(read_only_hint = true),
        meta = super::always_load()
    )]
    pub async fn session_list(&self, Parameters(_): Parameters<ListParams>) -> CallToolResult {
        self.call("session_list", None, self.list_body()).await
    }

    /// Closes a session.
    #[tool(
        name = "session_close",
        description = crate::docent::texts::tool::SESSION_CLOSE.trim_end(),
        meta = super::always_load()
    )]
    pub async fn session_close(&self, Parameters(p): Parameters<SessionParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call("session_close", Some(&name), self.close_body(p)).await
    }
}

impl Terminal {
    async fn create_body(&self, p: CreateParams) -> Result<String, String> {
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
        let (s, status) = self.sessions().create(opts).await.map_err(|e| e.to_string())?;
        let mut out = format!("session {} ready", s.name);
        if s.meta.integrated {
            let at = if status.shell.at_prompt { "at its prompt" } else { "starting (no prompt yet)" };
            let shell = s.meta.command.first().map_or("bash", String::as_str);
            let _ = write!(out, ": {shell} with shell integration, {at}");
        } else {
            let command = s.meta.command.last().map(String::as_str).unwrap_or("");
            let _ = write!(out, ": {command}");
            // What the pane runs now (the command may have exec'd a shell).
            let comm = super::program::job(&s).map(|j| j.comm).unwrap_or_default();
            if let Some(shell) = Some(comm.as_str()).filter(|c| super::notes::is_shell_name(c)) {
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
        let _ = writeln!(out, "\nwatch or join: {}", self.sessions().attach_command(&s.name));
        let _ = writeln!(out, "log: {}", s.dir.display());
        Ok(out)
    }

    async fn list_body(&self) -> Result<String, String> {
        let panes = self.sessions().panes().await.map_err(|e| e.to_string())?;
        let closed = self.closed_lines().await;
        if panes.is_empty() {
            return Ok(format!("no sessions are open; session_create makes one\n{closed}"));
        }
        let mut out = String::new();
        for pane in panes {
            let name = &pane.session_name;
            let _ = write!(out, "{name}: {} in {}", pane.pane_current_command, pane.pane_current_path);
            if let Ok(s) = self.sessions().resolve(name).await
                && let Ok(mut logger) = s.logger().await
                && let Ok(status) = logger.status().await
                && let Some(r) = status.last_region
            {
                let exit = r.exit.map_or_else(|| "running".to_string(), |e| format!("exit {e}"));
                let _ = write!(out, " · last: `{}` {exit}", r.command);
            }
            let _ = writeln!(out, "\n  attach: {}", self.sessions().attach_command(name));
        }
        out.push_str(&closed);
        Ok(out)
    }

    async fn close_body(&self, p: SessionParams) -> Result<String, String> {
        let actor = super::caller::Caller::current().actor;
        self.close_session(&p.session, false, actor.as_deref()).await
    }
}

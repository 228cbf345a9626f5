//! `session_logs`: keep a session's logs for good, put them back under the
//! usual rule, mark them to go when the session closes, delete a closed
//! session's logs now, or write a recording of the session or of some of
//! its commands for a person (`record`: the reply names the file, never
//! its content).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use std::fmt::Write;
use std::os::unix::fs::DirBuilderExt;

use crate::retention::tombstone::utc;
use crate::retention::{Action, expires_ms};
use crate::tools::Terminal;
use crate::tools::ToolError;
use dtmcp_core::store::files;

/// What to do with a session's logs.
#[derive(Clone, Copy, Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogsAction {
    /// Keep them for good.
    Keep,
    /// The usual rule: deleted after some days closed and unused.
    Default,
    /// Delete them as soon as the session closes.
    DeleteOnClose,
    /// Delete them now; only for a closed session.
    Delete,
    /// Write an asciicast recording and name its file.
    Record,
}

impl From<LogsAction> for Action {
    fn from(a: LogsAction) -> Action {
        match a {
            LogsAction::Keep => Action::Keep,
            LogsAction::Default => Action::Default,
            LogsAction::DeleteOnClose => Action::DeleteOnClose,
            LogsAction::Delete => Action::Delete,
            // Never asked: `record` changes no rule.
            LogsAction::Record => Action::Default,
        }
    }
}

/// Arguments of `session_logs`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsParams {
    /// The session's name (open or closed).
    pub session: String,
    /// "keep" pins the logs; "default" puts them back under the usual rule; "delete_on_close" deletes them when the session closes; "delete" deletes a closed session's logs now; "record" writes an asciicast recording and answers with its path.
    pub action: LogsAction,
    /// action="record": only this region (a number from `regions`); with to_region, the first of a range. Default: the whole session.
    #[serde(default)]
    pub region: Option<u64>,
    /// action="record": the last region of a range starting at region.
    #[serde(default)]
    pub to_region: Option<u64>,
    /// action="record": an absolute path to write the recording to (default: in the session's log directory).
    #[serde(default)]
    pub save_to: Option<String>,
    /// action="record": save_to may replace an existing file.
    #[serde(default)]
    pub overwrite: Option<bool>,
}

#[tool_router(router = logs_router, vis = "pub(crate)")]
impl Terminal {
    /// Sets how long a session's logs are kept.
    #[tool(
        name = "session_logs",
        description = crate::docent::texts::tool::SESSION_LOGS.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn session_logs(&self, Parameters(p): Parameters<LogsParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call(crate::tools::ToolName::SessionLogs, Some(&name), self.logs_body(p)).await
    }
}

impl Terminal {
    async fn logs_body(&self, p: LogsParams) -> Result<String, ToolError> {
        let recording = [p.region.is_some(), p.to_region.is_some(), p.save_to.is_some(), p.overwrite.is_some()];
        if matches!(p.action, LogsAction::Record) {
            return self.record_body(p).await;
        }
        if recording.contains(&true) {
            return Err(ToolError::BadInput(
                "region, to_region, save_to and overwrite go with action=\"record\" only".into(),
            ));
        }
        // Logs that go away are everyone's loss: not while someone else
        // is in the session.
        if matches!(p.action, LogsAction::DeleteOnClose | LogsAction::Delete)
            && let Ok(presence) = self.presence(&p.session).await
            && let Some(why) = presence.refusal(&p.session, Some(&self.actor()))
        {
            return Err(why.into());
        }
        let dir = self.sessions().set_retention(&p.session, p.action.into()).await?;
        let name = &p.session;
        Ok(match p.action {
            LogsAction::Keep => format!("the logs of {name} are kept for good ({})", dir.display()),
            LogsAction::Default => format!("the logs of {name} follow the usual rule again"),
            LogsAction::DeleteOnClose => format!("the logs of {name} will be deleted when it closes"),
            LogsAction::Delete => format!("the logs of {name} were deleted"),
            LogsAction::Record => String::new(),
        })
    }

    /// `action="record"`: writes the recording and says where.
    async fn record_body(&self, p: LogsParams) -> Result<String, ToolError> {
        use dtmcp_core::cast::{Select, Version};
        let select = match (p.region, p.to_region) {
            (None, None) => Select::All,
            (Some(n), None) => Select::One(n),
            (Some(a), Some(b)) => Select::Range(a, b),
            (None, Some(_)) => {
                return Err(ToolError::BadInput("to_region needs region (the first of the range)".into()));
            }
        };
        let logs = self.sessions().open_logs(&p.session).await?;
        let (dir, name) = (logs.dir.clone(), p.session.clone());
        let redact = self.inner.secrets.applies(&dir);
        let make = move || -> Result<(std::path::PathBuf, usize, u64), ToolError> {
            let cast = crate::recording::cast(&dir, &name, select, redact).map_err(ToolError::BadInput)?;
            let body = crate::recording::text(&cast, Version::V3, dtmcp_core::cast::IDLE_MAX_MS);
            let length = dtmcp_core::cast::played_times(&cast, dtmcp_core::cast::IDLE_MAX_MS).last().copied();
            let path = match &p.save_to {
                Some(path) => {
                    let (path, mut file) =
                        crate::tools::replies::shape::open_save_to(path, p.overwrite.unwrap_or(false))
                            .map_err(ToolError::BadInput)?;
                    std::io::Write::write_all(&mut file, &body)
                        .map_err(|e| ToolError::Failed(format!("writing {}: {e}", path.display())))?;
                    path
                }
                None => {
                    let place = dir.join("recordings");
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(&place)
                        .map_err(|e| ToolError::Failed(format!("making {}: {e}", place.display())))?;
                    let file = match select {
                        Select::All => "session.cast".to_string(),
                        Select::One(n) => format!("region-{n}.cast"),
                        Select::Range(a, b) => format!("regions-{a}-{b}.cast"),
                    };
                    let path = place.join(file);
                    crate::recording::save(&path, &body)
                        .map_err(|e| ToolError::Failed(format!("writing {}: {e}", path.display())))?;
                    path
                }
            };
            Ok((path, cast.events.len(), length.unwrap_or(0)))
        };
        let (path, events, ms) = tokio::task::spawn_blocking(make)
            .await
            .map_err(|e| ToolError::Failed(format!("recording failed: {e}")))??;
        let what = match select {
            Select::All => format!("the whole of {}", p.session),
            Select::One(n) => format!("region {n} of {}", p.session),
            Select::Range(a, b) => format!("regions {a} to {b} of {}", p.session),
        };
        let play = match select {
            Select::One(n) => format!("docent-terminal-mcp play {} --region {n}", p.session),
            _ => format!("docent-terminal-mcp play {}", p.session),
        };
        Ok(format!(
            "wrote a recording of {what} ({events} events, {}.{} s with pauses cut to 2 s) to {}\n\
             a person plays it with `asciinema play {}` or `{play}`; it holds the output as the terminal showed it, secrets too",
            ms / 1000,
            ms % 1000 / 100,
            path.display(),
            path.display()
        ))
    }
}

/// How many closed sessions `session_list` names.
const MAX_CLOSED_LINES: usize = 10;

impl Terminal {
    /// Lines for `session_list` saying until when each closed session's logs
    /// are kept, newest use first; empty when there are none. `live`: the
    /// sessions open now.
    pub(crate) fn closed_lines(&self, live: &std::collections::HashSet<String>) -> String {
        let sweeper = self.sessions().sweeper();
        let mut closed = sweeper.gather_closed(live);
        if closed.is_empty() {
            return String::new();
        }
        closed.sort_by_key(|f| std::cmp::Reverse(f.last_used_ms));
        let mut out = String::from("closed sessions, logs on disk:\n");
        for f in closed.iter().take(MAX_CLOSED_LINES) {
            let until = match expires_ms(sweeper.policy, f) {
                None => "kept for good".to_string(),
                Some(ms) => format!("kept until {}", utc(ms)),
            };
            let ended = std::fs::read_to_string(self.sessions().cfg.session_dir(&f.name).join(files::ENDED))
                .map(|why| format!(", {}", why.trim()))
                .unwrap_or_default();
            let _ = writeln!(out, "  {}{ended}, logs {until}", f.name);
        }
        if closed.len() > MAX_CLOSED_LINES {
            let _ = writeln!(out, "  … and {} more", closed.len() - MAX_CLOSED_LINES);
        }
        out
    }
}

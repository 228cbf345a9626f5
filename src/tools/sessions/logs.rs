//! `session_logs`: keep a session's logs for good, put them back under the
//! usual rule, mark them to go when the session closes, or delete a closed
//! session's logs now.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use std::fmt::Write;

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
}

impl From<LogsAction> for Action {
    fn from(a: LogsAction) -> Action {
        match a {
            LogsAction::Keep => Action::Keep,
            LogsAction::Default => Action::Default,
            LogsAction::DeleteOnClose => Action::DeleteOnClose,
            LogsAction::Delete => Action::Delete,
        }
    }
}

/// Arguments of `session_logs`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsParams {
    /// The session's name (open or closed).
    pub session: String,
    /// "keep" pins the logs; "default" puts them back under the usual rule; "delete_on_close" deletes them when the session closes; "delete" deletes a closed session's logs now.
    pub action: LogsAction,
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
        })
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

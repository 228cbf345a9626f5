//! Telling a client, unasked, when a command ends that was still running
//! at its agent's last reply: an MCP log message (`notifications/message`,
//! level `info`) on the connection, which streamable HTTP carries on the
//! client's event stream (`GET /mcp`) and stdio on stdout.
//!
//! Each command is watched once per connection, through the session's
//! logger, for at most [`WATCH_FOR`]; a watch ends quietly with its
//! connection or its session. The same news also opens the agent's next
//! reply in that session ("finished since your last call"), for clients
//! that do not show log messages to the model.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rmcp::{Peer, RoleServer};

use super::Terminal;
use crate::protocol::{WaitReason, WaitSpec};
use crate::session::LoggerClient;
use crate::store::files;
use crate::types::RegionId;

/// How long one command is watched at most.
const WATCH_FOR: Duration = Duration::from_secs(60 * 60);
/// One wait on the logger, at most; between waits the watch checks that
/// the client is still there.
const ONE_WAIT_MS: u64 = 30_000;
/// The rank of `info` among MCP log levels (debug 0 … emergency 7).
pub const INFO: u8 = 1;

impl Terminal {
    /// Watches regions `running` of session `name` for this connection's
    /// client.
    pub(super) fn watch_running(&self, name: &str, running: &[u64]) {
        let Some(peer) = self.conn.peer() else { return };
        if !self.conn.wants(INFO) {
            return;
        }
        let dir = self.sessions().cfg.session_dir(name);
        for &id in running {
            if self.conn.watch(name, id) {
                tokio::spawn(watch(dir.clone(), name.to_string(), RegionId(id), peer.clone()));
            }
        }
    }
}

/// Waits for region `id` of the session in `dir` to end, then tells `peer`.
async fn watch(dir: PathBuf, name: String, id: RegionId, peer: Peer<RoleServer>) {
    let until = Instant::now() + WATCH_FOR;
    let Ok(mut logger) = LoggerClient::connect(&dir.join(files::SOCKET)).await else { return };
    while Instant::now() < until && !peer.is_transport_closed() {
        let Ok(status) = logger.status().await else { return };
        let mut after = status.mark;
        after.regions = id.0.saturating_sub(1);
        let spec = WaitSpec { after, command_done: true, timeout_ms: ONE_WAIT_MS, ..WaitSpec::default() };
        let Ok((reason, _)) = logger.wait(spec).await else { return };
        match reason {
            WaitReason::Eof => return,
            WaitReason::Timeout => continue,
            _ => {}
        }
        let Ok(Some(region)) = logger.region(id).await else { return };
        if region.end.is_none() {
            continue;
        }
        let status = region.exit.map_or_else(|| "exit status unknown".to_string(), |e| format!("exit {e}"));
        let command = region.command.lines().next().unwrap_or_default();
        let text = super::clean(&format!(
            "{name}: `{command}` (region {id}) finished · {status} · read session={name} region={id} shows its output"
        ));
        // Log messages are what MCP has for news the server starts
        // (deprecated in the newest protocol revision, current in those
        // clients speak today).
        #[allow(deprecated)]
        let message = rmcp::model::LoggingMessageNotificationParam::new(
            rmcp::model::LoggingLevel::Info,
            serde_json::Value::String(text),
        )
        .with_logger("docent-terminal-mcp");
        #[allow(deprecated)]
        let _ = peer.notify_logging_message(message).await;
        return;
    }
}

/// The rank of an MCP log level, debug 0 to emergency 7.
#[allow(deprecated)]
pub fn rank(level: rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => INFO,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

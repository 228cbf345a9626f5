//! Telling a client, unasked, when a command ends that was still running
//! at its agent's last reply: an MCP log message (`notifications/message`,
//! level `info`) on the connection, which streamable HTTP carries on the
//! client's event stream (`GET /mcp`) and stdio on stdout.
//!
//! Each command is watched once per connection, through the session's
//! logger, for at most [`WATCH_FOR`]; a watch ends quietly with its
//! connection or its session. Its end is told once per agent: the agent's
//! state in the session records it, and a connection initialized later
//! (after a server restart, say) watches what is left. The same news also opens the agent's next
//! reply in that session ("finished since your last call"), for clients
//! that do not show log messages to the model.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::{Peer, RoleServer};

use crate::session::Loggers;
use crate::tools::Terminal;
use dtmcp_core::protocol::{WaitReason, WaitSpec};
use dtmcp_core::region::Region;
use dtmcp_core::store::files;
use dtmcp_core::types::RegionId;

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
    pub(crate) fn watch_running(&self, name: &str, running: &[u64]) {
        if self.conn.peer().is_none() || !self.conn.wants(INFO) {
            return;
        }
        for &id in running {
            if self.conn.watch(name, id) {
                tokio::spawn(self.clone().watch(name.to_string(), RegionId(id)));
            }
        }
    }

    /// Watches again, for a connection just initialized, the commands its
    /// agent left running in any session and has not been told the end
    /// of: a server started again (or a client come back under the same
    /// actor) takes up the watches of the one before, from the state each
    /// session's logger keeps.
    pub(crate) fn watch_again(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            let Ok(entries) = std::fs::read_dir(this.sessions().cfg.sessions_dir()) else { return };
            let live = entries.filter_map(Result::ok).filter(|e| e.path().join(files::SOCKET).exists());
            let names: Vec<String> = live.filter_map(|e| e.file_name().into_string().ok()).collect();
            for name in names {
                let Some(state) = this.agent_state(&name).await else { continue };
                let left: Vec<u64> = state.running.iter().copied().filter(|id| !state.announced.contains(id)).collect();
                this.watch_running(&name, &left);
            }
        });
    }

    /// Waits for region `id` of session `name` to end, then tells this
    /// connection's client, unless its agent was told already.
    async fn watch(self, name: String, id: RegionId) {
        let Some(peer) = self.conn.peer() else { return };
        let dir = self.sessions().cfg.session_dir(&name);
        let Some(region) = ended(&self.sessions().loggers, &dir, id, &peer).await else { return };
        // Once per agent: another connection of it, or the server before a
        // restart, may have told it (the mark is made before the message
        // goes, so two watches never both send).
        if self.update_agent(&name, |s| s.announced.insert(id.0)).await == Some(false) {
            return;
        }
        let status = region.exit.map_or_else(|| "exit status unknown".to_string(), dtmcp_core::exit::words);
        let command = region.command.lines().next().unwrap_or_default();
        let text = crate::tools::clean(&format!(
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
    }
}

/// Region `id` of the session in `dir` once it has ended; `None` when the
/// session ends first, the client goes away, or [`WATCH_FOR`] passes.
async fn ended(loggers: &Loggers, dir: &Path, id: RegionId, peer: &Peer<RoleServer>) -> Option<Region> {
    let until = Instant::now() + WATCH_FOR;
    let mut logger = loggers.connect(&dir.join(files::SOCKET)).await.ok()?;
    let mut status = logger.status().await.ok()?;
    while Instant::now() < until && !peer.is_transport_closed() {
        let mut after = status.mark;
        after.regions = id.0.saturating_sub(1);
        let spec = WaitSpec { after, command_done: true, timeout_ms: ONE_WAIT_MS, ..WaitSpec::default() };
        // The answer holds region `id` (the first after the mark).
        let (reason, now, region) = logger.wait_region(spec).await.ok()?;
        status = now;
        match reason {
            WaitReason::Eof => return None,
            WaitReason::Timeout => continue,
            _ => {}
        }
        if let Some(region) = region.filter(|r| r.end.is_some()) {
            return Some(region);
        }
    }
    None
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

//! The start contract between the router and the pane logger: how tmux
//! starts a logger for a pane, and the records one side leaves in a session
//! directory for the other (a gap the router saw, logs a logger found gone).
//!
//! Both processes read these; neither owns them, so they live in the core.
//!
//! tmux expands `#{...}`, `#(...)` and `%` sequences in a `pipe-pane`
//! command, so the command is fixed text: the logger's path and the session
//! directory travel as pane options (`@dtmcp_logger`, `@dtmcp_dir`) that tmux
//! inserts shell-quoted (`#{q:...}`) and never expands again.

use serde::{Deserialize, Serialize};

/// The fixed `pipe-pane` command tmux runs for every pane.
pub const PIPE_COMMAND: &str = "exec #{q:@dtmcp_logger} #{q:@dtmcp_dir}";
/// The pane option holding the logger binary's path.
pub const OPT_LOGGER: &str = "@dtmcp_logger";
/// The pane option holding the session directory.
pub const OPT_DIR: &str = "@dtmcp_dir";

/// The file a repair leaves for the new logger.
pub const GAP_PENDING: &str = "gap.pending";
/// Where the gaps of a session are listed, one JSON line each.
pub const GAPS: &str = "gaps.jsonl";

/// A stretch of output that was not logged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// When logging stopped, as far as known (the last write to raw.log), ms
    /// since the epoch.
    pub from_ms: u64,
    /// When logging resumed.
    pub to_ms: u64,
    /// The size of raw.log at the gap: the bytes before it were logged.
    pub raw_offset: u64,
    /// The pane's screen when logging resumed.
    pub screen: Vec<String>,
    /// Bytes of output known to be lost (counted by a logger that could
    /// not write; 0 when a dead logger could not count them).
    #[serde(default)]
    pub dropped: u64,
    /// Why the output was not logged; empty for a dead logger.
    #[serde(default)]
    pub reason: String,
}

/// What a logger that found its logs deleted leaves in [`files::GONE`].
#[derive(Debug, Serialize, Deserialize)]
pub struct Gone {
    /// What happened, for the reply.
    pub reason: String,
    /// When the logger noticed, ms since the epoch.
    pub at_ms: u64,
}

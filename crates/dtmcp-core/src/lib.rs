//! The pure cores of docent-terminal-mcp and the formats its two processes
//! share.
//!
//! Both the pane logger (`dtmcp-logger`) and the router (the root package)
//! build on this crate; it names neither of them. Nothing here starts a
//! process, opens a socket or talks to tmux: it turns bytes into cooked
//! lines and regions ([`cook`], [`region`], [`answers`], [`marker`], fed as
//! one by [`pipeline`]), keeps
//! and reads the on-disk record ([`store`], [`search`], [`agent_state`]),
//! turns it into recordings ([`cast`]),
//! defines the logger's wire ([`protocol`]) and start contract
//! ([`contract`]), reads `/proc` ([`procs`]), and judges what agents may
//! type ([`policy`]).
//!
//! Its dependencies are chosen to keep that true: no async runtime, no MCP,
//! no HTTP (a test in the root package checks the logger's tree).

pub mod agent_state;
pub mod answers;
pub mod cast;
pub mod contract;
pub mod cook;
pub mod exit;
pub mod marker;
pub mod pipeline;
pub mod policy;
pub mod procs;
pub mod protocol;
pub mod redact;
pub mod region;
pub mod region_index;
pub mod search;
pub mod store;
pub mod summary;
pub mod types;

/// Milliseconds since the epoch; 0 on a clock set before it.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

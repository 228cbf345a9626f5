//! Whether replies lead a clipped output with its summary lines. The
//! classifier itself is pure and lives in the core
//! ([`dtmcp_core::summary`]); this is the user's switch.

pub use dtmcp_core::summary::{Summarizer, Summary, feed_text};

/// The environment variable that turns summaries off when `0`.
pub const ENV_SUMMARY: &str = "DOCENT_TERMINAL_MCP_SUMMARY";

/// Whether summaries are on (they are unless the variable says `0`).
pub fn enabled() -> bool {
    std::env::var(ENV_SUMMARY).map_or(true, |v| v.trim() != "0")
}

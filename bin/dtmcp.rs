//! `dtmcp`: the short name of `docent-terminal-mcp`, the same program.

include!("docent-terminal-mcp.rs");

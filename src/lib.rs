//! docent-terminal-mcp: terminal sessions for AI models, in tmux panes that
//! people can watch and join, with every byte logged, cooked into lines,
//! split into per-command regions and readable on demand.
//!
//! The crate is one library behind three binaries: the MCP server and CLI
//! (`docent-terminal-mcp`, alias `dtmcp`) and the per-pane logger
//! (`dtmcp-pane-logger`). See DESIGN.md for the architecture: pure cores
//! (`cook`, `region`, `store`) inside thin shells that do the I/O.

pub mod agent_state;
pub mod answers;
pub mod bridge;
pub mod calls;
pub mod cli;
pub mod config;
pub mod cook;
pub mod demo;
pub mod docent;
pub mod hosts;
pub mod keys;
pub mod lock;
pub mod logger;
pub mod marker;
pub mod mcp_client;
pub mod procs;
pub mod protocol;
pub mod region;
pub mod remote;
pub mod retention;
pub mod search;
pub mod server;
pub mod session;
pub mod shell;
pub mod store;
pub mod tmux;
pub mod tools;
pub mod types;

//! docent-terminal-mcp: terminal sessions for AI models, in tmux panes that
//! people can watch and join, with every byte logged, cooked into lines,
//! split into per-command regions and readable on demand.
//!
//! This crate is the router: the MCP server and command line
//! (`docent-terminal-mcp`, alias `dtmcp`) that agents and people talk to. It
//! drives tmux, starts a pane logger per pane (`dtmcp-pane-logger`, the
//! `dtmcp-logger` crate) and asks it for what the panes printed. The pure
//! cores both processes share (cooking, regions, the on-disk store, the
//! logger's wire) are the `dtmcp-core` crate. ARCHITECTURE.md draws the
//! three processes and says where to change what.

pub mod agents;
pub mod allocator;
pub mod bridge;
pub mod calls;
pub mod cli;
pub mod config;
pub mod demo;
pub mod docent;
pub mod hosts;
pub mod keys;
pub mod lock;
pub mod lru;
pub mod mcp_client;
pub mod metrics;
pub mod people;
pub mod policy;
pub mod quiet_socket;
pub mod recording;
pub mod remote;
pub mod retention;
pub mod server;
pub mod session;
pub mod shell;
pub mod stamped;
pub mod stdio;
pub mod tmux;
pub mod tools;
pub mod web;

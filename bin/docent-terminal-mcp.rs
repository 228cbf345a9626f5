//! The MCP server and command line (`docent-terminal-mcp`, short `dtmcp`).

fn main() -> std::process::ExitCode {
    dtmcp::cli::entry()
}

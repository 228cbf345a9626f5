//! The MCP server and command line; see `dtmcp::cli`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match dtmcp::cli::main(dtmcp::cli::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docent-terminal-mcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

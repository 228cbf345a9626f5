//! The command line of `docent-terminal-mcp` (alias `dtmcp`).

use std::sync::Arc;

use clap::{Parser, Subcommand};
use rmcp::ServiceExt;

use crate::config::Config;
use crate::session::Sessions;
use crate::tmux::Tmux;
use crate::tools::Terminal;

/// Terminal sessions for AI models, in tmux panes people can watch and join.
#[derive(Debug, Parser)]
#[command(name = "docent-terminal-mcp", version, about)]
pub struct Cli {
    /// What to do; with none, serve MCP over stdio.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP over stdio (the default).
    Stdio,
    /// Run a narrated demo: a scripted MCP client drives a real session on a
    /// private tmux socket with a temporary state home.
    Demo {
        /// Pause this many milliseconds between steps, for a person reading along.
        #[arg(long, default_value_t = 0)]
        pause_ms: u64,
    },
}

/// The whole program: parses the arguments, runs, and turns an error chain
/// into one message and a failing exit code.
pub fn entry() -> std::process::ExitCode {
    match main(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docent-terminal-mcp: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs the command line.
pub fn main(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    match cli.command {
        None | Some(Command::Stdio) => runtime.block_on(serve_stdio()),
        Some(Command::Demo { pause_ms }) => runtime.block_on(crate::demo::run(pause_ms)),
    }
}

/// Serves one MCP client over stdin/stdout until it disconnects.
pub async fn serve_stdio() -> anyhow::Result<()> {
    let cfg = Config::from_env()?;
    let _lock = crate::lock::acquire(&cfg.home)?;
    let tmux = Arc::new(Tmux::new(&cfg.socket));
    let sessions = Sessions::new(cfg, tmux)?;
    let terminal = Terminal::new(sessions);
    terminal.start_watchdog();
    let service = terminal.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

//! The pane logger: one process per pane, started by tmux as the pane's
//! `pipe-pane -O` command.
//!
//! It reads the pane's output on stdin, appends every byte to `raw.log`,
//! cooks it into `session.txt`, tracks regions from the shell's markers, and
//! answers the router on `logger.sock`. It belongs to the tmux server, not to
//! the router, so a router restart loses nothing.
//!
//! tmux expands `#{...}`, `#(...)` and `%` sequences in a `pipe-pane`
//! command, so the command is fixed text: the logger's path and the session
//! directory travel as pane options (`@dtmcp_logger`, `@dtmcp_dir`) that tmux
//! inserts shell-quoted (`#{q:...}`) and never expands again.

mod checkpoint;
mod gap;
mod input;
mod pump;
mod server;
mod state;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::marker::Secret;
use crate::store::{self, files};

pub use state::Shared;

/// The fixed `pipe-pane` command tmux runs for every pane.
pub const PIPE_COMMAND: &str = "exec #{q:@dtmcp_logger} #{q:@dtmcp_dir}";
/// The pane option holding the logger binary's path.
pub const OPT_LOGGER: &str = "@dtmcp_logger";
/// The pane option holding the session directory.
pub const OPT_DIR: &str = "@dtmcp_dir";

/// Why the logger could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum LoggerError {
    /// It was started with the wrong arguments.
    #[error("usage: dtmcp-pane-logger SESSION_DIR (it is started by tmux pipe-pane)")]
    Usage,
    /// A file could not be opened or written.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The socket could not be set up.
    #[error("logger socket {path}: {source}")]
    Socket {
        /// Its path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs the logger with the arguments tmux gave it: the session directory.
pub fn run(args: &[String]) -> Result<(), LoggerError> {
    let [dir] = args else { return Err(LoggerError::Usage) };
    run_in(Path::new(dir))
}

/// Runs the logger for session directory `dir`, reading the pane's output
/// from stdin.
pub fn run_in(dir: &Path) -> Result<(), LoggerError> {
    crate::cli::one_malloc_arena();
    // A file grown past the size limit must fail the write, which the pump
    // survives (see `pump`), not kill the logger.
    // SAFETY: ignoring a signal installs no handler code; nothing else in
    // this process handles SIGXFSZ.
    let _ =
        unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGXFSZ, nix::sys::signal::SigHandler::SigIgn) };
    pump::widen_stdin_pipe();
    let secret = std::fs::read_to_string(dir.join(files::SECRET)).ok().and_then(|s| Secret::from_nonce(&s));
    let shared = Arc::new(Shared::open(dir, secret)?);
    // Carry on from the files before answering anyone: a router asking
    // too early would see the state before the replay.
    let pump = pump::Pump::open(&shared)?;
    let socket_path = dir.join(files::SOCKET);
    let listener = server::bind(&socket_path)?;
    let server = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("logger-socket".into())
            .spawn(move || server::serve(listener, shared))
            .map_err(|source| LoggerError::Socket { path: socket_path.clone(), source })?
    };
    let result = pump.run_polled(std::io::stdin().lock(), &shared);
    shared.finish();
    // The socket goes with the logger: a reader then uses the files.
    let _ = std::fs::remove_file(&socket_path);
    drop(server);
    result
}

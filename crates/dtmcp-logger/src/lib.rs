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

mod agents;
mod checkpoint;
mod gap;
mod input;
mod keys;
mod main_loop;
mod pump;
mod server;
mod state;
mod timing;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dtmcp_core::contract::Gone;
use dtmcp_core::marker::Secret;
use dtmcp_core::store::{self, files};

pub use state::Shared;

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
    // A file grown past the size limit must fail the write, which the pump
    // survives (see `pump`), not kill the logger.
    // SAFETY: ignoring a signal installs no handler code; nothing else in
    // this process handles SIGXFSZ.
    let _ =
        unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGXFSZ, nix::sys::signal::SigHandler::SigIgn) };
    fixed_mmap_threshold();
    pump::widen_stdin_pipe();
    // The logger is a child of the tmux server: if it is no longer, tmux
    // died rather than the pane's program ending.
    let tmux = nix::unistd::getppid();
    let secret_text = std::fs::read_to_string(dir.join(files::SECRET)).ok();
    let secret = secret_text.as_deref().and_then(Secret::from_nonce);
    // Kept to put back should the directory be deleted under us.
    let meta = std::fs::read(dir.join(files::META)).ok();
    let _ = store::write_atomic(&dir.join(files::PID), std::process::id().to_string().as_bytes());
    let shared = Arc::new(Shared::open(dir, secret)?);
    // Carry on from the files before answering anyone: a router asking
    // too early would see the state before the replay.
    let pump = pump::Pump::open(&shared)?;
    let socket_path = dir.join(files::SOCKET);
    let listener = server::bind(&socket_path)?;
    // Which file is ours: by the time this logger ends, the path may name
    // another logger's socket (the session's name taken again, its old
    // directory archived under us).
    let ours = std::fs::symlink_metadata(&socket_path).ok().map(|m| (m.dev(), m.ino()));
    let mut server = server::Server::new(listener, Arc::clone(&shared), true);
    let mut pump = pump;
    let result = main_loop::run(&mut pump, &mut server, std::io::stdin().lock(), &shared);
    shared.finish();
    shared.agents.flush();
    // The waits held learn that the output ended before the socket goes,
    // and a client told so may still read what was printed last.
    server.answer_all(std::time::Duration::from_secs(2), std::time::Duration::from_millis(300));
    // The socket goes with the logger: a reader then uses the files.
    if ours.is_some() && std::fs::symlink_metadata(&socket_path).ok().map(|m| (m.dev(), m.ino())) == ours {
        let _ = std::fs::remove_file(&socket_path);
    }
    drop(server);
    if pump.deleted.is_none() && tmux_died(tmux) {
        let why = "ended because its tmux server died (not by its program exiting)";
        let _ = store::write_atomic(&dir.join(files::ENDED), why.as_bytes());
    }
    if let Some(raw_len) = pump.deleted {
        drop(pump);
        leave_word_of_deletion(dir, raw_len, secret_text.as_deref(), meta.as_deref());
    }
    result
}

/// Keeps glibc from moving its mmap threshold. By default, freeing a big
/// mmapped block (the replay's read buffer) raises the threshold and the
/// heap's trim threshold with it, so the next big buffers come from the
/// heap and what is freed there stays resident: an idle logger then held
/// 250 KiB more than it needs, 20 MB over a hundred panes. With the
/// threshold set, blocks of 128 KiB and more are always mapped on their
/// own and given back when freed.
fn fixed_mmap_threshold() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a parameter of the allocator, which glibc
    // guards with its own lock; nothing is allocated or freed by the call.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// Whether the tmux server `tmux` (this logger's parent when it started)
/// died rather than closed the pane. A killed server closes its pipes
/// before its children are handed to another parent, so the logger may
/// see its input end while its parent is still `tmux`: the kernel has
/// then already marked it exiting (`PF_EXITING` in `/proc/PID/stat`).
fn tmux_died(tmux: nix::unistd::Pid) -> bool {
    if nix::unistd::getppid() != tmux {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{tmux}/stat")).map_or(true, |stat| exiting(&stat))
}

/// Whether a `/proc/PID/stat` line shows a process that is exiting (the
/// `PF_EXITING` bit of its flags, the ninth field) or a zombie.
fn exiting(stat: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Some((_, rest)) = stat.rsplit_once(") ") else { return false };
    let mut fields = rest.split_whitespace();
    let state = fields.next().unwrap_or("");
    let flags = fields.nth(5).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    matches!(state, "Z" | "X") || flags & PF_EXITING != 0
}

/// After `raw.log` was deleted: puts back what the next logger and the
/// router need (the directory, the secret the session's shells prove
/// their markers with, `meta.json`), and leaves [`files::GONE`] saying
/// what happened, for the router to report. The logger then exits with
/// every descriptor closed.
fn leave_word_of_deletion(dir: &Path, raw_len: u64, secret: Option<&str>, meta: Option<&[u8]>) {
    use std::os::unix::fs::DirBuilderExt;
    let whole = !dir.exists();
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    if let Some(s) = secret.filter(|_| !dir.join(files::SECRET).exists()) {
        let _ = store::write_atomic(&dir.join(files::SECRET), s.as_bytes());
    }
    if let Some(m) = meta.filter(|_| !dir.join(files::META).exists()) {
        let _ = store::write_atomic(&dir.join(files::META), m);
    }
    let what = if whole { "the session's log directory was deleted" } else { "raw.log was deleted" };
    let gone = Gone {
        reason: format!("{what} while the session ran ({raw_len} bytes logged before it are gone)"),
        at_ms: dtmcp_core::now_ms(),
    };
    let _ = store::write_atomic(&dir.join(files::GONE), &serde_json::to_vec(&gone).unwrap_or_default());
    eprintln!(
        "dtmcp-pane-logger: {} in {}; exiting so that nothing is written to unlinked space",
        gone.reason,
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exiting_parent_is_told_from_its_stat_line() {
        // Shaped like a tmux server's: running, then killed mid-exit.
        let alive = "812 (tmux: server) S 1 812 812 0 -1 4194368 1200 0 0 0 3 1 0 0 20 0";
        let dying = "812 (tmux: server) R 1 812 812 0 -1 4194372 1200 0 0 0 3 1 0 0 20 0";
        let zombie = "812 (tmux: server) Z 1 812 812 0 -1 4227140 1200 0 0 0 3 1 0 0 20 0";
        assert!(!exiting(alive));
        assert!(exiting(dying));
        assert!(exiting(zombie));
        assert!(!exiting("garbage"));
    }
}

//! Cleaning up after a bench that ran real servers.

use std::time::{Duration, Instant};

/// Removes the bench's directory. A logger or shell still ending after
/// its tmux server went writes its last files (a checkpoint, the history)
/// there, and a removal that meets a file made under its feet fails and
/// leaves megabytes behind; it is tried again until it goes through, for
/// five seconds at most.
pub fn remove_when_let_go(tmp: tempfile::TempDir) {
    let path = tmp.path().to_path_buf();
    let mut removed = tmp.close();
    let started = Instant::now();
    while removed.is_err() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        removed = match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    if let Err(e) = removed {
        eprintln!("could not remove {}: {e}", path.display());
    }
}

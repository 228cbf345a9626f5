//! One server per state home: an exclusive `flock` on `server.lock`, which
//! the kernel drops when the holder dies, so a killed server never blocks
//! the next start. The file names the holder (host and pid) for the message
//! a second server prints.
//!
//! The holder writes its name just after it takes the lock, so a server
//! started at the same instant may find the lock taken and the file still
//! empty, or still naming a holder that died. [`take`] therefore tries
//! again for a moment, until it gets the lock or finds a whole name
//! (`pid N on host H`, ended by a line break) of a process that lives; a
//! holder that died can also leave its lock held for a moment by a child
//! it was starting. The socket's lock uses the same pair.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

/// How long a refused server tries again, waiting for the lock or the
/// holder's name.
const HOLDER_WAIT: Duration = Duration::from_secs(1);
/// How often it looks meanwhile.
const HOLDER_POLL: Duration = Duration::from_millis(5);

/// Writes this process's name into the lock `file` it holds, in one
/// write: `pid N on host H` and a line break that says it is whole.
pub(crate) fn write_holder(file: &File) -> std::io::Result<()> {
    let me = format!("pid {} on host {}\n", std::process::id(), crate::config::hostname());
    file.set_len(0)?;
    file.write_all_at(me.as_bytes(), 0)
}

/// Takes the exclusive lock of `file`, or says who holds it, as it wrote
/// itself down. While the file is empty, torn, or names a process of this
/// host that no longer runs, the lock is tried again for up to
/// [`HOLDER_WAIT`]: a new holder may have the lock but not have written
/// its name yet, and a holder that died may leave its lock behind for a
/// moment (a child it was starting holds a copy of the descriptor until it
/// runs its program; the descriptor closes on exec).
pub(crate) fn take(file: File) -> Result<Flock<File>, String> {
    let deadline = Instant::now() + HOLDER_WAIT;
    let mut file = file;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => return Ok(f),
            Err((f, _)) => {
                let text = read_all(&f);
                if holder_is_current(&text) || Instant::now() >= deadline {
                    let name = text.trim();
                    return Err(if name.is_empty() { "unknown holder".to_string() } else { name.to_string() });
                }
                std::thread::sleep(HOLDER_POLL);
                file = f;
            }
        }
    }
}

fn read_all(file: &File) -> String {
    let mut buf = vec![0u8; 512];
    let n = file.read_at(&mut buf, 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Whether `text` is a whole holder's name of a process that may be alive
/// (one of this host that runs, or one of another host).
fn holder_is_current(text: &str) -> bool {
    let Some(line) = text.strip_suffix('\n') else { return false };
    let Some((pid, host)) = line.strip_prefix("pid ").and_then(|l| l.split_once(" on host ")) else { return false };
    let Ok(pid) = pid.parse::<i32>() else { return false };
    if host != crate::config::hostname() {
        return true;
    }
    // Signal 0 checks that the process exists; EPERM means it does.
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None);
    matches!(alive, Ok(()) | Err(nix::errno::Errno::EPERM))
}

/// The held lock; dropping it releases the state home.
pub struct ServerLock {
    _file: Flock<File>,
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another server holds it.
    #[error(
        "another docent-terminal-mcp server ({holder}) already uses {home}; \
         connect to it instead (docent-terminal-mcp connect), stop it, or set DOCENT_TERMINAL_MCP_HOME to another directory"
    )]
    Held {
        /// Who holds it, as it wrote itself down.
        holder: String,
        /// The state home.
        home: String,
    },
    /// The lock file could not be used.
    #[error("cannot use {path}: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Takes the lock of state home `home`.
pub fn acquire(home: &Path) -> Result<ServerLock, LockError> {
    let path = home.join("server.lock");
    let err = |source| LockError::Io { path: path.display().to_string(), source };
    dtmcp_core::store::private_dir_all(home).map_err(err)?;
    let file = std::os::unix::fs::OpenOptionsExt::mode(
        std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true),
        0o600,
    )
    .open(&path)
    .map_err(err)?;
    let file = take(file).map_err(|holder| LockError::Held { holder, home: home.display().to_string() })?;
    write_holder(&file).map_err(err)?;
    Ok(ServerLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_name() {
        let home = tempfile::tempdir().expect("tempdir");
        let first = acquire(home.path()).expect("first");
        let err = acquire(home.path()).err().expect("second must fail").to_string();
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        drop(first);
        acquire(home.path()).expect("free again");
    }

    /// The lock of `path`, taken here, with the file naming a process
    /// that no longer runs.
    fn held_naming_the_dead(path: &Path) -> Flock<File> {
        std::fs::write(path, format!("pid {} on host {}\n", i32::MAX, crate::config::hostname())).expect("dead");
        let file = std::fs::OpenOptions::new().read(true).write(true).open(path).expect("open");
        Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| e).expect("lock")
    }

    #[test]
    fn a_holder_that_has_not_written_yet_is_waited_for() {
        let home = tempfile::tempdir().expect("tempdir");
        let path = home.path().join("server.lock");
        // A holder that died left its name; the next one has the lock but
        // writes its own name only a moment later.
        let held = held_naming_the_dead(&path);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            write_holder(&held).expect("write");
            held
        });
        let err = acquire(home.path()).err().expect("held").to_string();
        assert!(err.contains(&format!("pid {} on host {}", std::process::id(), crate::config::hostname())), "{err}");
        drop(writer.join().expect("writer"));
        // A name that never comes: said as unknown after the wait.
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open");
        let held = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| e).expect("lock");
        held.set_len(0).expect("empty");
        let started = Instant::now();
        let err = acquire(home.path()).err().expect("held").to_string();
        assert!(err.contains("unknown holder") && started.elapsed() >= HOLDER_WAIT, "{err}");
    }

    #[test]
    fn a_dead_holders_lock_let_go_a_moment_later_is_taken() {
        let home = tempfile::tempdir().expect("tempdir");
        let path = home.path().join("server.lock");
        // The holder died and is named; a copy of its descriptor (a child
        // it was starting) keeps the lock for another 100 ms.
        let held = held_naming_the_dead(&path);
        let inheritor = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let lock = acquire(home.path()).expect("taken once let go");
        inheritor.join().expect("inheritor");
        let name = std::fs::read_to_string(&path).expect("read");
        assert_eq!(name, format!("pid {} on host {}\n", std::process::id(), crate::config::hostname()));
        drop(lock);
    }
}

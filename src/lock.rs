//! One server per state home: an exclusive `flock` on `server.lock`, which
//! the kernel drops when the holder dies, so a killed server never blocks
//! the next start. The file names the holder (host and pid) for the message
//! a second server prints.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

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
    let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(f) => f,
        Err((mut f, _)) => {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            let holder =
                if holder.trim().is_empty() { "unknown holder".to_string() } else { holder.trim().to_string() };
            return Err(LockError::Held { holder, home: home.display().to_string() });
        }
    };
    let me = format!("pid {} on host {}", std::process::id(), crate::config::hostname());
    let write = |f: &mut File| -> std::io::Result<()> {
        f.set_len(0)?;
        f.rewind()?;
        f.write_all(me.as_bytes())
    };
    write(&mut file).map_err(err)?;
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
}

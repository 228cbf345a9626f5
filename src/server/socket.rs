//! The shared server's Unix socket: where it lives, who may create and
//! reach it, and how a stale one left by a dead server is replaced.
//!
//! Who may connect: the socket is made 0600 (whatever the umask) in a 0700
//! directory, and every accepted connection's peer credentials
//! (`SO_PEERCRED`) are checked, so a user other than ours (root aside) is
//! refused even if someone loosens the modes. A refused peer gets a short
//! HTTP 403 saying why, then the connection closes.
//!
//! Replacing a stale socket: a lock file beside the socket (`NAME.lock`) is
//! held with `flock` for the server's life. Whoever holds it owns the path;
//! a second server on the same path is refused at once, naming the first.
//! The holder removes a socket file nobody answers on before binding.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::Flock;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};

/// The longest path a Unix socket address holds (`sun_path` is 108 bytes,
/// one of them the terminating NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The path does not fit in a socket address.
    #[error(
        "the socket path {path} is {len} bytes long, but a Unix socket path holds at most {MAX_SOCKET_PATH}; \
         choose a shorter one with --socket or DOCENT_TERMINAL_MCP_SOCKET_PATH"
    )]
    TooLong {
        /// The path.
        path: String,
        /// Its length in bytes.
        len: usize,
    },
    /// Another server holds the path.
    #[error(
        "another docent-terminal-mcp server ({holder}) already listens on {path}; \
         connect to it (docent-terminal-mcp connect) or stop it first"
    )]
    Taken {
        /// Who holds it, as it wrote itself down.
        holder: String,
        /// The socket path.
        path: String,
    },
    /// Something not a socket is in the way.
    #[error("{0} exists and is not a socket; remove it or choose another path with --socket")]
    NotASocket(String),
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SocketError {
    let what = what.into();
    move |source| SocketError::Io { what, source }
}

/// A bound socket, the lock that owns its path, and the path to remove at
/// shutdown.
pub struct BoundSocket {
    /// The listener, not yet registered with a runtime.
    pub listener: std::os::unix::net::UnixListener,
    /// The socket's path.
    pub path: PathBuf,
    _lock: Flock<File>,
}

impl Drop for BoundSocket {
    /// Removes the socket file (the lock file stays; it is reused). A
    /// server killed outright leaves it behind: the next one replaces it.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the socket at `path`. Call it before any other thread exists: it
/// sets the process umask for the moment of `bind`.
pub fn bind(path: &Path) -> Result<BoundSocket, SocketError> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(SocketError::TooLong { path: path.display().to_string(), len });
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    make_private_dir(dir)?;
    let lock = take_path_lock(path)?;
    remove_stale(path)?;
    // The umask decides the mode `bind` gives the file; with 0177 nobody
    // but us can connect even before the chmod below.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = std::os::unix::net::UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = bound.map_err(io(format!("binding {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("making {} private", path.display())))?;
    listener.set_nonblocking(true).map_err(io("making the socket non-blocking"))?;
    Ok(BoundSocket { listener, path: path.to_path_buf(), _lock: lock })
}

/// Creates `dir` (and its parents) 0700 when missing. An existing directory
/// named after us is made 0700 too, and refused if another user owns it;
/// any other existing directory (say
/// `/tmp` for a socket put there on purpose) is left as it is.
fn make_private_dir(dir: &Path) -> Result<(), SocketError> {
    if !dir.exists() {
        return std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(format!("creating {}", dir.display())));
    }
    if dir.file_name().is_some_and(|n| n == "docent-terminal-mcp") {
        dtmcp_core::store::check_private_dir(dir).map_err(io(format!("making {} private", dir.display())))?;
    }
    Ok(())
}

fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".lock");
    path.with_file_name(name)
}

fn take_path_lock(path: &Path) -> Result<Flock<File>, SocketError> {
    let lock = lock_path(path);
    let err = io(format!("opening {}", lock.display()));
    let file = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&lock);
    let file = file.map_err(err)?;
    let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    match crate::lock::take(file) {
        Ok(f) => {
            let _ = crate::lock::write_holder(&f);
            Ok(f)
        }
        Err(holder) => Err(SocketError::Taken { holder, path: path.display().to_string() }),
    }
}

/// Removes a socket file nobody answers on. Holding the path lock, we know
/// no live server of ours owns it; a process answering anyway (started
/// without the lock) is left alone.
fn remove_stale(path: &Path) -> Result<(), SocketError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket(path.display().to_string()));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(SocketError::Taken {
            holder: "a process that answers on it".into(),
            path: path.display().to_string(),
        });
    }
    std::fs::remove_file(path).map_err(io(format!("removing the stale socket {}", path.display())))
}

/// The Unix listener that lets only our own user (and root) in.
pub struct PeerChecked {
    inner: UnixListener,
    uid: u32,
}

impl PeerChecked {
    /// Wraps a bound socket; must be called inside a runtime.
    pub fn new(listener: std::os::unix::net::UnixListener) -> std::io::Result<PeerChecked> {
        Ok(PeerChecked { inner: UnixListener::from_std(listener)?, uid: nix::unistd::getuid().as_raw() })
    }

    fn admits(&self, stream: &UnixStream) -> Result<(), String> {
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == self.uid || cred.uid() == 0 => Ok(()),
            Ok(cred) => Err(format!("uid {} may not use the server of uid {}", cred.uid(), self.uid)),
            Err(e) => Err(format!("the peer's credentials are unknown: {e}")),
        }
    }
}

impl axum::serve::Listener for PeerChecked {
    type Io = crate::quiet_socket::QuietSocket;
    type Addr = tokio::net::unix::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => match self.admits(&stream) {
                    // Watched for reading only: a client reading an answer
                    // does not wake the server.
                    Ok(()) => match crate::quiet_socket::QuietSocket::from_tokio(stream) {
                        Ok(quiet) => return (quiet, addr),
                        Err(e) => eprintln!("docent-terminal-mcp: cannot watch a connection: {e}"),
                    },
                    Err(why) => {
                        eprintln!("docent-terminal-mcp: refused a connection: {why}");
                        tokio::spawn(refuse(stream, why));
                    }
                },
                // Out of descriptors and the like: wait rather than spin.
                Err(e) => {
                    eprintln!("docent-terminal-mcp: accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

async fn refuse(mut stream: UnixStream, why: String) {
    use tokio::io::AsyncReadExt;
    // Read what the peer sent first: closing with unread bytes would reset
    // the connection, and the peer would never see why.
    let mut request = [0u8; 4096];
    let wait = std::time::Duration::from_millis(200);
    let _ = tokio::time::timeout(wait, stream.read(&mut request)).await;
    let body = format!("{why}\n");
    let reply = format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), stream.write_all(reply.as_bytes())).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_path_is_refused_before_anything_is_made() {
        let long = PathBuf::from(format!("/tmp/{}/server.sock", "x".repeat(120)));
        let err = bind(&long).err().expect("too long");
        assert!(err.to_string().contains("at most 107"), "{err}");
        assert!(!long.parent().expect("parent").exists());
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_is_not() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("docent-terminal-mcp").join("s.sock");
        let first = bind(&path).expect("bind");
        let err = bind(&path).err().expect("second on the same path").to_string();
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        drop(first);
        assert!(!path.exists(), "a server that ends removes its socket");
        // A killed server leaves its socket file behind: the next one binds.
        drop(std::os::unix::net::UnixListener::bind(&path).expect("stale socket"));
        assert!(path.exists());
        let second = bind(&path).expect("stale socket replaced");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(path.parent().expect("dir")).expect("meta").permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        drop(second);
    }
}

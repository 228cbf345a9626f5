//! Stdin and stdout for MCP over stdio (the server's and the `connect`
//! bridge's).
//!
//! `tokio::io::stdin` and `stdout` do every read and write on a blocking
//! thread, so each message crosses threads twice on its way. When they
//! are pipes, as clients start servers, they are read and written through
//! the runtime's poller instead (`tokio::net::unix::pipe`, which makes
//! them non-blocking); anything else (a terminal, a file) keeps tokio's
//! own.

use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// Stdin, through the poller when it is a pipe.
pub fn input() -> Pin<Box<dyn AsyncRead + Send>> {
    let fd = std::io::stdin();
    match as_pipe(fd.as_fd()).and_then(|f| pipe::Receiver::from_file(f).ok()) {
        Some(pipe) => Box::pin(pipe),
        None => Box::pin(tokio::io::stdin()),
    }
}

/// Stdout, through the poller when it is a pipe; but not when stderr is
/// the same pipe (`2>&1`):
/// making it non-blocking would make stderr so too, and a message for
/// people could then fail on a full pipe.
pub fn output() -> Pin<Box<dyn AsyncWrite + Send>> {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    let shared = same_file(out.as_fd(), err.as_fd());
    match as_pipe(out.as_fd()).filter(|_| !shared).and_then(|f| pipe::Sender::from_file(f).ok()) {
        Some(pipe) => Box::pin(pipe),
        None => Box::pin(tokio::io::stdout()),
    }
}

/// A file of its own on `fd`, if `fd` is a pipe.
fn as_pipe(fd: BorrowedFd<'_>) -> Option<std::fs::File> {
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    use std::os::unix::fs::FileTypeExt;
    file.metadata().ok().filter(|m| m.file_type().is_fifo()).map(|_| file)
}

fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = |fd: BorrowedFd<'_>| {
        let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        file.metadata().ok().map(|m| (m.dev(), m.ino()))
    };
    matches!((meta(a), meta(b)), (Some(x), Some(y)) if x == y)
}

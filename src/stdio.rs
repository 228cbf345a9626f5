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

use nix::sys::stat::{FileStat, SFlag, fstat};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// Stdin, through the poller when it is a pipe.
pub fn input() -> Pin<Box<dyn AsyncRead + Send>> {
    let stdin = std::io::stdin();
    match as_pipe(stdin.as_fd()).and_then(|f| pipe::Receiver::from_file(f).ok()) {
        Some(pipe) => Box::pin(pipe),
        None => Box::pin(tokio::io::stdin()),
    }
}

/// Stdout, through the poller when it is a pipe; but not when stderr is
/// the same pipe (`2>&1`): making it non-blocking would make stderr so
/// too, and a message for people could then fail on a full pipe.
pub fn output() -> Pin<Box<dyn AsyncWrite + Send>> {
    let (out, err) = (std::io::stdout(), std::io::stderr());
    let same = |a: FileStat, b: FileStat| (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino);
    let shared = matches!((fstat(out.as_fd()), fstat(err.as_fd())), (Ok(a), Ok(b)) if same(a, b));
    match as_pipe(out.as_fd()).filter(|_| !shared).and_then(|f| pipe::Sender::from_file(f).ok()) {
        Some(pipe) => Box::pin(pipe),
        None => Box::pin(tokio::io::stdout()),
    }
}

/// A file of its own on `fd`, if `fd` is a pipe.
fn as_pipe(fd: BorrowedFd<'_>) -> Option<std::fs::File> {
    let mode = SFlag::from_bits_truncate(fstat(fd).ok()?.st_mode);
    (mode & SFlag::S_IFMT == SFlag::S_IFIFO).then(|| fd.try_clone_to_owned().ok().map(std::fs::File::from)).flatten()
}

//! Unix sockets watched for reading only.
//!
//! `tokio::net::UnixStream` registers its socket for both readiness
//! kinds, and a Unix socket wakes every writer registered for write space
//! whenever its peer reads. So each request sent on a kept connection woke
//! its sender once more, for nothing, when the other end read it: one
//! wake-up in three of the `connect` bridge, about one in five of the router's
//! when it serves the bridge.
//! Here a socket is registered for reading alone. Writes go straight to
//! the non-blocking socket; only when its buffer is full is a second
//! descriptor of the same socket registered for write space, until a write
//! goes through again.

use std::io::{self, IoSlice, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A connected Unix socket that wakes its task for reading only (and for
/// write space only while a write waits for it).
pub struct QuietSocket {
    /// The socket, registered for reading.
    read: AsyncFd<UnixStream>,
    /// A duplicate of it registered for write space, while the socket's
    /// buffer is full.
    write: Option<AsyncFd<OwnedFd>>,
}

impl QuietSocket {
    /// Connects to the socket at `path`.
    pub async fn connect(path: &Path) -> io::Result<QuietSocket> {
        QuietSocket::from_tokio(tokio::net::UnixStream::connect(path).await?)
    }

    /// Takes over a connected stream (inside a runtime).
    pub fn from_tokio(stream: tokio::net::UnixStream) -> io::Result<QuietSocket> {
        Ok(QuietSocket { read: register(stream.into_std()?)?, write: None })
    }

    /// Splits the socket into a half that reads and a half that writes
    /// without waiting (and waits for space only when asked).
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        let read = Arc::new(self.read);
        (ReadHalf(Arc::clone(&read)), WriteHalf(read))
    }

    /// Runs `write` on the socket, waiting for write space while it would
    /// block.
    fn poll_write_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut write: impl FnMut(&UnixStream) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        loop {
            match write(self.read.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                done => {
                    self.write = None;
                    return Poll::Ready(done);
                }
            }
            let space = match &mut self.write {
                Some(space) => space,
                none => none.insert(space_of(self.read.get_ref())?),
            };
            let mut guard = ready!(space.poll_write_ready(cx))?;
            guard.clear_ready();
        }
    }
}

/// Registers `stream` (made non-blocking) for reading only.
fn register(stream: UnixStream) -> io::Result<AsyncFd<UnixStream>> {
    stream.set_nonblocking(true)?;
    // SAFETY: the stream owns its descriptor, and the AsyncFd owns the
    // stream until it is dropped: the descriptor stays open and the same.
    Ok(unsafe { AsyncFd::register_with_interest(stream, Interest::READABLE) }?)
}

/// A second descriptor of `stream`, registered for write space only.
fn space_of(stream: &UnixStream) -> io::Result<AsyncFd<OwnedFd>> {
    let dup = OwnedFd::from(stream.try_clone()?);
    // SAFETY: the OwnedFd is the duplicate's only owner, kept (open,
    // unchanged) inside the AsyncFd until it is dropped.
    Ok(unsafe { AsyncFd::register_with_interest(dup, Interest::WRITABLE) }?)
}

/// Reads from the socket `fd` into `buf`, waiting while nothing is there.
fn poll_read_from(fd: &AsyncFd<UnixStream>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
    loop {
        let mut guard = ready!(fd.poll_read_ready(cx))?;
        let unfilled = buf.initialize_unfilled();
        match guard.try_io(|s| s.get_ref().read(unfilled)) {
            Ok(Ok(n)) => {
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(Err(e)) => return Poll::Ready(Err(e)),
            Err(_would_block) => continue,
        }
    }
}

impl AsyncRead for QuietSocket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        poll_read_from(&self.read, cx, buf)
    }
}

/// The reading half of a [`QuietSocket`].
pub struct ReadHalf(Arc<AsyncFd<UnixStream>>);

impl AsyncRead for ReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        poll_read_from(&self.0, cx, buf)
    }
}

/// The writing half of a [`QuietSocket`]: writes that never wait, and a
/// wait for space.
pub struct WriteHalf(Arc<AsyncFd<UnixStream>>);

impl WriteHalf {
    /// Writes what the socket takes of `buf` now (`WouldBlock` if nothing).
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut socket = self.0.get_ref();
        socket.write(buf)
    }

    /// Returns once the socket has room for more.
    pub async fn writable(&self) -> io::Result<()> {
        let space = space_of(self.0.get_ref())?;
        space.writable().await?.retain_ready();
        Ok(())
    }
}

impl AsyncWrite for QuietSocket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_with(cx, |mut s| s.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_with(cx, |mut s| s.write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.read.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// More than a socket buffer holds goes through whole (the writer
    /// waits for space on its second descriptor), and what comes back is
    /// read.
    #[tokio::test]
    async fn a_full_buffer_waits_for_space_and_replies_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let big = vec![7u8; 4 << 20];
        let server = tokio::spawn(async move {
            let (mut peer, _) = listener.accept().await.expect("accept");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let mut got = vec![0u8; 4 << 20];
            peer.read_exact(&mut got).await.expect("read");
            peer.write_all(b"done").await.expect("reply");
            got
        });
        let mut socket = QuietSocket::connect(&path).await.expect("connect");
        socket.write_all(&big).await.expect("write");
        let mut reply = [0u8; 4];
        socket.read_exact(&mut reply).await.expect("reply");
        assert_eq!(&reply, b"done");
        assert!(socket.write.is_none(), "the write-space registration is let go once writes go through");
        assert_eq!(server.await.expect("server"), big);
    }

    /// The halves: a write that finds the buffer full waits for space
    /// (the peer reads late), and the reading half reads the peer's reply.
    #[tokio::test]
    async fn the_writing_half_waits_for_space_and_the_reading_half_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let (rx, tx) = QuietSocket::connect(&path).await.expect("connect").into_split();
        let (mut peer, _) = listener.accept().await.expect("accept");
        let chunk = vec![1u8; 64 << 10];
        let mut sent = 0;
        loop {
            match tx.try_write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        let waiting = tokio::spawn(async move {
            tx.writable().await.expect("writable");
            tx
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "no space yet: the wait goes on");
        let mut got = vec![0u8; sent];
        peer.read_exact(&mut got).await.expect("drain");
        let tx = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("space is seen once the peer reads")
            .expect("task");
        assert!(tx.try_write(b"x").expect("room now") == 1);
        peer.write_all(b"reply").await.expect("reply");
        let mut rx = rx;
        let mut reply = [0u8; 5];
        rx.read_exact(&mut reply).await.expect("read");
        assert_eq!(&reply, b"reply");
    }
}

//! systemd's notification protocol (`Type=notify`): `READY=1` once the
//! socket is bound and the state lock held, `WATCHDOG=1` at half the
//! interval systemd asks for, `STOPPING=1` on the way out. Outside systemd
//! (`NOTIFY_SOCKET` unset) every call does nothing. A socket that cannot be
//! reached is said once, not at every watchdog tick.
//!
//! A notification never blocks: it is sent without waiting (`sd_notify`'s
//! own send waits while the manager's queue is full, and a datagram queue
//! holds only `net.unix.max_dgram_qlen` messages, 10 by default). A manager
//! that stopped reading gets no further pings, and the runtime's worker
//! that would have waited for it keeps serving calls.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sd_notify::NotifyState;

/// Set once a failed notification has been said.
static SAID: AtomicBool = AtomicBool::new(false);

fn send(state: NotifyState<'_>) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else { return };
    if let Some(line) = complaint(send_to(&socket, &format!("{state}\n")), &SAID) {
        eprintln!("{line}");
    }
}

/// Sends `message` to the manager's socket `socket` (a path, or `@name`
/// for an abstract one) without waiting: a full queue is an error
/// (`WouldBlock`), not a wait.
fn send_to(socket: &OsStr, message: &str) -> io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    sock.set_nonblocking(true)?;
    match socket.as_bytes().strip_prefix(b"@") {
        Some(name) => sock.connect_addr(&SocketAddr::from_abstract_name(name)?)?,
        None => sock.connect(socket)?,
    }
    let sent = sock.send(message.as_bytes())?;
    if sent != message.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "the notification was cut short"));
    }
    Ok(())
}

/// What to say about the outcome of a notification: the first failure
/// only, as `said` records.
fn complaint(outcome: std::io::Result<()>, said: &AtomicBool) -> Option<String> {
    let e = outcome.err()?;
    if said.swap(true, Ordering::Relaxed) {
        return None;
    }
    let socket = std::env::var_os("NOTIFY_SOCKET").unwrap_or_default();
    Some(format!(
        "docent-terminal-mcp: could not notify systemd on NOTIFY_SOCKET={}: {e} (said once; later notifications \
         that fail are not said)",
        socket.to_string_lossy()
    ))
}

/// Tells systemd the server is ready.
pub fn ready() {
    send(NotifyState::Ready);
}

/// Tells systemd the server is stopping.
pub fn stopping() {
    send(NotifyState::Stopping);
}

/// How often to pet the watchdog, when systemd set one for us.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|d| d / 2)
}

/// Pets the watchdog every `every`, until aborted. It runs on the same
/// runtime as the server, so a wedged runtime stops it and systemd notices.
pub async fn keep_alive(every: Duration) {
    loop {
        send(NotifyState::Watchdog);
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_socket_is_said_once() {
        let said = AtomicBool::new(false);
        let gone = || Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(complaint(Ok(()), &said), None);
        let first = complaint(gone(), &said).expect("the first failure is said");
        assert!(first.contains("could not notify systemd"), "{first}");
        assert_eq!(complaint(gone(), &said), None);
        assert_eq!(complaint(Ok(()), &said), None);
    }

    #[test]
    fn a_manager_that_stops_reading_never_blocks_a_notification() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify.sock");
        let manager = UnixDatagram::bind(&path).expect("bind");
        let started = std::time::Instant::now();
        // Far more than any datagram queue holds; nobody reads.
        let outcomes: Vec<_> = (0..200).map(|_| send_to(path.as_os_str(), "WATCHDOG=1\n")).collect();
        assert!(started.elapsed() < Duration::from_secs(5), "a full queue made the sender wait");
        assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
        let full = outcomes.iter().find_map(|o| o.as_ref().err()).expect("the queue fills up");
        assert_eq!(full.kind(), io::ErrorKind::WouldBlock);
        let mut buf = [0u8; 64];
        let n = manager.recv(&mut buf).expect("the first ping arrived");
        assert_eq!(&buf[..n], b"WATCHDOG=1\n");
    }

    #[test]
    fn an_abstract_socket_is_reached_by_its_at_name() {
        let name = format!("dtmcp-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
        let manager = UnixDatagram::bind_addr(&addr).expect("bind");
        send_to(OsStr::new(&format!("@{name}")), "READY=1\n").expect("sent");
        let mut buf = [0u8; 64];
        let n = manager.recv(&mut buf).expect("received");
        assert_eq!(&buf[..n], b"READY=1\n");
    }
}

//! systemd's notification protocol (`Type=notify`): `READY=1` once the
//! socket is bound and the state lock held, `WATCHDOG=1` at half the
//! interval systemd asks for, `STOPPING=1` on the way out. Outside systemd
//! (`NOTIFY_SOCKET` unset) every call does nothing. A socket that cannot be
//! reached is said once, not at every watchdog tick.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sd_notify::NotifyState;

/// Set once a failed notification has been said.
static SAID: AtomicBool = AtomicBool::new(false);

fn send(state: NotifyState<'_>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Some(line) = complaint(sd_notify::notify(&[state]), &SAID) {
        eprintln!("{line}");
    }
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
}

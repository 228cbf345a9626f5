//! systemd's notification protocol (`Type=notify`): `READY=1` once the
//! socket is bound and the state lock held, `WATCHDOG=1` at half the
//! interval systemd asks for, `STOPPING=1` on the way out. Outside systemd
//! (`NOTIFY_SOCKET` unset) every call does nothing.

use std::time::Duration;

use sd_notify::NotifyState;

fn send(state: NotifyState<'_>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(&[state]) {
        eprintln!("docent-terminal-mcp: could not notify systemd: {e}");
    }
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

//! Following one file without polling: inotify on its directory (an editor
//! that saves by writing a new file and renaming it over the old one
//! replaces the inode a watch on the file itself would follow), filtered
//! to the file's name.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How long a burst of events is let settle before the file is read: a
/// save is often several events (truncate, write, close).
const SETTLE: Duration = Duration::from_millis(50);

/// The inotify descriptor, for tokio to poll.
struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Calls `changed` after each change to the file at `path` (written,
/// replaced, created, removed), on a task that ends with the runtime. A
/// directory that cannot be watched is said on stderr: changes then need
/// a restart.
pub fn on_change(path: PathBuf, changed: impl Fn() + Send + 'static) {
    let Some(name) = path.file_name().map(OsString::from) else { return };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).map(PathBuf::from).unwrap_or_else(|| ".".into());
    let watched = (|| -> std::io::Result<AsyncFd<Fd>> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let flags = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MODIFY;
        inotify.add_watch(&dir, flags)?;
        // SAFETY: `Fd` owns the inotify descriptor, which stays open until
        // the `AsyncFd` holding it is dropped, and `as_raw_fd` always
        // returns that same descriptor.
        Ok(unsafe { AsyncFd::register_with_interest(Fd(inotify), Interest::READABLE) }?)
    })();
    let fd = match watched {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!(
                "docent-terminal-mcp: cannot watch {} for changes ({e}); a change to the policy needs a restart",
                dir.display()
            );
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            let Ok(mut ready) = fd.readable().await else { return };
            let mut ours = false;
            while let Ok(events) = fd.get_ref().0.read_events() {
                ours |= events.iter().any(|e| e.name.as_deref() == Some(name.as_os_str()));
            }
            ready.clear_ready();
            if ours {
                tokio::time::sleep(SETTLE).await;
                // Drain what the settling brought, then read once.
                while fd.get_ref().0.read_events().is_ok() {}
                changed();
            }
        }
    });
}

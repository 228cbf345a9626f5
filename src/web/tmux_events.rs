//! What tmux knows and the files do not: people attaching and leaving,
//! sessions and windows coming and going, panes resized. A read-only
//! control client of our own (`tmux -C attach -f read-only,no-output,
//! ignore-size` to the router's hidden session) hears tmux's notifications
//! for these; it runs only while someone watches, and sends no command.
//!
//! The router's own control client answers commands and ignores
//! notifications; this one is apart so that the web view adds nothing to
//! that hot path. Control clients are never counted as people (see
//! [`crate::tmux::clients::parse_clients`]).

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

use crate::tmux::{CONTROL_SESSION, Tmux, session_target};

/// The notifications that change what the view shows.
const TOLD: [&str; 10] = [
    "%client-session-changed",
    "%client-detached",
    "%sessions-changed",
    "%session-changed",
    "%window-add",
    "%window-close",
    "%unlinked-window-add",
    "%unlinked-window-close",
    "%layout-change",
    "%pane-mode-changed",
];

/// Whether a line from the control client is a notification the view cares about.
pub fn tells(line: &str) -> bool {
    let word = line.split(' ').next().unwrap_or("");
    TOLD.contains(&word)
}

/// A running notification client. Dropping it kills the client.
pub struct TmuxEvents {
    /// The client process, killed on drop.
    _child: Child,
    /// The reader task.
    reader: tokio::task::JoinHandle<()>,
    /// False once the client's output ended.
    alive: Arc<AtomicBool>,
}

impl Drop for TmuxEvents {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl TmuxEvents {
    /// Starts a client on `tmux`'s server that bumps `tell` at every
    /// notification of interest. When no tmux server runs, or it has no
    /// hidden session yet (the router makes it at its first command), the
    /// client ends at once and [`TmuxEvents::alive`] says so; it never
    /// starts a server.
    pub fn start(tmux: &Tmux, tell: watch::Sender<u64>) -> std::io::Result<TmuxEvents> {
        let mut child = Command::new(tmux.bin())
            // `-N`: without it attach-session starts a server when none
            // runs, an empty one that was seen to outlive the test that
            // made it, held by its stuck control client. With it the
            // client fails at once, and the feed tries again later.
            .args(["-N", "-u", "-L", tmux.socket(), "-C", "attach-session", "-t", &session_target(CONTROL_SESSION)])
            .args(["-f", "read-only,no-output,ignore-size"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("tmux started without a stdout"))?;
        let alive = Arc::new(AtomicBool::new(true));
        let flag = alive.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tells(&line) {
                    tell.send_modify(|n| *n += 1);
                }
            }
            flag.store(false, Ordering::SeqCst);
        });
        Ok(TmuxEvents { _child: child, reader, alive })
    }

    /// Whether the client still runs.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_notifications_that_change_the_view_count() {
        assert!(tells("%client-session-changed /dev/pts/3 $1 t1"));
        assert!(tells("%client-detached /dev/pts/3"));
        assert!(tells("%sessions-changed"));
        assert!(tells("%layout-change @1 b25d,80x24,0,0,1 b25d,80x24,0,0,1 *"));
        assert!(!tells("%output %1 hello"));
        assert!(!tells("%begin 1 2 0"));
        assert!(!tells("%window-renamed @1 bash"));
    }
}

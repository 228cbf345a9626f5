//! Knowing when sessions change without looking again and again: inotify
//! on the session directories.
//!
//! Every byte a pane prints is appended to its `raw.log` by its logger at
//! once (see the logger's pump), after tmux has drawn it; every region
//! opened or closed is a line added to `regions.jsonl`; a logger that ends
//! closes its files. So the directory's own change events say when the
//! screen, the timeline or the session's state may have moved, and a
//! watcher sleeps in the kernel until then. (A logger `Wait` on new output
//! would do as well for the screen, but a wait that ends on any output
//! has to be asked again after each one, and the logger wakes every 10 ms
//! while such a wait is open; the kernel's events cost nothing while a
//! session is quiet.)
//!
//! The kernel merges repeated events that were not read yet, so a flood
//! of output costs one read per wake-up, not one per write.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The most reads of the queue per wake-up: a queue that refills as
/// fast as it is read is left for the next one.
const MAX_READS: usize = 16;

/// Something changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A file in a watched session's directory: which file (`None`: the
    /// directory itself went away).
    Session {
        /// The session.
        name: String,
        /// The file's name.
        file: Option<OsString>,
    },
    /// A session directory came or went.
    SessionList,
    /// An agent's typing record of a session (`agents/NAME.jsonl`).
    Agents {
        /// The session.
        name: String,
    },
    /// A file in the asks directory (`asks/`): an ask opened, answered
    /// or closed.
    Asks,
    /// The kernel's queue overflowed: anything may have changed.
    Overflow,
}

/// What a watch is for.
#[derive(Clone, Debug)]
enum Watched {
    Session(String),
    SessionList,
    Agents,
    Asks,
}

/// The inotify descriptor, for tokio to poll.
struct Fd(Inotify);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// One inotify instance and what its watches stand for.
pub struct Changes {
    fd: AsyncFd<Fd>,
    by_wd: HashMap<WatchDescriptor, Watched>,
    by_name: HashMap<String, WatchDescriptor>,
}

/// The events a session directory is watched for.
fn session_events() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
}

impl Changes {
    /// A new instance with no watches; must be called inside a runtime.
    pub fn new() -> std::io::Result<Changes> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        // SAFETY: `Fd` owns the inotify descriptor, which stays open until
        // the `AsyncFd` holding it is dropped, and `as_raw_fd` always
        // returns that same descriptor.
        let fd = unsafe { AsyncFd::register_with_interest(Fd(inotify), Interest::READABLE) }?;
        Ok(Changes { fd, by_wd: HashMap::new(), by_name: HashMap::new() })
    }

    fn add(&mut self, path: &Path, flags: AddWatchFlags, what: Watched) -> std::io::Result<()> {
        let wd = self.fd.get_ref().0.add_watch(path, flags)?;
        if let Watched::Session(name) = &what {
            self.by_name.insert(name.clone(), wd);
        }
        self.by_wd.insert(wd, what);
        Ok(())
    }

    /// Watches the directory that holds the session directories.
    pub fn watch_list(&mut self, sessions_dir: &Path) -> std::io::Result<()> {
        let flags = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO;
        self.add(sessions_dir, flags, Watched::SessionList)
    }

    /// Watches the agents' typing records (`$HOME/agents`), made if missing.
    pub fn watch_agents(&mut self, agents_dir: &Path) -> std::io::Result<()> {
        dtmcp_core::store::private_dir_all(agents_dir)?;
        let flags = AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO;
        self.add(agents_dir, flags, Watched::Agents)
    }

    /// Watches the asks directory (`$HOME/asks`), made if missing: files
    /// linked into place (asks, answers) and removed (closed asks).
    pub fn watch_asks(&mut self, asks_dir: &Path) -> std::io::Result<()> {
        dtmcp_core::store::private_dir_all(asks_dir)?;
        let flags = AddWatchFlags::IN_CREATE | AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_TO;
        self.add(asks_dir, flags, Watched::Asks)
    }

    /// Watches session `name`'s directory (again: a new directory of the
    /// same name gets a new watch).
    pub fn watch_session(&mut self, name: &str, dir: &Path) -> std::io::Result<()> {
        self.unwatch_session(name);
        self.add(dir, session_events(), Watched::Session(name.to_string()))
    }

    /// Whether session `name` is watched.
    pub fn watches(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Stops watching session `name`.
    pub fn unwatch_session(&mut self, name: &str) {
        if let Some(wd) = self.by_name.remove(name) {
            self.by_wd.remove(&wd);
            let _ = self.fd.get_ref().0.rm_watch(wd);
        }
    }

    /// Waits for changes and returns those that came (cancel-safe: events
    /// not read stay in the kernel's queue).
    pub async fn next(&mut self) -> std::io::Result<Vec<Change>> {
        loop {
            let mut events = Vec::new();
            {
                let mut ready = self.fd.readable().await?;
                for _ in 0..MAX_READS {
                    match ready.get_inner().0.read_events() {
                        Ok(more) => events.extend(more),
                        Err(Errno::EAGAIN) => {
                            ready.clear_ready();
                            break;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            let mut out = Vec::new();
            for e in events {
                self.translate(e.wd, e.mask, e.name, &mut out);
            }
            if !out.is_empty() {
                return Ok(out);
            }
        }
    }

    fn translate(&mut self, wd: WatchDescriptor, mask: AddWatchFlags, file: Option<OsString>, out: &mut Vec<Change>) {
        if mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            out.push(Change::Overflow);
            return;
        }
        let Some(what) = self.by_wd.get(&wd).cloned() else { return };
        if mask.contains(AddWatchFlags::IN_IGNORED) {
            // The kernel dropped the watch (its directory is gone).
            self.by_wd.remove(&wd);
            if let Watched::Session(name) = &what {
                self.by_name.remove(name);
                out.push(Change::Session { name: name.clone(), file: None });
            }
            return;
        }
        let change = match what {
            Watched::Session(name) => {
                let file = (!mask.contains(AddWatchFlags::IN_DELETE_SELF)).then_some(file).flatten();
                Change::Session { name, file }
            }
            Watched::SessionList => Change::SessionList,
            Watched::Asks => {
                // Temporary files come and go before each link.
                if file.as_ref().and_then(|f| f.to_str()).is_none_or(|f| !f.ends_with(".json")) {
                    return;
                }
                Change::Asks
            }
            Watched::Agents => {
                let Some(name) = file.as_ref().and_then(|f| f.to_str()).and_then(|f| f.strip_suffix(".jsonl")) else {
                    return;
                };
                Change::Agents { name: name.to_string() }
            }
        };
        if out.last() != Some(&change) {
            out.push(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn writes_in_a_session_directory_are_seen_by_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let sessions = tmp.path().join("sessions");
        let dir = sessions.join("t1");
        std::fs::create_dir_all(&dir).expect("dirs");
        let mut changes = Changes::new().expect("inotify");
        changes.watch_list(&sessions).expect("watch list");
        changes.watch_session("t1", &dir).expect("watch t1");
        assert!(changes.watches("t1"));
        std::fs::write(dir.join("raw.log"), b"hello").expect("write");
        let got = tokio::time::timeout(Duration::from_secs(5), changes.next()).await.expect("in time").expect("read");
        assert!(got.contains(&Change::Session { name: "t1".into(), file: Some("raw.log".into()) }), "{got:?}");
        std::fs::create_dir(sessions.join("t2")).expect("t2");
        let got = tokio::time::timeout(Duration::from_secs(5), changes.next()).await.expect("in time").expect("read");
        assert!(got.contains(&Change::SessionList), "{got:?}");
        changes.unwatch_session("t1");
        assert!(!changes.watches("t1"));
    }
}

//! The sweep: gathers the facts of every session directory from disk, plans
//! with [`super::plan`], checks each candidate again just before deleting it
//! and deletes it, leaving a tombstone.
//!
//! Symbolic links are never followed: a session directory that is a link is
//! left alone, the walk for the newest mtime reads links' own times, and
//! deletion removes a link inside a directory as a link (which is what
//! `std::fs::remove_dir_all` does), so nothing outside the sessions
//! directory can be deleted.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::tombstone::{self, Tombstone};
use super::{DELETE_ON_CLOSE, Decision, Facts, KEEP, Policy, Why, plan};
use dtmcp_core::store::{self, files};

/// How far a sweep goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepMode {
    /// Every rule (start-up and hourly).
    Full,
    /// Only sessions marked delete-on-close (every minute).
    DeleteOnCloseOnly,
}

/// What a sweep needs to know about the server it runs in.
#[derive(Clone, Debug)]
pub struct Sweeper {
    /// The state home, which holds `sessions/` and `removed.jsonl`.
    pub home: PathBuf,
    /// This host's name, as `meta.json` records it.
    pub host: String,
    /// This server's tmux socket name, as `meta.json` records it.
    pub socket: String,
    /// How long closed sessions are kept.
    pub policy: Policy,
}

impl Sweeper {
    fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    /// The facts of every entry of the sessions directory; `live` holds the
    /// names of the sessions whose panes live.
    pub fn gather(&self, live: &HashSet<String>) -> Vec<Facts> {
        self.gather_where(live, |_| true)
    }

    /// The facts of the closed sessions only, by name. A live session's
    /// facts are not gathered at all: they cost a look at every file of
    /// its directory, and `session_list` shows only the closed ones.
    pub fn gather_closed(&self, live: &HashSet<String>) -> Vec<Facts> {
        let mut facts = self.gather_where(live, |name| !live.contains(name));
        facts.retain(|f| f.closed);
        facts
    }

    fn gather_where(&self, live: &HashSet<String>, wanted: impl Fn(&str) -> bool) -> Vec<Facts> {
        let Ok(entries) = std::fs::read_dir(self.sessions_dir()) else { return Vec::new() };
        let mut facts: Vec<Facts> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| wanted(name))
            .filter_map(|name| self.facts_of(&name, live))
            .collect();
        facts.sort_by(|a, b| a.name.cmp(&b.name));
        facts
    }

    /// The facts of one entry, or `None` when it is gone or not a name.
    pub fn facts_of(&self, name: &str, live: &HashSet<String>) -> Option<Facts> {
        let dir = self.sessions_dir().join(name);
        let md = std::fs::symlink_metadata(&dir).ok()?;
        let is_symlink = md.file_type().is_symlink();
        let ours = !is_symlink && md.is_dir() && self.made_here(&dir);
        Some(Facts {
            name: name.to_string(),
            closed: ours && !live.contains(name),
            last_used_ms: if is_symlink { 0 } else { newest_mtime_ms(&dir) },
            keep: marker(&dir, KEEP),
            delete_on_close: marker(&dir, DELETE_ON_CLOSE),
            is_symlink,
        })
    }

    /// Whether `meta.json` says this host and this tmux socket made it.
    fn made_here(&self, dir: &Path) -> bool {
        let meta_path = dir.join(files::META);
        let plain = std::fs::symlink_metadata(&meta_path).is_ok_and(|m| m.is_file());
        // A server under another TMUX_TMPDIR cannot see this one's tmux, so
        // the socket's path must match too, when the session recorded it.
        let path = crate::tmux::socket_path(&self.socket).display().to_string();
        plain
            && store::read_meta(dir).is_ok_and(|m| {
                m.host == self.host
                    && m.tmux_socket == self.socket
                    && (m.tmux_socket_path.is_empty() || m.tmux_socket_path == path)
            })
    }

    /// What a sweep at `now_ms` would delete, without deleting.
    pub fn due(&self, now_ms: u64, live: &HashSet<String>, mode: SweepMode) -> Vec<Decision> {
        let mut decisions = plan(now_ms, self.policy, &self.gather(live));
        if mode == SweepMode::DeleteOnCloseOnly {
            decisions.retain(|d| d.why == Why::DeleteOnClose);
        }
        decisions
    }

    /// Deletes what `decisions` name, each checked again against `live`
    /// (taken just now) and its last use: a session read or reopened since
    /// the plan is skipped. Returns the deleted ones.
    pub fn apply(&self, now_ms: u64, decisions: &[Decision], live: &HashSet<String>) -> Vec<Decision> {
        let mut done = Vec::new();
        for d in decisions {
            let Some(f) = self.facts_of(&d.name, live) else { continue };
            let still = plan(now_ms, self.policy, std::slice::from_ref(&f)).into_iter().next();
            if f.last_used_ms != d.last_used_ms || still.is_none() {
                eprintln!("docent-terminal-mcp: kept {}: it was used or reopened during the sweep", d.name);
                continue;
            }
            match self.delete(&d.name, d.why, now_ms) {
                Ok(()) => done.push(d.clone()),
                Err(e) => eprintln!("docent-terminal-mcp: could not delete the logs of {}: {e}", d.name),
            }
        }
        let _ = tombstone::prune(&self.home, now_ms);
        done
    }

    /// Deletes the directory `name` now (it must be a real directory, not a
    /// link), logs one line and leaves a tombstone.
    pub fn delete(&self, name: &str, why: Why, now_ms: u64) -> std::io::Result<()> {
        let dir = self.sessions_dir().join(name);
        let md = std::fs::symlink_metadata(&dir)?;
        if !md.is_dir() {
            return Err(std::io::Error::other(format!("{} is not a directory", dir.display())));
        }
        std::fs::remove_dir_all(&dir)?;
        eprintln!("docent-terminal-mcp: deleted the logs of {name}: {why}");
        tombstone::append(&self.home, &Tombstone { name: name.to_string(), when: now_ms, why: why.to_string() })
    }
}

fn marker(dir: &Path, name: &str) -> bool {
    std::fs::symlink_metadata(dir.join(name)).is_ok()
}

/// The newest mtime of the directory and everything under it, links'
/// own times, in ms.
fn newest_mtime_ms(dir: &Path) -> u64 {
    let mut newest = mtime_ms(dir);
    let Ok(entries) = std::fs::read_dir(dir) else { return newest };
    for e in entries.filter_map(|e| e.ok()) {
        let Ok(ft) = e.file_type() else { continue };
        let t = if ft.is_dir() { newest_mtime_ms(&e.path()) } else { mtime_ms(&e.path()) };
        newest = newest.max(t);
    }
    newest
}

fn mtime_ms(p: &Path) -> u64 {
    std::fs::symlink_metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::store::Meta;

    const DAY: u64 = 24 * 60 * 60 * 1000;

    fn world() -> (tempfile::TempDir, Sweeper) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let sw = Sweeper {
            home: tmp.path().to_path_buf(),
            host: "here".into(),
            socket: "sock".into(),
            policy: Policy::default(),
        };
        (tmp, sw)
    }

    fn session(sw: &Sweeper, name: &str, host: &str) -> PathBuf {
        let dir = sw.home.join("sessions").join(name);
        std::fs::create_dir_all(dir.join("regions")).expect("mkdir");
        let meta = Meta { name: name.into(), host: host.into(), tmux_socket: "sock".into(), ..Meta::default() };
        store::write_meta(&dir, &meta).expect("meta");
        std::fs::write(dir.join("session.txt"), "hello\n").expect("text");
        dir
    }

    #[test]
    fn a_link_inside_a_session_pointing_outside_survives_the_deletion() {
        let (tmp, sw) = world();
        let outside = tmp.path().join("precious.txt");
        std::fs::write(&outside, "keep me").expect("outside");
        let dir = session(&sw, "t1", "here");
        std::os::unix::fs::symlink(&outside, dir.join("regions/0001.txt")).expect("link");
        std::os::unix::fs::symlink(tmp.path(), dir.join("up")).expect("dir link");
        std::fs::write(dir.join(DELETE_ON_CLOSE), "").expect("marker");
        let none = HashSet::new();
        let due = sw.due(crate::config::now_ms(), &none, SweepMode::Full);
        assert_eq!(sw.apply(crate::config::now_ms(), &due, &none).len(), 1);
        assert!(!dir.exists());
        assert_eq!(std::fs::read_to_string(&outside).expect("outside survives"), "keep me");
        assert!(tombstone::find(&sw.home, "t1").is_some());
    }

    #[test]
    fn only_closed_sessions_are_gathered_for_the_list_of_closed_ones() {
        let (_tmp, sw) = world();
        session(&sw, "live1", "here");
        session(&sw, "gone1", "here");
        session(&sw, "elsewhere1", "another-host");
        let live: HashSet<String> = ["live1".to_string()].into();
        let all: Vec<(String, bool)> = sw.gather(&live).into_iter().map(|f| (f.name, f.closed)).collect();
        assert_eq!(all, [("elsewhere1".into(), false), ("gone1".into(), true), ("live1".into(), false)]);
        let closed: Vec<String> = sw.gather_closed(&live).into_iter().map(|f| f.name).collect();
        assert_eq!(closed, ["gone1"]);
    }

    #[test]
    fn a_symlinked_session_dir_is_left_alone() {
        let (tmp, sw) = world();
        let elsewhere = session(&sw, "real", "here");
        std::fs::write(elsewhere.join(DELETE_ON_CLOSE), "").expect("marker");
        let moved = tmp.path().join("moved");
        std::fs::rename(&elsewhere, &moved).expect("move");
        std::os::unix::fs::symlink(&moved, sw.home.join("sessions/t1")).expect("link");
        let due = sw.due(crate::config::now_ms(), &HashSet::new(), SweepMode::Full);
        assert!(due.is_empty(), "{due:?}");
        assert!(moved.join("session.txt").exists());
    }

    #[test]
    fn a_read_racing_the_sweep_keeps_the_session() {
        let (_tmp, sw) = world();
        let dir = session(&sw, "t1", "here");
        let later = crate::config::now_ms() + 10 * DAY;
        let due = sw.due(later, &HashSet::new(), SweepMode::Full);
        assert_eq!(due.len(), 1);
        std::thread::sleep(std::time::Duration::from_millis(20));
        super::super::touch_last_used(&dir).expect("touch");
        assert!(sw.apply(later, &due, &HashSet::new()).is_empty());
        assert!(dir.exists());
    }

    #[test]
    fn only_this_host_and_socket_may_call_a_session_closed() {
        let (_tmp, sw) = world();
        for (name, host) in [("mine", "here"), ("theirs", "there")] {
            let dir = session(&sw, name, host);
            std::fs::write(dir.join(DELETE_ON_CLOSE), "").expect("marker");
        }
        let live: HashSet<String> = HashSet::new();
        let due = sw.due(crate::config::now_ms(), &live, SweepMode::DeleteOnCloseOnly);
        assert_eq!(due.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["mine"]);
        let live: HashSet<String> = ["mine".to_string()].into();
        assert!(sw.due(crate::config::now_ms(), &live, SweepMode::Full).is_empty());
    }
}

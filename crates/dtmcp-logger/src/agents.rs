//! The agents' state that the logger keeps for the router (see
//! [`dtmcp_core::agent_state`]): held in memory and answered at once, written to
//! `state.json` by a thread of its own, so that no answer waits for a disk
//! sync. Changes that come while a write is under way are written together
//! by the next one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use dtmcp_core::agent_state::{self, AgentState, Agents, Refused};

/// The agents of one session, and the writer that keeps `state.json`.
pub struct Book {
    inner: Arc<Inner>,
}

struct Inner {
    /// The session directory.
    dir: PathBuf,
    /// The states, and whether they changed since the last write.
    held: Mutex<Held>,
    /// Signalled when `held.dirty` turns true.
    changed: Condvar,
    /// Signalled when a write ends.
    written: Condvar,
}

#[derive(Default)]
struct Held {
    agents: Agents,
    dirty: bool,
    /// A write is under way.
    writing: bool,
    /// The writer thread runs; without it, [`Book::set`] writes at once.
    writer: bool,
}

impl Book {
    /// The agents saved in `dir`, with a writer thread started for changes.
    pub fn open(dir: &Path) -> Book {
        let held = Held { agents: agent_state::load(dir), ..Held::default() };
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            held: Mutex::new(held),
            changed: Condvar::new(),
            written: Condvar::new(),
        });
        let for_writer = Arc::clone(&inner);
        let started = std::thread::Builder::new().name("logger-state".into()).spawn(move || for_writer.write_loop());
        lock(&inner.held).writer = started.is_ok();
        Book { inner }
    }

    /// `actor`'s state, if known.
    pub fn get(&self, actor: &str) -> Option<AgentState> {
        lock(&self.inner.held).agents.get(actor).cloned()
    }

    /// Keeps `state` for `actor` (unless a newer one is held) and has it
    /// written.
    pub fn set(&self, actor: &str, state: AgentState) -> Result<(), Refused> {
        let mut held = lock(&self.inner.held);
        if !held.agents.set(actor, state)? {
            return Ok(());
        }
        held.dirty = true;
        if held.writer {
            drop(held);
            self.inner.changed.notify_one();
        } else {
            drop(self.inner.write(held));
        }
        Ok(())
    }

    /// Returns once every change is in the file (when output ends).
    pub fn flush(&self) {
        let mut held = lock(&self.inner.held);
        loop {
            if held.dirty {
                held = self.inner.write(held);
            } else if held.writing {
                held = self.inner.written.wait(held).unwrap_or_else(|e| e.into_inner());
            } else {
                return;
            }
        }
    }
}

impl Inner {
    fn write_loop(&self) {
        let mut held = lock(&self.held);
        loop {
            while !held.dirty {
                held = self.changed.wait(held).unwrap_or_else(|e| e.into_inner());
            }
            held = self.write(held);
        }
    }

    /// Writes the states out of `held` (released during the write) and
    /// hands the lock back.
    fn write<'a>(&'a self, mut held: MutexGuard<'a, Held>) -> MutexGuard<'a, Held> {
        held.dirty = false;
        held.writing = true;
        let snapshot = held.agents.clone();
        drop(held);
        if let Err(e) = agent_state::save(&self.dir, &snapshot) {
            // The states stay in memory; the next change tries again.
            eprintln!("dtmcp-pane-logger: {e}");
        }
        let mut held = lock(&self.held);
        held.writing = false;
        self.written.notify_all();
        held
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn a_change_is_answered_at_once_and_reaches_the_file_soon_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let book = Book::open(dir.path());
        let state = AgentState { version: 1, running: vec![3], ..AgentState::default() };
        book.set("alice", state.clone()).expect("set");
        assert_eq!(book.get("alice"), Some(state.clone()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while agent_state::load(dir.path()).get("alice") != Some(&state) {
            assert!(Instant::now() < deadline, "state.json was not written");
            std::thread::sleep(Duration::from_millis(5));
        }
        // A logger started again on the directory has it.
        assert_eq!(Book::open(dir.path()).get("alice"), Some(state));
    }

    #[test]
    fn flush_writes_what_is_pending() {
        let dir = tempfile::tempdir().expect("tempdir");
        let book = Book::open(dir.path());
        book.set("bob", AgentState { version: 2, ..AgentState::default() }).expect("set");
        book.flush();
        assert!(agent_state::load(dir.path()).get("bob").is_some());
    }
}

//! The logger statuses a listing of every session shows, kept from one
//! listing to the next while nothing could have changed them.
//!
//! Asking 100 loggers costs 100 round trips, each waking a process; a
//! status changes only through what its logger writes down. Everything a
//! listing reads of it (the last command and its exit, whether the shell
//! is at its prompt, the prompts seen, what is typed there) follows from
//! the pane's output, which the logger appends to `raw.log` before it
//! publishes what the output changed; the rest (a line typed into a
//! program opening an input region, one ending after a quiet while) is
//! appended to `regions.jsonl`. So a status is kept with the [`Stamp`]s of
//! both files taken *before* it was asked, and only when it accounts for
//! every byte `raw.log` then held (`mark.raw` equals its length: nothing
//! was appended but not yet published). It is used again only while both
//! stamps are the same, the connection to its logger is still open (a
//! dead logger writes nothing more, so its files would look quiet), and
//! no agent of this server typed into the session since it was taken or
//! holds it now (typing opens regions before its echo reaches `raw.log`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dtmcp_core::protocol::Status;
use dtmcp_core::store::files;

use crate::stamped::Stamp;

/// How many sessions' statuses are kept.
const KEPT: usize = 4096;

/// What a session's logger has written down, as far as a status shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// `raw.log`: every byte of output.
    raw: Stamp,
    /// `regions.jsonl`, when there is one.
    regions: Option<Stamp>,
}

impl Written {
    /// The stamps of the files of the session in `dir`; `None` without a
    /// `raw.log`.
    pub fn of(dir: &Path) -> Option<Written> {
        Some(Written { raw: Stamp::of(&dir.join(files::RAW))?, regions: Stamp::of(&dir.join(files::REGIONS)) })
    }
}

/// A status as it was taken, and what was written when it was asked.
#[derive(Clone, Debug)]
struct Kept {
    written: Written,
    status: Arc<Status>,
    taken: Instant,
}

/// What may have happened to a session since its status was kept.
#[derive(Clone, Copy, Debug, Default)]
pub struct Since {
    /// When an agent of this server last typed into it.
    pub typed: Option<Instant>,
    /// Whether an agent holds it now (typing).
    pub held: bool,
    /// Whether the connection to its logger is open.
    pub connected: bool,
}

/// Whether a status asked when the files were `before` may be kept: the
/// logger had published every byte of output `raw.log` held then.
fn keepable(before: &Written, status: &Status) -> bool {
    before.raw.bytes() == status.mark.raw.0
}

/// Whether `kept` still says what the logger would: nothing written since
/// (the files are `now`), nothing typed here since, its logger still there.
fn still_true(kept: &Kept, now: &Written, since: &Since) -> bool {
    since.nothing_since(&kept.written, now, kept.taken)
}

impl Since {
    /// Whether nothing can have changed a session since what was learned
    /// of it at `taken`, when its files were `then`: they are `now` still,
    /// its logger is still connected, and no agent typed there since or
    /// holds it.
    pub fn nothing_since(&self, then: &Written, now: &Written, taken: Instant) -> bool {
        then == now && self.connected && !self.held && self.typed.is_none_or(|t| t < taken)
    }
}

/// The statuses kept, by session directory.
#[derive(Debug, Default)]
pub struct KeptStatuses(Mutex<HashMap<PathBuf, Kept>>);

impl KeptStatuses {
    /// The status kept for the session in `dir`, if it still holds: its
    /// files are `now` and `since` says nothing else happened.
    pub fn get(&self, dir: &Path, now: Option<&Written>, since: &Since) -> Option<Arc<Status>> {
        let now = now?;
        let mut kept = self.lock();
        match kept.get(dir) {
            Some(k) if still_true(k, now, since) => Some(Arc::clone(&k.status)),
            Some(_) => {
                kept.remove(dir);
                None
            }
            None => None,
        }
    }

    /// Keeps `status` of the session in `dir`, asked at `taken` when its
    /// files were `before`, if it may be kept.
    pub fn keep(&self, dir: &Path, before: Option<Written>, status: &Arc<Status>, taken: Instant) {
        let Some(before) = before.filter(|b| keepable(b, status)) else {
            self.lock().remove(dir);
            return;
        };
        let mut kept = self.lock();
        if kept.len() >= KEPT && !kept.contains_key(dir) {
            kept.clear();
        }
        kept.insert(dir.to_path_buf(), Kept { written: before, status: Arc::clone(status), taken });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Kept>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::types::ByteOffset;

    /// A session directory with `raw.log` of `raw` bytes and, when
    /// `regions`, a `regions.jsonl`.
    fn session(raw: usize, regions: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(files::RAW), vec![b'x'; raw]).expect("raw.log");
        if regions {
            std::fs::write(dir.path().join(files::REGIONS), b"{}\n").expect("regions.jsonl");
        }
        dir
    }

    fn status(raw: u64) -> Arc<Status> {
        let mut s = Status::default();
        s.mark.raw = ByteOffset(raw);
        Arc::new(s)
    }

    fn append(path: &Path, bytes: &[u8]) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(path).expect("open");
        f.write_all(bytes).expect("append");
    }

    const QUIET: Since = Since { typed: None, held: false, connected: true };

    #[test]
    fn a_status_is_kept_while_nothing_is_written() {
        let dir = session(10, true);
        let kept = KeptStatuses::default();
        kept.keep(dir.path(), Written::of(dir.path()), &status(10), Instant::now());
        assert!(kept.get(dir.path(), Written::of(dir.path()).as_ref(), &QUIET).is_some());
    }

    #[test]
    fn new_output_or_a_region_record_drops_it() {
        let kept = KeptStatuses::default();
        let dir = session(10, true);
        kept.keep(dir.path(), Written::of(dir.path()), &status(10), Instant::now());
        append(&dir.path().join(files::RAW), b"y");
        assert!(kept.get(dir.path(), Written::of(dir.path()).as_ref(), &QUIET).is_none(), "output came");
        kept.keep(dir.path(), Written::of(dir.path()), &status(11), Instant::now());
        append(&dir.path().join(files::REGIONS), b"{\"id\":2}\n");
        assert!(kept.get(dir.path(), Written::of(dir.path()).as_ref(), &QUIET).is_none(), "a region opened");
        let fresh = session(0, false);
        kept.keep(fresh.path(), Written::of(fresh.path()), &status(0), Instant::now());
        std::fs::write(fresh.path().join(files::REGIONS), b"{}\n").expect("first region");
        assert!(kept.get(fresh.path(), Written::of(fresh.path()).as_ref(), &QUIET).is_none(), "the first region");
    }

    #[test]
    fn a_status_behind_its_output_is_not_kept() {
        // raw.log holds 10 bytes, the logger had published 8 of them: what
        // the last 2 change is not in the status yet.
        let dir = session(10, true);
        let kept = KeptStatuses::default();
        kept.keep(dir.path(), Written::of(dir.path()), &status(8), Instant::now());
        assert!(kept.get(dir.path(), Written::of(dir.path()).as_ref(), &QUIET).is_none());
    }

    #[test]
    fn typing_here_a_hold_or_a_lost_logger_drops_it() {
        let dir = session(10, true);
        let kept = KeptStatuses::default();
        let taken = Instant::now();
        let now = || Written::of(dir.path());
        let keep = || kept.keep(dir.path(), now(), &status(10), taken);
        keep();
        let typed = Since { typed: Some(Instant::now()), ..QUIET };
        assert!(kept.get(dir.path(), now().as_ref(), &typed).is_none(), "typed since");
        keep();
        let before = Since { typed: taken.checked_sub(std::time::Duration::from_millis(1)), ..QUIET };
        assert!(kept.get(dir.path(), now().as_ref(), &before).is_some(), "typed before it was taken");
        assert!(kept.get(dir.path(), now().as_ref(), &Since { held: true, ..QUIET }).is_none(), "held");
        keep();
        assert!(kept.get(dir.path(), now().as_ref(), &Since { connected: false, ..QUIET }).is_none(), "no logger");
    }
}

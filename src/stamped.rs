//! Small files read again only when they change: `meta.json` and
//! `state.json` of each session, which a listing of every session would
//! otherwise open, read and parse once per session per call.
//!
//! Both files are only ever replaced whole (written to a temporary name
//! and renamed over the old one, see `dtmcp_core::store::write_atomic`),
//! so a new version has a new inode. A file's [`Stamp`] (device, inode,
//! size, modification and change times) is taken with one `stat` before
//! it is read: when the stamp is the one held, the value held is the
//! file's; when it differs, the file is read again. A file replaced
//! between the `stat` and the read leaves a value newer than its stamp,
//! which the next look reads again: never older. A file that cannot be
//! `stat`ed is read as before (its error is the reader's to give) and
//! forgets what was held.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What tells one version of a file from another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    /// The stamp of the file at `path` now; `None` when it cannot be had.
    pub fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        })
    }

    /// The file's size in bytes.
    pub fn bytes(&self) -> u64 {
        self.len
    }
}

/// Parsed files by path, each with the stamp it was read under; at most
/// `cap` of them (past that, all are forgotten at once: they are read
/// again on their next use, which is cheap and rare).
pub struct Stamped<T> {
    cap: usize,
    held: Mutex<HashMap<PathBuf, (Stamp, Arc<T>)>>,
}

impl<T> Stamped<T> {
    /// Holds at most `cap` files.
    pub fn new(cap: usize) -> Stamped<T> {
        Stamped { cap, held: Mutex::new(HashMap::new()) }
    }

    /// The file at `path` as `read` makes it, read again only when its
    /// stamp changed since it was last read here.
    pub fn get<E>(&self, path: &Path, read: impl FnOnce(&Path) -> Result<T, E>) -> Result<Arc<T>, E> {
        match Stamp::of(path) {
            Some(stamp) => self.held_or_read(path, stamp, read),
            None => {
                self.lock().remove(path);
                read(path).map(Arc::new)
            }
        }
    }

    /// The same for a file that may well not exist: `None`, with nothing
    /// read, when it cannot be `stat`ed.
    pub fn present(&self, path: &Path, read: impl FnOnce(&Path) -> T) -> Option<Arc<T>> {
        let Some(stamp) = Stamp::of(path) else {
            self.lock().remove(path);
            return None;
        };
        self.held_or_read(path, stamp, |p| Ok::<T, std::convert::Infallible>(read(p))).ok()
    }

    /// The value held for `path` if it was read under `stamp`, else what
    /// `read` makes of it now, then held.
    fn held_or_read<E>(
        &self,
        path: &Path,
        stamp: Stamp,
        read: impl FnOnce(&Path) -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        if let Some((held, value)) = self.lock().get(path)
            && *held == stamp
        {
            return Ok(Arc::clone(value));
        }
        let value = Arc::new(read(path)?);
        let mut held = self.lock();
        if held.len() >= self.cap && !held.contains_key(path) {
            held.clear();
        }
        held.insert(path.to_path_buf(), (stamp, Arc::clone(&value)));
        Ok(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (Stamp, Arc<T>)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T> std::fmt::Debug for Stamped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stamped").field("held", &self.lock().len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Reads `path` through `cache`, counting the reads in `reads`.
    fn read(cache: &Stamped<String>, path: &Path, reads: &Cell<u32>) -> Option<String> {
        let got = cache.get(path, |p| {
            reads.set(reads.get() + 1);
            std::fs::read_to_string(p)
        });
        got.ok().map(|s| s.to_string())
    }

    #[test]
    fn a_file_is_read_once_until_it_is_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("meta.json");
        dtmcp_core::store::write_atomic(&path, b"one").expect("write");
        let (cache, reads) = (Stamped::new(8), Cell::new(0));
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("one"));
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("one"));
        assert_eq!(reads.get(), 1, "unchanged: held");
        // Replaced whole, as the session files are, with as many bytes.
        dtmcp_core::store::write_atomic(&path, b"two").expect("write");
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("two"));
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn a_file_changed_in_place_is_read_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        std::fs::write(&path, b"short").expect("write");
        let (cache, reads) = (Stamped::new(8), Cell::new(0));
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("short"));
        std::fs::write(&path, b"longer now").expect("write");
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("longer now"));
    }

    #[test]
    fn a_removed_file_is_an_error_and_a_new_one_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("meta.json");
        std::fs::write(&path, b"old").expect("write");
        let (cache, reads) = (Stamped::new(8), Cell::new(0));
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("old"));
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(read(&cache, &path, &reads), None, "gone: the reader's error, not the old value");
        std::fs::write(&path, b"new").expect("write");
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("new"));
    }

    #[test]
    fn a_failed_read_is_not_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("meta.json");
        std::fs::write(&path, b"x").expect("write");
        let cache: Stamped<String> = Stamped::new(8);
        let failed: Result<_, &str> = cache.get(&path, |_| Err("unparsable"));
        assert!(failed.is_err());
        let reads = Cell::new(0);
        assert_eq!(read(&cache, &path, &reads).as_deref(), Some("x"));
        assert_eq!(reads.get(), 1, "read again after the failure");
    }

    #[test]
    fn a_missing_file_is_absent_and_nothing_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        let (cache, reads) = (Stamped::new(8), Cell::new(0));
        let count = |p: &Path| {
            reads.set(reads.get() + 1);
            std::fs::read_to_string(p).unwrap_or_default()
        };
        assert!(cache.present(&path, count).is_none());
        assert_eq!(reads.get(), 0);
        std::fs::write(&path, b"left").expect("write");
        assert_eq!(cache.present(&path, count).as_deref().map(String::as_str), Some("left"));
        std::fs::remove_file(&path).expect("remove");
        assert!(cache.present(&path, count).is_none(), "removed: absent, not the old value");
    }

    #[test]
    fn past_its_cap_it_forgets_and_reads_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"a").expect("write");
        std::fs::write(&b, b"b").expect("write");
        let (cache, reads) = (Stamped::new(1), Cell::new(0));
        read(&cache, &a, &reads);
        read(&cache, &b, &reads);
        read(&cache, &a, &reads);
        assert_eq!(reads.get(), 3);
    }
}

//! An index of a session's `regions.jsonl`, kept in memory by a reader and
//! brought up to date from the lines appended since its last look, so that
//! labelling search hits, listing the last regions or finding one region
//! costs the same after 6,000 commands as after one.
//!
//! `regions.jsonl` only grows: the logger appends a record at every change
//! of a region (opened, ended), and the last record of an id wins. The
//! index keeps, per region, what placing a line needs (its lines, depth,
//! exit) and where its last record lies in the file; a whole [`Region`] is
//! read back from there when one is shown. A file that shrank or was
//! replaced (a session made again under its name) is indexed anew (see
//! [`Tail`]).

use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::Deserialize;

use crate::region::{LinePos, Region};
use crate::search::region_scope;
use crate::store::{StoreError, Tail, files};
use crate::types::{LineNo, RegionId};

/// The fields of a region record the index keeps; the others are read
/// back from the file when asked for.
#[derive(Deserialize)]
struct Head {
    id: RegionId,
    depth: u32,
    start: LinePos,
    end: Option<LinePos>,
    exit: Option<i32>,
}

/// One region, as indexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    id: u64,
    /// The first and last line of its output (`last` is `u64::MAX` while it
    /// runs; below `first` when it has none).
    first: u64,
    last: u64,
    depth: u32,
    exit: Option<i32>,
    /// Where its last record lies in `regions.jsonl`, and its length
    /// without the line break.
    offset: u64,
    len: u32,
}

impl Entry {
    /// The order [`crate::search::region_at`] picks the innermost by.
    fn rank(&self) -> (u32, u64, u64) {
        (self.depth, self.first, self.id)
    }

    fn holds(&self, line: u64) -> bool {
        self.first <= line && line <= self.last
    }
}

/// The regions of one session directory.
#[derive(Debug)]
pub struct RegionIndex {
    tail: Tail,
    /// Every region, by id.
    entries: Vec<Entry>,
    /// `reach[i]`: the furthest last line of `entries[..=i]`, so a look
    /// back for the regions holding a line stops where none can.
    reach: Vec<u64>,
    /// Whether first lines never go down in id order (they do not, as the
    /// logger numbers regions in the order they open); a look-up that
    /// relies on it scans everything when it does not hold.
    ordered: bool,
}

impl RegionIndex {
    /// An index of the regions of session directory `dir`; it reads
    /// nothing until [`RegionIndex::refresh`].
    pub fn new(dir: &Path) -> RegionIndex {
        RegionIndex { tail: Tail::new(dir.join(files::REGIONS)), entries: Vec::new(), reach: Vec::new(), ordered: true }
    }

    /// Takes in the records appended since the last refresh. A line that
    /// does not parse (a torn record) is skipped, as
    /// [`crate::store::read_regions`] skips it.
    pub fn refresh(&mut self) -> Result<(), StoreError> {
        let new = self.tail.read_new()?;
        if new.restarted {
            self.entries.clear();
            self.reach.clear();
        }
        let mut changed_from = self.entries.len();
        let mut offset = new.base;
        for line in new.bytes.split_inclusive(|&b| b == b'\n') {
            let body = &line[..line.len() - 1];
            if let Ok(head) = serde_json::from_slice::<Head>(body) {
                let at = self.put(entry_of(&head, offset, body.len()));
                changed_from = changed_from.min(at);
            }
            offset += line.len() as u64;
        }
        if changed_from < self.entries.len() {
            self.reindex(changed_from);
        }
        Ok(())
    }

    /// Adds or replaces the entry of `e.id`; returns its place.
    fn put(&mut self, e: Entry) -> usize {
        match self.entries.binary_search_by_key(&e.id, |x| x.id) {
            Ok(i) => {
                self.entries[i] = e;
                i
            }
            Err(i) => {
                self.entries.insert(i, e);
                i
            }
        }
    }

    /// Recomputes what depends on entries `from..` having changed.
    fn reindex(&mut self, from: usize) {
        self.reach.truncate(from);
        for i in from..self.entries.len() {
            let before = if i == 0 { 0 } else { self.reach[i - 1] };
            self.reach.push(before.max(self.entries[i].last));
        }
        self.ordered = self.entries.windows(2).all(|w| w[0].first <= w[1].first);
    }

    /// How many regions there are (of those that failed only, when asked).
    pub fn count(&self, failed_only: bool) -> usize {
        match failed_only {
            false => self.entries.len(),
            true => self.entries.iter().filter(|e| failed(e)).count(),
        }
    }

    /// The last `n` regions (of those that failed only, when asked), whole,
    /// in id order.
    pub fn recent(&self, n: usize, failed_only: bool) -> Result<Vec<Region>, StoreError> {
        let chosen = self.entries.iter().rev().filter(|e| !failed_only || failed(e)).take(n);
        let mut out: Vec<Region> = Vec::with_capacity(n.min(self.entries.len()));
        for e in chosen {
            out.extend(self.read(e)?);
        }
        out.reverse();
        Ok(out)
    }

    /// Region `id`, whole, if the session has it.
    pub fn region(&self, id: RegionId) -> Result<Option<Region>, StoreError> {
        let Ok(i) = self.entries.binary_search_by_key(&id.0, |e| e.id) else { return Ok(None) };
        self.read(&self.entries[i])
    }

    /// The innermost region whose output holds `line` (as
    /// [`crate::search::region_at`] picks it), if any.
    pub fn at(&self, line: LineNo) -> Option<RegionId> {
        let line = line.0;
        let best = |a: Option<&Entry>, e: &Entry| if a.is_none_or(|a| e.rank() > a.rank()) { Some(*e) } else { None };
        let mut found: Option<Entry> = None;
        if !self.ordered {
            for e in self.entries.iter().filter(|e| e.holds(line)) {
                found = best(found.as_ref(), e).or(found);
            }
            return found.map(|e| RegionId(e.id));
        }
        let mut i = self.entries.partition_point(|e| e.first <= line);
        while i > 0 && self.reach[i - 1] >= line {
            i -= 1;
            let e = &self.entries[i];
            if e.holds(line) {
                found = best(found.as_ref(), e).or(found);
            }
        }
        found.map(|e| RegionId(e.id))
    }

    /// The record of `e`, read back from the file indexed (which only
    /// grows, so it is still there).
    fn read(&self, e: &Entry) -> Result<Option<Region>, StoreError> {
        let Some(file) = self.tail.file() else { return Ok(None) };
        let mut body = vec![0u8; e.len as usize];
        let path = self.tail.path();
        match file.read_exact_at(&mut body, e.offset) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(source) => return Err(StoreError::Io { path: path.to_path_buf(), source }),
        }
        Ok(serde_json::from_slice::<Region>(&body).ok().filter(|r| r.id.0 == e.id))
    }
}

fn entry_of(h: &Head, offset: u64, len: usize) -> Entry {
    let probe = Region { id: h.id, start: h.start, end: h.end, ..Region::default() };
    let scope = region_scope(&probe, LineNo(u64::MAX));
    Entry {
        id: h.id.0,
        first: scope.first.0,
        last: scope.last.0,
        depth: h.depth,
        exit: h.exit,
        offset,
        len: len as u32,
    }
}

fn failed(e: &Entry) -> bool {
    e.exit.is_some_and(|x| x != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::region_at;
    use crate::store::{RegionLog, read_regions};
    use std::io::Write;

    fn region(id: u64, depth: u32, first: u64, end: Option<(u64, u32)>, exit: Option<i32>) -> Region {
        Region {
            id: RegionId(id),
            depth,
            command: format!("command {id}"),
            start: LinePos { line: LineNo(first), bytes: 0 },
            end: end.map(|(line, bytes)| LinePos { line: LineNo(line), bytes }),
            exit,
            ..Region::default()
        }
    }

    /// Every line's region, by the index and by a scan of all regions.
    fn agree(dir: &Path, index: &RegionIndex, lines: u64) {
        let all = read_regions(dir).expect("read");
        for line in 1..=lines {
            let want = region_at(&all, LineNo(line)).map(|r| r.id);
            assert_eq!(index.at(LineNo(line)), want, "line {line}");
        }
        assert_eq!(index.count(false), all.len());
        assert_eq!(index.recent(usize::MAX, false).expect("recent"), all);
    }

    #[test]
    fn grows_with_the_file_and_agrees_with_a_full_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = RegionLog::open(dir.path()).expect("log");
        let mut index = RegionIndex::new(dir.path());
        index.refresh().expect("empty");
        assert_eq!(index.count(false), 0);
        // An outer shell's command holding a nested one, then commands
        // one after another; regions open, then end.
        log.append(&region(1, 0, 2, None, None)).expect("append");
        log.append(&region(2, 1, 4, None, None)).expect("append");
        index.refresh().expect("refresh");
        agree(dir.path(), &index, 12);
        log.append(&region(2, 1, 4, Some((6, 0)), Some(3))).expect("append");
        log.append(&region(1, 0, 2, Some((8, 2)), Some(0))).expect("append");
        for id in 3..=5 {
            log.append(&region(id, 0, 2 * id + 3, Some((2 * id + 4, 0)), Some(0))).expect("append");
        }
        index.refresh().expect("refresh");
        agree(dir.path(), &index, 16);
        assert_eq!(index.count(true), 1);
        assert_eq!(index.recent(5, true).expect("failed")[0].id, RegionId(2));
        assert_eq!(index.region(RegionId(4)).expect("read").map(|r| r.command), Some("command 4".into()));
        assert_eq!(index.region(RegionId(9)).expect("read"), None);
    }

    #[test]
    fn a_torn_line_waits_and_a_replaced_file_starts_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(files::REGIONS);
        let mut line = serde_json::to_vec(&region(1, 0, 1, Some((3, 0)), Some(0))).expect("json");
        line.push(b'\n');
        let (half, rest) = line.split_at(10);
        std::fs::write(&path, half).expect("write");
        let mut index = RegionIndex::new(dir.path());
        index.refresh().expect("torn");
        assert_eq!(index.count(false), 0);
        std::fs::OpenOptions::new().append(true).open(&path).and_then(|mut f| f.write_all(rest)).expect("rest");
        index.refresh().expect("whole");
        assert_eq!(index.at(LineNo(2)), Some(RegionId(1)));
        // The session made again under the same name: a new, shorter file.
        std::fs::remove_file(&path).expect("remove");
        let mut log = RegionLog::open(dir.path()).expect("log");
        log.append(&region(1, 0, 5, None, None)).expect("append");
        index.refresh().expect("again");
        assert_eq!(index.at(LineNo(2)), None);
        agree(dir.path(), &index, 8);
    }
}

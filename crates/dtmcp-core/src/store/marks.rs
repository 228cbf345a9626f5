//! The summary index: the lines of `session.txt` a summary looks at,
//! noted by the logger as it cooks, so that the summary of a clipped reply
//! costs the router the same for ten lines of output as for ten million.
//!
//! Two files, each a 16-byte header and then 16-byte records in line
//! order:
//!
//! - `summary.idx`: failure lines and the rustc locations that may follow
//!   an error;
//! - `tallies.idx`: result tallies.
//!
//! The header is [`MAGIC`] and then the first line the file covers (a
//! little-endian u64): lines before it were cooked by a logger that kept
//! no index, and a summary reaching back there scans the text instead.
//! A record is the line's number and a tag, both little-endian u64: the
//! tag's two low bits say the kind ([`code`]), the rest counts the records
//! of that file's main kind up to this one (failures in `summary.idx`,
//! tallies in `tallies.idx`), so the failures between two lines are one
//! subtraction away however many there are.
//!
//! The writer appends a block's records before that block's text and line
//! index, so a reader that sees line `n` in `lines.idx` sees its record
//! too. Lines are classified by [`summary::Marker`], the classifier the
//! summary itself uses: what the index notes is what a scan would look at.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{LineReader, StoreError, files, io_err, open_append};
use crate::summary::{self, Kind, Marker, Summarizer, Summary};
use crate::types::LineNo;

/// The first eight bytes of both files.
pub const MAGIC: &[u8; 8] = b"dtmcpmk1";
const RECORD: u64 = 16;
const HEADER: u64 = 16;
/// Records read at a time while the summary picks failures.
const CHUNK: u64 = 64;

/// The two low bits of a record's tag.
fn code(kind: Kind) -> u64 {
    match kind {
        Kind::Failure => 1,
        Kind::Location => 2,
        Kind::Tally => 3,
    }
}

/// Appends records as the lines they note are written.
#[derive(Debug)]
pub(super) struct MarkWriter {
    summary: IndexFile,
    tallies: IndexFile,
    marker: Marker,
}

#[derive(Debug)]
struct IndexFile {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    /// Records of the main kind so far, buffered or not.
    counted: u64,
}

impl MarkWriter {
    /// Opens both files of `dir`, keeping only the records of its first
    /// `lines` lines; a missing or unreadable file starts over, covering
    /// the lines after those.
    pub(super) fn open(dir: &Path, text: &LineReader, lines: u64) -> Result<MarkWriter, StoreError> {
        let open = |name: &str| -> Result<IndexFile, StoreError> {
            let path = dir.join(name);
            Ok(IndexFile { file: open_append(&path)?, path, buf: Vec::new(), counted: 0 })
        };
        let (summary, tallies) = (open(files::SUMMARY)?, open(files::TALLIES)?);
        let mut w = MarkWriter { summary, tallies, marker: Marker::default() };
        w.cut_back(text, lines)?;
        Ok(w)
    }

    /// Drops buffered records and those past line `lines` on disk, and
    /// shows the classifier the last lines kept again: a rustc error among
    /// them still claims the location that may come next, as it would have
    /// in a writer that never stopped.
    pub(super) fn cut_back(&mut self, text: &LineReader, lines: u64) -> Result<(), StoreError> {
        self.summary.cut_back(lines)?;
        self.tallies.cut_back(lines)?;
        self.marker = Marker::default();
        for n in lines.saturating_sub(summary::LOCATION_WITHIN - 1).max(1)..=lines {
            self.marker.look(n, &text.one(n)?);
        }
        Ok(())
    }

    /// Notes the summary lines of `text`, whole lines numbered from `first`.
    pub(super) fn note(&mut self, text: &[u8], first: u64) {
        let (summary, tallies) = (&mut self.summary, &mut self.tallies);
        summary::mark_text(&mut self.marker, text, first, |number, kind, _| match kind {
            Kind::Tally => tallies.push(number, kind, true),
            Kind::Failure => summary.push(number, kind, true),
            Kind::Location => summary.push(number, kind, false),
        });
    }

    /// Writes the buffered records out.
    pub(super) fn flush(&mut self) -> Result<(), StoreError> {
        self.summary.flush()?;
        self.tallies.flush()
    }
}

impl IndexFile {
    fn push(&mut self, line: u64, kind: Kind, counts: bool) {
        self.counted += u64::from(counts);
        self.buf.extend_from_slice(&line.to_le_bytes());
        self.buf.extend_from_slice(&(self.counted << 2 | code(kind)).to_le_bytes());
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf).map_err(io_err(&self.path))?;
            self.buf.clear();
        }
        Ok(())
    }

    fn cut_back(&mut self, lines: u64) -> Result<(), StoreError> {
        self.buf.clear();
        // The file is open for appending only: it is read through a
        // descriptor of its own.
        let Some(reading) = Opened::at(&self.path)?.filter(|o| o.from <= lines + 1) else {
            // No index, or one whose lines were cut away: it covers what
            // comes from now on.
            self.file.set_len(0).map_err(io_err(&self.path))?;
            let mut header = MAGIC.to_vec();
            header.extend_from_slice(&(lines + 1).to_le_bytes());
            self.counted = 0;
            return self.file.write_all(&header).map_err(io_err(&self.path));
        };
        let reader = reading.index();
        let keep = reader.lower_bound(lines + 1).map_err(io_err(&self.path))?;
        self.file.set_len(HEADER + keep * RECORD).map_err(io_err(&self.path))?;
        self.counted = match keep {
            0 => 0,
            k => reader.record(k - 1).map_err(io_err(&self.path))?.count,
        };
        Ok(())
    }
}

/// One record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    line: u64,
    code: u64,
    count: u64,
}

/// Records of one open file, read where needed.
struct Index<'a> {
    file: &'a File,
    records: u64,
}

impl Index<'_> {
    fn record(&self, i: u64) -> std::io::Result<Record> {
        let mut b = [0u8; RECORD as usize];
        self.file.read_exact_at(&mut b, HEADER + i * RECORD)?;
        Ok(decode(&b))
    }

    /// Records `from..to`.
    fn span(&self, from: u64, to: u64) -> std::io::Result<Vec<Record>> {
        let mut b = vec![0u8; (to.saturating_sub(from) * RECORD) as usize];
        self.file.read_exact_at(&mut b, HEADER + from * RECORD)?;
        Ok(b.chunks_exact(RECORD as usize).map(decode).collect())
    }

    /// The first record whose line is `line` or later (`records` if none).
    fn lower_bound(&self, line: u64) -> std::io::Result<u64> {
        let (mut lo, mut hi) = (0, self.records);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.record(mid)?.line < line {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The count before record `i`.
    fn count_before(&self, i: u64) -> std::io::Result<u64> {
        if i == 0 { Ok(0) } else { Ok(self.record(i - 1)?.count) }
    }
}

fn decode(b: &[u8]) -> Record {
    let word = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap_or_default());
    let tag = word(8..16);
    Record { line: word(0..8), code: tag & 3, count: tag >> 2 }
}

/// An index file opened for reading, with the first line it covers.
struct Opened {
    file: File,
    from: u64,
    records: u64,
}

impl Opened {
    /// The file at `path`; `None` when it is missing or has no header.
    fn at(path: &Path) -> Result<Option<Opened>, StoreError> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(path)(e)),
        };
        let len = file.metadata().map_err(io_err(path))?.len();
        if len < HEADER {
            return Ok(None);
        }
        let mut h = [0u8; HEADER as usize];
        file.read_exact_at(&mut h, 0).map_err(io_err(path))?;
        let (magic, from) = h.split_at(8);
        if magic != MAGIC {
            return Ok(None);
        }
        let from = u64::from_le_bytes(from.try_into().unwrap_or_default());
        Ok(Some(Opened { file, from, records: (len - HEADER) / RECORD }))
    }

    /// Its records.
    fn index(&self) -> Index<'_> {
        Index { file: &self.file, records: self.records }
    }
}

/// The summary of lines `first..=last` from the summary index, reading
/// the text of the lines it keeps and little else; `None` when the index
/// does not reach back to `first` (a session a logger without it cooked),
/// for the caller to scan those lines instead.
pub fn summarize(dir: &Path, first: LineNo, last: LineNo) -> Result<Option<Summary>, StoreError> {
    let (Some(s), Some(t)) = (Opened::at(&dir.join(files::SUMMARY))?, Opened::at(&dir.join(files::TALLIES))?) else {
        return Ok(None);
    };
    if first.0 < s.from.max(t.from) {
        return Ok(None);
    }
    let text = LineReader::open(dir)?;
    let at = |name: &'static str| move |source| StoreError::Io { path: dir.join(name), source };
    let (failures, tallies) = (s.index(), t.index());
    let mut sum = Summarizer::new();

    // Failures and locations in line order, until no more can be kept.
    let lo = failures.lower_bound(first.0).map_err(at(files::SUMMARY))?;
    let hi = failures.lower_bound(last.0 + 1).map_err(at(files::SUMMARY))?;
    let (mut next, mut fed) = (lo, 0);
    'feed: while next < hi {
        let to = (next + CHUNK).min(hi);
        for r in failures.span(next, to).map_err(at(files::SUMMARY))? {
            if sum.full() {
                break 'feed;
            }
            sum.feed(r.line, &text.one(r.line)?);
            fed += u64::from(r.code == code(Kind::Failure));
        }
        next = to;
    }
    let before = failures.count_before(lo).map_err(at(files::SUMMARY))?;
    let through = failures.count_before(hi).map_err(at(files::SUMMARY))?;
    sum.count_more(through.saturating_sub(before).saturating_sub(fed));

    // The last tallies of the range.
    let lo = tallies.lower_bound(first.0).map_err(at(files::TALLIES))?;
    let hi = tallies.lower_bound(last.0 + 1).map_err(at(files::TALLIES))?;
    let from = hi.saturating_sub(summary::MAX_TALLIES as u64).max(lo);
    for r in tallies.span(from, hi).map_err(at(files::TALLIES))? {
        sum.feed(r.line, &text.one(r.line)?);
    }
    Ok(Some(sum.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LineWriter;

    /// Lines a summary looks at, and lines it does not.
    const POOL: [&str; 14] = [
        "plain line",
        "error[E0308]: mismatched types",
        " --> src/a.rs:1:2",
        "  |",
        "FAIL: t1",
        "test x ... FAILED",
        "test result: FAILED. 1 passed; 1 failed",
        "ok",
        "",
        "Result: PASS",
        "make: *** [all] Error 2",
        "  --> stray",
        "error: could not compile `x`",
        "Files=3, Tests=9",
    ];

    /// What scanning every line of the range gives.
    fn scanned(dir: &Path, first: u64, last: u64) -> Summary {
        let mut s = Summarizer::new();
        LineReader::open(dir)
            .expect("reader")
            .scan(LineNo(first), LineNo(last), |number, block| {
                summary::feed_text(&mut s, block, number);
            })
            .expect("scan");
        s.finish()
    }

    fn write(dir: &Path, lines: &[&str], flush_every: usize) {
        let mut w = LineWriter::open(dir).expect("writer");
        for (i, l) in lines.iter().enumerate() {
            w.push(l).expect("push");
            if (i + 1) % flush_every.max(1) == 0 {
                w.flush().expect("flush");
            }
        }
        w.flush().expect("flush");
    }

    proptest::proptest! {
        #[test]
        fn the_index_gives_what_a_scan_gives(
            picks in proptest::collection::vec(0usize..POOL.len(), 1..400),
            flush_every in 1usize..50,
            ends in (0.0f64..1.0, 0.0f64..1.0),
        ) {
            let dir = tempfile::tempdir().expect("tmp");
            let lines: Vec<&str> = picks.iter().map(|&i| POOL[i]).collect();
            write(dir.path(), &lines, flush_every);
            let n = lines.len() as u64;
            let a = 1 + (ends.0 * n as f64) as u64 % n;
            let b = 1 + (ends.1 * n as f64) as u64 % n;
            let (first, last) = (a.min(b), a.max(b));
            let got = summarize(dir.path(), LineNo(first), LineNo(last)).expect("summarize");
            proptest::prop_assert_eq!(got, Some(scanned(dir.path(), first, last)));
        }
    }

    proptest::proptest! {
        #[test]
        fn a_writer_started_again_anywhere_keeps_the_index_a_scan_agrees_with(
            picks in proptest::collection::vec(0usize..POOL.len(), 1..200),
            restarts in proptest::collection::vec(1usize..200, 0..4),
        ) {
            let dir = tempfile::tempdir().expect("tmp");
            let lines: Vec<&str> = picks.iter().map(|&i| POOL[i]).collect();
            let mut cuts: Vec<usize> = restarts.into_iter().filter(|&c| c < lines.len()).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut from = 0;
            for cut in cuts.into_iter().chain([lines.len()]) {
                write(dir.path(), &lines[from..cut], 7);
                from = cut;
            }
            let n = lines.len() as u64;
            let got = summarize(dir.path(), LineNo(1), LineNo(n)).expect("summarize");
            proptest::prop_assert_eq!(got, Some(scanned(dir.path(), 1, n)));
        }
    }

    #[test]
    fn a_hundred_thousand_failures_are_counted_without_being_read() {
        let dir = tempfile::tempdir().expect("tmp");
        let lines: Vec<String> = (0..100_000)
            .map(|i| match i % 1000 {
                999 => format!("Result: FAIL {i}"),
                _ => format!("FAIL: case{i}"),
            })
            .collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        write(dir.path(), &refs, 4096);
        for (first, last) in [(1, 100_000), (50, 99_950), (70_001, 70_005)] {
            let got = summarize(dir.path(), LineNo(first), LineNo(last)).expect("summarize").expect("covered");
            assert_eq!(got, scanned(dir.path(), first, last), "{first}-{last}");
        }
        let all = summarize(dir.path(), LineNo(1), LineNo(100_000)).expect("summarize").expect("covered");
        assert_eq!(all.more, 99_900 - summary::MAX_PICKED as u64);
        assert_eq!(all.lines.last().map(|(n, _)| *n), Some(100_000));
    }

    #[test]
    fn lines_cooked_before_the_index_are_left_to_a_scan() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), &["FAIL: old", "plain"], 1);
        // A logger from before the index: its lines are there, the index not.
        for name in [files::SUMMARY, files::TALLIES] {
            std::fs::remove_file(dir.path().join(name)).expect("rm");
        }
        assert_eq!(summarize(dir.path(), LineNo(1), LineNo(2)).expect("summarize"), None);
        write(dir.path(), &["FAIL: new", "Result: FAIL"], 1);
        assert_eq!(summarize(dir.path(), LineNo(1), LineNo(4)).expect("summarize"), None, "line 1 is older");
        let got = summarize(dir.path(), LineNo(3), LineNo(4)).expect("summarize").expect("covered");
        let texts: Vec<&str> = got.lines.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["FAIL: new", "Result: FAIL"]);
    }

    #[test]
    fn a_writer_cut_back_forgets_the_records_of_the_lines_it_dropped() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), &["FAIL: a", "FAIL: b", "Result: PASS", "FAIL: c"], 1);
        // The last line's text is lost (a full disk, a crash): its index
        // entry points past the text's end.
        let text = dir.path().join(files::TEXT);
        let len = std::fs::metadata(&text).expect("meta").len();
        std::fs::OpenOptions::new().write(true).open(&text).expect("open").set_len(len - 3).expect("cut");
        let mut w = LineWriter::open(dir.path()).expect("reopen");
        assert_eq!(w.lines(), 3);
        w.push("FAIL: d").expect("push");
        w.flush().expect("flush");
        let got = summarize(dir.path(), LineNo(1), LineNo(4)).expect("summarize").expect("covered");
        assert_eq!(got, scanned(dir.path(), 1, 4));
        let texts: Vec<&str> = got.lines.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["FAIL: a", "FAIL: b", "Result: PASS", "FAIL: d"]);
        // The failure count carried on from the records kept.
        let s = Opened::at(&dir.path().join(files::SUMMARY)).expect("open").expect("index");
        assert_eq!(s.index().record(s.records - 1).expect("record").count, 3);
    }

    #[test]
    fn a_record_past_the_text_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), &["FAIL: a", "plain"], 1);
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(files::SUMMARY)).expect("open");
        f.write_all(&2u64.to_le_bytes()).and_then(|()| f.write_all(&(2u64 << 2 | 1).to_le_bytes())).expect("write");
        f.write_all(&9u64.to_le_bytes()).and_then(|()| f.write_all(&(3u64 << 2 | 1).to_le_bytes())).expect("write");
        // Line 2 is plain, which a summary of it then leaves out; line 9
        // does not exist.
        let got = summarize(dir.path(), LineNo(1), LineNo(2)).expect("summarize").expect("covered");
        assert_eq!(got.lines, [(1, "FAIL: a".to_string())]);
        assert!(summarize(dir.path(), LineNo(1), LineNo(9)).is_err());
    }

    #[test]
    fn a_location_after_a_restart_still_follows_its_error() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), &["plain", "error[E0308]: mismatched types"], 1);
        // A writer started again (a restarted logger) between the error and
        // its location.
        write(dir.path(), &["  |", " --> src/lib.rs:2:48"], 1);
        let got = summarize(dir.path(), LineNo(1), LineNo(4)).expect("summarize").expect("covered");
        assert_eq!(got, scanned(dir.path(), 1, 4));
        assert_eq!(got.lines.len(), 2, "{got:?}");
    }

    #[test]
    fn a_damaged_header_starts_the_index_over() {
        let dir = tempfile::tempdir().expect("tmp");
        write(dir.path(), &["FAIL: a"], 1);
        std::fs::write(dir.path().join(files::SUMMARY), b"garbage").expect("write");
        write(dir.path(), &["FAIL: b"], 1);
        assert_eq!(summarize(dir.path(), LineNo(1), LineNo(2)).expect("summarize"), None);
        let got = summarize(dir.path(), LineNo(2), LineNo(2)).expect("summarize").expect("covered");
        assert_eq!(got.lines, [(2, "FAIL: b".to_string())]);
    }
}

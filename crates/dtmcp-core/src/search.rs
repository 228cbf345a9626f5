//! The search core: a regex over the cooked lines of a session directory,
//! counting matching lines and picking one page of them.
//!
//! The text is streamed from `session.txt` in large blocks that end at a
//! line break, and the regex runs over each block whole: no line table, no
//! per-line regex call, no `String` of the file. The pattern is compiled so
//! that no match can run over a line break ([`pattern`]), so a match lies
//! in its line: it is counted once, and the search resumes after that
//! line, each byte looked at a bounded number of times. Only the hits of
//! the requested page get a line number, found by binary search in
//! `lines.idx`, so counting costs one pass of the regex and nothing per
//! line. The same code serves live and closed sessions: the logger makes
//! every line visible on disk before it reports it.
//!
//! A caller may stop a search between blocks ([`search_until`]): when it
//! has taken long enough, or nobody waits for it any more. What was found
//! up to there is answered, with the last line searched.

mod pattern;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use regex::bytes::Regex;

use crate::region::Region;
use crate::store::{LineReader, StoreError, files};
use crate::types::LineNo;

pub use pattern::{MAX_PATTERN, compile};

/// How much of `session.txt` is read at a time. A line longer than this
/// grows the buffer to hold it.
const BLOCK: usize = 1 << 17;

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The pattern is not a valid regex.
    #[error("invalid pattern: {0}")]
    Pattern(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Lines `first..=last` of the log; empty when `last < first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    /// The first line searched.
    pub first: LineNo,
    /// The last line searched, inclusive.
    pub last: LineNo,
}

/// Which hits to return: those numbered `offset..offset + max_hits`,
/// counting from 0 in line order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// Hits to skip.
    pub offset: u64,
    /// Hits to return at most.
    pub max_hits: u64,
}

/// What a search found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Matching lines in the scope.
    pub total: u64,
    /// The page's matching lines, in order.
    pub hits: Vec<LineNo>,
    /// The lines actually searched (the scope clipped to the log).
    pub scope: Option<Scope>,
    /// Set when the search was stopped before the end of its scope: the
    /// last line it searched (the line before the scope when none). The
    /// count and the hits cover the lines up to it.
    pub stopped_after: Option<LineNo>,
}

/// Searches the session directory `dir` for lines matching `re`, within
/// `scope` (the whole log when `None`).
pub fn search(dir: &Path, re: &Regex, scope: Option<Scope>, page: Page) -> Result<Found, SearchError> {
    search_until(dir, re, scope, page, &|| false)
}

/// [`search`], asking `stop` after each block whether to stop there.
pub fn search_until(
    dir: &Path,
    re: &Regex,
    scope: Option<Scope>,
    page: Page,
    stop: &dyn Fn() -> bool,
) -> Result<Found, SearchError> {
    let reader = LineReader::open(dir)?;
    let (lines, _) = reader.extent()?;
    let wanted = scope.unwrap_or(Scope { first: LineNo(1), last: LineNo(lines) });
    let (first, last) = (wanted.first.0.max(1), wanted.last.0.min(lines));
    if first > last {
        return Ok(Found::default());
    }
    let (start, end) = (reader.line_end(first - 1)?, reader.line_end(last)?);
    let path = dir.join(files::TEXT);
    let text = File::open(&path).map_err(|source| StoreError::Io { path: path.clone(), source })?;
    let mut counter = Counter { re, page, total: 0, starts: Vec::new() };
    let reached = stream(&text, start, end, |block, base| {
        counter.block(block, base);
        !stop()
    })
    .map_err(|source| StoreError::Io { path, source })?;
    let mut hits = Vec::with_capacity(counter.starts.len());
    let mut low = first;
    for offset in counter.starts {
        low = line_starting_at(&reader, offset, low, last)?;
        hits.push(LineNo(low));
    }
    let stopped_after = match reached < end {
        true => Some(LineNo(line_starting_at(&reader, reached, first, last)? - 1)),
        false => None,
    };
    Ok(Found {
        total: counter.total,
        hits,
        scope: Some(Scope { first: LineNo(first), last: LineNo(last) }),
        stopped_after,
    })
}

/// Counts matching lines block by block and keeps the page's line starts.
struct Counter<'a> {
    re: &'a Regex,
    page: Page,
    total: u64,
    /// Offsets in `session.txt` of the page's matching lines.
    starts: Vec<u64>,
}

impl Counter<'_> {
    /// Handles one block of whole lines that begins at file offset `base`.
    /// No match leaves its line (see [`pattern`]), so each line is looked
    /// at from its start once at most.
    fn block(&mut self, block: &[u8], base: u64) {
        let mut at = 0;
        while at < block.len() {
            let Some(m) = self.re.find_at(block, at) else { break };
            if m.start() >= block.len() {
                break;
            }
            let line_start = memchr::memrchr(b'\n', &block[..m.start()]).map_or(0, |i| i + 1);
            let line_end = memchr::memchr(b'\n', &block[m.start()..]).map_or(block.len(), |i| m.start() + i);
            self.hit(base + line_start as u64);
            at = line_end + 1;
        }
    }

    fn hit(&mut self, line_start: u64) {
        let wanted = self.page.offset..self.page.offset.saturating_add(self.page.max_hits);
        if wanted.contains(&self.total) {
            self.starts.push(line_start);
        }
        self.total += 1;
    }
}

/// Feeds bytes `start..end` of `file` to `each` in blocks that end with a
/// line break (the last may not, if the file does not), with each block's
/// offset in the file, until `each` says to stop (`false`). Returns the
/// offset up to which blocks were handed out.
fn stream(file: &File, start: u64, end: u64, mut each: impl FnMut(&[u8], u64) -> bool) -> std::io::Result<u64> {
    let mut buf = vec![0u8; BLOCK];
    let mut carry = 0usize; // bytes at the front of buf not yet handed out
    let mut pos = start; // file offset of buf[carry]
    while pos < end || carry > 0 {
        if carry == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let want = (buf.len() - carry).min((end - pos) as usize);
        let n = if want == 0 { 0 } else { file.read_at(&mut buf[carry..carry + want], pos)? };
        let filled = carry + n;
        let base = pos - carry as u64;
        pos += n as u64;
        let at_end = n == 0 || pos >= end;
        let cut = match memchr::memrchr(b'\n', &buf[..filled]) {
            _ if at_end => filled,
            Some(i) => i + 1,
            None => {
                carry = filled;
                continue;
            }
        };
        if !each(&buf[..cut], base) {
            return Ok(base + cut as u64);
        }
        buf.copy_within(cut..filled, 0);
        carry = filled - cut;
        if n == 0 {
            break;
        }
    }
    Ok(end)
}

/// The number of the line that starts at `offset`, searching lines
/// `low..=high` of the index (the smallest line whose end lies past it).
fn line_starting_at(reader: &LineReader, offset: u64, mut low: u64, mut high: u64) -> Result<u64, StoreError> {
    while low < high {
        let mid = low + (high - low) / 2;
        if reader.line_end(mid)? > offset {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    Ok(low)
}

/// The lines of a region's output: from its start line to the line its end
/// lies in (the line before, when it ends at a line start), or to `last`
/// while it runs.
pub fn region_scope(r: &Region, last: LineNo) -> Scope {
    let end = match r.end {
        Some(pos) if pos.bytes > 0 => pos.line,
        Some(pos) => LineNo(pos.line.0.saturating_sub(1)),
        None => last,
    };
    Scope { first: r.start.line, last: end }
}

/// The innermost region whose output holds `line`, if any.
pub fn region_at(regions: &[Region], line: LineNo) -> Option<&Region> {
    regions
        .iter()
        .filter(|r| {
            let s = region_scope(r, LineNo(u64::MAX));
            s.first <= line && line <= s.last
        })
        .max_by_key(|r| (r.depth, r.start.line, r.id))
}

/// One line to show: a hit, or context around one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    /// Its number.
    pub line: LineNo,
    /// Its text (invalid UTF-8 replaced).
    pub text: String,
    /// Whether it matched.
    pub hit: bool,
}

/// The hits with `context` lines before and after each, kept within
/// `scope`, as groups of consecutive lines (overlapping context merged).
pub fn with_context(dir: &Path, hits: &[LineNo], context: u64, scope: Scope) -> Result<Vec<Vec<Shown>>, StoreError> {
    let reader = LineReader::open(dir)?;
    let mut groups: Vec<(u64, u64)> = Vec::new();
    for h in hits {
        let a = h.0.saturating_sub(context).max(scope.first.0);
        let b = (h.0 + context).min(scope.last.0);
        match groups.last_mut() {
            Some(g) if a <= g.1 + 1 => g.1 = g.1.max(b),
            _ => groups.push((a, b)),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (a, b) in groups {
        let texts = reader.read(LineNo(a), b - a + 1)?;
        let shown = texts
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                let line = LineNo(a + i as u64);
                Shown { line, text, hit: hits.binary_search(&line).is_ok() }
            })
            .collect();
        out.push(shown);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::LinePos;
    use crate::store::LineWriter;
    use crate::types::RegionId;

    fn session(lines: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = LineWriter::open(dir.path()).expect("open");
        for l in lines {
            w.push(l).expect("push");
        }
        w.flush().expect("flush");
        dir
    }

    fn all(max_hits: u64) -> Page {
        Page { offset: 0, max_hits }
    }

    fn find(dir: &Path, pattern: &str, scope: Option<Scope>, page: Page) -> Found {
        search(dir, &compile(pattern).expect("regex"), scope, page).expect("search")
    }

    fn nums(found: &Found) -> Vec<u64> {
        found.hits.iter().map(|l| l.0).collect()
    }

    #[test]
    fn counts_matching_lines_once_each() {
        let dir = session(&["error one error", "fine", "Error two", "error"]);
        let f = find(dir.path(), "error", None, all(20));
        assert_eq!((f.total, nums(&f)), (2, vec![1, 4]));
        assert_eq!(find(dir.path(), "(?i)^error", None, all(20)).total, 3);
        assert_eq!(find(dir.path(), "^$|x", None, all(20)).total, 0);
        assert_eq!(find(dir.path(), "", None, all(20)).total, 4);
    }

    #[test]
    fn matches_never_span_lines() {
        let dir = session(&["abc", "def", "ab", "c"]);
        assert_eq!(find(dir.path(), r"c\sd", None, all(20)).total, 0);
        let f = find(dir.path(), r"b\s*c|^d", None, all(20));
        assert_eq!(nums(&f), vec![1, 2]);
        assert_eq!(find(dir.path(), "[^x]+$", None, all(20)).total, 4);
    }

    #[test]
    fn pages_split_the_hits_and_the_total_stays() {
        let lines: Vec<String> = (1..=50).map(|i| format!("n{i}")).collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dir = session(&refs);
        let f = find(dir.path(), "1", None, Page { offset: 3, max_hits: 4 });
        assert_eq!(f.total, 14);
        assert_eq!(nums(&f), vec![12, 13, 14, 15]);
        assert!(find(dir.path(), "1", None, Page { offset: 14, max_hits: 4 }).hits.is_empty());
    }

    #[test]
    fn a_scope_restricts_hits_and_context() {
        let dir = session(&["x1", "x2", "x3", "x4", "x5"]);
        let scope = Scope { first: LineNo(2), last: LineNo(3) };
        let f = find(dir.path(), "x", Some(scope), all(20));
        assert_eq!((f.total, nums(&f)), (2, vec![2, 3]));
        let groups = with_context(dir.path(), &f.hits, 5, scope).expect("context");
        let shown: Vec<u64> = groups.concat().iter().map(|s| s.line.0).collect();
        assert_eq!(shown, vec![2, 3]);
        let empty = Scope { first: LineNo(4), last: LineNo(3) };
        assert_eq!(find(dir.path(), "x", Some(empty), all(20)).total, 0);
    }

    #[test]
    fn context_marks_hits_and_merges_overlaps() {
        let dir = session(&["a", "hit", "b", "c", "hit", "d", "e", "f", "g", "hit"]);
        let f = find(dir.path(), "hit", None, all(20));
        let groups = with_context(dir.path(), &f.hits, 1, f.scope.expect("scope")).expect("context");
        let lines: Vec<Vec<(u64, bool)>> =
            groups.iter().map(|g| g.iter().map(|s| (s.line.0, s.hit)).collect()).collect();
        assert_eq!(
            lines,
            vec![
                vec![(1, false), (2, true), (3, false), (4, false), (5, true), (6, false)],
                vec![(9, false), (10, true)]
            ]
        );
    }

    #[test]
    fn invalid_regex_names_the_problem() {
        let err = compile("a(b").expect_err("invalid");
        let text = err.to_string();
        assert!(text.starts_with("invalid pattern:"), "{text}");
        assert!(text.contains("unclosed group"), "{text}");
    }

    #[test]
    fn invalid_utf8_is_searched_and_shown_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(files::TEXT), b"ok\nbad \xff\xfe here\n").expect("text");
        let idx: Vec<u8> = [3u64, 15].iter().flat_map(|n| n.to_le_bytes()).collect();
        std::fs::write(dir.path().join(files::INDEX), idx).expect("index");
        let f = find(dir.path(), "here", None, all(20));
        assert_eq!(nums(&f), vec![2]);
        let groups = with_context(dir.path(), &f.hits, 0, f.scope.expect("scope")).expect("context");
        assert_eq!(groups[0][0].text, "bad \u{fffd}\u{fffd} here");
        assert_eq!(find(dir.path(), r"(?-u)\xff", None, all(20)).total, 1);
    }

    #[test]
    fn block_boundaries_never_change_results() {
        // Lines longer than a block, and many blocks.
        let long = "y".repeat(BLOCK + 10);
        let mut lines: Vec<String> = (0..300_000).map(|i| format!("line {i}")).collect();
        lines[150_000] = format!("{long} needle");
        lines[299_999] = "needle at the end".into();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dir = session(&refs);
        let f = find(dir.path(), "needle|line 7$", None, all(20));
        assert_eq!(nums(&f), vec![8, 150_001, 300_000]);
        assert_eq!(find(dir.path(), "^line", None, all(0)).total, 299_998);
        let middle = Some(Scope { first: LineNo(100_000), last: LineNo(200_000) });
        assert_eq!(nums(&find(dir.path(), "needle", middle, all(20))), vec![150_001]);
        let f = find(dir.path(), "^line", middle, Page { offset: 99_999, max_hits: 5 });
        assert_eq!((f.total, nums(&f)), (100_000, vec![200_000]));
    }

    #[test]
    fn a_pattern_that_would_run_over_line_breaks_stays_in_its_line() {
        // `\s` once took the line break, and each line's search scanned
        // to the end of its block: minutes on a long log.
        let re = compile(r"(\w+\s*)*$").expect("regex");
        let m = re.find_at(b"ab cd\nef\ngh\n", 0).expect("a match");
        assert_eq!(m.range(), 0..5, "the match ends with its line");
        let lines: Vec<String> = (0..50_000).map(|i| format!("word{i} more words")).collect();
        let dir = session(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(find(dir.path(), r"(\w+\s*)*$", None, all(5)).total, 50_000);
    }

    #[test]
    fn a_search_stopped_between_blocks_says_how_far_it_got() {
        let lines: Vec<String> = (1..=100_000).map(|i| format!("line {i}")).collect();
        let dir = session(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let re = compile("^line").expect("regex");
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() >= 2
        };
        let f = search_until(dir.path(), &re, None, all(3), &stop).expect("search");
        let after = f.stopped_after.expect("stopped early").0;
        assert!(after > 1000 && after < 100_000, "{after}");
        assert_eq!(f.total, after, "the count covers the lines searched");
        assert_eq!(nums(&f), vec![1, 2, 3]);
        let whole = find(dir.path(), "^line", None, all(3));
        assert_eq!((whole.total, whole.stopped_after), (100_000, None));
    }

    #[test]
    fn hits_map_to_the_innermost_region() {
        let outer = Region {
            id: RegionId(1),
            start: LinePos { line: LineNo(2), bytes: 0 },
            end: Some(LinePos { line: LineNo(10), bytes: 0 }),
            ..Region::default()
        };
        let inner = Region {
            id: RegionId(2),
            depth: 1,
            start: LinePos { line: LineNo(4), bytes: 0 },
            end: Some(LinePos { line: LineNo(5), bytes: 3 }),
            ..Region::default()
        };
        let regions = [outer, inner];
        let id = |n| region_at(&regions, LineNo(n)).map(|r| r.id.0);
        assert_eq!(
            [id(1), id(2), id(4), id(5), id(6), id(9), id(10)],
            [None, Some(1), Some(2), Some(2), Some(1), Some(1), None]
        );
    }
}

//! The page's reads of a session's log, open or closed, straight from its
//! files through the store: numbered lines (the numbers `read` uses), a
//! regex search over the whole log, and the regions before the ones a
//! page started with.

use std::path::Path;

use serde::Serialize;

use super::sse::RegionItem;
use crate::agents::journal::Journal;
use dtmcp_core::search::{self, Page};
use dtmcp_core::store::{self, LineReader};
use dtmcp_core::types::LineNo;

/// The most lines one request returns.
pub const MAX_LINES: u64 = 500;
/// The hits of one page of search results.
pub const HITS_PER_PAGE: u64 = 50;
/// The most regions one request returns.
const MAX_REGIONS: usize = 200;
/// Characters of a line shown; the rest is cut.
const MAX_LINE_CHARS: usize = 2000;

/// Lines of the log.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Lines {
    /// The number of the first line in `lines`.
    pub first: u64,
    /// The lines.
    pub lines: Vec<String>,
    /// Lines in the log.
    pub total: u64,
}

/// One line that matched.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Hit {
    /// Its number.
    pub line: u64,
    /// Its text.
    pub text: String,
    /// The region it is in, if any.
    pub region: Option<u64>,
}

/// A page of search results.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Hits {
    /// Matching lines in the whole log.
    pub total: u64,
    /// The hits skipped before this page.
    pub offset: u64,
    /// This page's hits.
    pub hits: Vec<Hit>,
    /// Set when the search stopped before the end of the log (it took
    /// too long): the last line it searched.
    pub stopped_after: Option<u64>,
}

/// Cuts a long line for the page, once its secrets are hidden: a cut
/// through a secret leaves pieces no rule knows.
pub fn shown(mut line: String) -> String {
    if let Some((at, _)) = line.char_indices().nth(MAX_LINE_CHARS) {
        line.truncate(at);
        line.push('…');
    }
    line
}

/// Lines `from..from+count` of the log in `dir` (`count` capped), whole:
/// the caller hides their secrets, then cuts them with [`shown`].
pub fn lines(dir: &Path, from: u64, count: u64) -> Result<Lines, String> {
    let reader = LineReader::open(dir).map_err(|e| e.to_string())?;
    let (total, _) = reader.extent().map_err(|e| e.to_string())?;
    let first = from.max(1);
    let text = reader.read(LineNo(first), count.min(MAX_LINES)).map_err(|e| e.to_string())?;
    Ok(Lines { first, lines: text, total })
}

/// The page of hits of `pattern` that starts after `offset` hits, their
/// lines whole (see [`lines`]); `stop` is asked between blocks whether to
/// answer with what was found so far.
pub fn find(dir: &Path, pattern: &str, offset: u64, stop: &dyn Fn() -> bool) -> Result<Hits, String> {
    if pattern.is_empty() {
        return Err("type a regex to search for".into());
    }
    let re = search::compile(pattern).map_err(|e| e.to_string())?;
    let page = Page { offset, max_hits: HITS_PER_PAGE };
    let found = search::search_until(dir, &re, None, page, stop).map_err(|e| e.to_string())?;
    let reader = LineReader::open(dir).map_err(|e| e.to_string())?;
    let regions = store::read_regions(dir).unwrap_or_default();
    let hits = found
        .hits
        .iter()
        .map(|&line| Hit {
            line: line.0,
            text: reader.read(line, 1).ok().and_then(|mut l| l.pop()).unwrap_or_default(),
            region: search::region_at(&regions, line).map(|r| r.id.0),
        })
        .collect();
    Ok(Hits { total: found.total, offset, hits, stopped_after: found.stopped_after.map(|l| l.0) })
}

/// The regions before region `before` (at most [`MAX_REGIONS`], the
/// latest of them), and whether there are more before those.
pub fn regions_before(
    journal: &Journal,
    name: &str,
    dir: &Path,
    before: u64,
) -> Result<(Vec<RegionItem>, bool), String> {
    let all = store::read_regions(dir).map_err(|e| e.to_string())?;
    let earlier: Vec<_> = all.iter().filter(|r| r.id.0 < before).collect();
    let skip = earlier.len().saturating_sub(MAX_REGIONS);
    let by = journal.all_starters(name);
    let allowed = journal.all_allowed(name);
    Ok((earlier[skip..].iter().map(|r| RegionItem::new(r, &by).allowed_by(&allowed)).collect(), skip > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session directory holding `text` as its cooked log.
    fn log(text: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut w = store::LineWriter::open(tmp.path()).expect("writer");
        for l in text {
            w.push(l).expect("push");
        }
        w.flush().expect("flush");
        tmp
    }

    #[test]
    fn lines_are_numbered_as_read_numbers_them() {
        let dir = log(&["one", "two", "three"]);
        let got = lines(dir.path(), 2, 5).expect("lines");
        assert_eq!(got, Lines { first: 2, lines: vec!["two".into(), "three".into()], total: 3 });
        assert_eq!(lines(dir.path(), 0, 1).expect("from 0 is 1").lines, vec!["one"]);
    }

    #[test]
    fn search_finds_lines_and_refuses_a_bad_regex() {
        let dir = log(&["ok", "error: disk full", "ok", "ERROR again"]);
        let hits = find(dir.path(), "(?i)error", 0, &|| false).expect("search");
        assert_eq!(hits.total, 2);
        assert_eq!(hits.hits.iter().map(|h| h.line).collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!(hits.hits[0].text, "error: disk full");
        assert!(find(dir.path(), "(", 0, &|| false).is_err());
        assert!(find(dir.path(), "", 0, &|| false).is_err());
    }

    #[test]
    fn long_lines_are_cut() {
        let cut = shown("x".repeat(MAX_LINE_CHARS + 10));
        assert_eq!(cut.chars().count(), MAX_LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}

//! `search`: a regex over a session's log or one region of it, open or
//! closed, with the total count, a page of hits with context, and each
//! hit's region.
//!
//! Nothing here costs more as a session's history grows: the regions that
//! label the hits come from an index of `regions.jsonl` kept per session
//! and extended from the records appended since the last call
//! ([`RegionIndex`]), and a whole-log search asked again scans only the
//! lines logged since it last ran ([`Scanned`]).

use std::collections::HashMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Extensions};
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::agents::caller::CallerLeft;
use crate::lru::Lru;
use crate::tools::Terminal;
use crate::tools::ToolError;
use crate::tools::replies::output::digits;
use dtmcp_core::region::Region;
use dtmcp_core::region_index::RegionIndex;
use dtmcp_core::search::{self, Found, Page, Scope, Shown};
use dtmcp_core::store::{self, LineReader, files};
use dtmcp_core::types::{LineNo, RegionId};

/// Hits per page unless asked otherwise.
const DEFAULT_HITS: u64 = 20;
/// The most hits one page may ask for.
const MAX_HITS: u64 = 200;
/// The most context lines before and after a hit.
const MAX_CONTEXT: u64 = 10;
/// A reply stops adding hits past this many bytes.
const MAX_REPLY: usize = 20_000;
/// Characters of a line shown in a search reply.
const MAX_SHOWN_CHARS: usize = 300;

/// Arguments of `search`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// The session's name; closed sessions whose logs remain work too.
    pub session: String,
    /// A regular expression (Rust regex syntax), matched line by line: ^ and $ are line bounds; (?i) ignores case.
    pub pattern: String,
    /// Search only this region's output (a region number from run or regions).
    #[serde(default)]
    pub region: Option<u64>,
    /// Lines of context before and after each hit (default 0, at most 10).
    #[serde(default)]
    pub context: Option<u64>,
    /// Hits per reply (default 20, at most 200).
    #[serde(default)]
    pub max_hits: Option<u64>,
    /// Hits to skip, for the next page (the reply gives the exact call).
    #[serde(default)]
    pub offset: Option<u64>,
}

#[tool_router(router = search_router, vis = "pub(crate)")]
impl Terminal {
    /// Searches the session log.
    #[tool(
        name = "search",
        description = crate::docent::texts::tool::SEARCH.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn search(
        &self,
        Parameters(p): Parameters<SearchParams>,
        ct: CancellationToken,
        extensions: Extensions,
    ) -> CallToolResult {
        let name = p.session.clone();
        let left = extensions.get::<CallerLeft>().map(|l| l.0.clone());
        self.call(crate::tools::ToolName::Search, Some(&name), self.search_body(p, Left { ct, left })).await
    }
}

/// The ways a caller shows it no longer waits for a search.
struct Left {
    /// The request's own token: a `notifications/cancelled`, or rmcp
    /// seeing the client go.
    ct: CancellationToken,
    /// The direct path's hang-up, see [`CallerLeft`].
    left: Option<CancellationToken>,
}

impl Left {
    /// Ends when the caller left.
    async fn gone(&self) {
        match &self.left {
            Some(left) => tokio::select! {
                _ = self.ct.cancelled() => {}
                _ = left.cancelled() => {}
            },
            None => self.ct.cancelled().await,
        }
    }
}

/// How long one search may scan before it answers with what it found.
const SEARCH_BUDGET: Duration = Duration::from_secs(10);

/// What stops a search between blocks: its time is up, or its caller
/// left (set from the async side; also when the call's future is dropped).
#[derive(Clone)]
struct Budget {
    until: Instant,
    gone: Arc<AtomicBool>,
}

impl Budget {
    fn new() -> Budget {
        Budget { until: Instant::now() + SEARCH_BUDGET, gone: Arc::default() }
    }

    fn spent(&self) -> bool {
        self.gone.load(Ordering::Relaxed) || Instant::now() >= self.until
    }
}

/// Marks a search's caller gone when the call ends, however it ends: a
/// dropped call leaves no search scanning on for nobody.
struct GoneOnDrop(Arc<AtomicBool>);

impl Drop for GoneOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Terminal {
    async fn search_body(&self, p: SearchParams, left: Left) -> Result<String, ToolError> {
        let logs = self.sessions().open_logs(&p.session).await?;
        let re = search::compile(&p.pattern).map_err(|e| {
            ToolError::from(e).reworded(|e| format!("{e}\n(the pattern is a Rust regex: escape ( ) [ ] {{ }} . * + ? | \\ with a backslash to match them literally)"))
        })?;
        let dir = logs.dir.clone();
        let params = p.clone();
        let budget = Budget::new();
        let _gone = GoneOnDrop(budget.gone.clone());
        let cache = Arc::clone(&self.inner.searches);
        let scan = tokio::task::spawn_blocking(move || run_search(&cache, &dir, &re, &params, &budget));
        let (mut answer, page) = tokio::select! {
            done = scan => done.map_err(|e| ToolError::Failed(format!("the search failed: {e}")))??,
            () = left.gone() => return Err(ToolError::Failed("the search was cancelled: its caller left".into())),
        };
        self.hide_in_groups(&logs.dir, &mut answer.groups);
        Ok(render(&p, page, &answer))
    }

    /// The shown lines of `groups` (of the session in `dir`) redacted,
    /// each group as one text, before a long line is shortened: a cut
    /// through a secret leaves pieces no rule knows.
    fn hide_in_groups(&self, dir: &Path, groups: &mut [Vec<Shown>]) {
        for group in groups {
            let texts: Vec<String> = group.iter().map(|s| s.text.clone()).collect();
            let (hidden, counts) = self.inner.secrets.redact_lines(dir, &texts);
            crate::tools::replies::secrets::hidden_early(&counts);
            group.iter_mut().zip(hidden).for_each(|(s, t)| s.text = t);
        }
    }
}

/// What one search shows, before it is rendered.
struct Answer {
    found: Found,
    groups: Vec<Vec<Shown>>,
    /// The innermost region of each hit that lies in one.
    labels: HashMap<LineNo, Region>,
    region: Option<Region>,
    region_file: Option<Result<PathBuf, String>>,
}

/// How many sessions' region indexes the server keeps at once.
const KEPT_INDEXES: usize = 128;

/// What searches and listings keep between calls, for the server's life:
/// nothing here costs more as a session's history grows.
pub struct SearchCache {
    /// The region index of each session searched or listed lately, by its
    /// `regions.jsonl`: brought up to date from the lines appended since,
    /// so a search or a listing never reads a long session's regions again.
    indexes: Lru<PathBuf, RegionIndex>,
    /// Searches of whole logs, by session directory and pattern.
    scans: Lru<(PathBuf, String), Option<Scanned>>,
}

impl Default for SearchCache {
    fn default() -> SearchCache {
        SearchCache { indexes: Lru::new(KEPT_INDEXES), scans: Lru::new(KEPT_SEARCHES) }
    }
}

impl SearchCache {
    /// Runs `f` on the up-to-date region index of session directory `dir`.
    pub fn with_regions<T>(
        &self,
        dir: &Path,
        f: impl FnOnce(&RegionIndex) -> Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        let index = self.indexes.get(&dir.join(files::REGIONS), || RegionIndex::new(dir));
        let mut index = index.lock().unwrap_or_else(|e| e.into_inner());
        index.refresh()?;
        f(&index)
    }
}

/// The search `p` (its pattern compiled: `re`) of the log in `dir`, within
/// `budget`, with what it found and the page it shows.
fn run_search(
    cache: &SearchCache,
    dir: &Path,
    re: &regex::bytes::Regex,
    p: &SearchParams,
    budget: &Budget,
) -> Result<(Answer, Page), ToolError> {
    let context = p.context.unwrap_or(0);
    if context > MAX_CONTEXT {
        return Err(ToolError::BadInput(format!("context is at most {MAX_CONTEXT} lines")));
    }
    let page = Page { offset: p.offset.unwrap_or(0), max_hits: p.max_hits.unwrap_or(DEFAULT_HITS).clamp(1, MAX_HITS) };
    let (lines, _) = LineReader::open(dir).and_then(|r| r.extent())?;
    let region = match p.region {
        None => None,
        Some(id) => Some(cache.with_regions(dir, |index| {
            index.region(RegionId(id))?.ok_or_else(|| {
                ToolError::BadInput(format!(
                    "session {} has no region {id}; it has {} (regions lists them)",
                    p.session,
                    index.count(false)
                ))
            })
        })?),
    };
    let stop = || budget.spent();
    let found = match &region {
        Some(r) => search::search_until(dir, re, Some(search::region_scope(r, LineNo(lines))), page, &stop)?,
        None => match scanned_before(cache, dir, re, &p.pattern, page, lines, &stop)? {
            Some(found) => found,
            None => search::search_until(dir, re, None, page, &stop)?,
        },
    };
    let groups = match found.scope {
        Some(s) => search::with_context(dir, &found.hits, context, s)?,
        None => Vec::new(),
    };
    let labels = cache.with_regions(dir, |index| labels(index, &found.hits))?;
    let region_file = region.as_ref().map(|r| store::write_region_file(dir, r).map_err(|e| e.to_string()));
    Ok((Answer { found, groups, labels, region, region_file }, page))
}

/// The first hits of a search of a whole log kept, so that the same
/// search again scans only the lines appended since: a log only grows,
/// and a line matches or not by itself, whatever comes after it.
#[derive(Debug)]
struct Scanned {
    /// `session.txt` as it was scanned (device, inode, birth time), so that
    /// a log made anew under the session's name is scanned anew.
    file: (u64, u64, std::time::SystemTime),
    /// Lines scanned, from the first.
    lines: u64,
    /// Matching lines among them.
    total: u64,
    /// The first of those, at most [`MAX_HITS`].
    first: Vec<LineNo>,
}

/// How many (session, pattern) searches are kept.
const KEPT_SEARCHES: usize = 64;

/// The whole-log search of `pattern` (compiled: `re`) in `dir`, whose log
/// has `lines` lines, for `page`: from what an earlier call scanned plus the
/// lines since. `None` when it cannot be told that way (a page past the
/// hits kept, a file system that gives no birth time).
fn scanned_before(
    cache: &SearchCache,
    dir: &Path,
    re: &regex::bytes::Regex,
    pattern: &str,
    page: Page,
    lines: u64,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Found>, ToolError> {
    use std::os::unix::fs::MetadataExt;
    if page.offset.saturating_add(page.max_hits) > MAX_HITS {
        return Ok(None);
    }
    let Ok(meta) = std::fs::metadata(dir.join(files::TEXT)) else { return Ok(None) };
    let Ok(born) = meta.created() else { return Ok(None) };
    let file = (meta.dev(), meta.ino(), born);
    let slot = cache.scans.get(&(dir.to_path_buf(), pattern.to_string()), || None);
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = match slot.take() {
        Some(s) if s.file == file && s.lines <= lines => s,
        _ => Scanned { file, lines: 0, total: 0, first: Vec::new() },
    };
    let mut stopped_after = None;
    if lines > s.lines {
        let rest = Scope { first: LineNo(s.lines + 1), last: LineNo(lines) };
        let want = Page { offset: 0, max_hits: MAX_HITS - s.first.len() as u64 };
        let new = search::search_until(dir, re, Some(rest), want, stop)?;
        s.total += new.total;
        s.first.extend(new.hits);
        // Stopped early, it remembers how far it got: the same search
        // again goes on from there.
        stopped_after = new.stopped_after;
        s.lines = stopped_after.map_or(lines, |l| l.0);
    }
    let hits = s.first.iter().skip(page.offset as usize).take(page.max_hits as usize).copied().collect();
    let scope = (lines > 0).then_some(Scope { first: LineNo(1), last: LineNo(lines) });
    let found = Found { total: s.total, hits, scope, stopped_after };
    *slot = Some(s);
    Ok(Some(found))
}

/// The innermost region of each of `hits`, each region read once.
fn labels(index: &RegionIndex, hits: &[LineNo]) -> Result<HashMap<LineNo, Region>, ToolError> {
    let mut read: HashMap<RegionId, Option<Region>> = HashMap::new();
    let mut out = HashMap::new();
    for &line in hits {
        let Some(id) = index.at(line) else { continue };
        let region = match read.get(&id) {
            Some(r) => r.clone(),
            None => {
                let r = index.region(id)?;
                read.insert(id, r.clone());
                r
            }
        };
        if let Some(r) = region {
            out.insert(line, r);
        }
    }
    Ok(out)
}

fn render(p: &SearchParams, page: Page, a: &Answer) -> String {
    let mut out = headline(p, a);
    let width = a.found.hits.last().map_or(1, |l| digits(l.0));
    let mut shown_hits = 0u64;
    let mut current: Option<Option<RegionId>> = None;
    for group in &a.groups {
        if out.len() > MAX_REPLY && shown_hits > 0 {
            break;
        }
        if shown_hits > 0 {
            out.push_str("--\n");
        }
        // The label goes before the group's context, then again wherever
        // a later hit of the group lies in another region.
        let first_hit = group.iter().position(|s| s.hit).unwrap_or(0);
        for (i, s) in group.iter().enumerate() {
            if i == 0 || (s.hit && i > first_hit) {
                let here = group.get(if i == 0 { first_hit } else { i }).and_then(|h| a.labels.get(&h.line));
                if current != Some(here.map(|r| r.id)) {
                    current = Some(here.map(|r| r.id));
                    out.push_str(&region_label(here));
                }
            }
            shown_hits += u64::from(s.hit);
            let mark = if s.hit { ':' } else { '-' };
            let _ = writeln!(out, "{:>width$}{mark} {}", s.line.0, shorten(&s.text));
        }
    }
    out.push_str(&footer(p, page, a.found.total, shown_hits));
    out
}

fn headline(p: &SearchParams, a: &Answer) -> String {
    let pattern = quoted(&p.pattern);
    let where_ = match (&a.region, a.found.scope) {
        (Some(r), Some(s)) => format!("region {} `{}` (lines {}-{})", r.id, first_line(&r.command), s.first, s.last),
        (Some(r), None) => format!("region {} `{}` (no output)", r.id, first_line(&r.command)),
        (None, Some(s)) => format!("the log (lines {}-{})", s.first, s.last),
        (None, None) => "the log (empty)".to_string(),
    };
    let n = a.found.total;
    let mut out = format!("{n} line{} of {where_} in {} match {pattern}\n", plural(n), p.session);
    if let (Some(after), Some(scope)) = (a.found.stopped_after, a.found.scope) {
        let again = match a.region {
            None => format!("the same search again goes on from line {} (a simpler pattern is quicker)", after.0 + 1),
            Some(_) => "a simpler pattern is quicker".to_string(),
        };
        let _ = writeln!(
            out,
            "(the search stopped after {} s, the most one search may take, at line {after}: the count and the hits cover lines {}-{after}; {again})",
            SEARCH_BUDGET.as_secs(),
            scope.first
        );
    }
    match &a.region_file {
        Some(Ok(path)) => {
            let _ = writeln!(out, "region file: {}", path.display());
        }
        Some(Err(e)) => {
            let _ = writeln!(out, "(the region file could not be written: {e})");
        }
        None => {}
    }
    out
}

fn footer(p: &SearchParams, page: Page, total: u64, shown: u64) -> String {
    if shown == 0 {
        return match total {
            0 => String::new(),
            _ => format!("offset {} is past the last hit; use an offset below {total}\n", page.offset),
        };
    }
    let (from, to) = (page.offset + 1, page.offset + shown);
    if to >= total {
        return format!("hits {from}-{to} of {total}\n");
    }
    let mut next = format!("search session={} pattern={} offset={to}", p.session, quoted(&p.pattern));
    for (k, v) in [("region", p.region), ("context", p.context), ("max_hits", p.max_hits)] {
        if let Some(v) = v {
            let _ = write!(next, " {k}={v}");
        }
    }
    format!("hits {from}-{to} of {total}; next page: {next}\n")
}

fn region_label(r: Option<&Region>) -> String {
    match r {
        None => "[outside any region]\n".to_string(),
        Some(r) => format!("[region {} `{}`]\n", r.id, first_line(&r.command)),
    }
}

/// A command's first line, shortened for a label.
pub(crate) fn first_line(command: &str) -> String {
    let line = command.lines().next().unwrap_or("");
    let more = command.lines().nth(1).is_some();
    let mut s: String = line.chars().take(80).collect();
    if more || line.chars().nth(80).is_some() {
        s.push('…');
    }
    s
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_SHOWN_CHARS) {
        None => text.to_string(),
        Some((at, _)) => format!("{} … [{} more characters]", &text[..at], text[at..].chars().count()),
    }
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SearchParams {
        SearchParams {
            session: "t1".into(),
            pattern: "a\"b".into(),
            region: Some(3),
            context: None,
            max_hits: Some(5),
            offset: None,
        }
    }

    #[test]
    fn the_footer_gives_the_exact_next_call() {
        let page = Page { offset: 0, max_hits: 5 };
        let text = footer(&params(), page, 12, 5);
        assert_eq!(
            text,
            "hits 1-5 of 12; next page: search session=t1 pattern=\"a\\\"b\" offset=5 region=3 max_hits=5\n"
        );
        assert_eq!(footer(&params(), Page { offset: 10, max_hits: 5 }, 12, 2), "hits 11-12 of 12\n");
        assert!(footer(&params(), Page { offset: 20, max_hits: 5 }, 12, 0).contains("past the last hit"));
    }

    #[test]
    fn a_long_page_is_cut_by_size_and_the_next_call_continues_after_it() {
        let hits: Vec<LineNo> = (1..=200).map(|n| LineNo(n * 10)).collect();
        let groups = hits.iter().map(|&line| vec![Shown { line, text: "x".repeat(1000), hit: true }]).collect();
        let scope = Some(search::Scope { first: LineNo(1), last: LineNo(5000) });
        let found = Found { total: 500, hits, scope, ..Found::default() };
        let answer = Answer { found, groups, labels: HashMap::new(), region: None, region_file: None };
        let p = SearchParams { region: None, max_hits: Some(200), offset: Some(100), ..params() };
        let text = render(&p, Page { offset: 100, max_hits: 200 }, &answer);
        assert!(text.len() < MAX_REPLY + 1000, "{} bytes", text.len());
        let shown = text.lines().filter(|l| l.contains(": xxx")).count() as u64;
        assert!(shown > 0 && shown < 200);
        assert!(text.ends_with(&format!("offset={} max_hits=200\n", 100 + shown)), "{}", &text[text.len() - 200..]);
        assert!(text.contains("[outside any region]"));
    }

    #[test]
    fn a_search_again_scans_only_the_new_lines_and_finds_what_a_full_one_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = store::LineWriter::open(dir.path()).expect("open");
        let push = |w: &mut store::LineWriter, from: u64, to: u64| {
            for i in from..=to {
                w.push(&format!("{} {i}", if i % 7 == 0 { "hit" } else { "miss" })).expect("push");
            }
            w.flush().expect("flush");
        };
        let re = search::compile("^hit").expect("regex");
        let cache = SearchCache::default();
        let both = |lines: u64, page: Page| {
            let kept = scanned_before(&cache, dir.path(), &re, "^hit", page, lines, &|| false).expect("kept");
            let full = search::search(dir.path(), &re, None, page).expect("full");
            (kept, full)
        };
        let page = Page { offset: 0, max_hits: 20 };
        push(&mut w, 1, 100);
        let (kept, full) = both(100, page);
        if std::fs::metadata(dir.path().join(files::TEXT)).and_then(|m| m.created()).is_err() {
            assert!(kept.is_none(), "no birth time: nothing is kept");
            return;
        }
        assert_eq!(kept.as_ref(), Some(&full));
        push(&mut w, 101, 3000);
        for page in [page, Page { offset: 20, max_hits: 20 }, Page { offset: 190, max_hits: 10 }] {
            let (kept, full) = both(3000, page);
            assert_eq!(kept.as_ref(), Some(&full), "{page:?}");
        }
        assert_eq!(both(3000, Page { offset: 195, max_hits: 10 }).0, None, "past the hits kept");
        // The log made anew, shorter: scanned anew.
        drop(w);
        std::fs::remove_file(dir.path().join(files::TEXT)).expect("rm");
        std::fs::remove_file(dir.path().join(files::INDEX)).expect("rm");
        let mut w = store::LineWriter::open(dir.path()).expect("again");
        push(&mut w, 1, 50);
        let (kept, full) = both(50, page);
        assert_eq!(kept.as_ref(), Some(&full));
        assert_eq!(full.total, 7);
    }

    #[test]
    fn a_stopped_search_says_how_far_it_got_and_the_same_search_goes_on_from_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = store::LineWriter::open(dir.path()).expect("open");
        for i in 1..=60_000 {
            w.push(&format!("hit {i}")).expect("push");
        }
        w.flush().expect("flush");
        if std::fs::metadata(dir.path().join(files::TEXT)).and_then(|m| m.created()).is_err() {
            return;
        }
        let re = search::compile("^hit").expect("regex");
        let page = Page { offset: 0, max_hits: 5 };
        let asked = std::cell::Cell::new(0);
        let once = || {
            asked.set(asked.get() + 1);
            true
        };
        let cache = SearchCache::default();
        let first = scanned_before(&cache, dir.path(), &re, "^hit", page, 60_000, &once).expect("scan").expect("kept");
        let after = first.stopped_after.expect("stopped").0;
        assert!(after < 60_000 && first.total == after, "{first:?}");
        let p = SearchParams { region: None, ..params() };
        let answer =
            Answer { found: first, groups: Vec::new(), labels: HashMap::new(), region: None, region_file: None };
        let text = render(&p, page, &answer);
        assert!(text.contains(&format!("the same search again goes on from line {}", after + 1)), "{text}");
        let again =
            scanned_before(&cache, dir.path(), &re, "^hit", page, 60_000, &|| false).expect("scan").expect("kept");
        assert_eq!((again.total, again.stopped_after), (60_000, None));
    }

    #[test]
    fn labels_keep_to_one_short_line() {
        assert_eq!(first_line("make\nmore"), "make…");
        assert_eq!(first_line(&"x".repeat(100)).chars().count(), 81);
        assert!(shorten(&"é".repeat(400)).ends_with("[100 more characters]"));
    }
}

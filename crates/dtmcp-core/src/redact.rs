//! Keeping secrets out of what a model reads.
//!
//! A reply's text is scanned for secrets two ways: by shape (the provider
//! formats in [`rules`](self::rules), run only where a keyword prefilter
//! finds one of their keywords) and by value (values the session knows are
//! secret, however they look: from the shell's environment, from the user,
//! and every value redacted earlier in the session). Each secret becomes a
//! placeholder `‹secret:KIND:N›`, numbered per kind, the same for the same
//! value in every reply of a session ([`Table`]); nothing of the value shows.
//! Typed input goes the other way: [`Table::substitute`] puts the values
//! back for the placeholders an agent typed.
//!
//! Values shorter than [`MIN_LEN`] characters are never matched: short
//! values hit ordinary words and numbers far too often.
//!
//! Pure: no file is read here but the table's own (by its caller's path).

mod project;
mod rules;
mod split;
mod window;

pub use window::redact_window;

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::Path;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use serde::{Deserialize, Serialize};

/// Values shorter than this (in characters) are not matched.
pub const MIN_LEN: usize = 8;

/// The character that opens a placeholder.
pub const OPEN: char = '‹';

/// The words that make a name (of a variable, a key) name a secret.
const SECRET_WORDS: [&str; 9] =
    ["token", "secret", "passw", "pwd", "api_key", "apikey", "credential", "private_key", "access_key"];

static RULES: LazyLock<rules::Rules> = LazyLock::new(rules::Rules::compile);

/// A placeholder as it shows in a reply or is typed.
static PLACEHOLDER: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"‹secret:[^›\s]*›").expect("a constant pattern"));

/// The kind of a private key block.
const PRIVATE_KEY: &str = "private-key";
/// The kind of one line of a private key, learnt when the key was seen.
const KEY_LINE: &str = "private-key-line";

/// Whether `name` (an environment variable's, a key's) says it holds a
/// secret: it contains token, secret, password, api key or credential.
pub fn names_a_secret(name: &str) -> bool {
    let lower = name.to_ascii_lowercase().replace('-', "_");
    SECRET_WORDS.iter().any(|w| lower.contains(w))
}

/// How many secrets a text had, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts(pub BTreeMap<String, u32>);

impl Counts {
    /// How many in all.
    pub fn total(&self) -> u32 {
        self.0.values().sum()
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Counts) {
        for (kind, n) in &other.0 {
            *self.0.entry(kind.clone()).or_default() += n;
        }
    }
}

/// `2 github-token, 1 private-key`.
impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, n)| format!("{n} {k}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// Values known to be secret, whatever their shape, with the kind their
/// placeholder gets.
#[derive(Clone, Debug, Default)]
pub struct Known {
    values: Vec<(String, String)>,
}

impl Known {
    /// The values of the variables among `vars` whose names say they hold
    /// a secret, or that are listed in `named`; each is known by its
    /// variable's name (`GITHUB_TOKEN` gives kind `github-token`).
    pub fn from_env<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>, named: &[String]) -> Known {
        let mut known = Known::default();
        for (name, value) in vars {
            let listed = named.iter().any(|n| n == name);
            if listed || (names_a_secret(name) && rules::plausible_value(value)) {
                known.add(&kind_of_name(name), value);
            }
        }
        known
    }

    /// Adds `value` as a secret of `kind` (ignored when shorter than
    /// [`MIN_LEN`]).
    pub fn add(&mut self, kind: &str, value: &str) {
        let value = value.trim_end_matches(['\n', '\r']);
        if value.chars().count() >= MIN_LEN && !self.values.iter().any(|(_, v)| v == value) {
            self.values.push((kind.to_string(), value.to_string()));
        }
    }

    /// Adds every line of `file` (a file the user listed values in) as a
    /// secret of kind `listed`.
    pub fn add_lines(&mut self, file: &str) {
        for line in file.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            self.add("listed", line);
        }
    }

    /// Each known value with its kind.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many values are known.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// A placeholder kind from a variable's name: `MY_API_TOKEN` → `my-api-token`.
fn kind_of_name(name: &str) -> String {
    let kind: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let kind = kind.trim_matches('-');
    if kind.is_empty() { "secret".into() } else { kind.to_string() }
}

/// One secret of a session and its placeholder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    kind: String,
    n: u32,
    value: String,
}

/// A session's placeholders: which value each stands for. Kept in a 0600
/// file of the session, so that a restarted router numbers as before and
/// typed placeholders can be put back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    entries: Vec<Entry>,
    /// Whether entries were added since it was loaded.
    #[serde(skip)]
    changed: bool,
}

/// A placeholder that the table does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{placeholder} is not a placeholder of this session (known: {known}); copy one from a reply of this session, \
     nothing was typed"
)]
pub struct UnknownPlaceholder {
    /// The placeholder as typed.
    pub placeholder: String,
    /// The placeholders the session has, for the message.
    pub known: String,
}

impl Table {
    /// Reads the table at `path`; none yet (or unreadable) is empty.
    pub fn load(path: &Path) -> Table {
        std::fs::read(path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// Whether entries were added since it was loaded or saved.
    pub fn unsaved(&self) -> bool {
        self.changed
    }

    /// Writes the table to `path` (0600, replaced whole) if it changed.
    pub fn save(&mut self, path: &Path) -> std::io::Result<()> {
        if !self.changed {
            return Ok(());
        }
        let tmp = path.with_extension("tmp");
        let mut opts = std::fs::OpenOptions::new();
        std::os::unix::fs::OpenOptionsExt::mode(opts.write(true).create(true).truncate(true), 0o600);
        let mut file = opts.open(&tmp)?;
        file.write_all(&serde_json::to_vec(self).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        self.changed = false;
        Ok(())
    }

    /// The placeholder of `value`, given one as a `kind` if it has none.
    fn placeholder(&mut self, kind: &str, value: &str) -> String {
        if let Some(e) = self.entries.iter().find(|e| e.value == value) {
            return render(&e.kind, e.n);
        }
        let n = self.entries.iter().filter(|e| e.kind == kind).count() as u32 + 1;
        self.entries.push(Entry { kind: kind.to_string(), n, value: value.to_string() });
        self.changed = true;
        render(kind, n)
    }

    /// Adds `value` as a secret of `kind` unless it has a placeholder
    /// already or is shorter than [`MIN_LEN`]: from then on it is found by
    /// value in every reply of the session.
    pub fn learn(&mut self, kind: &str, value: &str) {
        if value.chars().count() >= MIN_LEN {
            self.placeholder(kind, value);
        }
    }

    /// Adds every value of `known`, as [`Table::learn`] does.
    pub fn learn_all(&mut self, known: &Known) {
        for (kind, value) in &known.values {
            self.learn(kind, value);
        }
    }

    /// The value `placeholder` stands for.
    pub fn value_of(&self, placeholder: &str) -> Option<&str> {
        self.entries.iter().find(|e| render(&e.kind, e.n) == placeholder).map(|e| e.value.as_str())
    }

    /// `input` with every placeholder in it replaced by its value; the
    /// first unknown one refuses the whole input.
    pub fn substitute(&self, input: &str) -> Result<String, UnknownPlaceholder> {
        if !input.contains(OPEN) {
            return Ok(input.to_string());
        }
        let mut out = String::with_capacity(input.len());
        let mut last = 0;
        for m in PLACEHOLDER.find_iter(input) {
            let Some(value) = self.value_of(m.as_str()) else {
                let known: Vec<String> = self.entries.iter().map(|e| render(&e.kind, e.n)).collect();
                let known = if known.is_empty() { "none yet".into() } else { known.join(", ") };
                return Err(UnknownPlaceholder { placeholder: m.as_str().to_string(), known });
            };
            out.push_str(&input[last..m.start()]);
            out.push_str(value);
            last = m.end();
        }
        out.push_str(&input[last..]);
        Ok(out)
    }

    /// Whether there are no placeholders yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The placeholder table's file in a session's directory.
pub const TABLE_FILE: &str = "secrets.json";
/// The file whose presence in a session's directory says its replies are
/// not redacted.
pub const OFF_FILE: &str = "redact-off";

/// Gives the session in directory `child`, a pane split from the one in
/// `parent`, what the parent has: its placeholders (the same value keeps
/// its placeholder in both) and, when the parent is not redacted, that.
pub fn inherit(parent: &Path, child: &Path) -> std::io::Result<()> {
    if parent.join(OFF_FILE).exists() {
        std::fs::copy(parent.join(OFF_FILE), child.join(OFF_FILE))?;
    }
    let mut table = Table::load(&parent.join(TABLE_FILE));
    if !table.is_empty() {
        table.changed = true;
        table.save(&child.join(TABLE_FILE))?;
    }
    Ok(())
}

/// A session's secrets hidden for a reader outside the server (the
/// people's command line with `--redact`): the session's placeholders,
/// read from its directory and used as its replies use them, never
/// written back.
pub struct Reader {
    table: Table,
}

impl Reader {
    /// For the session whose directory is `dir`.
    pub fn for_session(dir: &Path) -> Reader {
        Reader { table: Table::load(&dir.join(TABLE_FILE)) }
    }

    /// `text` with its secrets hidden.
    pub fn text(&mut self, text: &str) -> String {
        redact(text, &Known::default(), &mut self.table).0
    }

    /// `lines`, read as one text, with their secrets hidden; as many lines.
    pub fn lines(&mut self, lines: &[String]) -> Vec<String> {
        redact_lines(lines, &Known::default(), &mut self.table).0
    }
}

/// `‹secret:github-token:1›`.
fn render(kind: &str, n: u32) -> String {
    format!("{OPEN}secret:{kind}:{n}›")
}

/// A secret found in a text, by shape or by value.
struct Span {
    range: std::ops::Range<usize>,
    kind: String,
    /// Its value, when it is not the text of its range (a token a tab
    /// split in two: the value has no tab).
    value: Option<String>,
}

impl Span {
    fn new(range: std::ops::Range<usize>, kind: impl Into<String>) -> Span {
        Span { range, kind: kind.into(), value: None }
    }
}

/// A secret of a text and the placeholder it becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Found {
    /// Its byte range in the text.
    range: std::ops::Range<usize>,
    /// Its kind.
    kind: String,
    /// Its placeholder.
    placeholder: String,
}

/// Where a text was cut out of a longer one (a window of a log, the top
/// of a screen whose first row may go on from a row scrolled away): a
/// value the session knows may stand there cut in two, so at a cut edge a
/// piece of [`EDGE_MIN`] characters or more of one counts as the value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    /// The text starts inside a longer one.
    pub start: bool,
    /// The text ends inside a longer one.
    pub end: bool,
}

/// The shortest piece of a known value that counts as the value at a cut
/// edge: shorter pieces are too likely to be ordinary text.
pub const EDGE_MIN: usize = 6;

/// Every secret in `text` with its placeholder from `table` (new ones
/// added there), in order, and how many of each kind it had.
///
/// The text is searched with what can hide a secret taken away (see
/// [`project`](self::project)); a find's range covers it in `text`.
/// Placeholders already in the text stay as they are. A value learnt from
/// one place of the text (an assignment whose name says secret) is then a
/// secret everywhere in it: when the first look learns a value, the text
/// is looked at again.
fn find(text: &str, known: &Known, table: &mut Table, cut: Cut) -> (Vec<Found>, Counts) {
    let learned = table.entries.len();
    let first = find_once(text, known, table, cut);
    if table.entries.len() == learned {
        return first;
    }
    find_once(text, known, table, cut)
}

/// One look of [`find`].
fn find_once(text: &str, known: &Known, table: &mut Table, cut: Cut) -> (Vec<Found>, Counts) {
    let projected = project::project(text);
    let seen = projected.as_ref().map_or(text, |(p, _)| p.as_str());
    let mut counts = Counts::default();
    let mut found = Vec::new();
    for s in spans(seen, known, table, cut) {
        let value = s.value.unwrap_or_else(|| canonical(&seen[s.range.clone()]));
        let placeholder = table.placeholder(&s.kind, &value);
        if s.kind == PRIVATE_KEY {
            // Its lines, so that a read of a few of them hides them too.
            for line in value.lines().filter(|l| !l.starts_with("-----")) {
                table.learn(KEY_LINE, line.trim());
            }
        }
        let range = match &projected {
            Some((_, map)) => map[s.range.start]..map[s.range.end - 1] + 1,
            None => s.range,
        };
        *counts.0.entry(s.kind.clone()).or_default() += 1;
        found.push(Found { range, kind: s.kind, placeholder });
    }
    (found, counts)
}

/// The secrets of `text`, placeholders already there left out, in order,
/// none overlapping.
fn spans(text: &str, known: &Known, table: &Table, cut: Cut) -> Vec<Span> {
    // Placeholders already in the text stay as they are; a private key
    // comes before values, so that the lines it taught the table do not
    // break it up; then values (whole, then cut at an edge), then the
    // other shapes, then tokens a tab split, then the lines of a key seen
    // without its ends.
    let mut spans: Vec<Span> = match text.contains(OPEN) {
        true => PLACEHOLDER.find_iter(text).map(|m| Span::new(m.range(), "")).collect(),
        false => Vec::new(),
    };
    let (keys, shapes): (Vec<_>, Vec<_>) = RULES.find(text).into_iter().partition(|f| f.kind == PRIVATE_KEY);
    spans.extend(keys.into_iter().map(|f| Span::new(f.range, f.kind)));
    spans.extend(by_value(text, known, table));
    spans.extend(window::at_edges(text, cut, values(known, table)));
    spans.extend(shapes.into_iter().map(|f| Span::new(f.range, f.kind)));
    spans.extend(split::split_tokens(text, &RULES));
    spans.extend(rules::key_lines(text).into_iter().map(|range| Span::new(range, KEY_LINE)));
    if spans.iter().all(|s| s.kind.is_empty()) {
        return Vec::new();
    }
    let mut taken: Vec<Span> = Vec::new();
    for s in spans {
        if !s.range.is_empty() && !taken.iter().any(|t| t.range.start < s.range.end && s.range.start < t.range.end) {
            taken.push(s);
        }
    }
    taken.retain(|s| !s.kind.is_empty());
    taken.sort_by_key(|s| s.range.start);
    taken
}

/// Writes `secret` (a find's text, or the part of it a window shows) as
/// its placeholder: a secret over several lines keeps its lines, the
/// first showing the placeholder, each further one its line-number prefix
/// (if the text has them) and `‹…›`.
fn hide_into(out: &mut String, secret: &str, placeholder: &str) {
    out.push_str(placeholder);
    for line in secret.split('\n').skip(1) {
        out.push('\n');
        out.push_str(&line[..prefix_len(line)]);
        out.push_str("‹…›");
    }
}

/// `text` with every secret replaced by its placeholder from `table` (new
/// ones added there), and how many of each kind it had.
///
/// The values of `table` and `known` are found first, then the shapes;
/// where two finds overlap, the first wins. A secret over several lines (a
/// private key) keeps its lines: the first shows the placeholder, each
/// further one keeps its line-number prefix (if the text has them) and
/// shows `‹…›`.
pub fn redact(text: &str, known: &Known, table: &mut Table) -> (String, Counts) {
    let (found, counts) = find(text, known, table, Cut::default());
    if found.is_empty() {
        return (text.to_string(), counts);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for f in found {
        out.push_str(&text[last..f.range.start]);
        hide_into(&mut out, &text[f.range.clone()], &f.placeholder);
        last = f.range.end;
    }
    out.push_str(&text[last..]);
    (out, counts)
}

/// `lines` (in order, as one text, so that a key over several of them is
/// seen whole) with every secret replaced by its placeholder from `table`
/// (new ones added there), and how many of each kind they had; as many
/// lines as before.
pub fn redact_lines(lines: &[String], known: &Known, table: &mut Table) -> (Vec<String>, Counts) {
    let joined = lines.join("\n");
    let (hidden, counts) = redact(&joined, known, table);
    if hidden == joined {
        return (lines.to_vec(), counts);
    }
    let out: Vec<String> = hidden.split('\n').map(str::to_string).collect();
    if out.len() == lines.len() {
        return (out, counts);
    }
    // The redactor keeps the lines; should it ever not, each alone.
    let mut all = Counts::default();
    let each = lines
        .iter()
        .map(|l| {
            let (text, counts) = redact(l, known, table);
            all.add(&counts);
            text
        })
        .collect();
    (each, all)
}

/// The rows of a screen `cols` wide with every secret replaced by its
/// placeholder from `table` (new ones added there), and how many of each
/// kind they had; as many rows as before.
///
/// A capture gives a screen row by row, and a line longer than the width
/// goes on in the next row: a secret there stands half in each, and
/// neither half is a secret by itself. So a row that fills the width (or
/// all but its last column, which a wide character may leave empty) is
/// read on into the next one; a secret found across rows shows its
/// placeholder where it starts and `‹…›` at the start of each further row
/// it covers. A full row that ended there is read on too: that can only
/// hide more, never less. Colour escapes of `capture-pane -e` count for
/// nothing in a row's width. The first row may go on from a row scrolled
/// off the top: the screen is read as cut there.
pub fn redact_screen<S: AsRef<str>>(
    rows: &[S],
    cols: usize,
    known: &Known,
    table: &mut Table,
) -> (Vec<String>, Counts) {
    let mut joined = String::new();
    let mut starts = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        if i > 0 && !fills(rows[i - 1].as_ref(), cols) {
            joined.push('\n');
        }
        starts.push(joined.len());
        joined.push_str(row.as_ref());
    }
    let (found, counts) = find(&joined, known, table, Cut { start: true, end: false });
    if found.is_empty() {
        return (rows.iter().map(|r| r.as_ref().to_string()).collect(), counts);
    }
    let mut out = Vec::with_capacity(rows.len());
    for (row, &start) in rows.iter().zip(&starts) {
        let end = start + row.as_ref().len();
        let mut shown = String::with_capacity(end - start);
        let mut at = start;
        for f in found.iter().filter(|f| f.range.start < end && f.range.end > start) {
            shown.push_str(&joined[at..f.range.start.max(start)]);
            shown.push_str(if f.range.start >= start { &f.placeholder } else { "‹…›" });
            at = f.range.end.min(end);
        }
        shown.push_str(&joined[at..end]);
        out.push(shown);
    }
    (out, counts)
}

/// Whether screen row `row` reaches the right edge of a screen `cols`
/// wide (or its last column but one), so that its line may go on in the
/// next row.
fn fills(row: &str, cols: usize) -> bool {
    use unicode_width::UnicodeWidthStr;
    let width = match memchr::memchr(0x1b, row.as_bytes()) {
        None => row.width(),
        // Each match ends after an ASCII byte (see `project`), so the
        // pieces between are whole characters.
        Some(_) => REAL_ESCAPE
            .split(row.as_bytes())
            .map(|piece| std::str::from_utf8(piece).map_or(0, UnicodeWidthStr::width))
            .sum(),
    };
    width + 1 >= cols
}

/// [`project::REAL_ESCAPE_PATTERN`], compiled.
static REAL_ESCAPE: LazyLock<regex::bytes::Regex> =
    LazyLock::new(|| regex::bytes::Regex::new(project::REAL_ESCAPE_PATTERN).expect("a constant pattern"));

/// The values of `table` (but a private key's whole block) and `known`,
/// each with its kind.
fn values<'a>(known: &'a Known, table: &'a Table) -> Vec<(&'a str, &'a str)> {
    table
        .entries
        .iter()
        .filter(|e| !e.value.contains('\n'))
        .map(|e| (e.kind.as_str(), e.value.as_str()))
        .chain(known.values.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect()
}

/// The finds of the values of `table` and `known` in `text`.
fn by_value(text: &str, known: &Known, table: &Table) -> Vec<Span> {
    let values = values(known, table);
    if values.is_empty() {
        return Vec::new();
    }
    if values.len() > FEW_VALUES {
        // Many values: one pass of an automaton (built each time, as the
        // table grows; a non-contiguous NFA is the quickest to build).
        let ac = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(AhoCorasickKind::NoncontiguousNFA))
            .build(values.iter().map(|(_, v)| v));
        if let Ok(ac) = ac {
            return ac.find_iter(text).map(|m| Span::new(m.range(), values[m.pattern().as_usize()].0)).collect();
        }
    }
    // Few values: a vectorised substring search each, far cheaper than
    // building an automaton; then the leftmost, longest of overlapping ones.
    let mut hits: Vec<(std::ops::Range<usize>, &str)> = Vec::new();
    for (kind, value) in &values {
        hits.extend(
            memchr::memmem::find_iter(text.as_bytes(), value.as_bytes()).map(|at| (at..at + value.len(), *kind)),
        );
    }
    hits.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
    let mut out: Vec<Span> = Vec::with_capacity(hits.len());
    for (range, kind) in hits {
        if out.last().is_none_or(|l| l.range.end <= range.start) {
            out.push(Span::new(range, kind));
        }
    }
    out
}

/// Up to this many values are searched for one by one.
const FEW_VALUES: usize = 16;

/// A secret as typed back: a several-line one loses the line-number
/// prefixes a reply put before its lines.
fn canonical(secret: &str) -> String {
    if !secret.contains('\n') {
        return secret.to_string();
    }
    let lines: Vec<&str> = secret.split('\n').collect();
    if lines[1..].iter().all(|l| prefix_len(l) > 0) {
        let rest = lines[1..].iter().map(|l| &l[prefix_len(l)..]);
        std::iter::once(lines[0]).chain(rest).collect::<Vec<_>>().join("\n")
    } else {
        secret.to_string()
    }
}

/// The length of a reply's line-number prefix at the start of `line`
/// (`  12  ` in a read, `12: ` or `12- ` in a search), 0 if it has none.
fn prefix_len(line: &str) -> usize {
    let b = line.as_bytes();
    let spaces = b.iter().take_while(|c| **c == b' ').count();
    let digits = b[spaces..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return 0;
    }
    let at = spaces + digits;
    match &b[at..] {
        [b' ', b' ', ..] => at + 2,
        [b':' | b'-', b' ', ..] => at + 2,
        _ => 0,
    }
}

#[cfg(test)]
mod tests;

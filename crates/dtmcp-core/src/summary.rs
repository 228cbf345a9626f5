//! Summary lines of a clipped output: the lines in the part a reply leaves
//! out that a reader would look for first. Test failures and result
//! tallies (DejaGnu and automake `FAIL:`, pytest, cargo test, go test,
//! ctest, TAP and prove), compiler and linker errors with their locations
//! (gcc, clang, rustc, ld), and make giving up.
//!
//! A pure, streaming classifier: lines are fed one at a time with their
//! numbers, so a huge output is never held whole, and the result depends
//! only on the lines. Warnings are left out on purpose: a build can hold
//! thousands, and the errors are what ended it.
//!
//! A long output is mostly lines no pattern can match. [`feed_text`] looks
//! at a block of lines at once: one Aho-Corasick pass (SIMD, a few GB/s)
//! finds the words every summary line holds ([`HINTS`]), and only the
//! lines holding one, and the few after a rustc error, are classified.
//! The result is the same as feeding every line; a test holds it so.
//!
//! The logger runs the same pass ([`mark_text`], with the [`Marker`] the
//! summarizer classifies with) over every block of lines it stores and
//! notes the lines found in the session's summary index
//! ([`crate::store::marks`]). A summary then reads those lines alone:
//! feeding only them, in order, gives what feeding every line would.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::RegexSet;

/// The most failure and error lines kept; the rest are counted.
pub const MAX_PICKED: usize = 30;
/// The most tally lines kept (the last ones win: they close the run).
pub const MAX_TALLIES: usize = 10;
/// A kept line is cut to this many characters.
pub const MAX_CHARS: usize = 300;

/// Words at least one of which every line a pattern below matches holds,
/// as written (case counts). A pattern added below needs its word here:
/// `every_pattern_needs_a_hint` fails otherwise.
pub const HINTS: &[&str] = &[
    "FAIL",
    "Fail",
    "fail",
    "ERROR",
    "Error",
    "error",
    "panic",
    "PASS",
    "passed",
    "UNRESOLVED",
    "Exception",
    "Test",
    "Timeout",
    "SEGFAULT",
    "Not Run",
    "aborted",
    "not ok",
    "undefined reference",
    "***",
    "Summary",
    "# of ",
    "TOTAL",
    "SKIP",
    "Result: ",
    "Files=",
];

static HINTER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::LeftmostFirst)
        .build(HINTS)
        .expect("the hint words build")
});

/// What a kept line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A failed test, an error, make giving up.
    Failure,
    /// The location line under a rustc error (`  --> src/lib.rs:2:5`).
    Location,
    /// A run's result count or final verdict.
    Tally,
}

/// Lines that report a failure or an error.
static FAILURES: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new([
        // DejaGnu, automake's test driver, go test's package line.
        r"^(FAIL|XPASS|ERROR|UNRESOLVED|KPASS):?\s\S",
        // go test.
        r"^\s*--- FAIL: ",
        r"^panic: ",
        // pytest's short summary.
        r"^(FAILED|ERROR) \S+",
        r"^\S+\.py:\d+: \w*(Error|Exception|Failed)\b",
        // cargo test / libtest.
        r"^test .+ \.\.\. FAILED$",
        r"^thread '.*' (\(\d+\) )?panicked at ",
        r"^error: test failed",
        // ctest.
        r"^\s*\d+/\d+ Test +#\d+: .*\*\*\*",
        r"^\s*\d+ - .+ \((Failed|Timeout|SEGFAULT|Not Run|Subprocess aborted|Child aborted|Exception)\)$",
        // TAP and prove.
        r"^\s*not ok \d+",
        r"^Failed \d+/\d+ subtests",
        r"^\s+Failed tests?: ",
        r"^#\s+Failed test ",
        // gcc, clang: file:line[:col]: error.
        r"^[^\s:][^:]*:\d+(:\d+)?: (fatal )?error: ",
        // rustc.
        r"^error(\[E\d+\])?: ",
        // The linker.
        r"undefined reference to ",
        r"^collect2: error: ",
        r"^(/\S*/)?ld(\.\w+)?: .*error",
        // make giving up.
        r"^g?make(\[\d+\])?: \*\*\* ",
    ])
    .expect("the failure patterns compile")
});

/// Lines that count a run's results.
static TALLIES: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new([
        // DejaGnu's final summary.
        r"^\s*=== .+ Summary ===",
        r"^# of (expected|unexpected|unresolved|untested|unsupported) ",
        // automake's test-suite summary.
        r"^# (TOTAL|PASS|FAIL|XFAIL|XPASS|ERROR|SKIP): +\d+",
        // pytest's closing line.
        r"^=+ .*\b(passed|failed|errors?)\b.* in [\d.]+s.* =+$",
        // cargo test, only when it failed (passing crates are noise).
        r"^test result: FAILED\.",
        // ctest.
        r"^\d+% tests passed, \d+ tests? failed out of \d+",
        // prove.
        r"^Result: (FAIL|PASS)",
        r"^Files=\d+, Tests=\d+",
        // go test's verdict.
        r"^FAIL$",
    ])
    .expect("the tally patterns compile")
});

/// How many lines after a rustc error its `-->` location may come.
pub const LOCATION_WITHIN: u64 = 3;

/// Tells, line by line, which lines a summary would look at and as what:
/// the classifier with the one thing it carries from line to line (a
/// rustc error whose location may follow). The summarizer uses it, and so
/// does the logger as it cooks, to note those lines in the session's
/// summary index ([`crate::store::marks`]).
#[derive(Clone, Debug, Default)]
pub struct Marker {
    /// The line of the last rustc error, whose location may follow.
    rust_error_at: Option<u64>,
}

impl Marker {
    /// What line `number` is to a summary, if anything.
    pub fn look(&mut self, number: u64, line: &str) -> Option<Kind> {
        if let Some(kind) = classify(line) {
            if line.starts_with("error") {
                self.rust_error_at = Some(number);
            }
            return Some(kind);
        }
        if self.near(number) && line.trim_start().starts_with("--> ") {
            self.rust_error_at = None;
            return Some(Kind::Location);
        }
        None
    }

    /// Whether line `number` may still hold the last rustc error's location.
    fn near(&self, number: u64) -> bool {
        self.rust_error_at.is_some_and(|at| number <= at + LOCATION_WITHIN)
    }
}

/// The summary being gathered from fed lines.
#[derive(Clone, Debug, Default)]
pub struct Summarizer {
    marker: Marker,
    picks: Picks,
}

/// The lines a summary keeps so far.
#[derive(Clone, Debug, Default)]
struct Picks {
    /// Kept failure and location lines, in order.
    picked: Vec<(u64, Kind, String)>,
    /// Kept tally lines, the last [`MAX_TALLIES`].
    tallies: Vec<(u64, String)>,
    /// Failure lines seen beyond [`MAX_PICKED`].
    more: u64,
}

/// What a summary holds, in line order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The kept lines: number and text (cut to [`MAX_CHARS`]).
    pub lines: Vec<(u64, String)>,
    /// Failure lines not kept.
    pub more: u64,
}

impl Summarizer {
    /// An empty summary.
    pub fn new() -> Summarizer {
        Summarizer::default()
    }

    /// Looks at line `number`, keeping it if it is a summary line.
    pub fn feed(&mut self, number: u64, line: &str) {
        if let Some(kind) = self.marker.look(number, line) {
            self.picks.keep(number, kind, line);
        }
    }

    /// Whether no line fed from now on can be kept: the failures and
    /// locations are full and a failure has been left out already (a
    /// tally can still be kept). Later failures only add to the count.
    pub fn full(&self) -> bool {
        self.picks.picked.len() >= MAX_PICKED && self.picks.more > 0
    }

    /// Counts `n` failure lines that were left out unfed, once [`full`].
    ///
    /// [`full`]: Summarizer::full
    pub fn count_more(&mut self, n: u64) {
        self.picks.more += n;
    }

    /// The summary, failures and tallies merged in line order.
    pub fn finish(self) -> Summary {
        let Picks { picked, tallies, more } = self.picks;
        let mut lines: Vec<(u64, String)> = picked.into_iter().map(|(n, _, t)| (n, t)).collect();
        lines.extend(tallies);
        lines.sort_by_key(|(n, _)| *n);
        lines.dedup_by_key(|(n, _)| *n);
        Summary { lines, more }
    }
}

impl Picks {
    fn keep(&mut self, number: u64, kind: Kind, line: &str) {
        match kind {
            Kind::Tally => {
                if self.tallies.len() == MAX_TALLIES {
                    self.tallies.remove(0);
                }
                self.tallies.push((number, cut(line)));
            }
            Kind::Failure | Kind::Location => {
                // A location belongs to its error: keep it whenever the error was kept.
                let room = self.picked.len() < MAX_PICKED || (kind == Kind::Location && self.more == 0);
                if room {
                    self.picked.push((number, kind, cut(line)));
                } else if kind == Kind::Failure {
                    self.more += 1;
                }
            }
        }
    }
}

/// Whether `line` is a summary line, and of which kind.
pub fn classify(line: &str) -> Option<Kind> {
    let line = line.trim_end();
    if !hinted(line) {
        return None;
    }
    classify_unhinted(line)
}

/// [`classify`] without the hint words (`line` trimmed at its end).
fn classify_unhinted(line: &str) -> Option<Kind> {
    if FAILURES.is_match(line) {
        return Some(Kind::Failure);
    }
    TALLIES.is_match(line).then_some(Kind::Tally)
}

/// The summary of numbered lines, in one go.
pub fn summarize<'a>(lines: impl IntoIterator<Item = (u64, &'a str)>) -> Summary {
    let mut s = Summarizer::new();
    for (n, l) in lines {
        s.feed(n, l);
    }
    s.finish()
}

/// Whether `line` holds one of the [`HINTS`]: a line that holds none is
/// no summary line.
pub fn hinted(line: &str) -> bool {
    HINTER.is_match(line)
}

/// Feeds the lines of `text` to `s`, the first numbered `first`: whole
/// lines, each ended by `\n` (a last one without is fed too). Only the
/// lines holding a hint word are classified, and the few after a rustc
/// error (its location); what `s` gathers is what feeding every line
/// would. Returns the number of the line after the last one in `text`.
pub fn feed_text(s: &mut Summarizer, text: &[u8], first: u64) -> u64 {
    let picks = &mut s.picks;
    mark_text(&mut s.marker, text, first, |number, kind, line| picks.keep(number, kind, line))
}

/// Hands each line of `text` (numbered from `first`, as in [`feed_text`])
/// that `marker` finds to be a summary line to `found`, with its kind,
/// looking only at the lines holding a hint word and the few after a rustc
/// error. Returns the number of the line after the last one in `text`.
pub fn mark_text(marker: &mut Marker, text: &[u8], first: u64, mut found: impl FnMut(u64, Kind, &str)) -> u64 {
    let mut at = 0usize; // start of the line numbered `number`
    let mut number = first;
    // A rustc error at the end of the last block may have its location
    // at the start of this one.
    while marker.near(number) && at < text.len() {
        at = look_at(marker, text, at, number, &mut found);
        number += 1;
    }
    while at < text.len() {
        let Some(hit) = HINTER.find(aho_corasick::Input::new(text).span(at..text.len())) else { break };
        let start = memchr::memrchr(b'\n', &text[at..hit.start()]).map_or(at, |i| at + i + 1);
        number += memchr::memchr_iter(b'\n', &text[at..start]).count() as u64;
        at = start;
        // This line and, after a rustc error, the few that may hold its
        // location.
        loop {
            at = look_at(marker, text, at, number, &mut found);
            number += 1;
            if !marker.near(number) || at >= text.len() {
                break;
            }
        }
    }
    number
        + memchr::memchr_iter(b'\n', &text[at..]).count() as u64
        + u64::from(!text.ends_with(b"\n") && at < text.len())
}

/// Shows `marker` the line of `text` starting at `at` (numbered
/// `number`), handing it to `found` if it is a summary line; returns where
/// the next line starts.
fn look_at(marker: &mut Marker, text: &[u8], at: usize, number: u64, found: &mut impl FnMut(u64, Kind, &str)) -> usize {
    let end = memchr::memchr(b'\n', &text[at..]).map_or(text.len(), |i| at + i);
    let line = String::from_utf8_lossy(&text[at..end]);
    if let Some(kind) = marker.look(number, &line) {
        found(number, kind, &line);
    }
    (end + 1).min(text.len())
}

fn cut(line: &str) -> String {
    let line = line.trim_end();
    match line.char_indices().nth(MAX_CHARS) {
        None => line.to_string(),
        Some((at, _)) => format!("{} …", &line[..at]),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::dejagnu_fail("FAIL: gcc.dg/pr123.c (test for excess errors)", Some(Kind::Failure))]
    #[case::dejagnu_summary("\t\t=== gcc Summary ===", Some(Kind::Tally))]
    #[case::dejagnu_count("# of unexpected failures\t3", Some(Kind::Tally))]
    #[case::dejagnu_pass("PASS: gcc.dg/pr1.c (test for excess errors)", None)]
    #[case::automake_total("# FAIL:  2", Some(Kind::Tally))]
    #[case::go_test_fail("--- FAIL: TestParse (0.00s)", Some(Kind::Failure))]
    #[case::go_subtest_fail("    --- FAIL: TestParse/empty (0.00s)", Some(Kind::Failure))]
    #[case::go_package_fail("FAIL\texample.com/pkg\t0.012s", Some(Kind::Failure))]
    #[case::go_verdict("FAIL", Some(Kind::Tally))]
    #[case::go_ok("ok  \texample.com/other\t0.010s", None)]
    #[case::ctest_line("4/10 Test  #4: parse_test .......................***Failed    0.01 sec", Some(Kind::Failure))]
    #[case::ctest_list("\t  4 - parse_test (Failed)", Some(Kind::Failure))]
    #[case::ctest_tally("80% tests passed, 2 tests failed out of 10", Some(Kind::Tally))]
    #[case::ctest_passed("1/10 Test  #1: ok_test ..........................   Passed    0.01 sec", None)]
    #[case::tap_not_ok("not ok 3 - multiplies", Some(Kind::Failure))]
    #[case::tap_ok("ok 2 - adds", None)]
    #[case::clang_error("src/x.c:10:5: error: use of undeclared identifier 'y'", Some(Kind::Failure))]
    #[case::gcc_fatal("main.c:1:10: fatal error: missing.h: No such file or directory", Some(Kind::Failure))]
    #[case::gcc_warning("a.c:2:22: warning: unused variable 'x' [-Wunused-variable]", None)]
    #[case::make_gives_up("make[2]: *** [Makefile:5: a.o] Error 1", Some(Kind::Failure))]
    #[case::cargo_passing_crate("test result: ok. 5 passed; 0 failed", None)]
    #[case::plain_text("everything is fine", None)]
    #[case::error_in_prose("no error: here", None)]
    fn lines_are_classified(#[case] line: &str, #[case] kind: Option<Kind>) {
        assert_eq!(classify(line), kind, "{line:?}");
    }

    #[test]
    fn every_pattern_needs_a_hint() {
        // Each pattern's literal parts, as regex-syntax sees them, hold a
        // hint word; a pattern whose every match must hold one is safe.
        for pattern in FAILURES.patterns().iter().chain(TALLIES.patterns()) {
            let words = required_words(pattern);
            assert!(
                words.iter().all(|w| HINTS.iter().any(|h| w.contains(h))),
                "{pattern}: each of {words:?} must hold a hint word"
            );
        }
        // And on real lines: the hints never change a verdict.
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/summaries");
        for entry in std::fs::read_dir(&dir).expect("fixtures") {
            let text = std::fs::read_to_string(entry.expect("entry").path()).expect("fixture");
            for line in text.lines() {
                assert_eq!(classify(line), classify_unhinted(line), "{line:?}");
            }
        }
    }

    /// The words a pattern's matches must hold, one per top-level
    /// alternative of its first group of words: a hand list, kept beside
    /// the patterns, so that a new pattern must be thought about here.
    fn required_words(pattern: &str) -> Vec<&'static str> {
        let table: &[(&str, &[&'static str])] = &[
            (r"^(FAIL|XPASS|ERROR|UNRESOLVED|KPASS):?\s\S", &["FAIL", "XPASS", "ERROR", "UNRESOLVED", "KPASS"]),
            (r"^\s*--- FAIL: ", &["FAIL"]),
            (r"^panic: ", &["panic"]),
            (r"^(FAILED|ERROR) \S+", &["FAILED", "ERROR"]),
            (r"^\S+\.py:\d+: \w*(Error|Exception|Failed)\b", &["Error", "Exception", "Failed"]),
            (r"^test .+ \.\.\. FAILED$", &["FAILED"]),
            (r"^thread '.*' (\(\d+\) )?panicked at ", &["panicked"]),
            (r"^error: test failed", &["error"]),
            (r"^\s*\d+/\d+ Test +#\d+: .*\*\*\*", &["Test"]),
            (
                r"^\s*\d+ - .+ \((Failed|Timeout|SEGFAULT|Not Run|Subprocess aborted|Child aborted|Exception)\)$",
                &["Failed", "Timeout", "SEGFAULT", "Not Run", "Subprocess aborted", "Child aborted", "Exception"],
            ),
            (r"^\s*not ok \d+", &["not ok"]),
            (r"^Failed \d+/\d+ subtests", &["Failed"]),
            (r"^\s+Failed tests?: ", &["Failed"]),
            (r"^#\s+Failed test ", &["Failed"]),
            (r"^[^\s:][^:]*:\d+(:\d+)?: (fatal )?error: ", &["error"]),
            (r"^error(\[E\d+\])?: ", &["error"]),
            (r"undefined reference to ", &["undefined reference"]),
            (r"^collect2: error: ", &["error"]),
            (r"^(/\S*/)?ld(\.\w+)?: .*error", &["error"]),
            (r"^g?make(\[\d+\])?: \*\*\* ", &["***"]),
            (r"^\s*=== .+ Summary ===", &["Summary"]),
            (r"^# of (expected|unexpected|unresolved|untested|unsupported) ", &["# of "]),
            (
                r"^# (TOTAL|PASS|FAIL|XFAIL|XPASS|ERROR|SKIP): +\d+",
                &["TOTAL", "PASS", "FAIL", "XFAIL", "XPASS", "ERROR", "SKIP"],
            ),
            (r"^=+ .*\b(passed|failed|errors?)\b.* in [\d.]+s.* =+$", &["passed", "failed", "error"]),
            (r"^test result: FAILED\.", &["FAILED"]),
            (r"^\d+% tests passed, \d+ tests? failed out of \d+", &["passed"]),
            (r"^Result: (FAIL|PASS)", &["Result: "]),
            (r"^Files=\d+, Tests=\d+", &["Files="]),
            (r"^FAIL$", &["FAIL"]),
        ];
        table
            .iter()
            .find(|(p, _)| *p == pattern)
            .map(|(_, words)| words.to_vec())
            .unwrap_or_else(|| panic!("a pattern without its words in required_words: {pattern}"))
    }

    fn by_lines(text: &str) -> Summary {
        summarize_each(text.lines().enumerate().map(|(i, l)| (i as u64 + 1, l)))
    }

    /// The sequential way, every line fed.
    fn summarize_each<'a>(lines: impl IntoIterator<Item = (u64, &'a str)>) -> Summary {
        let mut s = Summarizer::new();
        for (n, l) in lines {
            s.feed(n, l);
        }
        s.finish()
    }

    fn by_text(text: &str) -> Summary {
        let mut s = Summarizer::new();
        let next = feed_text(&mut s, text.as_bytes(), 1);
        assert_eq!(next, text.lines().count() as u64 + 1, "{text:?}");
        s.finish()
    }

    #[test]
    fn a_block_gives_what_its_lines_give() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/summaries");
        for entry in std::fs::read_dir(&dir).expect("fixtures") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "txt") {
                let text = std::fs::read_to_string(&path).expect("fixture");
                assert_eq!(by_text(&text), by_lines(&text), "{}", path.display());
                let no_end = text.trim_end_matches('\n');
                assert_eq!(by_text(no_end), by_lines(no_end), "{} without its last newline", path.display());
            }
        }
        for text in ["", "\n", "a\nb", "error: x\n --> y\n", "x\nerror[E1]: a\n\n\n --> late\n", "FAIL: a\nFAIL: b"] {
            assert_eq!(by_text(text), by_lines(text), "{text:?}");
        }
    }

    #[test]
    fn a_location_in_the_next_block_is_kept() {
        let text = "x\nerror[E1]: a\n\n --> src/a.rs:1:2\nFAIL: t\n";
        let ends: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).collect();
        for cut in ends {
            let mut s = Summarizer::new();
            let next = feed_text(&mut s, &text.as_bytes()[..cut], 1);
            feed_text(&mut s, &text.as_bytes()[cut..], next);
            assert_eq!(s.finish(), by_lines(text), "cut after byte {cut}");
        }
    }

    proptest::proptest! {
        #[test]
        fn blocks_and_lines_agree_on_mixed_output(picks in proptest::collection::vec(0usize..12, 0..200)) {
            let pool = [
                "plain line", "error[E0308]: mismatched types", " --> src/a.rs:1:2", "  |", "FAIL: t1",
                "test x ... FAILED", "test result: FAILED. 1 passed; 1 failed", "ok", "", "Result: PASS",
                "make: *** [all] Error 2", "  --> stray",
            ];
            let text: String = picks.iter().map(|&i| format!("{}\n", pool[i])).collect();
            proptest::prop_assert_eq!(by_text(&text), by_lines(&text));
        }
    }

    #[test]
    fn a_rustc_error_keeps_its_location() {
        let lines = ["error[E0308]: mismatched types", " --> src/lib.rs:2:48", "  |", " --> not this one"];
        let s = summarize(lines.iter().enumerate().map(|(i, l)| (i as u64 + 1, *l)));
        let texts: Vec<&str> = s.lines.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["error[E0308]: mismatched types", " --> src/lib.rs:2:48"]);
    }

    #[test]
    fn failures_beyond_the_cap_are_counted_and_the_last_tallies_kept() {
        let mut lines: Vec<String> = (0..100).map(|i| format!("FAIL: case{i}")).collect();
        lines.extend((0..20).map(|i| format!("Result: FAIL {i}")));
        let s = summarize(lines.iter().enumerate().map(|(i, l)| (i as u64 + 1, l.as_str())));
        assert_eq!(s.more, 70);
        assert_eq!(s.lines.len(), MAX_PICKED + MAX_TALLIES);
        assert_eq!(s.lines.last().map(|(_, t)| t.as_str()), Some("Result: FAIL 19"));
    }

    /// Each fixture is the real output of a real tool; its `.summary` file
    /// holds the expected summary lines. `DOCENT_BLESS=1` rewrites them.
    #[rstest]
    #[case::cargo_test("cargo_test")]
    #[case::rustc_errors("rustc_errors")]
    #[case::gcc_make("gcc_make")]
    #[case::gcc_link("gcc_link")]
    #[case::pytest("pytest")]
    #[case::prove("prove")]
    #[case::tap_verbose("tap_verbose")]
    fn real_outputs_give_their_summaries(#[case] name: &str) {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/summaries");
        let raw = std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("fixture");
        let s = summarize(raw.lines().enumerate().map(|(i, l)| (i as u64 + 1, l)));
        let got: String = s.lines.iter().map(|(n, t)| format!("{n}: {t}\n")).collect();
        let expected_path = dir.join(format!("{name}.summary"));
        if std::env::var_os("DOCENT_BLESS").is_some() {
            std::fs::write(&expected_path, &got).expect("bless");
        }
        let expected = std::fs::read_to_string(&expected_path).expect("expected summary");
        assert_eq!(got, expected, "{name}");
        assert!(!s.lines.is_empty(), "{name} has summary lines");
    }
}

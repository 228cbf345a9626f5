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

use std::sync::LazyLock;

use regex::RegexSet;

/// The most failure and error lines kept; the rest are counted.
pub const MAX_PICKED: usize = 30;
/// The most tally lines kept (the last ones win: they close the run).
pub const MAX_TALLIES: usize = 10;
/// A kept line is cut to this many characters.
pub const MAX_CHARS: usize = 300;
/// The environment variable that turns summaries off when `0`.
pub const ENV_SUMMARY: &str = "DOCENT_TERMINAL_MCP_SUMMARY";

/// Whether summaries are on (they are unless the variable says `0`).
pub fn enabled() -> bool {
    std::env::var(ENV_SUMMARY).map_or(true, |v| v.trim() != "0")
}

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
const LOCATION_WITHIN: u64 = 3;

/// The summary being gathered from fed lines.
#[derive(Debug, Default)]
pub struct Summarizer {
    /// Kept failure and location lines, in order.
    picked: Vec<(u64, Kind, String)>,
    /// Kept tally lines, the last [`MAX_TALLIES`].
    tallies: Vec<(u64, String)>,
    /// Failure lines seen beyond [`MAX_PICKED`].
    more: u64,
    /// The line of the last rustc error, whose location may follow.
    rust_error_at: Option<u64>,
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
        if let Some(kind) = classify(line) {
            match kind {
                Kind::Tally => {
                    if self.tallies.len() == MAX_TALLIES {
                        self.tallies.remove(0);
                    }
                    self.tallies.push((number, cut(line)));
                }
                Kind::Failure | Kind::Location => self.pick(number, kind, line),
            }
            if line.starts_with("error") {
                self.rust_error_at = Some(number);
            }
            return;
        }
        let near = self.rust_error_at.is_some_and(|at| number <= at + LOCATION_WITHIN);
        if near && line.trim_start().starts_with("--> ") {
            self.rust_error_at = None;
            self.pick(number, Kind::Location, line);
        }
    }

    fn pick(&mut self, number: u64, kind: Kind, line: &str) {
        // A location belongs to its error: keep it whenever the error was kept.
        let room = self.picked.len() < MAX_PICKED || (kind == Kind::Location && self.more == 0);
        if room {
            self.picked.push((number, kind, cut(line)));
        } else if kind == Kind::Failure {
            self.more += 1;
        }
    }

    /// The summary, failures and tallies merged in line order.
    pub fn finish(self) -> Summary {
        let mut lines: Vec<(u64, String)> = self.picked.into_iter().map(|(n, _, t)| (n, t)).collect();
        lines.extend(self.tallies);
        lines.sort_by_key(|(n, _)| *n);
        lines.dedup_by_key(|(n, _)| *n);
        Summary { lines, more: self.more }
    }
}

/// Whether `line` is a summary line, and of which kind.
pub fn classify(line: &str) -> Option<Kind> {
    let line = line.trim_end();
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

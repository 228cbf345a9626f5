//! Input regions: lines typed into a program that is not an integrated
//! shell at its prompt (gdb, python, sqlite3, a plain shell).
//!
//! Such a program prints no markers, so where its answer ends is found by
//! prompt matching: the region ends when the unfinished line after the
//! typed one looks like the program's prompt (a built-in pattern, or the
//! session's own), when the output settles (only for programs whose prompt
//! matched no pattern when the line was typed: without a known prompt,
//! quiet is the only sign), or at a timeout. The router asks the logger to
//! open one just before it types; the logger closes it.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde::{Deserialize, Serialize};

use super::{LinePos, Region};
use crate::types::{Cursor, LineNo};

/// Prompts that end an input region, matched against the unfinished line
/// (so they end in `$`): debuggers, REPLs, database shells, plain shells.
///
/// Digits and word characters are spelled as ASCII classes: Unicode's
/// `\w` and `\d` compile to automata a hundred times larger (the set took
/// 1.6 MB and 5 ms to build with them, 0.4 MB and 0.3 ms without), and
/// the prompts they match number their lines in ASCII. A database name
/// in another script still matches, by the plain-shell pattern at the end.
pub const PROMPT_PATTERNS: &[&str] = &[
    r"\((gdb|lldb|Pdb|pdb)\) $",
    r"ipdb> $",
    r">>> $",
    r"\.\.\. $",
    r"In \[[0-9]+\]: $",
    r"^ +\.\.\.: $",
    r"sqlite> $",
    r"^ +\.\.\.> $",
    r"irb\([^)]*\):[0-9]+:[0-9]+[>*'\x22] $",
    r"(mysql|MariaDB \[[^\]]*\])> $",
    r"^ +-> $",
    r"^[0-9A-Za-z_][0-9A-Za-z_-]*[=\-(!'\x22][#>] $",
    // node, guile, and plain shells: `$ `, `# `, `% `, `> `.
    r"[$#%>] $",
];

/// The prompts among [`PROMPT_PATTERNS`] that continue a statement begun
/// on an earlier line (python's and node's `...`, ipython's `...:`,
/// sqlite's `...>`, mysql's `->`, irb's `*` and quote prompts, psql's
/// `-#`, `(#`, `'#`): the program waits for the rest of it.
const CONTINUATION_PATTERNS: &[&str] = &[
    r"^\.\.\.$",
    r"^ +\.\.\.[:>]$",
    r"^ +->$",
    r"^irb\([^)]*\):[0-9]+:[0-9]+[*'\x22]$",
    r"^[0-9A-Za-z_][0-9A-Za-z_-]*[\-('\x22][#>]$",
];

/// Whether `prompt` (as shown, its trailing blanks trimmed) is a
/// program's continuation prompt (see [`CONTINUATION_PATTERNS`]).
pub fn continues_a_statement(prompt: &str) -> bool {
    static SET: LazyLock<RegexSet> =
        LazyLock::new(|| RegexSet::new(CONTINUATION_PATTERNS).unwrap_or_else(|_| RegexSet::empty()));
    SET.is_match(prompt.trim_end())
}

/// How long output must stay quiet to end the region of a program whose
/// prompt is not known.
pub const SETTLE_MS: u64 = 1_500;

/// What the router asks for when it types a line into a program.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputSpec {
    /// The region's label: the program's prompt and the input (or a
    /// stand-in for input that must not be logged).
    pub label: String,
    /// The pid of the program the line goes to (0: not known).
    pub pid: u32,
    /// The session's own prompt regex, tried besides [`PROMPT_PATTERNS`].
    pub prompt_pattern: Option<String>,
    /// The region ends this long after it opened, whatever happens.
    pub timeout_ms: u64,
}

/// The prompt patterns for a session: the built-in ones and its own.
///
/// The built-in set is compiled once per process and shared: the router
/// asks it on every quiet slice of a long wait, the logger on every line
/// typed into a program.
#[derive(Debug)]
pub struct Prompts {
    /// The session's own pattern, if it has one.
    own: Option<Regex>,
}

impl Prompts {
    /// The built-in prompts and `own`, the session's pattern (refused
    /// when it is not a valid regex).
    pub fn new(own: Option<&str>) -> Result<Prompts, regex::Error> {
        Ok(Prompts { own: own.map(Regex::new).transpose()? })
    }

    /// Whether `line` (the unfinished line as shown) reads as one of them.
    pub fn is_match(&self, line: &str) -> bool {
        built_in().is_match(line) || self.own.as_ref().is_some_and(|r| r.is_match(line))
    }
}

/// [`PROMPT_PATTERNS`], compiled on first use.
fn built_in() -> &'static RegexSet {
    static SET: LazyLock<RegexSet> = LazyLock::new(|| {
        // The patterns are constants, checked by the tests below; an empty
        // set (matching nothing) only if that ever failed.
        RegexSet::new(PROMPT_PATTERNS).unwrap_or_else(|_| RegexSet::empty())
    });
    &SET
}

/// The unfinished line as a person sees it: the cooker trims trailing
/// blanks, but a cursor standing past the text shows the blank a prompt
/// ends with.
fn as_shown(text: &str, at: Cursor) -> std::borrow::Cow<'_, str> {
    match at.col as usize > text.chars().count() {
        true => format!("{text} ").into(),
        false => text.into(),
    }
}

/// An input region that is still open, and how it will end.
#[derive(Debug)]
pub(super) struct OpenInput {
    /// The region as opened.
    pub region: Region,
    /// The prompts that end it.
    prompts: Prompts,
    /// Whether quiet ends it (its program's prompt was not recognised).
    settles: bool,
    /// The line the input was typed on; a prompt must come after it.
    typed_on: LineNo,
    /// When it ends at the latest.
    deadline_ms: u64,
    /// When output after the typed line last came; 0: none yet.
    last_output_ms: u64,
}

/// Why an input region ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InputEnd {
    /// The program's prompt is on the line that starts here.
    Prompt(LinePos),
    /// Quiet or the deadline: it ends where the output got to.
    Here(LinePos),
}

impl OpenInput {
    /// Opens `region` for input typed on the line `at` is on, where the
    /// unfinished line reads `prompt`.
    pub fn new(region: Region, spec: &InputSpec, prompt: &str, at: Cursor, now: u64) -> Result<OpenInput, String> {
        let prompts = Prompts::new(spec.prompt_pattern.as_deref()).map_err(|e| format!("prompt_pattern: {e}"))?;
        Ok(OpenInput {
            settles: !prompts.is_match(&as_shown(prompt, at)),
            prompts,
            region,
            typed_on: at.line,
            deadline_ms: now.saturating_add(spec.timeout_ms),
            last_output_ms: 0,
        })
    }

    /// After a chunk of output: ends at a prompt on a later line. Text on
    /// a later line counts as output, for settling.
    pub fn after_output(&mut self, current: &str, at: Cursor, now: u64) -> Option<InputEnd> {
        if at.line <= self.typed_on {
            return None;
        }
        if self.prompts.is_match(&as_shown(current, at)) {
            return Some(InputEnd::Prompt(LinePos { line: at.line, bytes: 0 }));
        }
        if !current.is_empty() || at.line > self.typed_on.next() {
            self.last_output_ms = now;
        }
        None
    }

    /// With time passing and no output: ends at the deadline, or once
    /// quiet for [`SETTLE_MS`] when it settles.
    pub fn on_tick(&self, at: Cursor, now: u64) -> Option<InputEnd> {
        (now >= self.due_ms()).then_some(InputEnd::Here(LinePos::at(at)))
    }

    /// When [`OpenInput::on_tick`] should next be asked.
    pub fn due_ms(&self) -> u64 {
        match self.settles && self.last_output_ms > 0 {
            true => self.deadline_ms.min(self.last_output_ms + SETTLE_MS),
            false => self.deadline_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::gdb("(gdb) ")]
    #[case::pdb("(Pdb) ")]
    #[case::python(">>> ")]
    #[case::python_more("... ")]
    #[case::ipython("In [3]: ")]
    #[case::sqlite("sqlite> ")]
    #[case::sqlite_more("   ...> ")]
    #[case::irb("irb(main):001:0> ")]
    #[case::mysql("mysql> ")]
    #[case::psql("postgres=# ")]
    #[case::psql_other_script("données=# ")]
    #[case::psql_more("postgres-> ")]
    #[case::node("> ")]
    #[case::plain_bash("bash-5.1$ ")]
    #[case::root("root@box:~# ")]
    fn known_prompts_match(#[case] prompt: &str) {
        assert!(Prompts::new(None).expect("valid").is_match(prompt), "{prompt:?}");
    }

    #[rstest]
    #[case::typed("(gdb) break main")]
    #[case::output("Breakpoint 1 at 0x1149: file bug.c, line 5.")]
    #[case::no_space(">>>")]
    fn other_lines_do_not(#[case] line: &str) {
        assert!(!Prompts::new(None).expect("valid").is_match(line), "{line:?}");
    }

    #[test]
    fn the_built_in_patterns_compile() {
        assert!(RegexSet::new(PROMPT_PATTERNS).is_ok());
        assert!(RegexSet::new(CONTINUATION_PATTERNS).is_ok());
    }

    #[rstest]
    #[case::python("... ", true)]
    #[case::ipython("   ...: ", true)]
    #[case::sqlite("   ...> ", true)]
    #[case::mysql("    -> ", true)]
    #[case::irb("irb(main):002:1* ", true)]
    #[case::psql("postgres-# ", true)]
    #[case::psql_paren("postgres(# ", true)]
    #[case::python_primary(">>> ", false)]
    #[case::psql_primary("postgres=# ", false)]
    #[case::irb_primary("irb(main):001:0> ", false)]
    #[case::gdb("(gdb) ", false)]
    #[case::shell("root@box:~# ", false)]
    #[case::output("loading...", false)]
    fn continuation_prompts_are_told_apart(#[case] prompt: &str, #[case] continues: bool) {
        assert_eq!(continues_a_statement(prompt), continues, "{prompt:?}");
    }

    #[test]
    fn the_sessions_own_pattern_counts_and_bad_ones_are_refused() {
        assert!(Prompts::new(Some(r"^myapp\[\d+\]: $")).expect("valid").is_match("myapp[7]: "));
        assert!(Prompts::new(Some("(")).is_err());
    }

    fn cursor(line: u64, text: &str) -> Cursor {
        Cursor { line: LineNo(line), col: text.len() as u32, text_len: text.len() as u32 }
    }

    fn open(prompt: &str) -> OpenInput {
        let spec = InputSpec { label: format!("{prompt}x"), timeout_ms: 10_000, ..InputSpec::default() };
        OpenInput::new(Region::default(), &spec, prompt, cursor(5, prompt), 1_000).expect("opens")
    }

    #[test]
    fn a_known_prompt_ends_it_only_on_a_later_line() {
        let mut o = open("(gdb) ");
        assert_eq!(o.after_output("(gdb) bt", cursor(5, "(gdb) bt"), 1_100), None);
        assert_eq!(o.after_output("#0  main ()", cursor(6, "#0  main ()"), 1_200), None);
        let end = o.after_output("(gdb) ", cursor(8, "(gdb) "), 1_300);
        assert_eq!(end, Some(InputEnd::Prompt(LinePos { line: LineNo(8), bytes: 0 })));
    }

    #[test]
    fn a_known_prompt_never_settles_but_times_out() {
        let mut o = open(">>> ");
        o.after_output("working", cursor(6, "working"), 1_100);
        assert_eq!(o.on_tick(cursor(6, "working"), 9_000), None);
        assert!(matches!(o.on_tick(cursor(6, "working"), 11_000), Some(InputEnd::Here(_))));
    }

    #[test]
    fn an_unknown_prompt_settles_after_output_only() {
        let mut o = open("");
        // The echo alone moves to the next line: not output yet.
        o.after_output("", cursor(6, ""), 1_050);
        assert_eq!(o.due_ms(), 11_000);
        o.after_output("hello", cursor(6, "hello"), 1_100);
        assert_eq!(o.due_ms(), 1_100 + SETTLE_MS);
        assert_eq!(o.on_tick(cursor(7, ""), 1_200), None);
        let end = o.on_tick(cursor(7, ""), 1_100 + SETTLE_MS);
        assert_eq!(end, Some(InputEnd::Here(LinePos { line: LineNo(7), bytes: 0 })));
    }
}

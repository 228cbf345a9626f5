//! A search pattern, compiled to match within one line.
//!
//! The log is searched in large blocks of whole lines with one regex run
//! each, for speed; the price would be a pattern that runs over a line
//! break (`\s`, `[^x]`, `(?s).`) and, asked again from each line's start,
//! scans the rest of the block each time: quadratic, minutes on a long
//! log. So the pattern is parsed first and every class in it loses the
//! line break: a match can never leave its line, and each byte of a
//! block is looked at a bounded number of times. A literal line break can
//! match nothing, and is refused with the reason.
//!
//! The pattern's length is bounded before anything parses it (the parser
//! itself can take hundreds of megabytes on a pattern of a few), and the
//! compiled program and the lazy DFA's cache are bounded by size.

use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind};

use super::SearchError;

/// The longest pattern accepted, in bytes.
pub const MAX_PATTERN: usize = 4096;
/// The largest compiled regex accepted.
const REGEX_SIZE_LIMIT: usize = 1 << 22;
/// The most memory the lazy DFA's cache may take.
const DFA_SIZE_LIMIT: usize = 1 << 22;
/// How deep groups and repetitions may nest.
const NEST_LIMIT: u32 = 100;

/// Compiles `pattern` with line semantics: `^` and `$` match at every
/// line's start and end, and no match runs over a line break.
pub fn compile(pattern: &str) -> Result<Regex, SearchError> {
    if pattern.len() > MAX_PATTERN {
        return Err(SearchError::Pattern(format!(
            "it is {} bytes long; a search pattern may be at most {MAX_PATTERN} bytes",
            pattern.len()
        )));
    }
    let hir = regex_syntax::ParserBuilder::new()
        .multi_line(true)
        .utf8(false)
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(pattern)
        .map_err(|e| SearchError::Pattern(e.to_string()))?;
    let hir = within_a_line(hir)?;
    RegexBuilder::new(&hir.to_string())
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .nest_limit(NEST_LIMIT.saturating_mul(2))
        .build()
        .map_err(|e| SearchError::Pattern(e.to_string()))
}

/// `hir` with the line break taken out of every class; a literal line
/// break refuses it.
fn within_a_line(hir: Hir) -> Result<Hir, SearchError> {
    Ok(match hir.into_kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) if lit.0.contains(&b'\n') => {
            return Err(SearchError::Pattern(
                "it holds a line break (\\n), which can never match: the log is searched one line at a time".into(),
            ));
        }
        HirKind::Literal(lit) => Hir::literal(lit.0),
        HirKind::Class(Class::Unicode(mut class)) => {
            class.difference(&ClassUnicode::new([ClassUnicodeRange::new('\n', '\n')]));
            Hir::class(Class::Unicode(class))
        }
        HirKind::Class(Class::Bytes(mut class)) => {
            class.difference(&ClassBytes::new([ClassBytesRange::new(b'\n', b'\n')]));
            Hir::class(Class::Bytes(class))
        }
        HirKind::Look(look) => Hir::look(look),
        HirKind::Repetition(mut rep) => {
            rep.sub = Box::new(within_a_line(*rep.sub)?);
            Hir::repetition(rep)
        }
        HirKind::Capture(mut cap) => {
            cap.sub = Box::new(within_a_line(*cap.sub)?);
            Hir::capture(cap)
        }
        HirKind::Concat(subs) => Hir::concat(subs.into_iter().map(within_a_line).collect::<Result<_, _>>()?),
        HirKind::Alternation(subs) => Hir::alternation(subs.into_iter().map(within_a_line).collect::<Result<_, _>>()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_class_takes_a_line_break_and_the_rest_is_the_same_language() {
        for (pattern, text, want) in [
            (r"a\sb", "a\nb", false),
            (r"a\sb", "a b", true),
            ("a[^x]b", "a\nb", false),
            ("(?s)a.b", "a\nb", false),
            ("(?i)^ERROR$", "x\nerror\ny", true),
            (r"(?-u)\xff", "x", false),
            (r"\w+\s*$", "word  \n", true),
        ] {
            assert_eq!(compile(pattern).expect(pattern).is_match(text.as_bytes()), want, "{pattern} on {text:?}");
        }
        assert!(compile(r"(?-u)\xff").expect("bytes").is_match(b"a\xffb"));
    }

    #[test]
    fn a_line_break_a_long_pattern_and_a_bad_one_are_refused_with_the_reason() {
        assert!(compile(r"a\nb").expect_err("a line break").to_string().contains("one line at a time"));
        let long = "a".repeat(MAX_PATTERN + 1);
        let err = compile(&long).expect_err("too long").to_string();
        assert!(err.contains(&MAX_PATTERN.to_string()) && err.contains(&(MAX_PATTERN + 1).to_string()), "{err}");
        assert!(compile("a(b").expect_err("bad").to_string().contains("unclosed group"));
        let deep = format!("{}a{}", "(".repeat(200), ")".repeat(200));
        assert!(compile(&deep).is_err(), "nesting is bounded");
    }
}

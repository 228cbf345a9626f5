//! Shaping output for a reply: what to show of a range of lines, and how.
//! Pure functions, so the rules are tested without a terminal.

use std::fmt::Write;

use dtmcp_core::types::LineNo;

/// Output up to this many lines is shown whole.
pub const WHOLE_LINES: u64 = 60;
/// Of longer output, this many lines from the start...
pub const HEAD_LINES: u64 = 15;
/// ...and this many from the end.
pub const TAIL_LINES: u64 = 35;
/// A line longer than this many characters is cut in replies.
pub const MAX_LINE_CHARS: usize = 2000;

/// Which lines of `first..=last` a reply shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// No lines.
    Empty,
    /// All of them.
    Whole(LineNo, LineNo),
    /// Head and tail, with the middle left out.
    Clipped {
        /// The shown head, inclusive.
        head: (LineNo, LineNo),
        /// The shown tail, inclusive.
        tail: (LineNo, LineNo),
    },
}

/// Decides what to show of lines `first..=last`.
pub fn plan(first: LineNo, last: LineNo) -> Plan {
    if last < first {
        return Plan::Empty;
    }
    let n = last.0 - first.0 + 1;
    if n <= WHOLE_LINES {
        return Plan::Whole(first, last);
    }
    Plan::Clipped { head: (first, LineNo(first.0 + HEAD_LINES - 1)), tail: (LineNo(last.0 + 1 - TAIL_LINES), last) }
}

/// Cuts an overlong line, saying how much was left out.
pub fn cut_line(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        None => text.into(),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!("{} … [{rest} more characters]", &text[..at]).into()
        }
    }
}

/// Renders lines without numbers.
pub fn plain(lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        out.push_str(&cut_line(l));
        out.push('\n');
    }
    out
}

/// Renders lines with their numbers, right-aligned to `width` digits.
pub fn numbered(first: LineNo, lines: &[String], width: usize) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        let _ = writeln!(out, "{:>width$}  {}", first.0 + i as u64, cut_line(l));
    }
    out
}

/// Renders a clipped output: numbered head, a line naming the gap and how to
/// read it, numbered tail.
pub fn clipped(head: (LineNo, &[String]), tail: (LineNo, &[String]), read_hint: &str) -> String {
    let width = digits(tail.0.0 + tail.1.len() as u64);
    let gap_first = head.0.0 + head.1.len() as u64;
    let gap_last = tail.0.0.saturating_sub(1);
    let mut out = numbered(head.0, head.1, width);
    let _ = writeln!(
        out,
        "{:>width$}  … {} lines not shown ({gap_first}-{gap_last}): {read_hint}",
        "",
        gap_last + 1 - gap_first,
    );
    out.push_str(&numbered(tail.0, tail.1, width));
    out
}

/// How many decimal digits `n` has.
pub fn digits(n: u64) -> usize {
    n.max(1).ilog10() as usize + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_shown_whole_and_long_output_clipped() {
        assert_eq!(plan(LineNo(5), LineNo(4)), Plan::Empty);
        assert_eq!(plan(LineNo(1), LineNo(60)), Plan::Whole(LineNo(1), LineNo(60)));
        assert_eq!(
            plan(LineNo(10), LineNo(5009)),
            Plan::Clipped { head: (LineNo(10), LineNo(24)), tail: (LineNo(4975), LineNo(5009)) }
        );
    }

    #[test]
    fn the_gap_line_names_the_missing_range() {
        let head = vec!["a".to_string(), "b".to_string()];
        let tail = vec!["y".to_string(), "z".to_string()];
        let text = clipped((LineNo(1), &head), (LineNo(99), &tail), "read lines 3-98");
        assert!(text.contains("… 96 lines not shown (3-98)"), "{text}");
        assert!(text.starts_with("  1  a\n"), "{text}");
        assert!(text.ends_with("100  z\n"), "{text}");
    }

    #[test]
    fn overlong_lines_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        let cut = cut_line(&long);
        assert!(cut.ends_with("[5 more characters]"));
    }
}

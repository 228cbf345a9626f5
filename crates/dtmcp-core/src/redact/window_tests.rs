//! Windows cut through secrets: tables of the cases that leaked, and a
//! property over random windows of lines holding known values.

use proptest::prelude::*;

use super::*;
use crate::redact::{Known, Table, redact_screen};

const GH: &str = "ghp_opG6vx7AjG5PaUuBx9Kc2LmN4pQ8rS1tU3vW";
const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

/// `context` cut to `from..to` and redacted, with no value known
/// beforehand.
fn window(context: &str, from: usize, to: usize, cut: Cut, table: &mut Table) -> String {
    redact_window(context, from..to, cut, &Known::default(), table).0
}

/// Whether `shown` holds `n` characters in a row of `value`.
fn shows_run_of(shown: &str, value: &str, n: usize) -> Option<String> {
    let chars: Vec<char> = value.chars().collect();
    chars.windows(n).map(|w| w.iter().collect::<String>()).find(|run| shown.contains(run.as_str()))
}

#[test]
fn a_window_starting_or_ending_inside_a_token_shows_its_placeholder() {
    let line = format!("$ echo {GH} done\n");
    let at = line.find("ghp_").expect("token");
    for from in at..at + GH.len() {
        for to in [from + 1, from + 20, line.len()] {
            let mut table = Table::default();
            let out = window(&line, from, to.min(line.len()), Cut::default(), &mut table);
            assert!(shows_run_of(&out, GH, 4).is_none(), "{from}..{to}: {out:?}");
            assert!(out.contains("‹secret:github-token:1›"), "{from}..{to}: {out:?}");
        }
    }
    let mut table = Table::default();
    assert_eq!(window(&line, 0, 2, Cut::default(), &mut table), "$ ", "text beside a secret stays");
    assert_eq!(window(&line, at + GH.len(), line.len(), Cut::default(), &mut table), " done\n");
}

#[test]
fn known_values_are_found_at_a_cut_edge_by_a_piece() {
    let mut known = Known::default();
    known.add("listed", "plain-words-deploy-value");
    let mut table = Table::default();
    // The context itself begins and ends inside the value.
    let text = "deploy-value and then plain-words-dep";
    let both = Cut { start: true, end: true };
    let (out, counts) = redact_window(text, 0..text.len(), both, &known, &mut table);
    assert_eq!(out, "‹secret:listed:1› and then ‹secret:listed:1›");
    assert_eq!(counts.total(), 2);
    // Pieces shorter than EDGE_MIN, and edges that are no cut, stay.
    let (out, _) = redact_window("value x", 0..7, both, &known, &mut table);
    assert_eq!(out, "value x");
    let (out, _) = redact_window(text, 0..text.len(), Cut::default(), &known, &mut table);
    assert_eq!(out, text);
}

#[test]
fn screen_rows_whose_first_row_goes_on_from_the_scrollback_hide_a_known_tail() {
    let mut table = Table::default();
    table.learn("github-token", GH);
    let tail = &GH[14..];
    let rows = [format!("{tail} done"), "$ ".to_string()];
    let (out, _) = redact_screen(&rows, 80, &Known::default(), &mut table);
    assert_eq!(out, ["‹secret:github-token:1› done", "$ "]);
}

/// A line of filler words around `secret`, and more lines of filler.
fn lines_with(secret: &str, filler: &[String]) -> String {
    let mut text = String::new();
    for (i, f) in filler.iter().enumerate() {
        if i == filler.len() / 2 {
            text.push_str(&format!("{f} {secret} {f}\n"));
        } else {
            text.push_str(f);
            text.push('\n');
        }
    }
    text
}

/// The context a windowed view reads around `from..to` of `text`: out to
/// the ends of the lines, at most `margin` bytes each way.
fn context_of(text: &str, from: usize, to: usize, margin: usize) -> (usize, usize, Cut) {
    let lo = from.saturating_sub(margin);
    let hi = (to + margin).min(text.len());
    let start = text[lo..from].rfind('\n').map_or(lo, |i| lo + i + 1);
    let end = text[to..hi].find('\n').map_or(hi, |i| to + i);
    let cut = Cut { start: start > 0 && !text[..start].ends_with('\n'), end: end < text.len() };
    (floor(text, start), floor(text, end), cut)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// No window of lines holding known values shows ten characters in a
    /// row of one, whatever the window and however little context the
    /// caller could read around it.
    #[test]
    fn no_window_shows_ten_characters_of_a_known_value(
        which in 0usize..4,
        filler in proptest::collection::vec("[a-z]{1,9}( [a-z]{1,9}){0,6}", 1..6),
        a in any::<proptest::sample::Index>(),
        b in any::<proptest::sample::Index>(),
        margin in prop_oneof![Just(0usize), 1usize..40, Just(4096usize)],
    ) {
        let pem_line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7dF3xK9pLm2Qw";
        let secrets = [GH, JWT, pem_line, "correct-horse-battery-staple-42"];
        let secret = secrets[which];
        let text = lines_with(secret, &filler);
        let (x, y) = (a.index(text.len() + 1), b.index(text.len() + 1));
        let (from, to) = (floor(&text, x.min(y)), floor(&text, x.max(y)));
        let (start, end, cut) = context_of(&text, from, to, margin);
        let mut known = Known::default();
        known.add("listed", secret);
        let mut table = Table::default();
        let (out, _) = redact_window(&text[start..end], from - start..to - start, cut, &known, &mut table);
        prop_assert!(shows_run_of(&out, secret, 10).is_none(), "window {from}..{to} of {text:?} showed {out:?}");
    }

    /// The same for secrets the session has not seen yet, found by shape,
    /// when the caller reads to the ends of the lines.
    #[test]
    fn no_window_with_its_lines_shows_ten_characters_of_a_shaped_secret(
        which in 0usize..2,
        filler in proptest::collection::vec("[a-z]{1,9}( [a-z]{1,9}){0,6}", 1..6),
        a in any::<proptest::sample::Index>(),
        b in any::<proptest::sample::Index>(),
    ) {
        let secret = [GH, JWT][which];
        let text = lines_with(secret, &filler);
        let (x, y) = (a.index(text.len() + 1), b.index(text.len() + 1));
        let (from, to) = (floor(&text, x.min(y)), floor(&text, x.max(y)));
        let (start, end, cut) = context_of(&text, from, to, 4096);
        let mut table = Table::default();
        let out = window(&text[start..end], from - start, to - start, cut, &mut table);
        prop_assert!(shows_run_of(&out, secret, 10).is_none(), "window {from}..{to} of {text:?} showed {out:?}");
    }

    /// A line wrapped into screen rows, any number of its first rows
    /// scrolled away: no row shows ten characters of a known value.
    #[test]
    fn no_screen_shows_ten_characters_of_a_known_value_however_it_wraps(
        which in 0usize..3,
        before in "[a-z ]{0,30}",
        cols in 12usize..50,
        scrolled in 0usize..4,
    ) {
        let secret = [GH, JWT, "correct-horse-battery-staple-42"][which];
        let line: Vec<char> = format!("{before}{secret} end").chars().collect();
        let rows: Vec<String> = line.chunks(cols).map(|c| c.iter().collect()).collect();
        let rows = &rows[scrolled.min(rows.len() - 1)..];
        let mut table = Table::default();
        table.learn("listed", secret);
        let (out, _) = redact_screen(rows, cols, &Known::default(), &mut table);
        for row in &out {
            prop_assert!(shows_run_of(row, secret, 10).is_none(), "{rows:?} showed {row:?}");
        }
    }
}

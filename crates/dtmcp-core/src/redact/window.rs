//! Redacting a window of a longer text: a range of a log's bytes, rows of
//! a screen.
//!
//! A window cuts wherever it is told to, and a cut through a secret leaves
//! two pieces of which neither looks like one: a token's head is too
//! short for its rule, its tail has lost the prefix. So a window is never
//! redacted alone. Its caller reads context around it (to the ends of the
//! lines it cuts, within a margin), the redactor finds the secrets of the
//! whole, and only then is the window cut out of it: a secret that the
//! window's edge cuts is shown as its placeholder, whole, and none of its
//! characters. Where the context itself had to be cut (a line longer than
//! the margin), the values the session knows are still found at its edge
//! by a piece of [`EDGE_MIN`] characters or more.

use std::ops::Range;

use super::{Counts, Cut, EDGE_MIN, Found, Known, Span, Table, find, hide_into};

/// The part `shown` of `context` with every secret that touches it
/// replaced by its placeholder from `table` (new ones added there), and
/// how many of each kind it shows. `cut` says where `context` itself was
/// cut out of a longer text. `shown` is clamped to `context` and to its
/// character boundaries.
///
/// A secret the window cuts shows as its placeholder, whole; one over
/// several lines keeps its lines as [`super::redact`] keeps them.
pub fn redact_window(
    context: &str,
    shown: Range<usize>,
    cut: Cut,
    known: &Known,
    table: &mut Table,
) -> (String, Counts) {
    let shown = floor(context, shown.start)..floor(context, shown.end.max(shown.start));
    let (found, _) = find(context, known, table, cut);
    let mut out = String::with_capacity(shown.len());
    let mut counts = Counts::default();
    let mut at = shown.start;
    for f in found.iter().filter(|f| touches(f, &shown)) {
        let (from, to) = (f.range.start.max(shown.start), f.range.end.min(shown.end));
        out.push_str(&context[at..from]);
        hide_into(&mut out, &context[from..to], &f.placeholder);
        *counts.0.entry(f.kind.clone()).or_default() += 1;
        at = to;
    }
    out.push_str(&context[at..shown.end]);
    (out, counts)
}

/// Whether find `f` has a byte inside `shown`.
fn touches(f: &Found, shown: &Range<usize>) -> bool {
    f.range.start < shown.end && f.range.end > shown.start
}

/// The largest character boundary of `s` at or below `n`.
fn floor(s: &str, n: usize) -> usize {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// The pieces of `values` (each with its kind) that stand at the edges of
/// `text` that `cut` names: at a cut start, the longest end of a value
/// the text begins with; at a cut end, the longest beginning of a value
/// it ends with; each at least [`EDGE_MIN`] characters and not the whole
/// value (a whole one is found as a value); cut at both, a text that
/// lies inside a value whole. A piece is a find of its value, so that it
/// shows the value's placeholder.
pub(super) fn at_edges(text: &str, cut: Cut, values: Vec<(&str, &str)>) -> Vec<Span> {
    let mut spans = Vec::new();
    if !cut.start && !cut.end {
        return spans;
    }
    let mut head: Option<(usize, &str, &str)> = None;
    let mut tail: Option<(usize, &str, &str)> = None;
    for (kind, value) in values {
        // Cut at both ends, all of it inside one value.
        if cut.start && cut.end && text.chars().count() >= EDGE_MIN && value.contains(text) {
            return vec![Span { range: 0..text.len(), kind: kind.to_string(), value: Some(value.to_string()) }];
        }
        if cut.start
            && let Some(len) = longest_end_at_start(text, value)
            && head.is_none_or(|(l, _, _)| len > l)
        {
            head = Some((len, kind, value));
        }
        if cut.end
            && let Some(len) = longest_start_at_end(text, value)
            && tail.is_none_or(|(l, _, _)| len > l)
        {
            tail = Some((len, kind, value));
        }
    }
    if let Some((len, kind, value)) = head {
        spans.push(Span { range: 0..len, kind: kind.to_string(), value: Some(value.to_string()) });
    }
    if let Some((len, kind, value)) = tail {
        let range = text.len() - len..text.len();
        if spans.first().is_none_or(|s| s.range.end <= range.start) {
            spans.push(Span { range, kind: kind.to_string(), value: Some(value.to_string()) });
        }
    }
    spans
}

/// The length in bytes of the longest proper end of `value`, at least
/// [`EDGE_MIN`] characters, that `text` begins with.
fn longest_end_at_start(text: &str, value: &str) -> Option<usize> {
    let starts = value.char_indices().map(|(i, _)| i).skip(1);
    starts
        .take_while(|&i| value[i..].chars().count() >= EDGE_MIN)
        .find(|&i| text.as_bytes().starts_with(&value.as_bytes()[i..]))
        .map(|i| value.len() - i)
}

/// The length in bytes of the longest proper beginning of `value`, at
/// least [`EDGE_MIN`] characters, that `text` ends with.
fn longest_start_at_end(text: &str, value: &str) -> Option<usize> {
    let mut ends: Vec<usize> = value.char_indices().map(|(i, _)| i).skip(1).collect();
    ends.reverse();
    ends.into_iter()
        .take_while(|&i| value[..i].chars().count() >= EDGE_MIN)
        .find(|&i| text.as_bytes().ends_with(&value.as_bytes()[..i]))
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;

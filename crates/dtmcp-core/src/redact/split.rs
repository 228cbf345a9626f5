//! Tokens split by a tab: `printf '%s\t%s'` prints a token's halves with a
//! tab between them, which a terminal draws as up to eight blanks and the
//! raw view spells `\t`; neither half matches its rule, yet a reader joins
//! them at a glance.
//!
//! Only a candidate is read across such a gap: a run of token characters
//! that begins with the fixed prefix of a provider's format (`ghp_`,
//! `AKIA`, `eyJ`…) at a word's start and does not match its rule alone.
//! It is joined with the run after the gap (up to [`MAX_GAPS`] gaps), and
//! kept when the join matches a rule from the candidate's first character
//! into the part after a gap. Prose after an `sk-` stays prose: it would
//! take dozens of letters with no space but the gaps to make a key.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::Span;
use super::rules::Rules;

/// The fixed beginnings of the formats that have one.
const PREFIXES: [&str; 31] = [
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "glptt-",
    "glrt-",
    "glsoat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "xoxe-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "whsec_",
    "AIza",
    "npm_",
    "pypi-",
    "AKIA",
    "ASIA",
    "ABIA",
    "eyJ",
];

/// The gaps one candidate is read across at most.
const MAX_GAPS: usize = 3;
/// The most blanks a terminal draws for one tab.
const TAB_WIDTH: usize = 8;

/// A contiguous NFA, as for the rules' keywords (see `Rules::compile`).
static PREFIX_FINDER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .kind(Some(AhoCorasickKind::ContiguousNFA))
        .build(PREFIXES)
        .expect("constant prefixes")
});

/// A character of a token in any of the prefixed formats.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// The end of the run of token characters that starts at `at`.
fn run_end(text: &[u8], at: usize) -> usize {
    at + text[at..].iter().take_while(|b| token_byte(**b)).count()
}

/// The length of the gap at `at`: a tab, a tab spelled out (`\t`), or one
/// to [`TAB_WIDTH`] blanks; 0 when there is none.
fn gap_len(text: &[u8], at: usize) -> usize {
    match text.get(at..) {
        Some([b'\t', ..]) => 1,
        Some([b'\\', b't', ..]) => 2,
        Some(rest) => match rest.iter().take_while(|b| **b == b' ').count() {
            n @ 1..=TAB_WIDTH => n,
            _ => 0,
        },
        None => 0,
    }
}

/// The secrets of `text` that a tab splits, by `rules`; each span covers
/// the gaps, and its value is the token without them.
pub(super) fn split_tokens(text: &str, rules: &Rules) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    for m in PREFIX_FINDER.find_iter(text) {
        let start = m.start();
        if start > 0 && token_byte(bytes[start - 1]) {
            continue;
        }
        if let Some(span) = joined_at(text, start, rules) {
            spans.push(span);
        }
    }
    spans
}

/// The secret that starts at `start` across one or more gaps, if any.
fn joined_at(text: &str, start: usize, rules: &Rules) -> Option<Span> {
    let bytes = text.as_bytes();
    let mut end = run_end(bytes, start);
    if matches_from_start(&text[start..end], rules).is_some() {
        return None;
    }
    // The joined token, and for each of its pieces where it begins in the
    // token and in the text.
    let mut joined = text[start..end].to_string();
    let mut pieces = vec![(0usize, start)];
    for _ in 0..MAX_GAPS {
        let gap = gap_len(bytes, end);
        let next = end + gap;
        let next_end = if gap == 0 { next } else { run_end(bytes, next) };
        if next_end == next {
            break;
        }
        pieces.push((joined.len(), next));
        joined.push_str(&text[next..next_end]);
        end = next_end;
        let Some((len, kind)) = matches_from_start(&joined, rules) else { continue };
        let &(piece, at) = pieces.iter().rev().find(|(p, _)| *p < len)?;
        if pieces.len() < 2 || len <= pieces[1].0 {
            continue;
        }
        // The first join that makes a secret ends it: reading on would
        // let the rule take the word after the token too.
        let value = joined[..len].to_string();
        return Some(Span { range: start..at + (len - piece), kind: kind.to_string(), value: Some(value) });
    }
    None
}

/// The length of the longest match of `rules` that begins where `token`
/// begins, with its kind.
fn matches_from_start(token: &str, rules: &Rules) -> Option<(usize, &'static str)> {
    rules.find(token).into_iter().filter(|f| f.range.start == 0).map(|f| (f.range.end, f.kind)).max_by_key(|f| f.0)
}

#[cfg(test)]
mod tests {
    use crate::redact::{Known, Table, redact};

    const GH: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";

    fn hidden(text: &str) -> String {
        redact(text, &Known::default(), &mut Table::default()).0
    }

    #[test]
    fn a_token_split_by_a_tab_blanks_or_a_spelled_tab_is_found_whole() {
        let (head, tail) = GH.split_at(17);
        for gap in ["\t", "\\t", " ", "        "] {
            let text = format!("out: {head}{gap}{tail} end");
            let mut table = Table::default();
            let out = redact(&text, &Known::default(), &mut table).0;
            assert_eq!(out, "out: ‹secret:github-token:1› end", "gap {gap:?}");
            assert_eq!(table.value_of("‹secret:github-token:1›"), Some(GH), "the value has no gap in it");
        }
        let (a, rest) = GH.split_at(10);
        let (b, c) = rest.split_at(12);
        assert_eq!(hidden(&format!("{a}\t{b}\t{c}")), "‹secret:github-token:1›", "two tabs");
    }

    #[test]
    fn whole_tokens_and_prose_keep_their_neighbours() {
        assert_eq!(hidden(&format!("{GH}\tnext")), "‹secret:github-token:1›\tnext");
        for prose in [
            "sk-learn is a library for machine learning in python and more",
            "AKIA is how the keys begin\tand so on",
            "eyJ is base64 for {\" and that is all",
            "the ghp_ prefix marks a token",
        ] {
            assert_eq!(hidden(prose), prose);
        }
    }
}

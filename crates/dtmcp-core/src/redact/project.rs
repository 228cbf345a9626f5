//! What the redactor reads of a text: the text without what can stand
//! inside a secret and hide it from a rule or a value, while a reader
//! (or a terminal, or a copy and paste) still sees the secret whole.
//!
//! Taken out: escape sequences, as a reply spells them out (the raw
//! view's `\e[31m`, the `\033[31m`, `\x1b[31m`, `\E[31m`, `\u001b[31m` a
//! command line carries to `printf` or `echo -e`) or real ones (a screen
//! captured with its colours); and the characters that show nothing: zero
//! width space, non-joiner and joiner, word joiner and the invisible
//! operators after it, the byte order mark used as a zero width no-break
//! space, the soft hyphen and the Mongolian vowel separator. A find's
//! range in the projection maps back to a range of the text that covers
//! what was taken out of it.
//!
//! The patterns are matched over the text's bytes with Unicode off
//! (`(?-u)`), the invisible characters spelled as their UTF-8 bytes: a
//! Unicode class (a `[^\n\\]` as much as the invisible ones) is compiled
//! through a UTF-8 automaton whose working table takes 320 kB while it is
//! built, a spike in the router's resident memory on the first reply that
//! needs the pattern. Every match starts at an ASCII byte or at the first
//! byte of an invisible character, and ends after an ASCII byte or a whole
//! character, so its bounds are always bounds of the text's characters.

use std::sync::LazyLock;

/// A real escape sequence (CSI, OSC, or a short one), as in a screen
/// captured with its colours; over bytes, Unicode off.
pub(super) const REAL_ESCAPE_PATTERN: &str =
    r"(?-u:\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~]))";

/// The characters that show nothing and may stand inside a secret, in
/// UTF-8: U+00AD, U+180E, U+200B to U+200D, U+2060 to U+2064, U+FEFF.
const INVISIBLE_PATTERN: &str = r"(?-u:\xC2\xAD|\xE1\xA0\x8E|\xE2\x80[\x8B-\x8D]|\xE2\x81[\xA0-\xA4]|\xEF\xBB\xBF)";

/// Whether `c` is one of [`INVISIBLE_PATTERN`]'s characters.
fn invisible(c: char) -> bool {
    matches!(c, '\u{AD}' | '\u{180E}' | '\u{200B}'..='\u{200D}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// Everything taken out: an escape sequence spelled out or real, or an
/// invisible character.
static HIDING: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::Regex::new(&format!(
        r"(?-u)\\\\?(?:e|E|033|x1[bB]|u001[bB])(?:\[[0-?]*[ -/]*[@-~]|\][^\n\\]*(?:\\x07|\\a|\\e\\\\)|[()][0-9A-Za-z]|[ -/]*[0-~])|{REAL_ESCAPE_PATTERN}|{INVISIBLE_PATTERN}",
    ))
    .expect("a constant pattern")
});

/// `text` without what [`HIDING`] matches, and for each byte of that, the
/// byte of `text` it came from (one more at the end). `None` when there is
/// nothing to take out: the text is its own projection.
pub(super) fn project(text: &str) -> Option<(String, Vec<usize>)> {
    let escapes = memchr::memchr2(b'\\', 0x1b, text.as_bytes()).is_some();
    if !escapes && (text.is_ascii() || !text.chars().any(invisible)) {
        return None;
    }
    if !HIDING.is_match(text.as_bytes()) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len() + 1);
    let mut last = 0;
    let mut keep = |from: usize, to: usize, out: &mut String| -> Option<()> {
        out.push_str(text.get(from..to)?);
        map.extend(from..to);
        Some(())
    };
    for m in HIDING.find_iter(text.as_bytes()) {
        keep(last, m.start(), &mut out)?;
        last = m.end();
    }
    keep(last, text.len(), &mut out)?;
    map.push(text.len());
    Some((out, map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_invisible_characters_are_taken_out_and_mapped_back() {
        let text = "a\u{200b}b\\e[31mc\u{ad}d\u{feff}e";
        let (seen, map) = project(text).expect("something to take out");
        assert_eq!(seen, "abcde");
        assert_eq!(map.len(), seen.len() + 1);
        let e = seen.find('e').expect("e");
        assert_eq!(&text[map[0]..map[e] + 1], text, "the range covers what was taken out");
        assert_eq!(project("plain ‹secret:x:1› text"), None);
        assert_eq!(project("no escapes here"), None);
    }

    #[test]
    fn every_invisible_character_is_found_by_both_spellings() {
        let hiding = regex::bytes::Regex::new(INVISIBLE_PATTERN).expect("pattern");
        let hidden = ['\u{AD}', '\u{180E}', '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{2064}', '\u{FEFF}'];
        let shown = ['\u{AC}', '\u{180D}', '\u{200A}', '\u{200E}', '\u{205F}', '\u{2065}', '\u{FEFE}', 'é', '‹'];
        let cases = hidden.map(|c| (c, true)).into_iter().chain(shown.map(|c| (c, false)));
        for (c, invisible_one) in cases {
            let text = format!("a{c}b");
            assert_eq!(invisible(c), invisible_one, "{c:?}");
            assert_eq!(hiding.is_match(text.as_bytes()), invisible_one, "{c:?}");
            let seen = project(&text).map(|(seen, _)| seen);
            assert_eq!(seen.as_deref(), invisible_one.then_some("ab"), "{c:?}");
        }
    }

    #[test]
    fn a_match_over_multibyte_text_keeps_its_characters_whole() {
        let text = "é\\e]0;tïtle\\aü\u{1b}]2;ñ\u{7}z";
        let (seen, map) = project(text).expect("something to take out");
        assert_eq!(seen, "éüz");
        assert_eq!(map.len(), seen.len() + 1);
    }
}

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

use std::sync::LazyLock;

/// A real escape sequence (CSI, OSC, or a short one), as in a screen
/// captured with its colours.
pub(super) const REAL_ESCAPE_PATTERN: &str = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~])";

/// The characters that show nothing and may stand inside a secret.
const INVISIBLE_PATTERN: &str = r"[\x{AD}\x{180E}\x{200B}-\x{200D}\x{2060}-\x{2064}\x{FEFF}]";

/// [`INVISIBLE_PATTERN`], compiled: a text without any is looked at no
/// further for them.
static INVISIBLE: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(INVISIBLE_PATTERN).expect("a constant pattern"));

/// Everything taken out: an escape sequence spelled out or real, or an
/// invisible character.
static HIDING: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(&format!(
        r"\\\\?(?:e|E|033|x1[bB]|u001[bB])(?:\[[0-?]*[ -/]*[@-~]|\][^\n\\]*(?:\\x07|\\a|\\e\\\\)|[()][0-9A-Za-z]|[ -/]*[0-~])|{REAL_ESCAPE_PATTERN}|{INVISIBLE_PATTERN}",
    ))
    .expect("a constant pattern")
});

/// `text` without what [`HIDING`] matches, and for each byte of that, the
/// byte of `text` it came from (one more at the end). `None` when there is
/// nothing to take out: the text is its own projection.
pub(super) fn project(text: &str) -> Option<(String, Vec<usize>)> {
    let escapes = memchr::memchr2(b'\\', 0x1b, text.as_bytes()).is_some();
    if !escapes && (text.is_ascii() || !INVISIBLE.is_match(text)) {
        return None;
    }
    if !HIDING.is_match(text) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len() + 1);
    let mut last = 0;
    let mut keep = |from: usize, to: usize, out: &mut String| {
        out.push_str(&text[from..to]);
        map.extend(from..to);
    };
    for m in HIDING.find_iter(text) {
        keep(last, m.start(), &mut out);
        last = m.end();
    }
    keep(last, text.len(), &mut out);
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
}

//! Splitting a typed shell line into its simple commands.
//!
//! Hand-written, not a parser crate. The maintained candidates were
//! `brush-parser` (0.4/0.5 pull `peg`, `cached`, `bon` and `insta` into
//! normal dependencies, and build time is an open issue of ours) and
//! `tree-sitter-bash` (a C build). Both also refuse incomplete input, while
//! an agent's line may be half typed or unbalanced and must still be judged.
//!
//! What it matches, and nothing more: single quotes, `$'…'`, double quotes
//! (a `$(…)` or backtick inside them is still split out as its own
//! command), backslash escapes, and `#` comments at the start of a word. It
//! splits at `;`, `&&`, `||`, `|`, `|&`, `&` and newlines (not at the `&`
//! of `&>`, `>&` or `2>&1`, nor the `|` of `>|`); it descends into `$(…)`,
//! backticks, `<(…)`, `>(…)`, `${…}`, `( … )` subshells and `{ …; }`
//! groups. Leading words that are not commands (`if`, `then`, `else`,
//! `elif`, `do`, `while`, `until`, `!`, `time`, `{`, `}`, and the closing
//! `fi`, `done`, `esac`) are stripped, so `if rm -rf x; then …` yields
//! `rm -rf x`. Arithmetic (`$((…))`, `((…))`) and array values (`a=(…)`)
//! stay inside their piece. A `)` with no `(` (a `case` pattern) splits.
//!
//! Unbalanced input keeps what was split, and the rest of the enclosing
//! command runs to the end of the line as one piece: `ls; echo "a; b`
//! gives `ls` and `echo "a; b`. Pieces are trimmed, empty ones dropped.
//! A command with a substitution inside it is a piece as a whole too:
//! `echo $(rm x)` gives `echo $(rm x)` and `rm x`. Here-document bodies are
//! not recognised: their lines are judged as commands (the stricter
//! reading).

/// Nesting deeper than this is not descended into: the rest stays in its
/// piece (the whole line is judged too).
const MAX_DEPTH: usize = 64;

/// Words that may lead a simple command without being its command.
const KEYWORDS: &[&str] =
    &["if", "then", "else", "elif", "do", "while", "until", "!", "time", "{", "}", "fi", "done", "esac"];

/// The simple commands of a shell line, as trimmed slices of it, in the
/// order they end: a command nested in another (`$(…)`, backticks,
/// `<(…)`) comes before the one that encloses it.
pub fn simple_commands(line: &str) -> Vec<&str> {
    let mut scanner = Scanner { s: line, b: line.as_bytes(), out: Vec::new() };
    scanner.list(0, End::Eof, 0);
    scanner.out
}

/// What ends a list being scanned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Eof,
    Paren,
    Backtick,
}

struct Scanner<'a> {
    s: &'a str,
    b: &'a [u8],
    out: Vec<&'a str>,
}

impl<'a> Scanner<'a> {
    fn at(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(0)
    }

    /// Pushes `s[start..end]` as a piece, keywords stripped, if anything is
    /// left.
    fn push(&mut self, start: usize, end: usize) {
        let piece = strip_keywords(&self.s[start..end.min(self.b.len())]);
        if !piece.is_empty() {
            self.out.push(piece);
        }
    }

    /// Scans a list of commands from `i` to its end; returns the index past
    /// its terminator (or the input's length).
    fn list(&mut self, mut i: usize, end: End, depth: usize) -> usize {
        let len = self.b.len();
        if depth > MAX_DEPTH {
            return len;
        }
        let mut start = i;
        while i < len {
            match self.b[i] {
                b')' if end == End::Paren => {
                    self.push(start, i);
                    return i + 1;
                }
                b'`' if end == End::Backtick => {
                    self.push(start, i);
                    return i + 1;
                }
                b';' | b'\n' | b')' => {
                    self.push(start, i);
                    i += 1;
                    start = i;
                }
                b'&' if self.at(i + 1) == b'>' => i += 2,
                b'&' | b'|' => {
                    self.push(start, i);
                    i += if matches!(self.at(i + 1), b'&' | b'|') { 2 } else { 1 };
                    start = i;
                }
                b'<' | b'>' if self.at(i + 1) == b'(' => i = self.list(i + 2, End::Paren, depth + 1),
                b'<' | b'>' => {
                    // A redirection operator: `>>`, `<<`, `<<<`, `<>`, then
                    // `&` (`>&2`, `2>&1`) or `|` (`>|`) belong to it.
                    i += 1;
                    while matches!(self.at(i), b'<' | b'>') {
                        i += 1;
                    }
                    if matches!(self.at(i), b'&' | b'|') {
                        i += 1;
                    }
                }
                b'(' => {
                    if self.at(i + 1) == b'(' {
                        i = self.arithmetic(i + 2);
                    } else if i > 0 && self.b[i - 1] == b'=' {
                        i = self.opaque_parens(i + 1);
                    } else if strip_keywords(&self.s[start..i]).is_empty() {
                        // A subshell: its commands are pieces; what follows
                        // its `)` (redirections) starts a new one.
                        i = self.list(i + 1, End::Paren, depth + 1);
                        start = i;
                    } else {
                        i = self.list(i + 1, End::Paren, depth + 1);
                    }
                }
                b'#' if i == start || is_word_break(self.b[i - 1]) => {
                    self.push(start, i);
                    while i < len && self.b[i] != b'\n' {
                        i += 1;
                    }
                    start = i;
                }
                _ => i = self.word_part(i, depth),
            }
        }
        self.push(start, len);
        len
    }

    /// Skips one quoting or expansion construct starting at `i` (or one
    /// byte); returns the index past it.
    fn word_part(&mut self, i: usize, depth: usize) -> usize {
        let len = self.b.len();
        match self.b[i] {
            b'\\' => (i + 2).min(len),
            b'\'' => self.single_quoted(i + 1),
            b'"' => self.double_quoted(i + 1, depth),
            b'`' => self.list(i + 1, End::Backtick, depth + 1),
            b'$' => match self.at(i + 1) {
                b'(' if self.at(i + 2) == b'(' => self.arithmetic(i + 3),
                b'(' => self.list(i + 2, End::Paren, depth + 1),
                b'{' => self.parameter(i + 2, depth),
                b'\'' => self.ansi_c_quoted(i + 2),
                _ => i + 1,
            },
            _ => i + 1,
        }
    }

    fn single_quoted(&self, i: usize) -> usize {
        match self.b[i.min(self.b.len())..].iter().position(|&c| c == b'\'') {
            Some(n) => i + n + 1,
            None => self.b.len(),
        }
    }

    fn ansi_c_quoted(&self, mut i: usize) -> usize {
        while i < self.b.len() {
            match self.b[i] {
                b'\\' => i += 2,
                b'\'' => return i + 1,
                _ => i += 1,
            }
        }
        self.b.len()
    }

    fn double_quoted(&mut self, mut i: usize, depth: usize) -> usize {
        while i < self.b.len() {
            match self.b[i] {
                b'"' => return i + 1,
                b'\\' | b'`' | b'$' => i = self.word_part(i, depth),
                _ => i += 1,
            }
        }
        self.b.len()
    }

    /// `${…}`, from past its `{`: nested substitutions are still found.
    fn parameter(&mut self, mut i: usize, depth: usize) -> usize {
        while i < self.b.len() {
            match self.b[i] {
                b'}' => return i + 1,
                b'"' => i = self.double_quoted(i + 1, depth),
                _ => i = self.word_part(i, depth),
            }
        }
        self.b.len()
    }

    /// `((…))` or `$((…))`, from past its second `(`: not a command.
    fn arithmetic(&self, i: usize) -> usize {
        self.balanced(i, 2)
    }

    /// `a=(…)`, from past its `(`: words, not commands.
    fn opaque_parens(&self, i: usize) -> usize {
        self.balanced(i, 1)
    }

    /// The index past the `)` that closes `open` parentheses, skipping
    /// quotes.
    fn balanced(&self, mut i: usize, mut open: usize) -> usize {
        while i < self.b.len() {
            match self.b[i] {
                b'\\' => i += 2,
                b'\'' => i = self.single_quoted(i + 1),
                b'(' => {
                    open += 1;
                    i += 1;
                }
                b')' => {
                    open -= 1;
                    i += 1;
                    if open == 0 {
                        return i;
                    }
                }
                _ => i += 1,
            }
        }
        self.b.len()
    }
}

/// Whether a `#` after this byte starts a word (and so a comment).
fn is_word_break(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>')
}

/// `piece` trimmed, without its leading keywords.
fn strip_keywords(piece: &str) -> &str {
    let mut rest = piece.trim();
    'strip: loop {
        for keyword in KEYWORDS {
            if let Some(after) = rest.strip_prefix(keyword)
                && (after.is_empty() || after.starts_with(|c: char| c.is_ascii_whitespace()))
            {
                rest = after.trim_start();
                continue 'strip;
            }
        }
        return rest;
    }
}

//! Colour and the terminal: colour only when standard output is a
//! terminal and `NO_COLOR` is unset or empty (<https://no-color.org>), and
//! never for `TERM=dumb`.

use std::io::IsTerminal;

/// How output is painted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// Whether escape codes are written at all.
    pub on: bool,
}

/// The SGR codes used.
#[derive(Clone, Copy, Debug)]
pub enum Paint {
    /// Headers.
    Bold,
    /// Closed sessions, line numbers, what matters less.
    Dim,
    /// A failed command.
    Red,
    /// A session at its prompt, a command that succeeded.
    Green,
    /// A running command; a log gap.
    Yellow,
    /// A program waiting for input.
    Magenta,
    /// Names.
    Cyan,
}

impl Paint {
    fn code(self) -> &'static str {
        match self {
            Paint::Bold => "1",
            Paint::Dim => "2",
            Paint::Red => "31",
            Paint::Green => "32",
            Paint::Yellow => "33",
            Paint::Magenta => "35",
            Paint::Cyan => "36",
        }
    }
}

impl Style {
    /// The style for standard output as it is now.
    pub fn for_stdout() -> Style {
        Style::decide(std::io::stdout().is_terminal(), std::env::var_os("NO_COLOR"), std::env::var_os("TERM"))
    }

    /// No colour at all.
    pub fn plain() -> Style {
        Style { on: false }
    }

    fn decide(terminal: bool, no_color: Option<std::ffi::OsString>, term: Option<std::ffi::OsString>) -> Style {
        let asked_not = no_color.is_some_and(|v| !v.is_empty());
        let dumb = term.is_some_and(|t| t == "dumb");
        Style { on: terminal && !asked_not && !dumb }
    }

    /// `text` painted, or as it is when colour is off.
    pub fn paint(&self, paint: Paint, text: &str) -> String {
        if !self.on || text.is_empty() {
            return text.to_string();
        }
        format!("\x1b[{}m{text}\x1b[0m", paint.code())
    }
}

/// Whether standard output is a terminal.
pub fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// The width of the terminal on standard output, if it is one.
pub fn stdout_width() -> Option<usize> {
    terminal_size(nix::libc::STDOUT_FILENO).map(|(cols, _)| cols)
}

/// The size (columns, rows) of the terminal on `fd`, if it is one.
pub fn terminal_size(fd: i32) -> Option<(usize, usize)> {
    let mut size = nix::libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass,
    // which lives for the whole call; a bad fd only makes it fail.
    let done = unsafe { nix::libc::ioctl(fd, nix::libc::TIOCGWINSZ, &mut size) };
    (done == 0 && size.ws_col > 0).then_some((usize::from(size.ws_col), usize::from(size.ws_row)))
}

/// How many cells `text` takes on a terminal.
pub fn cells(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// Cuts `text` to at most `width` cells, marking a cut with `…`.
pub fn fit(text: &str, width: usize) -> String {
    if cells(text) <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// Cuts `text` to at most `width` cells from its start, keeping the end
/// (for paths).
pub fn fit_tail(text: &str, width: usize) -> String {
    if cells(text) <= width {
        return text.to_string();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        used += w;
        kept.push(c);
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

/// `text` padded with spaces to `width` cells.
pub fn pad(text: &str, width: usize) -> String {
    let mut out = text.to_string();
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(cells(text))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        let s = |t, n: Option<&str>, term: Option<&str>| Style::decide(t, n.map(Into::into), term.map(Into::into)).on;
        assert!(s(true, None, Some("xterm")));
        assert!(s(true, Some(""), None), "an empty NO_COLOR counts as unset");
        assert!(!s(true, Some("1"), None));
        assert!(!s(false, None, None));
        assert!(!s(true, None, Some("dumb")));
        assert_eq!(Style::plain().paint(Paint::Red, "x"), "x");
        assert_eq!(Style { on: true }.paint(Paint::Red, "x"), "\x1b[31mx\x1b[0m");
    }

    #[test]
    fn fitting_marks_the_cut() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fit_tail("/home/me/src", 6), "…e/src");
        assert_eq!(fit("日本語です", 5), "日本…");
        assert_eq!(pad("日本", 6), "日本  ");
    }
}

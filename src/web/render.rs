//! A screen as tmux captures it (`capture-pane -e -p`: rows of text with
//! SGR escapes) turned into HTML rows for the web view.
//!
//! tmux has already done the terminal's work: every row is final text, so
//! the page needs no terminal emulator, only colours. Each row becomes
//! runs of `<span>`s, one per stretch of equal attributes, carrying
//! *classes* only: the page's Content-Security-Policy allows no inline
//! style, so the 256 colours are classes of a stylesheet made here
//! ([`palette_css`]), and a 24-bit colour is shown as its nearest of the
//! 256. Text is escaped, and characters that could make a row read
//! otherwise than it is (bidirectional overrides, stray controls) become
//! U+FFFD. The escapes are read with `vte`, as the cooker reads a pane's
//! output, so no sequence is half-understood here.

use std::fmt::Write;

use unicode_width::UnicodeWidthChar;
use vte::{Params, Perform};

/// A colour as the page shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Color {
    /// The terminal's default.
    #[default]
    Default,
    /// One of the 256 indexed colours.
    Index(u8),
}

/// The attributes of one cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Style {
    /// Foreground.
    pub fg: Color,
    /// Background.
    pub bg: Color,
    /// Bold.
    pub bold: bool,
    /// Faint.
    pub dim: bool,
    /// Italic.
    pub italic: bool,
    /// Underlined (any kind).
    pub underline: bool,
    /// Foreground and background swapped.
    pub reverse: bool,
    /// Invisible text.
    pub hidden: bool,
    /// Struck through.
    pub strike: bool,
}

impl Style {
    /// Applies one SGR sequence's parameter groups.
    fn apply(&mut self, groups: &[&[u16]]) {
        if groups.is_empty() {
            *self = Style::default();
        }
        let mut i = 0;
        while i < groups.len() {
            let g = groups[i];
            let code = g.first().copied().unwrap_or(0);
            i += 1;
            match code {
                0 => *self = Style::default(),
                1 => self.bold = true,
                2 => self.dim = true,
                3 => self.italic = true,
                4 => self.underline = g.get(1).is_none_or(|&kind| kind != 0),
                7 => self.reverse = true,
                8 => self.hidden = true,
                9 => self.strike = true,
                21 => self.underline = true,
                22 => (self.bold, self.dim) = (false, false),
                23 => self.italic = false,
                24 => self.underline = false,
                27 => self.reverse = false,
                28 => self.hidden = false,
                29 => self.strike = false,
                30..=37 => self.fg = Color::Index((code - 30) as u8),
                39 => self.fg = Color::Default,
                40..=47 => self.bg = Color::Index((code - 40) as u8),
                49 => self.bg = Color::Default,
                90..=97 => self.fg = Color::Index((code - 90 + 8) as u8),
                100..=107 => self.bg = Color::Index((code - 100 + 8) as u8),
                38 | 48 => {
                    let (color, used) = extended(g, &groups[i..]);
                    i += used;
                    if let Some(c) = color {
                        if code == 38 { self.fg = c } else { self.bg = c }
                    }
                }
                _ => {}
            }
        }
    }

    /// The classes of this style (see [`palette_css`]), space separated.
    fn classes(&self, out: &mut String) {
        let (fg, bg) = match self.reverse {
            false => (self.fg, self.bg),
            true => (self.bg, self.fg),
        };
        let mut add = |c: &str| {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(c);
        };
        match (fg, self.reverse) {
            (Color::Index(n), _) => add(&format!("f{n}")),
            (Color::Default, true) => add("fr"),
            (Color::Default, false) => {}
        }
        match (bg, self.reverse) {
            (Color::Index(n), _) => add(&format!("b{n}")),
            (Color::Default, true) => add("br"),
            (Color::Default, false) => {}
        }
        for (on, class) in [
            (self.bold, "B"),
            (self.dim, "D"),
            (self.italic, "I"),
            (self.underline, "U"),
            (self.strike, "S"),
            (self.hidden, "H"),
        ] {
            if on {
                add(class);
            }
        }
    }
}

/// An extended colour (`38;5;N`, `38;2;R;G;B`, or their `:` forms) from
/// the group `g` that named it and the groups after it; returns the colour
/// and how many following groups it used.
fn extended(g: &[u16], rest: &[&[u16]]) -> (Option<Color>, usize) {
    if g.len() > 1 {
        // Colon form: 38:5:N, 38:2:R:G:B or 38:2:SPACE:R:G:B.
        return match (g[1], &g[2..]) {
            (5, [n, ..]) => (Some(Color::Index(*n as u8)), 0),
            (2, [_, r, g2, b]) | (2, [r, g2, b]) => (Some(nearest(*r, *g2, *b)), 0),
            _ => (None, 0),
        };
    }
    let first = |k: usize| rest.get(k).and_then(|g| g.first()).copied();
    match first(0) {
        Some(5) => (first(1).map(|n| Color::Index(n as u8)), 2),
        Some(2) => match (first(1), first(2), first(3)) {
            (Some(r), Some(g2), Some(b)) => (Some(nearest(r, g2, b)), 4),
            _ => (None, rest.len()),
        },
        _ => (None, 0),
    }
}

/// The levels of the 6×6×6 colour cube of the 256-colour palette.
const CUBE: [u16; 6] = [0, 95, 135, 175, 215, 255];

/// The palette colour nearest to a 24-bit one: the closest of the cube
/// and of the grey ramp.
fn nearest(r: u16, g: u16, b: u16) -> Color {
    let (r, g, b) = (r.min(255), g.min(255), b.min(255));
    let level = |v: u16| (0..6).min_by_key(|&i| CUBE[i].abs_diff(v)).unwrap_or(0);
    let (ri, gi, bi) = (level(r), level(g), level(b));
    let cube = 16 + 36 * ri + 6 * gi + bi;
    let dist = |(x, y, z): (u16, u16, u16)| {
        let d = |p: u16, q: u16| u32::from(p.abs_diff(q)).pow(2);
        d(x, r) + d(y, g) + d(z, b)
    };
    let grey_level = ((u32::from(r) + u32::from(g) + u32::from(b)) / 3).saturating_sub(3) / 10;
    let grey_index = grey_level.min(23) as usize;
    let grey_value = 8 + 10 * grey_index as u16;
    let cube_rgb = (CUBE[ri], CUBE[gi], CUBE[bi]);
    if dist((grey_value, grey_value, grey_value)) < dist(cube_rgb) {
        Color::Index((232 + grey_index) as u8)
    } else {
        Color::Index(cube as u8)
    }
}

/// The 16 basic colours, as xterm shows them.
const BASIC: [&str; 16] = [
    "#000000", "#cd0000", "#00cd00", "#cdcd00", "#3b78ff", "#cd00cd", "#00cdcd", "#e5e5e5", "#7f7f7f", "#ff0000",
    "#00ff00", "#ffff00", "#5c8cff", "#ff00ff", "#00ffff", "#ffffff",
];

/// The RGB of palette colour `n`.
fn rgb(n: u8) -> String {
    match n {
        0..=15 => BASIC[n as usize].to_string(),
        16..=231 => {
            let i = n as usize - 16;
            format!("#{:02x}{:02x}{:02x}", CUBE[i / 36], CUBE[(i / 6) % 6], CUBE[i % 6])
        }
        232..=255 => {
            let v = 8 + 10 * (u16::from(n) - 232);
            format!("#{v:02x}{v:02x}{v:02x}")
        }
    }
}

/// The stylesheet of the classes rows carry: `fN`/`bN` for the 256
/// colours, `fr`/`br` for the default colours swapped by reverse video.
/// (The attribute classes `B D I U S H` and the cursor's `cur` are in the
/// page's own stylesheet.)
pub fn palette_css() -> String {
    let mut css = String::with_capacity(16 * 1024);
    for n in 0..=255u8 {
        let c = rgb(n);
        let _ = writeln!(css, ".f{n}{{color:{c}}}.b{n}{{background:{c}}}");
    }
    css
}

/// One cell of a row: its character and style (a wide character takes
/// two columns; the column after it holds nothing).
#[derive(Clone, Debug, PartialEq)]
struct Cell {
    ch: char,
    width: usize,
    style: Style,
}

/// Reads one captured row into cells.
struct RowReader {
    style: Style,
    cells: Vec<Cell>,
}

impl Perform for RowReader {
    fn print(&mut self, c: char) {
        let c = shown(c);
        let width = c.width().unwrap_or(0);
        if width == 0 {
            // A combining mark rides on the cell before it; alone, it is
            // dropped rather than shifting the columns after it.
            return;
        }
        self.cells.push(Cell { ch: c, width, style: self.style });
    }

    fn execute(&mut self, byte: u8) {
        if byte == b'\t' {
            let to = (self.columns() / 8 + 1) * 8;
            while self.columns() < to {
                self.cells.push(Cell { ch: ' ', width: 1, style: self.style });
            }
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        if action == 'm' && intermediates.is_empty() && !ignore {
            let groups: Vec<&[u16]> = params.iter().collect();
            self.style.apply(&groups);
        }
    }
}

impl RowReader {
    fn columns(&self) -> usize {
        self.cells.iter().map(|c| c.width).sum()
    }
}

/// What a character is shown as: itself, or U+FFFD for controls, the
/// bidirectional formatting characters ("Trojan Source"), and the
/// characters that show nothing but split a word: dropped, they would
/// join the two halves of a token split by one into a token whole on the
/// page and in a copy of it.
fn shown(c: char) -> char {
    let unwanted = c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
        || ('\u{200b}'..='\u{200f}').contains(&c)
        || ('\u{2060}'..='\u{2064}').contains(&c)
        || matches!(c, '\u{61c}' | '\u{ad}' | '\u{180e}' | '\u{feff}');
    if unwanted { '\u{fffd}' } else { c }
}

/// Escapes `c` for HTML text into `out`.
fn escape_into(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        c => out.push(c),
    }
}

/// Escapes `text` for HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        escape_into(&mut out, c);
    }
    out
}

/// One captured row (text with SGR escapes, no newline) as HTML: spans
/// of equal style, and when `cursor` names a column of this row, the cell
/// there wrapped in `<span class="cur">` (the row is padded with blanks
/// to reach it).
pub fn row_html(line: &str, cursor: Option<usize>) -> String {
    let mut reader = RowReader { style: Style::default(), cells: Vec::new() };
    let mut parser = vte::Parser::new();
    parser.advance(&mut reader, line.as_bytes());
    let mut cells = reader.cells;
    if let Some(col) = cursor {
        let mut columns: usize = cells.iter().map(|c| c.width).sum();
        while columns <= col {
            cells.push(Cell { ch: ' ', width: 1, style: Style::default() });
            columns += 1;
        }
    }
    let cursor_cell = cursor.and_then(|col| {
        let mut at = 0;
        cells.iter().position(|c| {
            let here = at <= col && col < at + c.width;
            at += c.width;
            here
        })
    });
    let mut out = String::with_capacity(line.len() + 16);
    let mut i = 0;
    while i < cells.len() {
        let style = cells[i].style;
        let is_cursor = Some(i) == cursor_cell;
        let mut j = i + 1;
        if !is_cursor {
            while j < cells.len() && cells[j].style == style && Some(j) != cursor_cell {
                j += 1;
            }
        }
        let mut classes = String::new();
        style.classes(&mut classes);
        if is_cursor {
            classes.push_str(if classes.is_empty() { "cur" } else { " cur" });
        }
        if classes.is_empty() {
            cells[i..j].iter().for_each(|c| escape_into(&mut out, c.ch));
        } else {
            let _ = write!(out, "<span class=\"{classes}\">");
            cells[i..j].iter().for_each(|c| escape_into(&mut out, c.ch));
            out.push_str("</span>");
        }
        i = j;
    }
    out
}

/// The text of one captured row without its escapes (for search in tests
/// and for the overview's plain fallbacks).
pub fn row_text(line: &str) -> String {
    let mut reader = RowReader { style: Style::default(), cells: Vec::new() };
    vte::Parser::new().advance(&mut reader, line.as_bytes());
    reader.cells.iter().map(|c| c.ch).collect()
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::plain("hello", "hello")]
    #[case::escaped("<b>&\"'", "&lt;b&gt;&amp;&quot;&#39;")]
    #[case::basic_colour("\x1b[31mred\x1b[0m.", "<span class=\"f1\">red</span>.")]
    #[case::bright_and_bold("\x1b[1;92mok", "<span class=\"f10 B\">ok</span>")]
    #[case::indexed("\x1b[38;5;208mx", "<span class=\"f208\">x</span>")]
    #[case::indexed_colon("\x1b[48:5:17mx", "<span class=\"b17\">x</span>")]
    #[case::truecolor_to_cube("\x1b[38;2;255;0;0mx", "<span class=\"f196\">x</span>")]
    #[case::truecolor_to_grey("\x1b[48;2;128;128;128mx", "<span class=\"b244\">x</span>")]
    #[case::reverse_default("\x1b[7mx", "<span class=\"fr br\">x</span>")]
    #[case::reverse_coloured("\x1b[31;44;7mx", "<span class=\"f4 b1\">x</span>")]
    #[case::attributes_off("\x1b[1;3;4;9mA\x1b[22;23;24;29mB", "<span class=\"B I U S\">A</span>B")]
    #[case::default_fg_resets_colour("\x1b[33mA\x1b[39mB", "<span class=\"f3\">A</span>B")]
    #[case::bare_reset("\x1b[31mA\x1b[mB", "<span class=\"f1\">A</span>B")]
    #[case::other_escapes_dropped("a\x1b]8;;http://x\x07b\x1b[2Kc", "abc")]
    #[case::bidi_override_replaced("x\u{202e}y", "x\u{fffd}y")]
    #[case::zero_width_space_shown("ghp_ab\u{200b}cd", "ghp_ab\u{fffd}cd")]
    #[case::word_joiner_and_soft_hyphen_shown("a\u{2060}b\u{ad}c\u{feff}d", "a\u{fffd}b\u{fffd}c\u{fffd}d")]
    fn rows_become_escaped_spans(#[case] line: &str, #[case] html: &str) {
        assert_eq!(row_html(line, None), html);
    }

    #[test]
    fn the_cursor_cell_is_marked_and_the_row_padded_to_reach_it() {
        assert_eq!(row_html("ab", Some(1)), "a<span class=\"cur\">b</span>");
        assert_eq!(row_html("$ ", Some(4)), "$   <span class=\"cur\"> </span>");
        assert_eq!(row_html("\x1b[32mok", Some(0)), "<span class=\"f2 cur\">o</span><span class=\"f2\">k</span>");
        // A wide character covers two columns: the cursor on either is on it.
        assert_eq!(row_html("日本", Some(3)), "日<span class=\"cur\">本</span>");
    }

    #[test]
    fn tabs_reach_the_next_stop_and_text_survives_stripping() {
        assert_eq!(row_text("a\tb"), format!("a{}b", " ".repeat(7)));
        assert_eq!(row_text("\x1b[1mbold\x1b[0m plain"), "bold plain");
    }

    #[test]
    fn the_palette_has_every_colour_once() {
        let css = palette_css();
        assert!(css.contains(".f0{color:#000000}"));
        assert!(css.contains(".b196{background:#ff0000}"));
        assert!(css.contains(".f255{color:#eeeeee}"));
        assert_eq!(css.lines().count(), 256);
    }
}

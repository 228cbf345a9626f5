//! What the parsed stream means: the [`vte::Perform`] side of the cooker.
//!
//! vte only splits bytes into printable characters, controls and escape
//! sequences; this module decides which of them edit the line, which finish
//! it, which are markers and which are dropped. Each control maps to one
//! named edit of [`LineBuf`] or one named step of the [`Model`].
//!
//! # Vertical movement
//!
//! Lines in `session.txt` never change once written, so the cooker keeps
//! no screen: it has one unfinished line, and only moves within it apply.
//! Cursor up, down and to a row (`CSI A`, `B`, `E`, `F`, `d`, the row of
//! `CSI H`) leave the cursor on that line; only their column part applies
//! (except on a repainted frame, which has rows).
//! A program that moves up to redraw lines it printed before thus appends
//! the new text as new lines, and the old ones stay as they were: a
//! multi-line progress display shows each state it passed through. Erase
//! in display (`CSI J`) erases what it would erase on the unfinished line
//! and nothing above. A program that keeps repainting the whole screen is
//! collapsed into a placeholder; see [`super::screen`].

use vte::{Params, Perform};

use super::line::{EraseLine, LineBuf};
use super::screen::{self, Screen};
use crate::types::{CookEvent, Cursor, LineNo, MAX_MARKER_LEN, SCREEN_PLACEHOLDER};

/// vte keeps at most this many OSC parameters and silently drops the rest,
/// so a dispatch with this many may have lost some.
const VTE_MAX_OSC_PARAMS: usize = 16;

/// Everything the cooker has drawn but not yet committed. It lives as long
/// as the cooker.
#[derive(Debug)]
pub(super) struct Model {
    /// The number the unfinished line will get when a line feed commits it.
    line: LineNo,
    /// The unfinished line and the cursor on it.
    buf: LineBuf,
    /// Whether a full-screen program holds the screen.
    screen: Screen,
    /// Strings of lines the caller handed back ([`super::Cooker::recycle`]),
    /// reused for the next lines so that a line costs no allocation; at
    /// most [`SPARE_MAX`] of at most [`SPARE_CAPACITY`] bytes each.
    pub(super) spare: Vec<String>,
}

/// The most recycled strings kept.
pub(super) const SPARE_MAX: usize = 2048;
/// The largest string kept for reuse; longer lines are rare.
pub(super) const SPARE_CAPACITY: usize = 256;

impl Model {
    pub(super) fn new(first_line: LineNo) -> Model {
        Model { line: first_line, buf: LineBuf::default(), screen: Screen::default(), spare: Vec::new() }
    }

    /// Where the cursor is now. Counts beyond `u32` saturate; no real line
    /// gets there.
    pub(super) fn cursor(&self) -> Cursor {
        Cursor { line: self.line, col: saturating_u32(self.buf.col()), text_len: saturating_u32(self.buf.text_len()) }
    }

    /// Nothing drawn, the cursor at column 0, no screen state.
    pub(super) fn at_rest(&self) -> bool {
        self.buf.col() == 0 && self.buf.is_empty() && self.screen.at_rest()
    }

    /// The text of the unfinished line, trailing blanks trimmed.
    pub(super) fn current_text(&self) -> String {
        self.buf.text()
    }

    /// Heap bytes the model holds for the unfinished line and frame; the
    /// memory a hostile stream could try to grow.
    #[cfg(test)]
    pub(super) fn held_bytes(&self) -> usize {
        let frame: usize = self.screen.frame.iter().map(String::capacity).sum();
        let spare: usize = self.spare.iter().map(String::capacity).sum();
        self.buf.held_bytes() + frame + spare + self.screen.frame.capacity() * std::mem::size_of::<String>()
    }

    /// A line feed: commits the unfinished line, or moves down a row of
    /// the frame while a program repaints.
    fn line_feed(&mut self, out: &mut Vec<CookEvent>) {
        if self.screen.repaint {
            self.move_row(self.screen.row() + 1, out);
        } else if !self.buf.line_feed_within() {
            let text = self.buf.finish_into(self.spare.pop().unwrap_or_default());
            self.commit(text, out);
        }
    }

    /// Writes `text` as the next line of `session.txt`, noting it in case
    /// it belongs to a first frame.
    fn commit(&mut self, text: String, out: &mut Vec<CookEvent>) {
        self.screen.committed(&text);
        self.commit_quietly(text, out);
    }

    /// Writes `text` as the next line of `session.txt`.
    fn commit_quietly(&mut self, text: String, out: &mut Vec<CookEvent>) {
        out.push(CookEvent::Line { line: self.line, text });
        self.line = self.line.next();
    }

    /// Commits the unfinished line if anything is drawn on it, keeping
    /// the cursor's column.
    fn commit_drawn(&mut self, out: &mut Vec<CookEvent>) {
        if !self.buf.text().is_empty() {
            let text = self.buf.finish();
            self.commit(text, out);
        }
    }

    /// A full-screen program starts: the placeholder line is written.
    fn start_screen(&mut self, out: &mut Vec<CookEvent>) {
        self.commit_drawn(out);
        out.push(CookEvent::Screen { on: true, at: self.cursor() });
        self.commit_quietly(SCREEN_PLACEHOLDER.to_owned(), out);
    }

    /// The full-screen program is gone: a repainted frame is written out,
    /// and lines resume.
    fn end_screen(&mut self, out: &mut Vec<CookEvent>) {
        if !self.screen.covered() {
            return;
        }
        let last = if self.screen.repaint { self.buf.finish() } else { String::new() };
        for row in self.screen.end(last) {
            self.commit_quietly(row, out);
        }
        out.push(CookEvent::Screen { on: false, at: self.cursor() });
    }

    /// While repainting: moves the cursor to `row` of the frame, keeping
    /// its column; that row becomes the unfinished line.
    fn move_row(&mut self, row: usize, out: &mut Vec<CookEvent>) {
        let col = self.buf.col();
        let text = self.buf.finish();
        let Some(shown) = self.screen.swap_row(text, row) else {
            return self.end_screen(out);
        };
        self.buf.carriage_return();
        for c in shown.chars() {
            self.buf.print(c);
        }
        self.buf.set_col(col);
    }

    /// `CSI ? n h` for an alternate screen mode.
    fn alt_screen_on(&mut self, out: &mut Vec<CookEvent>) {
        if !self.screen.covered() {
            self.start_screen(out);
        }
        self.screen.alt = true;
    }

    /// `CSI ? n l` for an alternate screen mode; back to the normal screen,
    /// which may still be repainted.
    fn alt_screen_off(&mut self, out: &mut Vec<CookEvent>) {
        if self.screen.alt && !self.screen.repaint {
            self.end_screen(out);
        }
        self.screen.alt = false;
    }

    /// The cursor goes to the top left corner in normal mode: perhaps the
    /// start of a frame, and if one came shortly before, a repaint.
    fn home(&mut self, out: &mut Vec<CookEvent>) {
        if self.screen.home_repaints() {
            self.start_screen(out);
            self.screen.start_repaint();
            self.move_row(0, out);
        }
        self.buf.set_col(0);
    }

    /// A shell marker: whatever held the screen is gone. A prompt's end
    /// that says how wide the terminal is makes the line typed at it wrap
    /// there (see [`LineBuf::wrap_at`]).
    fn marker(&mut self, params: Vec<u8>, out: &mut Vec<CookEvent>) {
        self.end_screen(out);
        self.screen.forget();
        // The line typed at a prompt ends here if its editor moved off it
        // (the line feed of Enter from a row above the lowest it reached).
        if self.buf.below_drawn() {
            let text = self.buf.finish_into(self.spare.pop().unwrap_or_default());
            self.commit(text, out);
        }
        if let Some(cols) = typing_width(&params) {
            self.buf.wrap_at(cols);
        }
        out.push(CookEvent::Osc133 { params, at: self.cursor() });
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The model and the caller's event list, borrowed for one `feed`.
pub(super) struct Performer<'a> {
    pub(super) model: &'a mut Model,
    pub(super) out: &'a mut Vec<CookEvent>,
    /// Set by every `print`: vte calls it only in its ground state, so a
    /// byte that printed proves the parser is there (see `Cooker::feed`).
    pub(super) printed: bool,
}

impl Performer<'_> {
    /// Does for the ASCII at the start of `bytes` what vte in its ground
    /// state would: printable runs to `print`, C0 controls but ESC to
    /// `execute`. Stops at ESC, DEL or a byte above ASCII; returns how
    /// many bytes it took. Only valid while vte is in its ground state.
    pub(super) fn ground_ascii(&mut self, bytes: &[u8]) -> usize {
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if (0x20..=0x7e).contains(&b) {
                let len = bytes[i..].iter().position(|b| !(0x20..=0x7e).contains(b)).unwrap_or(bytes.len() - i);
                if bytes[i + len..].starts_with(b"\r\n") && self.whole_line(&bytes[i..i + len]) {
                    i += len + 2;
                    continue;
                }
                if !self.model.screen.alt {
                    self.model.buf.print_ascii(&bytes[i..i + len]);
                }
                i += len;
            } else if b < 0x20 && b != 0x1b {
                self.execute(b);
                i += 1;
            } else {
                break;
            }
        }
        i
    }

    /// The most common output of all: a whole line of printable ASCII and
    /// its `\r\n`, printed on a fresh line. It is committed straight from
    /// the bytes, as printing it cell by cell, returning and feeding would
    /// commit it, and leaves the line as fresh as it found it. Returns
    /// `false`, doing nothing, when the line is not fresh or a program
    /// holds the screen: then the cells must do it.
    fn whole_line(&mut self, run: &[u8]) -> bool {
        let model = &mut *self.model;
        if model.screen.alt || model.screen.repaint || !model.buf.is_fresh() {
            return false;
        }
        // Trailing blanks are trimmed, as `LineBuf::finish` trims them.
        let end = run.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
        let Ok(shown) = std::str::from_utf8(&run[..end]) else { return false };
        let mut text = model.spare.pop().unwrap_or_default();
        text.clear();
        text.push_str(shown);
        model.commit(text, self.out);
        true
    }

    /// A CSI sequence with a private marker: only the alternate screen
    /// switches mean anything to the cooker.
    fn private_mode(&mut self, params: &Params, action: char) {
        let alt = params.iter().filter_map(|param| param.first()).any(|&mode| screen::is_alt_screen_mode(mode));
        match action {
            'h' if alt => self.model.alt_screen_on(self.out),
            'l' if alt => self.model.alt_screen_off(self.out),
            _ => {}
        }
    }

    /// Cursor position (`CSI row ; col H`): its column applies; its row
    /// only to a repainted frame; home may start a repaint.
    fn position(&mut self, params: &Params) {
        let row = usize::from(nth_param(params, 0).max(1));
        let col = usize::from(nth_param(params, 1).max(1));
        if self.model.screen.repaint {
            self.model.move_row(row - 1, self.out);
        } else if row == 1 && col == 1 {
            self.model.home(self.out);
        }
        self.model.buf.set_col(col - 1);
    }

    /// Cursor up, down or to a row (`CSI n A`, `B`, `d`): only a repainted
    /// frame and a line editor's wrapping line have rows to move between.
    fn vertical(&mut self, action: char, count: usize) {
        let screen = &self.model.screen;
        if !screen.repaint {
            match action {
                'A' | 'F' => self.model.buf.up(count),
                'B' | 'E' => self.model.buf.down(count),
                _ => {}
            }
            return;
        }
        let row = match action {
            'A' | 'F' => screen.row().saturating_sub(count),
            'B' | 'E' => screen.row().saturating_add(count),
            _ => count - 1,
        };
        self.model.move_row(row, self.out);
    }

    /// Erase in display (`CSI n J`): on the unfinished line as erase in
    /// line, and on a repainted frame's other rows. `3` clears only the
    /// scrollback, which a log keeps.
    fn erase_display(&mut self, arg: u16) {
        if let Some(mode) = EraseLine::from_param(arg) {
            self.model.buf.erase_line(mode);
        }
        if self.model.screen.repaint {
            self.model.screen.erase_rows(arg);
        }
    }
}

impl Perform for Performer<'_> {
    #[inline]
    fn print(&mut self, c: char) {
        self.printed = true;
        if !self.model.screen.alt {
            self.model.buf.print(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        if self.model.screen.alt {
            return;
        }
        let buf = &mut self.model.buf;
        match byte {
            b'\r' => buf.carriage_return(),
            // VT and FF move down a line on a terminal, just as LF does.
            b'\n' | 0x0b | 0x0c => self.model.line_feed(self.out),
            0x08 => buf.backspace(),
            b'\t' => buf.tab(),
            // BEL, SO/SI, NUL and the C1 controls change nothing a reader
            // of the text could see.
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        // An overflowing sequence is junk. Private markers such as `?`
        // arrive as intermediates; of those only screen switches matter.
        if ignore {
            return;
        }
        if crate::answers::Queries::csi_may_ask(action) {
            let queries = crate::answers::Queries::of_csi(first_param(params), intermediates, action);
            if !queries.is_empty() {
                self.out.push(CookEvent::Query { queries, at: self.model.cursor() });
                return;
            }
        }
        if intermediates == b"?" {
            return self.private_mode(params, action);
        }
        if !intermediates.is_empty() || self.model.screen.alt {
            return;
        }
        let arg = first_param(params);
        let count = usize::from(arg.max(1));
        let buf = &mut self.model.buf;
        match action {
            'K' => {
                if let Some(mode) = EraseLine::from_param(arg) {
                    buf.erase_line(mode);
                }
            }
            'C' => buf.forward(count),
            'D' => buf.back(count),
            'G' | '`' => buf.set_col(count - 1),
            'X' => buf.erase_chars(count),
            'P' => buf.delete_chars(count),
            '@' => buf.insert_blanks(count),
            'J' => self.erase_display(arg),
            'H' | 'f' => self.position(params),
            'A' | 'B' | 'd' => self.vertical(action, count),
            // Next and previous line: down or up, to column 0.
            'E' | 'F' => {
                self.vertical(action, count);
                self.model.buf.carriage_return();
            }
            // SGR and everything else change no text.
            _ => {}
        }
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
        if let Some(params) = marker_params(params) {
            self.model.marker(params, self.out);
            return;
        }
        let queries = crate::answers::Queries::of_osc(params);
        if !queries.is_empty() {
            self.out.push(CookEvent::Query { queries, at: self.model.cursor() });
        }
    }

    /// Reverse index (`ESC M`), which line editors use to go up a row of
    /// a wrapping line; no other ESC sequence changes a single line's text,
    /// and the `ESC \` that ends an OSC arrives here after the OSC was
    /// already dispatched. DCS `hook`/`put`/`unhook` keep vte's no-op
    /// defaults, so a device control string never reaches the text.
    fn esc_dispatch(&mut self, intermediates: &[u8], ignore: bool, byte: u8) {
        if byte == b'M' && intermediates.is_empty() && !ignore && !self.model.screen.alt {
            self.model.buf.up(1);
        }
    }
}

/// Parameter `i` of a CSI sequence (its first sub-parameter); 0 when
/// absent, as the standard's defaults are stated.
fn nth_param(params: &Params, i: usize) -> u16 {
    params.iter().nth(i).and_then(|param| param.first()).copied().unwrap_or(0)
}

/// The first parameter of a CSI sequence (its first sub-parameter, if it
/// has several); 0 when absent, as the standard's defaults are stated.
fn first_param(params: &Params) -> u16 {
    params.iter().next().and_then(|param| param.first()).copied().unwrap_or(0)
}

/// The width a prompt's end marker (`B;...;cols=N`) gives for the line
/// typed at it. The marker's proof is checked later, by the region
/// tracker; a width alone can do no harm, as it only shapes that line.
fn typing_width(params: &[u8]) -> Option<usize> {
    let mut fields = params.split(|&b| b == b';');
    if fields.next()? != b"B" {
        return None;
    }
    let cols = fields.find_map(|f| f.strip_prefix(b"cols="))?;
    std::str::from_utf8(cols).ok()?.parse().ok()
}

/// The parameter bytes of an `OSC 133 ; ...` marker, `;`-joined as sent, or
/// `None` for any other OSC, an overlong marker, or one vte may have cut.
fn marker_params(params: &[&[u8]]) -> Option<Vec<u8>> {
    let (&code, rest) = params.split_first()?;
    if code != b"133" || rest.is_empty() || params.len() >= VTE_MAX_OSC_PARAMS {
        return None;
    }
    let len = rest.iter().map(|param| param.len()).sum::<usize>() + rest.len() - 1;
    (len <= MAX_MARKER_LEN).then(|| rest.join(&b';'))
}

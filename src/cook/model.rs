//! What the parsed stream means: the [`vte::Perform`] side of the cooker.
//!
//! vte only splits bytes into printable characters, controls and escape
//! sequences; this module decides which of them edit the line, which finish
//! it, which are markers and which are dropped. Each control maps to one
//! named edit of [`LineBuf`], so cursor up/down, erase in display and the
//! alternate screen can later be added as more arms and a richer model.

use vte::{Params, Perform};

use super::line::{EraseLine, LineBuf};
use crate::types::{CookEvent, Cursor, LineNo, MAX_MARKER_LEN};

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
}

impl Model {
    pub(super) fn new(first_line: LineNo) -> Model {
        Model { line: first_line, buf: LineBuf::default() }
    }

    /// Where the cursor is now. Counts beyond `u32` saturate; no real line
    /// gets there.
    pub(super) fn cursor(&self) -> Cursor {
        Cursor { line: self.line, col: saturating_u32(self.buf.col()), text_len: saturating_u32(self.buf.text_len()) }
    }

    /// The text of the unfinished line, trailing blanks trimmed.
    pub(super) fn current_text(&self) -> String {
        self.buf.text()
    }

    /// Commits the unfinished line and moves on to the next number.
    fn line_feed(&mut self, out: &mut Vec<CookEvent>) {
        let text = self.buf.finish();
        out.push(CookEvent::Line { line: self.line, text });
        self.line = self.line.next();
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The model and the caller's event list, borrowed for one `feed`.
pub(super) struct Performer<'a> {
    pub(super) model: &'a mut Model,
    pub(super) out: &'a mut Vec<CookEvent>,
}

impl Perform for Performer<'_> {
    #[inline]
    fn print(&mut self, c: char) {
        self.model.buf.print(c);
    }

    fn execute(&mut self, byte: u8) {
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
        // Private markers such as `?` arrive as intermediates; none of the
        // sequences we act on has one, and an overflowing sequence is junk.
        if ignore || !intermediates.is_empty() {
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
            // SGR and everything else change no text. Cursor up/down and
            // erase in display belong to full-screen handling, which is
            // not modelled yet.
            _ => {}
        }
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _bell_terminated: bool) {
        if let Some(params) = marker_params(params) {
            let at = self.model.cursor();
            self.out.push(CookEvent::Osc133 { params, at });
        }
    }

    // `esc_dispatch` keeps vte's no-op default: no ESC sequence changes a
    // single line's text, and the `ESC \` that ends an OSC arrives there
    // after the OSC was already dispatched. DCS `hook`/`put`/`unhook` keep
    // theirs too, so a device control string never reaches the text.
}

/// The first parameter of a CSI sequence (its first sub-parameter, if it
/// has several); 0 when absent, as the standard's defaults are stated.
fn first_param(params: &Params) -> u16 {
    params.iter().next().and_then(|param| param.first()).copied().unwrap_or(0)
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

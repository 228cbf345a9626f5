//! The cooker: turns the raw byte stream of a tmux pane into the readable
//! lines of `session.txt`, and reports the OSC 133 markers shells send so
//! that the region core can split the session into commands.
//!
//! It models what a terminal would show on one unfinished line: printable
//! characters are drawn into screen cells at a cursor, carriage returns,
//! backspaces and line-editing sequences rewrite them, and a line feed
//! commits the line as it then reads. So a progress bar redrawn with `\r`
//! leaves its last state, and a readline edit leaves the edited command.
//! Colours and every sequence that does not change the line's text are
//! dropped; the text never holds control characters.
//!
//! The cooker is pure: it knows no file, socket, clock or tmux. Its results
//! do not depend on how the stream is split into [`Cooker::feed`] calls,
//! because partial escape sequences wait inside the parser, a character
//! cut at the end of a feed waits here, and all other state lives in the
//! line model. (vte 0.15 would keep the cut character itself, but when it
//! completes one followed by invalid UTF-8 it skips the valid characters
//! between them; so vte is never handed a cut character.)
//!
//! vte parses; `model` gives the parsed pieces their meaning; `line`
//! holds the cells; `screen` collapses full-screen programs.
//!
//! # Memory
//!
//! The cooker's memory does not grow with the stream, whatever it holds.
//! vte is built without its `std` feature, so it collects an OSC string in
//! a fixed buffer of [`OSC_BUF`] bytes and drops the rest instead of
//! buffering it without end; CSI parameters and intermediates are fixed
//! arrays in vte anyway, and DCS, SOS, PM and APC strings are streamed
//! byte by byte and dropped here. The unfinished line is bounded by
//! `line::BLANK_REACH` for blanks (printed text is the program's own) and
//! a repainted frame by `screen::FRAME_MAX_ROWS` rows.

#[cfg(test)]
mod fixtures;
mod line;
mod model;
#[cfg(test)]
mod props;
mod screen;
#[cfg(test)]
mod tests;

use crate::types::{CookEvent, Cursor, LineNo, MAX_MARKER_LEN};
use model::{Model, Performer};
pub use screen::placeholder;

/// Names the full-screen program in the placeholder line that follows a
/// [`CookEvent::Screen`] event at `events[i]`, if that is one starting a
/// program; `command` is the command line of the region running then
/// (the innermost open one). The cooker itself writes a placeholder
/// without a name, since it cannot know the program; a caller that tracks
/// regions calls this for every event before it stores the lines.
pub fn name_screen(events: &mut [CookEvent], i: usize, command: Option<&str>) {
    if !matches!(events.get(i), Some(CookEvent::Screen { on: true, .. })) {
        return;
    }
    if let Some(CookEvent::Line { text, .. }) = events.get_mut(i + 1) {
        *text = placeholder(command);
    }
}

/// The most bytes of one OSC string vte keeps. A marker needs `133;` and
/// up to [`MAX_MARKER_LEN`] bytes; a longer string is cut here, and then
/// is too long to be taken for a marker, so a cut never forges one.
pub const OSC_BUF: usize = 1024;

const _: () = assert!(OSC_BUF > MAX_MARKER_LEN + "133;".len());

/// The largest join buffer kept between feeds; the logger feeds 64 KiB.
const JOINED_KEEP: usize = 1 << 17;

/// How many bytes at the end of `bytes` are the start of a UTF-8
/// character whose remaining bytes have not arrived: a lead byte followed
/// by fewer continuation bytes than it announces. 0 if none.
pub(crate) fn cut_char_len(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        let needs = match byte {
            0x80..=0xbf => continue,
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return 0,
        };
        return if back < needs { back } else { 0 };
    }
    0
}

/// Turns the raw byte stream of a pane into cooked lines and markers.
pub struct Cooker {
    /// vte's state machine; it carries partial escape sequences and partial
    /// UTF-8 from one feed to the next.
    parser: vte::Parser<OSC_BUF>,
    /// The unfinished line, its number and the cursor.
    model: Model,
    /// The start of a UTF-8 character cut off at the end of the last feed,
    /// at most 3 bytes; it goes to vte with the next feed.
    carry: Vec<u8>,
    /// Where `carry` and the next feed are joined; kept between feeds so
    /// that joining does not allocate each time.
    joined: Vec<u8>,
    /// Whether vte is known to be in its ground state, where the cooker
    /// may handle ASCII itself (see `feed_whole`).
    ground: bool,
}

impl Cooker {
    /// A cooker whose first line will be numbered `first_line`.
    pub fn new(first_line: LineNo) -> Self {
        Cooker {
            parser: vte::Parser::new_with_size(),
            model: Model::new(first_line),
            carry: Vec::new(),
            joined: Vec::new(),
            ground: true,
        }
    }

    /// Feeds the next bytes of the stream; events are appended to `out` in
    /// stream order.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<CookEvent>) {
        if self.carry.is_empty() {
            return self.feed_whole(bytes, out);
        }
        let mut joined = std::mem::take(&mut self.joined);
        joined.clear();
        joined.append(&mut self.carry);
        joined.extend_from_slice(bytes);
        self.feed_whole(&joined, out);
        // Keep the buffer for next time, unless a huge feed grew it.
        if joined.capacity() <= JOINED_KEEP {
            self.joined = joined;
        }
    }

    /// Feeds `bytes` to vte, except a cut character at the end, which is
    /// carried over to the next feed.
    ///
    /// ASCII text takes a short cut past vte. In its ground state vte hands
    /// every printable ASCII byte to `print` and every C0 control but ESC to
    /// `execute`, and stays in the ground state; so while the cooker knows
    /// vte is there, it makes those calls itself, a run of printable bytes
    /// at once, without vte decoding UTF-8 and dispatching per character.
    /// It knows vte is in the ground state when vte is new, and after a
    /// byte vte printed: `print` happens only there. So when vte has had
    /// to take over (an escape sequence, non-ASCII text), the first byte of
    /// the next run of printable ASCII goes to vte alone, as a probe.
    fn feed_whole(&mut self, bytes: &[u8], out: &mut Vec<CookEvent>) {
        let (head, tail) = bytes.split_at(bytes.len() - cut_char_len(bytes));
        let mut performer = Performer { model: &mut self.model, out, printed: false };
        let mut rest = head;
        while !rest.is_empty() {
            if self.ground {
                rest = &rest[performer.ground_ascii(rest)..];
                if rest.is_empty() {
                    break;
                }
                self.ground = false;
            }
            let end = memchr::memchr3(0x1b, b'\r', b'\n', rest).unwrap_or(rest.len());
            let run = &rest[..end];
            let mut start = 0;
            if run.first().is_some_and(|b| (0x20..=0x7e).contains(b)) {
                performer.printed = false;
                self.parser.advance(&mut performer, &run[..1]);
                if performer.printed {
                    self.ground = true;
                    rest = &rest[1..];
                    continue;
                }
                start = 1;
            }
            // The rest of the run and the control after it are vte's: this
            // keeps a long escape string from being probed byte by byte.
            let stop = (end + 1).min(rest.len());
            self.parser.advance(&mut performer, &rest[start..stop]);
            rest = &rest[stop..];
        }
        self.carry.extend_from_slice(tail);
    }

    /// Feeds `bytes` as [`Cooker::feed`] does but through vte alone, with
    /// no short cut for ASCII: the reference the short cut is tested
    /// against (property tests, the fuzz target). Not for production use.
    #[doc(hidden)]
    pub fn feed_via_vte_only(&mut self, bytes: &[u8], out: &mut Vec<CookEvent>) {
        self.ground = false;
        self.carry.extend_from_slice(bytes);
        let joined = std::mem::take(&mut self.carry);
        let (head, tail) = joined.split_at(joined.len() - cut_char_len(&joined));
        let mut performer = Performer { model: &mut self.model, out, printed: false };
        self.parser.advance(&mut performer, head);
        self.carry.extend_from_slice(tail);
    }

    /// Hands the events of the last feeds back once their lines are
    /// stored, emptying `events`: the cooker reuses the lines' strings.
    pub fn recycle(&mut self, events: &mut Vec<CookEvent>) {
        for event in events.drain(..) {
            if let CookEvent::Line { text, .. } = event
                && self.model.spare.len() < model::SPARE_MAX
                && text.capacity() <= model::SPARE_CAPACITY
            {
                self.model.spare.push(text);
            }
        }
    }

    /// Whether the cooker holds nothing but its line number: no drawn or
    /// carried text, the cursor at column 0 and no full-screen program or
    /// pending frame. The logger takes checkpoints only then, right after a
    /// line feed, so that a fresh cooker can carry on from there.
    pub fn at_rest(&self) -> bool {
        self.carry.is_empty() && self.model.at_rest()
    }

    /// Replaces the parser by a fresh one, as a cooker made at a
    /// checkpoint starts with. Right after a line feed vte is in its ground
    /// state anyway, unless a line feed broke an escape sequence in two; a
    /// logger restarting from the checkpoint then cooks the same text as
    /// the one that took it.
    pub fn restart_parser(&mut self) {
        self.parser = vte::Parser::new_with_size();
        self.ground = true;
    }

    /// Where the cursor is now.
    pub fn cursor(&self) -> Cursor {
        self.model.cursor()
    }

    /// The text of the line not yet finished, trailing blanks trimmed.
    pub fn current_text(&self) -> String {
        self.model.current_text()
    }

    /// Heap bytes held between feeds (vte's own buffers are inline and
    /// fixed), for tests that a stream cannot grow them.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.model.held_bytes() + self.carry.capacity() + self.joined.capacity()
    }
}

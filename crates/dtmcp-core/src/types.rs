//! Small value types that cross module boundaries.
//!
//! They are newtypes so that a line number is never mistaken for a byte
//! offset or a region id, and so that the on-disk and wire formats name what
//! each number means.

use serde::{Deserialize, Serialize};

/// A line of `session.txt`, counted from 1 as `sed -n`, `grep -n` and the
/// tools' replies count them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LineNo(pub u64);

impl LineNo {
    /// The first line of every session.
    pub const FIRST: LineNo = LineNo(1);

    /// The line after this one.
    pub fn next(self) -> LineNo {
        LineNo(self.0 + 1)
    }
}

impl std::fmt::Display for LineNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A region (one command's or one input's output), numbered from 1 in the
/// order regions open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RegionId(pub u64);

impl std::fmt::Display for RegionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A position in `raw.log`, in bytes from its start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ByteOffset(pub u64);

/// Where the cooker's cursor was when something happened: the line it was on
/// (not yet committed to `session.txt`), its column in screen cells, and how
/// many bytes of that line's text lie before the cursor.
///
/// `text_len` lets the region core cut a committed line at the cursor of an
/// earlier moment, for instance the end of a prompt, without knowing about
/// cell widths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The line the cursor is on; it is the next line to be committed.
    pub line: LineNo,
    /// The cursor's column, in cells, counted from 0.
    pub col: u32,
    /// Bytes of the line's cooked text that lie left of the cursor.
    pub text_len: u32,
}

/// What the cooker reports, in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CookEvent {
    /// A line was finished by a line feed. The text holds no control
    /// characters and no trailing newline.
    Line {
        /// Its number in `session.txt`.
        line: LineNo,
        /// Its final text.
        text: String,
    },
    /// An `OSC 133 ; ...` sequence arrived. `params` is everything after
    /// `133;` up to the terminator, capped at [`MAX_MARKER_LEN`] bytes (a
    /// longer one is dropped whole, never reported).
    Osc133 {
        /// The raw parameter bytes, `;`-separated as sent.
        params: Vec<u8>,
        /// Where the cursor was when the sequence arrived.
        at: Cursor,
    },
    /// A full-screen program took over the screen (`on`), or the cooker
    /// saw it end (`!on`). What it drew is not cooked into lines: while it
    /// runs, `session.txt` holds one [`SCREEN_PLACEHOLDER`] line, which
    /// follows this event when `on` and has the number `at.line`.
    Screen {
        /// Whether the full-screen program starts (true) or ended (false).
        on: bool,
        /// Where the cursor was; when `on`, on the placeholder's line.
        at: Cursor,
    },
    /// The output asked the terminal a question that tmux answers by
    /// typing into the pane (see [`crate::answers`]).
    Query {
        /// Which question.
        queries: crate::answers::Queries,
        /// Where the cursor was.
        at: Cursor,
    },
}

/// The text of the line that stands for everything a full-screen program
/// drew. The cooker cannot know the program's name; a caller that does may
/// write its own text for that line.
pub const SCREEN_PLACEHOLDER: &str = "[full-screen program]";

/// The longest OSC 133 parameter string the cooker reports; anything longer
/// is not one of our markers.
pub const MAX_MARKER_LEN: usize = 512;

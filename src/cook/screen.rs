//! Full-screen programs in a line-oriented log.
//!
//! `session.txt` is a list of lines that never change once written, so a
//! program that draws on the whole screen has no faithful place in it. The
//! cooker therefore collapses such a program into one placeholder line,
//! [`SCREEN_PLACEHOLDER`](crate::types::SCREEN_PLACEHOLDER), announced by a
//! [`CookEvent::Screen`](crate::types::CookEvent::Screen) event, and
//! resumes cooking lines when it sees the program end. Two kinds are
//! recognised:
//!
//! - **The alternate screen** (`CSI ? 1049 h`, `? 1047 h`, `? 47 h`), which
//!   vim, less and most curses programs use. Everything drawn while it is
//!   on is dropped; leaving it (`… l`) resumes lines where they were.
//! - **Repainting the normal screen from home.** A program such as
//!   `watch` without the alternate screen, or a `clear; date` loop, homes
//!   the cursor (`CSI H`, `CSI 1;1H`) and draws a frame, again and again.
//!   The first frame is cooked as ordinary lines, because one `clear`
//!   looks the same; a second home within [`FRAME_MAX_ROWS`] lines of the
//!   first, with no shell marker between, starts the placeholder. From
//!   then the cooker keeps the frame as rows of text, seeded with the
//!   lines since the first home: a line feed or a cursor move to another
//!   row stores the row the cursor leaves and takes up the row it enters
//!   as the unfinished line, so a program that redraws only what changed
//!   still leaves whole rows; erasing the display empties rows. When the
//!   program ends, the frame is written out as lines, since it is what
//!   stays on a person's screen.
//!
//! Either kind ends at any OSC 133 sequence, because a shell drawing its
//! prompt means the program is gone, even one killed before it could
//! leave the alternate screen. A repaint also ends when a frame grows past
//! [`FRAME_MAX_ROWS`] rows without a home, or the cursor is sent below
//! that: the program stopped repainting, or never did. Without shell
//! integration that delays output after such a program by at most that
//! many lines, and two `clear` commands that close together are taken for
//! a repaint; with it, every prompt starts afresh.

/// The most rows a frame may hold; taller than any real screen, so that a
/// frame this long can only be ordinary output.
pub(super) const FRAME_MAX_ROWS: usize = 256;

/// Which full-screen state the cooker is in. It lives as long as the
/// cooker.
#[derive(Debug, Default)]
pub(super) struct Screen {
    /// The alternate screen is on: nothing drawn is cooked.
    pub(super) alt: bool,
    /// A repainting program holds the normal screen: rows go to `frame`
    /// instead of `session.txt`.
    pub(super) repaint: bool,
    /// The rows of the repainted screen, top first, the cursor's row
    /// excepted (the cooker's unfinished line holds it); at most
    /// [`FRAME_MAX_ROWS`] long. Before a repaint starts, the lines
    /// committed since the last home.
    pub(super) frame: Vec<String>,
    /// The row the cursor is on while repainting.
    row: usize,
    /// Whether a home was seen in normal mode with no shell marker since,
    /// and fewer than [`FRAME_MAX_ROWS`] lines ago.
    homed: bool,
}

impl Screen {
    /// Whether a placeholder stands in for the screen now.
    pub(super) fn covered(&self) -> bool {
        self.alt || self.repaint
    }

    /// Notes a home in normal mode; true if it is a repaint, and then the
    /// lines since the last home become the frame.
    pub(super) fn home_repaints(&mut self) -> bool {
        let repaints = self.homed;
        self.homed = true;
        if !repaints {
            self.frame.clear();
        }
        repaints
    }

    /// Notes a line committed in normal mode, kept while it may turn out
    /// to be a row of the first frame. Only then is it copied, so ordinary
    /// output costs one test here.
    #[inline]
    pub(super) fn committed(&mut self, text: &str) {
        if !self.homed {
            return;
        }
        if self.frame.len() < FRAME_MAX_ROWS {
            self.frame.push(text.to_owned());
        } else {
            self.forget();
        }
    }

    /// A shell marker or a long stretch of lines: no frame is pending.
    pub(super) fn forget(&mut self) {
        self.homed = false;
        if !self.repaint {
            self.frame.clear();
        }
    }

    /// Starts repainting; the cursor is below the seeded frame until it
    /// is moved home.
    pub(super) fn start_repaint(&mut self) {
        self.repaint = true;
        self.homed = false;
        self.row = self.frame.len();
    }

    /// Stores `text` as the row the cursor leaves and moves to `row`;
    /// returns the text that row shows, or `None` if it lies below any real
    /// screen, which means the program no longer repaints.
    pub(super) fn swap_row(&mut self, text: String, row: usize) -> Option<String> {
        self.store(text);
        self.row = row;
        if row >= FRAME_MAX_ROWS {
            return None;
        }
        Some(self.frame.get_mut(row).map(std::mem::take).unwrap_or_default())
    }

    /// Stores `text` as the cursor's row.
    fn store(&mut self, text: String) {
        if self.row < self.frame.len() {
            self.frame[self.row] = text;
        } else if !text.is_empty() {
            self.frame.resize(self.row, String::new());
            self.frame.push(text);
        }
    }

    /// The cursor's row while repainting.
    pub(super) fn row(&self) -> usize {
        self.row
    }

    /// Erase in display on the rows other than the cursor's: those below
    /// it (`0`), above it (`1`) or all (`2`).
    pub(super) fn erase_rows(&mut self, mode: u16) {
        let row = self.row.min(self.frame.len());
        match mode {
            0 => self.frame.truncate(row),
            1 => self.frame[..row].iter_mut().for_each(String::clear),
            2 => self.frame.iter_mut().for_each(String::clear),
            _ => {}
        }
    }

    /// Ends whatever covers the screen; returns the rows of a repainted
    /// frame, trailing empty ones dropped, with `last` as the cursor's row.
    pub(super) fn end(&mut self, last: String) -> Vec<String> {
        self.alt = false;
        if !std::mem::take(&mut self.repaint) {
            return Vec::new();
        }
        self.store(last);
        self.row = 0;
        let mut frame = std::mem::take(&mut self.frame);
        while frame.last().is_some_and(String::is_empty) {
            frame.pop();
        }
        frame
    }
}

/// Which private modes (`CSI ? n h/l`) switch the alternate screen.
pub(super) fn is_alt_screen_mode(mode: u16) -> bool {
    matches!(mode, 47 | 1047 | 1049)
}

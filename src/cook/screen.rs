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
//!   first, with no shell marker between, starts the placeholder. Rows
//!   drawn from then on are held as the current frame, and each home
//!   drops it. When the program ends, the last frame is written out as
//!   lines, since it is what stays on a person's screen.
//!
//! Either kind ends at any OSC 133 sequence, because a shell drawing its
//! prompt means the program is gone, even one killed before it could
//! leave the alternate screen. A repaint also ends when a frame grows past
//! [`FRAME_MAX_ROWS`] rows without a home: the program stopped repainting,
//! or never did. Without shell integration that delays output after such a
//! program by at most that many lines.

use crate::types::LineNo;

/// The most rows a frame may hold; taller than any real screen, so that a
/// frame this long can only be ordinary output.
pub(super) const FRAME_MAX_ROWS: usize = 256;

/// Which full-screen state the cooker is in. It lives as long as the
/// cooker.
#[derive(Debug, Default)]
pub(super) struct Screen {
    /// The alternate screen is on: nothing drawn is cooked.
    pub(super) alt: bool,
    /// A repainting program holds the normal screen: committed rows go to
    /// `frame` instead of `session.txt`.
    pub(super) repaint: bool,
    /// The rows committed since the last home while repainting; at most
    /// [`FRAME_MAX_ROWS`] long.
    pub(super) frame: Vec<String>,
    /// The line the cursor was on at the last home in normal mode, until a
    /// shell marker; a second home soon after starts a repaint.
    pub(super) last_home: Option<LineNo>,
}

impl Screen {
    /// Whether a placeholder stands in for the screen now.
    pub(super) fn covered(&self) -> bool {
        self.alt || self.repaint
    }

    /// Notes a home in normal mode at `line`; true if it is a repaint.
    pub(super) fn home_repaints(&mut self, line: LineNo) -> bool {
        let repaints = self.last_home.is_some_and(|home| line.0.saturating_sub(home.0) <= FRAME_MAX_ROWS as u64);
        self.last_home = Some(line);
        repaints
    }

    /// Holds a committed row of the frame; false if the frame is full and
    /// the repaint should end.
    pub(super) fn hold(&mut self, row: String) -> bool {
        self.frame.push(row);
        self.frame.len() < FRAME_MAX_ROWS
    }
}

/// Which private modes (`CSI ? n h/l`) switch the alternate screen.
pub(super) fn is_alt_screen_mode(mode: u16) -> bool {
    matches!(mode, 47 | 1047 | 1049)
}

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

    /// No full-screen program and no frame pending: the state of a new
    /// cooker.
    pub(super) fn at_rest(&self) -> bool {
        !self.covered() && !self.homed && self.frame.is_empty()
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

/// Programs that usually take the whole screen. In a pipeline such as
/// `git log | less` or a list such as `make; vim notes`, the last of these
/// is the one drawing.
const SCREEN_PROGRAMS: &[&str] = &[
    "vim",
    "vi",
    "nvim",
    "view",
    "less",
    "more",
    "most",
    "man",
    "top",
    "htop",
    "btop",
    "atop",
    "watch",
    "nano",
    "emacs",
    "mc",
    "tig",
    "ranger",
    "nnn",
    "tmux",
    "screen",
    "mutt",
    "ncdu",
    "iotop",
    "iftop",
    "nethack",
    "pager",
    "journalctl",
];

/// Words that run the next word as the program (`sudo vim`, `env X=1 top`),
/// and shell keywords that come before one (`do vim`, `then top`).
const WRAPPERS: &[&str] = &[
    "sudo", "env", "nice", "nohup", "time", "exec", "command", "doas", "stdbuf", "ionice", "do", "then", "else",
    "elif", "if", "while", "until", "!", "{",
];

/// The longest command line quoted in a placeholder.
const QUOTE_MAX: usize = 40;

/// The placeholder line for a full-screen program started by `command`
/// (the command line of the region it runs in, if any).
///
/// The cooker cannot see who draws, so the name comes from the command
/// line the shell integration reported, a guess from its words but a pure
/// one: the same bytes always cook to the same text. It is the last
/// well-known full-screen program in the line (`seq 1 200 | less` names
/// `less`); else the program of a simple command (`./game` names `game`);
/// else, for a list or loop that redraws, the start of the line itself.
/// Without a command (no integrated shell) no program is named.
pub fn placeholder(command: Option<&str>) -> String {
    match command.and_then(program_name) {
        Some(name) => format!("[full-screen program: {name}]"),
        None => crate::types::SCREEN_PLACEHOLDER.to_owned(),
    }
}

/// What to call the full-screen program of `command`.
fn program_name(command: &str) -> Option<String> {
    let line = command.lines().next()?.trim();
    let stages: Vec<&str> = line.split(['|', ';', '&', '(', ')', '`']).filter(|s| !s.trim().is_empty()).collect();
    let programs: Vec<&str> = stages.iter().filter_map(|stage| stage_program(stage)).collect();
    let known = programs.iter().rev().find(|name| SCREEN_PROGRAMS.contains(name));
    let name = match (known, stages.len(), programs.first()) {
        (Some(name), _, _) => (*name).to_owned(),
        (None, 1, Some(name)) => (*name).to_owned(),
        _ => quote(line),
    };
    let clean: String = name.chars().filter(|c| !c.is_control()).collect();
    (!clean.trim().is_empty()).then_some(clean)
}

/// `line`, cut to [`QUOTE_MAX`] characters with an ellipsis.
fn quote(line: &str) -> String {
    if line.chars().count() <= QUOTE_MAX {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(QUOTE_MAX).collect();
    cut.push('…');
    cut
}

/// The program a pipeline stage runs: its first word after variable
/// assignments, wrappers and their options, without its directory.
fn stage_program(stage: &str) -> Option<&str> {
    let mut words = stage.split_whitespace().map(|word| word.trim_matches(['"', '\'', '\\']));
    let word = words
        .find(|word| !word.is_empty() && !word.contains('=') && !word.starts_with('-') && !WRAPPERS.contains(word))?;
    word.rsplit('/').next().filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::placeholder;

    #[rstest]
    #[case::editor("vim -N -u NONE notes.txt", "[full-screen program: vim]")]
    #[case::pager_in_a_pipeline("seq 1 200 | less", "[full-screen program: less]")]
    #[case::wrapped_with_a_path("sudo -E /usr/bin/top -d 1", "[full-screen program: top]")]
    #[case::after_a_list("make && git log | less -R; echo done", "[full-screen program: less]")]
    #[case::simple_unknown_program("FOO=1 ./game --level 2", "[full-screen program: game]")]
    #[case::redraw_loop("while true; do clear; date; done", "[full-screen program: while true; do clear; date; done]")]
    #[case::long_loop_is_cut(
        "for i in 1 2 3 4 5 6; do clear; echo \"frame $i\"; seq 3; sleep 0.2; done",
        "[full-screen program: for i in 1 2 3 4 5 6; do clear; echo \"fr…]"
    )]
    #[case::second_line_ignored("vim a\nb", "[full-screen program: vim]")]
    fn the_placeholder_names_the_program(#[case] command: &str, #[case] want: &str) {
        assert_eq!(placeholder(Some(command)), want);
    }

    #[test]
    fn without_a_command_no_program_is_named() {
        assert_eq!(placeholder(None), "[full-screen program]");
        assert_eq!(placeholder(Some("  ")), "[full-screen program]");
    }
}

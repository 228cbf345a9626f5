//! The faithful views `read` offers besides the cooked log: the screen (the
//! literal rows a person attached to the pane sees, with its size, cursor
//! and whether the alternate screen is on) and the raw log (the bytes the
//! pane printed, every escape and control byte spelled out).
//!
//! The rendering and spelling-out are pure functions tested on captured
//! text; the async functions around them only ask tmux or read `raw.log`.

use std::fmt::Write;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::session::{Session, validate_name};
use crate::tmux::Tmux;
use crate::tools::Terminal;
use crate::tools::ToolError;
use crate::tools::replies::output::digits;
use dtmcp_core::agent_state::{SeenScreen, row_hash};
use dtmcp_core::redact::Cut;
use dtmcp_core::store::files;

/// The `display -p` format that [`parse_pane_state`] reads.
pub const PANE_STATE_FORMAT: &str =
    "#{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{alternate_on} #{pane_in_mode} #{pane_pid}";

/// Bytes of `raw.log` shown when no amount is asked for.
pub const RAW_DEFAULT_BYTES: u64 = 4096;
/// The most bytes of `raw.log` one call shows.
pub const RAW_MAX_BYTES: u64 = 65536;
/// The longest spelled-out text one reply carries (spelling can quadruple
/// the size, and clients refuse results much over 25,000 tokens).
const RAW_MAX_TEXT: usize = 48_000;

/// Rows of history read above a screen, so that a secret the screen's top
/// edge cuts is found with its beginning: a long token or JWT wraps over
/// a few rows of a narrow pane.
const SCREEN_CONTEXT_ROWS: usize = 8;

/// What tmux says about a pane's screen at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaneState {
    /// Width in cells.
    pub cols: u32,
    /// Height in rows.
    pub rows: u32,
    /// The cursor's column, from 0.
    pub cursor_x: u32,
    /// The cursor's row, from 0.
    pub cursor_y: u32,
    /// Whether a full-screen program switched to the alternate screen.
    pub alternate: bool,
    /// Whether the pane is in copy mode (or another tmux mode), where keys
    /// go to tmux instead of the program.
    pub in_mode: bool,
    /// The pid of the pane's first process (its shell, usually).
    pub pane_pid: u32,
}

/// Reads the output of [`PANE_STATE_FORMAT`].
pub fn parse_pane_state(text: &str) -> Result<PaneState, String> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [cols, rows, x, y, alt, mode, pid] = fields[..] else {
        return Err(format!("unexpected pane state from tmux: {text:?}"));
    };
    let num = |f: &str| f.parse::<u32>().map_err(|_| format!("unexpected pane state from tmux: {text:?}"));
    Ok(PaneState {
        cols: num(cols)?,
        rows: num(rows)?,
        cursor_x: num(x)?,
        cursor_y: num(y)?,
        alternate: alt == "1",
        in_mode: mode == "1",
        pane_pid: num(pid)?,
    })
}

/// Asks tmux for the state of `pane`.
pub async fn pane_state(tmux: &Tmux, pane: &str) -> Result<PaneState, ToolError> {
    let text = tmux.display(pane, PANE_STATE_FORMAT).await?;
    parse_pane_state(&text).map_err(ToolError::Failed)
}

/// One capture of a pane's screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Screen {
    /// Size, cursor and modes at the capture.
    pub state: PaneState,
    /// Exactly `state.rows` rows, each right-trimmed.
    pub rows: Vec<String>,
}

/// Turns `capture-pane -p` output into exactly `height` right-trimmed rows.
/// tmux keeps no control characters in its cells; should one come through
/// all the same, it is spelled out as in the raw view rather than sent on.
pub fn screen_rows(capture: &str, height: u32) -> Vec<String> {
    let mut rows: Vec<String> = capture.lines().map(|l| visible(l.trim_end())).collect();
    rows.resize(height as usize, String::new());
    rows
}

/// `row` with control characters (C0, DEL, C1) spelled out.
fn visible(row: &str) -> String {
    if !row.chars().any(is_control) {
        return row.to_string();
    }
    let mut out = String::with_capacity(row.len() + 8);
    for c in row.chars() {
        if is_control(c) { spell_char(&mut out, c) } else { out.push(c) }
    }
    out
}

fn is_control(c: char) -> bool {
    c.is_control() || ('\u{80}'..='\u{9f}').contains(&c)
}

/// How much of the screen a reply shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScreenMode {
    /// Every row.
    Full,
    /// The rows that differ from the agent's previous look.
    Changes,
    /// The cursor's row only.
    Cursor,
}

impl ScreenMode {
    /// Reads `"full"`, `"changes"` or `"cursor"`.
    pub fn parse(s: &str) -> Result<ScreenMode, String> {
        match s.to_ascii_lowercase().as_str() {
            "full" => Ok(ScreenMode::Full),
            "changes" => Ok(ScreenMode::Changes),
            "cursor" => Ok(ScreenMode::Cursor),
            _ => Err(format!("screen {s:?} is not one of \"full\", \"changes\", \"cursor\"")),
        }
    }
}

impl Terminal {
    /// Captures the screen of `s` and renders it as `mode` asks; the
    /// calling agent's last look (kept with the session, so it survives a
    /// restart) is what `screen="changes"` compares with.
    pub(crate) async fn screen(&self, s: &Session, mode: ScreenMode) -> Result<String, ToolError> {
        let tmux = &self.sessions().tmux;
        let pane = s.pane.pane_id.as_str();
        // A few rows of the history above come along: the screen's first
        // row may go on from one of them, and a secret cut there is found
        // only with its beginning. They are redacted with the screen, then
        // left out.
        let above = format!("-{SCREEN_CONTEXT_ROWS}");
        let capture = tmux.run(&["capture-pane", "-p", "-S", &above, "-t", pane]).await?;
        let state = pane_state(tmux, pane).await?;
        let lines = capture.lines().count();
        let history = lines.saturating_sub(state.rows as usize);
        let all = screen_rows(&capture, (history + state.rows as usize) as u32);
        let mut rows = self.redacted_screen(&s.name, &all, state.cols).split_off(history);
        rows.resize(state.rows as usize, String::new());
        let screen = Screen { rows, state };
        let seen = SeenScreen::of(screen.state.cols, &screen.rows);
        let previous = self.update_agent(&s.name, |agent| agent.screen.replace(seen)).await.flatten();
        Ok(render(&screen, mode, previous.as_ref()))
    }
}

/// Renders a screen: a headline with size, cursor and modes, then rows
/// numbered from 1 as `mode` selects.
pub fn render(screen: &Screen, mode: ScreenMode, previous: Option<&SeenScreen>) -> String {
    let mut out = headline(&screen.state);
    let width = digits(screen.rows.len() as u64);
    let numbered = |out: &mut String, i: usize| {
        let _ = writeln!(out, "{:>width$}  {}", i + 1, screen.rows[i]);
    };
    match (mode, previous) {
        (ScreenMode::Cursor, _) => {
            let row = screen.state.cursor_y as usize;
            if row < screen.rows.len() {
                numbered(&mut out, row);
            }
        }
        (ScreenMode::Changes, Some(prev)) if prev.rows.len() == screen.rows.len() && prev.cols == screen.state.cols => {
            let changed: Vec<usize> =
                (0..screen.rows.len()).filter(|&i| prev.rows[i] != row_hash(&screen.rows[i])).collect();
            match changed.len() {
                0 => out.push_str("no row changed since the last look\n"),
                n => {
                    let rows = if n == 1 { "row" } else { "rows" };
                    let _ = writeln!(out, "{n} {rows} changed since the last look:");
                    changed.iter().for_each(|&i| numbered(&mut out, i));
                }
            }
        }
        (ScreenMode::Changes, _) => {
            out.push_str("no earlier screen of this pane to compare with (or its size changed); all rows:\n");
            full_rows(&mut out, screen, numbered);
        }
        (ScreenMode::Full, _) => full_rows(&mut out, screen, numbered),
    }
    out
}

/// Every row up to the last that holds text or the cursor, then a note for
/// the blank rows below. Three or more equal rows in a row (an editor's
/// `~` below the end of its file, a blank stretch) show as the first of
/// them and a note.
fn full_rows(out: &mut String, screen: &Screen, numbered: impl Fn(&mut String, usize)) {
    let last_text = screen.rows.iter().rposition(|r| !r.is_empty()).map_or(0, |i| i + 1);
    let shown = last_text.max(screen.state.cursor_y as usize + 1).min(screen.rows.len());
    let mut i = 0;
    while i < shown {
        let same = screen.rows[i..shown].iter().take_while(|r| **r == screen.rows[i]).count();
        match same {
            3.. if screen.rows[i].is_empty() => {
                let _ = writeln!(out, "(rows {}-{} are blank)", i + 1, i + same);
            }
            3.. => {
                numbered(out, i);
                let _ = writeln!(out, "(rows {}-{} are the same as row {})", i + 2, i + same, i + 1);
            }
            _ => (i..i + same).for_each(|k| numbered(out, k)),
        }
        i += same;
    }
    if shown < screen.rows.len() {
        let _ = writeln!(out, "(rows {}-{} are blank)", shown + 1, screen.rows.len());
    }
}

fn headline(state: &PaneState) -> String {
    let mut out = format!(
        "screen {}x{} (columns x rows) · cursor at row {}, column {} · alternate screen {}",
        state.cols,
        state.rows,
        state.cursor_y + 1,
        state.cursor_x + 1,
        if state.alternate { "on (a full-screen program is showing)" } else { "off" },
    );
    if state.in_mode {
        out.push_str(" · the pane is in copy mode (send leaves it before typing)");
    }
    out.push('\n');
    out
}

/// Spells out `bytes` for a reader: escape and control bytes as `\e`, `\r`,
/// `\t`, `\n` (followed by a real newline, so lines stay lines) or `\xNN`,
/// C1 controls as `\u{9b}`, a backslash as `\\`, bytes that are not UTF-8
/// as `\xNN`; everything else as it is. Stops before the text passes
/// `max_len` bytes; returns the text and how many input bytes it covers.
pub fn spell_out(bytes: &[u8], max_len: usize) -> (String, usize) {
    let mut out = String::with_capacity(bytes.len().min(max_len) + 16);
    let mut used = 0;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if out.len() >= max_len {
                return (out, used);
            }
            spell_char(&mut out, c);
            used += c.len_utf8();
        }
        for b in chunk.invalid() {
            if out.len() >= max_len {
                return (out, used);
            }
            let _ = write!(out, "\\x{b:02x}");
            used += 1;
        }
    }
    (out, used)
}

fn spell_char(out: &mut String, c: char) {
    match c {
        '\x1b' => out.push_str("\\e"),
        '\n' => out.push_str("\\n\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\\' => out.push_str("\\\\"),
        c if c.is_ascii_control() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        '\u{80}'..='\u{9f}' => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// Which bytes of a log of `len` bytes to show: `count` bytes from
/// `from_byte`, or the last `count`.
pub fn raw_range(len: u64, from_byte: Option<u64>, count: Option<u64>) -> Result<(u64, u64), String> {
    let count = count.unwrap_or(RAW_DEFAULT_BYTES);
    if count == 0 || count > RAW_MAX_BYTES {
        return Err(format!("bytes must be between 1 and {RAW_MAX_BYTES}; got {count}"));
    }
    match from_byte {
        Some(from) if from > len => Err(format!("raw.log has {len} bytes; from_byte {from} is past its end")),
        Some(from) => Ok((from, len.min(from + count))),
        None => Ok((len.saturating_sub(count), len)),
    }
}

/// Bytes of `raw.log` read on each side of a raw window, to find the ends
/// of the lines it cuts: more than the longest one-line secret a rule
/// knows (a token, a JWT, a key's line).
const RAW_CONTEXT: u64 = 4096;

/// The raw view of the log at `path`, as `raw_range` selects, with the
/// secrets it touches hidden by `hide`.
///
/// A window cut through a secret shows two pieces of which neither looks
/// like one, so the window is never redacted alone: the bytes around it
/// are read too, out to the ends of the lines it cuts (at most
/// [`RAW_CONTEXT`] bytes each way), spelled out as the window is, and
/// `hide` gets that text, the window's range in it, and where the text
/// itself had to be cut inside a line.
pub async fn raw(
    session: &str,
    path: &Path,
    from_byte: Option<u64>,
    count: Option<u64>,
    hide: impl FnOnce(&str, std::ops::Range<usize>, Cut) -> String,
) -> Result<String, ToolError> {
    let io = |e: std::io::Error| ToolError::Failed(format!("reading {}: {e}", path.display()));
    let mut file = tokio::fs::File::open(path).await.map_err(io)?;
    let len = file.metadata().await.map_err(io)?.len();
    let (start, end) = raw_range(len, from_byte, count).map_err(ToolError::BadInput)?;
    let (lo, hi) = (start.saturating_sub(RAW_CONTEXT), len.min(end + RAW_CONTEXT));
    file.seek(std::io::SeekFrom::Start(lo)).await.map_err(io)?;
    let mut bytes = Vec::with_capacity((hi - lo) as usize);
    file.take(hi - lo).read_to_end(&mut bytes).await.map_err(io)?;
    let (window_at, window_end) = ((start - lo) as usize, ((end - lo) as usize).min(bytes.len()));
    let (text, used) = spell_out(&bytes[window_at..window_end], RAW_MAX_TEXT);
    let end = start + used as u64;
    let (context, shown, cut) = raw_context(&bytes, window_at, window_at + used, &text, (lo, hi, len));
    let text = hide(&context, shown, cut);
    let mut out = format!(
        "raw.log bytes {start}-{end} of {len}, spelled out: \\e is ESC, \\r CR, \\t tab, \\xNN another control or non-UTF-8 byte, \\\\ a backslash; each \\n ends a shown line\n"
    );
    out.push_str(&text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    if start > 0 {
        let back = start.saturating_sub(count.unwrap_or(RAW_DEFAULT_BYTES));
        let _ = writeln!(out, "… earlier bytes: read session={session} view=\"raw\" from_byte={back}");
    }
    if end < len {
        let _ = writeln!(out, "… later bytes: read session={session} view=\"raw\" from_byte={end}");
    }
    Ok(out)
}

/// The spelled-out context of a window: `bytes` (bytes `lo..hi` of a log
/// of `len`) from the start of the line the window (`from..to` of
/// `bytes`, spelled out as `window`) begins in to the end of the line it
/// ends in, as far as `bytes` reaches; the window's range in it; and
/// whether the context had to be cut inside a line at either end.
fn raw_context(
    bytes: &[u8],
    from: usize,
    to: usize,
    window: &str,
    (lo, hi, len): (u64, u64, u64),
) -> (String, std::ops::Range<usize>, Cut) {
    let head = memchr::memrchr(b'\n', &bytes[..from]).map_or(0, |i| i + 1);
    let tail = memchr::memchr(b'\n', &bytes[to..]).map_or(bytes.len(), |i| to + i + 1);
    let cut = Cut { start: head == 0 && lo > 0, end: tail == bytes.len() && hi < len };
    let (before, _) = spell_out(&bytes[head..from], usize::MAX);
    let (after, _) = spell_out(&bytes[to..tail], usize::MAX);
    let shown = before.len()..before.len() + window.len();
    (before + window + &after, shown, cut)
}

/// The bytes of `raw.log` in session directory `dir` that hold region
/// `id`: from the end of what came before it (its prompt and command line
/// are in them) to its end, or to the log's end while it runs.
fn region_raw_span(dir: &Path, id: u64) -> Result<std::ops::Range<u64>, String> {
    let index = std::fs::read(dir.join(files::TIMING)).unwrap_or_default();
    let timeline = dtmcp_core::cast::timing::Timeline::from_records(&dtmcp_core::cast::timing::decode(&index));
    let regions = dtmcp_core::store::read_regions(dir).map_err(|e| e.to_string())?;
    let raw_len = std::fs::metadata(dir.join(files::RAW)).map_err(|e| e.to_string())?.len();
    let span = dtmcp_core::cast::span(&timeline, &regions, raw_len, dtmcp_core::cast::Select::One(id))
        // Its words are a recording's; a read goes by byte instead.
        .map_err(|e| {
            let by_byte = "read its bytes with from_byte";
            e.replace("nothing to record", by_byte).replace("record the whole session instead", by_byte)
        })?;
    Ok(span.from..span.to)
}

impl Terminal {
    /// `read view="screen"`: the whole screen of a live session.
    pub(crate) async fn screen_view(&self, session: &str) -> Result<String, ToolError> {
        let s = self.sessions().resolve(session).await?;
        self.screen(&s, ScreenMode::Full).await
    }

    /// `read view="raw"`: bytes of a session's `raw.log`, open or closed;
    /// with `region`, from where that command's prompt began.
    pub(crate) async fn raw_view(
        &self,
        session: &str,
        region: Option<u64>,
        from_byte: Option<u64>,
        count: Option<u64>,
    ) -> Result<String, ToolError> {
        validate_name(session).map_err(ToolError::BadInput)?;
        let path = self.sessions().cfg.session_dir(session).join(files::RAW);
        if !path.exists() {
            return Err(ToolError::BadInput(format!(
                "no session named {session:?} has a log here; session_list shows the open ones"
            )));
        }
        let dir = self.sessions().cfg.session_dir(session);
        let (from_byte, count) = match region {
            Some(id) => {
                let span = {
                    let dir = dir.clone();
                    tokio::task::spawn_blocking(move || region_raw_span(&dir, id))
                        .await
                        .map_err(|e| ToolError::Failed(e.to_string()))?
                        .map_err(ToolError::BadInput)?
                };
                let whole = (span.end - span.start).max(1);
                (Some(span.start), Some(count.map_or(whole.min(RAW_DEFAULT_BYTES), |c| c.min(whole))))
            }
            None => (from_byte, count),
        };
        let secrets = &self.inner.secrets;
        raw(session, &path, from_byte, count, |context, shown, cut| {
            let (text, counts) = secrets.redact_window(&dir, context, shown, cut);
            crate::tools::replies::secrets::hidden_early(&counts);
            text
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::colour(b"\x1b[31mred\x1b[0m", "\\e[31mred\\e[0m")]
    #[case::newline_stays_a_line(b"a\r\nb", "a\\r\\n\nb")]
    #[case::bell_and_tab(b"\x07x\ty", "\\x07x\\ty")]
    #[case::osc_title(b"\x1b]0;t\x07", "\\e]0;t\\x07")]
    #[case::delete_byte(b"\x7f", "\\x7f")]
    #[case::nul(b"\0", "\\x00")]
    #[case::backslash_is_doubled(b"a\\e", "a\\\\e")]
    #[case::utf8_kept("é€😀".as_bytes(), "é€😀")]
    #[case::c1_control_as_utf8("\u{9b}31m".as_bytes(), "\\u{9b}31m")]
    #[case::lone_c1_byte(b"\x9b31m", "\\x9b31m")]
    #[case::invalid_utf8(b"a\xffb", "a\\xffb")]
    #[case::truncated_utf8(b"x\xe2\x82", "x\\xe2\\x82")]
    #[case::empty(b"", "")]
    fn bytes_are_spelled_out(#[case] bytes: &[u8], #[case] want: &str) {
        assert_eq!(spell_out(bytes, usize::MAX), (want.to_string(), bytes.len()));
    }

    #[test]
    fn spelled_text_never_holds_a_control_character_but_newline() {
        let all: Vec<u8> = (0..=255).collect();
        let (text, used) = spell_out(&all, usize::MAX);
        assert_eq!(used, 256);
        assert!(text.chars().all(|c| c == '\n' || !(c.is_control() || ('\u{80}'..='\u{9f}').contains(&c))));
        assert_eq!(text.matches('\n').count(), 1);
    }

    #[test]
    fn spelling_stops_at_the_limit_and_says_how_far_it_got() {
        let (text, used) = spell_out(b"\x1b\x1b\x1b\x1b", 4);
        assert_eq!((text.as_str(), used), ("\\e\\e", 2));
    }

    #[rstest]
    #[case::tail_by_default(10_000, None, None, Ok((10_000 - RAW_DEFAULT_BYTES, 10_000)))]
    #[case::short_log(100, None, None, Ok((0, 100)))]
    #[case::from_a_byte(10_000, Some(10), Some(20), Ok((10, 30)))]
    #[case::cut_at_the_end(100, Some(90), Some(20), Ok((90, 100)))]
    #[case::past_the_end(100, Some(101), None, Err(()))]
    #[case::too_many(100, None, Some(RAW_MAX_BYTES + 1), Err(()))]
    #[case::zero(100, None, Some(0), Err(()))]
    fn raw_ranges(
        #[case] len: u64,
        #[case] from: Option<u64>,
        #[case] count: Option<u64>,
        #[case] want: Result<(u64, u64), ()>,
    ) {
        assert_eq!(raw_range(len, from, count).map_err(drop), want);
    }

    #[test]
    fn pane_state_is_read_from_display_output() {
        let s = parse_pane_state("120 40 2 5 1 0 4242").expect("state");
        assert_eq!(
            (s.cols, s.rows, s.cursor_x, s.cursor_y, s.alternate, s.in_mode, s.pane_pid),
            (120, 40, 2, 5, true, false, 4242)
        );
        assert!(parse_pane_state("120 40").is_err());
        assert!(parse_pane_state("a 40 2 5 1 0 1").is_err());
    }

    fn screen(rows: &[&str], cursor: (u32, u32)) -> Screen {
        let state = PaneState {
            cols: 20,
            rows: rows.len() as u32,
            cursor_x: cursor.0,
            cursor_y: cursor.1,
            alternate: false,
            in_mode: false,
            pane_pid: 1,
        };
        Screen { state, rows: rows.iter().map(|r| r.to_string()).collect() }
    }

    #[test]
    fn captures_become_exactly_the_screens_height_of_trimmed_rows() {
        assert_eq!(screen_rows("$ ls   \nfile\n", 4), ["$ ls", "file", "", ""]);
        assert_eq!(screen_rows("a\u{1b}[0m\\b\u{9b}\n", 1), ["a\\e[0m\\b\\u{9b}"]);
    }

    #[test]
    fn full_screens_show_rows_down_to_the_cursor_and_name_blank_ones() {
        let text = render(&screen(&["$ echo hi", "hi", "$", "", ""], (2, 2)), ScreenMode::Full, None);
        assert_eq!(
            text,
            "screen 20x5 (columns x rows) · cursor at row 3, column 3 · alternate screen off\n\
             1  $ echo hi\n2  hi\n3  $\n(rows 4-5 are blank)\n"
        );
    }

    #[test]
    fn runs_of_equal_rows_show_once() {
        let rows = ["top", "~", "~", "~", "~", "", "", "", "mid", "", "x", "x", "\"f\" 0L"];
        let text = render(&screen(&rows, (0, 0)), ScreenMode::Full, None);
        let body = text.split_once('\n').map(|(_, b)| b).unwrap_or_default();
        assert_eq!(
            body,
            " 1  top\n 2  ~\n(rows 3-5 are the same as row 2)\n(rows 6-8 are blank)\n 9  mid\n10  \n11  x\n12  x\n13  \"f\" 0L\n"
        );
    }

    #[test]
    fn the_cursor_view_shows_its_row_only() {
        let text = render(&screen(&["a", "b", "c"], (0, 1)), ScreenMode::Cursor, None);
        assert!(text.ends_with("row 2, column 1 · alternate screen off\n2  b\n"), "{text}");
    }

    #[test]
    fn changes_are_rows_that_differ_from_the_last_look() {
        let before = screen(&["a", "b", "c"], (0, 0));
        let after = screen(&["a", "B", "c"], (0, 0));
        let seen = |s: &Screen| SeenScreen::of(s.state.cols, &s.rows);
        let text = render(&after, ScreenMode::Changes, Some(&seen(&before)));
        assert!(text.ends_with("1 row changed since the last look:\n2  B\n"), "{text}");
        let same = render(&after, ScreenMode::Changes, Some(&seen(&after)));
        assert!(same.ends_with("no row changed since the last look\n"), "{same}");
        let first = render(&after, ScreenMode::Changes, None);
        assert!(first.contains("no earlier screen") && first.contains("3  c"), "{first}");
    }
}

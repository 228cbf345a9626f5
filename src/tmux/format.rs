//! Reading `list-panes -F` output into [`PaneInfo`] records.
//!
//! Fields are separated by `\x1f` (ASCII unit separator). Most fields cannot
//! hold it or a newline: ids, numbers, tty paths, and session names, which
//! tmux stores escaped (`vis(3)`: a tab in a name reads back as `\t`). Three
//! fields can hold anything: the `@dtmcp_name` option (anyone may set it),
//! the current command and the current directory. They come last, each
//! preceded in the record by its length in bytes (`#{n:…}`), so a newline or
//! separator inside them is still read correctly (a length costs tmux far
//! less than cleaning the value with an `s///` regex per pane). Should a length disagree with the text (tmux output
//! that was not valid UTF-8, decoded with replacement characters), the field
//! falls back to ending at its separator.
//!
//! Pure: tested on captured tmux output.

use serde::{Deserialize, Serialize};

use super::target::{BadPaneId, PaneId};

/// The field separator in [`PANE_FORMAT`].
pub const SEP: char = '\x1f';

/// The fields every record starts with: none can hold a separator or a
/// newline. The last three are the byte lengths of the three free fields
/// that follow them.
macro_rules! fixed_fields {
    () => {
        concat!(
            "#{pane_id}\x1f#{session_name}\x1f#{window_index}\x1f#{pane_index}\x1f",
            "#{pane_pid}\x1f#{pane_tty}\x1f#{pane_dead}\x1f#{pane_width}\x1f#{pane_height}\x1f",
            "#{pane_active}\x1f#{window_id}\x1f#{session_attached}\x1f#{n:@dtmcp_name}\x1f",
        )
    };
}

/// The `-F` format whose output [`parse_panes`] reads, with the current
/// command and directory of every pane but the hidden control session's.
///
/// Those two make tmux look in `/proc` (its server is one thread, which
/// every client waits for), so ask for them only where a reply shows them;
/// [`BARE_FORMAT`] leaves them out. tmux expands only the branch of `#{?…}`
/// it takes, so the hidden pane costs nothing.
pub const PANE_FORMAT: &str = concat!(
    fixed_fields!(),
    "#{?#{==:#{session_name},__dtmcp_ctl},0,#{n:pane_current_command}}\x1f",
    "#{?#{==:#{session_name},__dtmcp_ctl},0,#{n:pane_current_path}}\x1f",
    "#{@dtmcp_name}\x1f",
    "#{?#{==:#{session_name},__dtmcp_ctl},,#{pane_current_command}}\x1f",
    "#{?#{==:#{session_name},__dtmcp_ctl},,#{pane_current_path}}",
);

/// The same records without the current command and directory (both
/// empty): what finding a session needs, at no `/proc` cost to tmux.
pub const BARE_FORMAT: &str = concat!(fixed_fields!(), "0\x1f0\x1f#{@dtmcp_name}\x1f\x1f");

/// How many fields come before the free ones.
const FIXED_FIELDS: usize = 15;

/// One pane as `list-panes -a` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaneInfo {
    /// Its id, `%N`: an exact target.
    pub pane_id: PaneId,
    /// The session it belongs to, as tmux reports it (escaped with `vis(3)`);
    /// [`crate::session::Sessions::panes`] puts our session's name here.
    pub session_name: String,
    /// The tmux session it belongs to (what `session_name` held as tmux
    /// reported it): the one a person attaches to.
    pub tmux_session: String,
    /// Its window's index in that session.
    pub window_index: u32,
    /// Its index within the window.
    pub pane_index: u32,
    /// The pid of the pane's first process (still reported once it died).
    pub pane_pid: u32,
    /// Its terminal, like `/dev/pts/3`.
    pub pane_tty: String,
    /// What tmux sees in the foreground (`pane_current_command`).
    pub pane_current_command: String,
    /// The foreground process's directory; empty for a dead pane.
    pub pane_current_path: String,
    /// Whether its process exited and the pane was kept (`remain-on-exit`).
    pub pane_dead: bool,
    /// Width in cells.
    pub pane_width: u32,
    /// Height in cells.
    pub pane_height: u32,
    /// Whether it is its window's active pane.
    pub pane_active: bool,
    /// Its window's id, `@N`.
    pub window_id: String,
    /// How many clients are attached to its tmux session.
    pub session_attached: u32,
    /// The session name we gave the pane (the pane option `@dtmcp_name`,
    /// which anyone may set to anything: check it with
    /// [`crate::session::validate_name`]); empty for a pane we did not name.
    pub dtmcp_name: String,
}

/// `-F` output that does not have the shape of [`PANE_FORMAT`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable list-panes record ({reason}): {record:?}")]
pub struct FormatError {
    /// What was wrong.
    pub reason: String,
    /// The start of the offending record.
    pub record: String,
}

/// Reads the output of `list-panes -F` with [`PANE_FORMAT`]: one record per
/// pane, each ended by `\n` (the last one may lack it).
pub fn parse_panes(text: &str) -> Result<Vec<PaneInfo>, FormatError> {
    let mut panes = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (pane, after) = parse_record(rest)?;
        panes.push(pane);
        rest = after;
    }
    Ok(panes)
}

/// Reads the answer to `display -p -t PANE` with one of the formats:
/// `None` when it is not about `pane` (a pane that is gone may be answered
/// with empty fields rather than an error).
pub fn parse_pane(text: &str, pane: &PaneId) -> Result<Option<PaneInfo>, FormatError> {
    if !text.strip_prefix(pane.as_str()).is_some_and(|rest| rest.starts_with(SEP)) {
        return Ok(None);
    }
    let mut panes = parse_panes(text)?;
    Ok(panes.pop().filter(|p| p.pane_id == *pane && panes.is_empty()))
}

/// Reads one record from the start of `text`; returns it and what follows.
fn parse_record(text: &str) -> Result<(PaneInfo, &str), FormatError> {
    let fail = |reason: String| FormatError { reason, record: text.chars().take(200).collect() };
    let (fixed, rest) = split_fixed(text).map_err(|r| fail(r.to_string()))?;
    let name_len = number::<usize>(fixed[12], "name length").map_err(fail)?;
    let command_len = number::<usize>(fixed[13], "command length").map_err(fail)?;
    let path_len = number::<usize>(fixed[14], "path length").map_err(fail)?;
    let (name, rest) = take_field(rest, name_len, SEP).ok_or_else(|| fail("no command".into()))?;
    let (command, rest) = take_field(rest, command_len, SEP).ok_or_else(|| fail("no path".into()))?;
    let (path, rest) = take_field(rest, path_len, '\n').unwrap_or((rest, ""));
    let pane = pane_from(&fixed, [name, command, path]).map_err(fail)?;
    Ok((pane, rest))
}

/// The fields before the command, which hold neither separator nor newline.
fn split_fixed(text: &str) -> Result<([&str; FIXED_FIELDS], &str), &'static str> {
    let mut fields = [""; FIXED_FIELDS];
    let mut rest = text;
    for field in &mut fields {
        let end = rest.find([SEP, '\n']).ok_or("too few fields")?;
        if rest[end..].starts_with('\n') {
            return Err("too few fields");
        }
        *field = &rest[..end];
        rest = &rest[end + SEP.len_utf8()..];
    }
    Ok((fields, rest))
}

/// Takes a field of `len` bytes ended by `end` (or by the end of the text);
/// when the length does not fit, takes up to the first `end` instead.
fn take_field(text: &str, len: usize, end: char) -> Option<(&str, &str)> {
    let after_len = text.get(len..);
    let at = match after_len {
        Some(after) if after.is_empty() || after.starts_with(end) => len,
        _ => text.find(end)?,
    };
    let rest = &text[at..];
    Some((&text[..at], rest.strip_prefix(end).unwrap_or(rest)))
}

fn pane_from(fixed: &[&str; FIXED_FIELDS], [name, command, path]: [&str; 3]) -> Result<PaneInfo, String> {
    Ok(PaneInfo {
        pane_id: PaneId::parse(fixed[0]).map_err(|BadPaneId(s)| format!("bad pane id {s:?}"))?,
        session_name: fixed[1].to_string(),
        tmux_session: fixed[1].to_string(),
        window_index: number(fixed[2], "window index")?,
        pane_index: number(fixed[3], "pane index")?,
        pane_pid: number(fixed[4], "pane pid")?,
        pane_tty: fixed[5].to_string(),
        pane_current_command: command.to_string(),
        pane_current_path: path.to_string(),
        pane_dead: flag(fixed[6], "pane dead")?,
        pane_width: number(fixed[7], "pane width")?,
        pane_height: number(fixed[8], "pane height")?,
        pane_active: flag(fixed[9], "pane active")?,
        window_id: fixed[10].to_string(),
        session_attached: number(fixed[11], "attached clients")?,
        dtmcp_name: name.to_string(),
    })
}

fn number<T: std::str::FromStr>(field: &str, what: &str) -> Result<T, String> {
    field.parse().map_err(|_| format!("{what} is not a number: {field:?}"))
}

fn flag(field: &str, what: &str) -> Result<bool, String> {
    match field {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(format!("{what} is not 0 or 1: {field:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from tmux 3.3a with [`PANE_FORMAT`]: the hidden session's
    /// pane (no command or path asked for), a live pane, a dead pane kept
    /// by `remain-on-exit` (no path), and a pane in a session named `é€ x`
    /// whose directory is `/tmp/dtx-x<newline>y<US>z` and whose
    /// `@dtmcp_name` someone set to `a<US>b<newline>c`.
    const CAPTURED: &str = "%3\x1f__dtmcp_ctl\x1f0\x1f0\x1f6980\x1f/dev/pts/2\x1f0\x1f80\x1f24\x1f1\x1f@2\x1f0\x1f0\x1f0\x1f0\x1f\x1f\x1f\n\
        %0\x1ft1\x1f0\x1f0\x1f6947\x1f/dev/pts/0\x1f0\x1f100\x1f7\x1f1\x1f@0\x1f0\x1f2\x1f5\x1f4\x1ft1\x1fsleep\x1f/tmp\n\
        %1\x1ft1\x1f0\x1f1\x1f6954\x1f/dev/pts/1\x1f1\x1f100\x1f7\x1f0\x1f@0\x1f0\x1f4\x1f4\x1f0\x1ft1+1\x1ftrue\x1f\n\
        %2\x1fé€ x\x1f0\x1f0\x1f6975\x1f/dev/pts/1\x1f0\x1f80\x1f24\x1f1\x1f@1\x1f0\x1f5\x1f5\x1f14\x1fa\x1fb\nc\x1fsleep\x1f/tmp/dtx-x\ny\x1fz\n";

    fn pane(id: &str, session: &str, index: u32, pid: u32, command: &str, path: &str) -> PaneInfo {
        PaneInfo {
            pane_id: PaneId::parse(id).expect("test pane id"),
            session_name: session.to_string(),
            tmux_session: session.to_string(),
            window_index: 0,
            pane_index: index,
            pane_pid: pid,
            pane_tty: format!("/dev/pts/{}", &id[1..]),
            pane_current_command: command.to_string(),
            pane_current_path: path.to_string(),
            pane_dead: false,
            pane_width: 100,
            pane_height: 15,
            pane_active: true,
            window_id: "@0".to_string(),
            session_attached: 0,
            dtmcp_name: session.to_string(),
        }
    }

    #[test]
    fn captured_output_parses() {
        let hidden = PaneInfo {
            pane_width: 80,
            pane_height: 24,
            window_id: "@2".into(),
            pane_tty: "/dev/pts/2".into(),
            dtmcp_name: String::new(),
            ..pane("%3", "__dtmcp_ctl", 0, 6980, "", "")
        };
        let live = PaneInfo { pane_height: 7, ..pane("%0", "t1", 0, 6947, "sleep", "/tmp") };
        let dead = PaneInfo {
            pane_dead: true,
            pane_height: 7,
            pane_active: false,
            dtmcp_name: "t1+1".into(),
            ..pane("%1", "t1", 1, 6954, "true", "")
        };
        let odd = PaneInfo {
            pane_width: 80,
            pane_height: 24,
            window_id: "@1".into(),
            pane_tty: "/dev/pts/1".into(),
            dtmcp_name: "a\x1fb\nc".into(),
            ..pane("%2", "é€ x", 0, 6975, "sleep", "/tmp/dtx-x\ny\x1fz")
        };
        assert_eq!(parse_panes(CAPTURED), Ok(vec![hidden, live, dead, odd]));
    }

    #[test]
    fn the_formats_differ_only_in_the_current_command_and_path() {
        assert!(PANE_FORMAT.contains(super::super::CONTROL_SESSION));
        assert!(!BARE_FORMAT.contains("pane_current"));
        let fields = |f: &str| f.matches(SEP).count();
        assert_eq!(fields(PANE_FORMAT), fields(BARE_FORMAT));
    }

    #[test]
    fn last_record_may_lack_its_newline() {
        let text = CAPTURED.strip_suffix('\n').expect("captured text ends with a newline");
        assert_eq!(parse_panes(text).map(|p| p.len()), Ok(4));
    }

    #[test]
    fn separator_inside_the_command_is_kept() {
        let text = "%5\x1fs\x1f1\x1f2\x1f77\x1f/dev/pts/5\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1f1\x1f3\x1f2\x1fs\x1fa\x1fb\x1f/x\n";
        let parsed = parse_panes(text).expect("parses");
        assert_eq!((parsed[0].pane_current_command.as_str(), parsed[0].pane_current_path.as_str()), ("a\x1fb", "/x"));
        assert_eq!(parsed[0].dtmcp_name, "s");
    }

    #[test]
    fn wrong_lengths_fall_back_to_separators() {
        // Lengths as tmux counted the original bytes; the text here was
        // decoded with a replacement character and is longer.
        let text = "%5\x1fs\x1f1\x1f2\x1f77\x1f/dev/pts/5\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1f0\x1f2\x1f3\x1f\x1f\u{fffd}b\x1f/\u{fffd}\n%6";
        let err = parse_panes(text).expect_err("second record is cut short");
        assert_eq!(err.reason, "too few fields");
        let first = parse_panes(&text[..text.len() - 3]).expect("first record alone parses");
        assert_eq!(first[0].pane_current_command, "\u{fffd}b");
        assert_eq!(first[0].pane_current_path, "/\u{fffd}");
    }

    #[test]
    fn one_pane_answers_only_for_the_pane_asked_about() {
        let id = |s: &str| PaneId::parse(s).expect("pane id");
        let live = CAPTURED.lines().nth(1).expect("a live pane");
        assert_eq!(parse_pane(live, &id("%0")).expect("parses").map(|p| p.pane_current_command), Some("sleep".into()));
        assert_eq!(parse_pane(live, &id("%01")), Ok(None));
        assert_eq!(parse_pane(live, &id("%1")), Ok(None));
        // What 3.3a answers over a control client for a pane that is gone.
        let gone = "\x1f".repeat(12) + "0\x1f0\x1f0\x1f\x1f\x1f\n";
        assert_eq!(parse_pane(&gone, &id("%0")), Ok(None));
    }

    #[test]
    fn bad_fields_are_named() {
        let text =
            "%5\x1fs\x1fone\x1f2\x1f77\x1f/dev/pts/5\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1f0\x1f0\x1f0\x1f\x1f\x1f\n";
        let err = parse_panes(text).expect_err("window index is not a number");
        assert_eq!(err.reason, "window index is not a number: \"one\"");
    }
}

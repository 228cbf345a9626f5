//! Reading `list-panes -F` output into [`PaneInfo`] records.
//!
//! Fields are separated by `\x1f` (ASCII unit separator). Most fields cannot
//! hold it or a newline: ids, numbers, tty paths, and session names, which
//! tmux stores escaped (`vis(3)`: a tab in a name reads back as `\t`). Three
//! fields can hold anything: the `@dtmcp_name` option (anyone may set it),
//! the current command and the current directory. They come last, each
//! ended by the separator and a random word drawn once per process
//! ([`end_word`]), so a newline or separator inside them is still read
//! correctly: a value would have to hold the word to be misread, and
//! nothing in a pane learns it (it travels to tmux on the control client's
//! pipe; only the people's command line, which spawns tmux, shows it in an
//! argument list for a moment, to the same user).
//!
//! An earlier form put each field's length (`#{n:…}`) before it instead.
//! tmux 3.3a does not keep what it expanded, so a length made it look up
//! the current command and directory in `/proc` twice per pane: a listing
//! of 100 panes cost it about 1.7 ms more than this one.
//!
//! Pure: tested on tmux output built as tmux 3.3a writes it.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::target::{BadPaneId, PaneId};

/// The field separator in [`pane_format`].
pub const SEP: char = '\x1f';

/// The fields every record starts with: none can hold a separator or a
/// newline.
macro_rules! fixed_fields {
    () => {
        concat!(
            "#{pane_id}\x1f#{session_name}\x1f#{window_index}\x1f#{pane_index}\x1f",
            "#{pane_pid}\x1f#{pane_tty}\x1f#{pane_dead}\x1f#{pane_width}\x1f#{pane_height}\x1f",
            "#{pane_active}\x1f#{window_id}\x1f#{session_attached}\x1f#{window-size}\x1f",
        )
    };
}

/// How many fields come before the free ones.
const FIXED_FIELDS: usize = 13;

/// The word that, after [`SEP`], ends each free field: 16 hex digits from
/// `/dev/urandom`, the same for the life of the process.
pub fn end_word() -> &'static str {
    static WORD: OnceLock<String> = OnceLock::new();
    WORD.get_or_init(|| {
        let mut bytes = [0u8; 8];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
        if read.is_err() {
            // No /dev/urandom: the hasher's keys are random per process.
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            bytes = h.finish().to_le_bytes();
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    })
}

/// What ends each free field: [`SEP`] and [`end_word`].
pub fn field_end() -> &'static str {
    static END: OnceLock<String> = OnceLock::new();
    END.get_or_init(|| format!("{SEP}{}", end_word()))
}

/// The `-F` format whose output [`parse_panes`] reads, with the current
/// command and directory of every pane but the hidden control session's.
///
/// Those two make tmux look in `/proc` (its server is one thread, which
/// every client waits for), so ask for them only where a reply shows them;
/// [`bare_format`] leaves them out. tmux expands only the branch of `#{?…}`
/// it takes, so the hidden pane costs nothing.
pub fn pane_format() -> &'static str {
    static FORMAT: OnceLock<String> = OnceLock::new();
    FORMAT.get_or_init(|| {
        let end = field_end();
        [
            fixed_fields!(),
            "#{@dtmcp_name}",
            end,
            "#{?#{==:#{session_name},__dtmcp_ctl},,#{pane_current_command}}",
            end,
            "#{?#{==:#{session_name},__dtmcp_ctl},,#{pane_current_path}}",
            end,
        ]
        .concat()
    })
}

/// The same records without the current command and directory (both
/// empty): what finding a session needs, at no `/proc` cost to tmux.
pub fn bare_format() -> &'static str {
    static FORMAT: OnceLock<String> = OnceLock::new();
    FORMAT.get_or_init(|| {
        let end = field_end();
        [fixed_fields!(), "#{@dtmcp_name}", end, end, end].concat()
    })
}

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
    /// Whether its window keeps its size whatever clients attach (the
    /// window option `window-size` is `manual`): read with the rest, so
    /// that a listing needs no second scan of the windows.
    pub window_pinned: bool,
    /// The session name we gave the pane (the pane option `@dtmcp_name`,
    /// which anyone may set to anything: check it with
    /// [`crate::session::validate_name`]); empty for a pane we did not name.
    pub dtmcp_name: String,
}

/// `-F` output that does not have the shape of [`pane_format`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable list-panes record ({reason}): {record:?}")]
pub struct FormatError {
    /// What was wrong.
    pub reason: String,
    /// The start of the offending record.
    pub record: String,
}

/// Reads the output of `list-panes -F` with [`pane_format`]: one record per
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
    let end = field_end();
    let (name, rest) = rest.split_once(end).ok_or_else(|| fail("no end to the name".into()))?;
    let (command, rest) = rest.split_once(end).ok_or_else(|| fail("no end to the command".into()))?;
    let (path, rest) = rest.split_once(end).ok_or_else(|| fail("no end to the path".into()))?;
    let rest = match rest.strip_prefix('\n') {
        Some(rest) => rest,
        None if rest.is_empty() => rest,
        None => return Err(fail("more after the path".into())),
    };
    let pane = pane_from(&fixed, [name, command, path]).map_err(fail)?;
    Ok((pane, rest))
}

/// The fields before the free ones, which hold neither separator nor newline.
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
        window_pinned: fixed[12] == "manual",
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

    /// A record as tmux 3.3a writes it with [`pane_format`]: `fixed` (the
    /// fixed fields, each ended by the separator), then the free fields,
    /// each ended by [`field_end`], and a newline.
    fn record(fixed: &str, [name, command, path]: [&str; 3]) -> String {
        let end = field_end();
        format!("{fixed}{name}{end}{command}{end}{path}{end}\n")
    }

    /// The hidden session's pane (no command or path asked for), a live
    /// pane, a dead pane kept by `remain-on-exit` (no path), and a pane in
    /// a pinned window of a session named `é€ x` whose directory is
    /// `/tmp/dtx-x<newline>y<US>z` and whose `@dtmcp_name` someone set to
    /// `a<US>b<newline>c`.
    fn listed() -> String {
        [
            record(
                "%3\x1f__dtmcp_ctl\x1f0\x1f0\x1f6980\x1f/dev/pts/2\x1f0\x1f80\x1f24\x1f1\x1f@2\x1f0\x1flatest\x1f",
                ["", "", ""],
            ),
            record(
                "%0\x1ft1\x1f0\x1f0\x1f6947\x1f/dev/pts/0\x1f0\x1f100\x1f7\x1f1\x1f@0\x1f0\x1flatest\x1f",
                ["t1", "sleep", "/tmp"],
            ),
            record(
                "%1\x1ft1\x1f0\x1f1\x1f6954\x1f/dev/pts/1\x1f1\x1f100\x1f7\x1f0\x1f@0\x1f0\x1flatest\x1f",
                ["t1+1", "true", ""],
            ),
            record(
                "%2\x1fé€ x\x1f0\x1f0\x1f6975\x1f/dev/pts/1\x1f0\x1f80\x1f24\x1f1\x1f@1\x1f0\x1fmanual\x1f",
                ["a\x1fb\nc", "sleep", "/tmp/dtx-x\ny\x1fz"],
            ),
        ]
        .concat()
    }

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
            window_pinned: false,
            dtmcp_name: session.to_string(),
        }
    }

    #[test]
    fn listed_output_parses() {
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
            window_pinned: true,
            ..pane("%2", "é€ x", 0, 6975, "sleep", "/tmp/dtx-x\ny\x1fz")
        };
        assert_eq!(parse_panes(&listed()), Ok(vec![hidden, live, dead, odd]));
    }

    #[test]
    fn the_formats_differ_only_in_the_current_command_and_path() {
        assert!(pane_format().contains(super::super::CONTROL_SESSION));
        assert!(!bare_format().contains("pane_current"));
        let fields = |f: &str| f.matches(SEP).count();
        assert_eq!(fields(pane_format()), fields(bare_format()));
        assert_eq!(pane_format().matches(field_end()).count(), 3, "three free fields");
    }

    #[test]
    fn each_free_field_is_asked_of_tmux_once() {
        // tmux looks in /proc each time it expands one of these.
        assert_eq!(pane_format().matches("pane_current_command").count(), 1);
        assert_eq!(pane_format().matches("pane_current_path").count(), 1);
    }

    #[test]
    fn the_end_word_is_random_hex() {
        let word = end_word();
        assert_eq!(word.len(), 16);
        assert!(word.bytes().all(|b| b.is_ascii_hexdigit()), "{word}");
        assert_ne!(word, "0".repeat(16));
    }

    #[test]
    fn last_record_may_lack_its_newline() {
        let text = listed();
        let text = text.strip_suffix('\n').expect("the listing ends with a newline");
        assert_eq!(parse_panes(text).map(|p| p.len()), Ok(4));
    }

    #[test]
    fn separator_and_newline_inside_the_free_fields_are_kept() {
        let fixed = "%5\x1fs\x1f1\x1f2\x1f77\x1f/dev/pts/5\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1flatest\x1f";
        // A value that looks like the end of a field and a next record,
        // without the word, is only a value.
        let sly = "/x\x1f\n%6\x1fs\x1f0\x1f0\x1f1\x1f/dev/pts/6\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1flatest\x1f";
        let text = record(fixed, ["s", "a\x1fb", sly]);
        let parsed = parse_panes(&text).expect("parses");
        assert_eq!(parsed.len(), 1);
        assert_eq!((parsed[0].pane_current_command.as_str(), parsed[0].pane_current_path.as_str()), ("a\x1fb", sly));
        assert_eq!(parsed[0].dtmcp_name, "s");
    }

    #[test]
    fn text_not_valid_utf8_is_read_by_its_ends() {
        // tmux output decoded with replacement characters.
        let fixed = "%5\x1fs\x1f1\x1f2\x1f77\x1f/dev/pts/5\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1flatest\x1f";
        let text = record(fixed, ["", "\u{fffd}b", "/\u{fffd}"]) + "%6";
        let err = parse_panes(&text).expect_err("second record is cut short");
        assert_eq!(err.reason, "too few fields");
        let first = parse_panes(&text[..text.len() - 2]).expect("first record alone parses");
        assert_eq!(first[0].pane_current_command, "\u{fffd}b");
        assert_eq!(first[0].pane_current_path, "/\u{fffd}");
    }

    #[test]
    fn a_record_cut_inside_its_free_fields_is_an_error() {
        let fixed = "%5\x1fs\x1f1\x1f2\x1f77\x1f/dev/pts/5\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1flatest\x1f";
        let whole = record(fixed, ["s", "bash", "/home"]);
        let cut = &whole[..whole.len() - field_end().len() - 1];
        assert_eq!(parse_panes(cut).map_err(|e| e.reason), Err("no end to the path".to_string()));
    }

    #[test]
    fn one_pane_answers_only_for_the_pane_asked_about() {
        let id = |s: &str| PaneId::parse(s).expect("pane id");
        let listed = listed();
        let live = listed.lines().nth(1).expect("a live pane");
        assert_eq!(parse_pane(live, &id("%0")).expect("parses").map(|p| p.pane_current_command), Some("sleep".into()));
        assert_eq!(parse_pane(live, &id("%01")), Ok(None));
        assert_eq!(parse_pane(live, &id("%1")), Ok(None));
        // What 3.3a answers over a control client for a pane that is gone.
        let gone = record(&"\x1f".repeat(12), ["", "", ""]);
        assert_eq!(parse_pane(&gone, &id("%0")), Ok(None));
    }

    #[test]
    fn bad_fields_are_named() {
        let text = record(
            "%5\x1fs\x1fone\x1f2\x1f77\x1f/dev/pts/5\x1f0\x1f80\x1f24\x1f0\x1f@1\x1f0\x1flatest\x1f",
            ["", "", ""],
        );
        let err = parse_panes(&text).expect_err("window index is not a number");
        assert_eq!(err.reason, "window index is not a number: \"one\"");
    }
}

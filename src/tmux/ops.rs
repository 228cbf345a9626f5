//! The tmux operations the router uses, built on [`Tmux::run`].

use super::format::{PaneInfo, bare_format, pane_format, parse_pane, parse_panes};
use super::target::{PaneId, is_control_session, session_target};
use super::{Tmux, TmuxError};

/// The longest literal text sent in one `send-keys`, in bytes. A spawned
/// tmux carries its arguments in one message of at most 16 KiB, so text is
/// cut well below that whichever way it goes.
const MAX_LITERAL: usize = 4096;
/// The longest line [`Tmux::send_line`] sends in one command.
pub const MAX_LINE: usize = 1024;

/// A stretch of text that one `send-keys` types.
#[derive(Debug, PartialEq, Eq)]
enum Piece<'a> {
    /// Text without control characters, typed with `send-keys -l`.
    Literal(&'a str),
    /// Control characters (`\t`, `\r`, `\x03`, …), sent as bytes with `send-keys -H`.
    Control(&'a str),
}

/// Cuts `text` into literal and control pieces, literal ones at most
/// [`MAX_LITERAL`] bytes long and cut only between characters.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(first) = rest.chars().next() {
        let control = first.is_ascii_control();
        let end = rest.find(|c: char| c.is_ascii_control() != control).unwrap_or(rest.len());
        let end = if control { end } else { floor_char_boundary(rest, end.min(MAX_LITERAL)) };
        let (piece, after) = rest.split_at(end);
        out.push(if control { Piece::Control(piece) } else { Piece::Literal(piece) });
        rest = after;
    }
    out
}

/// The largest char boundary of `s` not above `i` (and above 0 when `s` is
/// not empty, since a char is at most 4 bytes and `i` is far larger).
fn floor_char_boundary(s: &str, i: usize) -> usize {
    (0..=i).rev().find(|&j| s.is_char_boundary(j)).unwrap_or(0)
}

/// What `display -p "#{pane_id} FORMAT"` expanded FORMAT to, if the answer
/// is for `pane`.
fn answer_of<'a>(out: &'a str, pane: &PaneId) -> Option<&'a str> {
    let out = out.strip_suffix('\n').unwrap_or(out);
    out.split_once(' ').filter(|(id, _)| pane == id).map(|(_, rest)| rest)
}

/// Whether tmux said the pane asked about does not exist.
fn no_such_pane(e: &TmuxError) -> bool {
    matches!(e, TmuxError::Command { stderr, .. } if stderr.starts_with("can't find pane"))
}

/// Whether tmux said it holds no session at all (a server whose last
/// session just closed answers `list-panes -a` so while it exits).
fn no_session(e: &TmuxError) -> bool {
    matches!(e, TmuxError::Command { stderr, .. } if stderr.contains("no current target"))
}

impl Tmux {
    /// Every pane of every session, except the hidden control session's,
    /// with its current command and directory. With no server running, the
    /// list is empty.
    pub async fn list_panes(&self) -> Result<Vec<PaneInfo>, TmuxError> {
        self.list(pane_format()).await
    }

    /// The same without the current command and directory (left empty),
    /// which cost tmux a look in `/proc` per pane.
    pub async fn list_panes_bare(&self) -> Result<Vec<PaneInfo>, TmuxError> {
        self.list(bare_format()).await
    }

    /// The pane `pane` without its current command and directory, as one
    /// small command; `None` when it is gone (or is the hidden session's).
    pub async fn pane(&self, pane: &PaneId) -> Result<Option<PaneInfo>, TmuxError> {
        let args = ["display", "-p", "-t", pane.as_str(), bare_format()];
        let text = match self.run(&args).await {
            Ok(text) => text,
            Err(e) if e.is_no_server() || no_such_pane(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let found = parse_pane(&text, pane)
            .map_err(|e| TmuxError::Unexpected { argv: self.argv(&args), reason: e.to_string() })?;
        Ok(found.filter(|p| !is_control_session(&p.tmux_session)))
    }

    async fn list(&self, format: &str) -> Result<Vec<PaneInfo>, TmuxError> {
        let args = ["list-panes", "-a", "-F", format];
        let text = match self.run(&args).await {
            Ok(text) => text,
            Err(e) if e.is_no_server() || no_session(&e) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let panes =
            parse_panes(&text).map_err(|e| TmuxError::Unexpected { argv: self.argv(&args), reason: e.to_string() })?;
        Ok(panes.into_iter().filter(|pane| !is_control_session(&pane.session_name)).collect())
    }

    /// Types `text` into the pane `pane` (a [`PaneId`] or a `%N` string)
    /// literally: printable text with `send-keys -l`, control characters as
    /// bytes with `send-keys -H`, in order. Nothing is added: send Enter with
    /// [`Tmux::send_enter`]. A pane in copy mode swallows keys; leave it first.
    pub async fn send_text<P: AsRef<str> + ?Sized>(&self, pane: &P, text: &str) -> Result<(), TmuxError> {
        let pane = self.pane_id(pane.as_ref(), "send-keys")?;
        for piece in pieces(text) {
            match piece {
                Piece::Literal(s) => self.run(&["send-keys", "-t", pane.as_str(), "-l", "--", s]).await?,
                Piece::Control(s) => self.send_bytes(&pane, s.as_bytes()).await?,
            };
        }
        Ok(())
    }

    /// Types `line` and presses Enter in `pane` as one tmux command (the
    /// bytes with `send-keys -H`), so that no other client's keys can fall
    /// between them. A line longer than [`MAX_LINE`] bytes goes as
    /// [`Tmux::send_text`] then [`Tmux::send_enter`].
    pub async fn send_line<P: AsRef<str> + ?Sized>(&self, pane: &P, line: &str) -> Result<(), TmuxError> {
        if line.len() > MAX_LINE {
            self.send_text(pane, line).await?;
            return self.send_enter(pane).await;
        }
        let pane = self.pane_id(pane.as_ref(), "send-keys")?;
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\r');
        self.send_bytes(&pane, &bytes).await.map(drop)
    }

    /// Presses Enter in the pane `pane`, as a command of its own after any text.
    pub async fn send_enter<P: AsRef<str> + ?Sized>(&self, pane: &P) -> Result<(), TmuxError> {
        let pane = self.pane_id(pane.as_ref(), "send-keys")?;
        self.run(&["send-keys", "-t", pane.as_str(), "Enter"]).await.map(drop)
    }

    /// Presses one key that tmux knows by name (`Enter`, `C-c`, `M-x`,
    /// `PPage`) in the pane `pane`, as a command of its own.
    pub async fn send_key<P: AsRef<str> + ?Sized>(&self, pane: &P, key: &str) -> Result<(), TmuxError> {
        let pane = self.pane_id(pane.as_ref(), "send-keys")?;
        self.run(&["send-keys", "-t", pane.as_str(), "--", key]).await.map(drop)
    }

    /// Leaves copy mode (or whatever mode the pane is in), so that keys
    /// reach the program again instead of being swallowed.
    pub async fn leave_mode<P: AsRef<str> + ?Sized>(&self, pane: &P) -> Result<(), TmuxError> {
        let pane = self.pane_id(pane.as_ref(), "send-keys")?;
        self.run(&["send-keys", "-t", pane.as_str(), "-X", "cancel"]).await.map(drop)
    }

    /// The visible screen of `pane` as plain text, one line per row
    /// (`capture-pane -p`: no colours, trailing blanks dropped by tmux).
    pub async fn capture_screen<P: AsRef<str> + ?Sized>(&self, pane: &P) -> Result<String, TmuxError> {
        let pane = self.pane_id(pane.as_ref(), "capture-pane")?;
        self.run(&["capture-pane", "-p", "-t", pane.as_str()]).await
    }

    /// Expands the tmux format `format` for `pane` (`display -p`), without
    /// the trailing newline. `display` answers for the current pane when its
    /// target is gone, so the pane's id is asked for too and must come back.
    pub async fn display<P: AsRef<str> + ?Sized>(&self, pane: &P, format: &str) -> Result<String, TmuxError> {
        let pane = self.pane_id(pane.as_ref(), "display")?;
        let full = format!("#{{pane_id}} {format}");
        let args = ["display", "-p", "-t", pane.as_str(), full.as_str()];
        let out = self.run(&args).await?;
        answer_of(&out, &pane).map(str::to_string).ok_or_else(|| TmuxError::Unexpected {
            argv: self.argv(&args),
            reason: format!("not an answer for pane {pane}: {out:?}"),
        })
    }

    /// Sends raw bytes to `pane` with `send-keys -H`.
    async fn send_bytes(&self, pane: &PaneId, bytes: &[u8]) -> Result<String, TmuxError> {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut args = vec!["send-keys", "-t", pane.as_str(), "-H"];
        args.extend(hex.iter().map(String::as_str));
        self.run(&args).await
    }

    /// Checks that `pane` is an exact pane id, so keys never go to a pane
    /// that a looser target happens to match.
    fn pane_id(&self, pane: &str, command: &str) -> Result<PaneId, TmuxError> {
        PaneId::parse(pane)
            .map_err(|e| TmuxError::Invalid { argv: self.argv(&[command, "-t", pane]), reason: e.to_string() })
    }

    /// Wakes whoever waits on the tmux channel `channel` (`wait-for -S`).
    pub async fn wait_for_signal(&self, channel: &str) -> Result<(), TmuxError> {
        self.run(&["wait-for", "-S", channel]).await.map(drop)
    }

    /// The argv a person runs to attach to the session named `session`:
    /// `tmux -L SOCKET attach -t =NAME` (the exact form, so that `t1` never
    /// attaches to `t10`).
    pub fn attach_command(&self, session: &str) -> Vec<String> {
        vec![
            self.bin().to_string_lossy().into_owned(),
            "-L".to_string(),
            self.socket().to_string(),
            "attach".to_string(),
            "-t".to_string(),
            session_target(session),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_control_characters() {
        use Piece::*;
        assert_eq!(
            pieces("ls\t-l; echo 'a'\x03\x03é\r"),
            vec![
                Literal("ls"),
                Control("\t"),
                Literal("-l; echo 'a'"),
                Control("\x03\x03"),
                Literal("é"),
                Control("\r")
            ]
        );
        assert_eq!(pieces(""), vec![]);
    }

    #[test]
    fn display_answers_must_name_the_pane_asked_about() {
        let pane = PaneId::parse("%3").expect("pane id");
        assert_eq!(answer_of("%3 80 24 0 1\n", &pane), Some("80 24 0 1"));
        assert_eq!(answer_of("%31 80 24\n", &pane), None);
        assert_eq!(answer_of("%0 80 24\n", &pane), None);
        assert_eq!(answer_of("", &pane), None);
    }

    #[test]
    fn long_text_is_cut_between_characters() {
        let text = "é".repeat(MAX_LITERAL);
        let cut = pieces(&text);
        assert!(cut.iter().all(|p| matches!(p, Piece::Literal(s) if s.len() <= MAX_LITERAL)));
        let joined: String = cut.iter().map(|p| if let Piece::Literal(s) = p { *s } else { "" }).collect();
        assert_eq!(joined, text);
    }
}

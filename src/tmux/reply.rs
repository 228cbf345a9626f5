//! Reading a tmux control client's output, one line at a time.
//!
//! The wire (tmux 3.3a and later, `tmux -C`): every command the server runs
//! for this client answers with a block
//!
//! ```text
//! %begin TIME NUMBER FLAGS
//! ...output lines, raw, any text at all...
//! %end TIME NUMBER FLAGS          (or %error TIME NUMBER FLAGS)
//! ```
//!
//! whose closing line repeats the opening one's three numbers. Blocks come in
//! the order the commands were read. `FLAGS` is `1` for a command read from
//! the client's stdin and `0` for one that was not (the client's start-up
//! command): only the former are answers to our requests. Outside blocks,
//! lines starting with `%` are notifications (`%session-changed`,
//! `%sessions-changed`, `%output`, …), and `%exit` says the client is about
//! to leave. Those that may mean a new pane in some session are reported
//! as [`Event::Topology`] (see [`is_topology`]); every other one but pane
//! output as [`Event::Change`], since it may mean something about a pane
//! changed (a client attached or detached, a session renamed, a window
//! closed). Inside a block every line is output, even one
//! that starts with `%` (as `list-panes` output does), until the exact
//! closing line.
//!
//! The parser is pure: it is fed lines without their `\n` and assigns them
//! no meaning beyond the framing.

/// What one line completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A block closed.
    Block {
        /// Whether it answers a command read from our stdin (`FLAGS` = 1).
        from_stdin: bool,
        /// `Ok(output)` for `%end`, `Err(message)` for `%error`. Output keeps a
        /// `\n` after every line, as a spawned tmux prints it; a message is
        /// trimmed.
        outcome: Result<String, String>,
    },
    /// `%exit`: the server is detaching the client (or is going away).
    Exit,
    /// A notification that a pane may have appeared somewhere.
    Topology,
    /// Any other notification but pane output: something may have changed.
    Change,
}

/// The name our tmux hooks give the hidden session's window whenever a
/// pane is split, joined, moved or swapped anywhere on the server (see
/// [`super::TOPOLOGY_HOOKS`]): renaming a window is something every control
/// client is told about, wherever it is attached, and tmux 3.3a has no
/// notification for a split in another session's window.
pub const TOPOLOGY_WINDOW: &str = "__dtmcp_topology";

/// Whether a notification line (outside a block) may mean a new pane in
/// some session: a window linked anywhere (`%window-add` for the client's
/// own session, `%unlinked-window-add` for any other), a session made,
/// closed or renamed, or the hidden window renamed by our hooks. Window
/// and pane closes are not: a pane going away leaves no pane to take on.
pub(crate) fn is_topology(line: &str) -> bool {
    let mut words = line.split(' ');
    match words.next() {
        Some("%window-add" | "%unlinked-window-add" | "%sessions-changed" | "%session-renamed") => true,
        Some("%window-renamed" | "%unlinked-window-renamed") => words.nth(1) == Some(TOPOLOGY_WINDOW),
        _ => false,
    }
}

/// A block that has begun and not yet ended.
#[derive(Debug)]
struct Open {
    /// `TIME NUMBER FLAGS`, which the closing line must repeat exactly.
    guard: String,
    from_stdin: bool,
    body: String,
}

/// Splits a control client's output into blocks.
#[derive(Debug, Default)]
pub(crate) struct ReplyParser {
    open: Option<Open>,
}

impl ReplyParser {
    /// Takes one line (without its `\n`); returns what it completed, if anything.
    pub(crate) fn feed(&mut self, line: &str) -> Option<Event> {
        match self.open.take() {
            Some(open) => self.feed_inside(open, line),
            None => Self::feed_outside(&mut self.open, line),
        }
    }

    fn feed_inside(&mut self, mut open: Open, line: &str) -> Option<Event> {
        let outcome = if line.strip_prefix("%end ") == Some(&open.guard) {
            Ok(open.body)
        } else if line.strip_prefix("%error ") == Some(&open.guard) {
            Err(open.body.trim_end().to_string())
        } else {
            open.body.push_str(line);
            open.body.push('\n');
            self.open = Some(open);
            return None;
        };
        Some(Event::Block { from_stdin: open.from_stdin, outcome })
    }

    fn feed_outside(slot: &mut Option<Open>, line: &str) -> Option<Event> {
        if let Some(guard) = line.strip_prefix("%begin ") {
            let from_stdin = guard
                .rsplit(' ')
                .next()
                .and_then(|flags| flags.parse::<u32>().ok())
                .is_some_and(|flags| flags & 1 == 1);
            *slot = Some(Open { guard: guard.to_string(), from_stdin, body: String::new() });
            None
        } else if line == "%exit" || line.starts_with("%exit ") {
            Some(Event::Exit)
        } else if is_topology(line) {
            Some(Event::Topology)
        } else if line.starts_with('%') && !line.starts_with("%output ") && !line.starts_with("%extended-output ") {
            Some(Event::Change)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `tmux -u -L … -C new-session -A -s __dtmcp_ctl …` (3.3a)
    /// fed `display -p a ; display -p b`, a failing command, `list-panes`
    /// and a value holding `%end`-like text.
    const TRANSCRIPT: &str = "\
%begin 1796205261 265 0
%end 1796205261 265 0
%window-add @1
%sessions-changed
%session-changed $1 __dtmcp_ctl
%begin 1796205261 271 1
a
%end 1796205261 271 1
%begin 1796205261 272 1
parse error: unknown command: bogus-cmd
%error 1796205261 272 1
%begin 1796205261 273 1
%1\x1f__dtmcp_ctl
%0\x1freal
%end 1796205261 999 1
%end 1796205261 273 1
%begin 1796205261 274 1
%end 1796205261 274 1
%unlinked-window-add @2
%exit
";

    fn events(text: &str) -> Vec<Event> {
        let mut parser = ReplyParser::default();
        text.lines().filter_map(|line| parser.feed(line)).collect()
    }

    fn block(from_stdin: bool, outcome: Result<&str, &str>) -> Event {
        Event::Block { from_stdin, outcome: outcome.map(str::to_string).map_err(str::to_string) }
    }

    #[test]
    fn transcript_splits_into_blocks() {
        assert_eq!(
            events(TRANSCRIPT),
            vec![
                block(false, Ok("")),
                Event::Topology,
                Event::Topology,
                Event::Change,
                block(true, Ok("a\n")),
                block(true, Err("parse error: unknown command: bogus-cmd")),
                block(true, Ok("%1\x1f__dtmcp_ctl\n%0\x1freal\n%end 1796205261 999 1\n")),
                block(true, Ok("")),
                Event::Topology,
                Event::Exit,
            ]
        );
    }

    #[test]
    fn notifications_between_blocks_are_changes_but_output_is_skipped() {
        let text = "%output %1 hello\n%session-changed $1 x\n%extended-output %1 0 : hi\n%window-close @2\n";
        assert_eq!(events(text), vec![Event::Change, Event::Change]);
        let attach = "%client-session-changed /dev/pts/2 $1 s1\n%client-detached /dev/pts/2\n";
        assert_eq!(events(attach), vec![Event::Change, Event::Change]);
    }

    /// Lines captured from a 3.3a control client while other clients split,
    /// made windows and sessions, renamed and killed them.
    #[rstest::rstest]
    #[case::window_here("%window-add @2", true)]
    #[case::window_elsewhere("%unlinked-window-add @3", true)]
    #[case::sessions("%sessions-changed", true)]
    #[case::session_renamed("%session-renamed $1 bb", true)]
    #[case::our_hook("%window-renamed @1 __dtmcp_topology", true)]
    #[case::our_hook_elsewhere("%unlinked-window-renamed @1 __dtmcp_topology", true)]
    #[case::a_window_renamed("%window-renamed @1 vim", false)]
    #[case::a_name_that_starts_alike("%unlinked-window-renamed @4 __dtmcp_topology2", false)]
    #[case::window_closed("%unlinked-window-close @1", false)]
    #[case::layout("%layout-change @1 b25d,80x24,0,0,1 b25d,80x24,0,0,1 *", false)]
    #[case::pane_changed("%window-pane-changed @1 %3", false)]
    #[case::our_session("%session-changed $1 __dtmcp_ctl", false)]
    #[case::output("%output %1 %window-add @2", false)]
    fn topology_notices(#[case] line: &str, #[case] topology: bool) {
        assert_eq!(is_topology(line), topology);
        let expected = match (topology, line.starts_with("%output")) {
            (true, _) => vec![Event::Topology],
            (false, true) => vec![],
            (false, false) => vec![Event::Change],
        };
        assert_eq!(events(line), expected);
    }

    #[test]
    fn notices_inside_a_block_are_output() {
        assert_eq!(events("%begin 1 2 1\n%window-add @1\n%end 1 2 1\n"), vec![block(true, Ok("%window-add @1\n"))]);
    }

    #[test]
    fn empty_lines_inside_a_block_are_output() {
        assert_eq!(events("%begin 1 2 1\n\nx\n\n%end 1 2 1\n"), vec![block(true, Ok("\nx\n\n"))]);
    }

    #[test]
    fn malformed_flags_are_not_ours() {
        assert_eq!(events("%begin 1 2 z\n%end 1 2 z\n"), vec![block(false, Ok(""))]);
    }
}

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
//! `%sessions-changed`, `%output`, …), skipped here, and `%exit` says the
//! client is about to leave. Inside a block every line is output, even one
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
                block(true, Ok("a\n")),
                block(true, Err("parse error: unknown command: bogus-cmd")),
                block(true, Ok("%1\x1f__dtmcp_ctl\n%0\x1freal\n%end 1796205261 999 1\n")),
                block(true, Ok("")),
                Event::Exit,
            ]
        );
    }

    #[test]
    fn notifications_between_blocks_are_skipped() {
        assert_eq!(events("%output %1 hello\n%session-changed $1 x\n%window-close @2\n"), vec![]);
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

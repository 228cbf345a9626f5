//! What a tool body gives back when it succeeds: a [`Reply`], its text and
//! the facts the text was made from (a failure is a [`crate::tools::ToolError`]).
//!
//! Tool bodies build these values; the docent's notes and the once-per-agent
//! records read the facts, never the text; and `Terminal::finish_call`
//! alone turns either into an MCP tool result.

use std::ops::RangeInclusive;

use dtmcp_core::protocol::WaitReason;
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::types::{LineNo, RegionId};

/// A tool's answer: what the model reads, and what it was made from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// The text, as the model reads it (before the notes and the leads the
    /// edge adds).
    pub text: String,
    /// The facts the text was made from.
    pub facts: Facts,
}

/// The facts behind a reply's text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The region of the command the reply reports on, when it has one.
    pub region: Option<RegionId>,
    /// How that command stands.
    pub outcome: Outcome,
    /// The output lines left out of the middle, when the reply clipped some.
    pub clipped: Option<RangeInclusive<LineNo>>,
    /// Something is told before the command's report: an earlier line of a
    /// multi-line `run`, a terminal answer cleared from the prompt, a
    /// replay's note, the answers `expect` gave, or a caller's own note in
    /// place of the headline.
    pub preface: bool,
    /// The session the call made, if it made one.
    pub created: Option<String>,
    /// The exit statuses of the command's pipeline, left to right, when
    /// its shell told them.
    pub pipeline: Vec<i32>,
    /// The lines of `session.txt` the command's output spans (first, last).
    pub lines: Option<(LineNo, LineNo)>,
    /// The last complete line of that output the text showed with every
    /// line before it, in full or clipped (not a `show` or `last_lines`
    /// selection): where a later `wait` goes on from.
    pub shown_through: Option<LineNo>,
    /// The line went into a statement still being given: a shell's or a
    /// program's continuation prompt waits for the rest of it.
    pub continues: bool,
    /// What else a tool knows as data (the sessions listed, a search's
    /// counts), carried in its structured result beside the text.
    pub details: serde_json::Map<String, serde_json::Value>,
}

/// How the command a reply reports on stands, as its headline says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Outcome {
    /// The reply reports on no command (keys sent, a listing, a screen).
    #[default]
    None,
    /// The command ended; with its exit status when its shell told it.
    Ended {
        /// The exit status, if known.
        exit: Option<i32>,
    },
    /// Back at the prompt with nothing run (an empty line, a comment, a
    /// syntax error).
    NothingRan,
    /// A program (or a shell inside) waits for input at its prompt.
    Waiting,
    /// `until` matched; the command may still run.
    Matched,
    /// The wait ran out; the command keeps running.
    Running,
    /// The wait ended otherwise (the output settled).
    Settled,
    /// A full-screen program took the screen; the reply shows its first one.
    FullScreen,
    /// The session's pane closed.
    SessionEnded,
}

impl Outcome {
    /// The word a structured result uses for it; `None` for a reply that
    /// reports on no command.
    pub fn state(self) -> Option<&'static str> {
        Some(match self {
            Outcome::None => return None,
            Outcome::Ended { .. } => "done",
            Outcome::NothingRan => "nothing_ran",
            Outcome::Waiting => "waiting_for_input",
            Outcome::Matched => "matched",
            Outcome::Running => "running",
            Outcome::Settled => "settled",
            Outcome::FullScreen => "full_screen",
            Outcome::SessionEnded => "session_ended",
        })
    }

    /// The outcome a wait that stopped for `reason` reports, `region` being
    /// the command's region (if it has one yet).
    pub fn of(reason: &WaitReason, region: Option<&Region>) -> Outcome {
        match (reason, region) {
            (WaitReason::RegionEnded(_), Some(r)) if r.kind == RegionKind::Input => Outcome::Ended { exit: None },
            (WaitReason::RegionEnded(_), Some(r)) => Outcome::Ended { exit: r.exit },
            (WaitReason::Prompt, Some(_)) => Outcome::Waiting,
            (WaitReason::Prompt, None) => Outcome::NothingRan,
            (WaitReason::Eof, _) => Outcome::SessionEnded,
            (WaitReason::Timeout, _) => Outcome::Running,
            // The line waited for was the command's last.
            (WaitReason::Matched(_), Some(r)) if r.end.is_some() && r.kind == RegionKind::Input => {
                Outcome::Ended { exit: None }
            }
            (WaitReason::Matched(_), Some(r)) if r.end.is_some() => Outcome::Ended { exit: r.exit },
            (WaitReason::Matched(_), _) => Outcome::Matched,
            _ => Outcome::Settled,
        }
    }

    /// Whether the next line of a multi-line `run` may be typed after this:
    /// the command came to an end or a prompt, rather than the wait being
    /// cut short (a timeout, `until`, a full screen, the pane gone).
    pub fn lets_next_line_go(self) -> bool {
        !matches!(self, Outcome::Running | Outcome::Matched | Outcome::FullScreen | Outcome::SessionEnded)
    }
}

impl Reply {
    /// A reply of `text` that reports on no command.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply { text: text.into(), facts: Facts::default() }
    }

    /// Puts `lead` before the text: the command's report no longer opens
    /// the reply.
    pub fn lead(mut self, lead: &str) -> Reply {
        if !lead.is_empty() {
            self.text.insert_str(0, lead);
            self.facts.preface = true;
        }
        self
    }

    /// Adds text after what the reply says so far.
    pub fn push_str(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// Adds `part` after what the reply says so far. The reply then reports
    /// on `part`'s command; anything already said is its preface, and a
    /// clipped range or a session made stays known.
    pub fn push(&mut self, part: Reply) {
        let preface = part.facts.preface || !self.text.is_empty();
        self.text.push_str(&part.text);
        let earlier = std::mem::take(&mut self.facts);
        let mut details = earlier.details;
        details.extend(part.facts.details);
        self.facts = Facts {
            clipped: part.facts.clipped.or(earlier.clipped),
            created: part.facts.created.or(earlier.created),
            preface,
            details,
            ..part.facts
        };
    }

    /// Whether the reply is the report of one command that ended with an
    /// exit status, and nothing else: its shell is back at the prompt, and
    /// the reply and the command line say all there is to note.
    pub fn finished_alone(&self) -> bool {
        matches!(self.facts.outcome, Outcome::Ended { exit: Some(_) }) && !self.facts.preface
    }
}

/// Text written into a reply (`write!`, `writeln!`) is added after what it
/// says so far, as [`Reply::push_str`] does.
impl std::fmt::Write for Reply {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

impl From<String> for Reply {
    fn from(text: String) -> Reply {
        Reply::text(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(exit: Option<i32>, region: u64) -> Reply {
        let facts = Facts { region: Some(RegionId(region)), outcome: Outcome::Ended { exit }, ..Facts::default() };
        Reply { text: "exit 0 · 3 ms · region 4\n".into(), facts }
    }

    #[test]
    fn a_finished_command_alone_is_told_from_its_facts() {
        assert!(ended(Some(0), 4).finished_alone());
        assert!(!ended(None, 4).finished_alone(), "no exit status: the session is looked at");
        assert!(!ended(Some(0), 4).lead("$ true\n").finished_alone(), "a preface");
        assert!(!Reply::text("typed 3 characters").finished_alone());
        let running = Reply { facts: Facts { outcome: Outcome::Running, ..Facts::default() }, ..ended(None, 4) };
        assert!(!running.finished_alone());
    }

    #[test]
    fn parts_pushed_after_text_are_prefaced_and_keep_what_came_before() {
        let mut first = ended(Some(0), 4);
        first.facts.clipped = Some(LineNo(17)..=LineNo(568));
        let mut whole = Reply::default();
        whole.push(first);
        assert!(whole.finished_alone(), "the first part opens the reply");
        whole.push(ended(Some(1), 5));
        assert_eq!(whole.facts.region, Some(RegionId(5)));
        assert_eq!(whole.facts.outcome, Outcome::Ended { exit: Some(1) });
        assert_eq!(whole.facts.clipped, Some(LineNo(17)..=LineNo(568)));
        assert!(whole.facts.preface && !whole.finished_alone());
        assert_eq!(Reply::text("x").lead(""), Reply::text("x"), "an empty lead changes nothing");
    }

    #[test]
    fn outcomes_follow_the_wait_and_the_region() {
        let command = Region { exit: Some(2), ..Region::default() };
        let input = Region { kind: RegionKind::Input, exit: Some(2), ..Region::default() };
        let ended = WaitReason::RegionEnded(RegionId(1));
        assert_eq!(Outcome::of(&ended, Some(&command)), Outcome::Ended { exit: Some(2) });
        assert_eq!(Outcome::of(&ended, Some(&input)), Outcome::Ended { exit: None });
        assert_eq!(Outcome::of(&WaitReason::Prompt, None), Outcome::NothingRan);
        assert_eq!(Outcome::of(&WaitReason::Prompt, Some(&command)), Outcome::Waiting);
        assert!(!Outcome::of(&WaitReason::Timeout, None).lets_next_line_go());
        assert!(!Outcome::of(&WaitReason::Matched(LineNo(3)), Some(&command)).lets_next_line_go());
        assert!(!Outcome::of(&WaitReason::Eof, None).lets_next_line_go());
        assert!(Outcome::of(&ended, Some(&command)).lets_next_line_go());
        assert!(Outcome::NothingRan.lets_next_line_go() && Outcome::Waiting.lets_next_line_go());
    }
}

//! The region core: cooker events in, region records out.
//!
//! An integrated shell marks its prompts and commands (see [`crate::marker`]
//! for the bytes). The tracker follows those markers through the cooked
//! stream and turns each command into a [`Region`]: the span of output
//! between its `C` and `D` markers, labelled with the command line typed at
//! the prompt and, once it ends, its exit status.
//!
//! Shells nest: a `bash` run in the session is a region of the outer shell,
//! and the inner shell's commands are regions inside it, one level deeper.
//! Each shell has its own pid, so a `D` closes the innermost region of the
//! shell that printed it; regions of inner shells still open above it (the
//! inner shell was killed before it could say so) end there too, with no
//! exit status.
//!
//! Only markers the [`Verifier`] believes change anything; all other OSC 133
//! sequences are output like any other. The tracker is pure: it sees no
//! file, clock or terminal, only events and the time it is handed.

mod input;

use serde::{Deserialize, Serialize};

use input::{InputEnd, OpenInput};
pub use input::{InputSpec, PROMPT_PATTERNS, SETTLE_MS, prompt_set};

use crate::marker::{self, Kind, Marker, Secret, Verifier};
use crate::types::{CookEvent, Cursor, LineNo, RegionId};

/// The most command text kept for one prompt. Lines committed while a
/// prompt waits are the command being typed, but a background job writing
/// at the prompt could add without end.
const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// A place in the cooked text: before byte `bytes` of line `line`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinePos {
    /// The line.
    pub line: LineNo,
    /// Bytes of that line before the place.
    pub bytes: u32,
}

impl LinePos {
    /// Where the cursor was.
    pub fn at(cursor: Cursor) -> LinePos {
        LinePos { line: cursor.line, bytes: cursor.text_len }
    }
}

/// What kind of region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegionKind {
    /// A command run by a shell (integrated: from markers).
    #[default]
    Command,
    /// Input to a program, ended by its next prompt.
    Input,
}

/// One command's output and what is known about it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// Its number.
    pub id: RegionId,
    /// Command or input.
    pub kind: RegionKind,
    /// The command line as typed (lines joined by `\n`).
    pub command: String,
    /// The pid of the shell that ran it.
    pub pid: u32,
    /// The host the shell runs on.
    pub host: String,
    /// The user the shell runs as.
    pub user: String,
    /// How many shells it is nested in (0: the session's own shell).
    pub depth: u32,
    /// The region of the command that started the shell it runs in.
    pub parent: Option<RegionId>,
    /// Where its output starts.
    pub start: LinePos,
    /// Where its output ends; `None` while it runs.
    pub end: Option<LinePos>,
    /// Its exit status, once finished.
    pub exit: Option<i32>,
    /// Every pipeline stage's status, once finished.
    pub pipestatus: Vec<i32>,
    /// When its output started, in ms since the epoch.
    pub started_ms: u64,
    /// When it finished, in ms since the epoch.
    pub ended_ms: Option<u64>,
}

/// A change the tracker made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegionChange {
    /// A region opened.
    Opened(Region),
    /// A region closed (or was updated).
    Closed(Region),
}

/// What the tracker knows about the shell(s) in the pane.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellState {
    /// Some trusted marker has been seen.
    pub integrated: bool,
    /// The innermost shell shows its primary prompt.
    pub at_prompt: bool,
    /// The innermost shell shows a continuation prompt.
    pub at_continuation: bool,
    /// Primary prompts seen so far (grows by one per prompt shown).
    pub prompts: u64,
    /// Regions opened so far.
    pub regions: u64,
    /// Open regions, outermost first.
    pub open: Vec<RegionId>,
    /// The innermost shell's pid, host and user.
    pub pid: u32,
    /// The innermost shell's host.
    pub host: String,
    /// The innermost shell's user.
    pub user: String,
    /// The input region still open, if any (lines typed into a program).
    pub input: Option<RegionId>,
    /// A full-screen program holds the screen.
    pub full_screen: bool,
    /// Full-screen programs started so far.
    pub screens: u64,
    /// The questions to the terminal the output asked lately, whose
    /// answers may be left at the prompt.
    #[serde(default)]
    pub answers: crate::answers::Answers,
}

/// Follows the markers of a pane's shells and keeps its regions.
pub struct RegionTracker {
    /// Decides which markers to believe; without a secret, none are.
    verifier: Option<Verifier>,
    /// What is known about the shells; published after every chunk.
    state: ShellState,
    /// The id the next region gets.
    next_id: RegionId,
    /// The open regions, outermost first; their ids are `state.open`.
    open: Vec<Region>,
    /// The prompt shown and the command being typed at it.
    typing: Typing,
    /// The input region open, until its program's prompt comes back.
    input: Option<OpenInput>,
    /// An input region a checkpoint held open: its rules died with the
    /// logger that opened it, so [`RegionTracker::close_orphans`] ends it.
    orphan_input: Option<Region>,
}

impl RegionTracker {
    /// A tracker trusting markers proven with `secret`; regions get ids
    /// from `next_id` on.
    pub fn new(secret: Option<Secret>, next_id: RegionId) -> Self {
        RegionTracker {
            verifier: secret.map(Verifier::new),
            state: ShellState { regions: next_id.0.saturating_sub(1), ..ShellState::default() },
            next_id,
            open: Vec::new(),
            typing: Typing::default(),
            input: None,
            orphan_input: None,
        }
    }

    /// Takes the next cooker event, taken at `now_ms`.
    pub fn on_event(&mut self, ev: &CookEvent, now_ms: u64, out: &mut Vec<RegionChange>) {
        match ev {
            CookEvent::Line { line, text } => self.typing.on_line(*line, text),
            CookEvent::Osc133 { params, at } => {
                if let Some(marker) = self.believe(params) {
                    self.on_marker(&marker, *at, now_ms, out);
                }
            }
            // A full-screen program's placeholder is output like any other;
            // only the fact that one runs is kept.
            CookEvent::Screen { on, .. } => {
                self.state.screens += u64::from(*on && !self.state.full_screen);
                self.state.full_screen = *on;
            }
            CookEvent::Query { queries, .. } => self.state.answers.asked(*queries, self.state.prompts),
        }
    }

    /// What is known now.
    pub fn shell(&self) -> &ShellState {
        &self.state
    }

    /// What has been typed at the innermost shell's prompt and not yet
    /// submitted: the text after the prompt's end on each line since it
    /// (a continuation prompt's lines too), `line`/`current` being the
    /// unfinished line. Empty when no prompt is shown or nothing is typed.
    pub fn typed(&self, line: LineNo, current: &str) -> String {
        let typing = &self.typing;
        let Some(first) = typing.starts.first() else { return String::new() };
        if !(self.state.at_prompt || self.state.at_continuation) || line < first.line {
            return String::new();
        }
        let tail = |l: LineNo, text: &'_ str| -> String {
            let start = typing.starts.iter().rev().find(|p| p.line == l);
            tail_from(text, start.map_or(0, |p| p.bytes)).to_string()
        };
        let mut parts: Vec<String> =
            typing.lines.iter().filter(|(l, _)| *l >= first.line && *l < line).map(|(l, t)| tail(*l, t)).collect();
        parts.push(tail(line, current));
        let text = parts.join("\n");
        match text.trim().is_empty() {
            true => String::new(),
            false => text.trim_end().to_string(),
        }
    }

    /// The markers' sequence floors per shell pid (see
    /// [`Verifier::floors`]); `None` without a secret.
    pub fn seq_floors(&self) -> Option<&std::collections::HashMap<u32, u64>> {
        self.verifier.as_ref().map(Verifier::floors)
    }

    /// Restores floors saved by an earlier logger of this session.
    pub fn raise_seq_floors(&mut self, floors: &std::collections::HashMap<u32, u64>) {
        if let Some(v) = self.verifier.as_mut() {
            v.raise_floors(floors);
        }
    }

    /// The regions still open, outermost first.
    pub fn open_regions(&self) -> &[Region] {
        &self.open
    }

    /// Opens an input region for a line about to be typed at the unfinished
    /// line `prompt`, the cursor at `at`; an input region still open ends
    /// first. Refuses a `prompt_pattern` that is not a valid regex.
    pub fn open_input(
        &mut self,
        spec: &InputSpec,
        (prompt, at): (&str, Cursor),
        now: u64,
        out: &mut Vec<RegionChange>,
    ) -> Result<Region, String> {
        let region = Region {
            id: self.next_id,
            kind: RegionKind::Input,
            command: spec.label.clone(),
            pid: spec.pid,
            host: self.state.host.clone(),
            user: self.state.user.clone(),
            depth: u32::try_from(self.open.len()).unwrap_or(u32::MAX),
            parent: self.open.last().map(|r| r.id),
            start: LinePos { line: at.line.next(), bytes: 0 },
            started_ms: now,
            ..Region::default()
        };
        let open = OpenInput::new(region.clone(), spec, prompt, at, now)?;
        self.end_input(InputEnd::Here(LinePos::at(at)), now, out);
        self.next_id = RegionId(self.next_id.0 + 1);
        self.state.regions += 1;
        self.state.input = Some(region.id);
        out.push(RegionChange::Opened(region.clone()));
        self.input = Some(open);
        Ok(region)
    }

    /// After a chunk of output, with the unfinished line `current` and the
    /// cursor at `at`: ends the input region at its program's prompt.
    pub fn after_output(&mut self, current: &str, at: Cursor, now: u64, out: &mut Vec<RegionChange>) {
        if let Some(end) = self.input.as_mut().and_then(|i| i.after_output(current, at, now)) {
            self.end_input(end, now, out);
        }
    }

    /// Time passed with the cursor at `at`: ends an input region whose
    /// output settled or whose timeout ran out.
    pub fn tick(&mut self, at: Cursor, now: u64, out: &mut Vec<RegionChange>) {
        if let Some(end) = self.input.as_ref().and_then(|i| i.on_tick(at, now)) {
            self.end_input(end, now, out);
        }
    }

    /// When [`RegionTracker::tick`] has something to do, in ms since the
    /// epoch; `None` while no input region is open.
    pub fn next_tick_ms(&self) -> Option<u64> {
        self.input.as_ref().map(OpenInput::due_ms)
    }

    fn end_input(&mut self, end: InputEnd, now: u64, out: &mut Vec<RegionChange>) {
        let Some(open) = self.input.take() else { return };
        let mut region = open.region;
        let (InputEnd::Prompt(at) | InputEnd::Here(at)) = end;
        // Never before its start: a prompt on the typed line's successor
        // ends an input that printed nothing.
        region.end = Some(if at.line < region.start.line { region.start } else { at });
        region.ended_ms = Some(now);
        self.state.input = None;
        out.push(RegionChange::Closed(region));
    }

    /// The marker in `params`, if it is one and the verifier believes it.
    fn believe(&mut self, params: &[u8]) -> Option<Marker> {
        let verifier = self.verifier.as_mut()?;
        let marker = marker::parse(params)?;
        verifier.accept(&marker).then_some(marker)
    }

    fn on_marker(&mut self, m: &Marker, at: Cursor, now_ms: u64, out: &mut Vec<RegionChange>) {
        self.state.integrated = true;
        // A shell speaking again means the program taking input is gone
        // (or was a shell command all along).
        if matches!(m.kind, Kind::Prompt | Kind::CommandStart | Kind::CommandEnd) {
            self.end_input(InputEnd::Prompt(LinePos { line: at.line, bytes: 0 }), now_ms, out);
        }
        match m.kind {
            Kind::Prompt => self.on_prompt(m, at, now_ms, out),
            Kind::Continuation => self.on_continuation(m),
            Kind::PromptEnd => self.on_prompt_end(m, at),
            Kind::CommandStart => self.on_command_start(m, at, now_ms, out),
            Kind::CommandEnd => self.on_command_end(m, at, now_ms, out),
        }
    }

    /// A primary prompt: that shell is now the innermost one. If it still
    /// had a command open, that command is over even though no `D` came
    /// (an `exec bash`, say), so it ends here with no status.
    fn on_prompt(&mut self, m: &Marker, at: Cursor, now_ms: u64, out: &mut Vec<RegionChange>) {
        if let Some(idx) = self.open.iter().position(|r| r.pid == m.pid) {
            self.close_from(idx, at, now_ms, out);
        }
        self.state.pid = m.pid;
        self.state.host.clone_from(&m.host);
        self.state.user.clone_from(&m.user);
        self.state.at_prompt = false;
        self.state.at_continuation = false;
        self.typing = Typing::shown(Kind::Prompt, m.pid);
    }

    fn on_continuation(&mut self, m: &Marker) {
        self.state.at_prompt = false;
        self.state.at_continuation = false;
        self.typing.shown = Some((Kind::Continuation, m.pid));
    }

    /// The end of a prompt: typing starts here. Only counts after the
    /// same shell's prompt start.
    fn on_prompt_end(&mut self, m: &Marker, at: Cursor) {
        let Some((shown, pid)) = self.typing.shown.take() else {
            return;
        };
        if pid != m.pid {
            return;
        }
        if shown == Kind::Prompt {
            self.state.at_prompt = true;
            self.state.prompts += 1;
            self.typing.starts = vec![LinePos::at(at)];
        } else if !self.typing.starts.is_empty() {
            self.state.at_continuation = true;
            self.typing.starts.push(LinePos::at(at));
        }
    }

    /// The command's output starts: a new region, inside every open one.
    ///
    /// A shell starts a command only from its prompt: a command of its
    /// still open ended unseen (its end and prompt markers fell into a log
    /// gap), and ends here with no exit status.
    fn on_command_start(&mut self, m: &Marker, at: Cursor, now: u64, out: &mut Vec<RegionChange>) {
        if let Some(idx) = self.open.iter().position(|r| r.pid == m.pid) {
            self.close_from(idx, at, now, out);
        }
        let same_shell = self.state.pid == m.pid;
        let region = Region {
            id: self.next_id,
            kind: RegionKind::Command,
            command: self.typing.take_command(at.line),
            pid: m.pid,
            host: if same_shell { self.state.host.clone() } else { String::new() },
            user: if same_shell { self.state.user.clone() } else { String::new() },
            depth: u32::try_from(self.open.len()).unwrap_or(u32::MAX),
            parent: self.open.last().map(|r| r.id),
            start: LinePos::at(at),
            started_ms: now,
            ..Region::default()
        };
        self.next_id = RegionId(self.next_id.0 + 1);
        self.state.regions += 1;
        self.state.pid = m.pid;
        self.state.at_prompt = false;
        self.state.at_continuation = false;
        self.state.open.push(region.id);
        out.push(RegionChange::Opened(region.clone()));
        self.open.push(region);
    }

    /// The command finished: its shell's innermost region closes, after
    /// any regions of inner shells still open above it.
    fn on_command_end(&mut self, m: &Marker, at: Cursor, now: u64, out: &mut Vec<RegionChange>) {
        let Some(idx) = self.open.iter().rposition(|r| r.pid == m.pid) else {
            return;
        };
        self.close_from(idx + 1, at, now, out);
        if let Some(mut region) = self.open.pop() {
            region.exit = m.exit;
            region.pipestatus.clone_from(&m.pipestatus);
            self.close(region, at, now, out);
        }
    }

    /// Closes the open regions from `idx` up, innermost first, with no
    /// exit status.
    fn close_from(&mut self, idx: usize, at: Cursor, now: u64, out: &mut Vec<RegionChange>) {
        while self.open.len() > idx {
            if let Some(region) = self.open.pop() {
                self.close(region, at, now, out);
            }
        }
    }

    /// Ends a region popped off the open stack; the shell that ran it is
    /// the innermost one again.
    fn close(&mut self, mut region: Region, at: Cursor, now: u64, out: &mut Vec<RegionChange>) {
        region.end = Some(LinePos::at(at));
        region.ended_ms = Some(now);
        self.state.open.pop();
        self.state.pid = region.pid;
        self.state.host.clone_from(&region.host);
        self.state.user.clone_from(&region.user);
        self.state.at_prompt = false;
        self.state.at_continuation = false;
        out.push(RegionChange::Closed(region));
    }
}

/// The innermost shell's prompt, and the command being typed at it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Typing {
    /// The prompt started last (primary or continuation) and the pid of
    /// its shell, until the end of that prompt arrives.
    shown: Option<(Kind, u32)>,
    /// Where typing starts on each prompt line, the primary prompt's first;
    /// empty when no command is being typed.
    starts: Vec<LinePos>,
    /// Lines committed since the primary prompt ended.
    lines: Vec<(LineNo, String)>,
    /// Bytes held in `lines`.
    bytes: usize,
}

impl Typing {
    /// A prompt just started; nothing typed yet.
    fn shown(kind: Kind, pid: u32) -> Typing {
        Typing { shown: Some((kind, pid)), ..Typing::default() }
    }

    fn on_line(&mut self, line: LineNo, text: &str) {
        if self.starts.is_empty() || self.bytes + text.len() > MAX_COMMAND_BYTES {
            return;
        }
        self.bytes += text.len();
        self.lines.push((line, text.to_string()));
    }

    /// The command typed on the lines before `end`: each line from where
    /// its prompt ended (or whole, if no prompt ended on it), joined by
    /// newlines. Starts over for the next prompt.
    fn take_command(&mut self, end: LineNo) -> String {
        let typing = std::mem::take(self);
        let Some(first) = typing.starts.first() else {
            return String::new();
        };
        let lines = typing.lines.iter().filter(|(line, _)| *line >= first.line && *line < end);
        let parts: Vec<&str> = lines
            .map(|(line, text)| {
                let start = typing.starts.iter().rev().find(|p| p.line == *line);
                tail_from(text, start.map_or(0, |p| p.bytes))
            })
            .collect();
        parts.join("\n")
    }
}

/// `text` from byte `start` on. Committed lines have their trailing blanks
/// trimmed, so `start` may lie beyond the end; one inside a character
/// moves past it.
fn tail_from(text: &str, start: u32) -> &str {
    let mut start = usize::try_from(start).unwrap_or(usize::MAX).min(text.len());
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

// Checkpoints: what a restarted logger needs to carry on tracking (see
// `logger::checkpoint`). Kept apart from the tracking itself.

/// Everything a [`RegionTracker`] holds but its secret, as a logger
/// checkpoint stores it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackerSnapshot {
    /// What was known about the shells.
    pub state: ShellState,
    /// The id the next region gets.
    pub next_id: RegionId,
    /// The open regions, outermost first.
    pub open: Vec<Region>,
    /// The prompt shown and the command being typed at it.
    typing: Typing,
    /// The last marker sequence number believed per shell pid.
    pub floors: std::collections::HashMap<u32, u64>,
    /// The input region open then, if one was.
    #[serde(default)]
    pub input: Option<Region>,
}

impl RegionTracker {
    /// The tracker's state, for a checkpoint.
    pub fn snapshot(&self) -> TrackerSnapshot {
        TrackerSnapshot {
            state: self.state.clone(),
            next_id: self.next_id,
            open: self.open.clone(),
            typing: self.typing.clone(),
            floors: self.seq_floors().cloned().unwrap_or_default(),
            input: self.input.as_ref().map(|i| i.region.clone()),
        }
    }

    /// A tracker that carries on from `snap`, trusting markers proven with
    /// `secret`.
    pub fn restore(secret: Option<Secret>, snap: TrackerSnapshot) -> Self {
        let mut tracker = RegionTracker::new(secret, snap.next_id);
        tracker.raise_seq_floors(&snap.floors);
        tracker.state = snap.state;
        tracker.open = snap.open;
        tracker.typing = snap.typing;
        tracker.orphan_input = snap.input;
        tracker
    }

    /// Closes, with no exit status, every open region from the outermost
    /// one whose shell `alive` says is gone: nothing will ever end them.
    pub fn close_orphans(
        &mut self,
        alive: impl Fn(&Region) -> bool,
        at: Cursor,
        now: u64,
        out: &mut Vec<RegionChange>,
    ) {
        if let Some(mut region) = self.orphan_input.take() {
            let end = LinePos::at(at);
            region.end = Some(if end.line < region.start.line { region.start } else { end });
            region.ended_ms = Some(now);
            self.state.input = None;
            out.push(RegionChange::Closed(region));
        }
        if let Some(idx) = self.open.iter().position(|r| !alive(r)) {
            self.close_from(idx, at, now, out);
        }
    }

    /// After a log gap: the outermost open command whose shell
    /// `at_prompt` says shows its prompt again ended unseen (its end and
    /// the next prompt fell into the gap). It ends here, with no exit
    /// status, with every region inside it; that shell's prompt counts as
    /// shown, typing starting at `at`. Returns whether one ended.
    pub fn close_ended_unseen(
        &mut self,
        at_prompt: impl Fn(&Region) -> bool,
        at: Cursor,
        now: u64,
        out: &mut Vec<RegionChange>,
    ) -> bool {
        let Some(idx) = self.open.iter().position(|r| r.kind == RegionKind::Command && at_prompt(r)) else {
            return false;
        };
        self.end_input(InputEnd::Prompt(LinePos { line: at.line, bytes: 0 }), now, out);
        self.close_from(idx, at, now, out);
        self.state.at_prompt = true;
        self.state.prompts += 1;
        self.typing = Typing { starts: vec![LinePos::at(at)], ..Typing::default() };
        true
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;

    use rstest::rstest;

    use super::*;
    use crate::cook::Cooker;

    const SECRET: Secret = Secret { keys: [1_234_567_891, 987_654_321, 2_147_483_646, 7] };

    /// A shell printing markers as the integration does, proven with
    /// `secret`; each call returns the bytes it would print.
    #[derive(Clone)]
    struct Sh {
        secret: Secret,
        pid: u32,
        seq: u64,
    }

    impl Sh {
        fn new(pid: u32) -> Sh {
            Sh { secret: SECRET, pid, seq: 1_000_000 }
        }

        fn mark(&mut self, kind: Kind, head: &str, tail: &str) -> String {
            self.seq += 1;
            let (pid, seq) = (self.pid, self.seq);
            let proof = self.secret.proof(kind, pid, seq);
            format!("\x1b]133;{head};dtmcp={pid}.{seq}.{proof}{tail}\x07")
        }

        /// The primary prompt `u@h$ `, ready for typing.
        fn prompt(&mut self) -> String {
            let a = self.mark(Kind::Prompt, "A", ";host=h;user=u");
            a + "u@h$ " + &self.mark(Kind::PromptEnd, "B", "")
        }

        /// Enter on an unfinished command, and the continuation prompt.
        fn more(&mut self) -> String {
            let a = self.mark(Kind::Continuation, "A;k=s", "");
            "\r\n".to_string() + &a + "> " + &self.mark(Kind::PromptEnd, "B", "")
        }

        /// Enter on a complete command: its output starts.
        fn enter(&mut self) -> String {
            "\r\n".to_string() + &self.mark(Kind::CommandStart, "C", "")
        }

        fn done(&mut self, exit: i32, ps: &str) -> String {
            self.mark(Kind::CommandEnd, &format!("D;{exit}"), &format!(";ps={ps}"))
        }

        /// A whole prompt cycle: typed at the prompt, run, finished.
        fn cmd(&mut self, typed: &str, output: &str, exit: i32, ps: &str) -> String {
            self.prompt() + typed + &self.enter() + output + &self.done(exit, ps)
        }
    }

    /// Feeds `bytes` through a real cooker into a tracker, `piece` bytes at
    /// a time; returns the changes and the tracker.
    fn track_in(secret: Option<Secret>, bytes: &[u8], piece: usize) -> (Vec<RegionChange>, RegionTracker) {
        let mut cooker = Cooker::new(LineNo::FIRST);
        let mut tracker = RegionTracker::new(secret, RegionId(1));
        let (mut events, mut changes) = (Vec::new(), Vec::new());
        for (n, chunk) in bytes.chunks(piece).enumerate() {
            events.clear();
            cooker.feed(chunk, &mut events);
            for ev in &events {
                tracker.on_event(ev, n as u64, &mut changes);
            }
        }
        (changes, tracker)
    }

    /// One line per region (its final form), then one for the shell state;
    /// chunking must not change any of it.
    fn track(secret: Option<Secret>, bytes: &[u8]) -> Vec<String> {
        let (changes, tracker) = track_in(secret.clone(), bytes, bytes.len().max(1));
        let (by_byte, by_byte_tracker) = track_in(secret, bytes, 1);
        // Times differ with chunking (each chunk is a tick); nothing else may.
        let brief = |c: &[RegionChange]| c.iter().map(|c| summary(region_of(c))).collect::<Vec<_>>();
        assert_eq!(brief(&changes), brief(&by_byte), "chunking changed the regions");
        assert_eq!(tracker.shell(), by_byte_tracker.shell());
        let mut last = BTreeMap::new();
        for change in changes {
            let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
            last.insert(r.id, r);
        }
        let mut lines: Vec<String> = last.values().map(summary).collect();
        let s = tracker.shell();
        let mut state = format!("prompts {} regions {} open {:?} pid {}", s.prompts, s.regions, s.open, s.pid);
        if s.at_prompt {
            state += " at prompt";
        }
        if !s.integrated {
            state += " plain";
        }
        lines.push(state);
        lines
    }

    fn region_of(change: &RegionChange) -> &Region {
        let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
        r
    }

    fn summary(r: &Region) -> String {
        let pos = |p: LinePos| format!("{}:{}", p.line, p.bytes);
        let mut s = format!("{} d{} {:?} {}-", r.id, r.depth, r.command, pos(r.start));
        if let Some(end) = r.end {
            s += &pos(end);
        }
        if let Some(parent) = r.parent {
            let _ = write!(s, " in {parent}");
        }
        match r.exit {
            Some(exit) => {
                let _ = write!(s, " exit {exit} {:?}", r.pipestatus);
            }
            None if r.end.is_some() => s += " no exit",
            None => s += " running",
        }
        s
    }

    /// What the tracker says is typed at the prompt after `bytes`.
    fn typed_after(bytes: &str) -> String {
        let mut cooker = Cooker::new(LineNo::FIRST);
        let mut tracker = RegionTracker::new(Some(SECRET), RegionId(1));
        let (mut events, mut changes) = (Vec::new(), Vec::new());
        cooker.feed(bytes.as_bytes(), &mut events);
        for ev in &events {
            tracker.on_event(ev, 0, &mut changes);
        }
        tracker.typed(cooker.cursor().line, &cooker.current_text())
    }

    #[test]
    fn text_typed_at_the_prompt_is_known_until_submitted() {
        let mut sh = Sh::new(100);
        assert_eq!(typed_after(&sh.prompt()), "");
        assert_eq!(typed_after(&(sh.prompt() + "echo half")), "echo half");
        assert_eq!(typed_after(&(sh.prompt() + "for i in 1; do" + &sh.more() + "echo $i")), "for i in 1; do\necho $i");
        let ran = sh.prompt() + "ls" + &sh.enter() + "a b\r\n";
        assert_eq!(typed_after(&ran), "");
        assert_eq!(typed_after(&(sh.cmd("true", "", 0, "0") + &sh.prompt() + "  ")), "");
    }

    fn simple() -> String {
        let mut sh = Sh::new(100);
        sh.cmd("echo hi", "hi\r\n", 0, "0") + &sh.prompt()
    }

    fn empty_line() -> String {
        let mut sh = Sh::new(100);
        sh.prompt() + "\r\n" + &sh.prompt()
    }

    fn failing() -> String {
        let mut sh = Sh::new(100);
        sh.cmd("false", "", 1, "1") + &sh.cmd("true | false", "", 1, "0,1") + &sh.prompt()
    }

    fn no_newline() -> String {
        let mut sh = Sh::new(100);
        sh.cmd("printf x", "x", 0, "0") + &sh.prompt()
    }

    fn continued() -> String {
        let mut sh = Sh::new(100);
        let typed = sh.prompt() + "cat <<EOF" + &sh.more() + "x" + &sh.more() + "EOF";
        typed + &sh.enter() + "x\r\n" + &sh.done(0, "0") + &sh.prompt()
    }

    fn nested() -> String {
        let (mut outer, mut inner) = (Sh::new(100), Sh::new(200));
        let start = outer.prompt() + "bash" + &outer.enter();
        let inside = inner.cmd("echo in", "in\r\n", 0, "0") + &inner.prompt() + "exit" + &inner.enter();
        start + &inside + "exit\r\n" + &outer.done(0, "0") + &outer.prompt()
    }

    fn inner_killed() -> String {
        let (mut outer, mut inner) = (Sh::new(100), Sh::new(200));
        let start = outer.prompt() + "bash" + &outer.enter();
        let inside = inner.prompt() + "sleep 9" + &inner.enter() + "Killed\r\n";
        start + &inside + &outer.done(137, "137") + &outer.prompt()
    }

    fn exec_replaced() -> String {
        let mut sh = Sh::new(100);
        let start = sh.prompt() + "exec bash" + &sh.enter();
        let mut after = Sh::new(100);
        after.seq = sh.seq + 5_000;
        start + &after.prompt()
    }

    /// A command whose end and next prompt were never logged (they fell
    /// into a log gap), then another command of the same shell.
    fn end_lost_in_a_gap() -> String {
        let mut sh = Sh::new(100);
        let start = sh.prompt() + "sleep 1" + &sh.enter();
        let _lost = sh.done(0, "0") + &sh.prompt();
        start + "echo x" + &sh.enter() + "x\r\n" + &sh.done(0, "0") + &sh.prompt()
    }

    /// A command whose output carries forged markers, made by `forge`
    /// from the shell and the log so far.
    fn forged(forge: fn(&Sh, &str) -> String) -> String {
        let mut sh = Sh::new(100);
        let log = sh.cmd("echo hi", "hi\r\n", 0, "0");
        let output = forge(&sh, &log) + "\r\n";
        log + &sh.cmd("cat raw.log", &output, 0, "0") + &sh.prompt()
    }

    fn wrong_proofs(_: &Sh, _: &str) -> String {
        "\x1b]133;D;0;dtmcp=100.9999999.12345\x07\x1b]133;C;dtmcp=100.10000000.1\x07".to_string()
    }

    fn replay(_: &Sh, log: &str) -> String {
        log.to_string()
    }

    fn older_seqs(sh: &Sh, _: &str) -> String {
        let mut older = sh.clone();
        older.seq -= 100;
        older.cmd("old", "", 0, "0")
    }

    fn other_secret(sh: &Sh, _: &str) -> String {
        let mut other = sh.clone();
        other.secret = Secret { keys: [9, 8, 7, 6] };
        other.seq += 100;
        other.cmd("foreign", "", 0, "0")
    }

    #[rstest]
    #[case::spoofed_proof(wrong_proofs, "4:0-5:0")]
    #[case::replayed_log(replay, "4:0-7:0")]
    #[case::older_seq(older_seqs, "4:0-6:0")]
    #[case::other_secret(other_secret, "4:0-6:0")]
    fn forged_markers_are_output(#[case] forge: fn(&Sh, &str) -> String, #[case] span: &str) {
        let want = [
            r#"1 d0 "echo hi" 2:0-3:0 exit 0 [0]"#.to_string(),
            format!(r#"2 d0 "cat raw.log" {span} exit 0 [0]"#),
            "prompts 3 regions 2 open [] pid 100 at prompt".to_string(),
        ];
        assert_eq!(track(Some(SECRET), forged(forge).as_bytes()), want);
    }

    #[rstest]
    #[case::simple_command(simple(), &[r#"1 d0 "echo hi" 2:0-3:0 exit 0 [0]"#, "prompts 2 regions 1 open [] pid 100 at prompt"])]
    #[case::empty_line(empty_line(), &["prompts 2 regions 0 open [] pid 100 at prompt"])]
    #[case::failing_and_pipeline(failing(), &[
        r#"1 d0 "false" 2:0-2:0 exit 1 [1]"#,
        r#"2 d0 "true | false" 3:0-3:0 exit 1 [0, 1]"#,
        "prompts 3 regions 2 open [] pid 100 at prompt",
    ])]
    #[case::output_without_newline(no_newline(), &[r#"1 d0 "printf x" 2:0-2:1 exit 0 [0]"#, "prompts 2 regions 1 open [] pid 100 at prompt"])]
    #[case::continuation_prompts(continued(), &[r#"1 d0 "cat <<EOF\nx\nEOF" 4:0-5:0 exit 0 [0]"#, "prompts 2 regions 1 open [] pid 100 at prompt"])]
    #[case::nested_bash(nested(), &[
        r#"1 d0 "bash" 2:0-6:0 exit 0 [0]"#,
        r#"2 d1 "echo in" 3:0-4:0 in 1 exit 0 [0]"#,
        r#"3 d1 "exit" 5:0-6:0 in 1 no exit"#,
        "prompts 4 regions 3 open [] pid 100 at prompt",
    ])]
    #[case::inner_shell_killed(inner_killed(), &[
        r#"1 d0 "bash" 2:0-4:0 exit 137 [137]"#,
        r#"2 d1 "sleep 9" 3:0-4:0 in 1 no exit"#,
        "prompts 3 regions 2 open [] pid 100 at prompt",
    ])]
    #[case::exec_without_end(exec_replaced(), &[r#"1 d0 "exec bash" 2:0-2:0 no exit"#, "prompts 2 regions 1 open [] pid 100 at prompt"])]
    #[case::end_lost_in_a_gap(end_lost_in_a_gap(), &[
        r#"1 d0 "sleep 1" 2:0-3:0 no exit"#,
        r#"2 d0 "" 3:0-4:0 exit 0 [0]"#,
        "prompts 2 regions 2 open [] pid 100 at prompt",
    ])]
    fn regions_from_markers(#[case] bytes: String, #[case] want: &[&str]) {
        assert_eq!(track(Some(SECRET), bytes.as_bytes()), want);
    }

    /// A logger started again after a gap finds the shell of the open
    /// command at its prompt: the command ends there, the prompt counts,
    /// and the next command typed is known by its text.
    #[test]
    fn a_command_ended_unseen_closes_at_the_prompt_found_after_a_gap() {
        let (mut outer, mut inner) = (Sh::new(100), Sh::new(200));
        let before = outer.prompt() + "bash" + &outer.enter() + &inner.prompt() + "sleep 9" + &inner.enter();
        let (mut changes, mut tracker) = track_in(Some(SECRET), before.as_bytes(), 7);
        assert_eq!(tracker.shell().open.len(), 2);
        let at = Cursor { line: LineNo(4), col: 0, text_len: 0 };
        // Not the outer shell (its `bash` still runs): the inner one.
        let ended = tracker.close_ended_unseen(|r| r.pid == 200, at, 5, &mut changes);
        assert!(ended);
        let shell = tracker.shell();
        assert_eq!((shell.open.len(), shell.at_prompt, shell.prompts, shell.pid), (1, true, 3, 200));
        let closed = changes.iter().rev().map(region_of).find(|r| r.pid == 200).expect("closed");
        assert_eq!((closed.end, closed.exit), (Some(LinePos { line: LineNo(4), bytes: 0 }), None));
        let mut cooker = Cooker::new(LineNo(4));
        let mut events = Vec::new();
        cooker.feed((String::from("echo y") + &inner.enter()).as_bytes(), &mut events);
        for ev in &events {
            tracker.on_event(ev, 6, &mut changes);
        }
        let opened = changes.iter().map(region_of).next_back().expect("opened");
        assert_eq!((opened.command.as_str(), opened.end), ("echo y", None));
        // Nothing at a prompt: nothing ends.
        assert!(!tracker.close_ended_unseen(|_| false, at, 7, &mut changes));
    }

    #[rstest]
    #[case::another_sessions_secret(Some(Secret { keys: [9, 8, 7, 6] }))]
    #[case::no_secret_configured(None)]
    fn untrusted_markers_change_nothing(#[case] secret: Option<Secret>) {
        assert_eq!(track(secret, simple().as_bytes()), ["prompts 0 regions 0 open [] pid 0 plain"]);
    }

    #[test]
    fn ids_continue_from_next_id() {
        let mut tracker = RegionTracker::new(Some(SECRET), RegionId(41));
        assert_eq!(tracker.shell().regions, 40);
        let (mut events, mut changes) = (Vec::new(), Vec::new());
        Cooker::new(LineNo(7)).feed(simple().as_bytes(), &mut events);
        for ev in &events {
            tracker.on_event(ev, 5, &mut changes);
        }
        let ids: Vec<RegionId> = changes.iter().map(|c| region_of(c).id).collect();
        assert_eq!(ids, [RegionId(41), RegionId(41)]);
        assert_eq!(tracker.shell().regions, 41);
    }

    /// Feeds `bytes` whole, then lets the tracker see the unfinished line
    /// as the pump does after each chunk.
    fn feed(cooker: &mut Cooker, tracker: &mut RegionTracker, bytes: &str, now: u64) -> Vec<RegionChange> {
        let (mut events, mut changes) = (Vec::new(), Vec::new());
        cooker.feed(bytes.as_bytes(), &mut events);
        for ev in &events {
            tracker.on_event(ev, now, &mut changes);
        }
        tracker.after_output(&cooker.current_text(), cooker.cursor(), now, &mut changes);
        changes
    }

    fn input(label: &str) -> InputSpec {
        InputSpec { label: label.into(), pid: 42, prompt_pattern: None, timeout_ms: 60_000 }
    }

    #[test]
    fn a_line_typed_into_gdb_is_an_input_region_ending_at_its_prompt() {
        let (mut cooker, mut tracker) = (Cooker::new(LineNo::FIRST), RegionTracker::new(None, RegionId(1)));
        feed(&mut cooker, &mut tracker, "Reading symbols from bug...\r\n(gdb) ", 1);
        let mut changes = Vec::new();
        let at = (cooker.current_text(), cooker.cursor());
        let opened = tracker.open_input(&input("(gdb) bt"), (&at.0, at.1), 2, &mut changes).expect("opens");
        assert_eq!((opened.kind, opened.start.line), (RegionKind::Input, LineNo(3)));
        assert_eq!(tracker.shell().input, Some(opened.id));
        assert!(feed(&mut cooker, &mut tracker, "bt\r\n#0  main () at bug.c:5\r\n", 3).is_empty());
        let changes = feed(&mut cooker, &mut tracker, "(gdb) ", 4);
        let closed: Vec<String> = changes.iter().map(|c| summary(region_of(c))).collect();
        assert_eq!(closed, [r#"1 d0 "(gdb) bt" 3:0-4:0 no exit"#]);
        assert_eq!((tracker.shell().input, tracker.next_tick_ms()), (None, None));
    }

    #[test]
    fn an_input_region_open_at_a_checkpoint_ends_when_the_next_logger_starts() {
        let (mut cooker, mut tracker) = (Cooker::new(LineNo::FIRST), RegionTracker::new(None, RegionId(1)));
        feed(&mut cooker, &mut tracker, "(gdb) ", 1);
        let at = (cooker.current_text(), cooker.cursor());
        let opened = tracker.open_input(&input("(gdb) run"), (&at.0, at.1), 2, &mut Vec::new()).expect("opens");
        feed(&mut cooker, &mut tracker, "run\r\nStarting program\r\n", 3);
        let snap: TrackerSnapshot =
            serde_json::from_str(&serde_json::to_string(&tracker.snapshot()).expect("json")).expect("read back");
        let mut next = RegionTracker::restore(None, snap);
        let mut changes = Vec::new();
        next.close_orphans(|_| true, cooker.cursor(), 9, &mut changes);
        let closed: Vec<&Region> = changes.iter().map(region_of).collect();
        assert_eq!(closed.len(), 1, "{changes:?}");
        assert_eq!((closed[0].id, closed[0].ended_ms, closed[0].exit), (opened.id, Some(9), None));
        assert_eq!((next.shell().input, next.next_tick_ms()), (None, None));
    }

    #[test]
    fn an_input_region_nests_in_the_command_and_ends_with_it() {
        let mut sh = Sh::new(100);
        let (mut cooker, mut tracker) = (Cooker::new(LineNo::FIRST), RegionTracker::new(Some(SECRET), RegionId(1)));
        let start = sh.prompt() + "python3" + &sh.enter() + ">>> ";
        feed(&mut cooker, &mut tracker, &start, 1);
        let mut changes = Vec::new();
        let at = (cooker.current_text(), cooker.cursor());
        tracker.open_input(&input(">>> exit()"), (&at.0, at.1), 2, &mut changes).expect("opens");
        let changes = feed(&mut cooker, &mut tracker, &("exit()\r\n".to_string() + &sh.done(0, "0")), 3);
        let got: Vec<String> = changes.iter().map(|c| summary(region_of(c))).collect();
        assert_eq!(got, [r#"2 d1 ">>> exit()" 3:0-3:0 in 1 no exit"#, r#"1 d0 "python3" 2:0-3:0 exit 0 [0]"#]);
    }

    #[test]
    fn a_program_without_a_known_prompt_settles_and_a_new_input_ends_the_last() {
        let (mut cooker, mut tracker) = (Cooker::new(LineNo::FIRST), RegionTracker::new(None, RegionId(1)));
        let mut changes = Vec::new();
        let at = (cooker.current_text(), cooker.cursor());
        tracker.open_input(&input("hello"), (&at.0, at.1), 1_000, &mut changes).expect("opens");
        feed(&mut cooker, &mut tracker, "hello\r\nhello\r\n", 1_010);
        assert_eq!(tracker.next_tick_ms(), Some(1_010 + SETTLE_MS));
        tracker.tick(cooker.cursor(), 1_100, &mut changes);
        assert_eq!(tracker.shell().input, Some(RegionId(1)));
        let at = (cooker.current_text(), cooker.cursor());
        changes.clear();
        tracker.open_input(&input("again"), (&at.0, at.1), 1_200, &mut changes).expect("opens");
        let got: Vec<String> = changes.iter().map(|c| summary(region_of(c))).collect();
        assert_eq!(got, [r#"1 d0 "hello" 2:0-3:0 no exit"#, r#"2 d0 "again" 4:0- running"#]);
        changes.clear();
        tracker.tick(cooker.cursor(), 1_200 + 60_000, &mut changes);
        assert_eq!(changes.len(), 1, "the timeout ends it");
        let bad = InputSpec { prompt_pattern: Some("(".into()), ..input("x") };
        assert!(tracker.open_input(&bad, ("", cooker.cursor()), 0, &mut changes).is_err());
    }

    #[rstest]
    #[case::inside("héllo", 1, "éllo")]
    #[case::mid_char("héllo", 2, "llo")]
    #[case::beyond_trimmed_end("ab", 5, "")]
    #[case::start("ab", 0, "ab")]
    fn tails_stay_on_char_boundaries(#[case] text: &str, #[case] start: u32, #[case] want: &str) {
        assert_eq!(tail_from(text, start), want);
    }
}

/// Real bash, real tmux: the integration's own bytes through the cooker.
#[cfg(test)]
mod real_shell {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::cook::Cooker;

    const SECRET_NONCE: &str = "1234567891.987654321.2147483646.7";

    /// Skips the test, saying why, when a program it needs is missing.
    macro_rules! needs {
        ($program:literal) => {
            if Command::new($program).arg("-V").output().is_err() {
                eprintln!("skipped: {} is not installed", $program);
                return;
            }
        };
    }

    /// The shell directory of the checkout.
    fn shell_dir() -> PathBuf {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("shell");
        if here.join("bashrc").exists() {
            here
        } else {
            // The scratch crate that develops this module lives elsewhere.
            PathBuf::from("/work/main/shell")
        }
    }

    /// One integrated bash in a tmux server of its own (its socket in a
    /// temporary HOME), its output piped to `raw.log` there. Dropping it
    /// kills that server and nothing else.
    struct TmuxHarness {
        socket: PathBuf,
        home: tempfile::TempDir,
        secret: Secret,
        /// Primary prompts the log should hold once the shell is ready.
        prompts: usize,
    }

    impl TmuxHarness {
        /// Starts bash with `profile` as its `~/.bash_profile`, and waits for
        /// its first prompt.
        fn start(profile: &str) -> TmuxHarness {
            let home = tempfile::tempdir().expect("temp dir");
            std::fs::write(home.path().join(".bash_profile"), profile).expect("write profile");
            let mut h = TmuxHarness {
                socket: home.path().join("tmux.sock"),
                home,
                secret: Secret::generate().expect("urandom"),
                prompts: 0,
            };
            // The pane waits until the pipe is attached, so no byte is lost.
            let bash = format!(
                "tmux -S {} wait-for go; exec env HOME={} __DTMCP_NONCE={} bash --rcfile {}/bashrc -i",
                h.socket.display(),
                h.home.path().display(),
                h.secret.to_nonce(),
                shell_dir().display()
            );
            h.tmux(&["-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", &bash]);
            let log = h.log();
            h.tmux(&["pipe-pane", "-O", &format!("cat >> {}", log.display())]);
            h.tmux(&["wait-for", "-S", "go"]);
            h.wait_prompt();
            h
        }

        fn tmux(&self, args: &[&str]) -> Output {
            let out = Command::new("tmux").arg("-S").arg(&self.socket).args(args).output();
            let out = out.expect("tmux runs");
            assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            out
        }

        fn log(&self) -> PathBuf {
            self.home.path().join("raw.log")
        }

        fn raw(&self) -> Vec<u8> {
            std::fs::read(self.log()).unwrap_or_default()
        }

        /// Types `line` and Enter, as separate steps.
        fn type_line(&self, line: &str) {
            self.tmux(&["send-keys", "-l", line]);
            self.tmux(&["send-keys", "Enter"]);
        }

        /// Types `line` and waits for the next primary prompt.
        fn run(&mut self, line: &str) {
            self.type_line(line);
            self.wait_prompt();
        }

        fn wait_prompt(&mut self) {
            self.prompts += 1;
            let want = self.prompts;
            self.wait_until(&format!("{want} prompts"), |raw| count(raw, b"\x1b]133;A;dtmcp=") >= want);
        }

        fn wait_until(&self, what: &str, done: impl Fn(&[u8]) -> bool) {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !done(&self.raw()) {
                let raw = String::from_utf8_lossy(&self.raw()).into_owned();
                assert!(Instant::now() < deadline, "no {what} in time; log so far:\n{raw:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }

        /// The log through a cooker and a tracker: the final form of each
        /// region, the tracker, and the cooked lines.
        fn regions(&self) -> (Vec<Region>, RegionTracker, Vec<String>) {
            let mut cooker = Cooker::new(LineNo::FIRST);
            let mut tracker = RegionTracker::new(Some(self.secret.clone()), RegionId(1));
            let (mut events, mut changes) = (Vec::new(), Vec::new());
            cooker.feed(&self.raw(), &mut events);
            let mut lines = Vec::new();
            for ev in &events {
                if let CookEvent::Line { text, .. } = ev {
                    lines.push(text.clone());
                }
                tracker.on_event(ev, 0, &mut changes);
            }
            let mut regions: Vec<Region> = Vec::new();
            for change in changes {
                let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
                match regions.iter_mut().find(|old| old.id == r.id) {
                    Some(old) => *old = r,
                    None => regions.push(r),
                }
            }
            (regions, tracker, lines)
        }
    }

    impl Drop for TmuxHarness {
        fn drop(&mut self) {
            let kill = Command::new("tmux").arg("-S").arg(&self.socket).arg("kill-server").output();
            if let Err(e) = kill {
                eprintln!("could not stop the test's tmux server: {e}");
            }
        }
    }

    fn count(haystack: &[u8], needle: &[u8]) -> usize {
        haystack.windows(needle.len()).filter(|w| *w == needle).count()
    }

    /// What a test checks of a region: command, exit, statuses, depth.
    fn brief(r: &Region) -> (&str, Option<i32>, &[i32], u32) {
        (r.command.as_str(), r.exit, r.pipestatus.as_slice(), r.depth)
    }

    #[test]
    fn integrated_bash_marks_its_commands() {
        needs!("tmux");
        let mut h = TmuxHarness::start("");
        h.run("echo hi");
        h.run("false");
        h.run("true | false");
        h.type_line("cat <<EOF");
        h.type_line("x");
        h.run("EOF");
        h.run("bash");
        h.run("(exit 3)");
        h.run("exit");
        let (regions, tracker, _) = h.regions();
        let got: Vec<_> = regions.iter().map(brief).collect();
        let want: Vec<(&str, Option<i32>, &[i32], u32)> = vec![
            ("echo hi", Some(0), &[0], 0),
            ("false", Some(1), &[1], 0),
            ("true | false", Some(1), &[0, 1], 0),
            ("cat <<EOF\nx\nEOF", Some(0), &[0], 0),
            // `exit` leaves with the status of the command before it.
            ("bash", Some(3), &[3], 0),
            ("(exit 3)", Some(3), &[3], 1),
            ("exit", None, &[], 1),
        ];
        assert_eq!(got, want);
        assert_eq!(regions[5].parent, Some(regions[4].id));
        assert_ne!(regions[5].pid, regions[4].pid);
        let shell = tracker.shell();
        assert!(shell.integrated && shell.at_prompt && shell.open.is_empty());
        assert_eq!((shell.prompts, shell.pid), (8, regions[0].pid));
        assert!(!shell.user.is_empty() && !shell.host.is_empty());
    }

    /// A user's `set -eu`, an array PROMPT_COMMAND that reads `$?`, and a
    /// framework that sets PS1 before every prompt; then a shell on a pty
    /// of its own, which must print no markers.
    #[test]
    fn user_config_and_foreign_ptys_are_respected() {
        needs!("tmux");
        needs!("script");
        let profile = "set -eu\nPROMPT_COMMAND=('echo \"pc saw $?\"' 'PS1=\"fw\\$ \"')\n";
        let mut h = TmuxHarness::start(profile);
        h.run("echo ok");
        h.run("! true");
        h.type_line("script -qc 'bash --norc -i' /dev/null");
        h.wait_until("inner prompt", |raw| count(raw, b"bash-") >= 1);
        let (regions, _, lines) = h.regions();
        assert_eq!(regions.last().map(|r| r.exit), Some(None), "script should still run");
        h.type_line("echo in''side");
        h.wait_until("inner output", |raw| count(raw, b"inside\r\n") >= 1);
        h.run("exit");
        assert!(lines.iter().any(|l| l == "fw$ echo ok"), "{lines:#?}");
        assert!(lines.iter().any(|l| l == "pc saw 1"), "{lines:#?}");
        let (regions, tracker, _) = h.regions();
        let got: Vec<_> = regions.iter().map(brief).collect();
        let want: Vec<(&str, Option<i32>, &[i32], u32)> = vec![
            ("echo ok", Some(0), &[0], 0),
            ("! true", Some(1), &[0], 0),
            ("script -qc 'bash --norc -i' /dev/null", Some(0), &[0], 0),
        ];
        assert_eq!(got, want);
        assert_eq!(tracker.shell().prompts, 4);
        let raw = h.raw();
        let markers = count(&raw, b"\x1b]133;");
        assert_eq!(markers, 4 * 2 + 3 * 2, "only the session's shell marks");
    }

    /// The hook and the marked prompt it leaves cost far less than a
    /// millisecond per prompt (a generous bound for a loaded debug machine).
    #[test]
    fn prompt_hook_is_cheap() {
        needs!("bash");
        let script = format!(
            r#". {}/integration.bash
            __DTMCP_TTY=/dev/null PS1='\u@\h:\w\$ '
            start=${{EPOCHREALTIME/[.,]/}}
            for ((i = 0; i < 500; i++)); do __DTMCP_RAN=1; true; __dtmcp_hook; x=${{PS1@P}}; done 2>/dev/null
            echo $(( (${{EPOCHREALTIME/[.,]/}} - start) / 500 ))"#,
            shell_dir().display()
        );
        let out = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &script])
            .env("__DTMCP_NONCE", SECRET_NONCE)
            .output()
            .expect("bash runs");
        let micros: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("a number");
        assert!(micros < 1000, "{micros} µs per prompt");
    }
}

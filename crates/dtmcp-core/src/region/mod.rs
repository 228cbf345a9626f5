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
//! file, clock or terminal, only events and the time it is handed; the
//! cooker's events reach it through [`crate::pipeline`], the one loop the
//! logger and every test feed bytes by.
//!
//! `input` holds the rules of input regions, `snapshot` what a checkpoint
//! keeps of the tracker; `tests` are table tests on marker sequences, and
//! `real_shell` drives the integration in a real bash under tmux.

mod input;
#[cfg(test)]
mod real_shell;
mod snapshot;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use input::{InputEnd, OpenInput};
pub use input::{InputSpec, PROMPT_PATTERNS, Prompts, SETTLE_MS, continues_a_statement};
pub use snapshot::TrackerSnapshot;

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

/// Whether a listing or a reply names the host region `r` ran on: a
/// command of a shell inside the session's own (over ssh, in a
/// container, even on this host), or a line typed into a program on
/// another host than `here`. A line typed into a program here needs no
/// tag.
pub fn tagged_with_host(r: &Region, here: &str) -> bool {
    names_host(r.kind, r.depth, &r.host, here)
}

/// [`tagged_with_host`] for a region known by its kind, depth and host.
pub fn names_host(kind: RegionKind, depth: u32, host: &str, here: &str) -> bool {
    depth > 0 && !host.is_empty() && (kind != RegionKind::Input || host != here)
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
    /// Continuation prompts shown so far (not on the wire: the logger uses
    /// it to tell a new one from the one a wait began at).
    continuations: u64,
    /// The last line committed, kept for a command that starts with no
    /// prompt end seen (its prompt came without markers): its line is
    /// the best label there is. One buffer, reused.
    last_line: (LineNo, String),
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
            continuations: 0,
            last_line: (LineNo(0), String::new()),
        }
    }

    /// Takes the next cooker event, taken at `now_ms`.
    pub fn on_event(&mut self, ev: &CookEvent, now_ms: u64, out: &mut Vec<RegionChange>) {
        match ev {
            CookEvent::Line { line, text } => {
                self.typing.on_line(*line, text);
                self.last_line.0 = *line;
                self.last_line.1.clear();
                self.last_line.1.push_str(text);
            }
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

    /// How many continuation prompts (`PS2`) have been shown so far.
    pub fn continuations(&self) -> u64 {
        self.continuations
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
        // Readline draws a history search or a count in place of the
        // prompt: what was typed there is not text at the prompt, and the
        // line is all there is to tell (nothing typed yet leaves none
        // after the prompt's end).
        if EDITOR_MODES.iter().any(|m| current.starts_with(m)) {
            return current.trim_end().to_string();
        }
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
            self.continuations += 1;
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
        // No prompt end seen: the whole line typed on, its prompt too.
        let command = match self.typing.starts.is_empty() && self.last_line.0.next() == at.line {
            true => {
                self.typing = Typing::default();
                let line = self.last_line.1.trim();
                let mut end = line.len().min(MAX_COMMAND_BYTES);
                while !line.is_char_boundary(end) {
                    end -= 1;
                }
                line[..end].to_string()
            }
            false => self.typing.take_command(at.line),
        };
        let region = Region {
            id: self.next_id,
            kind: RegionKind::Command,
            command,
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
/// How readline's line starts while it searches the history or holds a
/// count for the next key: typed keys do not go into the command line.
const EDITOR_MODES: &[&str] =
    &["(reverse-i-search)`", "(i-search)`", "(failed reverse-i-search)`", "(failed i-search)`", "(arg: "];

fn tail_from(text: &str, start: u32) -> &str {
    let mut start = usize::try_from(start).unwrap_or(usize::MAX).min(text.len());
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

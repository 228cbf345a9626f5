//! Checkpoints: what a restarted logger needs to carry on tracking (see
//! the logger's `checkpoint` module), kept apart from the tracking itself.

use serde::{Deserialize, Serialize};

use super::input::InputEnd;
use super::{LinePos, Region, RegionChange, RegionKind, RegionTracker, ShellState, Typing};
use crate::marker::Secret;
use crate::types::{Cursor, RegionId};

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

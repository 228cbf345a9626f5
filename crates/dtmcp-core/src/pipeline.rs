//! The one byte path: a pane's raw output through the cooker and the
//! region tracker.
//!
//! The logger, the reference fixtures, the property tests, the region
//! tests and the fuzz target all push bytes through this one loop, so what
//! they check is what the logger runs. For each piece of output the
//! [`Cooker`] turns bytes into events; each event then gets its
//! placeholder named after the running command ([`cook::name_screen`]),
//! is handed to the caller (the logger stores its lines), and goes to the
//! [`RegionTracker`], in that order. The events' strings go back to the
//! cooker once every event is through, so the loop allocates nothing of
//! its own per feed.

use std::convert::Infallible;

use crate::cook::{self, Cooker};
use crate::region::{RegionChange, RegionTracker};
use crate::types::CookEvent;

/// The most bytes cooked at once: bounds the events (and their strings)
/// held before they are handed on.
pub const FEED_BYTES: usize = 1 << 14;

/// A cooker and a region tracker fed as one.
pub struct Pipeline {
    /// Turns the bytes into lines and events; replaced by a fresh one
    /// where the stream breaks (a gap in the log).
    pub cooker: Cooker,
    /// Follows the shells' markers through the events; lives as long as
    /// the session's logger (or is restored from a checkpoint).
    pub tracker: RegionTracker,
    /// The events of the piece being fed; empty between feeds, its
    /// capacity kept.
    events: Vec<CookEvent>,
}

impl Pipeline {
    /// Feeds `cooker`'s events into `tracker`.
    pub fn new(cooker: Cooker, tracker: RegionTracker) -> Self {
        Pipeline { cooker, tracker, events: Vec::new() }
    }

    /// Cooks and tracks `bytes`, which arrived at `now_ms`: the region
    /// changes are appended to `changes`, and `each` sees every event, in
    /// stream order, before the tracker does.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        now_ms: u64,
        changes: &mut Vec<RegionChange>,
        mut each: impl FnMut(&CookEvent),
    ) {
        let Ok(()) = self.try_feed(bytes, now_ms, changes, |event| {
            each(event);
            Ok::<(), Infallible>(())
        });
    }

    /// As [`Pipeline::feed`], for an `each` that can fail (the logger's
    /// store): the first error stops the feed and is returned. Neither
    /// that event nor those after it reach the tracker, and the rest of
    /// `bytes` is not cooked; the events are dropped, never handed out
    /// again by a later feed.
    pub fn try_feed<E>(
        &mut self,
        bytes: &[u8],
        now_ms: u64,
        changes: &mut Vec<RegionChange>,
        mut each: impl FnMut(&CookEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        for piece in bytes.chunks(FEED_BYTES) {
            self.cooker.feed(piece, &mut self.events);
            self.track(now_ms, changes, &mut each)?;
        }
        Ok(())
    }

    /// After output, whenever the caller is done with a chunk: an input
    /// region ends at its program's prompt, even one drawn without a line
    /// feed. Costs nothing while no input region is open.
    pub fn after_output(&mut self, now_ms: u64, changes: &mut Vec<RegionChange>) {
        if self.tracker.next_tick_ms().is_none() {
            return;
        }
        self.tracker.after_output(&self.cooker.current_text(), self.cooker.cursor(), now_ms, changes);
    }

    /// As [`Pipeline::feed`], with the cooker's reference path (vte alone,
    /// see [`Cooker::feed_via_vte_only`]), fed whole. For the property
    /// tests and the fuzz target only.
    #[doc(hidden)]
    pub fn feed_via_vte_only(
        &mut self,
        bytes: &[u8],
        now_ms: u64,
        changes: &mut Vec<RegionChange>,
        mut each: impl FnMut(&CookEvent),
    ) {
        self.cooker.feed_via_vte_only(bytes, &mut self.events);
        let Ok(()) = self.track(now_ms, changes, &mut |event: &CookEvent| {
            each(event);
            Ok::<(), Infallible>(())
        });
    }

    /// Hands the events of the last feed to `each` and the tracker, then
    /// back to the cooker, whatever `each` says.
    fn track<E>(
        &mut self,
        now_ms: u64,
        changes: &mut Vec<RegionChange>,
        each: &mut impl FnMut(&CookEvent) -> Result<(), E>,
    ) -> Result<(), E> {
        let Pipeline { cooker, tracker, events } = self;
        let mut done = Ok(());
        for i in 0..events.len() {
            let running = tracker.open_regions().last().map(|region| region.command.as_str());
            cook::name_screen(events, i, running);
            let event = &events[i];
            done = each(event);
            if done.is_err() {
                break;
            }
            tracker.on_event(event, now_ms, changes);
        }
        cooker.recycle(events);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{LineNo, RegionId};

    fn pipeline() -> Pipeline {
        Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(None, RegionId(1)))
    }

    fn lines_of(pipe: &mut Pipeline, bytes: &[u8]) -> Vec<(u64, String)> {
        let mut lines = Vec::new();
        pipe.feed(bytes, 0, &mut Vec::new(), |event| {
            if let CookEvent::Line { line, text } = event {
                lines.push((line.0, text.clone()));
            }
        });
        lines
    }

    #[test]
    fn a_failed_store_stops_the_feed_and_nothing_comes_twice() {
        let mut pipe = pipeline();
        let mut seen = Vec::new();
        let fed = pipe.try_feed(b"one\r\ntwo\r\nthree\r\n", 0, &mut Vec::new(), |event| match event {
            CookEvent::Line { text, .. } if text == "two" => Err("disk full"),
            CookEvent::Line { text, .. } => {
                seen.push(text.clone());
                Ok(())
            }
            _ => Ok(()),
        });
        assert_eq!((fed, seen), (Err("disk full"), vec!["one".to_string()]));
        assert_eq!(lines_of(&mut pipe, b"four\r\n"), [(4, "four".to_string())]);
    }

    #[test]
    fn big_feeds_are_cooked_in_pieces_with_the_same_result() {
        let text: Vec<u8> = (0..5_000).flat_map(|i| format!("line {i}\r\n").into_bytes()).collect();
        assert!(text.len() > 2 * FEED_BYTES);
        let whole = lines_of(&mut pipeline(), &text);
        let mut pipe = pipeline();
        let by_byte: Vec<(u64, String)> =
            text.iter().flat_map(|b| lines_of(&mut pipe, std::slice::from_ref(b))).collect();
        assert_eq!(whole.len(), 5_000);
        assert_eq!(whole, by_byte);
    }
}

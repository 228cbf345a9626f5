//! Cooks and tracks arbitrary bytes: no panic, lines numbered in order
//! with every event on the unfinished line, a cursor that never goes back,
//! the same result whether the bytes come whole or in the pieces the
//! input's first byte chooses, and the same as vte alone cooks them (the
//! cooker's short cut for ASCII must not change a thing).
#![no_main]

use dtmcp_core::cook::Cooker;
use dtmcp_core::marker::Secret;
use dtmcp_core::region::RegionTracker;
use dtmcp_core::types::{CookEvent, LineNo, RegionId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, bytes)) = data.split_first() else {
        return;
    };
    let whole = run(bytes, usize::MAX);
    let piece = usize::from(seed % 17) + 1;
    assert_eq!(run(bytes, piece), whole, "pieces of {piece} bytes");
    let mut plain = Cooker::new(LineNo::FIRST);
    let mut events = Vec::new();
    plain.feed_via_vte_only(bytes, &mut events);
    let mut tracker = RegionTracker::new(Some(Secret { keys: [11, 22, 33, 44] }), RegionId(1));
    let mut changes = Vec::new();
    for i in 0..events.len() {
        let running = tracker.open_regions().last().map(|r| r.command.clone());
        dtmcp_core::cook::name_screen(&mut events, i, running.as_deref());
        tracker.on_event(&events[i], 0, &mut changes);
    }
    assert_eq!((events, plain.current_text()), whole, "vte alone");
});

/// Feeds `bytes` in pieces of `piece` bytes, checking the order of lines
/// on the way; returns the events and the unfinished line.
fn run(bytes: &[u8], piece: usize) -> (Vec<CookEvent>, String) {
    let mut cooker = Cooker::new(LineNo::FIRST);
    let mut tracker = RegionTracker::new(Some(Secret { keys: [11, 22, 33, 44] }), RegionId(1));
    let (mut events, mut changes) = (Vec::new(), Vec::new());
    let mut next = LineNo::FIRST;
    let mut spent = Vec::new();
    for chunk in bytes.chunks(piece) {
        let before = events.len();
        cooker.feed(chunk, &mut events);
        for i in before..events.len() {
            let running = tracker.open_regions().last().map(|r| r.command.clone());
            dtmcp_core::cook::name_screen(&mut events, i, running.as_deref());
            let event = &events[i];
            match event {
                CookEvent::Line { line, .. } => {
                    assert_eq!(*line, next, "lines in order");
                    next = line.next();
                }
                CookEvent::Osc133 { at, .. } | CookEvent::Screen { at, .. } | CookEvent::Query { at, .. } => {
                    assert_eq!(at.line, next, "events on the unfinished line");
                }
            }
            tracker.on_event(event, 0, &mut changes);
        }
        // Recycled strings must never leak into later lines.
        spent.extend(events.iter().cloned());
        cooker.recycle(&mut events);
        assert_eq!(cooker.cursor().line, next, "cursor on the unfinished line");
    }
    (spent, cooker.current_text())
}

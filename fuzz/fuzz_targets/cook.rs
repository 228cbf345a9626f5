//! Cooks and tracks arbitrary bytes through the logger's own loop
//! ([`Pipeline`]): no panic, lines numbered in order with every event on
//! the unfinished line, a cursor that never goes back, the same result
//! whether the bytes come whole or in the pieces the input's first byte
//! chooses, and the same as vte alone cooks them (the cooker's short cut
//! for ASCII must not change a thing).
#![no_main]

use dtmcp_core::cook::Cooker;
use dtmcp_core::marker::Secret;
use dtmcp_core::pipeline::Pipeline;
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
    let mut plain = pipeline();
    let mut events = Vec::new();
    plain.feed_via_vte_only(bytes, 0, &mut Vec::new(), |event| events.push(event.clone()));
    assert_eq!((events, plain.cooker.current_text()), whole, "vte alone");
});

/// A fresh cooker and tracker, trusting a fixed secret.
fn pipeline() -> Pipeline {
    Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(Some(Secret { keys: [11, 22, 33, 44] }), RegionId(1)))
}

/// Feeds `bytes` in pieces of `piece` bytes, checking the order of lines
/// on the way; returns the events and the unfinished line.
fn run(bytes: &[u8], piece: usize) -> (Vec<CookEvent>, String) {
    let mut pipe = pipeline();
    let mut changes = Vec::new();
    let mut next = LineNo::FIRST;
    // Recycled strings must never leak into later lines.
    let mut spent = Vec::new();
    for chunk in bytes.chunks(piece) {
        pipe.feed(chunk, 0, &mut changes, |event| {
            match event {
                CookEvent::Line { line, .. } => {
                    assert_eq!(*line, next, "lines in order");
                    next = line.next();
                }
                CookEvent::Osc133 { at, .. } | CookEvent::Screen { at, .. } | CookEvent::Query { at, .. } => {
                    assert_eq!(at.line, next, "events on the unfinished line");
                }
            }
            spent.push(event.clone());
        });
        assert_eq!(pipe.cooker.cursor().line, next, "cursor on the unfinished line");
    }
    (spent, pipe.cooker.current_text())
}

//! Property tests of the cooker and the region tracker on arbitrary input:
//! no panic, line numbers that only grow, and results that do not depend
//! on how the stream is split. The fuzz target in `fuzz/` checks the same
//! properties with coverage guidance; these run with every `cargo test`.
//! Set `PROPTEST_CASES` to run more cases than the default 256.

use proptest::prelude::*;

use super::Cooker;
use crate::marker::Secret;
use crate::pipeline::Pipeline;
use crate::region::RegionTracker;
use crate::types::{CookEvent, LineNo, RegionId};

/// Pieces that reach the interesting states quickly: screen switches,
/// homes, erases, markers, partial and wide UTF-8, strings that never end.
const TOKENS: &[&[u8]] = &[
    b"\x1b[?1049h",
    b"\x1b[?1049l",
    b"\x1b[?47h",
    b"\x1b[?25;1047l",
    b"\x1b[H",
    b"\x1b[1;1H",
    b"\x1b[5;3H",
    b"\x1b[2J",
    b"\x1b[J",
    b"\x1b[1J",
    b"\x1b[K",
    b"\x1b[3A",
    b"\x1b[2B",
    b"\x1b[4d",
    b"\x1b[E",
    b"\x1b[F",
    b"\x1b[65535C",
    b"\x1b[9@",
    b"\x1b[3P",
    b"\x1b[2X",
    b"\x1b[31m",
    b"\x1b]133;A\x07",
    b"\x1b]133;D;0\x1b\\",
    b"\x1b]0;title",
    b"\x1bP1$r",
    b"\x1b_apc",
    b"\r\n",
    b"\n",
    b"\r",
    b"\x08",
    b"\t",
    "中".as_bytes(),
    "😀".as_bytes(),
    "\u{301}".as_bytes(),
    b"\xe4\xb8",
    b"\xff",
    b"hello",
];

/// Arbitrary bytes, mixed with the tokens above.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let piece =
        prop_oneof![prop::collection::vec(any::<u8>(), 1..8), prop::sample::select(TOKENS).prop_map(<[u8]>::to_vec),];
    prop::collection::vec(piece, 0..120).prop_map(|pieces| pieces.concat())
}

/// Everything observable after feeding `input` split at `cuts`, checking
/// on the way that line numbers only grow and that the tracker copes.
fn run(input: &[u8], cuts: &[usize]) -> (Vec<CookEvent>, String, u64) {
    let secret = Secret { keys: [11, 22, 33, 44] };
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(Some(secret), RegionId(1)));
    let (mut events, mut changes) = (Vec::new(), Vec::new());
    let mut last = LineNo::FIRST;
    let mut start = 0;
    for end in cuts.iter().copied().chain([input.len()]) {
        let end = end.clamp(start, input.len());
        pipe.feed(&input[start..end], 0, &mut changes, |event| {
            last = check_order(last, event);
            events.push(event.clone());
        });
        assert!(pipe.cooker.cursor().line >= last, "cursor went back");
        last = pipe.cooker.cursor().line;
        start = end;
    }
    (events, pipe.cooker.current_text(), pipe.cooker.cursor().line.0)
}

/// Lines come in order without gaps, and no event points before the last.
fn check_order(last: LineNo, event: &CookEvent) -> LineNo {
    match event {
        CookEvent::Line { line, .. } => {
            assert_eq!(*line, last, "lines are numbered in order");
            line.next()
        }
        CookEvent::Osc133 { at, .. } | CookEvent::Screen { at, .. } | CookEvent::Query { at, .. } => {
            assert_eq!(at.line, last, "events sit on the unfinished line");
            last
        }
    }
}

proptest! {
    // Failures are not saved to a file outside `src/cook`; a case worth
    // keeping goes into the chunking table in `tests.rs`.
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_cook_in_order(input in stream()) {
        run(&input, &[]);
    }

    #[test]
    fn the_ascii_short_cut_cooks_as_vte_alone_does(input in stream()) {
        let mut plain = Cooker::new(LineNo::FIRST);
        let mut want = Vec::new();
        plain.feed_via_vte_only(&input, &mut want);
        let got = run(&input, &[]);
        prop_assert_eq!((&got.0, &got.1), (&want, &plain.current_text()));
    }

    #[test]
    fn chunking_never_changes_results(
        input in stream(),
        mut cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..16),
    ) {
        let mut cuts: Vec<usize> = cuts.drain(..).map(|cut| cut.index(input.len() + 1)).collect();
        cuts.sort_unstable();
        prop_assert_eq!(run(&input, &cuts), run(&input, &[]));
    }
}

//! Edge cases of the cooker as tables, plus the chunking invariant: feeding
//! the same bytes whole, byte by byte or in random pieces gives the same
//! events and leaves the same unfinished line.

use rstest::rstest;

use super::screen::FRAME_MAX_ROWS;
use super::{Cooker, OSC_BUF};
use crate::types::{CookEvent, Cursor, LineNo, MAX_MARKER_LEN, SCREEN_PLACEHOLDER};

/// What a cooker produced from one input: its events, and the cursor and
/// text it was left with.
#[derive(Debug, PartialEq, Eq)]
struct Cooked {
    events: Vec<CookEvent>,
    cursor: Cursor,
    current: String,
}

/// Cooks `input` fed in the pieces `chunks` gives, from line 1.
fn cook_in(input: &[u8], mut chunks: impl FnMut() -> usize) -> Cooked {
    let mut cooker = Cooker::new(LineNo::FIRST);
    let mut events = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (piece, tail) = rest.split_at(chunks().clamp(1, rest.len()));
        cooker.feed(piece, &mut events);
        rest = tail;
    }
    Cooked { events, cursor: cooker.cursor(), current: cooker.current_text() }
}

/// Cooks `input` fed in one piece.
fn cook(input: &[u8]) -> Cooked {
    cook_in(input, || usize::MAX)
}

/// The committed texts among `events`, markers left out.
fn texts(events: &[CookEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| match event {
            CookEvent::Line { text, .. } => Some(text.as_str()),
            CookEvent::Osc133 { .. } | CookEvent::Screen { .. } | CookEvent::Query { .. } => None,
        })
        .collect()
}

/// Asserts the committed lines and the unfinished line, showing the input
/// on failure.
macro_rules! assert_lines {
    ($input:expr, $cooked:expr, $lines:expr, $current:expr) => {
        let (input, cooked) = ($input, $cooked);
        let shown = String::from_utf8_lossy(input);
        assert_eq!(texts(&cooked.events), $lines, "committed lines of {shown:?}");
        assert_eq!(cooked.current, $current, "unfinished line of {shown:?}");
    };
}

fn at(line: u64, col: u32, text_len: u32) -> Cursor {
    Cursor { line: LineNo(line), col, text_len }
}

fn marker(params: &str, at: Cursor) -> CookEvent {
    CookEvent::Osc133 { params: params.as_bytes().to_vec(), at }
}

fn line(n: u64, text: &str) -> CookEvent {
    CookEvent::Line { line: LineNo(n), text: text.to_owned() }
}

#[rstest]
#[case::plain_lines(b"one\r\ntwo\r\nthree", &["one", "two"], "three")]
#[case::crlf(b"one\r\ntwo\r\n", &["one", "two"], "")]
#[case::empty_lines(b"\r\n\r\nx\r\n", &["", "", "x"], "")]
#[case::trailing_blanks_trimmed(b"ab   \r\n", &["ab"], "")]
#[case::progress_bar_cr(b" 10% [#   ]\r 50% [##  ]\r100% [####]\r\n", &["100% [####]"], "")]
#[case::shorter_redraw_keeps_tail(b"downloading\rdone\n", &["doneloading"], "")]
#[case::backspace_overwrites(b"abc\x08X\n", &["abX"], "")]
#[case::backspace_stops_at_column_0(b"\x08\x08ab\n", &["ab"], "")]
#[case::readline_rubout(b"ls -lx\x08\x1b[K\r\n", &["ls -l"], "")]
#[case::readline_cursor_back(b"echo hallo\x1b[4De\x1b[3C\r\n", &["echo hello"], "")]
#[case::readline_insert(b"ac\x1b[D\x1b[@b\r\n", &["abc"], "")]
#[case::readline_insert_past_end_is_noop(b"ab\x1b[5@c\r\n", &["abc"], "")]
#[case::readline_delete(b"abxxc\x1b[3D\x1b[2P\r\n", &["abc"], "")]
#[case::erase_right(b"hello world\x1b[6D\x1b[0K\n", &["hello"], "")]
#[case::erase_right_default(b"hello world\x1b[6D\x1b[K\n", &["hello"], "")]
#[case::erase_left(b"hello world\x1b[6D\x1b[1K\n", &["      world"], "")]
#[case::erase_whole_keeps_column(b"hello\x1b[2Kbye\n", &["     bye"], "")]
#[case::erase_chars(b"abcdef\x1b[3G\x1b[2X\n", &["ab  ef"], "")]
#[case::cursor_forward_pads(b"a\x1b[3Cb\n", &["a   b"], "")]
#[case::column_absolute(b"hello\x1b[2Gi\x1b[4`p\n", &["hilpo"], "")]
#[case::tab_to_next_stop(b"a\tb\tc\n", &["a       b       c"], "")]
#[case::tab_does_not_overwrite(b"abcdefghij\rab\tX\n", &["abcdefghXj"], "")]
#[case::cjk(b"\xe4\xb8\xad\xe6\x96\x87\n", &["中文"], "")]
#[case::cjk_overwrite_head("中文\ra\n".as_bytes(), &["a 文"], "")]
#[case::cjk_overwrite_tail("中文\x1b[2Gb\n".as_bytes(), &[" b文"], "")]
#[case::cjk_wide_over_two_halves("中文\x1b[2G字\n".as_bytes(), &[" 字"], "")]
#[case::cjk_erase_half("中文\x1b[4G\x1b[X".as_bytes(), &[] as &[&str], "中")]
#[case::cjk_delete_tail("中文\x1b[2G\x1b[P".as_bytes(), &[] as &[&str], " 文")]
#[case::emoji("ok 😀!\r\n".as_bytes(), &["ok 😀!"], "")]
#[case::emoji_backspace_twice("😀x\x08\x08y".as_bytes(), &[] as &[&str], " yx")]
#[case::combining_accent("cafe\u{301}\r\n".as_bytes(), &["cafe\u{301}"], "")]
#[case::combining_on_wide("中\u{301}x".as_bytes(), &[] as &[&str], "中\u{301}x")]
#[case::combining_after_move("ab\x1b[D\u{301}c".as_bytes(), &[] as &[&str], "a\u{301}c")]
#[case::combining_overwritten("e\u{301}\x08x".as_bytes(), &[] as &[&str], "x")]
#[case::combining_at_column_0_dropped("\u{301}a".as_bytes(), &[] as &[&str], "a")]
#[case::zwj_sequence("👨\u{200d}👩".as_bytes(), &[] as &[&str], "👨\u{200d}👩")]
#[case::invalid_utf8(b"a\xffb\xe4\xb8c\n", &["a\u{fffd}b\u{fffd}c"], "")]
#[case::c1_as_utf8(b"a\xc2\x85b\xc2\x9bc\n", &["abc"], "")]
#[case::c1_raw_byte(b"a\x85b\x9bc\n", &["abc"], "")]
#[case::del_dropped(b"a\x7fb\n", &["ab"], "")]
#[case::other_c0_ignored(b"a\x07\x0e\x0f\x00\x1cb\n", &["ab"], "")]
#[case::sgr_stripped(b"\x1b[1;31mred\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[m\n", &["red rgb"], "")]
#[case::osc_0_title_dropped(b"\x1b]0;user@h: ~\x07text\n", &["text"], "")]
#[case::osc_8_hyperlink_dropped(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n", &["link"], "")]
#[case::dcs_dropped(b"a\x1bP1$r0m\x1b\\b\n", &["ab"], "")]
#[case::private_csi_dropped(b"a\x1b[?25l\x1b[?2004hb\n", &["ab"], "")]
#[case::cursor_up_keeps_line(b"a\x1b[Ab\x1b[3Bc\n", &["abc"], "")]
#[case::redraw_above_appends(b"1/2\r\n2/2\r\n\x1b[2A\r1/2 ok\r\n2/2 ok\r\n", &["1/2", "2/2", "1/2 ok", "2/2 ok"], "")]
#[case::next_line_goes_to_column_0(b"abc\x1b[Ex\x1b[Fy\n", &["ybc"], "")]
#[case::erase_display_below(b"hello\x1b[3G\x1b[J\n", &["he"], "")]
#[case::erase_display_above(b"hello\x1b[3G\x1b[1J\n", &["   lo"], "")]
#[case::erase_display_all(b"hello\x1b[2Jab\n", &["     ab"], "")]
#[case::erase_scrollback_keeps(b"hello\x1b[3J\n", &["hello"], "")]
#[case::position_column(b"hello\x1b[7;2Hi\x1b[3fX\n", &["Xillo"], "")]
#[case::clear_once(b"$ clear\r\n\x1b[H\x1b[2J\x1b[3J$ ls\r\na\r\n", &["$ clear", "$ ls", "a"], "")]
#[case::esc_sequences_dropped(b"a\x1b7\x1b(Bb\x1b8c\n", &["abc"], "")]
#[case::bare_lf_keeps_column(b"abc\ndef\n", &["abc", "   def"], "")]
#[case::vt_and_ff_end_lines(b"a\x0bb\x0cc", &["a", " b"], "  c")]
fn cooks_text(#[case] input: &[u8], #[case] lines: &[&str], #[case] current: &str) {
    assert_lines!(input, cook(input), lines, current);
}

#[rstest]
#[case::start_of_stream(b"", at(1, 0, 0))]
#[case::after_prompt(b"user@h:~$ ", at(1, 10, 10))]
#[case::after_carriage_return(b"abc\r", at(1, 0, 0))]
#[case::on_second_line(b"one\r\ntwo", at(2, 3, 3))]
#[case::bare_lf_keeps_column(b"one\n", at(2, 3, 3))]
#[case::past_end_counts_blanks(b"ab\x1b[3C", at(1, 5, 5))]
#[case::after_tab(b"a\t", at(1, 8, 8))]
#[case::wide_counts_once("中a".as_bytes(), at(1, 3, 4))]
#[case::on_wide_tail("中\x1b[D".as_bytes(), at(1, 1, 3))]
#[case::combining_counts_with_its_cell("e\u{301}x".as_bytes(), at(1, 2, 4))]
#[case::inside_line(b"hello\x1b[2G", at(1, 1, 1))]
#[case::column_absolute_clamped(b"\x1b[65535G", at(1, 4096, 4096))]
fn reports_cursor(#[case] input: &[u8], #[case] cursor: Cursor) {
    assert_eq!(cook(input).cursor, cursor, "after {:?}", String::from_utf8_lossy(input));
}

#[rstest]
#[case::prompt_marks(
    b"\x1b]133;A\x07user@h:~$ \x1b]133;B\x07ls\r\n\x1b]133;C\x07",
    vec![
        marker("A", at(1, 0, 0)),
        marker("B", at(1, 10, 10)),
        line(1, "user@h:~$ ls"),
        marker("C", at(2, 0, 0)),
    ],
)]
#[case::bel_terminated(b"x\x1b]133;D;0\x07", vec![marker("D;0", at(1, 1, 1))])]
#[case::st_terminated(b"x\x1b]133;D;0\x1b\\y", vec![marker("D;0", at(1, 1, 1))])]
#[case::key_value_params(b"\x1b]133;A;cl=m;aid=42\x07", vec![marker("A;cl=m;aid=42", at(1, 0, 0))])]
#[case::empty_params(b"\x1b]133;\x07", vec![marker("", at(1, 0, 0))])]
#[case::after_wide_prompt("中$ \x1b]133;B\x07".as_bytes(), vec![marker("B", at(1, 4, 5))])]
#[case::fifteen_params(
    b"\x1b]133;1;2;3;4;5;6;7;8;9;10;11;12;13;14\x07",
    vec![marker("1;2;3;4;5;6;7;8;9;10;11;12;13;14", at(1, 0, 0))],
)]
#[case::sixteen_params_may_be_cut(b"\x1b]133;1;2;3;4;5;6;7;8;9;10;11;12;13;14;15\x07", vec![])]
#[case::without_params_dropped(b"\x1b]133\x07", vec![])]
#[case::other_number_dropped(b"\x1b]1337;A\x07\x1b]13;A\x07", vec![])]
#[case::osc_0_dropped(b"\x1b]0;133;A\x07", vec![])]
fn reports_markers(#[case] input: &[u8], #[case] events: Vec<CookEvent>) {
    let cooked = cook(input);
    assert_eq!(cooked.events, events, "events of {:?}", String::from_utf8_lossy(input));
    assert!(!cooked.current.contains("133"), "marker bytes leaked into {:?}", cooked.current);
}

#[rstest]
#[case::at_limit(MAX_MARKER_LEN, true)]
#[case::one_over_limit(MAX_MARKER_LEN + 1, false)]
#[case::far_over_limit(100_000, false)]
fn caps_marker_length(#[case] len: usize, #[case] reported: bool) {
    let params = "k".repeat(len);
    let input = format!("\x1b]133;{params}\x07after");
    let cooked = cook(input.as_bytes());
    let expected = if reported { vec![marker(&params, at(1, 0, 0))] } else { vec![] };
    assert_eq!(cooked.events, expected);
    assert_eq!(cooked.current, "after");
}

fn screen(on: bool, line: u64, col: u32) -> CookEvent {
    CookEvent::Screen { on, at: at(line, col, col) }
}

const PH: &str = SCREEN_PLACEHOLDER;

#[rstest]
#[case::alt_screen_1049(b"$ vim\r\n\x1b[?1049h\x1b[Hfile\r\n~\r\n\x1b[?1049l$ ", vec![line(1, "$ vim"), screen(true, 2, 0), line(2, PH), screen(false, 3, 0)], "$")]
#[case::alt_screen_47(b"\x1b[?47hx\r\n\x1b[?47ly\n", vec![screen(true, 1, 0), line(1, PH), screen(false, 2, 0), line(2, "y")], "")]
#[case::alt_screen_1047_among_modes(b"\x1b[?25;1047hx\x1b[?1047l", vec![screen(true, 1, 0), line(1, PH), screen(false, 2, 0)], "")]
#[case::alt_screen_commits_drawn_line(b"ab\x1b[?1049h\x1b[?1049l", vec![line(1, "ab"), screen(true, 2, 2), line(2, PH), screen(false, 3, 2)], "")]
#[case::alt_screen_twice_one_placeholder(b"\x1b[?1049h\x1b[?1049h\x1b[?1049l\x1b[?1049l", vec![screen(true, 1, 0), line(1, PH), screen(false, 2, 0)], "")]
#[case::alt_screen_off_alone_ignored(b"\x1b[?1049lab", vec![], "ab")]
#[case::alt_screen_ended_by_marker(b"\x1b[?1049hjunk\x1b]133;A\x07$ ", vec![screen(true, 1, 0), line(1, PH), screen(false, 2, 0), marker("A", at(2, 0, 0))], "$")]
#[case::repaint_from_home(
    b"\x1b[H\x1b[2Jt=1\r\n\x1b[H\x1b[2Jt=2\r\n\x1b[Ht=3\r\nmore\r\n\x1b]133;A\x07",
    vec![line(1, "t=1"), screen(true, 2, 0), line(2, PH), line(3, "t=3"), line(4, "more"), screen(false, 5, 0), marker("A", at(5, 0, 0))],
    "",
)]
#[case::repaint_keeps_rows_not_redrawn(
    b"\x1b[Ha\r\nb\r\nc\r\n\x1b[Hx\x1b[3;1Hy\x1b]133;A\x07",
    vec![line(1, "a"), line(2, "b"), line(3, "c"), screen(true, 4, 0), line(4, PH), line(5, "x"), line(6, "b"), line(7, "y"), screen(false, 8, 1), marker("A", at(8, 1, 1))],
    "",
)]
#[case::repaint_erase_below(
    b"\x1b[Ha\r\nb\r\n\x1b[Hx\x1b[J\x1b]133;A\x07",
    vec![line(1, "a"), line(2, "b"), screen(true, 3, 0), line(3, PH), line(4, "x"), screen(false, 5, 1), marker("A", at(5, 1, 1))],
    "",
)]
#[case::homes_apart_by_marker(b"\x1b[Ha\r\n\x1b]133;A\x07\x1b[1;1Hb\r\n", vec![line(1, "a"), marker("A", at(2, 0, 0)), line(2, "b")], "")]
fn collapses_full_screen(#[case] input: &[u8], #[case] events: Vec<CookEvent>, #[case] current: &str) {
    let cooked = cook(input);
    assert_eq!(cooked.events, events, "events of {:?}", String::from_utf8_lossy(input));
    assert_eq!(cooked.current, current);
}

#[test]
fn repaint_ends_when_frame_overflows() {
    let mut input = b"\x1b[Ha\n\x1b[Hb\r\n".to_vec();
    for n in 0..FRAME_MAX_ROWS + 3 {
        input.extend_from_slice(format!("{n}\r\n").as_bytes());
    }
    let cooked = cook(&input);
    let lines = texts(&cooked.events);
    assert_eq!(lines[..3], ["a", PH, "b"]);
    assert_eq!(lines.len(), 3 + FRAME_MAX_ROWS + 3);
    assert!(cooked.events.contains(&screen(false, FRAME_MAX_ROWS as u64 + 3, 0)));
}

/// A string or sequence that never ends: 100 MB of it, fed in 1 MiB
/// chunks, leaves the cooker's memory as it was (vte without `std` keeps
/// a fixed OSC buffer and fixed CSI parameters, and streams the rest), and
/// the text after it still arrives.
#[rstest]
#[case::osc_marker(b"\x1b]133;A;", b'x', b"\x07")]
#[case::osc_title(b"\x1b]0;", b'x', b"\x1b\\")]
#[case::csi_params(b"\x1b[", b'1', b"m")]
#[case::dcs(b"\x1bP1$r", b'x', b"\x1b\\")]
#[case::apc(b"\x1b_", b'x', b"\x1b\\")]
fn endless_sequences_stay_small(#[case] start: &[u8], #[case] fill: u8, #[case] end: &[u8]) {
    let mut cooker = Cooker::new(LineNo::FIRST);
    let mut events = Vec::new();
    cooker.feed(b"before\r\n", &mut events);
    cooker.feed(start, &mut events);
    let held = cooker.held_bytes();
    let chunk = vec![fill; 1 << 20];
    for _ in 0..100 {
        cooker.feed(&chunk, &mut events);
    }
    assert_eq!(cooker.held_bytes(), held);
    assert!(std::mem::size_of::<Cooker>() < 4 * OSC_BUF, "the parser is inline and fixed");
    cooker.feed(end, &mut events);
    cooker.feed(b"after", &mut events);
    assert_eq!(events, vec![line(1, "before")], "a cut OSC is never a marker");
    assert_eq!(cooker.current_text(), "after");
}

#[test]
fn numbers_lines_from_first_line() {
    let mut cooker = Cooker::new(LineNo(41));
    let mut events = Vec::new();
    cooker.feed(b"a\r\nb\r\n", &mut events);
    assert_eq!(events, vec![line(41, "a"), line(42, "b")]);
    assert_eq!(cooker.cursor().line, LineNo(43));
}

#[test]
fn bounds_blanks_from_control_sequences() {
    let input = b"ab\x1b[65535@\x1b[65535Cx\r\n".repeat(50);
    let cooked = cook(&input);
    assert_eq!(cooked.events.len(), 50);
    assert!(texts(&cooked.events).iter().all(|text| text.len() <= 4097));
}

/// Inputs that exercise every path where state crosses a feed boundary:
/// split UTF-8, split CSI and OSC, OSC ended by `ESC \`, wide and
/// combining characters, and invalid bytes next to escapes.
const CHUNKING_INPUTS: &[&[u8]] = &[
    b"\x1b]133;A\x07user@host:~/src$ \x1b]133;B\x07cargo build\r\n\x1b]133;C\x07",
    b"   Compiling vte v0.15.0\r\n\x1b[1m\x1b[32m    Finished\x1b[0m release\r\n",
    b" 10% [##        ]\r 50% [#####     ]\r100% [##########]\r\n",
    b"ls -lx\x08\x1b[K\x1b[3D\x1b[@z\x1b[2P\x1b[1K\x1b[5G\x1b[2X\tq\r\n",
    "中文\ra\x1b[4Gb😀\u{301}e\u{301}\u{302}\x08\x08字\r\n".as_bytes(),
    b"bad \xff\xe4\xb8\x1b[31m\xe4\x1b]133;D;0\x1b\\\xc2\x85\xc2\x9b\x85 end\n",
    // A character completed across feeds, then valid text, then invalid
    // bytes: vte alone would drop the text between.
    b"\xc2\x80 \x80x \xe4\xb8\xad ab\xff\xe4\xb8 y\xf0\x9f\x98\x80cd\x80\n",
    b"\x1b]0;title\x07\x1bP1$r0m\x1b\\\x1b]133;A;cl=m;aid=7\x1b\\$ \x1b[?2004h\x0b\x0c",
];

/// A small linear congruential generator, so chunk sizes vary but every
/// run sees the same ones.
pub(super) fn lcg(seed: u64) -> impl FnMut() -> usize {
    let mut state = seed;
    move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize % 17 + 1
    }
}

#[test]
fn chunking_never_changes_results() {
    let mut inputs: Vec<Vec<u8>> = CHUNKING_INPUTS.iter().map(|input| input.to_vec()).collect();
    inputs.push(CHUNKING_INPUTS.concat());
    inputs.push(typical_output(4096));
    for input in &inputs {
        let whole = cook(input);
        let shown = String::from_utf8_lossy(input);
        assert_eq!(cook_in(input, || 1), whole, "byte by byte: {shown:?}");
        for seed in 1..=8 {
            assert_eq!(cook_in(input, lcg(seed)), whole, "seed {seed}: {shown:?}");
        }
    }
}

/// Typical build output: ASCII lines of 60 to 120 characters, some with
/// SGR colour, ended by CR LF.
fn typical_output(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 200);
    let mut next = lcg(7);
    while out.len() < bytes {
        if next().is_multiple_of(4) {
            out.extend_from_slice(b"\x1b[1m\x1b[32m   Compiling\x1b[0m ");
        }
        let len = 60 + next() * 60 / 17;
        out.extend((0..len).map(|i| b"abcdefghij klmnopqrstuvwxyz0123456789/.-_"[(i * 7 + len) % 41]));
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Run with `cargo test --release -- --ignored --nocapture throughput`.
#[test]
#[ignore = "timing; run in release"]
fn throughput() {
    let input = typical_output(256 << 20);
    let mut cooker = Cooker::new(LineNo::FIRST);
    let mut events = Vec::new();
    let start = std::time::Instant::now();
    let cpu_start = thread_cpu_ns();
    let mut lines = 0;
    for chunk in input.chunks(64 << 10) {
        cooker.feed(chunk, &mut events);
        lines += events.len();
        cooker.recycle(&mut events);
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = (thread_cpu_ns() - cpu_start) as f64 / 1e9;
    let (rate, cpu_rate) = (input.len() as f64 / secs / 1e6, input.len() as f64 / cpu / 1e6);
    println!(
        "cooked {} MB, {lines} lines in {secs:.3} s: {rate:.0} MB/s; on CPU {cpu:.3} s: {cpu_rate:.0} MB/s",
        input.len() >> 20
    );
}

/// Nanoseconds this thread has run on a CPU (the first field of its
/// schedstat), so that a loaded machine does not slow the measure down.
fn thread_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    stat.split_whitespace().next().and_then(|ns| ns.parse().ok()).unwrap_or(0)
}

#[test]
fn marks_survive_compaction() {
    let redraw = "\rcafe\u{301} na\u{303}o \u{4e2d}\u{301}";
    let cooked = cook(redraw.repeat(3000).as_bytes());
    assert_eq!(cooked.current, "cafe\u{301} na\u{303}o \u{4e2d}\u{301}");
}

#[test]
fn reports_questions_to_the_terminal_and_keeps_their_text_out() {
    use crate::answers::Queries;
    let query = |queries: Queries, col: u32| CookEvent::Query { queries, at: at(1, col, col) };
    let cooked = cook(b"a\x1b[cb\x1b[>0c\x1b[6n\x1b]11;?\x07\x1b[31mc\x1b[18t\x1b[?25l\x1b[?2004$p\n");
    assert_eq!(
        cooked.events,
        vec![
            query(Queries::DEVICE, 1),
            query(Queries::DEVICE, 2),
            query(Queries::STATUS, 2),
            query(Queries::COLOUR, 2),
            query(Queries::WINDOW, 3),
            query(Queries::MODE, 3),
            line(1, "abc"),
        ]
    );
}

/// The end of a 20-column prompt on a terminal 40 wide, as bash's
/// integration marks it.
const PROMPT_40: &[u8] = b"prompt-of-twenty-ch$ \x1b]133;B;dtmcp=1.2.3;cols=40\x07";

/// Bytes bash's readline wrote (captured from a tmux pane 40 wide) with
/// `PROMPT_40`'s prompt before them.
fn at_prompt_40(typed: &[u8]) -> Vec<u8> {
    [PROMPT_40, typed].concat()
}

#[rstest]
// Typed a key at a time: at the margin readline prints a blank that wraps
// and returns to the new row's start.
#[case::typed_past_the_margin(
    b"echo abcdefghijklmn \ropqrstuvwxyz12\r\n",
    "prompt-of-twenty-ch$ echo abcdefghijklmnopqrstuvwxyz12"
)]
// Pasted: the character after the margin, a return, and that character again.
#[case::pasted_past_the_margin(
    b"echo 012345678901234\r45678901234567890\r\n",
    "prompt-of-twenty-ch$ echo 0123456789012345678901234567890"
)]
// Erased back over the margin: readline goes up a row (reverse index) and
// draws the prompt and the line again; down is a line feed.
#[case::erased_back_over_the_margin(
    b"echo abcdefghijklmn \ropq\x08 \x08\x08 \x08\x08 \x08\x1bMprompt-of-twenty-ch$ echo abcdefghijklmn \r\x1b[K\
      \x1bMprompt-of-twenty-ch$ echo abcdefghijklm\x1b[K\r\n\r\x1b[K\x1bMprompt-of-twenty-ch$ echo abcdefghijklm\
      \x08 \x08XY \rZWVU\x08\x08\x08\r\x1bMprompt-of-twenty-ch$ echo abcdefghijklX\x08\x08\x08@klXY\x1b[1@Z\
      \x1bMompt-of-twenty-ch$ echo abcdefghij@\r\n\r\r\n",
    "prompt-of-twenty-ch$ echo abcdefghij@klXYZWVU"
)]
fn a_line_typed_past_the_margin_is_read_whole(#[case] typed: &[u8], #[case] line: &str) {
    let input = at_prompt_40(typed);
    let cooked = cook(&input);
    assert_lines!(&input, &cooked, vec![line], "");
    // In any pieces, the same.
    for size in [1, 3, 7] {
        assert_eq!(texts(&cook_in(&input, || size).events), vec![line], "fed {size} bytes at a time");
    }
}

#[test]
fn only_the_typed_line_wraps_and_output_after_it_does_not() {
    // Output is never wrapped: a return in a long line of output goes back
    // to the line's start, as before.
    let input = [&at_prompt_40(b"echo x\r\n")[..], &[b'a'; 50][..], b"\rb\r\n"].concat();
    let cooked = cook(&input);
    let after = format!("b{}", "a".repeat(49));
    assert_lines!(&input, &cooked, vec!["prompt-of-twenty-ch$ echo x", after.as_str()], "");
    // A prompt's end without a width, or with a nonsense one, does not wrap.
    for marker in [&b"\x1b]133;B;dtmcp=1.2.3\x07"[..], b"\x1b]133;B;dtmcp=1.2.3;cols=1\x07", b"\x1b]133;B;cols=x\x07"] {
        let input = [&b"p$ "[..], marker, b"echo abcdefghijklmnopqrstuvwxyz0123456789ABCD \rEF\r\n"].concat();
        assert_lines!(&input, &cook(&input), vec!["EF echo abcdefghijklmnopqrstuvwxyz0123456789ABCD"], "");
    }
}

#[test]
fn a_line_pasted_to_the_margin_ends_at_the_commands_marker() {
    // The line fills the row to its last column: readline wraps with a
    // blank, goes up, draws the line again and presses Enter from the row
    // above the one it reached (captured as `at_prompt_40`'s are, with a
    // 23-column prompt).
    let input =
        b"pp-of-twenty-three-ch$ \x1b]133;B;dtmcp=1.2.3;cols=40\x07echo hello; false \r\x1bMpp-of-twenty-three-ch$ \
      echo hello; fals\x1b[Ke\r\n\x1b[?2004l\r\x1b]133;C;dtmcp=1.3.4\x07hello\r\n";
    for size in [usize::MAX, 1, 4] {
        let cooked = cook_in(input, || size);
        assert_lines!(input, &cooked, vec!["pp-of-twenty-three-ch$ echo hello; false", "hello"], "");
    }
}

#[test]
fn a_line_that_shrank_back_into_one_row_ends_at_the_commands_marker() {
    // Typed past the margin, erased back to one row, Enter: readline's
    // line feed stops on the row it had reached, and the command's
    // marker ends the line there.
    let typed =
        b"echo abcdefghijklmn \ropq\x08 \x08\x08 \x08\x08 \x08\x1bMprompt-of-twenty-ch$ echo abcdefghijklmn \r\x1b[K\
      \x1bMprompt-of-twenty-ch$ echo abcdefghijklm\x1b[K\r\n\r\x1b[K\x1bMprompt-of-twenty-ch$ echo abcdefghijklm\
      \x08 \x08\x08 \x08\x08 \x08\x08 \x08\r\n\x1b[?2004l\r\x1b]133;C;dtmcp=1.3.4\x07abcdefghi\r\n\x1b[?2004hprompt$ ";
    let input = at_prompt_40(typed);
    for size in [usize::MAX, 1, 5] {
        let cooked = cook_in(&input, || size);
        assert_lines!(&input, &cooked, vec!["prompt-of-twenty-ch$ echo abcdefghi", "abcdefghi"], "prompt$");
        let marker = cooked.events.iter().find_map(|e| match e {
            CookEvent::Osc133 { params, at } if params.starts_with(b"C;") => Some(*at),
            _ => None,
        });
        assert_eq!(marker.map(|at| at.line), Some(LineNo(2)), "the command's output starts on the next line");
    }
}

#[test]
fn an_edit_just_past_a_rows_last_column_leaves_the_next_row() {
    // Row 0 is drawn again to its last column (the wrap pending), then
    // erased to its right: past its end there is nothing to erase, and row
    // 1 stays.
    let input = b"p$ \x1b]133;B;dtmcp=1.2.3;cols=10\x07abcdefgKLM\r\x1bMp$ abcdefg\x1b[K\x1b[2P\x1b[X\r\n\r\n";
    assert_lines!(input, &cook(input), vec!["p$ abcdefgKLM"], "");
}

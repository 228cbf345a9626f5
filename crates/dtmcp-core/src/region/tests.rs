//! Table tests of the tracker: marker sequences as the integration prints
//! them, through a real cooker; nested and killed shells, spoofed markers,
//! checkpoints and input regions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rstest::rstest;

use super::*;
use crate::cook::Cooker;
use crate::pipeline::Pipeline;

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
/// a time; returns the changes and the pipeline.
fn track_in(secret: Option<Secret>, bytes: &[u8], piece: usize) -> (Vec<RegionChange>, Pipeline) {
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(secret, RegionId(1)));
    let mut changes = Vec::new();
    for (n, chunk) in bytes.chunks(piece).enumerate() {
        pipe.feed(chunk, n as u64, &mut changes, |_| {});
    }
    (changes, pipe)
}

/// One line per region (its final form), then one for the shell state;
/// chunking must not change any of it.
fn track(secret: Option<Secret>, bytes: &[u8]) -> Vec<String> {
    let (changes, Pipeline { tracker, .. }) = track_in(secret.clone(), bytes, bytes.len().max(1));
    let (by_byte, Pipeline { tracker: by_byte_tracker, .. }) = track_in(secret, bytes, 1);
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
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(Some(SECRET), RegionId(1)));
    pipe.feed(bytes.as_bytes(), 0, &mut Vec::new(), |_| {});
    pipe.tracker.typed(pipe.cooker.cursor().line, &pipe.cooker.current_text())
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

#[test]
fn a_history_search_drawn_over_the_prompt_is_not_an_empty_line() {
    let mut sh = Sh::new(100);
    let search = sh.prompt() + "\r(reverse-i-search)`': \x1b[K";
    assert_eq!(typed_after(&search), "(reverse-i-search)`':");
    let found = sh.prompt() + "\r(reverse-i-search)`ls': echo ls-was-here\x1b[K";
    assert_eq!(typed_after(&found), "(reverse-i-search)`ls': echo ls-was-here");
    assert_eq!(typed_after(&(sh.prompt() + "\r(arg: 3) ")), "(arg: 3)");
    // Given up (ctrl+g), the prompt is drawn again: nothing is typed.
    let gone = search + "\r" + "\x1b[K" + "$ ";
    assert_eq!(typed_after(&gone), "");
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
    // No prompt end was seen: its whole line is the label.
    r#"2 d0 "echo x" 3:0-4:0 exit 0 [0]"#,
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
    let (mut changes, mut pipe) = track_in(Some(SECRET), before.as_bytes(), 7);
    let tracker = &mut pipe.tracker;
    assert_eq!(tracker.shell().open.len(), 2);
    let at = Cursor { line: LineNo(4), col: 0, text_len: 0 };
    // Not the outer shell (its `bash` still runs): the inner one.
    let ended = tracker.close_ended_unseen(|r| r.pid == 200, at, 5, &mut changes);
    assert!(ended);
    let shell = tracker.shell();
    assert_eq!((shell.open.len(), shell.at_prompt, shell.prompts, shell.pid), (1, true, 3, 200));
    let closed = changes.iter().rev().map(region_of).find(|r| r.pid == 200).expect("closed");
    assert_eq!((closed.end, closed.exit), (Some(LinePos { line: LineNo(4), bytes: 0 }), None));
    pipe.cooker = Cooker::new(LineNo(4));
    pipe.feed((String::from("echo y") + &inner.enter()).as_bytes(), 6, &mut changes, |_| {});
    let opened = changes.iter().map(region_of).next_back().expect("opened");
    assert_eq!((opened.command.as_str(), opened.end), ("echo y", None));
    // Nothing at a prompt: nothing ends.
    assert!(!pipe.tracker.close_ended_unseen(|_| false, at, 7, &mut changes));
}

#[rstest]
#[case::another_sessions_secret(Some(Secret { keys: [9, 8, 7, 6] }))]
#[case::no_secret_configured(None)]
fn untrusted_markers_change_nothing(#[case] secret: Option<Secret>) {
    assert_eq!(track(secret, simple().as_bytes()), ["prompts 0 regions 0 open [] pid 0 plain"]);
}

#[test]
fn ids_continue_from_next_id() {
    let tracker = RegionTracker::new(Some(SECRET), RegionId(41));
    assert_eq!(tracker.shell().regions, 40);
    let mut pipe = Pipeline::new(Cooker::new(LineNo(7)), tracker);
    let mut changes = Vec::new();
    pipe.feed(simple().as_bytes(), 5, &mut changes, |_| {});
    let tracker = pipe.tracker;
    let ids: Vec<RegionId> = changes.iter().map(|c| region_of(c).id).collect();
    assert_eq!(ids, [RegionId(41), RegionId(41)]);
    assert_eq!(tracker.shell().regions, 41);
}

/// Feeds `bytes` whole, then lets the tracker see the unfinished line
/// as the pump does after each chunk.
fn feed(pipe: &mut Pipeline, bytes: &str, now: u64) -> Vec<RegionChange> {
    let mut changes = Vec::new();
    pipe.feed(bytes.as_bytes(), now, &mut changes, |_| {});
    pipe.after_output(now, &mut changes);
    changes
}

fn input(label: &str) -> InputSpec {
    InputSpec { label: label.into(), pid: 42, prompt_pattern: None, timeout_ms: 60_000 }
}

#[test]
fn a_line_typed_into_gdb_is_an_input_region_ending_at_its_prompt() {
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(None, RegionId(1)));
    feed(&mut pipe, "Reading symbols from bug...\r\n(gdb) ", 1);
    let mut changes = Vec::new();
    let at = (pipe.cooker.current_text(), pipe.cooker.cursor());
    let opened = pipe.tracker.open_input(&input("(gdb) bt"), (&at.0, at.1), 2, &mut changes).expect("opens");
    assert_eq!((opened.kind, opened.start.line), (RegionKind::Input, LineNo(3)));
    assert_eq!(pipe.tracker.shell().input, Some(opened.id));
    assert!(feed(&mut pipe, "bt\r\n#0  main () at bug.c:5\r\n", 3).is_empty());
    let changes = feed(&mut pipe, "(gdb) ", 4);
    let closed: Vec<String> = changes.iter().map(|c| summary(region_of(c))).collect();
    assert_eq!(closed, [r#"1 d0 "(gdb) bt" 3:0-4:0 no exit"#]);
    assert_eq!((pipe.tracker.shell().input, pipe.tracker.next_tick_ms()), (None, None));
}

#[test]
fn an_input_region_open_at_a_checkpoint_ends_when_the_next_logger_starts() {
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(None, RegionId(1)));
    feed(&mut pipe, "(gdb) ", 1);
    let at = (pipe.cooker.current_text(), pipe.cooker.cursor());
    let opened = pipe.tracker.open_input(&input("(gdb) run"), (&at.0, at.1), 2, &mut Vec::new()).expect("opens");
    feed(&mut pipe, "run\r\nStarting program\r\n", 3);
    let snap: TrackerSnapshot =
        serde_json::from_str(&serde_json::to_string(&pipe.tracker.snapshot()).expect("json")).expect("read back");
    let mut next = RegionTracker::restore(None, snap);
    let mut changes = Vec::new();
    next.close_orphans(|_| true, pipe.cooker.cursor(), 9, &mut changes);
    let closed: Vec<&Region> = changes.iter().map(region_of).collect();
    assert_eq!(closed.len(), 1, "{changes:?}");
    assert_eq!((closed[0].id, closed[0].ended_ms, closed[0].exit), (opened.id, Some(9), None));
    assert_eq!((next.shell().input, next.next_tick_ms()), (None, None));
}

#[test]
fn an_input_region_nests_in_the_command_and_ends_with_it() {
    let mut sh = Sh::new(100);
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(Some(SECRET), RegionId(1)));
    let start = sh.prompt() + "python3" + &sh.enter() + ">>> ";
    feed(&mut pipe, &start, 1);
    let mut changes = Vec::new();
    let at = (pipe.cooker.current_text(), pipe.cooker.cursor());
    pipe.tracker.open_input(&input(">>> exit()"), (&at.0, at.1), 2, &mut changes).expect("opens");
    let changes = feed(&mut pipe, &("exit()\r\n".to_string() + &sh.done(0, "0")), 3);
    let got: Vec<String> = changes.iter().map(|c| summary(region_of(c))).collect();
    assert_eq!(got, [r#"2 d1 ">>> exit()" 3:0-3:0 in 1 no exit"#, r#"1 d0 "python3" 2:0-3:0 exit 0 [0]"#]);
}

#[test]
fn a_program_without_a_known_prompt_settles_and_a_new_input_ends_the_last() {
    let mut pipe = Pipeline::new(Cooker::new(LineNo::FIRST), RegionTracker::new(None, RegionId(1)));
    let mut changes = Vec::new();
    let at = (pipe.cooker.current_text(), pipe.cooker.cursor());
    pipe.tracker.open_input(&input("hello"), (&at.0, at.1), 1_000, &mut changes).expect("opens");
    feed(&mut pipe, "hello\r\nhello\r\n", 1_010);
    assert_eq!(pipe.tracker.next_tick_ms(), Some(1_010 + SETTLE_MS));
    pipe.tracker.tick(pipe.cooker.cursor(), 1_100, &mut changes);
    assert_eq!(pipe.tracker.shell().input, Some(RegionId(1)));
    let at = (pipe.cooker.current_text(), pipe.cooker.cursor());
    changes.clear();
    pipe.tracker.open_input(&input("again"), (&at.0, at.1), 1_200, &mut changes).expect("opens");
    let got: Vec<String> = changes.iter().map(|c| summary(region_of(c))).collect();
    assert_eq!(got, [r#"1 d0 "hello" 2:0-3:0 no exit"#, r#"2 d0 "again" 4:0- running"#]);
    changes.clear();
    pipe.tracker.tick(pipe.cooker.cursor(), 1_200 + 60_000, &mut changes);
    assert_eq!(changes.len(), 1, "the timeout ends it");
    let bad = InputSpec { prompt_pattern: Some("(".into()), ..input("x") };
    assert!(pipe.tracker.open_input(&bad, ("", pipe.cooker.cursor()), 0, &mut changes).is_err());
}

#[rstest]
#[case::inside("héllo", 1, "éllo")]
#[case::mid_char("héllo", 2, "llo")]
#[case::beyond_trimmed_end("ab", 5, "")]
#[case::start("ab", 0, "ab")]
fn tails_stay_on_char_boundaries(#[case] text: &str, #[case] start: u32, #[case] want: &str) {
    assert_eq!(tail_from(text, start), want);
}

#[rstest]
#[case::own_shell(RegionKind::Command, 0, "vm", false)]
#[case::a_shell_inside(RegionKind::Command, 1, "vm", true)]
#[case::far_shell(RegionKind::Command, 1, "db1", true)]
#[case::a_program_here(RegionKind::Input, 1, "vm", false)]
#[case::a_program_far(RegionKind::Input, 2, "db1", true)]
#[case::host_unknown(RegionKind::Command, 1, "", false)]
fn regions_name_their_host_where_it_tells_something(
    #[case] kind: RegionKind,
    #[case] depth: u32,
    #[case] host: &str,
    #[case] tagged: bool,
) {
    let r = Region { kind, depth, host: host.into(), ..Region::default() };
    assert_eq!(tagged_with_host(&r, "vm"), tagged);
}

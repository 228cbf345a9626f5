//! The fault-injection suite (issue 10): the real binaries, tmux and
//! clients, broken on purpose. Each test is named for what it proves;
//! docs/testing.md lists them by the fault they inject. The slow sizes (2,000,000 lines under ten
//! kills, a 2 GB flood for 60 s, 1,000 calls over ten restarts, 100
//! connect/kill cycles, a 31 s outage) run with `DTMCP_SLOW=1`; without it
//! the same tests run smaller and say so.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::raw::{RawClient, assert_no_control_chars, tool_text};
use crate::support::{
    Person, SERVER, Serve, World, bridged, has_exited, logger_pid, poll, regions, size, slow, until_answering,
};

/// A pseudo-random number from the clock, for kill moments; printed so a
/// failure can be told apart from another.
fn jitter(max_ms: u64) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.subsec_nanos());
    u64::from(nanos.wrapping_mul(2_654_435_761)) % max_ms.max(1)
}

/// The bytes `seq 1 n` prints through a terminal (which turns `\n` into
/// `\r\n`).
fn seq_bytes(n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(n as usize * 9);
    for i in 1..=n {
        v.extend_from_slice(format!("{i}\r\n").as_bytes());
    }
    v
}

/// Whether `raw.log` of `dir` holds `want` as one contiguous slice.
fn raw_holds(dir: &Path, want: &[u8]) -> bool {
    let raw = std::fs::read(dir.join("raw.log")).expect("raw.log");
    memchr::memmem::find(&raw, want).is_some()
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

// ----------------------------------------------------------- a router killed

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_killed_during_seq_loses_no_byte_answers_once_and_types_once() {
    let n: u64 = size("lines of seq under router kills", 300_000, 2_000_000);
    let kills: u32 = size("router kills under seq", 2, 6);
    let (world, serve, mut bridge) = bridged("k9", "k1").await;
    let mut serve = Some(serve);
    let command = format!("seq 1 {n}; echo seq-done-$((6*7))");
    let id = bridge.post_call("run", json!({"session": "k1", "command": command, "timeout": 300})).await;
    let answer = {
        let answer = bridge.answer(id, Duration::from_secs(600));
        tokio::pin!(answer);
        let mut killed = 0;
        loop {
            tokio::select! {
                a = &mut answer => break a,
                _ = tokio::time::sleep(Duration::from_millis(150 + jitter(900))), if killed < kills => {
                    if let Some(s) = serve.take() {
                        eprintln!("kill -9 of the router {}", s.pid());
                        s.kill();
                    }
                    tokio::time::sleep(Duration::from_millis(jitter(400))).await;
                    serve = Some(tokio::task::block_in_place(|| Serve::start(&world, &[])));
                    killed += 1;
                }
            }
        }
    };
    let (text, err) = tool_text(&answer);
    assert!(!err, "{text}");
    assert_has!(text, "exit 0");
    // Shaped as a fresh run's reply, whether answered live or replayed by
    // a restarted server: head and tail, not the first lines only.
    assert_has!(text, "first and last shown");
    assert_has!(text, "seq-done-42");
    // Exactly once: no second answer to the same id comes later.
    let later = bridge.drain(Duration::from_millis(1500)).await;
    assert!(later.iter().all(|m| m["id"] != id), "a second answer to {id}: {later:?}");
    let dir = world.session_dir("k1");
    assert_eq!(regions::ids_of(&dir, &command), vec![1], "the command was typed once");
    assert_has!(std::fs::read_to_string(dir.join("session.txt")).expect("text"), "seq-done-42");
    assert!(raw_holds(&dir, &seq_bytes(n)), "raw.log does not hold seq 1 {n} byte for byte");
    // The router answers after it all.
    let (text, err) =
        bridge.call("run", json!({"session": "k1", "command": "echo after"}), Duration::from_secs(20)).await;
    assert!(!err, "{text}");
}

// ------------------------------------------------ a logger killed or stopped

/// A flood that lasts: numbered chunks of base64 lines with a short pause
/// after each, so that a logger can be broken while it is under way.
struct Flood {
    /// The command that prints it, then `flood-end-9`.
    command: String,
    /// One chunk as a terminal prints it (`\n` turned into `\r\n`).
    chunk: Vec<u8>,
    /// How many chunks.
    chunks: u64,
}

/// Size of one chunk of a [`Flood`], in bytes of base64.
const CHUNK: u64 = 40_000;

impl Flood {
    /// Writes a chunk file under `dir` for a flood of about `mb` MB.
    fn new(dir: &Path, mb: u64) -> Flood {
        let file = dir.join("chunk.txt");
        let made = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("head -c {} /dev/urandom | base64 -w 100 > '{}'", CHUNK * 3 / 4, file.display()))
            .status()
            .expect("make the chunk file");
        assert!(made.success());
        let chunks = mb * 1_000_000 / CHUNK;
        let command = format!(
            "for i in $(seq 1 {chunks}); do echo chunk-$i; cat '{}'; sleep 0.02; done; echo flood-end-$((3*3))",
            file.display()
        );
        Flood { command, chunk: through_terminal(&file), chunks }
    }

    /// What the terminal prints for chunks `from..=self.chunks`.
    fn bytes_from_chunk(&self, from: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for i in from..=self.chunks {
            v.extend_from_slice(format!("chunk-{i}\r\n").as_bytes());
            v.extend_from_slice(&self.chunk);
        }
        v
    }

    /// Types the flood into `name`, the run returning at once.
    async fn start(&self, s: &crate::support::Server, name: &str) {
        let r = s.ok("run", json!({"session": name, "command": self.command, "timeout": 0.3})).await;
        assert_has!(r, "still running");
    }

    /// Waits until `dir`'s raw.log holds more than `bytes` and checks that
    /// the flood is still under way (its end not yet logged).
    async fn wait_under_way(&self, dir: &Path, bytes: u64) {
        let raw = dir.join("raw.log");
        poll::until_async("the flood to be under way", Duration::from_secs(60), async || {
            std::fs::metadata(&raw).is_ok_and(|m| m.len() > bytes)
        })
        .await;
        assert!(!raw_holds(dir, b"flood-end-9"), "the flood ended before the logger was broken: make it longer");
    }
}

/// A file as a terminal prints it.
fn through_terminal(file: &Path) -> Vec<u8> {
    let body = std::fs::read(file).expect("flood file");
    let mut v = Vec::with_capacity(body.len() + body.len() / 50);
    for &b in &body {
        if b == b'\n' {
            v.push(b'\r');
        }
        v.push(b);
    }
    v
}

/// The number of the first chunk whose header line starts in `raw` at or
/// after `offset`.
fn first_chunk_after(raw: &[u8], offset: usize) -> Option<u64> {
    let at = offset + memchr::memmem::find(raw.get(offset..)?, b"\nchunk-")? + b"\nchunk-".len();
    let digits: Vec<u8> = raw[at..].iter().copied().take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logger_killed_mid_flood_leaves_a_bounded_gap_and_loses_nothing_after_it() {
    let mb: u64 = size("MB of the flood under a broken logger", 8, 50);
    let w = World::new();
    let s = w.server().await;
    s.create("g1").await;
    let dir = w.session_dir("g1");
    let flood = Flood::new(w.tmp.path(), mb);
    flood.start(&s, "g1").await;
    flood.wait_under_way(&dir, 1_000_000).await;
    let pid = logger_pid(&dir).expect("the logger runs");
    // Taken before the kill: the router sees its connection to the logger
    // close and repairs within milliseconds, maybe before a clock read here
    // after the signal.
    let killed_ms = dtmcp::config::now_ms();
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    // The next call finds the logger dead, attaches a new one and says so;
    // the wait then follows the flood to its end.
    let mut replies = s.ok("wait", json!({"session": "g1", "timeout": 120})).await;
    for _ in 0..5 {
        if replies.contains("flood-end-9") {
            break;
        }
        replies.push_str(&s.ok("wait", json!({"session": "g1", "timeout": 120})).await);
    }
    assert_has!(replies, "log gap in g1");
    assert_has!(replies, "its logger had died");
    assert_has!(replies, "flood-end-9");
    assert_ne!(logger_pid(&dir), Some(pid), "the dead logger was not replaced");
    let gaps = std::fs::read_to_string(dir.join("gaps.jsonl")).expect("gaps.jsonl");
    let gap: Value = serde_json::from_str(gaps.lines().last().expect("a gap")).expect("json");
    let (from, to) = (gap["from_ms"].as_u64().expect("from"), gap["to_ms"].as_u64().expect("to"));
    assert!(from > 0 && from <= killed_ms + 1_000 && killed_ms <= to && from <= to, "the gap's bounds: {gap}");
    let offset = gap["raw_offset"].as_u64().expect("raw_offset");
    assert!(offset > 1_000_000, "the gap begins where logging stopped, past the first MB: {gap}");
    assert_has!(std::fs::read_to_string(dir.join("session.txt")).expect("text"), "[log gap:");
    // Nothing after the gap is lost: from the first chunk the new logger
    // saw begin, every byte of the rest of the flood is in raw.log.
    let raw = std::fs::read(dir.join("raw.log")).expect("raw.log");
    let first = first_chunk_after(&raw, offset as usize).expect("a chunk after the gap");
    assert!(first > 1 && first <= flood.chunks, "the kill was not mid-flood: chunk {first} of {}", flood.chunks);
    let rest = flood.bytes_from_chunk(first);
    assert!(memchr::memmem::find(&raw[offset as usize..], &rest).is_some(), "raw.log lost bytes after the gap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logger_stopped_mid_flood_is_reported_not_replaced_and_loses_nothing() {
    let mb: u64 = size("MB of the flood under a broken logger", 8, 50);
    let w = World::new();
    let s = w.server().await;
    s.create("g2").await;
    let dir = w.session_dir("g2");
    let flood = Flood::new(w.tmp.path(), mb);
    flood.start(&s, "g2").await;
    flood.wait_under_way(&dir, 1_000_000).await;
    let pid = logger_pid(&dir).expect("the logger runs");
    signal(pid, nix::sys::signal::Signal::SIGSTOP);
    // While it is stopped, replies say so at once (not after their
    // timeout), and nothing repairs it behind its back (a second logger
    // would write the same files).
    for (tool, args) in [
        ("wait", json!({"session": "g2", "timeout": 60})),
        ("read", json!({"session": "g2"})),
        ("run", json!({"session": "g2", "command": "echo not-now", "timeout": 60})),
    ] {
        let started = Instant::now();
        let r = s.call(tool, args).await;
        assert!(started.elapsed() < Duration::from_secs(8), "{tool} took {:?}: {}", started.elapsed(), r.text);
        assert!(r.is_error, "{tool} while the logger is stopped: {}", r.text);
        assert_has!(r.text, "stalled");
        assert_has!(r.text, "stopped");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(logger_pid(&dir), Some(pid), "the stopped logger was replaced while it lived");
    signal(pid, nix::sys::signal::Signal::SIGCONT);
    let r = s.ok("wait", json!({"session": "g2", "timeout": 120})).await;
    assert_has!(r, "flood-end-9");
    assert_eq!(logger_pid(&dir), Some(pid), "the same logger carries on");
    assert!(raw_holds(&dir, &flood.bytes_from_chunk(1)), "raw.log lost bytes of the flood");
    assert!(!raw_holds(&dir, b"not-now"), "a line was typed while the logger was stopped");
    assert!(
        !dir.join("gaps.jsonl").exists()
            || std::fs::read_to_string(dir.join("gaps.jsonl")).unwrap_or_default().is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_ending_inside_a_logger_gap_is_not_left_running() {
    let w = World::new();
    let s = w.server().await;
    s.create("g3").await;
    let dir = w.session_dir("g3");
    let r = s.ok("run", json!({"session": "g3", "command": "sleep 1; echo gone-$((2+5))", "timeout": 0.2})).await;
    assert_has!(r, "still running");
    // No router to repair the logger: the command ends, and its shell
    // shows its prompt, while nothing logs.
    s.kill().await;
    let pid = logger_pid(&dir).expect("the logger runs");
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let s = w.server().await;
    let r = s.call("run", json!({"session": "g3", "command": "echo after-$((2+6))", "timeout": 20})).await;
    assert!(!r.is_error, "the command that ended in the gap is taken for running: {}", r.text);
    assert_has!(r.text, "after-8");
    assert_has!(r.text, "log gap in g3");
}

// ------------------------------------------------------ a tmux server killed

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_tmux_server_ends_its_five_sessions_and_leaves_no_orphans() {
    let w = World::new();
    let s = w.server().await;
    let names = ["d1", "d2", "d3", "d4", "d5"];
    for n in names {
        s.create(n).await;
    }
    s.run("d1", "echo before-the-kill").await;
    let pid = String::from_utf8_lossy(&w.tmux(&["display", "-p", "#{pid}"]).stdout).trim().parse::<i32>().expect("pid");
    let loggers: Vec<i32> = names.iter().map(|n| logger_pid(&w.session_dir(n)).expect("logger")).collect();
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    // Loggers see their input end and exit; nothing of the sessions stays.
    poll::until_async("the loggers to exit", Duration::from_secs(10), async || loggers.iter().all(|&p| has_exited(p)))
        .await;
    let server_pid = s.pid() as i32;
    let orphans = async || {
        let left: Vec<(i32, String)> = w.processes().into_iter().filter(|(p, _)| *p != server_pid).collect();
        if left.is_empty() { Ok(()) } else { Err(format!("{left:?}")) }
    };
    poll::until_async("no orphan processes", Duration::from_secs(10), orphans).await;
    let list = s.ok("session_list", json!({})).await;
    for n in names {
        assert_has!(list, n);
    }
    assert_has!(list, "tmux");
    for n in names {
        let r = s.call("read", json!({"session": n})).await;
        assert!(!r.text.contains("exit 0"), "{n} reads as if it exited 0: {}", r.text);
        let regions = std::fs::read_to_string(w.session_dir(n).join("regions.jsonl")).unwrap_or_default();
        assert!(!regions.contains("\"exit\":0,\"ended_by\":\"tmux"), "{regions}");
    }
    assert_has!(list, "ended because its tmux server died");
    // The router carries on and makes a new session on a new tmux server.
    s.create("d6").await;
    assert_has!(s.run("d6", "echo alive-$((2*3))").await, "alive-6");
}

// -------------------------------------------------------------- logs deleted

/// Links in `/proc/PID/fd` that point at deleted files.
fn deleted_fds(pid: i32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.ends_with("(deleted)"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_log_deleted_while_logging_is_reported_and_logging_starts_again() {
    let w = World::new();
    let s = w.server().await;
    s.create("u1").await;
    let dir = w.session_dir("u1");
    s.run("u1", "echo first").await;
    std::fs::remove_file(dir.join("raw.log")).expect("rm raw.log");
    let mut replies = String::new();
    for i in 0..10 {
        // A call in flight when the logger quits may fail; the next one
        // gets the new logger and the report.
        let r = s.call("run", json!({"session": "u1", "command": format!("seq 1 2000; echo again-{i}")})).await;
        replies.push_str(&r.text);
        if replies.contains("deleted") && dir.join("raw.log").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_has!(replies, "raw.log was deleted");
    assert!(dir.join("raw.log").exists(), "logging did not start again");
    let pid = logger_pid(&dir).expect("a logger runs");
    assert_eq!(deleted_fds(pid), Vec::<String>::new(), "the logger writes to deleted files");
    let r = s.run("u1", "echo logged-again").await;
    assert_has!(r, "logged-again");
    assert!(std::fs::read(dir.join("raw.log")).is_ok_and(|raw| memchr::memmem::find(&raw, b"logged-again").is_some()));
}

/// Removes `dir` as `rm -rf` would, though the logger may be writing a new
/// file in it meanwhile (a removal that finds the directory not empty
/// again is retried).
fn remove_tree_while_written(dir: &Path) {
    for _ in 0..50 {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => continue,
            Err(e) => panic!("rm -r {}: {e}", dir.display()),
        }
    }
    panic!("rm -r {}: the directory kept filling", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_directory_deleted_while_logging_is_reported_and_made_again() {
    let w = World::new();
    let s = w.server().await;
    s.create("u2").await;
    let dir = w.session_dir("u2");
    s.run("u2", "echo first").await;
    remove_tree_while_written(&dir);
    // Output after the deletion: the logger must notice it.
    w.tmux(&["send-keys", "-t", "=u2:", "-l", "seq 1 3000"]);
    w.tmux(&["send-keys", "-t", "=u2:", "Enter"]);
    let mut replies = String::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        let r = s.call("run", json!({"session": "u2", "command": "echo probe", "timeout": 5})).await;
        replies.push_str(&r.text);
        replies.push('\n');
        // Done once the deletion was reported and a probe ran to its end
        // under the new logger (under load one may still be on its way,
        // or be typed before the new logger has seen a prompt).
        let finished = !r.is_error && r.text.contains("exit 0") && r.text.lines().any(|l| l == "probe");
        if replies.contains("deleted") && dir.join("raw.log").exists() && finished {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_has!(replies, "deleted");
    assert!(dir.join("raw.log").exists(), "logging did not start again");
    for p in w.processes() {
        assert_eq!(deleted_fds(p.0), Vec::<String>::new(), "{} holds deleted files", p.1);
    }
    let back = s.call("run", json!({"session": "u2", "command": "echo back-$((1+1))", "timeout": 60})).await;
    assert!(back.text.lines().any(|l| l == "back-2"), "{}\nafter the replies:\n{replies}", back.text);
}

// -------------------------------------------- a flood with a person attached

fn vm_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_with_a_person_attached_is_byte_exact_bounded_in_memory_and_stops_on_ctrl_c() {
    let mb: u64 = size("MB of the byte-exact flood with a person attached", 20, 2000);
    let secs: u64 = size("seconds of yes with a person attached", 3, 60);
    let w = World::new();
    let s = w.server().await;
    s.create("f1").await;
    let dir = w.session_dir("f1");
    let person = Person::attach(&w, "f1");
    // Byte-exact: a known file through the pane, found whole in raw.log.
    let file = w.tmp.path().join("flood.txt");
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("head -c {} /dev/urandom | base64 -w 76 > '{}'", mb * 750_000, file.display()))
        .status()
        .expect("flood file");
    assert!(made.success());
    let r = s.ok("run", json!({"session": "f1", "command": format!("cat '{}'", file.display()), "timeout": 600})).await;
    assert_has!(r, "exit 0");
    assert!(raw_holds(&dir, &through_terminal(&file)), "raw.log is not byte-exact");
    // A flood that does not end: ctrl+c must get through quickly.
    let r = s.ok("run", json!({"session": "f1", "command": "yes flood-line", "timeout": secs as f64})).await;
    assert_has!(r, "still running");
    let started = Instant::now();
    let r = s.ok("send", json!({"session": "f1", "keys": ["ctrl+c"]})).await;
    let w8 = s.ok("wait", json!({"session": "f1", "timeout": 10})).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "ctrl+c took {took:?}: {r}\n{w8}");
    assert_has!(s.run("f1", "echo after-flood").await, "after-flood");
    let rss = vm_kb(s.pid(), "VmHWM:");
    eprintln!("a flood with a person attached: router peak RSS {rss} kB after {mb} MB and {secs} s of yes");
    assert!(rss < 64 * 1024, "router peak RSS {rss} kB");
    drop(person);
}

// ------------------------------------------------------------- garbage bytes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_garbage_split_utf8_nul_c1_and_a_huge_osc_are_survived() {
    let w = World::new();
    let mut c = RawClient::start(&[], &w.env()).await;
    let t = Duration::from_secs(60);
    let (r, err) = c.call("session_create", json!({"name": "b1"}), t).await;
    assert!(!err, "{r}");
    let lines = [
        // Fixed bytes, not /dev/urandom: random data now and then holds a
        // terminal question whose answer tmux types at the next prompt in a
        // form the stray-answer check does not know yet (seen once: sixty
        // spaces and two invalid bytes), and a lottery has no place in CI.
        "python3 -c 'import random,sys; r=random.Random(7); sys.stdout.buffer.write(r.randbytes(300000))'; echo",
        "printf '\\xe6\\x97'; sleep 0.2; printf '\\xa5\\xe6\\x9c\\xac split\\n'",
        "printf 'nul:\\0:\\0\\0:end\\n'",
        "printf 'c1:\\x9b31m:\\xc2\\x9b:\\x85:bad\\xff\\xfeutf8\\n'",
        "printf '\\033]0;'; head -c 1048576 /dev/zero | tr '\\0' a; echo; echo osc-survived",
    ];
    for l in lines {
        let (text, err) = c.call("run", json!({"session": "b1", "command": l, "timeout": 60}), t).await;
        assert!(!err, "{l}: {text}");
        assert_no_control_chars(l, &text);
    }
    let (text, _) = c.call("run", json!({"session": "b1", "command": "echo still-$((2+2))"}), t).await;
    assert_has!(text, "still-4");
    let (cooked, err) = c.call("read", json!({"session": "b1", "view": "cooked"}), t).await;
    assert!(!err, "{cooked}");
    assert_no_control_chars("cooked", &cooked);
    assert_has!(cooked, "日本 split");
    assert_has!(cooked, "\u{fffd}");
    for view in ["screen", "raw"] {
        let (text, err) = c.call("read", json!({"session": "b1", "view": view}), t).await;
        assert!(!err, "{view}: {text}");
        assert_no_control_chars(view, &text);
    }
    let (found, _) = c.call("search", json!({"session": "b1", "pattern": "utf8"}), t).await;
    assert_no_control_chars("search", &found);
    let dir = w.session_dir("b1");
    assert!(logger_pid(&dir).is_some(), "the logger died");
    let text = std::fs::read_to_string(dir.join("session.txt")).expect("session.txt is UTF-8");
    assert_has!(text, "osc-survived");
    assert!(c.received.iter().all(|m| m.get("error").is_none()), "a protocol error");
}

// ---------------------------------------------------------- escape injection

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_injection_never_reaches_a_reply_or_the_server_log() {
    let w = World::new();
    let log = w.tmp.path().join("server.log");
    let mut child = std::process::Command::new(SERVER)
        .arg("serve")
        .envs(w.env())
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("serve");
    until_answering(&w);
    let socket = crate::support::socket_of(&w);
    let mut c = RawClient::start(&["connect", "--actor", "esc\u{1b}[31mred"], &w.env()).await;
    let t = Duration::from_secs(30);
    let (r, err) = c.call("session_create", json!({"name": "e1"}), t).await;
    assert!(!err, "{r}");
    let attacks = [
        "printf '\\033]52;c;ZWNobyBwd25lZA==\\a'; echo osc52",
        "printf '\\033]8;;http://evil.example/\\033\\\\link\\033]8;;\\033\\\\\\n'",
        "printf '\\033]0;title\\a\\033[21t\\033[20t\\033[>c\\033[6n'; echo reports",
        "printf '\\033P$q\"p\\033\\\\\\033P+q544e\\033\\\\'; echo decrqss",
        "printf 'bidi:\\xe2\\x80\\xaeevil\\xe2\\x80\\xac:\\xe2\\x81\\xa6x\\xe2\\x81\\xa9\\n'",
        "printf '\\x9b2J\\x9d0;c1title\\x07\\n'",
    ];
    let mut replies = Vec::new();
    for a in attacks {
        // The terminal's answers to the reports asked for land at the next
        // prompt; they are nobody's text, so no run is refused for them.
        let (text, err) = c.call("run", json!({"session": "e1", "command": a, "timeout": 10}), t).await;
        assert!(!err, "{a}: {text}");
        replies.push(text);
    }
    for view in ["cooked", "screen", "raw"] {
        replies.push(c.call("read", json!({"session": "e1", "view": view}), t).await.0);
    }
    replies.push(c.call("search", json!({"session": "e1", "pattern": "evil|title|bidi"}), t).await.0);
    replies.push(c.call("regions", json!({"session": "e1"}), t).await.0);
    for bad in ["x\u{1b}]0;pwn\u{7}", "a\u{9b}b", "\u{1b}[2J"] {
        let (text, err) = c.call("session_create", json!({"name": bad}), t).await;
        assert!(err, "a session named {bad:?} was made");
        replies.push(text);
    }
    replies.push(c.call("read", json!({"session": "\u{1b}[31m"}), t).await.0);
    replies.push(c.call("session_list", json!({}), t).await.0);
    for r in &replies {
        assert_no_control_chars("a reply", r);
        assert!(!r.contains('\u{202e}') && !r.contains('\u{2066}'), "a bidi override in a reply: {r:?}");
    }
    let (_, body) = crate::support::unix_get(&socket, "/api/sessions");
    assert_no_control_chars("/api/sessions", &body);
    signal(child.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let _ = child.wait();
    let text = String::from_utf8_lossy(&std::fs::read(&log).expect("log")).into_owned();
    assert_no_control_chars("the server log", &text);
}

// ------------------------------------------------------------ forged markers

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_replayed_markers_make_no_region_or_status() {
    let w = World::new();
    let s = w.server().await;
    s.create("m1").await;
    let dir = w.session_dir("m1");
    assert_has!(s.run("m1", "echo genuine; (exit 3)").await, "exit 3");
    let before = std::fs::read_to_string(dir.join("regions.jsonl")).expect("regions").lines().count();
    let regions_before = regions::count(&dir);
    // Without the secret: markers with a made-up proof, sequence numbers
    // far ahead, and the shell's own pid.
    let forged = "p=$$; for k in A B C; do printf '\\033]133;%s;dtmcp=%s.99999999999999.12345\\a' $k $p; done; \
                  printf '\\033]133;D;77;dtmcp=%s.99999999999999.54321;ps=77\\a' $p; echo forged-done";
    let r = s.run("m1", forged).await;
    assert_has!(r, "exit 0");
    assert!(!r.contains("exit 77"), "{r}");
    // Replayed with it: the log itself catted (its markers carry the
    // secret's proofs, with used sequence numbers) and a child that reads
    // the secret from its environment and prints an old marker again.
    let r = s
        .run(
            "m1",
            &format!(
                "cat '{}' >/dev/null; cat '{}' | head -c 20000; echo",
                dir.join("raw.log").display(),
                dir.join("raw.log").display()
            ),
        )
        .await;
    assert_has!(r, "exit 0");
    let replay = "python3 -c 'import os,re,sys; raw=open(sys.argv[1],\"rb\").read(); \
                  m=re.findall(rb\"\\x1b]133;D;[^\\x07]*\\x07\", raw); sys.stdout.buffer.write(m[0] if m else b\"\"); \
                  print(\"nonce-len\", len(os.environ.get(\"__DTMCP_NONCE\",\"\")))' ";
    let r = s.run("m1", &format!("{replay}'{}'", dir.join("raw.log").display())).await;
    assert_has!(r, "exit 0");
    assert_has!(r, "nonce-len");
    // Each command above is one region; nothing phantom appeared.
    assert_eq!(
        regions::count(&dir),
        regions_before + 3,
        "{}",
        std::fs::read_to_string(dir.join("regions.jsonl")).unwrap_or_default()
    );
    let text = std::fs::read_to_string(dir.join("regions.jsonl")).expect("regions");
    assert!(!text.contains("\"exit\":77"), "a forged status was believed: {text}");
    assert!(text.lines().count() > before);
    assert_has!(s.run("m1", "(exit 5)").await, "exit 5");
}

// ---------------------------------------------------------------- the bridge

/// Descriptors, threads and children of process `pid`.
fn footprint(pid: u32) -> (usize, usize, usize) {
    let count = |p: String| std::fs::read_dir(p).map_or(0, |d| d.count());
    let fds = count(format!("/proc/{pid}/fd"));
    let threads = count(format!("/proc/{pid}/task"));
    let children = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .map(|t| {
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default().split_whitespace().count()
                })
                .sum()
        })
        .unwrap_or(0);
    (fds, threads, children)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_calls_across_server_restarts_are_answered_once_and_typed_once() {
    let calls: u64 = size("bridge calls across server restarts", 120, 1000);
    let restarts: u64 = size("server restarts under bridge calls", 3, 10);
    let (world, serve, mut bridge) = bridged("many", "c1").await;
    let mut serve = Some(serve);
    let every = calls / (restarts + 1);
    let mut restarted = 0;
    for i in 0..calls {
        let tool = if i % 3 == 0 {
            ("run", json!({"session": "c1", "command": format!("echo call-{i}")}))
        } else {
            ("session_list", json!({}))
        };
        let id = bridge.post_call(tool.0, tool.1).await;
        if i > 0 && i % every == 0 && restarted < restarts {
            // Restart under the call in flight.
            if let Some(s) = serve.take() {
                s.kill();
            }
            serve = Some(Serve::start(&world, &[]));
            restarted += 1;
        }
        let answer = bridge.answer(id, Duration::from_secs(60)).await;
        let (text, err) = tool_text(&answer);
        assert!(!err, "call {i} ({}): {text}", tool.0);
        if tool.0 == "run" {
            assert_has!(text, format!("call-{i}"));
        }
    }
    let later = bridge.drain(Duration::from_millis(800)).await;
    assert!(later.is_empty(), "answers nobody asked for: {later:?}");
    let ids: Vec<&Value> = bridge.received.iter().filter_map(|m| m.get("id")).collect();
    let mut sorted: Vec<u64> = ids.iter().filter_map(|v| v.as_u64()).collect();
    let total = sorted.len();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), total, "some call was answered twice");
    // Each `run` was typed once.
    for i in (0..calls).step_by(3) {
        assert_eq!(regions::ids_of(&world.session_dir("c1"), &format!("echo call-{i}")).len(), 1, "call-{i}");
    }
    drop(serve);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridges_connected_and_killed_over_and_over_leave_the_server_flat() {
    let cycles: u32 = size("bridge connect/kill cycles", 20, 100);
    let (world, serve, mut first) = bridged("warm", "h1").await;
    first.call("run", json!({"session": "h1", "command": "echo warm"}), Duration::from_secs(20)).await;
    drop(first.close().await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = footprint(serve.pid());
    for i in 0..cycles {
        let mut c = RawClient::start(&["connect", "--actor", "cycler"], &world.env()).await;
        if i % 2 == 0 {
            c.call("run", json!({"session": "h1", "command": format!("echo cycle-{i}")}), Duration::from_secs(20))
                .await;
        } else {
            // Killed with a call in flight.
            c.post_call("run", json!({"session": "h1", "command": "sleep 0.2", "timeout": 5})).await;
        }
        let mut child = c.close().await;
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let mut after = footprint(serve.pid());
    for _ in 0..40 {
        if after.0 <= before.0 + 2 && after.1 <= before.1 + 1 && after.2 <= before.2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        after = footprint(serve.pid());
    }
    eprintln!("connect/kill cycles: server fds/threads/children before {before:?}, after {cycles} cycles {after:?}");
    assert!(after.0 <= before.0 + 2, "descriptors grew: {before:?} -> {after:?}");
    assert!(after.1 <= before.1 + 1, "threads grew: {before:?} -> {after:?}");
    assert!(after.2 <= before.2, "children grew: {before:?} -> {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_gives_up_on_a_31_second_outage_and_a_new_one_connects() {
    if !slow() {
        eprintln!(
            "skipped: the 31 s outage runs with DTMCP_SLOW=1 (a 30 s one is bridge::a_bridge_without_a_server_gives_up_after_30_seconds)"
        );
        return;
    }
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut c = RawClient::start(&["connect", "--actor", "out"], &world.env()).await;
    serve.kill();
    let started = Instant::now();
    let id = c.post_call("session_list", json!({})).await;
    let back = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(31)).await;
    });
    let answer = c.answer(id, Duration::from_secs(45)).await;
    assert!(answer.get("error").is_some(), "{answer}");
    assert!(started.elapsed() >= Duration::from_secs(29));
    back.await.expect("join");
    let _again = Serve::start(&world, &[]);
    let mut fresh = RawClient::start(&["connect", "--actor", "out"], &world.env()).await;
    let (_, err) = fresh.call("session_list", json!({}), Duration::from_secs(20)).await;
    assert!(!err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_whose_input_closes_with_a_call_in_flight_exits() {
    let (_world, _serve, mut c) = bridged("eof", "s1").await;
    c.post_call("run", json!({"session": "s1", "command": "sleep 1; echo late", "timeout": 5})).await;
    let mut child = c.close().await;
    let status =
        tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("the bridge exits").expect("status");
    assert!(status.code().is_some(), "{status:?}");
}

// ----------------------------------------------------------------- retention

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_racing_reads_takes_only_the_eligible_directory_and_leaves_link_targets_alone() {
    let w = World::new();
    let fake_home = w.tmp.path().join("home");
    std::fs::create_dir_all(fake_home.join("work")).expect("home");
    std::fs::write(fake_home.join("work/precious.txt"), "keep me").expect("precious");
    let s = w.server().await;
    for n in ["r1", "r2", "r3"] {
        s.create(n).await;
        s.run(n, &format!("echo output-of-{n}")).await;
    }
    s.ok("session_close", json!({"session": "r1"})).await;
    s.ok("session_close", json!({"session": "r2"})).await;
    std::os::unix::fs::symlink(&fake_home, w.session_dir("r1").join("home-link")).expect("symlink");
    std::os::unix::fs::symlink(&fake_home, w.session_dir("r3").join("home-link")).expect("symlink");
    // A session directory that is itself a link to the home.
    std::os::unix::fs::symlink(&fake_home, w.home().join("sessions").join("evil")).expect("symlink");
    s.ok("session_logs", json!({"session": "r1", "action": "delete_on_close"})).await;
    // Reads of r1 race the sweep that deletes it.
    let reader = async {
        let mut outcomes = (0, 0);
        for _ in 0..30 {
            let r = s.call("read", json!({"session": "r1"})).await;
            if r.is_error {
                outcomes.1 += 1;
                assert!(r.text.contains("deleted") || r.text.contains("no logs"), "{}", r.text);
            } else {
                outcomes.0 += 1;
            }
        }
        outcomes
    };
    let sweep = || async {
        let out =
            tokio::process::Command::new(SERVER).args(["logs", "sweep"]).envs(w.env()).output().await.expect("sweep");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let sweeper = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        sweep().await
    };
    let (outcomes, said) = tokio::join!(reader, sweeper);
    eprintln!("a sweep racing reads: reads before/after the sweep: {outcomes:?}");
    if w.session_dir("r1").exists() {
        // A read between the sweep's plan and its deletion keeps the
        // directory (it is in use), and says so; the next sweep takes it.
        assert!(said.contains("kept r1"), "the eligible directory stayed, unexplained: {said}");
        sweep().await;
    }
    assert!(!w.session_dir("r1").exists(), "the eligible directory stayed");
    assert!(w.session_dir("r2").exists(), "r2 was not due");
    assert!(w.session_dir("r3").join("raw.log").exists(), "a live session lost its logs");
    assert_eq!(std::fs::read_to_string(fake_home.join("work/precious.txt")).expect("the target"), "keep me");
    assert!(w.home().join("sessions").join("evil").symlink_metadata().is_ok() || fake_home.join("work").exists());
    assert_has!(s.err("read", json!({"session": "r1"})).await, "deleted");
    assert_has!(s.run("r3", "echo r3-alive").await, "r3-alive");
}

// ------------------------------------------------------- secrets and history

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_secret_in_a_pane_no_output_in_calls_log_no_agent_command_in_history() {
    let w = World::new();
    let home = w.tmp.path().join("userhome");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(home.join(".bash_history"), "ls # the person's own\n").expect("history");
    let home_s = home.display().to_string();
    let port = crate::support::free_port().to_string();
    let mut cmd = std::process::Command::new(SERVER);
    cmd.args(["serve", "--tcp", &port]).envs(w.env()).env("HOME", &home_s).stdin(Stdio::null());
    cmd.env("NOTIFY_SOCKET", w.tmp.path().join("no-notify")).env("INVOCATION_ID", "feedfacefeedface");
    cmd.env("WATCHDOG_USEC", "0").env("JOURNAL_STREAM", "8:1234");
    // The server's own settings stay the server's (but for the two the
    // integration reads in a pane).
    cmd.env("DOCENT_TERMINAL_MCP_TOKEN", "tok-cafe").env("DOCENT_TERMINAL_MCP_SECRETS", "API_KEY_X");
    cmd.env("DOCENT_TERMINAL_MCP_SSH_ENV", "EDITOR").env("DOCENT_TERMINAL_MCP_SUMMARY", "0");
    let mut serve = cmd.spawn().expect("serve");
    until_answering(&w);
    let token = std::fs::read_to_string(w.home().join("token")).expect("token").trim().to_string();
    let mut env = w.env();
    env.push(("HOME".into(), home_s.clone()));
    let mut c = RawClient::start(&["connect", "--actor", "sec"], &env).await;
    let t = Duration::from_secs(30);
    c.call("session_create", json!({"name": "v1"}), t).await;
    let (text, _) = c
        .call("run", json!({"session": "v1", "command": "env; tr '\\0' '\\n' < /proc/$PPID/environ; echo env-done"}), t)
        .await;
    assert_has!(text, "env-done");
    // The whole output, not the default tail: the variables are in any order.
    let (all, _) = c.call("read", json!({"session": "v1", "from_line": 1, "to_line": 400}), t).await;
    let own = ["DOCENT_TERMINAL_MCP_TOKEN", "DOCENT_TERMINAL_MCP_SECRETS", "DOCENT_TERMINAL_MCP_SUMMARY"];
    let own = own.into_iter().chain(["DOCENT_TERMINAL_MCP_SOCKET=", "tok-cafe", "API_KEY_X"]);
    for secret in
        [&token[..], "NOTIFY_SOCKET", "INVOCATION_ID", "feedface", "JOURNAL_STREAM", "WATCHDOG_"].into_iter().chain(own)
    {
        assert!(!all.contains(secret), "{secret} is visible in the pane:\n{all}");
    }
    assert_has!(all, "DOCENT_TERMINAL_MCP_SSH_ENV=EDITOR");
    assert_has!(all, "DOCENT_TERMINAL_MCP_SESSION=v1");
    let raw = std::fs::read(w.session_dir("v1").join("raw.log")).expect("raw");
    assert!(memchr::memmem::find(&raw, token.as_bytes()).is_none(), "the token is in raw.log");
    let marker = "unique-input-7d1f";
    c.call("run", json!({"session": "v1", "command": format!("echo {marker}-out")}), t).await;
    let calls = std::fs::read_to_string(w.home().join("calls.log")).expect("calls.log");
    assert!(!calls.contains(marker), "calls.log holds input or output: {calls}");
    assert!(!calls.contains("env-done"), "calls.log holds a command: {calls}");
    // The agent's commands stay out of the person's history, even after
    // the shell exits and writes it.
    c.call("session_close", json!({"session": "v1"}), t).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let history = std::fs::read_to_string(home.join(".bash_history")).unwrap_or_default();
    assert!(!history.contains(marker), "an agent's command is in ~/.bash_history: {history}");
    assert_has!(history, "the person's own");
    signal(serve.id() as i32, nix::sys::signal::Signal::SIGTERM);
    let _ = serve.wait();
}

//! What a session stands on, broken under it: its logger killed or
//! stopped mid-flood, its log files deleted, its tmux server killed. Each
//! is noticed and said, logging starts again where it can, and nothing
//! after the break is lost.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{raw_holds, signal, through_terminal};
use crate::assert_has;
use crate::support::{World, has_exited, logger_pid, poll, size};

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

//! The pane logger's recovery: a logger killed mid-command is replaced and
//! carries on from its checkpoint, so the command still ends with its
//! status; a logger that cannot write keeps draining the pane and records
//! the gap.

use std::time::Duration;

use serde_json::json;

use crate::support::{World, kill_logger, logger_pid, poll, session_text};
use crate::{assert_has, needs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_outliving_its_killed_logger_still_ends_with_its_status() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let dir = w.session_dir("t1");
    let r =
        s.ok("run", json!({"session": "t1", "command": "sleep 1.5; echo late-line; (exit 7)", "timeout": 0.2})).await;
    assert_has!(r, "still running");
    let old = kill_logger(&dir);
    // The router (its connection closed) or the next call attaches a new
    // logger, which must pick the open region up from its checkpoint
    // rather than forget it.
    let r = s.ok("wait", json!({"session": "t1", "timeout": 20})).await;
    assert_has!(r, "exit 7");
    assert_has!(r, "late-line");
    assert_ne!(logger_pid(&dir).expect("a new logger runs"), old);
    assert!(dir.join("checkpoint.json").exists());
    let regions = std::fs::read_to_string(dir.join("regions.jsonl")).expect("regions");
    let last = regions.lines().rfind(|l| l.contains("late-line")).expect("the region is recorded");
    assert_has!(last, "\"exit\":7");
    // And the shell goes on as before.
    assert_has!(s.run("t1", "echo next").await, "exit 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_logger_neither_repeats_nor_loses_lines_it_had_stored() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let dir = w.session_dir("t1");
    assert_has!(s.run("t1", "seq 1 200000 | sed 's/^/n/'").await, "exit 0");
    kill_logger(&dir);
    assert_has!(s.run("t1", "echo after-restart").await, "exit 0");
    let text = session_text(&dir);
    // The gap's lines hold the screen as it was, so count before them.
    let (before, after) = text.split_once("[log gap:").expect("the gap is marked");
    for line in ["n1", "n100000", "n200000"] {
        let count = before.lines().filter(|l| *l == line).count();
        assert_eq!(count, 1, "{line} is in session.txt {count} times before the gap");
    }
    assert_eq!(after.lines().filter(|l| *l == "after-restart").count(), 1, "{after}");
    // Line numbers still match the index: the last line read by number is
    // the last in the file.
    let idx = std::fs::metadata(dir.join("lines.idx")).expect("index").len() / 8;
    assert_eq!(idx as usize, text.lines().count());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logger_that_cannot_write_drains_the_pane_and_records_the_gap() {
    needs!("prlimit");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let dir = w.session_dir("t1");
    assert_has!(s.run("t1", "echo before").await, "exit 0");
    let pid = logger_pid(&dir).expect("the logger runs").to_string();
    let raw_len = std::fs::metadata(dir.join("raw.log")).expect("raw.log").len();
    // raw.log may grow by 4 kB more, then every write to it fails (the
    // soft limit only, so that it can be raised again without privilege).
    let limit = format!("--fsize={}:", raw_len + 4096);
    let out = std::process::Command::new("prlimit").args(["--pid", &pid, &limit]).output().expect("prlimit");
    assert!(out.status.success(), "prlimit: {}", String::from_utf8_lossy(&out.stderr));
    // Far more than the pipe and tmux would hold if nobody read them.
    let r = s.ok("run", json!({"session": "t1", "command": "seq 1 300000; echo lost-end", "timeout": 3})).await;
    assert!(!r.contains("lost-end"), "{r}");
    // The pane is not stuck: tmux still shows the command's end.
    let shown = async || w.screen("t1").contains("lost-end");
    poll::until_async("the pane to show lost-end while its logger cannot write", Duration::from_secs(10), shown).await;
    assert_eq!(logger_pid(&dir).map(|p| p.to_string()), Some(pid.clone()), "the logger survived");
    let out =
        std::process::Command::new("prlimit").args(["--pid", &pid, "--fsize=unlimited:"]).output().expect("prlimit");
    assert!(out.status.success(), "prlimit: {}", String::from_utf8_lossy(&out.stderr));
    // The next output is stored again, after a line marking the gap.
    tokio::time::sleep(Duration::from_millis(600)).await;
    w.tmux(&["send-keys", "-t", "=t1:", "-l", "echo resumed-here"]);
    w.tmux(&["send-keys", "-t", "=t1:", "Enter"]);
    // The command typed by hand runs and its output is logged again (on a
    // loaded machine the logger may still be draining the dropped output
    // when the limit is lifted, so wait for the line itself).
    let text = poll::until_async("resumed-here in session.txt", Duration::from_secs(10), async || {
        let text = session_text(&dir);
        if text.lines().any(|l| l == "resumed-here") { Ok(text) } else { Err(text) }
    })
    .await;
    let waited = s.ok("wait", json!({"session": "t1", "timeout": 10})).await;
    assert_has!(text, "[log gap:");
    assert_has!(text, "were not logged (the logger could not write");
    let gaps = std::fs::read_to_string(dir.join("gaps.jsonl")).expect("gaps.jsonl");
    let gap: serde_json::Value = serde_json::from_str(gaps.lines().last().expect("a gap")).expect("json");
    assert!(gap["dropped"].as_u64().is_some_and(|n| n > 100_000), "{gap}");
    assert!(gap["raw_offset"].as_u64().is_some_and(|n| n >= raw_len), "{gap}");
    // A reply (this one or a later one) names the gap; the shell is
    // usable again.
    let mut replies = waited;
    for _ in 0..3 {
        let r = s.run("t1", "echo ok").await;
        replies.push_str(&r);
        if replies.contains("log gap in t1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    assert!(replies.contains("log gap in t1"), "no note of the gap {gaps} in:\n{replies}");
    assert_has!(replies, "exit 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_screen_program_is_one_line_naming_it() {
    needs!("less");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let dir = w.session_dir("t1");
    w.tmux(&["send-keys", "-t", "=t1:", "-l", "seq 1 200 | less"]);
    w.tmux(&["send-keys", "-t", "=t1:", "Enter"]);
    poll::until_async("less to take the screen", Duration::from_secs(5), async || {
        String::from_utf8_lossy(&w.tmux(&["display", "-p", "-t", "=t1:", "#{alternate_on}"]).stdout).trim() == "1"
    })
    .await;
    w.tmux(&["send-keys", "-t", "=t1:", "q"]);
    s.ok("wait", json!({"session": "t1", "timeout": 10})).await;
    assert_has!(s.run("t1", "echo after-less").await, "exit 0");
    let text = session_text(&dir);
    assert!(text.lines().any(|l| l == "[full-screen program: less]"), "{text}");
    assert!(!text.lines().any(|l| l == "150"), "less's screen leaked into the log:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_logger_is_replaced_at_once_without_a_call() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let dir = w.session_dir("t1");
    let old = kill_logger(&dir);
    // No call is made: the router sees the logger's connection close.
    let started = std::time::Instant::now();
    let new = poll::until_async("a new logger after the kill", Duration::from_secs(3), async || {
        logger_pid(&dir).filter(|&p| p != old)
    })
    .await;
    println!("a new logger (pid {new}) {:?} after the kill", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(2), "the new logger came {:?} after the kill", started.elapsed());
    // The gap is in the log, and the session works on.
    assert_has!(s.run("t1", "echo after-repair").await, "exit 0");
    assert_has!(session_text(&dir), "[log gap:");
}

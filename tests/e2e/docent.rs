//! The docent over the wire: the guidance clients receive, notes given once
//! when they apply, and the summary that leads a clipped reply.

use serde_json::json;

use crate::support::{Person, World};
use crate::{assert_has, needs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_get_the_instructions_described_tools_and_the_guide() {
    let w = World::new();
    let s = w.server().await;
    let instructions = s.client().instructions().expect("instructions");
    assert_eq!(instructions, dtmcp::docent::texts::INSTRUCTIONS);
    let tools = s.client().tools().await.expect("tools");
    let guide = tools.iter().find(|t| t.name == "guide").expect("a guide tool");
    assert_eq!(guide.annotations.as_ref().and_then(|a| a.read_only_hint), Some(true));
    for t in &tools {
        let meta = t.meta.as_ref().map(|m| &m.0);
        assert_eq!(meta.and_then(|m| m.get("anthropic/alwaysLoad")), Some(&json!(true)), "{}", t.name);
    }
    assert_has!(s.ok("guide", json!({"topic": "fullscreen"})).await, "alternate screen");
    assert_has!(s.ok("guide", json!({})).await, "sharing");
    assert_has!(s.err("guide", json!({"topic": "nope"})).await, "patterns, programs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unneeded_tail_is_pointed_out_once() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", "seq 1 100000 | tail -3").await;
    assert_has!(r, "100000");
    assert_has!(r, "`| tail` is unnecessary");
    assert_has!(r, "last_lines");
    let again = s.run("t1", "seq 1 10 | tail -3").await;
    assert!(!again.contains("unnecessary"), "the note comes once:\n{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_at_its_prompt_is_quoted_and_answered_with_send() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", "python3 -q").await;
    assert_has!(r, "waits for input at \">>>\"");
    assert_has!(r, "send session=t1");
    assert_has!(r, "needs no relaunch");
    let answer = s.ok("send", json!({"session": "t1", "text": "print(6*7)", "keys": ["enter"], "wait": 1})).await;
    assert_has!(answer, "42");
    assert!(!answer.contains("note:"), "no note twice:\n{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_says_how_to_keep_waiting_once() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "sleep 3", "timeout": 0.5})).await;
    assert_has!(r, "note: a command that outlives the timeout");
    let r = s.ok("wait", json!({"session": "t1", "timeout": 0.3})).await;
    assert!(!r.contains("outlives"), "once:\n{r}");
    assert_has!(s.ok("wait", json!({"session": "t1", "timeout": 10})).await, "exit 0");
}

/// A long output with failures in its middle: 300 lines, two errors, 300 lines.
const NOISY: &str = "seq 1 300; echo 'a.c:2:49: error: y undeclared'; \
    echo 'make: *** [Makefile:5: a.o] Error 1'; seq 301 600";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clipped_reply_leads_with_the_errors_it_leaves_out() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", NOISY).await;
    let summary = r.find("summary of lines").expect("a summary");
    let clipped = r.find("lines of output").expect("the clipped output");
    assert!(summary < clipped, "the summary leads:\n{r}");
    assert_has!(r, "a.c:2:49: error: y undeclared");
    assert_has!(r, "make: *** [Makefile:5: a.o] Error 1");
    assert_has!(r, "note: the middle of this output was left out");
}

/// The lines `summary.idx` of session directory `dir` notes, as text.
fn noted_lines(dir: &std::path::Path) -> Vec<String> {
    let idx = std::fs::read(dir.join("summary.idx")).expect("summary.idx");
    assert_eq!(&idx[..8], b"dtmcpmk1", "its header");
    let text = std::fs::read_to_string(dir.join("session.txt")).expect("session.txt");
    let lines: Vec<&str> = text.lines().collect();
    idx[16..]
        .chunks_exact(16)
        .map(|r| u64::from_le_bytes(r[..8].try_into().expect("8 bytes")))
        .map(|n| lines[n as usize - 1].to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logger_notes_the_lines_a_summary_needs_and_an_older_session_is_scanned() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.run("t1", NOISY).await;
    assert_has!(r, "summary of lines");
    let dir = w.session_dir("t1");
    let noted = noted_lines(&dir);
    assert!(noted.iter().any(|l| l == "a.c:2:49: error: y undeclared"), "{noted:?}");
    assert!(noted.iter().any(|l| l == "make: *** [Makefile:5: a.o] Error 1"), "{noted:?}");
    assert!(!noted.iter().any(|l| l.trim().parse::<u32>().is_ok()), "no plain line is noted: {noted:?}");
    // A session whose lines a logger without the index cooked: the
    // summary is found by reading them all.
    for name in ["summary.idx", "tallies.idx"] {
        std::fs::remove_file(dir.join(name)).expect("rm");
    }
    let r = s.run("t1", NOISY).await;
    assert_has!(r, "summary of lines");
    assert_has!(r, "a.c:2:49: error: y undeclared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_logger_keeps_noting_summary_lines_where_the_last_one_stopped() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let dir = w.session_dir("t1");
    s.run("t1", NOISY).await;
    crate::support::kill_logger(&dir);
    let r = s.run("t1", &NOISY.replace("y undeclared", "z undeclared")).await;
    assert_has!(r, "a.c:2:49: error: z undeclared");
    let noted = noted_lines(&dir);
    let count = |l: &str| noted.iter().filter(|n| *n == l).count();
    assert_eq!(count("a.c:2:49: error: y undeclared"), 1, "{noted:?}");
    assert_eq!(count("a.c:2:49: error: z undeclared"), 1, "{noted:?}");
    assert_eq!(count("make: *** [Makefile:5: a.o] Error 1"), 2, "{noted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_can_be_turned_off() {
    let w = World::new();
    let s = w.server_with(&[("DOCENT_TERMINAL_MCP_SUMMARY", "0")]).await;
    s.create("t1").await;
    let r = s.run("t1", NOISY).await;
    assert!(!r.contains("summary of lines") && !r.contains("error: y"), "{r}");
}

#[test]
fn the_skill_command_writes_a_plugin_that_starts_this_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(crate::support::SERVER)
        .args(["skill", "--plugin"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mcp = std::fs::read_to_string(dir.path().join(".mcp.json")).expect(".mcp.json");
    let mcp: serde_json::Value = serde_json::from_str(&mcp).expect("json");
    let server = std::fs::canonicalize(crate::support::SERVER).expect("server path");
    assert_eq!(mcp["mcpServers"]["terminal"]["command"].as_str(), server.to_str());
    let skill = std::fs::read_to_string(dir.path().join("skills/terminal-sessions/SKILL.md")).expect("SKILL.md");
    assert_has!(skill, "name: terminal-sessions");
    assert!(dir.path().join("skills/terminal-sessions/programs.md").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_screen_program_is_named_with_how_to_quit_it() {
    needs!("less");
    needs!("top");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // A pager is told as one: keys, not lines, and how not to page.
    let r = s.ok("run", json!({"session": "t1", "command": "seq 1 500 | less", "timeout": 2})).await;
    assert_has!(r, "a full-screen program (`less`) holds the screen");
    assert_has!(r, "note: `less` is a pager, which takes keys, not command lines");
    assert_has!(r, "keys=[\"q\"]");
    assert_has!(r, "`| less` is unnecessary");
    s.ok("send", json!({"session": "t1", "keys": ["q"], "wait": 0.5})).await;
    // Another full-screen program: its screen, and how to quit it.
    let r = s.ok("run", json!({"session": "t1", "command": "top -d 1", "timeout": 2})).await;
    assert_has!(r, "note: top draws on the full screen");
    assert_has!(r, "To leave top: send keys=[\"q\"]");
    s.ok("send", json!({"session": "t1", "keys": ["q"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_without_integration_is_pointed_out() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "env -i bash --norc --noprofile", "timeout": 2})).await;
    assert_has!(r, "has no shell integration");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+d"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_in_a_command_or_a_script_is_no_shell_without_integration() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    // The session's own shell at a `read` of its command line.
    let r = s.ok("run", json!({"session": "t1", "command": "read -p 'name? ' n; echo hi $n", "timeout": 2})).await;
    assert_has!(r, "waiting for input at `name?`");
    assert!(!r.contains("no shell integration"), "{r}");
    let r = s.ok("run", json!({"session": "t1", "command": "bob", "timeout": 5})).await;
    assert_has!(r, "hi bob");
    // A bash running a script, at the script's `read`.
    let script = w.tmp.path().join("ask.sh");
    std::fs::write(&script, "read -p 'Continue? ' a\necho got $a\n").expect("script");
    let line = format!("bash {}", script.display());
    let r = s.ok("run", json!({"session": "t1", "command": line, "timeout": 2})).await;
    assert_has!(r, "waiting for input at `Continue?`");
    assert!(!r.contains("no shell integration"), "{r}");
    let r = s.ok("run", json!({"session": "t1", "command": "y", "timeout": 5})).await;
    assert_has!(r, "got y");
    assert!(!r.contains("no shell integration"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_of_another_user_is_pointed_out() {
    needs!("su");
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: su to another user without a password needs root");
        return;
    }
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "su nobody -s /bin/bash", "timeout": 3})).await;
    assert_has!(r, "note: t1 is now running as nobody");
    // Leaving su is a move too: the next reply that looks says so, once.
    let left = s.ok("send", json!({"session": "t1", "keys": ["ctrl+d"]})).await;
    let later = s.ok("run", json!({"session": "t1", "command": "sleep 2", "timeout": 1})).await;
    let back = "note: t1 is back on this host";
    assert_eq!(left.matches(back).count() + later.matches(back).count(), 1, "{left}\n---\n{later}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_typing_is_pointed_out() {
    use std::time::Duration;
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    s.run("t1", "echo before").await;
    let mut person = Person::attach(&w, "t1");
    // tmux stamps activity in whole seconds: the keys come a second after
    // both the agent's reply and the attach.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    person.types("x\x7f");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = s.ok("run", json!({"session": "t1", "command": "sleep 3", "timeout": 1})).await;
    assert_has!(r, "note: a person typed in t1");
    drop(person);
}

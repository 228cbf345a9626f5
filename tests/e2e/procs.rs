//! What the foreground job does, as `run` and `send` report it.

use serde_json::json;

use crate::harness::World;
use crate::{assert_has, needs};

/// Whether a program is installed, for tests that need it.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repl_at_its_prompt_waits_for_input() {
    needs!("python3");
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "python3 -q", "timeout": 1.5})).await;
    assert_has!(r, "`python3` waits for input");
    let r = s.ok("send", json!({"session": "t1", "text": "1+1", "keys": ["enter"], "wait": 0.5})).await;
    assert_has!(r, "`python3` waits for input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_command_does_not_wait_for_input() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "sleep 5", "timeout": 0.3})).await;
    assert_has!(r, "still running");
    assert_has!(r, "`sleep` is sleeping, not waiting for input");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_without_echo_is_a_password_prompt() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "read -s -p 'Password: ' x", "timeout": 1.0})).await;
    assert_has!(r, "password prompt: input is not echoed and never logged");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_loop_is_working() {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "sh -c 'while :; do :; done'", "timeout": 0.3})).await;
    assert_has!(r, "`sh` is working");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_of_another_user_is_named() {
    let me = std::process::Command::new("id").arg("-u").output().map(|o| o.stdout).unwrap_or_default();
    if me != b"0\n" || !crate::harness::installed("runuser") {
        eprintln!("skipped: needs root and runuser");
        return;
    }
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let r = s.ok("run", json!({"session": "t1", "command": "runuser -u nobody -- sleep 5", "timeout": 0.5})).await;
    assert_has!(r, "· as nobody");
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
}

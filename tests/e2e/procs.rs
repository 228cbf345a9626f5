//! What the foreground job does, as `run` and `send` report it.

use serde_json::json;

use crate::support::World;
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
    if me != b"0\n" || !crate::support::installed("runuser") {
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

/// Whether this test process may read other processes' system calls
/// (root, or Yama's ptrace_scope 0), which the descriptor checks need.
fn syscalls_readable() -> bool {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_else(|_| "0".into());
    let root = std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n");
    root || scope.trim() == "0"
}

/// A python3 one-liner that waits as `wait` says, run until `run` times out.
async fn measured(wait: &str) -> String {
    let w = World::new();
    let s = w.server().await;
    s.create("t1").await;
    let prog = format!("import os, select, sys\nr, w = os.pipe()\n{wait}\n");
    std::fs::write(w.tmp.path().join("wait.py"), prog).expect("write");
    let cmd = format!("python3 {}", w.tmp.path().join("wait.py").display());
    let r = s.ok("run", json!({"session": "t1", "command": cmd, "timeout": 1.0})).await;
    s.ok("send", json!({"session": "t1", "keys": ["ctrl+c"]})).await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_watched_decide_between_input_and_work() {
    needs!("python3");
    if !syscalls_readable() {
        eprintln!("skipped: /proc/PID/syscall of other processes is not readable here (ptrace_scope)");
        return;
    }
    let cases = [
        ("select.select([r], [], [])", "`python3` is working (it waits in select on descriptor"),
        ("select.select([0, r], [], [])", "`python3` waits for input (it waits in select on the terminal)"),
        (
            "p = select.poll(); p.register(r, select.POLLIN); p.poll()",
            "`python3` is working (it waits in poll on descriptor",
        ),
        (
            "p = select.poll(); p.register(0, select.POLLIN); p.poll()",
            "`python3` waits for input (it waits in poll on the terminal)",
        ),
        (
            "e = select.epoll(); e.register(r, select.EPOLLIN); e.poll()",
            "`python3` is working (it waits in epoll on descriptor",
        ),
        (
            "e = select.epoll(); e.register(0, select.EPOLLIN); e.poll()",
            "`python3` waits for input (it waits in epoll on the terminal)",
        ),
        ("os.read(r, 1)", "`python3` is sleeping, not waiting for input (it reads descriptor"),
        ("sys.stdin.read(1)", "`python3` waits for input (it reads the terminal)"),
    ];
    for (wait, want) in cases {
        let r = measured(wait).await;
        assert!(r.contains(want), "`{wait}`: expected {want:?} in:\n{r}");
    }
}

//! What must stay where it is: a retention sweep racing reads deletes only
//! the eligible directory and never what a link points at; no secret of
//! the server's shows in a pane, no input or output goes into calls.log,
//! and no agent's command into the person's shell history.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use super::signal;
use crate::assert_has;
use crate::support::raw::RawClient;
use crate::support::{SERVER, World, until_answering};

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

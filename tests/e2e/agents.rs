//! Per-agent state lives with the session: notes already given, commands
//! that finished since an agent's last call, and screen diffs carry over a
//! server restart (kept by the session's logger) and a logger restart too
//! (kept in `state.json`), and stay apart per agent.

use std::time::Duration;

use serde_json::{Value, json};

use crate::assert_has;
use crate::support::{Serve, World, bridge, kill_logger, poll, unix_get};

/// The note a `| tail` earns.
const TAIL_NOTE: &str = "`| tail` is unnecessary";
/// What opens a reply that tells of commands finished meanwhile.
const FINISHED: &str = "finished since your last call";

/// Waits (up to 5 s) until the session's `state.json` holds `needle`.
fn wait_for_state(world: &World, session: &str, needle: &str) -> Value {
    let path = world.session_dir(session).join("state.json");
    poll::until(&format!("state.json to hold {needle:?}"), Duration::from_secs(5), || {
        let body = std::fs::read_to_string(&path).unwrap_or_default();
        match body.contains(needle) {
            true => Ok(serde_json::from_str(&body).expect("state.json is whole JSON")),
            false => Err(body),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_given_before_a_restart_is_not_given_again() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    alice.ok("session_create", json!({"name": "n1"})).await;
    let first = alice.ok("run", json!({"session": "n1", "command": "seq 1 100 | tail -3"})).await;
    assert_has!(first, TAIL_NOTE);
    serve.kill();
    let serve = Serve::start(&world, &[]);
    let again = alice.ok("run", json!({"session": "n1", "command": "seq 1 50 | tail -2"})).await;
    assert_has!(again, "50");
    assert!(!again.contains(TAIL_NOTE), "the note came again after a server restart:\n{again}");
    // Kept per agent: another agent is told.
    let bob = bridge(&world, "bob").await;
    let bobs = bob.ok("run", json!({"session": "n1", "command": "seq 1 9 | tail -1"})).await;
    assert_has!(bobs, TAIL_NOTE);
    // The logger wrote it down; a new logger and a new server read it back.
    let state = wait_for_state(&world, "n1", "bob");
    assert!(state["agents"]["alice"]["notes"].as_array().is_some_and(|n| n.contains(&json!("pipe-tail-head"))));
    serve.kill();
    kill_logger(&world.session_dir("n1"));
    let _serve = Serve::start(&world, &[]);
    let third = alice.ok("run", json!({"session": "n1", "command": "seq 1 7 | tail -1"})).await;
    assert_has!(third, "7");
    assert!(!third.contains(TAIL_NOTE), "the note came again after a logger restart:\n{third}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_ends_while_no_server_runs_is_told_on_the_next_call() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    let bob = bridge(&world, "bob").await;
    alice.ok("session_create", json!({"name": "f1"})).await;
    let command = "sleep 1.5; echo slept-$((3*3))";
    let left = alice.ok("run", json!({"session": "f1", "command": command, "timeout": 0.3})).await;
    assert_has!(left, "still running");
    // Bob looks while it runs, and leaves before it ends too.
    bob.ok("read", json!({"session": "f1"})).await;
    serve.kill();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let serve = Serve::start(&world, &[]);
    let next = alice.ok("run", json!({"session": "f1", "command": "echo next-$((1+1))"})).await;
    assert_has!(next, format!("{FINISHED}: `{command}` (region 1) · exit 0"));
    assert_has!(next, "next-2");
    // Told once.
    let after = alice.ok("read", json!({"session": "f1"})).await;
    assert!(!after.contains(FINISHED), "{after}");
    // A command that ends while the agent waits on another is told too,
    // and one it saw end in a reply of its own is not.
    serve.stop();
    let _serve = Serve::start(&world, &[]);
    let bobs = bob.ok("regions", json!({"session": "f1"})).await;
    assert_has!(bobs, format!("{FINISHED}: `{command}`"));
    alice.ok("run", json!({"session": "f1", "command": "sleep 2", "timeout": 0.1})).await;
    let waited = alice.ok("wait", json!({"session": "f1"})).await;
    assert_has!(waited, "exit 0");
    let last = alice.ok("read", json!({"session": "f1"})).await;
    assert!(!last.contains(FINISHED), "the wait reply told it already:\n{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screen_diffs_carry_on_across_a_restart_and_stay_apart_per_agent() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    alice.ok("session_create", json!({"name": "sc1"})).await;
    let look = |t: &str| json!({"session": "sc1", "text": t, "keys": ["enter"], "screen": "changes", "wait": 0.5});
    let first = alice.ok("send", look("echo alpha-one")).await;
    assert_has!(first, "no earlier screen");
    serve.kill();
    let _serve = Serve::start(&world, &[]);
    let second = alice.ok("send", look("echo alpha-two")).await;
    assert!(!second.contains("no earlier screen"), "the last look was forgotten:\n{second}");
    assert_has!(second, "changed since the last look");
    assert_has!(second, "alpha-two");
    assert!(!second.contains("alpha-one"), "an unchanged row was shown as changed:\n{second}");
    let bob = bridge(&world, "bob").await;
    let bobs = bob.ok("send", look("echo three")).await;
    assert_has!(bobs, "no earlier screen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_an_agent_left_at_the_prompt_stays_its_own_across_a_restart() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    alice.ok("session_create", json!({"name": "h1"})).await;
    alice.ok("send", json!({"session": "h1", "text": "echo half-$((6*7))"})).await;
    wait_for_state(&world, "h1", "echo half-");
    serve.kill();
    let serve = Serve::start(&world, &[]);
    let bob = bridge(&world, "bob").await;
    let refused = bob.call("run", json!({"session": "h1", "command": "echo bobs"})).await;
    assert!(refused.is_error, "typed over alice's text: {}", refused.text);
    assert_has!(refused.text, "by agent alice");
    assert_has!(refused.text, "echo half-$((6*7))");
    let listed = bob.ok("session_list", json!({})).await;
    assert_has!(listed, "left typed at the prompt by alice: `echo half-$((6*7))`");
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    let list: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(list["sessions"][0]["left_at_prompt"]["actor"], "alice", "{body}");
    // Once alice submits it, it is nobody's and the prompt is free.
    let done = alice.ok("send", json!({"session": "h1", "keys": ["enter"], "wait": 1})).await;
    assert_has!(done, "half-42");
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    let list: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(list["sessions"][0]["left_at_prompt"], Value::Null, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_another_agent_started_names_that_agent_in_regions_and_read() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    let bob = bridge(&world, "bob").await;
    alice.ok("session_create", json!({"name": "by1"})).await;
    alice.ok("run", json!({"session": "by1", "command": "echo from-alice"})).await;
    bob.ok("run", json!({"session": "by1", "command": "echo from-bob"})).await;
    let listed = bob.ok("regions", json!({"session": "by1"})).await;
    let line = |needle: &str| listed.lines().find(|l| l.contains(needle)).unwrap_or_default().to_string();
    assert_has!(line("echo from-alice"), "started by agent alice");
    assert!(!line("echo from-bob").contains("started by"), "bob's own command named its starter:\n{listed}");
    let read = bob.ok("read", json!({"session": "by1", "region": 1})).await;
    assert_has!(read.lines().next().unwrap_or_default(), "region 1 `echo from-alice` · started by agent alice");
    let own = alice.ok("regions", json!({"session": "by1"})).await;
    let alices = own.lines().find(|l| l.contains("echo from-alice")).unwrap_or_default();
    assert!(!alices.contains("started by"), "{own}");
    assert_has!(own.lines().find(|l| l.contains("echo from-bob")).unwrap_or_default(), "started by agent bob");
}

//! The `connect` bridge: agents sharing a session through one server, a
//! server restarted under a call in flight, and a bridge left without one.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::assert_has;
use crate::harness::{SERVER, World};
use crate::serve::{Serve, bridge, unix_get};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_share_a_session_and_are_told_apart() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    let bob = bridge(&world, "bob").await;
    let made = alice.call("session_create", json!({"name": "shared"})).await.expect("create");
    assert!(!made.is_error, "{}", made.text);
    let ran = bob.call("run", json!({"session": "shared", "command": "echo from-bob-$((2+3))"})).await.expect("run");
    assert_has!(ran.text, "from-bob-5");
    let seen = alice.call("search", json!({"session": "shared", "pattern": "from-bob-5"})).await.expect("search");
    assert_has!(seen.text, "from-bob-5");
    let listed = bob.call("session_list", json!({})).await.expect("list");
    assert_has!(listed.text, "shared");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, r#""tool":"session_create","session":"shared","actor":"alice""#);
    assert_has!(calls, r#""tool":"run","session":"shared","actor":"bob""#);
    let (_, body) = unix_get(&serve.socket, "/api/sessions");
    let list: Value = serde_json::from_str(&body).expect("JSON");
    let s = &list["sessions"][0];
    assert_eq!(s["started_by"], "alice", "{s}");
    assert_eq!(s["last_command_by"], "bob", "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_an_actor_get_unique_names() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let env = world.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let path = std::path::Path::new(SERVER);
    let first = dtmcp::mcp_client::McpChild::start(path, &["connect"], &env).await.expect("bridge");
    let second = dtmcp::mcp_client::McpChild::start(path, &["connect"], &env).await.expect("bridge");
    first.call("session_list", json!({})).await.expect("list");
    second.call("session_list", json!({})).await.expect("list");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, r#""actor":"dtmcp-test-client""#);
    assert_has!(calls, r#""actor":"dtmcp-test-client#2""#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_survives_a_server_restart_and_is_typed_once() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let agent = bridge(&world, "alice").await;
    agent.call("session_create", json!({"name": "r1"})).await.expect("create");
    let command = "sleep 2; echo done-$((40+2))";
    let call = agent.call("run", json!({"session": "r1", "command": command, "timeout": 20}));
    let restart = async {
        // Let the command be typed, then crash the server under it.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let pid = serve.pid();
        serve.kill();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Blocking here is fine: the call in flight waits on another process.
        (pid, Serve::start(&world, &[]))
    };
    let (reply, (old_pid, new_serve)) = tokio::join!(call, restart);
    let reply = reply.expect("the bridge answers the call in flight");
    assert!(!reply.is_error, "{}", reply.text);
    assert_has!(reply.text, "done-42");
    assert_has!(reply.text, "typed once already");
    assert_ne!(new_serve.pid(), old_pid);
    // Typed once: one region for it (the file has its open and close records).
    let regions = std::fs::read_to_string(world.session_dir("r1").join("regions.jsonl")).expect("regions");
    let mut ids: Vec<u64> = regions
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["command"] == command)
        .filter_map(|r| r["id"].as_u64())
        .collect();
    ids.dedup();
    assert_eq!(ids, vec![1], "{regions}");
    // The bridge keeps working with the new server.
    let after = agent.call("run", json!({"session": "r1", "command": "echo still-$((1+1))"})).await.expect("run");
    assert_has!(after.text, "still-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_without_a_server_gives_up_after_30_seconds() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut child = tokio::process::Command::new(SERVER)
        .args(["connect", "--actor", "lonely"])
        .envs(world.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bridge");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    stdin.write_all(format!("{init}\n").as_bytes()).await.expect("write");
    let answer = stdout.next_line().await.expect("read").expect("an answer");
    assert_has!(answer, "docent-terminal-mcp");
    serve.kill();
    let started = Instant::now();
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "session_list", "arguments": {}}});
    stdin.write_all(format!("{call}\n").as_bytes()).await.expect("write");
    let answer = tokio::time::timeout(Duration::from_secs(45), stdout.next_line()).await.expect("within 45 s");
    let answer = answer.expect("read").expect("an error answer");
    let waited = started.elapsed();
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await.expect("exits").expect("status");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).await.expect("stderr");
    assert!(waited >= Duration::from_secs(29), "gave up after {waited:?}");
    assert!(!status.success());
    let answer: Value = serde_json::from_str(&answer).expect("stdout carries JSON-RPC only");
    assert_eq!(answer["id"], 2);
    assert_has!(answer["error"]["message"].as_str().expect("message"), "for 30 s");
    assert_has!(stderr, "no server answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_exits_when_its_input_ends() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let mut child = tokio::process::Command::new(SERVER)
        .arg("connect")
        .envs(world.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bridge");
    drop(child.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await.expect("exits on EOF");
    assert!(status.expect("status").success());
    let mut out = String::new();
    child.stdout.take().expect("stdout").read_to_string(&mut out).await.expect("stdout");
    assert_eq!(out, "", "stdout carries only MCP messages");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_finished_while_no_server_ran_is_read_back_not_retyped() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let agent = bridge(&world, "alice").await;
    agent.call("session_create", json!({"name": "r2"})).await.expect("create");
    let command = "sleep 1; echo over-$((5*5))";
    let call = agent.call("run", json!({"session": "r2", "command": command, "timeout": 20}));
    let restart = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        serve.kill();
        // The command ends while no server runs.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        Serve::start(&world, &[])
    };
    let (reply, _again) = tokio::join!(call, restart);
    let reply = reply.expect("answered");
    assert!(!reply.is_error, "{}", reply.text);
    assert_has!(reply.text, "finished with exit 0");
    assert_has!(reply.text, "over-25");
    let regions = std::fs::read_to_string(world.session_dir("r2").join("regions.jsonl")).expect("regions");
    let mut ids: Vec<u64> = regions
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["command"] == command)
        .filter_map(|r| r["id"].as_u64())
        .collect();
    ids.dedup();
    assert_eq!(ids, vec![1], "{regions}");
}

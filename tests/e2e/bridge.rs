//! The `connect` bridge: agents sharing a session through one server, a
//! server restarted under a call in flight, and a bridge left without one.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::assert_has;
use crate::support::raw::initialize_params;
use crate::support::{RawClient, SERVER, Serve, Server, World, bridge, regions, socket_of, unix_get};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_share_a_session_and_are_told_apart() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let alice = bridge(&world, "alice").await;
    let bob = bridge(&world, "bob").await;
    let made = alice.call("session_create", json!({"name": "shared"})).await;
    assert!(!made.is_error, "{}", made.text);
    let ran = bob.call("run", json!({"session": "shared", "command": "echo from-bob-$((2+3))"})).await;
    assert_has!(ran.text, "from-bob-5");
    let seen = alice.call("search", json!({"session": "shared", "pattern": "from-bob-5"})).await;
    assert_has!(seen.text, "from-bob-5");
    let listed = bob.call("session_list", json!({})).await;
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
    let path = std::path::Path::new(SERVER);
    let first = Server::start(path, &["connect"], &world.env()).await;
    let second = Server::start(path, &["connect"], &world.env()).await;
    first.call("session_list", json!({})).await;
    second.call("session_list", json!({})).await;
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    assert_has!(calls, r#""actor":"dtmcp-test-client""#);
    assert_has!(calls, r#""actor":"dtmcp-test-client#2""#);
}

/// A `run` of `command` in a new session `name`, by agent alice over a
/// bridge, with the server killed `kill_after` into it and started again
/// `down_for` later: the reply, the bridge and the new server.
async fn run_across_a_restart(
    world: &World,
    name: &str,
    command: &str,
    kill_after: Duration,
    down_for: Duration,
) -> (dtmcp::mcp_client::Reply, Server, Serve) {
    let serve = Serve::start(world, &[]);
    let agent = bridge(world, "alice").await;
    agent.call("session_create", json!({"name": name})).await;
    let call = agent.call("run", json!({"session": name, "command": command, "timeout": 20}));
    let restart = async {
        tokio::time::sleep(kill_after).await;
        restart(world, serve, down_for).await
    };
    let (reply, again) = tokio::join!(call, restart);
    assert!(!reply.is_error, "{}", reply.text);
    (reply, agent, again)
}

/// Kills `serve` with SIGKILL, as a crash would, and starts another one
/// `down_for` later.
async fn restart(world: &World, serve: Serve, down_for: Duration) -> Serve {
    let pid = serve.pid();
    serve.kill();
    tokio::time::sleep(down_for).await;
    // Blocking here is fine: what runs meanwhile waits on other processes.
    let again = Serve::start(world, &[]);
    assert_ne!(again.pid(), pid);
    again
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_survives_a_server_restart_and_is_typed_once() {
    let world = World::new();
    let command = "sleep 2; echo done-$((40+2))";
    // Let the command be typed, then crash the server under it.
    let (reply, agent, _serve) =
        run_across_a_restart(&world, "r1", command, Duration::from_millis(700), Duration::from_millis(300)).await;
    assert_has!(reply.text, "done-42");
    assert_has!(reply.text, "typed once already");
    assert_eq!(regions::ids_of(&world.session_dir("r1"), command), vec![1], "typed once");
    // The bridge keeps working with the new server.
    let after = agent.call("run", json!({"session": "r1", "command": "echo still-$((1+1))"})).await;
    assert_has!(after.text, "still-2");
}

/// A server that comes back without the MCP sessions it kept (their files
/// lost) does not know the bridge's session: the bridge makes a new one
/// with the client's own `initialize`, and the agent, known by its actor,
/// goes on where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_forgot_the_mcp_session_gets_a_new_one_from_the_bridge() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let agent = bridge(&world, "forgotten").await;
    let made = agent.call("session_create", json!({"name": "f1"})).await;
    assert!(!made.is_error, "{}", made.text);
    let kept = world.home().join("http-sessions");
    assert!(std::fs::read_dir(&kept).is_ok_and(|mut d| d.next().is_some()), "the server keeps its MCP sessions");
    serve.kill();
    std::fs::remove_dir_all(&kept).expect("forget the MCP sessions");
    let _again = Serve::start(&world, &[]);
    let ran = agent.call("run", json!({"session": "f1", "command": "echo known-$((3*3))"})).await;
    assert!(!ran.is_error, "{}", ran.text);
    assert_has!(ran.text, "known-9");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).unwrap_or_default();
    let last = calls.lines().rfind(|l| l.contains("run")).unwrap_or_default();
    assert_has!(last, "forgotten");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_without_a_server_gives_up_after_30_seconds() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut c = RawClient::spawn(SERVER, &["connect", "--actor", "lonely"], &world.env(), Stdio::piped());
    let answer = c.request("initialize", initialize_params(), Duration::from_secs(20)).await;
    assert_has!(answer.to_string(), "docent-terminal-mcp");
    serve.kill();
    let started = Instant::now();
    let id = c.post_call("session_list", json!({})).await;
    let answer = c.answer(id, Duration::from_secs(45)).await;
    let waited = started.elapsed();
    let status = tokio::time::timeout(Duration::from_secs(5), c.child.wait()).await.expect("exits").expect("status");
    let mut stderr = String::new();
    c.child.stderr.take().expect("stderr").read_to_string(&mut stderr).await.expect("stderr");
    assert!(waited >= Duration::from_secs(29), "gave up after {waited:?}");
    assert!(!status.success());
    assert_eq!(answer["id"], 2);
    assert_has!(answer["error"]["message"].as_str().expect("message"), "for 30 s");
    assert_has!(stderr, "no server answered");
}

/// With no server on its socket from the start, the bridge answers the
/// client's first request at once with how to start one, and exits; it
/// never says a server "went away".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_never_reached_a_server_answers_at_once_how_to_start_one() {
    let world = World::new();
    let socket = socket_of(&world);
    let mut c = RawClient::spawn(SERVER, &["connect", "--actor", "early"], &world.env(), Stdio::piped());
    let answer = c.request("initialize", initialize_params(), Duration::from_secs(5)).await;
    assert_eq!(answer["id"], 1);
    let message = answer["error"]["message"].as_str().expect("an error").to_string();
    assert_has!(message, format!("no server at {}", socket.display()));
    assert_has!(message, "docent-terminal-mcp serve");
    let status = tokio::time::timeout(Duration::from_secs(5), c.child.wait()).await.expect("exits").expect("status");
    assert!(!status.success());
    let mut stderr = String::new();
    c.child.stderr.take().expect("stderr").read_to_string(&mut stderr).await.expect("stderr");
    assert_has!(stderr, "no server at");
    assert!(!stderr.contains("went away"), "{stderr}");
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
    let command = "sleep 1; echo over-$((5*5))";
    // The command ends while no server runs.
    let (reply, _agent, _serve) =
        run_across_a_restart(&world, "r2", command, Duration::from_millis(400), Duration::from_millis(1500)).await;
    // Read back as a fresh run's reply (or, if the call reached only the
    // second server, run there once).
    assert_has!(reply.text, "exit 0 · ");
    assert_has!(reply.text, "over-25");
    assert_eq!(regions::ids_of(&world.session_dir("r2"), command), vec![1], "typed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_server_tells_unasked_reaches_the_client_on_its_event_stream() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let mut raw = RawClient::start(&["connect", "--actor", "alice"], &world.env()).await;
    let limit = Duration::from_secs(30);
    raw.ok("session_create", json!({"name": "ev1"}), limit).await;
    let left = raw.ok("run", json!({"session": "ev1", "command": "sleep 1; echo a", "timeout": 0.2}), limit).await;
    assert_has!(left, "still running");
    let told = raw.log_message("`sleep 1; echo a` (region 1) finished · exit 0", Duration::from_secs(15)).await;
    assert_eq!(told["params"]["level"], "info", "{told}");
    assert_eq!(told["params"]["logger"], "docent-terminal-mcp", "{told}");
    // Told once, though the agent looks again.
    raw.ok("read", json!({"session": "ev1"}), limit).await;
    assert_eq!(raw.told("echo a` (region 1) finished"), 1, "told twice: {:?}", raw.received);
    let mut child = raw.close().await;
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await.expect("exits on EOF");
    assert!(status.expect("status").success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_left_running_is_told_once_after_the_server_restarts() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut raw = RawClient::start(&["connect", "--actor", "alice"], &world.env()).await;
    let limit = Duration::from_secs(30);
    raw.ok("session_create", json!({"name": "ev2"}), limit).await;
    // The command ends only when the test says, after the restart.
    let go = world.tmp.path().join("go");
    let command = format!("until [ -e {} ]; do sleep 0.05; done; echo b", go.display());
    let left = raw.ok("run", json!({"session": "ev2", "command": command, "timeout": 0.2}), limit).await;
    assert_has!(left, "still running");
    let _again = restart(&world, serve, Duration::from_millis(300)).await;
    std::fs::write(&go, "").expect("go");
    let told = raw.log_message("(region 1) finished · exit 0", Duration::from_secs(20)).await;
    assert_has!(told["params"]["data"].as_str().expect("text"), "ev2: `until [ -e");
    // Told once: not again on the event stream, whatever the agent does.
    raw.ok("read", json!({"session": "ev2"}), limit).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    raw.ok("regions", json!({"session": "ev2"}), limit).await;
    raw.drain(Duration::from_millis(200)).await;
    assert_eq!(raw.told("(region 1) finished"), 1, "told twice: {:?}", raw.received);
}

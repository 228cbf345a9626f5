//! The `connect` bridge: agents sharing a session through one server, a
//! server restarted under a call in flight, and a bridge left without one.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::assert_has;
use crate::support::{SERVER, Serve, World, bridge, unix_get};

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

/// A `run` of `command` in a new session `name`, by agent alice over a
/// bridge, with the server killed `kill_after` into it and started again
/// `down_for` later: the reply, the bridge and the new server.
async fn run_across_a_restart(
    world: &World,
    name: &str,
    command: &str,
    kill_after: Duration,
    down_for: Duration,
) -> (dtmcp::mcp_client::Reply, dtmcp::mcp_client::McpChild, Serve) {
    let serve = Serve::start(world, &[]);
    let agent = bridge(world, "alice").await;
    agent.call("session_create", json!({"name": name})).await.expect("create");
    let call = agent.call("run", json!({"session": name, "command": command, "timeout": 20}));
    let restart = async {
        tokio::time::sleep(kill_after).await;
        restart(world, serve, down_for).await
    };
    let (reply, again) = tokio::join!(call, restart);
    let reply = reply.expect("the bridge answers the call in flight");
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

/// The ids of the regions of session `name` that ran `command` (the file
/// has an open and a close record for each).
fn regions_running(world: &World, name: &str, command: &str) -> Vec<u64> {
    let regions = std::fs::read_to_string(world.session_dir(name).join("regions.jsonl")).expect("regions");
    let mut ids: Vec<u64> = regions
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["command"] == command)
        .filter_map(|r| r["id"].as_u64())
        .collect();
    ids.dedup();
    ids
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
    assert_eq!(regions_running(&world, "r1", command), vec![1], "typed once");
    // The bridge keeps working with the new server.
    let after = agent.call("run", json!({"session": "r1", "command": "echo still-$((1+1))"})).await.expect("run");
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
    let made = agent.call("session_create", json!({"name": "f1"})).await.expect("create");
    assert!(!made.is_error, "{}", made.text);
    let kept = world.home().join("http-sessions");
    assert!(std::fs::read_dir(&kept).is_ok_and(|mut d| d.next().is_some()), "the server keeps its MCP sessions");
    serve.kill();
    std::fs::remove_dir_all(&kept).expect("forget the MCP sessions");
    let _again = Serve::start(&world, &[]);
    let ran = agent.call("run", json!({"session": "f1", "command": "echo known-$((3*3))"})).await.expect("run");
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

/// With no server on its socket from the start, the bridge answers the
/// client's first request at once with how to start one, and exits; it
/// never says a server "went away".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_never_reached_a_server_answers_at_once_how_to_start_one() {
    let world = World::new();
    let socket = crate::support::socket_of(&world);
    let mut child = tokio::process::Command::new(SERVER)
        .args(["connect", "--actor", "early"])
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
    let answer = tokio::time::timeout(Duration::from_secs(5), stdout.next_line()).await.expect("answered within 5 s");
    let answer: Value = serde_json::from_str(&answer.expect("read").expect("an answer")).expect("JSON-RPC");
    assert_eq!(answer["id"], 1);
    let message = answer["error"]["message"].as_str().expect("an error").to_string();
    assert_has!(message, format!("no server at {}", socket.display()));
    assert_has!(message, "docent-terminal-mcp serve");
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await.expect("exits").expect("status");
    assert!(!status.success());
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).await.expect("stderr");
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
    assert_eq!(regions_running(&world, "r2", command), vec![1], "typed once");
}

/// A `connect` bridge driven with raw JSON-RPC lines, so that what the
/// server sends unasked can be seen.
struct RawBridge {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// Messages read that were not the answer waited for.
    unasked: Vec<Value>,
    next_id: u64,
}

impl RawBridge {
    /// A bridge for agent `actor`, initialized.
    async fn start(world: &World, actor: &str) -> RawBridge {
        let mut child = tokio::process::Command::new(SERVER)
            .args(["connect", "--actor", actor])
            .envs(world.env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("bridge");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut raw = RawBridge { child, stdin, stdout, unasked: Vec::new(), next_id: 1 };
        let params =
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}});
        raw.request("initialize", params).await;
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        raw
    }

    async fn send(&mut self, msg: Value) {
        self.stdin.write_all(format!("{msg}\n").as_bytes()).await.expect("write");
    }

    /// The next message on stdout, within `limit`.
    async fn read(&mut self, limit: Duration) -> Option<Value> {
        let line = tokio::time::timeout(limit, self.stdout.next_line()).await.ok()?.expect("read")?;
        Some(serde_json::from_str(&line).unwrap_or_else(|_| panic!("stdout carries JSON-RPC only: {line}")))
    }

    /// Sends a request and returns its result; other messages are kept.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        loop {
            let msg = self.read(Duration::from_secs(30)).await.expect("an answer within 30 s");
            if msg["id"] == id && msg.get("method").is_none() {
                return msg["result"].clone();
            }
            self.unasked.push(msg);
        }
    }

    /// The text of a tool call's reply.
    async fn call(&mut self, tool: &str, args: Value) -> String {
        let result = self.request("tools/call", json!({"name": tool, "arguments": args})).await;
        assert_ne!(result["isError"], true, "{result}");
        result["content"][0]["text"].as_str().expect("text").to_string()
    }

    /// Waits (at most `limit`) for a log message holding `needle`.
    async fn log_message(&mut self, needle: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let found = self.unasked.iter().position(|m| {
                m["method"] == "notifications/message"
                    && m["params"]["data"].as_str().is_some_and(|d| d.contains(needle))
            });
            if let Some(at) = found {
                return self.unasked.remove(at);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let msg =
                self.read(left).await.unwrap_or_else(|| panic!("no log message with {needle:?}: {:?}", self.unasked));
            self.unasked.push(msg);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_server_tells_unasked_reaches_the_client_on_its_event_stream() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let mut raw = RawBridge::start(&world, "alice").await;
    raw.call("session_create", json!({"name": "ev1"})).await;
    let left = raw.call("run", json!({"session": "ev1", "command": "sleep 1; echo a", "timeout": 0.2})).await;
    assert_has!(left, "still running");
    let told = raw.log_message("`sleep 1; echo a` (region 1) finished · exit 0", Duration::from_secs(15)).await;
    assert_eq!(told["params"]["level"], "info", "{told}");
    assert_eq!(told["params"]["logger"], "docent-terminal-mcp", "{told}");
    // Told once, though the agent looks again.
    raw.call("read", json!({"session": "ev1"})).await;
    let again = raw.unasked.iter().filter(|m| m.to_string().contains("echo a` (region 1) finished")).count();
    assert_eq!(again, 0, "told twice: {:?}", raw.unasked);
    drop(raw.stdin);
    let status = tokio::time::timeout(Duration::from_secs(5), raw.child.wait()).await.expect("exits on EOF");
    assert!(status.expect("status").success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_left_running_is_told_once_after_the_server_restarts() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut raw = RawBridge::start(&world, "alice").await;
    raw.call("session_create", json!({"name": "ev2"})).await;
    // The command ends only when the test says, after the restart.
    let go = world.tmp.path().join("go");
    let command = format!("until [ -e {} ]; do sleep 0.05; done; echo b", go.display());
    let left = raw.call("run", json!({"session": "ev2", "command": command, "timeout": 0.2})).await;
    assert_has!(left, "still running");
    let _again = restart(&world, serve, Duration::from_millis(300)).await;
    std::fs::write(&go, "").expect("go");
    let told = raw.log_message("(region 1) finished · exit 0", Duration::from_secs(20)).await;
    assert_has!(told["params"]["data"].as_str().expect("text"), "ev2: `until [ -e");
    // Told once: not again on the event stream, whatever the agent does.
    raw.call("read", json!({"session": "ev2"})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    raw.call("regions", json!({"session": "ev2"})).await;
    while let Some(msg) = raw.read(Duration::from_millis(200)).await {
        raw.unasked.push(msg);
    }
    let again = raw.unasked.iter().filter(|m| m.to_string().contains("(region 1) finished")).count();
    assert_eq!(again, 0, "told twice: {:?}", raw.unasked);
}

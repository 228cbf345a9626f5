//! Long calls keep their client informed: `run`, `wait` and `expect` send
//! `notifications/progress` about once a second to a client that gave a
//! `progressToken` (never a secret in them), nothing to one that did not,
//! and a `notifications/cancelled` ends the wait but not the command. Over
//! stdio, the `connect` bridge and HTTP `serve`.

use std::path::Path;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::assert_has;
use crate::support::raw::{RawClient, tool_text};
use crate::support::{Serve, World, poll};

/// A GitHub token of the classic shape, made up.
const GITHUB: &str = "ghp_Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2";
/// A secret known only by its value: it was given in the session's env.
const DEPLOY: &str = "plain-words-progress-value";

/// One message as it came.
struct Came {
    at: Instant,
    msg: Value,
}

/// The progress notifications for `token` among `messages`: when each came,
/// its progress and its message.
fn progress_of(messages: &[Came], token: impl Into<Value>) -> Vec<(Instant, f64, String)> {
    let token = token.into();
    messages
        .iter()
        .filter(|c| c.msg["method"] == "notifications/progress" && c.msg["params"]["progressToken"] == token)
        .map(|c| {
            let p = &c.msg["params"];
            (c.at, p["progress"].as_f64().expect("progress"), p["message"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// Reads `c`'s messages until the answer to `id`: every message before it,
/// and the answer.
async fn until_answer(c: &mut RawClient, id: u64, limit: Duration) -> (Vec<Came>, Came) {
    let deadline = Instant::now() + limit;
    let mut before = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = c.next_message(left).await.unwrap_or_else(|| panic!("no answer to {id} within {limit:?}"));
        let came = Came { at: Instant::now(), msg };
        if came.msg["id"] == id {
            return (before, came);
        }
        before.push(came);
    }
}

/// The arguments of a session whose env holds both secrets.
fn secret_session(name: &str) -> Value {
    json!({"name": name, "env": {"GITHUB_TOKEN": GITHUB, "MY_DEPLOY_TOKEN": DEPLOY}})
}

/// A tool call's params with a progress token.
fn with_token(tool: &str, args: Value, token: impl Into<Value>) -> Value {
    json!({"name": tool, "arguments": args, "_meta": {"progressToken": token.into()}})
}

/// Checks the progress a client got for a `run` that printed both secrets
/// and slept: at least two notifications, the first well before the
/// answer, growing a second at a time, each with a message, none holding a
/// secret, one showing the redacted last line and one the sleeping job.
fn check_progress(got: &[(Instant, f64, String)], answered: Instant) {
    assert!(got.len() >= 2, "progress notifications: {:?}", got.iter().map(|g| &g.2).collect::<Vec<_>>());
    for pair in got.windows(2) {
        // Progress counts the seconds the server waited: about one between
        // two notifications (however a loaded machine bunches delivery).
        let apart = pair[1].1 - pair[0].1;
        assert!(apart >= 0.9, "progress grows by about a second: {} then {}", pair[0].1, pair[1].1);
    }
    let early = answered - got[0].0;
    assert!(early >= Duration::from_millis(800), "the first progress came only {early:?} before the answer");
    for (_, _, message) in got {
        assert!(!message.is_empty(), "a progress message says something");
        assert!(!message.contains(GITHUB) && !message.contains(DEPLOY), "a secret in progress: {message}");
    }
    let all: Vec<&str> = got.iter().map(|g| g.2.as_str()).collect();
    eprintln!("progress: {all:#?}");
    assert!(all.iter().any(|m| m.contains("‹secret:")), "the last line, redacted: {all:?}");
    assert!(all.iter().any(|m| m.contains("`sleep`")), "the foreground job: {all:?}");
    assert!(all.iter().all(|m| m.contains(" so far")), "{all:?}");
}

/// The command the progress tests run: both secrets, then a pause.
fn secret_then_sleep(seconds: u32, done: &str) -> String {
    format!("echo \"$GITHUB_TOKEN $MY_DEPLOY_TOKEN\"; sleep {seconds}; echo {done}")
}

/// A `run` with a token gets its progress, then its reply; the same call
/// without a token gets no progress at all.
async fn progress_then_reply(c: &mut RawClient, session: &str) {
    let args = json!({"session": session, "command": secret_then_sleep(3, "done-$((6*7))")});
    let id = c.post("tools/call", with_token("run", args, "run-1")).await;
    let (before, answer) = until_answer(c, id, Duration::from_secs(30)).await;
    let (text, err) = tool_text(&answer.msg);
    assert!(!err, "{text}");
    assert_has!(text, "done-42");
    assert_has!(text, "exit 0");
    check_progress(&progress_of(&before, "run-1"), answer.at);

    let args = json!({"session": session, "command": "sleep 2.5; echo quiet-$((1+1))"});
    let id = c.post("tools/call", json!({"name": "run", "arguments": args})).await;
    let (before, answer) = until_answer(c, id, Duration::from_secs(30)).await;
    assert_has!(tool_text(&answer.msg).0, "quiet-2");
    let progress: Vec<&Value> =
        before.iter().map(|c| &c.msg).filter(|m| m["method"] == "notifications/progress").collect();
    assert!(progress.is_empty(), "no token, no progress: {progress:?}");
}

/// A `run` cancelled while it waits stops waiting within a slice, nothing
/// answers it (through the bridge: nothing sends it again), its command
/// runs on, and `wait` sees it end.
async fn cancel_ends_the_wait_only(c: &mut RawClient, world: &World, session: &str) {
    let calls = world.home().join("calls.log");
    let runs = || std::fs::read_to_string(&calls).unwrap_or_default().matches(r#""tool":"run""#).count();
    let ran_before = runs();
    let args = json!({"session": session, "command": "sleep 6; echo ended-$((3*5))", "timeout": 60});
    let id = c.post("tools/call", with_token("run", args, "run-cancel")).await;
    // Cancelled once it is waiting: after its first progress.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let msg = c.next_message(deadline.saturating_duration_since(Instant::now())).await.expect("progress comes");
        assert_ne!(msg["id"], id, "answered before it was cancelled: {msg}");
        if msg["params"]["progressToken"] == "run-cancel" {
            break;
        }
    }
    let cancelled_at = Instant::now();
    c.notify("notifications/cancelled", json!({"requestId": id, "reason": "the user pressed escape"})).await;
    // The call ends (and is logged) within a slice of the wait, long before
    // the command does.
    let logged = async || runs() != ran_before;
    poll::until_async("the cancelled run to stop waiting", Duration::from_secs(3), logged).await;
    let stopped = cancelled_at.elapsed();
    let late = c.drain(Duration::from_millis(1500)).await;
    assert!(late.iter().all(|m| m["id"] != id), "no answer to a cancelled request: {late:?}");
    let progress_after: Vec<&Value> = late.iter().filter(|m| m["params"]["progressToken"] == "run-cancel").collect();
    assert!(progress_after.is_empty(), "no progress after the cancel: {progress_after:?}");
    // The command was not touched: it ends in its own time.
    let (text, err) = c.call("wait", json!({"session": session, "timeout": 20}), Duration::from_secs(30)).await;
    assert!(!err, "{text}");
    assert_has!(text, "ended-15");
    assert_has!(text, "exit 0");
    eprintln!("the cancelled run stopped waiting {stopped:?} after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_run_reports_progress_only_when_asked_and_a_cancel_ends_the_wait_only() {
    let w = World::new();
    let mut c = RawClient::start(&[], &w.env()).await;
    let (made, err) = c.call("session_create", secret_session("g1"), Duration::from_secs(20)).await;
    assert!(!err, "{made}");
    progress_then_reply(&mut c, "g1").await;
    cancel_ends_the_wait_only(&mut c, &w, "g1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_run_passes_progress_and_cancellation_through() {
    let world = World::new();
    let _serve = Serve::start(&world, &[]);
    let mut c = RawClient::start(&["connect", "--actor", "alice"], &world.env()).await;
    let (made, err) = c.call("session_create", secret_session("g2"), Duration::from_secs(20)).await;
    assert!(!err, "{made}");
    progress_then_reply(&mut c, "g2").await;
    cancel_ends_the_wait_only(&mut c, &world, "g2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_and_expect_report_progress_too() {
    let w = World::new();
    let mut c = RawClient::start(&[], &w.env()).await;
    let (made, err) = c.call("session_create", json!({"name": "g3"}), Duration::from_secs(20)).await;
    assert!(!err, "{made}");
    let args = json!({"session": "g3", "command": "sleep 3; echo waited-$((2*4))", "timeout": 0.3});
    let (text, _) = c.call("run", args, Duration::from_secs(10)).await;
    assert_has!(text, "still running");
    let id = c.post("tools/call", with_token("wait", json!({"session": "g3"}), "wait-1")).await;
    let (before, answer) = until_answer(&mut c, id, Duration::from_secs(30)).await;
    assert_has!(tool_text(&answer.msg).0, "waited-8");
    let got = progress_of(&before, "wait-1");
    assert!(got.len() >= 2, "wait's progress: {:?}", got.iter().map(|g| &g.2).collect::<Vec<_>>());

    let args = json!({"session": "g3", "command": "sleep 3; echo expected-$((3*3))",
        "rules": [{"pattern": "never-printed", "stop": true}], "until": "expected-9"});
    let id = c.post("tools/call", with_token("expect", args, "expect-1")).await;
    let (before, answer) = until_answer(&mut c, id, Duration::from_secs(30)).await;
    assert_has!(tool_text(&answer.msg).0, "expected-9");
    let got = progress_of(&before, "expect-1");
    assert!(got.len() >= 2, "expect's progress: {:?}", got.iter().map(|g| &g.2).collect::<Vec<_>>());
    assert!(got.iter().any(|g| g.2.contains("`sleep`")), "{:?}", got.iter().map(|g| &g.2).collect::<Vec<_>>());
}

/// A minimal streamable HTTP client on `serve`'s Unix socket.
struct Http<'a> {
    socket: &'a Path,
    session: Option<String>,
}

impl Http<'_> {
    /// POSTs `msg`; hands each JSON-RPC message of the answer, as it comes,
    /// to `each`. Returns the answer's content type.
    async fn post(&mut self, msg: Value, each: impl FnMut(Came)) -> String {
        let (status, kind) = self.send("POST", Some(&msg), each).await;
        assert!((200..300).contains(&status), "{status}: {msg}");
        kind
    }

    /// Sends `msg` (if any) with `method`; hands each JSON-RPC message of
    /// the answer to `each`. Returns the status and the content type.
    async fn send(&mut self, method: &str, msg: Option<&Value>, mut each: impl FnMut(Came)) -> (u16, String) {
        let stream = tokio::net::UnixStream::connect(self.socket).await.expect("connect");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
        tokio::spawn(conn);
        let mut request = hyper::Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(id) = &self.session {
            request = request.header("mcp-session-id", id.as_str());
        }
        let body = msg.map(Value::to_string).unwrap_or_default();
        let request = request.body(Full::new(Bytes::from(body))).expect("request");
        let response = sender.send_request(request).await.expect("send");
        let (parts, mut body) = response.into_parts();
        if let Some(id) = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            self.session = Some(id.to_string());
        }
        let kind = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let mut pending = String::new();
        let limit = Instant::now() + Duration::from_secs(30);
        while let Ok(Some(frame)) = tokio::time::timeout_at(limit.into(), body.frame()).await {
            let Some(data) = frame.expect("frame").data_ref().cloned() else { continue };
            pending.push_str(&String::from_utf8_lossy(&data));
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
                if let Ok(msg) = serde_json::from_str::<Value>(&data.join("\n")) {
                    each(Came { at: Instant::now(), msg });
                }
            }
            if pending.trim_start().starts_with('{') {
                // A plain JSON body rather than a stream.
                if let Ok(msg) = serde_json::from_str::<Value>(&pending) {
                    each(Came { at: Instant::now(), msg });
                    pending.clear();
                }
            }
        }
        (parts.status.as_u16(), kind)
    }

    /// A request's answer and every message before it.
    async fn request(&mut self, msg: Value) -> (Vec<Came>, Came) {
        let id = msg["id"].clone();
        let mut got = Vec::new();
        self.post(msg, |c| got.push(c)).await;
        let at = got.iter().position(|c| c.msg["id"] == id).expect("an answer");
        let answer = got.remove(at);
        (got, answer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_serve_streams_progress_before_the_answer() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut http = Http { socket: &serve.socket, session: None };
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw-http", "version": "0"}});
    http.request(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})).await;
    http.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), drop).await;
    let create = json!({"name": "session_create", "arguments": secret_session("g4")});
    let (_, made) = http.request(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": create})).await;
    assert!(!tool_text(&made.msg).1, "{}", made.msg);
    let args = json!({"session": "g4", "command": secret_then_sleep(3, "over-http")});
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": with_token("run", args, 7)});
    let (before, answer) = http.request(call).await;
    assert_has!(tool_text(&answer.msg).0, "over-http");
    check_progress(&progress_of(&before, 7), answer.at);
}

/// Over HTTP, a call of a session the server knows, without a progress
/// token, is answered as plain JSON (the server's direct path, past rmcp's
/// session worker) by the same connection (its actor in `calls.log`); a
/// call with a token still streams its progress; a cancel ends a direct
/// call's wait without an answer while its command runs on; a session the
/// client closed is refused as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_calls_come_back_as_json_and_a_cancel_ends_a_direct_wait() {
    let world = World::new();
    let serve = Serve::start(&world, &[]);
    let mut http = Http { socket: &serve.socket, session: None };
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "json-http", "version": "0"}});
    http.request(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})).await;
    http.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), drop).await;
    // The notification's answer comes once the server has seen it: the
    // very first call takes the direct path.
    let kind = http.post(json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}), drop).await;
    assert_eq!(kind, "application/json", "the first call after initialized");
    let call = |id: u64, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let mut got = Vec::new();
    let kind =
        http.post(call(2, json!({"name": "session_create", "arguments": {"name": "d1"}})), |c| got.push(c)).await;
    assert_eq!(kind, "application/json", "session_create's answer");
    assert!(!tool_text(&got[0].msg).1, "{}", got[0].msg);

    let run = json!({"name": "run", "arguments": {"session": "d1", "command": "echo direct-$((2*3))"}});
    let mut got = Vec::new();
    let kind = http.post(call(3, run), |c| got.push(c)).await;
    assert_eq!(kind, "application/json");
    assert_eq!(got.len(), 1, "one answer");
    assert_eq!(got[0].msg["id"], 3);
    let (text, err) = tool_text(&got[0].msg);
    assert!(!err, "{text}");
    assert_has!(text, "direct-6");
    assert_has!(text, "exit 0");
    let calls = std::fs::read_to_string(world.home().join("calls.log")).expect("calls.log");
    let last_run = calls.lines().rfind(|l| l.contains(r#""tool":"run""#)).expect("the run is logged");
    assert_has!(last_run, "json-http");

    let mut got = Vec::new();
    let kind = http.post(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}), |c| got.push(c)).await;
    assert_eq!((kind.as_str(), &got[0].msg["result"]), ("application/json", &json!({})));
    let mut got = Vec::new();
    http.post(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}), |c| got.push(c)).await;
    let tools = got[0].msg["result"]["tools"].as_array().expect("tools").len();
    assert!(tools >= 10, "{}", got[0].msg);

    // With a token: rmcp's stream, progress first.
    let args = json!({"session": "d1", "command": "sleep 2; echo streamed"});
    let (before, answer) = http.request(call(6, with_token("run", args, "s-1"))).await;
    assert_has!(tool_text(&answer.msg).0, "streamed");
    assert!(!progress_of(&before, "s-1").is_empty(), "progress before the streamed answer");

    // A direct call cancelled while it waits: its request ends without an
    // answer, long before its command does.
    let session = http.session.clone();
    let mut long = Http { socket: &serve.socket, session: session.clone() };
    let mut canceller = Http { socket: &serve.socket, session };
    let args = json!({"session": "d1", "command": "sleep 6; echo ended-$((3*5))", "timeout": 60});
    let started = Instant::now();
    let mut answered = Vec::new();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    let slow = call(7, json!({"name": "run", "arguments": args}));
    let ((_, kind), cancelled) = tokio::join!(long.send("POST", Some(&slow), |c| answered.push(c.msg)), async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        canceller.send("POST", Some(&cancel), drop).await.0
    });
    assert_eq!(cancelled, 202, "the cancel is taken");
    let ended = started.elapsed();
    assert!(ended < Duration::from_secs(4), "the cancelled run still waited {ended:?}");
    assert!(answered.iter().all(|m| m["id"] != 7), "no answer to a cancelled request: {answered:?} ({kind})");
    let (text, err) = {
        let mut got = Vec::new();
        http.post(call(8, json!({"name": "wait", "arguments": {"session": "d1", "timeout": 20}})), |c| got.push(c))
            .await;
        tool_text(&got[0].msg)
    };
    assert!(!err, "{text}");
    assert_has!(text, "ended-15");

    // A cancel that overtakes its call (a loaded client sends the call
    // late): the call, when it comes, is cancelled before anything is typed.
    let early = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}});
    let (status, _) = http.send("POST", Some(&early), drop).await;
    assert_eq!(status, 202, "the early cancel is taken");
    let overtaken = call(10, json!({"name": "run", "arguments": {"session": "d1", "command": "echo never-$((4*4))"}}));
    let started = Instant::now();
    let mut answered = Vec::new();
    http.send("POST", Some(&overtaken), |c| answered.push(c.msg)).await;
    assert!(started.elapsed() < Duration::from_secs(3), "the overtaken call waited {:?}", started.elapsed());
    assert!(answered.iter().all(|m| m["id"] != 10), "no answer to a cancelled request: {answered:?}");
    let mut got = Vec::new();
    http.post(call(11, json!({"name": "read", "arguments": {"session": "d1", "view": "screen"}})), |c| got.push(c))
        .await;
    let (screen, _) = tool_text(&got[0].msg);
    assert!(!screen.contains("never-"), "the overtaken call typed its line:\n{screen}");

    // Closed by the client: refused, as rmcp refuses an unknown session.
    let (status, _) = http.send("DELETE", None, drop).await;
    assert!((200..300).contains(&status), "DELETE: {status}");
    let (status, _) = http.send("POST", Some(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"})), drop).await;
    assert_eq!(status, 404, "a closed session");
}

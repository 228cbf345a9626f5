//! A raw MCP client: JSON-RPC lines over a child's stdio (a stdio server
//! or a `connect` bridge), so that every message the server sends can be
//! checked, counted and timed, and requests can be left in flight.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::world::SERVER;

/// An MCP client speaking raw JSON-RPC lines over a child's stdio, so that
/// every message the server sends can be checked and counted.
pub struct RawClient {
    /// The child (a `connect` bridge or a stdio server).
    pub child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Every message received, in order.
    pub received: Vec<Value>,
}

impl RawClient {
    /// Starts `SERVER args` with `env` and initializes MCP.
    pub async fn start(args: &[&str], env: &[(String, String)]) -> RawClient {
        RawClient::start_program(SERVER, args, env).await
    }

    /// Starts `program args` (which runs the server) and initializes MCP.
    pub async fn start_program(program: &str, args: &[&str], env: &[(String, String)]) -> RawClient {
        let mut c = RawClient::spawn(program, args, env, Stdio::inherit());
        let r = c.request("initialize", initialize_params(), Duration::from_secs(20)).await;
        assert!(r.get("result").is_some(), "initialize: {r}");
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        c
    }

    /// Starts `program args` with `env` and its stderr to `stderr`, and
    /// sends nothing yet: for tests of what happens before or instead of
    /// an `initialize` answered.
    pub fn spawn(program: &str, args: &[&str], env: &[(String, String)], stderr: Stdio) -> RawClient {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        RawClient { child, stdin, lines, next_id: 1, received: Vec::new() }
    }

    async fn send(&mut self, msg: Value) {
        self.stdin.write_all(format!("{msg}\n").as_bytes()).await.expect("write");
    }

    /// Sends a request and returns its id without waiting.
    pub async fn post(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        id
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    /// The next message within `limit`, if one comes.
    pub async fn next_message(&mut self, limit: Duration) -> Option<Value> {
        let line = tokio::time::timeout(limit, self.lines.next_line()).await.ok()?.expect("read")?;
        let msg = checked_message(&line);
        self.received.push(msg.clone());
        Some(msg)
    }

    /// Sends a tool call and returns its id.
    pub async fn post_call(&mut self, tool: &str, args: Value) -> u64 {
        self.post("tools/call", json!({"name": tool, "arguments": args})).await
    }

    /// Reads messages until the answer to `id`; every line must be one
    /// valid JSON-RPC message without raw control bytes.
    pub async fn answer(&mut self, id: u64, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = tokio::time::timeout(left, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to request {id} within {limit:?}"))
                .expect("read")
                .unwrap_or_else(|| panic!("the output ended before the answer to {id}"));
            let msg = checked_message(&line);
            self.received.push(msg.clone());
            if msg["id"] == id {
                return msg;
            }
        }
    }

    /// A request answered within `limit`.
    pub async fn request(&mut self, method: &str, params: Value, limit: Duration) -> Value {
        let id = self.post(method, params).await;
        self.answer(id, limit).await
    }

    /// The text of a tool call that must succeed.
    pub async fn ok(&mut self, tool: &str, args: Value, limit: Duration) -> String {
        let (text, err) = self.call(tool, args, limit).await;
        assert!(!err, "{tool} returned an error: {text}");
        text
    }

    /// Waits (at most `limit`) for a log message holding `needle`: one
    /// received already, or one still to come.
    pub async fn log_message(&mut self, needle: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(found) = self.received.iter().find(|m| is_log_message(m, needle)) {
                return found.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if self.next_message(left).await.is_none() {
                panic!("no log message with {needle:?} within {limit:?}; received: {:?}", self.received);
            }
        }
    }

    /// How many messages the server sent unasked (not answers) that hold `text`.
    pub fn told(&self, text: &str) -> usize {
        self.received.iter().filter(|m| m.get("method").is_some() && m.to_string().contains(text)).count()
    }

    /// A tool call's text and error flag.
    pub async fn call(&mut self, tool: &str, args: Value, limit: Duration) -> (String, bool) {
        let id = self.post_call(tool, args).await;
        tool_text(&self.answer(id, limit).await)
    }

    /// Messages that arrive within `quiet` (none expected, say).
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut got = Vec::new();
        while let Ok(Ok(Some(line))) = tokio::time::timeout(quiet, self.lines.next_line()).await {
            let msg = checked_message(&line);
            self.received.push(msg.clone());
            got.push(msg);
        }
        got
    }

    /// Closes the client's end of stdin.
    pub async fn close(self) -> Child {
        let RawClient { child, stdin, .. } = self;
        drop(stdin);
        child
    }
}

/// What a raw client says in its `initialize`.
pub fn initialize_params() -> Value {
    json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}})
}

/// Whether `msg` is a log message whose text holds `needle`.
fn is_log_message(msg: &Value, needle: &str) -> bool {
    msg["method"] == "notifications/message" && msg["params"]["data"].as_str().is_some_and(|d| d.contains(needle))
}

/// Parses one line from the server; it must be JSON-RPC 2.0 and carry no
/// raw control byte (JSON escapes them, so none may appear as such).
pub fn checked_message(line: &str) -> Value {
    assert!(!line.chars().any(|c| c.is_control()), "a control character in a message: {line:?}");
    let msg: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert_eq!(msg["jsonrpc"], "2.0", "{line}");
    msg
}

/// The text and error flag of a tool call's answer.
pub fn tool_text(answer: &Value) -> (String, bool) {
    let result = answer.get("result").unwrap_or_else(|| panic!("not a result: {answer}"));
    let text = result["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    (text, result["isError"].as_bool().unwrap_or(false))
}

/// Asserts that `text` holds no ESC, no other C0 control but tab and
/// newline, and no C1 control.
pub fn assert_no_control_chars(what: &str, text: &str) {
    let bad = text.chars().find(|&c| (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c));
    assert!(bad.is_none(), "{what} holds control character {bad:?}:\n{text:?}");
}

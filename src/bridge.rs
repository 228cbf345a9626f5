//! `docent-terminal-mcp connect`: a stdio bridge to the shared server, for
//! clients that start an MCP server as a command.
//!
//! Wire: newline-delimited JSON-RPC on stdin and stdout (stdout carries
//! nothing else; messages for people go to stderr). Each message from the
//! client becomes one `POST /mcp` over the Unix socket, on a kept-alive
//! connection that is free, else a new one; the answer (a JSON body or an
//! event stream) goes back to stdout message by message. Requests are
//! served concurrently, so a long `run` does not hold up a quick `read`.
//!
//! No server: when the socket cannot be reached before any connection was
//! made, no server runs there; the bridge answers the client's request
//! with that, says how to start one on stderr and exits.
//!
//! Restarts: when the server goes away (connection refused or cut), the
//! bridge waits for one to answer and goes on in the same MCP session,
//! which the server keeps on disk and takes up again. Should the server not
//! know the session ("session not found"), the bridge initializes a new
//! one with the client's own `initialize` parameters, which it remembers.
//! Then it sends the calls that were in flight again. Every
//! `tools/call` carries an idempotency key in `_meta`, so a `run` the old
//! server had already typed is followed by the new one, not typed again. If
//! no server answers for [`GIVE_UP_AFTER`], the bridge answers the calls in
//! flight with an error, says why on stderr and exits. It exits when stdin
//! ends.
//!
//! Whatever the server sends while a request runs (`notifications/progress`
//! for a call that carried a `progressToken`) goes to stdout as it comes,
//! not with the answer. A `notifications/cancelled` from the client is
//! passed on like any notification; the server then ends that request's
//! stream without an answer, and the bridge lets the request go instead of
//! sending it again. A 2026-07-28 request has no session to name it in:
//! the bridge cancels it by hanging up its exchange, as an HTTP client of
//! that era does.
//!
//! Both protocol eras pass. A handshake-era client (`initialize`, then
//! requests in its MCP session) is carried as above. A 2026-07-28 client
//! has no `initialize` and no session: each of its requests names its
//! protocol version in `_meta`, so the bridge sends that version as the
//! `MCP-Protocol-Version` header and no session id, and after a server
//! restart simply sends the request again once a server answers.
//!
//! Every request carries `X-Terminal-Bridge`, an id drawn once per bridge
//! process: the server makes each bridge one agent, named after its client
//! and made unique (`claude-code`, `claude-code#2`), in either era and
//! across reconnects (unless `--actor` names it).
//!
//! Messages the server starts itself (log messages telling that a command
//! ended) come on its event stream, `GET /mcp`, which the bridge keeps open
//! from the first `initialize` on and opens again after every reconnect, on
//! the session then current. Event ids count from 0 in each server process,
//! so the bridge resumes after the last event it saw only from the same
//! process (the instance `/health` names); from a new one it reads the
//! stream from its start, which holds exactly what that process sent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::agents::caller::{ACTOR_HEADER, BRIDGE_HEADER, KEY_META, SESSION_HEADER};

/// How long the bridge waits for a server to come back.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(30);
/// The protocol version header of streamable HTTP.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The first pause before opening the event stream again.
const LISTEN_PAUSE: Duration = Duration::from_millis(100);
/// How long a kept connection may stay unused: well below the time after
/// which a server closes an idle one, so that a request rarely meets a
/// connection closing under it.
const KEEP_IDLE: Duration = Duration::from_secs(5);
/// How many unused connections are kept (one per call in flight at once,
/// up to this).
const KEEP_AT_MOST: usize = 8;
/// How long the rest of an answered request's stream is read for before
/// its connection is let go rather than kept.
const DRAIN: Duration = Duration::from_secs(1);

/// A connection to the server's socket, ready for a request.
type Conn = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Why one exchange failed.
enum Failure {
    /// The server is gone or forgot us: reconnect and send again.
    Lost(String),
    /// The server does not know our MCP session: make a new one.
    Forgotten,
    /// The server answered with an error that is not JSON-RPC.
    Refused(String),
}

/// Whether the client waits for an answer to a message it sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Awaits {
    /// A request: it is answered whatever happens.
    Answer,
    /// A notification, or a response to the server: nothing comes back.
    Nothing,
}

/// The MCP session the bridge speaks in, as the server named it.
#[derive(Clone, Debug, Default)]
struct McpSession {
    /// The session id (the `mcp-session-id` header), once the server gave one.
    id: Option<String>,
    /// The protocol version the server chose at `initialize`.
    version: Option<String>,
}

/// Where the bridge stopped reading an event stream, to go on from there.
#[derive(Clone, Debug)]
struct Resume {
    /// The server process that sent the events (`/health`'s instance).
    instance: String,
    /// The MCP session they were sent in.
    session: String,
    /// The id of the last event read.
    event: String,
}

/// How a reconnect tries to get a server to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// The client's first `initialize` is still unanswered: send it, and
    /// its answer goes to the client.
    FirstInitialize,
    /// Go on in the same MCP session (a `ping` takes it up again).
    SameSession,
    /// Make a new MCP session with the client's `initialize`, its answer
    /// kept from the client, which has its own already.
    NewSession,
}

/// The bridge's shared state.
struct Bridge {
    socket: PathBuf,
    actor: Option<String>,
    /// The client's `initialize` request, replayed on reconnect.
    init: Mutex<Option<Value>>,
    /// The current MCP session.
    session: std::sync::Mutex<McpSession>,
    /// Bumped at every successful reconnect.
    generation: AtomicU64,
    /// Held while reconnecting.
    reconnecting: Mutex<()>,
    /// The client has had its answer to `initialize`.
    init_answered: std::sync::atomic::AtomicBool,
    /// Messages for stdout.
    out: mpsc::UnboundedSender<String>,
    /// Bumped whenever the MCP session id changes, so that the event
    /// stream of the old one is left for the new one's.
    moved: watch::Sender<u64>,
    /// The ids of the client's requests not answered yet: each gets an
    /// error answer if the bridge gives up.
    pending: std::sync::Mutex<Vec<Value>>,
    /// The ids (as JSON text) of requests the client cancelled while they
    /// were in flight: a stream that ends without their answer is not a
    /// lost server.
    cancelled: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The 2026-07-28 requests in flight, by id (as JSON text): such a
    /// request has no session in which a `notifications/cancelled` could
    /// name it, so the bridge cancels it by hanging up its exchange.
    sessionless: std::sync::Mutex<HashMap<String, CancellationToken>>,
    /// Connections free for the next request, each with when it was freed.
    idle: std::sync::Mutex<Vec<(Instant, Conn)>>,
    /// A connection to the server's socket was made at least once: until
    /// then a failure means no server runs there, not one that went away.
    reached: std::sync::atomic::AtomicBool,
}

/// Runs the bridge until stdin ends (or no server comes back).
pub async fn run(socket: PathBuf, actor: Option<String>) -> anyhow::Result<()> {
    let actor = actor.map(|a| crate::agents::caller::tidy(&a).ok_or_else(|| anyhow::anyhow!("--actor is empty")));
    let actor = actor.transpose()?;
    let (out, mut outgoing) = mpsc::unbounded_channel::<String>();
    let bridge = Arc::new(Bridge {
        socket,
        actor,
        init: Mutex::new(None),
        session: std::sync::Mutex::new(McpSession::default()),
        generation: AtomicU64::new(0),
        reconnecting: Mutex::new(()),
        init_answered: Default::default(),
        out,
        moved: watch::Sender::new(0),
        pending: std::sync::Mutex::new(Vec::new()),
        cancelled: Default::default(),
        sessionless: Default::default(),
        idle: Default::default(),
        reached: Default::default(),
    });
    let writer = tokio::spawn(async move {
        let mut stdout = crate::stdio::output();
        while let Some(mut msg) = outgoing.recv().await {
            // The line and its end in one write: a reader woken by the
            // first part would only wait again for the rest.
            msg.push('\n');
            let ok = stdout.write_all(msg.as_bytes()).await.is_ok() && stdout.flush().await.is_ok();
            if !ok {
                break;
            }
        }
    });
    tokio::spawn(Arc::clone(&bridge).listen());
    let mut lines = BufReader::new(crate::stdio::input()).lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            bridge.emit(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}}));
            continue;
        };
        bridge.clone().accept(msg).await;
    }
    drop(bridge);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    Ok(())
}

impl Bridge {
    fn emit(&self, msg: Value) {
        let _ = self.out.send(msg.to_string());
    }

    /// Takes one message from the client.
    async fn accept(self: Arc<Self>, mut msg: Value) {
        let method = msg.get("method").and_then(Value::as_str).map(str::to_string);
        let is_request = method.is_some() && msg.get("id").is_some();
        match method.as_deref() {
            Some("initialize") => {
                *self.init.lock().await = Some(msg.clone());
                // In order: nothing else may go before the session exists.
                self.forward(msg, Awaits::Answer).await;
                self.init_answered.store(true, Ordering::SeqCst);
            }
            Some("tools/call") => {
                add_key(&mut msg);
                tokio::spawn(async move { self.forward_request(msg).await });
            }
            _ if is_request => {
                tokio::spawn(async move { self.forward_request(msg).await });
            }
            Some("notifications/cancelled") if self.hang_up(&msg) => {}
            Some("notifications/cancelled") => {
                // Noted before it goes: the server closes the request's
                // stream as soon as it has it.
                if let Some(id) = msg.pointer("/params/requestId") {
                    self.cancelled.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_string());
                }
                self.forward(msg, Awaits::Nothing).await;
            }
            // Notifications and responses: in order, quick.
            _ => self.forward(msg, Awaits::Nothing).await,
        }
    }

    /// Forwards the request `msg` (see [`Bridge::forward`]); one of a
    /// 2026-07-28 client stops when the client cancels it.
    async fn forward_request(&self, msg: Value) {
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        if modern_version(&msg).is_none() {
            return self.forward(msg, Awaits::Answer).await;
        }
        let stop = CancellationToken::new();
        self.sessionless.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_string(), stop.clone());
        tokio::select! {
            () = self.forward(msg, Awaits::Answer) => {}
            // Its exchange is dropped and its connection with it: the
            // server sees the caller leave. No answer is due.
            () = stop.cancelled() => {
                self.pending.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| *p != id);
            }
        }
        self.sessionless.lock().unwrap_or_else(|e| e.into_inner()).remove(&id.to_string());
    }

    /// Cancels the sessionless request the `notifications/cancelled`
    /// `msg` names, if it is one in flight; `false` if it is not.
    fn hang_up(&self, msg: &Value) -> bool {
        let Some(id) = msg.pointer("/params/requestId") else { return false };
        let stop = self.sessionless.lock().unwrap_or_else(|e| e.into_inner()).remove(&id.to_string());
        stop.map(|s| s.cancel()).is_some()
    }

    /// Sends `msg` until it is answered, reconnecting as needed; a request
    /// is answered whatever happens (an error, if no server comes back).
    async fn forward(&self, msg: Value, awaits: Awaits) {
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        if awaits == Awaits::Answer {
            self.pending.lock().unwrap_or_else(|e| e.into_inner()).push(id.clone());
        }
        self.forward_until_answered(&msg, &id, awaits).await;
        if awaits == Awaits::Answer {
            self.pending.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| *p != id);
            self.cancelled.lock().unwrap_or_else(|e| e.into_inner()).remove(&id.to_string());
        }
    }

    /// Whether the client cancelled request `id`.
    fn was_cancelled(&self, id: &Value) -> bool {
        self.cancelled.lock().unwrap_or_else(|e| e.into_inner()).contains(&id.to_string())
    }

    async fn forward_until_answered(&self, msg: &Value, id: &Value, awaits: Awaits) {
        let is_request = awaits == Awaits::Answer;
        loop {
            let seen = self.generation.load(Ordering::SeqCst);
            match self.exchange(msg, awaits).await {
                Ok(()) => return,
                Err(Failure::Refused(why)) => {
                    if is_request {
                        self.emit(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": why}}));
                    }
                    return;
                }
                // A notification the server cannot take now is let go (the
                // next request reconnects); waiting here would hold up
                // the client's requests behind it.
                Err(Failure::Lost(_)) if !is_request => return,
                // The client cancelled it: no answer is due, nothing is sent again.
                Err(Failure::Lost(_)) if self.was_cancelled(id) => return,
                // Never reached: no server runs there, and waiting for one
                // would only hold the client's first request.
                Err(Failure::Lost(_)) if !self.reached.load(Ordering::SeqCst) => self.no_server().await,
                Err(lost @ (Failure::Lost(_) | Failure::Forgotten)) => {
                    let why = match lost {
                        Failure::Lost(why) => why,
                        _ => "the server does not know this session".to_string(),
                    };
                    if !self.reconnect(seen, &why).await {
                        self.give_up(&why).await;
                    }
                    if msg.get("method").and_then(Value::as_str) == Some("initialize") {
                        // The reconnect already initialized; answer the client with that.
                        return;
                    }
                    if !is_request {
                        return;
                    }
                }
            }
        }
    }

    /// No server was ever reached: answer every request in flight, say
    /// how to start one, exit.
    async fn no_server(&self) -> ! {
        let message = format!(
            "no server at {} (start one with `docent-terminal-mcp serve` or the systemd unit: \
             `systemctl --user start docent-terminal-mcp`)",
            self.socket.display()
        );
        for id in self.pending.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            self.emit(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}}));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        eprintln!("docent-terminal-mcp connect: {message}");
        std::process::exit(1);
    }

    /// No server came back: answer every request in flight, explain, exit.
    async fn give_up(&self, why: &str) -> ! {
        let message = format!(
            "no docent-terminal-mcp server answered on {} for {} s",
            self.socket.display(),
            GIVE_UP_AFTER.as_secs()
        );
        for id in self.pending.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            self.emit(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}}));
        }
        // Let the writer put the answers out before leaving.
        tokio::time::sleep(Duration::from_millis(200)).await;
        eprintln!(
            "docent-terminal-mcp connect: no server answered on {} for {} s ({why}); start it \
             (docent-terminal-mcp serve, or systemctl --user start docent-terminal-mcp) and restart this client",
            self.socket.display(),
            GIVE_UP_AFTER.as_secs()
        );
        std::process::exit(1);
    }

    /// Waits for a server and goes on in the same MCP session, or makes a
    /// new one with the client's own `initialize` when the server does not
    /// know it; nothing, if another task already did either since
    /// generation `seen`. `false`: no server within [`GIVE_UP_AFTER`].
    async fn reconnect(&self, seen: u64, why: &str) -> bool {
        let _one = self.reconnecting.lock().await;
        if self.generation.load(Ordering::SeqCst) != seen {
            return true;
        }
        let Some(init) = self.init.lock().await.clone() else { return self.reconnect_sessionless(why).await };
        eprintln!("docent-terminal-mcp connect: the server went away ({why}); reconnecting");
        let started = Instant::now();
        let has_session = self.session.lock().unwrap_or_else(|e| e.into_inner()).id.is_some();
        let mut attempt = match (self.init_answered.load(Ordering::SeqCst), has_session) {
            (false, _) => Attempt::FirstInitialize,
            (true, true) => Attempt::SameSession,
            (true, false) => Attempt::NewSession,
        };
        let mut pause = Duration::from_millis(50);
        while started.elapsed() < GIVE_UP_AFTER {
            let outcome = match attempt {
                Attempt::SameSession => self.ping().await,
                // The client's very first initialize is answered to the
                // client; a replayed one is not (the client already has
                // its answer).
                Attempt::FirstInitialize => {
                    *self.session.lock().unwrap_or_else(|e| e.into_inner()) = McpSession::default();
                    self.exchange(&init, Awaits::Answer).await
                }
                Attempt::NewSession => self.initialize_again(&init).await,
            };
            match outcome {
                Ok(()) => {
                    if attempt != Attempt::FirstInitialize {
                        eprintln!("docent-terminal-mcp connect: reconnected");
                    }
                    self.generation.fetch_add(1, Ordering::SeqCst);
                    return true;
                }
                Err(Failure::Forgotten | Failure::Refused(_)) if attempt == Attempt::SameSession => {
                    attempt = Attempt::NewSession;
                    continue;
                }
                Err(_) => {}
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        false
    }

    /// Waits for a server to take connections again, for a client without
    /// an MCP session (2026-07-28): its requests stand alone, and are sent
    /// again as they are. `false`: no server within [`GIVE_UP_AFTER`].
    async fn reconnect_sessionless(&self, why: &str) -> bool {
        eprintln!("docent-terminal-mcp connect: the server went away ({why}); reconnecting");
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        while started.elapsed() < GIVE_UP_AFTER {
            if self.connect().await.is_ok() {
                eprintln!("docent-terminal-mcp connect: reconnected");
                self.generation.fetch_add(1, Ordering::SeqCst);
                return true;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        false
    }

    /// Whether the server answers in our MCP session (a `ping`, which also
    /// makes a restarted server take the session up again).
    async fn ping(&self) -> Result<(), Failure> {
        let ping = json!({"jsonrpc": "2.0", "id": "docent-terminal-mcp-connect-ping", "method": "ping"});
        self.post(&ping).await.map(|_| ())
    }

    /// A new MCP session with the client's `initialize`, its answer kept
    /// from the client (which has its own already).
    async fn initialize_again(&self, init: &Value) -> Result<(), Failure> {
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = McpSession::default();
        let (headers, answer) = self.post(init).await?;
        self.remember(&headers);
        let version = answer.iter().find_map(|m| m["result"]["protocolVersion"].as_str().map(str::to_string));
        self.session.lock().unwrap_or_else(|e| e.into_inner()).version = version;
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = self.exchange(&done, Awaits::Nothing).await;
        self.moved.send_modify(|n| *n += 1);
        Ok(())
    }

    fn remember(&self, headers: &hyper::HeaderMap) {
        let mut session = self.session.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
            session.id = Some(id.to_string());
        }
    }

    /// One POST whose answers go to the client, each as it comes.
    async fn exchange(&self, msg: &Value, awaits: Awaits) -> Result<(), Failure> {
        let id = msg.get("id").cloned();
        let mut answered = awaits == Awaits::Nothing;
        let headers = self
            .post_each(msg, |m| {
                if let Some(v) = m.get("result").and_then(|r| r.get("protocolVersion")).and_then(Value::as_str) {
                    self.session.lock().unwrap_or_else(|e| e.into_inner()).version = Some(v.to_string());
                }
                answered |= id.as_ref().is_some_and(|id| is_answer_to(&m, id));
                self.emit(m);
            })
            .await?;
        self.remember(&headers);
        if answered { Ok(()) } else { Err(Failure::Lost("the answer was cut off".into())) }
    }

    /// POSTs `msg` to `/mcp`; returns the response headers and every
    /// JSON-RPC message of the answer.
    async fn post(&self, msg: &Value) -> Result<(hyper::HeaderMap, Vec<Value>), Failure> {
        let mut messages = Vec::new();
        let headers = self.post_each(msg, |m| messages.push(m)).await?;
        Ok((headers, messages))
    }

    /// POSTs `msg` to `/mcp` and hands `each` every JSON-RPC message of the
    /// answer as it arrives (progress comes before the answer, while the
    /// request runs); returns the response headers.
    async fn post_each(&self, msg: &Value, mut each: impl FnMut(Value)) -> Result<hyper::HeaderMap, Failure> {
        let body = Bytes::from(msg.to_string());
        let request = || {
            self.request_for(hyper::Method::POST, Some(msg))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(Full::new(body.clone()))
                .map_err(|e| Failure::Refused(format!("bad request: {e}")))
        };
        let (response, conn) = self.send_kept(request).await?;
        let (parts, mut body) = response.into_parts();
        let kind = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if kind.starts_with("text/event-stream") {
            let mut sse = Sse::default();
            let mut answered = false;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| Failure::Lost(format!("stream cut: {e}")))?;
                if let Some(data) = frame.data_ref() {
                    for m in sse.feed(data) {
                        answered |= msg.get("id").is_some_and(|id| is_answer_to(&m, id));
                        each(m);
                    }
                    // The answer to our request ends the exchange; the
                    // stream itself may stay open.
                    if answered {
                        break;
                    }
                }
            }
            // The server ends the stream after the answer: read to its
            // end, the connection then takes the next request. A stream
            // that goes on is let go, and its connection with it.
            let ended = async {
                while let Some(frame) = body.frame().await {
                    frame.ok()?;
                }
                Some(())
            };
            if matches!(tokio::time::timeout(DRAIN, ended).await, Ok(Some(()))) {
                self.keep(conn);
            }
        } else {
            let bytes = body.collect().await.map_err(|e| Failure::Lost(format!("body cut: {e}")))?.to_bytes();
            self.keep(conn);
            if kind.starts_with("application/json") {
                if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                    each(v);
                }
            } else if parts.status == hyper::StatusCode::NOT_FOUND {
                return Err(Failure::Forgotten);
            } else if !parts.status.is_success() {
                let text = String::from_utf8_lossy(&bytes).trim().to_string();
                return Err(Failure::Refused(format!("the server answered {}: {text}", parts.status)));
            }
        }
        Ok(parts.headers)
    }
}

impl Bridge {
    /// A request to `/mcp` with this bridge's session, protocol version and
    /// actor.
    fn request(&self, method: hyper::Method) -> hyper::http::request::Builder {
        self.request_for(method, None)
    }

    /// A request to `/mcp` carrying `msg`: for a message of a sessionless
    /// client (2026-07-28 and later), the version it names, no session, and
    /// the standard headers that version asks for (`Mcp-Method`,
    /// `Mcp-Name`); else this bridge's MCP session and the version chosen
    /// at `initialize`. Both name the bridge, and its actor when `--actor`
    /// gave one.
    fn request_for(&self, method: hyper::Method, msg: Option<&Value>) -> hyper::http::request::Builder {
        let mut request = hyper::Request::builder().method(method).uri("/mcp").header("host", "localhost");
        let modern = msg.and_then(|m| modern_version(m).map(|v| (m, v)));
        let McpSession { id, version } = match &modern {
            Some((msg, v)) => {
                for (name, value) in standard_headers(msg) {
                    request = request.header(name, value);
                }
                McpSession { id: None, version: Some(v.clone()) }
            }
            None => self.session.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        if let Some(s) = id {
            request = request.header(SESSION_HEADER, s);
        }
        if let Some(v) = version {
            request = request.header(VERSION_HEADER, v);
        }
        request = request.header(BRIDGE_HEADER, bridge_id());
        if let Some(a) = &self.actor {
            request = request.header(ACTOR_HEADER, a.as_str());
        }
        request
    }

    /// Sends `request` on a connection of its own to the server's socket.
    async fn send(&self, request: hyper::Request<Full<Bytes>>) -> Result<hyper::Response<Incoming>, Failure> {
        let mut conn = self.connect().await?;
        conn.send_request(request).await.map_err(|e| Failure::Lost(format!("request: {e}")))
    }

    /// A new connection to the server's socket.
    async fn connect(&self) -> Result<Conn, Failure> {
        let stream = crate::quiet_socket::QuietSocket::connect(&self.socket)
            .await
            .map_err(|e| Failure::Lost(format!("cannot connect: {e}")))?;
        let (conn, io) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Failure::Lost(format!("handshake: {e}")))?;
        tokio::spawn(io);
        self.reached.store(true, Ordering::SeqCst);
        Ok(conn)
    }

    /// Sends the request `make` builds on a kept connection when one is
    /// free, else on a new one; returns the response and the connection,
    /// which the caller gives back with [`Bridge::keep`] once it read the
    /// body to its end. A kept connection that fails before any answer
    /// (the server closed it meanwhile) is let go and the request goes on
    /// a new one.
    async fn send_kept(
        &self,
        make: impl Fn() -> Result<hyper::Request<Full<Bytes>>, Failure>,
    ) -> Result<(hyper::Response<Incoming>, Conn), Failure> {
        while let Some(mut conn) = self.kept() {
            if conn.ready().await.is_err() {
                continue;
            }
            if let Ok(response) = conn.send_request(make()?).await {
                return Ok((response, conn));
            }
        }
        let mut conn = self.connect().await?;
        let response = conn.send_request(make()?).await.map_err(|e| Failure::Lost(format!("request: {e}")))?;
        Ok((response, conn))
    }

    /// A kept connection, if one is free and fresh.
    fn kept(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((since, conn)) = idle.pop() {
            if since.elapsed() < KEEP_IDLE && !conn.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    /// Gives back a connection whose last answer was read whole.
    fn keep(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain(|(since, c)| since.elapsed() < KEEP_IDLE && !c.is_closed());
        if idle.len() < KEEP_AT_MOST {
            idle.push((Instant::now(), conn));
        }
    }

    /// Keeps the server's own event stream (`GET /mcp`: messages the server
    /// starts, such as log messages) open and its messages going to
    /// stdout, opening it again whenever it ends or the MCP session
    /// changes. It stops only if the server has no such stream (405).
    async fn listen(self: Arc<Self>) {
        let mut moved = self.moved.subscribe();
        // Where the last stream stopped.
        let mut last: Option<Resume> = None;
        let mut pause = LISTEN_PAUSE;
        loop {
            let session = self.session.lock().unwrap_or_else(|e| e.into_inner()).id.clone();
            let Some(session) = session.filter(|_| self.init_answered.load(Ordering::SeqCst)) else {
                tokio::time::sleep(LISTEN_PAUSE).await;
                continue;
            };
            let Some(instance) = self.instance().await else {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                continue;
            };
            let resume =
                last.as_ref().filter(|r| r.instance == instance && r.session == session).map(|r| r.event.clone());
            moved.mark_unchanged();
            let mut sse = Sse::default();
            let outcome = self.events(resume.as_deref(), &mut sse, &mut moved).await;
            let read = sse.last_id.take().map(|event| Resume { instance, session, event });
            match outcome {
                Listened::Unsupported => return,
                Listened::Refused => last = None,
                Listened::Ended => {
                    pause = LISTEN_PAUSE;
                    last = read.or(last);
                }
                Listened::Moved => {
                    last = None;
                    continue;
                }
                Listened::Unreachable => {}
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// The instance id of the server answering now (new at each start), if
    /// one answers.
    async fn instance(&self) -> Option<String> {
        let request = hyper::Request::get("/health").header("host", "localhost").body(Full::new(Bytes::new())).ok()?;
        let response = self.send(request).await.ok()?;
        let body = response.into_body().collect().await.ok()?.to_bytes();
        let health: Value = serde_json::from_slice(&body).ok()?;
        health["instance"].as_str().map(str::to_string)
    }

    /// One event stream, read to its end (or until the MCP session moves);
    /// its messages go to stdout.
    async fn events(&self, resume: Option<&str>, sse: &mut Sse, moved: &mut watch::Receiver<u64>) -> Listened {
        let mut request = self.request(hyper::Method::GET).header("accept", "text/event-stream");
        if let Some(id) = resume {
            request = request.header("last-event-id", id);
        }
        let Ok(request) = request.body(Full::new(Bytes::new())) else { return Listened::Refused };
        let Ok(response) = self.send(request).await else { return Listened::Unreachable };
        let (parts, mut body) = response.into_parts();
        if parts.status == hyper::StatusCode::METHOD_NOT_ALLOWED {
            return Listened::Unsupported;
        }
        if !parts.status.is_success() {
            return Listened::Refused;
        }
        loop {
            let frame = tokio::select! {
                frame = body.frame() => frame,
                _ = moved.changed() => return Listened::Moved,
            };
            let Some(Ok(frame)) = frame else { return Listened::Ended };
            if let Some(data) = frame.data_ref() {
                for (id, m) in sse.feed_with_ids(data) {
                    // A server may send the event named in Last-Event-ID
                    // again (rmcp does); the client has it already.
                    if resume.is_none() || id.as_deref() != resume {
                        self.emit(m);
                    }
                }
            }
        }
    }
}

/// How an event stream ended.
enum Listened {
    /// The server has no event stream for clients.
    Unsupported,
    /// The server refused it (an unknown MCP session, a resume it cannot
    /// serve): try again afresh.
    Refused,
    /// It was open and ended (the server stopped, or closed it).
    Ended,
    /// The bridge moved to another MCP session meanwhile.
    Moved,
    /// No server answered.
    Unreachable,
}

fn is_answer_to(m: &Value, id: &Value) -> bool {
    m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
}

/// Gives a `tools/call` an idempotency key of its own (kept if present).
fn add_key(msg: &mut Value) {
    let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) else { return };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.entry(KEY_META).or_insert_with(|| Value::String(new_key()));
    }
}

/// A key no other call of any bridge has: this bridge's id and a count.
fn new_key() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", bridge_id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// This bridge's id: random, drawn once per process. It prefixes the
/// idempotency keys and names the bridge to the server (one agent per
/// bridge).
fn bridge_id() -> &'static str {
    static ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let mut bytes = [0u8; 12];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
        match read {
            Ok(()) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
            Err(_) => format!("{}-{}", std::process::id(), crate::config::now_ms()),
        }
    });
    &ID
}

/// The headers 2026-07-28 asks of every request, so that what sits between
/// client and server can route it without reading the body: `Mcp-Method`,
/// and `Mcp-Name` for the methods that name something (a tool, a prompt, a
/// resource, a task). A value that cannot stand in a header as it is goes
/// as `=?base64?…?=`.
fn standard_headers(msg: &Value) -> Vec<(&'static str, String)> {
    let Some(method) = msg.get("method").and_then(Value::as_str) else { return Vec::new() };
    let mut out = vec![("mcp-method", method.to_string())];
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(name) = key.and_then(|k| msg.pointer(&format!("/params/{k}"))).and_then(Value::as_str) {
        out.push(("mcp-name", header_value(name)));
    }
    out
}

/// `value` as an HTTP header value: as it is when it is printable ASCII
/// without spaces at its ends, else Base64 between `=?base64?` and `?=`.
fn header_value(value: &str) -> String {
    use base64::Engine;
    let printable = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    let padded = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let wrapped = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = printable && !padded && !wrapped;
    match plain {
        true => value.to_string(),
        false => format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(value)),
    }
}

/// The protocol version a message of a sessionless (2026-07-28 or later)
/// client names in its `_meta`, if it is one.
fn modern_version(msg: &Value) -> Option<String> {
    let version = msg.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")?.as_str()?;
    (version >= "2026-07-28").then(|| version.to_string())
}

/// An incremental reader of `text/event-stream`: bytes in, the JSON of
/// each complete event's `data` out (empty and non-JSON events skipped).
#[derive(Default)]
struct Sse {
    pending: Vec<u8>,
    data: String,
    /// The id of the event being read, if it has one.
    id: Option<String>,
    /// The id of the last complete event that carried a message (not a
    /// priming event's: its id may be a real event's too).
    last_id: Option<String>,
}

impl Sse {
    fn feed(&mut self, bytes: &[u8]) -> Vec<Value> {
        self.feed_with_ids(bytes).into_iter().map(|(_, v)| v).collect()
    }

    /// Like [`Sse::feed`], each message with its event's id.
    fn feed_with_ids(&mut self, bytes: &[u8]) -> Vec<(Option<String>, Value)> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                let id = self.id.take();
                let data = std::mem::take(&mut self.data);
                if let Ok(v) = serde_json::from_str::<Value>(&data) {
                    if id.is_some() {
                        self.last_id.clone_from(&id);
                    }
                    out.push((id, v));
                }
            } else if let Some(rest) = line.strip_prefix("id:") {
                self.id = Some(rest.trim().to_string());
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_across_chunks_and_priming_events_skipped() {
        let stream = b"id: 0\nretry: 3000\ndata:\n\nid: 0\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata: \"result\":{}}\n\n: ping\n\nid: 9\ndata:\n\n";
        let whole = Sse::default().feed(stream);
        let mut sse = Sse::default();
        let mut pieces = Vec::new();
        for chunk in stream.chunks(3) {
            pieces.extend(sse.feed(chunk));
        }
        assert_eq!(whole, pieces);
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0]["id"], 1);
        assert_eq!(sse.last_id.as_deref(), Some("0"), "a priming event's id is not kept");
    }

    #[test]
    fn a_call_gets_a_key_and_keeps_one_it_has() {
        let mut call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "run"}});
        add_key(&mut call);
        let key = call["params"]["_meta"][KEY_META].as_str().expect("key").to_string();
        assert!(key.len() >= 8);
        add_key(&mut call);
        assert_eq!(call["params"]["_meta"][KEY_META], key.as_str());
    }
}

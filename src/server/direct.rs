//! The direct path for the calls agents make all day over HTTP.
//!
//! rmcp's stateful streamable-HTTP transport hands each request of a session
//! through several tasks (the HTTP service, the session's worker, its
//! service loop, the handler, then back along a per-request event stream),
//! and the hops cost as much as a `run true` itself on a loaded machine.
//! A `tools/call`, `tools/list` or `ping` of a session this server already
//! knows, sent without a progress token, is answered here instead: the
//! handler of that session's connection is called at once and its answer
//! is sent back as `application/json`, which the MCP specification allows
//! for any POST. Everything else goes to rmcp unchanged: `initialize`,
//! notifications, GET streams, DELETE, calls that want progress, newer
//! protocol versions (per-request metadata, standard headers), unknown or
//! ended sessions (rmcp restores or refuses them) and anything malformed,
//! so that its error is the one the client gets.
//!
//! A direct call runs on the connection's task, with no hop to another
//! task and thread; should the client hang up mid-call, what is left of the
//! call goes on in a task of its own ([`Finish`]), so the command is not
//! cut short, as under rmcp. A
//! `notifications/cancelled` naming a direct call ends its wait, as rmcp
//! does for its own; one that overtakes its call (the two come on separate
//! connections, and a loaded client or server can send or take the call's
//! later) is kept for a while, and the call it names is cancelled as it
//! comes. The session's worker in rmcp closes a session it has
//! not heard of for five minutes; a session busy on the direct path is
//! touched once a minute so that it does not.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, Extensions, GetMeta, ProtocolVersion, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext, RoleServer, Service};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use crate::agents::caller::{CallerLeft, SESSION_HEADER};
use crate::tools::Terminal;

/// The header naming the protocol version of a request.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The largest request body read (rmcp's own limit).
const MAX_BODY: usize = 4 * 1024 * 1024;
/// How often a session served here is shown to rmcp's worker as alive
/// (its idle limit is five minutes).
const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// How long the answer to `notifications/initialized` waits for its
/// session's connection to see it (it takes microseconds; see
/// [`Direct::to_rmcp_learning`]).
const LEARN_WITHIN: Duration = Duration::from_secs(1);
/// A request id rmcp never gives a request-wise stream (its ids count up
/// from zero), so closing it is a no-op that still counts as activity.
const NO_STREAM: u64 = u64::MAX;
/// How long a cancel naming no call under way is kept for a call that
/// comes after it, and how many are kept at most.
const EARLY_FOR: Duration = Duration::from_secs(30);
const EARLY_MAX: usize = 64;

/// rmcp's transport with the direct path in front of it.
pub struct Direct {
    rmcp: StreamableHttpService<Terminal, LocalSessionManager>,
    manager: Arc<LocalSessionManager>,
    /// The server; each session's connection is found through it.
    terminal: Terminal,
    /// The direct calls under way, by session and request id: how to end
    /// their wait.
    running: Mutex<HashMap<(String, RequestId), CancellationToken>>,
    /// Cancels that named no call under way, newest last, with when they
    /// came: the call may still be on its way.
    early: Mutex<VecDeque<((String, RequestId), Instant)>>,
    /// When each session served here was last shown to rmcp as alive.
    touched: Mutex<HashMap<String, Instant>>,
}

/// The connection a direct call is answered on: the server as that
/// connection sees it, and the client's side of it.
struct Caller {
    terminal: Terminal,
    peer: Peer<RoleServer>,
}

/// What the direct path makes of a request.
enum Route {
    /// A request it answers.
    Answer { session: String, id: RequestId, request: Box<ClientRequest>, to: Caller },
    /// Anything else: rmcp's.
    Rmcp,
}

impl Direct {
    /// The direct path in front of `rmcp`, whose sessions `manager` keeps.
    pub fn new(
        rmcp: StreamableHttpService<Terminal, LocalSessionManager>,
        manager: Arc<LocalSessionManager>,
        terminal: Terminal,
    ) -> Direct {
        Direct {
            rmcp,
            manager,
            terminal,
            running: Mutex::default(),
            early: Mutex::default(),
            touched: Mutex::default(),
        }
    }

    /// Serves one request of `/mcp`. A JSON body is read here whatever
    /// path it takes, so that one that is no JSON-RPC message, or a
    /// `tools/call` whose params are not a call's, is answered as
    /// JSON-RPC says (rmcp would answer the first with HTTP 415 alone, and
    /// the second as an unknown method).
    pub async fn serve(State(direct): State<Arc<Direct>>, request: Request) -> Response {
        if request.method() != Method::POST || !json_in(request.headers()) {
            return direct.to_rmcp(request).await;
        }
        let (parts, body) = request.into_parts();
        let bytes = match read_body(body).await {
            Ok(bytes) => bytes,
            Err(refused) => return refused,
        };
        let message = match checked(&bytes) {
            Ok(message) => message,
            Err(answer) => return *answer,
        };
        if let Some(token) = direct.cancel_of(&parts.headers, &message) {
            token.cancel();
            return StatusCode::ACCEPTED.into_response();
        }
        let Some((session, to)) = direct.candidate(&parts.method, &parts.headers).await else {
            return direct.to_rmcp_learning(parts, bytes, &message).await;
        };
        match direct.route(session, to, message) {
            Route::Answer { session, id, request, to } => direct.answer(session, id, *request, to, parts).await,
            Route::Rmcp => direct.to_rmcp(Request::from_parts(parts, Body::from(bytes))).await,
        }
    }

    /// The session of a request the direct path may take, with its
    /// connection: a POST of JSON, in a session rmcp holds and this server
    /// has served (so it has initialized), by a client of a protocol
    /// version without per-request metadata.
    async fn candidate(&self, method: &Method, headers: &HeaderMap) -> Option<(String, Caller)> {
        if method != Method::POST || !plain_headers(headers) {
            return None;
        }
        let session = headers.get(SESSION_HEADER)?.to_str().ok()?.to_string();
        let terminal = self.terminal.for_http_session(&session)?;
        let peer = terminal.peer()?;
        if !self.manager.has_session(&session.clone().into()).await.unwrap_or(false) {
            // Closed by the client or ended idle: rmcp restores or refuses it.
            self.terminal.forget_http_session(&session);
            self.touched.lock().unwrap_or_else(|e| e.into_inner()).remove(&session);
            return None;
        }
        Some((session, Caller { terminal, peer }))
    }

    /// The wait to end for `message`, a `notifications/cancelled` naming a
    /// direct call under way in the session `headers` name. Looked up
    /// whatever else the request is, so that a cancel finds its call even
    /// should the session no longer be a candidate. One naming no such
    /// call (rmcp's own, or one still on its way) goes on to rmcp, and is
    /// kept in case its call comes after it.
    fn cancel_of(&self, headers: &HeaderMap, message: &ClientJsonRpcMessage) -> Option<CancellationToken> {
        let ClientJsonRpcMessage::Notification(n) = message else { return None };
        let ClientNotification::CancelledNotification(c) = &n.notification else { return None };
        let session = headers.get(SESSION_HEADER)?.to_str().ok()?.to_string();
        let key = (session, c.params.request_id.clone()?);
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let token = running.get(&key).cloned();
        if token.is_none() {
            self.remember_early(key);
        }
        token
    }

    /// Where the message of a candidate goes.
    fn route(&self, session: String, to: Caller, message: ClientJsonRpcMessage) -> Route {
        match message {
            ClientJsonRpcMessage::Request(call) if direct_kind(&call.request) => {
                Route::Answer { session, id: call.id, request: Box::new(call.request), to }
            }
            _ => Route::Rmcp,
        }
    }

    /// Answers `request` with the handler of the session's connection.
    async fn answer(
        self: &Arc<Self>,
        session: String,
        id: RequestId,
        mut request: ClientRequest,
        to: Caller,
        parts: axum::http::request::Parts,
    ) -> Response {
        let Caller { terminal, peer } = to;
        let ct = CancellationToken::new();
        let mut context = RequestContext::new(id.clone(), peer);
        context.ct = ct.clone();
        std::mem::swap(&mut context.meta, request.get_meta_mut());
        let mut extensions = Extensions::new();
        extensions.insert(parts);
        let left = CancellationToken::new();
        extensions.insert(CallerLeft(left.clone()));
        context.extensions = extensions;
        let key = (session.clone(), id.clone());
        {
            // Checked under the lock a cancel takes: it either finds the
            // call here or is found in `early` now.
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            if self.take_early(&key) {
                ct.cancel();
            }
            running.insert(key.clone(), ct.clone());
        }
        self.touch(&session);
        // A client hanging up does not drop the call midway (see `Finish`);
        // a panic in it is answered as an error, as from a task of its own.
        let call = AssertUnwindSafe(async move { terminal.handle_request(request, context).await });
        let handled = Finish::new(call.catch_unwind(), left).await;
        self.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
        if ct.is_cancelled() {
            // A cancelled request gets no answer: an empty stream, as rmcp
            // ends its own.
            return ([(header::CONTENT_TYPE, "text/event-stream")], "").into_response();
        }
        let message = match handled {
            Ok(Ok(result)) => ServerJsonRpcMessage::response(result, id),
            Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(id)),
            Err(panic) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                let error = rmcp::ErrorData::internal_error(format!("the call failed inside the server: {why}"), None);
                ServerJsonRpcMessage::error(error, Some(id))
            }
        };
        match serde_json::to_vec(&message) {
            Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the answer: {e}")).into_response(),
        }
    }

    /// Hands `request`, which the direct path does not take, to rmcp; if
    /// it is the `notifications/initialized` of a session whose later calls
    /// the direct path will take, the answer waits (for [`LEARN_WITHIN`] at
    /// most) until the session's connection has seen it. rmcp accepts the
    /// notification before its handler runs, so without the wait a client's
    /// first call could overtake it and go the slow way through rmcp.
    async fn to_rmcp_learning(
        &self,
        parts: axum::http::request::Parts,
        bytes: Bytes,
        message: &ClientJsonRpcMessage,
    ) -> Response {
        let session = parts.headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
        let session = session.filter(|_| plain_headers(&parts.headers));
        let initialized = matches!(
            message,
            ClientJsonRpcMessage::Notification(n) if matches!(n.notification, ClientNotification::InitializedNotification(_))
        );
        let response = self.to_rmcp(Request::from_parts(parts, Body::from(bytes))).await;
        if let Some(session) = session
            && initialized
            && response.status().is_success()
        {
            self.terminal.http_session_learned(&session, LEARN_WITHIN).await;
        }
        response
    }

    /// Hands `request` to rmcp.
    async fn to_rmcp(&self, request: Request) -> Response {
        self.rmcp.handle(request).await.map(Body::new)
    }

    /// Keeps a cancel that named no call under way (see [`EARLY_FOR`]).
    fn remember_early(&self, key: (String, RequestId)) {
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        early.retain(|(_, at)| at.elapsed() < EARLY_FOR);
        if early.len() >= EARLY_MAX {
            early.pop_front();
        }
        early.push_back((key, Instant::now()));
    }

    /// Whether a cancel came for `key` before the call did (and forgets it).
    fn take_early(&self, key: &(String, RequestId)) -> bool {
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        match early.iter().position(|(k, at)| k == key && at.elapsed() < EARLY_FOR) {
            Some(at) => early.remove(at).is_some(),
            None => false,
        }
    }

    /// Shows rmcp's worker of `session` that it is in use, at most once
    /// per [`TOUCH_EVERY`], without delaying the call; and forgets the
    /// sessions rmcp no longer holds (a client that went away without a
    /// DELETE sends nothing more that would show it).
    fn touch(self: &Arc<Self>, session: &str) {
        {
            let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
            if touched.get(session).is_some_and(|at| at.elapsed() < TOUCH_EVERY) {
                return;
            }
            touched.insert(session.to_string(), Instant::now());
        }
        let direct = Arc::clone(self);
        let session = session.to_string();
        tokio::spawn(async move {
            // Only sessions known before rmcp's are looked at can be found
            // gone: one learned meanwhile is not in the look, yet lives.
            let known = direct.terminal.http_sessions();
            let (handle, live) = {
                let sessions = direct.manager.sessions.read().await;
                let live: HashSet<String> = sessions.keys().map(|id| id.to_string()).collect();
                (sessions.get(session.as_str()).cloned(), live)
            };
            if let Some(handle) = handle {
                let _ = handle.close_request_wise_channel(NO_STREAM).await;
            }
            for gone in known.iter().filter(|id| !live.contains(*id)) {
                direct.terminal.forget_http_session(gone);
            }
            direct.touched.lock().unwrap_or_else(|e| e.into_inner()).retain(|id, _| live.contains(id));
        });
    }
}

/// A future run where it is awaited, and finished in a task of its own if
/// it is dropped before it ends: hyper drops a connection's futures when
/// the client hangs up, and a call must not stop halfway through typing or
/// before its record is written. Awaiting it in place spares a call the
/// hand-over to another task (a wake-up of the other worker thread, and
/// back) that spawning it would cost. A call that has nothing to finish
/// for nobody (a search) learns of the hang-up from `left`.
struct Finish<F: Future + Send + 'static>
where
    F::Output: Send + 'static,
{
    call: Option<Pin<Box<F>>>,
    /// Cancelled when the call is left to finish alone.
    left: CancellationToken,
}

impl<F: Future + Send + 'static> Finish<F>
where
    F::Output: Send + 'static,
{
    fn new(call: F, left: CancellationToken) -> Finish<F> {
        Finish { call: Some(Box::pin(call)), left }
    }
}

impl<F: Future + Send + 'static> Future for Finish<F>
where
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(call) = self.call.as_mut() else { return Poll::Pending };
        let out = call.as_mut().poll(cx);
        if out.is_ready() {
            self.call = None;
        }
        out
    }
}

impl<F: Future + Send + 'static> Drop for Finish<F>
where
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(call) = self.call.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            self.left.cancel();
            runtime.spawn(call);
        }
    }
}

/// A request's body, or the answer refusing one too large.
async fn read_body(body: Body) -> Result<Bytes, Response> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        let why = "Payload Too Large: a request body may be at most 4 MiB";
        (StatusCode::PAYLOAD_TOO_LARGE, why).into_response()
    })
}

/// Whether a request says its body is JSON.
fn json_in(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// The JSON-RPC message in `bytes`, or the JSON-RPC error that answers a
/// body that is none: a parse error (-32700) for what is not JSON, a batch
/// (the MCP versions we speak have none) or JSON of another shape; invalid
/// params (-32602) for a `tools/call` whose params are not a call's (its
/// `arguments` not an object, say), which rmcp would take for an unknown
/// method.
fn checked(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Box<Response>> {
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(ClientJsonRpcMessage::Request(call)) => match bad_call(&call.request) {
            None => return Ok(ClientJsonRpcMessage::Request(call)),
            Some(why) => {
                let error = rmcp::ErrorData::invalid_params(why, None);
                let message = ServerJsonRpcMessage::error(error, Some(call.id));
                let answer = match serde_json::to_vec(&message) {
                    Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
                    Err(e) => {
                        (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the answer: {e}")).into_response()
                    }
                };
                return Err(Box::new(answer));
            }
        },
        Ok(message) => return Ok(message),
        Err(e) => e,
    };
    let why = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Err(e) => format!("Parse error: the body is not JSON ({e})"),
        Ok(serde_json::Value::Array(_)) => {
            "Parse error: a batch (a JSON array) is not accepted; send one JSON-RPC message per request".to_string()
        }
        Ok(_) => format!("Parse error: the body is not a JSON-RPC message ({error})"),
    };
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32700, "message": why } });
    Err(Box::new(
        (StatusCode::BAD_REQUEST, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response(),
    ))
}

/// Why a request is a `tools/call` whose params are not a call's, if it is.
fn bad_call(request: &ClientRequest) -> Option<String> {
    let ClientRequest::CustomRequest(custom) = request else { return None };
    if custom.method != "tools/call" {
        return None;
    }
    let arguments = custom.params.as_ref().and_then(|p| p.get("arguments"));
    Some(match arguments {
        Some(a) if !a.is_object() && !a.is_null() => {
            let kind = match a {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                _ => "a boolean",
            };
            format!("Invalid params: `arguments` must be an object of the tool's parameters by name; got {kind}")
        }
        _ => match custom.params_as::<rmcp::model::CallToolRequestParams>() {
            Err(e) => format!("Invalid params: tools/call takes {{\"name\": TOOL, \"arguments\": {{…}}}}: {e}"),
            Ok(_) => "Invalid params: tools/call takes {\"name\": TOOL, \"arguments\": {…}}".to_string(),
        },
    })
}

/// Whether the direct path answers requests of this kind.
fn direct_kind(request: &ClientRequest) -> bool {
    let kind = matches!(
        request,
        ClientRequest::CallToolRequest(_) | ClientRequest::ListToolsRequest(_) | ClientRequest::PingRequest(_)
    );
    let meta = request.get_meta();
    kind && meta.get_progress_token().is_none() && meta.protocol_version().is_none()
}

/// Whether a request's headers are those of the direct path: JSON in,
/// JSON or a stream accepted (as rmcp requires), a protocol version
/// without standard headers, and none of those headers.
fn plain_headers(headers: &HeaderMap) -> bool {
    let accepts = |kind: &str| {
        headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case(kind))))
    };
    let version_ok = match headers.get(VERSION_HEADER) {
        None => true,
        Some(v) => v.to_str().is_ok_and(|v| {
            ProtocolVersion::KNOWN_VERSIONS.iter().any(|k| k.as_str() == v)
                && v < ProtocolVersion::STANDARD_HEADERS.as_str()
        }),
    };
    let standard = headers.keys().any(|k| {
        let k = k.as_str();
        k == "mcp-method" || k == "mcp-name" || k.starts_with("mcp-param-")
    });
    json_in(headers) && accepts("application/json") && accepts("text/event-stream") && version_ok && !standard
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().expect("header value"));
        }
        h
    }

    const BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");
    const JSON: (&str, &str) = ("content-type", "application/json; charset=utf-8");

    #[test]
    fn only_plain_json_posts_of_older_protocol_versions_take_the_direct_path() {
        assert!(plain_headers(&headers(&[BOTH, JSON])));
        assert!(plain_headers(&headers(&[BOTH, JSON, ("mcp-protocol-version", "2025-06-18")])));
        // rmcp refuses these with its own status; the direct path must not answer them.
        assert!(!plain_headers(&headers(&[("accept", "application/json"), JSON])));
        assert!(!plain_headers(&headers(&[BOTH, ("content-type", "text/plain")])));
        assert!(!plain_headers(&headers(&[BOTH, JSON, ("mcp-protocol-version", "1999-01-01")])));
        // Newer versions check standard headers and per-request metadata.
        assert!(!plain_headers(&headers(&[BOTH, JSON, ("mcp-protocol-version", "2026-07-28")])));
        assert!(!plain_headers(&headers(&[BOTH, JSON, ("mcp-method", "tools/call")])));
    }

    /// The JSON-RPC error `checked` answers `body` with: HTTP status, code
    /// and message.
    fn refused(body: &str) -> (u16, i64, String) {
        let response = *checked(body.as_bytes()).expect_err("refused");
        let status = response.status().as_u16();
        let bytes = futures_util::FutureExt::now_or_never(axum::body::to_bytes(response.into_body(), 1 << 20))
            .expect("a body at hand")
            .expect("a body");
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
        let code = v["error"]["code"].as_i64().expect("a code");
        (status, code, v["error"]["message"].as_str().unwrap_or_default().to_string())
    }

    #[test]
    fn bodies_that_are_no_json_rpc_get_json_rpc_errors() {
        let (status, code, why) = refused("{not json");
        assert_eq!((status, code), (400, -32700), "{why}");
        let (_, code, why) = refused(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
        assert_eq!(code, -32700);
        assert!(why.contains("batch"), "{why}");
        let (status, code, why) =
            refused(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":"echo hi"}}"#);
        assert_eq!((status, code), (200, -32602), "{why}");
        assert!(why.contains("`arguments` must be an object") && why.contains("a string"), "{why}");
        let (_, code, _) = refused(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}"#);
        assert_eq!(code, -32602, "no name");
        let call = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run","arguments":{}}}"#;
        assert!(checked(call.as_bytes()).is_ok());
    }

    #[test]
    fn calls_that_want_progress_go_to_rmcp() {
        let parse = |v: serde_json::Value| match serde_json::from_value::<ClientJsonRpcMessage>(v) {
            Ok(ClientJsonRpcMessage::Request(r)) => r.request,
            other => panic!("not a request: {other:?}"),
        };
        let plain = parse(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run", "arguments": {"session": "s", "command": "true"}}}));
        assert!(direct_kind(&plain));
        let progress = parse(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run", "arguments": {}, "_meta": {"progressToken": "t"}}}));
        assert!(!direct_kind(&progress));
        let ping = parse(serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
        assert!(direct_kind(&ping));
        let init = parse(serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params":
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}));
        assert!(!direct_kind(&init));
    }
}

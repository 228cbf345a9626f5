//! Who is calling: the agent (actor) behind a tool call, and the
//! idempotency key a `run` may carry.
//!
//! An agent is named by the strongest thing the server has, in this order:
//!
//! 1. the `X-Terminal-Actor` header (the `connect` bridge's `--actor` sends
//!    it), stably across reconnects;
//! 2. a token that names its agent (`docent-terminal-mcp token --agent
//!    NAME`), on TCP;
//! 3. the bridge it comes through: every `connect` process sends
//!    `X-Terminal-Bridge` with an id of its own, and each bridge is one
//!    agent, named after its client and made unique (`claude-code`,
//!    `claude-code#2`) once, for the server's life, whatever the protocol
//!    era and however often the bridge reconnects;
//! 4. the connection: a handshake-era client's name from `initialize`,
//!    made unique per connection (stdio, or an HTTP MCP session);
//! 5. the client's name from the request's `_meta`
//!    (`io.modelcontextprotocol/clientInfo`, 2026-07-28): over stdio the
//!    connection is one client, so it is made unique once; over HTTP with
//!    no header and no bridge two copies of one client cannot be told
//!    apart, and carry the same name.
//!
//! Never by an HTTP session alone: the 2026-07-28 revision has none.
//!
//! The caller of the call being served is kept in a task-local, set by
//! `call_tool` around the tool's body, so the tool bodies need no extra
//! argument to know it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rmcp::model::Extensions;
use tokio_util::sync::CancellationToken;

/// The header that names an agent.
pub const ACTOR_HEADER: &str = "x-terminal-actor";
/// The header with which a `connect` bridge names itself.
pub const BRIDGE_HEADER: &str = "x-terminal-bridge";
/// The header naming an HTTP MCP session.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The `_meta` key under which the bridge sends a `run`'s idempotency key.
pub const KEY_META: &str = "docent-terminal-mcp/idempotency-key";
/// The longest actor name kept.
const MAX_ACTOR: usize = 64;

tokio::task_local! {
    static CALLER: Caller;
    /// When the call being served reached the server.
    static ARRIVED: Instant;
}

/// When an HTTP request reached the server, stamped by [`stamp_arrival`]
/// before any other layer sees it, so that `calls.log` counts the time a
/// request waits in the transport too.
#[derive(Clone, Copy, Debug)]
pub struct Arrived(pub Instant);

/// An axum middleware that stamps each request with its [`Arrived`] time.
pub async fn stamp_arrival(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    request.extensions_mut().insert(Arrived(Instant::now()));
    next.run(request).await
}

/// When the request of a call reached the server: the HTTP request's stamp
/// when there is one, else now (a call over stdio is handed to the server
/// as soon as its line is read).
pub fn arrival(extensions: &Extensions) -> Instant {
    let stamped = extensions.get::<axum::http::request::Parts>().and_then(|p| p.extensions.get::<Arrived>());
    stamped.map_or_else(Instant::now, |a| a.0)
}

/// When the call being served arrived, if one is being served.
pub fn arrived() -> Option<Instant> {
    ARRIVED.try_with(|t| *t).ok()
}

/// How long the call being served has taken as its client sees it: since
/// its request arrived, or `elapsed` (the tool's own time) when that is
/// longer or no call is being served.
pub fn client_time(elapsed: std::time::Duration) -> std::time::Duration {
    arrived().map_or(elapsed, |t| t.elapsed().max(elapsed))
}

/// The caller of one tool call.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    /// The agent's name, when known.
    pub actor: Option<String>,
    /// The call's idempotency key, when the client sent one.
    pub key: Option<String>,
    /// Named by its client's name alone, where another copy of the client
    /// would get the same name (the docent says how to name oneself).
    pub alike: bool,
    /// What the policy decided on the lines this call would type, counted
    /// for `calls.log` (which never holds a line).
    pub decisions: Arc<Decisions>,
    /// The client's input this call may ask for, or brings back (the
    /// 2026-07-28 way for a server to ask the client's user).
    pub input: Arc<InputRound>,
}

/// A call's round of client input (MCP's input-required results): whether
/// the client can answer an elicitation embedded in a result, the ask the
/// call resumes with the client's answer, and the input the call asks for.
#[derive(Debug, Default)]
pub struct InputRound {
    /// The client takes an input-required result with an elicitation in it.
    pub offered: bool,
    /// The ask this call comes back to (its `requestState`), with the
    /// client's answer to it (`inputResponses`), when it brought one.
    pub resumed: Option<(u64, Option<serde_json::Value>)>,
    /// What the call asks of the client before it can go on: set by a
    /// body that ends early for it, turned into the call's result.
    pub required: Mutex<Option<rmcp::model::InputRequiredResult>>,
}

impl InputRound {
    /// The round of a request with `request_state` and `input_responses`,
    /// from a client that does (`offered`) or does not take input rounds.
    pub fn of(
        offered: bool,
        request_state: Option<&str>,
        input_responses: Option<&rmcp::model::InputResponses>,
    ) -> InputRound {
        let resumed = request_state
            .and_then(|s| s.strip_prefix(ASK_STATE))
            .and_then(|id| id.parse::<u64>().ok())
            .map(|id| (id, input_responses.and_then(|r| r.get(CONSENT_INPUT)).cloned()));
        InputRound { offered, resumed, required: Mutex::new(None) }
    }

    /// Asks the client for `input` before the call goes on.
    pub fn require(&self, input: rmcp::model::InputRequiredResult) {
        *self.required.lock().unwrap_or_else(|e| e.into_inner()) = Some(input);
    }

    /// The input the call asks for, if it does.
    pub fn take_required(&self) -> Option<rmcp::model::InputRequiredResult> {
        self.required.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Whether the call asks for input.
    pub fn requires(&self) -> bool {
        self.required.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

/// How a `requestState` names the ask a call comes back to: `dtmcp-ask:7`.
/// An opaque handle (the ask itself is kept in the state home), so a
/// client that alters it only names another ask, whose agent, session and
/// line must then match the call's (see the consent flow).
pub const ASK_STATE: &str = "dtmcp-ask:";
/// The key of the consent elicitation in `inputRequests`/`inputResponses`.
pub const CONSENT_INPUT: &str = "consent";

/// How many lines of one call a policy allowed, asked about and denied.
#[derive(Debug, Default)]
pub struct Decisions {
    /// Allowed (by a rule, the default or a grant).
    pub allowed: std::sync::atomic::AtomicU32,
    /// Asked a person about.
    pub asked: std::sync::atomic::AtomicU32,
    /// Denied.
    pub denied: std::sync::atomic::AtomicU32,
}

impl Decisions {
    /// The counts, as `calls.log` writes them: `None` when nothing was judged.
    pub fn counts(&self) -> Option<[u32; 3]> {
        use std::sync::atomic::Ordering::Relaxed;
        let counts = [self.allowed.load(Relaxed), self.asked.load(Relaxed), self.denied.load(Relaxed)];
        (counts != [0; 3]).then_some(counts)
    }
}

impl Caller {
    /// The caller of the call being served (empty outside a call).
    pub fn current() -> Caller {
        CALLER.try_with(Clone::clone).unwrap_or_default()
    }

    /// The policy's decisions counted in the call being served (see
    /// [`Decisions::counts`]), read in place.
    pub fn current_decisions() -> Option<[u32; 3]> {
        CALLER.try_with(|c| c.decisions.counts()).ok().flatten()
    }

    /// Counts a policy's decision on a line of this call.
    pub fn count_decision(&self, action: dtmcp_core::policy::Action) {
        use dtmcp_core::policy::Action;
        let counter = match action {
            Action::Allow => &self.decisions.allowed,
            Action::Ask => &self.decisions.asked,
            Action::Deny => &self.decisions.denied,
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Runs `f` as a call of this caller that arrived just now.
    pub async fn scope<F: Future>(self, f: F) -> F::Output {
        self.scope_since(Instant::now(), f).await
    }

    /// Runs `f` as a call of this caller that arrived at `arrived` (see
    /// [`arrival`]).
    pub async fn scope_since<F: Future>(self, arrived: Instant, f: F) -> F::Output {
        CALLER.scope(self, ARRIVED.scope(arrived, f)).await
    }
}

/// One MCP connection: the actor it was given at `initialize`, and its
/// way to the client for messages the server starts.
#[derive(Debug, Default)]
pub struct Connection {
    actor: OnceLock<String>,
    /// The client's side, set at `initialize`.
    peer: OnceLock<rmcp::Peer<rmcp::RoleServer>>,
    /// The least severe log level the client wants (`logging/setLevel`),
    /// ranked 0 (debug) to 7 (emergency); `None`: whatever the server sends.
    level: Mutex<Option<u8>>,
    /// The commands watched for this connection (session, region), so
    /// that each is watched once.
    watched: Mutex<std::collections::HashSet<(String, u64)>>,
}

impl Connection {
    /// The actor named at `initialize`, if that happened on this connection.
    pub fn actor(&self) -> Option<&str> {
        self.actor.get().map(String::as_str)
    }

    /// Names this connection's actor (once; later calls change nothing).
    pub fn set_actor(&self, actor: String) {
        let _ = self.actor.set(actor);
    }

    /// Keeps the client's side of this connection (once).
    pub fn set_peer(&self, peer: rmcp::Peer<rmcp::RoleServer>) {
        let _ = self.peer.set(peer);
    }

    /// The client's side, once `initialize` has happened.
    pub fn peer(&self) -> Option<rmcp::Peer<rmcp::RoleServer>> {
        self.peer.get().cloned()
    }

    /// Sets the least severe level of log message the client wants.
    pub fn set_level(&self, rank: u8) {
        *self.level.lock().unwrap_or_else(|e| e.into_inner()) = Some(rank);
    }

    /// Whether the client wants log messages of `rank`.
    pub fn wants(&self, rank: u8) -> bool {
        self.level.lock().unwrap_or_else(|e| e.into_inner()).is_none_or(|least| rank >= least)
    }

    /// Marks region `id` of `session` as watched; `false` if it was already.
    pub fn watch(&self, session: &str, id: u64) -> bool {
        self.watched.lock().unwrap_or_else(|e| e.into_inner()).insert((session.to_string(), id))
    }
}

/// The HTTP MCP sessions whose requests this server has seen, by their
/// `Mcp-Session-Id`, each with its connection: the server's direct path
/// answers their calls without going through rmcp (see
/// `crate::server::direct`).
#[derive(Debug, Default)]
pub struct HttpSessions {
    known: Mutex<HashMap<String, Arc<Connection>>>,
    /// Woken each time a session is learned.
    learned: tokio::sync::Notify,
}

impl HttpSessions {
    /// Notes that the HTTP request behind `extensions`, if it names a
    /// session, came on connection `conn`.
    pub fn learn(&self, extensions: &Extensions, conn: &Arc<Connection>) {
        let Some(parts) = extensions.get::<axum::http::request::Parts>() else { return };
        let Some(id) = parts.headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else { return };
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.get(id).is_none_or(|c| !Arc::ptr_eq(c, conn)) {
            known.insert(id.to_string(), Arc::clone(conn));
            drop(known);
            self.learned.notify_waiters();
        }
    }

    /// The connection of session `id`, if known.
    pub fn get(&self, id: &str) -> Option<Arc<Connection>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned()
    }

    /// Waits, for `within` at most, until session `id` is known; whether it is.
    pub async fn learned(&self, id: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // Registered before looking, so that a learning in between is
            // not missed.
            let woken = self.learned.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.get(id).is_some() {
                return true;
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                return self.get(id).is_some();
            }
        }
    }

    /// Forgets session `id` (it ended).
    pub fn forget(&self, id: &str) {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    /// The sessions known now.
    pub fn ids(&self) -> Vec<String> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }
}

/// The names handed out so far, server-wide, to make client names unique,
/// and the name each bridge was given.
#[derive(Debug, Default)]
pub struct Actors {
    seen: Mutex<HashMap<String, u32>>,
    /// The name of each bridge, by its id.
    bridges: Mutex<HashMap<String, String>>,
}

/// How many bridges' names are kept; past it the oldest are forgotten
/// (such a bridge, should it come back, is named afresh).
const KEPT_BRIDGES: usize = 4096;

impl Actors {
    /// `base` for its first connection, `base#N` for the N-th.
    pub fn unique(&self, base: &str) -> String {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.entry(base.to_string()).or_insert(0);
        *n += 1;
        if *n == 1 { base.to_string() } else { format!("{base}#{n}") }
    }

    /// The name of bridge `bridge`, whose client calls itself `client`:
    /// made unique the first time the bridge is seen, the same ever after.
    pub fn for_bridge(&self, bridge: &str, client: &str) -> String {
        let mut bridges = self.bridges.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(name) = bridges.get(bridge) {
            return name.clone();
        }
        if bridges.len() >= KEPT_BRIDGES {
            bridges.clear();
        }
        let name = self.unique(client);
        bridges.insert(bridge.to_string(), name.clone());
        name
    }
}

/// The agent a request's bearer token names (set by the server's guard on
/// TCP, see `server::token`).
#[derive(Clone, Debug)]
pub struct TokenAgent(pub String);

/// The agent the HTTP request's token names, if it is an agent token.
pub fn token_agent(extensions: &Extensions) -> Option<String> {
    let parts = extensions.get::<axum::http::request::Parts>()?;
    parts.extensions.get::<TokenAgent>().map(|a| a.0.clone())
}

/// The bridge id the HTTP request's header carries, if any and usable.
pub fn header_bridge(extensions: &Extensions) -> Option<String> {
    let parts = extensions.get::<axum::http::request::Parts>()?;
    let value = parts.headers.get(BRIDGE_HEADER)?.to_str().ok()?;
    tidy(value)
}

/// The actor named by the HTTP request's header, if any and usable.
pub fn header_actor(extensions: &Extensions) -> Option<String> {
    let parts = extensions.get::<axum::http::request::Parts>()?;
    let value = parts.headers.get(ACTOR_HEADER)?.to_str().ok()?;
    tidy(value)
}

/// An actor name fit for logs and replies: trimmed, no control characters,
/// at most [`MAX_ACTOR`] characters; `None` when nothing is left.
pub fn tidy(name: &str) -> Option<String> {
    let name: String = name.trim().chars().filter(|c| !c.is_control()).take(MAX_ACTOR).collect();
    (!name.is_empty()).then_some(name)
}

/// The idempotency key in a request's `_meta`, if it is a plausible one
/// (8 to 80 letters, digits, `-` or `_`: it names a file).
pub fn key_of(meta: Option<&rmcp::model::RequestMetaObject>) -> Option<String> {
    let key = meta?.0.get(KEY_META)?.as_str()?;
    let ok = (8..=80).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then(|| key.to_string())
}

/// Set in a call's extensions by the transport that can tell: cancelled
/// when the client hung up before the answer (the HTTP direct path goes
/// on with a call its client left, for a `run` must not stop halfway; a
/// search has nothing to finish).
#[derive(Clone, Debug)]
pub struct CallerLeft(pub CancellationToken);

#[cfg(test)]
mod tests {
    use super::*;

    /// The extensions rmcp gives a handler for an HTTP request with `headers`.
    fn http_request(headers: &[(&'static str, &str)]) -> Extensions {
        let mut request = axum::http::Request::builder();
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let (parts, ()) = request.body(()).expect("request").into_parts();
        let mut extensions = Extensions::new();
        extensions.insert(parts);
        extensions
    }

    #[test]
    fn http_sessions_are_learned_from_their_requests_and_forgotten_when_gone() {
        let known = HttpSessions::default();
        let (a, b) = (Arc::new(Connection::default()), Arc::new(Connection::default()));
        known.learn(&http_request(&[("mcp-session-id", "s-a")]), &a);
        known.learn(&http_request(&[("mcp-session-id", "s-b")]), &b);
        known.learn(&http_request(&[]), &b);
        known.learn(&Extensions::new(), &b);
        assert!(known.get("s-a").is_some_and(|c| Arc::ptr_eq(&c, &a)));
        assert!(known.get("s-b").is_some_and(|c| Arc::ptr_eq(&c, &b)));
        // A restored session is a new connection under the same id.
        let restored = Arc::new(Connection::default());
        known.learn(&http_request(&[("mcp-session-id", "s-a")]), &restored);
        assert!(known.get("s-a").is_some_and(|c| Arc::ptr_eq(&c, &restored)));
        let mut ids = known.ids();
        ids.sort();
        assert_eq!(ids, ["s-a", "s-b"]);
        known.forget("s-b");
        assert!(known.get("s-b").is_none() && known.get("s-a").is_some());
        known.forget("s-a");
        assert!(known.get("s-a").is_none());
    }

    #[tokio::test]
    async fn a_wait_for_a_session_ends_when_it_is_learned_or_at_its_limit() {
        let known = Arc::new(HttpSessions::default());
        let later = Arc::clone(&known);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            later.learn(&http_request(&[("mcp-session-id", "s-late")]), &Arc::new(Connection::default()));
        });
        let started = Instant::now();
        assert!(known.learned("s-late", Duration::from_secs(10)).await);
        assert!(started.elapsed() < Duration::from_secs(5), "woken by the learning, not the limit");
        // A session never learned is waited for until the limit.
        let started = Instant::now();
        assert!(!known.learned("s-never", Duration::from_millis(100)).await);
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(known.learned("s-late", Duration::ZERO).await, "known already: no wait");
    }

    #[test]
    fn client_names_are_made_unique_per_connection() {
        let actors = Actors::default();
        assert_eq!(actors.unique("claude-code"), "claude-code");
        assert_eq!(actors.unique("claude-code"), "claude-code#2");
        assert_eq!(actors.unique("codex"), "codex");
        assert_eq!(actors.unique("claude-code"), "claude-code#3");
    }

    #[test]
    fn a_bridge_keeps_its_name_and_two_bridges_of_one_client_are_two() {
        let actors = Actors::default();
        assert_eq!(actors.for_bridge("b1", "claude-code"), "claude-code");
        assert_eq!(actors.for_bridge("b2", "claude-code"), "claude-code#2");
        assert_eq!(actors.for_bridge("b1", "claude-code"), "claude-code", "the same bridge, the same name");
        assert_eq!(actors.unique("claude-code"), "claude-code#3", "one numbering for bridges and connections");
    }

    #[test]
    fn names_lose_control_characters_and_length() {
        assert_eq!(tidy(" a\u{1b}b "), Some("ab".into()));
        assert_eq!(tidy("\n"), None);
        assert_eq!(tidy(&"x".repeat(200)).map(|s| s.len()), Some(MAX_ACTOR));
    }
}

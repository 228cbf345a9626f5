//! The MCP tool layer: one file per tool family, their routers combined here.
//!
//! A tool never keeps state between calls: it resolves the session through
//! tmux and the state home, acts, waits through the session's logger and
//! composes the reply. Failures the model can act on come back as tool
//! results flagged as errors, with what to do next; malformed arguments are
//! refused by the schema before anything is done.

mod agents;
pub mod caller;
mod expect;
mod guide;
pub mod holds;
mod integrate;
mod logs;
mod notes;
pub mod once;
mod output;
pub mod presence;
mod program;
mod progress;
mod read;
mod regions;
mod reply;
mod report;
mod run;
pub mod schema;
mod search;
pub mod secrets;
mod send;
mod session;
mod shape;
mod views;
mod watch;

use std::sync::Arc;
use std::time::Instant;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeRequestParams,
    InitializeResult, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};

use crate::calls::CallLog;
use crate::session::Sessions;
pub use reply::ToolError;
use reply::{Facts, Reply};
pub use search::CallerLeft;

/// The server's instructions to the model, kept in `texts/instructions.md`.
const INSTRUCTIONS: &str = crate::docent::texts::INSTRUCTIONS;

/// The MCP server: every tool, over shared state.
#[derive(Clone)]
pub struct Terminal {
    inner: Arc<Inner>,
    /// This MCP connection's identity (each HTTP session gets its own).
    conn: Arc<caller::Connection>,
    /// Shared, not copied: a `Terminal` is cloned for every HTTP call.
    tool_router: Arc<ToolRouter<Terminal>>,
}

/// What every call shares.
pub struct Inner {
    /// The sessions of this server.
    pub sessions: Sessions,
    /// The call log.
    pub calls: CallLog,
    /// Each agent's state in each session, as its logger keeps it.
    pub agents: agents::AgentMemory,
    /// The actor names handed out, to make client names unique.
    pub actors: caller::Actors,
    /// Who holds each session while typing, and what agents typed last.
    pub holds: holds::Holds,
    /// What replies keep out of the model's sight.
    pub secrets: secrets::Secrets,
    /// The HTTP sessions seen so far, for the server's direct path.
    pub http: caller::HttpSessions,
}

impl Terminal {
    /// A server over `sessions`.
    pub fn new(sessions: Sessions) -> Terminal {
        let calls = CallLog::new(sessions.cfg.calls_log());
        Terminal {
            inner: Arc::new(Inner {
                sessions,
                calls,
                agents: Default::default(),
                actors: caller::Actors::default(),
                holds: holds::Holds::default(),
                secrets: secrets::Secrets::from_env(),
                http: caller::HttpSessions::default(),
            }),
            conn: Arc::default(),
            tool_router: Arc::new(Self::router()),
        }
    }

    /// Every tool's route, combined, with schemas every client can load.
    fn router() -> ToolRouter<Terminal> {
        schema::portable(Self::routes())
    }

    /// Every tool's route, combined, with the schemas rmcp derived.
    fn routes() -> ToolRouter<Terminal> {
        Self::session_router()
            + Self::run_router()
            + Self::read_router()
            + Self::send_router()
            + Self::expect_router()
            + Self::search_router()
            + Self::regions_router()
            + Self::logs_router()
            + Self::guide_router()
            + Self::integrate_router()
    }

    /// Starts watching the loggers: a connection to each live session's
    /// logger is opened, and a logger whose connection closes (it died) is
    /// replaced at once, even while no call comes. Nothing polls. It ends
    /// with the runtime.
    pub fn start_watchdog(&self) {
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            // Listening before connecting: no closing goes unheard.
            let mut closed = crate::session::client::closed_connections();
            inner.sessions.connect_loggers().await;
            while let Some(dir) = closed.recv().await {
                let inner = Arc::clone(&inner);
                tokio::spawn(async move { inner.sessions.logger_closed(&dir).await });
            }
        });
    }

    /// The same server for another MCP connection, with an identity of its own.
    pub fn for_connection(&self) -> Terminal {
        Terminal { conn: Arc::default(), ..self.clone() }
    }

    /// The server for HTTP MCP session `id`, as its connection sees it,
    /// once a request of that session has come through rmcp.
    pub fn for_http_session(&self, id: &str) -> Option<Terminal> {
        let conn = self.inner.http.get(id)?;
        Some(Terminal { conn, ..self.clone() })
    }

    /// Waits, for `within` at most, until HTTP MCP session `id` has been
    /// seen by its connection; whether it has.
    pub async fn http_session_learned(&self, id: &str, within: std::time::Duration) -> bool {
        self.inner.http.learned(id, within).await
    }

    /// Forgets HTTP MCP session `id` (it ended).
    pub fn forget_http_session(&self, id: &str) {
        self.inner.http.forget(id);
    }

    /// Forgets the HTTP MCP sessions `live` does not name.
    pub fn keep_http_sessions(&self, live: impl Fn(&str) -> bool) {
        self.inner.http.retain(live);
    }

    /// The client's side of this connection, once it has initialized.
    pub fn peer(&self) -> Option<rmcp::Peer<RoleServer>> {
        self.conn.peer()
    }

    /// The sessions this server serves.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// `text` as the model may read it: the secrets of session `name` (or,
    /// with none, those known to the server) replaced by placeholders.
    pub fn redacted(&self, name: Option<&str>, text: &str) -> String {
        let dir = name.map(|n| self.sessions().cfg.session_dir(n));
        self.inner.secrets.redact(dir.as_deref(), text).0
    }

    /// The rows of session `name`'s screen, `cols` wide, with its secrets
    /// hidden even where one wraps from a row into the next; inside a
    /// call, what was hidden counts toward its reply's note.
    pub fn redacted_screen<S: AsRef<str>>(&self, name: &str, rows: &[S], cols: u32) -> Vec<String> {
        let dir = self.sessions().cfg.session_dir(name);
        let (rows, counts) = self.inner.secrets.redact_screen(&dir, rows, cols as usize);
        secrets::hidden_early(&counts);
        rows
    }

    /// Who is calling, for notes given once per agent: the caller of the
    /// call in progress, else this connection's actor.
    fn actor(&self) -> String {
        caller::Caller::current()
            .actor
            .or_else(|| self.conn.actor().map(str::to_string))
            .unwrap_or_else(|| "agent".into())
    }

    /// Who makes a call: the header's actor, else this connection's.
    fn caller_of(&self, request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> caller::Caller {
        let actor = caller::header_actor(&context.extensions).or_else(|| self.conn.actor().map(str::to_string));
        let actor = actor.or_else(|| context.peer.peer_info().and_then(|i| caller::tidy(&i.client_info.name)));
        let key = caller::key_of(request.meta.as_ref()).or_else(|| caller::key_of(Some(&context.meta)));
        caller::Caller { actor, key }
    }

    /// Runs one tool body, records it in `calls.log`, and turns its outcome
    /// into a tool result. A body that has no facts to tell gives its text
    /// alone.
    fn call<'a, F, R>(
        &'a self,
        tool: &'a str,
        session: Option<&'a str>,
        body: F,
    ) -> impl Future<Output = CallToolResult> + 'a
    where
        F: Future<Output = Result<R, ToolError>> + 'a,
        R: Into<Reply>,
    {
        // Boxed before anything awaits: a body's state (kilobytes for the
        // tools that wait) is moved once, to the heap, rather than copied
        // again into every future wrapped around it (the task-local scope,
        // rmcp's handler, the task the call runs in).
        let body = Box::pin(body);
        async move {
            let started = Instant::now();
            let finished = self.finished_before(tool, session).await;
            let (outcome, early) = secrets::counting_early(body).await;
            if let Some(name) = session.filter(|_| matches!(tool, "read" | "search" | "regions")) {
                self.note_reply(name).await;
            }
            self.finish_call(tool, session, started, outcome.map(Into::into), early, finished)
        }
    }

    /// "Finished since your last call", for the tools that work in a live
    /// session (see [`Terminal::finished_since`]).
    async fn finished_before(&self, tool: &str, session: Option<&str>) -> Option<String> {
        const IN_A_SESSION: [&str; 7] = ["run", "wait", "send", "expect", "read", "search", "regions"];
        match session {
            Some(name) if IN_A_SESSION.contains(&tool) => self.finished_since(name).await,
            _ => None,
        }
    }

    /// Records a call that began at `started` (in `calls.log`, and who made
    /// a session it made) and turns its outcome into a tool result (`early`:
    /// the secrets its body hid already, counted in the note), led by
    /// what finished since the agent's last call and any note the session
    /// left for it. This is the one place a reply or an error becomes text
    /// for the client.
    fn finish_call(
        &self,
        tool: &str,
        session: Option<&str>,
        started: Instant,
        outcome: Result<Reply, ToolError>,
        early: dtmcp_core::redact::Counts,
        finished: Option<String>,
    ) -> CallToolResult {
        let who = caller::Caller::current();
        if let Ok(Reply { facts: Facts { created: Some(name), .. }, .. }) = &outcome {
            once::note_created(&self.sessions().cfg.home, name, who.actor.as_deref());
        }
        let created = outcome.as_ref().ok().and_then(|r| r.facts.created.clone());
        let note = session.and_then(|name| self.sessions().take_note(name));
        let leads: String = [finished, note].into_iter().flatten().collect();
        let ok = outcome.is_ok();
        let text = match outcome {
            Ok(reply) => leads + &reply.text,
            Err(e) => format!("{leads}{e}"),
        };
        let dir = session.or(created.as_deref()).map(|name| self.sessions().cfg.session_dir(name));
        let (mut text, mut counts) = self.inner.secrets.redact(dir.as_deref(), &text);
        counts.add(&early);
        if counts.total() > 0 {
            text.push_str(&secrets::Secrets::note(dir.as_deref(), &self.actor(), &counts));
        }
        let elapsed = started.elapsed();
        self.inner.calls.record(tool, session, who.actor.as_deref(), elapsed, ok, counts.total());
        let content = vec![ContentBlock::text(clean(&text))];
        if ok { CallToolResult::success(content) } else { CallToolResult::error(content) }
    }

    /// The arguments of a `run`, `send` or `expect` with the placeholders
    /// of secrets in their texts replaced by the values, just before they
    /// are typed; an unknown placeholder refuses the call, nothing typed.
    fn with_secrets(&self, mut request: CallToolRequestParams) -> Result<CallToolRequestParams, CallToolResult> {
        let tool = request.name.to_string();
        let Some(args) = request.arguments.as_mut() else { return Ok(request) };
        let Some(name) = args.get("session").and_then(|v| v.as_str()).map(str::to_string) else { return Ok(request) };
        let dir = self.sessions().cfg.session_dir(&name);
        for value in args.values_mut() {
            if let Err(e) = substitute_in(&self.inner.secrets, &dir, value) {
                return Err(self.finish_call(&tool, Some(&name), Instant::now(), Err(e), Default::default(), None));
            }
        }
        Ok(request)
    }
}

/// Replaces the placeholders in every string within `value`.
fn substitute_in(
    secrets: &secrets::Secrets,
    dir: &std::path::Path,
    value: &mut serde_json::Value,
) -> Result<(), ToolError> {
    match value {
        serde_json::Value::String(s) => *s = secrets.substitute(dir, s)?,
        serde_json::Value::Array(items) => {
            for v in items {
                substitute_in(secrets, dir, v)?;
            }
        }
        serde_json::Value::Object(map) => {
            for v in map.values_mut() {
                substitute_in(secrets, dir, v)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Terminal {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let base = caller::header_actor(&context.extensions);
        let actor = base.unwrap_or_else(|| {
            let name = caller::tidy(&request.client_info.name).unwrap_or_else(|| "agent".into());
            self.inner.actors.unique(&name)
        });
        self.conn.set_actor(actor);
        self.conn.set_peer(context.peer.clone());
        context.peer.set_peer_info(request.clone());
        self.watch_again();
        self.negotiate_initialize(&request)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.inner.http.learn(&context.extensions, &self.conn);
        let arrived = caller::arrival(&context.extensions);
        let who = self.caller_of(&request, &context);
        let body = async {
            if matches!(&*request.name, "run" | "send" | "expect") {
                let request = match self.with_secrets(request) {
                    Ok(request) => request,
                    Err(refused) => return Ok(CallToolResponse::Complete(refused)),
                };
                // Only a `run` is replayed by key; `send` and `expect` are
                // recorded as typing, nothing more.
                let key = who.key.clone().filter(|_| request.name == "run");
                let actor = who.actor.clone();
                return self.run_once(request, context, actor.as_deref(), key.as_deref()).await;
            }
            self.tool_router.call(ToolCallContext::new(self, request, context)).await
        };
        // Boxed: the body's state is moved once, not copied again into the
        // task-local scope, rmcp's request future and the task around it.
        who.clone().scope_since(arrived, Box::pin(body)).await
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.inner.http.learn(&context.extensions, &self.conn);
    }

    #[allow(deprecated)] // MCP logging: see `watch`.
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.conn.set_level(watch::rank(request.level));
        Ok(())
    }

    #[allow(deprecated)] // MCP logging: see `watch`.
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(Implementation::new("docent-terminal-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// The `_meta` every tool carries: `anthropic/alwaysLoad` keeps Claude Code
/// from deferring the tool behind its tool search.
fn always_load() -> rmcp::model::MetaObject {
    let mut meta = rmcp::model::JsonObject::new();
    meta.insert("anthropic/alwaysLoad".into(), serde_json::Value::Bool(true));
    rmcp::model::MetaObject(meta)
}

/// Makes `text` safe to hand to a model: valid UTF-8 already (a `String`),
/// and no control character but newline and tab. The cooker produces none;
/// this is the last guard for text from elsewhere (tmux, errors, paths).
pub fn clean(text: &str) -> String {
    if !text.chars().any(is_unwanted) {
        return text.to_string();
    }
    text.chars().map(|c| if is_unwanted(c) { '\u{fffd}' } else { c }).collect()
}

/// Control characters (but newline and tab), C1 controls, and the
/// bidirectional embeddings, overrides and isolates, which can make a
/// reply read differently from what it holds ("Trojan Source").
fn is_unwanted(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || ('\u{80}'..='\u{9f}').contains(&c)
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
        || c == '\u{61c}'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_lose_escapes_and_c1_but_keep_newlines_and_tabs() {
        assert_eq!(clean("a\tb\nc"), "a\tb\nc");
        assert_eq!(clean("a\u{1b}[0mb\u{9b}c\u{f}"), "a\u{fffd}[0mb\u{fffd}c\u{fffd}");
        assert_eq!(clean("x\u{202e}y\u{2066}z"), "x\u{fffd}y\u{fffd}z");
    }

    use crate::docent::texts::CLIENT_BUDGET;

    #[test]
    fn instructions_fit_the_clients_budget() {
        assert!(INSTRUCTIONS.chars().count() < CLIENT_BUDGET);
    }

    /// The tools that change nothing, and so carry `readOnlyHint`.
    const READ_ONLY: [&str; 5] = ["read", "search", "regions", "session_list", "guide"];

    #[test]
    fn every_tool_is_described_within_budget_and_always_loaded() {
        let tools = Terminal::router().list_all();
        assert!(tools.len() >= 12, "{} tools", tools.len());
        for t in &tools {
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.len() > 100, "{} needs a description", t.name);
            assert!(d.chars().count() < CLIENT_BUDGET, "{}: {} characters", t.name, d.chars().count());
            let meta = t.meta.as_ref().map(|m| &m.0);
            let always = meta.and_then(|m| m.get("anthropic/alwaysLoad"));
            assert_eq!(always, Some(&serde_json::Value::Bool(true)), "{} is always loaded", t.name);
            let read_only = t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
            assert_eq!(read_only, READ_ONLY.contains(&t.name.as_ref()), "{}: readOnlyHint", t.name);
        }
    }

    #[test]
    fn every_parameter_is_described_within_budget() {
        for t in Terminal::router().list_all() {
            let schema = serde_json::Value::Object((*t.input_schema).clone());
            let mut missing = Vec::new();
            undescribed(&schema, &schema, &t.name, &mut missing);
            assert!(missing.is_empty(), "parameters without a description: {missing:?}");
        }
    }

    /// Collects the properties under `node` that have no description, looking
    /// through `$ref`s into `root`'s definitions and into nested objects and arrays.
    fn undescribed(root: &serde_json::Value, node: &serde_json::Value, at: &str, missing: &mut Vec<String>) {
        let node = resolve(root, node);
        if let Some(props) = node.get("properties").and_then(|p| p.as_object()) {
            for (name, prop) in props {
                let here = format!("{at}.{name}");
                let d = prop.get("description").and_then(|d| d.as_str()).unwrap_or_default();
                if d.len() < 10 || d.chars().count() >= CLIENT_BUDGET {
                    missing.push(here.clone());
                }
                undescribed(root, prop, &here, missing);
            }
        }
        for key in ["items", "anyOf", "oneOf", "allOf"] {
            match node.get(key) {
                Some(serde_json::Value::Array(list)) => list.iter().for_each(|n| undescribed(root, n, at, missing)),
                Some(n @ serde_json::Value::Object(_)) => undescribed(root, n, at, missing),
                _ => {}
            }
        }
    }

    fn resolve<'a>(root: &'a serde_json::Value, node: &'a serde_json::Value) -> &'a serde_json::Value {
        match node.get("$ref").and_then(|r| r.as_str()).and_then(|r| r.strip_prefix("#/")) {
            Some(path) => root.pointer(&format!("/{path}")).unwrap_or(node),
            None => node,
        }
    }
}

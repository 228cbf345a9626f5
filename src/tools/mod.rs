//! The MCP tool layer: one file per tool family, their routers combined here.
//!
//! A tool never keeps state between calls: it resolves the session through
//! tmux and the state home, acts, waits through the session's logger and
//! composes the reply. Failures the model can act on come back as tool
//! results flagged as errors, with what to do next; malformed arguments are
//! refused by the schema before anything is done.

mod admit;
mod arguments;
mod edge;
mod error;
mod memory;
mod name;
mod reading;
pub mod replies;
pub mod schema;
pub mod sessions;
pub mod typing;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams, InitializeResult,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};

use crate::agents::caller;
use crate::agents::journal::Journal;
use crate::calls::CallLog;
use crate::session::Sessions;
pub use edge::{always_load, clean};
pub use error::{Party, Refusal, ToolError};
pub use name::ToolName;
use replies::{secrets, watch};

/// The server's instructions to the model, kept in `texts/instructions.md`.
const INSTRUCTIONS: &str = crate::docent::texts::INSTRUCTIONS;
/// How many sessions' left texts (`state.json`) are held parsed.
const LEFT_HELD: usize = 4096;

/// The MCP server: every tool, over shared state.
#[derive(Clone)]
pub struct Terminal {
    inner: Arc<Inner>,
    /// This MCP connection's identity (each HTTP session gets its own).
    conn: Arc<caller::Connection>,
    /// Shared, not copied: a `Terminal` is cloned for every HTTP call.
    tool_router: Arc<ToolRouter<Terminal>>,
}

/// What every call shares: the server's state, owned here and handed to
/// each call through its `Terminal` (as mini-redis hands out its `Db`).
/// Everything else a call needs lives in tmux, the session's files and
/// its logger, which outlive this process.
pub struct Inner {
    /// The sessions of this server, and its connections to their loggers.
    pub sessions: Sessions,
    /// The call log.
    pub calls: CallLog,
    /// Who typed what, where: the journal under the state home.
    pub journal: Arc<Journal>,
    /// Each agent's state in each session, as its logger keeps it.
    pub agents: memory::AgentMemory,
    /// The actor names handed out, to make client names unique.
    pub actors: caller::Actors,
    /// Who holds each session while typing, and what agents typed last.
    pub holds: typing::holds::Holds,
    /// The replies to keyed calls, for a key sent again.
    pub replays: typing::replay::Replays,
    /// The region indexes and whole-log searches kept between calls.
    pub searches: Arc<reading::search::SearchCache>,
    /// What replies keep out of the model's sight.
    pub secrets: secrets::Secrets,
    /// The HTTP sessions seen so far, for the server's direct path.
    pub http: caller::HttpSessions,
    /// The user's policy: what agents may type, the asks, the audit.
    pub governor: Arc<crate::policy::Governor>,
    /// What each agent was last told of each session's listening ports
    /// and background jobs.
    pub ports: replies::ports::PortMemory,
    /// How far each agent was shown each running command's output.
    pub shown: replies::shown::Shown,
    /// The texts agents left at each session's prompt, as its
    /// `state.json` said when last read (read again when replaced).
    pub left: crate::stamped::Stamped<Vec<(String, dtmcp_core::agent_state::LeftText)>>,
    /// The loggers' statuses a listing showed, kept while their files
    /// stay the same (see [`sessions::statuses`]).
    pub statuses: sessions::statuses::KeptStatuses,
    /// What a listing found in `/proc` for each pane whose shell sat at
    /// its prompt, kept while nothing could have changed it (see
    /// [`sessions::currents`]).
    pub currents: sessions::currents::KeptCurrents,
}

impl Terminal {
    /// A server over `sessions`, with no policy: everything allowed.
    pub fn new(sessions: Sessions) -> Terminal {
        let governor = crate::policy::Governor::none(&sessions.cfg.home);
        Terminal::governed(sessions, governor)
    }

    /// A server over `sessions` under `governor`'s policy.
    pub fn governed(sessions: Sessions, governor: crate::policy::Governor) -> Terminal {
        let calls = CallLog::new(sessions.cfg.calls_log());
        let journal = Arc::new(Journal::new(&sessions.cfg.home));
        Terminal {
            inner: Arc::new(Inner {
                sessions,
                calls,
                journal,
                agents: Default::default(),
                actors: caller::Actors::default(),
                holds: Default::default(),
                replays: Default::default(),
                searches: Default::default(),
                secrets: secrets::Secrets::from_env(),
                http: caller::HttpSessions::default(),
                governor: Arc::new(governor),
                ports: Default::default(),
                shown: Default::default(),
                left: crate::stamped::Stamped::new(LEFT_HELD),
                statuses: Default::default(),
                currents: Default::default(),
            }),
            conn: Arc::default(),
            tool_router: Arc::new(Self::router_apart()),
        }
    }

    /// [`Terminal::router`], built on a thread of its own. rmcp keeps every
    /// schema it derives in caches local to the thread that asked (the
    /// schema as schemars wrote it, and again with its title stripped),
    /// and keeps them for that thread's life; with the router's one
    /// runtime thread, that would be for good, beside the portable copies
    /// the routes hold. Built apart, those caches (a few hundred kB of
    /// JSON maps) end with the thread, and their pages are handed back.
    fn router_apart() -> ToolRouter<Terminal> {
        let router = std::thread::scope(|scope| match std::thread::Builder::new().spawn_scoped(scope, Self::router) {
            Ok(building) => building.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread to spare: the caches stay, nothing else changes.
            Err(_) => Self::router(),
        });
        crate::allocator::give_back();
        router
    }

    /// Every tool's route, combined, with schemas every client can load
    /// and the annotations its [`ToolName`] gives it.
    fn router() -> ToolRouter<Terminal> {
        let mut router = schema::portable(Self::routes());
        // Most tools answer with the same facts: they share one schema (a
        // copy each held half a megabyte of the router's heap).
        let mut schemas: Vec<Arc<rmcp::model::JsonObject>> = Vec::new();
        for route in router.map.values_mut() {
            if let Some(name) = ToolName::parse(&route.attr.name) {
                route.attr.annotations = Some(name.annotations());
                route.attr.title = Some(name.title().into());
                let schema = name.output_schema();
                let shared = match schemas.iter().find(|s| ***s == schema) {
                    Some(same) => Arc::clone(same),
                    None => {
                        let made = Arc::new(schema);
                        schemas.push(Arc::clone(&made));
                        made
                    }
                };
                route.attr.output_schema = Some(shared);
            }
        }
        router
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
        self.inner.governor.follow();
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            // Listening before connecting: no closing goes unheard.
            let mut closed = inner.sessions.loggers.closed_connections();
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

    /// The HTTP MCP sessions known now.
    pub fn http_sessions(&self) -> Vec<String> {
        self.inner.http.ids()
    }

    /// The client's side of this connection, once it has initialized.
    pub fn peer(&self) -> Option<rmcp::Peer<RoleServer>> {
        self.conn.peer()
    }

    /// The sessions this server serves.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// The user's policy, its asks and audit.
    pub fn governor(&self) -> &Arc<crate::policy::Governor> {
        &self.inner.governor
    }

    /// The journal of who typed what.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.inner.journal
    }

    /// `text` as the model may read it: the secrets of session `name` (or,
    /// with none, those known to the server) replaced by placeholders.
    pub fn redacted(&self, name: Option<&str>, text: &str) -> String {
        let dir = name.map(|n| self.sessions().cfg.session_dir(n));
        self.inner.secrets.redact(dir.as_deref(), text).0
    }

    /// Whether the replies of session `name` hide its secrets.
    pub fn redacts(&self, name: &str) -> bool {
        self.inner.secrets.applies(&self.sessions().cfg.session_dir(name))
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

    /// Who makes a call, by the strongest name there is (see
    /// [`crate::agents::caller`]): the header's actor, the bridge's, this
    /// connection's, the client's own.
    fn caller_of(&self, request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> caller::Caller {
        let key = caller::key_of(request.meta.as_ref()).or_else(|| caller::key_of(Some(&context.meta)));
        let mut alike = false;
        let actor = caller::header_actor(&context.extensions)
            .or_else(|| caller::token_agent(&context.extensions))
            .or_else(|| {
                let bridge = caller::header_bridge(&context.extensions)?;
                let client = self.client_name(request, context).unwrap_or_else(|| "agent".into());
                Some(self.inner.actors.for_bridge(&bridge, &client))
            })
            .or_else(|| self.conn.actor().map(str::to_string))
            .or_else(|| {
                let client = self.client_name(request, context)?;
                // Over stdio one connection is one client: named once, made
                // unique. Over HTTP nothing tells two copies apart.
                match context.extensions.get::<axum::http::request::Parts>() {
                    Some(_) => {
                        alike = true;
                        Some(client)
                    }
                    None => {
                        self.conn.set_actor(self.inner.actors.unique(&client));
                        self.conn.actor().map(str::to_string)
                    }
                }
            });
        // A client of 2026-07-28 that can answer an elicitation takes it
        // inside an input-required result (a server may not ask it first).
        // (Only a 2026-07-28 request carries the client's capabilities in
        // its `_meta`; rmcp makes up a peer for it, so the peer cannot tell.)
        let capabilities = request.meta.as_ref().and_then(|m| m.client_capabilities());
        let capabilities = capabilities.or_else(|| context.meta.client_capabilities());
        let offered = capabilities.is_some_and(|c| c.elicitation.is_some());
        let round = caller::InputRound::of(offered, request.request_state.as_deref(), request.input_responses.as_ref());
        caller::Caller { actor, key, alike, decisions: Arc::default(), input: Arc::new(round) }
    }

    /// The client's own name: from `initialize`, or from the request's
    /// `_meta` (2026-07-28, where there is no `initialize`).
    fn client_name(&self, request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> Option<String> {
        // A request's own `_meta` first: for a 2026-07-28 request rmcp
        // makes up a peer of its own, named after itself.
        let from_meta = |m: &rmcp::model::RequestMetaObject| m.client_info().and_then(|i| caller::tidy(&i.name));
        request
            .meta
            .as_ref()
            .and_then(from_meta)
            .or_else(|| from_meta(&context.meta))
            .or_else(|| context.peer.peer_info().and_then(|i| caller::tidy(&i.client_info.name)))
    }
}

impl Terminal {
    /// `response`, with rmcp's message about arguments that did not
    /// deserialize replaced by one naming the argument and what it takes
    /// (see [`arguments`]).
    fn explain_arguments(
        &self,
        response: CallToolResponse,
        tool: &str,
        args: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> CallToolResponse {
        let CallToolResponse::Complete(mut result) = response else { return response };
        let serde = match result.content.first().and_then(|c| c.as_text()) {
            Some(t) if result.is_error == Some(true) && t.text.starts_with(arguments::DESERIALIZE_PREFIX) => {
                t.text.clone()
            }
            _ => return CallToolResponse::Complete(result),
        };
        if let Some(attr) = self.tool_router.get(tool) {
            let said = arguments::explain(tool, &attr.input_schema, args, &serde);
            result.content = vec![rmcp::model::ContentBlock::text(said)];
        }
        CallToolResponse::Complete(result)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Terminal {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let name = caller::tidy(&request.client_info.name).unwrap_or_else(|| "agent".into());
        let named = caller::header_actor(&context.extensions).or_else(|| caller::token_agent(&context.extensions));
        let actor = named.unwrap_or_else(|| match caller::header_bridge(&context.extensions) {
            Some(bridge) => self.inner.actors.for_bridge(&bridge, &name),
            None => self.inner.actors.unique(&name),
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
        // Kept for saying which argument did not fit, should one not.
        let (name, arguments) = (request.name.clone(), request.arguments.clone());
        let body = async {
            let tool = ToolName::parse(&request.name);
            // Counted while it runs, for the policy's `calls_per_agent`.
            let _in_flight = match tool {
                Some(tool) => match self.admit(tool, who.actor.as_deref(), &request).await {
                    Ok(counted) => counted,
                    Err(refused) => return Ok(CallToolResponse::Complete(*refused)),
                },
                None => None,
            };
            if let Some(tool) = tool.filter(|t| t.types()) {
                let request = match self.with_secrets(tool, request) {
                    Ok(request) => request,
                    Err(refused) => return Ok(CallToolResponse::Complete(refused)),
                };
                // Only a `run` is replayed by key; `send` and `expect` are
                // recorded as typing, nothing more.
                let key = who.key.clone().filter(|_| tool == ToolName::Run);
                let actor = who.actor.clone();
                return self.run_once(tool, request, context, actor.as_deref(), key.as_deref()).await;
            }
            self.tool_router.call(ToolCallContext::new(self, request, context)).await
        };
        // Boxed: the body's state is moved once, not copied again into the
        // task-local scope, rmcp's request future and the task around it.
        let response = who.clone().scope_since(arrived, Box::pin(body)).await;
        let response = response.map(|r| self.explain_arguments(r, &name, arguments.as_ref()));
        match who.input.take_required() {
            Some(input) => Ok(CallToolResponse::InputRequired(input)),
            None => response,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::docent::texts::CLIENT_BUDGET;

    #[test]
    fn instructions_fit_the_clients_budget() {
        assert!(INSTRUCTIONS.chars().count() < CLIENT_BUDGET);
    }

    #[test]
    fn every_tool_is_described_within_budget_and_always_loaded() {
        let tools = Terminal::router().list_all();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let all: Vec<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(names.len(), all.len(), "every tool is routed, once: {names:?}");
        assert!(all.iter().all(|n| names.contains(n)), "{names:?} against {all:?}");
        for t in &tools {
            let d = t.description.as_deref().unwrap_or_default();
            assert!(d.len() > 100, "{} needs a description", t.name);
            assert!(d.chars().count() < CLIENT_BUDGET, "{}: {} characters", t.name, d.chars().count());
            let meta = t.meta.as_ref().map(|m| &m.0);
            let always = meta.and_then(|m| m.get("anthropic/alwaysLoad"));
            assert_eq!(always, Some(&serde_json::Value::Bool(true)), "{} is always loaded", t.name);
            let read_only = t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
            let name = ToolName::parse(&t.name).expect("a known tool");
            assert_eq!(read_only, name.read_only(), "{}: readOnlyHint", t.name);
        }
    }

    #[test]
    fn tools_with_the_same_output_schema_share_one_copy() {
        let tools = Terminal::router().list_all();
        let schema = |name: &str| {
            let t = tools.iter().find(|t| t.name == name).expect("a routed tool");
            t.output_schema.clone().expect("an output schema")
        };
        assert!(Arc::ptr_eq(&schema("run"), &schema("read")), "run and read answer alike");
        assert!(!Arc::ptr_eq(&schema("run"), &schema("session_list")), "session_list has its rows");
        assert_eq!(*schema("run"), ToolName::Read.output_schema());
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

//! Who typed what, and `run` typed at most once per idempotency key.
//!
//! Before a `run` types, the router notes the session's position (regions
//! opened, bytes logged) and the caller's actor in
//! `$DOCENT_TERMINAL_MCP_HOME/agents/NAME.jsonl`: the region that opens
//! next was started by that agent. (The session's own directory is the
//! logger's alone, so this lives beside it.)
//!
//! A `run` carrying an idempotency key (the `connect` bridge adds one to
//! every call and sends it again after a server restart) is noted in the
//! session's logger just before it types: the key and the position
//! (`Request::Typing`, memory only, since the logger outlives the router).
//! The same key again gets the reply this server gave it, when it gave
//! one; else, when the logger says the key typed and the session moved on
//! since (a server died in the middle), the command is followed, not
//! typed again: one still running is waited for, a finished one is read
//! back.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde::{Deserialize, Serialize};

use super::Terminal;
use super::reply::{Reply, ToolError};
use super::report::{Waited, describe};
use crate::session::LoggerClient;
use dtmcp_core::protocol::Mark;
use dtmcp_core::store::{Appender, Tail};
use dtmcp_core::types::RegionId;

/// How long a resent key waits for its session to answer before saying
/// that its command's outcome cannot be told.
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// How long request records of earlier versions (`requests/KEY.json`)
/// are kept.
const KEEP_REQUESTS_MS: u64 = 24 * 60 * 60 * 1000;
/// How many keyed replies this server keeps for a key sent again.
const KEPT_ANSWERS: usize = 64;

/// One line of `agents/NAME.jsonl`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Typed {
    /// Regions opened before the agent typed: its region is the next one.
    pub after_regions: u64,
    /// The agent.
    pub actor: String,
    /// The tool that typed.
    pub tool: String,
    /// When, in ms since the epoch.
    pub ms: u64,
}

/// Appends to `agents/SESSION.jsonl` that `actor` typed with `tool` after
/// `after_regions` regions. Best effort: a record that cannot be written
/// costs only the "started by" of that region. One `write` to a handle
/// kept open: cheap enough to do on an async worker.
pub fn record_typed(home: &Path, session: &str, actor: Option<&str>, tool: &str, after_regions: u64) {
    let typed = Typed {
        after_regions,
        actor: actor.unwrap_or("agent").to_string(),
        tool: tool.to_string(),
        ms: crate::config::now_ms(),
    };
    if let Ok(mut line) = serde_json::to_vec(&typed) {
        line.push(b'\n');
        let path = agents_file(home, session);
        let appender = APPENDERS.get(&path, || Appender::new(path.clone()));
        let _ = appender.lock().unwrap_or_else(|e| e.into_inner()).append(&line);
    }
}

/// What a `run` notes just before it types its first line, at `mark`:
/// who typed, and, when the call carries an idempotency key, the key (in
/// the session's logger, before anything is typed: a server that dies
/// after typing leaves it for the key sent again to follow). Done by
/// `run` itself, which has the mark from the status it takes anyway.
pub fn before_typing(home: &Path, session: &str, caller: &super::caller::Caller, logger: &LoggerClient, mark: Mark) {
    record_typed(home, session, caller.actor.as_deref(), "run", mark.regions);
    if let Some(key) = &caller.key {
        // Best effort, as the typing record: a logger that cannot take it
        // costs only the following of this key after a crash. Not waited
        // for: the note is on the logger's socket before the keys go to
        // tmux, and the logger reads its socket in order.
        let _ = logger.send_typing_note(key, mark);
    }
}

/// The replies this server gave to keyed calls, the latest last.
static ANSWERS: LazyLock<Mutex<VecDeque<(String, CallToolResult)>>> = LazyLock::new(Default::default);

/// Keeps the reply to the call with `key`.
fn remember_answer(key: &str, result: &CallToolResult) {
    let mut answers = ANSWERS.lock().unwrap_or_else(|e| e.into_inner());
    if answers.len() >= KEPT_ANSWERS {
        answers.pop_front();
    }
    answers.push_back((key.to_string(), result.clone()));
}

/// The reply this server gave to the call with `key`, if it kept it.
fn answered(key: &str) -> Option<CallToolResult> {
    let answers = ANSWERS.lock().unwrap_or_else(|e| e.into_inner());
    answers.iter().rev().find(|(k, _)| k == key).map(|(_, r)| r.clone())
}

/// The highest count this server saw per prefix of keys made as the
/// `connect` bridge makes them (`PREFIX-COUNT`, the count growing).
static COUNTS: LazyLock<Mutex<HashMap<String, u64>>> = LazyLock::new(Default::default);
/// How many prefixes [`COUNTS`] holds before it starts afresh (which
/// only costs a few calls a look at their loggers).
const KEPT_PREFIXES: usize = 1024;

/// Whether `key` is one no call sent before, for sure, so that its
/// logger need not be asked whether it typed: a `PREFIX-COUNT` key whose
/// count is above every count seen under its prefix since this server
/// started. A key sent again after a restart is either the first of its
/// prefix this server sees, or lower than a key the bridge made after it
/// (its counter only grows); either way it is asked about. Notes the
/// count.
fn surely_new(key: &str) -> bool {
    let Some((prefix, count)) = key.rsplit_once('-') else { return false };
    let Ok(count) = count.parse::<u64>() else { return false };
    let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
    match counts.get_mut(prefix) {
        Some(max) if count > *max => {
            *max = count;
            true
        }
        Some(_) => false,
        None => {
            if counts.len() >= KEPT_PREFIXES {
                counts.clear();
            }
            counts.insert(prefix.to_string(), count);
            false
        }
    }
}

/// The file of agent typing records of `session`.
pub fn agents_file(home: &Path, session: &str) -> PathBuf {
    home.join("agents").join(format!("{session}.jsonl"))
}

/// What the typing records of one session say, brought up to date from
/// the lines appended since the last look (the file only grows, until a
/// new session of the name replaces it).
#[derive(Debug)]
struct AgentsLog {
    tail: Tail,
    /// Who started each region an agent started, by region id.
    starters: HashMap<u64, String>,
    /// Who made the session.
    creator: Option<String>,
    /// Each agent's last typing time, in ms since the epoch.
    typed: BTreeMap<String, u64>,
}

impl AgentsLog {
    fn refresh(&mut self) -> &mut AgentsLog {
        let Ok(new) = self.tail.read_new() else { return self };
        if new.restarted {
            self.starters.clear();
            self.creator = None;
            self.typed.clear();
        }
        for t in new.bytes.split(|&b| b == b'\n').filter_map(|l| serde_json::from_slice::<Typed>(l).ok()) {
            if t.tool == "session_create" {
                self.creator.get_or_insert(t.actor);
                continue;
            }
            self.starters.insert(t.after_regions + 1, t.actor.clone());
            self.typed.insert(t.actor, t.ms);
        }
        self
    }
}

/// Runs `f` on the up-to-date typing records of `session`.
fn with_agents<T>(home: &Path, session: &str, f: impl FnOnce(&AgentsLog) -> T) -> T {
    let path = agents_file(home, session);
    let log = AGENTS.get(&path, || AgentsLog {
        tail: Tail::new(path.clone()),
        starters: HashMap::new(),
        creator: None,
        typed: BTreeMap::new(),
    });
    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
    f(log.refresh())
}

/// The agent who started region `id` of `session`, if an agent did.
pub fn starter_of(home: &Path, session: &str, id: RegionId) -> Option<String> {
    with_agents(home, session, |log| log.starters.get(&id.0).cloned())
}

/// The agents who started regions `ids` of `session` (`None` for a region
/// no agent started), in the order of `ids`.
pub fn starters(home: &Path, session: &str, ids: &[RegionId]) -> Vec<Option<String>> {
    with_agents(home, session, |log| ids.iter().map(|id| log.starters.get(&id.0).cloned()).collect())
}

/// The agent who made `session`, if one did through this server.
pub fn creator_of(home: &Path, session: &str) -> Option<String> {
    with_agents(home, session, |log| log.creator.clone())
}

/// Notes that `actor` made session `name` (as a `session_create` reply's
/// facts say).
pub fn note_created(home: &Path, name: &str, actor: Option<&str>) {
    if crate::session::validate_name(name).is_err() {
        return;
    }
    // A new session of an old name starts a new record.
    let typed = Typed {
        after_regions: 0,
        actor: actor.unwrap_or("agent").into(),
        tool: "session_create".into(),
        ms: crate::config::now_ms(),
    };
    if let Ok(mut line) = serde_json::to_vec(&typed) {
        line.push(b'\n');
        let _ = write_whole(&agents_file(home, name), &line);
    }
}

/// Every agent's last typing time in `session`, in epoch seconds.
pub fn agents_typed(home: &Path, session: &str) -> BTreeMap<String, u64> {
    with_agents(home, session, |log| log.typed.iter().map(|(a, ms)| (a.clone(), ms / 1000)).collect())
}

/// Replaces the file at `path` with `body`, atomically but without
/// `fsync`: these records must outlive a crash of the server, which the
/// page cache does, not a power cut.
fn write_whole(path: &Path, body: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        dtmcp_core::store::private_dir_all(dir)?;
    }
    dtmcp_core::store::write_replace(path, body)
}

/// Values kept for the server's life by key (a file, say), at most `cap`
/// of them: the one used longest ago goes when another comes.
pub(crate) struct Kept<K, T> {
    cap: usize,
    map: Mutex<Uses<K, T>>,
}

/// The values kept, each with the tick it was last used at, and the tick.
struct Uses<K, T> {
    tick: u64,
    values: HashMap<K, (u64, Arc<Mutex<T>>)>,
}

impl<K: std::hash::Hash + Eq + Clone, T> Kept<K, T> {
    /// Keeps at most `cap` values.
    pub(crate) fn new(cap: usize) -> Kept<K, T> {
        Kept { cap, map: Mutex::new(Uses { tick: 0, values: HashMap::new() }) }
    }

    /// The value of `key`, made by `make` when there is none.
    pub(crate) fn get(&self, key: &K, make: impl FnOnce() -> T) -> Arc<Mutex<T>> {
        let mut uses = self.map.lock().unwrap_or_else(|e| e.into_inner());
        uses.tick += 1;
        let tick = uses.tick;
        if let Some((used, value)) = uses.values.get_mut(key) {
            *used = tick;
            return Arc::clone(value);
        }
        if uses.values.len() >= self.cap
            && let Some(oldest) = uses.values.iter().min_by_key(|(_, (used, _))| *used).map(|(k, _)| k.clone())
        {
            uses.values.remove(&oldest);
        }
        let value = Arc::new(Mutex::new(make()));
        uses.values.insert(key.clone(), (tick, Arc::clone(&value)));
        value
    }
}

/// How many files of each kind are kept open or indexed at once.
const KEPT_FILES: usize = 128;

/// The open typing records, by path.
static APPENDERS: LazyLock<Kept<PathBuf, Appender>> = LazyLock::new(|| Kept::new(KEPT_FILES));
/// What the typing records say, by path.
static AGENTS: LazyLock<Kept<PathBuf, AgentsLog>> = LazyLock::new(|| Kept::new(KEPT_FILES));

/// Removes request records older than a day (the files earlier versions
/// kept per key, before keys were noted in the loggers).
pub fn prune_requests(home: &Path) {
    let Ok(entries) = std::fs::read_dir(home.join("requests")) else { return };
    let now = std::time::SystemTime::now();
    for e in entries.filter_map(Result::ok) {
        let old = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| now.duration_since(t).ok());
        if old.is_some_and(|d| d.as_millis() as u64 > KEEP_REQUESTS_MS) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl Terminal {
    /// Serves a tool that types (`run`, `send`, `expect`): notes who types,
    /// and honours a `run`'s idempotency key.
    pub(super) async fn run_once(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        actor: Option<&str>,
        key: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        let home = self.sessions().cfg.home.clone();
        let args = request.arguments.clone().unwrap_or_default();
        let session = args.get("session").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        if let Some(key) = key
            && let Some(answer) = self.answer_again(key, &session, &args, context.clone()).await
        {
            return answer;
        }
        // `run` notes who typed, and its key, itself, from the status it
        // takes anyway (see [`before_typing`]): one logger round trip less.
        if request.name != "run"
            && let Some(mark) = self.mark_of(&session).await
        {
            record_typed(&home, &session, actor, &request.name, mark.regions);
        }
        let answer = self.tool_router.call(ToolCallContext::new(self, request, context)).await;
        if let (Some(key), Ok(CallToolResponse::Complete(result))) = (key, &answer) {
            remember_answer(key, result);
        }
        answer
    }

    /// The session's position now, if it can be had. Straight from the
    /// logger's socket, without asking tmux: this runs before every typing
    /// call, and the tool itself resolves the session anyway.
    async fn mark_of(&self, session: &str) -> Option<Mark> {
        Some(self.logger_of(session).await?.status().await.ok()?.mark)
    }

    /// The connection to session `session`'s logger, by its socket's path
    /// alone (no tmux asked), if it answers.
    async fn logger_of(&self, session: &str) -> Option<LoggerClient> {
        crate::session::validate_name(session).ok()?;
        let socket = self.sessions().cfg.session_dir(session).join(dtmcp_core::store::files::SOCKET);
        LoggerClient::connect(&socket).await.ok()
    }

    /// The mark the call with `key` typed into `session` at, as its
    /// logger remembers; `None` when none did (or it cannot be asked: a
    /// session without its logger cannot run the command anyway).
    async fn typed_at(&self, session: &str, key: &str) -> Option<Mark> {
        self.logger_of(session).await?.typed(key).await.ok()?
    }

    /// Session `name` and its logger's status, asked again for a moment
    /// when that fails (a server just started may still be reattaching its
    /// loggers).
    async fn session_status(
        &self,
        name: &str,
    ) -> Result<(crate::session::Session, dtmcp_core::protocol::Status), String> {
        let deadline = std::time::Instant::now() + FOLLOW_WAIT;
        loop {
            let attempt = async {
                let s = self.sessions().resolve_quiet(name).await.map_err(|e| e.to_string())?;
                let status = s.logger().await.map_err(|e| e.to_string())?.status().await.map_err(|e| e.to_string())?;
                Ok::<_, String>((s, status))
            };
            match attempt.await {
                Ok(found) => return Ok(found),
                Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
    }

    /// The answer to a key seen before: the reply this server gave it, or
    /// the outcome of the command a previous server typed. `None`:
    /// nothing was typed with it.
    async fn answer_again(
        &self,
        key: &str,
        session: &str,
        args: &JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        if let Some(result) = answered(key) {
            return Some(Ok(CallToolResponse::Complete(result)));
        }
        if surely_new(key) {
            return None;
        }
        let mark = self.typed_at(session, key).await?;
        let (s, status) = match self.session_status(session).await {
            Ok(found) => found,
            // Typing again on a passing failure could run the command
            // twice: the caller is told to look instead.
            Err(e) => {
                let why = ToolError::Failed(format!(
                    "this command was typed once already, before the server restarted, and how it went cannot be told now ({e}); \
                     nothing was typed again: call wait session={session} or read session={session} to see it"
                ));
                return Some(Ok(CallToolResponse::Complete(self.finish_call(
                    "run",
                    Some(session),
                    std::time::Instant::now(),
                    Err(why),
                    Default::default(),
                    None,
                ))));
            }
        };
        let moved = status.mark.regions > mark.regions || (!s.meta.integrated && status.mark.raw > mark.raw);
        if !moved {
            return None;
        }
        let region = RegionId(mark.regions + 1);
        let mut follow = args.clone();
        follow.remove("command");
        let open = status.shell.open.contains(&region);
        let mut note =
            "(this command was typed once already, before the server restarted; here is how it went)\n".to_string();
        if !open
            && s.meta.integrated
            && let Some(reply) = finished_reply(&s, region, mark, args).await
        {
            // The reply a fresh run would have given: the same shaping (head
            // and tail, a clipped middle's summary, show, last_lines).
            let command = args.get("command").and_then(|v| v.as_str()).map(str::to_string);
            let body = async move { reply.map(|r| r.lead(&note)) };
            let r = self.call_noted("run", session, command.as_deref(), body).await;
            remember_answer(key, &r);
            return Some(Ok(CallToolResponse::Complete(r)));
        }
        let tool = if open {
            "wait"
        } else {
            if let Ok(mut logger) = s.logger().await
                && let Ok(Some(r)) = logger.region(region).await
                && let Some(exit) = r.exit
            {
                note = format!(
                    "(this command was typed once already, before the server restarted; it finished with exit {exit})\n"
                );
            }
            follow = JsonObject::new();
            follow.insert("session".into(), session.into());
            if s.meta.integrated {
                follow.insert("region".into(), region.0.into());
            }
            "read"
        };
        let mut call = CallToolRequestParams::new(tool);
        call = call.with_arguments(follow);
        let answer = self.tool_router.call(ToolCallContext::new(self, call, context)).await;
        Some(answer.map(|a| match a {
            CallToolResponse::Complete(mut r) => {
                r.content.insert(0, ContentBlock::text(note));
                remember_answer(key, &r);
                CallToolResponse::Complete(r)
            }
            other => other,
        }))
    }
}

/// The reply a fresh `run` gives for `region`, typed after `mark`, once it
/// finished, shaped by the call's own options (`args`); `None` when the
/// region is not there or not finished.
async fn finished_reply(
    s: &crate::session::Session,
    region: RegionId,
    mark: Mark,
    args: &JsonObject,
) -> Option<Result<Reply, ToolError>> {
    let mut logger = s.logger().await.ok()?;
    let status = logger.status().await.ok()?;
    let r = logger.region(region).await.ok()??;
    r.end?;
    let text = |k: &str| args.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let number = |k: &str| args.get(k).and_then(|v| v.as_u64());
    let overwrite = args.get("overwrite").and_then(|v| v.as_bool());
    // The first server may have saved the output already: a replay does
    // not fail on the file it wrote.
    let save_to = text("save_to").filter(|p| overwrite == Some(true) || !Path::new(p).exists());
    let params = super::shape::ShapeParams {
        show: text("show"),
        show_after: number("show_after"),
        last_lines: number("last_lines"),
        save_to,
        overwrite,
    };
    let shape = match super::shape::Shape::parse(&params) {
        Ok(shape) => shape,
        Err(e) => return Some(Err(e)),
    };
    let reason = dtmcp_core::protocol::WaitReason::RegionEnded(region);
    let waited = Waited { status: &status, reason: &reason, region: Some(&r), typed_on: mark.line };
    Some(describe(s, &mut logger, &waited, &shape, None).await)
}

#[cfg(test)]
mod tests {
    use super::surely_new;

    #[test]
    fn only_a_count_above_all_seen_under_its_prefix_is_surely_new() {
        // The first key of a prefix may be one sent again after a restart.
        assert!(!surely_new("3f9a-once-test-7"));
        assert!(surely_new("3f9a-once-test-8"));
        assert!(surely_new("3f9a-once-test-12"));
        // Sent again, or sent late (made before a later one): asked about.
        assert!(!surely_new("3f9a-once-test-12"));
        assert!(!surely_new("3f9a-once-test-10"));
        assert!(surely_new("3f9a-once-test-13"));
        // Keys of another form are always asked about.
        assert!(!surely_new("no-count-here"));
        assert!(!surely_new("nodash"));
        assert!(!surely_new("no-count-here"));
    }
}

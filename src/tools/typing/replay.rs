//! A `run` typed at most once per idempotency key.
//!
//! A `run` carrying an idempotency key (the `connect` bridge adds one to
//! every call and sends it again after a server restart) is noted in the
//! session's logger just before it types: the key and the position
//! (`Request::Typing`, memory only, since the logger outlives the router).
//! The same key again gets the reply this server gave it, when it gave
//! one; else, when the logger says the key typed and the session moved on
//! since (a server died in the middle), the command is followed, not
//! typed again: one still running is waited for (the body of `wait`), a
//! finished one is reported as a fresh `run` would have, or read back
//! (the body of `read`). Every such reply passes the same edge as any
//! other (`Terminal::finish_call`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::session::{LoggerClient, Session};
use crate::tools::reading::read::ReadParams;
use crate::tools::replies::reply::Reply;
use crate::tools::replies::report::{Waited, describe};
use crate::tools::replies::shape::{Shape, ShapeParams};
use crate::tools::typing::progress::Progress;
use crate::tools::typing::run::{RunParams, WaitParams};
use crate::tools::{Terminal, ToolError, ToolName};
use dtmcp_core::protocol::{Mark, Status, WaitReason};
use dtmcp_core::types::RegionId;

/// How long a resent key waits for its session to answer before saying
/// that its command's outcome cannot be told.
const FOLLOW_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
/// How many keyed replies this server keeps for a key sent again.
const KEPT_ANSWERS: usize = 64;
/// How many key prefixes are followed before the count starts afresh
/// (which only costs a few calls a look at their loggers).
const KEPT_PREFIXES: usize = 1024;
/// What a reply followed from an earlier server's typing starts with.
const TYPED_ONCE: &str = "(this command was typed once already, before the server restarted";

/// What this server remembers of keyed calls, for its life.
#[derive(Debug, Default)]
pub struct Replays {
    /// The replies this server gave to keyed calls, the latest last.
    answers: Mutex<VecDeque<(String, CallToolResult)>>,
    /// The highest count seen per prefix of keys made as the `connect`
    /// bridge makes them (`PREFIX-COUNT`, the count growing).
    counts: Mutex<HashMap<String, u64>>,
}

impl Replays {
    /// Keeps the reply to the call with `key`.
    fn remember(&self, key: &str, result: &CallToolResult) {
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        if answers.len() >= KEPT_ANSWERS {
            answers.pop_front();
        }
        answers.push_back((key.to_string(), result.clone()));
    }

    /// The reply this server gave to the call with `key`, if it kept it.
    fn answered(&self, key: &str) -> Option<CallToolResult> {
        let answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        answers.iter().rev().find(|(k, _)| k == key).map(|(_, r)| r.clone())
    }

    /// Whether `key` is one no call sent before, for sure, so that its
    /// logger need not be asked whether it typed: a `PREFIX-COUNT` key
    /// whose count is above every count seen under its prefix since this
    /// server started. A key sent again after a restart is either the
    /// first of its prefix this server sees, or lower than a key the
    /// bridge made after it (its counter only grows); either way it is
    /// asked about. Notes the count.
    fn surely_new(&self, key: &str) -> bool {
        let Some((prefix, count)) = key.rsplit_once('-') else { return false };
        let Ok(count) = count.parse::<u64>() else { return false };
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
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
}

/// How a command typed by an earlier server is followed.
enum Follow {
    /// It finished: the reply a fresh `run` would have given.
    Finished(Result<Reply, ToolError>),
    /// It still runs: waited for, as `wait` does.
    Running,
    /// It is read back, as `read` does (a plain shell's input, or a
    /// region that cannot be reported on), with a note of its exit.
    Read { region: Option<RegionId>, exit: Option<i32> },
}

impl Terminal {
    /// Serves a tool that types (`run`, `send`, `expect`): notes who types,
    /// and honours a `run`'s idempotency key.
    pub(crate) async fn run_once(
        &self,
        tool: ToolName,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        actor: Option<&str>,
        key: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        let session = args.get("session").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        if let Some(key) = key
            && let Some(answer) = self.answer_again(key, &args, &context).await
        {
            return Ok(CallToolResponse::Complete(answer));
        }
        // `run` notes who typed, and its key, itself, from the status it
        // takes anyway (see [`holds::before_typing`](crate::tools::typing::holds::before_typing)): one logger round trip less.
        if tool != ToolName::Run
            && let Some(mark) = self.mark_of(&session).await
        {
            self.journal().record_typed(&session, actor, tool.as_str(), mark.regions);
        }
        let answer = self.tool_router.call(ToolCallContext::new(self, request, context)).await;
        // A call that ends to ask its client for input typed nothing yet:
        // the same key comes back with the answer, to be served afresh.
        let asks_input = crate::agents::caller::Caller::current().input.requires();
        if let (Some(key), Ok(CallToolResponse::Complete(result)), false) = (key, &answer, asks_input) {
            self.inner.replays.remember(key, result);
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
        self.sessions().loggers.connect(&socket).await.ok()
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
    async fn session_status(&self, name: &str) -> Result<(Session, Status), String> {
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
    /// nothing was typed with it (or the call is not a `run` this server
    /// can read, which the tool then refuses as usual).
    async fn answer_again(
        &self,
        key: &str,
        args: &rmcp::model::JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Option<CallToolResult> {
        if let Some(result) = self.inner.replays.answered(key) {
            return Some(result);
        }
        if self.inner.replays.surely_new(key) {
            return None;
        }
        let p: RunParams = serde_json::from_value(serde_json::Value::Object(args.clone())).ok()?;
        let mark = self.typed_at(&p.session, key).await?;
        let result = match self.session_status(&p.session).await {
            Ok((s, status)) => {
                let follow = follow(&s, &status, mark, &p).await?;
                self.followed(p, follow, context).await
            }
            // Typing again on a passing failure could run the command
            // twice: the caller is told to look instead.
            Err(e) => {
                let session = &p.session;
                let why = ToolError::Failed(format!(
                    "{TYPED_ONCE}, and how it went cannot be told now ({e}); \
                     nothing was typed again: call wait session={session} or read session={session} to see it"
                ));
                let now = std::time::Instant::now();
                self.finish_call(ToolName::Run, Some(session), now, Err(why), Default::default(), None)
            }
        };
        self.inner.replays.remember(key, &result);
        Some(result)
    }

    /// The reply to a `run` whose command an earlier server typed, through
    /// the body of the tool that tells it best.
    async fn followed(&self, p: RunParams, follow: Follow, context: &RequestContext<RoleServer>) -> CallToolResult {
        let session = p.session.clone();
        match follow {
            Follow::Finished(reply) => {
                let lead = format!("{TYPED_ONCE}; here is how it went)\n");
                let body = async move { reply.map(|r| r.lead(&lead)) };
                self.call_noted(ToolName::Run, &session, Some(&p.command), body).await
            }
            Follow::Running => {
                let lead = format!("{TYPED_ONCE}; here is how it went)\n");
                let progress = Progress::of(context);
                let wait = WaitParams {
                    session: p.session,
                    timeout: p.timeout,
                    until: p.until,
                    show: p.show,
                    show_after: p.show_after,
                    last_lines: p.last_lines,
                    save_to: p.save_to,
                    overwrite: p.overwrite,
                    port: p.port,
                    listening: p.listening,
                };
                let body = async move { self.wait_body(wait, &progress).await.map(|r| r.lead(&lead)) };
                self.call_noted(ToolName::Wait, &session, None, body).await
            }
            Follow::Read { region, exit } => {
                let lead = match exit {
                    Some(exit) => format!("{TYPED_ONCE}; it finished with exit {exit})\n"),
                    None => format!("{TYPED_ONCE}; here is how it went)\n"),
                };
                let read = ReadParams { session: p.session, region: region.map(|r| r.0), ..ReadParams::default() };
                let body = async move { self.read_body(read).await.map(|text| Reply::text(text).lead(&lead)) };
                self.call(ToolName::Read, Some(&session), body).await
            }
        }
    }
}

/// How the command typed at `mark` in `s` (now at `status`) is followed;
/// `None` when the session has not moved on since, so nothing of it ran.
async fn follow(s: &Session, status: &Status, mark: Mark, p: &RunParams) -> Option<Follow> {
    let moved = status.mark.regions > mark.regions || (!s.meta.integrated && status.mark.raw > mark.raw);
    if !moved {
        return None;
    }
    let region = RegionId(mark.regions + 1);
    if status.shell.open.contains(&region) {
        return Some(Follow::Running);
    }
    if s.meta.integrated
        && let Some(reply) = finished_reply(s, region, mark, p).await
    {
        return Some(Follow::Finished(reply));
    }
    let exit = match s.logger().await {
        Ok(mut logger) => logger.region(region).await.ok().flatten().and_then(|r| r.exit),
        Err(_) => None,
    };
    Some(Follow::Read { region: s.meta.integrated.then_some(region), exit })
}

/// The reply a fresh `run` gives for `region`, typed after `mark`, once it
/// finished, shaped by the call's own options; `None` when the region is
/// not there or not finished.
async fn finished_reply(s: &Session, region: RegionId, mark: Mark, p: &RunParams) -> Option<Result<Reply, ToolError>> {
    let mut logger = s.logger().await.ok()?;
    let status = logger.status().await.ok()?;
    let r = logger.region(region).await.ok()??;
    r.end?;
    // The first server may have saved the output already: a replay does
    // not fail on the file it wrote.
    let fresh = |path: &String| p.overwrite == Some(true) || !std::path::Path::new(path).exists();
    let params = ShapeParams {
        show: p.show.clone(),
        show_after: p.show_after,
        last_lines: p.last_lines,
        save_to: p.save_to.clone().filter(fresh),
        overwrite: p.overwrite,
    };
    let shape = match Shape::parse(&params) {
        Ok(shape) => shape,
        Err(e) => return Some(Err(e)),
    };
    let reason = WaitReason::RegionEnded(region);
    let waited = Waited { status: &status, reason: &reason, region: Some(&r), typed_on: mark.line, seen: None };
    Some(describe(s, &mut logger, &waited, &shape, None).await)
}

#[cfg(test)]
mod tests {
    use super::Replays;

    #[test]
    fn only_a_count_above_all_seen_under_its_prefix_is_surely_new() {
        let replays = Replays::default();
        let surely_new = |key: &str| replays.surely_new(key);
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

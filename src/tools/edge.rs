//! The edge of every tool call: where a tool body's outcome becomes the
//! result the client reads. Whatever a body returns, a [`Reply`] or a
//! [`ToolError`], passes through [`Terminal::finish_call`]: led by what
//! finished since the agent's last call, its secrets replaced by
//! placeholders, counted in `calls.log`, and cleaned of control bytes.
//! Nothing else turns a reply into a result.

use std::time::Instant;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};

use crate::agents::caller::Caller;
use crate::tools::replies::reply::{Facts, Outcome, Reply};
use crate::tools::replies::secrets::{self, Secrets};
use crate::tools::{Terminal, ToolError, ToolName};

impl Terminal {
    /// Runs one tool body, records it in `calls.log`, and turns its outcome
    /// into a tool result. A body that has no facts to tell gives its text
    /// alone.
    pub(crate) fn call<'a, F, R>(
        &'a self,
        tool: ToolName,
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
            if let Some(name) = session.filter(|_| tool.reads_the_record()) {
                self.note_reply(name).await;
            }
            self.finish_call(tool, session, started, outcome.map(Into::into), early, finished)
        }
    }

    /// "Finished since your last call", for the tools that work in a live
    /// session (see [`Terminal::finished_since`]).
    pub(crate) async fn finished_before(&self, tool: ToolName, session: Option<&str>) -> Option<String> {
        match session {
            Some(name) if tool.follows_a_session() => self.finished_since(name).await,
            _ => None,
        }
    }

    /// Records a call that began at `started` (in `calls.log`, and who made
    /// a session it made) and turns its outcome into a tool result (`early`:
    /// the secrets its body hid already, counted in the note), led by
    /// what finished since the agent's last call and any note the session
    /// left for it. This is the one place a reply or an error becomes text
    /// for the client.
    pub(crate) fn finish_call(
        &self,
        tool: ToolName,
        session: Option<&str>,
        started: Instant,
        outcome: Result<Reply, ToolError>,
        early: dtmcp_core::redact::Counts,
        finished: Option<String>,
    ) -> CallToolResult {
        let who = Caller::current();
        if let Ok(Reply { facts: Facts { created: Some(name), .. }, .. }) = &outcome {
            self.journal().note_created(name, who.actor.as_deref());
        }
        let created = outcome.as_ref().ok().and_then(|r| r.facts.created.clone());
        let facts = structured(tool, session, &outcome);
        let note = session.and_then(|name| self.sessions().take_note(name));
        let warning = self.inner.governor.take_warning();
        let leads: String = [warning, finished, note].into_iter().flatten().collect();
        let ok = outcome.is_ok();
        let kind = match &outcome {
            Ok(_) => crate::metrics::Outcome::Ok,
            Err(ToolError::Refused { .. }) => crate::metrics::Outcome::Refused,
            Err(_) => crate::metrics::Outcome::Error,
        };
        let text = match outcome {
            Ok(reply) => leads + &reply.text,
            Err(e) => format!("{leads}{e}"),
        };
        let dir = session.or(created.as_deref()).map(|name| self.sessions().cfg.session_dir(name));
        // The facts pass the redactor too: a session's name, a command
        // line or a refused text may hold a secret. Their count of
        // redactions is added below, after the redaction: it holds none.
        let facts_json = serde_json::to_string(&facts);
        let (mut text, mut counts, hidden_facts) =
            self.inner.secrets.redact_reply(dir.as_deref(), &text, facts_json.as_deref().unwrap_or("{}"));
        counts.add(&early);
        if counts.total() > 0 {
            text.push_str(&Secrets::note(dir.as_deref(), &self.actor(), &counts));
        }
        let elapsed = started.elapsed();
        self.inner.calls.record(tool.as_str(), session, who.actor.as_deref(), elapsed, ok, counts.total());
        let seen = crate::agents::caller::client_time(elapsed);
        crate::metrics::get().call(tool.as_str(), who.actor.as_deref(), kind, seen, counts.total());
        let content = vec![ContentBlock::text(clean(&text))];
        let facts = match facts_json {
            // Nothing hidden (most replies): the facts as they were.
            Ok(json) if json == hidden_facts => Some(facts),
            Ok(_) => serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&hidden_facts).ok(),
            Err(_) => None,
        };
        let facts = facts.map(|mut f| {
            f.insert("redactions".into(), counts.total().into());
            serde_json::Value::Object(f)
        });
        let mut result = if ok { CallToolResult::success(content) } else { CallToolResult::error(content) };
        result.structured_content = facts.map(clean_value);
        result
    }

    /// The arguments of a tool that types with the placeholders of secrets
    /// in their texts replaced by the values, just before they are typed;
    /// an unknown placeholder refuses the call, nothing typed.
    pub(crate) fn with_secrets(
        &self,
        tool: ToolName,
        mut request: CallToolRequestParams,
    ) -> Result<CallToolRequestParams, CallToolResult> {
        let Some(args) = request.arguments.as_mut() else { return Ok(request) };
        let Some(name) = args.get("session").and_then(|v| v.as_str()).map(str::to_string) else { return Ok(request) };
        let dir = self.sessions().cfg.session_dir(&name);
        for value in args.values_mut() {
            if let Err(e) = substitute_in(&self.inner.secrets, &dir, value) {
                return Err(self.finish_call(tool, Some(&name), Instant::now(), Err(e), Default::default(), None));
            }
        }
        Ok(request)
    }
}

/// The facts of a call's outcome as its structured result: what happened,
/// never the output again (a client that shows both to the model must not
/// pay for it twice). Every key is optional but `tool` and `ok`; the
/// shape is [`ToolName::output_schema`].
fn structured(
    tool: ToolName,
    session: Option<&str>,
    outcome: &Result<Reply, ToolError>,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::{Value, json};
    let mut out = serde_json::Map::new();
    out.insert("tool".into(), tool.as_str().into());
    out.insert("ok".into(), outcome.is_ok().into());
    if let Some(name) = session {
        out.insert("session".into(), name.into());
    }
    match outcome {
        Ok(Reply { facts, .. }) => {
            if let Some(state) = facts.outcome.state() {
                out.insert("state".into(), state.into());
            }
            if let Outcome::Ended { exit: Some(code) } = facts.outcome {
                out.insert("exit_code".into(), code.into());
                if let Some((name, _)) = dtmcp_core::exit::signal(code) {
                    out.insert("signal".into(), name.into());
                }
            }
            if !facts.pipeline.is_empty() {
                out.insert("pipeline".into(), json!(facts.pipeline));
            }
            if let Some(region) = facts.region {
                out.insert("region".into(), region.0.into());
            }
            if let Some((first, last)) = facts.lines {
                out.insert("lines".into(), json!({ "first": first.0, "last": last.0 }));
            }
            if let Some(gap) = &facts.clipped {
                out.insert("clipped".into(), json!({ "first": gap.start().0, "last": gap.end().0 }));
            }
            if let Some(name) = &facts.created {
                out.insert("created".into(), name.as_str().into());
            }
            for (k, v) in &facts.details {
                out.insert(k.clone(), v.clone());
            }
        }
        Err(e) => {
            out.insert("error".into(), e.kind().into());
            if let ToolError::Refused { refusal, .. } = e
                && let Ok(Value::Object(data)) = serde_json::to_value(refusal)
            {
                out.insert("refusal".into(), Value::Object(data));
            }
        }
    }
    out
}

/// Replaces the placeholders in every string within `value`.
fn substitute_in(secrets: &Secrets, dir: &std::path::Path, value: &mut serde_json::Value) -> Result<(), ToolError> {
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

/// The `_meta` every tool carries: `anthropic/alwaysLoad` keeps Claude Code
/// from deferring the tool behind its tool search.
pub fn always_load() -> rmcp::model::MetaObject {
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

/// `value` with every string in it [`clean`]ed: a structured result is
/// read by the model too, and a session name or a refused line may hold
/// anything.
fn clean_value(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(clean(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(clean_value).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (clean(&k), clean_value(v))).collect()),
        other => other,
    }
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
    use super::clean;

    #[test]
    fn structured_results_lose_them_too_keys_and_all() {
        let dirty = serde_json::json!({"session": "a\u{9b}b", "rows": [{"x\u{1b}": "\u{202e}y"}], "n": 3});
        let clean = super::clean_value(dirty);
        assert_eq!(clean, serde_json::json!({"session": "a\u{fffd}b", "rows": [{"x\u{fffd}": "\u{fffd}y"}], "n": 3}));
    }

    #[test]
    fn replies_lose_escapes_and_c1_but_keep_newlines_and_tabs() {
        assert_eq!(clean("a\tb\nc"), "a\tb\nc");
        assert_eq!(clean("a\u{1b}[0mb\u{9b}c\u{f}"), "a\u{fffd}[0mb\u{fffd}c\u{fffd}");
        assert_eq!(clean("x\u{202e}y\u{2066}z"), "x\u{fffd}y\u{fffd}z");
    }
}

//! `expect`: optionally type a command, then answer its questions by rules
//! until it finishes, its prompt returns, `until` matches, a stop rule
//! fires, or a question appears that no rule answers.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use regex::Regex;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::keys::{self, Key};
use crate::session::{LoggerClient, Session};
use crate::tools::ToolError;
use crate::tools::replies::reply::Reply;
use crate::tools::replies::report::{Waited, describe};
use crate::tools::replies::shape::Shape;
use crate::tools::typing::args::{command_lines, timeout_ms};
use crate::tools::typing::consent::Line as Judge;
use crate::tools::typing::holds::Enter;
use crate::tools::typing::progress::Progress;
use crate::tools::typing::target::ready_status;
use crate::tools::typing::target::{self, Target};
use crate::tools::{Terminal, ToolName};
use dtmcp_core::protocol::{Mark, Status, WaitReason, WaitSpec};
use dtmcp_core::types::{LineNo, RegionId};

/// Output quiet this long, with text on the unfinished line, is a question.
const QUESTION_QUIET_MS: u64 = 700;
/// The most answers one call gives, so a rule that keeps matching ends.
const MAX_ANSWERS: usize = 50;
/// The most answers in a row to the same question: a rule whose pattern
/// matches a program's own prompt (python's `>>>`) would answer it again
/// after every answer.
const SAME_ANSWERS: usize = 4;

/// One rule: when `pattern` appears, do exactly one of the actions.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A regex matched against each new line of output, including an unfinished one such as a prompt "Password: ".
    pub pattern: String,
    /// Type this line and press Enter.
    #[serde(default)]
    pub line: Option<String>,
    /// Type this text without Enter.
    #[serde(default)]
    pub text: Option<String>,
    /// Press these keys, e.g. ["y"] or ["ctrl+c"].
    #[serde(default)]
    pub keys: Option<Vec<String>>,
    /// Stop and return when the pattern appears.
    #[serde(default)]
    pub stop: Option<bool>,
}

/// Arguments of `expect`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectParams {
    /// The session's name.
    pub session: String,
    /// A command line to type first (optional: without it, answer the program already running).
    #[serde(default)]
    pub command: Option<String>,
    /// The rules, tried in order on each new line of output.
    pub rules: Vec<Rule>,
    /// A regex: return as soon as it appears in new output.
    #[serde(default)]
    pub until: Option<String>,
    /// Seconds to wait in all (default 30, at most 600).
    #[serde(default)]
    pub timeout: Option<f64>,
}

/// What a rule does, checked.
enum Action {
    Line(String),
    Text(String),
    Keys(Vec<Key>),
    Stop,
}

struct Checked {
    rules: Vec<(Regex, Action)>,
    until: Option<Regex>,
    combined: String,
}

#[tool_router(router = expect_router, vis = "pub(crate)")]
impl Terminal {
    /// Answers a program's questions by rules.
    #[tool(
        name = "expect",
        description = crate::docent::texts::tool::EXPECT.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn expect(&self, Parameters(p): Parameters<ExpectParams>, progress: Progress) -> CallToolResult {
        let name = p.session.clone();
        let command = p.command.as_deref().map(str::to_string);
        self.call_noted(crate::tools::ToolName::Expect, &name, command.as_deref(), self.expect_body(p, &progress)).await
    }
}

impl Terminal {
    async fn expect_body(&self, p: ExpectParams, progress: &Progress) -> Result<Reply, ToolError> {
        let timeout = timeout_ms(p.timeout).map_err(ToolError::BadInput)?;
        let checked = check(&p).map_err(ToolError::BadInput)?;
        let lines = p.command.as_deref().map(|c| command_lines(c, false)).transpose().map_err(ToolError::BadInput)?;
        if lines.as_ref().is_some_and(|l| l.len() > 1) {
            return Err(ToolError::BadInput("expect types one command line; run the others first".into()));
        }
        let s = self.sessions().resolve(&p.session).await?;
        let mut logger = self.sessions().logger(&s).await?;
        let actor = self.actor();
        // Judged before the session is held: a person asked may take minutes.
        let mut allowed = None;
        if let Some(line) = lines.as_ref().and_then(|l| l.first()) {
            let now = logger.status().await?;
            let to = target::target(&s, &mut logger, now).await.map_or(Target::Shell, |(t, _)| t);
            allowed =
                self.judged(Judge { session: &s, tool: ToolName::Expect, text: line, target: &to }, progress).await?;
        }
        let hold = match &lines {
            Some(_) => Some(self.inner.holds.take(&s.name, &actor, "expect")?),
            None => None,
        };
        let mut before = match &lines {
            Some(_) => ready_status(&s, &mut logger).await?,
            None => logger.status().await?,
        };
        if let Some(line) = lines.as_ref().and_then(|l| l.first()) {
            let target;
            (target, before) = target::target(&s, &mut logger, before).await?;
            if matches!(target, Target::Shell) {
                before = self.clear_stray_answers(&s, &mut logger, before).await?.status;
                let last = self.last_typed(&s);
                if let Some(why) = crate::tools::typing::holds::refusal(
                    &s.name,
                    &before,
                    last.as_ref(),
                    &actor,
                    s.pane.session_attached,
                ) {
                    return Err(why.into());
                }
            }
            if let Some(allowed) = &allowed {
                self.journal().record_consent(&s.name, &actor, before.mark.regions, allowed);
            }
            self.type_line(&s, &mut logger, &before, Some(target), line).await?;
            self.inner.holds.note_typed(s.pane.pane_id.as_str(), &actor, line, Enter::Pressed, &before);
        }
        drop(hold);
        let deadline = Instant::now() + Duration::from_millis(timeout);
        let start = if lines.is_some() { before.mark } else { resume_mark(&before) };
        let answering = Answering { checked: &checked, start, deadline, progress };
        self.answer_loop(&s, &mut logger, answering).await
    }

    async fn answer_loop(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        answering: Answering<'_>,
    ) -> Result<Reply, ToolError> {
        let Answering { checked, start, deadline, progress } = answering;
        // The command's output begins after the line it was typed on.
        let from = start.line.next();
        let mut mark = start;
        let mut log = String::new();
        let mut answers = 0;
        // The last question answered, and how many times in a row.
        let mut same: (String, usize) = (String::new(), 0);
        loop {
            let left = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
            // In slices, each from the same mark: what comes between two
            // is found by the next, and between them the client hears how
            // it goes (or ends the wait by cancelling, as the timeout would).
            let spec = WaitSpec {
                after: mark,
                command_done: true,
                pattern: Some(checked.combined.clone()),
                settle_ms: Some(QUESTION_QUIET_MS),
                timeout_ms: Progress::slice(left),
                full_screen: false,
            };
            let (mut reason, status) = logger.wait(spec).await?;
            // Quiet, but not at a question, or a slice run out: keep
            // waiting for output while there is time and the client waits.
            let quiet =
                reason == WaitReason::Settled && (status.current_text.trim().is_empty() || status.shell.at_prompt);
            if quiet || reason == WaitReason::Timeout {
                if Instant::now() < deadline && !progress.cancelled() {
                    progress.tick(self, s, logger, &status, from).await;
                    if quiet {
                        mark.raw = status.mark.raw;
                    }
                    continue;
                }
                reason = WaitReason::Timeout;
            }
            let note = match reason {
                WaitReason::Matched(line) => {
                    let text = line_text(logger, &status, line).await?;
                    same = match same.0 == text {
                        true => (text.clone(), same.1 + 1),
                        false => (text.clone(), 1),
                    };
                    if same.1 > SAME_ANSWERS {
                        let note = format!(
                            "stopped: the same question came back after each of {SAME_ANSWERS} answers: {} (a rule \
                             matching a program's own prompt would answer it forever; expect again goes on)",
                            quote(&text)
                        );
                        let ending = Ending { status: &status, reason: &reason, start, log, note };
                        return self.reply(s, logger, ending).await;
                    }
                    match self.apply(s, logger, (&status, progress), checked, &text).await? {
                        Some(done) => done,
                        None if answers < MAX_ANSWERS => {
                            let _ = writeln!(log, "answered line {line}: {}", quote(&text));
                            mark.line = line.next();
                            mark.raw = status.mark.raw;
                            answers += 1;
                            continue;
                        }
                        None => format!("stopped after {MAX_ANSWERS} answers"),
                    }
                }
                WaitReason::Settled => {
                    format!("waiting at a question no rule answers: {}", quote(&status.current_text))
                }
                _ => String::new(),
            };
            let ending = Ending { status: &status, reason: &reason, start, log, note };
            return self.reply(s, logger, ending).await;
        }
    }

    /// Applies the first rule matching `text`, a line of output when the
    /// logger's status was `status`; `Some` ends the loop.
    async fn apply(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        (status, progress): (&Status, &Progress),
        checked: &Checked,
        text: &str,
    ) -> Result<Option<String>, ToolError> {
        let bytes = text.as_bytes();
        // A prompt's trailing blank is trimmed from the log; a pattern may name it.
        let padded = format!("{text} ");
        let matches = |re: &Regex| re.is_match(text) || re.is_match(&padded);
        if checked.until.as_ref().is_some_and(matches) {
            return Ok(Some(format!("`until` matched: {}", quote(text))));
        }
        let Some((_, action)) = checked.rules.iter().find(|(re, _)| matches(re)) else {
            return Ok(Some(format!("matched no rule: {}", quote(&String::from_utf8_lossy(bytes)))));
        };
        let tmux = &self.sessions().tmux;
        let pane = s.pane.pane_id.as_str();
        match action {
            Action::Stop => return Ok(Some(format!("a stop rule matched: {}", quote(text)))),
            Action::Line(l) => {
                let (target, now) = match target::target(s, logger, status.clone()).await {
                    Ok((target, now)) => (Some(target), now),
                    Err(_) => (None, status.clone()),
                };
                // A line a rule types is judged as any other (a program's
                // input when the foreground cannot be told: stricter).
                let to = target.as_ref().unwrap_or(&Target::Shell);
                self.judged(Judge { session: s, tool: ToolName::Expect, text: l, target: to }, progress).await?;
                self.type_line(s, logger, &now, target, l).await?;
            }
            Action::Text(t) => tmux.send_text(pane, t).await?,
            Action::Keys(keys) => {
                for key in keys {
                    match key {
                        Key::Named(name) => tmux.send_key(pane, name).await,
                        Key::Char(c) => tmux.send_text(pane, c.encode_utf8(&mut [0; 4])).await,
                    }?;
                }
            }
        }
        Ok(None)
    }

    /// Types `line` and Enter where `target` says, the logger's status being
    /// `status`; into a program, an input region opens first.
    async fn type_line(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        status: &Status,
        target: Option<Target>,
        line: &str,
    ) -> Result<(), ToolError> {
        if let Some(Target::Program(job)) = &target {
            target::open_input(s, logger, status, job, line).await?;
        }
        let tmux = &self.sessions().tmux;
        Ok(tmux.send_line(s.pane.pane_id.as_str(), line).await?)
    }

    /// The reply once answering has ended: the answers given, then the
    /// command's report under expect's own word on the outcome.
    async fn reply(&self, s: &Session, logger: &mut LoggerClient, ending: Ending<'_>) -> Result<Reply, ToolError> {
        let Ending { status, reason, start, log, note } = ending;
        let region = match status.mark.regions > start.regions {
            true => logger.region(RegionId(start.regions + 1)).await?,
            false => None,
        };
        let note = (!note.is_empty()).then_some(note.as_str());
        let waited = Waited { status, reason, region: region.as_ref(), typed_on: start.line, seen: None };
        let body = describe(s, logger, &waited, &Shape::default(), note).await?;
        Ok(body.lead(&log))
    }
}

/// What holds for one call's answering.
struct Answering<'a> {
    /// The rules and `until`, checked.
    checked: &'a Checked,
    /// The mark answering starts from: the command's region is the first
    /// one after it.
    start: Mark,
    /// When the call's wait runs out.
    deadline: Instant,
    /// The client's progress and cancellation.
    progress: &'a Progress,
}

/// How answering ended, before the reply is composed.
struct Ending<'a> {
    /// The logger's status then.
    status: &'a Status,
    /// Why the last wait stopped.
    reason: &'a WaitReason,
    /// The mark answering started from: the command's region is the first
    /// one after it.
    start: Mark,
    /// One line per answer given.
    log: String,
    /// expect's own word on the outcome (empty: none), in place of the
    /// headline.
    note: String,
}

/// Where to look from when answering a program that already runs: its
/// region (so it counts as the command), and the line the cursor is on,
/// which may hold the question already.
fn resume_mark(status: &Status) -> Mark {
    let mut mark = status.mark;
    match status.shell.open.last() {
        Some(open) => mark.regions = open.0.saturating_sub(1),
        None => mark.line = LineNo(mark.line.0.saturating_sub(1)),
    }
    mark
}

/// The text of `line`: the unfinished line from the status, else the log.
async fn line_text(logger: &mut LoggerClient, status: &Status, line: LineNo) -> Result<String, ToolError> {
    if line >= status.mark.line {
        return Ok(status.current_text.clone());
    }
    Ok(logger.read(line, 1).await?.into_iter().next().unwrap_or_default())
}

fn quote(text: &str) -> String {
    format!("`{}`", text.trim_end())
}

/// Checks every rule before anything is typed.
fn check(p: &ExpectParams) -> Result<Checked, String> {
    if p.rules.is_empty() && p.until.is_none() {
        return Err("give at least one rule (or until); each rule is {pattern, line | text | keys | stop}".into());
    }
    let mut rules = Vec::new();
    for (i, r) in p.rules.iter().enumerate() {
        let re = Regex::new(&r.pattern).map_err(|e| format!("rule {}: invalid pattern: {e}", i + 1))?;
        let actions = [r.line.is_some(), r.text.is_some(), r.keys.is_some(), r.stop == Some(true)];
        if actions.iter().filter(|a| **a).count() != 1 {
            return Err(format!("rule {} must have exactly one of line, text, keys or stop=true", i + 1));
        }
        let action = match (&r.line, &r.text, &r.keys) {
            (Some(l), _, _) => Action::Line(l.clone()),
            (_, Some(t), _) => Action::Text(t.clone()),
            (_, _, Some(k)) => Action::Keys(keys::parse_all(k).map_err(|e| format!("rule {}: {e}", i + 1))?),
            _ => Action::Stop,
        };
        if let Action::Line(t) | Action::Text(t) = &action
            && t.chars().any(|c| c.is_control() && c != '\t')
        {
            return Err(format!("rule {}: line and text are typed literally; use keys for control keys", i + 1));
        }
        rules.push((re, action));
    }
    let until = p.until.as_deref().map(Regex::new).transpose().map_err(|e| format!("until: invalid pattern: {e}"))?;
    let mut parts: Vec<String> = p.rules.iter().map(|r| format!("(?:{})", r.pattern)).collect();
    parts.extend(p.until.iter().map(|u| format!("(?:{u})")));
    Ok(Checked { rules, until, combined: parts.join("|") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pattern: &str) -> Rule {
        Rule { pattern: pattern.into(), line: None, text: None, keys: None, stop: None }
    }

    fn params(rules: Vec<Rule>) -> ExpectParams {
        ExpectParams { session: "t1".into(), command: None, rules, until: None, timeout: None }
    }

    #[test]
    fn every_rule_needs_exactly_one_valid_action() {
        assert!(check(&params(vec![])).is_err());
        assert!(check(&params(vec![rule("x")])).is_err());
        let both = Rule { line: Some("a".into()), text: Some("b".into()), ..rule("x") };
        assert!(check(&params(vec![both])).is_err());
        let bad_key = Rule { keys: Some(vec!["ctrl+".into()]), ..rule("x") };
        assert!(check(&params(vec![bad_key])).is_err());
        let bad_re = Rule { stop: Some(true), ..rule("(") };
        assert!(check(&params(vec![bad_re])).err().is_some_and(|e| e.contains("rule 1")));
        let good =
            vec![Rule { line: Some("yes".into()), ..rule("\\[y/n\\]") }, Rule { stop: Some(true), ..rule("done") }];
        let c = check(&params(good)).expect("valid");
        assert_eq!(c.combined, "(?:\\[y/n\\])|(?:done)");
    }
}

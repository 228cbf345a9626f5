//! The policy at the moment of typing: every line `run`, `send` (with
//! Enter) and `expect` would type is judged first (see [`crate::policy`]).
//! A denied line is never typed; a line the policy asks about waits for a
//! person, asked through every channel at once, and the first answer wins:
//!
//! - the client's own user, by MCP elicitation, when the client declared
//!   it (the handshake era: 2026-07-28 forbids requests from the server,
//!   and rmcp's input-required results are not taken up here yet);
//! - whoever is attached to the session in tmux: a popup that runs
//!   `docent-terminal-mcp answer N` and takes one key;
//! - `docent-terminal-mcp pending | allow N | deny N` at any shell, and
//!   the web view's buttons, which write the same answer file.
//!
//! While it waits the call sends progress ("waiting for a person…"); an
//! ask nobody answers within the policy's `ask_timeout` is a refusal. The
//! others are told: the popups close and a message says who answered; the
//! client's prompt is cancelled.

use std::time::{Duration, Instant};

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationSchema, EnumSchema, InputRequest, InputRequests,
    InputRequiredResult, ServerRequest,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::agents::caller::{ASK_STATE, CONSENT_INPUT, Caller};
use crate::policy::asks::{Answer, Ask, Decision, Scope, Via};
use crate::policy::audit::Record;
use crate::session::Session;
use crate::tools::typing::progress::Progress;
use crate::tools::typing::target::Target;
use crate::tools::{Refusal, Terminal, ToolError, ToolName};
use dtmcp_core::policy::{Action, To, Typed, Verdict};

/// How often an open ask looks for its answer file.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// How long the message that says who answered stays on a tmux client.
const TOLD_MS: &str = "4000";
/// The answers offered, as the client's prompt and the popup name them.
const CHOICES: [(&str, &str); 4] = [
    ("allow", "Allow once"),
    ("allow-session", "Allow this line in this session"),
    ("allow-agent", "Allow this agent until the server stops"),
    ("deny", "Deny"),
];

/// A line about to be typed.
pub struct Line<'a> {
    /// The session.
    pub session: &'a Session,
    /// The tool typing it.
    pub tool: ToolName,
    /// The line, as it will be typed (secrets as values).
    pub text: &'a str,
    /// Where it goes.
    pub target: &'a Target,
}

/// What the policy says of a line before it is typed.
pub(crate) enum Judged {
    /// Type it.
    Allow,
    /// Ask a person first ([`Terminal::consent`]).
    Ask(Box<Pending>),
}

/// A line a person must be asked about.
pub(crate) struct Pending {
    /// The ask, to be opened.
    ask: Ask,
    /// What the policy said.
    verdict: Verdict,
    /// The audit record, to be completed with the answer.
    record: Record,
}

impl Terminal {
    /// Judges `line` and, when the policy asks, waits for a person:
    /// `Ok(None)` to type it, `Ok(Some)` with who allowed it, a refusal
    /// (nothing typed) otherwise.
    pub(crate) async fn judged(&self, line: Line<'_>, progress: &Progress) -> Result<Option<String>, ToolError> {
        let s = line.session;
        match self.judge_line(line)? {
            Judged::Allow => Ok(None),
            Judged::Ask(pending) => self.consent(s, *pending, progress).await.map(Some),
        }
    }

    /// What the policy says of `line`, at once: a denied line is a refusal
    /// (audited); no policy allows everything.
    pub(crate) fn judge_line(&self, line: Line<'_>) -> Result<Judged, ToolError> {
        let governor = &self.inner.governor;
        if !governor.governs() {
            return Ok(Judged::Allow);
        }
        let s = line.session;
        let shown = self.redacted(Some(&s.name), line.text);
        let agent = self.actor();
        let program = match line.target {
            Target::Shell => None,
            Target::Program(job) => Some(job.comm.clone()),
        };
        let to = program.as_deref().map_or(To::Shell, To::Program);
        let typed = Typed { agent: &agent, session: &s.name, line: &shown, to };
        let (verdict, grant) = governor.judge(&typed);
        let record = Record {
            agent: agent.clone(),
            session: Some(s.name.clone()),
            tool: line.tool.as_str().into(),
            line: Some(shown.clone()),
            to: Some(program.clone().unwrap_or_else(|| "shell".into())),
            rule: verdict.rule.as_ref().map(|r| r.line),
            policy: if grant.is_some() { Action::Ask } else { verdict.action }.to_string(),
            why: verdict.rule.as_ref().and_then(|r| r.why.clone()),
            ..Record::default()
        };
        Caller::current().count_decision(verdict.action);
        match verdict.action {
            Action::Allow => {
                let via = grant.map(|_| "grant".to_string());
                governor.audit(Record { decision: "allowed".into(), via, ..record });
                Ok(Judged::Allow)
            }
            Action::Deny => {
                governor.audit(Record { decision: "denied".into(), ..record });
                Err(self.policy_refusal(&s.name, &shown, &verdict, None).into())
            }
            Action::Ask => {
                let ask = Ask {
                    id: 0,
                    agent,
                    session: s.name.clone(),
                    tool: line.tool.as_str().into(),
                    line: shown,
                    to: program.unwrap_or_else(|| "shell".into()),
                    rule_line: verdict.rule.as_ref().map(|r| r.line),
                    why: verdict.rule.as_ref().and_then(|r| r.why.clone()),
                    since_ms: dtmcp_core::now_ms(),
                    until_ms: 0,
                    pid: std::process::id(),
                };
                Ok(Judged::Ask(Box::new(Pending { ask, verdict, record })))
            }
        }
    }

    /// Asks a person about `pending` and waits: who allowed it, or the
    /// refusal (audited either way; an allow for longer than once is
    /// remembered).
    pub(crate) async fn consent(
        &self,
        s: &Session,
        pending: Pending,
        progress: &Progress,
    ) -> Result<String, ToolError> {
        let Pending { ask, verdict, record } = pending;
        let governor = &self.inner.governor;
        let (agent, line) = (ask.agent.clone(), ask.line.clone());
        let started = Instant::now();
        let (id, answer) = self.ask_person(s, ask, progress).await?;
        let by_whom = answer.by_whom();
        let decision = match answer.decision {
            Decision::Allow => "allowed",
            Decision::Deny => "denied",
        };
        governor.audit(Record {
            decision: decision.into(),
            ask: Some(id),
            answered_by: Some(answer.by.clone()),
            via: Some(answer.via.as_str().into()),
            waited_ms: Some(started.elapsed().as_millis() as u64),
            why: answer.why.clone().or(record.why.clone()),
            ..record
        });
        match answer.decision {
            Decision::Allow => {
                governor.grant(answer.scope, &agent, &s.name, &line);
                Ok(by_whom)
            }
            Decision::Deny => {
                let mut refusal = self.policy_refusal(&s.name, &line, &verdict, Some(id));
                if let Refusal::Policy { answered, why, .. } = &mut refusal {
                    *answered = Some(by_whom);
                    if answer.why.is_some() {
                        why.clone_from(&answer.why);
                    }
                }
                Err(refusal.into())
            }
        }
    }

    /// The refusal of `line` in `session` that `verdict` denies.
    fn policy_refusal(&self, session: &str, line: &str, verdict: &Verdict, ask: Option<u64>) -> Refusal {
        Refusal::Policy {
            session: session.into(),
            line: line.into(),
            piece: verdict.piece.clone(),
            file: self.inner.governor.file(),
            rule: verdict.rule.as_ref().map(|r| r.line),
            why: verdict.rule.as_ref().and_then(|r| r.why.clone()),
            ask,
            answered: None,
        }
    }

    /// Opens `ask`, asks through every channel, and waits for the first
    /// answer (a refusal when the time runs out or the call is cancelled).
    async fn ask_person(&self, s: &Session, mut ask: Ask, progress: &Progress) -> Result<(u64, Answer), ToolError> {
        let governor = &self.inner.governor;
        let timeout = governor.policy().limits().ask_timeout;
        ask.until_ms = ask.since_ms + timeout.as_millis() as u64;
        let asks = &governor.asks;
        let round = Caller::current().input;
        let stop = CancellationToken::new();
        // Back from the client's user with an answer: the ask the call
        // named, when it is this same line of this same agent.
        let resumed = round.resumed.as_ref().and_then(|(id, response)| {
            let open =
                asks.ask(*id).filter(|a| (&a.agent, &a.session, &a.line) == (&ask.agent, &ask.session, &ask.line));
            open.map(|open| (open, response.clone()))
        });
        let clients = match resumed {
            Some((open, response)) => {
                ask = open;
                if let Some(response) = response {
                    let _ = asks.answer(ask.id, &client_answer(&response, &ask.agent));
                }
                self.attached_clients(s).await
            }
            None => {
                ask.id = asks
                    .open(ask.clone())
                    .map_err(|e| ToolError::Failed(format!("cannot open an ask in {}: {e}", asks.path().display())))?;
                let clients = self.attached_clients(s).await;
                self.popups(&clients, ask.id);
                if round.offered
                    && let Some(params) = elicitation(&ask)
                {
                    // 2026-07-28: the question goes back inside the result;
                    // the client asks its user and calls again with the
                    // answer (the other channels stay open meanwhile).
                    let mut requests = InputRequests::new();
                    requests.insert(CONSENT_INPUT.into(), InputRequest::Elicitation(ElicitRequest::new(params)));
                    round.require(InputRequiredResult::new(Some(requests), Some(format!("{ASK_STATE}{}", ask.id))));
                    return Err(ToolError::Failed(format!("ask {}: the client's user is asked", ask.id)));
                }
                if let Some(peer) = progress.peer().filter(|p| elicits(p)) {
                    tokio::spawn(elicit(peer.clone(), ask.clone(), asks.clone(), stop.clone()));
                }
                clients
            }
        };
        let id = ask.id;
        let left = Duration::from_millis(ask.until_ms.saturating_sub(dtmcp_core::now_ms()));
        let deadline = Instant::now() + left;
        let answer = loop {
            if let Some(answer) = asks.answer_of(id) {
                break answer;
            }
            let now = Instant::now();
            let (why, via, by) = if progress.cancelled() {
                ("the call was cancelled", Via::Client, ask.agent.clone())
            } else if now >= deadline {
                ("nobody answered in time", Via::Timeout, "nobody".to_string())
            } else {
                let left = deadline - now;
                progress
                    .say(format!(
                        "waiting for a person to allow `{}` in {} (ask {id}; {} s left; docent-terminal-mcp allow {id})",
                        ask.line,
                        s.name,
                        left.as_secs()
                    ))
                    .await;
                tokio::time::sleep(LOOK_EVERY.min(left)).await;
                continue;
            };
            let refusal = Answer {
                decision: Decision::Deny,
                scope: Scope::Once,
                by,
                via,
                why: Some(why.into()),
                ms: dtmcp_core::now_ms(),
            };
            // Someone may answer in the same moment: theirs wins.
            let _ = asks.answer(id, &refusal);
            if let Some(answer) = asks.answer_of(id) {
                break answer;
            }
            break refusal;
        };
        stop.cancel();
        asks.close(id);
        self.tell_clients(&clients, id, &ask, &answer);
        Ok((id, answer))
    }

    /// The tmux clients attached to `s`'s session.
    async fn attached_clients(&self, s: &Session) -> Vec<String> {
        let tmux = &self.sessions().tmux;
        let listed = tmux.run(&["list-clients", "-t", &s.pane.tmux_session, "-F", "#{client_name}"]).await;
        listed.map(|l| l.lines().filter(|c| !c.is_empty()).map(str::to_string).collect()).unwrap_or_default()
    }

    /// Shows ask `id` in a popup on each of the tmux `clients`.
    fn popups(&self, clients: &[String], id: u64) {
        let Ok(exe) = std::env::current_exe() else { return };
        let tmux = &self.sessions().tmux;
        let home = self.sessions().cfg.home.display().to_string();
        let command = format!(
            "{}={} {} answer {id}",
            crate::config::ENV_HOME,
            shell_quote(&home),
            shell_quote(&exe.display().to_string())
        );
        let title = format!(" docent-terminal-mcp: ask {id} ");
        let within = self.inner.governor.policy().limits().ask_timeout + Duration::from_secs(5);
        for client in clients {
            let args = ["display-popup", "-c", client, "-E", "-w", "76", "-h", "14", "-T", &title, &command];
            if let Err(e) = tmux.start_detached(&args, within) {
                eprintln!("docent-terminal-mcp: cannot show ask {id} on tmux client {client}: {e}");
            }
        }
    }

    /// Closes the popups of ask `id` still open and says who answered.
    fn tell_clients(&self, clients: &[String], id: u64, ask: &Ask, answer: &Answer) {
        let tmux = &self.sessions().tmux;
        let said = format!("docent-terminal-mcp: ask {id} (`{}`) {}", ask.line, answer.by_whom());
        for client in clients {
            let _ = tmux.start_detached(&["display-popup", "-C", "-c", client], Duration::from_secs(5));
            let _ =
                tmux.start_detached(&["display-message", "-c", client, "-d", TOLD_MS, &said], Duration::from_secs(5));
        }
    }
}

/// Whether the client declared form elicitation (rmcp itself refuses the
/// request to a 2026-07-28 client, which is asked inside its result).
fn elicits(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes().contains(&rmcp::service::ElicitationMode::Form)
}

/// Asks the client's user through elicitation, and writes the answer as
/// every other channel does; cancelled (the client told) when `stop` ends
/// the ask first.
async fn elicit(peer: Peer<RoleServer>, ask: Ask, asks: crate::policy::asks::AskDir, stop: CancellationToken) {
    let Some(params) = elicitation(&ask) else { return };
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let Ok(mut handle) = peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await else {
        return;
    };
    let response = tokio::select! {
        r = &mut handle.rx => r,
        () = stop.cancelled() => {
            let _ = handle.cancel(Some("answered elsewhere".into())).await;
            return;
        }
    };
    let Ok(Ok(rmcp::model::ClientResult::ElicitResult(result))) = response else { return };
    let Ok(result) = serde_json::to_value(&result) else { return };
    let by = peer.peer_info().map_or_else(|| ask.agent.clone(), |i| i.client_info.name.clone());
    let _ = asks.answer(ask.id, &client_answer(&result, &by));
}

/// The answer an elicitation's result (`ElicitResult` as JSON) gives, from
/// the user of client `client`: accepted with a choice, or a denial
/// (declined, dismissed, or "deny").
fn client_answer(result: &serde_json::Value, client: &str) -> Answer {
    let accepted = result.get("action").and_then(|a| a.as_str()) == Some("accept");
    let chosen = result.pointer("/content/decision").and_then(|d| d.as_str()).filter(|_| accepted);
    let (decision, scope) = match chosen {
        Some("allow") => (Decision::Allow, Scope::Once),
        Some("allow-session") => (Decision::Allow, Scope::Session),
        Some("allow-agent") => (Decision::Allow, Scope::Agent),
        _ => (Decision::Deny, Scope::Once),
    };
    let by = format!("{client}'s user");
    Answer { decision, scope, by, via: Via::Client, why: None, ms: dtmcp_core::now_ms() }
}

/// The elicitation that asks about `ask`.
fn elicitation(ask: &Ask) -> Option<ElicitRequestParams> {
    let values = CHOICES.iter().map(|(v, _)| v.to_string()).collect();
    let titles = CHOICES.iter().map(|(_, t)| t.to_string()).collect();
    let choice = EnumSchema::builder(values).enum_titles(titles).ok()?.title("Decision").build();
    let schema = ElicitationSchema::builder().required_enum_schema("decision", choice).build().ok()?;
    let why = ask.why.as_ref().map(|w| format!(" ({w})")).unwrap_or_default();
    let message = format!(
        "{} wants to type into terminal session {}: `{}`. The policy asks a person first{why}. Allow it? (ask {})",
        ask.agent, ask.session, ask.line, ask.id
    );
    Some(ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema })
}

/// `text` quoted for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

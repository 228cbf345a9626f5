//! Why a tool call failed: a [`ToolError`], whose message the model reads
//! and which already says what to do next. A refusal (the session is not
//! in a state to take the call) is a [`Refusal`], data naming whom it is
//! about, rendered to text here and nowhere else.

use crate::session::{ClientError, SessionError};
use crate::tmux::TmuxError;
use dtmcp_core::search::SearchError;
use dtmcp_core::store::StoreError;

/// Whom a refusal is about.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum Party {
    /// The agent making the call.
    You,
    /// Another agent, by name.
    Agent(String),
    /// A person at a terminal attached to the session.
    Person,
    /// Nobody this server can name: no agent's typing explains it and no
    /// person is attached now.
    Someone,
}

impl Party {
    /// `actor`, from the point of view of agent `me`.
    pub fn agent(actor: &str, me: &str) -> Party {
        if actor == me { Party::You } else { Party::Agent(actor.to_string()) }
    }
}

/// Why a session does not take a call now. Each names, as data, who or
/// what stands in the way; [`std::fmt::Display`] renders the one message
/// the model reads, which says what to do next. Nothing was typed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    /// Another call holds the session while it types its line.
    Held {
        /// The session.
        session: String,
        /// Who holds it (`You`: another call of the same agent).
        by: Party,
        /// The tool it types with.
        tool: String,
        /// For how long it has held it, in ms.
        for_ms: u64,
    },
    /// A line was submitted at the prompt a moment ago and its command has
    /// not started yet.
    JustSubmitted {
        /// The session.
        session: String,
        /// Who submitted it.
        by: Party,
        /// The line.
        text: String,
    },
    /// A line submitted at the prompt is held by the shell, which asks
    /// something about it before it runs it (zsh's `correct`).
    ShellAsks {
        /// The session.
        session: String,
        /// Who submitted the line.
        by: Party,
        /// The line.
        text: String,
        /// The question, as the shell shows it.
        question: String,
    },
    /// Text typed at the prompt and not submitted.
    Unsubmitted {
        /// The session.
        session: String,
        /// Who typed it (`You`: an earlier `send` of the caller's).
        by: Party,
        /// The text.
        text: String,
    },
    /// Someone typed into the line while it was being typed slowly;
    /// Enter was not pressed.
    TypedOver {
        /// The session.
        session: String,
        /// What the prompt reads now.
        reads: String,
    },
    /// A command runs in the foreground and does not read input now.
    Busy {
        /// The session.
        session: String,
        /// The command line, when the region tracker knows it.
        command: Option<String>,
        /// What `/proc` says of the foreground job.
        job: String,
        /// Who started it, when known.
        started_by: Option<Party>,
    },
    /// The foreground program reads keys, not lines (a pager, an editor,
    /// a monitor): a command line typed into it would be taken key by key.
    KeysOnly {
        /// The session.
        session: String,
        /// The program reading the terminal (`less`).
        program: String,
        /// The command line it runs under, when the region tracker knows it.
        command: Option<String>,
        /// That command's region.
        region: Option<u64>,
        /// Whether the program is a pager showing the command's output.
        pager: bool,
    },
    /// The session's pane has ended.
    Ended {
        /// The session.
        session: String,
    },
    /// Someone else uses the session (or a session in its window): it is
    /// not closed.
    InUse {
        /// The session in use.
        session: String,
        /// People attached to it.
        attached: u32,
        /// The command running in it and who started it.
        running: Option<(String, Party)>,
        /// Text another agent typed at its prompt and left unsubmitted.
        left: Option<(Party, String)>,
        /// The session whose window was to close with it, when it was not
        /// the session asked about.
        window_of: Option<(String, Vec<String>)>,
    },
    /// The program in the foreground was started by another agent: its
    /// keys and signals are theirs to send.
    NotYours {
        /// The session.
        session: String,
        /// The command line.
        command: String,
        /// Who started it.
        by: Party,
    },
    /// Only the pane's own process is in the foreground: a signal would
    /// go to the shell itself.
    ShellInForeground {
        /// The session.
        session: String,
        /// The process's name.
        comm: String,
    },
    /// The shell integration cannot be added to what holds the prompt,
    /// for the reason given (an unknown or unsupported shell, no files on
    /// the far host).
    Integration {
        /// The session.
        session: String,
        /// Why, and what to do instead.
        why: String,
    },
    /// The foreground program could not be looked at, or is not ready.
    NotReady {
        /// The session.
        session: String,
        /// What was seen.
        why: String,
    },
    /// A placeholder in the call's text names no secret of the session.
    UnknownPlaceholder {
        /// What the redaction table says.
        why: String,
    },
    /// The policy does not let the line be typed: a rule or the default
    /// denies it, or a person asked denied it or did not answer in time.
    Policy {
        /// The session.
        session: String,
        /// The line, with secrets as their placeholders.
        line: String,
        /// The simple command in it that decided, when not the whole line.
        piece: Option<String>,
        /// The policy file.
        file: String,
        /// The deciding rule's line in the file (none: the default).
        rule: Option<usize>,
        /// The rule's reason, or the person's.
        why: Option<String>,
        /// The ask's number, when a person was asked.
        ask: Option<u64>,
        /// Who answered, and how ("denied by alice (web)").
        answered: Option<String>,
    },
    /// The agent's role under the policy does not let it call the tool.
    ReadOnly {
        /// The agent.
        agent: String,
        /// The tool it called.
        tool: String,
    },
    /// A limit of the policy is reached.
    Limit {
        /// The agent.
        agent: String,
        /// The limit's name in the policy file (`sessions_per_agent`).
        limit: String,
        /// Its value.
        value: usize,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Held { session, by, tool, for_ms } => {
                let who = match by {
                    Party::You => "another call of yours".to_string(),
                    other => named(other),
                };
                let held = *for_ms as f64 / 1000.0;
                write!(
                    f,
                    "session {session} is held by {who}, typing into it with {tool} (for {held:.1} s); nothing was typed. \
                     Its line goes in first: try again in a moment (a run of yours would otherwise mix characters with it)"
                )
            }
            Refusal::JustSubmitted { session, by, text } => {
                let who = match by {
                    Party::You => "you".to_string(),
                    other => named(other),
                };
                write!(
                    f,
                    "{who} just submitted `{text}` at {session}'s prompt and it has not started yet; nothing was typed. \
                     Wait for it (wait session={session}) or try again in a moment"
                )
            }
            Refusal::ShellAsks { session, by, text, question } => {
                let whose = match by {
                    Party::You => "your".to_string(),
                    other => format!("{}'s", named(other)),
                };
                write!(
                    f,
                    "the shell of {session} has not run {whose} line `{text}`: it asks `{question}`{}, and a command \
                     line typed now would be taken as the answer, so nothing was typed. Answer it with send \
                     session={session} text=\"…\" (zsh reads one key: no Enter), then run again",
                    crate::tools::replies::report::answers_taken(question)
                )
            }
            Refusal::Unsubmitted { session, by, text } => {
                let (who, ask) = match by {
                    Party::You => (
                        "you (an earlier send)".to_string(),
                        "Submit it with send keys=[\"enter\"], or clear it with send keys=[\"ctrl+e\", \"ctrl+u\"], then run again"
                            .to_string(),
                    ),
                    Party::Agent(a) => (
                        format!("agent {a}"),
                        format!(
                            "It is {a}'s to finish or clear; try again once the prompt is empty (only if the user tells you to, \
                             clear it with send keys=[\"ctrl+e\", \"ctrl+u\"] take_over=true)"
                        ),
                    ),
                    Party::Person => (
                        "a person".to_string(),
                        "Ask the person to finish (Enter) or clear (ctrl+u) it, or whether you may clear it (then send \
                         keys=[\"ctrl+e\", \"ctrl+u\"] take_over=true)"
                            .to_string(),
                    ),
                    Party::Someone => (
                        "someone (no person is attached now)".to_string(),
                        format!(
                            "Ask the user about it; to discard it, send keys=[\"ctrl+e\", \"ctrl+u\"] to {session} and run again"
                        ),
                    ),
                };
                write!(
                    f,
                    "{session} has text typed at its prompt and not submitted, by {who}: `{text}`. Nothing was typed over it \
                     or submitted. {ask}."
                )
            }
            Refusal::TypedOver { session, reads } => write!(
                f,
                "someone else typed at the prompt while this line was being typed: it now reads `{reads}`. \
                 Enter was not pressed, so nothing ran; ask the person (or clear the line with send keys=[\"ctrl+e\", \"ctrl+u\"]) and try again (in {session})"
            ),
            Refusal::Busy { session, command, job, started_by } => {
                let what = command.as_ref().map(|c| format!(" (`{c}`)")).unwrap_or_default();
                write!(
                    f,
                    "a command is still running in {session}{what} and does not read input now: {job}. Wait for it with wait session={session}, or interrupt it with send keys=[\"ctrl+c\"]"
                )?;
                match started_by {
                    Some(Party::Agent(a)) => write!(f, " (it was started by agent {a})"),
                    Some(Party::You) => write!(f, " (it was started by you)"),
                    Some(Party::Person) => write!(f, " (it was typed by a person)"),
                    Some(Party::Someone) | None => Ok(()),
                }?;
                // A server, a watcher or a long build is often meant to go
                // on while other commands run.
                write!(f, ". To run other commands while it goes on, create another session (session_create)")
            }
            Refusal::KeysOnly { session, program, command, region, pager } => {
                let under = command.as_ref().map(|c| format!(" (under `{c}`)")).unwrap_or_default();
                if *pager {
                    let read = match region {
                        Some(r) => format!("read session={session} region={r}"),
                        None => format!("read session={session}"),
                    };
                    write!(
                        f,
                        "`{program}`{under} is a pager in {session}: it takes keys, not command lines, so nothing was typed. \
                         send session={session} keys=[\"q\"] quits it, keys=[\"space\"] shows the next page \
                         (only the pages it shows reach the log: {read}). For the whole output without a pager: \
                         `git --no-pager …`, `systemctl --no-pager …`, or export PAGER=cat GIT_PAGER=cat in the session"
                    )
                } else {
                    write!(
                        f,
                        "`{program}`{under} draws on the whole screen of {session} and takes keys, not command lines, \
                         so nothing was typed. Use send with text and keys (screen=\"full\" shows the screen after them), \
                         or quit it with its own key first (q, :q, ctrl+c)"
                    )
                }
            }
            Refusal::Ended { session } => write!(f, "the session {session} has ended; session_create makes a new one"),
            Refusal::InUse { session, attached, running, left, window_of } => {
                if let Some((asked, window)) = window_of {
                    write!(f, "the window of {asked} holds {}; ", window.join(", "))?;
                }
                let why = if *attached > 0 {
                    format!("a person is attached to it ({attached} client{})", if *attached == 1 { "" } else { "s" })
                } else {
                    match (running, left) {
                        (Some((cmd, Party::Person | Party::Someone)), _) => {
                            format!("`{cmd}` runs in it, typed by a person")
                        }
                        (Some((cmd, Party::Agent(who))), _) => format!("`{cmd}` runs in it, started by {who}"),
                        (Some((cmd, Party::You)), _) => format!("`{cmd}` runs in it, started by you"),
                        (None, Some((by, text))) => {
                            format!("{} typed `{text}` at its prompt and has not submitted it", named(by))
                        }
                        (None, None) => "someone else uses it".to_string(),
                    }
                };
                write!(
                    f,
                    "session {session} is in use: {why}. It stays open; a person closes it with \
                     `docent-terminal-mcp close --force {session}` (or POST /api/sessions/{session}/close {{\"force\": true}})"
                )
            }
            Refusal::NotYours { session, command, by } => write!(
                f,
                "`{command}` in {session} was started by {}, not by you: its keys and signals are theirs to send, so nothing was sent. \
                 Wait for it (wait session={session}) or ask them; only if the user tells you to, send again with take_over=true",
                named(by)
            ),
            Refusal::ShellInForeground { comm, .. } => write!(
                f,
                "only the pane's own process (`{comm}`, usually its shell) is in the foreground; signals go only to jobs started from it, so nothing was sent (session_close ends the pane)"
            ),
            Refusal::Integration { why, .. } | Refusal::NotReady { why, .. } | Refusal::UnknownPlaceholder { why } => {
                f.write_str(why)
            }
            Refusal::Policy { session, line, piece, file, rule, why, ask, answered } => {
                write!(f, "`{line}` was not typed into {session}: ")?;
                match (ask, answered) {
                    (Some(id), Some(answer)) => write!(f, "a person was asked (ask {id}) and it was {answer}")?,
                    (Some(id), None) => write!(f, "a person was asked (ask {id}) and did not answer")?,
                    (None, _) => {
                        let part = piece.as_ref().map(|p| format!(" (its part `{p}`)")).unwrap_or_default();
                        match rule {
                            Some(n) => write!(f, "the rule at {file}:{n} denies it{part}")?,
                            None => write!(
                                f,
                                "the policy ({file}) allows only what its rules name, and none names it{part}"
                            )?,
                        }
                    }
                }
                if let Some(why) = why {
                    write!(f, ": {why}")?;
                }
                write!(
                    f,
                    ". Nothing was typed. Do not try the same in other words (the policy is the user's); do \
                     something else, or ask the user to allow it"
                )
            }
            Refusal::ReadOnly { agent, tool } => write!(
                f,
                "{agent} is read-only under the user's policy: it may call read, search, regions, session_list, wait \
                 and guide, not {tool}. Nothing was done; ask the user if this needs doing"
            ),
            Refusal::Limit { agent, limit, value } => write!(
                f,
                "{agent} has reached the policy's {limit} = {value}; nothing was done. {}",
                match limit.as_str() {
                    "sessions_per_agent" => "Close a session you no longer need (session_close) and try again",
                    _ => "Wait for your other calls to end and try again",
                }
            ),
        }
    }
}

/// An agent or person named in a sentence.
fn named(party: &Party) -> String {
    match party {
        Party::You => "you".to_string(),
        Party::Agent(a) => format!("agent {a}"),
        Party::Person => "a person".to_string(),
        Party::Someone => "someone".to_string(),
    }
}

/// Why a tool body failed. Each variant renders the message the model
/// reads, which already says what to do next.
///
/// The wrapped errors are not offered as `source`s: their messages carry
/// their causes already, and a chain printed from them would say each
/// cause twice.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The call's arguments cannot be acted on; nothing was done.
    #[error("{0}")]
    BadInput(String),
    /// The session is not in a state to take this call now (held by another
    /// call, text at its prompt, in use, busy); nothing was typed. `said`
    /// is what the call already told before it was refused (a terminal
    /// answer it cleared from the prompt), shown first.
    #[error("{said}{refusal}")]
    Refused {
        /// Why, as data.
        refusal: Box<Refusal>,
        /// What the call told before the refusal.
        said: String,
    },
    /// Finding, making or changing a session failed.
    #[error("{0}")]
    Session(SessionError),
    /// The session's logger failed.
    #[error("{0}")]
    Logger(ClientError),
    /// tmux failed.
    #[error("{0}")]
    Tmux(TmuxError),
    /// A session's files could not be read.
    #[error("{0}")]
    Store(StoreError),
    /// Another failure, said in words: `/proc` that cannot be read, a file
    /// that cannot be written, a typed command whose outcome cannot be
    /// followed.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// What kind of failure it is, as a structured result names it.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::BadInput(_) => "bad_input",
            ToolError::Refused { .. } => "refused",
            ToolError::Session(_) => "session",
            ToolError::Logger(_) => "logger",
            ToolError::Tmux(_) => "tmux",
            ToolError::Store(_) => "store",
            ToolError::Failed(_) => "failed",
        }
    }

    /// The same failure told in other words: `f` gets the message. Bad
    /// input stays bad input; a refusal is left as it is (its words are
    /// its data's); anything else becomes [`ToolError::Failed`], its
    /// message now being the new one.
    pub fn reworded(self, f: impl FnOnce(String) -> String) -> ToolError {
        match self {
            ToolError::BadInput(m) => ToolError::BadInput(f(m)),
            refused @ ToolError::Refused { .. } => refused,
            other => ToolError::Failed(f(other.to_string())),
        }
    }
}

impl From<Refusal> for ToolError {
    fn from(refusal: Refusal) -> ToolError {
        ToolError::from(Box::new(refusal))
    }
}

impl From<Box<Refusal>> for ToolError {
    fn from(refusal: Box<Refusal>) -> ToolError {
        ToolError::Refused { refusal, said: String::new() }
    }
}

impl From<SessionError> for ToolError {
    fn from(e: SessionError) -> ToolError {
        ToolError::Session(e)
    }
}

impl From<ClientError> for ToolError {
    fn from(e: ClientError) -> ToolError {
        ToolError::Logger(e)
    }
}

impl From<TmuxError> for ToolError {
    fn from(e: TmuxError) -> ToolError {
        ToolError::Tmux(e)
    }
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> ToolError {
        ToolError::Store(e)
    }
}

impl From<SearchError> for ToolError {
    fn from(e: SearchError) -> ToolError {
        match e {
            SearchError::Pattern(_) => ToolError::BadInput(e.to_string()),
            SearchError::Store(e) => ToolError::Store(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_their_messages() {
        assert_eq!(ToolError::BadInput("give a command".into()).to_string(), "give a command");
        let missing = SessionError::NotFound { name: "t9".into(), known: vec![], closed: false };
        let text = missing.to_string();
        let e = ToolError::from(missing);
        assert_eq!(e.to_string(), text);
        assert!(std::error::Error::source(&e).is_none());
    }
}

//! The asks waiting for a person, kept as files under `STATE_HOME/asks/`
//! so that every way a person answers meets in one place: the command line
//! (`pending`, `allow`, `deny`) of any process, a popup in tmux that runs
//! that command line, the web view and the client's own prompt in the
//! server. A stdio server has no socket to answer on; the state home is
//! what every server and command of one user share.
//!
//! # Files
//! - `N.ask.json`: an open ask, written whole (a temporary file linked into
//!   place) by the server that asks; removed when it is answered.
//! - `N.answer.json`: its answer. Every channel answers by linking a
//!   complete file to this name, and a link never replaces a file, so the
//!   first answer wins and every later one learns who answered first. The
//!   server that asked writes a refusal the same way when nobody answers
//!   in time. Answers are kept a day, for `allow N` typed late.
//!
//! The directory is 0700 and the files 0600: whoever may write there may
//! run commands as this user already. A line is stored as the judge saw
//! it, with secrets as their placeholders, never their values.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How long past its time an ask is still listed: its server writes the
/// refusal then, and a moment later at worst.
const GRACE_MS: u64 = 2_000;
/// How long answers are kept, in ms.
const KEEP_ANSWERS_MS: u64 = 24 * 60 * 60 * 1000;

/// An ask waiting for a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ask {
    /// Its number, unique in the state home.
    pub id: u64,
    /// The agent that would type.
    pub agent: String,
    /// The session it would type into.
    pub session: String,
    /// The tool it calls.
    pub tool: String,
    /// The line, with secrets as their placeholders.
    pub line: String,
    /// Where the line goes: `shell`, or the program's name.
    pub to: String,
    /// The rule that asks: its line in the policy file.
    #[serde(default)]
    pub rule_line: Option<usize>,
    /// The rule's reason.
    #[serde(default)]
    pub why: Option<String>,
    /// When it was asked, in ms since the epoch.
    pub since_ms: u64,
    /// When it ends unanswered as a refusal, in ms since the epoch.
    pub until_ms: u64,
    /// The server process that asks: an ask whose server is gone is stale.
    pub pid: u32,
}

/// What a person decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The line may be typed.
    Allow,
    /// It may not.
    Deny,
}

/// For how much an allow holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// This line, this once.
    #[default]
    Once,
    /// This line, in this session, whoever types it, until the server stops.
    Session,
    /// Whatever this agent's lines would ask, until the server stops
    /// (a denying rule still denies).
    Agent,
}

impl Scope {
    /// How an answer with this scope reads.
    pub fn says(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Session => "for this line in this session",
            Scope::Agent => "for this agent until the server stops",
        }
    }
}

/// Through which channel an answer came.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `docent-terminal-mcp allow|deny` at a shell.
    Cli,
    /// The popup in an attached tmux client.
    Tmux,
    /// The web view's buttons.
    Web,
    /// The MCP client's own prompt to its user (elicitation).
    Client,
    /// Nobody: the time to answer ran out.
    Timeout,
}

impl Via {
    /// Its name, as the audit and replies write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Cli => "cli",
            Via::Tmux => "tmux",
            Via::Web => "web",
            Via::Client => "client",
            Via::Timeout => "timeout",
        }
    }
}

/// The answer to an ask.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// Allowed or denied.
    pub decision: Decision,
    /// For how much an allow holds.
    #[serde(default)]
    pub scope: Scope,
    /// Who answered: a user's name, or the client's.
    pub by: String,
    /// Through which channel.
    pub via: Via,
    /// The person's reason, for a denial.
    #[serde(default)]
    pub why: Option<String>,
    /// When, in ms since the epoch.
    pub ms: u64,
}

impl Answer {
    /// "allowed by alice (web)", as regions and replies say it.
    pub fn by_whom(&self) -> String {
        let done = match self.decision {
            Decision::Allow => "allowed",
            Decision::Deny => "denied",
        };
        match self.via {
            Via::Timeout => format!("{done}: nobody answered in time"),
            via => format!("{done} by {} ({})", self.by, via.as_str()),
        }
    }
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No ask of that number exists (or it is long gone).
    #[error("there is no ask {0}; `docent-terminal-mcp pending` lists the open ones")]
    Unknown(u64),
    /// Someone answered first.
    #[error("ask {id} was answered already: {}", .answer.by_whom())]
    Answered {
        /// The ask.
        id: u64,
        /// The answer that won.
        answer: Answer,
    },
    /// The asks directory could not be written.
    #[error("cannot write the answer into {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// The asks of one state home.
#[derive(Clone, Debug)]
pub struct AskDir {
    dir: PathBuf,
}

impl AskDir {
    /// The asks under state home `home`.
    pub fn new(home: &Path) -> AskDir {
        AskDir { dir: home.join("asks") }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn ask_file(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.ask.json"))
    }

    fn answer_file(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.answer.json"))
    }

    /// Opens `ask` under the next free number, which it returns (the
    /// number in `ask` is replaced).
    pub fn open(&self, mut ask: Ask) -> std::io::Result<u64> {
        dtmcp_core::store::private_dir_all(&self.dir)?;
        // Never a number used before (a late `allow 7` must not answer a
        // new ask 7): past every file, and past the last number handed out.
        let next = std::fs::read_to_string(self.dir.join("next")).ok().and_then(|n| n.trim().parse::<u64>().ok());
        let mut id = (self.highest() + 1).max(next.unwrap_or(1));
        loop {
            ask.id = id;
            let body = serde_json::to_vec(&ask).map_err(std::io::Error::other)?;
            match link_new(&self.dir, &self.ask_file(id), &body) {
                Ok(()) if !self.answer_file(id).exists() => {
                    let _ =
                        dtmcp_core::store::write_replace(&self.dir.join("next"), format!("{}\n", id + 1).as_bytes());
                    return Ok(id);
                }
                // An old answer of that number: take the next.
                Ok(()) => {
                    let _ = std::fs::remove_file(self.ask_file(id));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            id += 1;
        }
    }

    /// The highest number in use.
    fn highest(&self) -> u64 {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return 0 };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.split('.').next()?.parse::<u64>().ok()))
            .max()
            .unwrap_or(0)
    }

    /// Answers ask `id`, unless someone answered first.
    pub fn answer(&self, id: u64, answer: &Answer) -> Result<(), AnswerError> {
        if let Some(first) = self.answer_of(id) {
            return Err(AnswerError::Answered { id, answer: first });
        }
        if !self.ask_file(id).exists() {
            return Err(AnswerError::Unknown(id));
        }
        let body = serde_json::to_vec(answer).map_err(|e| AnswerError::Io(self.dir.clone(), e.into()))?;
        match link_new(&self.dir, &self.answer_file(id), &body) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match self.answer_of(id) {
                Some(first) => Err(AnswerError::Answered { id, answer: first }),
                None => Err(AnswerError::Io(self.dir.clone(), e)),
            },
            Err(e) => Err(AnswerError::Io(self.dir.clone(), e)),
        }
    }

    /// The answer to ask `id`, once there is one.
    pub fn answer_of(&self, id: u64) -> Option<Answer> {
        let body = std::fs::read(self.answer_file(id)).ok()?;
        serde_json::from_slice(&body).ok()
    }

    /// Ask `id`, while it is open.
    pub fn ask(&self, id: u64) -> Option<Ask> {
        let body = std::fs::read(self.ask_file(id)).ok()?;
        serde_json::from_slice(&body).ok()
    }

    /// Closes ask `id` (it was answered, or its call ended).
    pub fn close(&self, id: u64) {
        let _ = std::fs::remove_file(self.ask_file(id));
    }

    /// The open asks, oldest first: answered ones, those past their time
    /// (a 2026-07-28 client that never came back leaves one) and those
    /// whose server is gone are left out (the last two removed).
    pub fn pending(&self) -> Vec<Ask> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let now = dtmcp_core::now_ms();
        let mut asks: Vec<Ask> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".ask.json")?.parse::<u64>().ok())
            .filter_map(|id| self.ask(id))
            .filter(|ask| {
                if self.answer_file(ask.id).exists() {
                    return false;
                }
                let live = alive(ask.pid) && now <= ask.until_ms + GRACE_MS;
                if !live {
                    self.close(ask.id);
                }
                live
            })
            .collect();
        asks.sort_by_key(|a| a.id);
        asks
    }

    /// Removes answers older than a day.
    pub fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let now = dtmcp_core::now_ms();
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".answer.json")?.parse::<u64>().ok()) else {
                continue;
            };
            if self.answer_of(id).is_some_and(|a| now.saturating_sub(a.ms) > KEEP_ANSWERS_MS) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Writes `body` to a temporary file in `dir` and links it to `path`: the
/// file appears whole or not at all, and never replaces one already there.
fn link_new(dir: &Path, path: &Path, body: &[u8]) -> std::io::Result<()> {
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".ask.{}.{serial}.tmp", std::process::id()));
    let linked = (|| {
        let mut f = std::fs::OpenOptions::new().create_new(true).write(true).mode(0o600).open(&tmp)?;
        f.write_all(body)?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    linked
}

/// Whether process `pid` lives.
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    // Signal 0 checks that the process exists; EPERM means it does.
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(agent: &str) -> Ask {
        Ask {
            id: 0,
            agent: agent.into(),
            session: "s".into(),
            tool: "run".into(),
            line: "rm -rf build".into(),
            to: "shell".into(),
            rule_line: Some(4),
            why: Some("deletes need a person".into()),
            since_ms: dtmcp_core::now_ms(),
            until_ms: dtmcp_core::now_ms() + 60_000,
            pid: std::process::id(),
        }
    }

    fn answer(decision: Decision, by: &str, via: Via) -> Answer {
        Answer { decision, scope: Scope::Once, by: by.into(), via, why: None, ms: dtmcp_core::now_ms() }
    }

    #[test]
    fn asks_get_their_own_numbers_and_the_first_answer_wins() {
        let home = tempfile::tempdir().expect("tempdir");
        let asks = AskDir::new(home.path());
        let a = asks.open(ask("alice")).expect("open");
        let b = asks.open(ask("bob")).expect("open");
        assert_eq!((a, b), (1, 2));
        assert_eq!(asks.pending().iter().map(|x| x.agent.as_str()).collect::<Vec<_>>(), ["alice", "bob"]);
        asks.answer(a, &answer(Decision::Allow, "carol", Via::Web)).expect("first answer");
        let late = asks.answer(a, &answer(Decision::Deny, "dave", Via::Cli));
        match late {
            Err(AnswerError::Answered { answer, .. }) => assert_eq!(answer.by_whom(), "allowed by carol (web)"),
            other => panic!("a second answer was taken: {other:?}"),
        }
        assert_eq!(asks.pending().len(), 1, "an answered ask is no longer pending");
        assert!(matches!(asks.answer(99, &answer(Decision::Deny, "d", Via::Cli)), Err(AnswerError::Unknown(99))));
        // Numbers are never used again, answered or not.
        asks.close(a);
        asks.close(b);
        assert_eq!(asks.open(ask("erin")).expect("open"), 3);
        let _ = std::fs::remove_file(asks.answer_file(a));
        assert_eq!(asks.open(ask("fred")).expect("open"), 4);
    }

    #[test]
    fn an_ask_whose_server_is_gone_is_not_pending() {
        let home = tempfile::tempdir().expect("tempdir");
        let asks = AskDir::new(home.path());
        let mut gone = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = gone.id();
        gone.wait().expect("wait");
        asks.open(Ask { pid, ..ask("ghost") }).expect("open");
        assert!(asks.pending().is_empty());
    }

    #[test]
    fn files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().expect("tempdir");
        let asks = AskDir::new(home.path());
        let id = asks.open(ask("alice")).expect("open");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(asks.path()), 0o700);
        assert_eq!(mode(&asks.ask_file(id)), 0o600);
    }
}

//! Per-agent state of one session: what each agent has been told and seen,
//! kept with the session so that it survives a router restart.
//!
//! The router decides what goes in an [`AgentState`]; the session's logger
//! holds the states in memory, answers them over its socket
//! ([`crate::protocol::Request::Agent`], [`crate::protocol::Request::SetAgent`])
//! and keeps them in `state.json` in the session directory, so a logger
//! started again on the session (after a crash) has them too. The file is
//! written whole to a temporary name, synced and renamed: a reader, or a
//! logger starting after a crash, sees the previous file or the new one,
//! never a part. A file that does not parse reads as empty (it costs at
//! worst a repeated note).
//!
//! Trust: the file and the socket are the user's own (0600 in a 0700
//! directory); what they hold steers notes and diffs, never what is typed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// The file name inside the session directory.
pub const FILE: &str = "state.json";
/// The most agents one session remembers; the one heard from least
/// recently is forgotten first.
pub const MAX_AGENTS: usize = 64;
/// The longest actor name kept (longer ones are refused by the logger).
pub const MAX_ACTOR: usize = 128;
/// The most note keys kept per agent (there are a few dozen kinds).
pub const MAX_NOTES: usize = 512;
/// The most screen rows remembered per agent.
pub const MAX_ROWS: usize = 1000;
/// The most bytes of text left at a prompt that are kept.
pub const MAX_LEFT: usize = 4096;

/// What one agent has been told and has seen in one session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentState {
    /// Bumped by the router at every change it sends; the logger keeps
    /// the highest, so sends that overtake each other do no harm.
    pub version: u64,
    /// The keys of the notes given (the router's docent notes).
    pub notes: BTreeSet<String>,
    /// Where the agent was last told the session is (a `moved:` note key);
    /// `None`: never told, which means at home.
    pub place: Option<String>,
    /// When the agent last got a reply in this session, seconds since the
    /// epoch (0: never): a person's keys after it are news to the agent.
    pub last_reply_s: u64,
    /// The regions that were running at the agent's last reply in which the
    /// router looked: those that end later are "finished since your last
    /// call".
    pub running: Vec<u64>,
    /// The regions of `running` whose end the agent has been sent as a log
    /// message (the router's watches): a server started again
    /// watches the rest, and tells each end once.
    pub announced: BTreeSet<u64>,
    /// The screen as the agent last saw it, for `screen="changes"`.
    pub screen: Option<SeenScreen>,
    /// Text the agent typed at a shell prompt and did not submit (a `send`
    /// without Enter): kept here so that a server started again still
    /// says whose it is, refuses to type over it, and shows it in presence.
    pub left: Option<LeftText>,
}

/// Text an agent left unsubmitted at a shell prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftText {
    /// What it typed (the last piece, at most [`MAX_LEFT`] bytes).
    pub text: String,
    /// The number of prompts the session had shown then: the text counts
    /// only at that same prompt.
    pub prompts: u64,
    /// The regions the session had opened then.
    #[serde(default)]
    pub regions: u64,
    /// The pid of the shell it was typed at (0 when unknown): the text
    /// counts only at that same shell.
    #[serde(default)]
    pub shell_pid: u32,
}

/// A screen as an agent saw it: its size and a hash of each row, enough to
/// tell which rows changed since (the rows themselves are shown fresh).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenScreen {
    /// Width in cells.
    pub cols: u32,
    /// The hash of each row's text ([`row_hash`]), top to bottom.
    pub rows: Vec<u64>,
}

impl SeenScreen {
    /// The screen of `rows` (each row's text), `cols` wide.
    pub fn of(cols: u32, rows: &[String]) -> SeenScreen {
        SeenScreen { cols, rows: rows.iter().take(MAX_ROWS).map(|r| row_hash(r)).collect() }
    }
}

/// A hash of a row's text that stays the same across builds and versions
/// (64-bit FNV-1a), so a screen saved by one binary compares with another's.
pub fn row_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The states of every agent of one session, by actor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Agents {
    /// The format of the file: 1.
    pub format: u32,
    /// Each agent's state.
    pub agents: BTreeMap<String, AgentState>,
}

/// Why a state was not taken.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The actor name is empty, too long or holds control characters.
    #[error("an actor name must be 1 to {MAX_ACTOR} printable characters")]
    BadActor,
}

impl Agents {
    /// `actor`'s state, if the session knows the agent.
    pub fn get(&self, actor: &str) -> Option<&AgentState> {
        self.agents.get(actor)
    }

    /// Takes `state` for `actor` unless what is held is newer; `true` when
    /// it changed what is held. Past [`MAX_AGENTS`], the agent with the
    /// oldest reply is forgotten.
    pub fn set(&mut self, actor: &str, mut state: AgentState) -> Result<bool, Refused> {
        if actor.is_empty() || actor.len() > MAX_ACTOR || actor.chars().any(char::is_control) {
            return Err(Refused::BadActor);
        }
        if self.agents.get(actor).is_some_and(|held| held.version >= state.version) {
            return Ok(false);
        }
        if state.notes.len() > MAX_NOTES {
            state.notes = state.notes.into_iter().take(MAX_NOTES).collect();
        }
        if let Some(screen) = &mut state.screen {
            screen.rows.truncate(MAX_ROWS);
        }
        if let Some(left) = &mut state.left {
            let mut end = left.text.len().min(MAX_LEFT);
            while !left.text.is_char_boundary(end) {
                end -= 1;
            }
            left.text.truncate(end);
        }
        self.agents.insert(actor.to_string(), state);
        while self.agents.len() > MAX_AGENTS {
            let others = self.agents.iter().filter(|(a, _)| a.as_str() != actor);
            let Some(oldest) = others.min_by_key(|(_, s)| s.last_reply_s).map(|(a, _)| a.clone()) else { break };
            self.agents.remove(&oldest);
        }
        Ok(true)
    }
}

/// Reads `state.json` of `dir`; missing or unreadable reads as empty.
pub fn load(dir: &Path) -> Agents {
    let Ok(body) = std::fs::read(dir.join(FILE)) else { return Agents::default() };
    serde_json::from_slice(&body).unwrap_or_default()
}

/// Writes `agents` as `state.json` of `dir`: a temporary file written
/// whole and synced, then renamed over the old one, then the directory
/// synced, so that a crash at any moment leaves one whole file.
pub fn save(dir: &Path, agents: &Agents) -> Result<(), StoreError> {
    let path = dir.join(FILE);
    let body = serde_json::to_vec(&Agents { format: 1, ..agents.clone() })
        .map_err(|source| StoreError::Json { path: path.clone(), source })?;
    crate::store::write_atomic(&path, &body).map_err(|source| StoreError::Io { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(version: u64, note: &str) -> AgentState {
        AgentState { version, notes: [note.to_string()].into(), last_reply_s: version, ..AgentState::default() }
    }

    #[test]
    fn a_newer_state_replaces_an_older_one_and_never_the_reverse() {
        let mut agents = Agents::default();
        assert_eq!(agents.set("alice", state(2, "a")), Ok(true));
        assert_eq!(agents.set("alice", state(1, "old")), Ok(false), "a late send does not undo a newer one");
        assert_eq!(agents.set("alice", state(2, "same")), Ok(false));
        assert_eq!(agents.set("alice", state(3, "b")), Ok(true));
        assert!(agents.get("alice").expect("alice").notes.contains("b"));
        assert_eq!(agents.get("bob"), None);
    }

    #[test]
    fn bad_actor_names_are_refused_whole() {
        let mut agents = Agents::default();
        assert_eq!(agents.set("", state(1, "a")), Err(Refused::BadActor));
        assert_eq!(agents.set("a\u{1b}b", state(1, "a")), Err(Refused::BadActor));
        assert_eq!(agents.set(&"x".repeat(MAX_ACTOR + 1), state(1, "a")), Err(Refused::BadActor));
        assert!(agents.agents.is_empty());
    }

    #[test]
    fn past_the_limit_the_agent_heard_from_least_recently_is_forgotten() {
        let mut agents = Agents::default();
        for i in 0..MAX_AGENTS as u64 {
            agents.set(&format!("a{i}"), AgentState { version: 1, last_reply_s: 100 + i, ..Default::default() }).ok();
        }
        agents.set("new", AgentState { version: 1, last_reply_s: 1, ..Default::default() }).ok();
        assert_eq!(agents.agents.len(), MAX_AGENTS);
        assert!(agents.get("new").is_some(), "the one just sent stays");
        assert!(agents.get("a0").is_none(), "the oldest other one goes");
    }

    #[test]
    fn the_file_reads_back_and_a_torn_or_missing_one_reads_as_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(load(dir.path()), Agents::default());
        let mut agents = Agents::default();
        let mut s = state(4, "pipe-tail-head");
        s.screen = Some(SeenScreen::of(80, &["$ ls".into(), String::new()]));
        s.running = vec![7];
        s.left = Some(LeftText { text: "échø ".repeat(MAX_LEFT), prompts: 3, ..LeftText::default() });
        agents.set("alice", s).expect("set");
        assert!(agents.get("alice").and_then(|a| a.left.as_ref()).is_some_and(|l| l.text.len() <= MAX_LEFT));
        save(dir.path(), &agents).expect("save");
        let back = load(dir.path());
        assert_eq!(back.agents, agents.agents);
        assert_eq!(back.format, 1);
        assert!(!dir.path().join(format!(".{FILE}.tmp")).exists(), "the temporary file was renamed");
        let bytes = std::fs::read(dir.path().join(FILE)).expect("read");
        std::fs::write(dir.path().join(FILE), &bytes[..bytes.len() / 2]).expect("tear");
        assert_eq!(load(dir.path()), Agents::default());
    }

    #[test]
    fn row_hashes_are_fixed_values() {
        // FNV-1a's published test vectors: a stored screen stays comparable.
        assert_eq!(row_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(row_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(row_hash("ab"), row_hash("ba"));
    }
}

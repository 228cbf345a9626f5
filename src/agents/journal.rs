//! The journal of who typed what: one line per typing call in
//! `$DOCENT_TERMINAL_MCP_HOME/agents/SESSION.jsonl`, so replies, the web
//! view, the API and the people's command line can say which agent started
//! a command and when each agent last typed.
//!
//! Before an agent types, the router notes the session's position (regions
//! opened so far) and the agent's name: the region that opens next was
//! started by that agent. A session's own directory is its logger's alone,
//! so the journal lives beside it. Records outlive a crash of the server
//! (the page cache keeps them), not a power cut: they are written without
//! `fsync`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lru::Lru;
use dtmcp_core::store::{Appender, Tail};
use dtmcp_core::types::RegionId;

/// How long request records of earlier versions (`requests/KEY.json`)
/// are kept.
const KEEP_REQUESTS_MS: u64 = 24 * 60 * 60 * 1000;
/// How many sessions' journals are kept open and read at once.
const KEPT_FILES: usize = 128;
/// The tool name under which a session's maker is recorded.
const CREATED: &str = "session_create";
/// The tool name under which a person's consent to a region is recorded.
const CONSENT: &str = "consent";

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
    /// For a consent record: who allowed the line ("allowed by alice (web)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
}

/// The journals of one state home, with the files kept open and what they
/// say kept read, for the server's life (or a command's).
pub struct Journal {
    /// The state home.
    home: PathBuf,
    /// Open journals, for appending.
    appenders: Lru<PathBuf, Appender>,
    /// What each journal says, brought up to date at each look.
    logs: Lru<PathBuf, AgentsLog>,
}

impl Journal {
    /// The journals under state home `home`.
    pub fn new(home: &Path) -> Journal {
        Journal { home: home.to_path_buf(), appenders: Lru::new(KEPT_FILES), logs: Lru::new(KEPT_FILES) }
    }

    /// The journal file of `session`.
    pub fn file(&self, session: &str) -> PathBuf {
        agents_file(&self.home, session)
    }

    /// Appends that `actor` typed with `tool` after `after_regions`
    /// regions. Best effort: a record that cannot be written costs only
    /// the "started by" of that region. One `write` to a handle kept open:
    /// cheap enough to do on an async worker.
    pub fn record_typed(&self, session: &str, actor: Option<&str>, tool: &str, after_regions: u64) {
        let typed = Typed {
            after_regions,
            actor: actor.unwrap_or("agent").to_string(),
            tool: tool.to_string(),
            ms: crate::config::now_ms(),
            allowed: None,
        };
        self.append(session, &typed);
    }

    /// Appends that a person allowed the line that opens the region after
    /// `after_regions` (`allowed`: "allowed by alice (web)"), typed by `actor`.
    pub fn record_consent(&self, session: &str, actor: &str, after_regions: u64, allowed: &str) {
        let typed = Typed {
            after_regions,
            actor: actor.to_string(),
            tool: CONSENT.into(),
            ms: crate::config::now_ms(),
            allowed: Some(allowed.to_string()),
        };
        self.append(session, &typed);
    }

    fn append(&self, session: &str, typed: &Typed) {
        if let Ok(mut line) = serde_json::to_vec(typed) {
            line.push(b'\n');
            let path = self.file(session);
            let appender = self.appenders.get(&path, || Appender::new(path.clone()));
            let _ = appender.lock().unwrap_or_else(|e| e.into_inner()).append(&line);
        }
    }

    /// Who allowed each region of `session` a person was asked about:
    /// region id → "allowed by alice (web)".
    pub fn all_allowed(&self, session: &str) -> HashMap<u64, String> {
        self.with_log(session, |log| log.allowed.clone())
    }

    /// Notes that `actor` made session `name`. A new session of an old
    /// name starts a new journal.
    pub fn note_created(&self, name: &str, actor: Option<&str>) {
        if crate::session::validate_name(name).is_err() {
            return;
        }
        let typed = Typed {
            after_regions: 0,
            actor: actor.unwrap_or("agent").into(),
            tool: CREATED.into(),
            ms: crate::config::now_ms(),
            allowed: None,
        };
        if let Ok(mut line) = serde_json::to_vec(&typed) {
            line.push(b'\n');
            let path = self.file(name);
            let written = path.parent().map_or(Ok(()), dtmcp_core::store::private_dir_all);
            let _ = written.and_then(|()| dtmcp_core::store::write_replace(&path, &line));
        }
    }

    /// The agent who started region `id` of `session`, if an agent did.
    pub fn starter_of(&self, session: &str, id: RegionId) -> Option<String> {
        self.with_log(session, |log| log.starters.get(&id.0).cloned())
    }

    /// The agents who started regions `ids` of `session` (`None` for a
    /// region no agent started), in the order of `ids`.
    pub fn starters(&self, session: &str, ids: &[RegionId]) -> Vec<Option<String>> {
        self.with_log(session, |log| ids.iter().map(|id| log.starters.get(&id.0).cloned()).collect())
    }

    /// Who started each region of `session` an agent started: region id →
    /// agent.
    pub fn all_starters(&self, session: &str) -> HashMap<u64, String> {
        self.with_log(session, |log| log.starters.clone())
    }

    /// The agent who made `session`, if one did through a server.
    pub fn creator_of(&self, session: &str) -> Option<String> {
        self.with_log(session, |log| log.creator.clone())
    }

    /// Every agent's last typing time in `session`, in epoch seconds.
    pub fn agents_typed(&self, session: &str) -> BTreeMap<String, u64> {
        self.agents_typed_ms(session).into_iter().map(|(a, ms)| (a, ms / 1000)).collect()
    }

    /// Every agent's last typing time in `session`, in ms since the epoch.
    pub fn agents_typed_ms(&self, session: &str) -> BTreeMap<String, u64> {
        self.with_log(session, |log| log.typed.clone())
    }

    /// Runs `f` on the up-to-date journal of `session`.
    fn with_log<T>(&self, session: &str, f: impl FnOnce(&AgentsLog) -> T) -> T {
        let path = self.file(session);
        let log = self.logs.get(&path, || AgentsLog::new(path.clone()));
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        f(log.refresh())
    }
}

/// The journal file of `session` under state home `home`.
pub fn agents_file(home: &Path, session: &str) -> PathBuf {
    home.join("agents").join(format!("{session}.jsonl"))
}

/// What the journal of one session says, brought up to date from the
/// lines appended since the last look (the file only grows, until a new
/// session of the name replaces it).
#[derive(Debug)]
struct AgentsLog {
    tail: Tail,
    /// Who started each region an agent started, by region id.
    starters: HashMap<u64, String>,
    /// Who made the session.
    creator: Option<String>,
    /// Each agent's last typing time, in ms since the epoch.
    typed: BTreeMap<String, u64>,
    /// Who allowed each region a person was asked about, by region id.
    allowed: HashMap<u64, String>,
}

impl AgentsLog {
    fn new(path: PathBuf) -> AgentsLog {
        AgentsLog {
            tail: Tail::new(path),
            starters: HashMap::new(),
            creator: None,
            typed: BTreeMap::new(),
            allowed: HashMap::new(),
        }
    }

    fn refresh(&mut self) -> &mut AgentsLog {
        let Ok(new) = self.tail.read_new() else { return self };
        if new.restarted {
            self.starters.clear();
            self.creator = None;
            self.typed.clear();
            self.allowed.clear();
        }
        for t in new.bytes.split(|&b| b == b'\n').filter_map(|l| serde_json::from_slice::<Typed>(l).ok()) {
            if t.tool == CREATED {
                self.creator.get_or_insert(t.actor);
                continue;
            }
            if let Some(allowed) = t.allowed.filter(|_| t.tool == CONSENT) {
                self.allowed.insert(t.after_regions + 1, allowed);
                continue;
            }
            self.starters.insert(t.after_regions + 1, t.actor.clone());
            self.typed.insert(t.actor, t.ms);
        }
        self
    }
}

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

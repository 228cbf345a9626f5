//! The person governs: a policy file says what agents may type, where, and
//! when a person must be asked first ([`dtmcp_core::policy`] judges; this
//! room loads the file, keeps it current, asks, remembers answers and
//! writes the audit).
//!
//! # Where the policy comes from
//! `--policy FILE` on `stdio` and `serve`, else `$DOCENT_TERMINAL_MCP_POLICY`,
//! else `$XDG_CONFIG_HOME/docent-terminal-mcp/policy.toml` (or
//! `~/.config/…`) when that file exists. No file: everything is allowed and
//! nothing is judged or audited, as before policies existed. A file named
//! but missing, or one that does not parse, stops the server from starting
//! with its path, line and column. Once running, a change to the file is
//! picked up at once (inotify on its directory, so an editor's rename is
//! seen); a change that does not parse keeps the last good policy, and
//! says so in `/health`, on stderr and in the next reply.
//!
//! # What it is not
//! A guard rail against an agent's mistakes, not a sandbox: a rule sees
//! the line typed, not what a script, an alias, `eval` or a program does
//! once it runs.

pub mod asks;
pub mod audit;
mod watch;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use dtmcp_core::policy::{Action, Policy, Role, Typed, Verdict};

/// The environment variable naming the policy file.
pub const ENV_POLICY: &str = "DOCENT_TERMINAL_MCP_POLICY";

/// Why the server cannot start with its policy.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file named cannot be read.
    #[error("cannot read the policy file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    /// It does not parse.
    #[error("{}:{}:{}: {} (the policy file does not parse)", .0.display(), .1.line, .1.column, .1.message)]
    Parse(PathBuf, dtmcp_core::policy::PolicyError),
}

/// The policy file to use: `explicit`, else the environment's, else the
/// default one when it exists; `None`: no policy.
pub fn policy_path(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os(ENV_POLICY).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".config")))?;
    let default = config.join("docent-terminal-mcp").join("policy.toml");
    default.is_file().then_some(default)
}

/// Reads and parses the policy at `path`.
pub fn load(path: &Path) -> Result<Policy, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Read(path.to_path_buf(), e))?;
    Policy::parse(&text).map_err(|e| LoadError::Parse(path.to_path_buf(), e))
}

/// What a person allowed beyond one line, until the server stops.
#[derive(Debug, Default)]
struct Grants {
    /// Lines allowed in a session: (session, line).
    lines: HashSet<(String, String)>,
    /// Agents whose asks are allowed.
    agents: HashSet<String>,
}

/// A reload that failed: the last good policy stays.
#[derive(Clone, Debug)]
struct Broken {
    /// What is wrong, with the file's line and column.
    message: String,
    /// Whether a reply has said it.
    said: bool,
}

/// The server's policy, its asks, grants and audit: owned by the server's
/// state (one per server), handed to each call.
pub struct Governor {
    /// The policy file; `None`: no policy, everything allowed.
    source: Option<PathBuf>,
    /// The policy in force (the last one that parsed).
    current: RwLock<Arc<Policy>>,
    /// The last reload's failure, until a reload succeeds.
    broken: Mutex<Option<Broken>>,
    /// The asks waiting for a person, shared through the state home.
    pub asks: asks::AskDir,
    /// The audit file.
    audit: audit::Audit,
    /// What persons allowed for longer than once.
    grants: Mutex<Grants>,
    /// Calls in flight per agent, for `calls_per_agent`.
    in_flight: Mutex<HashMap<String, usize>>,
}

impl Governor {
    /// No policy: everything allowed, nothing audited.
    pub fn none(home: &Path) -> Governor {
        Governor::with(home, None, Policy::allow_all())
    }

    /// The policy from `explicit`, the environment or the default file,
    /// for the server over state home `home`.
    pub fn open(home: &Path, explicit: Option<&Path>) -> Result<Governor, LoadError> {
        match policy_path(explicit) {
            None => Ok(Governor::none(home)),
            Some(path) => {
                let policy = load(&path)?;
                Ok(Governor::with(home, Some(path), policy))
            }
        }
    }

    fn with(home: &Path, source: Option<PathBuf>, policy: Policy) -> Governor {
        let asks = asks::AskDir::new(home);
        if source.is_some() {
            asks.sweep();
        }
        Governor {
            source,
            current: RwLock::new(Arc::new(policy)),
            broken: Mutex::new(None),
            asks,
            audit: audit::Audit::new(home),
            grants: Mutex::default(),
            in_flight: Mutex::default(),
        }
    }

    /// Whether a policy file is in force.
    pub fn governs(&self) -> bool {
        self.source.is_some()
    }

    /// The policy file, as messages name it.
    pub fn file(&self) -> String {
        self.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(no policy)".into())
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Reads the file again: a good one replaces the policy, a bad one is
    /// reported and the last good one stays.
    pub fn reload(&self) {
        let Some(path) = &self.source else { return };
        match load(path) {
            Ok(policy) => {
                let rules = policy.rules();
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
                let was_broken = self.broken.lock().unwrap_or_else(|e| e.into_inner()).take().is_some();
                let fixed = if was_broken { " (fixed)" } else { "" };
                eprintln!("docent-terminal-mcp: policy {} reloaded{fixed}: {rules} rules", path.display());
            }
            Err(e) => {
                let message = e.to_string();
                eprintln!("docent-terminal-mcp: {message}; the last good policy stays in force");
                let mut broken = self.broken.lock().unwrap_or_else(|e| e.into_inner());
                if broken.as_ref().is_none_or(|b| b.message != message) {
                    *broken = Some(Broken { message, said: false });
                }
            }
        }
    }

    /// Starts following the file: every change is reloaded. Ends with the
    /// runtime. Nothing happens without a policy file.
    pub fn follow(self: &Arc<Self>) {
        let Some(path) = self.source.clone() else { return };
        let me = Arc::clone(self);
        watch::on_change(path, move || me.reload());
    }

    /// A failed reload, to be said once in a reply.
    pub fn take_warning(&self) -> Option<String> {
        let mut broken = self.broken.lock().unwrap_or_else(|e| e.into_inner());
        let b = broken.as_mut().filter(|b| !b.said)?;
        b.said = true;
        Some(format!(
            "(the user's policy file changed and does not parse: {}; the last good policy stays in force)\n",
            b.message
        ))
    }

    /// How many asks wait for a person (none without a policy).
    pub fn asks_pending(&self) -> usize {
        if self.source.is_none() { 0 } else { self.asks.pending().len() }
    }

    /// The policy's state, for `/health`.
    pub fn health(&self) -> serde_json::Value {
        let Some(path) = &self.source else { return serde_json::json!({ "file": null }) };
        let policy = self.policy();
        let broken = self.broken.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|b| b.message.clone());
        serde_json::json!({
            "file": path.display().to_string(),
            "rules": policy.rules(),
            "default": policy.default_action().to_string(),
            "error": broken,
            "pending_asks": self.asks.pending().len(),
        })
    }

    /// Agent `agent`'s role.
    pub fn role(&self, agent: &str) -> Role {
        self.policy().role(agent)
    }

    /// Judges `typed`, with what persons allowed for longer than once: an
    /// ask already allowed becomes an allow (a deny stays a deny). The
    /// second value names the grant that allowed it.
    pub fn judge(&self, typed: &Typed) -> (Verdict, Option<&'static str>) {
        let verdict = self.policy().judge(typed);
        if verdict.action != Action::Ask {
            return (verdict, None);
        }
        let grants = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        let granted = if grants.agents.contains(typed.agent) {
            Some("this agent was allowed until the server stops")
        } else if grants.lines.contains(&(typed.session.to_string(), typed.line.to_string())) {
            Some("this line was allowed in this session")
        } else {
            None
        };
        match granted {
            Some(g) => (Verdict { action: Action::Allow, ..verdict }, Some(g)),
            None => (verdict, None),
        }
    }

    /// Remembers an allow for longer than once.
    pub fn grant(&self, scope: asks::Scope, agent: &str, session: &str, line: &str) {
        let mut grants = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        match scope {
            asks::Scope::Once => {}
            asks::Scope::Session => {
                grants.lines.insert((session.to_string(), line.to_string()));
            }
            asks::Scope::Agent => {
                grants.agents.insert(agent.to_string());
            }
        }
    }

    /// Appends a decision to the audit, when a policy governs.
    pub fn audit(&self, record: audit::Record) {
        if self.governs() {
            self.audit.write(record);
        }
    }

    /// Counts a call of `agent` in flight, refused past `calls_per_agent`:
    /// the limit's value. The count drops with the guard.
    pub fn enter_call(self: &Arc<Self>, agent: &str) -> Result<InFlight, usize> {
        let limit = self.policy().limits().calls_per_agent;
        let mut counts = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(agent.to_string()).or_default();
        if let Some(max) = limit.filter(|max| *n >= *max) {
            return Err(max);
        }
        *n += 1;
        Ok(InFlight { governor: Arc::clone(self), agent: agent.to_string() })
    }
}

/// A call in flight, counted until dropped.
pub struct InFlight {
    governor: Arc<Governor>,
    agent: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut counts = self.governor.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&self.agent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.agent);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_reload_keeps_the_last_good_policy_and_is_said_once() {
        let home = tempfile::tempdir().expect("tempdir");
        let file = home.path().join("policy.toml");
        std::fs::write(&file, "default = \"deny\"\n").expect("write");
        let g = Governor::open(home.path(), Some(&file)).expect("a good policy");
        assert_eq!(g.policy().default_action(), Action::Deny);
        std::fs::write(&file, "default = \"maybe\"\n").expect("write");
        g.reload();
        assert_eq!(g.policy().default_action(), Action::Deny, "the last good policy stays");
        let warning = g.take_warning().expect("said once");
        assert!(warning.contains("policy.toml:1:"), "{warning}");
        assert!(g.take_warning().is_none());
        assert!(g.health()["error"].is_string());
        std::fs::write(&file, "default = \"ask\"\n").expect("write");
        g.reload();
        assert_eq!(g.policy().default_action(), Action::Ask);
        assert!(g.health()["error"].is_null());
    }

    #[test]
    fn a_file_that_does_not_parse_refuses_to_start_with_its_position() {
        let home = tempfile::tempdir().expect("tempdir");
        let file = home.path().join("policy.toml");
        std::fs::write(&file, "default = \"allow\"\n[[rule]]\naction = \"deny\"\ncommand = \"(\"\n").expect("write");
        let e = Governor::open(home.path(), Some(&file)).err().expect("refused");
        let message = e.to_string();
        assert!(message.starts_with(&format!("{}:4:", file.display())), "{message}");
        let missing = Governor::open(home.path(), Some(&home.path().join("none.toml"))).err().expect("refused");
        assert!(missing.to_string().contains("cannot read the policy file"), "{missing}");
    }

    #[test]
    fn the_readmes_example_policy_parses_and_judges_as_it_says() {
        use dtmcp_core::policy::To;
        let policy = Policy::parse(include_str!("../../docs/policy.example.toml")).expect("the example parses");
        let judge = |line: &str, to: To| policy.judge(&Typed { agent: "claude-code", session: "s", line, to }).action;
        assert_eq!(judge("ls -la && rm -rf build", To::Shell), Action::Deny);
        assert_eq!(judge("git push origin main", To::Shell), Action::Ask);
        assert_eq!(judge("cargo test", To::Shell), Action::Allow);
        assert_eq!(judge("DROP TABLE users;", To::Program("psql")), Action::Deny);
        assert_eq!(judge("DROP TABLE users;", To::Shell), Action::Allow);
        assert_eq!(policy.role("reviewer-2"), Role::ReadOnly);
        assert_eq!(policy.role("claude-code"), Role::Operator);
    }

    #[test]
    fn calls_past_the_limit_are_refused_until_one_ends() {
        let home = tempfile::tempdir().expect("tempdir");
        let file = home.path().join("policy.toml");
        std::fs::write(&file, "[limits]\ncalls_per_agent = 2\n").expect("write");
        let g = Arc::new(Governor::open(home.path(), Some(&file)).expect("policy"));
        let a = g.enter_call("a").expect("first");
        let _b = g.enter_call("a").expect("second");
        assert_eq!(g.enter_call("a").err(), Some(2));
        let _other = g.enter_call("b").expect("another agent's own count");
        drop(a);
        assert!(g.enter_call("a").is_ok());
    }
}

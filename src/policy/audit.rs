//! `audit.jsonl` in the state home: one JSON object a line for every
//! decision a policy made on a line an agent would type, and for every
//! call a role refused. Mode 0600, appended through a handle kept open (a
//! file rotated away is opened again). A line is written with secrets as
//! their placeholders: the judge never sees a value.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use dtmcp_core::store::Appender;

/// One decision.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Record {
    /// When it was decided (RFC 3339, ms).
    pub time: String,
    /// The agent.
    pub agent: String,
    /// The session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The tool called.
    pub tool: String,
    /// The line, with secrets as their placeholders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// Where it went: `shell` or the program's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The deciding rule's line in the policy file (none: the default, or
    /// the agent's role).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<usize>,
    /// What the policy said: allow, ask or deny.
    pub policy: String,
    /// What happened: allowed or denied.
    pub decision: String,
    /// The ask's number, when a person was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<u64>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// Through which channel (cli, tmux, web, client, timeout), or what
    /// earlier answer allowed it (`grant`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// How long the ask waited, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// The reason: the rule's, or the person's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The audit file of one state home.
pub struct Audit {
    file: Mutex<Appender>,
}

impl Audit {
    /// The audit under state home `home`.
    pub fn new(home: &Path) -> Audit {
        Audit { file: Mutex::new(Appender::new(audit_file(home))) }
    }

    /// Appends `record`, stamped now. Best effort: a full disk must not
    /// stop the call (the refusal or the typing happens either way), but
    /// it is said on stderr.
    pub fn write(&self, mut record: Record) {
        record.time = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let Ok(mut line) = serde_json::to_vec(&record) else { return };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.append(&line) {
            eprintln!("docent-terminal-mcp: cannot append to {}: {e}", file.path().display());
        }
    }
}

/// The audit file under state home `home`.
pub fn audit_file(home: &Path) -> PathBuf {
    home.join("audit.jsonl")
}

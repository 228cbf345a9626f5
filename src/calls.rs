//! `calls.log`: one JSON line per tool call (time, tool, session, agent,
//! duration, ok or error), never the call's input or output, so that a slow or missing
//! reply can be pinned on the server or on the client.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::Serialize;

/// One line of the log.
#[derive(Serialize)]
struct Entry<'a> {
    time: String,
    tool: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    actor: Option<&'a str>,
    ms: f64,
    ok: bool,
    /// How many secrets the reply had redacted (never which).
    #[serde(skip_serializing_if = "is_zero")]
    redacted: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Appends entries to the call log; failures to write are ignored, since a
/// log must never break the call it records.
pub struct CallLog {
    path: PathBuf,
    lock: Mutex<()>,
}

impl CallLog {
    /// A log at `path`.
    pub fn new(path: PathBuf) -> CallLog {
        CallLog { path, lock: Mutex::new(()) }
    }

    /// Records one call of `actor` (the agent, when known) whose reply had
    /// `redacted` secrets redacted.
    pub fn record(
        &self,
        tool: &str,
        session: Option<&str>,
        actor: Option<&str>,
        elapsed: std::time::Duration,
        ok: bool,
        redacted: u32,
    ) {
        let entry = Entry {
            time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            tool,
            session,
            actor,
            ms: (elapsed.as_secs_f64() * 1e6).round() / 1e3,
            ok,
            redacted,
        };
        let Ok(mut line) = serde_json::to_vec(&entry) else { return };
        line.push(b'\n');
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let file =
            std::os::unix::fs::OpenOptionsExt::mode(std::fs::OpenOptions::new().create(true).append(true), 0o600)
                .open(&self.path);
        if let Ok(mut f) = file {
            let _ = f.write_all(&line);
        }
    }
}

//! `calls.log`: one JSON line per tool call (time, tool, session, agent,
//! duration, ok or error), never the call's input or output, so that a slow or missing
//! reply can be pinned on the server or on the client.

use std::path::PathBuf;
use std::sync::Mutex;

use dtmcp_core::store::Appender;
use serde::Serialize;

use crate::agents::caller;

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
    /// What a policy decided on the call's lines: how many were allowed,
    /// asked about and denied (never the lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<Policy>,
}

/// A call's policy decisions, counted.
#[derive(Serialize)]
struct Policy {
    allowed: u32,
    asked: u32,
    denied: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Appends entries to the call log through a handle kept open (see
/// [`Appender`]: a log moved away or removed is opened again); failures to
/// write are ignored, since a log must never break the call it records.
pub struct CallLog {
    file: Mutex<Appender>,
}

impl CallLog {
    /// A log at `path`.
    pub fn new(path: PathBuf) -> CallLog {
        CallLog { file: Mutex::new(Appender::new(path)) }
    }

    /// Records one call of `actor` (the agent, when known) whose reply had
    /// `redacted` secrets redacted. `elapsed` is the tool's own time; when
    /// the call is served inside a caller's scope, the time since the
    /// request arrived is recorded instead (see [`caller::arrival`]): the
    /// time the client waits for, less the reply's way back.
    pub fn record(
        &self,
        tool: &str,
        session: Option<&str>,
        actor: Option<&str>,
        elapsed: std::time::Duration,
        ok: bool,
        redacted: u32,
    ) {
        let elapsed = caller::client_time(elapsed);
        let entry = Entry {
            time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            tool,
            session,
            actor,
            ms: (elapsed.as_secs_f64() * 1e6).round() / 1e3,
            ok,
            redacted,
            policy: caller::Caller::current_decisions().map(|[allowed, asked, denied]| Policy {
                allowed,
                asked,
                denied,
            }),
        };
        let Ok(mut line) = serde_json::to_vec(&entry) else { return };
        line.push(b'\n');
        // One `write` to an open file: cheap enough for an async worker.
        let _ = self.file.lock().unwrap_or_else(|e| e.into_inner()).append(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).expect("json line")).collect()
    }

    #[tokio::test]
    async fn a_call_counts_from_its_arrival_and_a_moved_log_starts_again() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("calls.log");
        let log = CallLog::new(path.clone());
        log.record("read", Some("s"), None, Duration::from_millis(2), true, 0);
        let arrived = std::time::Instant::now() - Duration::from_millis(300);
        let who = caller::Caller::default();
        who.scope_since(arrived, async { log.record("run", Some("s"), Some("a"), Duration::from_millis(2), true, 0) })
            .await;
        let got = lines(&path);
        assert_eq!(got.len(), 2);
        assert!(got[0]["ms"].as_f64().is_some_and(|ms| ms < 100.0), "{got:?}");
        assert!(got[1]["ms"].as_f64().is_some_and(|ms| ms >= 300.0), "{got:?}");
        // Rotated away: the next line starts a new file at the path.
        std::fs::rename(&path, tmp.path().join("calls.log.1")).expect("rotate");
        log.record("search", None, None, Duration::from_millis(1), false, 0);
        assert_eq!(lines(&path).len(), 1);
        assert_eq!(lines(&tmp.path().join("calls.log.1")).len(), 2);
        std::fs::remove_file(&path).expect("remove");
        log.record("regions", None, None, Duration::from_millis(1), true, 0);
        assert_eq!(lines(&path)[0]["tool"], "regions");
    }
}

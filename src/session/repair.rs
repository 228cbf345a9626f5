//! Logger repair: when a pane lives but its logger does not answer (killed,
//! crashed), a new logger is attached and the stretch that went unlogged is
//! recorded as a gap, never skipped in silence.
//!
//! Nothing polls for dead loggers. The router holds a connection to every
//! live session's logger (see [`super::client`]): made at start-up for the
//! sessions already there ([`Sessions::connect_loggers`]), and when a
//! session is made or adopted (its logger is awaited through the pool). A
//! logger that dies closes its connection, and the pool says so at once
//! ([`Sessions::logger_closed`] replaces it). A logger that is stopped keeps
//! its connection and is reported by the calls that meet it.
//!
//! The router cannot write `session.txt` (the logger is its only writer), so
//! it leaves what it knows of the gap in `gap.pending` (when logging stopped,
//! when it resumed, the screen at that moment) before it starts the new
//! logger, which writes the gap into the log as its first lines.

use std::time::Duration;

use super::{Session, SessionError, Sessions};
use crate::config::now_ms;
use dtmcp_core::contract::{GAP_PENDING, GAPS, Gap, PIPE_COMMAND};
use dtmcp_core::store::files;

/// How long a freshly made session's logger may take to put up its socket
/// before the repair takes it for dead.
const YOUNG_MS: u64 = 10_000;
/// How long the repair of a logger whose connection closed keeps trying
/// (a logger that left because its logs were deleted may take a moment to
/// say so), and the longest pause between tries.
const REPAIR_FOR: Duration = Duration::from_secs(30);
const REPAIR_PAUSE_MAX: Duration = Duration::from_secs(2);

impl Sessions {
    /// Checks that `s`'s logger answers; if not, attaches a new one, and
    /// returns a note for the next reply about the gap.
    pub async fn ensure_logger(&self, s: &Session) -> Result<Option<String>, SessionError> {
        // A stopped logger (SIGSTOP, a debugger) is alive: a second one
        // would write the same files. The pane's output waits in tmux.
        if let Some(pid) = super::stopped::stopped_logger(&s.dir) {
            return Err(SessionError::BadInput(format!(
                "the logger of session {} is stalled: it (pid {pid}) is stopped, so nothing is logged or answered for now; \
                 the pane's output waits in tmux and nothing is lost: `kill -CONT {pid}` lets it go on, then call again",
                s.name
            )));
        }
        if answers(s).await {
            self.note_logger_gaps(s);
            return Ok(None);
        }
        // A killed logger leaves its socket file behind; a session still
        // being made has none yet, and gets time to start its logger (the
        // caller waits for it, at most as long as a repair would). One that
        // found its logs deleted says so.
        let young = now_ms().saturating_sub(s.meta.created_ms) < YOUNG_MS;
        if young && !s.dir.join(files::SOCKET).exists() && !s.dir.join(files::GONE).exists() {
            answers_soon(s).await;
            return Ok(None);
        }
        // One repair at a time (the pool and a call may both notice); the
        // second finds the new logger answering.
        let _one = self.repairing.lock().await;
        if answers(s).await {
            return Ok(None);
        }
        let gone = std::fs::read(s.dir.join(files::GONE))
            .ok()
            .and_then(|b| serde_json::from_slice::<dtmcp_core::contract::Gone>(&b).ok());
        let _ = std::fs::remove_file(s.dir.join(files::GONE));
        let gap = self.record_gap(s).await?;
        let pane = s.pane.pane_id.as_str();
        // `pipe-pane -o` only toggles; stop whatever pipe is left, then start.
        self.tmux.run(&["pipe-pane", "-t", pane]).await?;
        self.tmux.run(&["pipe-pane", "-O", "-t", pane, PIPE_COMMAND]).await?;
        if answers_soon(s).await {
            crate::metrics::get().logger_restarted();
            let note = match &gone {
                Some(g) => format!(
                    "log gap in {}: {}; logging started again in fresh files, and the log marks the place.\n",
                    s.name, g.reason
                ),
                None => gap_note(&s.name, &gap),
            };
            self.notes.lock().unwrap_or_else(|e| e.into_inner()).insert(s.name.clone(), note.clone());
            return Ok(Some(note));
        }
        Err(SessionError::BadInput(format!(
            "the logger of session {} died and a new one did not start; see {}",
            s.name,
            s.dir.join("logger.log").display()
        )))
    }

    async fn record_gap(&self, s: &Session) -> Result<Gap, SessionError> {
        let raw = std::fs::metadata(s.dir.join(files::RAW)).ok();
        let from_ms = raw
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        let screen = self.tmux.capture_screen(s.pane.pane_id.as_str()).await.unwrap_or_default();
        let mut rows: Vec<String> = screen.lines().map(|l| l.trim_end().to_string()).collect();
        while rows.last().is_some_and(String::is_empty) {
            rows.pop();
        }
        let gap =
            Gap { from_ms, to_ms: now_ms(), raw_offset: raw.map_or(0, |m| m.len()), screen: rows, ..Gap::default() };
        let body = serde_json::to_vec(&gap).map_err(|e| SessionError::BadInput(e.to_string()))?;
        dtmcp_core::store::write_atomic(&s.dir.join(GAP_PENDING), &body).map_err(super::io("recording the log gap"))?;
        Ok(gap)
    }

    /// Leaves a note for the next reply about gaps a living logger recorded
    /// (it could not write) since this router last looked (one `stat` when
    /// there is none). Every call that asks for a logger looks.
    pub(super) fn note_logger_gaps(&self, s: &Session) {
        let gaps = self.repair.gaps_since_last_look(&s.dir);
        if gaps.is_empty() {
            return;
        }
        let mut note = String::new();
        for gap in gaps {
            note.push_str(&format!(
                "log gap in {}: {} bytes of output were not logged ({}); the log marks the place.\n",
                s.name, gap.dropped, gap.reason
            ));
        }
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        notes.entry(s.name.clone()).or_default().push_str(&note);
    }

    /// Takes the note left for session `name`'s next reply, if any.
    pub fn take_note(&self, name: &str) -> Option<String> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).remove(name)
    }

    /// Connects to the logger of every live session, replacing those found
    /// dead, so that each is watched through its connection from now on:
    /// run once at start-up (sessions made before, or while this router
    /// was down).
    pub async fn connect_loggers(&self) {
        let Ok(panes) = self.panes().await else { return };
        for pane in panes {
            let Ok(s) = self.resolve_quiet(&pane.session_name).await else { continue };
            let outcome = self.logger(&s).await.err().map(|e| e.to_string());
            self.repair.say_once(&s.name, outcome);
        }
    }

    /// The connection to the logger of the session in `dir` closed: if the
    /// session lives, its logger is replaced now. Tries again for a while
    /// when the new logger is not up yet; ends when the session is gone,
    /// its logger is stopped, or a connection to a logger is open again.
    pub async fn logger_closed(&self, dir: &std::path::Path) {
        let Some(name) = dir.file_name().and_then(|n| n.to_str()) else { return };
        if self.cfg.session_dir(name) != dir {
            return; // another state home's session
        }
        let until = tokio::time::Instant::now() + REPAIR_FOR;
        let mut pause = Duration::from_millis(50);
        loop {
            match self.resolve_quiet(name).await {
                Err(SessionError::NotFound { .. } | SessionError::BadName(_) | SessionError::Tmux(_)) => {
                    self.repair.said().remove(name);
                    return;
                }
                Err(_) => {}
                Ok(s) => {
                    let outcome = self.ensure_logger(&s).await.err().map(|e| e.to_string());
                    let stalled = super::stopped::stopped_logger(&s.dir).is_some();
                    self.repair.say_once(&s.name, outcome);
                    if stalled || self.loggers.connected(&s.dir) {
                        return;
                    }
                }
            }
            if tokio::time::Instant::now() + pause > until {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(REPAIR_PAUSE_MAX);
        }
    }
}

/// Whether `s`'s logger answers a status now.
/// Whether `s`'s logger takes a connection within two seconds (a logger
/// just started binds its socket after replaying its files).
async fn answers_soon(s: &Session) -> bool {
    for _ in 0..500 {
        if s.logger().await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    false
}

async fn answers(s: &Session) -> bool {
    match s.logger().await {
        Ok(mut logger) => logger.status().await.is_ok(),
        Err(_) => false,
    }
}

/// What the repair has said and read, for the life of its `Sessions`.
#[derive(Debug, Default)]
pub(super) struct Said {
    /// What the repair last said about each session's logger, by name.
    troubles: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    /// How far into each session's `gaps.jsonl` this router has read, by
    /// session directory. Process memory, like the notes: a restarted
    /// router only reports gaps recorded after it started.
    gaps_read: std::sync::Mutex<std::collections::BTreeMap<std::path::PathBuf, u64>>,
    /// When this router first looked at gaps.
    gaps_since_ms: std::sync::OnceLock<u64>,
}

impl Said {
    fn said(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, String>> {
        self.troubles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Says a trouble with session `name`'s logger on stderr once, not at
    /// every look, and again only when it changes; `None` when all is well.
    fn say_once(&self, name: &str, outcome: Option<String>) {
        let mut said = self.said();
        match outcome {
            Some(e) if said.get(name) != Some(&e) => {
                eprintln!("docent-terminal-mcp: {e}");
                said.insert(name.to_string(), e);
            }
            Some(_) => {}
            None => {
                said.remove(name);
            }
        }
    }

    /// The gaps a logger recorded in `dir` (those with a reason: a dead
    /// logger's gaps are reported by the repair) since the last look.
    fn gaps_since_last_look(&self, dir: &std::path::Path) -> Vec<Gap> {
        use std::io::{Read, Seek, SeekFrom};
        let since = *self.gaps_since_ms.get_or_init(now_ms);
        let path = dir.join(GAPS);
        let Ok(len) = std::fs::metadata(&path).map(|m| m.len()) else { return Vec::new() };
        let mut read = self.gaps_read.lock().unwrap_or_else(|e| e.into_inner());
        let from = read.get(dir).copied().unwrap_or(0);
        if len <= from {
            return Vec::new();
        }
        read.insert(dir.to_path_buf(), len);
        drop(read);
        let mut body = String::new();
        let Ok(mut file) = std::fs::File::open(&path) else { return Vec::new() };
        if file.seek(SeekFrom::Start(from)).is_err() || file.take(len - from).read_to_string(&mut body).is_err() {
            return Vec::new();
        }
        body.lines()
            .filter_map(|line| serde_json::from_str::<Gap>(line).ok())
            .filter(|gap| !gap.reason.is_empty() && gap.to_ms >= since)
            .collect()
    }
}

fn gap_note(name: &str, gap: &Gap) -> String {
    let secs = gap.to_ms.saturating_sub(gap.from_ms) as f64 / 1000.0;
    format!(
        "log gap in {name}: its logger had died; output in the last {secs:.1} s before it was restarted was not logged. \
         The log marks the gap and holds the screen as it was when logging resumed.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_the_session_and_the_length_of_the_gap() {
        let gap = Gap { from_ms: 1_000, to_ms: 3_500, ..Gap::default() };
        let note = gap_note("t1", &gap);
        assert!(note.starts_with("log gap in t1"), "{note}");
        assert!(note.contains("2.5 s"), "{note}");
    }
}

//! A long call's line to its client while it waits: `notifications/progress`
//! about once a second when the request carried `_meta.progressToken`, and
//! the client's `notifications/cancelled`.
//!
//! `run`, `wait` and `expect` wait on the session's logger in slices of at
//! most [`SLICE_MS`]; every slice asks again from the same mark, so a region
//! end, a prompt or a match that comes between two slices is found by the
//! next one. Between slices the call sends progress when a second has
//! passed since the last, and looks whether the client cancelled.
//!
//! Progress counts the seconds waited (it only grows, as the protocol
//! wants, even while a command prints nothing); the message says how many
//! lines the command has printed, its last line, and what the foreground
//! job is doing, each through the same redaction as a reply, so a secret
//! never reaches the client this way either.
//!
//! A cancellation ends the wait, never the command: the call goes on as at
//! its timeout, and its reply says the command still runs (rmcp does not
//! send a reply to a cancelled request; a later `wait` picks the command
//! up). Without a token nothing is sent; cancellation is honoured either way.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::handler::server::common::{AsRequestContext, FromContextPart};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::session::{LoggerClient, Session};
use crate::tools::Terminal;
use crate::tools::typing::target;
use dtmcp_core::protocol::Status;
use dtmcp_core::types::LineNo;

/// The longest one wait on the logger lasts before the call looks at its
/// client again.
pub const SLICE_MS: u64 = 1_000;
/// How often progress goes out, at most.
const EVERY: Duration = Duration::from_secs(1);
/// The most characters of the last line a message carries.
const LAST_LINE_CHARS: usize = 160;
/// The most characters of the job's description a message carries.
const JOB_CHARS: usize = 160;

/// One call's progress reporting and cancellation, taken from its request.
pub struct Progress {
    /// Where notifications go: the request's token and the client, when
    /// the client asked for progress.
    to: Option<(ProgressToken, Peer<RoleServer>)>,
    /// Cancelled when the client cancels the request or goes away.
    ct: CancellationToken,
    /// When the call began: progress counts seconds from here.
    started: Instant,
    /// When progress last went out (the start, before any).
    last: Mutex<Instant>,
    /// The client, for what the call asks of it (a person's consent).
    peer: Option<Peer<RoleServer>>,
}

impl<C: AsRequestContext> FromContextPart<C> for Progress {
    fn from_context_part(context: &mut C) -> Result<Self, rmcp::ErrorData> {
        Ok(Progress::of(context.as_request_context()))
    }
}

impl Progress {
    /// The progress reporting and cancellation of the request `context`
    /// belongs to.
    pub fn of(context: &rmcp::service::RequestContext<RoleServer>) -> Progress {
        let to = context.meta.get_progress_token().map(|token| (token, context.peer.clone()));
        Progress { peer: Some(context.peer.clone()), ..Progress::new(to, context.ct.clone()) }
    }

    fn new(to: Option<(ProgressToken, Peer<RoleServer>)>, ct: CancellationToken) -> Progress {
        let now = Instant::now();
        Progress { to, ct, started: now, last: Mutex::new(now), peer: None }
    }

    /// The client that made the call.
    pub fn peer(&self) -> Option<&Peer<RoleServer>> {
        self.peer.as_ref()
    }

    /// Sends `message` as progress, when due.
    pub async fn say(&self, message: String) {
        if self.due() {
            self.send(message).await;
        }
    }

    /// Whether the client cancelled the request (or went away).
    pub fn cancelled(&self) -> bool {
        self.ct.is_cancelled()
    }

    /// How long the next slice of a wait that has `left_ms` to go may last.
    pub fn slice(left_ms: u64) -> u64 {
        left_ms.clamp(1, SLICE_MS)
    }

    /// Whether progress is due: the client asked for it and a second has
    /// passed since the last.
    fn due(&self) -> bool {
        let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
        self.to.is_some() && last.elapsed() >= EVERY
    }

    /// Sends progress with `message`, if the client asked for it.
    async fn send(&self, message: String) {
        let Some((token, peer)) = &self.to else { return };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        let seconds = (self.started.elapsed().as_millis() / 100) as f64 / 10.0;
        let param = ProgressNotificationParam::new(token.clone(), seconds).with_message(message);
        // A client that went away is seen by the cancellation token; a
        // notification it could not take is not worth failing the call.
        let _ = peer.notify_progress(param).await;
    }

    /// Sends progress, when due, on a command in session `s` whose output
    /// begins at line `from`, the logger's status being `status`.
    pub async fn tick(&self, term: &Terminal, s: &Session, logger: &mut LoggerClient, status: &Status, from: LineNo) {
        if !self.due() {
            return;
        }
        let message = term.progress_message(s, logger, status, from).await;
        self.send(message).await;
    }
}

impl Terminal {
    /// What a command in `s` whose output begins at line `from` has done
    /// so far: its lines, its last line and its foreground job, redacted as
    /// a reply is.
    async fn progress_message(&self, s: &Session, logger: &mut LoggerClient, status: &Status, from: LineNo) -> String {
        let lines = status.mark.line.0.saturating_sub(from.0);
        let mut parts = vec![match lines {
            1 => "1 line so far".to_string(),
            n => format!("{n} lines so far"),
        }];
        if let Some(last) = last_line(logger, status, from).await {
            let last = clip(&self.redacted(Some(&s.name), &last), LAST_LINE_CHARS);
            parts.push(format!("last: {last}"));
        }
        if let Ok(job) = target::job(s).map_err(drop)
            && !job.own_shell
        {
            parts.push(clip(&self.redacted(Some(&s.name), &job.line()), JOB_CHARS));
        }
        crate::tools::clean(&parts.join(" · "))
    }
}

/// The command's last line of output: the unfinished one (a progress bar,
/// a question) when it shows something, else the last finished one; none
/// before the command printed anything.
async fn last_line(logger: &mut LoggerClient, status: &Status, from: LineNo) -> Option<String> {
    let current = status.current_text.trim_end();
    if status.mark.line >= from && !current.trim().is_empty() {
        return Some(current.to_string());
    }
    let last = status.mark.line.0.checked_sub(1).filter(|&l| l >= from.0)?;
    let text = logger.read(LineNo(last), 1).await.ok()?.into_iter().next()?;
    Some(text.trim_end().to_string()).filter(|t| !t.trim().is_empty())
}

/// `text` cut to at most `max` characters, an ellipsis marking a cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_counts_characters_not_bytes() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip("ééé", 2), "éé…");
    }

    #[test]
    fn slices_are_at_most_a_second_and_never_zero() {
        assert_eq!(Progress::slice(0), 1);
        assert_eq!(Progress::slice(400), 400);
        assert_eq!(Progress::slice(30_000), SLICE_MS);
    }

    #[test]
    fn without_a_token_nothing_is_due_and_cancelling_is_seen() {
        let ct = CancellationToken::new();
        let p = Progress::new(None, ct.clone());
        *p.last.lock().expect("lock") = Instant::now() - Duration::from_secs(5);
        assert!(!p.due());
        assert!(!p.cancelled());
        ct.cancel();
        assert!(p.cancelled());
    }
}

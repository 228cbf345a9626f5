//! `port` and `listening`: a `run` or `wait` that returns as soon as a
//! server in the session is up, so an agent needs no loop of `sleep` and
//! `curl` of its own.
//!
//! While the command's wait on the logger goes on, the session's process
//! tree is looked at every [`POLL_MS`] (`dtmcp_core::procs::sockets`):
//! this call is the one asking, and the wait's timeout bounds it; nothing
//! is looked at once it returns. Whichever comes first ends the call: a
//! listener that meets the ask (the reply names it, its process and the
//! first lines the command printed; the command keeps running), or the
//! command's end (reported at once, with its exit status, as a command
//! that never listened). A command that ends having started a job in the
//! background (`server &`) is followed on while that job lives.
//!
//! What counts as met: for `port`, something listening on that port that
//! did not listen there before the line was typed (for `wait`, before the
//! call, anything listening there); for `listening`, any socket not
//! listening before.

use std::time::{Duration, Instant};

use crate::session::{LoggerClient, Session};
use crate::tools::replies::ports::{listener_json, look};
use crate::tools::replies::reply::{Facts, Reply};
use crate::tools::replies::report::{Waited, describe};
use crate::tools::replies::shape::Shape;
use crate::tools::typing::progress::Progress;
use crate::tools::{Terminal, ToolError};
use dtmcp_core::procs::sockets::{self, Listener, Look};
use dtmcp_core::protocol::{Mark, Status, WaitReason};
use dtmcp_core::region::Region;
use dtmcp_core::types::RegionId;

/// How often the tree is looked at while a call waits for a listener:
/// a bind is seen within this (and the look's own time).
pub const POLL_MS: u64 = 50;

/// What the call waits for besides its command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Something listening on this port (TCP or UDP).
    Port(u16),
    /// Any socket newly listening.
    Any,
}

impl Ask {
    /// The ask of `port` and `listening`, checked; `None` when neither
    /// asks for anything.
    pub fn parse(port: Option<u64>, listening: Option<bool>) -> Result<Option<Ask>, String> {
        match (port, listening) {
            (Some(p), _) if (1..=65_535).contains(&p) => Ok(Some(Ask::Port(p as u16))),
            (Some(p), _) => Err(format!("port must be between 1 and 65535; got {p}")),
            (None, Some(true)) => Ok(Some(Ask::Any)),
            (None, _) => Ok(None),
        }
    }

    /// What the call waited for, in words.
    fn said(self) -> String {
        match self {
            Ask::Port(p) => format!("port {p}"),
            Ask::Any => "a new port".to_string(),
        }
    }
}

/// An ask and what listened, and which jobs ran, before it.
#[derive(Clone, Debug)]
pub struct Want {
    /// What is waited for.
    pub ask: Ask,
    /// What listened before: not new.
    pub known: Vec<Listener>,
    /// The background jobs (leader pids) before.
    pub jobs: Vec<i32>,
}

impl Want {
    /// `ask` against what the session under `pid` shows now; with
    /// `anything_counts` (a `wait` for a port), what listens already on
    /// the port meets it too.
    pub async fn before(ask: Ask, pid: u32, anything_counts: bool) -> Want {
        let now = look(pid).await.unwrap_or_default();
        let known = match (ask, anything_counts) {
            (Ask::Port(_), true) => Vec::new(),
            _ => now.listeners,
        };
        Want { ask, known, jobs: now.jobs.iter().map(|j| j.pid).collect() }
    }

    /// The listeners of `look` that meet the ask (none: not met).
    pub fn met<'a>(&self, look: &'a Look) -> Vec<&'a Listener> {
        look.listeners
            .iter()
            .filter(|l| !self.known.iter().any(|k| k.same(l)))
            .filter(|l| match self.ask {
                Ask::Port(p) => l.port == Some(p),
                Ask::Any => true,
            })
            .collect()
    }

    /// The background jobs of `look` started since.
    fn new_jobs(&self, look: &Look) -> Vec<i32> {
        look.jobs.iter().map(|j| j.pid).filter(|p| !self.jobs.contains(p)).collect()
    }

    /// What `ask` waits for, against the session under `pid` now (see
    /// [`Want::before`]); `None` without an ask.
    pub async fn of(ask: Option<Ask>, pid: u32, anything_counts: bool) -> Option<Want> {
        match ask {
            Some(ask) => Some(Want::before(ask, pid, anything_counts).await),
            None => None,
        }
    }

    /// `reply`, ended with the line for an ask of `want` left unmet when
    /// the wait stopped for `reason`.
    pub fn unmet_in(want: Option<&Want>, reason: &WaitReason, mut reply: Reply) -> Reply {
        if let Some(line) = want.and_then(|w| w.unmet(reason)) {
            reply.push_str(&line);
            reply.push_str("\n");
        }
        reply
    }

    /// The line a reply ends with when the wait ended otherwise.
    pub fn unmet(&self, reason: &WaitReason) -> Option<String> {
        let what = self.ask.said();
        Some(match reason {
            WaitReason::RegionEnded(_) => format!("nothing listened on {what}: the command ended first"),
            WaitReason::Eof => return None,
            WaitReason::Timeout => format!("nothing listens on {what} yet"),
            _ => format!("nothing listens on {what} yet; the wait stopped at the line above"),
        })
    }
}

/// How a wait with a [`Want`] ended.
pub enum Heard {
    /// As the logger's wait ended, the ask unmet (boxed: a status is large).
    Logger(Box<(WaitReason, Status, Option<Region>)>),
    /// Met: the look that met it, and what was asked.
    Listening(Look, Want),
}

/// Looks at the tree under `pid` every [`POLL_MS`] until `want` is met
/// (the look that met it) or, given `jobs`, until none of those jobs is
/// left (`None`), or the client cancelled (`None`). Unbounded by itself:
/// its caller bounds it.
async fn until_met(pid: u32, want: &Want, jobs: Option<&[i32]>, progress: &Progress) -> Option<Look> {
    loop {
        if progress.cancelled() {
            return None;
        }
        let now = look(pid).await?;
        if !want.met(&now).is_empty() {
            return Some(now);
        }
        if let Some(jobs) = jobs
            && !now.jobs.iter().any(|j| jobs.contains(&j.pid))
        {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

impl Terminal {
    /// Waits on the logger as `wait` says and, with a `want`, on the tree
    /// too (see the module doc); `left_ms` bounds the following of a job
    /// the command left in the background.
    pub(crate) async fn wait_or_listen(
        &self,
        s: &Session,
        want: Option<&Want>,
        progress: &Progress,
        left_ms: u64,
        wait: impl Future<Output = Result<(WaitReason, Status, Option<Region>), ToolError>>,
    ) -> Result<Heard, ToolError> {
        let Some(want) = want else { return wait.await.map(|w| Heard::Logger(Box::new(w))) };
        let deadline = Instant::now() + Duration::from_millis(left_ms);
        let pid = s.pane.pane_pid;
        let heard = tokio::select! {
            waited = wait => waited?,
            Some(look) = until_met(pid, want, None, progress) => return Ok(Heard::Listening(look, want.clone())),
        };
        if !matches!(heard.0, WaitReason::RegionEnded(_) | WaitReason::Prompt) {
            return Ok(Heard::Logger(Box::new(heard)));
        }
        // Ended: it may have bound on its way out, or left a server behind.
        let Some(now) = look(pid).await else { return Ok(Heard::Logger(Box::new(heard))) };
        if !want.met(&now).is_empty() {
            return Ok(Heard::Listening(now, want.clone()));
        }
        let jobs = want.new_jobs(&now);
        if jobs.is_empty() {
            return Ok(Heard::Logger(Box::new(heard)));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, until_met(pid, want, Some(&jobs), progress)).await {
            Ok(Some(look)) => Ok(Heard::Listening(look, want.clone())),
            _ => Ok(Heard::Logger(Box::new(heard))),
        }
    }

    /// The reply when `want` was met by `now`: what listens, then the
    /// command's output so far (its region is the first after `after`).
    pub(crate) async fn listening_reply(
        &self,
        s: &Session,
        logger: &mut LoggerClient,
        after: Mark,
        want: &Want,
        now: &Look,
        shape: &Shape,
    ) -> Result<Reply, ToolError> {
        let met: Vec<Listener> = want.met(now).into_iter().cloned().collect();
        let status = logger.status().await?;
        let region = match status.mark.regions > after.regions {
            true => logger.region(RegionId(after.regions + 1)).await?,
            false => None,
        };
        let what = match want.ask {
            Ask::Port(p) => format!("port {p} is listening"),
            Ask::Any => "now listening".to_string(),
        };
        let note = format!("{what}: {}", sockets::said(&met));
        // Told here: the reply's own line about new ports does not repeat it.
        self.told_ports(&s.name, now);
        let reason = WaitReason::Timeout;
        let waited =
            Waited { status: &status, reason: &reason, region: region.as_ref(), typed_on: after.line, seen: None };
        let mut reply = describe(s, logger, &waited, shape, Some(&note)).await?;
        reply.facts.details.insert("now_listening".into(), met.iter().map(listener_json).collect());
        Ok(reply)
    }

    /// `wait` with a `want` in a session where no command runs: met at
    /// once, or followed while a background job lives, else told so.
    pub(crate) async fn listen_at_prompt(
        &self,
        s: &Session,
        want: &Want,
        timeout_ms: u64,
        progress: &Progress,
    ) -> Reply {
        let pid = s.pane.pane_pid;
        let now = look(pid).await.unwrap_or_default();
        let what = want.ask.said();
        let said = |met: &[&Listener]| sockets::said(&met.iter().map(|l| (*l).clone()).collect::<Vec<_>>());
        let met = want.met(&now);
        if !met.is_empty() {
            self.told_ports(&s.name, &now);
            let text = format!("{}: {}\n", head(want.ask), said(&met));
            return with_met(text, &met);
        }
        let jobs: Vec<i32> = now.jobs.iter().map(|j| j.pid).collect();
        if jobs.is_empty() {
            return Reply::text(format!(
                "nothing listens on {what} in {}, and nothing runs there that could: it is at its prompt with no background job\n",
                s.name
            ));
        }
        let waited =
            tokio::time::timeout(Duration::from_millis(timeout_ms), until_met(pid, want, Some(&jobs), progress));
        match waited.await {
            Ok(Some(look)) => {
                let met = want.met(&look);
                self.told_ports(&s.name, &look);
                with_met(format!("{}: {}\n", head(want.ask), said(&met)), &met)
            }
            Ok(None) if progress.cancelled() => {
                Reply::text(format!("(the call was cancelled; nothing listens on {what} yet)\n"))
            }
            Ok(None) => {
                Reply::text(format!("the background jobs of {} ended before anything listened on {what}\n", s.name))
            }
            Err(_) => Reply::text(format!(
                "nothing listens on {what} yet; the background job(s) still run: call wait session={} again to keep waiting\n",
                s.name
            )),
        }
    }
}

/// The headline of a met ask.
fn head(ask: Ask) -> String {
    match ask {
        Ask::Port(p) => format!("port {p} is listening"),
        Ask::Any => "now listening".to_string(),
    }
}

/// A reply of `text` carrying the listeners that met the ask as data.
fn with_met(text: String, met: &[&Listener]) -> Reply {
    let mut facts = Facts::default();
    facts.details.insert("now_listening".into(), met.iter().map(|l| listener_json(l)).collect());
    Reply { text, facts }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::procs::sockets::Kind;

    fn tcp(port: u16, pid: i32) -> Listener {
        Listener {
            kind: Kind::Tcp,
            address: Some("0.0.0.0".parse().expect("ip")),
            port: Some(port),
            path: None,
            pid,
            program: "node".into(),
            command: "node vite".into(),
        }
    }

    #[test]
    fn asks_are_checked() {
        assert_eq!(Ask::parse(Some(8123), None), Ok(Some(Ask::Port(8123))));
        assert_eq!(Ask::parse(Some(80), Some(true)), Ok(Some(Ask::Port(80))), "the port says more");
        assert_eq!(Ask::parse(None, Some(true)), Ok(Some(Ask::Any)));
        assert_eq!(Ask::parse(None, Some(false)), Ok(None));
        assert!(Ask::parse(Some(0), None).is_err());
        assert!(Ask::parse(Some(70_000), None).unwrap_err().contains("between 1 and 65535"));
    }

    #[test]
    fn only_what_is_new_meets_it() {
        let want = Want { ask: Ask::Port(5173), known: vec![tcp(5173, 7)], jobs: Vec::new() };
        let same = Look { listeners: vec![tcp(5173, 7)], ..Look::default() };
        assert!(want.met(&same).is_empty(), "the old server on it is not new");
        let restarted = Look { listeners: vec![tcp(5173, 9), tcp(24678, 9)], ..Look::default() };
        assert_eq!(want.met(&restarted), vec![&tcp(5173, 9)]);
        let any = Want { ask: Ask::Any, ..want };
        assert_eq!(any.met(&restarted).len(), 2);
        assert!(any.unmet(&WaitReason::RegionEnded(RegionId(3))).is_some_and(|l| l.contains("ended first")));
        assert_eq!(any.unmet(&WaitReason::Eof), None);
    }
}

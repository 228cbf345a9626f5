//! The asks in the web view: what the policy asks a person (see
//! [`crate::policy::asks`]), shown on the overview and on the page of the
//! ask's session, with the buttons that answer it. Answering is the view's
//! only write.
//!
//! # How the page learns of asks
//! An event stream, `GET /web/asks`, rather than a poll: an ask opened,
//! answered or closed is a file linked into or removed from
//! `STATE_HOME/asks/`, by whichever process did it (this server, a stdio
//! server of the same user, `allow` at a shell), so inotify on that one
//! directory ([`super::changes`]) says when to look again and a page
//! shows an ask the moment it is opened, at no cost while none is. One
//! task per server does the looking while some page listens (and
//! [`super::feeds::LINGER`] after), and hands whole snapshots to the
//! streams through a `watch` channel, like the other feeds. Besides the
//! directory's events it looks every [`STALE_EVERY`], for asks whose
//! server died (a dead process changes no file). An ask that leaves the
//! list is said once, below it: "ask 7: allowed by alice (web)", from its
//! answer file.
//!
//! # The one write
//! `POST /web/asks/{id}` with a JSON body `{"decision": "allow"|"deny",
//! "scope": "once"|"session"|"agent", "why": "…", "csrf": "…"}` answers
//! ask `id` as this server's user ([`crate::people::asks::me`]: the web
//! login is theirs), through [`Via::Web`]. It needs, each refused on its
//! own:
//!
//! - the login cookie (401), as every route of the view;
//! - an `Origin` header naming this very server (403): browsers send one
//!   with every `POST` of a script, and a page of another site cannot
//!   forge it (the guard already refuses a foreign one; here a missing one
//!   is refused too);
//! - a JSON body (415): a form of another site cannot send one without
//!   asking first (CORS), and nothing answers that question here;
//! - the login's CSRF token (403), compared in constant time: the page
//!   carries it in a `<meta>` element, which another site cannot read.
//!
//! The answer is `200 {"answered": true, "by_whom": …}`, `409` with who
//! answered first, or `404` for an ask that does not exist.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use subtle::ConstantTimeEq;
use tokio::sync::watch;

use super::Web;
use super::changes::Changes;
use super::feeds::Hold;
use crate::policy::asks::{Answer, AnswerError, Ask, AskDir, Decision, Scope, Via};

/// How often the asks are looked at without a change of their files (for
/// asks whose server died).
pub const STALE_EVERY: Duration = Duration::from_secs(2);
/// How many answered asks the page is told of.
const ANSWERED_KEPT: usize = 20;
/// The longest reason for a denial kept, in characters.
const MAX_WHY: usize = 500;

/// An ask that left the list, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Done {
    /// Its number.
    pub id: u64,
    /// Its session.
    pub session: String,
    /// The line it asked about (secrets as placeholders).
    pub line: String,
    /// "allowed by alice (web)", or why it went unanswered.
    pub says: String,
    /// When it left, ms since the epoch.
    pub ms: u64,
}

/// The asks as of one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AsksSnapshot {
    /// The open asks, oldest first.
    pub pending: Vec<Ask>,
    /// The latest asks that left the list, newest first.
    pub answered: VecDeque<Done>,
}

/// The feed of asks; the last holder to drop it ends its task.
pub struct AsksFeed {
    /// The snapshots.
    pub rx: watch::Receiver<Arc<AsksSnapshot>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AsksFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The asks' feed of one server, started when a page first listens.
#[derive(Default)]
pub struct Asks {
    feed: tokio::sync::Mutex<Weak<AsksFeed>>,
}

impl Asks {
    /// The feed of the asks in `dir`, started if none runs.
    async fn feed(&self, dir: &AskDir) -> Result<Arc<AsksFeed>, String> {
        let mut slot = self.feed.lock().await;
        if let Some(feed) = slot.upgrade() {
            return Ok(feed);
        }
        let mut changes = Changes::new().map_err(|e| format!("cannot watch for changes: {e}"))?;
        changes.watch_asks(dir.path()).map_err(|e| format!("cannot watch {}: {e}", dir.path().display()))?;
        let mut watcher = Watcher { asks: dir.clone(), now: AsksSnapshot::default() };
        watcher.look().await;
        let (tx, rx) = watch::channel(Arc::new(watcher.now.clone()));
        let task = tokio::spawn(watcher.run(changes, tx));
        let feed = Arc::new(AsksFeed { rx, task });
        *slot = Arc::downgrade(&feed);
        Ok(feed)
    }
}

/// What the feed's task keeps between looks.
struct Watcher {
    asks: AskDir,
    now: AsksSnapshot,
}

impl Watcher {
    /// Looks at the directory again; whether anything changed.
    async fn look(&mut self) -> bool {
        let asks = self.asks.clone();
        let before: Vec<u64> = self.now.pending.iter().map(|a| a.id).collect();
        let looked = tokio::task::spawn_blocking(move || {
            let pending = asks.pending();
            // What became of the asks that left: their answers, read here
            // off the runtime's threads.
            let gone: Vec<(u64, Option<Answer>)> = before
                .iter()
                .filter(|id| !pending.iter().any(|a| a.id == **id))
                .map(|id| (*id, asks.answer_of(*id)))
                .collect();
            (pending, gone)
        })
        .await;
        let Ok((pending, gone)) = looked else { return false };
        let mut changed = pending != self.now.pending;
        for (id, answer) in gone {
            let Some(ask) = self.now.pending.iter().find(|a| a.id == id) else { continue };
            let says = match answer {
                Some(a) => a.by_whom(),
                None => "closed unanswered: its call ended or its server stopped".to_string(),
            };
            let done =
                Done { id, session: ask.session.clone(), line: ask.line.clone(), says, ms: dtmcp_core::now_ms() };
            self.now.answered.push_front(done);
            self.now.answered.truncate(ANSWERED_KEPT);
            changed = true;
        }
        self.now.pending = pending;
        changed
    }

    /// Looks again at every change of the directory and every
    /// [`STALE_EVERY`], and publishes what changed.
    async fn run(mut self, mut changes: Changes, tx: watch::Sender<Arc<AsksSnapshot>>) {
        loop {
            tokio::select! {
                got = changes.next() => if got.is_err() { return },
                () = tokio::time::sleep(STALE_EVERY) => {}
            }
            if self.look().await {
                tx.send_replace(Arc::new(self.now.clone()));
            }
        }
    }
}

/// `GET /web/asks`: the asks' event stream (`asks` events, each the whole
/// list: it is short).
pub async fn events(State(web): State<Arc<Web>>, headers: HeaderMap) -> Response {
    if !web.admits(&headers) {
        return super::signed_out();
    }
    let feed = match web.asks.feed(&web.terminal.governor().asks).await {
        Ok(f) => f,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e).into_response(),
    };
    let mut rx = feed.rx.clone();
    rx.mark_changed();
    let state = (Hold::new(feed), rx, 0u64);
    let stream = futures_util::stream::unfold(state, |(hold, mut rx, n)| async move {
        rx.changed().await.ok()?;
        let snap = rx.borrow_and_update().clone();
        let e = super::sse::event("asks", &*snap, &(n + 1).to_string());
        Some((Ok(e), (hold, rx, n + 1)))
    });
    super::sse::sse(stream).into_response()
}

/// The body of `POST /web/asks/{id}`.
#[derive(Debug, Deserialize)]
struct Answering {
    decision: Decision,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    why: Option<String>,
    #[serde(default)]
    csrf: Option<String>,
}

fn refused(status: StatusCode, why: String) -> Response {
    (status, Json(json!({ "answered": false, "error": why }))).into_response()
}

/// Whether `headers` carry an `Origin` that names the server the request
/// was sent to (its `Host`); else why not.
fn own_origin(headers: &HeaderMap) -> Result<(), String> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Err("refused: an answer needs the Origin header a browser sends with it".into());
    };
    let origin = origin.to_str().unwrap_or("?").to_ascii_lowercase();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    match !host.is_empty() && [format!("http://{host}"), format!("https://{host}")].contains(&origin) {
        true => Ok(()),
        false => Err(format!("refused: answers are taken only from this server's own page, not from {origin:?}")),
    }
}

/// Whether `offered` is `expected`, in constant time.
fn same_token(offered: &str, expected: &str) -> bool {
    offered.len() == expected.len() && bool::from(offered.as_bytes().ct_eq(expected.as_bytes()))
}

/// `POST /web/asks/{id}`: a person's answer from the page.
pub async fn answer(State(web): State<Arc<Web>>, Path(id): Path<u64>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(expected) = web.csrf_of(&headers) else { return super::signed_out() };
    if let Err(why) = own_origin(&headers) {
        return refused(StatusCode::FORBIDDEN, why);
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("application/json"));
    if !json {
        return refused(StatusCode::UNSUPPORTED_MEDIA_TYPE, "an answer is sent as application/json".into());
    }
    let asked: Answering = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            let why = format!(
                "the answer does not read ({e}); send {{\"decision\": \"allow\"|\"deny\", \"scope\": \"once\"|\"session\"|\"agent\", \"csrf\": …}}"
            );
            return refused(StatusCode::BAD_REQUEST, why);
        }
    };
    match asked.csrf.as_deref() {
        None | Some("") => {
            return refused(StatusCode::FORBIDDEN, "refused: the answer carries no CSRF token; reload the page".into());
        }
        Some(t) if !same_token(t, &expected) => {
            return refused(StatusCode::FORBIDDEN, "refused: the CSRF token is wrong; reload the page".into());
        }
        Some(_) => {}
    }
    let why = asked.why.map(|w| w.trim().chars().take(MAX_WHY).collect::<String>()).filter(|w| !w.is_empty());
    let asks = web.terminal.governor().asks.clone();
    let answered = tokio::task::spawn_blocking(move || {
        let answer = Answer {
            decision: asked.decision,
            scope: match asked.decision {
                Decision::Allow => asked.scope,
                Decision::Deny => Scope::Once,
            },
            by: crate::people::asks::me(),
            via: Via::Web,
            why: match asked.decision {
                Decision::Allow => None,
                Decision::Deny => why,
            },
            ms: dtmcp_core::now_ms(),
        };
        asks.answer(id, &answer).map(|()| answer.by_whom())
    })
    .await;
    match answered {
        Ok(Ok(by_whom)) => Json(json!({ "answered": true, "id": id, "by_whom": by_whom })).into_response(),
        Ok(Err(AnswerError::Answered { answer, .. })) => {
            let by_whom = answer.by_whom();
            let body = json!({ "answered": false, "id": id, "by_whom": by_whom, "error": format!("ask {id} was answered first: {by_whom}") });
            (StatusCode::CONFLICT, Json(body)).into_response()
        }
        Ok(Err(e @ AnswerError::Unknown(_))) => refused(StatusCode::NOT_FOUND, e.to_string()),
        Ok(Err(e)) => refused(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Whether `path` is an ask's answer route (`/web/asks/N`).
pub fn is_answer_path(path: &str) -> bool {
    path.strip_prefix("/web/asks/").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_the_servers_own_origin_may_answer() {
        assert!(own_origin(&headers(&[("host", "127.0.0.1:8766"), ("origin", "http://127.0.0.1:8766")])).is_ok());
        assert!(own_origin(&headers(&[("host", "box.lan"), ("origin", "https://box.lan")])).is_ok());
        for pairs in [
            &[("host", "127.0.0.1:8766")][..],
            &[("host", "127.0.0.1:8766"), ("origin", "null")],
            &[("host", "127.0.0.1:8766"), ("origin", "http://localhost:8766")],
            &[("host", "127.0.0.1:8766"), ("origin", "http://127.0.0.1:8767")],
            &[("origin", "http://127.0.0.1:8766")],
        ] {
            assert!(own_origin(&headers(pairs)).is_err(), "{pairs:?}");
        }
    }

    #[test]
    fn tokens_match_exactly() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abd", "abc"));
        assert!(!same_token("ab", "abc"));
        assert!(!same_token("", "abc"));
    }

    #[test]
    fn answer_paths_are_numbers() {
        assert!(is_answer_path("/web/asks/7"));
        for p in ["/web/asks/", "/web/asks", "/web/asks/7/x", "/web/asks/x", "/web/asks/-1"] {
            assert!(!is_answer_path(p), "{p}");
        }
    }

    #[test]
    fn an_answer_reads_with_defaults() {
        let a: Answering = serde_json::from_str(r#"{"decision":"allow","csrf":"t"}"#).expect("reads");
        assert_eq!((a.decision, a.scope), (Decision::Allow, Scope::Once));
        let a: Answering = serde_json::from_str(r#"{"decision":"allow","scope":"agent"}"#).expect("reads");
        assert_eq!((a.scope, a.csrf), (Scope::Agent, None));
        assert!(serde_json::from_str::<Answering>(r#"{"decision":"maybe"}"#).is_err());
    }
}

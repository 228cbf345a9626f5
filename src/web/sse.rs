//! The two event streams (server-sent events) the page listens to: the
//! overview's and one session's.
//!
//! # Resuming
//! Every event's id is the whole position of the browser after it, so a
//! browser that reconnects (`Last-Event-ID`) gets exactly what it lacks:
//!
//! - overview: `EPOCH-SEQ`. Cards changed after `SEQ` of the same feed
//!   life (`EPOCH`) come again, and the sessions dropped since; a browser
//!   of another life, or too far behind, gets every card afresh
//!   (`reset`).
//!   A feed outlives its last stream by a minute ([`super::feeds::LINGER`]),
//!   so a browser that comes back within it resumes exactly.
//! - session: `FRAME-CARD-REGIONS`. The screen is state, and `FRAME` names
//!   what it showed (a hash of it): it is sent whole unless the browser
//!   has the current picture; the card likewise. Regions are a log:
//!   `REGIONS` is a byte offset in `regions.jsonl` (append-only, the
//!   logger its only writer), and the records after it are sent, each
//!   once; so a reconnect neither loses nor repeats a command's start or
//!   end, even after the server restarted.
//!
//! # Cost
//! A stream holds its feed's receiver, the last frame it sent, and the
//! events of one snapshot at most: a browser that stops reading holds
//! hyper's write buffer and nothing more, and skips the snapshots it did
//! not read. Keep-alive comments every 20 s are the only timer.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures_util::Stream;
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;

use super::card::Card;
use super::feeds::{Hold, Hub, OverviewFeed, OverviewSnapshot, SessionFeed, SessionSnapshot};
use super::hide::Hide;
use super::screen::Frame;
use crate::agents::journal::Journal;
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::store::files;

/// How often an idle stream says it is alive.
const KEEP_ALIVE: Duration = Duration::from_secs(20);
/// How many regions a page starts with.
pub const FIRST_REGIONS: usize = 200;
/// The most bytes of `regions.jsonl` one catch-up reads; further behind,
/// the browser starts over.
const MAX_CATCH_UP: u64 = 2 << 20;

/// A stream of events for axum.
pub type Events = Sse<KeepAliveStream<futures_util::stream::BoxStream<'static, Result<Event, Infallible>>>>;

pub(super) fn sse(stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> Events {
    Sse::new(Box::pin(stream) as futures_util::stream::BoxStream<'static, _>)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// An event of `kind` with `data` as JSON and id `id`.
pub(super) fn event(kind: &str, data: &impl Serialize, id: &str) -> Event {
    Event::default().event(kind).id(id).json_data(data).unwrap_or_else(|_| Event::default().comment("unencodable"))
}

/// Where an overview browser is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OverviewCursor {
    epoch: u64,
    seq: u64,
}

fn parse_numbers<const N: usize>(id: &str) -> Option<[u64; N]> {
    let parts: Vec<u64> = id.split('-').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    parts.try_into().ok()
}

/// What a browser at `at` lacks of `snap`: `None` when nothing.
fn overview_delta(snap: &OverviewSnapshot, at: Option<OverviewCursor>) -> Option<serde_json::Value> {
    let since = at.filter(|c| c.epoch == snap.epoch && c.seq >= snap.removed_floor).map(|c| c.seq);
    if since == Some(snap.seq) {
        return None;
    }
    let newer = |seq: u64| since.is_none_or(|s| seq > s);
    let cards: Vec<&Card> = snap.cards.values().filter(|(_, seq)| newer(*seq)).map(|(c, _)| &**c).collect();
    let removed: Vec<&String> = match since {
        Some(s) => snap.removed.iter().filter(|(_, seq)| *seq > s).map(|(n, _)| n).collect(),
        None => Vec::new(),
    };
    Some(json!({ "reset": since.is_none(), "cards": cards, "removed": removed }))
}

/// The overview's stream, resuming after `last_id` when given.
pub async fn overview(hub: &Arc<Hub>, last_id: Option<&str>) -> Result<Events, String> {
    let feed = hub.overview().await?;
    let rx = feed.rx.clone();
    let at = last_id.and_then(parse_numbers::<2>).map(|[epoch, seq]| OverviewCursor { epoch, seq });
    struct State {
        _feed: Hold<OverviewFeed>,
        rx: watch::Receiver<Arc<OverviewSnapshot>>,
        at: Option<OverviewCursor>,
    }
    let state = State { _feed: Hold::new(feed), rx, at };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            let snap = st.rx.borrow_and_update().clone();
            if let Some(data) = overview_delta(&snap, st.at) {
                st.at = Some(OverviewCursor { epoch: snap.epoch, seq: snap.seq });
                let id = format!("{}-{}", snap.epoch, snap.seq);
                return Some((Ok(event("overview", &data, &id)), st));
            }
            st.rx.changed().await.ok()?;
        }
    });
    Ok(sse(stream))
}

/// Where a session browser is: the picture and card it has, and how far
/// it read `regions.jsonl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SessionCursor {
    frame: u64,
    card: u64,
    regions: u64,
}

impl SessionCursor {
    fn id(&self) -> String {
        format!("{}-{}-{}", self.frame, self.card, self.regions)
    }
}

/// A region as the timeline shows it.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct RegionItem {
    /// Its number.
    pub id: u64,
    /// `command` or `input`.
    pub kind: RegionKind,
    /// The command line.
    pub command: String,
    /// Its exit status, once finished.
    pub exit: Option<i32>,
    /// When it started, ms since the epoch.
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// The first line of its output.
    pub first_line: u64,
    /// The last line of its output, once finished (below `first_line`: none).
    pub last_line: Option<u64>,
    /// The agent that typed it.
    pub by: Option<String>,
    /// Who allowed it, when the policy asked a person ("allowed by alice (web)").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
    /// The host its shell runs on.
    pub host: String,
    /// How deep in nested shells.
    pub depth: u32,
}

impl RegionItem {
    /// The item, with who allowed it from `allowed` (region id → who).
    pub fn allowed_by(mut self, allowed: &std::collections::HashMap<u64, String>) -> RegionItem {
        self.allowed = allowed.get(&self.id).cloned();
        self
    }

    /// The item of `r`, with its typist from `by`.
    pub fn new(r: &Region, by: &std::collections::HashMap<u64, String>) -> RegionItem {
        let last_line = r.end.map(|end| if end.bytes > 0 { end.line.0 } else { end.line.0.saturating_sub(1) });
        RegionItem {
            id: r.id.0,
            kind: r.kind,
            command: r.command.clone(),
            exit: r.exit,
            started_ms: r.started_ms,
            ended_ms: r.ended_ms,
            first_line: r.start.line.0,
            last_line,
            by: by.get(&r.id.0).cloned(),
            allowed: None,
            host: r.host.clone(),
            depth: r.depth,
        }
    }
}

/// The region records in bytes `from..to` of `regions.jsonl` (whole
/// lines), in the order written.
fn records(path: &Path, from: u64, to: u64) -> Vec<Region> {
    let Ok(mut file) = std::fs::File::open(path) else { return Vec::new() };
    if to <= from || file.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    std::io::BufReader::new(file.take(to - from))
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Region>(&l).ok())
        .collect()
}

/// The latest record of each of the last `max` regions in bytes `..to`,
/// and whether earlier ones exist.
pub fn last_regions(path: &Path, to: u64, max: usize) -> (Vec<Region>, bool) {
    let mut by_id: std::collections::BTreeMap<u64, Region> = Default::default();
    for r in records(path, 0, to) {
        by_id.insert(r.id.0, r);
    }
    let more = by_id.len() > max;
    let skip = by_id.len().saturating_sub(max);
    (by_id.into_values().skip(skip).collect(), more)
}

/// A session stream's state between events.
struct SessionStream {
    _feed: Hold<SessionFeed>,
    rx: watch::Receiver<Arc<SessionSnapshot>>,
    /// Where the browser is; `None` until its first events.
    at: Option<SessionCursor>,
    /// The frame last sent on this connection, to send only changed rows.
    sent: Option<Arc<Frame>>,
    /// Events made and not yet sent.
    queue: VecDeque<Event>,
    /// Who typed which region, for the regions' records.
    journal: Arc<Journal>,
    name: String,
    /// Hides the session's secrets in the command lines sent.
    hide: Hide,
}

impl SessionStream {
    /// Queues what the browser lacks of `snap`.
    fn catch_up(&mut self, snap: &SessionSnapshot) {
        let resumed = self.at;
        let mut at = resumed.unwrap_or_default();
        if let Some(frame) = &snap.frame
            && (resumed.is_none() || at.frame != frame.id)
        {
            // Only rows that changed, when this connection sent the frame
            // the browser has; else the whole screen.
            let before = self.sent.as_deref().filter(|f| resumed.is_some_and(|c| c.frame == f.id));
            at.frame = frame.id;
            self.queue.push_back(event("screen", &frame.message(before), &at.id()));
            self.sent = Some(frame.clone());
        }
        if resumed.is_none() || at.card != snap.card_id {
            at.card = snap.card_id;
            self.queue.push_back(event("card", &*snap.card, &at.id()));
        }
        self.regions(snap, &mut at, resumed.is_none());
        self.at = Some(at);
    }

    /// Queues the region records the browser lacks.
    fn regions(&mut self, snap: &SessionSnapshot, at: &mut SessionCursor, first: bool) {
        let end = snap.regions_end;
        if !first && at.regions == end {
            return;
        }
        let path = snap.dir.join(files::REGIONS);
        let by = self.journal.all_starters(&self.name);
        let allowed = self.journal.all_allowed(&self.name);
        let reset = first || at.regions > end || end - at.regions > MAX_CATCH_UP;
        let (list, more) = match reset {
            true => last_regions(&path, end, FIRST_REGIONS),
            false => (records(&path, at.regions, end), false),
        };
        at.regions = end;
        let mut items: Vec<RegionItem> = list.iter().map(|r| RegionItem::new(r, &by).allowed_by(&allowed)).collect();
        items.iter_mut().for_each(|i| i.command = self.hide.text(&i.command));
        let data = json!({ "reset": reset, "more_before": more, "regions": items });
        self.queue.push_back(event("regions", &data, &at.id()));
    }
}

/// Session `name`'s stream, resuming after `last_id` when given.
pub async fn session(
    hub: &Arc<Hub>,
    name: &str,
    journal: Arc<Journal>,
    hide: Hide,
    last_id: Option<&str>,
) -> Result<Events, String> {
    let feed = hub.session(name).await?;
    let rx = feed.rx.clone();
    let at = last_id.and_then(parse_numbers::<3>).map(|[frame, card, regions]| SessionCursor { frame, card, regions });
    let state = SessionStream {
        _feed: Hold::new(feed),
        rx,
        at,
        sent: None,
        queue: VecDeque::new(),
        journal,
        name: name.to_string(),
        hide,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(e) = st.queue.pop_front() {
                return Some((Ok(e), st));
            }
            let snap = st.rx.borrow_and_update().clone();
            st.catch_up(&snap);
            if st.queue.is_empty() {
                st.rx.changed().await.ok()?;
            }
        }
    });
    Ok(sse(stream))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::web::card::State;

    fn card(name: &str) -> Arc<Card> {
        Arc::new(Card {
            name: name.into(),
            open: true,
            program: "bash".into(),
            state: State::Idle,
            says: String::new(),
            prompt: None,
            last: None,
            agents: vec![],
            typing_now: None,
            people: vec![],
            host: None,
            user: None,
            tail: vec![],
            attach: None,
            size: None,
            created_ms: 0,
            last_output_ms: 0,
            listening: vec![],
            jobs: vec![],
            unseen: vec![],
        })
    }

    fn snap() -> OverviewSnapshot {
        let cards: BTreeMap<String, (Arc<Card>, u64)> =
            [("a".to_string(), (card("a"), 3)), ("b".to_string(), (card("b"), 5))].into();
        OverviewSnapshot { epoch: 9, seq: 6, cards, removed: [("c".to_string(), 6)].into(), removed_floor: 2 }
    }

    fn names(v: &serde_json::Value) -> Vec<&str> {
        v["cards"].as_array().expect("cards").iter().filter_map(|c| c["name"].as_str()).collect()
    }

    #[test]
    fn an_overview_browser_gets_what_changed_since_its_id() {
        let s = snap();
        let fresh = overview_delta(&s, None).expect("all");
        assert_eq!((fresh["reset"].as_bool(), names(&fresh)), (Some(true), vec!["a", "b"]));
        let behind = overview_delta(&s, Some(OverviewCursor { epoch: 9, seq: 4 })).expect("some");
        assert_eq!((behind["reset"].as_bool(), names(&behind)), (Some(false), vec!["b"]));
        assert_eq!(behind["removed"], json!(["c"]));
        assert!(overview_delta(&s, Some(OverviewCursor { epoch: 9, seq: 6 })).is_none(), "nothing twice");
        let other_life = overview_delta(&s, Some(OverviewCursor { epoch: 8, seq: 6 })).expect("all");
        assert_eq!(other_life["reset"].as_bool(), Some(true));
        let too_far = overview_delta(&s, Some(OverviewCursor { epoch: 9, seq: 1 })).expect("all");
        assert_eq!(too_far["reset"].as_bool(), Some(true));
    }

    #[test]
    fn ids_parse_back() {
        assert_eq!(parse_numbers::<2>("12-34"), Some([12, 34]));
        assert_eq!(parse_numbers::<4>("1-2-3-4"), Some([1, 2, 3, 4]));
        assert_eq!(parse_numbers::<4>("1-2-3"), None);
        assert_eq!(parse_numbers::<2>("a-b"), None);
        let c = SessionCursor { frame: 2, card: 3, regions: 40 };
        assert_eq!(parse_numbers::<3>(&c.id()), Some([2, 3, 40]));
    }

    #[test]
    fn region_records_are_read_by_byte_range_and_the_latest_wins() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join(files::REGIONS);
        let open = Region { id: dtmcp_core::types::RegionId(1), command: "make".into(), ..Region::default() };
        let closed = Region { exit: Some(2), ..open.clone() };
        let other = Region { id: dtmcp_core::types::RegionId(2), command: "ls".into(), ..Region::default() };
        let mut text = String::new();
        let mut ends = Vec::new();
        for r in [&open, &closed, &other] {
            text.push_str(&serde_json::to_string(r).expect("json"));
            text.push('\n');
            ends.push(text.len() as u64);
        }
        std::fs::write(&path, &text).expect("write");
        assert_eq!(records(&path, ends[0], ends[1]), vec![closed.clone()]);
        assert_eq!(records(&path, ends[2], ends[2]), vec![]);
        let (last, more) = last_regions(&path, ends[2], 1);
        assert_eq!((last, more), (vec![other], true));
        let (all, more) = last_regions(&path, ends[1], 5);
        assert_eq!((all, more), (vec![closed], false));
    }
}

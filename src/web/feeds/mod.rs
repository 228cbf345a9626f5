//! The live state browsers watch: one feed per watched session (its
//! screen, card and timeline) and one for the overview (every card), each
//! kept by one task however many browsers watch it.
//!
//! A feed's task sleeps until the session's files or tmux say something
//! changed (see [`super::changes`], [`super::tmux_events`]), then looks
//! again, no more often than its pace: a screen at most every
//! [`FRAME_GAP`] (10 frames a second), a card at most every
//! [`CARD_GAP`]. A card is looked at once more [`SETTLE`] after output
//! stops, because a program that just printed its prompt may not have
//! reached its `read` yet when the output is seen, and a screen that
//! could not be captured is tried again a second later. Otherwise nothing
//! runs on a timer while nothing changes.
//!
//! The task publishes whole snapshots into a `tokio::sync::watch`
//! channel, which holds only the latest: a browser that reads slowly
//! skips snapshots rather than queueing them, so nothing grows with a
//! slow or stalled reader. Each snapshot carries the numbers its stream
//! events are identified by (see [`super::sse`]). A feed lives while some
//! stream holds it; the last one to go ends its task.

mod overview;
mod session;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::card::Card;
use super::changes::Changes;
use super::screen::Frame;
use super::tmux_events::TmuxEvents;
use crate::tmux::PaneInfo;
use crate::tools::Terminal;
use overview::OverviewWatcher;
use session::SessionWatcher;
pub use session::{card_id, complete_len};

/// The least time between two frames of one screen.
pub const FRAME_GAP: Duration = Duration::from_millis(100);
/// The least time between two looks at one card.
pub const CARD_GAP: Duration = Duration::from_millis(400);
/// How long after a change a card is looked at once more.
pub const SETTLE: Duration = Duration::from_millis(600);
/// How long a feed outlives its last stream, for a browser that comes
/// back (a reconnect, a page reloaded, a step back to the overview).
pub const LINGER: Duration = Duration::from_secs(60);
/// How many closed sessions the overview lists.
pub const RECENTLY_CLOSED: usize = 12;
/// How many removals the overview remembers for resuming streams.
const REMOVALS_KEPT: usize = 256;
/// How many cards are made at once.
const CARDS_AT_ONCE: usize = 8;

/// What the session page shows, as of one moment.
#[derive(Debug)]
pub struct SessionSnapshot {
    /// The screen, while the pane lives.
    pub frame: Option<Arc<Frame>>,
    /// The session's card.
    pub card: Arc<Card>,
    /// A hash of the card: equal cards, equal ids (as for frames).
    pub card_id: u64,
    /// The bytes of whole records in `regions.jsonl`.
    pub regions_end: u64,
    /// The session's directory.
    pub dir: PathBuf,
}

/// Every card, as of one moment.
#[derive(Debug, Default)]
pub struct OverviewSnapshot {
    /// Which life of the feed this is.
    pub epoch: u64,
    /// Bumped at every change.
    pub seq: u64,
    /// Each session's card and the `seq` at which it last changed.
    pub cards: BTreeMap<String, (Arc<Card>, u64)>,
    /// Sessions dropped from the list, with the `seq` of their going.
    pub removed: VecDeque<(String, u64)>,
    /// Removals at or before this `seq` are forgotten: a stream behind it
    /// starts over.
    pub removed_floor: u64,
}

/// A session's feed; the last holder to drop it ends its task.
pub struct SessionFeed {
    /// The snapshots.
    pub rx: watch::Receiver<Arc<SessionSnapshot>>,
    task: tokio::task::JoinHandle<()>,
}

/// The overview's feed.
pub struct OverviewFeed {
    /// The snapshots.
    pub rx: watch::Receiver<Arc<OverviewSnapshot>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SessionFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Drop for OverviewFeed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A stream's hold on a feed. When the stream ends the feed is held
/// [`LINGER`] longer, then let go (and ended, if nobody else holds it).
pub struct Hold<T: Send + Sync + 'static>(Option<Arc<T>>);

impl<T: Send + Sync + 'static> Hold<T> {
    /// Holds `feed`.
    pub fn new(feed: Arc<T>) -> Hold<T> {
        Hold(Some(feed))
    }
}

impl<T: Send + Sync + 'static> Drop for Hold<T> {
    fn drop(&mut self) {
        if let (Some(feed), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                tokio::time::sleep(LINGER).await;
                drop(feed);
            });
        }
    }
}

/// The feeds of one server.
pub struct Hub {
    terminal: Terminal,
    /// Live feeds by session name (dead entries are replaced on use).
    sessions: tokio::sync::Mutex<HashMap<String, Weak<SessionFeed>>>,
    overview: tokio::sync::Mutex<Weak<OverviewFeed>>,
    /// The notification client, shared by the feeds that hold it.
    tmux_client: std::sync::Mutex<Weak<TmuxEvents>>,
    /// Bumped at every tmux notification of interest.
    tmux_told: watch::Sender<u64>,
    /// The next feed's epoch.
    epochs: AtomicU64,
}

impl Hub {
    /// The feeds of `terminal`'s sessions; none run until asked for.
    pub fn new(terminal: Terminal) -> Hub {
        Hub {
            terminal,
            sessions: Default::default(),
            overview: Default::default(),
            tmux_client: Default::default(),
            tmux_told: watch::Sender::new(0),
            // Epochs of one start never meet those of another: they start
            // at the clock.
            epochs: AtomicU64::new(crate::config::now_ms()),
        }
    }

    /// A number no other feed of this server had.
    fn epoch(&self) -> u64 {
        self.epochs.fetch_add(1, Ordering::Relaxed)
    }

    /// The notification client, started when none runs; `None` while tmux
    /// has no server or no hidden session to attach to.
    fn tmux_events(&self) -> Option<Arc<TmuxEvents>> {
        let mut slot = self.tmux_client.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = slot.upgrade().filter(|c| c.alive()) {
            return Some(client);
        }
        let client = Arc::new(TmuxEvents::start(&self.terminal.sessions().tmux, self.tmux_told.clone()).ok()?);
        *slot = Arc::downgrade(&client);
        Some(client)
    }

    /// The feed of session `name` (open or closed), started if none runs.
    pub async fn session(self: &Arc<Self>, name: &str) -> Result<Arc<SessionFeed>, String> {
        let logs = self.terminal.sessions().open_logs(name).await.map_err(|e| e.to_string())?;
        let mut feeds = self.sessions.lock().await;
        if let Some(feed) = feeds.get(name).and_then(Weak::upgrade) {
            return Ok(feed);
        }
        feeds.retain(|_, f| f.strong_count() > 0);
        let mut changes = Changes::new().map_err(|e| format!("cannot watch for changes: {e}"))?;
        changes.watch_session(name, &logs.dir).map_err(|e| format!("cannot watch {}: {e}", logs.dir.display()))?;
        let mut watcher = SessionWatcher {
            hub: self.clone(),
            name: name.to_string(),
            dir: logs.dir.clone(),
            pane: None,
            tmux: self.tmux_events(),
        };
        let first = watcher.snapshot(None, None).await;
        let (tx, rx) = watch::channel(Arc::new(first));
        let task = tokio::spawn(watcher.run(changes, tx));
        let feed = Arc::new(SessionFeed { rx, task });
        feeds.insert(name.to_string(), Arc::downgrade(&feed));
        Ok(feed)
    }

    /// The overview's feed, started if none runs.
    pub async fn overview(self: &Arc<Self>) -> Result<Arc<OverviewFeed>, String> {
        let mut slot = self.overview.lock().await;
        if let Some(feed) = slot.upgrade() {
            return Ok(feed);
        }
        let cfg = &self.terminal.sessions().cfg;
        let mut changes = Changes::new().map_err(|e| format!("cannot watch for changes: {e}"))?;
        let listed =
            changes.watch_list(&cfg.sessions_dir()).and_then(|()| changes.watch_agents(&cfg.home.join("agents")));
        listed.map_err(|e| format!("cannot watch {}: {e}", cfg.sessions_dir().display()))?;
        let mut watcher = OverviewWatcher {
            hub: self.clone(),
            snapshot: OverviewSnapshot { epoch: self.epoch(), ..Default::default() },
            live: HashMap::new(),
            tmux: None,
        };
        watcher.relist(&mut changes).await;
        let (tx, rx) = watch::channel(Arc::new(watcher.copy()));
        let task = tokio::spawn(watcher.run(changes, tx));
        let feed = Arc::new(OverviewFeed { rx, task });
        *slot = Arc::downgrade(&feed);
        Ok(feed)
    }

    /// The card of `name` now, and its pane when it lives.
    async fn card(&self, name: &str, dir: &Path, panes: &[PaneInfo]) -> (Card, Option<PaneInfo>) {
        match panes.iter().find(|p| p.session_name == name) {
            Some(pane) => (Card::live(&self.terminal, pane).await, Some(pane.clone())),
            None => {
                let hide = crate::web::hide::Hide::new(&self.terminal, name);
                (Card::closed(self.terminal.journal(), name, dir, &hide), None)
            }
        }
    }

    /// Every live pane that is a session (none when tmux cannot say).
    async fn panes(&self) -> Vec<PaneInfo> {
        self.terminal.sessions().panes().await.unwrap_or_default()
    }
}

/// When a piece of work is due: marked by changes, done no more often
/// than its gap allows.
#[derive(Debug)]
struct Pace {
    gap: Duration,
    last: Option<Instant>,
    due: bool,
}

impl Pace {
    fn new(gap: Duration) -> Pace {
        Pace { gap, last: None, due: false }
    }

    fn mark(&mut self) {
        self.due = true;
    }

    /// When the work may be done, if it is due.
    fn deadline(&self) -> Option<Instant> {
        self.due.then(|| self.last.map_or_else(Instant::now, |l| l + self.gap))
    }

    fn ready(&self, now: Instant) -> bool {
        self.due && self.last.is_none_or(|l| now >= l + self.gap)
    }

    fn done(&mut self, now: Instant) {
        self.due = false;
        self.last = Some(now);
    }
}

/// Sleeps until the earliest of `deadlines`, or forever when there is none.
async fn until(deadlines: &[Option<Instant>]) {
    match deadlines.iter().flatten().min() {
        Some(&d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pace_keeps_its_gap() {
        let mut p = Pace::new(Duration::from_millis(100));
        let t0 = Instant::now();
        assert!(!p.ready(t0), "nothing due");
        p.mark();
        assert!(p.ready(t0), "the first is at once");
        p.done(t0);
        p.mark();
        assert!(!p.ready(t0 + Duration::from_millis(50)));
        assert!(p.ready(t0 + Duration::from_millis(100)));
        assert_eq!(p.deadline(), Some(t0 + Duration::from_millis(100)));
    }
}

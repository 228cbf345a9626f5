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
//! reached its `read` yet when the output is seen. Nothing runs on a
//! timer while nothing changes.
//!
//! The task publishes whole snapshots into a `tokio::sync::watch`
//! channel, which holds only the latest: a browser that reads slowly
//! skips snapshots rather than queueing them, so nothing grows with a
//! slow or stalled reader. Each snapshot carries the numbers its stream
//! events are identified by (see [`super::sse`]). A feed lives while some
//! stream holds it; the last one to go ends its task.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::card::Card;
use super::changes::{Change, Changes};
use super::screen::{self, Frame};
use super::tmux_events::TmuxEvents;
use crate::tmux::PaneInfo;
use crate::tools::Terminal;
use dtmcp_core::store::files;

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
            None => (Card::closed(&self.terminal.sessions().cfg.home, name, dir), None),
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

/// The task behind one session's feed.
struct SessionWatcher {
    hub: Arc<Hub>,
    name: String,
    dir: PathBuf,
    /// The pane, as last listed; `None` once closed.
    pane: Option<PaneInfo>,
    /// Held so that the notification client runs while this feed does.
    tmux: Option<Arc<TmuxEvents>>,
}

impl SessionWatcher {
    /// A snapshot made now, keeping `frame` and `card` when they did not change.
    async fn snapshot(&mut self, frame: Option<Arc<Frame>>, card: Option<Arc<Card>>) -> SessionSnapshot {
        let panes = self.hub.panes().await;
        let (new_card, pane) = self.hub.card(&self.name, &self.dir, &panes).await;
        self.pane = pane;
        let card = match card {
            Some(old) if *old == new_card => old,
            _ => Arc::new(new_card),
        };
        let frame = self.capture(frame).await;
        SessionSnapshot {
            frame,
            card_id: card_id(&card),
            card,
            regions_end: complete_len(&self.dir.join(files::REGIONS)),
            dir: self.dir.clone(),
        }
    }

    /// The screen now, or `old` when it shows the same (or cannot be had).
    async fn capture(&mut self, old: Option<Arc<Frame>>) -> Option<Arc<Frame>> {
        let pane = self.pane.as_ref().filter(|p| !p.pane_dead)?;
        let tmux = &self.hub.terminal.sessions().tmux;
        match screen::capture(tmux, pane.pane_id.as_str()).await {
            Ok(frame) if old.as_ref().is_some_and(|o| o.id == frame.id) => old,
            Ok(frame) => Some(Arc::new(frame)),
            Err(_) => old,
        }
    }

    async fn run(mut self, mut changes: Changes, tx: watch::Sender<Arc<SessionSnapshot>>) {
        let mut told = self.hub.tmux_told.subscribe();
        let (mut screen, mut card) = (Pace::new(FRAME_GAP), Pace::new(CARD_GAP));
        // The second look after changes, and whether the look now due is it.
        let (mut settle, mut settling) = (None::<Instant>, false);
        let mut regions = false;
        loop {
            let deadlines = [screen.deadline(), card.deadline(), settle];
            tokio::select! {
                got = changes.next() => match got {
                    Ok(list) => {
                        for change in list {
                            match change_file(&change) {
                                Some(files::RAW) => screen.mark(),
                                Some(files::REGIONS) => regions = true,
                                _ => {}
                            }
                            card.mark();
                            settling = false;
                        }
                    }
                    Err(_) => return,
                },
                r = told.changed() => {
                    if r.is_err() {
                        return;
                    }
                    screen.mark();
                    card.mark();
                    settling = false;
                }
                _ = until(&deadlines) => {}
            }
            let now = Instant::now();
            if settle.is_some_and(|s| s <= now) {
                settle = None;
                settling = !card.due;
                card.mark();
            }
            let last = tx.borrow().clone();
            let mut next = None;
            if card.ready(now) {
                card.done(now);
                next = Some(self.snapshot(last.frame.clone(), Some(last.card.clone())).await);
                if !settling {
                    settle = Some(Instant::now() + SETTLE);
                }
                settling = false;
                screen.done(Instant::now());
            } else if screen.ready(now) {
                screen.done(now);
                let frame = self.capture(last.frame.clone()).await;
                next = Some(SessionSnapshot { frame, ..self.copy(&last) });
            } else if regions {
                next = Some(self.copy(&last));
            }
            regions = false;
            if let Some(mut snap) = next {
                snap.regions_end = complete_len(&self.dir.join(files::REGIONS));
                if !same_session(&snap, &last) {
                    tx.send_replace(Arc::new(snap));
                }
            }
            if self.tmux.as_ref().is_none_or(|t| !t.alive()) && self.pane.is_some() {
                self.tmux = self.hub.tmux_events();
            }
        }
    }

    fn copy(&self, s: &SessionSnapshot) -> SessionSnapshot {
        SessionSnapshot {
            frame: s.frame.clone(),
            card: s.card.clone(),
            card_id: s.card_id,
            regions_end: s.regions_end,
            dir: s.dir.clone(),
        }
    }
}

/// Whether two snapshots show the same.
fn same_session(a: &SessionSnapshot, b: &SessionSnapshot) -> bool {
    let frames = match (&a.frame, &b.frame) {
        (Some(x), Some(y)) => x.id == y.id,
        (None, None) => true,
        _ => false,
    };
    frames && a.card_id == b.card_id && a.regions_end == b.regions_end
}

/// A hash of what a card says.
pub fn card_id(card: &Card) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    serde_json::to_string(card).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// The task behind the overview's feed.
struct OverviewWatcher {
    hub: Arc<Hub>,
    snapshot: OverviewSnapshot,
    /// The live sessions' names, as last listed, with their directories.
    live: HashMap<String, PathBuf>,
    /// Held so that the notification client runs while the overview does.
    tmux: Option<Arc<TmuxEvents>>,
}

impl OverviewWatcher {
    fn copy(&self) -> OverviewSnapshot {
        let s = &self.snapshot;
        OverviewSnapshot {
            epoch: s.epoch,
            seq: s.seq,
            cards: s.cards.clone(),
            removed: s.removed.clone(),
            removed_floor: s.removed_floor,
        }
    }

    /// Lists the sessions again: the live ones, and the most recently
    /// closed; watches the live ones' directories; makes the cards of
    /// those new to the list, drops those gone from it.
    async fn relist(&mut self, changes: &mut Changes) -> Vec<String> {
        let cfg = self.hub.terminal.sessions().cfg.clone();
        let panes = self.hub.panes().await;
        let live: HashMap<String, PathBuf> =
            panes.iter().map(|p| (p.session_name.clone(), cfg.session_dir(&p.session_name))).collect();
        for (name, dir) in &live {
            if !changes.watches(name) {
                let _ = changes.watch_session(name, dir);
            }
        }
        for name in self.live.keys().filter(|n| !live.contains_key(*n)) {
            changes.unwatch_session(name);
        }
        let closed = recently_closed(&cfg.sessions_dir(), &live, RECENTLY_CLOSED);
        let wanted: HashSet<&String> = live.keys().chain(closed.iter()).collect();
        let gone: Vec<String> = self.snapshot.cards.keys().filter(|n| !wanted.contains(n)).cloned().collect();
        for name in gone {
            self.snapshot.seq += 1;
            self.snapshot.cards.remove(&name);
            self.snapshot.removed.push_back((name, self.snapshot.seq));
            if self.snapshot.removed.len() > REMOVALS_KEPT
                && let Some((_, seq)) = self.snapshot.removed.pop_front()
            {
                self.snapshot.removed_floor = seq;
            }
        }
        // New to the list, or moved between open and closed.
        let fresh: Vec<String> = wanted
            .into_iter()
            .filter(|n| self.snapshot.cards.get(*n).is_none_or(|(c, _)| c.open != live.contains_key(*n)))
            .cloned()
            .collect();
        self.live = live;
        if self.tmux.as_ref().is_none_or(|t| !t.alive()) && !self.live.is_empty() {
            self.tmux = self.hub.tmux_events();
        }
        self.refresh(&fresh, &panes).await;
        fresh
    }

    /// Makes the cards of `names` again; a card that changed gets the next `seq`.
    async fn refresh(&mut self, names: &[String], panes: &[PaneInfo]) {
        let sessions_dir = self.hub.terminal.sessions().cfg.sessions_dir();
        for chunk in names.chunks(CARDS_AT_ONCE) {
            let made = futures_util::future::join_all(chunk.iter().map(|name| {
                let dir = sessions_dir.join(name);
                let hub = self.hub.clone();
                async move { (name.clone(), hub.card(name, &dir, panes).await.0) }
            }))
            .await;
            for (name, card) in made {
                let same = self.snapshot.cards.get(&name).is_some_and(|(old, _)| **old == card);
                if !same {
                    self.snapshot.seq += 1;
                    self.snapshot.cards.insert(name, (Arc::new(card), self.snapshot.seq));
                }
            }
        }
    }

    async fn run(mut self, mut changes: Changes, tx: watch::Sender<Arc<OverviewSnapshot>>) {
        let mut told = self.hub.tmux_told.subscribe();
        let (mut list, mut cards) = (Pace::new(CARD_GAP), Pace::new(CARD_GAP));
        // Cards changes made due, and those due for their second look.
        let (mut dirty, mut second) = (HashSet::<String>::new(), HashSet::<String>::new());
        let mut settle: Option<(Instant, HashSet<String>)> = None;
        loop {
            let deadlines = [list.deadline(), cards.deadline(), settle.as_ref().map(|(at, _)| *at)];
            tokio::select! {
                got = changes.next() => match got {
                    Ok(got) => {
                        for change in got {
                            match change {
                                Change::Session { name, .. } | Change::Agents { name } => {
                                    dirty.insert(name);
                                    cards.mark();
                                }
                                Change::SessionList | Change::Overflow => list.mark(),
                            }
                        }
                    }
                    Err(_) => return,
                },
                r = told.changed() => {
                    if r.is_err() {
                        return;
                    }
                    list.mark();
                    dirty.extend(self.live.keys().cloned());
                    cards.mark();
                }
                _ = until(&deadlines) => {}
            }
            let now = Instant::now();
            let before = self.snapshot.seq;
            if list.ready(now) {
                list.done(now);
                for name in self.relist(&mut changes).await {
                    dirty.remove(&name);
                }
            }
            if let Some((_, names)) = settle.take_if(|(at, _)| *at <= now) {
                second.extend(names);
                cards.mark();
            }
            if cards.ready(now) {
                cards.done(now);
                let known = |n: &String| self.snapshot.cards.contains_key(n);
                let changed: HashSet<String> = dirty.drain().filter(known).collect();
                let names: Vec<String> =
                    changed.iter().cloned().chain(second.drain().filter(|n| !changed.contains(n))).collect();
                let panes = self.hub.panes().await;
                self.refresh(&names, &panes).await;
                if !changed.is_empty() {
                    settle.get_or_insert_with(|| (Instant::now() + SETTLE, HashSet::new())).1.extend(changed);
                }
            }
            if self.snapshot.seq != before {
                tx.send_replace(Arc::new(self.copy()));
            }
        }
    }
}

/// The file a change is about, if it names one.
fn change_file(change: &Change) -> Option<&str> {
    match change {
        Change::Session { file, .. } => file.as_deref().and_then(|f| f.to_str()),
        _ => None,
    }
}

/// The names of the `max` sessions closed last (by their log's last
/// write) among the directories in `sessions_dir` not in `live`.
pub fn recently_closed(sessions_dir: &Path, live: &HashMap<String, PathBuf>, max: usize) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sessions_dir) else { return Vec::new() };
    let mut closed: Vec<(u64, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok().map(|n| (n, e.path())))
        .filter(|(n, p)| !live.contains_key(n) && !n.starts_with('.') && p.join(files::META).is_file())
        .map(|(n, p)| (super::card::modified_ms(&p.join(files::RAW)), n))
        .collect();
    closed.sort_by(|a, b| b.cmp(a));
    closed.into_iter().take(max).map(|(_, n)| n).collect()
}

/// The length of the whole lines at the start of file `path`: a record
/// being written (no newline yet) is not counted.
pub fn complete_len(path: &Path) -> u64 {
    use std::os::unix::fs::FileExt;
    let Ok(file) = std::fs::File::open(path) else { return 0 };
    let Ok(len) = file.metadata().map(|m| m.len()) else { return 0 };
    let mut end = len;
    let mut buf = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        if file.read_exact_at(chunk, start).is_err() {
            return 0;
        }
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return start + i as u64 + 1;
        }
        end = start;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_being_written_is_not_counted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("regions.jsonl");
        assert_eq!(complete_len(&path), 0);
        std::fs::write(&path, b"{\"id\":1}\n{\"id\":2}\n{\"id\"").expect("write");
        assert_eq!(complete_len(&path), 18);
        std::fs::write(&path, b"no newline at all").expect("write");
        assert_eq!(complete_len(&path), 0);
    }

    #[test]
    fn the_most_recently_closed_come_first_and_live_ones_not_at_all() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            let dir = tmp.path().join(name);
            std::fs::create_dir(&dir).expect("dir");
            std::fs::write(dir.join(files::META), "{}").expect("meta");
            let raw = std::fs::File::create(dir.join(files::RAW)).expect("raw");
            let t = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000 + i as u64);
            raw.set_modified(t).expect("mtime");
        }
        std::fs::create_dir(tmp.path().join("no-meta")).expect("dir");
        let live: HashMap<String, PathBuf> = [("b".to_string(), PathBuf::new())].into();
        assert_eq!(recently_closed(tmp.path(), &live, 5), vec!["c", "a"]);
        assert_eq!(recently_closed(tmp.path(), &HashMap::new(), 2), vec!["c", "b"]);
    }

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

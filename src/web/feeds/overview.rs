//! The task behind the overview's feed: every open and recently closed
//! session's card.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{CARD_GAP, CARDS_AT_ONCE, Hub, OverviewSnapshot, Pace, RECENTLY_CLOSED, REMOVALS_KEPT, SETTLE, until};
use crate::tmux::PaneInfo;
use crate::web::changes::{Change, Changes};
use crate::web::tmux_events::TmuxEvents;
use dtmcp_core::store::files;

/// The task behind the overview's feed.
pub(super) struct OverviewWatcher {
    pub(super) hub: Arc<Hub>,
    pub(super) snapshot: OverviewSnapshot,
    /// The live sessions' names, as last listed, with their directories.
    pub(super) live: HashMap<String, PathBuf>,
    /// Held so that the notification client runs while the overview does.
    pub(super) tmux: Option<Arc<TmuxEvents>>,
}

impl OverviewWatcher {
    pub(super) fn copy(&self) -> OverviewSnapshot {
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
    pub(super) async fn relist(&mut self, changes: &mut Changes) -> Vec<String> {
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

    pub(super) async fn run(mut self, mut changes: Changes, tx: watch::Sender<Arc<OverviewSnapshot>>) {
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
                                Change::Asks => {}
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

/// The names of the `max` sessions closed last (by their log's last
/// write) among the directories in `sessions_dir` not in `live`.
pub fn recently_closed(sessions_dir: &Path, live: &HashMap<String, PathBuf>, max: usize) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sessions_dir) else { return Vec::new() };
    let mut closed: Vec<(u64, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok().map(|n| (n, e.path())))
        .filter(|(n, p)| !live.contains_key(n) && !n.starts_with('.') && p.join(files::META).is_file())
        .map(|(n, p)| (crate::web::card::modified_ms(&p.join(files::RAW)), n))
        .collect();
    closed.sort_by(|a, b| b.cmp(a));
    closed.into_iter().take(max).map(|(_, n)| n).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

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
}

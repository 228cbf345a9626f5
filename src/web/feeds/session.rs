//! The task behind one session's feed: its screen, card and timeline end.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{CARD_GAP, FRAME_GAP, Hub, Pace, SETTLE, SessionSnapshot, until};
use crate::tmux::PaneInfo;
use crate::web::card::Card;
use crate::web::changes::{Change, Changes};
use crate::web::hide::Hide;
use crate::web::screen::{self, Frame};
use crate::web::tmux_events::TmuxEvents;
use dtmcp_core::store::files;

/// How soon a screen that could not be captured is tried again.
const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The task behind one session's feed.
pub(super) struct SessionWatcher {
    pub(super) hub: Arc<Hub>,
    pub(super) name: String,
    pub(super) dir: PathBuf,
    /// The pane, as last listed; `None` once closed.
    pub(super) pane: Option<PaneInfo>,
    /// Held so that the notification client runs while this feed does.
    pub(super) tmux: Option<Arc<TmuxEvents>>,
}

impl SessionWatcher {
    /// A snapshot made now, keeping `frame` and `card` when they did not change.
    pub(super) async fn snapshot(&mut self, frame: Option<Arc<Frame>>, card: Option<Arc<Card>>) -> SessionSnapshot {
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
        let hide = Hide::new(&self.hub.terminal, &self.name);
        match screen::capture(tmux, pane.pane_id.as_str(), &hide).await {
            Ok(frame) if old.as_ref().is_some_and(|o| o.id == frame.id) => old,
            Ok(frame) => Some(Arc::new(frame)),
            Err(_) => old,
        }
    }

    pub(super) async fn run(mut self, mut changes: Changes, tx: watch::Sender<Arc<SessionSnapshot>>) {
        let mut told = self.hub.tmux_told.subscribe();
        let (mut screen, mut card) = (Pace::new(FRAME_GAP), Pace::new(CARD_GAP));
        // The second look after changes, and whether the look now due is it.
        let (mut settle, mut settling) = (None::<Instant>, false);
        let mut regions = false;
        // When a live pane's screen could not be captured (tmux busy or
        // slow to answer), it is looked at again then, so a browser is
        // not left without a picture until the next output.
        let mut retry = None::<Instant>;
        loop {
            let blind = tx.borrow().frame.is_none() && self.pane.as_ref().is_some_and(|p| !p.pane_dead);
            if blind && retry.is_none() {
                retry = Some(Instant::now() + RETRY);
            }
            let deadlines = [screen.deadline(), card.deadline(), settle, retry];
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
            if retry.is_some_and(|r| r <= now) {
                retry = None;
                screen.mark();
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

/// The file a change is about, if it names one.
fn change_file(change: &Change) -> Option<&str> {
    match change {
        Change::Session { file, .. } => file.as_deref().and_then(|f| f.to_str()),
        _ => None,
    }
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
}

//! The stdin pump: every chunk tmux hands over is logged raw at once, then
//! cooked, indexed and published to waiters.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

use super::LoggerError;
use super::input::ToPump;
use super::state::Shared;
use crate::config::now_ms;
use crate::cook::Cooker;
use crate::region::{InputSpec, Region, RegionChange, RegionTracker};
use crate::store::{self, LineWriter, RegionLog, StoreError, files};
use crate::types::{CookEvent, LineNo, RegionId};

/// The pump's own state: the writers and the pure cores.
struct Pump {
    raw: File,
    lines: LineWriter,
    regions: RegionLog,
    cooker: Cooker,
    tracker: RegionTracker,
    events: Vec<CookEvent>,
    changes: Vec<RegionChange>,
    /// The sum of the marker floors last saved: every believed marker
    /// raises it, so a change means `markers.state` must be written.
    floors_saved: u128,
    /// Where the floors are saved.
    floors: store::MarkerFloors,
}

/// Reads `input` until it ends, logging and publishing as it goes; opens
/// input regions asked for through the shared inbox, and ends them when
/// their time is up.
pub fn pump(input: impl Read + Send + 'static, shared: &Shared) -> Result<(), LoggerError> {
    let mut p = Pump::open(shared)?;
    let (tx, rx) = mpsc::channel();
    shared.inbox.connect(tx.clone());
    std::thread::Builder::new()
        .name("logger-stdin".into())
        .spawn(move || read_all(input, &tx))
        .map_err(|source| StoreError::Io { path: "stdin".into(), source })?;
    loop {
        let msg = match p.tracker.next_tick_ms() {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(due) => rx.recv_timeout(Duration::from_millis(due.saturating_sub(now_ms()))),
        };
        match msg {
            Ok(ToPump::Bytes(bytes)) => p.chunk(&bytes, shared)?,
            Ok(ToPump::OpenInput(spec, reply)) => {
                let _ = reply.send(p.open_input(&spec, shared));
            }
            Ok(ToPump::End(None)) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
            Ok(ToPump::End(Some(e))) => return Err(StoreError::Io { path: "stdin".into(), source: e }.into()),
            Err(RecvTimeoutError::Timeout) => p.tick(shared)?,
        }
    }
}

/// Hands `input` to the pump chunk by chunk, then its end.
fn read_all(mut input: impl Read, tx: &Sender<ToPump>) {
    let mut buf = vec![0u8; 1 << 16];
    let end = loop {
        match input.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => {
                if tx.send(ToPump::Bytes(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Some(e),
        }
    };
    let _ = tx.send(ToPump::End(end));
}

impl Pump {
    fn open(shared: &Shared) -> Result<Pump, LoggerError> {
        let dir = &shared.dir;
        let raw_path = dir.join(files::RAW);
        let raw = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&raw_path)
            .map_err(|source| StoreError::Io { path: raw_path, source })?;
        let mut lines = LineWriter::open(dir)?;
        super::gap::absorb(dir, &mut lines)?;
        let (first_line, next_region) = {
            let live = shared.lock();
            (LineNo(lines.lines() + 1), RegionId(live.shell.regions + 1))
        };
        let mut tracker = RegionTracker::new(shared.secret.clone(), next_region);
        tracker.raise_seq_floors(&store::read_marker_floors(dir));
        let floors_saved = floor_sum(&tracker);
        Ok(Pump {
            raw,
            lines,
            regions: RegionLog::open(dir)?,
            cooker: Cooker::new(first_line),
            tracker,
            events: Vec::new(),
            changes: Vec::new(),
            floors_saved,
            floors: store::MarkerFloors::open(dir)?,
        })
    }

    fn chunk(&mut self, bytes: &[u8], shared: &Shared) -> Result<(), LoggerError> {
        // The raw log comes first and unbuffered: whatever happens next,
        // these bytes are on disk.
        self.raw.write_all(bytes).map_err(|source| StoreError::Io { path: shared.dir.join(files::RAW), source })?;
        let now = now_ms();
        self.events.clear();
        self.cooker.feed(bytes, &mut self.events);
        self.changes.clear();
        for ev in &self.events {
            if let CookEvent::Line { text, .. } = ev {
                self.lines.push(text)?;
            }
            self.tracker.on_event(ev, now, &mut self.changes);
        }
        self.tracker.after_output(&self.cooker.current_text(), self.cooker.cursor(), now, &mut self.changes);
        self.lines.flush()?;
        self.save_floors()?;
        for change in &self.changes {
            let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
            self.regions.append(r)?;
        }
        self.publish(bytes.len(), now, shared);
        Ok(())
    }

    /// Opens an input region at the cursor, records and publishes it.
    fn open_input(&mut self, spec: &InputSpec, shared: &Shared) -> Result<Region, String> {
        let (text, at) = (self.cooker.current_text(), self.cooker.cursor());
        self.changes.clear();
        let region = self.tracker.open_input(spec, (&text, at), now_ms(), &mut self.changes)?;
        self.record_regions(shared).map_err(|e| e.to_string())?;
        Ok(region)
    }

    /// Time passed without output: an input region may end.
    fn tick(&mut self, shared: &Shared) -> Result<(), LoggerError> {
        self.changes.clear();
        self.tracker.tick(self.cooker.cursor(), now_ms(), &mut self.changes);
        Ok(self.record_regions(shared)?)
    }

    /// Appends the region changes made outside a chunk and publishes them
    /// (no output came, so the output's time stays).
    fn record_regions(&mut self, shared: &Shared) -> Result<(), StoreError> {
        for change in &self.changes {
            let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
            self.regions.append(r)?;
        }
        let shell = self.tracker.shell().clone();
        let changes = std::mem::take(&mut self.changes);
        shared.publish(|live| {
            live.shell = shell;
            for change in changes {
                let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
                upsert(live, r);
            }
        });
        Ok(())
    }

    /// Saves the marker floors when a marker was believed in this chunk.
    fn save_floors(&mut self) -> Result<(), StoreError> {
        let sum = floor_sum(&self.tracker);
        if sum == self.floors_saved {
            return Ok(());
        }
        self.floors_saved = sum;
        match self.tracker.seq_floors() {
            Some(floors) => self.floors.save(floors),
            None => Ok(()),
        }
    }

    fn publish(&mut self, n: usize, now: u64, shared: &Shared) {
        let cursor = self.cooker.cursor();
        let text = self.cooker.current_text();
        let shell = self.tracker.shell().clone();
        let lines = self.lines.lines();
        let changes = std::mem::take(&mut self.changes);
        shared.publish(|live| {
            live.raw_len += n as u64;
            live.lines = lines;
            live.cursor = cursor;
            live.current_text = text;
            live.shell = shell;
            live.last_output_ms = now;
            for change in changes {
                let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
                upsert(live, r);
            }
        });
    }
}

fn floor_sum(tracker: &RegionTracker) -> u128 {
    tracker.seq_floors().map_or(0, |f| f.values().map(|&v| u128::from(v)).sum())
}

fn upsert(live: &mut super::state::Live, r: crate::region::Region) {
    if live.regions.is_empty() {
        live.first_region = r.id.0;
    }
    let idx = r.id.0.saturating_sub(live.first_region) as usize;
    if idx < live.regions.len() {
        live.regions[idx] = r;
    } else {
        live.regions.push(r);
    }
}

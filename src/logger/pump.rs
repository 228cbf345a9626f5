//! The stdin pump: every chunk tmux hands over is logged raw at once, then
//! cooked, indexed and published to waiters.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::LoggerError;
use super::input::{Mailbox, ToPump};
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
pub fn pump(mut input: impl Read + AsFd, shared: &Shared) -> Result<(), LoggerError> {
    let mut p = Pump::open(shared)?;
    let io_err = |source| StoreError::Io { path: "stdin".into(), source };
    let mailbox = shared.inbox.connect().map_err(io_err)?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let timeout = match p.tracker.next_tick_ms() {
            None => PollTimeout::NONE,
            Some(due) => PollTimeout::try_from(due.saturating_sub(now_ms()).min(60_000)).unwrap_or(PollTimeout::MAX),
        };
        let mut fds =
            [PollFd::new(input.as_fd(), PollFlags::POLLIN), PollFd::new(mailbox.wake.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io_err(e.into()).into()),
            Ok(_) => {}
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        let (output, mail) = (ready(&fds[0]), ready(&fds[1]));
        if mail {
            p.serve(&mailbox, shared);
        }
        if output {
            match input.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => p.chunk(&buf[..n], shared)?,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e).into()),
            }
        } else if !mail {
            p.tick(shared)?;
        }
    }
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
        if self.tracker.next_tick_ms().is_some() {
            self.tracker.after_output(&self.cooker.current_text(), self.cooker.cursor(), now, &mut self.changes);
        }
        self.lines.flush()?;
        self.save_floors()?;
        for change in &self.changes {
            let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
            self.regions.append(r)?;
        }
        self.publish(bytes.len(), now, shared);
        Ok(())
    }

    /// Serves the requests waiting in the mailbox.
    fn serve(&mut self, mailbox: &Mailbox, shared: &Shared) {
        let mut drain = [0u8; 64];
        while nix::unistd::read(&mailbox.wake, &mut drain).is_ok_and(|n| n > 0) {}
        while let Ok(ToPump::OpenInput(spec, reply)) = mailbox.rx.try_recv() {
            let _ = reply.send(self.open_input(&spec, shared));
        }
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

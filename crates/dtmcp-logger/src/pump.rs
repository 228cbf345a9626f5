//! The stdin pump: every chunk tmux hands over is logged raw at once, then
//! cooked, indexed and published to waiters.
//!
//! # Starting on an existing session
//!
//! A logger started on a directory that already holds a log (its
//! predecessor was killed, or the router repaired it) first carries on
//! from the last checkpoint (see [`super::checkpoint`]): it cooks `raw.log`
//! from there to the end, storing only the lines and region records the
//! old logger did not, then writes a gap the router left, closes regions
//! whose shell is gone, and only then reads the pane.
//!
//! # Bursts
//!
//! tmux hands a pane's output over in pieces of at most 4 KiB, each one
//! write on the pipe. Read one by one, a `cat` of a big file costs the
//! logger a wake-up, a poll, a read, three writes and a publication per
//! 4 KiB, and as much CPU in that as in cooking. So after a piece of
//! [`BURST_BYTES`] or more (more is likely on its way) the pump naps
//! [`BURST_NAP`] before it reads again (the loop serves the socket
//! meanwhile), and then takes all that came at once. A small piece, such
//! as a prompt with its markers, is never delayed: the nap only follows a
//! big one.
//!
//! tmux's `pipe-pane` hands over a socket, not a pipe, so [`PIPE_BYTES`]
//! is not granted and the socket holds only 100–200 KiB (less when tmux
//! writes small pieces). A nap that let it fill would cap the pane's rate
//! at buffer / nap, and on a loaded machine a nap lasts longer than asked:
//! with 5 ms naps the logger fell 1.5 s behind a `cat` of 33 MB. So a
//! read of [`FULL_BYTES`] or more, which may have found the socket nearly
//! full, is followed by another read at once, not by a nap.
//!
//! # A full disk
//!
//! When `raw.log` or the cooked files cannot be written, the pump does not
//! stop reading: tmux would otherwise buffer the pane's output without
//! bound. It drops what it cannot store, counts it, tries again every
//! [`RETRY_MS`], and when a write succeeds marks the gap in the log and
//! in `gaps.jsonl` (bounds and reason) and cooks on with a fresh cooker.
//!
//! # Deleted logs
//!
//! Writing on into a `raw.log` someone deleted (alone or with its whole
//! directory) would fill the disk with space nobody can see or free. So
//! when output comes the pump checks, at most once a second, that
//! `raw.log` still has a name (output within a second of the last check is
//! checked a second after it, so that the last burst before a quiet spell
//! is covered too); when it has none the pump stops and the logger exits
//! (see `logger::run_in`), and the router attaches a new one that starts
//! fresh files and marks the gap. A quiet pane costs nothing: the loop
//! sleeps until output or a request comes (or an input region's time is
//! up), and a deletion while it is quiet is noticed with the next output,
//! before a byte of it is written.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::LoggerError;
use super::checkpoint::{self, Checkpoint};
use super::input::{Mailbox, ToPump};
use super::state::Shared;
use super::timing::Timing;
use dtmcp_core::contract::Gap;
use dtmcp_core::cook::Cooker;
use dtmcp_core::now_ms;
use dtmcp_core::pipeline::Pipeline;
use dtmcp_core::region::{InputSpec, Region, RegionChange, RegionTracker};
use dtmcp_core::store::{self, LineWriter, RegionLog, StoreError, files};
use dtmcp_core::types::{CookEvent, LineNo, RegionId};

/// The most bytes read from the pane at once.
pub const READ_BYTES: usize = 1 << 18;
/// The pipe size asked of the kernel, so that tmux can hand over a burst
/// without waiting for the logger.
const PIPE_BYTES: i32 = 1 << 20;
/// A read at least this big means a burst of output (see the module
/// documentation).
const BURST_BYTES: usize = 2048;
/// A read this big may have found the socket nearly full: the pump reads
/// on at once (see the module documentation).
const FULL_BYTES: usize = 32 << 10;
/// How long the pump lets a burst gather in the pipe before reading on.
pub const BURST_NAP: std::time::Duration = std::time::Duration::from_millis(2);
/// How often a pump that cannot store output tries again.
pub const RETRY_MS: u64 = 500;
/// How often, at most, output coming makes the pump check that `raw.log`
/// was not deleted (one `fstat`).
const DELETED_CHECK_MS: u64 = 1000;
/// How every shell marker starts (OSC 133).
const MARKER_START: &[u8] = b"\x1b]133;";

/// How the loop goes on after the pump's part of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read on as output comes.
    More,
    /// A burst is coming: let it gather [`BURST_NAP`] before reading on.
    Nap,
    /// The output ended.
    Ended,
    /// `raw.log` was deleted: the pump stops.
    Deleted,
}

/// The pump's own state: the writers and the pure cores.
pub struct Pump {
    /// The session directory.
    dir: PathBuf,
    raw: File,
    /// Bytes in `raw.log`.
    raw_len: u64,
    lines: LineWriter,
    regions: RegionLog,
    /// The cooker and the region tracker, fed as one.
    pipe: Pipeline,
    changes: Vec<RegionChange>,
    /// The sum of the marker floors last saved: every believed marker
    /// raises it, so a change means `markers.state` must be written.
    floors_saved: u128,
    /// Where the floors are saved.
    floors: store::MarkerFloors,
    /// `raw_len` and the time at the last checkpoint.
    checkpoint_raw: u64,
    checkpoint_ms: u64,
    /// Output that could not be stored, since when; `None` while all is
    /// stored.
    dropping: Option<Dropping>,
    /// When `raw.log` was last checked for having been deleted.
    checked_ms: u64,
    /// Output came since that check (the check is then due
    /// [`DELETED_CHECK_MS`] after it, output or not).
    unchecked: bool,
    /// `raw.log` was found deleted (alone or with the whole directory):
    /// the pump stops, so that no descriptor keeps filling unlinked space.
    pub deleted: Option<u64>,
    /// The timing index: when output came, where regions start and end.
    timing: Timing,
    /// Finds the shell markers in a chunk, so that each region's place
    /// in `raw.log` is known to the byte (see [`Pump::cook_part`]).
    markers: memchr::memmem::Finder<'static>,
    /// The last chunk ended inside a shell marker.
    in_marker: bool,
    /// The tracker's count of continuation prompts at the last publication.
    continuations: u64,
}

/// A stretch of output the pump could not store.
struct Dropping {
    /// When it began, ms since the epoch.
    since_ms: u64,
    /// The size of `raw.log` then.
    raw_at: u64,
    /// Bytes of output not stored in `raw.log`.
    bytes: u64,
    /// The first error, for the gap's reason.
    reason: String,
    /// When to try writing again.
    retry_ms: u64,
}

/// Asks for a bigger pipe on stdin; a failure only costs speed.
pub fn widen_stdin_pipe() {
    let _ = nix::fcntl::fcntl(std::io::stdin(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
}

impl Pump {
    /// Opens the session's files and carries on from them (see the module
    /// documentation), publishing the state it arrives at.
    pub fn open(shared: &Shared) -> Result<Pump, LoggerError> {
        let dir = &shared.dir;
        let raw_path = dir.join(files::RAW);
        let raw = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .mode(0o600)
            .open(&raw_path)
            .map_err(|source| StoreError::Io { path: raw_path.clone(), source })?;
        let raw_len = raw.metadata().map_err(|source| StoreError::Io { path: raw_path, source })?.len();
        let lines = LineWriter::open(dir)?;
        let resume = checkpoint::load(dir).filter(|cp| cp.raw <= raw_len && cp.next_line <= lines.lines() + 1);
        let (start, next_line, tracker) = match resume {
            Some(cp) => (cp.raw, cp.next_line, RegionTracker::restore(shared.secret.clone(), cp.tracker)),
            None => (0, 1, RegionTracker::new(shared.secret.clone(), RegionId(1))),
        };
        let mut p = Pump {
            dir: dir.clone(),
            raw,
            raw_len,
            lines,
            regions: RegionLog::open(dir)?,
            pipe: Pipeline::new(Cooker::new(LineNo(next_line)), tracker),
            changes: Vec::new(),
            floors_saved: 0,
            floors: store::MarkerFloors::open(dir)?,
            checkpoint_raw: raw_len,
            checkpoint_ms: now_ms(),
            dropping: None,
            checked_ms: now_ms(),
            unchecked: false,
            deleted: None,
            timing: Timing::open(dir, raw_len, now_ms()),
            markers: memchr::memmem::Finder::new(MARKER_START),
            in_marker: false,
            continuations: 0,
        };
        p.replay(start, shared)?;
        Ok(p)
    }

    /// Reads `input` until it ends, logging and publishing as it goes: the
    /// logger's loop without its inbox and timers, for tests that hand the
    /// pump bytes (or an input that fails) instead of a pipe. The logger
    /// itself runs [`Pump::run_polled`].
    #[cfg(test)]
    pub fn run(mut self, mut input: impl Read, shared: &Shared) -> Result<(), LoggerError> {
        let mut buf = vec![0u8; READ_BYTES];
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(StoreError::Io { path: "stdin".into(), source: e }.into());
                }
            };
            self.chunk(&buf[..n], shared);
        }
        self.ended();
        Ok(())
    }

    /// When the pump must act though no output comes (ms since the
    /// epoch): an input region's time is up, or `raw.log` is due to be
    /// checked for deletion after output (see the module documentation).
    pub fn due_ms(&self) -> Option<u64> {
        let check = self.unchecked.then_some(self.checked_ms + DELETED_CHECK_MS);
        [self.pipe.tracker.next_tick_ms(), check].into_iter().flatten().min()
    }

    /// Reads and logs what the pane wrote; how the loop goes on.
    pub fn take_output(&mut self, input: &mut impl Read, buf: &mut [u8], shared: &Shared) -> Result<Step, LoggerError> {
        match input.read(buf) {
            Ok(0) => Ok(Step::Ended),
            Ok(n) => {
                self.chunk(&buf[..n], shared);
                Ok(match n {
                    _ if self.deleted.is_some() => Step::Deleted,
                    n if (BURST_BYTES..FULL_BYTES).contains(&n) => Step::Nap,
                    _ => Step::More,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(Step::More),
            Err(source) => Err(StoreError::Io { path: "stdin".into(), source }.into()),
        }
    }

    /// Does what is due at [`Pump::due_ms`] when no output came.
    pub fn on_time(&mut self, shared: &Shared) -> Result<Step, LoggerError> {
        let now = now_ms();
        if self.unchecked && now >= self.checked_ms + DELETED_CHECK_MS {
            self.unchecked = false;
            self.checked_ms = now;
            if self.raw_deleted() {
                self.deleted = Some(self.raw_len);
                return Ok(Step::Deleted);
            }
        }
        if self.pipe.tracker.next_tick_ms().is_some_and(|due| due <= now) {
            self.tick(shared)?;
        }
        Ok(Step::More)
    }

    /// Output ended cleanly: a checkpoint spares the next logger (if the
    /// pane is ever piped again) any replay.
    pub fn ended(&mut self) {
        self.timing.end(now_ms());
        if self.dropping.is_none() && self.pipe.cooker.at_rest() {
            let _ = self.lines.flush().and_then(|()| self.checkpoint(now_ms()));
        }
    }

    /// Serves the requests waiting in the mailbox.
    pub fn take_mail(&mut self, mailbox: &Mailbox, shared: &Shared) {
        let mut drain = [0u8; 64];
        while nix::unistd::read(&mailbox.wake, &mut drain).is_ok_and(|n| n > 0) {}
        // The loop looks for the answers before its turn ends.
        while let Ok(ToPump::OpenInput(spec, reply)) = mailbox.rx.try_recv() {
            let _ = reply.send(self.open_input(&spec, shared));
        }
    }

    /// Opens an input region at the cursor, records and publishes it.
    fn open_input(&mut self, spec: &InputSpec, shared: &Shared) -> Result<Region, String> {
        let (text, at) = (self.pipe.cooker.current_text(), self.pipe.cooker.cursor());
        self.changes.clear();
        let region = self.pipe.tracker.open_input(spec, (&text, at), now_ms(), &mut self.changes)?;
        self.record_regions(shared).map_err(|e| e.to_string())?;
        Ok(region)
    }

    /// Time passed without output: an input region may end.
    fn tick(&mut self, shared: &Shared) -> Result<(), LoggerError> {
        self.changes.clear();
        self.pipe.tracker.tick(self.pipe.cooker.cursor(), now_ms(), &mut self.changes);
        Ok(self.record_regions(shared)?)
    }

    /// Appends the region changes made outside a chunk and publishes them
    /// (no output came, so the output's time stays).
    fn record_regions(&mut self, shared: &Shared) -> Result<(), StoreError> {
        for change in &self.changes {
            self.timing.region(change, self.raw_len);
        }
        self.timing.flush();
        for change in &self.changes {
            let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
            self.regions.append(r)?;
        }
        let shell = self.pipe.tracker.shell().clone();
        let changes = std::mem::take(&mut self.changes);
        shared.publish(|live| {
            live.shell = shell;
            for change in changes {
                let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
                live.upsert(r);
            }
        });
        Ok(())
    }

    /// Cooks `raw.log` from `start` to its end, then takes up what the
    /// router left (a gap) and what the dead logger could not finish.
    fn replay(&mut self, start: u64, shared: &Shared) -> Result<(), LoggerError> {
        let now = now_ms();
        let mut buf = vec![0u8; READ_BYTES];
        let mut at = start;
        while at < self.raw_len {
            let want = usize::try_from(self.raw_len - at).unwrap_or(usize::MAX).min(buf.len());
            let n = self
                .raw
                .read_at(&mut buf[..want], at)
                .map_err(|source| StoreError::Io { path: shared.dir.join(files::RAW), source })?;
            if n == 0 {
                break;
            }
            self.cook_part(&buf[..n], at, now, shared)?;
            at += n as u64;
        }
        self.lines.flush()?;
        // Lines the replay could not match with the file (a gap of an
        // older logger) must not be numbered twice: start afresh.
        if self.pipe.cooker.cursor().line.0 != self.lines.lines() + 1 {
            self.pipe.cooker = Cooker::new(LineNo(self.lines.lines() + 1));
        }
        let had_gap = shared.dir.join(dtmcp_core::contract::GAP_PENDING).exists();
        super::gap::absorb(&shared.dir, &mut self.lines)?;
        if had_gap {
            // What the pane showed across the gap is in the gap's lines;
            // the unfinished line before it is not continued.
            self.pipe.cooker = Cooker::new(LineNo(self.lines.lines() + 1));
        }
        self.pipe.tracker.raise_seq_floors(&store::read_marker_floors(&shared.dir));
        self.floors_saved = floor_sum(&self.pipe.tracker);
        let cursor = self.pipe.cooker.cursor();
        let replayed = self.changes.len();
        self.pipe.tracker.close_orphans(shell_alive, cursor, now, &mut self.changes);
        self.pipe.tracker.close_ended_unseen(shell_at_prompt, cursor, now, &mut self.changes);
        for change in &self.changes[replayed..] {
            self.timing.region(change, self.raw_len);
        }
        self.timing.flush();
        self.store_changes(shared)?;
        if self.pipe.cooker.at_rest() {
            self.checkpoint(now)?;
        }
        self.publish(now, shared);
        Ok(())
    }

    /// Logs one chunk of the pane's output; what cannot be stored is
    /// dropped and counted, never left in the pipe.
    fn chunk(&mut self, bytes: &[u8], shared: &Shared) {
        let now = now_ms();
        if let Some(d) = &mut self.dropping
            && now < d.retry_ms
        {
            d.bytes += bytes.len() as u64;
            return;
        }
        if now.saturating_sub(self.checked_ms) >= DELETED_CHECK_MS {
            self.checked_ms = now;
            self.unchecked = false;
            if self.raw_deleted() {
                self.deleted = Some(self.raw_len);
                return;
            }
        } else {
            self.unchecked = true;
        }
        self.timing.output(self.raw_len, now);
        // The raw log comes first and unbuffered: whatever happens next,
        // these bytes are on disk.
        let written = write_counted(&mut self.raw, bytes);
        self.raw_len += written.0 as u64;
        if let Err(e) = written.1 {
            self.drop_output(bytes.len() - written.0, &e.to_string(), now);
            return;
        }
        let stored = self.resume(now).and_then(|()| self.cook_chunk(bytes, now, shared)).and_then(|()| {
            // An open input region may end at a prompt drawn without a newline.
            if self.pipe.tracker.next_tick_ms().is_none() {
                return Ok(());
            }
            self.pipe.after_output(now, &mut self.changes);
            self.store_changes(shared)
        });
        if let Err(e) = stored {
            self.drop_output(0, &e.to_string(), now);
        }
        self.timing.flush();
        self.publish(now, shared);
    }

    /// Whether `raw.log` has lost its name (deleted, alone or with its
    /// directory).
    fn raw_deleted(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.raw.metadata().is_ok_and(|m| m.nlink() == 0)
    }

    /// Notes `lost` bytes that could not be stored, starting a gap if none
    /// is open.
    fn drop_output(&mut self, lost: usize, reason: &str, now: u64) {
        let raw_at = self.raw_len;
        let d = self.dropping.get_or_insert_with(|| Dropping {
            since_ms: now,
            raw_at,
            bytes: 0,
            reason: reason.to_owned(),
            retry_ms: 0,
        });
        d.bytes += lost as u64;
        d.retry_ms = now + RETRY_MS;
    }

    /// After a stretch of dropped output, if there was one: cuts the
    /// cooked files back to whole lines, marks the gap and starts cooking
    /// afresh.
    fn resume(&mut self, now: u64) -> Result<(), StoreError> {
        let Some(d) = self.dropping.take() else { return Ok(()) };
        let gap = Gap {
            from_ms: d.since_ms,
            to_ms: now,
            raw_offset: d.raw_at,
            screen: Vec::new(),
            dropped: d.bytes,
            reason: format!("the logger could not write: {}", d.reason),
        };
        let recorded = self.lines.reopen().and_then(|()| super::gap::record(&self.dir, &mut self.lines, &gap));
        if let Err(e) = recorded {
            self.dropping = Some(Dropping { retry_ms: now + RETRY_MS, ..d });
            return Err(e);
        }
        self.pipe.cooker = Cooker::new(LineNo(self.lines.lines() + 1));
        self.timing.lost(d.bytes, d.since_ms, now);
        self.checkpoint(now)
    }

    /// Cooks a chunk already in `raw.log`, taking a checkpoint at its last
    /// line end when one is due.
    fn cook_chunk(&mut self, bytes: &[u8], now: u64, shared: &Shared) -> Result<(), StoreError> {
        let due = self.raw_len - self.checkpoint_raw >= checkpoint::EVERY_BYTES
            || (now.saturating_sub(self.checkpoint_ms) >= checkpoint::EVERY_MS && self.raw_len > self.checkpoint_raw);
        let split = if due { memchr::memrchr(b'\n', bytes).map(|i| i + 1) } else { None };
        let base = self.raw_len - bytes.len() as u64;
        let Some(at) = split else {
            self.cook_part(bytes, base, now, shared)?;
            return self.lines.flush();
        };
        self.cook_part(&bytes[..at], base, now, shared)?;
        self.lines.flush()?;
        if self.pipe.cooker.at_rest() {
            let raw_at = self.raw_len - (bytes.len() - at) as u64;
            self.checkpoint_at(raw_at, now)?;
        }
        self.cook_part(&bytes[at..], base + at as u64, now, shared)?;
        self.lines.flush()
    }

    /// Cooks and tracks `bytes`, which start at byte `base` of `raw.log`,
    /// through the core's one loop, storing the lines and region records
    /// not stored yet (a replay meets lines the old logger already wrote).
    ///
    /// The bytes go in pieces that end right after each shell marker, so
    /// that a region opened or closed by a piece is timed at the byte
    /// after its marker. Finding them costs one `memmem` pass; pieces that
    /// hold no marker are fed whole.
    fn cook_part(&mut self, bytes: &[u8], base: u64, now: u64, shared: &Shared) -> Result<(), StoreError> {
        let mut from = 0;
        while from < bytes.len() {
            let end = self.marker_end(&bytes[from..]).map_or(bytes.len(), |n| from + n);
            let before = self.changes.len();
            let lines = &mut self.lines;
            self.pipe.try_feed(&bytes[from..end], now, &mut self.changes, |event| match event {
                CookEvent::Line { line, text } if line.0 > lines.lines() => lines.push(text),
                _ => Ok(()),
            })?;
            for change in &self.changes[before..] {
                self.timing.region(change, base + end as u64);
            }
            from = end;
        }
        self.save_floors()?;
        self.store_changes(shared)
    }

    /// How many bytes of `bytes` reach the end of the first shell marker
    /// in them (or of the one the last chunk ended in); `None` when no
    /// marker ends in them.
    fn marker_end(&mut self, bytes: &[u8]) -> Option<usize> {
        let start = if self.in_marker { 0 } else { self.markers.find(bytes)? + MARKER_START.len() };
        let Some(t) = memchr::memchr2(0x07, 0x1b, &bytes[start..]).map(|t| start + t) else {
            self.in_marker = true;
            return None;
        };
        self.in_marker = false;
        // BEL ends it, or ESC \ (whose backslash may come in the next chunk).
        Some(if bytes[t] == 0x07 { t + 1 } else { (t + 2).min(bytes.len()) })
    }

    /// Appends the region changes not yet in `regions.jsonl`.
    fn store_changes(&mut self, shared: &Shared) -> Result<(), StoreError> {
        if self.changes.is_empty() {
            return Ok(());
        }
        let live = shared.lock();
        // A region opened and closed in the same chunk needs only its
        // closing record (the reader keeps each region's last record).
        let closed_here = |id: u64| self.changes.iter().any(|c| matches!(c, RegionChange::Closed(r) if r.id.0 == id));
        let fresh = self.changes.iter().filter_map(|change| match change {
            RegionChange::Opened(r) => (!live.stored(r, false) && !closed_here(r.id.0)).then_some(r),
            RegionChange::Closed(r) => (!live.stored(r, true)).then_some(r),
        });
        self.regions.append_all(fresh)
    }

    /// Takes a checkpoint at the end of `raw.log`.
    fn checkpoint(&mut self, now: u64) -> Result<(), StoreError> {
        self.checkpoint_at(self.raw_len, now)
    }

    /// Takes a checkpoint at `raw_at`, where the cooker is at rest and
    /// every line and region record is stored.
    fn checkpoint_at(&mut self, raw_at: u64, now: u64) -> Result<(), StoreError> {
        self.pipe.cooker.restart_parser();
        let cp = Checkpoint {
            raw: raw_at,
            next_line: self.pipe.cooker.cursor().line.0,
            tracker: self.pipe.tracker.snapshot(),
        };
        checkpoint::save(&self.dir, &cp)?;
        self.checkpoint_raw = raw_at;
        self.checkpoint_ms = now;
        Ok(())
    }

    /// Saves the marker floors when a marker was believed in this chunk.
    fn save_floors(&mut self) -> Result<(), StoreError> {
        let sum = floor_sum(&self.pipe.tracker);
        if sum == self.floors_saved {
            return Ok(());
        }
        self.floors_saved = sum;
        match self.pipe.tracker.seq_floors() {
            Some(floors) => self.floors.save(floors),
            None => Ok(()),
        }
    }

    fn publish(&mut self, now: u64, shared: &Shared) {
        let cursor = self.pipe.cooker.cursor();
        let text = self.pipe.cooker.current_text();
        let typed = self.pipe.tracker.typed(cursor.line, &text);
        let shell = self.pipe.tracker.shell().clone();
        let lines = self.lines.lines();
        let raw_len = self.raw_len;
        let changes = std::mem::take(&mut self.changes);
        // A continuation prompt drawn in this output ended by `raw_len`.
        let continued = self.pipe.tracker.continuations() > self.continuations;
        self.continuations = self.pipe.tracker.continuations();
        shared.publish(|live| {
            if continued {
                live.continuation_raw = raw_len;
            }
            live.raw_len = raw_len;
            live.lines = lines;
            live.cursor = cursor;
            live.current_text = text;
            live.typed = typed;
            live.shell = shell;
            live.last_output_ms = now;
            for change in changes {
                let (RegionChange::Opened(r) | RegionChange::Closed(r)) = change;
                live.upsert(r);
            }
        });
    }
}

/// Writes all of `bytes` to `file`; returns how many were written, and
/// the error that stopped it short.
fn write_counted(file: &mut File, bytes: &[u8]) -> (usize, std::io::Result<()>) {
    let mut done = 0;
    while done < bytes.len() {
        match file.write(&bytes[done..]) {
            Ok(0) => return (done, Err(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

/// Whether the shell that runs region `r` may still end it: a shell of
/// another host (over ssh) cannot be checked and counts as alive; a local
/// one is alive while its pid exists.
fn shell_alive(r: &Region) -> bool {
    local_shell(r).is_none_or(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

/// The pid of the shell that ran `r` when it is a process of this host.
fn local_shell(r: &Region) -> Option<u32> {
    let local = nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_default();
    (r.pid != 0 && (r.host.is_empty() || r.host == local)).then_some(r.pid)
}

/// Whether the local shell that ran `r` waits at its prompt now: it holds
/// its terminal (the foreground process group is its own), sleeps, and
/// has no child. (A shell blocked in its `read` builtin looks the same;
/// only a command lost in a gap is judged this way.)
fn shell_at_prompt(r: &Region) -> bool {
    let Some(pid) = local_shell(r) else { return false };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let Some(stat) = stat.as_deref().and_then(dtmcp_core::procs::parse::stat) else { return false };
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    stat.tpgid == stat.pgrp && stat.state == 'S' && children.is_ok_and(|c| c.trim().is_empty())
}

fn floor_sum(tracker: &RegionTracker) -> u128 {
    tracker.seq_floors().map_or(0, |f| f.values().map(|&v| u128::from(v)).sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::store::LineReader;

    /// Hands out `bytes`, then fails as a killed logger's stdin would
    /// never end: the pump stops without its clean-exit checkpoint.
    struct Dies<'a>(&'a [u8]);

    impl Read for Dies<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::other("killed"));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn lines(dir: &Path) -> Vec<String> {
        LineReader::open(dir).expect("reader").read(LineNo(1), 1_000).expect("read")
    }

    #[test]
    fn a_logger_started_again_carries_on_without_repeating_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = b"one\r\ntwo\r\n\x1b[1mthr";
        let shared = Shared::open(dir.path(), None).expect("shared");
        let pump = Pump::open(&shared).expect("pump");
        assert!(pump.run(Dies(first), &shared).is_err());
        assert_eq!(lines(dir.path()), ["one", "two"]);
        // The next logger replays raw.log from the checkpoint taken at the
        // start, stores nothing twice, and cooks on from the cut.
        let shared = Shared::open(dir.path(), None).expect("shared");
        let pump = Pump::open(&shared).expect("pump");
        assert_eq!(shared.lock().current_text, "thr");
        pump.run(&b"ee\x1b[0m\r\nfour\r\n"[..], &shared).expect("run");
        assert_eq!(lines(dir.path()), ["one", "two", "three", "four"]);
        // A clean end leaves a checkpoint at the end: nothing to replay.
        let cp = checkpoint::load(dir.path()).expect("checkpoint");
        assert_eq!(cp.next_line, 5);
        assert_eq!(cp.raw, std::fs::metadata(dir.path().join(files::RAW)).expect("raw").len());
    }

    #[test]
    fn a_burst_read_in_naps_loses_and_reorders_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = Shared::open(dir.path(), None).expect("shared");
        let mut pump = Pump::open(&shared).expect("pump");
        let want: Vec<String> = (0..20_000).map(|i| format!("{i:07} ok")).collect();
        let stream: Vec<u8> = want.iter().flat_map(|l| l.bytes().chain(*b"\r\n")).collect();
        let (rx, tx) = nix::unistd::pipe().expect("pipe");
        // Pieces as tmux writes them, some big enough to make the pump nap
        // and some small, with pauses so that reads see both.
        let writer = std::thread::spawn(move || {
            let mut tx = File::from(tx);
            for (i, piece) in stream.chunks(4095).enumerate() {
                let (big, small) = piece.split_at(if i % 3 == 0 { 100 } else { piece.len() });
                tx.write_all(big).expect("write");
                tx.write_all(small).expect("write");
                if i % 7 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(300));
                }
            }
        });
        // The logger's own loop, with its socket.
        let shared = std::sync::Arc::new(shared);
        let listener = crate::server::bind(&dir.path().join(files::SOCKET)).expect("bind");
        let mut server = crate::server::Server::new(listener, std::sync::Arc::clone(&shared), true);
        crate::main_loop::run(&mut pump, &mut server, File::from(rx), &shared).expect("run");
        writer.join().expect("writer");
        let got = LineReader::open(dir.path()).expect("reader").read(LineNo(1), 30_000).expect("read");
        assert_eq!(got, want);
        let raw = std::fs::metadata(dir.path().join(files::RAW)).expect("raw").len();
        assert_eq!(raw, want.iter().map(|l| l.len() as u64 + 2).sum::<u64>());
    }

    #[test]
    fn a_placeholder_names_the_program_of_the_running_region() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = Shared::open(dir.path(), None).expect("shared");
        let pump = Pump::open(&shared).expect("pump");
        // No integrated shell: no region, so no name.
        pump.run(&b"$ vim\r\n\x1b[?1049hdrawn\x1b[?1049l$ \r\n"[..], &shared).expect("run");
        assert_eq!(lines(dir.path()), ["$ vim", "[full-screen program]", "$"]);
    }
}

//! What the logger's threads share: the state the pump publishes after each
//! chunk of output, and the waits that watch it.
//!
//! # The region table
//!
//! The live table holds the last [`KEPT_REGIONS`] regions (and any older
//! one still open, such as the shell an ssh session runs in), so that a
//! logger's memory stays flat however many commands its pane runs. An
//! older region asked for by id is read from `regions.jsonl`, which holds
//! every one.
//!
//! # Waking the socket
//!
//! The logger runs the socket's loop in the pump's thread (see
//! [`super::main_loop`]), which looks at the waits after each publication
//! itself. A loop on a thread of its own (the tests run one) sleeps in
//! `poll`: while it holds waits it says how many in [`Live::watching`],
//! and every publication then writes a byte on a wake-up pipe it polls.
//! With no such wait held a publication makes no system call.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use regex::Regex;

use dtmcp_core::marker::Secret;
use dtmcp_core::now_ms;
use dtmcp_core::protocol::{Mark, Status, WaitReason, WaitSpec};
use dtmcp_core::region::{Region, ShellState};
use dtmcp_core::store::{self, LineReader, StoreError};
use dtmcp_core::types::{ByteOffset, Cursor, LineNo, RegionId};

/// How many regions the live table keeps (open ones are kept besides).
pub const KEPT_REGIONS: usize = 1000;
/// How far the table may grow past [`KEPT_REGIONS`] before it is trimmed,
/// so that trimming is not done at every new region.
const TRIM_SLACK: usize = 64;

/// The state every thread may read; only the pump writes it.
#[derive(Default)]
pub struct Live {
    /// Bumped at every publication, so a waiter knows whether to look again.
    pub version: u64,
    /// Bytes in `raw.log`.
    pub raw_len: u64,
    /// Committed lines.
    pub lines: u64,
    /// The cooker's cursor.
    pub cursor: Cursor,
    /// The unfinished line.
    pub current_text: String,
    /// The shells' state.
    pub shell: ShellState,
    /// The recent regions and the open ones, by id (see the module
    /// documentation).
    regions: BTreeMap<u64, Region>,
    /// Every region below this id that is not in `regions` was trimmed
    /// (it had ended and is in `regions.jsonl`).
    trimmed_below: u64,
    /// When output last came.
    pub last_output_ms: u64,
    /// The output has ended.
    pub eof: bool,
    /// Text typed at the shell's prompt, not yet submitted.
    pub typed: String,
    /// How many waits the socket's loop holds: while any, a publication
    /// wakes it.
    pub watching: usize,
    /// A wake-up was written that the loop has not taken yet: publications
    /// meanwhile need not write another.
    pub rung: bool,
    /// `raw.log`'s size when the output that drew the latest continuation
    /// prompt (`PS2`) was stored: a wait whose mark is older saw the shell
    /// ask for the rest of a command since.
    pub continuation_raw: u64,
}

impl Live {
    /// The region with `id`, if the table holds it (see
    /// [`Shared::region`] for one that may be older).
    pub fn region(&self, id: RegionId) -> Option<&Region> {
        self.regions.get(&id.0)
    }

    /// Whether region `r`'s record is stored already: opened, or (when
    /// `closing`) closed too. A region trimmed from the table had ended and
    /// was stored.
    pub fn stored(&self, r: &Region, closing: bool) -> bool {
        match self.regions.get(&r.id.0) {
            Some(old) => !closing || old.end.is_some(),
            None => r.id.0 < self.trimmed_below,
        }
    }

    /// Puts `r` in the table, replacing the one with its id.
    pub fn upsert(&mut self, r: Region) {
        self.regions.insert(r.id.0, r);
    }

    /// The last `last` regions of the table, oldest first.
    pub fn last_regions(&self, last: usize) -> Vec<Region> {
        let mut out: Vec<Region> = self.regions.values().rev().take(last).cloned().collect();
        out.reverse();
        out
    }

    /// How many regions the table holds.
    pub fn table_len(&self) -> usize {
        self.regions.len()
    }

    /// Drops the oldest ended regions once the table is [`TRIM_SLACK`] past
    /// [`KEPT_REGIONS`].
    fn trim(&mut self) {
        if self.regions.len() <= KEPT_REGIONS + TRIM_SLACK {
            return;
        }
        let excess = self.regions.len() - KEPT_REGIONS;
        let old: Vec<u64> = self.regions.values().filter(|r| r.end.is_some()).map(|r| r.id.0).take(excess).collect();
        for id in old {
            self.regions.remove(&id);
            self.trimmed_below = self.trimmed_below.max(id + 1);
        }
    }

    /// A status snapshot.
    pub fn status(&self) -> Status {
        Status {
            mark: Mark {
                raw: ByteOffset(self.raw_len),
                regions: self.shell.regions,
                prompts: self.shell.prompts,
                line: self.cursor.line,
                screens: self.shell.screens,
            },
            shell: self.shell.clone(),
            current_text: self.current_text.clone(),
            last_output_ms: self.last_output_ms,
            eof: self.eof,
            last_region: self.regions.last_key_value().map(|(_, r)| r.clone()),
            typed: self.typed.clone(),
        }
    }
}

/// The logger's shared state and the files it serves from.
pub struct Shared {
    /// The session directory.
    pub dir: PathBuf,
    /// The marker secret, if the session has one.
    pub secret: Option<Secret>,
    live: Mutex<Live>,
    /// The wake-up pipe: the socket's loop polls the read end, the pump
    /// writes a byte on the other (both non-blocking).
    wake_rx: OwnedFd,
    wake_tx: std::fs::File,
    /// The way to the pump, for requests it must serve itself.
    pub inbox: super::input::Inbox,
    /// The agents' state kept for the router, saved in `state.json`.
    pub agents: super::agents::Book,
    /// The idempotency keys of calls that typed here.
    pub keys: super::keys::Keys,
}

impl Shared {
    /// Opens the session in `dir`, picking up what its files already hold.
    pub fn open(dir: &Path, secret: Option<Secret>) -> Result<Shared, StoreError> {
        let regions = store::read_regions(dir)?;
        let (lines, _) = LineReader::open(dir)?.extent()?;
        let mut live =
            Live { lines, cursor: Cursor { line: LineNo(lines + 1), ..Cursor::default() }, ..Live::default() };
        live.shell.regions = regions.last().map_or(0, |r| r.id.0);
        live.regions = regions.into_iter().map(|r| (r.id.0, r)).collect();
        live.trim();
        live.raw_len = std::fs::metadata(dir.join(store::files::RAW)).map_or(0, |m| m.len());
        let flags = nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK;
        let (wake_rx, wake_tx) = nix::unistd::pipe2(flags)
            .map_err(|e| StoreError::Io { path: dir.to_path_buf(), source: std::io::Error::from(e) })?;
        Ok(Shared {
            dir: dir.to_path_buf(),
            secret,
            live: Mutex::new(live),
            wake_rx,
            wake_tx: std::fs::File::from(wake_tx),
            inbox: Default::default(),
            agents: super::agents::Book::open(dir),
            keys: super::keys::Keys::default(),
        })
    }

    /// Locks the state (a poisoned lock still holds consistent data: the
    /// pump publishes whole values).
    pub fn lock(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes a change made under `f`, and wakes the socket's loop if it
    /// holds waits.
    pub fn publish(&self, f: impl FnOnce(&mut Live)) {
        let mut live = self.lock();
        f(&mut live);
        live.version += 1;
        live.trim();
        let wake = live.watching > 0 && !live.rung;
        live.rung |= wake;
        drop(live);
        if wake {
            self.ring();
        }
    }

    /// Wakes the socket's loop (a full pipe already holds a wake-up).
    fn ring(&self) {
        let _ = (&self.wake_tx).write(&[1]);
    }

    /// The read end of the wake-up pipe, for the socket's loop to poll.
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.wake_rx.as_fd()
    }

    /// Empties the wake-up pipe.
    pub fn drain_wake(&self) {
        // A read short of the buffer emptied the pipe (poll is level
        // triggered: a later byte wakes it again), so no read to see EAGAIN.
        let mut buf = [0u8; 64];
        while nix::unistd::read(&self.wake_rx, &mut buf).is_ok_and(|n| n == buf.len()) {}
    }

    /// Marks the end of output.
    pub fn finish(&self) {
        self.publish(|l| l.eof = true);
    }

    /// Region `id`: from the table, or for an older one from
    /// `regions.jsonl`.
    pub fn region(&self, id: RegionId) -> Option<Region> {
        let live = self.lock();
        if let Some(r) = live.region(id) {
            return Some(r.clone());
        }
        let older = id.0 < live.trimmed_below;
        drop(live);
        if !older {
            return None;
        }
        store::read_regions(&self.dir).ok()?.into_iter().find(|r| r.id == id)
    }

    /// The first region opened after `mark`, if one opened by `status`.
    pub fn region_after(&self, mark: &Mark, status: &Status) -> Option<Region> {
        let first = RegionId(mark.regions + 1);
        (status.mark.regions >= first.0).then(|| self.region(first)).flatten()
    }
}

/// A wait the socket's loop holds: its condition, how far it has scanned
/// for its pattern, and when it runs out.
pub struct Watch {
    /// What it waits for.
    pub spec: WaitSpec,
    pattern: Option<Regex>,
    scan: Scan,
    /// When it times out.
    pub deadline: Instant,
}

impl Watch {
    /// A wait for `spec`, starting now; an invalid pattern is refused.
    pub fn new(spec: WaitSpec, now: Instant) -> Result<Watch, String> {
        let timeout = Duration::from_millis(spec.timeout_ms.min(dtmcp_core::protocol::MAX_WAIT_MS));
        let pattern = match &spec.pattern {
            Some(p) => Some(Regex::new(p).map_err(|e| format!("invalid pattern: {e}"))?),
            None => None,
        };
        Ok(Watch { spec, pattern, scan: Scan { next_line: 0, ended: None }, deadline: now + timeout })
    }

    /// Why the wait ends with the state `status`, or `None` while it goes on.
    pub fn check(&mut self, shared: &Shared, status: &Status, now: Instant) -> Option<WaitReason> {
        if let Some(reason) = shared.check(&self.spec, status, self.pattern.as_ref(), &mut self.scan) {
            return Some(reason);
        }
        if status.eof {
            return Some(WaitReason::Eof);
        }
        (now >= self.deadline).then_some(WaitReason::Timeout)
    }

    /// When to look again though nothing is published: at the deadline,
    /// and while waiting for quiet, every `settle_ms` (at least 10 ms).
    pub fn next_check(&self, now: Instant) -> Instant {
        match self.spec.settle_ms {
            Some(settle) => self.deadline.min(now + Duration::from_millis(settle.max(10))),
            None => self.deadline,
        }
    }
}

impl Shared {
    fn check(&self, spec: &WaitSpec, status: &Status, re: Option<&Regex>, scan: &mut Scan) -> Option<WaitReason> {
        // An ended region no longer changes: kept, it is not looked up
        // again (an old one would be read from the file at every look).
        let region = match &scan.ended {
            Some(r) => Some(r.clone()),
            None => self.region_after(&spec.after, status),
        };
        if let Some(r) = region.as_ref().filter(|r| r.end.is_some()) {
            scan.ended = Some(r.clone());
        }
        if spec.command_done {
            if let Some(r) = region.as_ref().filter(|r| r.end.is_some()) {
                return Some(WaitReason::RegionEnded(r.id));
            }
            if status.mark.prompts > spec.after.prompts && status.shell.at_prompt {
                return Some(WaitReason::Prompt);
            }
            // The shell asks for the rest of a command at a continuation
            // prompt drawn after the mark (a heredoc's next line), as far
            // as `status` goes (a newer one is seen at the next look).
            if status.shell.at_continuation {
                let drawn = self.lock().continuation_raw;
                if drawn > spec.after.raw.0 && drawn <= status.mark.raw.0 {
                    return Some(WaitReason::Prompt);
                }
            }
        }
        if spec.full_screen && status.mark.screens > spec.after.screens {
            return Some(WaitReason::FullScreen);
        }
        if let Some(re) = re {
            // New output only: after the mark's line when no region opened
            // (or a plain shell), else from the region's start, or from the
            // mark's line when waiting resumes within a running region.
            let from = region.as_ref().map_or(spec.after.line.next(), |r| r.start.line.max(spec.after.line));
            if let Some(line) = self.scan(re, from, status, scan) {
                return Some(WaitReason::Matched(line));
            }
        }
        let settle = spec.settle_ms?;
        let quiet = now_ms().saturating_sub(status.last_output_ms);
        (status.mark.raw > spec.after.raw && quiet >= settle).then_some(WaitReason::Settled)
    }

    /// Looks for `re` in the lines from `from` not yet scanned, then in the
    /// unfinished line.
    fn scan(&self, re: &Regex, from: LineNo, status: &Status, scan: &mut Scan) -> Option<LineNo> {
        let start = scan.next_line.max(from.0);
        let end = status.mark.line.0; // the unfinished line
        if start < end {
            let reader = LineReader::open(&self.dir).ok()?;
            let lines = reader.read(LineNo(start), end - start).ok()?;
            for (i, text) in lines.iter().enumerate() {
                if re.is_match(text) {
                    return Some(LineNo(start + i as u64));
                }
            }
            scan.next_line = start + lines.len() as u64;
        }
        // The unfinished line has its trailing blanks trimmed; a prompt
        // such as `Password: ` is matched with the blank it ends in.
        let current = &status.current_text;
        let matched = re.is_match(current) || (!current.is_empty() && re.is_match(&format!("{current} ")));
        (end >= from.0 && matched).then_some(status.mark.line)
    }
}

/// How far a wait has looked for its pattern, and the region it is about
/// once that has ended.
struct Scan {
    next_line: u64,
    ended: Option<Region>,
}

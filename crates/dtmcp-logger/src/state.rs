//! What the logger's threads share: the state the pump publishes after each
//! chunk of output, and the waits that watch it.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use regex::Regex;

use dtmcp_core::marker::Secret;
use dtmcp_core::now_ms;
use dtmcp_core::protocol::{Mark, Status, WaitReason, WaitSpec};
use dtmcp_core::region::{Region, ShellState};
use dtmcp_core::store::{self, LineReader, StoreError};
use dtmcp_core::types::{ByteOffset, Cursor, LineNo, RegionId};

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
    /// Every region, by id (id `n` at index `n - first_region`).
    pub regions: Vec<Region>,
    /// The id of `regions[0]`.
    pub first_region: u64,
    /// When output last came.
    pub last_output_ms: u64,
    /// The output has ended.
    pub eof: bool,
    /// Text typed at the shell's prompt, not yet submitted.
    pub typed: String,
}

impl Live {
    /// The region with `id`, if known.
    pub fn region(&self, id: RegionId) -> Option<&Region> {
        let idx = id.0.checked_sub(self.first_region)?;
        self.regions.get(usize::try_from(idx).ok()?)
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
            last_region: self.regions.last().cloned(),
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
    changed: Condvar,
    /// The way to the pump, for requests it must serve itself.
    pub inbox: super::input::Inbox,
    /// The agents' state kept for the router, saved in `state.json`.
    pub agents: super::agents::Book,
}

impl Shared {
    /// Opens the session in `dir`, picking up what its files already hold.
    pub fn open(dir: &Path, secret: Option<Secret>) -> Result<Shared, StoreError> {
        let regions = store::read_regions(dir)?;
        let (lines, _) = LineReader::open(dir)?.extent()?;
        let mut live = Live {
            lines,
            cursor: Cursor { line: LineNo(lines + 1), ..Cursor::default() },
            first_region: regions.first().map_or(1, |r| r.id.0),
            ..Live::default()
        };
        live.shell.regions = regions.last().map_or(0, |r| r.id.0);
        live.regions = regions;
        live.raw_len = std::fs::metadata(dir.join(store::files::RAW)).map_or(0, |m| m.len());
        Ok(Shared {
            dir: dir.to_path_buf(),
            secret,
            live: Mutex::new(live),
            changed: Condvar::new(),
            inbox: Default::default(),
            agents: super::agents::Book::open(dir),
        })
    }

    /// Locks the state (a poisoned lock still holds consistent data: the
    /// pump publishes whole values).
    pub fn lock(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes a change made under `f` and wakes every waiter.
    pub fn publish(&self, f: impl FnOnce(&mut Live)) {
        let mut live = self.lock();
        f(&mut live);
        live.version += 1;
        drop(live);
        self.changed.notify_all();
    }

    /// Marks the end of output.
    pub fn finish(&self) {
        self.publish(|l| l.eof = true);
    }

    /// Waits until `spec` is met, the output ends, or the timeout runs out.
    pub fn wait(&self, spec: &WaitSpec) -> Result<(WaitReason, Status), String> {
        let timeout = Duration::from_millis(spec.timeout_ms.min(dtmcp_core::protocol::MAX_WAIT_MS));
        let deadline = Instant::now() + timeout;
        let pattern = match &spec.pattern {
            Some(p) => Some(Regex::new(p).map_err(|e| format!("invalid pattern: {e}"))?),
            None => None,
        };
        let mut scan = Scan { next_line: 0 };
        loop {
            let (version, status) = {
                let live = self.lock();
                (live.version, live.status())
            };
            if let Some(reason) = self.check(spec, &status, pattern.as_ref(), &mut scan) {
                return Ok((reason, status));
            }
            if status.eof {
                return Ok((WaitReason::Eof, status));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok((WaitReason::Timeout, status));
            }
            let mut nap = deadline - now;
            if let Some(settle) = spec.settle_ms {
                nap = nap.min(Duration::from_millis(settle.max(10)));
            }
            let live = self.lock();
            if live.version == version {
                let _ = self.changed.wait_timeout(live, nap);
            }
        }
    }

    fn check(&self, spec: &WaitSpec, status: &Status, re: Option<&Regex>, scan: &mut Scan) -> Option<WaitReason> {
        let first = RegionId(spec.after.regions + 1);
        let region = (status.mark.regions >= first.0).then(|| self.lock().region(first).cloned()).flatten();
        if spec.command_done {
            if let Some(r) = region.as_ref().filter(|r| r.end.is_some()) {
                return Some(WaitReason::RegionEnded(r.id));
            }
            if status.mark.prompts > spec.after.prompts && status.shell.at_prompt {
                return Some(WaitReason::Prompt);
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

/// How far a wait has looked for its pattern.
struct Scan {
    next_line: u64,
}

//! Writing `timing.idx`, the index recordings are made from (its format is
//! `dtmcp_core::cast::timing`): when output came, where regions start and
//! end in `raw.log`, and the pane's size.
//!
//! # The pane's size
//! `pipe-pane` hands over output only: a resize is not in it. The router
//! writes the pane's terminal (`/dev/pts/N`) into `meta.json`, and the
//! pump reads its size (`TIOCGWINSZ`, opening and closing the terminal, so
//! that the logger never holds the pane's terminal open) when it starts
//! and when output comes, at most every [`SIZE_EVERY_MS`]. A program
//! redraws after a resize, so the new size is recorded before the output
//! drawn for it; a resize that nothing redraws after is recorded with the
//! next output. A session without a terminal in `meta.json` (made by an
//! older version) records no size.
//!
//! # Costs and failures
//! Records gather in a buffer during a turn and go out in one `write`
//! after `raw.log`'s (see the format's module for what a killed logger
//! loses: at most the turn it died in). The index is a courtesy beside the
//! log: a write that fails (a full disk) drops those records, and the
//! logger goes on logging.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use dtmcp_core::cast::timing::{Encoder, MAGIC, QUANTUM_MS, Record};
use dtmcp_core::region::RegionChange;
use dtmcp_core::store::{self, files};

/// How often, at most, the pane's size is read while output comes.
pub const SIZE_EVERY_MS: u64 = 50;

/// The timing index being written.
pub struct Timing {
    /// `timing.idx`, open for appending; `None` if it could not be opened.
    file: Option<File>,
    /// Makes the records relative to the ones before.
    enc: Encoder,
    /// Records of this turn, not yet written.
    buf: Vec<u8>,
    /// The pane's terminal, if the router named one.
    tty: Option<PathBuf>,
    /// The size last recorded.
    size: Option<(u16, u16)>,
    /// When the size was last read, ms since the epoch.
    size_ms: u64,
}

impl Timing {
    /// Opens the index of `dir` and records a logger's start at `now`
    /// with `raw.log` `raw_len` bytes long, and the pane's size.
    pub fn open(dir: &Path, raw_len: u64, now: u64) -> Timing {
        let path = dir.join(files::TIMING);
        let file = OpenOptions::new().create(true).append(true).read(true).mode(0o600).open(&path).ok();
        let tty = store::read_meta(dir)
            .ok()
            .map(|m| m.tty)
            .filter(|t| t.starts_with("/dev/pts/") || t.starts_with("/dev/tty"))
            .map(PathBuf::from);
        let mut t = Timing { file, enc: Encoder::default(), buf: Vec::new(), tty, size: None, size_ms: 0 };
        if t.file.as_ref().and_then(|f| f.metadata().ok()).is_some_and(|m| m.len() == 0) {
            t.buf.extend_from_slice(MAGIC);
        }
        t.enc.push(Record::Start { ms: now, raw: raw_len }, &mut t.buf);
        t.look_at_size(raw_len, now);
        t.flush();
        t
    }

    /// Output is about to be appended at byte `at` of `raw.log`, at `now`.
    pub fn output(&mut self, at: u64, now: u64) {
        if now < self.enc.last_ms() + QUANTUM_MS {
            return;
        }
        self.enc.push(Record::Output { at, ms: now }, &mut self.buf);
        if now >= self.size_ms + SIZE_EVERY_MS {
            self.look_at_size(at, now);
        }
    }

    /// Records where a region opened or closed: byte `at`.
    pub fn region(&mut self, change: &RegionChange, at: u64) {
        let record = match change {
            RegionChange::Opened(r) => Record::Open { id: r.id.0, at },
            RegionChange::Closed(r) => Record::Close { id: r.id.0, at },
        };
        self.enc.push(record, &mut self.buf);
    }

    /// Records output that could not be written.
    pub fn lost(&mut self, bytes: u64, from_ms: u64, to_ms: u64) {
        self.enc.push(Record::Lost { bytes, from_ms, to_ms }, &mut self.buf);
    }

    /// Records that the pane's output ended.
    pub fn end(&mut self, now: u64) {
        self.enc.push(Record::End { ms: now }, &mut self.buf);
        self.flush();
    }

    /// Writes the records of this turn.
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Some(f) = self.file.as_mut() {
            // Dropped on failure: see the module documentation.
            let _ = f.write_all(&self.buf);
        }
        self.buf.clear();
    }

    /// Reads the pane's size and records it if it changed; the position is
    /// that of the record just written (a start or an output).
    fn look_at_size(&mut self, at: u64, now: u64) {
        self.size_ms = now;
        let Some(size) = self.tty.as_deref().and_then(pane_size) else { return };
        if self.size != Some(size) {
            self.size = Some(size);
            self.enc.push(Record::Size { at, cols: size.0, rows: size.1 }, &mut self.buf);
        }
    }
}

/// The size of terminal `tty`, opened for the look and closed at once.
fn pane_size(tty: &Path) -> Option<(u16, u16)> {
    let flags = nix::libc::O_NOCTTY | nix::libc::O_NONBLOCK;
    let file = OpenOptions::new().read(true).custom_flags(flags).open(tty).ok()?;
    let mut ws = nix::libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which
    // points at a live, properly aligned `winsize`; the descriptor is open
    // for the length of the call.
    let done = unsafe { nix::libc::ioctl(file.as_raw_fd(), nix::libc::TIOCGWINSZ, &mut ws) };
    (done == 0 && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col, ws.ws_row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pump::Pump;
    use crate::state::Shared;
    use dtmcp_core::cast::timing::{Timeline, decode};
    use dtmcp_core::marker::{Kind, Secret};

    const SECRET: Secret = Secret { keys: [1_234_567_891, 987_654_321, 2_147_483_646, 7] };

    /// A marker of shell 42 as the integration prints it.
    fn mark(kind: Kind, head: &str, seq: u64, tail: &str) -> Vec<u8> {
        let proof = SECRET.proof(kind, 42, seq);
        format!("\x1b]133;{head};dtmcp=42.{seq}.{proof}{tail}\x07").into_bytes()
    }

    /// Hands out its pieces one read each, then fails as the stdin of a
    /// killed logger would (no clean end).
    struct Pieces(Vec<Vec<u8>>);

    impl std::io::Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::other("killed"));
            }
            let piece = self.0.remove(0);
            buf[..piece.len()].copy_from_slice(&piece);
            Ok(piece.len())
        }
    }

    fn timeline(dir: &Path) -> Timeline {
        Timeline::from_records(&decode(&std::fs::read(dir.join(files::TIMING)).expect("index")))
    }

    #[test]
    fn regions_are_placed_after_their_markers_and_survive_a_killed_logger() {
        let dir = tempfile::tempdir().expect("tempdir");
        let prompt = [mark(Kind::Prompt, "A", 1, ";host=h;user=u"), b"$ ".to_vec(), mark(Kind::PromptEnd, "B", 2, "")];
        let start = [b"echo hi\r\n".to_vec(), mark(Kind::CommandStart, "C", 3, ""), b"hi\r\n".to_vec()].concat();
        // The end marker is cut between two reads, and the prompt follows
        // it in the same read.
        let end = mark(Kind::CommandEnd, "D;0", 4, ";ps=0");
        let (end_a, end_b) = end.split_at(10);
        let pieces = vec![prompt.concat(), start.clone(), end_a.to_vec(), [end_b, b"$ "].concat()];
        let shared = Shared::open(dir.path(), Some(SECRET)).expect("shared");
        let pump = Pump::open(&shared).expect("pump");
        assert!(pump.run(Pieces(pieces), &shared).is_err());
        let raw = std::fs::read(dir.path().join(files::RAW)).expect("raw");
        let t = timeline(dir.path());
        let (open, close) = (t.opens[&1] as usize, t.closes[&1] as usize);
        assert!(raw[..open].ends_with(b"\x07") && raw[open..].starts_with(b"hi\r\n"), "opened after C");
        assert_eq!(&raw[open..close], [b"hi\r\n".as_slice(), &end].concat(), "closed after D");
        assert!(t.end.is_none() && t.gaps.is_empty());
        // The next logger keeps what was written and marks its start as a
        // gap; the region it replays keeps its place.
        let shared = Shared::open(dir.path(), Some(SECRET)).expect("shared");
        let pump = Pump::open(&shared).expect("pump");
        pump.run(&b"more\r\n"[..], &shared).expect("run");
        let t = timeline(dir.path());
        assert_eq!((t.opens[&1] as usize, t.closes[&1] as usize), (open, close));
        assert_eq!(t.gaps.iter().map(|g| g.0).collect::<Vec<_>>(), [raw.len() as u64]);
        assert!(t.end.is_some(), "a clean end is recorded");
    }

    #[test]
    fn records_are_coalesced_within_a_quantum_and_reopening_marks_a_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = Timing::open(dir.path(), 0, 1_000);
        t.output(0, 1_000);
        t.output(10, 1_001);
        t.output(20, 1_000 + QUANTUM_MS);
        t.flush();
        drop(t);
        let mut t = Timing::open(dir.path(), 30, 5_000);
        t.end(5_100);
        let bytes = std::fs::read(dir.path().join(files::TIMING)).expect("read");
        assert_eq!(
            decode(&bytes),
            [
                Record::Start { ms: 1_000, raw: 0 },
                Record::Output { at: 20, ms: 1_000 + QUANTUM_MS },
                Record::Start { ms: 5_000, raw: 30 },
                Record::End { ms: 5_100 },
            ]
        );
    }
}

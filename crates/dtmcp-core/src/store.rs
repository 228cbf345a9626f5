//! The on-disk format of a session, and the code that reads and writes it.
//!
//! This format is the contract between the logger (the only writer) and the
//! router (a reader, also of closed sessions). Per session directory:
//!
//! - `raw.log`: every byte the pane printed, as it came.
//! - `session.txt`: the cooked lines, each ended by `\n`. Line numbers in
//!   replies are line numbers of this file.
//! - `lines.idx`: for line `n`, the little-endian u64 at byte `8 * (n - 1)`
//!   is the offset in `session.txt` just past that line's `\n`. A reader
//!   counts lines by the index's length and so never sees half a line: the
//!   writer appends the text before the index entry.
//! - `regions.jsonl`: one JSON [`Region`] per line, written at every change;
//!   the last line for an id wins.
//! - `meta.json`: [`Meta`], written by the router when it creates the session.
//! - `secret`: the session's marker secret, mode 0600.
//! - `markers.state`: the last marker sequence number believed per shell
//!   pid (JSON), so a restarted logger still refuses replayed markers.
//! - `checkpoint.json`: where a restarted logger carries on cooking: a
//!   raw offset, the next line's number and the region tracker's state.
//! - `gaps.jsonl`: one JSON line per stretch of output that was not logged
//!   (a dead logger, a full disk).
//! - `timing.idx`: when each stretch of `raw.log` arrived, where regions
//!   start and end in it, and the pane's size over time (see
//!   [`crate::cast::timing`]).
//! - `summary.idx`, `tallies.idx`: the lines a summary of clipped output
//!   looks at (failures, errors and their locations; result tallies), noted
//!   as the lines are cooked (see [`marks`]).
//! - `regions/NNNN.txt`: the output of a region (id zero-padded to four
//!   digits), for the [`KEEP_REGION_FILES`] regions used most recently.
//!
//! Region files are the one exception to "the logger is the only writer":
//! they are caches derived from `session.txt` and `regions.jsonl`, which the
//! router writes when a region is read or searched, so that standard file
//! tools can work on one command's output. Each is written to a temporary
//! name and renamed, so a reader sees a whole file or none; losing them
//! loses nothing.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::region::{LinePos, Region};
use crate::types::{LineNo, RegionId};

pub mod marks;

/// File names inside a session directory.
pub mod files {
    /// Every byte of output.
    pub const RAW: &str = "raw.log";
    /// Cooked lines.
    pub const TEXT: &str = "session.txt";
    /// Line end offsets.
    pub const INDEX: &str = "lines.idx";
    /// Failure and error lines, and the locations after rustc errors.
    pub const SUMMARY: &str = "summary.idx";
    /// Result tally lines.
    pub const TALLIES: &str = "tallies.idx";
    /// Region changes.
    pub const REGIONS: &str = "regions.jsonl";
    /// Session facts.
    pub const META: &str = "meta.json";
    /// The marker secret.
    pub const SECRET: &str = "secret";
    /// The logger's socket.
    pub const SOCKET: &str = "logger.sock";
    /// The last marker sequence number believed per shell pid.
    pub const MARKERS: &str = "markers.state";
    /// The directory of region files.
    pub const REGION_DIR: &str = "regions";
    /// The logger's last checkpoint (see `logger::checkpoint`).
    pub const CHECKPOINT: &str = "checkpoint.json";
    /// The running logger's process id.
    pub const PID: &str = "logger.pid";
    /// Left by a logger that found its logs deleted and exited.
    pub const GONE: &str = "logger.gone";
    /// How the session ended, when not by its program exiting.
    pub const ENDED: &str = "ended";
    /// When the bytes of `raw.log` came, and the pane's sizes (see
    /// `cast::timing`).
    pub const TIMING: &str = "timing.idx";
}

/// How many region files a session directory keeps.
pub const KEEP_REGION_FILES: usize = 8;

/// What the router records about a session when it makes it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Meta {
    /// The session's name.
    pub name: String,
    /// The host the server runs on.
    pub host: String,
    /// The tmux socket name.
    pub tmux_socket: String,
    /// The path of that tmux socket (it depends on `TMUX_TMPDIR`); empty in
    /// sessions made before it was recorded.
    #[serde(default)]
    pub tmux_socket_path: String,
    /// The tmux server's pid when the session was made.
    pub tmux_pid: u32,
    /// The pane's id (`%N`).
    pub pane_id: String,
    /// The program the pane started with.
    pub command: Vec<String>,
    /// Whether that program is an integrated shell.
    pub integrated: bool,
    /// When it was made, in ms since the epoch.
    pub created_ms: u64,
    /// The version of docent-terminal-mcp that made it.
    pub version: String,
    /// A regex for the session's own prompt, ending input regions besides
    /// the built-in prompt patterns.
    #[serde(default)]
    pub prompt_pattern: Option<String>,
    /// The pane was made by someone else (split with tmux's own keys) and
    /// taken on as a session later, with no shell integration of ours.
    #[serde(default)]
    pub adopted: bool,
    /// The session whose window the pane was split from, for a pane made
    /// by `session_split` or adopted; `None` for a session's first pane.
    #[serde(default)]
    pub parent: Option<String>,
    /// The pane's terminal (`/dev/pts/N`), whose size the logger reads
    /// for recordings; empty in sessions made before it was recorded.
    #[serde(default)]
    pub tty: String,
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("{}: {}", path.display(), describe_io(source))]
    Io {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A JSON file did not parse.
    #[error("{path}: {source}")]
    Json {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}

fn open_append(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new().create(true).append(true).mode(0o600).open(path).map_err(io_err(path))
}

/// Appends cooked lines to `session.txt` and `lines.idx`, noting the
/// lines a summary looks at in the summary index ([`marks`]).
///
/// Lines collect in two buffers of its own, written out by [`flush`]
/// (the block's summary records, its text, then its index) or when the
/// text buffer fills up: one write per file for many lines. If a write
/// fails (a full disk), [`reopen`] drops what is buffered and cuts the
/// files back to their last whole line, so the writer can go on after the
/// disk has room again.
///
/// [`flush`]: LineWriter::flush
/// [`reopen`]: LineWriter::reopen
pub struct LineWriter {
    text: File,
    index: File,
    /// Text of lines not yet written.
    text_buf: Vec<u8>,
    /// Index entries of those lines.
    index_buf: Vec<u8>,
    /// Length of `session.txt` including buffered bytes.
    text_len: u64,
    /// Lines written, buffered or not.
    lines: u64,
    /// Of those, the lines in `text_buf`.
    buf_lines: u64,
    marks: marks::MarkWriter,
    dir: PathBuf,
}

/// The text buffered before a write goes out on its own.
const LINE_BUF: usize = 1 << 18;

impl LineWriter {
    /// Opens the files of `dir` for appending, continuing after what they
    /// already hold (cut back to the last indexed line).
    pub fn open(dir: &Path) -> Result<LineWriter, StoreError> {
        let text_path = dir.join(files::TEXT);
        let index_path = dir.join(files::INDEX);
        let (text, index) = (open_append(&text_path)?, open_append(&index_path)?);
        let reader = LineReader::open(dir)?;
        let (lines, text_len) = reader.extent()?;
        let mut w = LineWriter {
            text,
            index,
            text_buf: Vec::new(),
            index_buf: Vec::new(),
            text_len: 0,
            lines: 0,
            buf_lines: 0,
            marks: marks::MarkWriter::open(dir, &reader, lines)?,
            dir: dir.to_path_buf(),
        };
        w.cut_to(lines, text_len)?;
        Ok(w)
    }

    /// Forgets buffered lines and cuts the files back to the last line
    /// whose text and index entry are both whole on disk.
    pub fn reopen(&mut self) -> Result<(), StoreError> {
        self.text_buf.clear();
        self.index_buf.clear();
        self.buf_lines = 0;
        let reader = LineReader::open(&self.dir)?;
        let (lines, text_len) = reader.extent()?;
        self.marks.cut_back(&reader, lines)?;
        self.cut_to(lines, text_len)
    }

    fn cut_to(&mut self, lines: u64, text_len: u64) -> Result<(), StoreError> {
        self.text.set_len(text_len).map_err(io_err(&self.dir.join(files::TEXT)))?;
        self.index.set_len(lines * 8).map_err(io_err(&self.dir.join(files::INDEX)))?;
        self.lines = lines;
        self.text_len = text_len;
        Ok(())
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Appends one line (its text must hold no `\n`).
    pub fn push(&mut self, text: &str) -> Result<(), StoreError> {
        self.text_buf.extend_from_slice(text.as_bytes());
        self.text_buf.push(b'\n');
        self.text_len += text.len() as u64 + 1;
        self.lines += 1;
        self.buf_lines += 1;
        self.index_buf.extend_from_slice(&self.text_len.to_le_bytes());
        if self.text_buf.len() >= LINE_BUF {
            self.flush()?;
        }
        Ok(())
    }

    /// Makes every pushed line visible to readers: summary records first,
    /// then text, then index.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        if self.text_buf.is_empty() && self.index_buf.is_empty() {
            return Ok(());
        }
        self.marks.note(&self.text_buf, self.lines - self.buf_lines + 1);
        self.buf_lines = 0;
        self.marks.flush()?;
        self.text.write_all(&self.text_buf).map_err(io_err(&self.dir.join(files::TEXT)))?;
        self.text_buf.clear();
        self.index.write_all(&self.index_buf).map_err(io_err(&self.dir.join(files::INDEX)))?;
        self.index_buf.clear();
        // A long line or a burst may have grown the buffers; give back
        // what a quiet pane does not need.
        if self.text_buf.capacity() > 4 * LINE_BUF {
            self.text_buf = Vec::new();
            self.index_buf = Vec::new();
        }
        Ok(())
    }
}

/// Reads cooked lines by number without holding a table in memory.
pub struct LineReader {
    text: Option<File>,
    index: Option<File>,
}

impl LineReader {
    /// Opens the files of `dir`; missing files read as an empty session.
    pub fn open(dir: &Path) -> Result<LineReader, StoreError> {
        let open = |name: &str| -> Result<Option<File>, StoreError> {
            let path = dir.join(name);
            match File::open(&path) {
                Ok(f) => Ok(Some(f)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io_err(&path)(e)),
            }
        };
        Ok(LineReader { text: open(files::TEXT)?, index: open(files::INDEX)? })
    }

    /// (lines, bytes of text) that are complete on disk: the index counts,
    /// and a text shorter than the index claims cuts the count back.
    pub fn extent(&self) -> Result<(u64, u64), StoreError> {
        let (Some(text), Some(_)) = (&self.text, &self.index) else { return Ok((0, 0)) };
        let text_len = text.metadata().map_err(|e| StoreError::Io { path: files::TEXT.into(), source: e })?.len();
        let mut lines = self.count()?;
        while lines > 0 && self.end_of(lines)? > text_len {
            lines -= 1;
        }
        let end = if lines == 0 { 0 } else { self.end_of(lines)? };
        Ok((lines, end))
    }

    /// Lines in the index.
    pub fn count(&self) -> Result<u64, StoreError> {
        match &self.index {
            None => Ok(0),
            Some(f) => Ok(f.metadata().map_err(|e| StoreError::Io { path: files::INDEX.into(), source: e })?.len() / 8),
        }
    }

    /// The text of line `line`, which must be in the index (read with no
    /// look at the index's length).
    pub fn one(&self, line: u64) -> Result<String, StoreError> {
        let mut buf = self.text_between(self.end_of(line.saturating_sub(1))?, self.end_of(line)?)?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// The offset in `session.txt` just past line `line` (0 for line 0).
    pub fn line_end(&self, line: u64) -> Result<u64, StoreError> {
        self.end_of(line)
    }

    fn end_of(&self, line: u64) -> Result<u64, StoreError> {
        if line == 0 {
            return Ok(0);
        }
        let Some(index) = &self.index else { return Ok(0) };
        let mut buf = [0u8; 8];
        index
            .read_exact_at(&mut buf, (line - 1) * 8)
            .map_err(|e| StoreError::Io { path: files::INDEX.into(), source: e })?;
        Ok(u64::from_le_bytes(buf))
    }

    /// Hands the text of lines `first..=last` (clipped to what exists) to
    /// `f` in blocks of whole lines, each block with the number of its
    /// first line; a block is about [`SCAN_BLOCK`] bytes (more when one
    /// line is longer), so a huge range is never held whole.
    pub fn scan(&self, first: LineNo, last: LineNo, mut f: impl FnMut(u64, &[u8])) -> Result<(), StoreError> {
        let first = first.0.max(1);
        let last = last.0.min(self.count()?);
        let Some(text) = &self.text else { return Ok(()) };
        if first > last {
            return Ok(());
        }
        let (mut at, end) = (self.end_of(first - 1)?, self.end_of(last)?);
        let mut number = first;
        let mut buf: Vec<u8> = Vec::new();
        while at < end {
            let want = (end - at).min(SCAN_BLOCK as u64) as usize;
            let kept = buf.len();
            buf.resize(kept + want, 0);
            text.read_exact_at(&mut buf[kept..], at)
                .map_err(|e| StoreError::Io { path: files::TEXT.into(), source: e })?;
            at += want as u64;
            // Whole lines go now; a line cut by the block waits for the next.
            let whole = if at >= end { buf.len() } else { memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1) };
            if whole > 0 {
                f(number, &buf[..whole]);
                number += memchr::memchr_iter(b'\n', &buf[..whole]).count() as u64;
                buf.drain(..whole);
            }
        }
        Ok(())
    }

    /// Lines `from..from+count`, clipped to what exists.
    pub fn read(&self, from: LineNo, count: u64) -> Result<Vec<String>, StoreError> {
        let total = self.count()?;
        let first = from.0.max(1);
        let last = (first + count).min(total + 1); // exclusive
        if first >= last {
            return Ok(Vec::new());
        }
        let buf = self.text_between(self.end_of(first - 1)?, self.end_of(last - 1)?)?;
        let body = String::from_utf8_lossy(&buf);
        Ok(body.split_terminator('\n').map(str::to_string).collect())
    }

    /// Bytes `start..end` of `session.txt` (none when there is no text).
    fn text_between(&self, start: u64, end: u64) -> Result<Vec<u8>, StoreError> {
        let Some(text) = &self.text else { return Ok(Vec::new()) };
        let mut buf = vec![0u8; end.saturating_sub(start) as usize];
        text.read_exact_at(&mut buf, start).map_err(|e| StoreError::Io { path: files::TEXT.into(), source: e })?;
        Ok(buf)
    }
}

/// The bytes [`LineReader::scan`] reads at a time (its buffer grows to
/// twice this when a line is cut between two blocks). The text is in the
/// page cache, so a bigger block saves nothing; at 256 KiB the buffer was
/// a fifth of the router's heap while it summarised a long output.
pub const SCAN_BLOCK: usize = 1 << 16;

/// Appends region records to `regions.jsonl`.
pub struct RegionLog {
    file: File,
    path: PathBuf,
}

impl RegionLog {
    /// Opens `regions.jsonl` of `dir` for appending.
    pub fn open(dir: &Path) -> Result<RegionLog, StoreError> {
        let path = dir.join(files::REGIONS);
        Ok(RegionLog { file: open_append(&path)?, path })
    }

    /// Appends one record, as one write so a reader never sees half.
    pub fn append(&mut self, region: &Region) -> Result<(), StoreError> {
        self.append_all([region])
    }

    /// Appends records, all in one write (one system call for a chunk's
    /// worth of regions).
    pub fn append_all<'a>(&mut self, regions: impl IntoIterator<Item = &'a Region>) -> Result<(), StoreError> {
        let mut lines = Vec::new();
        for region in regions {
            serde_json::to_writer(&mut lines, region)
                .map_err(|source| StoreError::Json { path: self.path.clone(), source })?;
            lines.push(b'\n');
        }
        if lines.is_empty() {
            return Ok(());
        }
        self.file.write_all(&lines).map_err(io_err(&self.path))
    }
}

/// Reads `regions.jsonl`: the latest record of every region, by id order.
/// A torn last line (a crash mid-write) is skipped.
pub fn read_regions(dir: &Path) -> Result<Vec<Region>, StoreError> {
    let path = dir.join(files::REGIONS);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&path)(e)),
    };
    let mut by_id: std::collections::BTreeMap<u64, Region> = Default::default();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(io_err(&path))?;
        if let Ok(r) = serde_json::from_str::<Region>(&line) {
            by_id.insert(r.id.0, r);
        }
    }
    Ok(by_id.into_values().collect())
}

/// The path of region `id`'s file in session directory `dir`.
pub fn region_file(dir: &Path, id: RegionId) -> PathBuf {
    dir.join(files::REGION_DIR).join(format!("{:04}.txt", id.0))
}

/// The bytes of `session.txt` that hold region `r`'s output: from its start
/// to its end, or to the last complete line while it runs.
pub fn region_bytes(dir: &Path, r: &Region) -> Result<std::ops::Range<u64>, StoreError> {
    let reader = LineReader::open(dir)?;
    let (lines, text_end) = reader.extent()?;
    let at = |pos: LinePos| -> Result<u64, StoreError> {
        if pos.line.0 == 0 || pos.line.0 > lines {
            return Ok(text_end);
        }
        let (start, end) = (reader.end_of(pos.line.0 - 1)?, reader.end_of(pos.line.0)?);
        Ok((start + u64::from(pos.bytes)).min(end))
    };
    let start = at(r.start)?;
    let end = match r.end {
        Some(pos) => at(pos)?.max(start),
        None => text_end.max(start),
    };
    Ok(start..end)
}

/// Writes region `r`'s output to its file (again), then removes the least
/// recently written region files beyond [`KEEP_REGION_FILES`]. The output is
/// the bytes of `session.txt` that [`region_bytes`] names, so the file is
/// copied, never held.
pub fn write_region_file(dir: &Path, r: &Region) -> Result<PathBuf, StoreError> {
    let span = region_bytes(dir, r)?;
    write_region_span(dir, r, span)
}

/// Writes bytes `span` of `session.txt` as region `r`'s file (see
/// [`write_region_file`]), for a caller that has already measured them.
pub fn write_region_span(dir: &Path, r: &Region, span: std::ops::Range<u64>) -> Result<PathBuf, StoreError> {
    let regions = dir.join(files::REGION_DIR);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&regions).map_err(io_err(&regions))?;
    let path = region_file(dir, r.id);
    let tmp = regions.join(format!(".{:04}.tmp", r.id.0));
    copy_range(&dir.join(files::TEXT), span.start, span.end, &tmp)?;
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    prune_region_files(&regions)?;
    Ok(path)
}

/// Copies bytes `start..end` of `from` to a new file `to`, ending it with a
/// newline when it has text.
fn copy_range(from: &Path, start: u64, end: u64, to: &Path) -> Result<(), StoreError> {
    let mut src = File::open(from).map_err(io_err(from))?;
    src.seek(SeekFrom::Start(start)).map_err(io_err(from))?;
    let out = OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(to).map_err(io_err(to))?;
    let mut out = BufWriter::new(out);
    let copied = std::io::copy(&mut src.take(end - start), &mut out).map_err(io_err(to))?;
    let mut last = [0u8; 1];
    let ends_open = copied > 0
        && File::open(from).and_then(|f| f.read_exact_at(&mut last, start + copied - 1)).is_ok()
        && last[0] != b'\n';
    if ends_open {
        out.write_all(b"\n").map_err(io_err(to))?;
    }
    out.flush().map_err(io_err(to))
}

/// Removes the region files of `regions` beyond the newest
/// [`KEEP_REGION_FILES`], by modification time.
fn prune_region_files(regions: &Path) -> Result<(), StoreError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(regions).map_err(io_err(regions))? {
        let entry = entry.map_err(io_err(regions))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".txt") || name.starts_with('.') {
            continue;
        }
        let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
        found.push((modified, name, entry.path()));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    for (_, _, path) in found.into_iter().skip(KEEP_REGION_FILES) {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err(&path)(e)),
            _ => {}
        }
    }
    Ok(())
}

/// Reads `meta.json` of `dir`.
pub fn read_meta(dir: &Path) -> Result<Meta, StoreError> {
    let path = dir.join(files::META);
    let text = std::fs::read(&path).map_err(io_err(&path))?;
    serde_json::from_slice(&text).map_err(|source| StoreError::Json { path, source })
}

/// Writes `meta.json` of `dir` atomically (see [`write_atomic`]).
pub fn write_meta(dir: &Path, meta: &Meta) -> Result<(), StoreError> {
    let path = dir.join(files::META);
    let body = serde_json::to_vec_pretty(meta).map_err(|source| StoreError::Json { path: path.clone(), source })?;
    write_atomic(&path, &body).map_err(io_err(&path))
}

/// Replaces the file at `path` with `body` so that a reader, or the next
/// process after a crash or power loss, finds the old file or the new one
/// whole, never a truncated mix: the bytes go to a temporary file of a name
/// no other writer uses (mode 0600), which is synced, renamed over `path`,
/// and the directory synced. On failure (a full disk, say) the temporary
/// file is removed and `path` is left as it was.
pub fn write_atomic(path: &Path, body: &[u8]) -> std::io::Result<()> {
    replace(path, body, Durable::Yes)
}

/// Replaces the file at `path` with `body` as [`write_atomic`] does, but
/// without syncing anything: a reader, or the next process after a crash of
/// this one, finds the old file or the new one whole (the page cache holds
/// both the bytes and the rename), while a power cut may lose the change.
/// For records that must outlive a process, not the machine; it costs no
/// `fsync` (about 0.4 ms each on slow disks).
pub fn write_replace(path: &Path, body: &[u8]) -> std::io::Result<()> {
    replace(path, body, Durable::No)
}

/// Whether [`replace`] syncs the file and its directory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durable {
    Yes,
    No,
}

fn replace(path: &Path, body: &[u8], durable: Durable) -> std::io::Result<()> {
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{serial}.tmp", std::process::id()));
    let written = (|| {
        let mut f = OpenOptions::new().create_new(true).write(true).mode(0o600).open(&tmp)?;
        f.write_all(body)?;
        if durable == Durable::Yes {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable once the directory is; a failure here loses
    // nothing a reader would see now.
    if durable == Durable::Yes
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A file that lines are appended to through a handle kept open between
/// appends, so that a record per call costs one `write`, not an open and
/// a close. Before each append the path is checked (one `stat`): when it no
/// longer names the open file (removed, rotated away, or replaced by a
/// rename), the path is opened again, so the line goes where a reader
/// looks. Created 0600, in a 0700 directory made when missing.
#[derive(Debug)]
pub struct Appender {
    path: PathBuf,
    /// The open handle and the (device, inode) it had when opened.
    open: Option<(File, (u64, u64))>,
}

impl Appender {
    /// An appender to `path`; nothing is opened before the first append.
    pub fn new(path: PathBuf) -> Appender {
        Appender { path, open: None }
    }

    /// The file appended to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (which should end with `\n`) in one `write`, so
    /// concurrent appenders and readers never see half of it.
    pub fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let now = std::fs::metadata(&self.path).ok().map(|m| (m.dev(), m.ino()));
        if now.is_none() || self.open.as_ref().map(|(_, id)| *id) != now {
            self.open = None;
        }
        let file = match &mut self.open {
            Some((f, _)) => f,
            None => {
                if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    private_dir_all(dir)?;
                }
                let f = OpenOptions::new().create(true).append(true).mode(0o600).open(&self.path)?;
                let meta = f.metadata()?;
                &mut self.open.insert((f, (meta.dev(), meta.ino()))).0
            }
        };
        file.write_all(line)
    }
}

/// Follows a file that only grows by whole lines (`regions.jsonl`, an
/// agent's typing record), handing out the lines appended since the last
/// look, so that an index of it costs the new lines, not the whole file.
/// A file that is gone, shorter than what was read, or another file under
/// the same name (a session made again, a record replaced by a rename)
/// starts over from its beginning. A torn last line (no `\n` yet) is left
/// for the next look.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    /// The file read so far and its (device, inode). Holding it open keeps
    /// its inode from being reused by a new file under the same name.
    open: Option<(File, (u64, u64))>,
    /// Bytes of whole lines read so far.
    read: u64,
}

/// What [`Tail::read_new`] found.
#[derive(Debug, Default)]
pub struct Appended {
    /// The file is not the one read before: forget what it said.
    pub restarted: bool,
    /// The offset in the file of `bytes`.
    pub base: u64,
    /// Whole lines, each ended by `\n`.
    pub bytes: Vec<u8>,
}

impl Tail {
    /// A follower of `path`, which has read nothing yet.
    pub fn new(path: PathBuf) -> Tail {
        Tail { path, open: None, read: 0 }
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lines appended since the last call (all of them the first time).
    pub fn read_new(&mut self) -> Result<Appended, StoreError> {
        use std::os::unix::fs::MetadataExt;
        let had = self.open.is_some() || self.read > 0;
        let (now, mut len) = match std::fs::metadata(&self.path) {
            Ok(m) => ((m.dev(), m.ino()), m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.open = None;
                self.read = 0;
                return Ok(Appended { restarted: had, ..Appended::default() });
            }
            Err(e) => return Err(io_err(&self.path)(e)),
        };
        let mut restarted = false;
        if self.open.as_ref().map(|(_, id)| *id) != Some(now) {
            let f = File::open(&self.path).map_err(io_err(&self.path))?;
            let m = f.metadata().map_err(io_err(&self.path))?;
            // The file opened may have replaced the one just stat'ed.
            len = m.len();
            self.open = Some((f, (m.dev(), m.ino())));
            restarted = had;
            self.read = 0;
        }
        let Some((file, _)) = &self.open else { return Ok(Appended::default()) };
        // The length the path's stat gave is the open file's (the same
        // inode, or the one just opened): a line appended since is read at
        // the next call.
        if len < self.read {
            restarted = true;
            self.read = 0;
        }
        let base = self.read;
        let mut bytes = vec![0u8; (len - base) as usize];
        let mut got = 0;
        while got < bytes.len() {
            match file.read_at(&mut bytes[got..], base + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(&self.path)(e)),
            }
        }
        let whole = memchr::memrchr(b'\n', &bytes[..got]).map_or(0, |i| i + 1);
        bytes.truncate(whole);
        self.read += whole as u64;
        Ok(Appended { restarted, base, bytes })
    }

    /// The file as read so far, to read records back from; `None` before
    /// the first look found it.
    pub fn file(&self) -> Option<&File> {
        self.open.as_ref().map(|(f, _)| f)
    }
}

/// Creates `dir` and its missing parents, mode 0700 whatever the umask.
pub fn private_dir_all(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Makes sure the existing directory `dir` is this user's and that no one
/// else can write into it: another owner is refused (they could replace
/// what we put there), and group or other write (or any access) bits are
/// taken away.
pub fn check_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::symlink_metadata(dir)?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(std::io::Error::other(format!(
            "{} is owned by uid {}, not by this user (uid {me}); remove it or point the server elsewhere",
            dir.display(),
            meta.uid()
        )));
    }
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!("{} is not a directory", dir.display())));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Whether `e` means the file system holding the state home is full: no
/// space, no quota left, or a file size limit (`ulimit -f`) reached.
pub fn is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded | std::io::ErrorKind::FileTooLarge
    )
}

/// An I/O error as said in a reply: a full state directory is named as
/// such, with what to do about it.
pub fn describe_io(e: &std::io::Error) -> String {
    if is_full(e) {
        format!("the state directory is full ({e}); free space there (or raise the file size limit) and try again")
    } else {
        e.to_string()
    }
}

/// Reads `markers.state` of `dir`; a missing or torn file reads as empty.
pub fn read_marker_floors(dir: &Path) -> std::collections::HashMap<u32, u64> {
    let Ok(body) = std::fs::read(dir.join(files::MARKERS)) else { return Default::default() };
    // The first JSON value; anything after it is left from a longer write.
    let mut values = serde_json::Deserializer::from_slice(&body).into_iter();
    values.next().and_then(Result::ok).unwrap_or_default()
}

/// Keeps `markers.state` up to date in place: one positioned write per
/// change, cheap enough to run at every prompt. A shorter text than the
/// file holds is padded with spaces to the file's length rather than
/// truncated (a truncate cost as much as the write); the reader reads the
/// first JSON value and ignores what follows it.
pub struct MarkerFloors {
    file: File,
    path: PathBuf,
    /// The file's length: what a shorter text is padded to.
    len: usize,
}

impl MarkerFloors {
    /// Opens (or makes) `markers.state` in `dir`.
    pub fn open(dir: &Path) -> Result<MarkerFloors, StoreError> {
        let path = dir.join(files::MARKERS);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err(&path))?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        Ok(MarkerFloors { file, path, len: usize::try_from(len).unwrap_or(usize::MAX) })
    }

    /// Replaces the saved floors with `floors`.
    pub fn save(&mut self, floors: &std::collections::HashMap<u32, u64>) -> Result<(), StoreError> {
        let mut body =
            serde_json::to_vec(floors).map_err(|source| StoreError::Json { path: self.path.clone(), source })?;
        // A file much longer than the text (floors of many shells gone
        // since) is cut once rather than padded at every prompt.
        let cut = self.len > body.len() + 512;
        if !cut && body.len() < self.len {
            body.resize(self.len, b' ');
        }
        self.file.write_all_at(&body, 0).map_err(io_err(&self.path))?;
        if cut {
            self.file.set_len(body.len() as u64).map_err(io_err(&self.path))?;
        }
        self.len = body.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_by_number() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = LineWriter::open(dir.path()).expect("open");
        for i in 1..=100 {
            w.push(&format!("line {i}")).expect("push");
        }
        w.flush().expect("flush");
        let r = LineReader::open(dir.path()).expect("reader");
        assert_eq!(r.count().expect("count"), 100);
        assert_eq!(r.read(LineNo(1), 2).expect("read"), vec!["line 1", "line 2"]);
        assert_eq!(r.read(LineNo(99), 10).expect("read"), vec!["line 99", "line 100"]);
        assert!(r.read(LineNo(101), 10).expect("read").is_empty());
    }

    #[test]
    fn a_scan_hands_out_whole_lines_numbered_in_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = LineWriter::open(dir.path()).expect("open");
        let long = "x".repeat(SCAN_BLOCK + 10); // longer than a block
        let lines: Vec<String> =
            (1..=300_000u64).map(|i| if i == 150_000 { long.clone() } else { format!("line {i}") }).collect();
        for l in &lines {
            w.push(l).expect("push");
        }
        w.flush().expect("flush");
        let r = LineReader::open(dir.path()).expect("reader");
        let (mut blocks, mut seen) = (0, Vec::new());
        r.scan(LineNo(5), LineNo(299_990), |first, block| {
            blocks += 1;
            assert!(block.ends_with(b"\n"));
            let text = std::str::from_utf8(block).expect("UTF-8");
            assert_eq!(first, 5 + seen.len() as u64, "each block numbered from its first line");
            seen.extend(text.lines().map(str::to_string));
        })
        .expect("scan");
        assert!(blocks > 2, "{blocks} blocks");
        assert_eq!(seen, lines[4..299_990]);
        let mut none = true;
        r.scan(LineNo(400_000), LineNo(400_010), |_, _| none = false).expect("scan");
        assert!(none, "nothing past the end");
    }

    #[test]
    fn marker_floors_read_back_after_a_shorter_save() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut floors = MarkerFloors::open(dir.path()).expect("open");
        let many: std::collections::HashMap<u32, u64> = (1..=5).map(|p| (p, 1_000_000 + u64::from(p))).collect();
        floors.save(&many).expect("save");
        let few: std::collections::HashMap<u32, u64> = [(7, 42)].into();
        floors.save(&few).expect("save");
        assert_eq!(read_marker_floors(dir.path()), few);
        // Reopened over the padded file, a save still reads back whole.
        let mut floors = MarkerFloors::open(dir.path()).expect("reopen");
        floors.save(&many).expect("save");
        assert_eq!(read_marker_floors(dir.path()), many);
        // Far shorter than the file: cut, not padded.
        let lots: std::collections::HashMap<u32, u64> = (1..=200).map(|p| (p, u64::from(p))).collect();
        floors.save(&lots).expect("save");
        floors.save(&few).expect("save");
        assert_eq!(read_marker_floors(dir.path()), few);
        let len = std::fs::metadata(dir.path().join(files::MARKERS)).expect("stat").len();
        assert!(len < 600, "a long file is cut, not padded: {len} bytes");
    }

    #[test]
    fn empty_lines_and_unicode_survive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = LineWriter::open(dir.path()).expect("open");
        for t in ["", "日本語", "", "x"] {
            w.push(t).expect("push");
        }
        w.flush().expect("flush");
        let r = LineReader::open(dir.path()).expect("reader");
        assert_eq!(r.read(LineNo(1), 4).expect("read"), vec!["", "日本語", "", "x"]);
    }

    #[test]
    fn a_torn_tail_is_cut_back_on_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = LineWriter::open(dir.path()).expect("open");
        w.push("one").expect("push");
        w.push("two").expect("push");
        w.flush().expect("flush");
        drop(w);
        // A crash after the text of a third line but before its index entry,
        // and a torn index entry.
        let mut t = OpenOptions::new().append(true).open(dir.path().join(files::TEXT)).expect("text");
        t.write_all(b"thr").expect("write");
        let mut i = OpenOptions::new().append(true).open(dir.path().join(files::INDEX)).expect("idx");
        i.write_all(&[1, 2, 3]).expect("write");
        let mut w = LineWriter::open(dir.path()).expect("reopen");
        assert_eq!(w.lines(), 2);
        w.push("three").expect("push");
        w.flush().expect("flush");
        let r = LineReader::open(dir.path()).expect("reader");
        assert_eq!(r.read(LineNo(1), 5).expect("read"), vec!["one", "two", "three"]);
    }

    #[test]
    fn reopening_forgets_buffered_lines_and_cuts_a_torn_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = LineWriter::open(dir.path()).expect("open");
        w.push("kept").expect("push");
        w.flush().expect("flush");
        w.push("buffered when the disk filled").expect("push");
        // As if a write had stopped short: text on disk, no index entry.
        let mut t = OpenOptions::new().append(true).open(dir.path().join(files::TEXT)).expect("text");
        t.write_all(b"half a li").expect("write");
        w.reopen().expect("reopen");
        assert_eq!(w.lines(), 1);
        w.push("after").expect("push");
        w.flush().expect("flush");
        let r = LineReader::open(dir.path()).expect("reader");
        assert_eq!(r.read(LineNo(1), 5).expect("read"), vec!["kept", "after"]);
    }

    #[test]
    fn the_last_region_record_wins_and_torn_lines_are_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = RegionLog::open(dir.path()).expect("open");
        let mut r = Region { id: RegionId(1), command: "make".into(), ..Region::default() };
        log.append(&r).expect("append");
        r.exit = Some(2);
        log.append(&r).expect("append");
        log.file.write_all(b"{\"id\": 2, \"comm").expect("torn");
        let back = read_regions(dir.path()).expect("read");
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].exit, Some(2));
    }

    #[test]
    fn region_files_hold_the_output_and_only_the_newest_eight_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = LineWriter::open(dir.path()).expect("open");
        for i in 1..=20 {
            w.push(&format!("$ cmd{i}")).expect("push");
        }
        w.flush().expect("flush");
        let region = |id: u64| Region {
            id: RegionId(id),
            start: LinePos { line: LineNo(id), bytes: 2 },
            end: Some(LinePos { line: LineNo(id + 1), bytes: 0 }),
            ..Region::default()
        };
        let path = write_region_file(dir.path(), &region(3)).expect("write");
        assert!(path.ends_with("regions/0003.txt"), "{}", path.display());
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "cmd3\n");
        for id in 4..=12 {
            write_region_file(dir.path(), &region(id)).expect("write");
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join(files::REGION_DIR))
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), KEEP_REGION_FILES, "{names:?}");
        assert_eq!(names[0], "0005.txt");
        // A running region runs to the last complete line.
        let running = Region { end: None, ..region(19) };
        let path = write_region_file(dir.path(), &running).expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "cmd19\n$ cmd20\n");
    }
}

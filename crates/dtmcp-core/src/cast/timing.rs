//! `timing.idx`: when the bytes of `raw.log` arrived, where each region
//! starts and ends in them, and the pane's size over time.
//!
//! # Format
//! The file opens with [`MAGIC`]; then come records, each one or more
//! LEB128 varints, appended by the logger (the only writer) in the order
//! things happened. A record stands at a *position* in `raw.log` that the
//! reader follows from record to record:
//!
//! | first varint `h` | then | meaning |
//! |---|---|---|
//! | `h & 1 == 0` | `d` | output: the bytes from position `pos + d` on arrived `h >> 1` ms after the time of the last output or start record |
//! | `h & 0xf == 0xd` | | region `last id + 1` opened at `pos + (h >> 4)` |
//! | `h & 0xf == 0xf` | | region `last id` closed at `pos + (h >> 4)` |
//! | `h & 0xf == 0x1` | `z(id - last id)` | region opened at `pos + z(h >> 4)` (any other) |
//! | `h & 0xf == 0x3` | `z(id - last id)` | region closed at `pos + z(h >> 4)` (any other) |
//! | `h & 0xf == 0x5` | `rows` | the pane is `h >> 4` columns by `rows` rows from `pos` on |
//! | `h & 0xf == 0x7` | `ms`, `raw` | a logger started at `ms` (since the epoch) with `raw.log` `raw` bytes long |
//! | `h & 0xf == 0x9` | `ms` | the pane's output ended at `ms` |
//! | `h & 0xf == 0xb` | `from_ms`, `to_ms - from_ms` | `h >> 4` bytes of output between those times were lost (not written) |
//!
//! `z` is the zigzag code of a signed number, so a small step either way
//! is one byte; "last id" is the id of the last region record (0 after a
//! start record). The usual records are the short ones: the next region
//! opens, the one opened last closes, both after the position before; the
//! long forms are for nested regions and for a logger that replays the
//! log (it records again, at earlier positions, what its predecessor had).
//! Output records carry no id and no absolute number: an ordinary command
//! costs an output record or two (2 to 5 bytes) and its region's opening
//! and closing (2 to 3 bytes each).
//!
//! # Coalescing
//! A byte's time is the time of the last output record at or before it.
//! The logger writes an output record only when [`QUANTUM_MS`] or more
//! have passed since the last one: the pieces tmux hands over within that
//! time share its record, so a byte's time is late by less than the
//! quantum, and a flood of output costs a record per quantum, not per
//! piece.
//!
//! # Durability
//! Each turn's records go out in one `write` after `raw.log`'s, so a
//! killed logger loses at most the records of the turn it died in: those
//! bytes then take the time of the record before. A new logger writes a
//! start record before anything else: the stretch between the two is a
//! gap, and so is a loss record (output a full disk would not take). A
//! torn last record (the machine died mid-write) is ignored.

use std::collections::HashMap;

/// The first bytes of every timing index.
pub const MAGIC: &[u8] = b"dtmcpT1\n";
/// The longest a byte's recorded time may lag its arrival.
pub const QUANTUM_MS: u64 = 4;

const OPEN: u64 = 0x1;
const CLOSE: u64 = 0x3;
const SIZE: u64 = 0x5;
const START: u64 = 0x7;
const END: u64 = 0x9;
const LOST: u64 = 0xb;
const OPEN_NEXT: u64 = 0xd;
const CLOSE_LAST: u64 = 0xf;

/// One record, as the logger hands it to [`Encoder`] (positions and times
/// absolute; the encoder makes them relative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// Output from byte `at` on arrived at `ms`.
    Output {
        /// Position in `raw.log`.
        at: u64,
        /// Milliseconds since the epoch.
        ms: u64,
    },
    /// Region `id` opened at byte `at`.
    Open {
        /// The region.
        id: u64,
        /// Position in `raw.log`.
        at: u64,
    },
    /// Region `id` closed at byte `at`.
    Close {
        /// The region.
        id: u64,
        /// Position in `raw.log`.
        at: u64,
    },
    /// The pane's size from byte `at` on: the position of the record
    /// before (a start or output record), which the encoder does not
    /// write again.
    Size {
        /// Position in `raw.log`.
        at: u64,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// A logger started at `ms` with `raw.log` `raw` bytes long.
    Start {
        /// Milliseconds since the epoch.
        ms: u64,
        /// The length of `raw.log`.
        raw: u64,
    },
    /// The pane's output ended at `ms`.
    End {
        /// Milliseconds since the epoch.
        ms: u64,
    },
    /// `bytes` of output between `from_ms` and `to_ms` were not written
    /// to `raw.log`; logging resumed at the current position.
    Lost {
        /// How many bytes.
        bytes: u64,
        /// When the loss began.
        from_ms: u64,
        /// When logging resumed.
        to_ms: u64,
    },
}

/// Turns records into the bytes of the index, keeping what the next
/// record is relative to.
#[derive(Debug, Default)]
pub struct Encoder {
    /// The position of the last record.
    pos: u64,
    /// The time of the last output or start record.
    ms: u64,
    /// The id of the last region record.
    id: u64,
}

impl Encoder {
    /// Appends `record` to `out`. A [`Record::Start`] must come first.
    pub fn push(&mut self, record: Record, out: &mut Vec<u8>) {
        match record {
            Record::Output { at, ms } => {
                put(out, ms.saturating_sub(self.ms) << 1);
                put(out, at.saturating_sub(self.pos));
                self.ms = self.ms.max(ms);
                self.pos = self.pos.max(at);
            }
            Record::Open { id, at } | Record::Close { id, at } => {
                let open = matches!(record, Record::Open { .. });
                let usual = at >= self.pos && if open { id == self.id + 1 } else { id == self.id };
                if usual {
                    put(out, (at - self.pos) << 4 | if open { OPEN_NEXT } else { CLOSE_LAST });
                } else {
                    put(out, zigzag(at as i64 - self.pos as i64) << 4 | if open { OPEN } else { CLOSE });
                    put(out, zigzag(id as i64 - self.id as i64));
                }
                (self.pos, self.id) = (at, id);
            }
            Record::Size { cols, rows, .. } => {
                // It stands where the last record did: the logger notes a
                // size right after a start or an output record.
                put(out, u64::from(cols) << 4 | SIZE);
                put(out, u64::from(rows));
            }
            Record::Start { ms, raw } => {
                put(out, START);
                put(out, ms);
                put(out, raw);
                (self.pos, self.ms, self.id) = (raw, ms, 0);
            }
            Record::End { ms } => {
                put(out, END);
                put(out, ms);
            }
            Record::Lost { bytes, from_ms, to_ms } => {
                put(out, bytes << 4 | LOST);
                put(out, from_ms);
                put(out, to_ms.saturating_sub(from_ms));
            }
        }
    }

    /// The time of the last output or start record.
    pub fn last_ms(&self) -> u64 {
        self.ms
    }
}

/// Reads `bytes` (a whole index) back into records with absolute
/// positions and times. A file that does not start with [`MAGIC`] reads as
/// no records; a torn or unknown record ends the reading.
pub fn decode(bytes: &[u8]) -> Vec<Record> {
    let Some(mut rest) = bytes.strip_prefix(MAGIC) else { return Vec::new() };
    let mut out = Vec::new();
    let (mut pos, mut ms, mut id) = (0u64, 0u64, 0u64);
    while !rest.is_empty() {
        let Some(record) = next(&mut rest, &mut pos, &mut ms, &mut id) else { break };
        out.push(record);
    }
    out
}

/// Decodes one record from the front of `rest`, following the state.
fn next(rest: &mut &[u8], pos: &mut u64, ms: &mut u64, id: &mut u64) -> Option<Record> {
    let h = get(rest)?;
    if h & 1 == 0 {
        let d = get(rest)?;
        *ms = ms.saturating_add(h >> 1);
        *pos = pos.saturating_add(d);
        return Some(Record::Output { at: *pos, ms: *ms });
    }
    match h & 0xf {
        OPEN_NEXT | CLOSE_LAST => {
            let open = h & 0xf == OPEN_NEXT;
            let at = pos.saturating_add(h >> 4);
            let this = if open { id.saturating_add(1) } else { *id };
            (*pos, *id) = (at, this);
            Some(if open { Record::Open { id: this, at } } else { Record::Close { id: this, at } })
        }
        OPEN | CLOSE => {
            let at = pos.saturating_add_signed(unzigzag(h >> 4));
            let this = id.saturating_add_signed(unzigzag(get(rest)?));
            (*pos, *id) = (at, this);
            Some(if h & 0xf == OPEN { Record::Open { id: this, at } } else { Record::Close { id: this, at } })
        }
        SIZE => {
            let rows = get(rest)?;
            Some(Record::Size { at: *pos, cols: clamp16(h >> 4), rows: clamp16(rows) })
        }
        START => {
            let (start, raw) = (get(rest)?, get(rest)?);
            (*pos, *ms, *id) = (raw, start, 0);
            Some(Record::Start { ms: start, raw })
        }
        END => Some(Record::End { ms: get(rest)? }),
        LOST => {
            let (from_ms, span) = (get(rest)?, get(rest)?);
            Some(Record::Lost { bytes: h >> 4, from_ms, to_ms: from_ms.saturating_add(span) })
        }
        _ => None,
    }
}

fn clamp16(v: u64) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends `v` as a LEB128 varint.
fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Takes a LEB128 varint off the front of `rest`; `None` if it is torn.
fn get(rest: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &b) in rest.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Some(v);
        }
    }
    None
}

/// What a timing index says, ready to answer "when" and "where".
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    /// (position, ms) of every output and start record, positions rising.
    marks: Vec<(u64, u64)>,
    /// (position, cols, rows), in order.
    pub sizes: Vec<(u64, u16, u16)>,
    /// Where each region opened (the first record of it wins: a logger
    /// that replays the log records again what its predecessor had).
    pub opens: HashMap<u64, u64>,
    /// Where each region closed (idem).
    pub closes: HashMap<u64, u64>,
    /// Stretches not logged: (position, ms when logging resumed, what).
    pub gaps: Vec<(u64, u64, String)>,
    /// When the pane's output ended, and where.
    pub end: Option<(u64, u64)>,
    /// When the first logger started, ms since the epoch.
    pub start_ms: u64,
}

impl Timeline {
    /// Reads the records of a whole index.
    pub fn from_records(records: &[Record]) -> Timeline {
        let mut t = Timeline::default();
        let mut pos = 0;
        for &r in records {
            match r {
                Record::Output { at, ms } => {
                    t.mark(at, ms);
                    pos = at;
                }
                Record::Open { id, at } => {
                    t.opens.entry(id).or_insert(at);
                }
                Record::Close { id, at } => {
                    t.closes.entry(id).or_insert(at);
                }
                Record::Size { at, cols, rows } => t.sizes.push((at, cols, rows)),
                Record::Start { ms, raw } => {
                    if t.marks.is_empty() {
                        t.start_ms = ms;
                    } else {
                        let what = "log gap: a new logger started (output printed while none ran is not in the log)";
                        t.gaps.push((raw, ms, what.to_string()));
                    }
                    t.mark(raw, ms);
                    pos = raw;
                    t.end = None;
                }
                Record::End { ms } => t.end = Some((pos, ms)),
                Record::Lost { bytes, to_ms, .. } => {
                    t.gaps.push((pos, to_ms, format!("log gap: {bytes} bytes of output could not be written")));
                }
            }
        }
        t
    }

    fn mark(&mut self, at: u64, ms: u64) {
        // Time never runs back (a clock set back reads as no time passing).
        let ms = self.marks.last().map_or(ms, |&(_, last)| ms.max(last));
        let at = self.marks.last().map_or(at, |&(last, _)| at.max(last));
        self.marks.push((at, ms));
    }

    /// Whether the index holds any timing at all.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// When byte `at` arrived, ms since the epoch.
    pub fn time_of(&self, at: u64) -> u64 {
        let i = self.marks.partition_point(|&(pos, _)| pos <= at);
        match i {
            0 => self.marks.first().map_or(0, |m| m.1),
            i => self.marks[i - 1].1,
        }
    }

    /// When what ends just before byte `at` happened: the time of byte
    /// `at - 1` (the time of byte 0 for the start).
    pub fn time_before(&self, at: u64) -> u64 {
        self.time_of(at.saturating_sub(1))
    }

    /// The positions in `from..to` where a new output record starts.
    pub fn cuts(&self, from: u64, to: u64) -> impl Iterator<Item = u64> + '_ {
        let i = self.marks.partition_point(|&(pos, _)| pos <= from);
        self.marks[i..].iter().map(|m| m.0).take_while(move |&p| p < to)
    }

    /// The pane's size at byte `at`: the last size record at or before it.
    pub fn size_at(&self, at: u64) -> Option<(u16, u16)> {
        self.sizes.iter().rev().find(|s| s.0 <= at).or(self.sizes.first()).map(|s| (s.1, s.2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(records: &[Record]) -> Vec<u8> {
        let mut enc = Encoder::default();
        let mut out = MAGIC.to_vec();
        for &r in records {
            enc.push(r, &mut out);
        }
        out
    }

    #[test]
    fn records_read_back_as_written() {
        let records = [
            Record::Start { ms: 1_700_000_000_000, raw: 0 },
            Record::Size { at: 0, cols: 80, rows: 24 },
            Record::Output { at: 0, ms: 1_700_000_000_003 },
            Record::Open { id: 1, at: 120 },
            Record::Output { at: 300, ms: 1_700_000_002_500 },
            Record::Open { id: 2, at: 310 },
            Record::Close { id: 2, at: 400 },
            Record::Close { id: 1, at: 420 },
            Record::Lost { bytes: 9_000, from_ms: 1_700_000_003_000, to_ms: 1_700_000_004_000 },
            Record::Start { ms: 1_700_000_009_000, raw: 500 },
            // A replay records a region again, before the new position.
            Record::Open { id: 1, at: 120 },
            Record::Output { at: 500, ms: 1_700_000_009_001 },
            Record::Size { at: 500, cols: 120, rows: 40 },
            Record::End { ms: 1_700_000_010_000 },
        ];
        assert_eq!(decode(&encode(&records)), records);
    }

    #[test]
    fn an_ordinary_command_costs_a_few_bytes() {
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        enc.push(Record::Start { ms: 1_000_000, raw: 0 }, &mut out);
        let before = out.len();
        // Typed 3.2 s after the last output, answered within a quantum.
        enc.push(Record::Output { at: 0, ms: 1_003_200 }, &mut out);
        enc.push(Record::Open { id: 7, at: 180 }, &mut out);
        enc.push(Record::Close { id: 7, at: 260 }, &mut out);
        assert!(out.len() - before <= 10, "{} bytes", out.len() - before);
    }

    #[test]
    fn a_torn_or_foreign_index_reads_as_far_as_it_is_whole() {
        let records = [Record::Start { ms: 5, raw: 0 }, Record::Output { at: 10, ms: 9_000 }];
        let mut bytes = encode(&records);
        bytes.push(0x80);
        assert_eq!(decode(&bytes), records);
        assert!(decode(b"not an index").is_empty());
    }

    #[test]
    fn the_timeline_answers_when_and_where() {
        let records = [
            Record::Start { ms: 1_000, raw: 0 },
            Record::Size { at: 0, cols: 80, rows: 24 },
            Record::Output { at: 0, ms: 1_000 },
            Record::Open { id: 1, at: 40 },
            Record::Output { at: 100, ms: 1_500 },
            Record::Close { id: 1, at: 100 },
            Record::Output { at: 150, ms: 2_000 },
            Record::Size { at: 150, cols: 100, rows: 30 },
            Record::Start { ms: 9_000, raw: 200 },
            Record::Open { id: 1, at: 999 },
            Record::End { ms: 9_500 },
        ];
        let t = Timeline::from_records(&records);
        assert_eq!((t.time_of(0), t.time_of(99), t.time_of(100), t.time_of(199)), (1_000, 1_000, 1_500, 2_000));
        assert_eq!(t.time_before(100), 1_000);
        assert_eq!(t.opens[&1], 40, "the first record of a region wins");
        assert_eq!(t.closes[&1], 100);
        assert_eq!(t.cuts(0, 200).collect::<Vec<_>>(), [100, 150]);
        assert_eq!((t.size_at(149), t.size_at(150)), (Some((80, 24)), Some((100, 30))));
        assert_eq!(t.gaps.len(), 1);
        assert_eq!(t.end, Some((200, 9_500)));
        assert_eq!(t.start_ms, 1_000);
    }
}

//! Recordings: a session's log as an asciicast, to play back later.
//!
//! The logger keeps every byte in `raw.log` and, beside it, a compact
//! index of when they came ([`timing`]). From the two, with the regions,
//! this module builds a [`Cast`]: the terminal's size, then output, resize
//! and marker events in the order they happened, each at the time its
//! first byte arrived ([`build`]); [`write`] turns it into asciicast v3
//! (asciinema 3.x) or v2 text, cutting idle stretches.
//!
//! What a recording covers is a [`Span`] of `raw.log` ([`span`]): the whole
//! log, or one region or a range of them, from the end of the last region
//! boundary before the first one's start (so the prompt and the command
//! line typed at it come first) to the last one's end. The `o` events of a
//! recording, joined, are that span's bytes: an event is cut only where a
//! UTF-8 character is whole, and bytes that are not UTF-8 become U+FFFD.
//!
//! A marker (`m`) stands at each region's start, labelled with its command
//! line, and at its end, labelled `exit N` (or `ended` when no status came);
//! another marks a log gap. `x` ends a recording of the whole log when the
//! session's shell was seen leaving by `exit` (see [`shell_exit`]): the
//! logger never learns a shell's status otherwise, since tmux reaps it.
//!
//! Pure: the caller reads the files and passes their contents in.

pub mod timing;

use std::io::Write;

use crate::region::{Region, RegionKind};
use timing::Timeline;

/// The idle time kept at most between two events, unless asked otherwise.
pub const IDLE_MAX_MS: u64 = 2_000;

/// Which part of the log to record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// The whole log.
    All,
    /// One region.
    One(u64),
    /// Regions `.0` to `.1`, both included.
    Range(u64, u64),
}

/// A stretch of `raw.log`: bytes `from..to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The first byte.
    pub from: u64,
    /// Just past the last byte.
    pub to: u64,
}

/// Where `select` lies in a log of `raw_len` bytes, or why it cannot be
/// recorded (a region that does not exist, or that was logged before the
/// session kept timings).
pub fn span(t: &Timeline, regions: &[Region], raw_len: u64, select: Select) -> Result<Span, String> {
    if t.is_empty() {
        return Err(
            "this session's log has no timing index (it was started by an older version); nothing to record".into()
        );
    }
    let (first, last) = match select {
        Select::All => return Ok(Span { from: 0, to: raw_len }),
        Select::One(n) => (n, n),
        Select::Range(a, b) if a <= b => (a, b),
        Select::Range(a, b) => return Err(format!("the range {a} to {b} runs backwards; give the lower region first")),
    };
    for id in [first, last] {
        if !regions.iter().any(|r| r.id.0 == id) {
            let most = regions.iter().map(|r| r.id.0).max().unwrap_or(0);
            return Err(format!("the session has no region {id} (its regions are 1 to {most}; see `regions`)"));
        }
    }
    let Some(&open) = t.opens.get(&first) else {
        return Err(format!(
            "region {first} was logged before this session kept timings; record the whole session instead"
        ));
    };
    let boundaries = t.opens.values().chain(t.closes.values()).chain(t.gaps.iter().map(|g| &g.0));
    let from = boundaries.copied().filter(|&p| p < open).max().unwrap_or(0);
    let mut to = open;
    for r in regions.iter().filter(|r| (first..=last).contains(&r.id.0)) {
        let end = if r.end.is_some() { t.closes.get(&r.id.0).copied() } else { None };
        to = to.max(end.unwrap_or(raw_len));
    }
    Ok(Span { from, to: to.min(raw_len) })
}

/// The exit status of the session's shell, when its log ended with the
/// shell running `exit` or `logout` (the last top-level command): `exit N`
/// leaves with N, a bare one with the status of the command before.
pub fn shell_exit(regions: &[Region], t: &Timeline) -> Option<i32> {
    t.end?;
    let mut top = regions.iter().filter(|r| r.depth == 0 && r.kind == RegionKind::Command);
    let last = top.next_back()?;
    let mut words = last.command.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("exit" | "logout"), None, _) => top.next_back().map_or(Some(0), |r| r.exit),
        (Some("exit" | "logout"), Some(n), None) => n.parse::<i64>().ok().map(|n| (n & 0xff) as i32),
        _ => None,
    }
}

/// What an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Output (`o`).
    Output,
    /// A resize (`r`), data `COLSxROWS`.
    Resize,
    /// A marker (`m`), data its label.
    Marker,
    /// The shell's exit status (`x`).
    Exit,
}

impl Code {
    /// The event's code in the file.
    pub fn letter(self) -> &'static str {
        match self {
            Code::Output => "o",
            Code::Resize => "r",
            Code::Marker => "m",
            Code::Exit => "x",
        }
    }
}

/// One event, at the time it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Milliseconds since the epoch.
    pub ms: u64,
    /// What it is.
    pub code: Code,
    /// Its text.
    pub data: String,
}

/// A recording before it is written.
#[derive(Clone, Debug, Default)]
pub struct Cast {
    /// The terminal's width at the start.
    pub cols: u16,
    /// Its height.
    pub rows: u16,
    /// When the recording starts, ms since the epoch.
    pub start_ms: u64,
    /// Its title (the session's name).
    pub title: String,
    /// The events, their times never decreasing.
    pub events: Vec<Event>,
}

/// What [`build`] is given: a span's bytes and what the logger knows of
/// them.
pub struct Input<'a> {
    /// `raw.log`'s bytes in `span`.
    pub raw: &'a [u8],
    /// Where they are.
    pub span: Span,
    /// The timing index.
    pub timeline: &'a Timeline,
    /// The session's regions (their last records).
    pub regions: &'a [Region],
    /// Makes a marker's label of a command line (hiding its secrets).
    pub label: &'a mut dyn FnMut(&str) -> String,
    /// The `x` status ([`shell_exit`]); give it only for a span that
    /// reaches the end of the log.
    pub exit: Option<i32>,
    /// The title.
    pub title: String,
}

/// Where something happens inside the span, in the order it sorts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Point {
    /// A region closes (before anything else at that byte).
    Close(u64),
    /// A gap, numbered in the timeline.
    Gap(usize),
    /// A region opens.
    Open(u64),
    /// A size, numbered in the timeline.
    Size(usize),
    /// Output with another time starts.
    Cut,
}

/// Builds the recording of `input.span`.
pub fn build(input: Input<'_>) -> Cast {
    let Input { raw, span, timeline: t, regions, label, exit, title } = input;
    let (cols, rows) = t.size_at(span.from).unwrap_or((80, 24));
    let mut points: Vec<(u64, Point)> = Vec::new();
    // What stands at the span's first byte belongs before it (the lead-in
    // starts at the boundary before), unless the span is the whole log.
    let inside = |p: u64| (p > span.from || span.from == 0) && p <= span.to;
    for r in regions {
        let id = r.id.0;
        if let Some(&p) = t.opens.get(&id).filter(|&&p| inside(p)) {
            points.push((p, Point::Open(id)));
        }
        if let Some(&p) = t.closes.get(&id).filter(|&&p| inside(p)) {
            points.push((p, Point::Close(id)));
        }
    }
    points.extend(t.gaps.iter().enumerate().filter(|(_, g)| inside(g.0)).map(|(i, g)| (g.0, Point::Gap(i))));
    points.extend(
        t.sizes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.0 > span.from && s.0 < span.to)
            .map(|(i, s)| (s.0, Point::Size(i))),
    );
    points.extend(t.cuts(span.from, span.to).map(|p| (p, Point::Cut)));
    points.sort_unstable();
    let mut cast = Cast { cols, rows, start_ms: t.time_of(span.from), title, events: Vec::new() };
    let mut out = Emitter { cast: &mut cast, carry: Vec::new(), last_ms: 0 };
    out.last_ms = out.cast.start_ms;
    let mut at = span.from;
    let by_id = |id: u64| regions.iter().find(|r| r.id.0 == id);
    for (pos, point) in points {
        if pos > at {
            out.output(&raw[(at - span.from) as usize..(pos - span.from) as usize], t.time_of(at));
            at = pos;
        }
        match point {
            Point::Open(id) => {
                let text = by_id(id).map_or(String::new(), |r| label(&r.command));
                out.event(t.time_before(pos), Code::Marker, text);
            }
            Point::Close(id) => {
                let status = by_id(id).and_then(|r| r.exit);
                out.event(t.time_before(pos), Code::Marker, status.map_or("ended".into(), |s| format!("exit {s}")));
            }
            Point::Gap(i) => out.event(t.gaps[i].1, Code::Marker, t.gaps[i].2.clone()),
            Point::Size(i) => {
                let (_, c, r) = t.sizes[i];
                out.event(t.time_of(pos), Code::Resize, format!("{c}x{r}"));
            }
            Point::Cut => {}
        }
    }
    if span.to > at {
        out.output(&raw[(at - span.from) as usize..], t.time_of(at));
    }
    out.flush();
    if let (Some(status), Some((_, end_ms))) = (exit, t.end) {
        out.event(end_ms, Code::Exit, status.to_string());
    }
    cast
}

/// Appends events with times that never decrease and output cut at whole
/// characters.
struct Emitter<'a> {
    cast: &'a mut Cast,
    /// The start of a character cut off at the end of the last output.
    carry: Vec<u8>,
    last_ms: u64,
}

impl Emitter<'_> {
    fn event(&mut self, ms: u64, code: Code, data: String) {
        self.flush();
        self.push(ms, code, data);
    }

    fn push(&mut self, ms: u64, code: Code, data: String) {
        self.last_ms = self.last_ms.max(ms);
        self.cast.events.push(Event { ms: self.last_ms, code, data });
    }

    /// Output `bytes`, which arrived at `ms`: all but a character cut at
    /// their end, which waits for the next output.
    fn output(&mut self, bytes: &[u8], ms: u64) {
        self.carry.extend_from_slice(bytes);
        let whole = self.carry.len() - crate::cook::cut_char_len(&self.carry);
        if whole == 0 {
            return;
        }
        let rest = self.carry.split_off(whole);
        let text = String::from_utf8_lossy(&self.carry).into_owned();
        self.carry = rest;
        self.push(ms, Code::Output, text);
    }

    /// Puts out a character left cut (it never was whole).
    fn flush(&mut self) {
        if !self.carry.is_empty() {
            let text = String::from_utf8_lossy(&std::mem::take(&mut self.carry)).into_owned();
            let ms = self.last_ms;
            self.push(ms, Code::Output, text);
        }
    }
}

/// Which asciicast version to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// asciinema 3.x: intervals since the event before.
    V3,
    /// asciinema 2.x: times since the start; no `x` event.
    V2,
}

/// The events' times in ms since the recording's start, with every pause
/// longer than `idle_max_ms` cut to that length.
pub fn played_times(cast: &Cast, idle_max_ms: u64) -> Vec<u64> {
    let mut last = cast.start_ms;
    let mut clock = 0u64;
    cast.events
        .iter()
        .map(|e| {
            clock += e.ms.saturating_sub(last).min(idle_max_ms);
            last = e.ms;
            clock
        })
        .collect()
}

/// Writes `cast` as asciicast `version`, pauses cut to `idle_max_ms`.
pub fn write(cast: &Cast, version: Version, idle_max_ms: u64, out: &mut impl Write) -> std::io::Result<()> {
    let idle = idle_max_ms as f64 / 1000.0;
    let header = match version {
        Version::V3 => serde_json::json!({
            "version": 3,
            "term": {"cols": cast.cols, "rows": cast.rows},
            "timestamp": cast.start_ms / 1000,
            "idle_time_limit": idle,
            "title": cast.title,
        }),
        Version::V2 => serde_json::json!({
            "version": 2,
            "width": cast.cols,
            "height": cast.rows,
            "timestamp": cast.start_ms / 1000,
            "idle_time_limit": idle,
            "title": cast.title,
        }),
    };
    writeln!(out, "{header}")?;
    let mut before = 0;
    for (e, at) in cast.events.iter().zip(played_times(cast, idle_max_ms)) {
        let time = match version {
            Version::V3 => at - before,
            Version::V2 if e.code == Code::Exit => continue,
            Version::V2 => at,
        };
        before = at;
        let data = serde_json::Value::String(e.data.clone());
        writeln!(out, "[{}.{:03}, \"{}\", {data}]", time / 1000, time % 1000, e.code.letter())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

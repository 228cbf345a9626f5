//! `regions NAME [--failed] [--last N] [--json]`: a session's commands,
//! one per line, with status, duration, start, the agent that typed it and
//! its lines; read from `regions.jsonl`, so closed sessions work too.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use super::look::{self, Found};
use super::style::{Paint, Style, cells, fit, pad};
use super::{Failure, Home, Out, Outcome, clock, duration, first_line};
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::search::region_scope;
use dtmcp_core::store::{self, LineReader};
use dtmcp_core::types::LineNo;

/// Arguments of `regions`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp regions t1                  the last 20 commands of t1
  dtmcp regions t1 --failed         those that failed
  dtmcp regions t1 --last 0 --json  every one, as JSON")]
pub struct RegionsArgs {
    /// The session, open or closed.
    pub name: String,
    /// Only commands that ended with a non-zero exit status.
    #[arg(long)]
    pub failed: bool,
    /// How many of the most recent to list (0: all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub last: usize,
    /// Print a JSON array of objects (fields: id, kind, command, status,
    /// exit, pipestatus, started_ms, ended_ms, duration_ms, first_line,
    /// last_line, host, user, depth, started_by).
    #[arg(long)]
    pub json: bool,
}

/// Where a region stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It runs now.
    Running,
    /// It finished with an exit status.
    Finished,
    /// It ended with no exit status known (a program's input, a shell
    /// without integration, a shell killed under it).
    Ended,
    /// The session closed while it ran.
    Unfinished,
}

/// One region as `regions --json` gives it.
#[derive(Clone, Debug, Serialize)]
pub struct RegionFacts {
    /// Its number.
    pub id: u64,
    /// `command` or `input` (a line typed into a program).
    pub kind: RegionKind,
    /// The command line.
    pub command: String,
    /// Where it stands.
    pub status: Status,
    /// Its exit status, once finished.
    pub exit: Option<i32>,
    /// Every pipeline stage's status.
    pub pipestatus: Vec<i32>,
    /// When its output started, ms since the epoch.
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// How long it ran (so far, while it runs).
    pub duration_ms: Option<u64>,
    /// The first line of its output in `session.txt`.
    pub first_line: u64,
    /// The last one (less than `first_line`: no output).
    pub last_line: u64,
    /// The host its shell runs on.
    pub host: String,
    /// The user its shell runs as.
    pub user: String,
    /// How many shells deep it runs (0: the session's own).
    pub depth: u32,
    /// The agent that typed it (`null`: a person, or not known).
    pub started_by: Option<String>,
}

impl RegionFacts {
    /// The facts of `r` in a session with `lines` lines, live or not.
    pub fn of(r: &Region, live: bool, lines: u64, starters: &HashMap<u64, String>, now: u64) -> RegionFacts {
        let scope = region_scope(r, LineNo(lines));
        let status = match (r.end, r.exit) {
            (Some(_), Some(_)) => Status::Finished,
            (Some(_), None) => Status::Ended,
            (None, _) if live => Status::Running,
            (None, _) => Status::Unfinished,
        };
        let duration_ms = match (r.ended_ms, status) {
            (Some(t), _) => Some(t.saturating_sub(r.started_ms)),
            (None, Status::Running) => Some(now.saturating_sub(r.started_ms)),
            _ => None,
        };
        RegionFacts {
            id: r.id.0,
            kind: r.kind,
            command: r.command.clone(),
            status,
            exit: r.exit,
            pipestatus: r.pipestatus.clone(),
            started_ms: r.started_ms,
            ended_ms: r.ended_ms,
            duration_ms,
            first_line: scope.first.0,
            last_line: scope.last.0,
            host: r.host.clone(),
            user: r.user.clone(),
            depth: r.depth,
            started_by: starters.get(&r.id.0).cloned(),
        }
    }

    /// Its status in words: `exit 2`, `running`, ….
    pub fn status_text(&self) -> String {
        match (self.status, self.exit) {
            (_, Some(code)) => dtmcp_core::exit::short(code),
            (Status::Running, _) => "running".to_string(),
            (Status::Unfinished, _) => "unfinished".to_string(),
            _ => "ended".to_string(),
        }
    }

    /// Its output's lines in words.
    pub fn lines_text(&self) -> String {
        if self.last_line < self.first_line {
            "-".to_string()
        } else {
            format!("{}-{}", self.first_line, self.last_line)
        }
    }

    /// Whether it failed.
    pub fn failed(&self) -> bool {
        self.exit.is_some_and(|e| e != 0)
    }
}

/// Which agent typed which region of session `name`, from the journal.
pub fn starters(home: &Home, name: &str) -> HashMap<u64, String> {
    home.journal.all_starters(name)
}

/// Every region of `found`, as facts.
pub fn all(home: &Home, found: &Found) -> Result<Vec<RegionFacts>, Failure> {
    let regions = store::read_regions(&found.dir).map_err(Failure::of)?;
    let lines = lines_of(&found.dir)?;
    let starters = starters(home, &found.name);
    let now = crate::config::now_ms();
    Ok(regions.iter().map(|r| RegionFacts::of(r, found.live(), lines, &starters, now)).collect())
}

/// Lines complete on disk in `dir`.
pub fn lines_of(dir: &Path) -> Result<u64, Failure> {
    LineReader::open(dir).and_then(|r| r.extent()).map(|(n, _)| n).map_err(Failure::of)
}

/// Runs `regions`.
pub async fn run(home: Home, args: RegionsArgs) -> Outcome {
    let found = look::find(&home, &args.name).await?;
    let mut chosen = all(&home, &found)?;
    if args.failed {
        chosen.retain(RegionFacts::failed);
    }
    if args.last > 0 {
        chosen.drain(..chosen.len().saturating_sub(args.last));
    }
    let mut out = Out::stdout();
    if args.json {
        let text = serde_json::to_string_pretty(&chosen).map_err(Failure::of)?;
        return out.line(&text);
    }
    let terminal = super::style::stdout_is_terminal();
    if chosen.is_empty() && terminal {
        eprintln!("{}: {}", found.name, if args.failed { "no command failed" } else { "no commands yet" });
    }
    let width = if terminal { super::style::stdout_width() } else { None };
    for line in table(&chosen, Style::for_stdout(), terminal, width) {
        out.line(&line)?;
    }
    Ok(())
}

const HEADINGS: [&str; 7] = ["#", "STATUS", "TOOK", "STARTED", "BY", "LINES", "COMMAND"];

/// The listing: a heading when `heading`, then one line per region.
pub fn table(regions: &[RegionFacts], style: Style, heading: bool, width: Option<usize>) -> Vec<String> {
    let here = crate::config::hostname();
    let rows: Vec<[String; 7]> = regions.iter().map(|r| row(r, &here)).collect();
    let mut widths = [0usize; 7];
    for (i, w) in widths.iter_mut().enumerate() {
        let longest = rows.iter().map(|r| cells(&r[i])).max().unwrap_or(0);
        *w = longest.max(if heading { HEADINGS[i].len() } else { 0 });
    }
    let mut lines = Vec::new();
    if heading && !rows.is_empty() {
        lines.push(style.paint(Paint::Bold, &render(&HEADINGS.map(str::to_string), &widths, width)));
    }
    for (row, r) in rows.iter().zip(regions) {
        let line = render(row, &widths, width);
        let paint = match r.status {
            _ if r.failed() => Some(Paint::Red),
            Status::Running => Some(Paint::Yellow),
            Status::Unfinished | Status::Ended => Some(Paint::Dim),
            Status::Finished => None,
        };
        lines.push(match paint {
            Some(p) => style.paint(p, &line),
            None => line,
        });
    }
    lines
}

fn render(cells_: &[String; 7], widths: &[usize; 7], width: Option<usize>) -> String {
    let mut line = String::new();
    for (i, c) in cells_.iter().enumerate() {
        // Numbers to the right, words to the left.
        let cell = match i {
            0 | 2 => format!("{}{c}", " ".repeat(widths[i].saturating_sub(cells(c)))),
            6 => c.clone(),
            _ => pad(c, widths[i]),
        };
        line.push_str(&cell);
        if i < 6 {
            line.push_str("  ");
        }
    }
    let line = line.trim_end().to_string();
    match width {
        Some(w) => fit(&line, w),
        None => line,
    }
}

/// The cells of region `r`'s row; `here` is this host's name (a command
/// on it needs no "[on HOST]").
fn row(r: &RegionFacts, here: &str) -> [String; 7] {
    let mut command = first_line(&r.command, 200);
    if r.kind == RegionKind::Input {
        command = format!("(input) {command}");
    }
    if dtmcp_core::region::names_host(r.kind, r.depth, &r.host, here) {
        command.push_str(&format!("  [on {}]", r.host));
    }
    [
        r.id.to_string(),
        r.status_text(),
        r.duration_ms.map_or_else(|| "?".to_string(), duration),
        if r.started_ms > 0 { clock(r.started_ms) } else { "?".to_string() },
        r.started_by.clone().unwrap_or_else(|| "-".to_string()),
        r.lines_text(),
        command,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::region::LinePos;
    use dtmcp_core::types::RegionId;

    fn region(id: u64, exit: Option<i32>, ended: bool) -> Region {
        Region {
            id: RegionId(id),
            command: format!("cmd{id}"),
            start: LinePos { line: LineNo(id * 10), bytes: 0 },
            end: ended.then_some(LinePos { line: LineNo(id * 10 + 5), bytes: 0 }),
            exit,
            started_ms: 1_000,
            ended_ms: ended.then_some(3_500),
            ..Region::default()
        }
    }

    #[test]
    fn facts_say_status_duration_lines_and_who_typed() {
        let starters = HashMap::from([(7, "claude".to_string())]);
        let done = RegionFacts::of(&region(7, Some(2), true), true, 100, &starters, 10_000);
        assert_eq!((done.status, done.duration_ms, done.lines_text()), (Status::Finished, Some(2_500), "70-74".into()));
        assert_eq!(done.started_by.as_deref(), Some("claude"));
        assert!(done.failed());
        let running = RegionFacts::of(&region(8, None, false), true, 100, &starters, 10_000);
        assert_eq!((running.status, running.duration_ms), (Status::Running, Some(9_000)));
        assert_eq!(running.lines_text(), "80-100");
        let closed = RegionFacts::of(&region(8, None, false), false, 100, &starters, 10_000);
        assert_eq!(
            (closed.status, closed.duration_ms, closed.status_text().as_str()),
            (Status::Unfinished, None, "unfinished")
        );
    }

    #[test]
    fn the_listing_aligns_and_paints_only_on_a_terminal() {
        let starters = HashMap::new();
        let rs: Vec<RegionFacts> = [region(9, Some(0), true), region(10, Some(1), true)]
            .iter()
            .map(|r| RegionFacts::of(r, true, 200, &starters, 10_000))
            .collect();
        let lines = table(&rs, Style::plain(), true, None);
        assert_eq!(lines[0], " #  STATUS  TOOK  STARTED               BY  LINES    COMMAND");
        assert_eq!(lines[1], " 9  exit 0  2.5s  1970-01-01 00:00:01Z  -   90-94    cmd9");
        assert!(lines[2].starts_with("10  exit 1"));
        let painted = table(&rs, Style { on: true }, true, None);
        assert!(painted[2].starts_with("\x1b[31m10"), "{:?}", painted[2]);
    }
}

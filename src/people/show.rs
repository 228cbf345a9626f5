//! `show NAME [REGION | --last | --failed]`: one command's header (the
//! command, its exit status, how long it took, who typed it, where it
//! ran) and its output, as plain lines for `less` or `grep`.

use std::path::Path;

use super::look::{self, Found};
use super::regions::{self, RegionFacts};
use super::style::{Paint, Style};
use super::{Failure, Home, Out, Outcome, clock, duration};
use dtmcp_core::redact::Reader;
use dtmcp_core::region::{LinePos, Region};
use dtmcp_core::store::{self, LineReader, files};
use dtmcp_core::types::{LineNo, RegionId};

/// Arguments of `show`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp show t1                     the last command of t1 and its output
  dtmcp show t1 12 | less           region 12
  dtmcp show t1 --failed | grep -i error
  dtmcp show t1 --no-header > out.txt")]
pub struct ShowArgs {
    /// The session, open or closed.
    pub name: String,
    /// The region's number (from `regions`); by default the last one.
    #[arg(conflicts_with_all = ["last", "failed"])]
    pub region: Option<u64>,
    /// The last command (the default).
    #[arg(long, conflicts_with = "failed")]
    pub last: bool,
    /// The last command that failed (exited non-zero).
    #[arg(long)]
    pub failed: bool,
    /// Print the output only.
    #[arg(long)]
    pub no_header: bool,
    /// Number the output's lines as in the session's log.
    #[arg(short = 'n', long)]
    pub line_numbers: bool,
    /// Show secrets as placeholders (‹secret:KIND:N›), as the agents see
    /// them: for sharing a screen. By default the log shows as it is.
    #[arg(long)]
    pub redact: bool,
}

/// Runs `show`.
pub async fn run(home: Home, args: ShowArgs) -> Outcome {
    let found = look::find(&home, &args.name).await?;
    let regions = store::read_regions(&found.dir).map_err(Failure::of)?;
    let region = pick(&found, &regions, &args)?;
    let lines = regions::lines_of(&found.dir)?;
    let starters = regions::starters(&home, &found.name);
    let facts = RegionFacts::of(region, found.live(), lines, &starters, crate::config::now_ms());
    let style = Style::for_stdout();
    let mut out = Out::stdout();
    let mut hide = args.redact.then(|| Reader::for_session(&found.dir));
    if !args.no_header {
        let host = store::read_meta(&found.dir).map(|m| m.host).unwrap_or_default();
        let text = header(&found, &facts, &host, style);
        out.put(&hide.as_mut().map_or_else(|| text.clone(), |h| h.text(&text)))?;
    }
    body(&found.dir, region, lines, (args.line_numbers, style), hide.as_mut(), &mut out)
}

/// The region the arguments name.
fn pick<'a>(found: &Found, regions: &'a [Region], args: &ShowArgs) -> Result<&'a Region, Failure> {
    let name = &found.name;
    match (args.region, args.failed) {
        (Some(id), _) => regions.iter().find(|r| r.id == RegionId(id)).ok_or_else(|| {
            Failure::NotFound(format!(
                "{name} has no region {id}; it has {} (`dtmcp regions {name}` lists them)",
                regions.len()
            ))
        }),
        (None, true) => regions
            .iter()
            .rev()
            .find(|r| r.exit.is_some_and(|e| e != 0))
            .ok_or_else(|| Failure::NotFound(format!("no command failed in {name}"))),
        (None, false) => regions.last().ok_or_else(|| Failure::NotFound(format!("{name} has run no command yet"))),
    }
}

/// The lines above the output.
fn header(found: &Found, r: &RegionFacts, server_host: &str, style: Style) -> String {
    let mut lines = r.command.lines();
    let mut out =
        style.paint(Paint::Bold, &format!("region {} of {}: {}", r.id, found.name, lines.next().unwrap_or_default()));
    out.push('\n');
    for more in lines {
        out.push_str(&format!("    {more}\n"));
    }
    let mut status = r.status_text();
    if r.pipestatus.len() > 1 {
        let stages: Vec<String> = r.pipestatus.iter().map(i32::to_string).collect();
        status.push_str(&format!(" (pipeline: {})", stages.join(" ")));
    }
    let paint = if r.failed() { Paint::Red } else { Paint::Green };
    out.push_str(&format!("status:   {}\n", style.paint(paint, &status)));
    let took = r.duration_ms.map_or_else(|| "?".to_string(), duration);
    let started = if r.started_ms > 0 { clock(r.started_ms) } else { "?".to_string() };
    out.push_str(&format!("took:     {took} (started {started})\n"));
    let by = r.started_by.clone().unwrap_or_else(|| "a person (or not known)".to_string());
    out.push_str(&format!("typed by: {by}\n"));
    let host = if r.host.is_empty() { server_host } else { &r.host };
    let mut place = if r.user.is_empty() { host.to_string() } else { format!("{}@{host}", r.user) };
    if r.depth > 0 {
        place.push_str(&format!(" ({} shell{} deep)", r.depth, if r.depth == 1 { "" } else { "s" }));
    }
    out.push_str(&format!("where:    {place}\n"));
    let lines = r.lines_text();
    out.push_str(&format!("lines:    {lines} of {}\n\n", found.dir.join(files::TEXT).display()));
    out
}

/// The most lines read from disk at once.
const CHUNK: u64 = 10_000;

/// Prints the region's output: its lines, the first and last cut at the
/// region's bounds, their secrets hidden by `hide` if given.
fn body(
    dir: &Path,
    r: &Region,
    total: u64,
    (numbered, style): (bool, Style),
    mut hide: Option<&mut Reader>,
    out: &mut Out,
) -> Outcome {
    let scope = dtmcp_core::search::region_scope(r, LineNo(total));
    let reader = LineReader::open(dir).map_err(Failure::of)?;
    let end = r.end.unwrap_or(LinePos { line: LineNo(total + 1), bytes: 0 });
    let width = scope.last.0.max(1).ilog10() as usize + 1;
    let mut at = scope.first.0;
    while at <= scope.last.0 {
        let count = (scope.last.0 + 1 - at).min(CHUNK);
        let lines = reader.read(LineNo(at), count).map_err(Failure::of)?;
        if lines.is_empty() {
            break;
        }
        let first = at;
        let lines: Vec<String> =
            lines.iter().enumerate().map(|(i, t)| cut(t, LineNo(first + i as u64), r.start, end).to_string()).collect();
        let lines = match hide.as_deref_mut() {
            Some(h) => h.lines(&lines),
            None => lines,
        };
        for text in &lines {
            if numbered {
                out.put(&style.paint(Paint::Dim, &format!("{at:>width$}  ")))?;
            }
            out.line(text)?;
            at += 1;
        }
    }
    Ok(())
}

/// The part of line `n` (text `text`) that lies between `start` and `end`.
fn cut(text: &str, n: LineNo, start: LinePos, end: LinePos) -> &str {
    let mut text = text;
    if end.line == n && end.bytes > 0 {
        text = &text[..floor_boundary(text, end.bytes as usize)];
    }
    if start.line == n && start.bytes > 0 {
        text = text.get(floor_boundary(text, start.bytes as usize)..).unwrap_or("");
    }
    text
}

/// The largest char boundary of `s` at or below `n`.
fn floor_boundary(s: &str, n: usize) -> usize {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_and_last_lines_are_cut_at_the_bounds() {
        let start = LinePos { line: LineNo(5), bytes: 2 };
        let end = LinePos { line: LineNo(7), bytes: 3 };
        assert_eq!(cut("$ out", LineNo(5), start, end), "out");
        assert_eq!(cut("middle", LineNo(6), start, end), "middle");
        assert_eq!(cut("end$ next", LineNo(7), start, end), "end");
        assert_eq!(cut("é", LineNo(7), start, LinePos { line: LineNo(7), bytes: 1 }), "");
        let one = LinePos { line: LineNo(5), bytes: 7 };
        assert_eq!(cut("$ abc$ def", LineNo(5), start, one), "abc$ ");
    }
}

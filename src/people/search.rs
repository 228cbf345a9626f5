//! `search NAME REGEX [-C N] [--region N] [--json]`: the lines of a
//! session's log that match, numbered as in `grep -n`, with the search
//! core the `search` tool uses. Like grep, it exits 1 when nothing
//! matches and 2 for an invalid regex.
//!
//! On a terminal the hits are grouped under the command (region) they
//! belong to, the matches painted; in a pipe every line stands alone:
//! `LINE:TEXT` for a hit, `LINE-TEXT` for context, `--` between groups.

use serde::Serialize;

use super::look;
use super::style::{Paint, Style};
use super::{Failure, Home, Out, Outcome, first_line};
use dtmcp_core::redact::Reader;
use dtmcp_core::region::Region;
use dtmcp_core::search::{self, Page, Shown};
use dtmcp_core::store;
use dtmcp_core::types::{LineNo, RegionId};

/// Arguments of `search`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Examples:
  dtmcp search t1 'error|warning'        every matching line of t1's log
  dtmcp search t1 -i -C 2 panic          ignoring case, two lines around each
  dtmcp search t1 --region 12 FAILED     within one command's output
  dtmcp search t1 -c '^ok'               how many lines match
  dtmcp search t1 timeout --json | jq '.lines[] | select(.match) | .line'")]
pub struct SearchArgs {
    /// The session, open or closed.
    pub name: String,
    /// A regular expression (Rust syntax), matched line by line.
    pub regex: String,
    /// Lines of context before and after each hit.
    #[arg(short = 'C', long, default_value_t = 0, value_name = "N")]
    pub context: u64,
    /// Only within this region's output (a number from `regions`).
    #[arg(long, value_name = "N")]
    pub region: Option<u64>,
    /// Ignore case.
    #[arg(short = 'i', long)]
    pub ignore_case: bool,
    /// Stop after this many matching lines.
    #[arg(short = 'm', long, value_name = "N")]
    pub max_count: Option<u64>,
    /// Print only how many lines match.
    #[arg(short = 'c', long, conflicts_with = "json")]
    pub count: bool,
    /// Print a JSON object: session, pattern, region, matches (the count)
    /// and lines (each with line, text, match and region).
    #[arg(long)]
    pub json: bool,
    /// Show secrets as placeholders (‹secret:KIND:N›), as the agents see
    /// them: for sharing a screen. By default the log shows as it is.
    #[arg(long)]
    pub redact: bool,
}

/// One line of `search --json`.
#[derive(Debug, Serialize)]
struct JsonLine<'a> {
    line: u64,
    text: &'a str,
    #[serde(rename = "match")]
    hit: bool,
    region: Option<u64>,
}

/// The whole answer of `search --json`.
#[derive(Debug, Serialize)]
struct JsonAnswer<'a> {
    session: &'a str,
    pattern: &'a str,
    region: Option<u64>,
    matches: u64,
    lines: Vec<JsonLine<'a>>,
}

/// Runs `search`.
pub async fn run(home: Home, args: SearchArgs) -> Outcome {
    let pattern = if args.ignore_case { format!("(?i){}", args.regex) } else { args.regex.clone() };
    let re = search::compile(&pattern).map_err(|e| {
        Failure::Usage(format!("{e}\n(escape ( ) [ ] {{ }} . * + ? | \\ with a backslash to match them literally)"))
    })?;
    let found = look::find(&home, &args.name).await?;
    let mut regions = store::read_regions(&found.dir).map_err(Failure::of)?;
    let lines = super::regions::lines_of(&found.dir)?;
    let scope = match args.region {
        None => None,
        Some(id) => {
            let r = regions.iter().find(|r| r.id == RegionId(id)).ok_or_else(|| {
                Failure::NotFound(format!("{} has no region {id}; it has {}", found.name, regions.len()))
            })?;
            Some(search::region_scope(r, LineNo(lines)))
        }
    };
    let page = Page { offset: 0, max_hits: args.max_count.unwrap_or(u64::MAX) };
    let hits = search::search(&found.dir, &re, scope, page).map_err(Failure::of)?;
    let total = args.max_count.map_or(hits.total, |m| hits.total.min(m));
    let mut out = Out::stdout();
    if args.count {
        out.line(&total.to_string())?;
        return if total == 0 { Err(Failure::NoMatch) } else { Ok(()) };
    }
    let mut groups = match hits.scope {
        Some(s) => search::with_context(&found.dir, &hits.hits, args.context, s).map_err(Failure::of)?,
        None => Vec::new(),
    };
    if args.redact {
        let mut hide = Reader::for_session(&found.dir);
        for group in &mut groups {
            let texts: Vec<String> = group.iter().map(|s| s.text.clone()).collect();
            group.iter_mut().zip(hide.lines(&texts)).for_each(|(s, t)| s.text = t);
        }
        regions.iter_mut().for_each(|r| r.command = hide.text(&r.command));
    }
    if args.json {
        let lines = groups
            .iter()
            .flatten()
            .map(|s| JsonLine {
                line: s.line.0,
                text: &s.text,
                hit: s.hit,
                region: search::region_at(&regions, s.line).map(|r| r.id.0),
            })
            .collect();
        let answer =
            JsonAnswer { session: &found.name, pattern: &args.regex, region: args.region, matches: total, lines };
        let text = serde_json::to_string_pretty(&answer).map_err(Failure::of)?;
        out.line(&text)?;
    } else {
        let terminal = super::style::stdout_is_terminal();
        let style = Style::for_stdout();
        let separate = args.context > 0;
        for line in render(&groups, &regions, &re, style, terminal, separate) {
            out.line(&line)?;
        }
    }
    if total == 0 { Err(Failure::NoMatch) } else { Ok(()) }
}

/// The lines printed for `groups`: under region headings when `headings`.
fn render(
    groups: &[Vec<Shown>],
    regions: &[Region],
    re: &regex::bytes::Regex,
    style: Style,
    headings: bool,
    separate: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<Option<RegionId>> = None;
    for (i, group) in groups.iter().enumerate() {
        if i > 0 && separate {
            out.push(style.paint(Paint::Dim, "--"));
        }
        for s in group {
            let here = search::region_at(regions, s.line);
            if headings && current != Some(here.map(|r| r.id)) {
                current = Some(here.map(|r| r.id));
                out.push(style.paint(Paint::Bold, &heading(here)));
            }
            let mark = if s.hit { ':' } else { '-' };
            let number = style.paint(if s.hit { Paint::Green } else { Paint::Dim }, &s.line.0.to_string());
            let text = if s.hit { painted(&s.text, re, style) } else { s.text.clone() };
            out.push(format!("{number}{mark}{text}"));
        }
    }
    out
}

fn heading(r: Option<&Region>) -> String {
    match r {
        None => "[outside any command]".to_string(),
        Some(r) => format!("[region {}: {}]", r.id, first_line(&r.command, 80)),
    }
}

/// `text` with every match of `re` painted.
fn painted(text: &str, re: &regex::bytes::Regex, style: Style) -> String {
    if !style.on {
        return text.to_string();
    }
    let mut out = String::new();
    let mut at = 0;
    for m in re.find_iter(text.as_bytes()) {
        // Byte matches may split a character; paint whole characters only.
        let (Some(before), Some(hit)) = (text.get(at..m.start()), text.get(m.start()..m.end())) else { continue };
        out.push_str(before);
        out.push_str(&style.paint(Paint::Red, hit));
        at = m.end();
    }
    out.push_str(text.get(at..).unwrap_or(""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::region::LinePos;

    fn shown(line: u64, text: &str, hit: bool) -> Shown {
        Shown { line: LineNo(line), text: text.into(), hit }
    }

    #[test]
    fn a_pipe_gets_grep_lines_a_terminal_gets_headings_and_paint() {
        let regions = [Region {
            id: RegionId(3),
            command: "make".into(),
            start: LinePos { line: LineNo(10), bytes: 0 },
            end: Some(LinePos { line: LineNo(20), bytes: 0 }),
            ..Region::default()
        }];
        let groups =
            vec![vec![shown(4, "before", false), shown(5, "an error", true)], vec![shown(12, "error 2", true)]];
        let re = search::compile("error").expect("regex");
        let flat = render(&groups, &regions, &re, Style::plain(), false, true);
        assert_eq!(flat, ["4-before", "5:an error", "--", "12:error 2"]);
        let no_context = render(&groups[1..], &regions, &re, Style::plain(), false, false);
        assert_eq!(no_context, ["12:error 2"]);
        let grouped = render(&groups, &regions, &re, Style::plain(), true, true);
        assert_eq!(
            grouped,
            ["[outside any command]", "4-before", "5:an error", "--", "[region 3: make]", "12:error 2"]
        );
        let colour = render(&groups, &regions, &re, Style { on: true }, true, true);
        assert!(colour[5].contains("\x1b[31merror\x1b[0m 2"), "{:?}", colour[5]);
    }
}

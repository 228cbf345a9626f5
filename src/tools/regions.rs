//! `regions`: the recent commands of a session, open or closed, with their
//! status, exit code, duration, lines and file, read from `regions.jsonl`.

use std::fmt::Write;
use std::path::Path;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use super::Terminal;
use super::reply::ToolError;
use super::search::first_line;
use crate::config::now_ms;
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::search::region_scope;
use dtmcp_core::store::{self, LineReader, files};
use dtmcp_core::types::LineNo;

/// Regions listed unless asked otherwise.
const DEFAULT_LAST: u64 = 20;
/// The most regions one reply lists.
const MAX_LAST: u64 = 200;

/// Arguments of `regions`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegionsParams {
    /// The session's name; closed sessions whose logs remain work too.
    pub session: String,
    /// List only commands that ended with a non-zero exit status.
    #[serde(default)]
    pub failed_only: Option<bool>,
    /// How many of the most recent regions to list (default 20, at most 200).
    #[serde(default)]
    pub last: Option<u64>,
}

#[tool_router(router = regions_router, vis = "pub(super)")]
impl Terminal {
    /// Lists the session's regions.
    #[tool(
        name = "regions",
        description = crate::docent::texts::tool::REGIONS.trim_end(),
        annotations(read_only_hint = true),
        meta = super::always_load()
    )]
    pub async fn regions(&self, Parameters(p): Parameters<RegionsParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call("regions", Some(&name), self.regions_body(p)).await
    }
}

impl Terminal {
    async fn regions_body(&self, p: RegionsParams) -> Result<String, ToolError> {
        let logs = self.sessions().open_logs(&p.session).await?;
        let all = store::read_regions(&logs.dir)?;
        let (lines, _) = LineReader::open(&logs.dir).and_then(|r| r.extent())?;
        let failed_only = p.failed_only.unwrap_or(false);
        let last = p.last.unwrap_or(DEFAULT_LAST).clamp(1, MAX_LAST) as usize;
        let chosen: Vec<&Region> = all.iter().filter(|r| !failed_only || failed(r)).collect();
        let shown = &chosen[chosen.len().saturating_sub(last)..];
        let what = match (failed_only, chosen.len()) {
            (true, 1) => "failed region",
            (true, _) => "failed regions",
            (false, 1) => "region",
            (false, _) => "regions",
        };
        let state = if logs.live { "open" } else { "closed" };
        let mut out = format!(
            "session {} ({state}): {} {what}, the last {} listed; files under {}\n",
            p.session,
            chosen.len(),
            shown.len(),
            logs.dir.display()
        );
        let ctx = Listing { dir: &logs.dir, live: logs.live, lines: LineNo(lines), now: now_ms() };
        for r in shown {
            out.push_str(&ctx.line(r));
        }
        if shown.is_empty() {
            out.push_str(if failed_only { "(no command failed)\n" } else { "(no regions yet)\n" });
        }
        Ok(out)
    }
}

/// Whether `r` ended with a non-zero status.
fn failed(r: &Region) -> bool {
    r.exit.is_some_and(|e| e != 0)
}

/// What every listed line needs to know.
struct Listing<'a> {
    dir: &'a Path,
    live: bool,
    lines: LineNo,
    now: u64,
}

impl Listing<'_> {
    fn line(&self, r: &Region) -> String {
        let scope = region_scope(r, self.lines);
        let span = if scope.last < scope.first {
            "no output".to_string()
        } else {
            format!("lines {}-{}", scope.first, scope.last)
        };
        let file = store::region_file(self.dir, r.id);
        let file = match file.is_file() {
            true => format!("{}/{:04}.txt", files::REGION_DIR, r.id.0),
            false if scope.last < scope.first => "-".to_string(),
            false => format!("{} {}-{}", files::TEXT, scope.first, scope.last),
        };
        let kind = if r.kind == RegionKind::Input { " input" } else { "" };
        let mut out = format!(
            "#{}{kind} {} · {} · {span} · {file} · `{}`",
            r.id,
            self.status(r),
            self.duration(r),
            first_line(&r.command)
        );
        if !r.host.is_empty() && r.depth > 0 {
            let _ = write!(out, " · on {}", r.host);
        }
        out.push('\n');
        out
    }

    fn status(&self, r: &Region) -> String {
        match (r.end, r.exit) {
            (_, Some(code)) => format!("exit {code}"),
            (Some(_), None) => "ended (no status)".to_string(),
            (None, None) if self.live => "running".to_string(),
            (None, None) => "unfinished (session closed)".to_string(),
        }
    }

    fn duration(&self, r: &Region) -> String {
        let end = match (r.ended_ms, r.end) {
            (Some(t), _) => t,
            (None, None) if self.live => self.now,
            _ => return "?".to_string(),
        };
        let ms = end.saturating_sub(r.started_ms);
        match ms {
            0..1_000 => format!("{ms}ms"),
            1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
            _ => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::region::LinePos;
    use dtmcp_core::types::RegionId;

    #[test]
    fn a_listed_region_says_status_duration_lines_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = Listing { dir: dir.path(), live: true, lines: LineNo(50), now: 10_000 };
        let done = Region {
            id: RegionId(7),
            command: "make check".into(),
            start: LinePos { line: LineNo(10), bytes: 0 },
            end: Some(LinePos { line: LineNo(20), bytes: 0 }),
            exit: Some(2),
            started_ms: 1_000,
            ended_ms: Some(3_500),
            ..Region::default()
        };
        assert_eq!(ctx.line(&done), "#7 exit 2 · 2.5s · lines 10-19 · session.txt 10-19 · `make check`\n");
        let running = Region { end: None, exit: None, ended_ms: None, ..done.clone() };
        assert_eq!(ctx.line(&running), "#7 running · 9.0s · lines 10-50 · session.txt 10-50 · `make check`\n");
        let closed = Listing { live: false, ..ctx };
        assert!(closed.line(&running).contains("unfinished (session closed) · ?"));
        assert!(failed(&done) && !failed(&running));
    }
}

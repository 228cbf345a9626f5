//! `regions`: the recent commands of a session, open or closed, with their
//! status, exit code, duration, lines and file, read from `regions.jsonl`.

use std::fmt::Write;
use std::path::Path;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::config::now_ms;
use crate::tools::Terminal;
use crate::tools::ToolError;
use crate::tools::reading::search::first_line;
use dtmcp_core::region::{Region, RegionKind};
use dtmcp_core::search::region_scope;
use dtmcp_core::store::{self, LineReader, files};
use dtmcp_core::types::{LineNo, RegionId};

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

#[tool_router(router = regions_router, vis = "pub(crate)")]
impl Terminal {
    /// Lists the session's regions.
    #[tool(
        name = "regions",
        description = crate::docent::texts::tool::REGIONS.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn regions(&self, Parameters(p): Parameters<RegionsParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call(crate::tools::ToolName::Regions, Some(&name), self.regions_body(p)).await
    }
}

impl Terminal {
    async fn regions_body(&self, p: RegionsParams) -> Result<String, ToolError> {
        let logs = self.sessions().open_logs(&p.session).await?;
        let failed_only = p.failed_only.unwrap_or(false);
        let last = p.last.unwrap_or(DEFAULT_LAST).clamp(1, MAX_LAST) as usize;
        let dir = logs.dir.clone();
        let cache = std::sync::Arc::clone(&self.inner.searches);
        let read = move || -> Result<_, ToolError> {
            let (lines, _) = LineReader::open(&dir).and_then(|r| r.extent())?;
            let (count, shown) =
                cache.with_regions(&dir, |index| Ok((index.count(failed_only), index.recent(last, failed_only)?)))?;
            Ok((lines, count, shown))
        };
        let (lines, count, shown) = tokio::task::spawn_blocking(read)
            .await
            .map_err(|e| ToolError::Failed(format!("listing the regions failed: {e}")))??;
        let ids: Vec<RegionId> = shown.iter().map(|r| r.id).collect();
        let me = self.actor();
        let starters = self.journal().starters(&p.session, &ids);
        let allowed = self.journal().all_allowed(&p.session);
        let what = match (failed_only, count) {
            (true, 1) => "failed region",
            (true, _) => "failed regions",
            (false, 1) => "region",
            (false, _) => "regions",
        };
        let state = if logs.live { "open" } else { "closed" };
        let mut out = format!(
            "session {} ({state}): {count} {what}, the last {} listed; files under {}\n",
            p.session,
            shown.len(),
            logs.dir.display()
        );
        let here = crate::config::hostname();
        let ctx = Listing { dir: &logs.dir, live: logs.live, lines: LineNo(lines), now: now_ms(), here: &here };
        for (r, by) in shown.iter().zip(starters) {
            // Another agent's command says whose it is.
            out.push_str(&ctx.line(r, by.as_deref().filter(|&a| a != me), allowed.get(&r.id.0).map(String::as_str)));
        }
        if shown.is_empty() {
            out.push_str(if failed_only { "(no command failed)\n" } else { "(no regions yet)\n" });
        }
        Ok(out)
    }
}

/// What every listed line needs to know.
struct Listing<'a> {
    dir: &'a Path,
    live: bool,
    lines: LineNo,
    now: u64,
    /// This host's name: a region on it needs no "on HOST".
    here: &'a str,
}

impl Listing<'_> {
    /// The line of region `r`, started by agent `by` if another agent did,
    /// and `allowed` by a person the policy asked.
    fn line(&self, r: &Region, by: Option<&str>, allowed: Option<&str>) -> String {
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
        if dtmcp_core::region::tagged_with_host(r, self.here) {
            let _ = write!(out, " · on {}", r.host);
        }
        if let Some(agent) = by {
            let _ = write!(out, " · started by agent {agent}");
        }
        if let Some(allowed) = allowed {
            let _ = write!(out, " · {allowed}");
        }
        out.push('\n');
        out
    }

    fn status(&self, r: &Region) -> String {
        match (r.end, r.exit) {
            (_, Some(code)) => dtmcp_core::exit::short(code),
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

    #[test]
    fn a_listed_region_says_status_duration_lines_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = Listing { dir: dir.path(), live: true, lines: LineNo(50), now: 10_000, here: "laptop" };
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
        assert_eq!(ctx.line(&done, None, None), "#7 exit 2 · 2.5s · lines 10-19 · session.txt 10-19 · `make check`\n");
        assert!(ctx.line(&done, Some("bob"), None).ends_with("`make check` · started by agent bob\n"));
        assert!(
            ctx.line(&done, None, Some("allowed by alice (web)")).ends_with("`make check` · allowed by alice (web)\n")
        );
        let running = Region { end: None, exit: None, ended_ms: None, ..done.clone() };
        assert_eq!(
            ctx.line(&running, None, None),
            "#7 running · 9.0s · lines 10-50 · session.txt 10-50 · `make check`\n"
        );
        let closed = Listing { live: false, ..ctx };
        assert!(closed.line(&running, None, None).contains("unfinished (session closed) · ?"));
    }
}

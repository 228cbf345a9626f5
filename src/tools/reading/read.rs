//! `read`: lines of a session's log, by region or by line range, numbered;
//! through the logger while the pane lives, from the files once it is closed.

use std::path::{Path, PathBuf};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{schemars, tool, tool_router};
use serde::Deserialize;

use crate::session::{LoggerClient, SessionError};
use crate::tools::Terminal;
use crate::tools::ToolError;
use crate::tools::reading::lines::{self, last_line, region_file_note, region_lines};
use crate::tools::reading::search::SearchCache;
use crate::tools::replies::output::{self, digits};
use dtmcp_core::protocol::Status;
use dtmcp_core::region::Region;
use dtmcp_core::store::LineReader;
use dtmcp_core::types::{LineNo, RegionId};

/// The most lines one `read` returns.
const MAX_READ: u64 = 400;
/// Lines shown when neither a region nor a range is given.
const DEFAULT_TAIL: u64 = 40;

/// Arguments of `read`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// The session's name, as session_create or session_list gave it.
    pub session: String,
    /// "cooked" (default): the log as readable numbered lines; "screen": the rows a person sees now, with size, cursor and alternate screen; "raw": the log's bytes with escape codes spelled out (the last 4096, bytes from from_byte, or a region's).
    #[serde(default)]
    pub view: Option<String>,
    /// A region number (from run's reply or regions): read that command's output (view="raw": its bytes, from its prompt on).
    #[serde(default)]
    pub region: Option<u64>,
    /// First line to read (line numbers of the session log, from 1).
    #[serde(default)]
    pub from_line: Option<u64>,
    /// Last line to read, inclusive. At most 400 lines come back per call.
    #[serde(default)]
    pub to_line: Option<u64>,
    /// view="raw": the first byte of raw.log to show (default: the last bytes).
    #[serde(default)]
    pub from_byte: Option<u64>,
    /// view="raw": how many bytes to show (default 4096, at most 65536).
    #[serde(default)]
    pub bytes: Option<u64>,
}

#[tool_router(router = read_router, vis = "pub(crate)")]
impl Terminal {
    /// Reads the session log.
    #[tool(
        name = "read",
        description = crate::docent::texts::tool::READ.trim_end(),
        meta = crate::tools::always_load()
    )]
    pub async fn read(&self, Parameters(p): Parameters<ReadParams>) -> CallToolResult {
        let name = p.session.clone();
        self.call(crate::tools::ToolName::Read, Some(&name), self.read_body(p)).await
    }
}

impl Terminal {
    pub(crate) async fn read_body(&self, p: ReadParams) -> Result<String, ToolError> {
        refuse_mixed(&p).map_err(ToolError::BadInput)?;
        match p.view.as_deref() {
            None | Some("cooked") => {}
            Some("screen") => return self.screen_view(&p.session).await,
            Some("raw") => return self.raw_view(&p.session, p.region, p.from_byte, p.bytes).await,
            Some(v) => {
                return Err(ToolError::BadInput(format!(
                    "view {v:?} is not available; use \"cooked\", \"screen\" or \"raw\""
                )));
            }
        }
        let (dir, mut source, status) = self.open_source(&p.session).await?;
        let last_line = last_line(&status);
        let (first, last, region) = match (p.region, p.from_line, p.to_line) {
            (Some(id), from, to) => {
                let r = source.region(&self.inner.searches, RegionId(id)).await?.ok_or_else(|| {
                    let has = match status.mark.regions {
                        0 => "none yet (each command run there makes one)".to_string(),
                        1 => "region 1 only".to_string(),
                        n => format!("regions 1 to {n}"),
                    };
                    ToolError::BadInput(format!("session {} has no region {id}; it has {has}", p.session))
                })?;
                let (a, b) = region_lines(&r, &status);
                // from_line and to_line pick a part of the region.
                let (first, last) = (from.map_or(a, |f| a.max(LineNo(f))), to.map_or(b, |t| b.min(LineNo(t))));
                if (from.is_some() || to.is_some()) && (first > last || b < a) {
                    let asked = format!("{}-{}", from.map_or(a.0, |f| f), to.map_or(b.0, |t| t));
                    return Err(ToolError::BadInput(format!(
                        "lines {asked} are not in region {id}, which holds lines {a}-{b}; read session={} region={id} reads all of it",
                        p.session
                    )));
                }
                (first, last, Some(r))
            }
            (None, from, to) => line_range(from, to, last_line).map_err(ToolError::BadInput)?,
        };
        let (last, more) =
            if last.0 >= first.0 + MAX_READ { (LineNo(first.0 + MAX_READ - 1), true) } else { (last, false) };
        let lines = self.hide_before_cutting(&dir, source.fetch(&status, first, last, region.as_ref()).await?);
        let mut out = match &region {
            Some(r) => format!(
                "region {} `{}`{} · lines {first}-{last}\n",
                r.id,
                r.command,
                self.started_by_other(&p.session, r)
            ),
            None => format!("lines {first}-{last} of {last_line}\n"),
        };
        if let Source::Store(..) = source {
            out.insert_str(0, &format!("(session {} is closed; this is its log)\n", p.session));
        }
        if lines.is_empty() {
            out.push_str("(no lines)\n");
        }
        out.push_str(&output::numbered(first, &lines, digits(last.0)));
        if more {
            let within = region.as_ref().map(|r| format!(" region={}", r.id)).unwrap_or_default();
            out.push_str(&format!("… more: read session={}{within} from_line={}\n", p.session, last.0 + 1));
        }
        if let Some(r) = &region {
            out.push_str(&region_file_note(&dir, r));
        }
        Ok(out)
    }

    /// `lines` of the session in `dir`, redacted whole when one of them is
    /// longer than a reply shows: the reply cuts such a line (see
    /// [`output::cut_line`]), and a cut through a secret leaves pieces no
    /// rule knows.
    fn hide_before_cutting(&self, dir: &Path, lines: Vec<String>) -> Vec<String> {
        if lines.iter().all(|l| l.len() <= output::MAX_LINE_CHARS) {
            return lines;
        }
        let (hidden, counts) = self.inner.secrets.redact_lines(dir, &lines);
        crate::tools::replies::secrets::hidden_early(&counts);
        hidden
    }

    /// " · started by agent NAME" when another agent than the caller
    /// started region `r` of `session`; empty otherwise.
    fn started_by_other(&self, session: &str, r: &Region) -> String {
        let me = self.actor();
        match self.journal().starter_of(session, r.id) {
            Some(agent) if agent != me => format!(" · started by agent {agent}"),
            _ => String::new(),
        }
    }

    /// The session's lines: through its logger while its pane lives, else
    /// straight from its directory, with a status made from what is there.
    async fn open_source(&self, name: &str) -> Result<(PathBuf, Source, Status), ToolError> {
        match self.sessions().resolve(name).await {
            Ok(s) => {
                let mut logger = self.sessions().logger(&s).await?;
                let status = logger.status().await?;
                Ok((s.dir, Source::Logger(logger), status))
            }
            // A bad name may still be an archived generation, NAME.N, which
            // has logs but no pane; open_logs judges it by that rule.
            Err(SessionError::NotFound { .. } | SessionError::BadName(_)) => {
                let logs = self.sessions().open_logs(name).await?;
                let reader = LineReader::open(&logs.dir)?;
                let status = closed_status(&self.inner.searches, &logs.dir, &reader)?;
                Ok((logs.dir.clone(), Source::Store(reader, logs.dir), status))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Where a read's lines come from.
enum Source {
    /// A live session's logger, which also knows the unfinished line.
    Logger(LoggerClient),
    /// A closed session's files: its line reader and directory.
    Store(LineReader, PathBuf),
}

impl Source {
    async fn region(&mut self, cache: &SearchCache, id: RegionId) -> Result<Option<Region>, ToolError> {
        match self {
            Source::Logger(l) => Ok(l.region(id).await?),
            Source::Store(_, dir) => cache.with_regions(dir, |index| Ok(index.region(id)?)),
        }
    }

    async fn fetch(
        &mut self,
        status: &Status,
        first: LineNo,
        last: LineNo,
        region: Option<&Region>,
    ) -> Result<Vec<String>, ToolError> {
        match self {
            Source::Logger(l) => Ok(lines::fetch(l, status, first, last, region).await?),
            Source::Store(r, _) => Ok(lines::store_fetch(r, first, last, region)?),
        }
    }
}

/// A status for a closed session: every line committed, no unfinished one,
/// and its regions as the store has them.
fn closed_status(cache: &SearchCache, dir: &Path, reader: &LineReader) -> Result<Status, ToolError> {
    let (lines, _) = reader.extent()?;
    let (count, last) = cache.with_regions(dir, |index| Ok((index.count(false), index.recent(1, false)?)))?;
    let mut status = Status { eof: true, ..Status::default() };
    status.mark.line = LineNo(lines + 1);
    status.mark.regions = count as u64;
    status.last_region = last.into_iter().last();
    Ok(status)
}

/// Refuses arguments the chosen view does not take, naming them and the
/// view that would: a silently ignored `region` would show other bytes
/// than the ones asked for.
fn refuse_mixed(p: &ReadParams) -> Result<(), String> {
    let view = p.view.as_deref().unwrap_or("cooked");
    let given = [
        ("region", p.region.is_some(), ["cooked", "raw"].as_slice()),
        ("from_line", p.from_line.is_some(), ["cooked"].as_slice()),
        ("to_line", p.to_line.is_some(), ["cooked"].as_slice()),
        ("from_byte", p.from_byte.is_some(), ["raw"].as_slice()),
        ("bytes", p.bytes.is_some(), ["raw"].as_slice()),
    ];
    let stray: Vec<_> = given.iter().filter(|(_, set, views)| *set && !views.contains(&view)).collect();
    if let Some((name, _, views)) = stray.first() {
        let names: Vec<String> = stray.iter().map(|(n, ..)| format!("`{n}`")).collect();
        let takes = views.iter().map(|v| format!("view=\"{v}\"")).collect::<Vec<_>>().join(" or ");
        let verb = if names.len() == 1 { "is" } else { "are" };
        return Err(format!("{} {verb} not taken by view=\"{view}\"; {name} goes with {takes}", names.join(" and ")));
    }
    if p.region.is_some() && p.from_byte.is_some() {
        return Err("give region or from_byte, not both: region=N shows that command's bytes from its start".into());
    }
    Ok(())
}

fn line_range(
    from: Option<u64>,
    to: Option<u64>,
    last_line: LineNo,
) -> Result<(LineNo, LineNo, Option<Region>), String> {
    let to = to.map(LineNo).unwrap_or(last_line).min(last_line);
    let from = match from {
        Some(0) => return Err("from_line counts from 1".into()),
        Some(f) => LineNo(f),
        None => LineNo(to.0.saturating_sub(DEFAULT_TAIL - 1).max(1)),
    };
    if from > last_line && last_line.0 > 0 {
        return Err(format!("the session log has {last_line} lines; from_line {from} is past its end"));
    }
    Ok((from, to, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_default_to_the_tail_and_refuse_line_zero() {
        let (a, b, _) = line_range(None, None, LineNo(100)).expect("range");
        assert_eq!((a, b), (LineNo(61), LineNo(100)));
        assert!(line_range(Some(0), None, LineNo(100)).is_err());
        assert!(line_range(Some(200), None, LineNo(100)).is_err());
    }

    fn params(view: Option<&str>) -> ReadParams {
        ReadParams {
            session: "t1".into(),
            view: view.map(str::to_string),
            region: None,
            from_line: None,
            to_line: None,
            from_byte: None,
            bytes: None,
        }
    }

    #[test]
    fn arguments_a_view_does_not_take_are_refused_by_name() {
        assert!(refuse_mixed(&ReadParams { region: Some(3), ..params(Some("raw")) }).is_ok());
        assert!(refuse_mixed(&ReadParams { bytes: Some(9), ..params(Some("raw")) }).is_ok());
        assert!(refuse_mixed(&ReadParams { from_line: Some(3), ..params(None) }).is_ok());
        let e = refuse_mixed(&ReadParams { region: Some(3), ..params(Some("screen")) }).unwrap_err();
        assert_eq!(e, "`region` is not taken by view=\"screen\"; region goes with view=\"cooked\" or view=\"raw\"");
        let e = refuse_mixed(&ReadParams { from_line: Some(1), to_line: Some(2), ..params(Some("raw")) }).unwrap_err();
        assert!(e.starts_with("`from_line` and `to_line` are not taken by view=\"raw\""), "{e}");
        let e = refuse_mixed(&ReadParams { from_byte: Some(1), ..params(Some("cooked")) }).unwrap_err();
        assert!(e.contains("from_byte goes with view=\"raw\""), "{e}");
        let e = refuse_mixed(&ReadParams { from_byte: Some(1), region: Some(2), ..params(Some("raw")) }).unwrap_err();
        assert!(e.starts_with("give region or from_byte"), "{e}");
    }
}

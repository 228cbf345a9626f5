//! Lines of a session's record as replies show them: read through the
//! logger (which also knows the line not yet finished) or from a closed
//! session's files, cut at a region's byte bounds so a command's output
//! never carries the prompt around it.

use std::path::Path;

use crate::session::LoggerClient;
use dtmcp_core::protocol::Status;
use dtmcp_core::region::{LinePos, Region};
use dtmcp_core::store::{self, LineReader};
use dtmcp_core::types::LineNo;

/// Lines `first..=last` from the files, cut to the region's bounds.
pub(crate) fn store_fetch(
    reader: &LineReader,
    first: LineNo,
    last: LineNo,
    region: Option<&Region>,
) -> Result<Vec<String>, dtmcp_core::store::StoreError> {
    if last < first {
        return Ok(Vec::new());
    }
    let mut lines = reader.read(first, last.0 - first.0 + 1)?;
    if let Some(r) = region {
        let end = r.end.unwrap_or(LinePos { line: last.next(), bytes: 0 });
        cut_region(&mut lines, first, r.start, end);
    }
    Ok(lines)
}

/// Writes the region's file again and says where it is.
pub(crate) fn region_file_note(dir: &Path, r: &Region) -> String {
    match store::write_region_file(dir, r) {
        Ok(path) => format!("the whole region is also in {}\n", path.display()),
        Err(e) => format!("(its file could not be written: {e})\n"),
    }
}

/// The last line of the log that has text: the unfinished line if it has
/// any, else the last committed one.
pub(crate) fn last_line(status: &Status) -> LineNo {
    let cur = status.mark.line;
    if status.current_text.is_empty() { LineNo(cur.0.saturating_sub(1)) } else { cur }
}

/// The first and last line holding a region's output (last < first: none).
pub(crate) fn region_lines(r: &Region, status: &Status) -> (LineNo, LineNo) {
    let end = r.end.unwrap_or(LinePos { line: status.mark.line, bytes: status.current_text.len() as u32 });
    let last = if end.bytes > 0 { end.line } else { LineNo(end.line.0.saturating_sub(1)) };
    (r.start.line, last)
}

/// Lines `first..=last`, the unfinished line taken from `status`, and cut
/// to the region's bounds when one is given.
pub(crate) async fn fetch(
    logger: &mut LoggerClient,
    status: &Status,
    first: LineNo,
    last: LineNo,
    region: Option<&Region>,
) -> Result<Vec<String>, crate::session::ClientError> {
    if last < first {
        return Ok(Vec::new());
    }
    let committed_end = status.mark.line; // exclusive
    let upto = last.min(LineNo(committed_end.0.saturating_sub(1)));
    let mut lines = if upto >= first { logger.read(first, upto.0 - first.0 + 1).await? } else { Vec::new() };
    if last >= committed_end && first <= committed_end {
        lines.push(status.current_text.clone());
    }
    if let Some(r) = region {
        let end = r.end.unwrap_or(LinePos { line: status.mark.line, bytes: status.current_text.len() as u32 });
        cut_region(&mut lines, first, r.start, end);
    }
    Ok(lines)
}

/// Cuts the first and last line of a region's text at its byte bounds.
fn cut_region(lines: &mut [String], first: LineNo, start: LinePos, end: LinePos) {
    let last = LineNo(first.0 + lines.len() as u64).0.saturating_sub(1);
    if end.line.0 == last
        && end.bytes > 0
        && let Some(l) = lines.last_mut()
    {
        *l = prefix(l, end.bytes as usize).to_string();
    }
    if start.line == first
        && start.bytes > 0
        && let Some(l) = lines.first_mut()
    {
        *l = l.get(start.bytes as usize..).unwrap_or("").to_string();
    }
}

fn prefix(s: &str, mut n: usize) -> &str {
    n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_bounds_cut_the_prompt_off_a_partial_last_line() {
        let mut lines = vec!["out".to_string(), "foo$ ls".to_string()];
        cut_region(&mut lines, LineNo(5), LinePos { line: LineNo(5), bytes: 0 }, LinePos { line: LineNo(6), bytes: 3 });
        assert_eq!(lines, ["out", "foo"]);
    }
}

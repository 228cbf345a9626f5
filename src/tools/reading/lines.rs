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
    written_note(store::write_region_file(dir, r))
}

/// The most bytes of output a clipped reply copies, unasked, into the
/// region's own file. Beyond it the copy would cost the reply time and the
/// disk space in proportion to the output (about half a millisecond per
/// megabyte here, and the output's size again on disk): the reply names the
/// region's lines in `session.txt` instead, which grep and less read as
/// well, and `read region=N` still writes the file when asked.
pub(crate) const UNASKED_REGION_FILE_MAX: u64 = 16 << 20;

/// After a clipped reply of finished region `r`, whose output is on lines
/// `lines` of the log: its file is written (it is the region most likely to
/// be read again) unless the output is over [`UNASKED_REGION_FILE_MAX`];
/// says where the whole output is.
pub(crate) fn clipped_region_note(dir: &Path, r: &Region, lines: (LineNo, LineNo)) -> String {
    region_note_upto(dir, r, lines, UNASKED_REGION_FILE_MAX)
}

fn region_note_upto(dir: &Path, r: &Region, lines: (LineNo, LineNo), max: u64) -> String {
    let span = match store::region_bytes(dir, r) {
        Ok(span) => span,
        Err(e) => return written_note(Err(e)),
    };
    let bytes = span.end - span.start;
    if bytes <= max {
        return written_note(store::write_region_span(dir, r, span));
    }
    format!(
        "the whole region is lines {}-{} of {} ({} MiB; read region={} also writes it to a file of its own)\n",
        lines.0,
        lines.1,
        dir.join(store::files::TEXT).display(),
        bytes.div_ceil(1 << 20),
        r.id
    )
}

/// Where a region's file was written, or why it could not be.
fn written_note(written: Result<std::path::PathBuf, store::StoreError>) -> String {
    match written {
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
    use dtmcp_core::types::RegionId;

    #[test]
    fn a_clipped_region_gets_its_file_unless_its_output_is_too_big_to_copy_unasked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = store::LineWriter::open(dir.path()).expect("open");
        w.push("$ seq 1 3").expect("push");
        for n in 1..=3 {
            w.push(&n.to_string()).expect("push");
        }
        w.flush().expect("flush");
        // Its output is lines 2-4: "1\n2\n3\n", 6 bytes.
        let r = Region {
            id: RegionId(1),
            start: LinePos { line: LineNo(2), bytes: 0 },
            end: Some(LinePos { line: LineNo(5), bytes: 0 }),
            ..Region::default()
        };
        let file = store::region_file(dir.path(), RegionId(1));
        let big = region_note_upto(dir.path(), &r, (LineNo(2), LineNo(4)), 5);
        assert!(!file.exists(), "a region over the limit was copied: {big}");
        let text = dir.path().join("session.txt").display().to_string();
        assert_eq!(
            big,
            format!(
                "the whole region is lines 2-4 of {text} (1 MiB; read region=1 also writes it to a file of its own)\n"
            )
        );
        let small = region_note_upto(dir.path(), &r, (LineNo(2), LineNo(4)), 6);
        assert_eq!(small, format!("the whole region is also in {}\n", file.display()));
        assert_eq!(std::fs::read_to_string(&file).expect("region file"), "1\n2\n3\n");
    }

    #[test]
    fn region_bounds_cut_the_prompt_off_a_partial_last_line() {
        let mut lines = vec!["out".to_string(), "foo$ ls".to_string()];
        cut_region(&mut lines, LineNo(5), LinePos { line: LineNo(5), bytes: 0 }, LinePos { line: LineNo(6), bytes: 3 });
        assert_eq!(lines, ["out", "foo"]);
    }
}

//! Writing a log gap the router recorded (its `session::repair`) into the
//! log, before the new logger logs anything else.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use dtmcp_core::contract::{GAP_PENDING, GAPS, Gap};
use dtmcp_core::store::{LineWriter, StoreError};

/// Takes `gap.pending` from `dir`, if there is one: marks the gap in the
/// cooked log with the screen as it was when logging resumed, lists it in
/// `gaps.jsonl`, and removes the pending file.
pub fn absorb(dir: &Path, lines: &mut LineWriter) -> Result<(), StoreError> {
    let pending = dir.join(GAP_PENDING);
    let Ok(body) = std::fs::read(&pending) else { return Ok(()) };
    let io = |source| StoreError::Io { path: pending.clone(), source };
    if let Ok(gap) = serde_json::from_slice::<Gap>(&body) {
        record(dir, lines, &gap)?;
    }
    std::fs::remove_file(&pending).map_err(io)
}

/// Marks `gap` in the cooked log and lists it in `gaps.jsonl`.
pub fn record(dir: &Path, lines: &mut LineWriter, gap: &Gap) -> Result<(), StoreError> {
    for line in gap_lines(gap) {
        lines.push(&line)?;
    }
    lines.flush()?;
    let path = dir.join(GAPS);
    let io = |source| StoreError::Io { path: path.clone(), source };
    let mut list = std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(io)?;
    let mut line = serde_json::to_vec(gap).unwrap_or_default();
    line.push(b'\n');
    list.write_all(&line).map_err(io)
}

/// The lines that mark a gap in `session.txt`.
fn gap_lines(gap: &Gap) -> Vec<String> {
    let at = |ms: u64| humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string();
    if !gap.reason.is_empty() {
        return vec![format!(
            "[log gap: {} bytes of output between {} and {} were not logged ({}); logging resumed here]",
            gap.dropped,
            at(gap.from_ms),
            at(gap.to_ms),
            gap.reason.chars().filter(|c| !c.is_control()).collect::<String>()
        )];
    }
    let mut out = vec![format!(
        "[log gap: output between {} and {} was not logged (the logger had died); the screen when logging resumed:]",
        at(gap.from_ms),
        at(gap.to_ms)
    )];
    out.extend(gap.screen.iter().map(|row| row.chars().filter(|c| !c.is_control()).collect::<String>()));
    out.push("[end of log gap]".to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtmcp_core::store::LineReader;
    use dtmcp_core::types::LineNo;

    #[test]
    fn a_pending_gap_becomes_lines_and_a_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let screen = vec!["$ make".into(), "cc \u{1b}x".into()];
        let gap = Gap { from_ms: 0, to_ms: 2_000, raw_offset: 9, screen, ..Gap::default() };
        std::fs::write(dir.path().join(GAP_PENDING), serde_json::to_vec(&gap).expect("json")).expect("write");
        let mut w = LineWriter::open(dir.path()).expect("open");
        w.push("before").expect("push");
        absorb(dir.path(), &mut w).expect("absorb");
        let lines = LineReader::open(dir.path()).expect("reader").read(LineNo(1), 10).expect("read");
        assert_eq!(lines[0], "before");
        assert!(lines[1].starts_with("[log gap: output between 1970-01-01T00:00:00Z and 1970-01-01T00:00:02Z"));
        assert_eq!(&lines[2..], ["$ make", "cc x", "[end of log gap]"]);
        assert!(!dir.path().join(GAP_PENDING).exists());
        let record = std::fs::read_to_string(dir.path().join(GAPS)).expect("gaps");
        assert_eq!(serde_json::from_str::<Gap>(record.trim()).expect("gap"), gap);
    }
}

//! `removed.jsonl` in the state home: one JSON line per deleted session
//! directory, `{"name", "when", "why"}`, kept for [`KEEP_DAYS`] days so that
//! a later request for the session can say when and why it went.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name in the state home.
pub const FILE: &str = "removed.jsonl";
/// How long a tombstone is kept.
pub const KEEP_DAYS: u64 = 30;

/// One deletion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    /// The session directory's name.
    pub name: String,
    /// When it was deleted, in ms since the epoch.
    pub when: u64,
    /// Why, in words.
    pub why: String,
}

fn path(home: &Path) -> PathBuf {
    home.join(FILE)
}

/// Appends one tombstone.
pub fn append(home: &Path, t: &Tombstone) -> std::io::Result<()> {
    let mut line = serde_json::to_string(t).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path(home))?;
    f.write_all(line.as_bytes())
}

/// Every tombstone that parses, oldest first.
pub fn read_all(home: &Path) -> Vec<Tombstone> {
    let text = std::fs::read_to_string(path(home)).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The newest tombstone of `name`.
pub fn find(home: &Path, name: &str) -> Option<Tombstone> {
    read_all(home).into_iter().rev().find(|t| t.name == name)
}

/// Drops tombstones older than [`KEEP_DAYS`] at `now_ms`, rewriting the
/// file through a temporary name so a reader sees the old or the new one.
pub fn prune(home: &Path, now_ms: u64) -> std::io::Result<()> {
    let all = read_all(home);
    let cutoff = now_ms.saturating_sub(KEEP_DAYS * 24 * 60 * 60 * 1000);
    if all.iter().all(|t| t.when >= cutoff) {
        return Ok(());
    }
    let mut body = String::new();
    for t in all.iter().filter(|t| t.when >= cutoff) {
        body.push_str(&serde_json::to_string(t).map_err(std::io::Error::other)?);
        body.push('\n');
    }
    dtmcp_core::store::write_atomic(&path(home), body.as_bytes())
}

/// "on <UTC time>, because <why>", for a reply.
pub fn describe(t: &Tombstone) -> String {
    format!("its logs were deleted on {} because {}", utc(t.when), t.why)
}

/// A UTC time in ms as `YYYY-MM-DD HH:MM UTC`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rest / 3600, rest % 3600 / 60)
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_tombstones_are_dropped_and_the_newest_is_found() {
        let home = tempfile::tempdir().expect("tempdir");
        let day = 24 * 60 * 60 * 1000;
        let now = 100 * day;
        for (name, when) in [("old", now - 31 * day), ("t1", now - day), ("t1", now)] {
            append(home.path(), &Tombstone { name: name.into(), when, why: "x".into() }).expect("append");
        }
        prune(home.path(), now).expect("prune");
        assert_eq!(read_all(home.path()).len(), 2);
        assert_eq!(find(home.path(), "t1").map(|t| t.when), Some(now));
        assert_eq!(find(home.path(), "old"), None);
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_700_000_000_000), "2023-11-14 22:13 UTC");
    }
}

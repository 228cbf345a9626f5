//! A session's regions as its logger writes them down: `regions.jsonl` in
//! the session's directory, an open and a close record for each region.

use std::path::Path;

use serde_json::Value;

/// The records of session directory `dir`'s `regions.jsonl`, in order
/// (none while the file is not there).
pub fn records(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("regions.jsonl")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The ids of the regions that ran `command`, each once: how many times
/// it was typed.
pub fn ids_of(dir: &Path, command: &str) -> Vec<u64> {
    let mut ids: Vec<u64> =
        records(dir).iter().filter(|r| r["command"] == command).filter_map(|r| r["id"].as_u64()).collect();
    ids.dedup();
    ids
}

/// How many regions session directory `dir` has.
pub fn count(dir: &Path) -> usize {
    let mut ids: Vec<u64> = records(dir).iter().filter_map(|r| r["id"].as_u64()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}

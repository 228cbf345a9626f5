//! What the server remembers about other hosts: where `shell_integrate`
//! found no integration files, so that it does not type the same failing
//! line again for a while and can name the install command straight away.
//!
//! The memory is one JSON object in `integration-missing.json` under the
//! state home, keyed by `[user@]host`, each entry the time (ms since the
//! epoch) the files were found missing and the integration version looked
//! for. It is server-wide (every session, every agent), entries older than
//! [`MISSING_FOR_MS`] count for nothing and are dropped on the next write,
//! and a success on that host removes its entry. Writes go to a temporary
//! file renamed over the old one, so a reader never sees half a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How long a host stays known as missing the files: 12 hours.
pub const MISSING_FOR_MS: u64 = 12 * 60 * 60 * 1000;

/// The file's name under the state home.
pub const MISSING_FILE: &str = "integration-missing.json";

/// One host's entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    /// When the files were found missing, in ms since the epoch.
    pub since_ms: u64,
    /// The integration version that was looked for.
    pub version: u32,
}

fn path(home: &Path) -> PathBuf {
    home.join(MISSING_FILE)
}

/// Every entry, as stored; an absent or unreadable file is empty.
fn load(home: &Path) -> BTreeMap<String, Missing> {
    std::fs::read(path(home)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// Writes `entries` in place of the file, atomically.
fn store(home: &Path, entries: &BTreeMap<String, Missing>) -> std::io::Result<()> {
    std::fs::create_dir_all(home)?;
    let body = serde_json::to_vec_pretty(entries).map_err(std::io::Error::other)?;
    let tmp = home.join(format!(".{MISSING_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, path(home))
}

/// When `host` was found without this version's files, if that was less
/// than [`MISSING_FOR_MS`] before `now_ms`.
pub fn missing_since(home: &Path, host: &str, now_ms: u64) -> Option<u64> {
    let entry = load(home).remove(host)?;
    let fresh =
        entry.version == crate::shell::INTEGRATION_VERSION && now_ms.saturating_sub(entry.since_ms) < MISSING_FOR_MS;
    fresh.then_some(entry.since_ms)
}

/// Remembers that `host` has no integration files, as of `now_ms`.
pub fn remember_missing(home: &Path, host: &str, now_ms: u64) -> std::io::Result<()> {
    let mut entries = load(home);
    entries.retain(|_, e| now_ms.saturating_sub(e.since_ms) < MISSING_FOR_MS);
    entries.insert(host.to_string(), Missing { since_ms: now_ms, version: crate::shell::INTEGRATION_VERSION });
    store(home, &entries)
}

/// Forgets `host`'s entry (the integration loaded there, or the files
/// were installed); nothing is written when it has none.
pub fn forget_missing(home: &Path, host: &str) -> std::io::Result<()> {
    let mut entries = load(home);
    if entries.remove(host).is_none() {
        return Ok(());
    }
    store(home, &entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_host_is_remembered_for_twelve_hours_then_forgotten() {
        let home = tempfile::tempdir().expect("tempdir");
        let h = home.path();
        assert_eq!(missing_since(h, "u@box", 1_000), None);
        remember_missing(h, "u@box", 1_000).expect("write");
        assert_eq!(missing_since(h, "u@box", 1_000 + MISSING_FOR_MS - 1), Some(1_000));
        assert_eq!(missing_since(h, "u@box", 1_000 + MISSING_FOR_MS), None);
        assert_eq!(missing_since(h, "box", 1_000), None, "per user and host");
        // An old entry goes when something else is written.
        remember_missing(h, "other", 1_000 + MISSING_FOR_MS).expect("write");
        assert!(!load(h).contains_key("u@box"));
    }

    #[test]
    fn a_success_clears_the_entry_and_the_file_stays_whole() {
        let home = tempfile::tempdir().expect("tempdir");
        let h = home.path();
        remember_missing(h, "a", 5).expect("write");
        remember_missing(h, "b", 5).expect("write");
        forget_missing(h, "a").expect("forget");
        assert_eq!(missing_since(h, "a", 6), None);
        assert_eq!(missing_since(h, "b", 6), Some(5));
        forget_missing(h, "never-seen").expect("a no-op");
        let text = std::fs::read_to_string(h.join(MISSING_FILE)).expect("file");
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{text}");
        let leftovers: Vec<_> =
            std::fs::read_dir(h).expect("dir").flatten().filter(|e| e.file_name() != MISSING_FILE).collect();
        assert!(leftovers.is_empty(), "no temporary file is left behind");
    }

    #[test]
    fn another_versions_entry_does_not_count() {
        let home = tempfile::tempdir().expect("tempdir");
        let mut entries = BTreeMap::new();
        entries.insert("box".to_string(), Missing { since_ms: 10, version: crate::shell::INTEGRATION_VERSION + 1 });
        store(home.path(), &entries).expect("write");
        assert_eq!(missing_since(home.path(), "box", 11), None);
    }
}

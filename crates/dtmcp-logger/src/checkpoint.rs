//! Checkpoints: what a logger started on an existing session needs to carry
//! on where the last one stopped, with a bounded replay.
//!
//! Every few megabytes of output or seconds, and when output ends, the pump
//! writes `checkpoint.json`: an offset in `raw.log`, the number the next
//! cooked line gets, and the region tracker's whole state (open regions,
//! the command being typed, the marker floors). It is taken only where the
//! cooker is at rest, right after a line feed with nothing drawn, so that a
//! fresh cooker started there cooks exactly what the old one would have;
//! the pump restarts its own parser at that point too (see
//! [`Cooker::restart_parser`](dtmcp_core::cook::Cooker::restart_parser)).
//!
//! A new logger loads it and cooks `raw.log` from that offset to the end:
//! at most one checkpoint interval of output, whatever the log's size.
//! Lines and region records the old logger already stored are not written
//! again. Without a checkpoint (a session made by an older logger) the
//! replay starts at the beginning of `raw.log`.
//!
//! The file is written to a temporary name and renamed, so a logger killed
//! while writing it leaves the previous one.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dtmcp_core::region::TrackerSnapshot;
use dtmcp_core::store::{StoreError, files};

/// Output between two checkpoints, at most (one is taken at the first line
/// end after this much).
pub const EVERY_BYTES: u64 = 4 << 20;
/// Time between two checkpoints while output comes, at most (idem).
pub const EVERY_MS: u64 = 5_000;

/// Where a logger can carry on from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Bytes of `raw.log` cooked; the cooker was at rest there.
    pub raw: u64,
    /// The number the next cooked line gets.
    pub next_line: u64,
    /// The region tracker's state at that point.
    pub tracker: TrackerSnapshot,
}

/// Reads the checkpoint of `dir`; `None` if there is none or it does not
/// parse (then the replay starts at the beginning).
pub fn load(dir: &Path) -> Option<Checkpoint> {
    let body = std::fs::read(dir.join(files::CHECKPOINT)).ok()?;
    serde_json::from_slice(&body).ok()
}

/// Writes `cp` as the checkpoint of `dir`, atomically.
pub fn save(dir: &Path, cp: &Checkpoint) -> Result<(), StoreError> {
    let path = dir.join(files::CHECKPOINT);
    let body = serde_json::to_vec(cp).map_err(|source| StoreError::Json { path: path.clone(), source })?;
    dtmcp_core::store::write_atomic(&path, &body).map_err(|source| StoreError::Io { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_reads_back_and_a_torn_one_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(load(dir.path()), None);
        let cp = Checkpoint { raw: 42, next_line: 7, tracker: TrackerSnapshot::default() };
        save(dir.path(), &cp).expect("save");
        assert_eq!(load(dir.path()), Some(cp));
        std::fs::write(dir.path().join(files::CHECKPOINT), b"{\"raw\": 4").expect("tear");
        assert_eq!(load(dir.path()), None);
    }
}

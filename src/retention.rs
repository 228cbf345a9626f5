//! Retention: when a closed session's logs are deleted.
//!
//! A session directory goes once it is closed, not pinned with a `keep`
//! marker, and either marked `delete-on-close` or unused for the configured
//! number of days. "Closed" is only ever said by the server that made the
//! session (same host, same tmux socket): a home shared over NFS, or a
//! server on another socket, must not delete what it cannot see.
//!
//! The decision is a pure function, [`plan`], of the facts gathered from
//! disk and a clock; [`sweep`] gathers, plans, checks each candidate again
//! and deletes, leaving a tombstone in `removed.jsonl` so a later request
//! can say when and why a session went.

pub mod sweep;
pub mod tombstone;

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub use sweep::{SweepMode, Sweeper};
pub use tombstone::Tombstone;

/// Marker: the session's logs are kept for good.
pub const KEEP: &str = "keep";
/// Marker: the session's logs go as soon as it is closed.
pub const DELETE_ON_CLOSE: &str = "delete-on-close";
/// Marker touched by every read, since reading changes no other file.
pub const LAST_USED: &str = "last-used";
/// Overrides the number of days a closed, unused session is kept.
pub const ENV_KEEP_DAYS: &str = "DOCENT_TERMINAL_MCP_KEEP_CLOSED_DAYS";
/// The default of [`ENV_KEEP_DAYS`].
pub const DEFAULT_KEEP_DAYS: u64 = 3;

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// How long closed sessions are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Days a closed session may stay unused; zero keeps everything.
    pub keep_closed_days: u64,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { keep_closed_days: DEFAULT_KEEP_DAYS }
    }
}

impl Policy {
    /// The policy from [`ENV_KEEP_DAYS`], or the default when it is unset
    /// or not a number.
    pub fn from_env() -> Policy {
        let days = std::env::var(ENV_KEEP_DAYS).ok().and_then(|v| v.trim().parse().ok());
        Policy { keep_closed_days: days.unwrap_or(DEFAULT_KEEP_DAYS) }
    }
}

/// What is known about one session directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The directory's name (`NAME` or an archived `NAME.N`).
    pub name: String,
    /// No live pane, and made by this host on this tmux socket.
    pub closed: bool,
    /// The newest mtime in the directory, `last-used` included, in ms.
    pub last_used_ms: u64,
    /// The `keep` marker is present.
    pub keep: bool,
    /// The `delete-on-close` marker is present.
    pub delete_on_close: bool,
    /// The directory entry is a symbolic link, not a directory of ours.
    pub is_symlink: bool,
}

/// Why a session's logs are (or were) deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// It was marked delete-on-close and has closed.
    DeleteOnClose,
    /// It was closed and unused for this many days.
    Unused {
        /// The configured limit.
        days: u64,
    },
    /// Someone asked for it (`session_logs delete`, `logs delete`).
    Asked,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::DeleteOnClose => write!(f, "it was marked delete-on-close and closed"),
            Why::Unused { days } => write!(f, "it was closed and unused for {days} days"),
            Why::Asked => write!(f, "its deletion was asked for"),
        }
    }
}

/// One directory to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The directory's name.
    pub name: String,
    /// Why it goes.
    pub why: Why,
    /// The last use the decision was made on, to notice a read racing it.
    pub last_used_ms: u64,
}

/// Decides which directories go at `now_ms`. Pure: no file, no clock.
pub fn plan(now_ms: u64, policy: Policy, facts: &[Facts]) -> Vec<Decision> {
    facts.iter().filter_map(|f| decide(now_ms, policy, f)).collect()
}

fn decide(now_ms: u64, policy: Policy, f: &Facts) -> Option<Decision> {
    if f.is_symlink || !f.closed || f.keep {
        return None;
    }
    let why = if f.delete_on_close {
        Why::DeleteOnClose
    } else {
        let days = policy.keep_closed_days;
        let unused = now_ms.saturating_sub(f.last_used_ms);
        if days == 0 || unused < days.saturating_mul(DAY_MS) {
            return None;
        }
        Why::Unused { days }
    };
    Some(Decision { name: f.name.clone(), why, last_used_ms: f.last_used_ms })
}

/// Until when a closed session with these facts is kept, in ms since the
/// epoch; `None` when it is kept for good.
pub fn expires_ms(policy: Policy, f: &Facts) -> Option<u64> {
    if f.keep || f.is_symlink || (policy.keep_closed_days == 0 && !f.delete_on_close) {
        return None;
    }
    if f.delete_on_close {
        return Some(f.last_used_ms);
    }
    Some(f.last_used_ms.saturating_add(policy.keep_closed_days.saturating_mul(DAY_MS)))
}

/// Records a read of the session in `dir`: creates or touches `last-used`.
/// A `last-used` that is a symbolic link is not followed.
pub fn touch_last_used(dir: &Path) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(dir.join(LAST_USED))?;
    f.set_modified(std::time::SystemTime::now())
}

/// What `session_logs` and `logs` can ask of a session's logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Pin them.
    Keep,
    /// Back under the usual rule.
    Default,
    /// Delete them when the session closes.
    DeleteOnClose,
    /// Delete a closed session's logs now.
    Delete,
}

impl Action {
    /// Parses `keep`, `default`, `delete_on_close` (or `delete-on-close`) and `delete`.
    pub fn parse(s: &str) -> Option<Action> {
        match s {
            "keep" => Some(Action::Keep),
            "default" => Some(Action::Default),
            "delete_on_close" | "delete-on-close" => Some(Action::DeleteOnClose),
            "delete" => Some(Action::Delete),
            _ => None,
        }
    }
}

/// Sets the markers of `dir` for a marker action (not [`Action::Delete`]).
pub fn set_markers(dir: &Path, action: Action) -> std::io::Result<()> {
    let (keep, doc) = match action {
        Action::Keep => (true, false),
        Action::DeleteOnClose => (false, true),
        Action::Default | Action::Delete => (false, false),
    };
    set_marker(dir, KEEP, keep)?;
    set_marker(dir, DELETE_ON_CLOSE, doc)
}

fn set_marker(dir: &Path, name: &str, on: bool) -> std::io::Result<()> {
    let path = dir.join(name);
    if on {
        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
            .open(&path)
            .map(drop)
    } else {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const NOW: u64 = 1000 * DAY_MS;

    fn facts(closed: bool, idle_days: u64, keep: bool, doc: bool, link: bool) -> Facts {
        Facts {
            name: "t1".into(),
            closed,
            last_used_ms: NOW - idle_days * DAY_MS,
            keep,
            delete_on_close: doc,
            is_symlink: link,
        }
    }

    #[rstest]
    #[case::live_is_never_deleted(facts(false, 30, false, true, false), 3, None)]
    #[case::closed_but_recently_used_stays(facts(true, 2, false, false, false), 3, None)]
    #[case::closed_and_unused_goes(facts(true, 3, false, false, false), 3, Some(Why::Unused { days: 3 }))]
    #[case::pinned_stays_however_old(facts(true, 90, true, false, false), 3, None)]
    #[case::pin_beats_delete_on_close(facts(true, 0, true, true, false), 3, None)]
    #[case::delete_on_close_goes_at_once(facts(true, 0, false, true, false), 3, Some(Why::DeleteOnClose))]
    #[case::zero_days_keeps_everything(facts(true, 900, false, false, false), 0, None)]
    #[case::zero_days_still_honours_delete_on_close(facts(true, 0, false, true, false), 0, Some(Why::DeleteOnClose))]
    #[case::symlinked_dir_is_never_touched(facts(true, 90, false, true, true), 3, None)]
    fn planner_rules(#[case] f: Facts, #[case] days: u64, #[case] want: Option<Why>) {
        let got = plan(NOW, Policy { keep_closed_days: days }, &[f]);
        assert_eq!(got.first().map(|d| d.why), want, "{got:?}");
    }

    #[test]
    fn archived_generations_follow_the_same_rule() {
        let mut old = facts(true, 5, false, false, false);
        old.name = "t1.2".into();
        let fresh = Facts { name: "t1.3".into(), ..facts(true, 1, false, false, false) };
        let got = plan(NOW, Policy::default(), &[old, fresh]);
        assert_eq!(got.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["t1.2"]);
    }

    #[test]
    fn expiry_is_last_use_plus_the_limit() {
        let f = facts(true, 1, false, false, false);
        assert_eq!(expires_ms(Policy::default(), &f), Some(NOW + 2 * DAY_MS));
        assert_eq!(expires_ms(Policy { keep_closed_days: 0 }, &f), None);
    }

    #[rstest]
    #[case("keep", Some(Action::Keep))]
    #[case("delete-on-close", Some(Action::DeleteOnClose))]
    #[case("delete_on_close", Some(Action::DeleteOnClose))]
    #[case("bogus", None)]
    fn actions_parse(#[case] s: &str, #[case] want: Option<Action>) {
        assert_eq!(Action::parse(s), want);
    }
}

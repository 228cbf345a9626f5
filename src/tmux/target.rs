//! Exact tmux targets: a session by its whole name, a pane by its id.
//!
//! tmux resolves a bare `-t name` loosely: a prefix of a session name, an
//! `fnmatch` pattern, or a window name all match. A router that must never
//! type into the wrong terminal uses only the exact forms built here:
//!
//! - `=NAME` ([`session_target`]) for commands whose target is a session
//!   (`has-session`, `kill-session`, `attach`, `list-windows`);
//! - `=NAME:` ([`window_target`]) for commands whose target is a window or a
//!   pane (`display`, `send-keys`, `new-window`, `split-window`): there a bare
//!   `=NAME` means a *window* named NAME (tested on 3.3a);
//! - `%N` ([`PaneId`]) for one pane.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The hidden session our control client attaches to.
///
/// It runs one `sleep` pane and exists only so that the control client has a
/// session of its own; it is not a terminal anyone works in. Callers that
/// list sessions or clients leave it out with [`is_control_session`] (by
/// `#{session_name}`) and leave out the control client itself by
/// `#{client_control_mode}` = `1`. [`Tmux::list_panes`](super::Tmux::list_panes)
/// already leaves it out.
pub const CONTROL_SESSION: &str = "__dtmcp_ctl";

/// Whether a session name (as tmux reports it in `#{session_name}`) is the
/// hidden session of a control client rather than a terminal session.
pub fn is_control_session(name: &str) -> bool {
    name == CONTROL_SESSION
}

/// The exact target of the session named `name`, `=name`, for commands that
/// take a session (for a window or pane target use [`window_target`]).
///
/// Session names never hold `:` or `.` (tmux turns both into `_`), so the
/// name needs no further escaping inside a target.
pub fn session_target(name: &str) -> String {
    format!("={name}")
}

/// The exact target of the current window (and its active pane) of the
/// session named `name`, `=name:`, for commands that take a window or a pane
/// (`new-window -t`, `split-window -t`, `display -t`, `send-keys -t`).
pub fn window_target(name: &str) -> String {
    format!("={name}:")
}

/// A string that is not a tmux pane id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a tmux pane id (expected % and digits, like %12): {0:?}")]
pub struct BadPaneId(pub String);

/// A tmux pane id such as `%12`: unique for the life of the server, never
/// reused, and itself an exact target.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PaneId(String);

impl PaneId {
    /// Checks that `s` is `%` followed by one or more ASCII digits.
    pub fn parse(s: &str) -> Result<PaneId, BadPaneId> {
        match s.strip_prefix('%') {
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(PaneId(s.to_string()))
            }
            _ => Err(BadPaneId(s.to_string())),
        }
    }

    /// The id as tmux writes it, `%N`; usable directly as `-t` target.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for PaneId {
    type Err = BadPaneId;

    fn from_str(s: &str) -> Result<PaneId, BadPaneId> {
        PaneId::parse(s)
    }
}

impl TryFrom<String> for PaneId {
    type Error = BadPaneId;

    fn try_from(s: String) -> Result<PaneId, BadPaneId> {
        PaneId::parse(&s)
    }
}

impl From<PaneId> for String {
    fn from(id: PaneId) -> String {
        id.0
    }
}

impl PartialEq<str> for PaneId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for PaneId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl AsRef<str> for PaneId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PaneId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::small("%0")]
    #[case::large("%123456")]
    fn pane_ids_accepted(#[case] s: &str) {
        assert_eq!(PaneId::parse(s).map(|p| p.to_string()), Ok(s.to_string()));
    }

    #[rstest]
    #[case::empty("")]
    #[case::bare_percent("%")]
    #[case::no_percent("12")]
    #[case::window_id("@3")]
    #[case::session_id("$1")]
    #[case::trailing_text("%1 ")]
    #[case::sign("%+1")]
    #[case::target_path("=s:%1")]
    #[case::unicode_digit("%\u{0661}")]
    fn pane_ids_rejected(#[case] s: &str) {
        assert_eq!(PaneId::parse(s), Err(BadPaneId(s.to_string())));
    }

    #[test]
    fn pane_ids_compare_with_strings() {
        let id = PaneId::parse("%7").expect("valid");
        assert!(id == "%7" && id == *"%7" && id != "%70");
    }

    #[test]
    fn session_targets_are_exact() {
        assert_eq!(session_target("t1"), "=t1");
        assert_eq!(window_target("t1"), "=t1:");
    }

    #[test]
    fn only_the_hidden_session_is_a_control_session() {
        assert!(is_control_session(CONTROL_SESSION));
        assert!(!is_control_session("__dtmcp_ctl2"));
        assert!(!is_control_session("t1"));
    }
}

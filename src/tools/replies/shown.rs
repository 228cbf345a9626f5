//! What each agent has been shown of a command that still runs, so that
//! the next `wait` for it goes on from there instead of showing the same
//! lines again: a long build waited on ten times costs ten tails, not ten
//! copies of its head. Kept in memory for at most
//! [`super::ports::REMEMBERED`] agent-session pairs; a restart forgets it,
//! and the next reply then shows the whole output once more.

use crate::lru::Lru;
use crate::tools::replies::reply::{Facts, Outcome};
use dtmcp_core::types::{LineNo, RegionId};

/// Each agent's [`Seen`] in each session, by (actor, session).
pub struct Shown(Lru<(String, String), Option<Seen>>);

impl Default for Shown {
    fn default() -> Shown {
        Shown(Lru::new(super::ports::REMEMBERED))
    }
}

/// How far an agent was shown a running command's output, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    region: RegionId,
    through: LineNo,
}

impl Shown {
    /// The last line of region `region`'s output that `actor` was shown in
    /// session `session`, when a reply showed it while the command ran.
    pub fn through(&self, actor: &str, session: &str, region: RegionId) -> Option<LineNo> {
        let seen = self.0.existing(&(actor.to_string(), session.to_string()))?;
        let seen = *seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.filter(|s| s.region == region).map(|s| s.through)
    }

    /// Records what a reply to `actor` about a command in `session` showed:
    /// how far it went while the command runs on, nothing once it ended.
    pub fn note(&self, actor: &str, session: &str, facts: &Facts) {
        let Some(region) = facts.region else { return };
        let runs_on = matches!(facts.outcome, Outcome::Running | Outcome::Matched | Outcome::Waiting);
        let seen = facts.shown_through.filter(|_| runs_on).map(|through| Seen { region, through });
        let key = (actor.to_string(), session.to_string());
        // A finished command (most replies) makes no entry where none is.
        let kept = match seen {
            Some(_) => Some(self.0.get(&key, || None)),
            None => self.0.existing(&key),
        };
        if let Some(kept) = kept {
            *kept.lock().unwrap_or_else(|e| e.into_inner()) = seen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(region: u64, outcome: Outcome, through: Option<u64>) -> Facts {
        Facts { region: Some(RegionId(region)), outcome, shown_through: through.map(LineNo), ..Facts::default() }
    }

    #[test]
    fn a_running_command_is_followed_until_it_ends() {
        let shown = Shown::default();
        shown.note("a", "s", &facts(3, Outcome::Running, Some(40)));
        assert_eq!(shown.through("a", "s", RegionId(3)), Some(LineNo(40)));
        assert_eq!(shown.through("a", "s", RegionId(4)), None, "another region");
        assert_eq!(shown.through("b", "s", RegionId(3)), None, "another agent");
        assert_eq!(shown.through("a", "t", RegionId(3)), None, "another session");
        shown.note("a", "s", &facts(3, Outcome::Matched, Some(55)));
        assert_eq!(shown.through("a", "s", RegionId(3)), Some(LineNo(55)));
        shown.note("a", "s", &facts(3, Outcome::Ended { exit: Some(0) }, Some(60)));
        assert_eq!(shown.through("a", "s", RegionId(3)), None, "ended: the next command starts afresh");
    }

    #[test]
    fn a_reply_shaped_otherwise_forgets_what_was_shown() {
        let shown = Shown::default();
        shown.note("a", "s", &facts(3, Outcome::Running, Some(40)));
        shown.note("a", "s", &facts(3, Outcome::Running, None));
        assert_eq!(shown.through("a", "s", RegionId(3)), None);
        // A reply about no region changes nothing.
        shown.note("a", "s", &facts(3, Outcome::Running, Some(40)));
        shown.note("a", "s", &Facts::default());
        assert_eq!(shown.through("a", "s", RegionId(3)), Some(LineNo(40)));
    }
}

//! The idempotency keys of calls that typed into this session, each with
//! the mark it typed at (see `dtmcp_core::protocol`, "Idempotency keys").
//! Memory only: the logger outlives the router whose crash they are for.

use std::collections::VecDeque;
use std::sync::Mutex;

use dtmcp_core::protocol::{MAX_KEY, MAX_KEYS, Mark};

/// The last [`MAX_KEYS`] keys noted, oldest first.
#[derive(Debug, Default)]
pub struct Keys {
    noted: Mutex<VecDeque<(String, Mark)>>,
}

impl Keys {
    /// Notes that the call with `key` typed at `mark` (a key noted again
    /// takes its new mark). A key longer than [`MAX_KEY`] is refused.
    pub fn note(&self, key: String, mark: Mark) -> Result<(), String> {
        if key.len() > MAX_KEY {
            return Err(format!("an idempotency key is at most {MAX_KEY} bytes"));
        }
        let mut noted = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        noted.retain(|(k, _)| *k != key);
        if noted.len() >= MAX_KEYS {
            noted.pop_front();
        }
        noted.push_back((key, mark));
        Ok(())
    }

    /// The mark `key` typed at, if it is remembered.
    pub fn typed(&self, key: &str) -> Option<Mark> {
        let noted = self.noted.lock().unwrap_or_else(|e| e.into_inner());
        noted.iter().rev().find(|(k, _)| k == key).map(|(_, m)| *m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_kept_bounded_and_renoted() {
        let keys = Keys::default();
        let at = |regions| Mark { regions, ..Mark::default() };
        for i in 0..MAX_KEYS as u64 + 5 {
            keys.note(format!("k{i}"), at(i)).expect("note");
        }
        assert_eq!(keys.typed("k0"), None, "the oldest went");
        assert_eq!(keys.typed("k5"), Some(at(5)));
        keys.note("k5".into(), at(900)).expect("note");
        assert_eq!(keys.typed("k5"), Some(at(900)));
        assert!(keys.note("x".repeat(MAX_KEY + 1), at(1)).is_err());
        assert_eq!(keys.noted.lock().expect("lock").len(), MAX_KEYS);
    }
}

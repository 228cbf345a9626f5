//! A map that keeps at most a given number of values, dropping the one used
//! longest ago when another comes: open files, parsed indexes and search
//! results kept between calls without growing with the number of sessions
//! a server has seen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Values by key, at most `cap` of them; each is shared (`Arc<Mutex<T>>`)
/// so a caller can work on one without holding the map.
pub struct Lru<K, T> {
    cap: usize,
    map: Mutex<Uses<K, T>>,
}

/// The values kept, each with the tick it was last used at, and the tick.
struct Uses<K, T> {
    tick: u64,
    values: HashMap<K, (u64, Arc<Mutex<T>>)>,
}

impl<K: std::hash::Hash + Eq + Clone, T> Lru<K, T> {
    /// Keeps at most `cap` values.
    pub fn new(cap: usize) -> Lru<K, T> {
        Lru { cap, map: Mutex::new(Uses { tick: 0, values: HashMap::new() }) }
    }

    /// The value of `key` if one is kept, without making one.
    pub fn existing(&self, key: &K) -> Option<Arc<Mutex<T>>> {
        let mut uses = self.map.lock().unwrap_or_else(|e| e.into_inner());
        uses.tick += 1;
        let tick = uses.tick;
        uses.values.get_mut(key).map(|(used, value)| {
            *used = tick;
            Arc::clone(value)
        })
    }

    /// The value of `key`, made by `make` when there is none.
    pub fn get(&self, key: &K, make: impl FnOnce() -> T) -> Arc<Mutex<T>> {
        let mut uses = self.map.lock().unwrap_or_else(|e| e.into_inner());
        uses.tick += 1;
        let tick = uses.tick;
        if let Some((used, value)) = uses.values.get_mut(key) {
            *used = tick;
            return Arc::clone(value);
        }
        if uses.values.len() >= self.cap
            && let Some(oldest) = uses.values.iter().min_by_key(|(_, (used, _))| *used).map(|(k, _)| k.clone())
        {
            uses.values.remove(&oldest);
        }
        let value = Arc::new(Mutex::new(make()));
        uses.values.insert(key.clone(), (tick, Arc::clone(&value)));
        value
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn the_value_used_longest_ago_goes_first() {
        let kept = Lru::new(2);
        kept.get(&"a", || 1);
        kept.get(&"b", || 2);
        kept.get(&"a", || 0); // a is used again: b is now the oldest
        kept.get(&"c", || 3);
        assert_eq!(*kept.get(&"a", || 9).lock().unwrap(), 1, "a was kept");
        assert_eq!(*kept.get(&"b", || 9).lock().unwrap(), 9, "b went and is made again");
    }
}

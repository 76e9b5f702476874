//! [`ConstraintCache`]: compiled constraints kept for reuse by the callers that see the same
//! schema again (a server, the Python package), bounded in count and in bytes.

use std::sync::{Mutex, MutexGuard};

/// Compiled constraints (or values holding one) by key, the least recently used dropped
/// first once either bound is passed: at most `max_entries` values and about `max_bytes`
/// accounted bytes ([`crate::Constraint::memory_usage`], typically). A value larger than the
/// byte bound alone is not kept. One lock, taken for a scan of the few values: a look-up
/// costs far less than the compile it saves.
///
/// The byte bound is part of the engine's memory budget ([`crate::mask::IndexConfig`]'s
/// `constraint_cache_bytes`): a server that keeps 64 schemas of 30 MB each would otherwise
/// hold 2 GB.
pub struct ConstraintCache<K, V> {
    inner: Mutex<Lru<K, V>>,
    max_entries: usize,
    max_bytes: usize,
}

/// The values of a [`ConstraintCache`], most recently used first, with their bytes.
struct Lru<K, V> {
    values: Vec<(K, V, usize)>,
    bytes: usize,
}

impl<K: PartialEq, V: Clone> ConstraintCache<K, V> {
    /// An empty cache of at most `max_entries` values and about `max_bytes`.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        ConstraintCache { inner: Mutex::new(Lru { values: Vec::new(), bytes: 0 }), max_entries, max_bytes }
    }

    /// The value of `key`, now the most recently used.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut lru = self.lock();
        let i = lru.values.iter().position(|(k, _, _)| k == key)?;
        let found = lru.values.remove(i);
        let value = found.1.clone();
        lru.values.insert(0, found);
        Some(value)
    }

    /// Keeps `value` under `key`, accounted as `bytes`, dropping the least recently used
    /// values until both bounds hold. Returns whether it was kept.
    pub fn insert(&self, key: K, value: V, bytes: usize) -> bool {
        if bytes > self.max_bytes || self.max_entries == 0 {
            return false;
        }
        let mut lru = self.lock();
        if let Some(i) = lru.values.iter().position(|(k, _, _)| *k == key) {
            let (_, _, old) = lru.values.remove(i);
            lru.bytes -= old;
        }
        lru.values.insert(0, (key, value, bytes));
        lru.bytes += bytes;
        while lru.values.len() > self.max_entries || lru.bytes > self.max_bytes {
            match lru.values.pop() {
                Some((_, _, b)) => lru.bytes -= b,
                None => break,
            }
        }
        true
    }

    /// The number of values kept and their accounted bytes.
    pub fn stats(&self) -> (usize, usize) {
        let lru = self.lock();
        (lru.values.len(), lru.bytes)
    }

    /// The values, locked (recovered if a panic poisoned the lock: they stay consistent
    /// between calls).
    fn lock(&self) -> MutexGuard<'_, Lru<K, V>> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_the_least_recently_used_past_either_bound() {
        let cache = ConstraintCache::new(3, 100);
        assert!(cache.insert(1, "a", 40));
        assert!(cache.insert(2, "b", 40));
        assert_eq!(cache.get(&1), Some("a")); // 1 is now the most recent
        assert!(cache.insert(3, "c", 40)); // 120 bytes: 2 goes
        assert_eq!(cache.get(&2), None);
        assert_eq!(cache.stats(), (2, 80));
        assert!(cache.insert(4, "d", 10));
        assert!(cache.insert(5, "e", 10)); // four values: 1, the least recent, goes
        assert_eq!(cache.get(&1), None);
        assert_eq!(cache.stats(), (3, 60));
        assert!(!cache.insert(6, "f", 101), "larger than the whole bound");
        assert!(cache.insert(3, "c2", 5), "a key kept again replaces its value");
        assert_eq!(cache.get(&3), Some("c2"));
        assert_eq!(cache.stats(), (3, 25));
    }
}

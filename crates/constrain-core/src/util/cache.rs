//! The two cache types of the crate: [`GenCache`], the byte-bounded generational cache
//! shared by every constraint of a tokenizer (mask entries and their parts, determinised
//! rules), and [`Memo`], a small count-bounded memo for tables that stay small.
//!
//! Keys of the mask caches are 128-bit structural hashes ([`super::hash128`] of node keys,
//! rule fingerprints, counts and named salts). Two equal 128-bit keys are treated as the
//! same entry: a collision is assumed not to happen (about 2^-64 for a pair of keys even
//! with a birthday bound over 2^32 entries, far below any hardware fault rate), so a key
//! is never checked against what it was made from.

use rustc_hash::{FxHashMap, FxHasher};
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

/// A generation at least this large is dropped on a background thread: freeing many
/// entries takes far longer than a mask.
const DROP_OFF_THREAD_BYTES: usize = 1 << 20;

/// A cache bounded in (approximate) bytes, in two generations per shard, like
/// `regex-automata`'s lazy DFA cache but shared: new values go to the shard's young
/// generation; when it would pass its share of half the budget it becomes the old one and
/// the previous old one is dropped. A hit in the old generation moves back into the young
/// one, so what is still in use survives a rotation, and no single call ever pays for
/// clearing the whole cache. Values are cheap to clone (an `Arc`, typically).
///
/// Shards: each has its own lock and its own two generations, so that concurrent
/// sequences rarely contend, and a growing map rehashes one small shard at a time (a
/// single map of 300k entries doubling took one mask call 20–50 ms). A shard rotates on
/// its own share of the budget, so values much larger than that share call for fewer
/// shards.
///
/// The cache is only a cache: a poisoned shard lock is recovered (the maps are consistent
/// between calls), and whatever is evicted is recomputed by the caller.
pub(crate) struct GenCache<K, V> {
    shards: Box<[Mutex<Shard<K, V>>]>,
    /// Bytes a shard's young generation may hold before it rotates.
    young_limit: usize,
}

/// One shard of a [`GenCache`].
struct Shard<K, V> {
    young: Generation<K, V>,
    old: Generation<K, V>,
}

/// The values of one generation with their accounted bytes, and the sum of those.
struct Generation<K, V> {
    map: FxHashMap<K, (V, usize)>,
    bytes: usize,
}

impl<K, V> Default for Generation<K, V> {
    fn default() -> Self {
        Generation { map: FxHashMap::default(), bytes: 0 }
    }
}

impl<K: Hash + Eq + Clone + Send + 'static, V: Clone + Send + 'static> GenCache<K, V> {
    /// An empty cache holding about `max_bytes` (both generations together) in `shards`
    /// shards (at least one).
    pub fn new(max_bytes: usize, shards: usize) -> Self {
        let shards = shards.max(1);
        let young_limit = max_bytes / 2 / shards;
        let shards =
            (0..shards).map(|_| Mutex::new(Shard { young: Generation::default(), old: Generation::default() }));
        GenCache { shards: shards.collect(), young_limit }
    }

    /// The shard of `key`, locked (recovered if a panic poisoned it).
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> MutexGuard<'_, Shard<K, V>> {
        let mut h = FxHasher::default();
        key.hash(&mut h);
        // The high bits of the multiplicative hash are the well-mixed ones.
        let i = (h.finish() >> 32) as usize % self.shards.len();
        match self.shards.get(i) {
            Some(shard) => shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner()),
            // `new` makes at least one shard, and `i` is below their number.
            None => unreachable!("shard index out of range"),
        }
    }

    /// The value of `key`, moving an old-generation hit into the young generation.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut s = self.shard(key);
        if let Some((v, _)) = s.young.map.get(key) {
            return Some(v.clone());
        }
        let (k, (v, bytes)) = s.old.map.remove_entry(key)?;
        s.old.bytes = s.old.bytes.saturating_sub(bytes);
        s.young.bytes += bytes;
        s.young.map.insert(k, (v.clone(), bytes));
        Some(v)
    }

    /// Whether `key` is in the cache (either generation), without promoting it.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let s = self.shard(key);
        s.young.map.contains_key(key) || s.old.map.contains_key(key)
    }

    /// What one value costs in the maps beyond the `bytes` its caller accounts: its slot
    /// (key, value, accounted size) and control byte, twice over. A map is at most 7/8
    /// full and half that after it grows, and neither generation's map shrinks when its
    /// values move (an old-generation hit moves into the young map, leaving its slot
    /// empty), so a value holds about two slots.
    pub const SLOT_BYTES: usize = 2 * (std::mem::size_of::<(K, (V, usize))>() + 1);

    /// Keeps `value` under `key`, accounted as `bytes` plus its slot ([`Self::SLOT_BYTES`]),
    /// rotating the shard's generations first when its young one would pass its share of
    /// the budget.
    pub fn insert(&self, key: K, value: V, bytes: usize) {
        let bytes = bytes.saturating_add(Self::SLOT_BYTES);
        let mut s = self.shard(&key);
        if s.young.bytes + bytes > self.young_limit {
            let young = std::mem::take(&mut s.young);
            let dropped = std::mem::replace(&mut s.old, young);
            drop(s);
            if dropped.bytes >= DROP_OFF_THREAD_BYTES {
                // If no thread can be started, the closure (and the generation) is dropped
                // right here: slower, never wrong.
                let _ = std::thread::Builder::new().name("constrain-cache-drop".into()).spawn(move || drop(dropped));
            } else {
                drop(dropped);
            }
            s = self.shard(&key);
        }
        s.young.bytes += bytes;
        if let Some((_, old)) = s.young.map.insert(key, (value, bytes)) {
            s.young.bytes = s.young.bytes.saturating_sub(old);
        }
    }

    /// The accounted bytes of both generations, summed shard by shard: cheap enough for a
    /// metrics scrape (one lock per shard, no scan).
    pub fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let s = shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                s.young.bytes + s.old.bytes
            })
            .sum()
    }

    /// Calls `f` with every value (both generations) and its accounted bytes, one shard
    /// locked at a time. Scans the whole cache: for reports.
    pub fn visit(&self, mut f: impl FnMut(&V, usize)) {
        for shard in self.shards.iter() {
            let s = shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            for g in [&s.young, &s.old] {
                g.map.values().for_each(|(v, bytes)| f(v, *bytes));
            }
        }
    }
}

/// A small memo bounded by its number of values: when `max` are kept, all are forgotten at
/// once. For per-tokenizer tables that stay small or are cheap to recompute; one lock.
pub(crate) struct Memo<K, V> {
    map: Mutex<FxHashMap<K, V>>,
    max: usize,
}

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    /// An empty memo keeping at most `max` values.
    pub fn new(max: usize) -> Self {
        Memo { map: Mutex::new(FxHashMap::default()), max }
    }

    /// The value for `key`, computed (without holding the lock) and kept on a miss.
    pub fn get_or_compute(&self, key: K, compute: impl FnOnce() -> V) -> V {
        if let Some(known) = self.lock().get(&key).cloned() {
            return known;
        }
        let value = compute();
        let mut m = self.lock();
        if m.len() >= self.max {
            m.clear();
        }
        m.insert(key, value.clone());
        value
    }

    /// Sums `f` over the kept values.
    pub fn sum(&self, f: impl Fn(&V) -> usize) -> usize {
        self.lock().values().map(f).sum()
    }

    /// The map, locked (recovered if a panic poisoned it: it is consistent between calls).
    fn lock(&self) -> MutexGuard<'_, FxHashMap<K, V>> {
        self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_accounts_its_slot() {
        type C = GenCache<u64, u64>;
        // A budget of 64 slots in one shard: the young generation rotates at 32.
        let cache = C::new(64 * C::SLOT_BYTES, 1);
        for k in 0..1000u64 {
            // Accounted as nothing by the caller: the slot alone must bound the cache.
            cache.insert(k, k, 0);
            assert!(cache.bytes() <= 64 * C::SLOT_BYTES, "at key {k}: {} bytes", cache.bytes());
        }
        let mut kept = 0;
        cache.visit(|_, bytes| {
            assert_eq!(bytes, C::SLOT_BYTES);
            kept += 1;
        });
        assert!((32..=64).contains(&kept), "{kept} values kept");
        // The newest are kept, the oldest went with a rotation.
        assert_eq!(cache.get(&999), Some(999));
        assert_eq!(cache.get(&0), None);
    }
}

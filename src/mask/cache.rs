use super::*;

/// The shared mask cache, in two generations: new results go to `young`; when `young` holds
/// half the byte budget it becomes `old` and the previous `old` is dropped. A hit in `old`
/// is copied back into `young`, so what is still in use survives a rotation, and no single
/// mask call ever pays for clearing the whole cache (the dropped generation is freed on a
/// background thread: freeing a gigabyte of entries takes far longer than a mask).
#[derive(Default)]
pub(super) struct Cache {
    pub(super) young: Generation,
    pub(super) old: Generation,
}

#[derive(Default)]
pub(super) struct Generation {
    pub(super) entries: Sharded<Arc<Entry>>,
    pub(super) classified: Sharded<Arc<Classified>>,
    /// First-byte subtrees of the trie walked from equivalent states (see [`SubtreeMemo`]).
    pub(super) subtrees: Sharded<Arc<SubtreeMemo>>,
    /// Suffix tries of entries by their list of stack-dependent tokens (see
    /// [`TokenIndex::suffix_trie`]).
    pub(super) suffixes: Sharded<Arc<ByteTrie>>,
    pub(super) bytes: usize,
}

/// A map from 128-bit keys split in [`SHARDS`] maps by the key's low bits, so that growing
/// it rehashes one small shard at a time: a single map of 300k entries doubling took one
/// mask call 20–50 ms.
pub(super) struct Sharded<V> {
    pub(super) shards: Box<[HashMap<u128, V>]>,
}

/// Shards of a [`Sharded`] map.
pub(super) const SHARDS: usize = 64;

impl<V> Default for Sharded<V> {
    fn default() -> Self {
        Sharded { shards: (0..SHARDS).map(|_| HashMap::default()).collect() }
    }
}

impl<V> Sharded<V> {
    /// The shard holding `key`.
    #[inline]
    pub(super) fn shard_of(key: &u128) -> usize {
        *key as usize % SHARDS
    }

    pub(super) fn get(&self, key: &u128) -> Option<&V> {
        self.shards[Self::shard_of(key)].get(key)
    }

    pub(super) fn contains_key(&self, key: &u128) -> bool {
        self.shards[Self::shard_of(key)].contains_key(key)
    }

    pub(super) fn insert(&mut self, key: u128, value: V) {
        self.shards[Self::shard_of(&key)].insert(key, value);
    }

    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.is_empty())
    }
}

/// Generic lookup in both generations, promoting an `old` hit into `young`.
macro_rules! cache_get {
    ($cache:expr, $map:ident, $key:expr, $size:expr) => {{
        let cache: &mut Cache = $cache;
        match cache.young.$map.get($key) {
            Some(v) => Some(v.clone()),
            None => match cache.old.$map.get($key).cloned() {
                Some(v) => {
                    cache.young.bytes += $size(&*v);
                    cache.young.$map.insert(*$key, v.clone());
                    Some(v)
                }
                None => None,
            },
        }
    }};
}

impl Cache {
    /// Accounts `size` more bytes in `young`, rotating generations first when `young` would
    /// pass half of `limit`.
    pub(super) fn make_room(&mut self, size: usize, limit: usize) {
        if self.young.bytes + size > limit / 2 {
            let dropped = std::mem::replace(&mut self.old, std::mem::take(&mut self.young));
            if !dropped.entries.is_empty() || !dropped.subtrees.is_empty() {
                // If no thread can be started, the closure (and the generation) is dropped
                // right here: slower, never wrong.
                let _ = std::thread::Builder::new().name("constrain-cache-drop".into()).spawn(move || drop(dropped));
            }
        }
        self.young.bytes += size;
    }

    pub(super) fn entries_len(&self) -> usize {
        self.young.entries.len() + self.old.entries.len()
    }

    pub(super) fn bytes(&self) -> usize {
        self.young.bytes + self.old.bytes
    }
}

/// What the cache accounts for a second key of an entry it already holds (the map slot and
/// the `Arc`).
pub(super) const ALIAS_BYTES: usize = 64;

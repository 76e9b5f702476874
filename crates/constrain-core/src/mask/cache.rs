use super::classify::Classified;
use super::entry::Entry;
use super::memo::SubtreeMemo;
use super::trie::ByteTrie;
use crate::util::cache::GenCache;
use std::sync::Arc;

/// What a key of the shared mask [`Cache`] names: the same 128-bit key may name values of
/// different kinds (an entry and the classification it derives from share a key when no
/// loop is relaxed), so the kind is part of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Entry,
    Classified,
    Subtree,
    Suffixes,
}

/// A value of the shared mask [`Cache`].
#[derive(Clone)]
pub(super) enum Cached {
    Entry(Arc<Entry>),
    Classified(Arc<Classified>),
    /// First-byte subtrees of the trie walked from equivalent states (see [`SubtreeMemo`]).
    Subtree(Arc<SubtreeMemo>),
    /// Suffix tries of entries by their list of stack-dependent tokens (see
    /// [`TokenIndex::suffix_trie`]).
    Suffixes(Arc<ByteTrie>),
}

/// The shared mask cache of a [`TokenIndex`]: entries, the classifications they derive
/// from, subtree memos and suffix tries, in one [`GenCache`] bounded by
/// [`IndexConfig::cache_bytes`] (a hit in the old generation is copied back into the
/// young one, the dropped generation is freed on a background thread). Keys are the
/// structural 128-bit hashes of [`Context`] and of the walk's states; see
/// [`crate::util::cache`] for why equal keys are taken for equal values.
pub(super) struct Cache(GenCache<(Kind, u128), Cached>);

impl Cache {
    /// An empty cache of about `max_bytes`.
    pub(super) fn new(max_bytes: usize) -> Cache {
        Cache(GenCache::new(max_bytes, SHARDS))
    }

    /// The entry of context key `key`.
    pub(super) fn entry(&self, key: u128) -> Option<Arc<Entry>> {
        match self.0.get(&(Kind::Entry, key))? {
            Cached::Entry(e) => Some(e),
            _ => None,
        }
    }

    /// The classification under `key`.
    pub(super) fn classified(&self, key: u128) -> Option<Arc<Classified>> {
        match self.0.get(&(Kind::Classified, key))? {
            Cached::Classified(c) => Some(c),
            _ => None,
        }
    }

    /// Whether a classification is kept under `key`.
    pub(super) fn has_classified(&self, key: u128) -> bool {
        self.0.contains(&(Kind::Classified, key))
    }

    /// The subtree memo of walk state `key`.
    pub(super) fn subtree(&self, key: u128) -> Option<Arc<SubtreeMemo>> {
        match self.0.get(&(Kind::Subtree, key))? {
            Cached::Subtree(m) => Some(m),
            _ => None,
        }
    }

    /// The suffix trie of pending list `key`.
    pub(super) fn suffixes(&self, key: u128) -> Option<Arc<ByteTrie>> {
        match self.0.get(&(Kind::Suffixes, key))? {
            Cached::Suffixes(t) => Some(t),
            _ => None,
        }
    }

    /// Keeps `value` under `key` (its kind is the value's), accounted as `bytes`.
    pub(super) fn insert(&self, key: u128, value: Cached, bytes: usize) {
        let kind = match value {
            Cached::Entry(_) => Kind::Entry,
            Cached::Classified(_) => Kind::Classified,
            Cached::Subtree(_) => Kind::Subtree,
            Cached::Suffixes(_) => Kind::Suffixes,
        };
        self.0.insert((kind, key), value, bytes);
    }

    /// Number of cached entries (per generation) and the accounted bytes of everything.
    pub(super) fn stats(&self) -> (usize, usize) {
        self.0.stats(|v| matches!(v, Cached::Entry(_)))
    }
}

/// Shards of the mask cache: masks are filled from every sequence of a server at once, and
/// its values are small next to a shard's share of the budget.
const SHARDS: usize = 64;

/// What the cache accounts for a second key of an entry it already holds (the map slot and
/// the `Arc`).
pub(super) const ALIAS_BYTES: usize = 64;

use super::classify::Classified;
use super::entry::{Entry, TokenSet};
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
    Set,
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
    /// Accepted sets by content, shared by the entries with equal ones (see
    /// [`TokenIndex::shared_set`]).
    Set(Arc<TokenSet>),
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

    /// The accepted set of content key `key`.
    pub(super) fn set(&self, key: u128) -> Option<Arc<TokenSet>> {
        match self.0.get(&(Kind::Set, key))? {
            Cached::Set(s) => Some(s),
            _ => None,
        }
    }

    /// Keeps `value` under `key` (its kind is the value's), accounted as `bytes`: the heap
    /// bytes it brings, 0 for a value that another key or entry accounts (a second key of
    /// an entry, a set or trie whose bytes the entry that made it counts). The map slot is
    /// added by [`GenCache::insert`].
    pub(super) fn insert(&self, key: u128, value: Cached, bytes: usize) {
        let kind = match value {
            Cached::Entry(_) => Kind::Entry,
            Cached::Classified(_) => Kind::Classified,
            Cached::Subtree(_) => Kind::Subtree,
            Cached::Suffixes(_) => Kind::Suffixes,
            Cached::Set(_) => Kind::Set,
        };
        self.0.insert((kind, key), value, bytes);
    }

    /// The accounted bytes of everything, without a scan.
    pub(super) fn bytes(&self) -> usize {
        self.0.bytes()
    }

    /// What the cache holds, by kind (see [`CacheReport`]). Scans the whole cache and
    /// hashes every accepted set: for reports, not for hot paths.
    pub(super) fn report(&self) -> CacheReport {
        let mut r = CacheReport::default();
        let mut seen_sets = rustc_hash::FxHashSet::default();
        let mut seen_contents = rustc_hash::FxHashSet::default();
        self.0.visit(|value, bytes| {
            r.bytes += bytes;
            let kind = match value {
                Cached::Entry(_) => &mut r.entries,
                Cached::Classified(_) => &mut r.classified,
                Cached::Subtree(_) => &mut r.subtrees,
                Cached::Suffixes(_) => &mut r.suffix_tries,
                Cached::Set(_) => &mut r.sets,
            };
            kind.values += 1;
            kind.bytes += bytes;
            let Cached::Entry(entry) = value else { return };
            // Sets are counted once each however many entries (or keys of one entry)
            // share them.
            if !seen_sets.insert(Arc::as_ptr(&entry.accepted)) {
                return;
            }
            let set_bytes = entry.accepted.len_words() * 4;
            let (n, b) = match *entry.accepted {
                TokenSet::List(_) => (&mut r.lists, &mut r.list_bytes),
                TokenSet::Bits(_) => (&mut r.bitsets, &mut r.bitset_bytes),
            };
            *n += 1;
            *b += set_bytes;
            if seen_contents.insert(entry.accepted.content_key()) {
                r.distinct_sets += 1;
                r.distinct_set_bytes += set_bytes;
            }
        });
        r
    }
}

/// What the shared mask cache of a [`super::TokenIndex`] holds: values and accounted bytes
/// by kind, and how the entries' accepted sets are stored. For `eval`'s report and the
/// server's metrics; made by [`super::TokenIndex::cache_report`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheReport {
    /// Accounted bytes of everything (what [`super::IndexConfig::cache_bytes`] bounds).
    pub bytes: usize,
    /// Per-state entries, one per key (a shared entry counts once per key).
    pub entries: KindReport,
    /// Classifications kept for the loop counts derived from them.
    pub classified: KindReport,
    /// Subtree memos of the trie walks.
    pub subtrees: KindReport,
    /// Suffix tries, shared by the entries with the same stack-dependent tokens.
    pub suffix_tries: KindReport,
    /// Accepted sets by content: the map slots of the hash-consed sets (their bytes are
    /// accounted by the entries that made them).
    pub sets: KindReport,
    /// Accepted sets in memory (one per set however many entries share it) that are sorted
    /// id lists.
    pub lists: usize,
    /// Bytes of the id lists in [`CacheReport::lists`].
    pub list_bytes: usize,
    /// Accepted sets in memory that are bitsets over the vocabulary.
    pub bitsets: usize,
    /// Bytes of the bitsets in [`CacheReport::bitsets`].
    pub bitset_bytes: usize,
    /// Accepted sets distinct by content: fewer than those in memory when an equal set was
    /// made again after the first left the cache.
    pub distinct_sets: usize,
    /// Bytes of the sets in [`CacheReport::distinct_sets`].
    pub distinct_set_bytes: usize,
}

/// The values of one kind in a [`CacheReport`] and their accounted bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindReport {
    /// Number of values.
    pub values: usize,
    /// Their accounted bytes.
    pub bytes: usize,
}

/// Shards of the mask cache: masks are filled from every sequence of a server at once, and
/// its values are small next to a shard's share of the budget.
const SHARDS: usize = 64;

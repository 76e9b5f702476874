//! Stage 4: per-state token masks over a vocabulary trie.
//!
//! Input: a [`Vocabulary`] (once per tokenizer) and, per automaton state, a *context*: the
//! stack top plus the few frames below it that decide what the top can do (see
//! [`crate::matcher`] for how the context is chosen). Output: an [`Entry`] per context, cached
//! in the [`TokenIndex`] and shared by every constraint built over that tokenizer.
//!
//! ## How
//!
//! An entry is computed once by walking the vocabulary's byte trie ([`trie::ByteTrie`]) with a
//! [`Recognizer`] started from the context: shared prefixes are fed once, and a byte that
//! kills every stack skips its whole subtree. Each token lands in one of three classes:
//!
//! - **accepted**: the context consumes the whole token;
//! - **rejected**: it dies inside the context and never left it;
//! - **stack-dependent**: the context's bottom rule completed after `j` bytes and the rest of the
//!   token (`token[j..]`) depends on frames below the context. Those suffixes are kept in a small
//!   suffix trie and checked against the real stack at run time ([`Entry::add_to_mask`]).
//!
//! Accepted sets are stored as a sorted id list or a bitset, whichever is smaller.
//! Entries are keyed by structural fingerprints, so the JSON string body of every schema
//! compiled against one tokenizer is classified once.

pub(crate) mod trie;

use crate::automaton::exec::{Frame, Runner, Stacks};
use crate::automaton::{Pda, Recognizer};
use crate::vocab::Vocabulary;
use crate::Limits;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use trie::ByteTrie;

/// Everything that depends only on the tokenizer: the vocabulary, its byte trie, and the cache
/// of per-state masks shared by every constraint compiled against it. Build once per tokenizer
/// (≈ a fraction of a second for 129k tokens) and share the `Arc`.
pub struct TokenIndex {
    vocab: Vocabulary,
    trie: ByteTrie,
    /// Length in bytes of the longest grammar token: counted loops whose remaining bounds
    /// exceed it behave alike for every token, which bounds the number of distinct entries.
    max_token_len: u32,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<u128, Arc<Entry>>,
    bytes: usize,
}

impl TokenIndex {
    /// Builds the trie for `vocab`.
    pub fn new(vocab: Vocabulary) -> Arc<TokenIndex> {
        let trie = ByteTrie::build(vocab.grammar_tokens().map(|(id, b)| (b, id.0)));
        let max_token_len = vocab.grammar_tokens().map(|(_, b)| b.len()).max().unwrap_or(0) as u32;
        Arc::new(TokenIndex { vocab, trie, max_token_len, cache: Mutex::new(Cache::default()) })
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    /// Number of cached per-state entries and their approximate heap bytes.
    pub fn cache_stats(&self) -> (usize, usize) {
        match self.cache.lock() {
            Ok(c) => (c.entries.len(), c.bytes),
            Err(_) => (0, 0),
        }
    }

    /// Heap bytes of the tokenizer-wide tables (trie), without the mask cache.
    pub fn memory_usage(&self) -> usize {
        self.trie.memory_usage()
    }

    pub(crate) fn max_token_len(&self) -> u32 {
        self.max_token_len
    }

    /// The cached entry for `key`, computing it from `context` (frames bottom first) on a miss.
    pub(crate) fn entry(&self, key: u128, pda: &Pda, limits: &Limits, context: &[Frame]) -> Arc<Entry> {
        if let Ok(c) = self.cache.lock() {
            if let Some(e) = c.entries.get(&key) {
                return e.clone();
            }
        }
        let entry = Arc::new(Entry::compute(self, pda, limits, context));
        if let Ok(mut c) = self.cache.lock() {
            let size = entry.memory_usage();
            if c.bytes + size > limits.max_mask_cache_bytes {
                c.entries.clear();
                c.bytes = 0;
            }
            c.bytes += size;
            c.entries.insert(key, entry.clone());
        }
        entry
    }
}

/// A set of token ids in the form that fits: a sorted list when small, a bitset when large.
#[derive(Clone, Debug)]
pub(crate) enum TokenSet {
    List(Box<[u32]>),
    Bits(Box<[u32]>),
}

impl TokenSet {
    fn from_ids(mut ids: Vec<u32>, mask_words: usize) -> TokenSet {
        if ids.len() > mask_words / 2 {
            let mut bits = vec![0u32; mask_words];
            for id in ids {
                set_bit(&mut bits, id);
            }
            TokenSet::Bits(bits.into_boxed_slice())
        } else {
            ids.sort_unstable();
            ids.dedup();
            TokenSet::List(ids.into_boxed_slice())
        }
    }

    #[inline]
    fn add_to(&self, mask: &mut [u32]) {
        match self {
            TokenSet::List(ids) => {
                for &id in ids.iter() {
                    set_bit(mask, id);
                }
            }
            TokenSet::Bits(bits) => {
                for (m, b) in mask.iter_mut().zip(bits.iter()) {
                    *m |= *b;
                }
            }
        }
    }

    fn len_words(&self) -> usize {
        match self {
            TokenSet::List(v) | TokenSet::Bits(v) => v.len(),
        }
    }
}

/// Sets bit `id` of a mask (ignored past its end).
#[inline]
pub(crate) fn set_bit(mask: &mut [u32], id: u32) {
    if let Some(w) = mask.get_mut((id / 32) as usize) {
        *w |= 1 << (id % 32);
    }
}

/// Whether token `id` is allowed in `mask`.
#[inline]
pub fn is_allowed(mask: &[u32], id: crate::TokenId) -> bool {
    mask.get(id.index() / 32).is_some_and(|w| w >> (id.index() % 32) & 1 == 1)
}

/// The precomputed classification of the vocabulary for one context.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Tokens the context consumes whole.
    accepted: TokenSet,
    /// Suffixes (after the context's bottom completed) to check against the real stack.
    suffixes: ByteTrie,
}

impl Entry {
    /// Walks the vocabulary trie from the context (frames bottom first).
    fn compute(index: &TokenIndex, pda: &Pda, limits: &Limits, context: &[Frame]) -> Entry {
        let trie = &index.trie;
        let mut runner = Runner::with_context(pda, limits, context);
        let mut accepted: Vec<u32> = Vec::new();
        // (token id, offset where the suffix starts)
        let mut pending: Vec<(u32, u32)> = Vec::new();
        // Byte counts after which the context's bottom completed, along the current path.
        let mut crossings: Vec<u32> = Vec::new();
        let mut depth: u32 = 0;
        let mut i = 0usize;
        while let Some(node) = trie.nodes.get(i) {
            let parent_depth = node.depth - 1;
            if depth > parent_depth {
                runner.pop_bytes((depth - parent_depth) as usize);
                depth = parent_depth;
                while crossings.last().is_some_and(|&j| j > depth) {
                    crossings.pop();
                }
            }
            let step = runner.push_byte(node.byte);
            depth += 1;
            if step.reached_end {
                crossings.push(depth);
            }
            if step.alive {
                accepted.extend_from_slice(trie.ids_at(node));
                i += 1;
                continue;
            }
            // Dead inside the context: only tokens that left it earlier can still be allowed.
            let end = node.end as usize;
            if !crossings.is_empty() {
                for sub in &trie.nodes[i..end] {
                    for &id in trie.ids_at(sub) {
                        if crossings.last() == Some(&sub.depth) {
                            // Crossed exactly at its last byte: nothing left to check.
                            accepted.push(id);
                        } else {
                            pending.extend(crossings.iter().map(|&j| (id, j)));
                        }
                    }
                }
            }
            i = end;
        }
        let vocab = &index.vocab;
        let suffixes =
            ByteTrie::build(pending.iter().map(|&(id, j)| (&vocab.token_bytes(crate::TokenId(id))[j as usize..], id)));
        Entry { accepted: TokenSet::from_ids(accepted, vocab.mask_words()), suffixes }
    }

    /// Whether some tokens depend on the stack below the context.
    pub fn has_suffixes(&self) -> bool {
        !self.suffixes.is_empty()
    }

    /// Adds the accepted tokens to `mask`.
    #[inline]
    pub fn add_accepted(&self, mask: &mut [u32]) {
        self.accepted.add_to(mask);
    }

    /// Adds the stack-dependent tokens whose suffix the real stack accepts: completes the
    /// context's bottom frame `bottom` in the real `stacks` and walks the suffix trie from
    /// there. The arena is restored afterwards.
    pub fn add_suffixes(
        &self,
        pda: &Pda,
        stacks: &mut Stacks,
        bottom: u32,
        scratch: &mut SuffixScratch,
        mask: &mut [u32],
    ) {
        let base_arena = stacks.arena.len();
        let SuffixScratch { tops, levels, cur } = scratch;
        tops.clear();
        levels.clear();
        // If this completes the whole output, no tops remain and every suffix dies.
        stacks.pop_into(pda, bottom, tops);
        levels.push((0, stacks.arena.len()));
        let trie = &self.suffixes;
        let mut i = 0usize;
        while let Some(node) = trie.nodes.get(i) {
            while levels.len() > node.depth as usize {
                if let Some((start, arena_len)) = levels.pop() {
                    tops.truncate(start);
                    stacks.arena.truncate(arena_len);
                }
            }
            let cur_start = levels.last().map_or(0, |l| l.0);
            let cur_end = tops.len();
            cur.clear();
            cur.extend_from_slice(&tops[cur_start..cur_end]);
            let arena_len = stacks.arena.len();
            let reached = stacks.step(pda, cur, node.byte, tops);
            levels.push((cur_end, arena_len));
            let alive = tops.len() > cur_end;
            if alive || reached {
                for &id in trie.ids_at(node) {
                    set_bit(mask, id);
                }
            }
            i = if alive { i + 1 } else { node.end as usize };
        }
        stacks.arena.truncate(base_arena);
        tops.clear();
        levels.clear();
    }

    /// Approximate heap bytes.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Entry>() + self.accepted.len_words() * 4 + self.suffixes.memory_usage()
    }
}

/// Reusable buffers for [`Entry::add_suffixes`], so the per-token path does not allocate.
#[derive(Clone, Debug, Default)]
pub(crate) struct SuffixScratch {
    tops: Vec<u32>,
    levels: Vec<(usize, usize)>,
    cur: Vec<u32>,
}

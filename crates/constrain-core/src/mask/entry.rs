use super::cache::Cached;
use super::classify::WalkScratch;
use super::context::Context;
use super::index::TokenIndex;
use super::trie::ByteTrie;
use crate::automaton::exec::{Mark, Stacks, BOTTOM};
use crate::automaton::{Cut, FrameId, Pda};
use crate::util::{hash128, or_into, set_bit, Levels};
use std::sync::Arc;

impl TokenIndex {
    /// The trie of the suffixes `token[j..]` of the stack-dependent tokens `pending` (id,
    /// `j`), shared by every entry with the same list: lists recur across contexts (object
    /// key positions of different schemas share their closing-quote tokens), and building
    /// the trie sorts the list. Also says whether it was built now: its bytes are accounted
    /// by the entry that built it, and the others count only their pointer.
    fn suffix_trie(&self, pending: &[(u32, u32)]) -> (Arc<ByteTrie>, bool) {
        if pending.is_empty() {
            return (Arc::default(), false);
        }
        let key = hash128(pending);
        if let Some(trie) = self.cache.suffixes(key) {
            return (trie, false);
        }
        let vocab = &self.vocab;
        let suffix =
            |&(id, j): &(u32, u32)| (vocab.token_bytes(crate::TokenId(id)).get(j as usize..).unwrap_or(&[]), id);
        let trie = Arc::new(ByteTrie::build(pending.iter().map(suffix)));
        self.cache.insert(key, Cached::Suffixes(trie.clone()), 0);
        (trie, true)
    }

    /// `set`, or the equal set an entry made before (hash-consed by content), and whether it
    /// is `set` itself (the new entry then accounts its bytes). A 129k bitset is 16 KB, and
    /// over JSONSchemaBench 34k entries held 26k distinct sets in 554 MB of bitsets: the
    /// string bodies, keys and numbers of every schema accept the same tokens.
    fn shared_set(&self, set: TokenSet) -> (Arc<TokenSet>, bool) {
        let key = set.content_key();
        if let Some(known) = self.cache.set(key) {
            return (known, false);
        }
        let set = Arc::new(set);
        self.cache.insert(key, Cached::Set(set.clone()), 0);
        (set, true)
    }
}

/// A set of token ids in the form that fits: a sorted list when small, a bitset when large.
#[derive(Clone, Debug)]
pub(super) enum TokenSet {
    List(Box<[u32]>),
    Bits(Box<[u32]>),
}

impl TokenSet {
    /// The union of a bitset holding `count` ids and the ids in `extra`, as a list when that
    /// is smaller than a quarter of the bitset, else as a bitset.
    /// `listed`, when given, holds exactly the ids of `bits`.
    pub(super) fn from_bits_and_ids(
        bits: &[u32],
        count: usize,
        listed: Option<&[u32]>,
        mut extra: Vec<u32>,
    ) -> TokenSet {
        if count + extra.len() > bits.len() / 4 {
            let mut bits = bits.to_vec();
            for id in extra {
                set_bit(&mut bits, id);
            }
            TokenSet::Bits(bits.into_boxed_slice())
        } else {
            extra.reserve(count);
            match listed {
                Some(ids) => extra.extend_from_slice(ids),
                None => {
                    for (w, &word) in bits.iter().enumerate() {
                        let mut word = word;
                        while word != 0 {
                            extra.push(w as u32 * 32 + word.trailing_zeros());
                            word &= word - 1;
                        }
                    }
                }
            }
            extra.sort_unstable();
            extra.dedup();
            TokenSet::List(extra.into_boxed_slice())
        }
    }

    #[inline]
    pub(super) fn add_to(&self, mask: &mut [u32]) {
        match self {
            TokenSet::List(ids) => {
                for &id in ids.iter() {
                    set_bit(mask, id);
                }
            }
            TokenSet::Bits(bits) => or_into(mask, bits),
        }
    }

    /// Writes the set over all of `mask`: what [`TokenSet::add_to`] does to a cleared mask,
    /// with one pass instead of a clear and an OR.
    pub(super) fn write_to(&self, mask: &mut [u32]) {
        match self {
            TokenSet::List(_) => {
                mask.fill(0);
                self.add_to(mask);
            }
            TokenSet::Bits(bits) => {
                let n = bits.len().min(mask.len());
                let (head, tail) = mask.split_at_mut(n);
                head.copy_from_slice(&bits[..n]);
                tail.fill(0);
            }
        }
    }

    /// A 128-bit hash of the set's content and form: equal for equal sets.
    pub(super) fn content_key(&self) -> u128 {
        match self {
            TokenSet::List(ids) => hash128(&(0u8, ids)),
            TokenSet::Bits(bits) => hash128(&(1u8, bits)),
        }
    }

    pub(super) fn len_words(&self) -> usize {
        match self {
            TokenSet::List(v) | TokenSet::Bits(v) => v.len(),
        }
    }
}

/// The precomputed classification of the vocabulary for one context.
#[derive(Debug)]
pub(super) struct Entry {
    /// Tokens the context consumes whole (shared by the entries with the same set).
    pub(super) accepted: Arc<TokenSet>,
    /// Suffixes (after the context's bottom completed) to check against the real stack.
    pub(super) suffixes: Arc<ByteTrie>,
    /// The parse limits that cut a path while classifying.
    pub(super) cut: Cut,
    /// Heap bytes this entry accounts: its own, and those of the set and suffix trie it
    /// made (shared ones are accounted by the entry that made them).
    bytes: usize,
}

impl Entry {
    /// The entry accepting `accepted`, with the stack-dependent tokens `pending` (id and
    /// where its suffix starts), sharing an equal set or suffix trie the index already holds.
    pub(super) fn new(index: &TokenIndex, accepted: TokenSet, pending: &[(u32, u32)], cut: Cut) -> Entry {
        let set_bytes = accepted.len_words() * 4;
        let (accepted, new_set) = index.shared_set(accepted);
        let (suffixes, new_trie) = index.suffix_trie(pending);
        let bytes = std::mem::size_of::<Entry>()
            + if new_set { set_bytes } else { 0 }
            + if new_trie { suffixes.memory_usage() } else { 0 };
        Entry { accepted, suffixes, cut, bytes }
    }

    /// The parse limits that cut a path while this entry was classified (empty when the
    /// entry is exact).
    pub fn cut(&self) -> Cut {
        self.cut
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

    /// Writes the tokens the context consumes whole over all of `mask` (the first context
    /// of a mask: no clear beforehand).
    pub fn write_accepted(&self, mask: &mut [u32]) {
        self.accepted.write_to(mask);
    }

    /// Adds the stack-dependent tokens whose suffix the real stack accepts: completes the
    /// context's bottom frame `bottom` in the real `stacks` and walks the suffix trie from
    /// there, also appending each added id to `added`. The arena is restored afterwards.
    pub(super) fn add_suffixes(
        &self,
        pda: &Pda,
        stacks: &mut Stacks,
        bottom: FrameId,
        scratch: &mut SuffixScratch,
        mask: &mut [u32],
        added: &mut Vec<u32>,
    ) {
        let base = stacks.mark();
        let SuffixScratch { levels, cur } = scratch;
        levels.clear();
        // If this completes the whole output, no tops remain and every suffix dies.
        cur.clear();
        stacks.pop_into(pda, bottom, cur);
        levels.open(stacks.mark()).extend_from_slice(cur);
        // The tops are closed: a first byte none of them has an edge on kills every stack
        // and completes nothing, and its subtree is skipped unstepped.
        let live = pda.edge_bytes(cur.iter().filter_map(|&t| stacks.frame(t)).map(|f| f.node()));
        let trie = &self.suffixes;
        let (mut i, mut roots) = (0usize, 0usize);
        loop {
            i = trie.skip_dead_roots(i, &mut roots, &live);
            let Some(node) = trie.nodes.get(i) else { break };
            while levels.len() > node.depth as usize {
                if let Some(mark) = levels.pop() {
                    stacks.rewind(mark);
                }
            }
            cur.clear();
            cur.extend_from_slice(levels.top());
            let mark = stacks.mark();
            let reached = stacks.step(pda, cur, node.byte, levels.open(mark));
            let alive = !levels.top().is_empty();
            if alive || reached {
                for &id in trie.ids_at(node) {
                    set_bit(mask, id);
                }
                added.extend_from_slice(trie.ids_at(node));
            }
            i = if alive { i + 1 } else { node.end as usize };
        }
        stacks.rewind(base);
        levels.clear();
    }

    /// Approximate heap bytes this entry accounts for (see [`Entry::new`]).
    pub fn memory_usage(&self) -> usize {
        self.bytes
    }
}

/// The buffers of mask computations, owned by the caller (one per matcher: concurrent
/// sequences share the [`TokenIndex`], never a scratch) and passed to [`TokenIndex::fill`],
/// so that a mask of cached states allocates nothing and takes no lock for its buffers.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The context of the top being filled.
    pub(super) context: Context,
    /// For [`Entry::add_suffixes`].
    pub(super) suffixes: SuffixScratch,
    /// What [`Entry::add_suffixes`] added on this matcher's stacks.
    pub(super) suffix_memo: SuffixMemo,
    /// The ids one [`Entry::add_suffixes`] call added (a buffer).
    pub(super) suffix_added: Vec<u32>,
    /// For the walks of a cache miss.
    pub(super) walk: WalkScratch,
}

impl Scratch {
    /// Forgets what was learnt about one matcher's stacks (when it starts over).
    pub(crate) fn forget_stacks(&mut self) {
        self.suffix_memo.clear();
    }
}

/// The stack-dependent tokens [`Entry::add_suffixes`] added on one matcher's real stacks,
/// by (entry key, arena index of the frame below the context's bottom). Completing the
/// bottom continues in that frame (see `Stacks::pop_into`), and frames never change while
/// they are in the arena, so the same pair adds the same tokens: inside a string value,
/// every token's mask walks the same suffixes (`",`, `"}`, …) from the same frame, and is
/// answered here after the first.
///
/// Valid while the arena keeps the frames: [`TokenIndex::fill`] passes the stacks' low-water
/// mark ([`Stacks::take_low_water`]) to [`SuffixMemo::forget_from`] before reading it, so
/// answers about frames a rollback dropped are forgotten whoever truncated the arena.
#[derive(Debug, Default)]
pub(super) struct SuffixMemo {
    /// (entry key, frame below) → range of `ids`.
    answers: rustc_hash::FxHashMap<(u128, FrameId), (u32, u32)>,
    ids: Vec<u32>,
    /// Above every frame an answer depends on: a truncation to this length or above
    /// forgets nothing.
    high: usize,
}

/// At most this many answers are kept by a [`SuffixMemo`] (then all are forgotten at once).
const MAX_SUFFIX_ANSWERS: usize = 512;
/// At most this many ids are kept by a [`SuffixMemo`] (then all are forgotten at once).
const MAX_SUFFIX_IDS: usize = 1 << 18;

impl SuffixMemo {
    /// The ids kept for `(key, below)`.
    pub(super) fn get(&self, key: u128, below: FrameId) -> Option<&[u32]> {
        let &(start, end) = self.answers.get(&(key, below))?;
        self.ids.get(start as usize..end as usize)
    }

    /// Keeps `ids` for `(key, below)`.
    pub(super) fn insert(&mut self, key: u128, below: FrameId, ids: &[u32]) {
        if self.answers.len() >= MAX_SUFFIX_ANSWERS || self.ids.len() + ids.len() > MAX_SUFFIX_IDS {
            self.clear();
        }
        if ids.len() > MAX_SUFFIX_IDS {
            return;
        }
        if below != BOTTOM {
            self.high = self.high.max(below.index() + 1);
        }
        let start = self.ids.len() as u32;
        self.ids.extend_from_slice(ids);
        self.answers.insert((key, below), (start, self.ids.len() as u32));
    }

    /// Forgets the answers that depend on frames at `arena_len` or above (after the arena
    /// was truncated to `arena_len`).
    pub(super) fn forget_from(&mut self, arena_len: usize) {
        if arena_len >= self.high {
            return;
        }
        self.high = arena_len;
        self.answers.retain(|&(_, below), _| below == BOTTOM || below.index() < arena_len);
        if self.answers.is_empty() {
            self.ids.clear();
        }
    }

    /// Forgets every answer.
    pub(super) fn clear(&mut self) {
        self.answers.clear();
        self.ids.clear();
        self.high = 0;
    }
}

/// Reusable buffers for [`Entry::add_suffixes`], so the per-token path does not allocate.
#[derive(Clone, Debug, Default)]
pub(super) struct SuffixScratch {
    /// Per byte of the trie path walked: the stacks' mark before it and the tops after it.
    pub(super) levels: Levels<FrameId, Mark>,
    pub(super) cur: Vec<FrameId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    const F: fn(u32) -> FrameId = FrameId::new;

    #[test]
    fn a_rollback_forgets_the_answers_on_removed_frames_only() {
        let mut memo = SuffixMemo::default();
        memo.insert(1, F(3), &[10, 11]);
        memo.insert(1, F(9), &[12]);
        memo.insert(2, BOTTOM, &[13]);
        assert_eq!(memo.get(1, F(9)), Some(&[12][..]));
        // The arena was truncated to 5 frames: frame 9 may be another frame now.
        memo.forget_from(5);
        assert_eq!(memo.get(1, F(3)), Some(&[10, 11][..]));
        assert_eq!(memo.get(1, F(9)), None);
        // Completing the whole stack depends on no frame.
        assert_eq!(memo.get(2, BOTTOM), Some(&[13][..]));
        assert_eq!(memo.get(2, F(3)), None);
    }

    #[test]
    fn entries_with_equal_sets_share_one_and_account_it_once() {
        let mut tokens: Vec<Vec<u8>> = (0..200u32).map(|i| format!("t{i}").into_bytes()).collect();
        tokens.push(Vec::new());
        let eos = crate::TokenId(200);
        let index = TokenIndex::new(crate::Vocabulary::new(tokens, &[], &[eos]).expect("vocabulary"));
        let words = index.vocab().mask_words();
        let mut bits = vec![0u32; words];
        (0..150).for_each(|id| set_bit(&mut bits, id));
        let big = || TokenSet::from_bits_and_ids(&bits, 150, None, Vec::new());
        assert!(matches!(big(), TokenSet::Bits(_)));
        let first = Entry::new(&index, big(), &[(3, 1)], Cut::NONE);
        let second = Entry::new(&index, big(), &[(3, 1)], Cut::NONE);
        let other = Entry::new(&index, TokenSet::List(vec![1, 2].into()), &[], Cut::NONE);
        assert!(Arc::ptr_eq(&first.accepted, &second.accepted));
        assert!(Arc::ptr_eq(&first.suffixes, &second.suffixes));
        assert!(!Arc::ptr_eq(&first.accepted, &other.accepted));
        let own = std::mem::size_of::<Entry>();
        assert_eq!(second.memory_usage(), own, "the shared set and trie are the first entry's");
        assert_eq!(first.memory_usage(), own + words * 4 + first.suffixes.memory_usage());
        let mut mask = vec![0u32; words];
        second.write_accepted(&mut mask);
        assert_eq!(mask, bits);
    }

    #[test]
    fn a_full_memo_starts_over() {
        let mut memo = SuffixMemo::default();
        for below in 0..MAX_SUFFIX_ANSWERS as u32 {
            memo.insert(7, F(below), &[below]);
        }
        assert_eq!(memo.get(7, F(0)), Some(&[0][..]));
        memo.insert(8, F(0), &[1, 2]);
        assert_eq!(memo.get(7, F(0)), None, "forgotten at once when full");
        assert_eq!(memo.get(8, F(0)), Some(&[1, 2][..]));
    }
}

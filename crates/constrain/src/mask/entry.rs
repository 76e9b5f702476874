use super::*;

impl TokenIndex {
    /// The trie of the suffixes `token[j..]` of the stack-dependent tokens `pending` (id,
    /// `j`), shared by every entry with the same list: lists recur across contexts (object
    /// key positions of different schemas share their closing-quote tokens), and building
    /// the trie sorts the list. Its bytes are accounted by the entries holding it.
    pub(super) fn suffix_trie(&self, pending: &[(u32, u32)]) -> Arc<ByteTrie> {
        if pending.is_empty() {
            return Arc::default();
        }
        let key = hash128(pending);
        if let Some(trie) = self.cache.suffixes(key) {
            return trie;
        }
        let vocab = &self.vocab;
        let suffix =
            |&(id, j): &(u32, u32)| (vocab.token_bytes(crate::TokenId(id)).get(j as usize..).unwrap_or(&[]), id);
        let trie = Arc::new(ByteTrie::build(pending.iter().map(suffix)));
        self.cache.insert(key, Cached::Suffixes(trie.clone()), ALIAS_BYTES);
        trie
    }
}

/// A set of token ids in the form that fits: a sorted list when small, a bitset when large.
#[derive(Clone, Debug)]
pub(crate) enum TokenSet {
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

    pub(super) fn len_words(&self) -> usize {
        match self {
            TokenSet::List(v) | TokenSet::Bits(v) => v.len(),
        }
    }
}

/// The precomputed classification of the vocabulary for one context.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Tokens the context consumes whole.
    pub(super) accepted: TokenSet,
    /// Suffixes (after the context's bottom completed) to check against the real stack.
    pub(super) suffixes: Arc<ByteTrie>,
    /// The parse limits that cut a path while classifying (bits of `exec::CUT_*`).
    pub(super) cut: u8,
}

impl Entry {
    /// The parse limits that cut a path while this entry was classified (bits of
    /// `exec::CUT_*`; 0 when the entry is exact).
    pub fn cut(&self) -> u8 {
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

/// The buffers of mask computations, owned by the caller (one per matcher: concurrent
/// sequences share the [`TokenIndex`], never a scratch) and passed to [`TokenIndex::fill`],
/// so that a mask of cached states allocates nothing and takes no lock for its buffers.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The context of the top being filled.
    pub(super) context: Context,
    /// For [`Entry::add_suffixes`].
    pub(super) suffixes: SuffixScratch,
    /// For the walks of a cache miss.
    pub(super) walk: WalkScratch,
}

/// Reusable buffers for [`Entry::add_suffixes`], so the per-token path does not allocate.
#[derive(Clone, Debug, Default)]
pub(crate) struct SuffixScratch {
    pub(super) tops: Vec<u32>,
    pub(super) levels: Vec<(usize, usize)>,
    pub(super) cur: Vec<u32>,
}

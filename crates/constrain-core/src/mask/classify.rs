use super::configs::Configs;
use super::entry::{Entry, TokenSet};
use super::index::TokenIndex;
use super::relaxed::{ByCount, Cond, RelaxedLoop};
use super::text;
use super::walk::{Accepted, Walk};
use crate::automaton::exec::Frame;
use crate::automaton::keys::NodeKeys;
use crate::automaton::{Cut, Pda};
use crate::util::{clear_bits, hash128, or_into};
use crate::Limits;

/// The vocabulary classified for one context, before a relaxed loop's count is applied.
#[derive(Debug)]
pub(crate) struct Classified {
    /// Tokens the context consumes whole whatever the count, as a bitset over the mask width
    /// (filled in place: no large list is built and copied for the common case).
    pub(super) always: Vec<u32>,
    /// Number of bits set in `always`.
    pub(super) always_count: usize,
    /// The ids of `always` as a list, when few (see [`Accepted::always_ids`]).
    pub(super) always_ids: Option<Vec<u32>>,
    /// Tokens the context consumes whole only under a condition on the count.
    pub(super) conditional: Conditional,
    /// Stack-dependent tokens: (id, offset of the suffix, when).
    pub(super) pending: Vec<(u32, u32, Cond)>,
    /// The largest number of loop iterations any condition above counts (0 without any).
    pub(super) max_iterations: u32,
    /// The parse limits that cut a path while classifying: the
    /// classification may then miss tokens, which [`Entry::cut`] reports at run time.
    pub(super) cut: Cut,
}

/// The conditionally accepted tokens of a [`Classified`], in the form that derives an
/// entry cheaply.
#[derive(Debug)]
pub(super) enum Conditional {
    /// Few: (id, when), each tested for the count.
    List(Vec<(u32, Cond)>),
    /// Many (inside a `maxLength` string nearly every token): see [`ByCount`].
    ByCount(ByCount),
}

impl Classified {
    /// Walks the vocabulary trie from the context (frames bottom first); the frame at
    /// `relaxed` (a loop) runs with its bounds ignored and its iterations counted. Where a
    /// text shortcut applies ([`text`]), only the tokens that are not text are walked, and
    /// the text tokens' classes come from what the shortcut knows of them.
    pub(super) fn compute(
        index: &TokenIndex,
        pda: &Pda,
        node_keys: &NodeKeys,
        limits: &Limits,
        context: &[Frame],
        relaxed: Option<usize>,
        scratch: &mut WalkScratch,
    ) -> Classified {
        let spare = std::mem::take(&mut scratch.spare_conditional);
        let mut acc = Accepted::new(scratch.zeroed_bits(index.vocab.mask_words()), spare);
        let configs = &mut scratch.configs;
        let mut pending: Vec<(u32, u32, Cond)> = Vec::new();
        let cut = std::cell::Cell::new(Cut::NONE);
        let walk = Walk { index, pda, limits, context, relaxed, cut: &cut };
        let text = &index.text;
        // Text tokens classified by groups, not listed in `acc` (see `ByCount::groups`).
        let mut grouped: Option<text::ByChars> = None;
        // Tried where the top's own edges take a non-ASCII character (a string body):
        // elsewhere most text dies at once, and the walk is cheap.
        let string_body = |top: &Frame| {
            pda.get_node(top.node()).is_some_and(|n| pda.bytes(n).iter().any(|e| e.hi() >= 0xC2 && e.lo() <= 0xF4))
        };
        let first_chars = match relaxed {
            None if context.last().is_some_and(string_body) => {
                index.first_char_refused(pda, node_keys, limits, context, configs)
            }
            _ => None,
        };
        match relaxed {
            // Any text follows the first character: every text token is accepted but those
            // starting with a refused character.
            None if first_chars.is_some() => {
                or_into(&mut acc.always, &text.bits);
                if let Some(refused) = first_chars.filter(|r| !r.is_empty()) {
                    index.clear_first_bytes(&mut acc.always, |b| refused.refuses(b));
                }
                acc.always_count = acc.always.iter().map(|w| w.count_ones() as usize).sum();
                walk.run(&text.others, false, &mut acc, &mut pending, configs);
            }
            // Each text character is one iteration of the relaxed loop: a text token's
            // conditions depend only on its number of characters, read off the probe.
            Some(i) => {
                let units = text::units_loop(pda, context, i).and_then(|(refused, walked, exit)| {
                    let exit = match exit {
                        text::Exit::Below => None,
                        text::Exit::NoText => Some(text::Refused::ALL),
                        text::Exit::Plain => {
                            Some(index.first_char_refused(pda, node_keys, limits, &context[..i], configs)?)
                        }
                    };
                    Some((walk.probe(i, refused, walked, exit, configs)?, walked))
                });
                match units {
                    Some((by_chars, walked)) => {
                        walk.run(&text.others, false, &mut acc, &mut pending, configs);
                        if walked != 0 {
                            walk.run(&index.holding_leads(walked), false, &mut acc, &mut pending, configs);
                        }
                        by_chars.add_always(text, &mut acc);
                        grouped = Some(by_chars);
                    }
                    None => walk.run(&index.trie, false, &mut acc, &mut pending, configs),
                }
            }
            // Memos need unconditional results: not with a relaxed loop.
            _ => walk.run(&index.trie, relaxed.is_none(), &mut acc, &mut pending, configs),
        }
        let always_ids = if acc.always_ids.len() == acc.always_count { Some(acc.always_ids) } else { None };
        let max_iterations = acc
            .conditional
            .iter()
            .map(|&(_, c)| c)
            .chain(pending.iter().map(|&(_, _, c)| c))
            .chain(grouped.iter().flat_map(text::ByChars::conds))
            .map(Cond::iterations)
            .max()
            .unwrap_or(0);
        // Short lists are filtered directly; long ones pay for an index once. The list's
        // buffer serves the next walk.
        let conditional = if grouped.is_some() || acc.conditional.len() > acc.always.len() {
            Conditional::ByCount(ByCount::new(&acc.always, &acc.conditional, grouped.map(|g| (text, g))))
        } else {
            // A copy the size of the list: the buffer may have grown large in an earlier walk.
            Conditional::List(acc.conditional.clone())
        };
        let mut spare = acc.conditional;
        spare.clear();
        scratch.spare_conditional = spare;
        let cut = cut.get();
        Classified {
            always: acc.always,
            always_count: acc.always_count,
            always_ids,
            conditional,
            pending,
            max_iterations,
            cut,
        }
    }

    /// A key shared by every count of `r`'s loop that derives the same entry: a condition
    /// compares `k ≤ max − count` and `k ≥ min − count` for iteration numbers `k` up to
    /// [`Classified::max_iterations`], so both differences clamped just past that range
    /// decide every condition. Counts far from both bounds then share one entry (how far
    /// depends on the vocabulary: the DeepSeek tokenizer has 128-space tokens, so inside a
    /// `maxLength: 100` string every count is its own class).
    pub(super) fn count_class_key(&self, base_key: u128, r: RelaxedLoop) -> u128 {
        let limit = self.max_iterations as i64 + 1;
        let count = r.count as i64;
        let to_max = (r.max as i64 - count).clamp(-1, limit);
        let to_min = (r.min as i64 - count).clamp(0, limit);
        hash128(&(base_key, 0xC1A5u16, to_min, to_max))
    }

    /// The entry for the relaxed loop's actual count (or the only entry, without one).
    pub(super) fn derive(&self, index: &TokenIndex, relaxed: Option<RelaxedLoop>) -> Entry {
        let pending: Vec<(u32, u32)> =
            self.pending.iter().filter(|(_, _, c)| c.holds(relaxed)).map(|&(id, j, _)| (id, j)).collect();
        Entry::new(index, self.accepted(relaxed), &pending, self.cut)
    }

    /// Drops the tokens whose first byte `first_byte` rejects. For classifications without a
    /// relaxed loop, whose conditions are all [`Cond::Always`] (held in `always`).
    pub(super) fn keep_first_bytes(&mut self, index: &TokenIndex, first_byte: impl Fn(u8) -> bool) {
        index.clear_first_bytes(&mut self.always, |b| !first_byte(b));
        self.always_count = self.always.iter().map(|w| w.count_ones() as usize).sum();
        self.always_ids = None;
        let kept = |id: u32| index.vocab.token_bytes(crate::TokenId(id)).first().is_some_and(|&b| first_byte(b));
        self.pending.retain(|&(id, _, _)| kept(id));
    }

    /// The entry of a context that accepts what this classification's context does except
    /// the tokens starting with one of `words` followed by a quote, or with a proper prefix
    /// of one followed by an escape that could spell the word's next character (`\u` but for
    /// a control character's `\u00XX`, and `\/` before a `/`), which
    /// `schema::strings::not_in_set` refuses where a word goes on.
    /// For classifications without a relaxed loop, like [`Classified::keep_first_bytes`].
    pub(super) fn derive_excluding<'w>(&self, index: &TokenIndex, words: impl Iterator<Item = &'w [u8]>) -> Entry {
        let trie = &index.trie;
        let mut dropped: Vec<u32> = Vec::new();
        let mut probe: Vec<u8> = Vec::new();
        let mut drop_below = |prefix: &[u8], last: &[u8], dropped: &mut Vec<u32>| {
            probe.clear();
            probe.extend_from_slice(prefix);
            probe.extend_from_slice(last);
            if let Some(i) = trie.find(&probe) {
                dropped.extend_from_slice(trie.ids_from(i));
            }
        };
        // After `\u`: whether a token's next bytes can begin a control character's escape.
        let control = |r: &[u8]| {
            r.iter().zip([b"0" as &[u8], b"0", b"01", b"0123456789ABCDEFabcdef"]).all(|(b, set)| set.contains(b))
        };
        let mut below_u: Vec<u32> = Vec::new();
        for word in words {
            drop_below(word, b"\"", &mut dropped);
            for (k, &next) in word.iter().enumerate() {
                below_u.clear();
                drop_below(&word[..k], b"\\u", &mut below_u);
                let skip = k + 2;
                dropped.extend(
                    below_u
                        .iter()
                        .copied()
                        .filter(|&id| !control(index.vocab.token_bytes(crate::TokenId(id)).get(skip..).unwrap_or(&[]))),
                );
                if next == b'/' {
                    drop_below(&word[..k], b"\\/", &mut dropped);
                }
            }
        }
        dropped.sort_unstable();
        dropped.dedup();
        let mut always = self.always.clone();
        clear_bits(&mut always, &dropped);
        let count = always.iter().map(|w| w.count_ones() as usize).sum();
        let pending: Vec<(u32, u32)> =
            self.pending.iter().filter(|p| dropped.binary_search(&p.0).is_err()).map(|&(id, j, _)| (id, j)).collect();
        Entry::new(index, TokenSet::from_bits_and_ids(&always, count, None, Vec::new()), &pending, self.cut)
    }

    /// The accepted set for `relaxed`'s count (every condition holds without one).
    pub(super) fn accepted(&self, relaxed: Option<RelaxedLoop>) -> TokenSet {
        match (&self.conditional, relaxed) {
            (Conditional::List(list), _) => {
                let conditional = list.iter().filter(|(_, c)| c.holds(relaxed)).map(|&(id, _)| id);
                TokenSet::from_bits_and_ids(
                    &self.always,
                    self.always_count,
                    self.always_ids.as_deref(),
                    conditional.collect(),
                )
            }
            (Conditional::ByCount(by_count), Some(r)) => by_count.accepted(r),
            (Conditional::ByCount(by_count), None) => {
                TokenSet::from_bits_and_ids(&by_count.all, by_count.all_count, None, Vec::new())
            }
        }
    }

    /// Clears the bitset and keeps it as `scratch`'s spare (see [`WalkScratch::zeroed_bits`]).
    pub(super) fn recycle(self, scratch: &mut WalkScratch) {
        let mut bits = self.always;
        match &self.always_ids {
            Some(ids) => ids.iter().for_each(|&id| {
                if let Some(w) = bits.get_mut((id / 32) as usize) {
                    *w = 0;
                }
            }),
            None => bits.fill(0),
        }
        scratch.spare_bits = bits;
    }

    /// Approximate heap bytes of this classification: itself (it is kept behind an `Arc`)
    /// and its lists.
    pub(super) fn memory_usage(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.always.len() * 4
            + self.always_ids.as_ref().map_or(0, |v| v.len() * 4)
            + match &self.conditional {
                Conditional::List(list) => list.len() * std::mem::size_of::<(u32, Cond)>(),
                Conditional::ByCount(by_count) => by_count.memory_usage(),
            }
            + self.pending.len() * std::mem::size_of::<(u32, u32, Cond)>()
    }
}

/// The buffers of a classification's walks (a cache miss), owned by the caller's
/// [`Scratch`] and kept from one miss to the next, so that a miss does not allocate (and
/// fault in) them afresh.
#[derive(Default)]
pub(super) struct WalkScratch {
    /// The configuration table of [`Classified::compute`]'s walks, kept for its buffers.
    pub(super) configs: Configs,
    /// A zeroed bitset over the mask width for [`Classified::compute`]: a miss reuses it
    /// instead of allocating (and faulting in) a fresh 16 KB for a 129k vocabulary.
    pub(super) spare_bits: Vec<u32>,
    /// The conditional list of the last walk, emptied and kept for its buffer: a `maxLength`
    /// string lists most of the vocabulary (2 MB), and growing a fresh one faults in its
    /// pages every time.
    pub(super) spare_conditional: Vec<(u32, Cond)>,
}

impl WalkScratch {
    /// A zeroed bitset of `words` words, the spare one when it fits.
    pub(super) fn zeroed_bits(&mut self, words: usize) -> Vec<u32> {
        let spare = std::mem::take(&mut self.spare_bits);
        if spare.len() == words {
            spare
        } else {
            vec![0; words]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mask::relaxed::conditions_adjacent;
    use crate::util::set_bit;
    use proptest::prelude::*;
    use rustc_hash::FxHashMap as HashMap;

    fn cond() -> impl Strategy<Value = Cond> {
        prop_oneof![Just(Cond::Always), (0u32..8).prop_map(Cond::Inside), (0u32..8).prop_map(Cond::Exited)]
    }

    fn ids_of(set: &TokenSet, words: usize) -> Vec<u32> {
        let mut mask = vec![0u32; words];
        set.add_to(&mut mask);
        (0..words as u32 * 32).filter(|&id| mask[(id / 32) as usize] >> (id % 32) & 1 == 1).collect()
    }

    proptest! {
        /// The indexed derivation allows exactly the tokens that testing every condition
        /// allows, for every count of every loop.
        #[test]
        fn by_count_derives_what_filtering_derives(
            always in proptest::collection::vec(0u32..128, 0..40),
            conditional in proptest::collection::vec((0u32..128, cond()), 0..200),
            min in 0u32..12,
            span in prop_oneof![(0u32..12).prop_map(Some), Just(None)],
        ) {
            let words = 4;
            let mut bits = vec![0u32; words];
            always.iter().for_each(|&id| set_bit(&mut bits, id));
            // As the walk produces them: `Always` conditions are in the bitset.
            let conditional: Vec<(u32, Cond)> = conditional.into_iter().filter(|&(_, c)| c != Cond::Always).collect();
            let always_count = bits.iter().map(|w| w.count_ones() as usize).sum();
            let classified = |conditional| Classified {
                always: bits.clone(),
                always_count,
                always_ids: None,
                conditional,
                pending: Vec::new(),
                max_iterations: 7,
                cut: Cut::NONE,
            };
            let listed = classified(Conditional::List(conditional.clone()));
            // Both ways of building the index: the conditions as generated (a token's may be
            // apart) and grouped by token, as the walk adds them (the linear path).
            let mut grouped = conditional.clone();
            grouped.sort_by_key(|&(id, _)| id);
            prop_assert!(conditions_adjacent(words, &grouped));
            let indexed = [&conditional, &grouped].map(|c| classified(Conditional::ByCount(ByCount::new(&bits, c, None))));
            let max = span.map_or(crate::automaton::UNBOUNDED, |s| min + s);
            let mut by_class: HashMap<u128, Vec<u32>> = HashMap::default();
            for count in 0..=min + span.unwrap_or(12) {
                let r = RelaxedLoop { context_index: 0, count, min, max };
                let filtered = ids_of(&listed.accepted(Some(r)), words);
                for by_count in &indexed {
                    prop_assert_eq!(ids_of(&by_count.accepted(Some(r)), words), filtered.clone(), "count {}", count);
                }
                // Counts of one class share an entry: they must derive the same set.
                let class = by_class.entry(listed.count_class_key(7, r)).or_insert_with(|| filtered.clone());
                prop_assert_eq!(&*class, &filtered, "count {} shares a class with another set", count);
            }
        }
    }
}

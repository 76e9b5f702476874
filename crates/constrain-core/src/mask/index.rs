use super::cache::{Cache, CacheReport, Cached};
use super::classify::{Classified, WalkScratch};
use super::configs::Configs;
use super::context::{Context, Target};
use super::entry::{Entry, Scratch};
use super::text;
use super::text::TextTokens;
use super::trie::ByteTrie;
use super::viable;
use crate::automaton::exec::{Frame, Stacks, BOTTOM};
use crate::automaton::keys::NodeKeys;
use crate::automaton::{Cut, FrameId, Pda, RuleCache};
use crate::util::cache::Memo;
use crate::util::{clear_bits, hash128, or_into, set_bit, ByteSet};
use crate::vocab::Vocabulary;
use crate::Limits;
use crate::TokenId;
use std::any::Any;
use std::sync::Arc;

/// In [`TokenIndex::fewest_tokens`]: no tokens spell these bytes.
pub const NO_SPELLING: u32 = u32::MAX;

/// Everything that depends only on the tokenizer: the vocabulary, its byte trie, and the cache
/// of per-state masks shared by every constraint compiled against it. Build once per tokenizer
/// (≈ a fraction of a second for 129k tokens) and share the `Arc`.
pub struct TokenIndex {
    pub(super) vocab: Vocabulary,
    pub(super) trie: ByteTrie,
    /// Per first byte, the tokens of two or more bytes starting with it, as a bitset over
    /// the mask width (empty when there are none): replayed memos OR these in whole.
    pub(super) subtree_sets: Box<[Box<[u32]>]>,
    /// The vocabulary split into text tokens and the rest, for the string bodies and loops
    /// that treat all text alike (see [`text`]).
    pub(super) text: TextTokens,
    /// What a context does with text, when its first character decides
    /// ([`viable::first_char_refused`]), by the context's node keys: string bodies recur
    /// across schemas.
    pub(super) first_chars: Memo<u128, Option<text::Refused>>,
    /// The text tokens split for loops of one character an iteration, by the characters
    /// the loop refuses ([`text::CharLists`]).
    pub(super) char_lists: Memo<text::Refused, Arc<text::CharLists>>,
    /// The text tokens holding a character led by one of a set of lead bytes, as a trie, by
    /// that set ([`TokenIndex::holding_leads`]).
    pub(super) lead_tries: Memo<u128, Arc<ByteTrie>>,
    /// Length in bytes of the longest grammar token: counted loops whose remaining bounds
    /// exceed it behave alike for every token, which bounds the number of distinct entries.
    pub(super) max_token_len: u32,
    /// The shared mask cache (bounded by [`IndexConfig::cache_bytes`]).
    pub(super) cache: Cache,
    /// The determinised rules of the constraints compiled against this index, and the
    /// salts of their fingerprints (which the mask cache keys are made of).
    pub(super) rules: RuleCache,
    /// Unions of first-byte subtrees by their set of first bytes (see
    /// [`TokenIndex::subtree_union`]).
    pub(super) unions: Memo<ByteSet, Arc<[u32]>>,
    /// Walk buffers left by dropped matchers, handed to new ones ([`TokenIndex::scratch`]):
    /// a matcher per schema would otherwise grow them afresh on its first miss. Locked once
    /// per matcher created or dropped, never while filling a mask.
    pub(super) spare_walks: std::sync::Mutex<Vec<WalkScratch>>,
    /// The bounds it was built with.
    config: IndexConfig,
    /// Per-tokenizer data of other layers ([`TokenIndex::extension`]), one value per type.
    extensions: std::sync::Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
}

impl TokenIndex {
    /// Builds the trie for `vocab`, with the default [`IndexConfig`] (the
    /// [`DEFAULT_MEMORY_BUDGET`]).
    pub fn new(vocab: Vocabulary) -> Arc<TokenIndex> {
        Self::with_config(vocab, IndexConfig::default())
    }

    /// Builds the trie for `vocab`, with the cache bounds of `config`.
    pub fn with_config(vocab: Vocabulary, config: IndexConfig) -> Arc<TokenIndex> {
        let trie = ByteTrie::build(vocab.grammar_tokens().map(|(id, b)| (b, id.0)));
        let max_token_len = vocab.grammar_tokens().map(|(_, b)| b.len()).max().unwrap_or(0) as u32;
        let mut subtree_sets: Box<[Box<[u32]>]> = vec![Box::default(); 256].into_boxed_slice();
        let mut i = 0;
        while let Some(node) = trie.nodes.get(i) {
            let ids = &trie.ids[trie.descendant_ids(i)];
            if !ids.is_empty() {
                let mut bits = vec![0u32; vocab.mask_words()];
                ids.iter().for_each(|&id| set_bit(&mut bits, id));
                subtree_sets[node.byte as usize] = bits.into_boxed_slice();
            }
            // The next first-byte node.
            i = (node.end as usize).max(i + 1);
        }
        let text = TextTokens::new(&vocab, &trie);
        Arc::new(TokenIndex {
            vocab,
            trie,
            subtree_sets,
            text,
            first_chars: Memo::new(MAX_FIRST_CHARS),
            char_lists: Memo::new(MAX_CHAR_LISTS),
            lead_tries: Memo::new(MAX_LEAD_TRIES),
            max_token_len,
            cache: Cache::new(config.cache_bytes),
            rules: RuleCache::new(config.rule_cache_bytes),
            unions: Memo::new(MAX_SUBTREE_UNIONS),
            spare_walks: std::sync::Mutex::new(Vec::new()),
            config,
            extensions: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The index's value of type `T`, made by `init` from the vocabulary on first use: the
    /// typed slot where a layer above the engine (a run-time check's per-token table, say)
    /// keeps what it computes once per tokenizer. One value per type; cheap to call again
    /// (a lock and a scan of the few slots), but callers on hot paths keep the `Arc`.
    pub fn extension<T: Any + Send + Sync>(&self, init: impl FnOnce(&Vocabulary) -> T) -> Arc<T> {
        // A poisoned lock only means a panic elsewhere while it was held; the slots stay valid.
        let mut slots = self.extensions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = slots.iter().find_map(|s| Arc::clone(s).downcast::<T>().ok()) {
            return found;
        }
        let value = Arc::new(init(&self.vocab));
        slots.push(Arc::clone(&value) as Arc<dyn Any + Send + Sync>);
        value
    }

    /// The tokens below first byte `byte` (see [`TokenIndex::subtree_sets`]).
    pub(super) fn subtree_ids(&self, byte: u8) -> &[u32] {
        self.subtree_sets.get(byte as usize).map_or(&[], |s| s)
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    /// The cache bounds the index was built with: callers that keep compiled constraints
    /// bound their [`crate::matcher::ConstraintCache`] by its `constraint_cache_bytes`.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// The fewest ordinary tokens (not special, not EOS) whose bytes, one after another,
    /// spell `bytes[i..]`, for every `i` in `0..=bytes.len()`, written into `out`
    /// ([`NO_SPELLING`] where none do): a shortest-path count over the byte trie, each
    /// position walked along the trie as far as a token continues. Costs the length times
    /// the longest token; closing mode calls it only near the end of a budget.
    pub fn fewest_tokens(&self, bytes: &[u8], out: &mut Vec<u32>) {
        out.clear();
        out.resize(bytes.len() + 1, NO_SPELLING);
        if let Some(last) = out.last_mut() {
            *last = 0;
        }
        let trie = &self.trie;
        for i in (0..bytes.len()).rev() {
            let mut best = NO_SPELLING;
            // Children of the node at hand lie in `at..end`, siblings' subtrees skipped.
            let (mut at, mut end) = (0usize, trie.nodes.len());
            for (k, &b) in bytes[i..].iter().enumerate() {
                let found = loop {
                    match trie.nodes.get(at).filter(|_| at < end) {
                        Some(node) if node.byte == b => break Some(*node),
                        Some(node) if node.byte < b => at = node.end as usize,
                        _ => break None,
                    }
                };
                let Some(node) = found else { break };
                let ordinary = trie.ids_at(&node).iter().any(|&id| !self.vocab.is_eos(TokenId(id)));
                let rest = out.get(i + k + 1).copied().unwrap_or(NO_SPELLING);
                if ordinary && rest != NO_SPELLING {
                    best = best.min(rest + 1);
                }
                end = node.end as usize;
                at += 1;
            }
            out[i] = best;
        }
    }

    /// A scratch for a new matcher, holding the walk buffers a dropped one left, if any.
    pub(crate) fn scratch(&self) -> Scratch {
        let walk = self.spare_walks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
        Scratch { walk: walk.unwrap_or_default(), ..Scratch::default() }
    }

    /// Keeps the walk buffers of a dropped matcher's `scratch` for the next matcher (at
    /// most [`MAX_SPARE_WALKS`]: one per concurrent sequence is enough).
    pub(crate) fn recycle_scratch(&self, scratch: Scratch) {
        let mut spare = self.spare_walks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if spare.len() < MAX_SPARE_WALKS {
            spare.push(scratch.walk);
        }
    }

    /// The cache of determinised rules shared by the constraints compiled against this
    /// index (see [`crate::automaton::Pda::build_with`]).
    pub fn rule_cache(&self) -> &RuleCache {
        &self.rules
    }

    /// The accounted bytes of the shared mask cache now (what
    /// [`IndexConfig::cache_bytes`] bounds), without a scan: for metrics.
    pub fn cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// What the shared mask cache holds now, by kind, with its accounted bytes. Scans the
    /// whole cache: call it for reports, not per token.
    pub fn cache_report(&self) -> CacheReport {
        self.cache.report()
    }

    /// Heap bytes of the tokenizer-wide tables (trie, per-first-byte sets, text tokens),
    /// without the mask cache.
    pub fn memory_usage(&self) -> usize {
        self.trie.memory_usage()
            + self.subtree_sets.iter().map(|s| s.len() * 4).sum::<usize>()
            + self.text.memory_usage()
            + self.char_lists.sum(|l| l.memory_usage())
            + self.lead_tries.sum(|t| t.memory_usage())
    }

    /// [`viable::first_char_refused`] for `context`, remembered by its frames' node keys and
    /// counts.
    pub(super) fn first_char_refused(
        &self,
        pda: &Pda,
        node_keys: &NodeKeys,
        limits: &Limits,
        context: &[Frame],
        configs: &mut Configs,
    ) -> Option<text::Refused> {
        let top = context.last()?.node();
        let frames: Vec<(u128, u32)> = context.iter().map(|f| (node_keys.get(pda, f.node()), f.count())).collect();
        let key = hash128(&(0x7E47u16, frames));
        self.first_chars.get_or_compute(key, || {
            // The quick proof first: the top's byte edges alone take any text.
            if text::text_closed(pda, top) {
                return Some(text::Refused::default());
            }
            let refused = viable::first_char_refused(pda, limits, context, configs);
            configs.shrink();
            refused
        })
    }

    /// The text tokens split for a loop refusing `refused`, made on first use.
    pub(super) fn char_lists(&self, refused: text::Refused) -> Arc<text::CharLists> {
        self.char_lists.get_or_compute(refused, || Arc::new(text::CharLists::new(&self.text, &self.trie, refused)))
    }

    /// The text tokens holding a character led by one of `leads`, as a trie: the tokens a
    /// loop of one character an iteration walks when it takes some of those characters and
    /// refuses others ([`text::TextTokens::holding_leads`]). Made once per set of leads:
    /// under `[^\s-]` the set is every lead byte, 54k of the DeepSeek tokenizer's tokens, and
    /// building their trie took 18 ms of a 24 ms first walk when it was made per walk (now a
    /// copy of the vocabulary trie's nodes, [`ByteTrie::filtered`]).
    pub(super) fn holding_leads(&self, leads: u128) -> Arc<ByteTrie> {
        self.lead_tries.get_or_compute(leads, || Arc::new(self.text.holding_leads(&self.trie, leads)))
    }

    /// Clears from `bits` the tokens whose first byte `refused` says (as a whole token and
    /// every longer one starting with it).
    pub(super) fn clear_first_bytes(&self, bits: &mut [u32], refused: impl Fn(u8) -> bool) {
        let trie = &self.trie;
        let mut i = 0;
        while let Some(root) = trie.nodes.get(i) {
            if refused(root.byte) {
                clear_bits(bits, trie.ids_at(root));
                let below = self.subtree_ids(root.byte);
                bits.iter_mut().zip(below).for_each(|(w, &b)| *w &= !b);
            }
            i = root.end as usize;
        }
    }

    /// The one entry point of the matcher: writes to `mask` (all of it: its old content does
    /// not matter) the tokens allowed at each of the stack tops `tops` of `stacks` (what its
    /// context's cached [`Entry`] accepts, plus the stack-dependent tokens the real stack
    /// accepts), computing and caching entries on a miss. The first context's set is
    /// written over the mask rather than cleared and OR-ed in: one pass over 16 KB instead
    /// of two at 129k tokens. Returns the parse limits that cut a path. `stacks` keeps its
    /// frames (what a call adds is dropped again); `scratch` holds the buffers, so a call on
    /// cached states does not allocate.
    pub(crate) fn fill(
        &self,
        target: &Target,
        tops: &[FrameId],
        stacks: &mut Stacks,
        scratch: &mut Scratch,
        mask: &mut [u32],
    ) -> Cut {
        // Answers about frames a rollback dropped are forgotten first.
        if let Some(low) = stacks.take_low_water() {
            scratch.suffix_memo.forget_from(low);
        }
        let cap = self.max_token_len.saturating_add(1);
        let mut cut = Cut::NONE;
        let mut written = false;
        for &top in tops {
            scratch.context.build(target, cap, stacks.frames(), top);
            let entry = self.entry(target, &scratch.context, &mut scratch.walk);
            cut |= entry.cut();
            if cut.out_of_fuel() {
                // The mask is an error now: classifying the other tops would be wasted work.
                break;
            }
            if written {
                entry.add_accepted(mask);
            } else {
                entry.write_accepted(mask);
                written = true;
            }
            if entry.has_suffixes() {
                let bottom = scratch.context.bottom().unwrap_or(top);
                let below = stacks.frame(bottom).map_or(BOTTOM, |f| f.parent());
                let key = scratch.context.key;
                if let Some(ids) = scratch.suffix_memo.get(key, below) {
                    for &id in ids {
                        set_bit(mask, id);
                    }
                    continue;
                }
                let mut added = std::mem::take(&mut scratch.suffix_added);
                added.clear();
                let suffixes = &mut scratch.suffixes;
                let ((), walk_cut) = stacks
                    .with_own_cut(|stacks| entry.add_suffixes(target.pda, stacks, bottom, suffixes, mask, &mut added));
                // A walk a limit cut short is not an answer to keep.
                if walk_cut.is_empty() {
                    scratch.suffix_memo.insert(key, below, &added);
                }
                scratch.suffix_added = added;
            }
        }
        if !written {
            mask.fill(0);
        }
        cut
    }

    /// The cached entry for `ctx.key`, computing it from `ctx.frames` (bottom first) on a
    /// miss. With `ctx.relaxed`, one loop frame of the context is classified once with its
    /// bounds ignored (cached under `ctx.base_key`), and the entry for its actual count is
    /// derived from that classification.
    pub(super) fn entry(&self, target: &Target, ctx: &Context, scratch: &mut WalkScratch) -> Arc<Entry> {
        let Target { pda, keys: node_keys, limits } = *target;
        let Context { key, base_key, relaxed, .. } = *ctx;
        let context: &[Frame] = &ctx.frames;
        if let Some(e) = self.cache.entry(key) {
            return e;
        }
        let classified = if relaxed.is_some() { self.cache.classified(base_key) } else { None };
        if let (None, [frame]) = (relaxed, context) {
            if let Some(entry) = self.excluding_entry(pda, node_keys, limits, frame, scratch) {
                let entry = Arc::new(entry);
                if entry.cut.out_of_fuel() {
                    return entry;
                }
                self.cache.insert(key, Cached::Entry(entry.clone()), entry.memory_usage());
                return entry;
            }
        }
        let classified = classified.unwrap_or_else(|| {
            let relaxed_index = relaxed.map(|r| r.context_index);
            Arc::new(Classified::compute(self, pda, node_keys, limits, context, relaxed_index, scratch))
        });
        if classified.cut.out_of_fuel() {
            // Out of fuel: an error for this constraint's budget, not an entry to share with
            // constraints whose budget may be larger.
            return Arc::new(classified.derive(self, relaxed));
        }
        // Counts whose conditions come out alike share one derived entry: look it up under
        // the count's class before deriving.
        let class_key = relaxed.map(|r| classified.count_class_key(base_key, r));
        let shared = class_key.and_then(|k| self.cache.entry(k));
        let derived = shared.is_none();
        let entry = shared.unwrap_or_else(|| Arc::new(classified.derive(self, relaxed)));
        if relaxed.is_some() && !self.cache.has_classified(base_key) {
            self.cache.insert(base_key, Cached::Classified(classified.clone()), classified.memory_usage());
        }
        if let (Some(k), true) = (class_key, derived) {
            self.cache.insert(k, Cached::Entry(entry.clone()), 0);
        }
        let size = if derived { entry.memory_usage() } else { 0 };
        self.cache.insert(key, Cached::Entry(entry.clone()), size);
        // Not kept by the cache: its bitset serves the next miss.
        if let Ok(classified) = Arc::try_unwrap(classified) {
            classified.recycle(scratch);
        }
        entry
    }
}

/// How many dropped matchers' walk buffers a [`TokenIndex`] keeps for new ones.
pub(super) const MAX_SPARE_WALKS: usize = 8;

/// How many refused sets' [`TokenIndex::char_lists`] are kept (up to 0.5 MB each for a 129k
/// vocabulary; a schema's loops refuse a few sets).
pub(super) const MAX_CHAR_LISTS: usize = 16;

/// How many sets of lead bytes' [`TokenIndex::holding_leads`] tries are kept (up to 3 MB
/// each at 129k tokens). All of JSONSchemaBench makes three, 3.5 MB together.
pub(super) const MAX_LEAD_TRIES: usize = 4;

/// How many contexts' [`TokenIndex::first_char_refused`] answers are remembered (then
/// forgotten at once: recomputing one costs tens of microseconds).
pub(super) const MAX_FIRST_CHARS: usize = 1 << 16;

/// How many unions of first-byte subtrees [`TokenIndex::subtree_union`] keeps (a bitset over
/// the vocabulary each, 16 KB for 129k tokens; then all are forgotten at once). Walks that
/// replay whole subtrees mostly replay the same sets (every byte a string body accepts), so
/// few are needed.
pub(super) const MAX_SUBTREE_UNIONS: usize = 256;

impl TokenIndex {
    /// The tokens below any of the first bytes `bytes` (sorted, distinct), as one bitset:
    /// computed once per set, so replaying two hundred whole subtrees is one pass over the
    /// mask instead of two hundred.
    pub(super) fn subtree_union(&self, bytes: &[u8]) -> Arc<[u32]> {
        let mut key = ByteSet::default();
        for &b in bytes {
            key.insert(b);
        }
        self.unions.get_or_compute(key, || {
            let mut union = vec![0u32; self.vocab.mask_words()];
            for &b in bytes {
                or_into(&mut union, self.subtree_ids(b));
            }
            union.into()
        })
    }
}

/// The engine's default memory budget: 256 MiB for everything a [`TokenIndex`] and the
/// constraints compiled against it keep for reuse (see [`IndexConfig::with_memory_budget`]).
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;

/// The bounds of a [`TokenIndex`]'s caches, shared by every constraint compiled against it
/// (not per constraint, as [`crate::Limits`] are). Build with `IndexConfig::default()`
/// (the [`DEFAULT_MEMORY_BUDGET`]), [`IndexConfig::with_memory_budget`], or the setters.
///
/// What the budget covers: the shared mask cache (entries, classifications, subtree memos,
/// suffix tries), the determinised rules, and the compiled constraints a caller keeps in a
/// [`crate::matcher::ConstraintCache`]. The index's small memos (first characters, split
/// text tokens, subtree unions, tries of the text tokens by lead bytes) are bounded by
/// count, about 19 MB at 129k tokens over all of JSONSchemaBench (at most 27 MB), which the
/// budget's remaining sixteenth (16 MiB by default) stands for. Not covered: the
/// tokenizer's own tables ([`TokenIndex::memory_usage`]) and the constraints and matchers in
/// use.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexConfig {
    /// Approximate heap bytes of the shared mask cache, both generations together (9/16 of
    /// the budget: 144 MiB by default). Past half of it a shard's young generation becomes
    /// the old one and the previous old one is dropped (recomputing a dropped entry costs a
    /// trie walk).
    pub cache_bytes: usize,
    /// Approximate heap bytes of the determinised rules kept for the constraints compiled
    /// against the index (a quarter of the budget: 64 MiB by default).
    pub rule_cache_bytes: usize,
    /// Approximate heap bytes of compiled constraints that callers keep for reuse, by
    /// [`crate::Constraint::memory_usage`] (an eighth of the budget: 32 MiB by default). The
    /// index does not hold constraints itself; a server's or a binding's
    /// [`crate::matcher::ConstraintCache`] takes this bound.
    pub constraint_cache_bytes: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig::with_memory_budget(DEFAULT_MEMORY_BUDGET)
    }
}

impl IndexConfig {
    /// The bounds for a budget of about `bytes` in all: 9/16 for the mask cache, 1/4 for the
    /// determinised rules, 1/8 for kept constraints, and 1/16 left for the small memos.
    pub fn with_memory_budget(bytes: usize) -> Self {
        let sixteenth = bytes / 16;
        IndexConfig {
            cache_bytes: sixteenth * 9,
            rule_cache_bytes: sixteenth * 4,
            constraint_cache_bytes: sixteenth * 2,
        }
    }

    /// The budget these bounds add up to (with the memos' sixteenth).
    pub fn memory_budget(&self) -> usize {
        let sum = self.cache_bytes.saturating_add(self.rule_cache_bytes).saturating_add(self.constraint_cache_bytes);
        sum.saturating_add(sum / 15)
    }

    /// Sets [`IndexConfig::cache_bytes`].
    pub fn with_cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Sets [`IndexConfig::rule_cache_bytes`].
    pub fn with_rule_cache_bytes(mut self, bytes: usize) -> Self {
        self.rule_cache_bytes = bytes;
        self
    }

    /// Sets [`IndexConfig::constraint_cache_bytes`].
    pub fn with_constraint_cache_bytes(mut self, bytes: usize) -> Self {
        self.constraint_cache_bytes = bytes;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_splits_into_the_caches_and_adds_up_again() {
        let c = IndexConfig::default();
        assert_eq!(c, IndexConfig::with_memory_budget(DEFAULT_MEMORY_BUDGET));
        assert_eq!((c.cache_bytes, c.rule_cache_bytes, c.constraint_cache_bytes), (144 << 20, 64 << 20, 32 << 20));
        assert_eq!(c.memory_budget(), DEFAULT_MEMORY_BUDGET);
        let index = TokenIndex::with_config(Vocabulary::bytes(), IndexConfig::with_memory_budget(16 << 20));
        assert_eq!(index.config().cache_bytes, 9 << 20);
    }

    /// The trie of text tokens holding a character of some lead bytes: exactly those tokens,
    /// made once per set of leads.
    #[test]
    fn tokens_holding_leads_are_made_once_per_set() {
        let pieces = ["a", "\u{e9}", "a\u{e9}", "\u{bf}", "\u{65e5}\u{672c}", "b\u{20ac}", "\"\u{e9}", "z"];
        let mut tokens: Vec<Vec<u8>> = pieces.iter().map(|p| p.as_bytes().to_vec()).collect();
        tokens.push(Vec::new());
        let eos = [crate::TokenId(pieces.len() as u32)];
        let index = TokenIndex::new(Vocabulary::new(tokens, &[], &eos).expect("vocabulary"));
        // é and ¿ are led by 0xC3 and 0xC2; € by 0xE2, which shares é's bit (a superset is
        // harmless: the walk classifies what it is given); `"é` is no text.
        let leads = text::lead_bit(0xC3) | text::lead_bit(0xC2);
        let trie = index.holding_leads(leads);
        let mut ids = trie.ids.to_vec();
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3, 5]);
        assert!(Arc::ptr_eq(&trie, &index.holding_leads(leads)));
        // The trie is the one a build from any order gives.
        let vocab = index.vocab();
        let rebuilt = ByteTrie::build([5u32, 3, 2, 1].map(|id| (vocab.token_bytes(crate::TokenId(id)), id)));
        assert_eq!((trie.nodes.clone(), trie.ids.clone()), (rebuilt.nodes, rebuilt.ids));
        assert_eq!(index.holding_leads(text::lead_bit(0xE6)).ids.to_vec(), [4]);
    }
}

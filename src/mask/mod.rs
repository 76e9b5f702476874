//! Stage 4: per-state token masks over a vocabulary trie.
//!
//! Input: a [`Vocabulary`] (once per tokenizer) and, per automaton state, a *context*: the
//! stack top plus the few frames below it that decide what the top can do (see
//! [`Context`] for how the context is chosen). Output: an [`Entry`] per context, cached
//! in the [`TokenIndex`] and shared by every constraint built over that tokenizer.
//!
//! ## How
//!
//! An entry is computed once by walking the vocabulary's byte trie ([`trie::ByteTrie`]) from
//! the context: shared prefixes are fed once, and a byte that kills every stack skips its
//! whole subtree. The parse state after each trie node is an interned configuration whose
//! steps are computed once and then read from a table ([`configs`]), and a single stack that
//! only consumes bytes (a string body) runs as a tight loop of automaton steps (`PlainRun`).
//! Each token lands in one of three classes:
//!
//! - **accepted**: the context consumes the whole token;
//! - **rejected**: it dies inside the context and never left it;
//! - **stack-dependent**: the context's bottom rule completed after `j` bytes and the rest of the
//!   token (`token[j..]`) depends on frames below the context. Those suffixes are kept in a small
//!   suffix trie and checked against the real stack at run time (`Entry::add_suffixes`).
//!
//! Accepted sets are stored as a sorted id list or a bitset, whichever is smaller.
//! Entries are keyed by structural fingerprints, so the JSON string body of every schema
//! compiled against one tokenizer is classified once.
//!
//! One kind of context is derived instead of walked: an object key that must not be one of
//! the declared property names (the automaton stage's `ExcludedWords`). Its entry is the
//! shared string rest's, minus the tokens that spell a declared name and its closing quote,
//! so each schema's set of names costs a few trie look-ups instead of a walk.
//!
//! Two kinds of context walk only the tokens that are not text ([`text`]): a string body
//! that takes any text once its first character is allowed (every text token starting
//! with another is accepted; [`viable`] finds these), and a loop of one character an
//! iteration (a text token's conditions depend on its number of characters and where its
//! first refused character is).

mod configs;
mod context;
mod text;
mod viable;
pub(crate) mod trie;

use crate::automaton::exec::{Frame, Runner, Stacks, BOTTOM, CUT_FUEL, RELAXED};
use crate::automaton::keys::NodeKeys;
use crate::automaton::{Pda, Recognizer};
pub(crate) use context::{Context, Target};
pub use crate::util::is_allowed;
pub(crate) use crate::util::set_bit;
use crate::util::{clear_bits, hash128, or_into, Hasher128};
use crate::vocab::Vocabulary;
use crate::Limits;
// Keys are already 128-bit hashes: a cheap hasher is enough.
use rustc_hash::FxHashMap as HashMap;
use configs::{Configs, State};
use std::sync::{Arc, Mutex};
use text::TextTokens;
use trie::ByteTrie;

/// Everything that depends only on the tokenizer: the vocabulary, its byte trie, and the cache
/// of per-state masks shared by every constraint compiled against it. Build once per tokenizer
/// (≈ a fraction of a second for 129k tokens) and share the `Arc`.
pub struct TokenIndex {
    vocab: Vocabulary,
    trie: ByteTrie,
    /// Per first byte, the tokens of two or more bytes starting with it, as a bitset over
    /// the mask width (empty when there are none): replayed memos OR these in whole.
    subtree_sets: Box<[Box<[u32]>]>,
    /// The vocabulary split into text tokens and the rest, for the string bodies and loops
    /// that treat all text alike (see [`text`]).
    text: TextTokens,
    /// What a context does with text, when its first character decides
    /// ([`viable::first_char_refused`]), by the context's node keys: string bodies recur
    /// across schemas.
    first_chars: Mutex<HashMap<u128, Option<text::Refused>>>,
    /// The text tokens split for loops of one character an iteration, by the characters
    /// the loop refuses ([`text::CharLists`]).
    char_lists: Mutex<HashMap<text::Refused, Arc<text::CharLists>>>,
    /// Length in bytes of the longest grammar token: counted loops whose remaining bounds
    /// exceed it behave alike for every token, which bounds the number of distinct entries.
    max_token_len: u32,
    cache: Mutex<Cache>,
    /// Unions of first-byte subtrees by their set of first bytes (see
    /// [`TokenIndex::subtree_union`]).
    unions: Mutex<HashMap<[u64; 4], Arc<[u32]>>>,
}

/// The shared mask cache, in two generations: new results go to `young`; when `young` holds
/// half the byte budget it becomes `old` and the previous `old` is dropped. A hit in `old`
/// is copied back into `young`, so what is still in use survives a rotation, and no single
/// mask call ever pays for clearing the whole cache (the dropped generation is freed on a
/// background thread: freeing a gigabyte of entries takes far longer than a mask).
#[derive(Default)]
struct Cache {
    young: Generation,
    old: Generation,
}

#[derive(Default)]
struct Generation {
    entries: Sharded<Arc<Entry>>,
    classified: Sharded<Arc<Classified>>,
    /// First-byte subtrees of the trie walked from equivalent states (see [`SubtreeMemo`]).
    subtrees: Sharded<Arc<SubtreeMemo>>,
    /// Suffix tries of entries by their list of stack-dependent tokens (see
    /// [`TokenIndex::suffix_trie`]).
    suffixes: Sharded<Arc<ByteTrie>>,
    bytes: usize,
}

/// A map from 128-bit keys split in [`SHARDS`] maps by the key's low bits, so that growing
/// it rehashes one small shard at a time: a single map of 300k entries doubling took one
/// mask call 20–50 ms.
struct Sharded<V> {
    shards: Box<[HashMap<u128, V>]>,
}

/// Shards of a [`Sharded`] map.
const SHARDS: usize = 64;

impl<V> Default for Sharded<V> {
    fn default() -> Self {
        Sharded { shards: (0..SHARDS).map(|_| HashMap::default()).collect() }
    }
}

impl<V> Sharded<V> {
    /// The shard holding `key`.
    #[inline]
    fn shard_of(key: &u128) -> usize {
        *key as usize % SHARDS
    }

    fn get(&self, key: &u128) -> Option<&V> {
        self.shards[Self::shard_of(key)].get(key)
    }

    fn contains_key(&self, key: &u128) -> bool {
        self.shards[Self::shard_of(key)].contains_key(key)
    }

    fn insert(&mut self, key: u128, value: V) {
        self.shards[Self::shard_of(&key)].insert(key, value);
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    fn is_empty(&self) -> bool {
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
    fn make_room(&mut self, size: usize, limit: usize) {
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

    fn entries_len(&self) -> usize {
        self.young.entries.len() + self.old.entries.len()
    }

    fn bytes(&self) -> usize {
        self.young.bytes + self.old.bytes
    }
}

/// The outcome of walking the descendants of one first-byte trie node from one parse state:
/// which of their tokens were accepted (see [`SubtreeAccepted`]) and which became
/// stack-dependent. The state is identified by the node keys of its stacks, so
/// states that differ only in what came before — the start of every "other property name",
/// whatever names the schema declares, once its first byte left the declared names — share
/// the walk: the second schema copies bits instead of walking most of the vocabulary again.
#[derive(Debug)]
struct SubtreeMemo {
    accepted: SubtreeAccepted,
    pending: Box<[(u32, u32)]>,
}

/// The accepted tokens of a [`SubtreeMemo`], in the form that is cheaper to replay: the ids
/// themselves when few of the subtree's tokens survived (replaying costs the survivors, not
/// the subtree); the ids that did not when nearly all did (the subtree's tokens are then
/// OR-ed in a word at a time from [`TokenIndex::subtree_ids`], the exceptions cleared: a
/// string body accepts most of the vocabulary, and setting 100k bits one by one was most
/// of its cost); else a bitset over the subtree's positions in trie order.
#[derive(Debug)]
enum SubtreeAccepted {
    Ids(Box<[u32]>),
    AllBut(Box<[u32]>),
    Positions(Box<[u64]>),
}

impl SubtreeMemo {
    fn memory_usage(&self) -> usize {
        let accepted = match &self.accepted {
            SubtreeAccepted::Ids(v) | SubtreeAccepted::AllBut(v) => v.len() * 4,
            SubtreeAccepted::Positions(v) => v.len() * 8,
        };
        std::mem::size_of::<Self>() + accepted + self.pending.len() * 8
    }

    /// Adds the memo's accepted tokens (the subtree is the one below first byte `byte`, its
    /// tokens are `ids`, in trie order); a whole subtree is only noted in `whole`.
    fn replay(&self, byte: u8, ids: &[u32], acc: &mut Accepted, whole: &mut WholeSubtrees) {
        match &self.accepted {
            SubtreeAccepted::AllBut(except) => {
                whole.bytes.push(byte);
                whole.excepted.extend_from_slice(except);
                acc.always_count += ids.len().saturating_sub(except.len());
            }
            SubtreeAccepted::Ids(list) => {
                for &id in list.iter() {
                    acc.add(id, Cond::Always);
                }
            }
            SubtreeAccepted::Positions(bits) => {
                for (w, &word) in bits.iter().enumerate() {
                    let mut word = word;
                    while word != 0 {
                        let k = w * 64 + word.trailing_zeros() as usize;
                        if let Some(&id) = ids.get(k) {
                            acc.add_fresh(id);
                        }
                        word &= word - 1;
                    }
                }
            }
        }
    }
}

impl TokenIndex {
    /// Builds the trie for `vocab`.
    pub fn new(vocab: Vocabulary) -> Arc<TokenIndex> {
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
        let text = TextTokens::new(&vocab);
        Arc::new(TokenIndex {
            vocab,
            trie,
            subtree_sets,
            text,
            first_chars: Mutex::new(HashMap::default()),
            char_lists: Mutex::new(HashMap::default()),
            max_token_len,
            cache: Mutex::new(Cache::default()),
            unions: Mutex::new(HashMap::default()),
        })
    }

    /// The tokens below first byte `byte` (see [`TokenIndex::subtree_sets`]).
    fn subtree_ids(&self, byte: u8) -> &[u32] {
        self.subtree_sets.get(byte as usize).map_or(&[], |s| s)
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    /// Number of cached per-state entries and their approximate heap bytes.
    pub fn cache_stats(&self) -> (usize, usize) {
        match self.cache.lock() {
            Ok(c) => (c.entries_len(), c.bytes()),
            Err(_) => (0, 0),
        }
    }

    /// Heap bytes of the tokenizer-wide tables (trie, per-first-byte sets, text tokens),
    /// without the mask cache.
    pub fn memory_usage(&self) -> usize {
        self.trie.memory_usage()
            + self.subtree_sets.iter().map(|s| s.len() * 4).sum::<usize>()
            + self.text.memory_usage()
            + self.char_lists.lock().map_or(0, |m| m.values().map(|l| l.memory_usage()).sum())
    }

    /// [`viable::first_char_refused`] for `context`, remembered by its frames' node keys and
    /// counts.
    fn first_char_refused(
        &self,
        pda: &Pda,
        node_keys: &NodeKeys,
        limits: &Limits,
        context: &[Frame],
    ) -> Option<text::Refused> {
        let top = context.last()?.node;
        let frames: Vec<(u128, u32)> = context.iter().map(|f| (node_keys.get(pda, f.node), f.count)).collect();
        let key = hash128(&(0x7E47u16, frames));
        memoized(&self.first_chars, key, MAX_FIRST_CHARS, || {
            // The quick proof first: the top's byte edges alone take any text.
            if text::text_closed(pda, top) {
                return Some(text::Refused::default());
            }
            let mut configs = CONFIGS.with(|c| std::mem::take(&mut *c.borrow_mut()));
            let refused = viable::first_char_refused(pda, limits, context, &mut configs);
            configs.shrink();
            CONFIGS.with(|c| *c.borrow_mut() = configs);
            refused
        })
    }

    /// The text tokens split for a loop refusing `refused`, made on first use.
    fn char_lists(&self, refused: text::Refused) -> Arc<text::CharLists> {
        memoized(&self.char_lists, refused, MAX_CHAR_LISTS, || Arc::new(text::CharLists::new(&self.text, &self.trie, refused)))
    }

    /// Clears from `bits` the tokens whose first byte `refused` says (as a whole token and
    /// every longer one starting with it).
    fn clear_first_bytes(&self, bits: &mut [u32], refused: impl Fn(u8) -> bool) {
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

    /// The one entry point of the matcher: adds to `mask` the tokens allowed at each of the
    /// stack tops `tops` of `stacks` (what its context's cached [`Entry`] accepts, plus the
    /// stack-dependent tokens the real stack accepts), computing and caching entries on a
    /// miss. Returns the parse limits that cut a path (bits of `exec::CUT_*`). `stacks` is
    /// restored; `scratch` holds the buffers, so a call on cached states does not allocate.
    pub(crate) fn fill(
        &self,
        target: &Target,
        tops: &[u32],
        stacks: &mut Stacks,
        scratch: &mut Scratch,
        mask: &mut [u32],
    ) -> u8 {
        let cap = self.max_token_len.saturating_add(1);
        let mut cut = 0;
        for &top in tops {
            scratch.context.build(target, cap, &stacks.arena, top);
            let entry = self.entry(target, &scratch.context);
            cut |= entry.cut();
            entry.add_accepted(mask);
            if entry.has_suffixes() {
                let bottom = scratch.context.bottom().unwrap_or(top);
                entry.add_suffixes(target.pda, stacks, bottom, &mut scratch.suffixes, mask);
            }
        }
        cut
    }

    /// The cached entry for `ctx.key`, computing it from `ctx.frames` (bottom first) on a
    /// miss. With `ctx.relaxed`, one loop frame of the context is classified once with its
    /// bounds ignored (cached under `ctx.base_key`), and the entry for its actual count is
    /// derived from that classification.
    fn entry(&self, target: &Target, ctx: &Context) -> Arc<Entry> {
        let Target { pda, keys: node_keys, limits } = *target;
        let Context { key, base_key, relaxed, .. } = *ctx;
        let context: &[Frame] = &ctx.frames;
        let classified = {
            let Ok(mut c) = self.cache.lock() else { return Arc::new(Entry::empty()) };
            if let Some(e) = cache_get!(&mut c, entries, &key, Entry::memory_usage) {
                return e;
            }
            if relaxed.is_some() {
                cache_get!(&mut c, classified, &base_key, Classified::memory_usage)
            } else {
                None
            }
        };
        if let (None, [frame]) = (relaxed, context) {
            if let Some(entry) = self.excluding_entry(pda, node_keys, limits, frame) {
                let entry = Arc::new(entry);
                if entry.cut & CUT_FUEL != 0 {
                    return entry;
                }
                if let Ok(mut c) = self.cache.lock() {
                    c.make_room(entry.memory_usage(), limits.max_mask_cache_bytes);
                    c.young.entries.insert(key, entry.clone());
                }
                return entry;
            }
        }
        let classified = classified.unwrap_or_else(|| {
            let relaxed_index = relaxed.map(|r| r.context_index);
            Arc::new(Classified::compute(self, pda, node_keys, limits, context, relaxed_index))
        });
        if classified.cut & CUT_FUEL != 0 {
            // Out of fuel: an error for this constraint's budget, not an entry to share with
            // constraints whose budget may be larger.
            return Arc::new(classified.derive(self, relaxed, limits));
        }
        // Counts whose conditions come out alike share one derived entry: look it up under
        // the count's class before deriving.
        let class_key = relaxed.map(|r| classified.count_class_key(base_key, r));
        let shared = class_key.and_then(|k| {
            let mut c = self.cache.lock().ok()?;
            cache_get!(&mut c, entries, &k, Entry::memory_usage)
        });
        let derived = shared.is_none();
        let entry = shared.unwrap_or_else(|| Arc::new(classified.derive(self, relaxed, limits)));
        if let Ok(mut c) = self.cache.lock() {
            let mut size = if derived { entry.memory_usage() } else { ALIAS_BYTES };
            let store_classified = relaxed.is_some() && !c.young.classified.contains_key(&base_key);
            if store_classified {
                size += classified.memory_usage();
            }
            c.make_room(size, limits.max_mask_cache_bytes);
            if store_classified {
                c.young.classified.insert(base_key, classified.clone());
            }
            if let (Some(k), true) = (class_key, derived) {
                c.young.bytes += ALIAS_BYTES;
                c.young.entries.insert(k, entry.clone());
            }
            c.young.entries.insert(key, entry.clone());
        }
        // Not kept by the cache: its bitset serves the next miss.
        if let Ok(classified) = Arc::try_unwrap(classified) {
            classified.recycle();
        }
        entry
    }
}

impl TokenIndex {
    /// The entry of a context whose single frame is at a node of a string-exclusion rule
    /// ([`crate::automaton::ExcludedWords`]), derived from the classification of the shared
    /// string rest instead of a walk: every schema's "other property name" differs only by
    /// its declared names, and a walk costs 0.1–5 ms where this costs a copy of one bitset.
    /// `None` when the frame is at no such node.
    fn excluding_entry(
        &self,
        pda: &Pda,
        node_keys: &NodeKeys,
        limits: &Limits,
        frame: &Frame,
    ) -> Option<Entry> {
        let (rest, words) = pda.excluded.at(frame.node)?;
        // The frame's own byte edges take the first byte; its calls are tops of their own.
        let node = &pda.nodes[frame.node as usize];
        let mut firsts = [0u64; 4];
        for b in 0..=255u8 {
            if node.step(b).is_some() {
                firsts[b as usize / 64] |= 1 << (b % 64);
            }
        }
        let first_byte = |b: u8| firsts[b as usize / 64] >> (b % 64) & 1 == 1;
        let like = Frame { node: rest, ..*frame };
        let whole_stack = like.parent == BOTTOM;
        let key = hash128(&(node_keys.get(pda, rest), 0x5E57u16, whole_stack, firsts));
        let cached =
            self.cache.lock().ok().and_then(|mut c| cache_get!(&mut c, classified, &key, Classified::memory_usage));
        let classified = cached.unwrap_or_else(|| {
            let mut classified = Classified::compute(self, pda, node_keys, limits, &[like], None);
            classified.keep_first_bytes(self, first_byte);
            let classified = Arc::new(classified);
            if classified.cut & CUT_FUEL != 0 {
                return classified;
            }
            if let Ok(mut c) = self.cache.lock() {
                c.make_room(classified.memory_usage(), limits.max_mask_cache_bytes);
                c.young.classified.insert(key, classified.clone());
            }
            classified
        });
        Some(classified.derive_excluding(self, words, limits))
    }
}

thread_local! {
    /// The configuration table of [`Classified::compute`]'s walks, kept for its buffers.
    static CONFIGS: std::cell::RefCell<Configs> = std::cell::RefCell::new(Configs::default());
    /// A zeroed bitset over the mask width for [`Classified::compute`]: a miss reuses it
    /// instead of allocating (and faulting in) a fresh 16 KB for a 129k vocabulary.
    static SPARE_BITS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// The conditional list of the last walk, emptied and kept for its buffer: a `maxLength`
    /// string lists most of the vocabulary (2 MB), and growing a fresh one faults in its
    /// pages every time.
    static SPARE_CONDITIONAL: std::cell::RefCell<Vec<(u32, Cond)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A zeroed bitset of `words` words, the spare one when it fits.
fn zeroed_bits(words: usize) -> Vec<u32> {
    let spare = SPARE_BITS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if spare.len() == words {
        spare
    } else {
        vec![0; words]
    }
}

/// `memo`'s value for `key`, computed and kept on a miss (all forgotten at once when `max` are
/// kept); computed without keeping when the lock is poisoned.
fn memoized<K: std::hash::Hash + Eq, V: Clone>(
    memo: &Mutex<HashMap<K, V>>,
    key: K,
    max: usize,
    compute: impl FnOnce() -> V,
) -> V {
    if let Some(known) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return known;
    }
    let value = compute();
    if let Ok(mut m) = memo.lock() {
        if m.len() >= max {
            m.clear();
        }
        m.insert(key, value.clone());
    }
    value
}

/// How many refused sets' [`TokenIndex::char_lists`] are kept (up to 0.5 MB each for a 129k
/// vocabulary; a schema's loops refuse a few sets).
const MAX_CHAR_LISTS: usize = 32;

/// How many contexts' [`TokenIndex::first_char_refused`] answers are remembered (then
/// forgotten at once: recomputing one costs tens of microseconds).
const MAX_FIRST_CHARS: usize = 1 << 16;

/// What the cache accounts for a second key of an entry it already holds (the map slot and
/// the `Arc`).
const ALIAS_BYTES: usize = 64;

/// The loop frame of a mask context whose count is handled by derivation instead of by
/// separate classification: its position in the context (bottom first), its actual count
/// and its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RelaxedLoop {
    pub context_index: usize,
    pub count: u32,
    pub min: u32,
    pub max: u32,
}

/// When a token option is valid, in terms of the relaxed loop's actual count `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cond {
    /// Valid whatever the count.
    Always,
    /// Still inside the loop after starting `k` more iterations: needs `c + k ≤ max`.
    Inside(u32),
    /// Left the loop after `k` more iterations: needs `min ≤ c + k ≤ max`.
    Exited(u32),
}

impl Cond {
    fn holds(self, r: Option<RelaxedLoop>) -> bool {
        let Some(r) = r else { return true };
        let (c, min, max) = (r.count as u64, r.min as u64, r.max as u64);
        match self {
            Cond::Always => true,
            Cond::Inside(k) => c + k as u64 <= max,
            Cond::Exited(k) => min <= c + k as u64 && c + k as u64 <= max,
        }
    }

    /// The iterations the condition counts (0 for [`Cond::Always`]).
    fn iterations(self) -> u32 {
        match self {
            Cond::Always => 0,
            Cond::Inside(k) | Cond::Exited(k) => k,
        }
    }

    fn of_count(count: u32, is_loop: bool) -> Cond {
        if count & RELAXED == 0 {
            Cond::Always
        } else if is_loop {
            Cond::Inside(count & !RELAXED)
        } else {
            Cond::Exited(count & !RELAXED)
        }
    }
}

/// The vocabulary classified for one context, before a relaxed loop's count is applied.
#[derive(Debug)]
pub(crate) struct Classified {
    /// Tokens the context consumes whole whatever the count, as a bitset over the mask width
    /// (filled in place: no large list is built and copied for the common case).
    always: Vec<u32>,
    /// Number of bits set in `always`.
    always_count: usize,
    /// The ids of `always` as a list, when few (see [`Accepted::always_ids`]).
    always_ids: Option<Vec<u32>>,
    /// Tokens the context consumes whole only under a condition on the count.
    conditional: Conditional,
    /// Stack-dependent tokens: (id, offset of the suffix, when).
    pending: Vec<(u32, u32, Cond)>,
    /// The largest number of loop iterations any condition above counts (0 without any).
    max_iterations: u32,
    /// The parse limits that cut a path while classifying (bits of `exec::CUT_*`): the
    /// classification may then miss tokens, which [`Entry::cut`] reports at run time.
    cut: u8,
}

/// The conditionally accepted tokens of a [`Classified`], in the form that derives an
/// entry cheaply.
#[derive(Debug)]
enum Conditional {
    /// Few: (id, when), each tested for the count.
    List(Vec<(u32, Cond)>),
    /// Many (inside a `maxLength` string nearly every token): see [`ByCount`].
    ByCount(ByCount),
}

/// The conditional tokens of a [`Classified`] arranged so that deriving the accepted set for
/// one count costs a copy of one bitset plus a look at the tokens that count may exclude,
/// instead of a test of every conditional token (inside a `maxLength` string nearly every
/// token is conditional, and each new count derives an entry).
///
/// A token is allowed for count `c` when one of its conditions holds: `Inside(k)` when
/// `k ≤ max − c`, `Exited(k)` when `min − c ≤ k ≤ max − c`. So a token whose smallest `Inside`
/// iteration number is at most `max − c` is allowed whatever its other conditions; only the
/// tokens above that — few, unless the count nears its maximum — need checking.
#[derive(Debug)]
struct ByCount {
    /// `always` plus every conditional token: the accepted set when every condition holds.
    all: Box<[u32]>,
    all_count: usize,
    /// Conditional tokens outside `always`, by decreasing smallest `Inside` iteration number
    /// ([`ONLY_EXITS`] for a token without one): (that number, id, its `Exited` iteration
    /// numbers as a range of `exits`).
    candidates: Box<[(u32, u32, u32, u32)]>,
    exits: Box<[u32]>,
    /// Text tokens left to a shortcut ([`text::ByChars`]), a group per number of
    /// characters or position of the first refused one, in the order of `candidates`:
    /// (smallest `Inside` iteration number, the group's number in `lists`, `Exited` numbers
    /// as a range of `exits`). Derived from lists shared per tokenizer, not listed here: a
    /// `maxLength` string's quarter million conditions were 3 MB to write and fault in per
    /// new context.
    groups: Box<[text::Group]>,
    lists: Option<Arc<text::CharLists>>,
}

/// In [`ByCount::candidates`]: the token has no `Inside` condition.
const ONLY_EXITS: u32 = u32::MAX;

impl ByCount {
    /// Arranges `conditional` (id, when) over the unconditional set `always`. Linear when the
    /// conditions of each token are adjacent, as the walk adds them (a token sits at one trie
    /// node); otherwise they are sorted by id first.
    /// With `text`, the text tokens are added by the groups [`text::units_loop`]'s shortcut
    /// found for them.
    fn new(always: &[u32], conditional: &[(u32, Cond)], text: Option<(&TextTokens, text::ByChars)>) -> ByCount {
        let mut by_count = if conditions_adjacent(always.len(), conditional) {
            Self::from_adjacent(always, conditional)
        } else {
            let mut sorted = conditional.to_vec();
            sorted.sort_unstable_by_key(|&(id, _)| id);
            Self::from_adjacent(always, &sorted)
        };
        if let Some((tokens, by_chars)) = text {
            by_count.all_count += by_chars.set_grouped(tokens, &mut by_count.all);
            let mut exits = std::mem::take(&mut by_count.exits).into_vec();
            by_count.groups = by_chars.groups(&mut exits).into_boxed_slice();
            by_count.exits = exits.into_boxed_slice();
            by_count.lists = Some(by_chars.lists().clone());
        }
        by_count
    }

    /// [`ByCount::new`] when each token's conditions are adjacent in `conditional`.
    fn from_adjacent(always: &[u32], conditional: &[(u32, Cond)]) -> ByCount {
        let mut all = always.to_vec();
        let mut candidates = Vec::new();
        let mut exits = Vec::new();
        let mut top = 0;
        for group in conditional.chunk_by(|a, b| a.0 == b.0) {
            let id = group[0].0;
            if is_allowed(always, crate::TokenId(id)) {
                continue;
            }
            set_bit(&mut all, id);
            let start = exits.len() as u32;
            let mut inside = ONLY_EXITS;
            for &(_, c) in group {
                match c {
                    Cond::Inside(k) => inside = inside.min(k),
                    Cond::Exited(k) => exits.push(k),
                    // Not produced for tokens outside `always`.
                    Cond::Always => inside = 0,
                }
            }
            if inside != ONLY_EXITS {
                top = top.max(inside);
            }
            candidates.push((inside, id, start, exits.len() as u32));
        }
        let all_count = all.iter().map(|w| w.count_ones() as usize).sum();
        ByCount {
            all: all.into_boxed_slice(),
            all_count,
            candidates: by_decreasing_inside(candidates, top),
            exits: exits.into_boxed_slice(),
            groups: Box::new([]),
            lists: None,
        }
    }

    /// The accepted set for `r`'s count (equal to filtering every condition).
    fn accepted(&self, r: RelaxedLoop) -> TokenSet {
        let to_max = r.max as i64 - r.count as i64;
        let to_min = r.min as i64 - r.count as i64;
        let mut bits = self.all.to_vec();
        let mut count = self.all_count;
        let lists = self.lists.as_deref();
        let grouped = self.failing(&self.groups, to_min, to_max).flat_map(|g| lists.map_or(&[][..], |l| l.group(g as usize)));
        for id in self.failing(&self.candidates, to_min, to_max).chain(grouped.copied()) {
            if let Some(w) = bits.get_mut((id / 32) as usize) {
                count -= (*w >> (id % 32) & 1) as usize;
                *w &= !(1 << (id % 32));
            }
        }
        TokenSet::from_bits_and_ids(&bits, count, None, Vec::new())
    }

    /// Of `entries` (candidates or groups, by decreasing `Inside` number), the second field
    /// of those none of whose conditions holds when the count is `to_min` below the minimum
    /// and `to_max` below the maximum.
    fn failing<'a>(
        &'a self,
        entries: &'a [(u32, u32, u32, u32)],
        to_min: i64,
        to_max: i64,
    ) -> impl Iterator<Item = u32> + 'a {
        let inside_fails = move |&&(inside, ..): &&(u32, u32, u32, u32)| inside == ONLY_EXITS || inside as i64 > to_max;
        entries.iter().take_while(inside_fails).filter_map(move |&(_, what, lo, hi)| {
            let exits = self.exits.get(lo as usize..hi as usize).unwrap_or(&[]);
            (!exits.iter().any(|&k| to_min <= k as i64 && k as i64 <= to_max)).then_some(what)
        })
    }

    fn memory_usage(&self) -> usize {
        self.all.len() * 4 + (self.candidates.len() + self.groups.len()) * 16 + self.exits.len() * 4
    }
}

/// The largest iteration number [`by_decreasing_inside`] buckets.
const MAX_COUNTING_SORT: usize = 1 << 16;

/// Whether every token's conditions in `conditional` are adjacent (tokens below `words` × 32).
fn conditions_adjacent(words: usize, conditional: &[(u32, Cond)]) -> bool {
    let mut seen = vec![0u32; words];
    conditional.chunk_by(|a, b| a.0 == b.0).all(|group| {
        let id = group[0].0;
        let fresh = !is_allowed(&seen, crate::TokenId(id));
        set_bit(&mut seen, id);
        fresh
    })
}

/// `candidates` of [`ByCount`] ordered by decreasing `Inside` iteration number
/// ([`ONLY_EXITS`] first), none above `top`: a counting sort, as the numbers are token
/// lengths at most (a comparison sort past [`MAX_COUNTING_SORT`]).
fn by_decreasing_inside(mut candidates: Vec<(u32, u32, u32, u32)>, top: u32) -> Box<[(u32, u32, u32, u32)]> {
    if top as usize > MAX_COUNTING_SORT {
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        return candidates.into_boxed_slice();
    }
    // Bucket 0 holds ONLY_EXITS, bucket 1 + (top - k) the number k.
    let bucket = |inside: u32| if inside == ONLY_EXITS { 0 } else { 1 + (top - inside) as usize };
    let mut starts = vec![0usize; top as usize + 3];
    for c in &candidates {
        starts[bucket(c.0) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut sorted = vec![(0, 0, 0, 0); candidates.len()];
    for c in candidates {
        let slot = &mut starts[bucket(c.0)];
        sorted[*slot] = c;
        *slot += 1;
    }
    sorted.into_boxed_slice()
}

/// One classification's walk: the context and what it runs over.
#[derive(Clone, Copy)]
struct Walk<'a> {
    index: &'a TokenIndex,
    pda: &'a Pda,
    node_keys: &'a NodeKeys,
    limits: &'a Limits,
    context: &'a [Frame],
    relaxed: Option<usize>,
    /// The parse limits that cut a path in any walk of this classification (bits of
    /// [`crate::automaton::exec`]'s `CUT_*`), shared by the walks it makes.
    cut: &'a std::cell::Cell<u8>,
}

impl Walk<'_> {
    /// Walks `trie` from the context, adding to `acc` and `pending`. With `use_memo`, walks
    /// of first-byte subtrees are recorded and replayed ([`SubtreeMemo`]): only for the whole
    /// vocabulary's trie, and only without a relaxed loop (memos hold unconditional results).
    fn run(&self, trie: &ByteTrie, use_memo: bool, acc: &mut Accepted, pending: &mut Vec<(u32, u32, Cond)>) {
        let Walk { index, pda, node_keys, limits, context, relaxed, cut } = *self;
        let mut frames = context.to_vec();
        if let Some(f) = relaxed.and_then(|i| frames.get_mut(i)) {
            f.count = RELAXED;
        }
        let mut runner = Runner::with_context(pda, limits, &frames);
        // When the context is the whole stack (its bottom frame has no parent), completing
        // the bottom completes the output: a token with bytes left after that is dead.
        let whole_stack = context.first().is_some_and(|f| f.parent == BOTTOM);
        // (bytes consumed, condition) where the context's bottom completed, along the path.
        let mut crossings: Vec<(u32, Cond)> = Vec::new();
        let mut stacks_keys = StacksKeys::default();
        let mut configs = CONFIGS.with(|c| std::mem::take(&mut *c.borrow_mut()));
        // The configuration after each byte of the current path: `path[d]` after `d` bytes.
        let mut path: Vec<State> = vec![configs.reset(pda, &runner, relaxed.is_some())];
        // The first-byte subtree being walked for the memo: (memo key, id range, where its
        // pending entries start).
        let mut open_memo: Option<(u128, std::ops::Range<usize>, usize, usize)> = None;
        let mut whole = WholeSubtrees::default();
        // Scratch for `PlainRun::walk`.
        let mut plain_nodes: Vec<u32> = Vec::new();
        let mut i = 0usize;
        loop {
            let node = trie.nodes.get(i);
            if node.is_none_or(|n| n.depth == 1) {
                if let Some((key, ids, pending_start, count_start)) = open_memo.take() {
                    acc.logging = false;
                    // Only subtrees where many tokens survived were expensive to walk and are
                    // worth a memo.
                    let survivors = acc.always_count - count_start + pending.len() - pending_start;
                    // A limit may have cut this subtree short: such a walk is not replayed.
                    if survivors >= MEMO_MIN_SURVIVORS && runner.stacks.overflow_what == 0 {
                        let memo = SubtreeMemo::record(&trie.ids[ids], acc, &pending[pending_start..]);
                        index.store_subtree(key, memo, limits);
                    }
                }
            }
            let Some(node) = node else { break };
            let depth = node.depth;
            path.truncate(depth as usize);
            while crossings.last().is_some_and(|&(j, _)| j >= depth) {
                crossings.pop();
            }
            let parent = path.last().copied().unwrap_or(State::DEAD);
            let next = configs.step(pda, &mut runner, parent, node.byte);
            if next.crossed() {
                crossings.extend(configs.last_reached().iter().map(|&c| (depth, c)));
            }
            let next = next.state();
            if next != State::DEAD {
                path.push(next);
                let ids = trie.ids_at(node);
                if !ids.is_empty() {
                    let alive = Alive { conds: configs.conds(next), crossings: &crossings, whole_stack };
                    alive.add(ids, depth, acc, pending);
                }
                if use_memo && depth == 1 {
                    let end = node.end as usize;
                    let ids = trie.descendant_ids(i);
                    let stacks = stacks_keys.get(next, pda, node_keys, &configs, &mut runner);
                    let key = state_key(stacks, &crossings, i, whole_stack);
                    if let Some(memo) = index.subtree(key) {
                        memo.replay(node.byte, &trie.ids[ids], acc, &mut whole);
                        pending.extend(memo.pending.iter().map(|&(id, j)| (id, j, Cond::Always)));
                        i = end;
                        continue;
                    }
                    acc.log.clear();
                    acc.logging = true;
                    open_memo = Some((key, ids, pending.len(), acc.always_count));
                }
                if let Some((from, base)) = next.plain_parts() {
                    let run = PlainRun { from, base, conds: configs.conds(next), crossings: &crossings, whole_stack };
                    i = run.walk(trie, pda, i, acc, pending, &mut path, &mut plain_nodes);
                    continue;
                }
                i += 1;
                continue;
            }
            // Dead inside the context: only tokens that left it earlier can still be allowed.
            let end = node.end as usize;
            // Without a crossing, nothing below is allowed (checked here: a walk meets a
            // million dead subtrees, and most have no crossing above).
            if !crossings.is_empty() {
                dead_subtree(trie, i, &crossings, whole_stack, acc, pending);
            }
            i = end;
        }
        configs.shrink();
        CONFIGS.with(|c| *c.borrow_mut() = configs);
        whole.apply(index, &mut acc.always);
        cut.set(cut.get() | runner.stacks.overflow_what);
    }

    /// The classes of the text tokens under the relaxed loop at `context[i]`, each of whose
    /// iterations is one text character ([`text::units_loop`]: it refuses `refused`), found
    /// by walking the [`text::probes`] from the loop up (so a probe leaving the loop is
    /// pending there, not followed into what comes next); `exit` says what follows the
    /// loop does with the rest of such a probe (see [`text::ByChars::new`]).
    /// With `walked` lead bytes, the tokens holding such a character are left out (they are
    /// walked instead), and only a loop followed by no text is answered.
    fn probe(&self, i: usize, refused: text::Refused, walked: u128, exit: Option<text::Refused>) -> Option<text::ByChars> {
        // Prefix groups only where something follows that takes text, and the loop refuses
        // some: otherwise a token holding a refused character is rejected.
        let prefixes = !refused.is_empty() && exit.is_some_and(|e| e != text::Refused::ALL);
        let lists = match (prefixes, walked != 0) {
            (true, true) => return None,
            (true, false) => self.index.char_lists(refused),
            (false, true) => Arc::new(text::CharLists::ascii_only(&self.index.text, refused)),
            (false, false) => Arc::new(text::CharLists::lengths_only(&self.index.text, refused)),
        };
        let probes = text::probes(lists.lengths(), refused, prefixes)?;
        let mut acc = Accepted::new(vec![0; probes.ids.len().div_ceil(32)], Vec::new());
        let mut pending = Vec::new();
        let from_loop = Walk { context: self.context.get(i..)?, relaxed: Some(0), ..*self };
        from_loop.run(&probes, false, &mut acc, &mut pending);
        text::ByChars::new(&acc, &pending, refused, exit, lists)
    }
}

impl Classified {
    /// Walks the vocabulary trie from the context (frames bottom first); the frame at
    /// `relaxed` (a loop) runs with its bounds ignored and its iterations counted. Where a
    /// text shortcut applies ([`text`]), only the tokens that are not text are walked, and
    /// the text tokens' classes come from what the shortcut knows of them.
    fn compute(
        index: &TokenIndex,
        pda: &Pda,
        node_keys: &NodeKeys,
        limits: &Limits,
        context: &[Frame],
        relaxed: Option<usize>,
    ) -> Classified {
        let spare = SPARE_CONDITIONAL.with(|s| std::mem::take(&mut *s.borrow_mut()));
        let mut acc = Accepted::new(zeroed_bits(index.vocab.mask_words()), spare);
        let mut pending: Vec<(u32, u32, Cond)> = Vec::new();
        let cut = std::cell::Cell::new(0u8);
        let walk = Walk { index, pda, node_keys, limits, context, relaxed, cut: &cut };
        let text = &index.text;
        // Text tokens classified by groups, not listed in `acc` (see `ByCount::groups`).
        let mut grouped: Option<text::ByChars> = None;
        // Tried where the top's own edges take a non-ASCII character (a string body):
        // elsewhere most text dies at once, and the walk is cheap.
        let string_body = |top: &Frame| {
            pda.nodes.get(top.node as usize).is_some_and(|n| n.bytes.iter().any(|e| e.hi >= 0xC2 && e.lo <= 0xF4))
        };
        let first_chars = match relaxed {
            None if context.last().is_some_and(string_body) => index.first_char_refused(pda, node_keys, limits, context),
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
                walk.run(&text.others, false, &mut acc, &mut pending);
            }
            // Each text character is one iteration of the relaxed loop: a text token's
            // conditions depend only on its number of characters, read off the probe.
            Some(i) => {
                let units = text::units_loop(pda, context, i).and_then(|(refused, walked, exit)| {
                    let exit = match exit {
                        text::Exit::Below => None,
                        text::Exit::NoText => Some(text::Refused::ALL),
                        text::Exit::Plain => Some(index.first_char_refused(pda, node_keys, limits, &context[..i])?),
                    };
                    Some((walk.probe(i, refused, walked, exit)?, walked))
                });
                match units {
                    Some((by_chars, walked)) => {
                        walk.run(&text.others, false, &mut acc, &mut pending);
                        if walked != 0 {
                            walk.run(&text.holding_leads(&index.vocab, walked), false, &mut acc, &mut pending);
                        }
                        by_chars.add_always(text, &mut acc);
                        grouped = Some(by_chars);
                    }
                    None => walk.run(&index.trie, false, &mut acc, &mut pending),
                }
            }
            // Memos need unconditional results: not with a relaxed loop.
            _ => walk.run(&index.trie, relaxed.is_none(), &mut acc, &mut pending),
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
        SPARE_CONDITIONAL.with(|s| *s.borrow_mut() = spare);
        let cut = cut.get();
        Classified { always: acc.always, always_count: acc.always_count, always_ids, conditional, pending, max_iterations, cut }
    }

    /// A key shared by every count of `r`'s loop that derives the same entry: a condition
    /// compares `k ≤ max − count` and `k ≥ min − count` for iteration numbers `k` up to
    /// [`Classified::max_iterations`], so both differences clamped just past that range
    /// decide every condition. Counts far from both bounds then share one entry (how far
    /// depends on the vocabulary: the DeepSeek tokenizer has 128-space tokens, so inside a
    /// `maxLength: 100` string every count is its own class).
    fn count_class_key(&self, base_key: u128, r: RelaxedLoop) -> u128 {
        let limit = self.max_iterations as i64 + 1;
        let count = r.count as i64;
        let to_max = (r.max as i64 - count).clamp(-1, limit);
        let to_min = (r.min as i64 - count).clamp(0, limit);
        hash128(&(base_key, 0xC1A5u16, to_min, to_max))
    }

    /// The entry for the relaxed loop's actual count (or the only entry, without one).
    fn derive(&self, index: &TokenIndex, relaxed: Option<RelaxedLoop>, limits: &Limits) -> Entry {
        let pending: Vec<(u32, u32)> =
            self.pending.iter().filter(|(_, _, c)| c.holds(relaxed)).map(|&(id, j, _)| (id, j)).collect();
        Entry { accepted: self.accepted(relaxed), suffixes: index.suffix_trie(&pending, limits), cut: self.cut }
    }

    /// Drops the tokens whose first byte `first_byte` rejects. For classifications without a
    /// relaxed loop, whose conditions are all [`Cond::Always`] (held in `always`).
    fn keep_first_bytes(&mut self, index: &TokenIndex, first_byte: impl Fn(u8) -> bool) {
        index.clear_first_bytes(&mut self.always, |b| !first_byte(b));
        self.always_count = self.always.iter().map(|w| w.count_ones() as usize).sum();
        self.always_ids = None;
        let kept = |id: u32| index.vocab.token_bytes(crate::TokenId(id)).first().is_some_and(|&b| first_byte(b));
        self.pending.retain(|&(id, _, _)| kept(id));
    }

    /// The entry of a context that accepts what this classification's context does except
    /// the tokens starting with one of `words` followed by a quote. For classifications
    /// without a relaxed loop, like [`Classified::keep_first_bytes`].
    fn derive_excluding<'w>(&self, index: &TokenIndex, words: impl Iterator<Item = &'w [u8]>, limits: &Limits) -> Entry {
        let trie = &index.trie;
        let mut dropped: Vec<u32> = Vec::new();
        let mut quoted: Vec<u8> = Vec::new();
        for word in words {
            quoted.clear();
            quoted.extend_from_slice(word);
            quoted.push(b'"');
            if let Some(i) = trie.find(&quoted) {
                dropped.extend_from_slice(trie.ids_from(i));
            }
        }
        let mut always = self.always.clone();
        clear_bits(&mut always, &dropped);
        let count = always.iter().map(|w| w.count_ones() as usize).sum();
        dropped.sort_unstable();
        let pending: Vec<(u32, u32)> =
            self.pending.iter().filter(|p| dropped.binary_search(&p.0).is_err()).map(|&(id, j, _)| (id, j)).collect();
        Entry {
            accepted: TokenSet::from_bits_and_ids(&always, count, None, Vec::new()),
            suffixes: index.suffix_trie(&pending, limits),
            cut: self.cut,
        }
    }

    /// The accepted set for `relaxed`'s count (every condition holds without one).
    fn accepted(&self, relaxed: Option<RelaxedLoop>) -> TokenSet {
        match (&self.conditional, relaxed) {
            (Conditional::List(list), _) => {
                let conditional = list.iter().filter(|(_, c)| c.holds(relaxed)).map(|&(id, _)| id);
                TokenSet::from_bits_and_ids(&self.always, self.always_count, self.always_ids.as_deref(), conditional.collect())
            }
            (Conditional::ByCount(by_count), Some(r)) => by_count.accepted(r),
            (Conditional::ByCount(by_count), None) => {
                TokenSet::from_bits_and_ids(&by_count.all, by_count.all_count, None, Vec::new())
            }
        }
    }

    /// Clears the bitset and keeps it as the thread's spare (see [`zeroed_bits`]).
    fn recycle(self) {
        let mut bits = self.always;
        match &self.always_ids {
            Some(ids) => ids.iter().for_each(|&id| {
                if let Some(w) = bits.get_mut((id / 32) as usize) {
                    *w = 0;
                }
            }),
            None => bits.fill(0),
        }
        SPARE_BITS.with(|s| *s.borrow_mut() = bits);
    }

    fn memory_usage(&self) -> usize {
        self.always.len() * 4
            + self.always_ids.as_ref().map_or(0, |v| v.len() * 4)
            + match &self.conditional {
                Conditional::List(list) => list.len() * std::mem::size_of::<(u32, Cond)>(),
                Conditional::ByCount(by_count) => by_count.memory_usage(),
            }
            + self.pending.len() * std::mem::size_of::<(u32, u32, Cond)>()
    }
}

/// Every stack died at trie node `i`: the tokens of its subtree can only be allowed through
/// a bottom crossing on the path (they left the context earlier): accepted when they end at
/// the crossing, else pending a check against the real stack (none when the context is the
/// whole stack: nothing can follow it). Without a crossing nothing below is allowed, and the
/// callers skip the call.
fn dead_subtree(
    trie: &ByteTrie,
    i: usize,
    crossings: &[(u32, Cond)],
    whole_stack: bool,
    acc: &mut Accepted,
    pending: &mut Vec<(u32, u32, Cond)>,
) {
    let end = trie.nodes.get(i).map_or(i, |n| n.end as usize);
    // No stack is alive below: only the crossings' conditions apply.
    let dead = Alive { conds: &[], crossings, whole_stack };
    for sub in &trie.nodes[i..end] {
        dead.add_crossed(trie.ids_at(sub), sub.depth, acc, pending);
    }
}

/// Where a walk is alive at a trie node: the conditions of its stacks there, and the bottom
/// crossings along the path.
struct Alive<'a> {
    conds: &'a [Cond],
    crossings: &'a [(u32, Cond)],
    whole_stack: bool,
}

impl Alive<'_> {
    /// Adds the tokens `ids` ending at a trie node of `depth`: accepted under each condition
    /// of the stacks and of a crossing at that very depth. A crossing above leaves them
    /// pending under its condition as well, unless they are accepted whatever the count
    /// (only a relaxed walk has other conditions, and one of its stacks may hold where the
    /// other does not).
    #[inline(always)]
    fn add(&self, ids: &[u32], depth: u32, acc: &mut Accepted, pending: &mut Vec<(u32, u32, Cond)>) {
        if self.crossings.is_empty() {
            // The walk's hottest case (inside a string body): kept to the bare loop.
            for &id in ids {
                for &c in self.conds {
                    acc.add(id, c);
                }
            }
        } else {
            self.add_crossed(ids, depth, acc, pending);
        }
    }

    /// [`Alive::add`] with crossings along the path (also for a dead subtree, without
    /// conditions of its own: [`dead_subtree`]).
    fn add_crossed(&self, ids: &[u32], depth: u32, acc: &mut Accepted, pending: &mut Vec<(u32, u32, Cond)>) {
        let unconditional = self.conds.contains(&Cond::Always);
        for &id in ids {
            for &c in self.conds {
                acc.add(id, c);
            }
            for &(j, c) in self.crossings {
                if j == depth {
                    // Crossed exactly at its last byte: nothing left to check.
                    acc.add(id, c);
                } else if !unconditional && !self.whole_stack {
                    pending.push((id, j, c));
                }
            }
        }
    }
}

/// A single stack at a plain node ([`State::plain_parts`]) at some trie node: the walk of
/// that node's subtree, while every step stays on plain nodes, needs neither configurations
/// nor crossing bookkeeping (plain nodes cannot complete a rule), so it runs as a tight loop
/// of one automaton step per trie node — most of the vocabulary, inside a string body.
struct PlainRun<'a> {
    /// The automaton node the stack is at.
    from: u32,
    /// The configuration whose single stack this is, with its top moved.
    base: u32,
    /// The conditions of the stack.
    conds: &'a [Cond],
    /// The bottom crossings along the path so far (all above the run).
    crossings: &'a [(u32, Cond)],
    whole_stack: bool,
}

impl PlainRun<'_> {
    /// Walks the descendants of trie node `start`. Returns the index of the next node for the
    /// general walk: the end of `start`'s subtree, or the first descendant whose step lands
    /// on a node that is not plain (`path` then holds the state of every depth above it, as
    /// the general walk would have left it).
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        trie: &ByteTrie,
        pda: &Pda,
        start: usize,
        acc: &mut Accepted,
        pending: &mut Vec<(u32, u32, Cond)>,
        path: &mut Vec<State>,
        nodes_by_depth: &mut Vec<u32>,
    ) -> usize {
        let Some(root) = trie.nodes.get(start) else { return start + 1 };
        let base_depth = root.depth as usize;
        let end = root.end as usize;
        nodes_by_depth.clear();
        nodes_by_depth.push(self.from);
        let mut i = start + 1;
        while i < end {
            let node = &trie.nodes[i];
            let rel = node.depth as usize - base_depth;
            nodes_by_depth.truncate(rel);
            let from = nodes_by_depth[rel - 1];
            match pda.nodes[from as usize].step_to_plain(node.byte, &pda.nodes) {
                None => {
                    if !self.crossings.is_empty() {
                        dead_subtree(trie, i, self.crossings, self.whole_stack, acc, pending);
                    }
                    i = node.end as usize;
                }
                Some((t, true)) => {
                    nodes_by_depth.push(t);
                    let ids = trie.ids_at(node);
                    if !ids.is_empty() {
                        let alive = Alive { conds: self.conds, crossings: self.crossings, whole_stack: self.whole_stack };
                        alive.add(ids, node.depth, acc, pending);
                    }
                    i += 1;
                }
                Some(_) => {
                    // The general walk takes over at `i`, from its parent's state.
                    let base = self.base;
                    path.extend(nodes_by_depth[1..].iter().map(|&n| State::plain(n, base)));
                    return i;
                }
            }
        }
        end
    }
}

/// Replayed memos that accept their whole subtree but a few ids ([`SubtreeAccepted::AllBut`]),
/// applied once the walk is done.
#[derive(Default)]
struct WholeSubtrees {
    /// The subtrees' first bytes.
    bytes: Vec<u8>,
    /// The ids of those subtrees not accepted.
    excepted: Vec<u32>,
}

impl WholeSubtrees {
    /// ORs each subtree's tokens into `always` a word at a time, then clears the exceptions
    /// (subtrees are disjoint, so nothing else set those).
    fn apply(&self, index: &TokenIndex, always: &mut [u32]) {
        match self.bytes.as_slice() {
            [] => {}
            &[byte] => or_into(always, index.subtree_ids(byte)),
            bytes => or_into(always, &index.subtree_union(bytes)),
        }
        for &id in &self.excepted {
            if let Some(w) = always.get_mut((id / 32) as usize) {
                *w &= !(1 << (id % 32));
            }
        }
    }
}

/// How many unions of first-byte subtrees [`TokenIndex::subtree_union`] keeps (a bitset over
/// the vocabulary each, 16 KB for 129k tokens). Walks that replay whole subtrees mostly
/// replay the same sets (every byte a string body accepts), so few are needed.
const MAX_SUBTREE_UNIONS: usize = 256;

impl TokenIndex {
    /// The tokens below any of the first bytes `bytes` (sorted, distinct), as one bitset:
    /// computed once per set, so replaying two hundred whole subtrees is one pass over the
    /// mask instead of two hundred.
    fn subtree_union(&self, bytes: &[u8]) -> Arc<[u32]> {
        let mut key = [0u64; 4];
        for &b in bytes {
            key[b as usize / 64] |= 1 << (b % 64);
        }
        if let Some(u) = self.unions.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return u;
        }
        let mut union = vec![0u32; self.vocab.mask_words()];
        for &b in bytes {
            or_into(&mut union, self.subtree_ids(b));
        }
        let union: Arc<[u32]> = union.into();
        if let Ok(mut m) = self.unions.lock() {
            if m.len() < MAX_SUBTREE_UNIONS {
                m.insert(key, union.clone());
            }
        }
        union
    }
}

/// A memo lists the rejected ids of its subtree when at most one in this many was rejected
/// (see [`SubtreeAccepted::AllBut`]).
const ALL_BUT_RATIO: usize = 8;

/// Subtrees with fewer surviving tokens than this are not memoized (see [`SubtreeMemo`]).
const MEMO_MIN_SURVIVORS: usize = 32;

/// Identifies the stacks of a parse state for [`state_key`]: every stack as the node keys
/// (and loop counts) of its frames, order-free.
fn stacks_key(
    pda: &Pda,
    node_keys: &NodeKeys,
    arena: &[Frame],
    tops: &[u32],
    chains: &mut Vec<u128>,
) -> u128 {
        chains.clear();
    chains.extend(tops.iter().map(|&top| {
        let mut h = Hasher128::new();
        let mut f = top;
        while f != BOTTOM {
            let fr = arena[f as usize];
            h.add(&(node_keys.get(pda, fr.node), fr.count));
            f = fr.parent;
        }
        h.finish128()
    }));
    chains.sort_unstable();
    chains.dedup();
    hash128(chains.as_slice())
}

/// Identifies a parse state of [`Classified::compute`]'s walk at first-byte trie node
/// `trie_node`: its stacks ([`stacks_key`]), plus the bottom crossings so far and whether the
/// context is the whole stack. Equal keys walk the node's subtree identically.
fn state_key(stacks: u128, crossings: &[(u32, Cond)], trie_node: usize, whole_stack: bool) -> u128 {
    let mut h = Hasher128::new();
    h.add(&stacks);
    h.add(&crossings.len());
    for &(j, _) in crossings {
        h.add(&j);
    }
    h.add(&(trie_node as u64, whole_stack));
    h.finish128()
}

/// The [`stacks_key`] of the few states a walk meets at depth 1 (most first bytes lead to
/// the same one or two), so that each is hashed once.
#[derive(Default)]
struct StacksKeys {
    known: Vec<(State, u128)>,
    chains: Vec<u128>,
}

impl StacksKeys {
    /// Only this many states are remembered; later ones are hashed every time.
    const MAX: usize = 16;

    fn get(
        &mut self,
        state: State,
        pda: &Pda,
        node_keys: &NodeKeys,
        configs: &Configs,
        runner: &mut Runner,
    ) -> u128 {
        if let Some(&(_, key)) = self.known.iter().find(|(s, _)| *s == state) {
            return key;
        }
        configs.materialize(state, runner);
        let key = stacks_key(pda, node_keys, &runner.stacks.arena, runner.current_tops(), &mut self.chains);
        runner.pop_bytes(1);
        if self.known.len() < Self::MAX {
            self.known.push((state, key));
        }
        key
    }
}

impl SubtreeMemo {
    /// The memo of a subtree whose tokens are `ids` (in trie order), from the ids its walk
    /// accepted (`acc.log`) and the pending entries it added.
    fn record(ids: &[u32], acc: &Accepted, pending: &[(u32, u32, Cond)]) -> SubtreeMemo {
        // A list costs 32 bits per listed id, the bitset one bit per token of the subtree.
        let is_set = |id: u32| is_allowed(&acc.always, crate::TokenId(id));
        let excepted = ids.len() - acc.log.len().min(ids.len());
        let accepted = if acc.log.len() * 32 <= ids.len() {
            SubtreeAccepted::Ids(acc.log.clone().into_boxed_slice())
        } else if excepted * ALL_BUT_RATIO <= ids.len() {
            SubtreeAccepted::AllBut(ids.iter().copied().filter(|&id| !is_set(id)).collect())
        } else {
            let mut bits = vec![0u64; ids.len().div_ceil(64)];
            for (k, &id) in ids.iter().enumerate() {
                if is_set(id) {
                    bits[k / 64] |= 1 << (k % 64);
                }
            }
            SubtreeAccepted::Positions(bits.into_boxed_slice())
        };
        let pending = pending.iter().map(|&(id, j, _)| (id, j)).collect();
        SubtreeMemo { accepted, pending }
    }
}

impl TokenIndex {
    fn subtree(&self, key: u128) -> Option<Arc<SubtreeMemo>> {
        let mut c = self.cache.lock().ok()?;
        cache_get!(&mut c, subtrees, &key, SubtreeMemo::memory_usage)
    }

    fn store_subtree(&self, key: u128, memo: SubtreeMemo, limits: &Limits) {
        let Ok(mut c) = self.cache.lock() else { return };
        c.make_room(memo.memory_usage(), limits.max_mask_cache_bytes);
        c.young.subtrees.insert(key, Arc::new(memo));
    }

    /// The trie of the suffixes `token[j..]` of the stack-dependent tokens `pending` (id,
    /// `j`), shared by every entry with the same list: lists recur across contexts (object
    /// key positions of different schemas share their closing-quote tokens), and building
    /// the trie sorts the list. Its bytes are accounted by the entries holding it.
    fn suffix_trie(&self, pending: &[(u32, u32)], limits: &Limits) -> Arc<ByteTrie> {
        if pending.is_empty() {
            return Arc::default();
        }
        let key = hash128(pending);
        let cached = self.cache.lock().ok().and_then(|mut c| cache_get!(&mut c, suffixes, &key, |_| ALIAS_BYTES));
        if let Some(trie) = cached {
            return trie;
        }
        let vocab = &self.vocab;
        let suffix = |&(id, j): &(u32, u32)| (vocab.token_bytes(crate::TokenId(id)).get(j as usize..).unwrap_or(&[]), id);
        let trie = Arc::new(ByteTrie::build(pending.iter().map(suffix)));
        if let Ok(mut c) = self.cache.lock() {
            c.make_room(ALIAS_BYTES, limits.max_mask_cache_bytes);
            c.young.suffixes.insert(key, trie.clone());
        }
        trie
    }
}

/// The accepted tokens of [`Classified::compute`]'s walk: unconditional ones in a bitset
/// (with their count), conditional ones listed.
struct Accepted {
    always: Vec<u32>,
    always_count: usize,
    /// The ids set in `always`, while they fit a list entry (complete iff
    /// `always_ids.len() == always_count`): small sets skip a scan of the bitset.
    always_ids: Vec<u32>,
    conditional: Vec<(u32, Cond)>,
    /// While `logging`: the ids newly set in `always` (what a [`SubtreeMemo`] records).
    log: Vec<u32>,
    logging: bool,
}

impl Accepted {
    /// Nothing accepted yet: `always` is a zeroed bitset, `conditional` an empty list (both
    /// passed in for their buffers).
    fn new(always: Vec<u32>, conditional: Vec<(u32, Cond)>) -> Accepted {
        Accepted { always, always_count: 0, always_ids: Vec::new(), conditional, log: Vec::new(), logging: false }
    }

    /// Adds, unconditionally, an id the walk has not set yet (each token sits at one trie
    /// node, so the ids of a replayed subtree are new): no test, no list, no log. The count
    /// stays exact; only the short id list stops being complete, which costs a bitset scan
    /// later, never a wrong result.
    #[inline]
    fn add_fresh(&mut self, id: u32) {
        if let Some(w) = self.always.get_mut((id / 32) as usize) {
            *w |= 1 << (id % 32);
            self.always_count += 1;
        }
    }

    #[inline]
    fn add(&mut self, id: u32, c: Cond) {
        if c == Cond::Always {
            if let Some(w) = self.always.get_mut((id / 32) as usize) {
                let bit = 1 << (id % 32);
                if *w & bit == 0 {
                    *w |= bit;
                    self.always_count += 1;
                    if self.logging {
                        self.log.push(id);
                    }
                    if self.always_ids.len() * 4 < self.always.len() {
                        self.always_ids.push(id);
                    }
                }
            }
        } else {
            self.conditional.push((id, c));
        }
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
    fn from_bits_and_ids(bits: &[u32], count: usize, listed: Option<&[u32]>, mut extra: Vec<u32>) -> TokenSet {
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
    fn add_to(&self, mask: &mut [u32]) {
        match self {
            TokenSet::List(ids) => {
                for &id in ids.iter() {
                    set_bit(mask, id);
                }
            }
            TokenSet::Bits(bits) => or_into(mask, bits),
        }
    }

    fn len_words(&self) -> usize {
        match self {
            TokenSet::List(v) | TokenSet::Bits(v) => v.len(),
        }
    }
}

/// The precomputed classification of the vocabulary for one context.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Tokens the context consumes whole.
    accepted: TokenSet,
    /// Suffixes (after the context's bottom completed) to check against the real stack.
    suffixes: Arc<ByteTrie>,
    /// The parse limits that cut a path while classifying (bits of `exec::CUT_*`).
    cut: u8,
}

impl Entry {
    /// An entry allowing nothing (used only if the cache lock is poisoned).
    fn empty() -> Entry {
        Entry { accepted: TokenSet::List(Box::new([])), suffixes: Arc::default(), cut: 0 }
    }

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
#[derive(Clone, Debug, Default)]
pub(crate) struct Scratch {
    /// The context of the top being filled.
    context: Context,
    /// For [`Entry::add_suffixes`].
    suffixes: SuffixScratch,
}

/// Reusable buffers for [`Entry::add_suffixes`], so the per-token path does not allocate.
#[derive(Clone, Debug, Default)]
pub(crate) struct SuffixScratch {
    tops: Vec<u32>,
    levels: Vec<(usize, usize)>,
    cur: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cond() -> impl Strategy<Value = Cond> {
        prop_oneof![Just(Cond::Always), (0u32..8).prop_map(Cond::Inside), (0u32..8).prop_map(Cond::Exited)]
    }

    fn ids_of(set: &TokenSet, words: usize) -> Vec<u32> {
        let mut mask = vec![0u32; words];
        set.add_to(&mut mask);
        (0..words as u32 * 32).filter(|&id| mask[(id / 32) as usize] >> (id % 32) & 1 == 1).collect()
    }

    /// Candidates come out with `ONLY_EXITS` first, then by decreasing iteration number,
    /// whether counted into buckets or, past the bucket bound, sorted.
    #[test]
    fn candidates_by_decreasing_inside() {
        for top in [5, MAX_COUNTING_SORT as u32 + 1] {
            let insides = [3, ONLY_EXITS, 0, top, 3, 1, ONLY_EXITS];
            let candidates: Vec<_> = insides.iter().enumerate().map(|(k, &i)| (i, k as u32, 0, 0)).collect();
            let sorted = by_decreasing_inside(candidates, top);
            let got: Vec<u32> = sorted.iter().map(|c| c.0).collect();
            assert_eq!(got, [ONLY_EXITS, ONLY_EXITS, top, 3, 3, 1, 0], "top {top}");
        }
    }

    /// At every node of an "other property name" rule, the entry derived from the shared
    /// string rest (minus the declared names) equals the entry a walk computes, on a
    /// vocabulary with every short string over the names' letters, quotes and a backslash.
    #[test]
    fn excluded_names_derive_what_a_walk_computes() {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let alphabet = b"abx\":\\ 1";
        let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            strings = strings
                .iter()
                .flat_map(|s| alphabet.iter().map(move |&c| [s.as_slice(), &[c]].concat()))
                .collect();
            tokens.extend(strings.iter().filter(|s| s.len() > 1).cloned());
        }
        tokens.extend([b"abx\":\"".to_vec(), "é\"".as_bytes().to_vec(), b"\\u0061\"".to_vec()]);
        let eos = crate::TokenId(tokens.len() as u32);
        tokens.push(Vec::new());
        let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("vocabulary"));
        let schema = serde_json::json!({
            "properties": {"ab": {"type": "integer"}, "abx": {}, "b": {}, "x1": {}, "": {}},
            "additionalProperties": {"type": "string"}
        });
        let grammar = crate::schema::compile(&schema, &crate::schema::Options::default()).expect("compiles");
        let limits = Limits::default();
        let pda = Pda::build(&grammar, &limits).expect("automaton");
        let node_keys = NodeKeys::new(&pda);
        let words = index.vocab().mask_words();
        let nodes: Vec<u32> = (0..pda.nodes.len() as u32).filter(|&n| pda.excluded.at(n).is_some()).collect();
        // The node after the quote (where the name "" ends), and one per prefix of the other
        // names: a, ab, abx, b, x, x1.
        assert_eq!(nodes.len(), 7, "{}", pda.listing());
        for node in nodes {
            for parent in [BOTTOM, 0] {
                let frame = Frame { node, count: 0, parent, depth: 1 };
                let derived = index.excluding_entry(&pda, &node_keys, &limits, &frame).expect("an exclusion node");
                let walked = Classified::compute(&index, &pda, &node_keys, &limits, &[frame], None);
                let walked = walked.derive(&index, None, &limits);
                let (d, w) = (ids_of(&derived.accepted, words), ids_of(&walked.accepted, words));
                let vocab = index.vocab();
                let text = |id: &u32| String::from_utf8_lossy(vocab.token_bytes(crate::TokenId(*id))).into_owned();
                let only = |a: &[u32], b: &[u32]| a.iter().filter(|i| !b.contains(i)).map(text).collect::<Vec<_>>();
                assert!(d == w, "node {node}: only derived {:?}, only walked {:?}", only(&d, &w), only(&w, &d));
                assert_eq!(derived.suffixes.nodes, walked.suffixes.nodes, "node {node}");
                assert_eq!(derived.suffixes.ids, walked.suffixes.ids, "node {node}");
            }
        }
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
                cut: 0,
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

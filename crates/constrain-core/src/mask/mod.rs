//! Stage 4: per-state token masks over a vocabulary trie.
//!
//! Input: a [`crate::Vocabulary`] (once per tokenizer) and, per automaton state, a *context*: the
//! stack top plus the few frames below it that decide what the top can do (see
//! `Context` for how the context is chosen). Output: an `Entry` per context, cached
//! in the [`TokenIndex`] and shared by every constraint built over that tokenizer.
//!
//! ## How
//!
//! An entry is computed once by walking the vocabulary's byte trie (`trie::ByteTrie`) from
//! the context: shared prefixes are fed once, and a byte that kills every stack skips its
//! whole subtree. The parse state after each trie node is an interned configuration whose
//! steps are computed once and then read from a table (`configs`), and a single stack that
//! only consumes bytes (a string body) runs as a tight loop of automaton steps (`PlainRun`).
//! Each token lands in one of three classes:
//!
//! - **accepted**: the context consumes the whole token;
//! - **rejected**: it dies inside the context and never left it;
//! - **stack-dependent**: the context's bottom rule completed after `j` bytes and the rest of the
//!   token (`token[j..]`) depends on frames below the context. Those suffixes are kept in a small
//!   suffix trie and checked against the real stack at run time (`Entry::add_suffixes`); each
//!   matcher keeps the answer by the frame below the context (`SuffixMemo`), which a string
//!   value's tokens share.
//!
//! Accepted sets are stored as a sorted id list or a bitset, whichever is smaller, and
//! shared by content between the entries that accept the same tokens.
//! Entries are keyed by structural fingerprints, so the JSON string body of every schema
//! compiled against one tokenizer is classified once.
//!
//! One kind of context is derived instead of walked: an object key that must not be one of
//! the declared property names (the automaton stage's `ExcludedWords`). Its entry is the
//! shared string rest's, minus the tokens that spell a declared name and its closing quote,
//! so each schema's set of names costs a few trie look-ups instead of a walk.
//!
//! ## Example
//!
//! A schema compiled against a toy vocabulary: the mask allows exactly the tokens that keep
//! the output a prefix of a valid document.
//!
//! ```rust
//! use constrain::mask::{is_allowed, TokenIndex};
//! use constrain::{Constraint, Limits, TokenId, Vocabulary};
//!
//! // Four tokens and an end-of-generation id (no bytes of its own).
//! let pieces = ["true", "false", "t", "rue"];
//! let mut tokens: Vec<Vec<u8>> = pieces.iter().map(|p| p.as_bytes().to_vec()).collect();
//! tokens.push(Vec::new());
//! let vocab = Vocabulary::new(tokens, &[], &[TokenId(4)])?;
//! let index = TokenIndex::new(vocab); // once per tokenizer; its mask cache is shared
//!
//! let schema = serde_json::json!({"type": "boolean"});
//! let grammar = constrain::schema::compile(&schema, &Default::default())?;
//! let constraint = Constraint::new(&grammar, index, &Limits::default())?;
//! let mut matcher = constraint.matcher(); // one per sequence
//! let mut mask = vec![0u32; constraint.index().vocab().mask_words()];
//!
//! matcher.fill_mask(&mut mask)?;
//! let allowed = |mask: &[u32]| (0..5).filter(|&i| is_allowed(mask, TokenId(i))).collect::<Vec<_>>();
//! assert_eq!(allowed(&mask), [0, 1, 2]); // "true", "false", "t"
//! matcher.accept_token(TokenId(2))?;
//! matcher.fill_mask(&mut mask)?;
//! assert_eq!(allowed(&mask), [3]); // "rue"
//! matcher.accept_token(TokenId(3))?;
//! matcher.fill_mask(&mut mask)?;
//! assert_eq!(allowed(&mask), [4]); // the end
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Two kinds of context walk only the tokens that are not text (`text`): a string body
//! that takes any text once its first character is allowed (every text token starting
//! with another is accepted; `viable` finds these), and a loop of one character an
//! iteration (a text token's conditions depend on its number of characters and where its
//! first refused character is).
//!
//! ## Files
//!
//! - `index`: [`TokenIndex`], its tokenizer-wide tables, and `TokenIndex::fill`, the one
//!   entry point of the matcher; `context`: which frames a top's entry is classified for,
//!   and its cache keys.
//! - `cache`: the shared cache of entries, classifications, subtree memos, suffix tries and
//!   accepted sets
//!   (a `crate::util::cache::GenCache` bounded by [`IndexConfig::cache_bytes`]).
//! - `walk`: the trie walk from a context; `classify`: its result (`Classified` in the
//!   code), and how entries derive from it; `relaxed`: the loop whose count is derived
//!   instead of classified (conditions, and their index by count).
//! - `excluded`: the entries of "other property name" contexts, derived, not walked.
//! - `entry`: `Entry` (accepted set, stack-dependent suffixes checked at run time).
//! - `memo`: `SubtreeMemo`, and the keys of walk states.
//! - `configs`, `text`, `viable`, `trie`: the walk's configurations, the text shortcuts, and
//!   the byte trie.

mod cache;
mod classify;
mod configs;
mod context;
mod entry;
mod excluded;
mod index;
mod memo;
mod relaxed;
mod text;
pub(crate) mod trie;
mod viable;
mod walk;

pub use crate::util::is_allowed;
pub(crate) use crate::util::set_bit;
pub use cache::{CacheReport, KindReport};
pub(crate) use context::Target;
pub(crate) use entry::Scratch;
pub use index::{IndexConfig, TokenIndex, DEFAULT_MEMORY_BUDGET, NO_SPELLING};
pub(crate) use relaxed::RelaxedLoop;

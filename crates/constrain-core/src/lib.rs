//! # constrain-core
//!
//! The engine of constrain: a grammar over bytes becomes a byte-level pushdown automaton,
//! the automaton's states get precomputed token masks, and a per-sequence matcher fills a
//! mask, accepts a token, rolls back and detects the end. Front ends sit above this crate and
//! hand it a [`grammar::Grammar`]: GBNF and regular expressions here, JSON Schema in
//! `constrain-jsonschema`. Most users want the facade crate `constrain`, which re-exports
//! this crate and the JSON Schema front end under one name.
//!
//! ## The pipeline
//!
//! ```text
//!  (front end: JSON Schema) ──┐
//!  GBNF text ───grammar::gbnf──┼──> Grammar ──automaton──> Pda ─┐
//!  regex ───────grammar::regex─┘   (rules over bytes)          ├──> Constraint ──> Matcher (per sequence)
//!  tokenizer.json / GGUF ──vocab──> Vocabulary ──mask──> TokenIndex ┘     (shared)        (cheap, Send)
//!                                              run-time checks ──┘ (optional, matcher::RuntimeChecks)
//! ```
//!
//! - [`grammar`]: a context-free grammar whose rule bodies are regular expressions over bytes.
//! - [`automaton`]: one deterministic byte automaton per rule; rule references push and pop a
//!   stack (a byte-level pushdown automaton). Large counted repetitions keep a counter on the
//!   stack instead of being unrolled.
//! - [`vocab`] and [`mask`]: token bytes, the vocabulary trie, and per-state token masks that are
//!   computed once per automaton state and cached — only tokens that run past the end of the
//!   current rule are checked against the real stack at run time.
//! - [`matcher`]: the per-sequence state: fill a mask, accept a token, roll back, detect the
//!   end; and the hook ([`matcher::RuntimeChecks`]) through which a front end adds the checks
//!   its grammar cannot say.
//! - [`sampling`]: logit warpers (penalties, temperature, top-k, top-p, min-p) and a seeded draw.
//! - [`closing`]: closing mode, the policy that ends an output complete within a token budget.
//! - [`explain`]: why a token or a text is refused, in words.
//! - [`json`]: an incremental lexer of JSON's structure (syntax only), shared by `explain` and
//!   the JSON Schema front end's run-time checks.
//! - [`limits`]: every budget a hostile input could exhaust, in one place.
//!
//! ## The decode loop
//!
//! Compile a grammar once; per sequence, mask the logits, sample, accept. Here a toy
//! vocabulary and made-up logits stand in for the model:
//!
//! ```rust
//! use constrain_core::grammar::gbnf;
//! use constrain_core::sampling::{Sampler, SamplerSettings};
//! use constrain_core::{mask, Constraint, Limits, TokenId, TokenIndex, Vocabulary};
//!
//! let pieces = ["yes", "no", "maybe", "!", "<eos>"];
//! let tokens: Vec<Vec<u8>> = pieces.iter().map(|p| p.as_bytes().to_vec()).collect();
//! let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[TokenId(4)])?);
//! let grammar = gbnf::parse(r#"root ::= ("yes" | "no") "!"?"#)?;
//! let constraint = Constraint::new(&grammar, index.clone(), &Limits::default())?;
//!
//! let mut m = constraint.matcher();
//! let mut sampler = Sampler::new(SamplerSettings { seed: Some(7), ..SamplerSettings::default() })?;
//! let mut bits = vec![0u32; index.vocab().mask_words()];
//! let mut out = Vec::new();
//! loop {
//!     m.fill_mask(&mut bits)?;
//!     // The model's logits; the mask sets every disallowed one to -inf before the warpers.
//!     let mut logits = vec![0.5f32; pieces.len()];
//!     for (i, l) in logits.iter_mut().enumerate() {
//!         if !mask::is_allowed(&bits, TokenId(i as u32)) {
//!             *l = f32::NEG_INFINITY;
//!         }
//!     }
//!     let t = sampler.sample(&mut logits)?;
//!     if index.vocab().is_eos(t) {
//!         break; // allowed only where the grammar accepts
//!     }
//!     m.accept_token(t)?;
//!     out.extend_from_slice(index.vocab().token_bytes(t));
//! }
//! assert!(["yes", "no", "yes!", "no!"].contains(&std::str::from_utf8(&out)?));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod automaton;
pub mod closing;
pub mod explain;
pub mod grammar;
pub mod json;
pub mod limits;
pub mod mask;
pub mod matcher;
pub mod sampling;
#[cfg(test)]
mod test_support;
pub mod util;
pub mod vocab;

pub use limits::Limits;
pub use mask::TokenIndex;
pub use matcher::{Constraint, Liveness, Matcher};
pub use vocab::{TokenId, Vocabulary};

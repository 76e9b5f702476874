//! # constrain
//!
//! Constrained decoding: every token a language model emits is drawn only from the tokens that
//! keep the output valid against a JSON Schema, a GBNF grammar or a regular expression.
//!
//! ## The pipeline
//!
//! Each stage is one module; callers may enter at any stage. This crate is a facade: the
//! engine is the crate `constrain-core` (everything below but [`schema`] and [`check`]),
//! and the JSON Schema front end is `constrain-jsonschema` ([`schema`] and [`check`], behind
//! the default feature `schema`). Dependencies point one way: core ← JSON Schema ← this
//! facade ← `constrain-llama` ← `constrain-cli`.
//!
//! ```text
//!  JSON Schema ──schema──┐
//!  GBNF text ───grammar::gbnf──┼──> Grammar ──automaton──> Pda ─┐
//!  regex ───────grammar::regex─┘   (rules over bytes)          ├──> Constraint ──> Matcher (per sequence)
//!  tokenizer.json / GGUF ──vocab──> Vocabulary ──mask──> TokenIndex ┘     (shared)        (cheap, Send)
//! ```
//!
//! - [`schema`]: JSON Schema → [`grammar::Grammar`]; a keyword no grammar can express is
//!   left to a run-time check ([`check`]) or, with checks off, an error carrying its JSON
//!   pointer — never silently loosened. Its patterns are ECMA-262, JSON Schema's regex
//!   dialect ([`schema::ecma`]), translated into the Rust syntax of [`grammar::regex`].
//! - [`grammar`]: a context-free grammar whose rule bodies are regular expressions over bytes.
//! - [`automaton`]: one deterministic byte automaton per rule; rule references push and pop a
//!   stack (a byte-level pushdown automaton). Large counted repetitions keep a counter on the
//!   stack instead of being unrolled.
//! - [`vocab`] and [`mask`]: token bytes, the vocabulary trie, and per-state token masks that are
//!   computed once per automaton state and cached — only tokens that run past the end of the
//!   current rule are checked against the real stack at run time.
//! - [`check`]: run-time checks for the keywords a grammar cannot express (`uniqueItems`,
//!   overlapping `oneOf`, `if`/`then`/`else`, …): each value they apply to is validated the
//!   moment it completes, and the mask leaves out the tokens that would complete a failing one.
//! - [`matcher`]: the per-sequence state: fill a mask, accept a token, roll back, detect the end.
//! - [`sampling`]: logit warpers (penalties, temperature, top-k, top-p, min-p) and a seeded draw.
//! - [`closing`]: closing mode, the policy that ends an output complete within a token budget.
//!
//! None of these crates knows a model runtime or a command line. The
//! llama.cpp decode loop is the crate `constrain-llama` (it drives a [`Matcher`] and a
//! [`closing::Closer`]), and the `constrain` command line (generation, `eval`, `check`,
//! `bench`, the differential fuzzer) is the crate `constrain-cli`; both depend on this one,
//! never the other way.
//!
//! ## The decode loop
//!
//! Compile a schema once; per sequence, mask the logits, sample, accept. Here a toy
//! vocabulary and made-up logits stand in for the model:
//!
//! ```rust
//! use constrain::sampling::{Sampler, SamplerSettings};
//! use constrain::schema::{self, Options};
//! use constrain::{mask, Constraint, Limits, TokenId, TokenIndex, Vocabulary};
//!
//! let pieces = ["{", "}", "\"name\"", ":", "\"Ann\"", "\"Bo\"", ",", "42", "<eos>"];
//! let tokens: Vec<Vec<u8>> = pieces.iter().map(|p| p.as_bytes().to_vec()).collect();
//! let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[TokenId(8)])?);
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"name": {"enum": ["Ann", "Bo"]}},
//!     "required": ["name"],
//!     "additionalProperties": false
//! });
//! let options = Options::default().with_whitespace(schema::Whitespace::Compact);
//! let constraint = Constraint::new(&schema::compile(&schema, &options)?, index.clone(), &Limits::default())?;
//!
//! let mut m = constraint.matcher();
//! let mut sampler = Sampler::new(SamplerSettings { seed: Some(7), ..SamplerSettings::default() })?;
//! let mut bits = vec![0u32; index.vocab().mask_words()];
//! let mut out = Vec::new();
//! loop {
//!     m.fill_mask(&mut bits)?; // cached per state: a few µs
//!     // The model's logits; the mask sets every disallowed one to -inf before the warpers.
//!     let mut logits: Vec<f32> = (0..pieces.len()).map(|i| (i % 3) as f32).collect();
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
//! let value: serde_json::Value = serde_json::from_slice(&out)?;
//! assert!(value["name"] == "Ann" || value["name"] == "Bo");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

pub use constrain_core::{automaton, closing, explain, grammar, limits, mask, matcher, sampling, util, vocab};
pub use constrain_core::{Constraint, Limits, Liveness, Matcher, TokenId, TokenIndex, Vocabulary};
#[cfg(feature = "schema")]
pub use constrain_jsonschema::check;

/// The JSON Schema front end: [`schema::compile`] a schema into a grammar with its run-time
/// checks ([`schema::Compiled`]), under [`schema::Options`]. The crate
/// `constrain-jsonschema`'s compiler module and its entry point, under one name.
#[cfg(feature = "schema")]
pub mod schema {
    pub use constrain_jsonschema::schema::*;
    pub use constrain_jsonschema::{compile, with_order_hint, Compiled};
}

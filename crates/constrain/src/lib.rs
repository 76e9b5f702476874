//! # constrain
//!
//! Constrained decoding: every token a language model emits is drawn only from the tokens that
//! keep the output valid against a JSON Schema, a GBNF grammar or a regular expression.
//!
//! ## The pipeline
//!
//! Each stage is one module; callers may enter at any stage.
//!
//! ```text
//!  JSON Schema ──schema──┐
//!  GBNF text ───grammar::gbnf──┼──> Grammar ──automaton──> Pda ─┐
//!  regex ───────grammar::regex─┘   (rules over bytes)          ├──> Constraint ──> Matcher (per sequence)
//!  tokenizer.json / GGUF ──vocab──> Vocabulary ──mask──> TokenIndex ┘     (shared)        (cheap, Send)
//! ```
//!
//! - [`schema`]: JSON Schema → [`grammar::Grammar`]; unsupported keywords are errors carrying a
//!   JSON pointer, never silently loosened.
//! - [`grammar`]: a context-free grammar whose rule bodies are regular expressions over bytes.
//! - [`automaton`]: one deterministic byte automaton per rule; rule references push and pop a
//!   stack (a byte-level pushdown automaton). Large counted repetitions keep a counter on the
//!   stack instead of being unrolled.
//! - [`vocab`] and [`mask`]: token bytes, the vocabulary trie, and per-state token masks that are
//!   computed once per automaton state and cached — only tokens that run past the end of the
//!   current rule are checked against the real stack at run time.
//! - [`matcher`]: the per-sequence state: fill a mask, accept a token, roll back, detect the end.
//! - [`sampling`]: logit warpers (penalties, temperature, top-k, top-p, min-p) and a seeded draw.
//! - [`closing`]: closing mode, the policy that ends an output complete within a token budget.
//!
//! This crate is the engine only: it knows no model runtime and no command line. The
//! llama.cpp decode loop is the crate `constrain-llama` (it drives a [`Matcher`] and a
//! [`closing::Closer`]), and the `constrain` command line (generation, `eval`, `check`,
//! `bench`, the differential fuzzer) is the crate `constrain-cli`; both depend on this one,
//! never the other way.
//!
//! ## The decode loop
//!
//! ```text
//! let mut m = constraint.matcher();
//! loop {
//!     m.fill_mask(&mut mask)?;            // cached per state; a few µs
//!     logits[i] = -inf where mask bit i is 0
//!     apply warpers, draw token t
//!     if vocab.is_eos(t) { break }        // only allowed where the grammar accepts
//!     m.accept_token(t)?;
//!     if m.is_finished() { break }        // nothing but EOS could follow
//! }
//! ```

pub mod automaton;
pub mod closing;
pub mod explain;
pub mod grammar;
pub mod limits;
pub mod mask;
pub mod matcher;
pub mod sampling;
mod util;
pub mod schema;
pub mod vocab;

pub use limits::Limits;
pub use matcher::{Constraint, Matcher};
pub use mask::TokenIndex;
pub use vocab::{TokenId, Vocabulary};

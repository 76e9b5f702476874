//! # constrain-jsonschema
//!
//! The JSON Schema front end of constrain. [`compile`] turns a schema (drafts 4, 6, 7,
//! 2019-09 and 2020-12) into a [`Compiled`]: a core grammar whose language is the
//! schema's valid documents, or a documented subset of them, never more; the run-time checks
//! ([`check`]) for the keywords no grammar can say, which the core matcher applies through its
//! hook (`constrain_core::matcher::RuntimeChecks`); and notes on every subset. A keyword that
//! can be enforced neither way is an error naming its JSON pointer.
//!
//! Three layers, each importing only the ones below it: [`schema`], the compiler (schema →
//! grammar, notes, and the list of what it left to run time); [`check`], the run-time checks,
//! which read the compiler's helpers (dialects, pointers, validators); and [`compile`] with
//! [`Compiled`] above both. Most users reach this crate as `constrain::schema` through the
//! facade crate `constrain`, which puts [`compile`] and [`Compiled`] there.
//!
//! ```rust
//! use constrain::schema::{self, Options};
//! use constrain::{Constraint, Limits, TokenIndex, Vocabulary};
//!
//! let schema = serde_json::json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
//! let compiled = schema::compile(&schema, &Options::default())?;
//! let c = Constraint::new(&compiled, TokenIndex::new(Vocabulary::bytes()), &Limits::default())?;
//! let mut m = c.matcher();
//! m.accept_bytes(b"[1,2")?;
//! assert!(m.accept_bytes(b",2]").is_err()); // the check refuses the repeated item
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod check;
mod compiled;
pub mod schema;

pub use compiled::{compile, with_order_hint, Compiled};

// The engine's modules and types under the paths this crate's code names them by
// (`crate::grammar::Expr`, `crate::Constraint`, …): the engine is below, never beside.
#[cfg(test)]
use constrain_core::{automaton, Vocabulary};
use constrain_core::{grammar, mask, matcher, util, vocab};
use constrain_core::{Constraint, Limits, TokenId, TokenIndex};

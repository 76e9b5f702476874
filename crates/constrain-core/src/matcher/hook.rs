//! The run-time checks hook: how a front end adds the constraints its grammar cannot say.
//!
//! A grammar is context-free; some keywords of a front end are not (JSON Schema's
//! `uniqueItems`, overlapping `oneOf`, …). The front end then compiles a grammar that
//! accepts a superset and hands the matcher a [`RuntimeChecks`]: every [`crate::Matcher`]
//! of the constraint owns one [`CheckTracker`] from it, feeds it each accepted token, asks
//! it to narrow each mask and whether the output may end, and rolls it back with the
//! automaton. The engine knows nothing of what is checked; the JSON Schema front end's
//! implementation lives in `constrain::check`.
//!
//! A [`ConstraintSource`] pairs a grammar with its checks, so that a
//! [`crate::Constraint`] is never built from a checked grammar without them.

use crate::grammar::Grammar;
use crate::mask::TokenIndex;
use crate::vocab::Vocabulary;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// What a front end leaves to run time, shared by every matcher of a constraint.
pub trait RuntimeChecks: Send + Sync + fmt::Debug {
    /// A tracker at the start of the output, for one sequence over `index`'s vocabulary.
    fn tracker(self: Arc<Self>, index: &TokenIndex) -> Box<dyn CheckTracker>;

    /// Short texts that valid outputs contain (JSON values or members the front end names),
    /// which liveness proofs insert first when searching for a way to finish.
    fn hints(&self) -> &[Vec<u8>];

    /// Whole candidate outputs, tried when a proof from the start finds nothing cheaper.
    fn witnesses(&self) -> &[Vec<u8>];

    /// The checks as `Any`, so a front end can reach its own type (reports, tests).
    fn as_any(&self) -> &dyn Any;
}

/// The per-sequence state of a [`RuntimeChecks`]: it sees the same bytes as the automaton,
/// one accepted token at a time, and rolls back with it.
pub trait CheckTracker: Send + fmt::Debug {
    /// Back to the start of the output (keeps the allocations).
    fn reset(&mut self);

    /// Feeds one token's `bytes`, all or nothing. `false`, leaving the state unchanged,
    /// when they complete a value that fails its check.
    fn advance(&mut self, bytes: &[u8]) -> bool;

    /// Whether the output may end here, given that the grammar accepts here.
    fn end_ok(&mut self) -> bool;

    /// Undoes the last `n` accepted tokens.
    fn rollback(&mut self, n: usize);

    /// An independent copy of this tracker at the same point of the output (a forked
    /// matcher's: beam search). Scratch and memos need not be copied. Its cost should not
    /// grow with the output's length: share the history with this tracker (`&mut self`
    /// lets it hand its own recent state over to the shared part, as
    /// [`crate::util::ForkVec::fork`] does).
    fn fork(&mut self) -> Box<dyn CheckTracker>;

    /// Clears from `mask` the tokens that would complete a value failing its check.
    fn filter(&mut self, mask: &mut [u32], vocab: &Vocabulary);

    /// For closing mode's distances: where a key being written is checked, the ways to end
    /// it that the check does not refuse outright (into `out`, cleared first). `false` (and
    /// `out` empty) where no check constrains the key.
    fn key_endings(&mut self, out: &mut Vec<Vec<u8>>) -> bool;

    /// Whether the output's value is complete: nothing but whitespace may follow, so whether
    /// the output passes is decided already.
    fn document_done(&self) -> bool;

    /// Whether the output is between tokens of the value (not inside a string, a number or
    /// a literal), where whitespace changes nothing the checks see.
    fn between_tokens(&self) -> bool;

    /// How many leading bytes of `bytes` (bytes the grammar forces next) complete no
    /// checked value: forced decoding may take those, the rest is left to the mask.
    fn unchecked_prefix(&mut self, bytes: &[u8]) -> usize;
}

/// What a [`crate::Constraint`] is built from: a grammar, and the run-time checks its front
/// end attached, if any. [`Grammar`] is one (no checks); the JSON Schema front end's compile
/// result is another. Taking this instead of a bare grammar keeps a checked grammar from
/// losing its checks on the way to a constraint.
pub trait ConstraintSource {
    /// The grammar.
    fn grammar(&self) -> &Grammar;

    /// The run-time checks every matcher must apply, if any.
    fn runtime_checks(&self) -> Option<Arc<dyn RuntimeChecks>>;
}

impl ConstraintSource for Grammar {
    fn grammar(&self) -> &Grammar {
        self
    }

    fn runtime_checks(&self) -> Option<Arc<dyn RuntimeChecks>> {
        None
    }
}

//! Stage 5: the per-sequence [`Matcher`] and the compiled, shareable [`Constraint`].
//! (API pinned; implementation being written.)
use crate::automaton::Pda;
use crate::grammar::Grammar;
use crate::mask::TokenIndex;
use crate::{Limits, TokenId};
use std::sync::Arc;

/// A grammar compiled against one tokenizer: the automaton plus the shared token index.
/// Cheap to clone; create one [`Matcher`] per sequence with [`Constraint::matcher`].
#[derive(Clone)]
pub struct Constraint {
    inner: Arc<Inner>,
}

struct Inner {
    pda: Pda,
    index: Arc<TokenIndex>,
    limits: Limits,
}

impl Constraint {
    /// Compiles `grammar` into an automaton and binds it to the token index.
    pub fn new(grammar: &Grammar, index: Arc<TokenIndex>, limits: &Limits) -> Result<Constraint, Error> {
        let pda = Pda::build(grammar, limits)?;
        Ok(Constraint { inner: Arc::new(Inner { pda, index, limits: limits.clone() }) })
    }
    /// A fresh matcher at the start of the grammar.
    pub fn matcher(&self) -> Matcher {
        Matcher { constraint: self.clone() }
    }
    /// The token index (vocabulary and mask cache) this constraint uses.
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.inner.index
    }
    /// The compiled automaton.
    pub fn pda(&self) -> &Pda {
        &self.inner.pda
    }
}

/// Per-sequence matching state.
pub struct Matcher {
    constraint: Constraint,
}

impl Matcher {
    /// Writes the allowed-token bitset (bit `i % 32` of word `i / 32` set = token `i` allowed).
    /// `mask.len()` must be `vocab.mask_words()`. EOS ids are set only where the grammar accepts.
    pub fn fill_mask(&mut self, _mask: &mut [u32]) -> Result<(), Error> {
        let _ = &self.constraint.inner.limits;
        Err(Error::Internal("matcher not written yet".into()))
    }
    /// Advances by one token. EOS is accepted only where the grammar may stop (then the
    /// matcher is finished). A rejected token leaves the state unchanged.
    pub fn accept_token(&mut self, _token: TokenId) -> Result<(), Error> {
        Err(Error::Internal("matcher not written yet".into()))
    }
    /// Advances by raw bytes (all or nothing).
    pub fn accept_bytes(&mut self, _bytes: &[u8]) -> Result<(), Error> {
        Err(Error::Internal("matcher not written yet".into()))
    }
    /// Undoes the last `n` accepted tokens (`accept_bytes` counts as one).
    pub fn rollback(&mut self, _n: usize) -> Result<(), Error> {
        Err(Error::Internal("matcher not written yet".into()))
    }
    /// Whether the output so far is complete (EOS allowed).
    pub fn is_accepting(&self) -> bool {
        false
    }
    /// Whether nothing but EOS can follow (or EOS was accepted).
    pub fn is_finished(&self) -> bool {
        false
    }
    /// The bytes the grammar dictates next (empty if there is a choice).
    pub fn forced_bytes(&self) -> Vec<u8> {
        Vec::new()
    }
    /// Back to the start of the grammar.
    pub fn reset(&mut self) {}
}

/// Why a constraint could not be built or a matcher step failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The grammar could not be compiled into an automaton.
    #[error(transparent)]
    Automaton(#[from] crate::automaton::Error),
    /// The token is not allowed here (the state is unchanged).
    #[error("token {0} is not allowed here")]
    Rejected(u32),
    /// Bytes not allowed here (the state is unchanged).
    #[error("bytes not allowed here")]
    RejectedBytes,
    /// The mask slice has the wrong length.
    #[error("mask has {got} words, expected {expected}")]
    MaskLength { got: usize, expected: usize },
    /// Rolling back more tokens than were accepted.
    #[error("cannot roll back {requested} tokens: only {available} accepted")]
    Rollback { requested: usize, available: usize },
    /// The matcher already accepted EOS.
    #[error("the output is already finished")]
    Finished,
    /// Parse budget exceeded (stack too deep or too ambiguous).
    #[error("matching limit exceeded: {0}")]
    Limit(String),
    /// Bug guard: an internal inconsistency, reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(String),
}

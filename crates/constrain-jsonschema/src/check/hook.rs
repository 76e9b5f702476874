//! [`ValueChecks`] as the engine's run-time checks hook ([`RuntimeChecks`]): each matcher
//! gets a [`Checker`] with the tokenizer's [`TokenStats`], kept on the token index.

use super::tracker::{Checker, TokenStats};
use super::ValueChecks;
use crate::mask::TokenIndex;
use crate::matcher::{CheckTracker, RuntimeChecks};
use crate::vocab::Vocabulary;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

impl RuntimeChecks for ValueChecks {
    fn tracker(self: Arc<Self>, index: &TokenIndex) -> Box<dyn CheckTracker> {
        let stats = index.extension(TokenStats::new);
        Box::new(Tracker { checker: Checker::new(self), stats })
    }

    fn hints(&self) -> &[Vec<u8>] {
        ValueChecks::hints(self)
    }

    fn witnesses(&self) -> &[Vec<u8>] {
        ValueChecks::witnesses(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One sequence's [`Checker`], with the per-token facts its mask filter reads.
struct Tracker {
    checker: Checker,
    stats: Arc<TokenStats>,
}

impl fmt::Debug for Tracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracker").finish_non_exhaustive()
    }
}

impl CheckTracker for Tracker {
    fn reset(&mut self) {
        self.checker.reset();
    }

    fn advance(&mut self, bytes: &[u8]) -> bool {
        self.checker.advance(bytes)
    }

    fn end_ok(&mut self) -> bool {
        self.checker.end_ok()
    }

    fn rollback(&mut self, n: usize) {
        self.checker.rollback(n);
    }

    fn fork(&mut self) -> Box<dyn CheckTracker> {
        Box::new(Tracker { checker: self.checker.fork(), stats: Arc::clone(&self.stats) })
    }

    fn filter(&mut self, mask: &mut [u32], vocab: &Vocabulary) {
        self.checker.filter(mask, vocab, &self.stats);
    }

    fn key_endings(&mut self, out: &mut Vec<Vec<u8>>) -> bool {
        self.checker.key_endings(out)
    }

    fn document_done(&self) -> bool {
        self.checker.document_done()
    }

    fn between_tokens(&self) -> bool {
        self.checker.between_tokens()
    }

    fn unchecked_prefix(&mut self, bytes: &[u8]) -> usize {
        self.checker.unchecked_prefix(bytes)
    }
}

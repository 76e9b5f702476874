//! Closing mode: a token budget closes the output instead of cutting it.
//!
//! Input: a [`Matcher`] and, at each decode step, the remaining budget `R` (the smaller of
//! `max_tokens - used` and the context left). Output: a narrowed mask, and when to stop.
//!
//! The invariant is `R ≥ d`, where `d` is [`Matcher::min_bytes_to_finish_checked`]: the fewest
//! bytes to a complete output, over bytes the vocabulary has single-byte tokens for, so `d`
//! bytes are at most `d` tokens. (It is the grammar's distance, except inside an object key
//! that begins a name written already: there the grammar's shortest way repeats the name,
//! which the run-time check refuses, so the ways the check allows are measured instead.) It
//! holds at the start (checked up front: [`Closer::new`]) and is kept by every step:
//!
//! - a sampled token is checked after it is accepted (one stack walk: the cheap path while
//!   the budget is far); if the distance after it is not below `R`, it is rolled back and the
//!   step is sampled again in closing mode;
//! - in closing mode (entered when `R ≤ d`, or by such a token), the mask keeps only tokens
//!   after which the distance is below `R` ([`Matcher::retain_shortening`] with `R`,
//!   computed only then and only over the allowed set): the invariant for the step after.
//!   The single-byte token of a shortest path is always among them, since it leaves `d - 1`
//!   and `d ≤ R`. (Not "below `d`": where a parse limit dropped the stack that carried the
//!   shortest completion, the measured `d` has no successor at `d - 1`, but the stacks kept
//!   may still fit the budget.)
//! - jump-forward bytes lie on every path to the end, so they shorten `d` by their length
//!   while using at most that many tokens;
//! - once closing and the output is complete (`d = 0`), generation stops.
//!
//! So every run ends complete within the budget. The engine and the tests drive this same
//! type, so the property test covers the engine's policy, not a copy of it.
//!
//! ## Example
//!
//! ```rust
//! use constrain::closing::Closer;
//! use constrain::grammar::gbnf;
//! use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
//!
//! let tokens: Vec<Vec<u8>> = ["[", "]", ",", "1", "11", "<eos>"].iter().map(|t| t.as_bytes().to_vec()).collect();
//! let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[TokenId(5)]).unwrap());
//! let g = gbnf::parse("root ::= \"[\" \"1\"+ (\",\" \"1\"+)* \"]\"\n").unwrap();
//! let c = Constraint::new(&g, index, &Limits::default()).unwrap();
//!
//! // The shortest output, `[1]`, needs 3 tokens: a budget of 2 is refused up front.
//! let err = Closer::new(&c, true, 2, 4096).unwrap_err();
//! assert_eq!(err.needed, 3);
//! let closer = Closer::new(&c, true, 16, 4096).unwrap();
//! assert!(closer.is_enabled() && !closer.is_closing());
//! ```

use crate::matcher::{Constraint, Error as MatchError, Matcher};
use crate::TokenId;

/// The token budget cannot hold the shortest complete output ([`Closer::new`]): refused
/// before generating. Its own type so that closing needs only the matcher; a generator
/// converts it into its error (constrain-llama's `Error::BudgetTooSmall`, which also says
/// which flags to raise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the token budget is too small: the shortest valid output needs up to {needed} tokens (one byte per token at worst) but only {available} are available ({max_tokens} max tokens, {context_left} tokens left in the context)")]
pub struct BudgetTooSmall {
    /// Bytes of the shortest complete output (tokens at worst).
    pub needed: u64,
    /// The smaller of the two below.
    pub available: usize,
    /// The token budget asked for.
    pub max_tokens: usize,
    /// Context tokens left after the prompt.
    pub context_left: usize,
}

/// Closing-mode state for one generation (see the module doc).
#[derive(Clone, Debug)]
pub struct Closer {
    enabled: bool,
    closing: bool,
    distance: u64,
}

/// What [`Closer::check`] decided about a sampled token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The token keeps the budget: go on.
    Keep,
    /// The token was rolled back; the mask now holds only tokens that keep the budget:
    /// sample again.
    Resample,
}

impl Closer {
    /// Closing for a generation of `constraint` with `max_tokens` and `context_left` tokens
    /// of context after the prompt. Fails with the minimum needed when the budget is below
    /// the start's distance. `enabled = false`, or a grammar with no path to its end over
    /// single-byte tokens, gives a closer that does nothing.
    pub fn new(
        constraint: &Constraint,
        enabled: bool,
        max_tokens: usize,
        context_left: usize,
    ) -> Result<Closer, BudgetTooSmall> {
        let start = if enabled { constraint.min_bytes_from_start() } else { None };
        if let Some(needed) = start {
            let available = max_tokens.min(context_left);
            if (available as u64) < needed {
                return Err(BudgetTooSmall { needed, available, max_tokens, context_left });
            }
        }
        Ok(Closer { enabled: start.is_some(), closing: false, distance: start.unwrap_or(0) })
    }

    /// A closer that never closes (closing off).
    pub fn disabled() -> Closer {
        Closer { enabled: false, closing: false, distance: 0 }
    }

    /// Whether closing mode has started (the budget shapes the end of the output).
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// Whether closing applies at all.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Before a step: whether to stop now (closing, or no budget left, and the output is
    /// complete).
    pub fn should_stop(&self, m: &Matcher, remaining: usize) -> bool {
        self.enabled && (self.closing || remaining == 0) && m.is_accepting()
    }

    /// Before sampling, with the mask [`Matcher::fill_mask`] wrote: measures the distance,
    /// enters closing mode when the budget is down to it, and then narrows the mask.
    pub fn narrow(&mut self, m: &mut Matcher, mask: &mut [u32], remaining: usize) -> Result<(), MatchError> {
        if !self.enabled {
            return Ok(());
        }
        self.distance = m.min_bytes_to_finish_checked()?.unwrap_or(u64::MAX);
        if remaining as u64 <= self.distance {
            self.closing = true;
        }
        if self.closing {
            m.retain_shortening(mask, remaining as u64)?;
        }
        Ok(())
    }

    /// Soft closing: when the budget is within `margin` tokens of the distance (and not yet
    /// closing), writes into `soft` the tokens of `mask` that shorten the distance and
    /// returns the logit bonus to give them (growing as the hard limit nears).
    pub fn soft(
        &self,
        m: &mut Matcher,
        mask: &[u32],
        soft: &mut Vec<u32>,
        remaining: usize,
        margin: usize,
    ) -> Result<Option<f32>, MatchError> {
        if !self.enabled
            || self.closing
            || margin == 0
            || remaining as u64 > self.distance.saturating_add(margin as u64)
        {
            return Ok(None);
        }
        soft.clear();
        soft.extend_from_slice(mask);
        m.retain_shortening(soft, self.distance)?;
        let slack = remaining as u64 - self.distance;
        Ok(Some(SOFT_CLOSE_BONUS * (1.0 - slack as f32 / (margin as f32 + 1.0))))
    }

    /// After `token` was accepted into `m` with `remaining` tokens of budget before it:
    /// keeps it if the distance after it fits the budget left; otherwise rolls it back,
    /// enters closing mode and rewrites `mask` to the tokens after which it does.
    pub fn check(
        &mut self,
        m: &mut Matcher,
        token: TokenId,
        mask: &mut [u32],
        remaining: usize,
    ) -> Result<Verdict, MatchError> {
        if !self.enabled || self.closing || m.constraint().index().vocab().is_eos(token) {
            return Ok(Verdict::Keep);
        }
        let after = m.min_bytes_to_finish_checked()?.unwrap_or(u64::MAX);
        if after < remaining as u64 {
            return Ok(Verdict::Keep);
        }
        m.rollback(1)?;
        self.closing = true;
        m.fill_mask(mask)?;
        m.retain_shortening(mask, remaining as u64)?;
        Ok(Verdict::Resample)
    }
}

/// The largest logit bonus soft closing gives a token that shortens the distance to the end
/// (reached one token before the hard limit; a logit difference of 4 is a factor of ~55).
pub const SOFT_CLOSE_BONUS: f32 = 4.0;

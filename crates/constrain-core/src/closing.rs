//! Closing mode: a token budget closes the output instead of cutting it.
//!
//! Input: a [`Matcher`] and, at each decode step, the remaining budget `R` (the smaller of
//! `max_tokens - used` and the context left). Output: a narrowed mask, and when to stop.
//!
//! Two distances to a complete output are kept apart:
//!
//! - `d`, [`Matcher::min_bytes_to_finish_checked`]: the fewest bytes, over bytes the
//!   vocabulary has single-byte tokens for, so `d` bytes are at most `d` tokens. (It is the
//!   grammar's distance, except inside an object key that begins a name written already:
//!   there the grammar's shortest way repeats the name, which the run-time check refuses,
//!   so the ways the check allows are measured instead.) One stack walk: cheap.
//! - `t`, the fewest tokens of this vocabulary that spell the shortest byte completion `S`
//!   ([`Matcher::shortest_completion`], counted by [`crate::TokenIndex::fewest_tokens`]):
//!   multi-byte tokens count as one. `S` is a real completion, so `t` tokens do complete the
//!   output: an upper bound on the true fewest (another completion may tokenize better), and
//!   `t ≤ d`. It costs a walk of `S` and a count over it, so it is computed only when the
//!   budget is below `d`.
//!
//! The invariant is that some completion fits: `R ≥ d`, or else `R ≥` the tokens of the
//! planned completion. It holds at the start (checked up front: [`Closer::new`] refuses a
//! budget below `t` at the start, and states that minimum) and is kept by every step:
//!
//! - a sampled token is checked after it is accepted (one stack walk: the cheap path while
//!   the budget is far); if the distance after it is not below `R`, it is rolled back and the
//!   step is sampled again in closing mode;
//! - in closing mode (entered when `R ≤ d`, or by such a token) with `R ≥ d`, the mask keeps
//!   only tokens after which the distance is below `R` ([`Matcher::retain_shortening`] with
//!   `R`, computed only then and only over the allowed set): the invariant for the step
//!   after. The single-byte token of a shortest path is always among them, since it leaves
//!   `d - 1` and `d ≤ R`. (Not "below `d`": where a parse limit dropped the stack that
//!   carried the shortest completion, the measured `d` has no successor at `d - 1`, but the
//!   stacks kept may still fit the budget.) A decode loop that checks each sampled token may
//!   leave this test to the check, which then tests only the token drawn
//!   ([`Closer::narrow_for_check`]);
//! - in closing mode with `R < d`, the output follows a plan: `S`, computed once, and the
//!   fewest tokens spelling each of its suffixes. The mask keeps the tokens whose bytes begin
//!   what is left of `S` and after which the rest takes at most `R - 1` tokens; the first
//!   token of a fewest-token spelling is always among them. The plan moves on with each
//!   token [`Closer::check`] sees; it is made again from the matcher when tokens came
//!   another way (jump-forward), or when the rest no longer completes the output (a key
//!   it spells would repeat a name, which only the run-time check knows);
//! - jump-forward bytes lie on every path to the end, so they shorten `d` by their length
//!   while using at most that many tokens;
//! - once closing and the output is complete (`d = 0`), generation stops.
//!
//! So every run ends complete within the budget. The engine and the tests drive this same
//! type, so the property test covers the engine's policy, not a copy of it.
//!
//! ## With run-time checks
//!
//! The grammar's distance knows nothing of the checks: its nearest end can be one they
//! refuse (an object short of `minProperties`, a `then` an earlier choice decides), and
//! closing would steer straight into that dead end. So with checks the closer keeps a
//! *plan* that a liveness proof found ([`Matcher::prove_live_into`]): bytes that bring the
//! output to a complete one the grammar and every check accept. The invariant is that the
//! plan's fewest tokens fit the budget left:
//!
//! - at the start, a proof with more fuel makes the first plan; a budget below its tokens
//!   is refused up front, with that minimum;
//! - each sampled token is kept when it is on the plan (and the rest still fits), or when a
//!   proof after it ([`PROOF_FUEL`]) finds a completion that fits, which becomes the plan;
//! - otherwise it is rolled back and refused: dead, or not proved live, it is cleared from
//!   the mask and another drawn; a completion too long for the budget starts closing mode.
//!   After [`PROOF_TRIES`] refusals in a step (or none left) the mask is the plan's tokens;
//! - in closing mode the mask keeps the plan's tokens that leave the rest within budget.
//!
//! Where no proof succeeds (a proof from the start out of fuel), closing measures the
//! grammar alone as above, a token proved dead is still refused, and the counts in
//! [`Closer::proofs`] say what happened.
//!
//! ## Example
//!
//! ```rust
//! use constrain::closing::Closer;
//! use constrain::grammar::gbnf;
//! use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
//!
//! let tokens: Vec<Vec<u8>> = ["[", "]", ",", "1", "11", "[1", "<eos>"].iter().map(|t| t.as_bytes().to_vec()).collect();
//! let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[TokenId(6)]).unwrap());
//! let g = gbnf::parse("root ::= \"[\" \"1\"+ (\",\" \"1\"+)* \"]\"\n").unwrap();
//! let c = Constraint::new(&g, index, &Limits::default()).unwrap();
//!
//! // The shortest output, `[1]`, is 3 bytes but 2 tokens (`[1`, `]`): a budget of 1 is
//! // refused up front, with that minimum; 2 is enough.
//! assert_eq!(c.min_bytes_from_start(), Some(3));
//! let err = Closer::new(&c, true, 1, 4096).unwrap_err();
//! assert_eq!(err.needed, 2);
//! assert!(Closer::new(&c, true, 2, 4096).is_ok());
//! let closer = Closer::new(&c, true, 16, 4096).unwrap();
//! assert!(closer.is_enabled() && !closer.is_closing());
//! ```

use crate::matcher::{Constraint, Error as MatchError, Liveness, Matcher};
use crate::TokenId;

/// The token budget cannot hold a shortest complete output ([`Closer::new`]): refused
/// before generating. Its own type so that closing needs only the matcher; a generator
/// converts it into its error (constrain-llama's `Error::BudgetTooSmall`, which also says
/// which flags to raise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the token budget is too small: the shortest valid output takes {needed} tokens (the fewest tokens of this vocabulary that spell it; an upper bound, another output may tokenize shorter) but only {available} are available ({max_tokens} max tokens, {context_left} tokens left in the context)")]
pub struct BudgetTooSmall {
    /// The fewest tokens of the vocabulary that spell a shortest complete output: what the
    /// budget must allow (an upper bound on the fewest any complete output takes).
    pub needed: u64,
    /// The smaller of the two below.
    pub available: usize,
    /// The token budget asked for.
    pub max_tokens: usize,
    /// Context tokens left after the prompt.
    pub context_left: usize,
}

/// Byte steps the liveness proof after a sampled token may take ([`Matcher::prove_live`]).
/// About 0.1 ms at most, and the usual proof is one walk of the shortest completion.
///
/// A constant of the algorithm, not a user limit: a proof out of fuel refuses the sampled
/// token (a smaller choice, counted in [`ProofStats`]), never accepts one unproved.
pub const PROOF_FUEL: usize = 4096;

/// Byte steps of the proof at the start of a generation (once per generation).
///
/// A constant of the algorithm, not a user limit (see [`PROOF_FUEL`]).
const START_FUEL: usize = 1 << 16;

/// Sampled tokens one step may refuse (not proved live, or not within the budget) before
/// the step follows the plan, the completion last proved.
///
/// A constant of the algorithm, not a user limit (see [`PROOF_FUEL`]): past it the step
/// takes the plan's token, which is proved live.
pub const PROOF_TRIES: usize = 8;

/// Closing-mode state for one generation (see the module doc).
#[derive(Clone, Debug)]
pub struct Closer {
    enabled: bool,
    closing: bool,
    distance: u64,
    plan: Plan,
    /// The constraint has run-time checks: every sampled token is proved live (and within
    /// the budget), and `plan` holds the completion the last proof found.
    checked: bool,
    /// Tokens refused at the current step (reset by [`Closer::narrow`]).
    tries: usize,
    /// This step's mask was left wide in closing mode ([`Closer::narrow_for_check`]): the
    /// sampled token is tested against the budget by [`Closer::check`] instead.
    deferred: bool,
    proofs: ProofStats,
    /// The completion of the proof in progress (kept to reuse its allocation).
    scratch: Vec<u8>,
}

/// What the liveness proofs of one generation refused ([`Closer::proofs`]). Each refused
/// token was taken back and another drawn: none of these is an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProofStats {
    /// Sampled tokens refused because a search proved no valid completion after them.
    pub dead: usize,
    /// Sampled tokens refused because the search ran out of fuel before proving them live.
    pub unproved: usize,
    /// Sampled tokens refused because the completion proved after them did not fit the
    /// budget left (closing mode began).
    pub too_long: usize,
    /// Steps that refused [`PROOF_TRIES`] tokens, or every allowed one, and followed the
    /// plan instead.
    pub fallbacks: usize,
}

/// The completion closing follows while the budget is below the distance in bytes.
#[derive(Clone, Debug, Default)]
struct Plan {
    /// A shortest completion, from the matcher's state when it was made.
    bytes: Vec<u8>,
    /// `cost[i]`: the fewest tokens that spell `bytes[i..]` ([`crate::TokenIndex::fewest_tokens`]).
    cost: Vec<u32>,
    /// The bytes taken since (what is left completes the output).
    pos: usize,
    /// The matcher's [`Matcher::num_tokens`] where `bytes[pos..]` completes it; `None`: no plan.
    at: Option<usize>,
}

impl Plan {
    /// A new plan from `m`'s state; `false` when no completion is found.
    fn make(&mut self, m: &mut Matcher) -> Result<bool, MatchError> {
        self.at = None;
        self.pos = 0;
        if !m.shortest_completion(&mut self.bytes)? {
            return Ok(false);
        }
        m.constraint().index().fewest_tokens(&self.bytes, &mut self.cost);
        self.at = Some(m.num_tokens());
        Ok(true)
    }

    /// A new plan from `m`'s state: a liveness proof ([`Matcher::prove_live_into`]) with
    /// `fuel`. `false` (no plan) unless it proved the output live.
    fn prove(&mut self, m: &mut Matcher, fuel: usize) -> Result<bool, MatchError> {
        self.at = None;
        self.pos = 0;
        self.cost.clear();
        if m.prove_live_into(fuel, &mut self.bytes)? != Liveness::Live {
            return Ok(false);
        }
        self.at = Some(m.num_tokens());
        Ok(true)
    }

    /// Whether the plan completes `m`'s output as it is now.
    fn is_current(&self, m: &Matcher) -> bool {
        self.at == Some(m.num_tokens())
    }

    /// Counts the fewest tokens that spell each suffix ([`crate::TokenIndex::fewest_tokens`]),
    /// once a plan: a plan proved far from the end of the budget never needs them.
    fn count(&mut self, index: &crate::TokenIndex) {
        if self.cost.len() != self.bytes.len() + 1 {
            index.fewest_tokens(&self.bytes, &mut self.cost);
        }
    }

    /// Whether the rest from byte `pos` takes at most `budget` tokens: at most one a byte,
    /// else counted.
    fn fits_from(&mut self, index: &crate::TokenIndex, pos: usize, budget: usize) -> bool {
        if self.bytes.len().saturating_sub(pos) <= budget {
            return true;
        }
        self.count(index);
        self.cost.get(pos).is_some_and(|&c| (c as usize) <= budget)
    }

    /// Where the plan stands after `token`, just accepted into `m` (from the state the plan
    /// was current at): `Some(pos)` when its bytes begin what is left.
    fn after(&self, m: &Matcher, token: TokenId) -> Option<usize> {
        let bytes = m.constraint().index().vocab().token_bytes(token);
        let on = self.at.is_some_and(|at| at + 1 == m.num_tokens())
            && !bytes.is_empty()
            && self.bytes.get(self.pos..).is_some_and(|rest| rest.starts_with(bytes));
        on.then_some(self.pos + bytes.len())
    }

    /// Moves past `tokens`, accepted into `m` after the plan's state (a sampled token, or
    /// jump-forward's); forgets the plan where they leave it.
    fn follow(&mut self, m: &Matcher, tokens: &[TokenId]) {
        let vocab = m.constraint().index().vocab();
        let Some(at) = self.at.filter(|&at| at + tokens.len() == m.num_tokens()) else {
            self.at = None;
            return;
        };
        let mut pos = self.pos;
        for &t in tokens {
            let bytes = vocab.token_bytes(t);
            if !self.bytes.get(pos..).is_some_and(|rest| rest.starts_with(bytes)) {
                self.at = None;
                return;
            }
            pos += bytes.len();
        }
        self.pos = pos;
        self.at = Some(at + tokens.len());
    }

    /// Whether what is left still completes `m`'s output: the plan followed every token
    /// since, and the matcher, run-time checks included, accepts the rest as a complete
    /// output (tried, then rolled back). The walk that made it knows only the checks at its
    /// start: a key it spells further on may repeat a name, which the check refuses once
    /// the key is reached; the plan is then made again from there.
    fn holds(&self, m: &mut Matcher) -> Result<bool, MatchError> {
        if self.at != Some(m.num_tokens()) {
            return Ok(false);
        }
        let rest = self.bytes.get(self.pos..).unwrap_or(&[]);
        if rest.is_empty() {
            return Ok(m.is_accepting());
        }
        match m.accept_bytes(rest) {
            Ok(()) => {
                let complete = m.is_accepting();
                m.rollback(1)?;
                Ok(complete)
            }
            Err(MatchError::RejectedBytes | MatchError::Limit(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Keeps in `mask` the tokens that begin what is left and after which the rest takes at
    /// most `remaining - 1` tokens (or, should the plan no longer fit, a fewest-token way);
    /// where nothing is left, EOS. Needs the counts ([`Plan::count`]).
    fn retain(&self, vocab: &crate::Vocabulary, mask: &mut [u32], remaining: usize) {
        let rest = self.bytes.get(self.pos..).unwrap_or(&[]);
        if rest.is_empty() {
            retain_eos(vocab, mask);
            return;
        }
        let now = self.cost.get(self.pos).copied().unwrap_or(u32::MAX);
        let left = u32::try_from(remaining.saturating_sub(1)).unwrap_or(u32::MAX).max(now.saturating_sub(1));
        // Infallible: the filter cannot fail.
        let Ok(_) = crate::util::try_retain_tokens(mask, |token| {
            let bytes = vocab.token_bytes(token);
            Ok::<_, std::convert::Infallible>(
                !vocab.is_eos(token)
                    && !bytes.is_empty()
                    && rest.starts_with(bytes)
                    && self.cost.get(self.pos + bytes.len()).is_some_and(|&c| c <= left),
            )
        });
    }
}

/// What [`Closer::check`] decided about a sampled token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The token keeps the budget, and with run-time checks is proved live: go on.
    Keep,
    /// The token was rolled back and the mask rewritten (the token cleared from it, or
    /// narrowed to the tokens that keep the budget): draw again from the mask, accept the
    /// token and [`Closer::check`] it too. The checks of one step end: a step refuses at
    /// most [`PROOF_TRIES`] tokens before its mask is the plan's, whose tokens are kept.
    Resample,
}

impl Closer {
    /// Closing for a generation of `constraint` with `max_tokens` and `context_left` tokens
    /// of context after the prompt. Fails with the minimum needed when the budget is below
    /// what the start needs: its distance in bytes, or, when the budget is below that, the
    /// fewest tokens that spell the shortest output ([`Constraint::min_tokens_from_start`]);
    /// with run-time checks, the fewest tokens that spell the completion the start's
    /// liveness proof found. `enabled = false`, or a grammar with no path to its end over
    /// single-byte tokens, gives a closer that does not close; with run-time checks it
    /// still proves every sampled token live.
    pub fn new(
        constraint: &Constraint,
        enabled: bool,
        max_tokens: usize,
        context_left: usize,
    ) -> Result<Closer, BudgetTooSmall> {
        let available = max_tokens.min(context_left);
        let mut closer = Closer::disabled();
        closer.checked = constraint.checks().is_some();
        if closer.checked {
            // A proof from the start: the plan every later step can fall back on. Where it
            // fails (out of fuel, or a parse limit), closing measures the grammar alone.
            let mut m = constraint.matcher();
            if closer.plan.prove(&mut m, START_FUEL).unwrap_or(false) && enabled {
                let index = constraint.index();
                if !closer.plan.fits_from(index, 0, available) {
                    let needed = closer.plan.cost.first().map_or(u64::MAX, |&c| u64::from(c));
                    return Err(BudgetTooSmall { needed, available, max_tokens, context_left });
                }
            }
        }
        let start = if enabled { constraint.min_bytes_from_start() } else { None };
        if let Some(bytes) = start {
            if (available as u64) < bytes && closer.plan.at.is_none() {
                // Near: count in tokens (a failed walk leaves the count in bytes).
                let needed = constraint.min_tokens_from_start().ok().flatten().unwrap_or(bytes);
                if (available as u64) < needed {
                    return Err(BudgetTooSmall { needed, available, max_tokens, context_left });
                }
            }
        }
        closer.enabled = start.is_some();
        closer.distance = start.unwrap_or(0);
        Ok(closer)
    }

    /// A closer that never closes (closing off) and proves nothing.
    pub fn disabled() -> Closer {
        Closer {
            enabled: false,
            closing: false,
            distance: 0,
            plan: Plan::default(),
            checked: false,
            tries: 0,
            deferred: false,
            proofs: ProofStats::default(),
            scratch: Vec::new(),
        }
    }

    /// Whether closing mode has started (the budget shapes the end of the output).
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// Whether closing applies at all.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// What the liveness proofs refused so far.
    pub fn proofs(&self) -> ProofStats {
        self.proofs
    }

    /// Before a step: whether to stop now (closing, or no budget left, and the output is
    /// complete).
    pub fn should_stop(&self, m: &Matcher, remaining: usize) -> bool {
        self.enabled && (self.closing || remaining == 0) && m.is_accepting()
    }

    /// After `tokens` were accepted into `m` without being sampled (jump-forward's forced
    /// tokens): moves the plan past them. They lie on every path, so on the plan too; where
    /// not, the next step proves a plan again.
    pub fn forced(&mut self, m: &Matcher, tokens: &[TokenId]) {
        self.plan.follow(m, tokens);
    }

    /// Before sampling, with the mask [`Matcher::fill_mask`] wrote: measures the distance,
    /// enters closing mode when the budget is down to it, and then narrows the mask: to the
    /// tokens that keep the distance in bytes below the budget, or, with the budget below
    /// it, to the tokens of the plan that keep its tokens within the budget. With run-time
    /// checks and a plan proved, closing mode keeps the plan's tokens.
    pub fn narrow(&mut self, m: &mut Matcher, mask: &mut [u32], remaining: usize) -> Result<(), MatchError> {
        self.narrow_as(m, mask, remaining, false)
    }

    /// [`Closer::narrow`] for a decode loop that passes every sampled token to
    /// [`Closer::check`] and draws again when it refuses (the engine's). In closing mode
    /// with the budget at or above the distance, the mask is left as it is instead of
    /// keeping only the tokens that shorten the distance below the budget: instead of one
    /// trial (accept, measure, roll back) per allowed token, 12.5 ms a step inside a string
    /// with the 129k tokenizer, one for the token sampled. `check` then refuses a sampled token
    /// that does not fit (the draw again is from the mask without it: the same
    /// distribution the narrowed mask gives, up to the warpers' truncation), and after
    /// [`PROOF_TRIES`] refusals in a step narrows the mask as `narrow` would, so a step
    /// still ends within the budget.
    pub fn narrow_for_check(&mut self, m: &mut Matcher, mask: &mut [u32], remaining: usize) -> Result<(), MatchError> {
        self.narrow_as(m, mask, remaining, true)
    }

    /// [`Closer::narrow`], leaving the closing step's budget test to [`Closer::check`]
    /// when `defer`.
    fn narrow_as(
        &mut self,
        m: &mut Matcher,
        mask: &mut [u32],
        remaining: usize,
        defer: bool,
    ) -> Result<(), MatchError> {
        self.tries = 0;
        self.deferred = false;
        if self.checked && !self.plan.is_current(m) {
            // Tokens came another way than `check` saw (jump-forward off the plan).
            self.plan.prove(m, PROOF_FUEL)?;
        }
        if !self.enabled {
            return Ok(());
        }
        self.distance = m.min_bytes_to_finish_checked()?.unwrap_or(u64::MAX);
        if self.checked && self.plan.is_current(m) {
            let index = m.constraint().index();
            if !self.plan.fits_from(index, self.plan.pos, remaining) {
                // Only where the plan was proved again (jump-forward left it): a checked
                // token keeps a plan that fits.
                self.closing = true;
            }
            if self.closing {
                self.plan.count(index);
                self.plan.retain(index.vocab(), mask, remaining);
            }
            return Ok(());
        }
        if remaining as u64 <= self.distance {
            self.closing = true;
        }
        if !self.closing {
            return Ok(());
        }
        if remaining as u64 >= self.distance {
            self.plan.at = None;
            if defer {
                self.deferred = true;
            } else {
                m.retain_shortening(mask, remaining as u64)?;
            }
            return Ok(());
        }
        if !self.plan.holds(m)? && !self.plan.make(m)? {
            // No completion at all: the bytes' rule empties the mask as it should.
            m.retain_shortening(mask, remaining as u64)?;
            return Ok(());
        }
        self.plan.retain(m.constraint().index().vocab(), mask, remaining);
        Ok(())
    }

    /// Closing for a decode loop that cannot take a sampled token back nor stop by itself (a
    /// logits processor, whose sampler runs after it). Where [`Closer::should_stop`] holds,
    /// `mask` keeps only EOS: the processor's way to stop. Otherwise [`Closer::narrow`], and
    /// then, before closing mode, with the budget within `margin` tokens of the distance,
    /// keeps only the tokens after which the distance is below the budget: what
    /// [`Closer::check`] would refuse after sampling, refused before it. Further from the end
    /// a token would have to lengthen the distance by more than `margin` bytes at once to
    /// break the budget; that is not tried, since the trial costs a token step per allowed
    /// token. Call [`Closer::forced`] with each token accepted, so that the plan follows them.
    pub fn narrow_before_sampling(
        &mut self,
        m: &mut Matcher,
        mask: &mut [u32],
        remaining: usize,
        margin: usize,
    ) -> Result<(), MatchError> {
        if self.should_stop(m, remaining) {
            retain_eos(m.constraint().index().vocab(), mask);
            return Ok(());
        }
        self.narrow(m, mask, remaining)?;
        if self.enabled && !self.closing && remaining as u64 <= self.distance.saturating_add(margin as u64) {
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

    /// After `token` was accepted into `m` with `remaining` tokens of budget before it (call
    /// it for every sampled token: closing's plan follows them): keeps it if the distance
    /// after it fits the budget left, or closing mode already chose it; otherwise rolls it
    /// back, enters closing mode and rewrites `mask` to the tokens after which it does.
    ///
    /// With run-time checks, the token is kept only if a liveness proof
    /// ([`Matcher::prove_live_into`], [`PROOF_FUEL`]) finds a completion after it that
    /// every check accepts and that fits the budget left; that completion becomes the plan.
    /// Otherwise it is rolled back and cleared from `mask` (counted in [`Closer::proofs`]);
    /// after [`PROOF_TRIES`] such tokens, or none left, `mask` becomes the plan's tokens. A
    /// token that did not fit the budget starts closing mode, which follows the plan.
    pub fn check(
        &mut self,
        m: &mut Matcher,
        token: TokenId,
        mask: &mut [u32],
        remaining: usize,
    ) -> Result<Verdict, MatchError> {
        if m.constraint().index().vocab().is_eos(token) {
            return Ok(Verdict::Keep);
        }
        if self.checked {
            return self.check_proved(m, token, mask, remaining);
        }
        self.check_budget(m, token, mask, remaining)
    }

    /// [`Closer::check`] by the grammar's distance alone.
    fn check_budget(
        &mut self,
        m: &mut Matcher,
        token: TokenId,
        mask: &mut [u32],
        remaining: usize,
    ) -> Result<Verdict, MatchError> {
        if !self.enabled {
            return Ok(Verdict::Keep);
        }
        if self.closing && !self.deferred {
            self.plan.follow(m, std::slice::from_ref(&token));
            return Ok(Verdict::Keep);
        }
        let after = m.min_bytes_to_finish_checked()?.unwrap_or(u64::MAX);
        if after < remaining as u64 {
            return Ok(Verdict::Keep);
        }
        if self.deferred {
            // The test `narrow` left to this step: the token is refused, and after
            // PROOF_TRIES refusals the mask is narrowed whole, whose tokens all fit.
            m.rollback(1)?;
            if let Some(w) = mask.get_mut(token.index() / 32) {
                *w &= !(1 << (token.0 % 32));
            }
            self.tries += 1;
            if self.tries >= PROOF_TRIES || mask.iter().all(|&w| w == 0) {
                self.deferred = false;
                m.fill_mask(mask)?;
                m.retain_shortening(mask, remaining as u64)?;
            }
            return Ok(Verdict::Resample);
        }
        m.rollback(1)?;
        self.closing = true;
        m.fill_mask(mask)?;
        m.retain_shortening(mask, remaining as u64)?;
        Ok(Verdict::Resample)
    }

    /// [`Closer::check`] with run-time checks. With a plan current before `token` (the
    /// usual case), a token not proved live within the budget is refused and the plan is
    /// the fallback. Without one (the last proof ran out of fuel), a token proved dead is
    /// refused, and one whose proof ran out of fuel is judged by the grammar's distance;
    /// after [`PROOF_TRIES`] refusals the mask is emptied, a dead end the decode loop backs
    /// out of.
    fn check_proved(
        &mut self,
        m: &mut Matcher,
        token: TokenId,
        mask: &mut [u32],
        remaining: usize,
    ) -> Result<Verdict, MatchError> {
        let index = m.constraint().index().clone();
        let budget = if self.enabled { remaining.saturating_sub(1) } else { usize::MAX };
        let planned = self.plan.at.is_some_and(|at| at + 1 == m.num_tokens());
        // On the plan: the proof that made it covers the token. Closing keeps it even where
        // the plan no longer fits (proved again after jump-forward): nothing shorter is known,
        // and refusing it would only draw it again.
        if let Some(pos) = self.plan.after(m, token) {
            if self.closing || self.plan.fits_from(&index, pos, budget) {
                self.plan.follow(m, std::slice::from_ref(&token));
                return Ok(Verdict::Keep);
            }
        }
        let live = m.prove_live_into(PROOF_FUEL, &mut self.scratch)?;
        if live == Liveness::Live {
            let mut next =
                Plan { bytes: std::mem::take(&mut self.scratch), at: Some(m.num_tokens()), ..Plan::default() };
            if next.fits_from(&index, 0, budget) {
                self.scratch = std::mem::replace(&mut self.plan, next).bytes;
                return Ok(Verdict::Keep);
            }
            self.scratch = std::mem::take(&mut next.bytes);
            self.proofs.too_long += 1;
            if !planned {
                return self.check_budget(m, token, mask, remaining);
            }
            // Proved, but its completion does not fit what is left: close on the plan.
            m.rollback(1)?;
            self.closing = true;
            self.plan.count(&index);
            self.plan.retain(index.vocab(), mask, remaining);
            return Ok(Verdict::Resample);
        }
        if live == Liveness::Unknown && !planned {
            // Nothing proved to fall back on: the token stands, as far as the budget goes.
            return self.check_budget(m, token, mask, remaining);
        }
        match live {
            Liveness::Dead => self.proofs.dead += 1,
            _ => self.proofs.unproved += 1,
        }
        m.rollback(1)?;
        if let Some(w) = mask.get_mut(token.index() / 32) {
            *w &= !(1 << (token.0 % 32));
        }
        self.tries += 1;
        if self.tries >= PROOF_TRIES || mask.iter().all(|&w| w == 0) {
            self.proofs.fallbacks += 1;
            if planned {
                // Follow the plan this step: its tokens are kept.
                m.fill_mask(mask)?;
                self.plan.count(&index);
                self.plan.retain(index.vocab(), mask, if self.enabled { remaining } else { usize::MAX });
            } else {
                mask.fill(0);
            }
        }
        Ok(Verdict::Resample)
    }
}

/// The largest logit bonus soft closing gives a token that shortens the distance to the end
/// (reached one token before the hard limit; a logit difference of 4 is a factor of ~55).
///
/// A constant of the algorithm, not a user limit: it shapes the distribution near the
/// budget, not what the mask allows.
pub const SOFT_CLOSE_BONUS: f32 = 4.0;

/// Keeps only the end-of-generation ids of `mask`: where the output is complete and
/// nothing more may follow.
fn retain_eos(vocab: &crate::Vocabulary, mask: &mut [u32]) {
    // Infallible: the filter cannot fail.
    let Ok(_) = crate::util::try_retain_tokens(mask, |token| Ok::<_, std::convert::Infallible>(vocab.is_eos(token)));
}

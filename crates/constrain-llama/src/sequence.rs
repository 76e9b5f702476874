//! One sequence's decode state, shared by the single-sequence loop ([`Generator`]'s
//! `generate*`) and the batched one ([`crate::batch`]).
//!
//! A [`Sequence`] holds everything one generation owns: the matcher, closing mode, the
//! sampler (with its own seeded RNG, so a sequence samples the same tokens whatever else is
//! in the batch), the output text and the counters. It never touches a llama.cpp context:
//! the caller evaluates the tokens a step returns ([`Next::Feed`]) at positions
//! [`Sequence::n_past`]`..`, calls [`Sequence::fed`], and hands the logits of the last one
//! to the next step. A step is split in two so a batch can run the heavy half in parallel:
//! [`Sequence::prepare`] (stop checks and jump-forward, which tokenizes with the model) and
//! [`Sequence::sample`] (mask, closing, sampling: pure CPU work on the sequence's own state).
//!
//! [`Generator`]: crate::Generator
use super::logprobs::TokenLogprob;
use super::trace::{self, TraceEvent};
use super::{Error, Output, StopReason, Timings};
use constrain::closing::{Closer, Verdict};
use constrain::matcher::{Constraint, Matcher};
use constrain::sampling::{Sampler, SamplerSettings};
use constrain::vocab::{TokenId, Vocabulary};
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use std::time::Instant;

/// What a sequence does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Generation is over.
    Stop(StopReason),
    /// Evaluate these tokens (logits for the last one only), then step again.
    Feed(Vec<TokenId>),
    /// A backtrack ([`Sequence::sample`]): the KV cells of this sequence from
    /// [`Sequence::n_past`] on are stale. Remove them, then evaluate these tokens there, as
    /// for [`Next::Feed`].
    Rewind(Vec<TokenId>),
}

/// How many backtracks one generation may make before a dead end is an error: each costs
/// one model step, and a search that keeps failing is better reported than prolonged.
pub(crate) const MAX_BACKTRACKS: usize = 64;

/// The tokens of text a streaming generation withholds from its text callback: how far back
/// a dead end can be backed out of without taking back what the caller was shown.
pub(crate) const STREAM_HOLD: usize = 16;

/// The per-generation knobs a [`Sequence`] needs (a subset of `GeneratorSettings`, plus
/// whether running out of tokens is an error).
#[derive(Clone, Debug)]
pub(crate) struct SequenceSettings {
    pub(crate) sampler: SamplerSettings,
    pub(crate) max_tokens: usize,
    pub(crate) jump_forward: bool,
    pub(crate) close: bool,
    pub(crate) close_margin: usize,
    /// Running out of tokens returns the partial output ([`StopReason::MaxTokens`]).
    pub(crate) truncate_ok: bool,
    /// The newest tokens whose text is withheld from the text callback until the end
    /// ([`STREAM_HOLD`] when the caller streams, `usize::MAX` when it only wants the result):
    /// a backtrack may go back that far.
    pub(crate) hold: usize,
    /// Record each output token's log-probability and this many alternatives
    /// ([`Output::logprobs`]); `None`: record nothing.
    pub(crate) logprobs: Option<usize>,
    /// Record what the mask did at each step ([`Output::trace`]).
    pub(crate) trace: bool,
}

/// What [`Sequence::take`] made of a candidate token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The sequence goes on with it: evaluate it next.
    Kept,
    /// It ended the output (an end-of-generation token where the grammar accepts).
    Eos,
    /// Closing mode or a liveness proof refused it; the sequence is where it was.
    Refused,
}

/// One generation's state (see the module doc).
pub(crate) struct Sequence {
    settings: SequenceSettings,
    matcher: Option<Matcher>,
    /// The constraint's order hint, followed while the output stays in its language: the
    /// tokens it allows get [`ORDER_BONUS`].
    order: Option<Matcher>,
    order_mask: Vec<u32>,
    /// Whether the order hint still follows the output: it stops at the first token outside
    /// its language (and stays at the state before it, so a backtrack can revive it).
    order_live: bool,
    closer: Closer,
    sampler: Sampler,
    /// The prompt's tokens then the output's, as the penalty window sees them (rebuilt from
    /// here after a backtrack).
    history: Vec<TokenId>,
    /// Per output token: whether it was sampled (a backtrack pops back to the last one that
    /// was; forced tokens had no alternative).
    sampled: Vec<bool>,
    /// Tokens banned at an output position by a backtrack: `(position, token)`, positions
    /// ascending.
    bans: Vec<(usize, TokenId)>,
    backtracks: usize,
    /// Speculative drafts evaluated, and those kept ([`Sequence::draft_kept`]).
    drafted: usize,
    drafts_kept: usize,
    /// Per output token, when [`SequenceSettings::logprobs`] asks for them.
    logprobs: Vec<TokenLogprob>,
    /// The trace, when [`SequenceSettings::trace`] asks for one (`None` costs nothing).
    trace: Option<Vec<TraceEvent>>,
    mask: Vec<u32>,
    soft: Vec<u32>,
    logits: Vec<f32>,
    /// Speculative sampling's target distribution and residual ([`Sequence::sample_against_draft`]).
    probs: Vec<f32>,
    residual: Vec<f32>,
    text: TextSink,
    prompt_tokens: usize,
    n_ctx: usize,
    n_past: usize,
    generated: usize,
    forced: usize,
    steps: usize,
    /// Budget left before the pending sampled step (set by `prepare`).
    remaining: usize,
    timings: Timings,
    generation_start: Instant,
}

impl Sequence {
    /// A sequence for `prompt` (already evaluated, or about to be, at positions `0..`) in a
    /// context of `n_ctx` tokens. The prompt feeds the penalties' window. Fails when the
    /// budget cannot hold the constraint's shortest output (closing mode).
    pub(crate) fn new(
        constraint: Option<&Constraint>,
        settings: SequenceSettings,
        vocab: &Vocabulary,
        prompt: &[LlamaToken],
        n_ctx: usize,
    ) -> Result<Sequence, Error> {
        let mut sampler = Sampler::new(settings.sampler.clone()).map_err(Error::Settings)?;
        if prompt.is_empty() {
            return Err(Error::Llama("the prompt is empty after tokenization".into()));
        }
        if prompt.len() >= n_ctx {
            return Err(Error::PromptTooLong { tokens: prompt.len(), ctx: n_ctx });
        }
        let history: Vec<TokenId> = prompt.iter().map(|t| TokenId(t.0 as u32)).collect();
        for &t in &history {
            sampler.accept(t);
        }
        let started = Instant::now();
        let closer = match constraint {
            Some(c) => Closer::new(c, settings.close, settings.max_tokens, n_ctx - prompt.len())?,
            None => Closer::disabled(),
        };
        let timings = Timings { closing: started.elapsed(), ..Timings::default() };
        Ok(Sequence {
            matcher: constraint.map(|c| c.matcher()),
            order: constraint.and_then(|c| c.order_hint()).map(|h| h.matcher()),
            order_mask: Vec::new(),
            order_live: true,
            closer,
            sampler,
            history,
            sampled: Vec::new(),
            bans: Vec::new(),
            backtracks: 0,
            drafted: 0,
            drafts_kept: 0,
            logprobs: Vec::new(),
            trace: settings.trace.then(Vec::new),
            mask: vec![0u32; vocab.mask_words()],
            soft: Vec::new(),
            logits: Vec::with_capacity(vocab.mask_len()),
            probs: Vec::new(),
            residual: Vec::new(),
            text: TextSink::new(settings.hold),
            prompt_tokens: prompt.len(),
            n_ctx,
            n_past: 0,
            generated: 0,
            forced: 0,
            steps: 0,
            remaining: 0,
            timings,
            generation_start: Instant::now(),
            settings,
        })
    }

    /// Tokens evaluated so far in this sequence (the next position).
    pub(crate) fn n_past(&self) -> usize {
        self.n_past
    }

    /// Records that the prompt was evaluated (`prompt` is how long it took); the output's
    /// generation time starts now.
    pub(crate) fn prompt_done(&mut self, prompt: std::time::Duration) {
        self.n_past = self.prompt_tokens;
        self.timings.prompt = prompt;
        self.generation_start = Instant::now();
    }

    /// Records that the tokens of the last [`Next::Feed`] were evaluated.
    pub(crate) fn fed(&mut self, n: usize) {
        self.n_past += n;
        self.steps += 1;
    }

    /// Every token so far, prompt then output: what lookup drafting searches.
    pub(crate) fn tokens(&self) -> &[TokenId] {
        &self.history
    }

    /// How many more tokens may be produced: the budget and the context left after the
    /// tokens evaluated so far and `pending` more.
    pub(crate) fn room(&self, pending: usize) -> usize {
        let budget = self.settings.max_tokens.saturating_sub(self.generated);
        budget.min(self.n_ctx.saturating_sub(self.n_past + pending))
    }

    /// How many of `drafts` the grammar takes in a row from here (drafts past the first
    /// refused one could never be kept, so they are not worth a batch slot). The matcher
    /// is left as it was.
    pub(crate) fn grammar_prefix(&mut self, drafts: &[TokenId]) -> usize {
        let Some(m) = self.matcher.as_mut() else { return drafts.len() };
        let taken = drafts.iter().take_while(|&&t| m.accept_token(t).is_ok()).count();
        if m.rollback(taken).is_err() {
            return 0;
        }
        taken
    }

    /// Records that `n` draft tokens were evaluated after the last [`Next::Feed`]'s tokens.
    pub(crate) fn drafted(&mut self, n: usize) {
        self.drafted += n;
    }

    /// Records that the token just sampled equals the draft evaluated at its position: its
    /// KV cells are in place, so it needs no evaluation of its own.
    pub(crate) fn draft_kept(&mut self) {
        self.n_past += 1;
        self.drafts_kept += 1;
    }

    /// The first half of a step: `Some` when the sequence stops or jump-forward has tokens
    /// to feed (no logits needed); `None` when a token must be sampled ([`Sequence::sample`]).
    /// `n_batch` bounds the forced tokens of one evaluation.
    pub(crate) fn prepare(
        &mut self,
        model: &LlamaModel,
        vocab: &Vocabulary,
        n_batch: usize,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Option<Next>, Error> {
        if self.matcher.as_ref().is_some_and(|m| m.is_finished()) {
            return Ok(Some(Next::Stop(self.end_reason(StopReason::Finished))));
        }
        let max_tokens = self.settings.max_tokens;
        let remaining = (max_tokens.saturating_sub(self.generated)).min(self.n_ctx.saturating_sub(self.n_past));
        self.remaining = remaining;
        if self.matcher.as_ref().is_some_and(|m| self.closer.should_stop(m, remaining)) {
            // The budget shaped the end: stop at the first complete output.
            return Ok(Some(Next::Stop(StopReason::Closed)));
        }
        if remaining == 0 {
            if self.settings.truncate_ok {
                return Ok(Some(Next::Stop(StopReason::MaxTokens)));
            }
            let reason = if self.n_past >= self.n_ctx {
                "the context is full (raise --ctx-size)"
            } else {
                "max tokens reached (raise --max-tokens)"
            };
            return Err(Error::Incomplete { reason, tokens: self.generated, partial: self.text.lossy() });
        }
        // Jump-forward: feed the bytes the grammar dictates, as the tokenizer splits them.
        // Not while closing: the model's tokenization of forced bytes may take more tokens
        // than the closing plan counted.
        let jump = self.settings.jump_forward && !self.closer.is_closing();
        if let (Some(m), true) = (self.matcher.as_mut(), jump) {
            let tokens = forced_tokens(model, vocab, m, remaining.min(n_batch))?;
            if !tokens.is_empty() {
                self.closer.forced(m, &tokens);
                for &t in &tokens {
                    if let Some(trace) = self.trace.as_mut() {
                        trace.push(TraceEvent::Step(trace::forced_step(self.generated, t, vocab.token_bytes(t))));
                    }
                    self.push_token(vocab, t, false, on_text);
                    if let Some(n) = self.settings.logprobs {
                        self.logprobs.push(TokenLogprob::forced(t, n));
                    }
                }
                self.forced += tokens.len();
                return Ok(Some(Next::Feed(tokens)));
            }
        }
        Ok(None)
    }

    /// The second half of a step, after [`Sequence::prepare`] returned `None`: masks
    /// `logits` (the last evaluated position's), samples a token and accepts it. Where no
    /// token is allowed (a dead end the mask could not foresee), backtracks instead: see
    /// [`Sequence::backtrack`].
    pub(crate) fn sample(
        &mut self,
        vocab: &Vocabulary,
        logits: &[f32],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Next, Error> {
        let was_closing = self.closer.is_closing();
        let drawn = self.draw(vocab, logits);
        self.conclude(vocab, logits, drawn, was_closing, on_text)
    }

    /// [`Sequence::sample`] for speculative decoding, where `draft` is the draft model's
    /// token for this position and `q` the distribution it was drawn from: the draft is
    /// kept with probability `min(1, p/q)` under this step's masked, warped distribution
    /// `p`, else a token is drawn from the residual `max(0, p − q)`
    /// ([`constrain::sampling::accept_draft`]), so the token is distributed as
    /// [`Sequence::sample`]'s. Closing mode and the liveness proof judge it as they judge a
    /// sampled one (a refusal draws again from the rewritten mask, as `sample` does).
    pub(crate) fn sample_against_draft(
        &mut self,
        vocab: &Vocabulary,
        logits: &[f32],
        draft: TokenId,
        q: &[f32],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Next, Error> {
        let was_closing = self.closer.is_closing();
        let drawn = self.draw_against(vocab, logits, draft, q);
        self.conclude(vocab, logits, drawn, was_closing, on_text)
    }

    /// The end of a sampled step, once a token was `drawn` (or not): EOS, the
    /// log-probabilities and the trace, the token's record; a dead end backtracks.
    fn conclude(
        &mut self,
        vocab: &Vocabulary,
        logits: &[f32],
        drawn: Result<TokenId, Error>,
        was_closing: bool,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Next, Error> {
        if let Some(trace) = self.trace.as_mut().filter(|_| !was_closing && self.closer.is_closing()) {
            trace.push(TraceEvent::Closing { step: self.generated });
        }
        let token = match drawn {
            Ok(token) => token,
            Err(Error::DeadEnd { step, .. }) => return self.backtrack(step),
            Err(e) => return Err(e),
        };
        // Every end-of-generation id of the model is EOS in its vocabulary.
        if vocab.is_eos(token) {
            return Ok(Next::Stop(self.end_reason(StopReason::Eos)));
        }
        // `draw` left the distribution the token was drawn from in `self.logits`.
        let lp = self.settings.logprobs.map(|n| {
            TokenLogprob::of(&self.logits, token, n).unwrap_or(TokenLogprob {
                token,
                logprob: f32::NEG_INFINITY,
                top: Vec::new(),
            })
        });
        self.push_sampled(vocab, token, lp, logits, on_text);
        if self.matcher.as_ref().is_some_and(|m| m.is_finished()) {
            return Ok(Next::Stop(self.end_reason(StopReason::Finished)));
        }
        Ok(Next::Feed(vec![token]))
    }

    /// An independent copy at the same point, for a beam that branches off here: the
    /// matchers are forked ([`Matcher::fork`]), the rest is copied but for the step's
    /// logits and bonuses. Its KV cells are the caller's to copy.
    pub(crate) fn fork(&mut self) -> Sequence {
        Sequence {
            settings: self.settings.clone(),
            matcher: self.matcher.as_mut().map(Matcher::fork),
            order: self.order.as_mut().map(Matcher::fork),
            order_mask: Vec::new(),
            order_live: self.order_live,
            closer: self.closer.clone(),
            sampler: self.sampler.clone(),
            history: self.history.clone(),
            sampled: self.sampled.clone(),
            bans: self.bans.clone(),
            backtracks: self.backtracks,
            drafted: self.drafted,
            drafts_kept: self.drafts_kept,
            logprobs: self.logprobs.clone(),
            trace: self.trace.clone(),
            // The step's mask: what a candidate taken in the fork was drawn under (its trace).
            mask: self.mask.clone(),
            soft: Vec::new(),
            logits: Vec::with_capacity(self.logits.capacity()),
            probs: Vec::new(),
            residual: Vec::new(),
            text: self.text.clone(),
            prompt_tokens: self.prompt_tokens,
            n_ctx: self.n_ctx,
            n_past: self.n_past,
            generated: self.generated,
            forced: self.forced,
            steps: self.steps,
            remaining: self.remaining,
            timings: self.timings,
            generation_start: self.generation_start,
        }
    }

    /// Beam search's half-step in place of [`Sequence::sample`], after
    /// [`Sequence::prepare`] returned `None`: the `n` likeliest next tokens with their
    /// log-probabilities, likeliest first. The distribution is the one greedy decoding
    /// takes its argmax of (the mask with closing mode and the order hint, then the bias
    /// and penalties; no temperature, no truncation), so one beam is greedy decoding.
    /// Empty at a dead end.
    pub(crate) fn candidates(
        &mut self,
        vocab: &Vocabulary,
        logits: &[f32],
        n: usize,
    ) -> Result<Vec<(TokenId, f32)>, Error> {
        self.mask_logits(vocab, logits)?;
        Ok(self.scored(n))
    }

    /// [`Sequence::candidates`] again after [`Sequence::take`] refused one (its mask is
    /// then the one the closer rewrote): from the step's raw `logits` under that mask, as
    /// [`Sequence::sample`] draws again.
    pub(crate) fn candidates_again(&mut self, vocab: &Vocabulary, logits: &[f32], n: usize) -> Vec<(TokenId, f32)> {
        self.load_logits(vocab, logits);
        if self.matcher.is_some() {
            self.apply_bans();
            apply_mask(&mut self.logits, &self.mask);
        }
        self.scored(n)
    }

    /// The `n` best of `self.logits` after the sampler's deterministic stages.
    fn scored(&mut self, n: usize) -> Vec<(TokenId, f32)> {
        self.sampler.score_logits(&mut self.logits);
        crate::logprobs::top_n_logprobs(&self.logits, n).map(|(_, top)| top).unwrap_or_default()
    }

    /// Extends the sequence by `token`, a candidate of this step with log-probability
    /// `logprob` ([`Sequence::candidates`]; `raw`: the step's logits), as [`Sequence::sample`] would have after
    /// drawing it: closing mode and the liveness proof may refuse it, leaving the sequence
    /// where it was but for the closer, which rewrote the step's mask (draw the next
    /// candidate from [`Sequence::candidates_again`]).
    pub(crate) fn take(
        &mut self,
        vocab: &Vocabulary,
        token: TokenId,
        logprob: f32,
        raw: &[f32],
    ) -> Result<Taken, Error> {
        let remaining = self.remaining;
        if let Some(m) = self.matcher.as_mut() {
            match m.accept_token(token) {
                Ok(()) => {}
                Err(constrain::matcher::Error::Rejected(_) | constrain::matcher::Error::RejectedBytes) => {
                    return Ok(Taken::Refused)
                }
                Err(e) => return Err(Error::Matcher(e)),
            }
            let t = Instant::now();
            let verdict = self.closer.check(m, token, &mut self.mask, remaining).map_err(Error::Matcher)?;
            self.timings.mask += t.elapsed();
            self.timings.closing += t.elapsed();
            if verdict != Verdict::Keep {
                return Ok(Taken::Refused);
            }
        }
        if vocab.is_eos(token) {
            return Ok(Taken::Eos);
        }
        let lp = self.settings.logprobs.map(|n| {
            let top = if n > 0 { vec![(token, logprob)] } else { Vec::new() };
            TokenLogprob { token, logprob, top }
        });
        self.push_sampled(vocab, token, lp, raw, &mut |_| {});
        Ok(Taken::Kept)
    }

    /// A fork of the matcher, at the output so far (a draft model proposes inside it).
    pub(crate) fn fork_matcher(&mut self) -> Option<Matcher> {
        self.matcher.as_mut().map(Matcher::fork)
    }

    /// The sampling settings.
    pub(crate) fn sampler_settings(&self) -> &SamplerSettings {
        self.sampler.settings()
    }

    /// Tokens produced so far (sampled and forced).
    pub(crate) fn generated(&self) -> usize {
        self.generated
    }

    /// Why the sequence is over when its grammar is complete and nothing can follow (the
    /// stop [`Sequence::prepare`] would return without needing the last token evaluated).
    pub(crate) fn finished(&self) -> Option<StopReason> {
        let done = self.matcher.as_ref().is_some_and(|m| m.is_finished());
        done.then(|| self.end_reason(StopReason::Finished))
    }

    /// Masks the step's `logits`, draws a token and accepts it into the matcher (closing
    /// mode's check and the one-token look-ahead included). [`Error::DeadEnd`] when nothing
    /// can be drawn; the matcher is then where the step began.
    fn draw(&mut self, vocab: &Vocabulary, logits: &[f32]) -> Result<TokenId, Error> {
        let remaining = self.remaining;
        let generated = self.generated;
        self.mask_logits(vocab, logits)?;
        let token = sample(&mut self.sampler, &mut self.logits, generated, self.matcher.as_ref())?;
        self.keep_live(vocab, logits, token, remaining, generated)
    }

    /// [`Sequence::draw`] with speculative sampling's rule against `draft`, drawn from `q`.
    fn draw_against(
        &mut self,
        vocab: &Vocabulary,
        logits: &[f32],
        draft: TokenId,
        q: &[f32],
    ) -> Result<TokenId, Error> {
        let remaining = self.remaining;
        let generated = self.generated;
        self.mask_logits(vocab, logits)?;
        let mut p = std::mem::take(&mut self.probs);
        let drawn = match self.sampler.distribution(&mut self.logits, &mut p) {
            Ok(()) => {
                let u = self.sampler.uniform();
                if constrain::sampling::accept_draft(&p, q, draft, u) {
                    Some(draft)
                } else if constrain::sampling::residual(&p, q, &mut self.residual) {
                    self.sampler.draw_from(&self.residual)
                } else {
                    self.sampler.draw_from(&p)
                }
            }
            Err(constrain::sampling::Error::NoCandidates) => None,
            Err(e) => return Err(Error::Settings(e)),
        };
        self.probs = p;
        let token = match drawn {
            Some(t) => t,
            None => match self.matcher.as_ref().and_then(|m| m.limit_error()) {
                Some(e) => return Err(Error::Matcher(e)),
                None => return Err(Error::DeadEnd { step: generated, backtracks: 0 }),
            },
        };
        self.keep_live(vocab, logits, token, remaining, generated)
    }

    /// Accepts `token` into the matcher and runs closing mode's check on it, drawing again
    /// while it refuses (see below): the token kept.
    fn keep_live(
        &mut self,
        vocab: &Vocabulary,
        logits: &[f32],
        mut token: TokenId,
        remaining: usize,
        generated: usize,
    ) -> Result<TokenId, Error> {
        if let Some(m) = self.matcher.as_mut() {
            m.accept_token(token).map_err(Error::Matcher)?;
        }
        // Closing's check, and with run-time checks the liveness proof: a token refused is
        // taken back and another drawn from the mask the closer rewrote, until one is kept
        // (the closer bounds the refusals of a step; see `Closer::check`).
        while let Some(m) = self.matcher.as_mut() {
            let t = Instant::now();
            let verdict = self.closer.check(m, token, &mut self.mask, remaining).map_err(Error::Matcher)?;
            self.timings.mask += t.elapsed();
            self.timings.closing += t.elapsed();
            if verdict == Verdict::Keep {
                break;
            }
            self.apply_bans();
            if self.mask.iter().all(|&w| w == 0) {
                return Err(Error::DeadEnd { step: generated, backtracks: self.backtracks });
            }
            token = self.redraw(vocab, logits, generated)?;
        }
        Ok(token)
    }

    /// Loads the step's `logits` into `self.logits` and, with a constraint, fills the mask
    /// (closing mode's narrowing and the bans included) and applies it, with the soft
    /// closing and order-hint bonuses.
    fn mask_logits(&mut self, vocab: &Vocabulary, logits: &[f32]) -> Result<(), Error> {
        let remaining = self.remaining;
        self.load_logits(vocab, logits);
        let Some(m) = self.matcher.as_mut() else { return Ok(()) };
        let t = Instant::now();
        m.fill_mask(&mut self.mask).map_err(Error::Matcher)?;
        let c = Instant::now();
        self.closer.narrow_for_check(m, &mut self.mask, remaining).map_err(Error::Matcher)?;
        self.apply_bans();
        if let Some(m) = self.matcher.as_mut() {
            if let Some(bonus) = self
                .closer
                .soft(m, &self.mask, &mut self.soft, remaining, self.settings.close_margin)
                .map_err(Error::Matcher)?
            {
                add_bonus(&mut self.logits, &self.soft, bonus);
            }
        }
        self.timings.closing += c.elapsed();
        self.prefer_order();
        apply_mask(&mut self.logits, &self.mask);
        self.timings.mask += t.elapsed();
        Ok(())
    }

    /// Records a sampled token: its log-probability entry `lp` (when asked for), its trace
    /// step (from the step's `raw` logits and the mask in `self.mask`), then the token.
    fn push_sampled(
        &mut self,
        vocab: &Vocabulary,
        token: TokenId,
        lp: Option<TokenLogprob>,
        raw: &[f32],
        on_text: &mut dyn FnMut(&str),
    ) {
        self.logprobs.extend(lp);
        if let Some(trace) = self.trace.as_mut() {
            let mask = self.matcher.as_ref().map(|_| self.mask.as_slice());
            let step = trace::sampled_step(self.generated, token, vocab.token_bytes(token), raw, mask);
            trace.push(TraceEvent::Step(step));
        }
        self.push_token(vocab, token, true, on_text);
    }

    /// Records an output token (sampled or forced): the penalty window, the text, the order
    /// hint and the counts.
    fn push_token(&mut self, vocab: &Vocabulary, token: TokenId, sampled: bool, on_text: &mut dyn FnMut(&str)) {
        self.sampler.accept(token);
        self.text.push(vocab.token_bytes(token), on_text);
        self.follow_order(token);
        self.history.push(token);
        self.sampled.push(sampled);
        self.generated += 1;
    }

    /// Clears from the mask the tokens banned at this position by earlier backtracks.
    fn apply_bans(&mut self) {
        let here = self.generated;
        for &(_, t) in self.bans.iter().filter(|&&(p, _)| p == here) {
            if let Some(w) = self.mask.get_mut(t.index() / 32) {
                *w &= !(1 << (t.0 % 32));
            }
        }
    }

    /// The last line of defence against a dead end (no token allowed, though the output is
    /// not complete): take back the output up to and including its last sampled token, ban
    /// that token at its position, and draw there again. The matcher, the order hint, the
    /// penalty window and the text go back with it; the caller removes the stale KV cells and
    /// evaluates the token before that position again, for its logits ([`Next::Rewind`]).
    /// Bans deeper than the new position are forgotten (their prefix is gone), so this is a
    /// depth-first search over the model's choices, bounded by [`MAX_BACKTRACKS`], and by the
    /// withheld text ([`SequenceSettings::hold`]): what the caller was shown stays.
    fn backtrack(&mut self, step: usize) -> Result<Next, Error> {
        let dead = Error::DeadEnd { step, backtracks: self.backtracks };
        let Some(pos) = self.sampled.iter().rposition(|&s| s) else { return Err(dead) };
        let popped = self.sampled.len() - pos;
        if self.backtracks >= MAX_BACKTRACKS || !self.text.can_drop(popped) {
            return Err(dead);
        }
        let Some(m) = self.matcher.as_mut() else { return Err(dead) };
        m.rollback(popped).map_err(Error::Matcher)?;
        let at = self.prompt_tokens + pos;
        let banned = self.history[at];
        self.history.truncate(at);
        self.sampled.truncate(pos);
        self.logprobs.truncate(pos);
        self.text.drop_tokens(popped);
        self.generated = pos;
        self.bans.retain(|&(p, _)| p <= pos);
        self.bans.push((pos, banned));
        if let Some(o) = self.order.as_mut() {
            let n = o.num_tokens();
            if n >= pos && o.rollback(n - pos).is_ok() {
                self.order_live = true;
            }
        }
        self.sampler.clear_history();
        let window = self.sampler.settings().repeat_last_n;
        for &t in &self.history[self.history.len().saturating_sub(window)..] {
            self.sampler.accept(t);
        }
        self.backtracks += 1;
        if let Some(trace) = self.trace.as_mut() {
            trace.retain(|e| !matches!(e, TraceEvent::Step(s) if s.step >= pos));
            trace.push(TraceEvent::Backtrack { step, to: pos });
        }
        // The logits at `pos` come from the token before it (the prompt's last for `pos` 0).
        self.n_past = at - 1;
        Ok(Next::Rewind(vec![self.history[at - 1]]))
    }

    /// Gives [`ORDER_BONUS`] to the allowed tokens the order hint allows too, when it
    /// allows some but not all of them (a bonus to every allowed token changes nothing).
    fn prefer_order(&mut self) {
        let Some(o) = self.order.as_mut().filter(|_| self.order_live) else { return };
        self.order_mask.resize(self.mask.len(), 0);
        if o.fill_mask(&mut self.order_mask).is_err() {
            self.order = None;
            return;
        }
        let (mut some, mut all) = (false, true);
        for (h, &m) in self.order_mask.iter_mut().zip(&self.mask) {
            *h &= m;
            some |= *h != 0;
            all &= *h == m;
        }
        if some && !all {
            add_bonus(&mut self.logits, &self.order_mask, ORDER_BONUS);
        }
    }

    /// Moves the order hint past `token`; the first token outside its language stops it.
    fn follow_order(&mut self, token: TokenId) {
        if self.order_live && self.order.as_mut().is_some_and(|o| o.accept_token(token).is_err()) {
            self.order_live = false;
        }
    }

    /// Draws again from the step's raw `logits` under the current mask (after the matcher
    /// refused or rolled back the first draw) and accepts the token drawn.
    fn redraw(&mut self, vocab: &Vocabulary, logits: &[f32], step: usize) -> Result<TokenId, Error> {
        self.logits.clear();
        self.logits.extend_from_slice(logits);
        self.logits.resize(vocab.mask_len(), f32::NEG_INFINITY);
        apply_mask(&mut self.logits, &self.mask);
        let token = sample(&mut self.sampler, &mut self.logits, step, self.matcher.as_ref())?;
        if let Some(m) = self.matcher.as_mut() {
            m.accept_token(token).map_err(Error::Matcher)?;
        }
        Ok(token)
    }

    /// `reason`, or [`StopReason::Closed`] if closing mode shaped the end.
    fn end_reason(&self, reason: StopReason) -> StopReason {
        if self.closer.is_closing() {
            StopReason::Closed
        } else {
            reason
        }
    }

    fn load_logits(&mut self, vocab: &Vocabulary, logits: &[f32]) {
        self.logits.clear();
        self.logits.extend_from_slice(logits);
        self.logits.resize(vocab.mask_len(), f32::NEG_INFINITY);
    }

    /// The finished output.
    pub(crate) fn finish(mut self, stop: StopReason, on_text: &mut dyn FnMut(&str)) -> Output {
        self.text.flush(on_text);
        self.timings.generation = self.generation_start.elapsed();
        let text = self.text.into_string();
        let value = serde_json::from_str(&text).ok();
        Output {
            text,
            value,
            prompt_tokens: self.prompt_tokens,
            generated_tokens: self.generated,
            forced_tokens: self.forced,
            model_steps: self.steps,
            backtracks: self.backtracks,
            dead_tokens: self.closer.proofs().dead,
            unproved_tokens: self.closer.proofs().unproved,
            stop,
            timings: self.timings,
            drafted_tokens: self.drafted,
            accepted_drafts: self.drafts_kept,
            logprobs: self.logprobs,
            trace: self.trace.unwrap_or_default(),
        }
    }
}

/// The tokens to feed without sampling: the grammar's forced bytes tokenized by the model,
/// minus the last token (it might merge with the next free choice), keeping only a prefix
/// whose bytes spell the forced bytes and that the matcher accepts. Accepts them into
/// `matcher`.
fn forced_tokens(
    model: &LlamaModel,
    vocab: &Vocabulary,
    matcher: &mut Matcher,
    budget: usize,
) -> Result<Vec<TokenId>, Error> {
    let bytes = matcher.forced_bytes();
    if bytes.is_empty() || budget == 0 {
        return Ok(Vec::new());
    }
    let mut tokens = model.vocab().tokenize(&bytes, false, false);
    tokens.pop();
    let mut out = Vec::new();
    let mut offset = 0;
    for t in tokens {
        let Ok(id) = u32::try_from(t.0).map(TokenId) else { break };
        let piece = vocab.token_bytes(id);
        if out.len() >= budget || piece.is_empty() || vocab.is_special(id) || !bytes[offset..].starts_with(piece) {
            break;
        }
        match matcher.accept_token(id) {
            Ok(()) => {}
            Err(constrain::matcher::Error::Rejected(_)) => break,
            Err(e) => return Err(Error::Matcher(e)),
        }
        offset += piece.len();
        out.push(id);
    }
    Ok(out)
}

/// The logit bonus of the tokens the order hint allows ([`Sequence::prefer_order`]): a factor
/// of about 400 in probability. It matters only where several keys may come next, and there
/// the default 135M model still wrote keys out of order at 3.0 (about 20).
const ORDER_BONUS: f32 = 6.0;

/// Samples one token; an empty candidate set is a dead end at step `step`.
fn sample(sampler: &mut Sampler, logits: &mut [f32], step: usize, matcher: Option<&Matcher>) -> Result<TokenId, Error> {
    match sampler.sample(logits) {
        Ok(t) => Ok(t),
        // A dead end that a parse limit caused names the limit, not the grammar.
        Err(constrain::sampling::Error::NoCandidates) => match matcher.and_then(|m| m.limit_error()) {
            Some(e) => Err(Error::Matcher(e)),
            None => Err(Error::DeadEnd { step, backtracks: 0 }),
        },
        Err(e) => Err(Error::Settings(e)),
    }
}

/// Adds `bonus` to every logit whose bit is set in `mask`.
fn add_bonus(logits: &mut [f32], mask: &[u32], bonus: f32) {
    for (chunk, &word) in logits.chunks_mut(32).zip(mask.iter()) {
        if word == 0 {
            continue;
        }
        for (bit, l) in chunk.iter_mut().enumerate() {
            if word >> bit & 1 == 1 {
                *l += bonus;
            }
        }
    }
}

/// Sets every logit whose mask bit is clear to `-inf`.
pub(crate) fn apply_mask(logits: &mut [f32], mask: &[u32]) {
    for (chunk, &word) in logits.chunks_mut(32).zip(mask.iter().chain(std::iter::repeat(&0))) {
        if word == u32::MAX {
            continue;
        }
        for (bit, l) in chunk.iter_mut().enumerate() {
            if word >> bit & 1 == 0 {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

/// Collects output bytes and hands out whole UTF-8 characters as they complete, withholding
/// the newest `hold` tokens' text so that a backtrack can take them back unseen.
#[derive(Clone)]
struct TextSink {
    bytes: Vec<u8>,
    /// Bytes handed out so far.
    emitted: usize,
    /// Per token pushed: the length of `bytes` after it.
    ends: Vec<usize>,
    hold: usize,
}

impl TextSink {
    fn new(hold: usize) -> TextSink {
        TextSink { bytes: Vec::new(), emitted: 0, ends: Vec::new(), hold }
    }

    fn push(&mut self, piece: &[u8], on_text: &mut dyn FnMut(&str)) {
        self.bytes.extend_from_slice(piece);
        self.ends.push(self.bytes.len());
        let shown = match self.ends.len().checked_sub(self.hold.saturating_add(1)) {
            Some(i) => self.ends[i],
            None => return,
        };
        self.emit(shown, on_text);
    }

    /// Hands out the bytes up to `upto`, but for an incomplete character at the end.
    fn emit(&mut self, upto: usize, on_text: &mut dyn FnMut(&str)) {
        let Some(pending) = self.bytes.get(self.emitted..upto).filter(|p| !p.is_empty()) else { return };
        let valid = match std::str::from_utf8(pending) {
            Ok(s) => s.len(),
            // An incomplete character at the end waits for the next piece; invalid bytes in
            // the middle are emitted lossily.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => {
                on_text(&String::from_utf8_lossy(pending));
                self.emitted = upto;
                return;
            }
        };
        if valid > 0 {
            if let Ok(s) = std::str::from_utf8(&pending[..valid]) {
                on_text(s);
            }
            self.emitted += valid;
        }
    }

    /// Whether the last `n` tokens can be taken back: none of their text was handed out.
    fn can_drop(&self, n: usize) -> bool {
        n <= self.ends.len() && self.len_before(n) >= self.emitted
    }

    /// Takes back the last `n` tokens' text (see [`TextSink::can_drop`]).
    fn drop_tokens(&mut self, n: usize) {
        let len = self.len_before(n).max(self.emitted);
        self.bytes.truncate(len);
        self.ends.truncate(self.ends.len().saturating_sub(n));
    }

    /// The text's length without its last `n` tokens.
    fn len_before(&self, n: usize) -> usize {
        match self.ends.len().checked_sub(n + 1) {
            Some(i) => self.ends[i],
            None => 0,
        }
    }

    fn flush(&mut self, on_text: &mut dyn FnMut(&str)) {
        self.emit(self.bytes.len(), on_text);
        if self.emitted < self.bytes.len() {
            on_text(&String::from_utf8_lossy(&self.bytes[self.emitted..]));
            self.emitted = self.bytes.len();
        }
    }

    fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    fn into_string(self) -> String {
        match String::from_utf8(self.bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_mask_keeps_only_allowed() {
        let mut logits = vec![1.0f32; 40];
        let mut mask = vec![0u32; 2];
        mask[0] = 0b101;
        mask[1] = 1 << 7; // token 39
        apply_mask(&mut logits, &mask);
        let kept: Vec<usize> = (0..40).filter(|&i| logits[i].is_finite()).collect();
        assert_eq!(kept, vec![0, 2, 39]);
    }

    #[test]
    fn text_sink_waits_for_whole_characters() {
        let mut out = Vec::new();
        let mut sink = TextSink::new(0);
        let e = "é".as_bytes();
        sink.push(b"a", &mut |s: &str| out.push(s.to_string()));
        sink.push(&e[..1], &mut |s: &str| out.push(s.to_string()));
        sink.push(&e[1..], &mut |s: &str| out.push(s.to_string()));
        sink.flush(&mut |s: &str| out.push(s.to_string()));
        assert_eq!(out, vec!["a", "é"]);
        assert_eq!(sink.into_string(), "aé");
    }

    #[test]
    fn text_sink_withholds_what_a_backtrack_may_take_back() {
        let mut out = String::new();
        let mut sink = TextSink::new(2);
        for piece in ["{", "\"a", "\":", "1"] {
            sink.push(piece.as_bytes(), &mut |s: &str| out.push_str(s));
        }
        assert_eq!(out, "{\"a", "the last two tokens are withheld");
        assert!(sink.can_drop(2) && !sink.can_drop(3));
        sink.drop_tokens(2);
        sink.push(b"\"b", &mut |s: &str| out.push_str(s));
        assert_eq!(out, "{\"a");
        sink.flush(&mut |s: &str| out.push_str(s));
        assert_eq!(out, "{\"a\"b");
        assert_eq!(sink.into_string(), "{\"a\"b");
        let mut all = TextSink::new(usize::MAX);
        all.push(b"x", &mut |_: &str| panic!("nothing is shown before the end"));
        assert!(all.can_drop(1));
    }
}

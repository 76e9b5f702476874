//! Beam search under the grammar: keep the `N` likeliest prefixes, not just one.
//!
//! A greedy decoder that meets `]}` early closes a document it would have made longer;
//! beams keep the alternatives alive. Each beam is a [`Sequence`] of its own (matcher,
//! closing mode, liveness proofs, penalties) with its own KV sequence in one shared cache:
//!
//! - **A step** evaluates every beam's new tokens in one `llama_decode` batch. Each beam
//!   then runs its usual first half-step ([`Sequence::prepare`]: stop checks and
//!   jump-forward, whose forced tokens cost no probability), and offers its likeliest next
//!   tokens ([`Sequence::candidates`]) under the distribution greedy decoding takes its
//!   argmax of: the mask, then the bias and penalties, at temperature 1.
//! - **Selection** goes through all candidates best first by the beam's log-probability
//!   plus the token's, until `N` beams go on. The chosen parent is forked
//!   ([`Sequence::fork`], a copy of the parse state, no replay) and takes the token as a
//!   sampled one ([`Sequence::take`]); a token closing mode or a liveness proof refuses is
//!   skipped, and the parent's next candidates come from the mask the closer rewrote, as a
//!   sampling decoder would draw again. So one beam is exactly greedy decoding.
//! - **KV cells:** beams live in two banks of `N` sequence ids; the children of a step go
//!   to the other bank (`llama_memory_seq_cp` of the parent, which in a unified cache only
//!   tags cells) and the old bank is removed, so no copy overwrites a parent still needed.
//! - **The greedy path keeps its place:** the beam that has always taken its first
//!   candidate goes on first, whatever the others score, so the best beam never ranks
//!   below what greedy decoding returns (plain beam search can prune the greedy path and
//!   end worse). With one beam, that beam is all there is.
//! - **The end:** a beam is finished when it takes an end-of-generation token, or when the
//!   grammar or closing mode ends it. Its score is its log-probability divided by
//!   `length ^ beam_length_penalty` (tokens produced). Beams that ended on their own rank
//!   above beams the budget closed (length normalisation otherwise favours a long run of
//!   near-certain tokens cut by closing mode). The search stops when no beam is left, or
//!   when `N` beams have ended on their own and no live beam's current score beats the
//!   worst of them (the usual heuristic, as in transformers' `early_stopping=False`), and
//!   the greedy path has finished (its score per token may still rise). A
//!   beam that cannot finish is dropped; only when every beam fails is it an error.
//!
//! Beam search is deterministic: temperature, the truncating warpers and the seed do not
//! apply. Lookup drafting does not combine with it.
use super::llama::{clear_cells, eval_prompt};
use super::sequence::{Next, Sequence, SequenceSettings, Taken};
use super::{Error, Generator, Output, Prompt, StopReason};
use constrain::matcher::Constraint;
use constrain::vocab::TokenId;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::time::Instant;

/// The most beams a search may keep ([`super::GeneratorSettings::beams`]): each costs a
/// sequence of KV cells and a share of every decode batch.
pub const MAX_BEAMS: usize = 32;

/// One finished beam ([`Generator::generate_beams`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Beam {
    /// The output, as a plain generation reports it.
    pub output: Output,
    /// The sum of its sampled tokens' log-probabilities (forced tokens count 0).
    pub logprob: f32,
    /// `logprob / length ^ beam_length_penalty`: what beams are ranked by, after whether
    /// they ended on their own (see the module doc).
    pub score: f32,
    /// It is the greedy path: every token its step's likeliest.
    pub greedy: bool,
}

/// A beam still being extended.
struct Live {
    seq: Sequence,
    /// Its KV sequence id.
    kv: u32,
    /// Tokens to evaluate before its next candidates.
    pending: Vec<TokenId>,
    /// The logits after its last evaluated token.
    logits: Vec<f32>,
    logprob: f32,
    /// This step's candidates, best first, and how many were tried.
    candidates: Vec<(TokenId, f32)>,
    tried: usize,
    /// The candidates taken into a child this step (never taken twice).
    taken: Vec<TokenId>,
    /// It is the greedy path (every token the first candidate), which keeps its place.
    greedy: bool,
}

/// A beam made this step: a fork of live beam `parent` that took `token`.
struct Child {
    parent: usize,
    seq: Sequence,
    logprob: f32,
    token: TokenId,
    greedy: bool,
}

impl Generator {
    /// Beam search ([`super::GeneratorSettings::beams`] beams, at least 1) for `constraint`:
    /// the finished beams, best first (those that ended on their own, then by
    /// length-normalised log-probability), at most `beams` of them. See the module [`crate::beam`] for the method.
    pub fn generate_beams(
        &self,
        prompt: impl Into<Prompt>,
        constraint: Option<&Constraint>,
    ) -> Result<Vec<Beam>, Error> {
        self.beams(&prompt.into(), constraint, false)
    }

    /// [`Generator::generate_beams`]; `truncate_ok`: a beam that runs out of tokens ends
    /// there ([`StopReason::MaxTokens`]) instead of failing.
    pub(crate) fn beams(
        &self,
        prompt: &Prompt,
        constraint: Option<&Constraint>,
        truncate_ok: bool,
    ) -> Result<Vec<Beam>, Error> {
        let prompt_tokens = self.prompt_tokens(prompt)?;
        let settings = self.sequence_settings(truncate_ok, usize::MAX);
        let shape = BeamShape { beams: self.settings().beams, length_penalty: self.settings().beam_length_penalty };
        self.beam_search(&prompt_tokens, constraint, settings, shape)
    }

    /// Beam search from `prompt_tokens` with per-sequence `settings` (the batch server's
    /// per-request ones), in a context of its own.
    pub(crate) fn beam_search(
        &self,
        prompt_tokens: &[LlamaToken],
        constraint: Option<&Constraint>,
        settings: SequenceSettings,
        shape: BeamShape,
    ) -> Result<Vec<Beam>, Error> {
        self.check_constraint(constraint)?;
        let n = shape.beams.clamp(1, MAX_BEAMS);
        let n_ctx = self.context_size();
        let vocab = self.index().vocab();
        let mut root = Sequence::new(constraint, settings, vocab, prompt_tokens, n_ctx)?;
        // The cells every beam path needs: the prompt once (shared), its own output.
        let output = root.room(0).min(n_ctx.saturating_sub(prompt_tokens.len())) + 1;
        let cells = (prompt_tokens.len() + n * output).min(n_ctx.saturating_mul(n)).next_multiple_of(256);
        let cells = u32::try_from(cells).map_err(|_| Error::Llama("too many beams for this context".into()))?;
        let mut ctx = self.context_of(2 * n as u32, cells, true)?;
        let started = Instant::now();
        let mut batch = LlamaBatch::new((ctx.n_batch() as usize).max(1), 1);
        let at = eval_prompt(&mut ctx, &mut batch, prompt_tokens, 0)?;
        root.prompt_done(started.elapsed());
        let logits = ctx.get_logits_ith(at).to_vec();
        let root = Live {
            seq: root,
            kv: 0,
            pending: Vec::new(),
            logits,
            logprob: 0.0,
            candidates: Vec::new(),
            tried: 0,
            taken: Vec::new(),
            greedy: true,
        };
        let mut search = Search {
            gen: self,
            ctx,
            batch,
            n,
            penalty: shape.length_penalty,
            bank: 0,
            finished: Vec::new(),
            failure: None,
        };
        search.run(vec![root])?;
        let Search { finished, failure, .. } = search;
        let mut finished = finished;
        if finished.is_empty() {
            return Err(failure.unwrap_or(Error::DeadEnd { step: 0, backtracks: 0 }));
        }
        finished.sort_by(|a, b| rank(b).cmp(&rank(a)).then(b.score.total_cmp(&a.score)));
        finished.truncate(n);
        Ok(finished)
    }
}

/// How many beams, and how finished ones are ranked (see [`super::GeneratorSettings::beams`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BeamShape {
    /// Beams kept per step (1 to [`MAX_BEAMS`]).
    pub beams: usize,
    /// Finished beams rank by log-probability / length ^ this.
    pub length_penalty: f32,
}

/// The state of one beam search.
struct Search<'g> {
    gen: &'g Generator,
    ctx: LlamaContext<'g>,
    batch: LlamaBatch<'static>,
    n: usize,
    /// [`BeamShape::length_penalty`].
    penalty: f32,
    /// The first KV id of the bank the live beams are in (0 or `n`).
    bank: u32,
    finished: Vec<Beam>,
    /// The first error a dropped beam met: the result when no beam finishes.
    failure: Option<Error>,
}

impl Search<'_> {
    fn run(&mut self, mut live: Vec<Live>) -> Result<(), Error> {
        let vocab = self.gen.index().vocab();
        let width = 2 * self.n;
        loop {
            live = self.settle(live)?;
            if live.is_empty() || self.done(&live) {
                return Ok(());
            }
            for beam in &mut live {
                beam.candidates = beam.seq.candidates(vocab, &beam.logits, width)?;
                beam.tried = 0;
                beam.taken.clear();
            }
            let mut children: Vec<Child> = Vec::with_capacity(self.n);
            // The greedy path first: it keeps its place whatever the other beams score.
            if let Some(g) = live.iter().position(|b| b.greedy) {
                while let Some(&(token, lp)) = live[g].candidates.get(live[g].tried) {
                    if self.try_candidate(&mut live, g, token, lp, true, &mut children)? != Taken::Refused {
                        break;
                    }
                }
            }
            while children.len() < self.n {
                // The best untried candidate of any beam.
                let best = live
                    .iter()
                    .enumerate()
                    .filter_map(|(i, b)| b.candidates.get(b.tried).map(|&(t, lp)| (i, t, lp, b.logprob + lp)))
                    .max_by(|a, b| a.3.total_cmp(&b.3).then(b.0.cmp(&a.0)));
                let Some((i, token, lp, _)) = best else { break };
                self.try_candidate(&mut live, i, token, lp, false, &mut children)?;
            }
            live = self.branch(live, children)?;
        }
    }

    /// Tries the next candidate `token` (log-probability `lp`) of beam `i`: a fork of it
    /// takes the token and becomes a child (`greedy`: the greedy path's), or finishes; a
    /// refused token leaves the beam at the closer's rewritten mask, with new candidates.
    fn try_candidate(
        &mut self,
        live: &mut [Live],
        i: usize,
        token: TokenId,
        lp: f32,
        greedy: bool,
        children: &mut Vec<Child>,
    ) -> Result<Taken, Error> {
        let vocab = self.gen.index().vocab();
        let parent = &mut live[i];
        parent.tried += 1;
        if parent.taken.contains(&token) {
            return Ok(Taken::Refused);
        }
        let logprob = parent.logprob + lp;
        let mut child = parent.seq.fork();
        let taken = child.take(vocab, token, lp, &parent.logits)?;
        match taken {
            Taken::Kept => {
                parent.taken.push(token);
                match child.finished() {
                    // Nothing can follow: no need to evaluate the token.
                    Some(stop) => self.finish(child, stop, logprob, greedy),
                    None => children.push(Child { parent: i, seq: child, logprob, token, greedy }),
                }
            }
            Taken::Eos => {
                parent.taken.push(token);
                self.finish(child, StopReason::Eos, logprob, greedy);
            }
            Taken::Refused => {
                // The closer rewrote the step's mask in the child: the parent goes on from
                // there, as a sampling decoder draws again.
                let again = child.candidates_again(vocab, &parent.logits, 2 * self.n);
                parent.seq = child;
                parent.candidates = again;
                parent.tried = 0;
            }
        }
        Ok(taken)
    }

    /// Evaluates the beams' pending tokens and runs their first half-steps until every
    /// beam left is ready for candidates: stopped beams are finished, failed ones dropped.
    fn settle(&mut self, mut live: Vec<Live>) -> Result<Vec<Live>, Error> {
        let vocab = self.gen.index().vocab();
        let n_batch = (self.ctx.n_batch() as usize).max(1);
        let per_beam = (n_batch / self.n.max(1)).max(1);
        let mut ready = Vec::with_capacity(live.len());
        while !live.is_empty() {
            self.evaluate(&mut live)?;
            let mut waiting = Vec::new();
            for mut beam in live {
                match beam.seq.prepare(self.gen.model(), vocab, per_beam, &mut |_| {}) {
                    Ok(None) => ready.push(beam),
                    Ok(Some(Next::Feed(tokens))) => {
                        beam.pending = tokens;
                        waiting.push(beam);
                    }
                    Ok(Some(Next::Stop(reason))) => {
                        let (logprob, greedy) = (beam.logprob, beam.greedy);
                        self.finish(beam.seq, reason, logprob, greedy);
                    }
                    Ok(Some(Next::Rewind(_))) => {
                        self.failure.get_or_insert(Error::Llama("a beam asked to rewind".into()));
                    }
                    Err(e) => {
                        self.failure.get_or_insert(e);
                    }
                }
            }
            live = waiting;
        }
        Ok(ready)
    }

    /// One `llama_decode` of every beam's pending tokens (logits for each beam's last).
    fn evaluate(&mut self, live: &mut [Live]) -> Result<(), Error> {
        if live.iter().all(|b| b.pending.is_empty()) {
            return Ok(());
        }
        self.batch.clear();
        let mut at = Vec::with_capacity(live.len());
        for beam in live.iter() {
            let n_past = beam.seq.n_past();
            for (i, &t) in beam.pending.iter().enumerate() {
                let last = i + 1 == beam.pending.len();
                self.batch
                    .add(LlamaToken(t.0 as i32), (n_past + i) as i32, &[beam.kv as i32], last)
                    .map_err(|e| Error::Llama(e.to_string()))?;
            }
            at.push(self.batch.n_tokens() - 1);
        }
        self.ctx.decode(&mut self.batch).map_err(|e| Error::Llama(format!("decode failed: {e}")))?;
        for (beam, &i) in live.iter_mut().zip(&at) {
            if beam.pending.is_empty() {
                continue;
            }
            beam.seq.fed(beam.pending.len());
            beam.pending.clear();
            beam.logits.clear();
            beam.logits.extend_from_slice(self.ctx.get_logits_ith(i));
        }
        Ok(())
    }

    /// The children of this step become the live beams, in the other bank of KV ids.
    fn branch(&mut self, mut old: Vec<Live>, children: Vec<Child>) -> Result<Vec<Live>, Error> {
        let next_bank = if self.bank == 0 { self.n as u32 } else { 0 };
        let mut live = Vec::with_capacity(children.len());
        // The old beams' logits buffers (a vocabulary's worth each) serve the children.
        let mut spare: Vec<Vec<f32>> = old.iter_mut().map(|b| std::mem::take(&mut b.logits)).collect();
        for (j, Child { parent, seq, logprob, token, greedy }) in children.into_iter().enumerate() {
            let kv = next_bank + j as u32;
            let _ = self.ctx.clear_kv_cache_seq(Some(kv), None, None);
            self.ctx
                .copy_kv_cache_seq(old[parent].kv as i32, kv as i32, None, None)
                .map_err(|e| Error::Llama(format!("cannot copy the KV cells of a beam: {e}")))?;
            live.push(Live {
                seq,
                kv,
                pending: vec![token],
                logits: spare.pop().unwrap_or_default(),
                logprob,
                candidates: Vec::new(),
                tried: 0,
                taken: Vec::new(),
                greedy,
            });
        }
        for beam in &old {
            clear_cells(&mut self.ctx, beam.kv, 0)?;
        }
        self.bank = next_bank;
        Ok(live)
    }

    /// Records a finished beam.
    fn finish(&mut self, seq: Sequence, stop: StopReason, logprob: f32, greedy: bool) {
        let output = seq.finish(stop, &mut |_| {});
        let score = normalised(logprob, output.generated_tokens, self.penalty);
        self.finished.push(Beam { output, logprob, score, greedy });
    }

    /// Whether `n` beams have finished on their own, the greedy path has finished, and no
    /// live beam's current score beats the worst of the best `n`.
    fn done(&self, live: &[Live]) -> bool {
        if live.iter().any(|b| b.greedy) {
            return false;
        }
        let mut ended: Vec<f32> = self.finished.iter().filter(|b| rank(b) == 1).map(|b| b.score).collect();
        if ended.len() < self.n {
            return false;
        }
        ended.sort_by(|a, b| b.total_cmp(a));
        let worst = ended[self.n - 1];
        live.iter().all(|b| normalised(b.logprob, b.seq.generated(), self.penalty) <= worst)
    }
}

/// What orders finished beams before their score: an output that ended on its own (the
/// grammar or the model ended it) ranks above one the budget closed or cut, whose scores
/// are those of the document the model did not get to finish.
fn rank(beam: &Beam) -> u8 {
    match beam.output.stop {
        StopReason::Finished | StopReason::Eos => 1,
        StopReason::Closed | StopReason::MaxTokens => 0,
    }
}

/// `logprob / length ^ penalty` (a length of at least 1).
fn normalised(logprob: f32, length: usize, penalty: f32) -> f32 {
    logprob / (length.max(1) as f32).powf(penalty)
}

#[cfg(test)]
mod tests {
    use super::normalised;

    #[test]
    fn normalisation_divides_by_a_power_of_the_length() {
        assert_eq!(normalised(-6.0, 3, 1.0), -2.0);
        assert_eq!(normalised(-6.0, 3, 0.0), -6.0);
        assert_eq!(normalised(-6.0, 0, 1.0), -6.0);
        assert!((normalised(-8.0, 4, 0.5) + 4.0).abs() < 1e-6);
    }
}

//! Speculative decoding with a draft model: a second model proposes tokens inside the
//! grammar, the model verifies them in one batch, and the tokens kept are distributed
//! exactly as plain decoding's.
//!
//! Each step:
//!
//! 1. **The draft catches up.** Its KV cells hold a prefix of the sequence's tokens; the
//!    tokens after the common prefix are evaluated in one batch (the cells past it are
//!    removed), so forced tokens, backtracks and refused drafts need no bookkeeping.
//! 2. **The draft proposes** up to [`super::GeneratorSettings::draft`] tokens, one decode
//!    each: under a fork of the sequence's matcher (so every draft is inside the grammar),
//!    through the same warper chain as the sequence, its distribution `q` kept per token.
//! 3. **The model verifies** the step's tokens and all drafts in one `llama_decode`, with
//!    logits at every draft position. At each, the sequence takes its usual first
//!    half-step (stop checks, jump-forward) and then [`Sequence::sample_against_draft`]:
//!    the draft is kept with probability `min(1, p/q)` under the sequence's own masked,
//!    warped distribution `p`, else a token is drawn from `max(0, p − q)`
//!    ([`constrain::sampling::accept_draft`]). The first token that is not the draft ends
//!    the step (its KV cells past that point are removed); when every draft is kept, the
//!    next token is sampled from the logits after the last one, as plain decoding would.
//!
//! So each token is distributed as plain decoding draws it, and at temperature 0 the output
//! is plain greedy decoding's, token for token (the batched logits equal one-token ones:
//! see `attention` in `llama.rs`). A token closing mode or a liveness proof refuses is drawn
//! again from the rewritten mask by the sequence's own sampler, as in plain decoding.
//! Mirostat, whose truncation moves with each draw, is refused.
use super::llama::clear_cells;
use super::{Error, Generator};
use constrain::matcher::Matcher;
use constrain::sampling::{Sampler, SamplerSettings};
use constrain::vocab::{TokenId, Vocabulary};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;

/// The draft model's side of speculative decoding: its context, the tokens its cells hold,
/// and its sampler. The decode loop (`Generator::run`) evaluates its proposals.
pub(crate) struct Drafter<'m> {
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    /// The tokens whose KV cells the draft context holds, positions `0..`.
    held: Vec<TokenId>,
    sampler: Sampler,
    mask: Vec<u32>,
    logits: Vec<f32>,
    /// Per proposed token, the distribution it was drawn from.
    qs: Vec<Vec<f32>>,
    /// Buffers of earlier proposals' distributions, reused (a vocabulary's worth each).
    spare: Vec<Vec<f32>>,
}

impl<'m> Drafter<'m> {
    /// A drafter on `gen`'s draft model ([`Generator::load_draft`]), drawing through the
    /// sequence's warper chain `settings` (mirostat refused: its truncation moves with each
    /// draw, so no whole distribution can be given).
    pub(crate) fn new(gen: &'m Generator, settings: &SamplerSettings, vocab: &Vocabulary) -> Result<Self, Error> {
        let model = gen
            .draft_model()
            .ok_or_else(|| Error::Llama("speculative decoding needs a draft model (Generator::load_draft)".into()))?;
        if settings.mirostat != 0 {
            return Err(Error::Settings(constrain::sampling::Error::Unsupported("speculative decoding with mirostat")));
        }
        let ctx_size = u32::try_from(gen.context_size()).unwrap_or(u32::MAX);
        let threads = gen
            .settings()
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        let threads = i32::try_from(threads.max(1)).unwrap_or(i32::MAX);
        let params = super::llama::attention(LlamaContextParams::default())
            .with_n_ctx(NonZeroU32::new(ctx_size))
            .with_n_batch(ctx_size.max(1))
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let ctx = model
            .new_context(gen.backend()?, params)
            .map_err(|e| Error::Llama(format!("cannot create the draft model's context: {e}")))?;
        // The draft draws with its own seed: its proposals need not be the model's draws.
        let seed = settings.seed.map(|s| s.wrapping_add(0x5eed));
        let sampler = Sampler::new(SamplerSettings { seed, ..settings.clone() }).map_err(Error::Settings)?;
        let n_batch = (ctx.n_batch() as usize).max(1);
        Ok(Drafter {
            ctx,
            batch: LlamaBatch::new(n_batch, 1),
            held: Vec::new(),
            sampler,
            mask: vec![0u32; vocab.mask_words()],
            logits: Vec::with_capacity(vocab.mask_len()),
            qs: Vec::new(),
            spare: Vec::new(),
        })
    }

    /// The distribution the `j`-th token of the last proposal was drawn from.
    pub(crate) fn q(&self, j: usize) -> &[f32] {
        self.qs.get(j).map_or(&[], Vec::as_slice)
    }

    /// Evaluates `tokens` at the end of what the draft holds; logits for the last one.
    fn feed(&mut self, tokens: &[TokenId]) -> Result<(), Error> {
        let n_batch = (self.ctx.n_batch() as usize).max(1);
        for chunk in tokens.chunks(n_batch) {
            self.batch.clear();
            let start = self.held.len();
            for (i, &t) in chunk.iter().enumerate() {
                self.batch
                    .add(LlamaToken(t.0 as i32), (start + i) as i32, &[0], i + 1 == chunk.len())
                    .map_err(|e| Error::Llama(e.to_string()))?;
            }
            self.ctx.decode(&mut self.batch).map_err(|e| Error::Llama(format!("draft decode failed: {e}")))?;
            self.held.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// Up to `n` draft tokens after `tokens` (the sequence so far, prompt first), inside
    /// `matcher` (a fork of the sequence's; `None`: unconstrained), into `out`; their
    /// distributions in `self.qs`. Stops early at an end-of-generation token or where the
    /// grammar allows nothing.
    pub(crate) fn propose(
        &mut self,
        vocab: &Vocabulary,
        tokens: &[TokenId],
        mut matcher: Option<Matcher>,
        n: usize,
        out: &mut Vec<TokenId>,
    ) -> Result<(), Error> {
        out.clear();
        self.spare.append(&mut self.qs);
        if n == 0 {
            return Ok(());
        }
        // Catch up: keep the common prefix, evaluate the rest (at least the last token, for
        // its logits).
        let common = self.held.iter().zip(tokens).take_while(|(a, b)| a == b).count().min(tokens.len() - 1);
        if common < self.held.len() {
            clear_cells(&mut self.ctx, 0, common)?;
            self.held.truncate(common);
        }
        self.feed(&tokens[common..])?;
        for i in 0..n {
            self.logits.clear();
            self.logits.extend_from_slice(self.ctx.get_logits_ith(self.batch.n_tokens() - 1));
            self.logits.resize(vocab.mask_len(), f32::NEG_INFINITY);
            if let Some(m) = matcher.as_mut() {
                if m.fill_mask(&mut self.mask).is_err() {
                    break;
                }
                crate::sequence::apply_mask(&mut self.logits, &self.mask);
            }
            let mut q = self.spare.pop().unwrap_or_default();
            if self.sampler.distribution(&mut self.logits, &mut q).is_err() {
                self.spare.push(q);
                break;
            }
            let Some(d) = self.sampler.draw_from(&q) else { break };
            if vocab.is_eos(d) || matcher.as_mut().is_some_and(|m| m.accept_token(d).is_err()) {
                self.spare.push(q);
                break;
            }
            out.push(d);
            self.qs.push(q);
            if i + 1 < n {
                self.feed(&[d])?;
            }
        }
        Ok(())
    }
}

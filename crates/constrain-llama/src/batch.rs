//! Continuous batching: up to N sequences decoding together in one llama.cpp context.
//!
//! Input: [`BatchRequest`]s on a channel (a prompt, an optional [`Constraint`], sampling
//! settings and an event sink). Output: [`BatchEvent`]s through each request's sink — text
//! as it is produced, then the [`Output`] or an [`Error`].
//!
//! How: [`Generator::serve_batched`] owns one context with `parallel` KV streams of
//! `ctx_size` cells; sequence `i` of the batch is KV sequence id `i`. Each step
//! (1) admits waiting requests into free slots (a new request joins at the next step),
//! (2) runs the first half of every active sequence's step ([`Sequence::prepare`]: stop
//! checks, jump-forward) on this thread, (3) fills the masks and samples of all sequences
//! that need a token in parallel (scoped threads, one chunk per core; each sequence has its
//! own sampler and seeded RNG, so its tokens do not depend on the others), and (4) makes
//! ONE `llama_decode` of a batch holding every sequence's new tokens plus as much of the
//! waiting prompts as fits (prompts are prefilled into their own sequence, logits only for
//! their last token). A finished, failed or cancelled sequence (its sink returned `false`)
//! frees its slot and its KV cells (`llama_memory_seq_rm`) at once, except its prompt's:
//! a later request is put in the free slot whose kept prompt shares the longest prefix with
//! its own, and only the rest of its prompt is evaluated (a repeated system prompt or
//! conversation is not evaluated again).
//!
//! A request with more than one choice (OpenAI's `n`: [`BatchRequest::more`]) waits until
//! that many slots are free, then takes one slot per choice. Its prompt is evaluated once,
//! in the first choice's sequence, and its cells are copied to the others
//! (`llama_memory_seq_cp`) before they sample their first token from the same logits, each
//! with its own sampler.
//!
//! The context is not `Send`: call [`Generator::serve_batched`] on the thread that will own
//! it for the server's lifetime; it returns when the request channel closes.
use super::beam::BeamShape;
use super::llama::clear_cells;
use super::sequence::{Next, Sequence, SequenceSettings, STREAM_HOLD};
use super::{Error, Generator, Output, StopReason};
use constrain::matcher::Constraint;
use constrain::sampling::SamplerSettings;
use constrain::vocab::{TokenId, Vocabulary};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The prompt of a batched request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchPrompt {
    /// `(role, content)` turns, rendered with the model's chat template and the assistant's
    /// turn opened.
    Chat(Vec<(String, String)>),
    /// Plain text, tokenized as is (no template, control-token text left as text).
    Raw(String),
}

/// What a request's sink receives, in order: [`BatchEvent::Text`] pieces (whole UTF-8
/// characters), then exactly one [`BatchEvent::Done`] or [`BatchEvent::Failed`].
#[derive(Debug)]
pub enum BatchEvent {
    /// New output text.
    Text(String),
    /// Generation ended; the output holds the whole text and the counts. A sequence the
    /// sink stopped (by returning `false`) ends with [`StopReason::Finished`].
    Done(Box<Output>),
    /// The request failed (bad prompt, budget too small, dead end, llama.cpp error).
    Failed(Error),
}

/// Receives a request's events; returns `false` to stop the sequence (client gone, or a
/// stop string seen): its slot and KV cells are freed and a final `Done` is still sent.
pub type EventSink = Box<dyn FnMut(BatchEvent) -> bool + Send>;

/// One request for [`Generator::serve_batched`].
pub struct BatchRequest {
    /// The prompt.
    pub prompt: BatchPrompt,
    /// The constraint (compiled with this generator's [`Generator::constraint`]), or `None`
    /// for free text.
    pub constraint: Option<Constraint>,
    /// This request's sampling chain (its own seed: the same seed gives the same output
    /// whatever else is being decoded).
    pub sampler: SamplerSettings,
    /// Most tokens to produce; running out ends with [`StopReason::MaxTokens`] (or
    /// [`StopReason::Closed`] when closing mode completes a constrained output).
    pub max_tokens: usize,
    /// Whether the client is shown the text as it comes ([`BatchEvent::Text`] as produced):
    /// then the newest 16 tokens are withheld until the next ones, so that a dead end
    /// within them is backed out of unseen. Otherwise all text comes at the end, and a
    /// backtrack may reach anywhere.
    pub stream: bool,
    /// Where the events go.
    pub events: EventSink,
    /// Set to `true` to stop the sequence at its next step, as a sink returning `false`
    /// does (a client gone): a request that streams nothing learns of it no other way.
    /// It stops every choice of the request.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Record each output token's log-probability and this many of the likeliest
    /// alternatives per step ([`Output::logprobs`], at most
    /// [`crate::logprobs::MAX_TOP_LOGPROBS`]); `None`: none. Applies to every choice.
    pub logprobs: Option<usize>,
    /// More choices of the same prompt and constraint (OpenAI's `n` − 1), each its own
    /// sequence with its own sampler and sink; see the module doc. A request with more
    /// choices than the batch has sequences fails.
    pub more: Vec<BatchChoice>,
    /// Beam search instead of sampling ([`crate::beam`]): choice `i` is the `i`-th best
    /// finished beam (so `beams` must be at least the number of choices). Runs at once in
    /// a context of its own, on this thread: the batch's other sequences wait until it
    /// ends, and [`BatchRequest::cancel`] is not seen before. `None`: sample.
    pub beams: Option<BeamShape>,
}

/// Another choice of a [`BatchRequest`]: it shares the request's prompt (evaluated once),
/// constraint and token budget, and samples with its own settings.
pub struct BatchChoice {
    /// This choice's sampling chain (give each choice its own seed).
    pub sampler: SamplerSettings,
    /// Where this choice's events go.
    pub events: EventSink,
}

/// What one step of [`Generator::serve_batched`] did: for a server's metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepStats {
    /// Sequences with tokens in the step's batch (generating or prefilling).
    pub sequences: usize,
    /// Tokens in the batch.
    pub tokens: usize,
    /// Wall time of the masks and sampling of every sequence (in parallel).
    pub sample: Duration,
    /// Wall time of the one `llama_decode`.
    pub decode: Duration,
}

/// What one decode evaluated for a sequence.
#[derive(Clone, Copy)]
enum Fed {
    /// `n` generated (sampled or forced) tokens.
    Tokens(usize),
    /// Part of the prompt.
    PromptPart,
    /// The rest of the prompt.
    PromptDone,
}

/// A busy slot: one sequence of the batch.
struct Slot {
    seq: Sequence,
    events: EventSink,
    cancel: Option<Arc<AtomicBool>>,
    prompt: Vec<LlamaToken>,
    /// Prompt tokens already in the batch or the cache.
    prompt_queued: usize,
    started: Instant,
    /// Batch index of this sequence's logits in the last decode.
    logits_at: Option<i32>,
    /// Tokens to evaluate in the next decode.
    pending: Vec<TokenId>,
    /// For a further choice of a request: the slot of its first choice, whose prompt cells
    /// it copies once they are evaluated (and that request's serial number, to tell it from
    /// a later occupant of the slot). `None` once copied, and for first choices.
    follows: Option<(usize, u64)>,
    /// The request's serial number (every choice of a request has the same).
    serial: u64,
    /// The step's outcome: `None` while it needs sampling.
    outcome: Option<Result<Next, Error>>,
    /// Text produced in this step.
    text: String,
}

impl Slot {
    fn generating(&self) -> bool {
        self.prompt_queued == self.prompt.len() && self.logits_at.is_some()
    }
}

impl Generator {
    /// Runs the batched decode loop (see the module doc) with up to `parallel` sequences
    /// until `requests` closes. Requests beyond `parallel` wait in the channel. Fails only if
    /// the context cannot be created; a failed decode fails the requests in that batch.
    /// `busy` is kept at the number of sequences in use (for health reports). `on_ready` is
    /// called once the context exists, before the first request is read: a server announces
    /// itself then, so a context that cannot be created fails before anyone is told to
    /// connect, and llama.cpp's context logs are written before the announcement.
    /// `on_step` is called after every decode with what the step did.
    pub fn serve_batched(
        &self,
        parallel: usize,
        requests: Receiver<BatchRequest>,
        busy: &AtomicUsize,
        on_ready: impl FnOnce(),
        mut on_step: impl FnMut(&StepStats),
    ) -> Result<(), Error> {
        let parallel = parallel.clamp(1, 256);
        let mut ctx = self.new_context(parallel as u32)?;
        on_ready();
        let n_batch = (ctx.n_batch() as usize).max(1);
        let n_ctx = (ctx.n_ctx() as usize / parallel).max(1);
        let vocab = self.index().vocab();
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let mut batch = LlamaBatch::new(n_batch, 1);
        let mut slots: Vec<Option<Slot>> = (0..parallel).map(|_| None).collect();
        // Per sequence id: the prompt tokens whose cells it still holds (prefix cache).
        let mut cached: Vec<Vec<LlamaToken>> = vec![Vec::new(); parallel];
        let mut closed = false;
        // A request with more choices than there are free slots waits here, first in line.
        let mut held: Option<BatchRequest> = None;
        let mut serial = 0u64;
        loop {
            busy.store(slots.iter().filter(|s| s.is_some()).count(), Ordering::Relaxed);
            // 1. Admit waiting requests into free slots.
            if slots.iter().all(Option::is_none) && held.is_none() {
                if closed {
                    return Ok(());
                }
                match requests.recv() {
                    Ok(r) => held = Some(r),
                    Err(_) => return Ok(()),
                }
            }
            loop {
                let next = match held.take() {
                    Some(r) => r,
                    None if closed || slots.iter().all(Option::is_some) => break,
                    None => match requests.try_recv() {
                        Ok(r) => r,
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            closed = true;
                            break;
                        }
                    },
                };
                serial += 1;
                if let Some(r) = self.admit(&mut slots, &mut cached, &mut ctx, next, n_ctx, serial) {
                    held = Some(r);
                    break;
                }
            }
            // A further choice whose first choice is gone before its prompt was evaluated.
            for id in 0..slots.len() {
                let orphan = match &slots[id] {
                    Some(Slot { follows: Some((leader, serial)), .. }) => {
                        slots[*leader].as_ref().is_none_or(|l| l.serial != *serial)
                    }
                    _ => false,
                };
                if orphan {
                    let e = Error::Llama("the request's first choice ended before its prompt was evaluated".into());
                    fail(&mut slots[id], e, &mut ctx, id, &mut cached[id]);
                }
            }

            // 2. Stop checks and jump-forward, here (they tokenize with the model).
            let forced_cap = (n_batch / parallel).max(1);
            for slot in slots.iter_mut().flatten().filter(|s| s.generating()) {
                let Slot { seq, text, .. } = slot;
                slot.outcome = match seq.prepare(self.model(), vocab, forced_cap, &mut |t| text.push_str(t)) {
                    Ok(None) => None,
                    Ok(Some(next)) => Some(Ok(next)),
                    Err(e) => Some(Err(e)),
                };
            }

            // 3. Masks and sampling of every sequence that needs a token, in parallel.
            let sampling = Instant::now();
            {
                let mut work: Vec<(&mut Slot, &[f32])> = Vec::new();
                for slot in slots.iter_mut().flatten() {
                    if let (true, None, Some(at)) = (slot.generating(), &slot.outcome, slot.logits_at) {
                        let logits = ctx.get_logits_ith(at);
                        work.push((slot, logits));
                    }
                }
                sample_all(&mut work, vocab, threads);
            }
            let sample = sampling.elapsed();

            // 4. Deliver text, retire finished sequences, and build one batch.
            batch.clear();
            for (id, entry) in slots.iter_mut().enumerate() {
                let Some(slot) = entry else { continue };
                let outcome = if slot.generating() { slot.outcome.take() } else { None };
                let mut keep = !slot.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed));
                if keep && !slot.text.is_empty() {
                    keep = (slot.events)(BatchEvent::Text(std::mem::take(&mut slot.text)));
                }
                let end = match outcome {
                    Some(Ok(Next::Feed(tokens))) if keep => {
                        slot.pending = tokens;
                        None
                    }
                    // A backtrack: the cells past the sequence's position go first.
                    Some(Ok(Next::Rewind(tokens))) if keep => match clear_cells(&mut ctx, id as u32, slot.seq.n_past())
                    {
                        Ok(()) => {
                            slot.pending = tokens;
                            None
                        }
                        Err(e) => Some(Err(e)),
                    },
                    Some(Ok(Next::Feed(_) | Next::Rewind(_))) | None if !keep => Some(Ok(StopReason::Finished)),
                    Some(Ok(Next::Feed(_) | Next::Rewind(_))) | None => None,
                    Some(Ok(Next::Stop(reason))) => Some(Ok(reason)),
                    Some(Err(e)) => Some(Err(e)),
                };
                if let Some(end) = end {
                    if let Some(slot) = entry.take() {
                        // Keep the prompt's cells (evaluated so far) for a later request
                        // with the same prefix; free the rest.
                        let keep = slot.prompt_queued;
                        cached[id] = slot.prompt[..keep].to_vec();
                        if !matches!(ctx.clear_kv_cache_seq(Some(id as u32), Some(keep as u32), None), Ok(true)) {
                            cached[id].clear();
                            let _ = ctx.clear_kv_cache_seq(Some(id as u32), None, None);
                        }
                        finish(slot, end);
                    }
                }
            }
            let mut fed: Vec<(usize, Fed)> = Vec::new();
            for (id, slot) in slots.iter_mut().enumerate() {
                let Some(slot) = slot else { continue };
                if slot.pending.is_empty() {
                    continue;
                }
                let n_past = slot.seq.n_past();
                let last = slot.pending.len() - 1;
                let mut ok = true;
                for (i, &t) in slot.pending.iter().enumerate() {
                    ok &= batch.add(LlamaToken(t.0 as i32), (n_past + i) as i32, &[id as i32], i == last).is_ok();
                }
                slot.logits_at = Some(batch.n_tokens() - 1);
                fed.push((id, Fed::Tokens(slot.pending.len())));
                slot.pending.clear();
                if !ok {
                    slot.outcome = Some(Err(Error::Llama("the batch is full".into())));
                }
            }
            for (id, slot) in slots.iter_mut().enumerate() {
                let Some(slot) = slot else { continue };
                if slot.follows.is_some() {
                    continue;
                }
                let room = n_batch.saturating_sub(batch.n_tokens() as usize);
                let left = slot.prompt.len() - slot.prompt_queued;
                if left == 0 || room == 0 {
                    continue;
                }
                let take = left.min(room);
                let from = slot.prompt_queued;
                for (i, &t) in slot.prompt[from..from + take].iter().enumerate() {
                    let pos = from + i;
                    let last = pos + 1 == slot.prompt.len();
                    // Cannot fail: `take` fits the room left in the batch.
                    let _ = batch.add(t, pos as i32, &[id as i32], last);
                }
                slot.prompt_queued += take;
                if slot.prompt_queued == slot.prompt.len() {
                    slot.logits_at = Some(batch.n_tokens() - 1);
                    fed.push((id, Fed::PromptDone));
                } else {
                    fed.push((id, Fed::PromptPart));
                }
            }
            if batch.n_tokens() == 0 {
                continue;
            }

            // 5. One decode for every sequence.
            let decoding = Instant::now();
            let result = ctx.decode(&mut batch).map_err(|e| format!("decode failed: {e}"));
            on_step(&StepStats {
                sequences: fed.len(),
                tokens: batch.n_tokens() as usize,
                sample,
                decode: decoding.elapsed(),
            });
            for (id, what) in fed {
                let Some(slot) = &mut slots[id] else { continue };
                match (&result, slot.outcome.take(), what) {
                    (Ok(()), None, Fed::Tokens(n)) => slot.seq.fed(n),
                    (Ok(()), None, Fed::PromptDone) => {
                        slot.seq.prompt_done(slot.started.elapsed());
                        let (serial, logits_at) = (slot.serial, slot.logits_at);
                        share_prompt(&mut slots, &mut ctx, id, serial, logits_at, &mut cached);
                    }
                    (Ok(()), None, Fed::PromptPart) => {}
                    (Ok(()), Some(Err(e)), _) => fail(&mut slots[id], e, &mut ctx, id, &mut cached[id]),
                    (Ok(()), Some(Ok(_)), _) => {}
                    (Err(msg), _, _) => fail(&mut slots[id], Error::Llama(msg.clone()), &mut ctx, id, &mut cached[id]),
                }
            }
        }
    }

    /// Puts `request` into the free slot whose cached prompt shares the longest prefix with
    /// its prompt (those cells are reused, the rest of the sequence is cleared), and each of
    /// its further choices into another free slot; or fails it (bad prompt, budget too
    /// small, more choices than the batch has sequences). `Some` gives the request back when
    /// fewer slots are free than it has choices: it waits for them.
    fn admit(
        &self,
        slots: &mut [Option<Slot>],
        cached: &mut [Vec<LlamaToken>],
        ctx: &mut LlamaContext<'_>,
        request: BatchRequest,
        n_ctx: usize,
        serial: u64,
    ) -> Option<BatchRequest> {
        if let Some(shape) = request.beams {
            self.serve_beams(request, shape);
            return None;
        }
        let choices = 1 + request.more.len();
        if choices > slots.len() {
            let e = format!("{choices} choices, but the batch has {} sequences", slots.len());
            fail_request(request, Error::Llama(e));
            return None;
        }
        if slots.iter().filter(|s| s.is_none()).count() < choices {
            return Some(request);
        }
        let started = Instant::now();
        let prompt = self.request_tokens(&request.prompt);
        let settings = self.request_settings(&request);
        let vocab = self.index().vocab();
        let seqs = prompt.and_then(|prompt| {
            self.check_constraint(request.constraint.as_ref())?;
            let seq = Sequence::new(request.constraint.as_ref(), settings.clone(), vocab, &prompt, n_ctx)?;
            let more = request.more.iter().map(|c| {
                let settings = SequenceSettings { sampler: c.sampler.clone(), ..settings.clone() };
                Sequence::new(request.constraint.as_ref(), settings, vocab, &prompt, n_ctx)
            });
            let more = more.collect::<Result<Vec<_>, _>>()?;
            Ok((seq, more, prompt))
        });
        let (seq, more, prompt) = match seqs {
            Ok(ok) => ok,
            Err(e) => {
                fail_request(request, e);
                return None;
            }
        };
        let common = |id: usize| cached[id].iter().zip(&prompt).take_while(|(a, b)| a == b).count();
        // A free slot exists (counted above).
        let id = (0..slots.len()).filter(|&id| slots[id].is_none()).max_by_key(|&id| (common(id), id))?;
        // At least the last prompt token is evaluated again: its logits start generation.
        let mut reuse = common(id).min(prompt.len() - 1);
        if !matches!(ctx.clear_kv_cache_seq(Some(id as u32), Some(reuse as u32), None), Ok(true)) {
            reuse = 0;
            let _ = ctx.clear_kv_cache_seq(Some(id as u32), None, None);
        }
        cached[id].clear();
        let slot = |seq, events, prompt_queued, follows| Slot {
            seq,
            events,
            cancel: request.cancel.clone(),
            prompt: prompt.clone(),
            prompt_queued,
            started,
            logits_at: None,
            pending: Vec::new(),
            outcome: None,
            text: String::new(),
            follows,
            serial,
        };
        slots[id] = Some(slot(seq, request.events, reuse, None));
        for (seq, choice) in more.into_iter().zip(request.more) {
            // Free slots with the least useful cache first; their cells are replaced whole.
            let Some(other) = (0..slots.len()).filter(|&i| slots[i].is_none()).min_by_key(|&i| (cached[i].len(), i))
            else {
                break;
            };
            cached[other].clear();
            let _ = ctx.clear_kv_cache_seq(Some(other as u32), None, None);
            slots[other] = Some(slot(seq, choice.events, 0, Some((id, serial))));
        }
        None
    }
}

/// Fails every choice of a request that was never admitted.
impl Generator {
    /// A request's prompt as tokens (its chat turns templated).
    fn request_tokens(&self, prompt: &BatchPrompt) -> Result<Vec<LlamaToken>, Error> {
        match prompt {
            BatchPrompt::Raw(text) => Ok(self.raw_tokens(text, false)),
            BatchPrompt::Chat(turns) => {
                let turns: Vec<(&str, &str)> = turns.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
                self.chat_tokens(&turns)
            }
        }
    }

    /// The sequence settings of a request's first choice.
    fn request_settings(&self, request: &BatchRequest) -> SequenceSettings {
        SequenceSettings {
            sampler: request.sampler.clone(),
            max_tokens: request.max_tokens,
            truncate_ok: true,
            logprobs: request.logprobs,
            ..self.sequence_settings(true, if request.stream { STREAM_HOLD } else { usize::MAX })
        }
    }

    /// Runs a beam search request to its end ([`BatchRequest::beams`]): choice `i` gets the
    /// `i`-th best beam's text and output, or fails when fewer beams finished.
    fn serve_beams(&self, mut request: BatchRequest, shape: BeamShape) {
        let settings = SequenceSettings { hold: usize::MAX, ..self.request_settings(&request) };
        let beams = self
            .request_tokens(&request.prompt)
            .and_then(|prompt| self.beam_search(&prompt, request.constraint.as_ref(), settings, shape));
        let beams = match beams {
            Ok(beams) => beams,
            Err(e) => return fail_request(request, e),
        };
        let finished = beams.len();
        let sinks = std::iter::once(&mut request.events).chain(request.more.iter_mut().map(|c| &mut c.events));
        let mut beams = beams.into_iter();
        for (i, sink) in sinks.enumerate() {
            match beams.next() {
                Some(beam) => {
                    if sink(BatchEvent::Text(beam.output.text.clone())) {
                        sink(BatchEvent::Done(Box::new(beam.output)));
                    } else {
                        // A stop string was seen (or the client is gone): the output ends
                        // there, as a sampled sequence's does.
                        sink(BatchEvent::Done(Box::new(Output { stop: StopReason::Finished, ..beam.output })));
                    }
                }
                None => {
                    let e = format!("choice {i} asked for, but only {finished} beams finished");
                    sink(BatchEvent::Failed(Error::Llama(e)));
                }
            }
        }
    }
}

fn fail_request(mut request: BatchRequest, e: Error) {
    let text = e.to_string();
    for choice in &mut request.more {
        (choice.events)(BatchEvent::Failed(Error::Llama(text.clone())));
    }
    (request.events)(BatchEvent::Failed(e));
}

/// After the prompt of slot `leader` (request `serial`) is evaluated: copies its cells to the
/// sequences of the request's further choices, which then sample from the same logits.
fn share_prompt(
    slots: &mut [Option<Slot>],
    ctx: &mut LlamaContext<'_>,
    leader: usize,
    serial: u64,
    logits_at: Option<i32>,
    cached: &mut [Vec<LlamaToken>],
) {
    for id in 0..slots.len() {
        if slots[id].as_ref().is_none_or(|s| s.follows != Some((leader, serial))) {
            continue;
        }
        // A copy across KV streams replaces the whole destination stream (llama.cpp copies
        // the buffers at the next decode), which holds nothing of this sequence yet.
        if let Err(e) = ctx.copy_kv_cache_seq(leader as i32, id as i32, None, None) {
            let e = Error::Llama(format!("copying the prompt's cells failed: {e}"));
            fail(&mut slots[id], e, ctx, id, &mut cached[id]);
            continue;
        }
        let Some(slot) = &mut slots[id] else { continue };
        slot.follows = None;
        slot.prompt_queued = slot.prompt.len();
        slot.logits_at = logits_at;
        slot.seq.prompt_done(slot.started.elapsed());
    }
}

/// Samples every sequence of `work` (with its logits), in up to `threads` chunks at once.
fn sample_all(work: &mut [(&mut Slot, &[f32])], vocab: &Vocabulary, threads: usize) {
    let one = |(slot, logits): &mut (&mut Slot, &[f32])| {
        let Slot { seq, text, outcome, .. } = &mut **slot;
        *outcome = Some(seq.sample(vocab, logits, &mut |t| text.push_str(t)));
    };
    if work.len() <= 1 || threads <= 1 {
        work.iter_mut().for_each(one);
        return;
    }
    let chunk = work.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let mut chunks = work.chunks_mut(chunk);
        let first = chunks.next();
        for rest in chunks {
            scope.spawn(move || rest.iter_mut().for_each(one));
        }
        if let Some(first) = first {
            first.iter_mut().for_each(one);
        }
    });
}

/// Sends a sequence's final event.
fn finish(mut slot: Slot, end: Result<StopReason, Error>) {
    let event = match end {
        Ok(reason) => {
            let mut tail = String::new();
            let output = slot.seq.finish(reason, &mut |t| tail.push_str(t));
            if !tail.is_empty() {
                (slot.events)(BatchEvent::Text(tail));
            }
            BatchEvent::Done(Box::new(output))
        }
        Err(e) => BatchEvent::Failed(e),
    };
    (slot.events)(event);
}

/// Fails the sequence in `entry` (KV sequence `id`) and frees it and all its cells.
fn fail(entry: &mut Option<Slot>, e: Error, ctx: &mut LlamaContext<'_>, id: usize, cached: &mut Vec<LlamaToken>) {
    if let Some(slot) = entry.take() {
        finish(slot, Err(e));
    }
    cached.clear();
    let _ = ctx.clear_kv_cache_seq(Some(id as u32), None, None);
}

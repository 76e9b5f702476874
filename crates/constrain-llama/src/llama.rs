//! The llama.cpp side of the engine: model loading, vocabulary extraction, the decode loop.
use super::sequence::{Next, Sequence, SequenceSettings, STREAM_HOLD};
use super::{Error, GeneratorSettings, Output, Prompt, SchemaInPrompt};
use constrain::mask::TokenIndex;
use constrain::matcher::{Constraint, ConstraintSource};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::Limits;
use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token_type::LlamaTokenAttr;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The attention every context runs: flash attention over a Q8_0 KV cache. llama.cpp's CPU
/// flash attention splits a lone query token's attention over the threads (and sums the
/// parts) once the cache holds 512 cells or more, but only for an F16/F32 cache; split, a
/// token's logits depend on the thread count and differ between a one-token decode and a
/// batch, so lookup and draft-model verification (which decode in batches) could not give
/// plain greedy decoding's tokens. With a Q8_0 cache every query row is computed alone, in
/// one pass over the cells, whatever the batch and the threads; the cache also takes half
/// the memory. Measured on the ten examples with 2 threads: with an F16 cache, 3 of 10
/// lookup and 4 of 10 drafted outputs differed from plain greedy ones; without flash
/// attention, 3 and 6 (its matrix products take other kernels for several rows).
pub(crate) fn attention(params: LlamaContextParams) -> LlamaContextParams {
    /// llama.cpp's `LLAMA_FLASH_ATTN_TYPE_ENABLED`.
    const FLASH_ATTENTION_ON: i32 = 1;
    params.with_flash_attention_policy(FLASH_ATTENTION_ON).with_type_k(KvCacheType::Q8_0).with_type_v(KvCacheType::Q8_0)
}

/// llama.cpp may be initialised once per process; every generator shares this backend.
static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

fn backend(verbose: bool) -> Result<&'static LlamaBackend, Error> {
    BACKEND
        .get_or_init(|| {
            let mut b = LlamaBackend::init().map_err(|e| e.to_string())?;
            if !verbose {
                b.void_logs();
            }
            Ok(b)
        })
        .as_ref()
        .map_err(|e| Error::Llama(format!("cannot initialise llama.cpp: {e}")))
}

/// A loaded model plus its token index: compile constraints against it with
/// [`Generator::constraint`], then generate as often as needed. Each generation creates a
/// fresh llama.cpp context (a few milliseconds), so a `Generator` holds no per-run state.
pub struct Generator {
    model: LlamaModel,
    /// The draft model of speculative decoding ([`Generator::load_draft`]).
    draft: Option<LlamaModel>,
    index: Arc<TokenIndex>,
    template: Option<LlamaChatTemplate>,
    settings: GeneratorSettings,
    load_time: Duration,
}

impl Generator {
    /// Loads a GGUF model and reads its vocabulary.
    pub fn load(path: impl AsRef<Path>, settings: GeneratorSettings) -> Result<Generator, Error> {
        let path = path.as_ref();
        let model_err = |message: String| Error::Model { path: path.display().to_string(), message };
        match std::fs::metadata(path) {
            Err(e) => return Err(model_err(format!("cannot open it: {e}"))),
            Ok(m) if m.is_dir() => return Err(model_err("it is a directory, not a GGUF model file".into())),
            Ok(m) if !m.is_file() => return Err(model_err("it is not a regular file".into())),
            Ok(_) => {}
        }
        settings.sampler.validate().map_err(Error::Settings)?;
        let start = Instant::now();
        let backend = backend(settings.verbose)?;
        let params = LlamaModelParams::default().with_n_gpu_layers(settings.n_gpu_layers);
        let model = LlamaModel::load_from_file(backend, path, &params)
            .map_err(|e| model_err(format!("{e} (is it a GGUF model file?)")))?;
        let train = model.n_ctx_train();
        if settings.ctx_size > train {
            return Err(model_err(format!(
                "a context of {} tokens (-c) is above the model's training context of {train} tokens",
                settings.ctx_size
            )));
        }
        let vocab = model_vocabulary(&model).map_err(|e| model_err(e.to_string()))?;
        let index = TokenIndex::with_config(vocab, settings.index.clone());
        let template = model.chat_template(None).ok().or_else(|| LlamaChatTemplate::new("chatml").ok());
        Ok(Generator { model, draft: None, index, template, settings, load_time: start.elapsed() })
    }

    /// Loads a draft model for speculative decoding ([`GeneratorSettings::draft`]): a
    /// smaller model with the same vocabulary (token for token), which proposes tokens the
    /// model verifies in one batch. The model can be its own draft (no faster, but a check).
    pub fn load_draft(&mut self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        let model_err = |message: String| Error::Model { path: path.display().to_string(), message };
        if !path.is_file() {
            return Err(model_err("the draft model is not a file".into()));
        }
        let params = LlamaModelParams::default().with_n_gpu_layers(self.settings.n_gpu_layers);
        let draft = LlamaModel::load_from_file(backend(self.settings.verbose)?, path, &params)
            .map_err(|e| model_err(format!("{e} (is it a GGUF model file?)")))?;
        let vocab = model_vocabulary(&draft).map_err(|e| model_err(e.to_string()))?;
        let ours = self.index.vocab();
        if vocab.len() != ours.len() {
            return Err(model_err(format!(
                "the draft model has {} tokens, the model {}: a draft needs the same vocabulary",
                vocab.len(),
                ours.len()
            )));
        }
        if let Some(i) = (0..ours.len()).find(|&i| {
            let id = constrain::vocab::TokenId(i as u32);
            vocab.token_bytes(id) != ours.token_bytes(id)
        }) {
            return Err(model_err(format!("token {i} differs from the model's: a draft needs the same vocabulary")));
        }
        self.draft = Some(draft);
        Ok(())
    }

    /// The llama.cpp backend (initialised when the first model loaded).
    pub(crate) fn backend(&self) -> Result<&'static LlamaBackend, Error> {
        backend(self.settings.verbose)
    }

    /// The draft model, if one was loaded.
    pub(crate) fn draft_model(&self) -> Option<&LlamaModel> {
        self.draft.as_ref()
    }

    /// Loads the default model (see [`super::default_model_path`]).
    pub fn load_default(settings: GeneratorSettings) -> Result<Generator, Error> {
        let path = super::default_model_path()?;
        Generator::load(path, settings)
    }

    /// The model's token index (vocabulary and mask cache), shared by its constraints.
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.index
    }

    /// The settings in use.
    pub fn settings(&self) -> &GeneratorSettings {
        &self.settings
    }

    /// Changes the settings for later generations.
    pub fn set_settings(&mut self, settings: GeneratorSettings) -> Result<(), Error> {
        settings.sampler.validate().map_err(Error::Settings)?;
        self.settings = settings;
        Ok(())
    }

    /// How long loading the model and its vocabulary took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Compiles a grammar (or a compile result with run-time checks, such as
    /// [`constrain::schema::Compiled`]) against this model's vocabulary.
    pub fn constraint<S: ConstraintSource + ?Sized>(&self, source: &S) -> Result<Constraint, Error> {
        Constraint::new(source, self.index.clone(), &Limits::default()).map_err(Error::Constraint)
    }

    /// Compiles a JSON Schema against this model's vocabulary for generation: compact
    /// whitespace (separators are fixed by the grammar, so they cost no sampling and every
    /// document has one style; format it for display afterwards), otherwise the default
    /// options, with the schema's property order as the order hint generation prefers. For
    /// other options, compile with [`constrain::schema::compile`] and call
    /// [`Generator::constraint`].
    pub fn schema_constraint(&self, schema: &serde_json::Value) -> Result<Constraint, Error> {
        let options = generation_options();
        let compiled = constrain::schema::compile(schema, &options)?;
        Ok(constrain::schema::with_order_hint(self.constraint(&compiled)?, schema, &options))
    }

    /// Generates text matching `constraint`. Fails with [`Error::Incomplete`] if the token
    /// budget or the context runs out first.
    pub fn generate(&self, prompt: impl Into<Prompt>, constraint: &Constraint) -> Result<Output, Error> {
        self.run(&prompt.into(), Some(constraint), |_| {}, false, usize::MAX)
    }

    /// Like [`Generator::generate`], calling `on_text` with each new piece of text as it is
    /// produced (whole UTF-8 characters only). The newest few tokens' text is withheld until
    /// the next ones (16 tokens): what was shown is never taken back, and a dead end within
    /// those tokens is backed out of unseen ([`Output::backtracks`]).
    pub fn generate_with(
        &self,
        prompt: impl Into<Prompt>,
        constraint: &Constraint,
        on_text: impl FnMut(&str),
    ) -> Result<Output, Error> {
        self.run(&prompt.into(), Some(constraint), on_text, false, STREAM_HOLD)
    }

    /// Generates free text until an end-of-generation token or `max_tokens` (which is not an
    /// error here: [`Output::stop`] says which).
    pub fn generate_unconstrained(
        &self,
        prompt: impl Into<Prompt>,
        on_text: impl FnMut(&str),
    ) -> Result<Output, Error> {
        self.run(&prompt.into(), None, on_text, true, 0)
    }

    /// Runs exactly as [`Generator::generate_with`] but returns the partial output instead of
    /// [`Error::Incomplete`] when the budget runs out (for benchmarks).
    pub fn generate_truncated(
        &self,
        prompt: impl Into<Prompt>,
        constraint: Option<&Constraint>,
    ) -> Result<Output, Error> {
        self.run(&prompt.into(), constraint, |_| {}, true, usize::MAX)
    }

    /// Generates a `T`: derives its JSON Schema, constrains the output to it, tells the model
    /// the schema in the system turn, and deserializes the result. The schema is compiled in
    /// strict mode (no properties beyond the type's fields): serde would drop them anyway, and
    /// a small model otherwise keeps inventing more.
    pub fn generate_json<T>(&self, prompt: &str) -> Result<T, Error>
    where
        T: schemars::JsonSchema + serde::de::DeserializeOwned,
    {
        let schema = super::json_schema_for::<T>();
        let options = generation_options().with_strict(true);
        let constraint = self.constraint(&constrain::schema::compile(&schema, &options)?)?;
        let out = self.generate(Prompt::user(prompt).with_schema(&schema), &constraint)?;
        serde_json::from_str(&out.text).map_err(|e| Error::Deserialize(e.to_string()))
    }

    /// The context of one sequence, in tokens: the `ctx_size` setting, or the model's
    /// training context when it is 0.
    pub fn context_size(&self) -> usize {
        let ctx = if self.settings.ctx_size == 0 { self.model.n_ctx_train() } else { self.settings.ctx_size };
        ctx as usize
    }

    /// `prompt` with the default system turn telling the model `schema`
    /// ([`Prompt::with_schema`]), shortened where the whole schema would leave less than
    /// `max_tokens` of the context: first without its annotations
    /// ([`super::schema_without_annotations`]), then without the schema at all. The
    /// constraint enforces the schema either way; a model that sees it only writes better
    /// values. Returns the prompt and how much of the schema it holds.
    pub fn schema_prompt(&self, prompt: Prompt, schema: &serde_json::Value) -> (Prompt, SchemaInPrompt) {
        let room = self.context_size().saturating_sub(self.settings.max_tokens);
        let fits = |p: &Prompt| self.prompt_tokens(p).is_ok_and(|t| t.len() <= room);
        let whole = prompt.clone().with_schema(schema);
        if fits(&whole) {
            return (whole, SchemaInPrompt::Whole);
        }
        let short = prompt.clone().with_schema(&super::schema_without_annotations(schema));
        if fits(&short) {
            return (short, SchemaInPrompt::WithoutAnnotations);
        }
        (prompt.with_system(super::JSON_SYSTEM_PROMPT), SchemaInPrompt::LeftOut)
    }

    /// The prompt tokens: templated (unless raw) and tokenized with special tokens parsed.
    pub(crate) fn prompt_tokens(&self, prompt: &Prompt) -> Result<Vec<LlamaToken>, Error> {
        if !self.settings.chat_template {
            return Ok(self.raw_tokens(&prompt.user, false));
        }
        let mut turns = Vec::new();
        if let Some(system) = &prompt.system {
            turns.push(("system", system.as_str()));
        }
        turns.push(("user", prompt.user.as_str()));
        self.chat_tokens(&turns)
    }

    /// A conversation of `(role, content)` turns in the model's chat template (ChatML if the
    /// model has none), ending with the assistant's turn opened, as tokens.
    pub fn chat_tokens(&self, turns: &[(&str, &str)]) -> Result<Vec<LlamaToken>, Error> {
        let Some(template) = &self.template else {
            let text: Vec<&str> = turns.iter().map(|(_, content)| *content).collect();
            return Ok(self.raw_tokens(&text.join("\n"), true));
        };
        let messages =
            turns.iter().map(|(role, content)| chat_message(role, content)).collect::<Result<Vec<_>, _>>()?;
        let text = self
            .model
            .apply_chat_template(template, &messages, true)
            .map_err(|e| Error::Llama(format!("cannot apply the chat template: {e}")))?;
        Ok(self.raw_tokens(&text, true))
    }

    /// `text` as tokens, with a BOS first if the model wants one; `special`: control-token
    /// text (`<|im_start|>`) becomes the control token.
    pub fn raw_tokens(&self, text: &str, special: bool) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        let mut tokens = vocab.tokenize(text.as_bytes(), false, special);
        let bos = vocab.bos();
        if vocab.should_add_bos() && tokens.first() != Some(&bos) {
            tokens.insert(0, bos);
        }
        tokens
    }

    /// A context for `n_seq` sequences of `ctx_size` tokens each, each in its own KV stream
    /// (a token attends only to its own sequence's cells: 8 sequences decoded 11% faster
    /// than with one unified cache); batches hold up to `ctx_size` tokens.
    pub(crate) fn new_context(&self, n_seq: u32) -> Result<LlamaContext<'_>, Error> {
        let n_seq = n_seq.max(1);
        let ctx_size = u32::try_from(self.context_size()).unwrap_or(u32::MAX);
        self.context_of(n_seq, ctx_size.saturating_mul(n_seq), n_seq == 1)
    }

    /// A context of `cells` KV cells for `n_seq` sequences: one cache they share
    /// (`unified`: copying a sequence only tags cells, as beam search does at every step) or
    /// a stream each. Batches hold up to `ctx_size` tokens.
    pub(crate) fn context_of(&self, n_seq: u32, cells: u32, unified: bool) -> Result<LlamaContext<'_>, Error> {
        let threads =
            self.settings.threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        let threads = i32::try_from(threads.max(1)).unwrap_or(i32::MAX);
        let ctx_size = u32::try_from(self.context_size()).unwrap_or(u32::MAX);
        let mut params = attention(LlamaContextParams::default())
            .with_n_ctx(NonZeroU32::new(cells))
            .with_n_batch(ctx_size.max(1))
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        if n_seq > 1 {
            params = params.with_n_seq_max(n_seq).with_kv_unified(unified);
        }
        self.model
            .new_context(backend(self.settings.verbose)?, params)
            .map_err(|e| Error::Llama(format!("cannot create a context of {cells} tokens: {e}")))
    }

    /// The per-sequence settings of one generation.
    pub(crate) fn sequence_settings(&self, truncate_ok: bool, hold: usize) -> SequenceSettings {
        SequenceSettings {
            sampler: self.settings.sampler.clone(),
            max_tokens: self.settings.max_tokens,
            jump_forward: self.settings.jump_forward,
            close: self.settings.close,
            close_margin: self.settings.close_margin,
            truncate_ok,
            hold,
            logprobs: None,
            trace: self.settings.trace,
        }
    }

    /// Checks that `constraint` was compiled against this model's token index.
    pub(crate) fn check_constraint(&self, constraint: Option<&Constraint>) -> Result<(), Error> {
        match constraint {
            Some(c) if !Arc::ptr_eq(c.index(), &self.index) => {
                Err(Error::Constraint(constrain::matcher::Error::Internal(
                    "the constraint was compiled for another vocabulary; use Generator::constraint".into(),
                )))
            }
            _ => Ok(()),
        }
    }

    /// The loaded model.
    pub(crate) fn model(&self) -> &LlamaModel {
        &self.model
    }

    /// The decode loop of one sequence (see [`Sequence`]), or beam search when the settings
    /// ask for beams (the best beam, its text given to `on_text` at the end). `truncate_ok`:
    /// running out of tokens returns the partial output; `hold`: tokens of text withheld
    /// from `on_text`.
    fn run(
        &self,
        prompt: &Prompt,
        constraint: Option<&Constraint>,
        mut on_text: impl FnMut(&str),
        truncate_ok: bool,
        hold: usize,
    ) -> Result<Output, Error> {
        if self.settings.beams > 0 {
            let best = self.beams(prompt, constraint, truncate_ok)?.into_iter().next();
            let best = best.ok_or(Error::DeadEnd { step: 0, backtracks: 0 })?.output;
            on_text(&best.text);
            return Ok(best);
        }
        self.check_constraint(constraint)?;
        let prompt_tokens = self.prompt_tokens(prompt)?;
        let mut ctx = self.new_context(1)?;
        let n_ctx = ctx.n_ctx() as usize;
        let vocab = self.index.vocab();
        let mut seq =
            Sequence::new(constraint, self.sequence_settings(truncate_ok, hold), vocab, &prompt_tokens, n_ctx)?;

        let mut drafting = match self.settings.draft {
            0 => Drafting::Lookup(self.settings.lookup),
            _ => Drafting::Model(Box::new(crate::speculative::Drafter::new(self, seq.sampler_settings(), vocab)?)),
        };
        let started = Instant::now();
        let n_batch = (ctx.n_batch() as usize).max(1);
        let mut batch = LlamaBatch::new(n_batch, 1);
        let mut logits_at = eval_prompt(&mut ctx, &mut batch, &prompt_tokens, 0)?;
        seq.prompt_done(started.elapsed());
        let on_text: &mut dyn FnMut(&str) = &mut on_text;
        // The drafts of the step being evaluated (speculative decoding), and a step decided
        // while checking them that still needs its evaluation.
        let mut drafts: Vec<TokenId> = Vec::new();
        let mut pending: Option<Next> = None;
        let stop = 'steps: loop {
            let next = match pending.take() {
                Some(next) => next,
                None => match seq.prepare(&self.model, vocab, n_batch, on_text)? {
                    Some(next) => next,
                    None => seq.sample(vocab, ctx.get_logits_ith(logits_at), on_text)?,
                },
            };
            let tokens = match next {
                Next::Stop(reason) => break reason,
                Next::Feed(tokens) => tokens,
                Next::Rewind(tokens) => {
                    clear_cells(&mut ctx, 0, seq.n_past())?;
                    tokens
                }
            };
            let room = seq.room(tokens.len()).min(n_batch.saturating_sub(tokens.len()));
            drafting.propose(vocab, &mut seq, room, &mut drafts)?;
            batch.clear();
            let n_past = seq.n_past();
            let last = tokens.len() - 1;
            for (i, &t) in tokens.iter().chain(&drafts).enumerate() {
                batch
                    .add(LlamaToken(t.0 as i32), (n_past + i) as i32, &[0], i >= last)
                    .map_err(|e| Error::Llama(e.to_string()))?;
            }
            ctx.decode(&mut batch).map_err(|e| Error::Llama(format!("decode failed: {e}")))?;
            seq.fed(tokens.len());
            seq.drafted(drafts.len());
            // Logits at batch index `last + j` are those draft `j` is checked against.
            logits_at = last as i32;
            for (j, &draft) in drafts.iter().enumerate() {
                // The step plain decoding would take here, from the same logits.
                let next = match seq.prepare(&self.model, vocab, n_batch, on_text)? {
                    Some(next) => next,
                    None => drafting.check(&mut seq, vocab, ctx.get_logits_ith(logits_at), j, draft, on_text)?,
                };
                match next {
                    Next::Feed(t) if t == [draft] => {
                        seq.draft_kept();
                        logits_at += 1;
                    }
                    next => {
                        // The cells from here on hold drafts that were not kept.
                        clear_cells(&mut ctx, 0, seq.n_past())?;
                        pending = Some(next);
                        continue 'steps;
                    }
                }
            }
        };
        Ok(seq.finish(stop, on_text))
    }
}

/// Where a step's draft tokens come from, and how each is checked against the model.
enum Drafting<'m> {
    /// N-gram lookup in the sequence so far, up to this many (0: none). A draft is kept
    /// when the sampler, drawing as plain decoding does, draws it: the same draws.
    Lookup(usize),
    /// A draft model ([`crate::speculative`]), kept by speculative sampling's rule.
    Model(Box<crate::speculative::Drafter<'m>>),
}

impl Drafting<'_> {
    /// Up to `room` drafts after the sequence so far, into `out`.
    fn propose(
        &mut self,
        vocab: &Vocabulary,
        seq: &mut Sequence,
        room: usize,
        out: &mut Vec<TokenId>,
    ) -> Result<(), Error> {
        match self {
            Drafting::Lookup(n) => {
                crate::lookup::propose(seq.tokens(), (*n).min(room), out);
                // Drafts past the first the grammar refuses could never be kept.
                let keep = seq.grammar_prefix(out);
                out.truncate(keep);
                Ok(())
            }
            Drafting::Model(d) => {
                let matcher = seq.fork_matcher();
                d.propose(vocab, seq.tokens(), matcher, room, out)
            }
        }
    }

    /// The sequence's step at draft `j`'s position (`draft`), from that position's logits.
    fn check(
        &self,
        seq: &mut Sequence,
        vocab: &Vocabulary,
        logits: &[f32],
        j: usize,
        draft: TokenId,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Next, Error> {
        match self {
            Drafting::Lookup(_) => seq.sample(vocab, logits, on_text),
            Drafting::Model(d) => seq.sample_against_draft(vocab, logits, draft, d.q(j), on_text),
        }
    }
}

/// Evaluates `tokens` as the start of sequence `seq_id` (positions `0..`), in batches of at
/// most the context's `n_batch`, with logits for the last one only; returns that token's
/// index in the last batch (for `get_logits_ith`).
pub(crate) fn eval_prompt(
    ctx: &mut LlamaContext<'_>,
    batch: &mut LlamaBatch,
    tokens: &[LlamaToken],
    seq_id: i32,
) -> Result<i32, Error> {
    let n_batch = (ctx.n_batch() as usize).max(1);
    let last = tokens.len().saturating_sub(1);
    for (c, chunk) in tokens.chunks(n_batch).enumerate() {
        batch.clear();
        for (j, &t) in chunk.iter().enumerate() {
            let i = c * n_batch + j;
            batch.add(t, i as i32, &[seq_id], i == last).map_err(|e| Error::Llama(e.to_string()))?;
        }
        ctx.decode(batch).map_err(|e| Error::Llama(format!("prompt evaluation failed: {e}")))?;
    }
    Ok(batch.n_tokens() - 1)
}

/// Removes the KV cells of sequence `seq` from position `from` on (a backtrack).
pub(crate) fn clear_cells(ctx: &mut LlamaContext<'_>, seq: u32, from: usize) -> Result<(), Error> {
    let from = u32::try_from(from).map_err(|_| Error::Llama("position out of range".into()))?;
    match ctx.clear_kv_cache_seq(Some(seq), Some(from), None) {
        Ok(true) => Ok(()),
        _ => Err(Error::Llama(format!("cannot remove the KV cells of sequence {seq} from position {from}"))),
    }
}

fn chat_message(role: &str, content: &str) -> Result<LlamaChatMessage, Error> {
    LlamaChatMessage::new(role.into(), content.into())
        .map_err(|e| Error::Llama(format!("the {role} message cannot be templated: {e}")))
}

/// The model's vocabulary as bytes: control, unknown and unused tokens are special, every
/// end-of-generation id is EOS, and the mask covers all of the model's logits.
fn model_vocabulary(model: &LlamaModel) -> Result<Vocabulary, constrain::vocab::Error> {
    let vocab = model.vocab();
    let n = usize::try_from(vocab.n_tokens()).unwrap_or(0);
    let mut tokens = Vec::with_capacity(n);
    let mut special = Vec::new();
    let mut eos = Vec::new();
    for i in 0..n {
        let t = LlamaToken(i as i32);
        let id = TokenId(i as u32);
        let attrs = vocab.attr(t);
        if attrs.intersects(LlamaTokenAttr::Control | LlamaTokenAttr::Unknown | LlamaTokenAttr::Unused) {
            special.push(id);
        }
        if vocab.is_eog(t) {
            eos.push(id);
        }
        tokens.push(vocab.token_to_piece(t, true, None));
    }
    Vocabulary::new(tokens, &special, &eos)?.with_mask_len(n)
}

/// The schema options generation uses: compact whitespace, otherwise the defaults.
fn generation_options() -> constrain::schema::Options {
    constrain::schema::Options::default().with_whitespace(constrain::schema::Whitespace::Compact)
}

//! The llama.cpp side of the engine: model loading, vocabulary extraction, the decode loop.
use super::{Error, GeneratorSettings, Output, Prompt, StopReason, Timings};
use constrain::closing::{Closer, Verdict};
use constrain::mask::TokenIndex;
use constrain::matcher::{Constraint, Matcher};
use constrain::sampling::Sampler;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::Limits;
use llama_cpp_2::context::params::LlamaContextParams;
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
        let index = TokenIndex::new(vocab);
        let template = model.chat_template(None).ok().or_else(|| LlamaChatTemplate::new("chatml").ok());
        Ok(Generator { model, index, template, settings, load_time: start.elapsed() })
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

    /// Compiles a grammar against this model's vocabulary.
    pub fn constraint(&self, grammar: &constrain::grammar::Grammar) -> Result<Constraint, Error> {
        Constraint::new(grammar, self.index.clone(), &Limits::default()).map_err(Error::Constraint)
    }

    /// Compiles a JSON Schema (default options) against this model's vocabulary.
    pub fn schema_constraint(&self, schema: &serde_json::Value) -> Result<Constraint, Error> {
        let grammar = constrain::schema::compile(schema, &constrain::schema::Options::default())?;
        self.constraint(&grammar)
    }

    /// Generates text matching `constraint`. Fails with [`Error::Incomplete`] if the token
    /// budget or the context runs out first.
    pub fn generate(&self, prompt: impl Into<Prompt>, constraint: &Constraint) -> Result<Output, Error> {
        self.generate_with(prompt, constraint, |_| {})
    }

    /// Like [`Generator::generate`], calling `on_text` with each new piece of text as it is
    /// produced (whole UTF-8 characters only).
    pub fn generate_with(
        &self,
        prompt: impl Into<Prompt>,
        constraint: &Constraint,
        on_text: impl FnMut(&str),
    ) -> Result<Output, Error> {
        self.run(&prompt.into(), Some(constraint), on_text, false)
    }

    /// Generates free text until an end-of-generation token or `max_tokens` (which is not an
    /// error here: [`Output::stop`] says which).
    pub fn generate_unconstrained(
        &self,
        prompt: impl Into<Prompt>,
        on_text: impl FnMut(&str),
    ) -> Result<Output, Error> {
        self.run(&prompt.into(), None, on_text, true)
    }

    /// Runs exactly as [`Generator::generate_with`] but returns the partial output instead of
    /// [`Error::Incomplete`] when the budget runs out (for benchmarks).
    pub fn generate_truncated(
        &self,
        prompt: impl Into<Prompt>,
        constraint: Option<&Constraint>,
    ) -> Result<Output, Error> {
        self.run(&prompt.into(), constraint, |_| {}, true)
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
        let options = constrain::schema::Options::default().with_strict(true);
        let constraint = self.constraint(&constrain::schema::compile(&schema, &options)?)?;
        let out = self.generate(Prompt::user(prompt).with_schema(&schema), &constraint)?;
        serde_json::from_str(&out.text).map_err(|e| Error::Deserialize(e.to_string()))
    }

    /// The prompt tokens: templated (unless raw) and tokenized with special tokens parsed.
    fn prompt_tokens(&self, prompt: &Prompt) -> Result<Vec<LlamaToken>, Error> {
        let vocab = self.model.vocab();
        let text = match (&self.template, self.settings.chat_template) {
            (Some(template), true) => {
                let mut messages = Vec::new();
                if let Some(system) = &prompt.system {
                    messages.push(chat_message("system", system)?);
                }
                messages.push(chat_message("user", &prompt.user)?);
                self.model
                    .apply_chat_template(template, &messages, true)
                    .map_err(|e| Error::Llama(format!("cannot apply the chat template: {e}")))?
            }
            _ => prompt.user.clone(),
        };
        let mut tokens = vocab.tokenize(text.as_bytes(), false, self.settings.chat_template);
        let bos = vocab.bos();
        if vocab.should_add_bos() && tokens.first() != Some(&bos) {
            tokens.insert(0, bos);
        }
        Ok(tokens)
    }

    fn new_context(&self) -> Result<LlamaContext<'_>, Error> {
        let threads =
            self.settings.threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        let threads = i32::try_from(threads.max(1)).unwrap_or(i32::MAX);
        let ctx_size = if self.settings.ctx_size == 0 { self.model.n_ctx_train() } else { self.settings.ctx_size };
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(ctx_size))
            .with_n_batch(ctx_size.max(1))
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        self.model
            .new_context(backend(self.settings.verbose)?, params)
            .map_err(|e| Error::Llama(format!("cannot create a context of {ctx_size} tokens: {e}")))
    }

    /// The decode loop. `truncate_ok`: running out of tokens returns the partial output.
    fn run(
        &self,
        prompt: &Prompt,
        constraint: Option<&Constraint>,
        mut on_text: impl FnMut(&str),
        truncate_ok: bool,
    ) -> Result<Output, Error> {
        if let Some(c) = constraint {
            if !Arc::ptr_eq(c.index(), &self.index) {
                return Err(Error::Constraint(constrain::matcher::Error::Internal(
                    "the constraint was compiled for another vocabulary; use Generator::constraint".into(),
                )));
            }
        }
        let mut sampler = Sampler::new(self.settings.sampler.clone()).map_err(Error::Settings)?;
        let prompt_tokens = self.prompt_tokens(prompt)?;
        let mut ctx = self.new_context()?;
        let n_ctx = ctx.n_ctx() as usize;
        if prompt_tokens.is_empty() {
            return Err(Error::Llama("the prompt is empty after tokenization".into()));
        }
        if prompt_tokens.len() >= n_ctx {
            return Err(Error::PromptTooLong { tokens: prompt_tokens.len(), ctx: n_ctx });
        }

        // Prompt: in batches of at most n_batch (one batch for any prompt that fits the
        // default settings), logits for the last position only.
        let started = Instant::now();
        let n_batch = (ctx.n_batch() as usize).max(1);
        let mut batch = LlamaBatch::new(n_batch, 1);
        let last = prompt_tokens.len() - 1;
        for (c, chunk) in prompt_tokens.chunks(n_batch).enumerate() {
            batch.clear();
            for (j, &t) in chunk.iter().enumerate() {
                let i = c * n_batch + j;
                batch.add(t, i as i32, &[0], i == last).map_err(|e| Error::Llama(e.to_string()))?;
                sampler.accept(TokenId(t.0 as u32));
            }
            ctx.decode(&mut batch).map_err(|e| Error::Llama(format!("prompt evaluation failed: {e}")))?;
        }
        let mut timings = Timings { prompt: started.elapsed(), ..Timings::default() };
        let generation_start = Instant::now();

        // Closing mode (see `closing`): a budget below the start's distance is refused
        // before anything is generated.
        let c = Instant::now();
        let mut closer = match constraint {
            Some(c) => Closer::new(c, self.settings.close, self.settings.max_tokens, n_ctx - prompt_tokens.len())?,
            None => Closer::disabled(),
        };
        timings.closing += c.elapsed();

        let vocab = self.index.vocab();
        let mut matcher: Option<Matcher> = constraint.map(|c| c.matcher());
        let mut mask = vec![0u32; vocab.mask_words()];
        let mut soft: Vec<u32> = Vec::new();
        let mut logits: Vec<f32> = Vec::with_capacity(vocab.mask_len());
        let mut text = TextSink::default();
        let mut n_past = prompt_tokens.len();
        let mut logits_at = batch.n_tokens() - 1;
        let (mut generated, mut forced, mut steps) = (0usize, 0usize, 0usize);
        let stop;

        loop {
            if matcher.as_ref().is_some_and(|m| m.is_finished()) {
                stop = if closer.is_closing() { StopReason::Closed } else { StopReason::Finished };
                break;
            }
            let remaining = (self.settings.max_tokens.saturating_sub(generated)).min(n_ctx.saturating_sub(n_past));
            if matcher.as_ref().is_some_and(|m| closer.should_stop(m, remaining)) {
                // The budget shaped the end: stop at the first complete output.
                stop = StopReason::Closed;
                break;
            }
            if remaining == 0 {
                if truncate_ok {
                    stop = StopReason::MaxTokens;
                    break;
                }
                let reason = if n_past >= n_ctx {
                    "the context is full (raise --ctx-size)"
                } else {
                    "max tokens reached (raise --max-tokens)"
                };
                return Err(Error::Incomplete { reason, tokens: generated, partial: text.lossy() });
            }

            // Jump-forward: feed the bytes the grammar dictates, as the tokenizer splits them.
            if let (Some(m), true) = (matcher.as_mut(), self.settings.jump_forward) {
                let budget = (self.settings.max_tokens - generated).min(n_ctx - n_past).min(n_batch);
                let tokens = self.forced_tokens(m, budget)?;
                if !tokens.is_empty() {
                    batch.clear();
                    let last = tokens.len() - 1;
                    for (i, &t) in tokens.iter().enumerate() {
                        batch
                            .add(LlamaToken(t.0 as i32), (n_past + i) as i32, &[0], i == last)
                            .map_err(|e| Error::Llama(e.to_string()))?;
                        sampler.accept(t);
                        text.push(vocab.token_bytes(t), &mut on_text);
                    }
                    ctx.decode(&mut batch).map_err(|e| Error::Llama(format!("decode failed: {e}")))?;
                    n_past += tokens.len();
                    generated += tokens.len();
                    forced += tokens.len();
                    steps += 1;
                    logits_at = batch.n_tokens() - 1;
                    continue;
                }
            }

            // One sampled step.
            logits.clear();
            logits.extend_from_slice(ctx.get_logits_ith(logits_at));
            logits.resize(vocab.mask_len(), f32::NEG_INFINITY);
            if let Some(m) = matcher.as_mut() {
                let t = Instant::now();
                m.fill_mask(&mut mask).map_err(Error::Matcher)?;
                let c = Instant::now();
                closer.narrow(m, &mut mask, remaining).map_err(Error::Matcher)?;
                if let Some(bonus) =
                    closer.soft(m, &mask, &mut soft, remaining, self.settings.close_margin).map_err(Error::Matcher)?
                {
                    add_bonus(&mut logits, &soft, bonus);
                }
                timings.closing += c.elapsed();
                apply_mask(&mut logits, &mask);
                timings.mask += t.elapsed();
            }
            let mut token = sample(&mut sampler, &mut logits, generated, matcher.as_ref())?;
            if let Some(m) = matcher.as_mut() {
                m.accept_token(token).map_err(Error::Matcher)?;
                let t = Instant::now();
                let verdict = closer.check(m, token, &mut mask, remaining).map_err(Error::Matcher)?;
                timings.mask += t.elapsed();
                timings.closing += t.elapsed();
                if verdict == Verdict::Resample {
                    logits.clear();
                    logits.extend_from_slice(ctx.get_logits_ith(logits_at));
                    logits.resize(vocab.mask_len(), f32::NEG_INFINITY);
                    apply_mask(&mut logits, &mask);
                    token = sample(&mut sampler, &mut logits, generated, Some(&*m))?;
                    m.accept_token(token).map_err(Error::Matcher)?;
                }
            }
            let is_eog = match &matcher {
                Some(_) => vocab.is_eos(token),
                None => self.model.vocab().is_eog(LlamaToken(token.0 as i32)),
            };
            if is_eog {
                stop = if closer.is_closing() { StopReason::Closed } else { StopReason::Eos };
                break;
            }
            sampler.accept(token);
            text.push(vocab.token_bytes(token), &mut on_text);
            generated += 1;
            if matcher.as_ref().is_some_and(|m| m.is_finished()) {
                stop = if closer.is_closing() { StopReason::Closed } else { StopReason::Finished };
                break;
            }
            batch.clear();
            batch
                .add(LlamaToken(token.0 as i32), n_past as i32, &[0], true)
                .map_err(|e| Error::Llama(e.to_string()))?;
            ctx.decode(&mut batch).map_err(|e| Error::Llama(format!("decode failed: {e}")))?;
            n_past += 1;
            steps += 1;
            logits_at = 0;
        }
        text.flush(&mut on_text);
        timings.generation = generation_start.elapsed();
        let text = text.into_string();
        let value = serde_json::from_str(&text).ok();
        Ok(Output {
            text,
            value,
            prompt_tokens: prompt_tokens.len(),
            generated_tokens: generated,
            forced_tokens: forced,
            model_steps: steps,
            stop,
            timings,
        })
    }

    /// The tokens to feed without sampling: the grammar's forced bytes tokenized by the model,
    /// minus the last token (it might merge with the next free choice), keeping only a prefix
    /// whose bytes spell the forced bytes and that the matcher accepts. Accepts them into
    /// `matcher`.
    fn forced_tokens(&self, matcher: &mut Matcher, budget: usize) -> Result<Vec<TokenId>, Error> {
        let bytes = matcher.forced_bytes();
        if bytes.is_empty() || budget == 0 {
            return Ok(Vec::new());
        }
        let vocab = self.index.vocab();
        let mut tokens = self.model.vocab().tokenize(&bytes, false, false);
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

/// Samples one token; an empty candidate set is a dead end at step `step`.
fn sample(sampler: &mut Sampler, logits: &mut [f32], step: usize, matcher: Option<&Matcher>) -> Result<TokenId, Error> {
    match sampler.sample(logits) {
        Ok(t) => Ok(t),
        // A dead end that a parse limit caused names the limit, not the grammar.
        Err(constrain::sampling::Error::NoCandidates) => match matcher.and_then(|m| m.limit_error()) {
            Some(e) => Err(Error::Matcher(e)),
            None => Err(Error::DeadEnd { step }),
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
fn apply_mask(logits: &mut [f32], mask: &[u32]) {
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

/// Collects output bytes and hands out whole UTF-8 characters as they complete.
#[derive(Default)]
struct TextSink {
    bytes: Vec<u8>,
    emitted: usize,
}

impl TextSink {
    fn push(&mut self, piece: &[u8], on_text: &mut impl FnMut(&str)) {
        self.bytes.extend_from_slice(piece);
        let pending = &self.bytes[self.emitted..];
        let valid = match std::str::from_utf8(pending) {
            Ok(s) => s.len(),
            // An incomplete character at the end waits for the next piece; invalid bytes in
            // the middle are emitted lossily.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => {
                on_text(&String::from_utf8_lossy(pending));
                self.emitted = self.bytes.len();
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

    fn flush(&mut self, on_text: &mut impl FnMut(&str)) {
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
        let mut sink = TextSink::default();
        let e = "é".as_bytes();
        sink.push(b"a", &mut |s: &str| out.push(s.to_string()));
        sink.push(&e[..1], &mut |s: &str| out.push(s.to_string()));
        sink.push(&e[1..], &mut |s: &str| out.push(s.to_string()));
        sink.flush(&mut |s: &str| out.push(s.to_string()));
        assert_eq!(out, vec!["a", "é"]);
        assert_eq!(sink.into_string(), "aé");
    }
}

//! The default command: constrained generation.
//!
//! Input: the flags below and a prompt (`-p`, else stdin). Output: the generated text on
//! stdout — for a JSON Schema, exactly one JSON document — and diagnostics on stderr.
use super::constraint_args::{ConstraintArgs, WhitespaceArg};
use super::format::OutputFormat;
#[cfg(feature = "llama")]
use super::out::outln;
use super::{Failure, EXIT_USAGE};
use constrain::sampling::{SamplerKind, SamplerSettings};
use constrain::TokenId;
#[cfg(feature = "llama")]
use constrain_llama::GeneratorSettings;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

/// Which model to load and how to run it.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// GGUF model file [default: $CONSTRAIN_MODEL, else the cached SmolLM2-135M-Instruct,
    /// downloaded on first use].
    #[arg(short = 'm', long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Context size in tokens (prompt + output) [default: the model's training context].
    #[arg(short = 'c', long = "ctx-size", value_name = "N")]
    pub ctx_size: Option<u32>,
    /// CPU threads [default: all available cores].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Layers to offload to the GPU (`-ngl` works too; needs a `cuda` build).
    #[arg(long = "n-gpu-layers", visible_alias = "ngl", default_value_t = 0)]
    pub n_gpu_layers: u32,
    /// Show llama.cpp's logs and generation statistics on stderr.
    #[arg(long)]
    pub verbose: bool,
}

/// The sampling chain (llama.cpp's flags and defaults).
#[derive(clap::Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Temperature; 0 = greedy.
    #[arg(long = "temp", default_value_t = 0.8)]
    pub temperature: f32,
    /// Top-k; 0 = off.
    #[arg(long = "top-k", default_value_t = 40)]
    pub top_k: usize,
    /// Top-p (nucleus); 1.0 = off.
    #[arg(long = "top-p", default_value_t = 0.95)]
    pub top_p: f32,
    /// Min-p; 0 = off.
    #[arg(long = "min-p", default_value_t = 0.05)]
    pub min_p: f32,
    /// CTRL repetition penalty; 1.0 = off.
    #[arg(long = "repeat-penalty", default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Tokens the penalties look back over; 0 = off.
    #[arg(long = "repeat-last-n", default_value_t = 64)]
    pub repeat_last_n: usize,
    /// OpenAI frequency penalty.
    #[arg(long = "frequency-penalty", default_value_t = 0.0, allow_negative_numbers = true)]
    pub frequency_penalty: f32,
    /// OpenAI presence penalty.
    #[arg(long = "presence-penalty", default_value_t = 0.0, allow_negative_numbers = true)]
    pub presence_penalty: f32,
    /// Locally typical sampling: keep the tokens whose surprise is closest to the entropy,
    /// up to this probability; 1.0 = off.
    #[arg(long = "typical", default_value_t = 1.0, value_name = "P")]
    pub typical_p: f32,
    /// Mirostat: 0 = off, 1 = v1, 2 = v2. Replaces top-k, typical, top-p and min-p
    /// (temperature, then mirostat's own truncation and draw).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub mirostat: u8,
    /// Mirostat learning rate (eta).
    #[arg(long = "mirostat-lr", default_value_t = 0.1, value_name = "ETA")]
    pub mirostat_eta: f32,
    /// Mirostat target entropy (tau, in bits).
    #[arg(long = "mirostat-ent", default_value_t = 5.0, value_name = "TAU")]
    pub mirostat_tau: f32,
    /// The stages' order, `;`-separated, as llama.cpp names them (penalties, top_k, typ_p,
    /// top_p, min_p, temperature); a stage left out does not run.
    #[arg(long, value_name = "LIST", value_parser = parse_samplers,
          default_value = "penalties;temperature;top_k;typ_p;top_p;min_p")]
    pub samplers: SamplerOrder,
    /// Add BIAS to token TOKEN_ID's logit, e.g. `15043+1` or `15043-0.5`; `15043-inf` bans
    /// the token. Repeatable.
    #[arg(long = "logit-bias", value_name = "TOKEN_ID(+/-)BIAS", value_parser = parse_logit_bias)]
    pub logit_bias: Vec<(TokenId, f32)>,
    /// Random seed [default: from the clock].
    #[arg(long)]
    pub seed: Option<u64>,
}

/// A parsed `--samplers` list.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerOrder(pub Vec<SamplerKind>);

/// Parses `--samplers`: llama.cpp's `;`-separated stage names.
fn parse_samplers(s: &str) -> Result<SamplerOrder, String> {
    SamplerKind::parse_order(s).map(SamplerOrder).map_err(|e| e.to_string())
}

/// Parses one `--logit-bias` in llama.cpp's syntax: a token id, `+` or `-`, and the bias
/// (`inf` allowed after `-`: a ban).
fn parse_logit_bias(s: &str) -> Result<(TokenId, f32), String> {
    let usage = || format!("`{s}` is not TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, 15043-inf)");
    let at = s.find(['+', '-']).ok_or_else(usage)?;
    let (id, rest) = s.split_at(at);
    let id: u32 = id.trim().parse().map_err(|_| usage())?;
    let magnitude = rest[1..].trim();
    if magnitude.starts_with(['+', '-']) {
        return Err(usage());
    }
    let magnitude: f32 = magnitude.parse().map_err(|_| usage())?;
    if magnitude.is_nan() || (magnitude.is_infinite() && rest.starts_with('+')) {
        return Err(format!("`{s}`: a bias must be finite, or -inf to ban the token"));
    }
    Ok((TokenId(id), if rest.starts_with('-') { -magnitude } else { magnitude }))
}

impl SamplingArgs {
    /// The sampler settings these flags describe.
    pub fn settings(&self) -> SamplerSettings {
        SamplerSettings {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            frequency_penalty: self.frequency_penalty,
            presence_penalty: self.presence_penalty,
            logit_bias: self.logit_bias.clone(),
            typical_p: self.typical_p,
            mirostat: self.mirostat,
            mirostat_tau: self.mirostat_tau,
            mirostat_eta: self.mirostat_eta,
            samplers: self.samplers.0.clone(),
            seed: self.seed,
        }
    }
}

/// Flags of the default (generation) command.
#[derive(clap::Args, Debug, Clone)]
pub struct GenerateArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt [default: read from stdin].
    #[arg(short = 'p', long)]
    pub prompt: Option<String>,
    /// System turn [default: one telling the model the JSON Schema, if any].
    #[arg(long)]
    pub system: Option<String>,
    /// Maximum tokens to generate. A constrained output is closed (steered to its nearest
    /// valid end) when the budget runs low; a budget below the shortest valid output is
    /// refused up front.
    #[arg(short = 'n', long = "max-tokens", default_value_t = 512)]
    pub max_tokens: usize,
    /// Do not close the output when the budget runs low: running out is an error (exit
    /// code 5) and no document is printed.
    #[arg(long = "no-close")]
    pub no_close: bool,
    /// Start winding the output down this many tokens before the hard limit (a logit bonus
    /// for tokens that bring it closer to a valid end); 0 = off.
    #[arg(long = "close-margin", default_value_t = 0, value_name = "N")]
    pub close_margin: usize,
    /// Print the text as it is generated (the bytes as generated; the document is the
    /// same value as the formatted one).
    #[arg(long)]
    pub stream: bool,
    /// How to print a JSON Schema's document [default: pretty on a terminal, else compact].
    /// Grammar and regex outputs are printed raw unless this is given (and they are JSON).
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,
    /// Do not wrap the prompt in the model's chat template.
    #[arg(long)]
    pub raw: bool,
    /// Sample every token, even where the grammar dictates the next bytes.
    #[arg(long = "no-jump-forward")]
    pub no_jump_forward: bool,
    /// Speculative decoding without a draft model: guess up to N tokens per step by n-gram
    /// lookup in the prompt and the output, evaluate them with the sampled token in one
    /// batch, and keep them as far as sampling agrees (the same draws); 0 = off.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub lookup: usize,
    /// Speculative decoding with a draft model: a GGUF with the same vocabulary (the model
    /// itself works, as a check) proposes up to --draft tokens per step inside the grammar;
    /// the model verifies them in one batch and keeps them by the rule that leaves plain
    /// decoding's distribution unchanged (at --temp 0, the same tokens).
    #[arg(long = "model-draft", visible_alias = "md", value_name = "FILE", conflicts_with_all = ["lookup", "beams"])]
    pub model_draft: Option<PathBuf>,
    /// Tokens the draft model proposes per step (with --model-draft).
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub draft: u16,
    /// Beam search with N beams: keep the N likeliest outputs at each step (each with its
    /// own parse state and KV cells) and print the best finished one by log-probability per
    /// token. Deterministic: temperature and the truncating samplers do not apply; 1 beam is
    /// greedy decoding; 0 = off (sample).
    #[arg(long, default_value_t = 0, value_name = "N", conflicts_with = "lookup",
          value_parser = clap::value_parser!(u16).range(0..=MAX_BEAMS))]
    pub beams: u16,
    /// Beam search ranks finished beams by log-probability / length ^ this: 1 = per token
    /// (the default), 0 = the total, which favours short outputs.
    #[arg(long = "beam-length-penalty", default_value_t = 1.0, value_name = "X", allow_negative_numbers = true)]
    pub beam_length_penalty: f32,
    /// Write what the mask did at each step to FILE, one JSON object per line: per output
    /// token the tokens allowed, the probability mass removed, the entropies before and
    /// after and the token's unmasked rank (of the model's raw distribution, temperature 1);
    /// plus closing and backtrack events. `constrain plot FILE` draws it.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Sampling.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// The constraint (none = unconstrained).
    #[command(flatten)]
    pub constraint: ConstraintArgs,
}

/// The most `--beams` (the library's `constrain_llama::beam::MAX_BEAMS`).
const MAX_BEAMS: i64 = 32;
#[cfg(feature = "llama")]
const _: () = assert!(MAX_BEAMS as usize == constrain_llama::beam::MAX_BEAMS);

impl GenerateArgs {
    /// The constraint flags as generation reads them: compact whitespace unless
    /// `--whitespace` says otherwise, and every note listed with `--verbose`.
    pub fn constraint_args(&self) -> ConstraintArgs {
        ConstraintArgs {
            notes: self.constraint.notes || self.model.verbose,
            default_whitespace: WhitespaceArg::Compact,
            ..self.constraint.clone()
        }
    }

    /// The generated `text` as `--format` prints it: a JSON Schema's document formatted
    /// (pretty on a terminal, else compact), other outputs raw unless `--format` is given
    /// and they are JSON.
    pub fn printed(&self, text: &str, from_schema: bool) -> String {
        let format = match (self.format, from_schema) {
            (Some(f), _) => f,
            (None, true) if std::io::stdout().is_terminal() => OutputFormat::Pretty,
            (None, true) => OutputFormat::Compact,
            (None, false) => OutputFormat::Raw,
        };
        if format == OutputFormat::Raw || serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
            return text.to_string();
        }
        super::format::reformat(text, format)
    }

    /// The sampler settings.
    pub fn sampler_settings(&self) -> SamplerSettings {
        self.sampling.settings()
    }

    /// The generator settings.
    #[cfg(feature = "llama")]
    pub fn generator_settings(&self) -> GeneratorSettings {
        GeneratorSettings {
            sampler: self.sampler_settings(),
            max_tokens: self.max_tokens,
            ctx_size: self.model.ctx_size.unwrap_or(0),
            threads: self.model.threads,
            n_gpu_layers: self.model.n_gpu_layers,
            chat_template: !self.raw,
            jump_forward: !self.no_jump_forward,
            verbose: self.model.verbose,
            close: !self.no_close,
            close_margin: self.close_margin,
            lookup: self.lookup,
            trace: self.trace.is_some(),
            beams: usize::from(self.beams),
            beam_length_penalty: self.beam_length_penalty,
            draft: if self.model_draft.is_some() { usize::from(self.draft) } else { 0 },
            index: self.constraint.limits.memory.index_config(),
        }
    }
}

/// The prompt from `-p`, else all of stdin (refusing an interactive terminal), at most
/// `max_bytes` long; an empty prompt is refused.
pub fn read_prompt(prompt: &Option<String>, max_bytes: usize) -> Result<String, Failure> {
    let text = read_prompt_text(prompt, max_bytes)?;
    if text.trim().is_empty() {
        return Err(Failure::new(
            EXIT_USAGE,
            anyhow::anyhow!("the prompt is empty: pass -p/--prompt or pipe it on stdin"),
        ));
    }
    if text.len() > max_bytes {
        return Err(Failure::new(
            EXIT_USAGE,
            anyhow::anyhow!("the prompt is over {max_bytes} bytes ({})", constrain::limits::LimitExceeded::InputBytes),
        ));
    }
    Ok(text)
}

fn read_prompt_text(prompt: &Option<String>, max_bytes: usize) -> Result<String, Failure> {
    if let Some(p) = prompt {
        return Ok(p.clone());
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(Failure::new(EXIT_USAGE, anyhow::anyhow!("no prompt: pass -p/--prompt or pipe it on stdin")));
    }
    let mut text = String::new();
    stdin
        .take(max_bytes as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| Failure::new(super::EXIT_OTHER, anyhow::anyhow!("cannot read the prompt from stdin: {e}")))?;
    Ok(text)
}

/// Runs the generation command.
pub fn run(args: &GenerateArgs) -> Result<ExitCode, Failure> {
    // Check everything cheap before loading the model.
    let constraint_args = args.constraint_args();
    let grammar = constraint_args.grammar().map_err(Failure::constraint)?;
    let schema = args.constraint.schema_value().map_err(Failure::constraint)?;
    args.sampler_settings().validate().map_err(|e| Failure::new(EXIT_USAGE, e))?;
    let mut threads = args.model.threads;
    check_model_args(&args.model, &mut threads)?;
    if args.max_tokens == 0 {
        return Err(Failure::new(EXIT_USAGE, anyhow::anyhow!("-n/--max-tokens 0 leaves nothing to generate")));
    }
    let prompt = read_prompt(&args.prompt, args.constraint.limits().max_input_bytes)?;
    run_model(args, threads, grammar, schema, prompt)
}

/// Checks the model flags that need no model: a context below llama.cpp's smallest (it would
/// silently grow to 256 tokens while the batch stays as asked), more threads than cores
/// (clamped, with a warning), GPU layers in a build without GPU support (a warning), and a
/// model path that is not a regular file. The training context is checked on load.
/// `threads` is the thread setting to clamp (the generator's, once built).
pub fn check_model_args(model: &ModelArgs, threads: &mut Option<usize>) -> Result<(), Failure> {
    if let Some(ctx) = model.ctx_size.filter(|c| (1..MIN_CTX).contains(c)) {
        return Err(Failure::new(
            EXIT_USAGE,
            anyhow::anyhow!("-c/--ctx-size {ctx} is below llama.cpp's smallest context of {MIN_CTX} tokens"),
        ));
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if let Some(t) = model.threads {
        if t == 0 {
            return Err(Failure::new(EXIT_USAGE, anyhow::anyhow!("-t/--threads must be at least 1")));
        }
        if t > cores {
            eprintln!("constrain: warning: --threads {t} is more than the {cores} cores available; using {cores}");
            *threads = Some(cores);
        }
    }
    if model.n_gpu_layers > 0 && !cfg!(feature = "cuda") {
        eprintln!(
            "constrain: warning: -ngl {} ignored: this build has no GPU support (rebuild with --features cuda)",
            model.n_gpu_layers
        );
    }
    if let Some(path) = &model.model {
        let problem = match std::fs::metadata(path) {
            Err(e) => Some(format!("cannot open it: {e}")),
            Ok(m) if m.is_dir() => Some("it is a directory, not a GGUF model file".to_string()),
            Ok(m) if !m.is_file() => Some("it is not a regular file (a device, pipe or socket)".to_string()),
            Ok(_) => None,
        };
        if let Some(problem) = problem {
            return Err(Failure::new(super::EXIT_BAD_MODEL, anyhow::anyhow!("model {}: {problem}", path.display())));
        }
    }
    Ok(())
}

/// llama.cpp's smallest context: smaller ones are raised to it.
const MIN_CTX: u32 = 256;

#[cfg(not(feature = "llama"))]
fn run_model(
    _args: &GenerateArgs,
    _threads: Option<usize>,
    _grammar: Option<constrain::schema::Compiled>,
    _schema: Option<serde_json::Value>,
    _prompt: String,
) -> Result<ExitCode, Failure> {
    Err(Failure::no_llama())
}

#[cfg(feature = "llama")]
fn run_model(
    args: &GenerateArgs,
    threads: Option<usize>,
    grammar: Option<constrain::schema::Compiled>,
    schema: Option<serde_json::Value>,
    prompt: String,
) -> Result<ExitCode, Failure> {
    use constrain_llama::{Prompt, SchemaInPrompt};
    use std::io::Write;

    // The trace file is created before the model loads, so that a bad path fails at once.
    let mut trace_file = match &args.trace {
        Some(path) => Some(std::fs::File::create(path).map(std::io::BufWriter::new).map_err(|e| {
            Failure::new(super::EXIT_OTHER, anyhow::anyhow!("cannot create the trace file {}: {e}", path.display()))
        })?),
        None => None,
    };
    let settings = GeneratorSettings { threads, ..args.generator_settings() };
    let mut generator = load_generator(&args.model, settings)?;
    if let Some(draft) = &args.model_draft {
        generator.load_draft(draft)?;
    }
    let mut prompt = Prompt::user(prompt);
    if let Some(system) = &args.system {
        prompt = prompt.with_system(system.clone());
    } else if let Some(schema) = &schema {
        let (fitted, shown) = generator.schema_prompt(prompt, schema);
        prompt = fitted;
        match shown {
            SchemaInPrompt::Whole => {}
            SchemaInPrompt::WithoutAnnotations => eprintln!(
                "constrain: note: the schema is shown to the model without its descriptions, to fit the context (-c)"
            ),
            SchemaInPrompt::LeftOut => eprintln!(
                "constrain: note: the schema is too long to show the model in the context (-c); it is still enforced"
            ),
        }
    }
    let mut stdout = std::io::stdout().lock();
    // Everything produced so far, so that a failed generation's text is not lost.
    let mut produced = String::new();
    let mut on_text = |piece: &str| {
        produced.push_str(piece);
        if args.stream {
            if let Err(e) = stdout.write_all(piece.as_bytes()).and_then(|()| stdout.flush()) {
                super::out::end(&e);
            }
        }
    };
    let out = match &grammar {
        Some(g) => {
            let mut constraint = generator.constraint(g)?;
            if let Some(schema) = &schema {
                // Generation prefers the schema's property order (the constraint takes any).
                constraint =
                    constrain::schema::with_order_hint(constraint, schema, &args.constraint_args().schema_options());
            }
            if !args.no_close && constraint.min_bytes_from_start().is_none() {
                eprintln!(
                    "constrain: warning: closing mode is off for this run: the model's vocabulary lacks the single-byte tokens a shortest output needs, so running out of tokens ends with exit code 5"
                );
            }
            // Streaming shows text as it comes (a backtrack reaches back 16 tokens); else the
            // whole document comes at the end, and a backtrack may reach anywhere.
            if args.stream {
                generator.generate_with(prompt, &constraint, &mut on_text)
            } else {
                generator.generate(prompt, &constraint)
            }
        }
        None => generator.generate_unconstrained(prompt, &mut on_text),
    };
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            if args.stream {
                outln!();
            }
            let partial = match &e {
                constrain_llama::Error::Incomplete { partial, .. } => partial.as_str(),
                _ => produced.as_str(),
            };
            if !partial.is_empty() {
                eprintln!("constrain: the partial output (not valid) was:\n{partial}");
            }
            return Err(e.into());
        }
    };
    if let (Some(file), Some(path)) = (trace_file.as_mut(), &args.trace) {
        write_trace(file, &out.trace)
            .map_err(|e| Failure::new(super::EXIT_OTHER, anyhow::anyhow!("cannot write {}: {e}", path.display())))?;
    }
    if args.stream {
        outln!();
    } else {
        outln!("{}", args.printed(&out.text, schema.is_some()));
    }
    if grammar.is_none() && out.stop == constrain_llama::StopReason::MaxTokens {
        eprintln!("constrain: stopped at --max-tokens {}", args.max_tokens);
    }
    if out.stop == constrain_llama::StopReason::Closed {
        eprintln!(
            "constrain: warning: finish_reason closed: the token budget ({} tokens, or the context) ran low, so the output was closed early at its nearest valid end; raise --max-tokens for a fuller answer",
            args.max_tokens
        );
    }
    if args.model.verbose {
        eprintln!(
            "constrain: finish_reason {}; {} prompt tokens in {:.2} s; {} tokens ({} forced, {} model steps, {} backtracks, {} dead-end and {} unproved tokens refused) in {:.2} s = {:.1} tok/s; masks {:.1} ms",
            out.stop.finish_reason(),
            out.prompt_tokens,
            out.timings.prompt.as_secs_f64(),
            out.generated_tokens,
            out.forced_tokens,
            out.model_steps,
            out.backtracks,
            out.dead_tokens,
            out.unproved_tokens,
            out.timings.generation.as_secs_f64(),
            out.tokens_per_second(),
            out.timings.mask.as_secs_f64() * 1e3,
        );
        if args.lookup > 0 || args.model_draft.is_some() {
            eprintln!(
                "constrain: speculative: {} tokens drafted, {} accepted ({:.0}%)",
                out.drafted_tokens,
                out.accepted_drafts,
                100.0 * out.accepted_drafts as f64 / out.drafted_tokens.max(1) as f64
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes a trace as JSON lines (`--trace`).
#[cfg(feature = "llama")]
fn write_trace(file: &mut impl std::io::Write, trace: &[constrain_llama::trace::TraceEvent]) -> std::io::Result<()> {
    for event in trace {
        serde_json::to_writer(&mut *file, &event.to_json())?;
        file.write_all(b"\n")?;
    }
    file.flush()
}

/// Loads the model given by `--model` (or the default one) behind a progress spinner.
#[cfg(feature = "llama")]
pub fn load_generator(model: &ModelArgs, settings: GeneratorSettings) -> Result<constrain_llama::Generator, Failure> {
    let path = match &model.model {
        Some(p) => p.clone(),
        None => constrain_llama::default_model_path()?,
    };
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    spinner.set_message(format!("loading {}", path.display()));
    spinner.enable_steady_tick(std::time::Duration::from_millis(100));
    let generator = constrain_llama::Generator::load(&path, settings);
    spinner.finish_and_clear();
    let generator = generator?;
    if model.verbose {
        eprintln!(
            "constrain: loaded {} ({} tokens) in {:.2} s",
            path.display(),
            generator.index().vocab().len(),
            generator.load_time().as_secs_f64()
        );
    }
    Ok(generator)
}

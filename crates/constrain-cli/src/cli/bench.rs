//! `constrain bench`: decoding speed with and without the constraint, on the same model,
//! prompt and (greedy) settings, plus the share of tokens jump-forward fed without sampling.
//!
//! Input: a model, a prompt, a constraint and a token budget. Output: a table on stdout.
//! Each configuration runs `--runs` times after one warm-up run (which also fills the mask
//! cache) and the fastest run is reported; llama.cpp's speed varies by a few percent between
//! runs on a busy machine.
use super::constraint_args::{ConstraintArgs, WhitespaceArg};
use super::generate::ModelArgs;
#[cfg(feature = "llama")]
use super::out::outln;
use super::{Failure, EXIT_USAGE};
use std::process::ExitCode;

/// Arguments of `constrain bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt (the same for every configuration).
    #[arg(short = 'p', long, default_value = "Invent a person: give their name, age, email and a few hobbies.")]
    pub prompt: String,
    /// Token budget per run.
    #[arg(short = 'n', long = "max-tokens", default_value_t = 128)]
    pub max_tokens: usize,
    /// Timed runs per configuration (after one warm-up).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// The constraint (required).
    #[command(flatten)]
    pub constraint: ConstraintArgs,
}

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> Result<ExitCode, Failure> {
    // Generation's whitespace: compact unless --whitespace says.
    let constraint = ConstraintArgs { default_whitespace: WhitespaceArg::Compact, ..args.constraint.clone() };
    let grammar = constraint.grammar().map_err(Failure::constraint)?.ok_or_else(|| {
        Failure::new(EXIT_USAGE, anyhow::anyhow!("bench needs a constraint (e.g. --schema examples/person.json)"))
    })?;
    let schema = args.constraint.schema_value().map_err(Failure::constraint)?;
    if args.runs == 0 || args.max_tokens == 0 {
        return Err(Failure::new(EXIT_USAGE, anyhow::anyhow!("--runs and --max-tokens must be at least 1")));
    }
    bench_model(args, grammar, schema)
}

#[cfg(not(feature = "llama"))]
fn bench_model(
    _args: &BenchArgs,
    _grammar: constrain::schema::Compiled,
    _schema: Option<serde_json::Value>,
) -> Result<ExitCode, Failure> {
    Err(Failure::no_llama())
}

#[cfg(feature = "llama")]
fn bench_model(
    args: &BenchArgs,
    grammar: constrain::schema::Compiled,
    schema: Option<serde_json::Value>,
) -> Result<ExitCode, Failure> {
    use constrain::sampling::SamplerSettings;
    use constrain_llama::{GeneratorSettings, Output, Prompt};

    let settings = GeneratorSettings {
        sampler: SamplerSettings::greedy(),
        max_tokens: args.max_tokens,
        ctx_size: args.model.ctx_size.unwrap_or(0),
        threads: args.model.threads,
        n_gpu_layers: args.model.n_gpu_layers,
        verbose: args.model.verbose,
        index: args.constraint.limits.memory.index_config(),
        ..GeneratorSettings::default()
    };
    let mut generator = super::generate::load_generator(&args.model, settings.clone())?;
    let constraint = generator.constraint(&grammar)?;
    let mut prompt = Prompt::user(args.prompt.clone());
    if let Some(schema) = &schema {
        prompt = prompt.with_schema(schema);
    }

    // Best (fastest) of `runs` after a warm-up.
    let mut measure =
        |jump_forward: bool, constrained: bool, max_tokens: usize, close: bool| -> Result<(Output, f64), Failure> {
            generator.set_settings(GeneratorSettings { jump_forward, max_tokens, close, ..settings.clone() })?;
            let c = constrained.then_some(&constraint);
            let cold = generator.generate_truncated(prompt.clone(), c)?;
            let cold_mask_ms = cold.timings.mask.as_secs_f64() * 1e3;
            let mut best: Option<Output> = None;
            for _ in 0..args.runs {
                let out = generator.generate_truncated(prompt.clone(), c)?;
                if best.as_ref().is_none_or(|b| out.tokens_per_second() > b.tokens_per_second()) {
                    best = Some(out);
                }
            }
            Ok((best.unwrap_or(cold), cold_mask_ms))
        };
    let (masked, cold_mask_ms) = measure(false, true, args.max_tokens, true)?;
    // Closing mode's cost when it does not trigger: the same run with closing off.
    let (unclosed, _) = measure(false, true, args.max_tokens, false)?;
    // The unconstrained run decodes as many tokens as the constrained one, so both are timed
    // over the same number of steps at the same context lengths.
    let (free, _) = measure(false, false, masked.generated_tokens.max(1), true)?;
    let (jumped, _) = measure(true, true, args.max_tokens, true)?;

    let base = free.tokens_per_second();
    let row = |name: &str, o: &Output| {
        let steps_per_s = if o.timings.generation.as_secs_f64() > 0.0 {
            o.model_steps.max(1) as f64 / o.timings.generation.as_secs_f64()
        } else {
            0.0
        };
        let mask_us = if o.generated_tokens > 0 {
            o.timings.mask.as_secs_f64() * 1e6 / (o.generated_tokens - o.forced_tokens).max(1) as f64
        } else {
            0.0
        };
        outln!(
            "{name:<28} {:>7} {:>7} {:>8.1}% {:>9.1} {:>7.3}x {:>9.1} {:>10.1}",
            o.generated_tokens,
            o.forced_tokens,
            100.0 * o.forced_tokens as f64 / o.generated_tokens.max(1) as f64,
            o.tokens_per_second(),
            if base > 0.0 { o.tokens_per_second() / base } else { 0.0 },
            steps_per_s,
            mask_us,
        );
    };
    outln!(
        "model: {}  prompt tokens: {}  greedy, max {} tokens, best of {} runs",
        args.model.model.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "default".into()),
        free.prompt_tokens,
        args.max_tokens,
        args.runs
    );
    outln!(
        "{:<28} {:>7} {:>7} {:>9} {:>9} {:>8} {:>9} {:>10}",
        "configuration",
        "tokens",
        "forced",
        "forced%",
        "tok/s",
        "vs free",
        "steps/s",
        "mask µs/t"
    );
    row("unconstrained", &free);
    row("constrained, closing off", &unclosed);
    row("constrained", &masked);
    row("constrained + jump-forward", &jumped);
    outln!(
        "(the unconstrained run is capped at the constrained output's {} tokens)\nfirst constrained run (cold mask cache): {cold_mask_ms:.1} ms in masks",
        masked.generated_tokens
    );
    let per_token = |o: &Output| o.timings.generation.as_secs_f64() / o.generated_tokens.max(1) as f64;
    println!(
        "closing mode: {:.4}% of generation time in its checks ({:.2} ms, {:.1} µs per token), {:+.2}% time per token vs closing off (finish_reason {}){}",
        100.0 * masked.timings.closing.as_secs_f64() / masked.timings.generation.as_secs_f64().max(f64::MIN_POSITIVE),
        masked.timings.closing.as_secs_f64() * 1e3,
        masked.timings.closing.as_secs_f64() * 1e6 / masked.generated_tokens.max(1) as f64,
        100.0 * (per_token(&masked) / per_token(&unclosed).max(f64::MIN_POSITIVE) - 1.0),
        masked.stop.finish_reason(),
        if masked.stop == constrain_llama::StopReason::Closed { "; it triggered: raise -n to measure the idle cost" } else { "" },
    );
    if !matches!(masked.stop, constrain_llama::StopReason::MaxTokens | constrain_llama::StopReason::Closed)
        && masked.value.is_none()
        && schema.is_some()
    {
        eprintln!("constrain: warning: the constrained output is not JSON: {}", masked.text);
    }
    Ok(ExitCode::SUCCESS)
}

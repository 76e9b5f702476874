//! `constrain fuzz`: the differential fuzzer ([`crate::fuzz`]) for a given time.
//!
//! Input: `--minutes N`, `--seed S`, optionally `--out DIR`. Output: each finding,
//! minimized, as `DIR/finding-<seed>.json` (schema, instance, verdicts); a summary on stdout;
//! exit 1 when there was any soundness failure.
use crate::fuzz::{run_case, Config, Stats};
use anyhow::Context as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of `constrain fuzz`.
#[derive(clap::Args, Debug)]
pub struct FuzzArgs {
    /// How long to run.
    #[arg(long, default_value_t = 1.0)]
    pub minutes: f64,
    /// The run's seed (case `n` of seed `S` is reproducible alone).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write findings (created if missing).
    #[arg(long, default_value = "fuzz-findings")]
    pub out: PathBuf,
    /// Parse limits.
    #[command(flatten)]
    pub limits: super::constraint_args::LimitArgs,
}

/// Runs `constrain fuzz`.
pub fn run(args: &FuzzArgs) -> anyhow::Result<ExitCode> {
    let index = constrain::TokenIndex::new(constrain::Vocabulary::bytes());
    let cfg = Config { limits: args.limits.limits(), ..Config::default() };
    let deadline = Instant::now() + Duration::from_secs_f64(args.minutes.max(0.0) * 60.0);
    let mut stats = Stats::default();
    let mut written = 0usize;
    let mut n = 0u64;
    let mut last_report = Instant::now();
    while Instant::now() < deadline {
        let findings = run_case(args.seed, n, &cfg, &index, &mut stats);
        for f in findings {
            std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
            let path = args.out.join(format!("finding-{}-{n}-{}.json", args.seed, written));
            let text = serde_json::to_string_pretty(&f.to_json())?;
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("soundness failure (case {n}): {}", path.display());
            written += 1;
        }
        n += 1;
        if last_report.elapsed() >= Duration::from_secs(30) {
            eprintln!("{}", stats.summary());
            last_report = Instant::now();
        }
    }
    println!("fuzz seed {}: {}", args.seed, stats.summary());
    if written > 0 {
        println!("findings written to {}", args.out.display());
    }
    Ok(if stats.failures > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

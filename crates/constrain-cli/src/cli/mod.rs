//! The `constrain` command line.
//!
//! Input: command-line arguments (llama.cpp-style flags) and, for generation, a prompt from
//! `-p` or stdin. Output: the generated text on stdout (the JSON document only), diagnostics
//! on stderr, and an exit code that says what went wrong:
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success |
//! | 1 | any other error (I/O, llama.cpp, dead end) |
//! | 2 | usage error (bad flags) |
//! | 3 | bad schema, grammar or regex |
//! | 4 | bad or missing model |
//! | 5 | incomplete output (max tokens or context reached first) |
//! | 6 | `check`: the document is refused or incomplete |
//! | 7 | `check`: a parse limit cut a path (no verdict); `eval`: limit hits occurred |
//!
//! Commands: generation (the default), `grammar` (print the GBNF a constraint compiles to),
//! `bench` (constrained vs unconstrained speed), `eval` (JSONSchemaBench-style report),
//! `plot` (a `--trace` file as an SVG chart),
//! `serve` (OpenAI-compatible HTTP server) and `bench-serve` (its load benchmark).
pub mod bench;
pub mod check;
pub mod constraint_args;
pub mod eval;
pub mod format;
pub mod fuzz;
pub mod generate;
pub mod out;
pub mod plot;

use clap::{Parser, Subcommand};
use constraint_args::{ConstraintArgs, WhitespaceArg};
use std::process::ExitCode;

/// Exit code: any other error.
pub const EXIT_OTHER: u8 = 1;
/// Exit code: usage error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: bad schema, grammar or regex.
pub const EXIT_BAD_CONSTRAINT: u8 = 3;
/// Exit code: bad or missing model.
pub const EXIT_BAD_MODEL: u8 = 4;
/// Exit code: incomplete output.
pub const EXIT_INCOMPLETE: u8 = 5;

const EXAMPLES: &str = "\
Examples:
  constrain --schema examples/person.json -p 'Invent a person living in Lyon.'
  echo 'A cat named Tom, 3 years old' | constrain --json-schema '{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}}}'
  constrain --regex '[0-9]{3}-[0-9]{4}' -p 'A phone number:' --temp 0
  constrain --grammar-file grammars/list.gbnf -p 'Three fruits' --stream
  constrain grammar --schema examples/person.json      # print the GBNF
  constrain check --schema examples/person.json doc.json   # accepted? if not, where and why
  constrain bench --schema examples/person.json -p 'Invent a person.' -n 128
  constrain --schema examples/person.json -p 'A person.' --trace t.jsonl && constrain plot t.jsonl -o t.svg

Exit codes: 0 ok, 2 usage, 3 bad schema/grammar, 4 bad model, 5 incomplete output,
6 check: rejected, 7 parse limit hit, 1 other.
With no --model, $CONSTRAIN_MODEL or the cached SmolLM2-135M-Instruct is used (downloaded once).";

/// Constrained generation with llama.cpp: every token keeps the output valid against a JSON
/// Schema, a GBNF grammar or a regular expression.
#[derive(Parser, Debug)]
#[command(name = "constrain", version, after_help = EXAMPLES, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// A subcommand; without one, `constrain` generates.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Generation flags (the default command).
    #[command(flatten)]
    pub generate: generate::GenerateArgs,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the grammar a constraint compiles to, in GBNF.
    Grammar(GrammarArgs),
    /// Measure unconstrained vs constrained decoding speed and the share of forced tokens.
    Bench(bench::BenchArgs),
    /// Evaluate against a JSONSchemaBench-style directory.
    Eval(eval::EvalArgs),
    /// Check a document against a constraint; explain where and why it is refused.
    Check(check::CheckArgs),
    /// Differential fuzzing of the schema compiler against the `jsonschema` crate.
    Fuzz(fuzz::FuzzArgs),
    /// Draw a `--trace` file as an SVG: the probability mass the mask removed per step.
    Plot(plot::PlotArgs),
    /// OpenAI-compatible HTTP server with batched, constrained decoding.
    #[cfg(feature = "llama")]
    Serve(crate::serve::ServeArgs),
    /// Load benchmark of `constrain serve` (1, 4, 8 clients; constrained and not).
    #[cfg(feature = "llama")]
    BenchServe(crate::serve::bench::BenchServeArgs),
    /// Soak test of `constrain serve`: mixed traffic from many clients, every answer checked,
    /// memory watched.
    #[cfg(feature = "llama")]
    Soak(crate::serve::soak::SoakArgs),
}

/// Arguments of `constrain grammar`.
#[derive(clap::Args, Debug)]
pub struct GrammarArgs {
    /// The constraint to print.
    #[command(flatten)]
    pub constraint: constraint_args::ConstraintArgs,
}

/// A failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    /// The process exit code.
    pub code: u8,
    /// What went wrong.
    pub error: anyhow::Error,
}

impl Failure {
    /// A failure with an explicit code.
    pub fn new(code: u8, error: impl Into<anyhow::Error>) -> Failure {
        Failure { code, error: error.into() }
    }
    /// A bad schema, grammar or regex.
    pub fn constraint(error: impl Into<anyhow::Error>) -> Failure {
        Failure::new(EXIT_BAD_CONSTRAINT, error)
    }
    /// A command that runs a model, in a build without the `llama` feature.
    #[cfg(not(feature = "llama"))]
    pub(crate) fn no_llama() -> Failure {
        Failure::new(
            EXIT_BAD_MODEL,
            anyhow::anyhow!(
                "this constrain was built without the `llama` feature, so it cannot run a model; \
                 rebuild with default features (needs cmake, clang and libclang-dev)"
            ),
        )
    }
}

#[cfg(feature = "llama")]
impl From<constrain_llama::Error> for Failure {
    fn from(e: constrain_llama::Error) -> Failure {
        use constrain_llama::Error as E;
        let code = match &e {
            E::Model { .. } | E::Fetch(_) => EXIT_BAD_MODEL,
            E::Schema(_) | E::Constraint(_) => EXIT_BAD_CONSTRAINT,
            E::Incomplete { .. } => EXIT_INCOMPLETE,
            E::Settings(_) | E::BudgetTooSmall { .. } => EXIT_USAGE,
            _ => EXIT_OTHER,
        };
        Failure::new(code, e)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        // Without the `llama` feature no generator error exists to recover a code from.
        #[cfg(feature = "llama")]
        let e = match e.downcast::<constrain_llama::Error>() {
            Ok(e) => return Failure::from(e),
            Err(e) => e,
        };
        Failure::new(EXIT_OTHER, e)
    }
}

/// llama.cpp spells the GPU-layers flag `-ngl`; clap's short flags are single letters, so it
/// is rewritten to `--n-gpu-layers` (also `-ngl=N`).
fn rewrite_llama_flags(args: impl IntoIterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    args.into_iter()
        .map(|a| match a.to_str() {
            Some("-ngl") => "--n-gpu-layers".into(),
            Some(s) if s.starts_with("-ngl=") => format!("--n-gpu-layers={}", &s[5..]).into(),
            _ => a,
        })
        .collect()
}

/// Entry point of the `constrain` binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(rewrite_llama_flags(std::env::args_os())) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(f) => {
            eprintln!("constrain: error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        None => generate::run(&cli.generate),
        Some(Command::Grammar(args)) => {
            // The grammar generation uses: compact whitespace unless --whitespace says.
            let constraint = ConstraintArgs { default_whitespace: WhitespaceArg::Compact, ..args.constraint.clone() };
            let grammar = constraint.grammar().map_err(Failure::constraint)?;
            match grammar {
                Some(g) => {
                    // Build the automaton first: a grammar that matches nothing, or that is
                    // left-recursive or over a limit, is an error here, not a printed grammar.
                    let limits = args.constraint.limits();
                    constrain::automaton::Pda::build(g.grammar(), &limits).map_err(Failure::constraint)?;
                    out::out!("{g}");
                    Ok(ExitCode::SUCCESS)
                }
                None => Err(Failure::new(
                    EXIT_USAGE,
                    anyhow::anyhow!("give a constraint: --schema, --json-schema, --grammar-file, --grammar or --regex"),
                )),
            }
        }
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Eval(args)) => eval::run(&args).map_err(Failure::from),
        Some(Command::Check(args)) => check::run(&args),
        Some(Command::Fuzz(args)) => fuzz::run(&args).map_err(Failure::from),
        Some(Command::Plot(args)) => plot::run(&args),
        #[cfg(feature = "llama")]
        Some(Command::Serve(args)) => crate::serve::run(&args).map(|()| ExitCode::SUCCESS).map_err(Failure::from),
        #[cfg(feature = "llama")]
        Some(Command::BenchServe(args)) => {
            crate::serve::bench::run(&args).map(|()| ExitCode::SUCCESS).map_err(Failure::from)
        }
        #[cfg(feature = "llama")]
        Some(Command::Soak(args)) => crate::serve::soak::run(&args).map(|()| ExitCode::SUCCESS).map_err(Failure::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(rewrite_llama_flags(args.iter().map(|s| s.into())))
    }

    #[test]
    fn llama_style_flags_parse() {
        let cli = parse(&[
            "constrain",
            "-m",
            "m.gguf",
            "-p",
            "hi",
            "--temp",
            "0",
            "--top-k",
            "5",
            "-n",
            "64",
            "-c",
            "1024",
            "-t",
            "2",
            "-ngl",
            "3",
            "--schema",
            "x.json",
            "--seed",
            "7",
            "--repeat-last-n",
            "32",
        ])
        .unwrap();
        assert!(cli.command.is_none());
        let g = &cli.generate;
        assert_eq!(g.max_tokens, 64);
        assert_eq!(g.model.n_gpu_layers, 3);
        assert_eq!(g.model.threads, Some(2));
        assert_eq!(g.sampling.seed, Some(7));
        assert_eq!(g.constraint.schema.as_deref(), Some(std::path::Path::new("x.json")));
        let s = g.sampler_settings();
        assert_eq!((s.temperature, s.top_k, s.repeat_last_n), (0.0, 5, 32));
    }

    #[test]
    fn sampling_toolbox_flags_parse() {
        use constrain::sampling::{SamplerKind, SamplerSettings};
        use constrain::TokenId;
        // The defaults are the library's: same order, typical and mirostat off.
        let s = parse(&["constrain"]).unwrap().generate.sampler_settings();
        assert_eq!(s, SamplerSettings::default());
        assert_eq!(s.samplers, SamplerKind::DEFAULT_ORDER.to_vec());
        let cli = parse(&[
            "constrain",
            "--typical",
            "0.9",
            "--mirostat",
            "2",
            "--mirostat-lr",
            "0.2",
            "--mirostat-ent",
            "4",
            "--samplers",
            "top_k;typ_p;top_p;min_p;temperature",
            "--logit-bias",
            "15043+1",
            "--logit-bias",
            "13-0.5",
            "--logit-bias",
            "7-inf",
        ])
        .unwrap();
        let s = cli.generate.sampler_settings();
        assert_eq!((s.typical_p, s.mirostat, s.mirostat_eta, s.mirostat_tau), (0.9, 2, 0.2, 4.0));
        use SamplerKind::*;
        assert_eq!(s.samplers, vec![TopK, TypicalP, TopP, MinP, Temperature]);
        assert_eq!(s.logit_bias, vec![(TokenId(15043), 1.0), (TokenId(13), -0.5), (TokenId(7), f32::NEG_INFINITY)]);
        assert!(s.validate().is_ok());
        // Rejected at parse time, naming the bad entry.
        for (flag, value, needle) in [
            ("--samplers", "top_k;bogus", "bogus"),
            ("--samplers", "dry;top_k", "not supported"),
            ("--samplers", "top_k;top-k", "twice"),
            ("--logit-bias", "15043", "15043"),
            ("--logit-bias", "abc+1", "abc+1"),
            ("--logit-bias", "15043+x", "15043+x"),
            ("--logit-bias", "15043+-1", "15043+-1"),
            ("--logit-bias", "15043+inf", "-inf to ban"),
            ("--logit-bias", "15043-nan", "-inf to ban"),
            ("--mirostat", "-1", "-1"),
        ] {
            let e = parse(&["constrain", flag, value]).unwrap_err().to_string();
            assert!(e.contains(needle), "{flag} {value}: {e}");
        }
        // In range for clap, refused by the settings' check.
        for (flag, value) in
            [("--mirostat", "3"), ("--typical", "0"), ("--mirostat-lr", "nan"), ("--mirostat-ent", "inf")]
        {
            let s = parse(&["constrain", flag, value]).unwrap().generate.sampler_settings();
            assert!(s.validate().is_err(), "{flag} {value}");
        }
    }

    #[test]
    fn subcommands_and_usage_errors() {
        assert!(matches!(
            parse(&["constrain", "grammar", "--regex", "a+"]).unwrap().command,
            Some(Command::Grammar(_))
        ));
        assert!(matches!(parse(&["constrain", "bench", "-n", "8"]).unwrap().command, Some(Command::Bench(_))));
        let e = parse(&["constrain", "--regex", "a", "--grammar", "root ::= \"a\""]).unwrap_err();
        assert!(e.use_stderr());
        assert!(parse(&["constrain", "--temp", "hot"]).is_err());
    }

    #[test]
    fn grammar_without_constraint_is_a_usage_error() {
        let cli = parse(&["constrain", "grammar"]).unwrap();
        assert_eq!(run(cli).unwrap_err().code, EXIT_USAGE);
    }

    #[cfg(feature = "llama")]
    #[test]
    fn errors_map_to_exit_codes() {
        use constrain_llama::Error as E;
        let code = |e: E| Failure::from(e).code;
        assert_eq!(code(E::Model { path: "x".into(), message: "y".into() }), EXIT_BAD_MODEL);
        assert_eq!(
            code(E::Incomplete { reason: "max tokens reached", tokens: 3, partial: String::new() }),
            EXIT_INCOMPLETE
        );
        assert_eq!(code(E::Llama("z".into())), EXIT_OTHER);
        assert_eq!(Failure::from(anyhow::Error::new(E::Fetch("f".into()))).code, EXIT_BAD_MODEL);
    }
}

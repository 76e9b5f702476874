//! `constrain eval`: the JSONSchemaBench mask-correctness and speed evaluation.
//!
//! Input: a directory laid out like JSONSchemaBench (set folders holding `<name>.json` schemas
//! and `tests/<name>.json` files with `{"tests": [{"valid": bool, "data": …}, …]}`), or one
//! such set folder, and a HF `tokenizer.json`.
//! Output: a table per set and in total on stdout, a progress bar on stderr, and optionally a
//! JSON report (`--json-report`).
//!
//! How, for each schema with at least one test (single thread):
//! 1. **Compile** — `schema::compile` (spec semantics, default whitespace, schema property
//!    order, not strict) or the `--grammar-file` GBNF instead, then `Constraint::new`, then the
//!    first `fill_mask`: together the time-to-first-mask (ttfm).
//! 2. **Each test instance** — serialised exactly like Python's
//!    `json.dumps(data, ensure_ascii=False)` (see `python_json`), tokenized with the
//!    `tokenizers` crate (no special tokens). A fresh matcher then, before every token, fills
//!    the mask, checks the token's bit and accepts the token; these three together are one
//!    timed "mask step". After the last token one more mask is filled and must allow an EOS id
//!    exactly when the instance is valid. A valid instance rejected anywhere is a *wrong
//!    reject*; an invalid one accepted whole is a *wrong accept*.
//! 3. A schema **passes** when it compiled and every test came out right.
//!
//! `tokens` in the report counts timed mask steps: one per instance token replayed (up to the
//! first rejected one) plus the final EOS check of each instance replayed to its end. The mask
//! percentiles are over those steps, the ttfm percentiles over compiled schemas.
//! Instances are prepared before timing starts; one that cannot be serialised (a lone
//! surrogate), tokenized, or whose token bytes do not spell its text exactly (a vocabulary
//! bug) is skipped and counted under `details.*.skipped_instances`.
//!
//! The tokenizer-wide [`TokenIndex`] is built once and its build time reported separately.
//! Each schema runs under `catch_unwind`: a panic is a bug, counted as an "internal panic"
//! compile failure and printed loudly. The exit code is failure (1) when any wrong accept, panic
//! or matcher inconsistency occurred, else 7 when a parse limit cut the path of a valid
//! instance (a *limit hit*, also counted as a wrong reject; `--max-parse-stacks` and
//! `--max-stack-depth` raise the limits). `--explain` prints where each wrong verdict happened.
//!
//! The summary ends with the slowest mask steps (schema, instance, position, the text before,
//! and whether the step stays slow when repeated; see `slowest`) and the process's peak
//! resident memory.

mod python_json;
mod slowest;
mod stats;

use super::out::outln;
use anyhow::Context as _;
use constrain::mask::{is_allowed, TokenIndex};
use constrain::matcher::{Constraint, Error as MatchError};
use constrain::schema;
use constrain::schema::Compiled;
use constrain::{Limits, TokenId, Vocabulary};
use python_json::PyValue;
use slowest::SlowMask;
use stats::{Aggregate, SchemaResult, Summary};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `constrain eval`.
#[derive(clap::Args, Debug, Clone)]
pub struct EvalArgs {
    /// A directory laid out like JSONSchemaBench, or one set folder.
    pub dir: PathBuf,
    /// HF tokenizer.json used to tokenize the instances.
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// Where to write the JSON report.
    #[arg(long)]
    pub json_report: Option<PathBuf>,
    /// Compile this GBNF grammar for every schema instead of the schema itself (instances are
    /// still judged by their `valid` flag).
    #[arg(long)]
    pub grammar_file: Option<PathBuf>,
    /// Evaluate at most this many schemas (those with tests, after `--filter`).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Only schemas whose id (`set/name.json`) contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// Whitespace policy of the compiled schemas.
    #[arg(long, value_enum, default_value_t)]
    pub whitespace: super::constraint_args::WhitespaceArg,
    /// Print each schema id (and its time) to stderr as it is evaluated, to find a schema
    /// that hangs.
    #[arg(long)]
    pub verbose: bool,
    /// Force this JSON Schema dialect (4, 6, 7, 2019-09, 2020-12) instead of each schema's
    /// `$schema`.
    #[arg(long)]
    pub draft: Option<schema::dialect::Draft>,
    /// Compile in lenient mode: unsupported keywords are ignored, so the constraints may
    /// accept invalid instances (wrong accepts are then expected).
    #[arg(long)]
    pub lenient: bool,
    /// Refuse the keywords a grammar cannot express instead of checking them at run time
    /// (measures the grammar alone).
    #[arg(long)]
    pub no_runtime_checks: bool,
    /// For every wrong verdict, print to stderr where the constraint refused the instance
    /// (offset, line:column, JSON pointer, allowed bytes), or that it accepted it whole.
    #[arg(long)]
    pub explain: bool,
    /// Write every object of every instance with its members in a random order (seeded by
    /// this number, the schema id and the instance's place), instead of as the test file
    /// has them. JSON Schema never depends on member order, so each instance keeps its
    /// label: a differential corpus for the property-order layouts.
    #[arg(long, value_name = "SEED")]
    pub shuffle_keys: Option<u64>,
    /// Parse limits (a valid instance refused because a limit cut its path is a "limit hit").
    #[command(flatten)]
    pub limits: super::constraint_args::LimitArgs,
}

/// A schema whose whole evaluation takes this long is reported on stderr.
const SLOW_SCHEMA_SECS: u64 = 5;

/// What is compiled for each schema.
enum Source {
    /// Each schema file itself.
    Schemas(schema::Options),
    /// One GBNF text, parsed again for every schema (so ttfm measures the same work).
    Gbnf(String),
}

/// Everything shared by all schemas.
struct Context {
    index: Arc<TokenIndex>,
    tokenizer: tokenizers::Tokenizer,
    source: Source,
    limits: Limits,
    /// `--explain`: collect an explanation of every wrong verdict.
    explain: bool,
    /// `--shuffle-keys`: the seed members are shuffled with.
    shuffle_keys: Option<u64>,
}

/// Facts about the tokenizer, measured once, for the report.
struct TokenizerFacts {
    vocab_len: usize,
    eos_ids: Vec<u32>,
    vocab_load_ms: f64,
    index_build_ms: f64,
}

/// Longest time between two rewrites of the JSON report while the run goes on, so an
/// interrupted or crashed run still leaves its results so far (marked `"complete": false`)
/// and loses at most this much work. Rewriting after every schema would be quadratic.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One schema file to evaluate.
struct Job {
    set: String,
    schema: PathBuf,
    tests: PathBuf,
    id: String,
}

/// Runs the evaluation; see the module documentation.
pub fn run(args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let tokenizer_json = std::fs::read(&args.tokenizer)
        .with_context(|| format!("cannot read tokenizer file {}", args.tokenizer.display()))?;
    let t = Instant::now();
    let vocab = Vocabulary::from_tokenizer_json_bytes(&tokenizer_json, None)
        .with_context(|| format!("cannot load vocabulary from {}", args.tokenizer.display()))?;
    let vocab_load = t.elapsed();
    let t = Instant::now();
    let tokenizer = tokenizers::Tokenizer::from_bytes(&tokenizer_json)
        .map_err(|e| anyhow::anyhow!("cannot load tokenizer {}: {e}", args.tokenizer.display()))?;
    let encoder_load = t.elapsed();
    let vocab_len = vocab.len();
    let eos_ids: Vec<u32> = vocab.eos_tokens().iter().map(|t| t.0).collect();
    let t = Instant::now();
    let index = TokenIndex::with_config(vocab, args.limits.memory.index_config());
    let index_build = t.elapsed();
    eprintln!(
        "tokenizer: {} tokens, end-of-generation ids {:?}; vocabulary loaded in {:.1} ms, encoder in {:.1} ms; \
         token index built in {:.1} ms",
        vocab_len,
        eos_ids,
        ms(vocab_load),
        ms(encoder_load),
        ms(index_build)
    );

    let source = match &args.grammar_file {
        Some(path) => Source::Gbnf(
            constrain::limits::read_capped(path, args.limits.limits().max_input_bytes)
                .with_context(|| format!("cannot read grammar file {}", path.display()))?,
        ),
        None => Source::Schemas(
            schema::Options::default()
                .with_whitespace(args.whitespace.into())
                .with_lenient(args.lenient)
                .with_draft(args.draft)
                .with_runtime_checks(!args.no_runtime_checks),
        ),
    };
    println!(
        "dialect: {}; run-time checks: {}; lenient: {}",
        args.draft.map_or("from $schema (2020-12 without it)".to_string(), |d| format!("forced to {}", d.name())),
        if args.no_runtime_checks { "off" } else { "on" },
        if args.lenient {
            "ON (unsupported keywords ignored: constraints may accept invalid instances)"
        } else {
            "off"
        }
    );
    if let Some(seed) = args.shuffle_keys {
        eprintln!("instances: object members shuffled (seed {seed})");
    }
    let ctx = Context {
        index,
        tokenizer,
        source,
        limits: args.limits.limits(),
        explain: args.explain,
        shuffle_keys: args.shuffle_keys,
    };
    let facts = TokenizerFacts { vocab_len, eos_ids, vocab_load_ms: ms(vocab_load), index_build_ms: ms(index_build) };

    let mut jobs = discover(&args.dir)?;
    if let Some(f) = &args.filter {
        jobs.retain(|j| j.id.contains(f.as_str()));
    }
    let limit = args.limit.unwrap_or(usize::MAX);

    let bar = indicatif::ProgressBar::new(jobs.len().min(limit) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} eta {eta} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut results: Vec<SchemaResult> = Vec::new();
    let mut agg = Aggregate::default();
    // Check the report path before the run, not after it: an empty partial report.
    if let Some(path) = &args.json_report {
        write_report(path, args, &ctx, &facts, &results, &agg, false)
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
    }
    let mut reported = (0, Instant::now()); // results in the last partial report, and when
    let mut mask = vec![0u32; ctx.index.vocab().mask_words()];
    for job in &jobs {
        if results.len() >= limit {
            break;
        }
        bar.set_message(job.id.clone());
        if args.verbose {
            bar.suspend(|| eprintln!("{} ...", job.id));
        }
        let started = Instant::now();
        let mut explained: Vec<String> = Vec::new();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eval_schema(&ctx, job, &mut mask, &mut explained)
        }));
        if !explained.is_empty() {
            bar.suspend(|| explained.iter().for_each(|line| eprintln!("{line}")));
        }
        let took = started.elapsed();
        if args.verbose || took.as_secs() >= SLOW_SCHEMA_SECS {
            bar.suspend(|| {
                eprintln!(
                    "{}: {:.1} ms{}",
                    job.id,
                    ms(took),
                    if took.as_secs() >= SLOW_SCHEMA_SECS { " (SLOW)" } else { "" }
                )
            });
        }
        let result = match outcome {
            Ok(r) => r,
            Err(payload) => {
                let msg = panic_message(payload.as_ref());
                bar.suspend(|| eprintln!("!!! INTERNAL PANIC on {}: {msg}", job.id));
                Some(SchemaResult { id: job.id.clone(), set: job.set.clone(), panic: Some(msg), ..Default::default() })
            }
        };
        // `None`: no tests.
        if let Some(mut r) = result {
            agg.add(&mut r);
            results.push(r);
        }
        bar.inc(1);
        if let Some(path) = &args.json_report {
            if results.len() > reported.0 && reported.1.elapsed() >= REPORT_EVERY {
                agg.finish();
                write_report(path, args, &ctx, &facts, &results, &agg, false)?;
                reported = (results.len(), Instant::now());
            }
        }
    }
    bar.finish_and_clear();

    if results.is_empty() {
        anyhow::bail!(
            "nothing evaluated: no schema with tests in {}{}",
            args.dir.display(),
            if args.filter.is_some() { " matched --filter" } else { "" }
        );
    }
    agg.finish();
    outln!("{}", Summary::table_header());
    for (name, s) in &agg.sets {
        outln!("{}", s.table_row(name, &s.own_runs()));
    }
    let total = &agg.total;
    outln!("{}", total.table_row("TOTAL", &agg.runs()));
    let cache = ctx.index.cache_report();
    let mb = |bytes: usize| bytes as f64 / 1e6;
    outln!(
        "(mask times in µs per token: fill_mask + check + accept_token; ttfm = compile + first mask, µs; \
         mem = compiled constraint)\ntoken index (once per tokenizer): built in {:.1} ms, {:.1} MB; \
         shared mask cache at the end: {} entries, {:.1} MB",
        ms(index_build),
        mb(ctx.index.memory_usage()),
        cache.entries.values,
        mb(cache.bytes),
    );
    outln!(
        "  by kind: entries {:.1} MB, classifications {} / {:.1} MB, subtree memos {} / {:.1} MB, \
         suffix tries {} / {:.1} MB\n  accepted sets: {} lists {:.1} MB, {} bitsets {:.1} MB; \
         {} distinct by content, {:.1} MB",
        mb(cache.entries.bytes),
        cache.classified.values,
        mb(cache.classified.bytes),
        cache.subtrees.values,
        mb(cache.subtrees.bytes),
        cache.suffix_tries.values,
        mb(cache.suffix_tries.bytes),
        cache.lists,
        mb(cache.list_bytes),
        cache.bitsets,
        mb(cache.bitset_bytes),
        cache.distinct_sets,
        mb(cache.distinct_set_bytes),
    );
    let (rules, rule_bytes) = ctx.index.rule_cache().stats();
    outln!("determinised rules kept: {rules}, {:.1} MB", mb(rule_bytes));
    print_slowest(&results);
    if let Some(peak) = slowest::peak_rss_bytes() {
        outln!("peak resident memory: {:.1} MB", peak as f64 / 1e6);
    }
    if !total.errors.is_empty() {
        outln!("\ncompile errors by keyword / kind:");
        let mut errs: Vec<(&String, &usize)> = total.errors.iter().collect();
        errs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (group, n) in errs {
            outln!("  {n:>6}  {group}");
        }
    }
    let alarms = [
        (total.panics, "schemas PANICKED (bugs)"),
        (
            total.inconsistencies,
            "matcher inconsistencies (mask allowed a token accept_token refused, or EOS bit ≠ is_accepting)",
        ),
        (total.matcher_errors, "matcher errors (limits or internal)"),
        (
            total.limit_hits,
            "limit hits: valid instances refused after a parse limit cut a path (counted as wrong rejects too; \
             raise --max-parse-stacks / --max-stack-depth)",
        ),
        (total.skipped_instances, "instances skipped (not serialisable, not tokenizable, or token bytes ≠ text)"),
    ];
    for (n, what) in alarms {
        if n > 0 {
            outln!("!!! {n} {what}");
        }
    }
    if total.with_notes > 0 {
        println!(
            "{} compiled schemas are under-approximated (they accept less than the schema allows; \
             the notes are listed per schema in the JSON report)",
            total.with_notes
        );
    }

    if let Some(path) = &args.json_report {
        write_report(path, args, &ctx, &facts, &results, &agg, true)?;
        eprintln!("report written to {}", path.display());
    }

    let bad = total.wrong_accepts > 0 || total.panics > 0 || total.inconsistencies > 0;
    Ok(if bad {
        ExitCode::FAILURE
    } else if total.limit_hits > 0 {
        ExitCode::from(super::check::EXIT_LIMIT)
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes the JSON report of `results` (summarised in `agg`, after [`Aggregate::finish`]) to
/// `path`.
fn write_report(
    path: &Path,
    args: &EvalArgs,
    ctx: &Context,
    facts: &TokenizerFacts,
    results: &[SchemaResult],
    agg: &Aggregate,
    complete: bool,
) -> anyhow::Result<()> {
    let (sets, total) = (&agg.sets, &agg.total);
    let cache = ctx.index.cache_report();
    let kind = |k: constrain::mask::KindReport| serde_json::json!({"values": k.values, "bytes": k.bytes});
    let report = serde_json::json!({
        "complete": complete,
        "dir": args.dir.display().to_string(),
        "tokenizer": args.tokenizer.display().to_string(),
        "grammar_file": args.grammar_file.as_ref().map(|p| p.display().to_string()),
        "whitespace": format!("{:?}", args.whitespace),
        "vocab_size": facts.vocab_len,
        "eos_ids": facts.eos_ids,
        "vocab_load_ms": facts.vocab_load_ms,
        "token_index_build_ms": facts.index_build_ms,
        "token_index_bytes": ctx.index.memory_usage(),
        "mask_cache_entries": cache.entries.values,
        "mask_cache_bytes": cache.bytes,
        "mask_cache": {
            "entries": kind(cache.entries),
            "classified": kind(cache.classified),
            "subtrees": kind(cache.subtrees),
            "suffix_tries": kind(cache.suffix_tries),
            "accepted_lists": {"values": cache.lists, "bytes": cache.list_bytes},
            "accepted_bitsets": {"values": cache.bitsets, "bytes": cache.bitset_bytes},
            "accepted_distinct": {"values": cache.distinct_sets, "bytes": cache.distinct_set_bytes},
        },
        "rule_cache_bytes": ctx.index.rule_cache().bytes(),
        "peak_rss_bytes": slowest::peak_rss_bytes(),
        "totals": total.to_json(&agg.runs()),
        "sets": sets.iter().map(|(k, s)| (k.clone(), s.to_json(&s.own_runs()))).collect::<serde_json::Map<_, _>>(),
        "details": {
            "totals": total.details_json(),
            "sets": sets.iter().map(|(k, s)| (k.clone(), s.details_json())).collect::<serde_json::Map<_, _>>(),
        },
        "schemas": results.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string_pretty(&report)?;
    std::fs::write(path, text).with_context(|| format!("cannot write report {}", path.display()))
}

/// Lists the slowest mask steps over all schemas, slowest first (one per schema).
fn print_slowest(results: &[SchemaResult]) {
    let mut slow: Vec<(&SchemaResult, &SlowMask)> =
        results.iter().filter_map(|r| r.slowest.as_ref().map(|s| (r, s))).collect();
    if slow.is_empty() {
        return;
    }
    slow.sort_by_key(|(r, s)| (std::cmp::Reverse(s.ns), r.id.as_str()));
    outln!(
        "slowest mask steps (µs in the run, µs repeated warm; schema, instance, tokens before; cause; text before):"
    );
    for (r, s) in slow.iter().take(slowest::LISTED) {
        outln!(
            "  {:>9.1} {:>9.1}  {} #{} @{}  {}  {:?}",
            f64::from(s.ns) / 1000.0,
            f64::from(s.warm_ns) / 1000.0,
            r.id,
            s.instance,
            s.step,
            s.cause(),
            s.before
        );
    }
}

/// Finds the schema files: `dir` itself if it is a set folder (has `tests/`), else every
/// subfolder that is one. Sorted by set, then file name.
fn discover(dir: &Path) -> anyhow::Result<Vec<Job>> {
    let set_dirs: Vec<PathBuf> = if dir.join("tests").is_dir() {
        vec![dir.to_path_buf()]
    } else {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read directory {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("tests").is_dir())
            .collect();
        v.sort();
        v
    };
    if set_dirs.is_empty() {
        anyhow::bail!(
            "{} holds no benchmark sets: expected folders with `<name>.json` schemas and `tests/<name>.json` instances",
            dir.display()
        );
    }
    let mut jobs = Vec::new();
    for set_dir in set_dirs {
        let set = set_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| ".".into());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&set_dir)
            .with_context(|| format!("cannot read directory {}", set_dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for schema in files {
            let Some(name) = schema.file_name().map(|n| n.to_string_lossy().into_owned()) else { continue };
            let tests = set_dir.join("tests").join(&name);
            if tests.is_file() {
                jobs.push(Job { id: format!("{set}/{name}"), set: set.clone(), schema, tests });
            }
        }
    }
    Ok(jobs)
}

/// One test instance ready to replay.
struct Instance {
    /// Position in the test file's `tests` list.
    n: usize,
    valid: bool,
    tokens: Vec<TokenId>,
}

/// Evaluates one schema; `None` when it has no tests.
fn eval_schema(ctx: &Context, job: &Job, mask: &mut [u32], explained: &mut Vec<String>) -> Option<SchemaResult> {
    let mut r = SchemaResult { id: job.id.clone(), set: job.set.clone(), ..Default::default() };
    let tests = match constrain::limits::read_capped(&job.tests, ctx.limits.max_input_bytes)
        .map_err(|e| e.to_string())
        .and_then(|b| python_json::parse(b.as_bytes()).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            r.error = Some(("unreadable test file".into(), format!("{}: {e}", job.tests.display())));
            return Some(r);
        }
    };
    let Some(PyValue::Array(cases)) = tests.get("tests") else {
        r.error = Some(("unreadable test file".into(), format!("{}: no `tests` list", job.tests.display())));
        return Some(r);
    };
    if cases.is_empty() {
        return None;
    }
    r.tests = cases.len();

    // Serialise and tokenize every instance first (not timed).
    let vocab = ctx.index.vocab();
    let mut instances = Vec::with_capacity(cases.len());
    for (n, case) in cases.iter().enumerate() {
        match prepare_instance(ctx, vocab, &job.id, n, case) {
            Some(i) => instances.push(i),
            None => r.skipped_instances += 1,
        }
    }

    // Compile to first mask (the file is read before timing; parsing it is part of compiling).
    let schema_bytes = match &ctx.source {
        Source::Schemas(_) => match constrain::limits::read_capped(&job.schema, ctx.limits.max_input_bytes) {
            Ok(b) => b.into_bytes(),
            Err(e) => {
                r.error = Some(("unreadable schema".into(), format!("{}: {e}", job.schema.display())));
                return Some(r);
            }
        },
        Source::Gbnf(_) => Vec::new(),
    };
    let start = Instant::now();
    let constraint = match compile(ctx, job, &schema_bytes) {
        Ok((c, notes)) => {
            r.notes = notes;
            c
        }
        Err(e) => {
            r.error = Some(e);
            return Some(r);
        }
    };
    let first = constraint.matcher().fill_mask(mask);
    let ttfm = start.elapsed();
    if let Err(e) = first {
        r.error = Some((format!("matcher: {}", variant_name(&e)), format!("first mask: {e}")));
        return Some(r);
    }
    r.ttfm_ns = Some(ttfm.as_nanos().min(u64::MAX as u128) as u64);
    r.memory_bytes = Some(constraint.memory_usage());

    // The instance holding the slowest step so far: (its steps' range in `mask_ns`, its index).
    let mut slowest: Option<(std::ops::Range<usize>, usize)> = None;
    for (i, inst) in instances.iter().enumerate() {
        let start = r.mask_ns.len();
        let outcome = replay(&constraint, &inst.tokens, mask, &mut r.mask_ns);
        let max = |range: &std::ops::Range<usize>| r.mask_ns[range.clone()].iter().max().copied();
        if slowest.as_ref().is_none_or(|(range, _)| max(&(start..r.mask_ns.len())) > max(range)) {
            slowest = Some((start..r.mask_ns.len(), i));
        }
        let wrong = match outcome {
            Replay::Accepted => {
                if !inst.valid {
                    r.wrong_accepts += 1;
                }
                !inst.valid
            }
            Replay::Rejected => {
                if inst.valid {
                    r.wrong_rejects += 1;
                }
                inst.valid
            }
            Replay::Limit => {
                if inst.valid {
                    r.wrong_rejects += 1;
                    r.limit_hits += 1;
                }
                inst.valid
            }
            Replay::Inconsistent => {
                r.inconsistencies += 1;
                false
            }
            Replay::Error => {
                r.matcher_errors += 1;
                false
            }
        };
        if wrong && ctx.explain {
            explained.push(explain_verdict(&constraint, &ctx.source, job, inst));
        }
    }
    if let Some((range, i)) = slowest {
        let inst = &instances[i];
        r.slowest = SlowMask::find(&constraint, inst.n, &inst.tokens, &r.mask_ns[range], mask);
    }
    Some(r)
}

/// Serialises a test case like Python (its members shuffled under `--shuffle-keys`, seeded
/// with the schema `id` and the case's place `n`) and tokenizes it; `None` (instance skipped) when it cannot
/// be serialised or tokenized, or when its tokens' bytes do not spell the text (which would be
/// a vocabulary bug).
fn prepare_instance(ctx: &Context, vocab: &Vocabulary, id: &str, n: usize, case: &PyValue) -> Option<Instance> {
    let valid = match case.get("valid") {
        Some(PyValue::Bool(b)) => *b,
        _ => return None,
    };
    let data = case.get("data")?;
    let shuffled = ctx.shuffle_keys.map(|seed| {
        // The fuzzer's per-case generator, its seed mixed with an FNV-1a hash of the id: the
        // same order on every run and machine.
        let id_hash =
            id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        let mut data = data.clone();
        data.shuffle_members(&mut crate::fuzz::case_rng(seed ^ id_hash, n as u64));
        data
    });
    let text = python_json::dumps(shuffled.as_ref().unwrap_or(data)).ok()?;
    let encoding = ctx.tokenizer.encode(text.as_str(), false).ok()?;
    let tokens: Vec<TokenId> = encoding.get_ids().iter().map(|&id| TokenId(id)).collect();
    let spelled: Vec<u8> = tokens.iter().flat_map(|&t| vocab.token_bytes(t).iter().copied()).collect();
    if spelled != text.as_bytes() {
        return None;
    }
    Some(Instance { n, valid, tokens })
}

/// Compiles the job's schema text (or the GBNF) into a constraint, with the compiler's notes
/// on under-approximations; errors as (group, message).
fn compile(ctx: &Context, job: &Job, schema_bytes: &[u8]) -> Result<(Constraint, Vec<String>), (String, String)> {
    let mut notes = Vec::new();
    let grammar: Compiled = match &ctx.source {
        Source::Schemas(options) => {
            let value: serde_json::Value = serde_json::from_slice(schema_bytes)
                .map_err(|e| ("invalid schema JSON".to_string(), format!("{}: {e}", job.schema.display())))?;
            let compiled = schema::compile(&value, options).map_err(|e| {
                let kw = if e.keyword().is_empty() { "(no keyword)" } else { e.keyword() };
                (format!("keyword {kw}"), e.to_string())
            })?;
            notes = compiled.notes().iter().map(|n| n.to_string()).collect();
            compiled
        }
        Source::Gbnf(text) => constrain::grammar::gbnf::parse(text)
            .map(Compiled::from_grammar)
            .map_err(|e| (format!("gbnf: {}", variant_name(e.kind())), e.to_string()))?,
    };
    let c = Constraint::new(&grammar, ctx.index.clone(), &ctx.limits).map_err(|e| {
        let group = match &e {
            MatchError::Automaton(a) => format!("automaton: {}", variant_name(a)),
            other => format!("matcher: {}", variant_name(other)),
        };
        (group, e.to_string())
    })?;
    Ok((c, notes))
}

/// How replaying one instance ended.
enum Replay {
    /// Every token allowed and accepted, and EOS allowed at the end.
    Accepted,
    /// A token was masked out, or EOS was not allowed at the end.
    Rejected,
    /// The mask and the matcher disagreed (a bug).
    Inconsistent,
    /// The matcher failed (limit or internal error).
    Error,
    /// Refused after a parse limit cut a path ([`constrain::Matcher::hit_limit`]): no verdict.
    Limit,
}

/// `--explain`: one wrong verdict, located (see [`constrain::explain`]).
fn explain_verdict(constraint: &Constraint, source: &Source, job: &Job, inst: &Instance) -> String {
    let vocab = constraint.index().vocab();
    let bytes: Vec<u8> = inst.tokens.iter().flat_map(|&t| vocab.token_bytes(t).iter().copied()).collect();
    let e = constrain::explain::explain(constraint, &bytes, matches!(source, Source::Schemas(_)));
    let what = if inst.valid { "wrong reject" } else { "wrong accept" };
    let detail = if e.accepted() {
        let text = String::from_utf8_lossy(&bytes);
        let shown: String = text.chars().take(200).collect();
        let more = if shown.len() < text.len() { "…" } else { "" };
        format!("the constraint accepts the whole instance, which the schema rejects: {shown}{more}")
    } else {
        e.render_with(super::constraint_args::limit_flag)
    };
    format!("explain: {} instance {} ({what}): {detail}", job.id, inst.n)
}

/// Feeds `tokens` to a fresh matcher, timing each mask step into `times` (nanoseconds).
fn replay(constraint: &Constraint, tokens: &[TokenId], mask: &mut [u32], times: &mut Vec<u32>) -> Replay {
    let mut m = constraint.matcher();
    let ns = |t: Instant| t.elapsed().as_nanos().min(u32::MAX as u128) as u32;
    for &token in tokens {
        let t = Instant::now();
        let filled = m.fill_mask(mask);
        let allowed = filled.is_ok() && is_allowed(mask, token);
        let accepted = if allowed { Some(m.accept_token(token)) } else { None };
        times.push(ns(t));
        if let Err(e) = filled {
            return failed_fill(e);
        }
        match accepted {
            None if m.hit_limit() => return Replay::Limit,
            None => return Replay::Rejected,
            Some(Err(MatchError::Limit(_))) => return Replay::Limit,
            Some(Ok(())) => {}
            Some(Err(MatchError::Rejected(_))) => return Replay::Inconsistent,
            Some(Err(_)) => return Replay::Error,
        }
    }
    let t = Instant::now();
    let filled = m.fill_mask(mask);
    let eos = constraint.index().vocab().eos_tokens();
    let eos_allowed = filled.is_ok() && eos.iter().any(|&e| is_allowed(mask, e));
    times.push(ns(t));
    if let Err(e) = filled {
        return failed_fill(e);
    }
    if eos_allowed != m.is_accepting() {
        return Replay::Inconsistent;
    }
    if eos_allowed {
        Replay::Accepted
    } else if m.hit_limit() {
        Replay::Limit
    } else {
        Replay::Rejected
    }
}

/// The verdict when `fill_mask` fails: a budget running out is a limit hit, anything else
/// a matcher error.
fn failed_fill(e: MatchError) -> Replay {
    match e {
        MatchError::Limit(_) => Replay::Limit,
        _ => Replay::Error,
    }
}

/// The enum variant name from a `Debug` rendering (`TooLarge("x")` → `TooLarge`).
fn variant_name(e: &impl std::fmt::Debug) -> String {
    let s = format!("{e:?}");
    s.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("").to_string()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".into()
    }
}

fn ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_group_errors() {
        assert_eq!(variant_name(&MatchError::Rejected(3)), "Rejected");
        assert_eq!(variant_name(&constrain::automaton::Error::TooLarge("r".into())), "TooLarge");
        assert_eq!(variant_name(&MatchError::Finished), "Finished");
    }

    #[test]
    fn panic_payloads_become_messages() {
        let p = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "boom 1");
        let p = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "(non-string panic payload)");
    }
}

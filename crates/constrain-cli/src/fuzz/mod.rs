//! The differential fuzzer: random schemas, compiled by [`constrain::schema`], judged against
//! the `jsonschema` crate (draft 2020-12, formats asserted).
//!
//! Input: a seed (a [`rand::rngs::StdRng`] seeded from it reproduces every case) and budgets
//! ([`Config`]). Output: [`Stats`] and the [`Finding`]s, each minimized.
//!
//! Two oracles, for each generated schema that compiles:
//! 1. **Soundness** — random walks of the compiled constraint at the byte level (at each
//!    step a run of contiguous allowed bytes is picked uniformly, then a byte in it; the walk
//!    stops where the document may end, with a bounded length) must be JSON and validate.
//! 2. **Agreement** — values from [`gen::value`] (seeded with the schema's own names and
//!    constants) and mutations of the walks' documents, labelled by the validator: an invalid
//!    instance the constraint accepts is a failure; a valid one it refuses is a wrong reject
//!    (counted, not a failure).
//!
//! Both failures are the same fact — the constraint accepts a document the validator
//! rejects — so one predicate ([`Case::fails`]) drives minimization of both schema and
//! instance. Known oracle weaknesses are skipped and counted, never silently: numbers that
//! do not survive f64 (the `jsonschema` crate reads numbers as f64 here, see [`oracle_skip`]).
pub mod gen;

use constrain::explain::{explain, Verdict};
use constrain::matcher::Constraint;
use constrain::schema;
use constrain::Limits;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::sync::Arc;

/// Budgets of a fuzzing run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Random walks per compiled schema.
    pub walks: usize,
    /// Longest walk, in bytes (a walk that cannot end by then is dropped and counted).
    pub max_walk_len: usize,
    /// Generated instances per compiled schema (plus mutations of the walks).
    pub instances: usize,
    /// Nesting depth of generated schemas.
    pub max_depth: u32,
    /// Parse limits of the compiled constraints.
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        Config { walks: 8, max_walk_len: 400, instances: 16, max_depth: 3, limits: Limits::default() }
    }
}

/// Counters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Schemas generated.
    pub schemas: usize,
    /// Schemas the validator could not read (generator output that is not a schema).
    pub oracle_rejected_schemas: usize,
    /// Schemas that compiled.
    pub compiled: usize,
    /// Walks that ended where the constraint may end.
    pub walks: usize,
    /// Walks dropped: no end within the length bound.
    pub walks_cut: usize,
    /// Instances labelled and judged (generated and mutated).
    pub instances: usize,
    /// Valid instances the constraint refused (allowed: under-approximation).
    pub wrong_rejects: usize,
    /// Refusals after a parse limit cut a path.
    pub limit_hits: usize,
    /// Documents not judged because the oracle is known to be wrong there.
    pub oracle_skips: usize,
    /// Soundness failures: the constraint accepts a document the validator rejects.
    pub failures: usize,
}

impl Stats {
    /// Adds another run's counters.
    pub fn add(&mut self, o: &Stats) {
        self.schemas += o.schemas;
        self.oracle_rejected_schemas += o.oracle_rejected_schemas;
        self.compiled += o.compiled;
        self.walks += o.walks;
        self.walks_cut += o.walks_cut;
        self.instances += o.instances;
        self.wrong_rejects += o.wrong_rejects;
        self.limit_hits += o.limit_hits;
        self.oracle_skips += o.oracle_skips;
        self.failures += o.failures;
    }

    /// One line for a summary.
    pub fn summary(&self) -> String {
        format!(
            "schemas tried {}, compiled {}, unreadable by the oracle {}; walks {} (cut {}); instances {}; \
             wrong rejects {}; limit hits {}; oracle skips {}; soundness failures {}",
            self.schemas,
            self.compiled,
            self.oracle_rejected_schemas,
            self.walks,
            self.walks_cut,
            self.instances,
            self.wrong_rejects,
            self.limit_hits,
            self.oracle_skips,
            self.failures
        )
    }
}

/// Which oracle found a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A random walk of the constraint that the validator rejects.
    Walk,
    /// A generated or mutated instance the constraint accepts and the validator rejects.
    Agreement,
}

/// A soundness failure: the schema's constraint accepts `instance`, the validator does not.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The oracle that found it.
    pub kind: Kind,
    /// The seed of the schema's case (see [`case_rng`]).
    pub seed: u64,
    /// The (minimized) schema.
    pub schema: Value,
    /// The (minimized) document, as text.
    pub instance: String,
    /// The validator's first error on it.
    pub oracle_error: String,
}

impl Finding {
    /// The finding as the JSON stored in a findings directory (and replayed by the tests).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "kind": match self.kind { Kind::Walk => "walk", Kind::Agreement => "agreement" },
            "seed": self.seed,
            "schema": self.schema,
            "instance": self.instance,
            "matcher": "accepts",
            "oracle": "invalid",
            "oracle_error": self.oracle_error,
        })
    }
}

/// The validator for `schema` (draft 2020-12, formats asserted); `None` if it cannot read it.
pub fn oracle(schema: &Value) -> Option<jsonschema::Validator> {
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012).should_validate_formats(true).build(schema).ok()
}

/// Why the oracle cannot be trusted on `text`, if so: a number with more than 15 significant
/// digits or a large exponent (the `jsonschema` crate compares numbers as f64 here, so such a
/// number may round into or out of a bound or a `multipleOf`, or be read as infinity).
pub fn oracle_skip(text: &str) -> Option<&'static str> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < b.len() {
        let c = b[i];
        if in_string {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if c == b'-' || c.is_ascii_digit() {
            let start = i;
            while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                i += 1;
            }
            let num = &text[start..i];
            let (mantissa, exp) = match num.find(['e', 'E']) {
                Some(k) => (&num[..k], num[k + 1..].trim_start_matches('+').parse::<i64>().unwrap_or(i64::MAX)),
                None => (num, 0),
            };
            let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
            let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
            if significant > 15 || exp.abs() > 250 || digits.len() > 300 {
                return Some("number beyond f64 precision (the oracle reads numbers as f64)");
            }
            continue;
        }
        i += 1;
    }
    None
}

/// One schema under test: its constraint (byte level) and its validator.
pub struct Case {
    /// The schema.
    pub schema: Value,
    constraint: Constraint,
    validator: jsonschema::Validator,
}

/// The result of judging one document.
enum Judged {
    /// Both agree.
    Agree,
    /// The constraint refuses a valid document.
    WrongReject,
    /// Refused after a parse limit cut a path.
    Limit,
    /// Not judged (see [`oracle_skip`]).
    Skip,
    /// The constraint accepts an invalid document: the validator's error.
    Failure(String),
}

impl Case {
    /// Compiles `schema` (default options) and builds its validator; `Err(true)` when the
    /// validator cannot read the schema, `Err(false)` when the compiler refuses it.
    pub fn new(schema: Value, index: &Arc<constrain::TokenIndex>, limits: &Limits) -> Result<Case, bool> {
        let validator = oracle(&schema).ok_or(true)?;
        let grammar = schema::compile(&schema, &schema::Options::default()).map_err(|_| false)?;
        let constraint = Constraint::new(&grammar, index.clone(), limits).map_err(|_| false)?;
        Ok(Case { schema, constraint, validator })
    }

    /// Whether the constraint accepts `text` while the validator rejects it (a failure).
    pub fn fails(&self, text: &str) -> bool {
        matches!(self.judge(text), Judged::Failure(_))
    }

    fn judge(&self, text: &str) -> Judged {
        if oracle_skip(text).is_some() {
            return Judged::Skip;
        }
        let e = explain(&self.constraint, text.as_bytes(), false);
        let value: Option<Value> = serde_json::from_str(text).ok();
        let accepted = e.verdict == Verdict::Accepted;
        if accepted && value.is_none() {
            return Judged::Failure("the constraint accepts text that is not JSON".into());
        }
        let Some(value) = value else { return Judged::Agree };
        let valid = self.validator.is_valid(&value);
        match (accepted, valid) {
            (true, false) => {
                let first =
                    self.validator.iter_errors(&value).next().map(|e| format!("{} at {}", e, e.instance_path()));
                Judged::Failure(first.unwrap_or_default())
            }
            (false, true) if matches!(e.verdict, Verdict::Limit(_)) => Judged::Limit,
            (false, true) => Judged::WrongReject,
            _ => Judged::Agree,
        }
    }

    /// A random walk of the constraint: `None` when it cannot end within `max_len` bytes.
    pub fn walk(&self, rng: &mut StdRng, max_len: usize) -> Option<Vec<u8>> {
        let mut m = self.constraint.matcher();
        let mut out = Vec::new();
        let mut runs: Vec<(u8, u8)> = Vec::new();
        loop {
            let may_end = m.is_accepting();
            // Ending gets more likely as the walk grows.
            if may_end
                && (out.len() >= max_len || rng.random_bool(0.25 + 0.5 * (out.len() as f64 / max_len as f64).min(1.0)))
            {
                return Some(out);
            }
            if out.len() >= max_len * 2 {
                return None;
            }
            runs.clear();
            let mut b = 0u32;
            while b < 256 {
                if m.accept_bytes(&[b as u8]).is_ok() {
                    let _ = m.rollback(1);
                    match runs.last_mut() {
                        Some(r) if r.1 as u32 + 1 == b => r.1 = b as u8,
                        _ => runs.push((b as u8, b as u8)),
                    }
                }
                b += 1;
            }
            if runs.is_empty() {
                return if may_end { Some(out) } else { None };
            }
            let (lo, hi) = runs[rng.random_range(0..runs.len())];
            // Past the bound, prefer closing bytes to steer towards an end.
            let byte = if out.len() >= max_len {
                let closers: Vec<u8> = runs
                    .iter()
                    .flat_map(|&(l, h)| l..=h)
                    .filter(|c| matches!(c, b'"' | b']' | b'}' | b'0'..=b'9'))
                    .collect();
                if closers.is_empty() {
                    rng.random_range(lo..=hi)
                } else {
                    closers[rng.random_range(0..closers.len())]
                }
            } else {
                rng.random_range(lo..=hi)
            };
            if m.accept_bytes(&[byte]).is_err() {
                return None;
            }
            out.push(byte);
        }
    }
}

/// The RNG of case `n` of a run seeded with `seed`: each case is reproducible alone.
pub fn case_rng(seed: u64, n: u64) -> StdRng {
    StdRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(n))
}

/// Runs one case (schema number `n` of the run `seed`): generates, compiles, walks, judges.
/// Findings are minimized.
pub fn run_case(
    seed: u64,
    n: u64,
    cfg: &Config,
    index: &Arc<constrain::TokenIndex>,
    stats: &mut Stats,
) -> Vec<Finding> {
    let case_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(n);
    let mut rng = case_rng(seed, n);
    let schema = gen::schema(&mut rng, cfg.max_depth);
    stats.schemas += 1;
    let case = match Case::new(schema, index, &cfg.limits) {
        Ok(c) => c,
        Err(true) => {
            stats.oracle_rejected_schemas += 1;
            return Vec::new();
        }
        Err(false) => return Vec::new(),
    };
    stats.compiled += 1;
    let mut findings: Vec<Finding> = Vec::new();
    let record = |kind: Kind, text: String, err: String, stats: &mut Stats, findings: &mut Vec<Finding>| {
        stats.failures += 1;
        if findings.len() < 2 {
            let (schema, instance) = minimize(&case, &text, index, &cfg.limits);
            let err = oracle(&schema)
                .and_then(|v| {
                    let value: Value = serde_json::from_str(&instance).ok()?;
                    let first = v.iter_errors(&value).next().map(|e| format!("{} at {}", e, e.instance_path()));
                    first
                })
                .unwrap_or(err);
            findings.push(Finding { kind, seed: case_seed, schema, instance, oracle_error: err });
        }
    };
    let mut valid_docs: Vec<Value> = Vec::new();
    for _ in 0..cfg.walks {
        let Some(bytes) = case.walk(&mut rng, cfg.max_walk_len) else {
            stats.walks_cut += 1;
            continue;
        };
        stats.walks += 1;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match case.judge(&text) {
            Judged::Failure(e) => record(Kind::Walk, text, e, stats, &mut findings),
            Judged::Skip => stats.oracle_skips += 1,
            _ => {
                if let Ok(v) = serde_json::from_str(&text) {
                    valid_docs.push(v);
                }
            }
        }
    }
    let hints = gen::Hints::of(&case.schema);
    for k in 0..cfg.instances {
        let value = if !valid_docs.is_empty() && k % 2 == 0 {
            let base = &valid_docs[rng.random_range(0..valid_docs.len())];
            gen::mutate(&mut rng, base, &hints)
        } else {
            gen::value(&mut rng, 3, &hints)
        };
        let Ok(text) = serde_json::to_string(&value) else { continue };
        stats.instances += 1;
        match case.judge(&text) {
            Judged::Failure(e) => record(Kind::Agreement, text, e, stats, &mut findings),
            Judged::WrongReject => stats.wrong_rejects += 1,
            Judged::Limit => stats.limit_hits += 1,
            Judged::Skip => stats.oracle_skips += 1,
            Judged::Agree => {}
        }
    }
    findings
}

/// Shrinks the schema, then the instance, while the constraint still accepts the instance
/// and the validator still rejects it. Bounded: at most a few hundred compilations.
pub fn minimize(case: &Case, text: &str, index: &Arc<constrain::TokenIndex>, limits: &Limits) -> (Value, String) {
    let mut schema = case.schema.clone();
    let mut instance = text.to_string();
    // A compact rendering first, if it still fails.
    if let Ok(v) = serde_json::from_str::<Value>(&instance) {
        if let Ok(compact) = serde_json::to_string(&v) {
            if case.fails(&compact) {
                instance = compact;
            }
        }
    }
    let still_fails = |s: &Value, t: &str| Case::new(s.clone(), index, limits).map(|c| c.fails(t)).unwrap_or(false);
    let mut budget = 400usize;
    let mut progress = true;
    while progress && budget > 0 {
        progress = false;
        for cand in gen::shrink_value(&schema, true) {
            if budget == 0 {
                break;
            }
            budget -= 1;
            if still_fails(&cand, &instance) {
                schema = cand;
                progress = true;
                break;
            }
        }
    }
    let Ok(final_case) = Case::new(schema.clone(), index, limits) else { return (schema, instance) };
    let mut progress = true;
    while progress && budget > 0 {
        progress = false;
        let Ok(v) = serde_json::from_str::<Value>(&instance) else { break };
        for cand in gen::shrink_value(&v, false) {
            if budget == 0 {
                break;
            }
            budget -= 1;
            let Ok(t) = serde_json::to_string(&cand) else { continue };
            if final_case.fails(&t) {
                instance = t;
                progress = true;
                break;
            }
        }
    }
    (schema, instance)
}

/// Replays a stored finding: whether the constraint still accepts the instance and the
/// validator still rejects it (`None` when the schema no longer compiles, or the oracle
/// cannot judge it).
pub fn replay(finding: &Value, index: &Arc<constrain::TokenIndex>) -> Option<bool> {
    let schema = finding.get("schema")?.clone();
    let instance = finding.get("instance")?.as_str()?;
    let case = Case::new(schema, index, &Limits::default()).ok()?;
    Some(case.fails(instance))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oracle_skips_numbers_beyond_f64() {
        assert!(oracle_skip("[1, 2.5, -3e10, \"123456789012345678\"]").is_none());
        assert!(oracle_skip("12345678901234567890").is_some());
        assert!(oracle_skip("{\"a\": 1e400}").is_some());
        assert!(oracle_skip("0.10000000000000000001").is_some());
    }
}

//! Aggregates for `constrain eval`: per-set and total counts, timing percentiles, the text
//! table and the JSON report.
//!
//! Input: one [`SchemaResult`] per evaluated schema. Output: [`Summary`] values (one per set
//! and one for everything) that print as a table row and serialise to the report's fixed
//! key set.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// What happened to one schema.
#[derive(Clone, Debug, Default)]
pub(crate) struct SchemaResult {
    /// `set/name.json`, relative to the evaluated directory.
    pub id: String,
    /// The set (subset folder) name.
    pub set: String,
    /// Test instances of the schema.
    pub tests: usize,
    /// `None` when compiled; otherwise (error group, message).
    pub error: Option<(String, String)>,
    /// Compile + first mask, nanoseconds (compiled schemas only).
    pub ttfm_ns: Option<u64>,
    /// Time of each mask step (fill + check + accept), nanoseconds.
    pub mask_ns: Vec<u32>,
    pub wrong_accepts: usize,
    pub wrong_rejects: usize,
    /// Matcher errors other than a rejected token (limits, internal errors).
    pub matcher_errors: usize,
    /// The mask allowed a token that `accept_token` then refused, or EOS-in-mask disagreed
    /// with `is_accepting()`: matcher inconsistencies (bugs).
    pub inconsistencies: usize,
    /// Instances whose token bytes did not spell the serialised text (vocabulary bug), or that
    /// could not be serialised / tokenized; they are skipped.
    pub skipped_instances: usize,
    /// Valid instances refused after a parse limit cut a path (also in `wrong_rejects`).
    pub limit_hits: usize,
    /// Compiled automaton size in bytes.
    pub memory_bytes: Option<usize>,
    /// The schema evaluation panicked (a bug); the message.
    pub panic: Option<String>,
    /// The compiler's notes on where the constraint accepts less than the schema
    /// (`pointer: message`).
    pub notes: Vec<String>,
    /// The slowest mask step over the schema's instances.
    pub slowest: Option<super::slowest::SlowMask>,
}

impl SchemaResult {
    /// Compiled and every test right, with no matcher error or panic, and at least one
    /// instance actually run (a schema whose instances were all skipped proves nothing).
    pub fn passing(&self) -> bool {
        self.skipped_instances < self.tests.max(1)
            && self.error.is_none()
            && self.panic.is_none()
            && self.wrong_accepts == 0
            && self.wrong_rejects == 0
            && self.matcher_errors == 0
            && self.inconsistencies == 0
    }

    /// The per-schema record of the JSON report.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("id".into(), json!(self.id));
        o.insert("compiled".into(), json!(self.error.is_none() && self.panic.is_none()));
        if let Some(msg) = &self.panic {
            o.insert("error".into(), json!(format!("internal panic: {msg}")));
        } else if let Some((group, msg)) = &self.error {
            o.insert("error".into(), json!(msg));
            o.insert("error_group".into(), json!(group));
        }
        o.insert("tests".into(), json!(self.tests));
        o.insert("ttfm_us".into(), json!(self.ttfm_ns.map(us)));
        o.insert("masks".into(), json!(self.mask_ns.len()));
        let mean = mean_ns(&self.mask_ns);
        o.insert("mask_mean_us".into(), json!(mean.map(|m| round3(m / 1000.0))));
        o.insert("mask_max_us".into(), json!(self.mask_ns.iter().max().map(|&m| us(m as u64))));
        o.insert("wrong_accepts".into(), json!(self.wrong_accepts));
        o.insert("wrong_rejects".into(), json!(self.wrong_rejects));
        o.insert("passing".into(), json!(self.passing()));
        if self.matcher_errors > 0 {
            o.insert("matcher_errors".into(), json!(self.matcher_errors));
        }
        if self.inconsistencies > 0 {
            o.insert("inconsistencies".into(), json!(self.inconsistencies));
        }
        if !self.notes.is_empty() {
            o.insert("notes".into(), json!(self.notes));
        }
        if self.limit_hits > 0 {
            o.insert("limit_hits".into(), json!(self.limit_hits));
        }
        if self.skipped_instances > 0 {
            o.insert("skipped_instances".into(), json!(self.skipped_instances));
        }
        o.insert("memory_bytes".into(), json!(self.memory_bytes));
        if let Some(s) = &self.slowest {
            o.insert("slowest_mask".into(), s.to_json());
        }
        Value::Object(o)
    }
}

/// Aggregate over a set of schemas.
#[derive(Clone, Debug, Default)]
pub(crate) struct Summary {
    pub schemas: usize,
    pub compiled: usize,
    pub passing: usize,
    pub wrong_accepts: usize,
    pub wrong_rejects: usize,
    pub matcher_errors: usize,
    pub inconsistencies: usize,
    pub skipped_instances: usize,
    /// Valid instances refused after a parse limit cut a path (also in `wrong_rejects`).
    pub limit_hits: usize,
    pub panics: usize,
    /// Compiled schemas with notes on under-approximations.
    pub with_notes: usize,
    /// Compile-error group → count.
    pub errors: BTreeMap<String, usize>,
    mask_ns: Vec<u32>,
    ttfm_ns: Vec<u64>,
    memory: Vec<usize>,
}

impl Summary {
    /// Adds one schema's outcome.
    pub fn add(&mut self, r: &SchemaResult) {
        self.schemas += 1;
        if r.error.is_none() && r.panic.is_none() {
            self.compiled += 1;
        }
        if r.passing() {
            self.passing += 1;
        }
        self.wrong_accepts += r.wrong_accepts;
        self.wrong_rejects += r.wrong_rejects;
        self.matcher_errors += r.matcher_errors;
        self.inconsistencies += r.inconsistencies;
        self.skipped_instances += r.skipped_instances;
        if !r.notes.is_empty() {
            self.with_notes += 1;
        }
        self.limit_hits += r.limit_hits;
        if r.panic.is_some() {
            self.panics += 1;
            *self.errors.entry("internal panic".into()).or_default() += 1;
        } else if let Some((group, _)) = &r.error {
            *self.errors.entry(group.clone()).or_default() += 1;
        }
        self.mask_ns.extend_from_slice(&r.mask_ns);
        self.ttfm_ns.extend(r.ttfm_ns);
        self.memory.extend(r.memory_bytes);
    }

    /// Sorts the samples; call once before reading percentiles.
    pub fn finish(&mut self) {
        self.mask_ns.sort_unstable();
        self.ttfm_ns.sort_unstable();
        self.memory.sort_unstable();
    }

    /// Mask steps measured.
    pub fn tokens(&self) -> usize {
        self.mask_ns.len()
    }

    fn mask_pct(&self, p: f64) -> Option<f64> {
        percentile(&self.mask_ns, p).map(|v| us(v as u64))
    }

    fn ttfm_pct(&self, p: f64) -> Option<f64> {
        percentile(&self.ttfm_ns, p).map(us)
    }

    fn memory_pct(&self, p: f64) -> Option<usize> {
        percentile(&self.memory, p)
    }

    /// The report object with exactly the keys the benchmark protocol fixes.
    pub fn to_json(&self) -> Value {
        json!({
            "schemas": self.schemas,
            "compiled": self.compiled,
            "passing": self.passing,
            "wrong_accepts": self.wrong_accepts,
            "wrong_rejects": self.wrong_rejects,
            "tokens": self.tokens(),
            "mask_mean_us": mean_ns(&self.mask_ns).map(|m| round3(m / 1000.0)),
            "mask_p50_us": self.mask_pct(0.50),
            "mask_p99_us": self.mask_pct(0.99),
            "mask_p999_us": self.mask_pct(0.999),
            "mask_max_us": self.mask_pct(1.0),
            "ttfm_p50_us": self.ttfm_pct(0.50),
            "ttfm_p99_us": self.ttfm_pct(0.99),
        })
    }

    /// Everything else worth keeping: error groups, bug counters, memory.
    pub fn details_json(&self) -> Value {
        json!({
            "compile_errors": self.errors,
            "panics": self.panics,
            "matcher_errors": self.matcher_errors,
            "inconsistencies": self.inconsistencies,
            "skipped_instances": self.skipped_instances,
            "schemas_with_notes": self.with_notes,
            "limit_hits": self.limit_hits,
            "memory_p50_bytes": self.memory_pct(0.50),
            "memory_max_bytes": self.memory_pct(1.0),
        })
    }

    /// Column headers matching [`Summary::table_row`].
    pub fn table_header() -> String {
        format!(
            "{:<16} {:>7} {:>8} {:>8} {:>6} {:>6} {:>9} {:>8} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
            "set",
            "schemas",
            "compiled",
            "passing",
            "w.acc",
            "w.rej",
            "tokens",
            "mean µs",
            "p50",
            "p99",
            "p99.9",
            "max",
            "ttfm p50",
            "ttfm p99",
            "mem p50",
            "mem max"
        )
    }

    /// One line of the stdout table.
    pub fn table_row(&self, name: &str) -> String {
        let t = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        let m = |v: Option<usize>| v.map_or("-".to_string(), human_bytes);
        format!(
            "{:<16} {:>7} {:>8} {:>8} {:>6} {:>6} {:>9} {:>8} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}",
            name,
            self.schemas,
            self.compiled,
            self.passing,
            self.wrong_accepts,
            self.wrong_rejects,
            self.tokens(),
            t(mean_ns(&self.mask_ns).map(|m| m / 1000.0)),
            t(self.mask_pct(0.50)),
            t(self.mask_pct(0.99)),
            t(self.mask_pct(0.999)),
            t(self.mask_pct(1.0)),
            t(self.ttfm_pct(0.50)),
            t(self.ttfm_pct(0.99)),
            m(self.memory_pct(0.50)),
            m(self.memory_pct(1.0)),
        )
    }
}

/// Nearest-rank percentile of sorted samples (`p` in 0..=1); `None` when empty.
pub(crate) fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

fn mean_ns(samples: &[u32]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    Some(samples.iter().map(|&s| s as f64).sum::<f64>() / samples.len() as f64)
}

fn us(ns: u64) -> f64 {
    round3(ns as f64 / 1000.0)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn human_bytes(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{:.1}M", b as f64 / (1 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1}K", b as f64 / 1024.0)
    } else {
        format!("{b}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u32> = (1..=1000).collect();
        assert_eq!(percentile(&v, 0.5), Some(500));
        assert_eq!(percentile(&v, 0.99), Some(990));
        assert_eq!(percentile(&v, 0.999), Some(999));
        assert_eq!(percentile(&v, 1.0), Some(1000));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile::<u32>(&[], 0.5), None);
        assert_eq!(percentile(&[7u32], 0.99), Some(7));
    }

    #[test]
    fn summary_counts_and_fixed_keys() {
        let mut s = Summary::default();
        s.add(&SchemaResult { mask_ns: vec![1000, 3000], ttfm_ns: Some(5000), tests: 1, ..Default::default() });
        s.add(&SchemaResult { error: Some(("not".into(), "/not: unsupported".into())), ..Default::default() });
        s.add(&SchemaResult { wrong_rejects: 1, mask_ns: vec![2000], ttfm_ns: Some(1000), ..Default::default() });
        s.finish();
        let j = s.to_json();
        let keys: Vec<&str> = j.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "schemas",
                "compiled",
                "passing",
                "wrong_accepts",
                "wrong_rejects",
                "tokens",
                "mask_mean_us",
                "mask_p50_us",
                "mask_p99_us",
                "mask_p999_us",
                "mask_max_us",
                "ttfm_p50_us",
                "ttfm_p99_us"
            ]
        );
        assert_eq!((s.schemas, s.compiled, s.passing, s.wrong_rejects, s.tokens()), (3, 2, 1, 1, 3));
        assert_eq!(j["mask_mean_us"], json!(2.0));
        assert_eq!(j["mask_p50_us"], json!(2.0));
        assert_eq!(j["mask_max_us"], json!(3.0));
        assert_eq!(j["ttfm_p50_us"], json!(1.0));
        assert_eq!(s.errors.get("not"), Some(&1));
    }
}

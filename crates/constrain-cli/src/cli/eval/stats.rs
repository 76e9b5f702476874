//! Aggregates for `constrain eval`: per-set and total counts, timing percentiles, the text
//! table and the JSON report.
//!
//! Input: one [`SchemaResult`] per evaluated schema. Output: an [`Aggregate`] of [`Summary`]
//! values (one per set and one for everything) that print as a table row and serialise to
//! the report's fixed key set. Mask times are kept once, by set: a schema's samples move
//! into its set's summary, and the total reads the sets' sorted samples in place
//! ([`Samples`]). Copying the 3.9M samples of full JSONSchemaBench per set and again for
//! the total cost 33 MB of the run's peak resident memory (68 MB with `--json-report`,
//! whose report aggregated everything again every second).

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
    /// Time of each mask step (fill + check + accept), nanoseconds, while the schema is
    /// evaluated; [`Aggregate::add`] moves them to the schema's set and leaves [`Self::masks`].
    pub mask_ns: Vec<u32>,
    /// Count, sum and largest of the mask times (set by [`Aggregate::add`]).
    pub masks: MaskTimes,
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
        o.insert("masks".into(), json!(self.masks.count));
        o.insert("mask_mean_us".into(), json!(self.masks.mean_ns().map(|m| round3(m / 1000.0))));
        o.insert("mask_max_us".into(), json!(self.masks.max_ns.map(|m| us(m as u64))));
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

/// The count, sum and largest of some mask times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MaskTimes {
    pub count: usize,
    pub sum_ns: u64,
    pub max_ns: Option<u32>,
}

impl MaskTimes {
    /// Those of `samples`.
    pub fn of(samples: &[u32]) -> MaskTimes {
        MaskTimes {
            count: samples.len(),
            sum_ns: samples.iter().map(|&s| s as u64).sum(),
            max_ns: samples.iter().max().copied(),
        }
    }

    fn add(&mut self, other: MaskTimes) {
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }
}

/// Sorted samples held in one or more sorted runs, read in place: nearest-rank percentiles
/// over their union without merging them (the total's runs are the sets' samples).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Samples<'a> {
    runs: &'a [&'a [u32]],
}

impl Samples<'_> {
    fn len(&self) -> usize {
        self.runs.iter().map(|r| r.len()).sum()
    }

    /// How many samples are at most `v`.
    fn count_at_most(&self, v: u32) -> usize {
        self.runs.iter().map(|r| r.partition_point(|&x| x <= v)).sum()
    }

    /// [`percentile`] of the union: the smallest sample with at least the rank's number of
    /// samples at or below it, found by bisecting the values (32 steps at most).
    pub fn percentile(&self, p: f64) -> Option<u32> {
        let len = self.len();
        let top = self.runs.iter().filter_map(|r| r.last()).max().copied()?;
        let rank = nearest_rank(len, p);
        let (mut lo, mut hi) = (0u32, top);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.count_at_most(mid) >= rank {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(lo)
    }
}

/// The per-set summaries and their total, kept as schemas finish.
#[derive(Debug, Default)]
pub(crate) struct Aggregate {
    pub sets: BTreeMap<String, Summary>,
    pub total: Summary,
}

impl Aggregate {
    /// Adds one schema's outcome, moving its mask times into its set's summary (`r` keeps
    /// their [`MaskTimes`]).
    pub fn add(&mut self, r: &mut SchemaResult) {
        r.masks = MaskTimes::of(&r.mask_ns);
        let samples = std::mem::take(&mut r.mask_ns);
        self.total.add(r);
        let set = self.sets.entry(r.set.clone()).or_default();
        set.add(r);
        set.mask_ns.extend(samples);
    }

    /// Sorts the samples; call before reading percentiles (again after more were added:
    /// the sorted part is merged with the new one, not sorted anew).
    pub fn finish(&mut self) {
        for s in self.sets.values_mut() {
            s.finish();
        }
        self.total.finish();
    }

    /// The sets' mask-time runs, for the total's [`Samples`].
    pub fn runs(&self) -> Vec<&[u32]> {
        self.sets.values().map(|s| s.mask_ns.as_slice()).collect()
    }
}

/// Aggregate over a set of schemas. A set's summary holds its schemas' mask times; the
/// total's holds none and is read with the sets' ([`Aggregate::runs`]).
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
    masks: MaskTimes,
    ttfm_ns: Vec<u64>,
    memory: Vec<usize>,
}

impl Summary {
    /// Adds one schema's counts and times, but its mask samples (see [`Aggregate::add`]).
    fn add(&mut self, r: &SchemaResult) {
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
        self.masks.add(r.masks);
        self.ttfm_ns.extend(r.ttfm_ns);
        self.memory.extend(r.memory_bytes);
    }

    /// Sorts the samples (a stable sort: it merges a sorted part with what was added since).
    fn finish(&mut self) {
        self.mask_ns.sort();
        self.ttfm_ns.sort_unstable();
        self.memory.sort_unstable();
    }

    /// Mask steps measured.
    pub fn tokens(&self) -> usize {
        self.masks.count
    }

    /// This summary's own mask times, sorted by [`Summary::finish`] (a set's).
    pub fn own_runs(&self) -> [&[u32]; 1] {
        [&self.mask_ns]
    }

    fn ttfm_pct(&self, p: f64) -> Option<f64> {
        percentile(&self.ttfm_ns, p).map(us)
    }

    fn memory_pct(&self, p: f64) -> Option<usize> {
        percentile(&self.memory, p)
    }

    /// The report object with exactly the keys the benchmark protocol fixes; `runs` are the
    /// summary's mask times ([`Summary::own_runs`], or [`Aggregate::runs`] for the total).
    pub fn to_json(&self, runs: &[&[u32]]) -> Value {
        let masks = Samples { runs };
        let pct = |p| masks.percentile(p).map(|v| us(v as u64));
        json!({
            "schemas": self.schemas,
            "compiled": self.compiled,
            "passing": self.passing,
            "wrong_accepts": self.wrong_accepts,
            "wrong_rejects": self.wrong_rejects,
            "tokens": self.tokens(),
            "mask_mean_us": self.masks.mean_ns().map(|m| round3(m / 1000.0)),
            "mask_p50_us": pct(0.50),
            "mask_p99_us": pct(0.99),
            "mask_p999_us": pct(0.999),
            "mask_max_us": self.masks.max_ns.map(|m| us(m as u64)),
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

    /// One line of the stdout table; `runs` as for [`Summary::to_json`].
    pub fn table_row(&self, name: &str, runs: &[&[u32]]) -> String {
        let masks = Samples { runs };
        let pct = |p| masks.percentile(p).map(|v| us(v as u64));
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
            t(self.masks.mean_ns().map(|m| m / 1000.0)),
            t(pct(0.50)),
            t(pct(0.99)),
            t(pct(0.999)),
            t(self.masks.max_ns.map(|m| us(m as u64))),
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
    sorted.get(nearest_rank(sorted.len(), p) - 1).copied()
}

/// The rank (from 1) of the `p` percentile among `len` samples (`len` ≥ 1).
fn nearest_rank(len: usize, p: f64) -> usize {
    ((p * len as f64).ceil() as usize).clamp(1, len)
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

    /// Percentiles over several sorted runs equal those of their merged samples.
    #[test]
    fn percentiles_over_runs_equal_the_merged_ones() {
        // A fixed linear congruential sequence: runs of uneven sizes, repeated values.
        let mut x: u64 = 7;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 40) as u32 % 5000
        };
        let mut runs: Vec<Vec<u32>> =
            [0usize, 1, 17, 400, 3].iter().map(|&n| (0..n).map(|_| next()).collect()).collect();
        runs.iter_mut().for_each(|r| r.sort());
        let mut merged: Vec<u32> = runs.concat();
        merged.sort();
        let views: Vec<&[u32]> = runs.iter().map(Vec::as_slice).collect();
        let samples = Samples { runs: &views };
        for p in [0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(samples.percentile(p), percentile(&merged, p), "p = {p}");
        }
        assert_eq!(Samples { runs: &[&[], &[]] }.percentile(0.5), None);
    }

    #[test]
    fn summary_counts_and_fixed_keys() {
        let mut agg = Aggregate::default();
        let mut results = [
            SchemaResult { mask_ns: vec![1000, 3000], ttfm_ns: Some(5000), tests: 1, ..Default::default() },
            SchemaResult { error: Some(("not".into(), "/not: unsupported".into())), ..Default::default() },
            SchemaResult { wrong_rejects: 1, mask_ns: vec![2000], ttfm_ns: Some(1000), ..Default::default() },
        ];
        results.iter_mut().for_each(|r| agg.add(r));
        agg.finish();
        assert!(results.iter().all(|r| r.mask_ns.is_empty()));
        assert_eq!(results[0].masks, MaskTimes { count: 2, sum_ns: 4000, max_ns: Some(3000) });
        let s = &agg.total;
        let j = s.to_json(&agg.runs());
        assert_eq!(j, agg.sets[""].to_json(&agg.sets[""].own_runs()));
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

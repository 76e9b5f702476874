//! Where the mask tail comes from: each schema's slowest mask step, with where it happened
//! and a first diagnosis, and the process's peak resident memory.
//!
//! A mean hides the steps that stall a batch. For each schema, `eval` keeps its slowest step
//! ([`SlowMask`]: the instance, the token position and the text before it) and then times
//! that step once more on a fresh matcher, warm: the mask cache now holds what the first
//! walk built. A step that is fast the second time was slow because it walked a state for the
//! first time (its cost is the walk, paid once per state and tokenizer); one that stays slow
//! costs that much every time (a run-time check per candidate token, or a walk the cache
//! cannot keep). The end of the run lists the slowest steps over all schemas.

use constrain::mask::is_allowed;
use constrain::{Constraint, TokenId};
use serde_json::{json, Value};
use std::time::Instant;

/// How many of the slowest steps the summary lists.
pub(crate) const LISTED: usize = 10;

/// Bytes of output text shown before a slow step.
const CONTEXT_BYTES: usize = 40;

/// One schema's slowest mask step.
#[derive(Clone, Debug)]
pub(crate) struct SlowMask {
    /// Nanoseconds of the step as measured in the run (fill + check + accept).
    pub ns: u32,
    /// The same step repeated once on a fresh matcher after the run, nanoseconds.
    pub warm_ns: u32,
    /// The instance's place in the test file.
    pub instance: usize,
    /// Tokens accepted before the step.
    pub step: usize,
    /// The end of the text before the step (lossy UTF-8).
    pub before: String,
    /// Whether the constraint has run-time checks.
    pub checked: bool,
}

impl SlowMask {
    /// The step at `step` of an instance whose steps took `times` ns; `None` when `times` is
    /// empty. Re-times the step warm on a fresh matcher.
    pub(crate) fn find(
        constraint: &Constraint,
        instance: usize,
        tokens: &[TokenId],
        times: &[u32],
        mask: &mut [u32],
    ) -> Option<SlowMask> {
        let (step, &ns) = times.iter().enumerate().max_by_key(|&(i, &t)| (t, std::cmp::Reverse(i)))?;
        let vocab = constraint.index().vocab();
        let before: Vec<u8> =
            tokens[..step.min(tokens.len())].iter().flat_map(|&t| vocab.token_bytes(t)).copied().collect();
        let tail = &before[before.len().saturating_sub(CONTEXT_BYTES)..];
        Some(SlowMask {
            ns,
            warm_ns: retime(constraint, &tokens[..step.min(tokens.len())], tokens.get(step).copied(), mask),
            instance,
            step,
            before: String::from_utf8_lossy(tail).into_owned(),
            checked: constraint.checks().is_some(),
        })
    }

    /// The first diagnosis: a walk paid once per state, or work paid at every visit.
    pub(crate) fn cause(&self) -> &'static str {
        if u64::from(self.warm_ns) * 4 < u64::from(self.ns) {
            "first walk of this state (cached after)"
        } else if self.checked {
            "every visit (run-time checks, or a walk the cache does not keep)"
        } else {
            "every visit (a walk the cache does not keep)"
        }
    }

    /// The record in the JSON report.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "us": f64::from(self.ns) / 1000.0,
            "warm_us": f64::from(self.warm_ns) / 1000.0,
            "instance": self.instance,
            "step": self.step,
            "before": self.before,
            "cause": self.cause(),
        })
    }
}

/// Times fill + check + accept of `next` (or the end's fill when `None`) after `prefix`, on
/// a fresh matcher; `u32::MAX` ns when the prefix no longer replays (not expected: the run
/// just accepted it).
fn retime(constraint: &Constraint, prefix: &[TokenId], next: Option<TokenId>, mask: &mut [u32]) -> u32 {
    let mut m = constraint.matcher();
    if prefix.iter().any(|&t| m.fill_mask(mask).is_err() || m.accept_token(t).is_err()) {
        return u32::MAX;
    }
    let t = Instant::now();
    if m.fill_mask(mask).is_ok() {
        if let Some(next) = next.filter(|&n| is_allowed(mask, n)) {
            let _ = m.accept_token(next);
        }
    }
    t.elapsed().as_nanos().min(u128::from(u32::MAX)) as u32
}

/// The process's peak resident memory in bytes (Linux `VmHWM`), or `None` where the kernel
/// does not say.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow(ns: u32, warm_ns: u32, checked: bool) -> SlowMask {
        SlowMask { ns, warm_ns, instance: 0, step: 0, before: String::new(), checked }
    }

    #[test]
    fn a_step_fast_when_repeated_was_a_first_walk() {
        assert_eq!(slow(40_000, 9_000, true).cause(), "first walk of this state (cached after)");
        assert!(slow(40_000, 10_000, true).cause().starts_with("every visit (run-time checks"));
        assert_eq!(slow(40_000, 30_000, false).cause(), "every visit (a walk the cache does not keep)");
        // A prefix that no longer replays (u32::MAX) never reads as cached.
        assert!(slow(40_000, u32::MAX, false).cause().starts_with("every visit"));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_peak_is_read_on_linux() {
        let peak = peak_rss_bytes().unwrap_or(0);
        assert!(peak > 1 << 20, "{peak}");
    }
}

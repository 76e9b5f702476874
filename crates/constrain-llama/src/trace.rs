//! A per-step trace of what the grammar mask did ([`GeneratorSettings::trace`]): for every
//! output token, how many tokens the mask allowed, how much of the model's probability it
//! took away, the entropy before and after, and where the chosen token stood among all
//! tokens; plus a line where closing mode began and one per backtrack.
//!
//! The numbers describe the *model's* distribution, not the sampler's: softmax of the raw
//! logits (before the mask, the order hint's and soft closing's bonuses, penalties,
//! temperature and truncation), i.e. at temperature 1 with no warper. The mask is the one the
//! token was finally drawn under: the grammar's, narrowed by closing mode and by backtracks'
//! bans. Everything is computed in `f64` with the maximum subtracted first.
//!
//! Forced tokens (jump-forward) are fed without sampling and without their step's logits at
//! hand, so they have `allowed` 1 and `null` for the probability numbers and the rank.
//! Tracing is off by default and then costs nothing: the sequence holds no trace at all.
//!
//! [`GeneratorSettings::trace`]: crate::GeneratorSettings::trace
use constrain::vocab::TokenId;
use serde_json::{json, Value};

/// Whether a step's token was drawn by the sampler or fed by jump-forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Drawn from the masked distribution.
    Sampled,
    /// Dictated by the grammar and fed without sampling.
    Forced,
}

impl StepKind {
    /// The name in the JSON trace (`"sampled"`, `"forced"`).
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Sampled => "sampled",
            StepKind::Forced => "forced",
        }
    }
}

/// One output token and what the mask did at its step (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStep {
    /// The token's position in the output (0-based).
    pub step: usize,
    /// The token.
    pub token: TokenId,
    /// Its bytes, as lossy UTF-8 (a character split across tokens shows as U+FFFD).
    pub text: String,
    /// Sampled or forced.
    pub kind: StepKind,
    /// Tokens the mask allowed (1 for a forced token).
    pub allowed: usize,
    /// Probability mass of the raw distribution on the tokens the mask refused; `None` for a
    /// forced token.
    pub mass_removed: Option<f64>,
    /// Entropy (nats) of the raw distribution; `None` for a forced token.
    pub entropy_before: Option<f64>,
    /// Entropy (nats) of the raw distribution renormalized over the allowed tokens; `None`
    /// for a forced token.
    pub entropy_after: Option<f64>,
    /// The token's rank among all tokens by raw logit (0 = the model's argmax; ties broken
    /// by id); `None` for a forced token.
    pub rank_unmasked: Option<usize>,
}

/// One line of the trace.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceEvent {
    /// An output token.
    Step(TraceStep),
    /// Closing mode began narrowing the mask at output position `step`.
    Closing {
        /// The output position.
        step: usize,
    },
    /// A dead end at output position `step` took the output back to position `to` (the
    /// token lines from `to` on were removed; the redrawn ones follow).
    Backtrack {
        /// Where no token was allowed.
        step: usize,
        /// The position drawn again.
        to: usize,
    },
}

impl TraceEvent {
    /// The event as one JSON object (one line of a `--trace` file).
    pub fn to_json(&self) -> Value {
        match self {
            TraceEvent::Step(s) => json!({
                "step": s.step,
                "token": s.token.0,
                "text": s.text,
                "kind": s.kind.name(),
                "allowed": s.allowed,
                "mass_removed": s.mass_removed,
                "entropy_before": s.entropy_before,
                "entropy_after": s.entropy_after,
                "rank_unmasked": s.rank_unmasked,
            }),
            TraceEvent::Closing { step } => json!({ "event": "closing", "step": step }),
            TraceEvent::Backtrack { step, to } => json!({ "event": "backtrack", "step": step, "to": to }),
        }
    }
}

/// Whether bit `i` is set in `mask` (bits past its end are clear).
fn allows(mask: &[u32], i: usize) -> bool {
    mask.get(i / 32).is_some_and(|w| w >> (i % 32) & 1 == 1)
}

/// The largest finite logit, if any.
fn max_logit(raw: &[f32]) -> Option<f64> {
    raw.iter().filter(|l| l.is_finite()).map(|&l| f64::from(l)).reduce(f64::max)
}

/// `(Σ e^(l-max), Σ (l-max)·e^(l-max))` over the finite logits `keep` selects.
fn sums(raw: &[f32], max: f64, keep: impl Fn(usize) -> bool) -> (f64, f64) {
    let (mut z, mut s) = (0.0, 0.0);
    for (i, &l) in raw.iter().enumerate() {
        if l.is_finite() && keep(i) {
            let x = f64::from(l) - max;
            let e = x.exp();
            z += e;
            s += x * e;
        }
    }
    (z, s)
}

/// The entropy `ln Z - Σ x·e^x / Z` from [`sums`]; 0 for an empty distribution.
fn entropy_of(z: f64, s: f64) -> f64 {
    if z > 0.0 {
        (z.ln() - s / z).max(0.0)
    } else {
        0.0
    }
}

/// Probability mass of softmax(`raw`) on the tokens `mask` refuses (bit clear, or past the
/// mask's end). 0 when no logit is finite.
pub fn mass_removed(raw: &[f32], mask: &[u32]) -> f64 {
    let Some(max) = max_logit(raw) else { return 0.0 };
    let (all, _) = sums(raw, max, |_| true);
    let (removed, _) = sums(raw, max, |i| !allows(mask, i));
    if all > 0.0 {
        (removed / all).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Entropy (nats) of softmax(`raw`); 0 when no logit is finite.
pub fn entropy(raw: &[f32]) -> f64 {
    let Some(max) = max_logit(raw) else { return 0.0 };
    let (z, s) = sums(raw, max, |_| true);
    entropy_of(z, s)
}

/// Entropy (nats) of softmax(`raw`) restricted to the tokens `mask` allows and renormalized;
/// 0 when it allows no token with a finite logit.
pub fn masked_entropy(raw: &[f32], mask: &[u32]) -> f64 {
    let Some(max) = max_logit(raw) else { return 0.0 };
    let (z, s) = sums(raw, max, |i| allows(mask, i));
    entropy_of(z, s)
}

/// The 0-based rank of `token` among all of `raw` by logit, highest first, ties broken by
/// id: how many tokens have a higher logit, or an equal one and a lower id. A token past
/// the logits' end ranks after all of them.
pub fn rank(raw: &[f32], token: TokenId) -> usize {
    let t = token.index();
    let Some(&mine) = raw.get(t) else { return raw.len() };
    raw.iter().enumerate().filter(|&(i, &l)| l > mine || (l == mine && i < t)).count()
}

/// The tokens `mask` allows.
pub fn allowed(mask: &[u32]) -> usize {
    mask.iter().map(|w| w.count_ones() as usize).sum()
}

/// The record of a sampled token: `raw` are the step's logits as the model gave them, `mask`
/// the one the token was drawn under (`None`: unconstrained, every token allowed).
pub fn sampled_step(step: usize, token: TokenId, bytes: &[u8], raw: &[f32], mask: Option<&[u32]>) -> TraceStep {
    let (allowed, removed, after) = match mask {
        Some(m) => (allowed(m), mass_removed(raw, m), masked_entropy(raw, m)),
        None => (raw.len(), 0.0, entropy(raw)),
    };
    TraceStep {
        step,
        token,
        text: String::from_utf8_lossy(bytes).into_owned(),
        kind: StepKind::Sampled,
        allowed,
        mass_removed: Some(removed),
        entropy_before: Some(entropy(raw)),
        entropy_after: Some(after),
        rank_unmasked: Some(rank(raw, token)),
    }
}

/// The record of a forced token (no logits: see the module doc).
pub fn forced_step(step: usize, token: TokenId, bytes: &[u8]) -> TraceStep {
    TraceStep {
        step,
        token,
        text: String::from_utf8_lossy(bytes).into_owned(),
        kind: StepKind::Forced,
        allowed: 1,
        mass_removed: None,
        entropy_before: None,
        entropy_after: None,
        rank_unmasked: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOGITS: [f32; 4] = [2.0, 1.0, 0.0, -1.0];
    /// Allows tokens 1 and 3.
    const MASK: [u32; 1] = [0b1010];

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn mass_removed_matches_a_hand_computation() {
        let e = |x: f64| x.exp();
        let want = (e(2.0) + e(0.0)) / (e(2.0) + e(1.0) + e(0.0) + e(-1.0));
        assert!(close(mass_removed(&LOGITS, &MASK), want), "{} vs {want}", mass_removed(&LOGITS, &MASK));
        assert!(close(mass_removed(&LOGITS, &[0b1111]), 0.0));
        assert!(close(mass_removed(&LOGITS, &[0]), 1.0));
        // Bits past the mask's end are refused; huge logits do not overflow.
        assert!(close(mass_removed(&[1000.0, 1000.0], &[]), 1.0));
        assert!(close(mass_removed(&[1000.0, 1000.0], &[0b1]), 0.5));
        assert_eq!(mass_removed(&[f32::NEG_INFINITY; 3], &[0b1]), 0.0);
        assert_eq!(mass_removed(&[], &[]), 0.0);
    }

    #[test]
    fn entropies_match_a_hand_computation() {
        let p: Vec<f64> = LOGITS.iter().map(|&l| f64::from(l).exp()).collect();
        let z: f64 = p.iter().sum();
        let h: f64 = p.iter().map(|&q| -(q / z) * (q / z).ln()).sum();
        assert!(close(entropy(&LOGITS), h), "{} vs {h}", entropy(&LOGITS));
        // Renormalized over {1, 3}: weights e^1 and e^-1.
        let (a, b) = (1f64.exp(), (-1f64).exp());
        let (pa, pb) = (a / (a + b), b / (a + b));
        let h_after = -pa * pa.ln() - pb * pb.ln();
        assert!(close(masked_entropy(&LOGITS, &MASK), h_after));
        // Uniform over n: ln n; one token: 0; -inf logits take no part.
        assert!(close(entropy(&[3.0; 8]), 8f64.ln()));
        assert!(close(masked_entropy(&[3.0; 8], &[0b1]), 0.0));
        assert!(close(entropy(&[0.0, f32::NEG_INFINITY, 0.0]), 2f64.ln()));
        assert_eq!(entropy(&[]), 0.0);
        assert_eq!(masked_entropy(&LOGITS, &[0]), 0.0);
    }

    #[test]
    fn rank_counts_better_tokens_and_breaks_ties_by_id() {
        assert_eq!(rank(&LOGITS, TokenId(0)), 0);
        assert_eq!(rank(&LOGITS, TokenId(1)), 1);
        assert_eq!(rank(&LOGITS, TokenId(3)), 3);
        let tied = [1.0, 5.0, 5.0, 5.0];
        assert_eq!(rank(&tied, TokenId(1)), 0);
        assert_eq!(rank(&tied, TokenId(3)), 2);
        assert_eq!(rank(&tied, TokenId(0)), 3);
        assert_eq!(rank(&tied, TokenId(9)), 4);
    }

    #[test]
    fn steps_serialize_with_nulls_for_forced_tokens() {
        let s = sampled_step(4, TokenId(1), b"ab", &LOGITS, Some(&MASK));
        assert_eq!((s.allowed, s.rank_unmasked), (2, Some(1)));
        let v = TraceEvent::Step(s).to_json();
        assert_eq!(v["kind"], "sampled");
        assert_eq!(v["text"], "ab");
        assert_eq!(v["step"], 4);
        let f = TraceEvent::Step(forced_step(5, TokenId(2), &[0xff])).to_json();
        assert_eq!(f["allowed"], 1);
        assert!(f["mass_removed"].is_null() && f["rank_unmasked"].is_null());
        assert_eq!(f["text"], "\u{fffd}");
        let u = sampled_step(0, TokenId(0), b"x", &LOGITS, None);
        assert_eq!((u.allowed, u.mass_removed), (4, Some(0.0)));
        let b = TraceEvent::Backtrack { step: 9, to: 7 }.to_json();
        assert_eq!(b, serde_json::json!({"event": "backtrack", "step": 9, "to": 7}));
        assert_eq!(TraceEvent::Closing { step: 3 }.to_json()["event"], "closing");
    }
}

//! Stage 6: choosing the next token from the model's logits.
//!
//! Input: one step's logits (`&mut [f32]`, one entry per token id; disallowed tokens already
//! set to `f32::NEG_INFINITY` by the grammar mask) and the recently seen token ids.
//! Output: one [`TokenId`].
//!
//! Every *warper* here is a plain function over `&mut [f32]`: same length in and out, a
//! dropped token becomes `-inf`, nothing is normalised, and `-inf` stays `-inf` — so warpers
//! compose in any order and a token masked by the grammar can never come back.
//! [`Sampler`] applies them in the canonical order
//!
//! ```text
//! repetition penalty → frequency/presence penalty → logit bias → temperature
//!     → top-k → top-p → min-p → softmax → one seeded draw
//! ```
//!
//! with `temperature == 0` meaning greedy (argmax after the penalties and bias).
//! The same seed, logits and settings always give the same token.
//!
//! Cost: penalties and bias are linear in the number of ids they touch; temperature and
//! min-p are one pass over the logits; top-k and top-p work only on the finite logits (a
//! grammar mask usually leaves few), copied into scratch buffers the [`Sampler`] reuses, so
//! the hot path does not allocate after the first step.
//!
//! ## Example
//!
//! The grammar mask first (`-inf` for disallowed tokens), then the warpers and a seeded draw:
//!
//! ```rust
//! use constrain::sampling::{Sampler, SamplerSettings};
//! use constrain::TokenId;
//!
//! let settings = SamplerSettings { temperature: 0.7, seed: Some(42), ..SamplerSettings::default() };
//! let mut sampler = Sampler::new(settings).unwrap();
//! let mut logits = vec![2.0, 5.0, 1.0, 4.0];
//! logits[1] = f32::NEG_INFINITY; // token 1 is masked out by the grammar
//! let t = sampler.sample(&mut logits).unwrap();
//! assert_ne!(t, TokenId(1)); // a masked token never comes back
//! ```

use crate::TokenId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;

/// Why settings are unusable or no token could be drawn.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is out of its valid range.
    #[error("invalid sampling setting {name} = {value}: {reason}")]
    InvalidSetting {
        /// The setting's name as on the command line (e.g. `top-p`).
        name: &'static str,
        /// The rejected value, printed.
        value: String,
        /// What the valid range is.
        reason: &'static str,
    },
    /// Every logit is `-inf` (or NaN): there is no token to draw.
    #[error("no token can be drawn: every candidate is masked out")]
    NoCandidates,
}

/// Sampling settings, with llama.cpp's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerSettings {
    /// Softmax temperature; `0` is greedy decoding. Default 0.8.
    pub temperature: f32,
    /// Keep only the `k` most likely tokens; `0` disables. Default 40.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `p`; `1.0`
    /// disables. Default 0.95.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one; `0` disables.
    /// Default 0.05.
    pub min_p: f32,
    /// CTRL repetition penalty (> 0): positive logits of recently seen tokens are divided by
    /// it, negative ones multiplied; `1.0` disables. Default 1.0.
    pub repeat_penalty: f32,
    /// How many recent tokens (prompt and generated) the penalties look at; `0` disables them.
    /// Default 64.
    pub repeat_last_n: usize,
    /// OpenAI frequency penalty: subtracted once per occurrence in the window. Default 0.
    pub frequency_penalty: f32,
    /// OpenAI presence penalty: subtracted once if the token occurs in the window. Default 0.
    pub presence_penalty: f32,
    /// Added to the logits of these tokens (ids past the logits are ignored). Default none.
    pub logit_bias: Vec<(TokenId, f32)>,
    /// Seed of the random draw; `None` seeds from the clock (not reproducible).
    pub seed: Option<u64>,
}

impl Default for SamplerSettings {
    fn default() -> Self {
        SamplerSettings {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            logit_bias: Vec::new(),
            seed: None,
        }
    }
}

impl SamplerSettings {
    /// Greedy decoding (temperature 0, no penalties): deterministic without a seed.
    pub fn greedy() -> Self {
        SamplerSettings { temperature: 0.0, seed: Some(0), ..SamplerSettings::default() }
    }

    /// Checks every setting's range.
    pub fn validate(&self) -> Result<(), Error> {
        fn bad(name: &'static str, value: impl ToString, reason: &'static str) -> Result<(), Error> {
            Err(Error::InvalidSetting { name, value: value.to_string(), reason })
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad("temp", self.temperature, "must be a finite number >= 0");
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top-p", self.top_p, "must be in (0, 1]");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min-p", self.min_p, "must be in [0, 1]");
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad("repeat-penalty", self.repeat_penalty, "must be a finite number > 0");
        }
        if !self.frequency_penalty.is_finite() {
            return bad("frequency-penalty", self.frequency_penalty, "must be finite");
        }
        if !self.presence_penalty.is_finite() {
            return bad("presence-penalty", self.presence_penalty, "must be finite");
        }
        if let Some((_, b)) = self.logit_bias.iter().find(|(_, b)| !b.is_finite()) {
            return bad("logit-bias", b, "must be finite (mask tokens with a constraint instead)");
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Warpers: pure functions over logits.
// ---------------------------------------------------------------------------------------------

/// CTRL repetition penalty: for each `(token, count)` with `count > 0`, a positive logit is
/// divided by `penalty` and a negative one multiplied, so the token always moves down when
/// `penalty > 1`. Applied once per token whatever its count. Ids past `logits` are ignored.
pub fn repetition_penalty(logits: &mut [f32], seen: &[(TokenId, u32)], penalty: f32) {
    if penalty == 1.0 {
        return;
    }
    for &(id, count) in seen {
        if count == 0 {
            continue;
        }
        if let Some(l) = logits.get_mut(id.index()) {
            if *l > 0.0 {
                *l /= penalty;
            } else {
                *l *= penalty;
            }
        }
    }
}

/// OpenAI frequency and presence penalties: `logit -= count * frequency + presence` for each
/// `(token, count)` with `count > 0`. Ids past `logits` are ignored.
pub fn frequency_presence_penalty(logits: &mut [f32], seen: &[(TokenId, u32)], frequency: f32, presence: f32) {
    if frequency == 0.0 && presence == 0.0 {
        return;
    }
    for &(id, count) in seen {
        if count == 0 {
            continue;
        }
        if let Some(l) = logits.get_mut(id.index()) {
            *l -= count as f32 * frequency + presence;
        }
    }
}

/// Adds each bias to its token's logit (`-inf` stays `-inf` for finite biases). Ids past
/// `logits` are ignored.
pub fn logit_bias(logits: &mut [f32], bias: &[(TokenId, f32)]) {
    for &(id, b) in bias {
        if let Some(l) = logits.get_mut(id.index()) {
            *l += b;
        }
    }
}

/// Divides every logit by `temperature`. `temperature <= 0` keeps only the argmax (the
/// limit of `T → 0`); the order of the logits never changes.
pub fn temperature(logits: &mut [f32], temperature: f32) {
    if temperature <= 0.0 {
        if let Some(best) = argmax(logits) {
            for (i, l) in logits.iter_mut().enumerate() {
                if i != best.index() {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        return;
    }
    if temperature == 1.0 {
        return;
    }
    let inv = 1.0 / temperature;
    for l in logits.iter_mut() {
        *l *= inv;
    }
}

/// The index of the largest logit, the lowest index on ties; `None` if no logit is finite
/// or `+inf` (all `-inf` or NaN).
pub fn argmax(logits: &[f32]) -> Option<TokenId> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if l.is_nan() || l == f32::NEG_INFINITY {
            continue;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| TokenId(i as u32))
}

/// Orders candidates by logit, largest first, then by id: the order every warper uses, so
/// ties are broken the same way as [`argmax`].
fn by_logit_desc(a: &(f32, u32), b: &(f32, u32)) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Collects the candidates (finite or `+inf` logits, not NaN) into `scratch` as
/// `(logit, id)`.
fn collect_candidates(logits: &[f32], scratch: &mut Vec<(f32, u32)>) {
    scratch.clear();
    scratch.extend(
        logits.iter().enumerate().filter(|(_, l)| !l.is_nan() && **l != f32::NEG_INFINITY).map(|(i, &l)| (l, i as u32)),
    );
}

/// Keeps exactly the `k` largest logits (ties broken towards the lower id), setting the rest
/// to `-inf`. `k == 0` or `k >=` the number of candidates is a no-op. `scratch` is reused
/// between calls to avoid allocating.
pub fn top_k(logits: &mut [f32], k: usize, scratch: &mut Vec<(f32, u32)>) {
    if k == 0 {
        return;
    }
    collect_candidates(logits, scratch);
    if k >= scratch.len() {
        return;
    }
    scratch.select_nth_unstable_by(k - 1, by_logit_desc);
    // scratch[k..] are the dropped candidates.
    for &(_, id) in &scratch[k..] {
        if let Some(l) = logits.get_mut(id as usize) {
            *l = f32::NEG_INFINITY;
        }
    }
}

/// Nucleus sampling: keeps the smallest prefix of candidates, most likely first, whose
/// softmax probability reaches `p` — including the token that crosses `p`. `p >= 1` is a
/// no-op; the most likely token always survives.
pub fn top_p(logits: &mut [f32], p: f32, scratch: &mut Vec<(f32, u32)>) {
    if p >= 1.0 {
        return;
    }
    collect_candidates(logits, scratch);
    if scratch.len() <= 1 {
        return;
    }
    scratch.sort_unstable_by(by_logit_desc);
    let max = scratch[0].0;
    if max == f32::INFINITY {
        // Degenerate: all mass on the +inf tokens; keep only those.
        for &(l, id) in scratch.iter() {
            if l != f32::INFINITY {
                if let Some(x) = logits.get_mut(id as usize) {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
        return;
    }
    let total: f64 = scratch.iter().map(|&(l, _)| ((l - max) as f64).exp()).sum();
    let target = p as f64 * total;
    let mut cumulative = 0.0f64;
    let mut keep = scratch.len();
    for (n, &(l, _)) in scratch.iter().enumerate() {
        cumulative += ((l - max) as f64).exp();
        if cumulative >= target {
            keep = n + 1;
            break;
        }
    }
    for &(_, id) in &scratch[keep..] {
        if let Some(x) = logits.get_mut(id as usize) {
            *x = f32::NEG_INFINITY;
        }
    }
}

/// Min-p: drops tokens whose probability is below `p` times the most likely token's
/// (`logit < max + ln p`). `p <= 0` is a no-op; the most likely token always survives.
pub fn min_p(logits: &mut [f32], p: f32) {
    if p <= 0.0 {
        return;
    }
    let Some(best) = argmax(logits) else { return };
    let max = logits[best.index()];
    if max == f32::INFINITY {
        return;
    }
    let threshold = max + p.ln();
    for l in logits.iter_mut() {
        if *l < threshold {
            *l = f32::NEG_INFINITY;
        }
    }
}

/// Writes the softmax of `logits` into `probs` (resized to match). `-inf` and NaN become
/// probability 0. Returns `false` if there is no candidate at all (every entry 0).
pub fn softmax(logits: &[f32], probs: &mut Vec<f32>) -> bool {
    probs.clear();
    probs.resize(logits.len(), 0.0);
    let Some(best) = argmax(logits) else { return false };
    let max = logits[best.index()];
    if max == f32::INFINITY {
        let n = logits.iter().filter(|&&l| l == f32::INFINITY).count() as f32;
        for (p, &l) in probs.iter_mut().zip(logits) {
            *p = if l == f32::INFINITY { 1.0 / n } else { 0.0 };
        }
        return true;
    }
    let mut total = 0.0f32;
    for (p, &l) in probs.iter_mut().zip(logits) {
        *p = if l.is_nan() || l == f32::NEG_INFINITY { 0.0 } else { (l - max).exp() };
        total += *p;
    }
    // total >= 1 because the max contributes exp(0).
    for p in probs.iter_mut() {
        *p /= total;
    }
    true
}

/// Draws one id with probability proportional to `probs`; ids with probability 0 are never
/// drawn. `None` if every probability is 0.
pub fn draw(probs: &[f32], rng: &mut impl Rng) -> Option<TokenId> {
    let total: f64 = probs.iter().filter(|p| **p > 0.0).map(|&p| p as f64).sum();
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    let target = rng.random::<f64>() * total;
    let mut cumulative = 0.0f64;
    let mut last = None;
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            cumulative += p as f64;
            last = Some(TokenId(i as u32));
            if cumulative > target {
                return last;
            }
        }
    }
    // Rounding left `target` just past the sum: the last possible token.
    last
}

// ---------------------------------------------------------------------------------------------
// The sampler: the canonical chain with reusable scratch.
// ---------------------------------------------------------------------------------------------

/// Applies the canonical warper chain and draws, keeping the penalty window, the seeded RNG
/// and scratch buffers between steps. One per sequence.
#[derive(Clone, Debug)]
pub struct Sampler {
    settings: SamplerSettings,
    rng: StdRng,
    /// The last `repeat_last_n` accepted ids (prompt and generated), oldest first.
    history: std::collections::VecDeque<TokenId>,
    /// `(id, count)` over `history`, rebuilt per step.
    seen: Vec<(TokenId, u32)>,
    /// Sort buffer for building `seen`.
    sorted: Vec<TokenId>,
    candidates: Vec<(f32, u32)>,
    probs: Vec<f32>,
}

impl Sampler {
    /// A sampler for these settings; fails if a setting is out of range.
    pub fn new(settings: SamplerSettings) -> Result<Sampler, Error> {
        settings.validate()?;
        let seed = settings.seed.unwrap_or_else(clock_seed);
        Ok(Sampler {
            rng: StdRng::seed_from_u64(seed),
            history: std::collections::VecDeque::with_capacity(settings.repeat_last_n),
            seen: Vec::new(),
            sorted: Vec::new(),
            candidates: Vec::new(),
            probs: Vec::new(),
            settings,
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &SamplerSettings {
        &self.settings
    }

    /// Records an id the penalties should see (each prompt token, then each token produced,
    /// sampled or forced).
    pub fn accept(&mut self, token: TokenId) {
        let n = self.settings.repeat_last_n;
        if n == 0 {
            return;
        }
        if self.history.len() == n {
            self.history.pop_front();
        }
        self.history.push_back(token);
    }

    /// Forgets the penalty window (the RNG keeps its position).
    pub fn clear_history(&mut self) {
        self.history.clear();
    }

    /// Runs the chain over `logits` (modified in place) and draws a token. Greedy when the
    /// temperature is 0. Fails only if every logit is `-inf`.
    pub fn sample(&mut self, logits: &mut [f32]) -> Result<TokenId, Error> {
        let s = &self.settings;
        let penalties = s.repeat_penalty != 1.0 || s.frequency_penalty != 0.0 || s.presence_penalty != 0.0;
        if penalties && !self.history.is_empty() {
            self.sorted.clear();
            self.sorted.extend(self.history.iter().copied());
            self.sorted.sort_unstable();
            self.seen.clear();
            for &id in &self.sorted {
                match self.seen.last_mut() {
                    Some((last, count)) if *last == id => *count += 1,
                    _ => self.seen.push((id, 1)),
                }
            }
            repetition_penalty(logits, &self.seen, s.repeat_penalty);
            frequency_presence_penalty(logits, &self.seen, s.frequency_penalty, s.presence_penalty);
        }
        logit_bias(logits, &s.logit_bias);
        if s.temperature == 0.0 {
            return argmax(logits).ok_or(Error::NoCandidates);
        }
        temperature(logits, s.temperature);
        top_k(logits, s.top_k, &mut self.candidates);
        top_p(logits, s.top_p, &mut self.candidates);
        min_p(logits, s.min_p);
        if !softmax(logits, &mut self.probs) {
            return Err(Error::NoCandidates);
        }
        draw(&self.probs, &mut self.rng).ok_or(Error::NoCandidates)
    }
}

/// A seed from the clock, for `seed: None`.
fn clock_seed() -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEG: f32 = f32::NEG_INFINITY;

    #[test]
    fn top_p_keeps_the_token_that_crosses_p() {
        // probs ≈ [0.5, 0.3, 0.2] (logits are logs of these)
        let mut l = vec![0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
        top_p(&mut l, 0.6, &mut Vec::new());
        assert!(l[0].is_finite() && l[1].is_finite());
        assert_eq!(l[2], NEG);
        let mut l = vec![0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
        top_p(&mut l, 0.4, &mut Vec::new());
        assert!(l[0].is_finite());
        assert_eq!(&l[1..], &[NEG, NEG]);
    }

    #[test]
    fn top_k_breaks_ties_towards_lower_ids() {
        let mut l = vec![1.0, 2.0, 2.0, 2.0, 0.0];
        top_k(&mut l, 2, &mut Vec::new());
        assert_eq!(l, vec![NEG, 2.0, 2.0, NEG, NEG]);
    }

    #[test]
    fn penalties_push_seen_tokens_down() {
        let mut l = vec![2.0, -2.0, 1.0];
        repetition_penalty(&mut l, &[(TokenId(0), 3), (TokenId(1), 1), (TokenId(9), 1)], 2.0);
        assert_eq!(l, vec![1.0, -4.0, 1.0]);
        frequency_presence_penalty(&mut l, &[(TokenId(0), 3)], 0.5, 1.0);
        assert_eq!(l, vec![-1.5, -4.0, 1.0]);
    }

    #[test]
    fn min_p_drops_unlikely_tokens() {
        let mut l = vec![0.0, (0.04f32).ln(), (0.5f32).ln()];
        min_p(&mut l, 0.05);
        assert_eq!(l[1], NEG);
        assert!(l[0] == 0.0 && l[2].is_finite());
    }

    #[test]
    fn invalid_settings_are_rejected() {
        for s in [
            SamplerSettings { temperature: -1.0, ..Default::default() },
            SamplerSettings { top_p: 0.0, ..Default::default() },
            SamplerSettings { min_p: 1.5, ..Default::default() },
            SamplerSettings { repeat_penalty: 0.0, ..Default::default() },
            SamplerSettings { logit_bias: vec![(TokenId(0), f32::NEG_INFINITY)], ..Default::default() },
        ] {
            assert!(matches!(Sampler::new(s), Err(Error::InvalidSetting { .. })));
        }
        assert!(Sampler::new(SamplerSettings::default()).is_ok());
    }

    #[test]
    fn all_masked_is_an_error_not_a_panic() {
        let mut s = Sampler::new(SamplerSettings { seed: Some(1), ..Default::default() }).unwrap();
        assert_eq!(s.sample(&mut [NEG, NEG]), Err(Error::NoCandidates));
        let mut g = Sampler::new(SamplerSettings::greedy()).unwrap();
        assert_eq!(g.sample(&mut [NEG, f32::NAN]), Err(Error::NoCandidates));
        assert_eq!(g.sample(&mut []), Err(Error::NoCandidates));
    }

    #[test]
    fn window_forgets_old_tokens() {
        let mut s = Sampler::new(SamplerSettings {
            repeat_last_n: 2,
            repeat_penalty: 10.0,
            temperature: 0.0,
            ..Default::default()
        })
        .unwrap();
        for t in [0, 1, 2] {
            s.accept(TokenId(t));
        }
        // Token 0 left the window: it wins; 1 and 2 are penalised.
        assert_eq!(s.sample(&mut [1.0, 5.0, 5.0]), Ok(TokenId(0)));
    }
}

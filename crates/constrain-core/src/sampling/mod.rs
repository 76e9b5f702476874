//! Stage 6: choosing the next token from the model's logits.
//!
//! Input: one step's logits (`&mut [f32]`, one entry per token id; disallowed tokens already
//! set to `f32::NEG_INFINITY` by the grammar mask) and the recently seen token ids.
//! Output: one [`TokenId`].
//!
//! Every *warper* here is a plain function over `&mut [f32]`: same length in and out, a
//! dropped token becomes `-inf`, nothing is normalised, and `-inf` stays `-inf` — so warpers
//! compose in any order and a token masked by the grammar can never come back.
//! [`Sampler`] applies them in the order of [`SamplerSettings::samplers`], by default
//!
//! ```text
//! repetition penalty → frequency/presence penalty → logit bias → temperature
//!     → top-k → typical-p → top-p → min-p → softmax → one seeded draw
//! ```
//!
//! with `temperature == 0` meaning greedy (argmax after the penalties and bias). Mirostat
//! (v1 or v2), when on, replaces every stage after the penalties and bias: temperature, then
//! mirostat's own truncation and draw, with its target surprise `mu` kept per sequence.
//! The same seed, logits and settings always give the same token.
//!
//! Cost: penalties and bias are linear in the number of ids they touch; top-k is one
//! comparison per logit (a candidate is kept only if it beats the `k`-th best so far); the
//! [`Sampler`] then remembers the ids top-k left, and the stages after it, the softmax and
//! the draw visit only those, so a step over a 49k vocabulary costs about one pass instead
//! of six (`cargo run --release -p constrain --example sampler_cost`: 684 → 68 µs). Scratch
//! buffers are reused, so the hot path does not allocate after the first step.
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
    /// A combination of features the sampler does not offer.
    #[error("{0} is not supported")]
    Unsupported(&'static str),
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
    /// Added to the logits of these tokens (ids past the logits are ignored); `-inf` bans the
    /// token. Applied before every stage but a leading `penalties` (right after the penalties
    /// in the default order), so a ban never empties a truncated set. Default none.
    pub logit_bias: Vec<(TokenId, f32)>,
    /// Locally typical sampling (Meister et al.): keep the tokens whose surprise is closest to
    /// the distribution's entropy, up to probability `typical_p`; `1.0` disables. Default 1.0.
    pub typical_p: f32,
    /// Mirostat: `0` off, `1` v1, `2` v2. When on it replaces top-k, typical-p, top-p and
    /// min-p (temperature, then mirostat's own truncation and draw). Default 0.
    pub mirostat: u8,
    /// Mirostat's target surprise `tau`, in bits (llama.cpp `--mirostat-ent`). Default 5.0.
    pub mirostat_tau: f32,
    /// Mirostat's learning rate `eta` (llama.cpp `--mirostat-lr`). Default 0.1.
    pub mirostat_eta: f32,
    /// The order the stages run in (llama.cpp `--samplers`); a stage not listed does not run
    /// (greedy decoding at temperature 0 whatever the order). Default
    /// [`SamplerKind::DEFAULT_ORDER`], this crate's historical chain.
    pub samplers: Vec<SamplerKind>,
    /// Seed of the random draw; `None` seeds from the clock (not reproducible).
    pub seed: Option<u64>,
}

/// One reorderable stage of the chain, named as llama.cpp's `--samplers` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SamplerKind {
    /// Repetition, frequency and presence penalties.
    Penalties,
    /// Top-k.
    TopK,
    /// Locally typical sampling.
    TypicalP,
    /// Top-p (nucleus).
    TopP,
    /// Min-p.
    MinP,
    /// Temperature.
    Temperature,
}

impl SamplerKind {
    /// The default order: the chain this crate always ran (temperature before the
    /// truncations, unlike llama.cpp's current default), so that existing seeds reproduce.
    pub const DEFAULT_ORDER: [SamplerKind; 6] = [
        SamplerKind::Penalties,
        SamplerKind::Temperature,
        SamplerKind::TopK,
        SamplerKind::TypicalP,
        SamplerKind::TopP,
        SamplerKind::MinP,
    ];

    /// llama.cpp's canonical name of the stage (`top_k`, `typ_p`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SamplerKind::Penalties => "penalties",
            SamplerKind::TopK => "top_k",
            SamplerKind::TypicalP => "typ_p",
            SamplerKind::TopP => "top_p",
            SamplerKind::MinP => "min_p",
            SamplerKind::Temperature => "temperature",
        }
    }

    /// The stage a name means: llama.cpp's canonical names and its aliases (`top-k`,
    /// `typical_p`, `typical`, `nucleus`, `temp`, ...). llama.cpp stages this crate does not
    /// have (`dry`, `xtc`, ...) and unknown names are errors naming the entry.
    pub fn from_name(name: &str) -> Result<SamplerKind, Error> {
        let kind = match name {
            "penalties" => SamplerKind::Penalties,
            "top_k" | "top-k" => SamplerKind::TopK,
            "typ_p" | "typ-p" | "typical_p" | "typical-p" | "typical" | "typ" => SamplerKind::TypicalP,
            "top_p" | "top-p" | "nucleus" => SamplerKind::TopP,
            "min_p" | "min-p" => SamplerKind::MinP,
            "temperature" | "temp" => SamplerKind::Temperature,
            "dry" | "xtc" | "infill" | "top_n_sigma" | "top-n-sigma" => {
                return Err(Error::InvalidSetting {
                    name: "samplers",
                    value: name.to_string(),
                    reason: "this llama.cpp sampler is not supported here",
                })
            }
            _ => {
                return Err(Error::InvalidSetting {
                    name: "samplers",
                    value: name.to_string(),
                    reason: "unknown sampler; expected penalties, top_k, typ_p, top_p, min_p or temperature",
                })
            }
        };
        Ok(kind)
    }

    /// Parses a `;`-separated order as llama.cpp's `--samplers` takes it
    /// (`"top_k;typ_p;top_p;min_p;temperature"`). Surrounding spaces and empty entries are
    /// skipped; an unknown or repeated entry is an error naming it.
    pub fn parse_order(order: &str) -> Result<Vec<SamplerKind>, Error> {
        let mut out: Vec<SamplerKind> = Vec::new();
        for entry in order.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let kind = SamplerKind::from_name(entry)?;
            if out.contains(&kind) {
                return Err(Error::InvalidSetting {
                    name: "samplers",
                    value: entry.to_string(),
                    reason: "listed twice",
                });
            }
            out.push(kind);
        }
        Ok(out)
    }
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
            typical_p: 1.0,
            mirostat: 0,
            mirostat_tau: 5.0,
            mirostat_eta: 0.1,
            samplers: SamplerKind::DEFAULT_ORDER.to_vec(),
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
        if let Some((_, b)) = self.logit_bias.iter().find(|(_, b)| b.is_nan() || *b == f32::INFINITY) {
            return bad("logit-bias", b, "must be finite, or -inf to ban the token");
        }
        if !(self.typical_p > 0.0 && self.typical_p <= 1.0) {
            return bad("typical", self.typical_p, "must be in (0, 1]");
        }
        if self.mirostat > 2 {
            return bad("mirostat", self.mirostat, "must be 0 (off), 1 (v1) or 2 (v2)");
        }
        if !(self.mirostat_tau.is_finite() && self.mirostat_tau >= 0.0) {
            return bad("mirostat-ent", self.mirostat_tau, "must be a finite number >= 0");
        }
        if !(self.mirostat_eta.is_finite() && self.mirostat_eta >= 0.0) {
            return bad("mirostat-lr", self.mirostat_eta, "must be a finite number >= 0");
        }
        for (i, kind) in self.samplers.iter().enumerate() {
            if self.samplers[..i].contains(kind) {
                return bad("samplers", kind.name(), "listed twice");
            }
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

/// [`temperature`] over the ids of `support` only (every other logit is `-inf`, which
/// scaling leaves alone): the same result in time linear in the support.
fn temperature_in(logits: &mut [f32], temperature: f32, support: &[u32]) {
    if temperature <= 0.0 {
        let Some(best) = argmax_in(logits, support) else { return };
        for &id in support {
            if id != best.0 {
                logits[id as usize] = f32::NEG_INFINITY;
            }
        }
        return;
    }
    if temperature == 1.0 {
        return;
    }
    let inv = 1.0 / temperature;
    for &id in support {
        logits[id as usize] *= inv;
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

/// [`argmax`] over the ids of `support` (ascending), every other logit being `-inf`.
fn argmax_in(logits: &[f32], support: &[u32]) -> Option<TokenId> {
    let mut best: Option<(u32, f32)> = None;
    for &id in support {
        let l = logits[id as usize];
        if l.is_nan() || l == f32::NEG_INFINITY {
            continue;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((id, l));
        }
    }
    best.map(|(i, _)| TokenId(i))
}

/// Orders candidates by logit, largest first, then by id: the order every warper uses, so
/// ties are broken the same way as [`argmax`].
fn by_logit_desc(a: &(f32, u32), b: &(f32, u32)) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Collects the candidates (finite or `+inf` logits, not NaN) into `scratch` as
/// `(logit, id)`.
fn collect_candidates(logits: &[f32], scratch: &mut Vec<(f32, u32)>) {
    collect_candidates_in(logits, None, scratch);
}

/// [`collect_candidates`] in id order from the ids of `support` when it is known (every
/// other logit is `-inf`), else from the whole slice.
fn collect_candidates_in(logits: &[f32], support: Option<&[u32]>, scratch: &mut Vec<(f32, u32)>) {
    let live = |l: &f32| !l.is_nan() && *l != f32::NEG_INFINITY;
    scratch.clear();
    match support {
        Some(ids) => scratch.extend(ids.iter().map(|&id| (logits[id as usize], id)).filter(|(l, _)| live(l))),
        None => scratch.extend(logits.iter().enumerate().filter(|(_, l)| live(l)).map(|(i, &l)| (l, i as u32))),
    }
}

/// Keeps exactly the `k` largest logits (ties broken towards the lower id), setting the rest
/// to `-inf`. `k == 0` or `k >=` the number of candidates is a no-op. `scratch` is reused
/// between calls to avoid allocating.
pub fn top_k(logits: &mut [f32], k: usize, scratch: &mut Vec<(f32, u32)>) {
    top_k_support(logits, k, scratch, &mut Vec::new());
}

/// [`top_k`], which also leaves in `support` the ids (ascending) of every logit that is not
/// `-inf` afterwards, so that later stages need not scan the whole vocabulary; returns
/// whether it did (not for `k == 0`, a no-op that learns nothing).
///
/// One pass: a candidate is kept in `scratch` only if it beats the `k`-th largest logit
/// seen so far (a later id never wins a tie), and `scratch` is cut back to the best `k`
/// whenever it holds twice that; a 49k vocabulary costs one comparison per logit and a few
/// small selections, not a selection over every candidate.
fn top_k_support(logits: &mut [f32], k: usize, scratch: &mut Vec<(f32, u32)>, support: &mut Vec<u32>) -> bool {
    support.clear();
    if k == 0 {
        return false;
    }
    scratch.clear();
    let cap = k.saturating_mul(2).max(k + 32);
    // Below or at `floor` nothing can be among the `k` largest any more (NaN and `-inf`
    // never are: they fail the comparison).
    let mut floor = f32::NEG_INFINITY;
    let mut cut = false;
    for (i, &l) in logits.iter().enumerate() {
        if l > floor {
            scratch.push((l, i as u32));
            if scratch.len() >= cap {
                scratch.select_nth_unstable_by(k - 1, by_logit_desc);
                scratch.truncate(k);
                floor = scratch[k - 1].0;
                cut = true;
            }
        }
    }
    if scratch.len() > k {
        scratch.select_nth_unstable_by(k - 1, by_logit_desc);
        scratch.truncate(k);
        cut = true;
    }
    support.extend(scratch.iter().map(|&(_, id)| id));
    if cut {
        support.sort_unstable();
        let mut from = 0;
        for &id in support.iter() {
            logits[from..id as usize].fill(f32::NEG_INFINITY);
            from = id as usize + 1;
        }
        logits[from..].fill(f32::NEG_INFINITY);
    }
    true
}

/// Nucleus sampling: keeps the smallest prefix of candidates, most likely first, whose
/// softmax probability reaches `p` — including the token that crosses `p`. `p >= 1` is a
/// no-op; the most likely token always survives.
pub fn top_p(logits: &mut [f32], p: f32, scratch: &mut Vec<(f32, u32)>) {
    top_p_in(logits, p, scratch, None);
}

/// [`top_p`] with the candidates taken from `support` when it is known.
fn top_p_in(logits: &mut [f32], p: f32, scratch: &mut Vec<(f32, u32)>, support: Option<&[u32]>) {
    if p >= 1.0 {
        return;
    }
    collect_candidates_in(logits, support, scratch);
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
    min_p_in(logits, p, None);
}

/// [`min_p`] over the ids of `support` when it is known.
fn min_p_in(logits: &mut [f32], p: f32, support: Option<&[u32]>) {
    if p <= 0.0 {
        return;
    }
    let best = match support {
        Some(ids) => argmax_in(logits, ids),
        None => argmax(logits),
    };
    let Some(best) = best else { return };
    let max = logits[best.index()];
    if max == f32::INFINITY {
        return;
    }
    let threshold = max + p.ln();
    let drop = |l: &mut f32| {
        if *l < threshold {
            *l = f32::NEG_INFINITY;
        }
    };
    match support {
        Some(ids) => ids.iter().for_each(|&id| drop(&mut logits[id as usize])),
        None => logits.iter_mut().for_each(drop),
    }
}

/// Keeps only the candidates whose logit is `+inf` (all the probability is theirs), if any;
/// returns whether there were some.
fn keep_infinite(logits: &mut [f32], candidates: &[(f32, u32)]) -> bool {
    if !candidates.iter().any(|&(l, _)| l == f32::INFINITY) {
        return false;
    }
    for &(l, id) in candidates {
        if l != f32::INFINITY {
            if let Some(x) = logits.get_mut(id as usize) {
                *x = f32::NEG_INFINITY;
            }
        }
    }
    true
}

/// `(max, ln Σ exp(l − max))` over `candidates` (non-empty, all finite): each candidate's
/// log-probability is then `l − max − log_z`.
fn log_normaliser(candidates: &[(f32, u32)]) -> (f64, f64) {
    let max = candidates.iter().map(|&(l, _)| l as f64).fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = candidates.iter().map(|&(l, _)| (l as f64 - max).exp()).sum();
    (max, z.ln())
}

/// Locally typical sampling (Meister et al., 2022): with `H` the entropy of the softmax over
/// the candidates, orders them by `|−ln p_i − H|` (how far each token's surprise is from the
/// expected one), closest first, and keeps the smallest prefix whose probability reaches `p`
/// — including the token that crosses it, so at least one survives. The most likely token can
/// be dropped (when it is much less surprising than typical). `p >= 1` is a no-op. `scratch`
/// is reused between calls.
pub fn typical_p(logits: &mut [f32], p: f32, scratch: &mut Vec<(f32, u32)>) {
    typical_p_in(logits, p, scratch, None);
}

/// [`typical_p`] with the candidates taken from `support` when it is known.
fn typical_p_in(logits: &mut [f32], p: f32, scratch: &mut Vec<(f32, u32)>, support: Option<&[u32]>) {
    if p >= 1.0 {
        return;
    }
    collect_candidates_in(logits, support, scratch);
    if scratch.len() <= 1 || keep_infinite(logits, scratch) {
        return;
    }
    let (max, log_z) = log_normaliser(scratch);
    let entropy: f64 = scratch
        .iter()
        .map(|&(l, _)| {
            let lp = l as f64 - max - log_z;
            -lp.exp() * lp
        })
        .sum();
    // Replace each logit by its distance from typical; the logit stays readable in `logits`.
    for c in scratch.iter_mut() {
        let lp = c.0 as f64 - max - log_z;
        c.0 = (-lp - entropy).abs() as f32;
    }
    scratch.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut cumulative = 0.0f64;
    let mut keep = scratch.len();
    for (n, &(_, id)) in scratch.iter().enumerate() {
        let l = logits[id as usize] as f64;
        cumulative += (l - max - log_z).exp();
        if cumulative >= p as f64 {
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

/// Mirostat's sample size for estimating the Zipf exponent (llama.cpp's `m`).
const MIROSTAT_M: usize = 100;

/// Draws from the first `keep` candidates of `sorted` (`(logit, id)`, finite) with
/// probability proportional to `exp(logit)`; sets every other candidate's logit to `-inf`;
/// returns the id and its surprise in bits within the kept set, `−log2 p`.
fn draw_prefix(logits: &mut [f32], sorted: &[(f32, u32)], keep: usize, rng: &mut impl Rng) -> (TokenId, f64) {
    let keep = keep.clamp(1, sorted.len());
    let (kept, dropped) = sorted.split_at(keep);
    for &(_, id) in dropped {
        if let Some(x) = logits.get_mut(id as usize) {
            *x = f32::NEG_INFINITY;
        }
    }
    let (max, log_z) = log_normaliser(kept);
    let target = rng.random::<f64>();
    let mut cumulative = 0.0f64;
    let mut chosen = kept[kept.len() - 1];
    for &c in kept {
        cumulative += (c.0 as f64 - max - log_z).exp();
        if cumulative > target {
            chosen = c;
            break;
        }
    }
    let surprise = -(chosen.0 as f64 - max - log_z) / std::f64::consts::LN_2;
    (TokenId(chosen.1), surprise)
}

/// Collects the candidates sorted most likely first; `None` if there is none. If some logit
/// is `+inf`, only those remain (they share all the probability).
fn sorted_finite_candidates(logits: &mut [f32], scratch: &mut Vec<(f32, u32)>) -> Option<()> {
    collect_candidates(logits, scratch);
    if keep_infinite(logits, scratch) {
        // Equal logits: give them all 0 so the draw is uniform over them.
        scratch.retain(|&(l, _)| l == f32::INFINITY);
        for c in scratch.iter_mut() {
            c.0 = 0.0;
        }
    }
    if scratch.is_empty() {
        return None;
    }
    scratch.sort_unstable_by(by_logit_desc);
    Some(())
}

/// Mirostat v1 (Basu et al., 2021, Algorithm 1): estimates the Zipf exponent `s` of the
/// candidates from the top [`MIROSTAT_M`] (least squares on `ln(p_i / p_{i+1})` against
/// `ln((i+2)/(i+1))`), derives the `k` whose expected surprise is `mu` bits over a
/// vocabulary of `logits.len()` tokens, keeps the top `k` (at least 1), draws, and moves
/// `mu` by `−eta · (surprise − tau)`. Dropped candidates become `-inf`. `None` if every logit
/// is `-inf` (then `mu` is unchanged).
pub fn mirostat_v1(
    logits: &mut [f32],
    tau: f32,
    eta: f32,
    mu: &mut f32,
    scratch: &mut Vec<(f32, u32)>,
    rng: &mut impl Rng,
) -> Option<TokenId> {
    sorted_finite_candidates(logits, scratch)?;
    let m = MIROSTAT_M.min(scratch.len());
    let (mut sum_tb, mut sum_tt) = (0.0f64, 0.0f64);
    for i in 0..m.saturating_sub(1) {
        let t = ((i + 2) as f64 / (i + 1) as f64).ln();
        // ln(p_i / p_{i+1}) is the logit difference: no underflow for tiny probabilities.
        let b = scratch[i].0 as f64 - scratch[i + 1].0 as f64;
        sum_tb += t * b;
        sum_tt += t * t;
    }
    let k = if sum_tt > 0.0 {
        let s_hat = sum_tb / sum_tt;
        let eps = s_hat - 1.0;
        let n = logits.len() as f64;
        // eps / (1 − n^−eps) tends to 1 / ln n as eps → 0 (a Zipf exponent of exactly 1).
        let ratio = if eps.abs() < 1e-9 { 1.0 / n.ln() } else { eps / (1.0 - n.powf(-eps)) };
        (ratio * 2f64.powf(*mu as f64)).powf(1.0 / s_hat)
    } else {
        1.0
    };
    // NaN (a degenerate fit, e.g. all candidates equal) keeps everything.
    let k = if k.is_nan() { scratch.len() } else { k.clamp(1.0, scratch.len() as f64) as usize };
    let (token, surprise) = draw_prefix(logits, scratch, k, rng);
    *mu -= eta * (surprise as f32 - tau);
    Some(token)
}

/// Mirostat v2 (Basu et al., 2021): keeps the candidates whose surprise `−log2 p` is at most
/// `mu` bits (at least the most likely one), draws from them renormalised, and moves `mu` by
/// `−eta · (surprise − tau)`. Dropped candidates become `-inf`. `None` if every logit is
/// `-inf` (then `mu` is unchanged).
pub fn mirostat_v2(
    logits: &mut [f32],
    tau: f32,
    eta: f32,
    mu: &mut f32,
    scratch: &mut Vec<(f32, u32)>,
    rng: &mut impl Rng,
) -> Option<TokenId> {
    sorted_finite_candidates(logits, scratch)?;
    let (max, log_z) = log_normaliser(scratch);
    let mu_nats = *mu as f64 * std::f64::consts::LN_2;
    // Sorted most likely first, so the survivors are a prefix.
    let keep = scratch.iter().take_while(|&&(l, _)| -(l as f64 - max - log_z) <= mu_nats).count();
    let (token, surprise) = draw_prefix(logits, scratch, keep, rng);
    *mu -= eta * (surprise as f32 - tau);
    Some(token)
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
// Speculative sampling: the rule that keeps the target's distribution.
// ---------------------------------------------------------------------------------------------

/// Speculative sampling's acceptance test for a draft token `draft` drawn from the draft's
/// distribution `q`, under the target's distribution `p` (both over the same ids, each
/// summing to 1): accept with probability `min(1, p(draft) / q(draft))`, given `u` uniform
/// in `[0, 1)`. When it refuses, draw from [`residual`] instead; the token kept is then
/// distributed exactly as `p` (Leviathan et al. 2023, Chen et al. 2023). A draft `q` gives
/// no probability is refused.
pub fn accept_draft(p: &[f32], q: &[f32], draft: TokenId, u: f32) -> bool {
    let (pd, qd) = (p.get(draft.index()).copied().unwrap_or(0.0), q.get(draft.index()).copied().unwrap_or(0.0));
    qd > 0.0 && u * qd < pd
}

/// The distribution to draw from after [`accept_draft`] refused: `max(0, p − q)`,
/// renormalised, into `out`. `false` (and `out` all zero) when `p ≤ q` everywhere, which
/// only rounding allows once a draft was refused: then draw from `p`.
pub fn residual(p: &[f32], q: &[f32], out: &mut Vec<f32>) -> bool {
    out.clear();
    out.extend(p.iter().enumerate().map(|(i, &pi)| (pi - q.get(i).copied().unwrap_or(0.0)).max(0.0)));
    let total: f64 = out.iter().map(|&r| f64::from(r)).sum();
    if total <= 0.0 || !total.is_finite() {
        out.iter_mut().for_each(|r| *r = 0.0);
        return false;
    }
    let inv = (1.0 / total) as f32;
    out.iter_mut().for_each(|r| *r *= inv);
    true
}

// ---------------------------------------------------------------------------------------------
// The sampler: the canonical chain with reusable scratch.
// ---------------------------------------------------------------------------------------------

/// Applies the warper chain in the settings' order and draws, keeping the penalty window,
/// the seeded RNG, mirostat's `mu` and scratch buffers between steps. One per sequence.
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
    /// After a top-k stage of this step: the ids (ascending) of every logit that is not
    /// `-inf`, so later stages and the draw visit only those; `None` before one.
    support: Option<Vec<u32>>,
    /// `support`'s buffer while it is `None`, kept to reuse its allocation.
    spare: Vec<u32>,
    /// The support's logits, for the draw.
    picked: Vec<f32>,
    /// Mirostat's current maximum surprise in bits; starts at `2 · tau`.
    mu: f32,
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
            support: None,
            spare: Vec::new(),
            picked: Vec::new(),
            mu: 2.0 * settings.mirostat_tau,
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

    /// Forgets the penalty window (the RNG and mirostat's `mu` keep their state).
    pub fn clear_history(&mut self) {
        self.history.clear();
    }

    /// Mirostat's current target maximum surprise `mu`, in bits (`2 · tau` until mirostat
    /// has drawn).
    pub fn mirostat_mu(&self) -> f32 {
        self.mu
    }

    /// Runs the chain over `logits` (modified in place) and draws a token: the stages of
    /// [`SamplerSettings::samplers`] in order (the logit bias right after a leading
    /// `penalties`, else first), then a softmax and a seeded draw. Greedy when the temperature is
    /// 0; with mirostat on, the penalties and bias, then temperature and mirostat. Fails only
    /// if every logit is `-inf`.
    pub fn sample(&mut self, logits: &mut [f32]) -> Result<TokenId, Error> {
        // The bias goes before every stage but a leading `penalties` (the historical chain),
        // so that a ban can never empty the set a truncation left.
        let bias_after_penalties = self.settings.samplers.first() == Some(&SamplerKind::Penalties);
        if !bias_after_penalties {
            logit_bias(logits, &self.settings.logit_bias);
        }
        let s = &self.settings;
        if s.temperature == 0.0 || s.mirostat != 0 {
            if s.samplers.contains(&SamplerKind::Penalties) {
                self.penalties(logits);
            }
            let s = &self.settings;
            if bias_after_penalties {
                logit_bias(logits, &s.logit_bias);
            }
            if s.temperature == 0.0 {
                return argmax(logits).ok_or(Error::NoCandidates);
            }
            temperature(logits, s.temperature);
            let (tau, eta) = (s.mirostat_tau, s.mirostat_eta);
            let token = if s.mirostat == 1 {
                mirostat_v1(logits, tau, eta, &mut self.mu, &mut self.candidates, &mut self.rng)
            } else {
                mirostat_v2(logits, tau, eta, &mut self.mu, &mut self.candidates, &mut self.rng)
            };
            return token.ok_or(Error::NoCandidates);
        }
        self.warp_stages(logits);
        let Some(support) = &self.support else {
            if !softmax(logits, &mut self.probs) {
                return Err(Error::NoCandidates);
            }
            return draw(&self.probs, &mut self.rng).ok_or(Error::NoCandidates);
        };
        // Only the support can be drawn: the softmax and the draw over its logits, in id
        // order, give the very token the whole slice would (the other entries are 0).
        self.picked.clear();
        self.picked.extend(support.iter().map(|&id| logits[id as usize]));
        if !softmax(&self.picked, &mut self.probs) {
            return Err(Error::NoCandidates);
        }
        let at = draw(&self.probs, &mut self.rng).ok_or(Error::NoCandidates)?;
        Ok(TokenId(support[at.index()]))
    }

    /// The whole chain but the draw, for a sampling (not greedy, not mirostat) setting: the
    /// bias, then the stages in order.
    fn warp(&mut self, logits: &mut [f32]) {
        if self.settings.samplers.first() != Some(&SamplerKind::Penalties) {
            logit_bias(logits, &self.settings.logit_bias);
        }
        self.warp_stages(logits);
    }

    /// The stages of [`SamplerSettings::samplers`] in order (the bias after a leading
    /// `penalties`).
    ///
    /// A top-k stage records the support left ([`Sampler::support`]); the stages after it
    /// work on that support alone. None of them can bring back a `-inf` logit (the bias,
    /// the only stage that could, comes first or right after a leading `penalties`), so the
    /// support stays a superset of the candidates.
    fn warp_stages(&mut self, logits: &mut [f32]) {
        if let Some(old) = self.support.take() {
            self.spare = old;
        }
        for i in 0..self.settings.samplers.len() {
            let s = &self.settings;
            let support = self.support.as_deref();
            match s.samplers[i] {
                SamplerKind::Penalties => {
                    self.penalties(logits);
                    if i == 0 {
                        logit_bias(logits, &self.settings.logit_bias);
                    }
                }
                SamplerKind::Temperature => match support {
                    Some(ids) => temperature_in(logits, s.temperature, ids),
                    None => temperature(logits, s.temperature),
                },
                // A no-op that keeps what an earlier top-k learnt.
                SamplerKind::TopK if s.top_k == 0 => {}
                SamplerKind::TopK => {
                    let mut ids = self.support.take().unwrap_or_else(|| std::mem::take(&mut self.spare));
                    let s = &self.settings;
                    if top_k_support(logits, s.top_k, &mut self.candidates, &mut ids) {
                        self.support = Some(ids);
                    } else {
                        self.spare = ids;
                    }
                }
                SamplerKind::TypicalP => typical_p_in(logits, s.typical_p, &mut self.candidates, support),
                SamplerKind::TopP => top_p_in(logits, s.top_p, &mut self.candidates, support),
                SamplerKind::MinP => min_p_in(logits, s.min_p, support),
            }
        }
    }

    /// The deterministic stages, in place: the logit bias and (when the chain has them)
    /// the penalties: the logits greedy decoding takes its [`argmax`] of. Beam search
    /// scores its candidates with the softmax of these, so one beam is greedy decoding.
    pub fn score_logits(&mut self, logits: &mut [f32]) {
        let bias_after_penalties = self.settings.samplers.first() == Some(&SamplerKind::Penalties);
        if !bias_after_penalties {
            logit_bias(logits, &self.settings.logit_bias);
        }
        if self.settings.samplers.contains(&SamplerKind::Penalties) {
            self.penalties(logits);
        }
        if bias_after_penalties {
            logit_bias(logits, &self.settings.logit_bias);
        }
    }

    /// The distribution [`Sampler::sample`] would draw from, into `probs` (the chain over
    /// `logits`, modified in place, then a softmax; greedy: all mass on the argmax). For
    /// speculative sampling, which needs the whole distribution of both models. Not with
    /// mirostat, whose truncation moves with each draw ([`Error::Unsupported`]); fails
    /// like [`Sampler::sample`] when every logit is `-inf`.
    pub fn distribution(&mut self, logits: &mut [f32], probs: &mut Vec<f32>) -> Result<(), Error> {
        if self.settings.mirostat != 0 {
            return Err(Error::Unsupported("speculative sampling with mirostat"));
        }
        if self.settings.temperature == 0.0 {
            self.score_logits(logits);
            let best = argmax(logits).ok_or(Error::NoCandidates)?;
            probs.clear();
            probs.resize(logits.len(), 0.0);
            probs[best.index()] = 1.0;
            return Ok(());
        }
        self.warp(logits);
        if !softmax(logits, probs) {
            return Err(Error::NoCandidates);
        }
        Ok(())
    }

    /// Draws from `probs` with this sampler's RNG.
    pub fn draw_from(&mut self, probs: &[f32]) -> Option<TokenId> {
        draw(probs, &mut self.rng)
    }

    /// A uniform number in `[0, 1)` from this sampler's RNG (speculative sampling's test).
    pub fn uniform(&mut self) -> f32 {
        self.rng.random::<f32>()
    }

    /// The `penalties` stage: repetition, frequency and presence penalties over the window.
    fn penalties(&mut self, logits: &mut [f32]) {
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
            SamplerSettings { logit_bias: vec![(TokenId(0), f32::INFINITY)], ..Default::default() },
            SamplerSettings { logit_bias: vec![(TokenId(0), f32::NAN)], ..Default::default() },
            SamplerSettings { typical_p: 0.0, ..Default::default() },
            SamplerSettings { typical_p: 1.5, ..Default::default() },
            SamplerSettings { typical_p: f32::NAN, ..Default::default() },
            SamplerSettings { mirostat: 3, ..Default::default() },
            SamplerSettings { mirostat_tau: -1.0, ..Default::default() },
            SamplerSettings { mirostat_tau: f32::INFINITY, ..Default::default() },
            SamplerSettings { mirostat_eta: f32::NAN, ..Default::default() },
            SamplerSettings { samplers: vec![SamplerKind::TopK, SamplerKind::TopK], ..Default::default() },
        ] {
            assert!(matches!(Sampler::new(s), Err(Error::InvalidSetting { .. })));
        }
        assert!(Sampler::new(SamplerSettings::default()).is_ok());
        assert!(Sampler::new(SamplerSettings { samplers: Vec::new(), ..Default::default() }).is_ok());
    }

    #[test]
    fn a_negative_infinite_bias_bans_the_token() {
        let settings = SamplerSettings {
            logit_bias: vec![(TokenId(1), f32::NEG_INFINITY)],
            temperature: 0.0,
            ..Default::default()
        };
        let mut s = Sampler::new(settings).unwrap();
        assert_eq!(s.sample(&mut [1.0, 9.0, 2.0]), Ok(TokenId(2)));
    }

    /// Logits whose softmax is exactly `probs`.
    fn logits_of(probs: &[f32]) -> Vec<f32> {
        probs.iter().map(|p| p.ln()).collect()
    }

    /// Which entries are still candidates.
    fn kept(l: &[f32]) -> Vec<bool> {
        l.iter().map(|x| *x != NEG).collect()
    }

    #[test]
    fn typical_p_keeps_the_tokens_closest_to_the_entropy() {
        // By hand (python: `import math; p=[.5,.3,.15,.05]; H=-sum(x*math.log(x) for x in p);
        // [abs(-math.log(x)-H) for x in p]`): H = 1.1421 nats, and the distances of the
        // surprises -ln p = [0.693, 1.204, 1.897, 2.996] from H are [0.449, 0.062, 0.755,
        // 1.854]. Closest first: token 1 (0.3), 0 (0.5), 2 (0.15), 3 (0.05), cumulative
        // probability 0.3, 0.8, 0.95, 1.0.
        let probs = [0.5, 0.3, 0.15, 0.05];
        let cases: [(f32, [bool; 4]); 4] = [
            (0.9, [true, true, true, false]),   // 0.95 is the first to reach 0.9
            (0.5, [true, true, false, false]),  // 0.8 reaches 0.5
            (0.2, [false, true, false, false]), // the most likely token is not typical
            (1.0, [true, true, true, true]),    // off
        ];
        for (p, expected) in cases {
            let mut l = logits_of(&probs);
            typical_p(&mut l, p, &mut Vec::new());
            assert_eq!(kept(&l), expected, "p = {p}");
        }
        // Masked tokens stay masked and do not count.
        let mut l = logits_of(&probs);
        l.insert(0, NEG);
        l.push(NEG);
        typical_p(&mut l, 0.5, &mut Vec::new());
        assert_eq!(kept(&l), [false, true, true, false, false, false]);
        // One candidate, or none: untouched.
        let mut l = vec![NEG, 3.0];
        typical_p(&mut l, 0.1, &mut Vec::new());
        assert_eq!(l, vec![NEG, 3.0]);
        typical_p(&mut [NEG, NEG], 0.1, &mut Vec::new());
    }

    #[test]
    fn mirostat_v2_moves_mu_towards_the_target_surprise() {
        // 256 equally likely tokens (and 44 masked ones): every surprise is log2 256 = 8 bits.
        let mut base = vec![0.0f32; 300];
        for l in base.iter_mut().skip(256) {
            *l = NEG;
        }
        // tau 5: mu starts at 10 >= 8, so all 256 stay; surprise 8 > tau, so mu falls by
        // eta * (8 - 5) = 0.3 per step. tau 9: mu starts at 18 and rises by 0.1 per step.
        for (tau, step) in [(5.0f32, -0.3f32), (9.0, 0.1)] {
            let settings = SamplerSettings {
                temperature: 1.0,
                mirostat: 2,
                mirostat_tau: tau,
                seed: Some(3),
                ..Default::default()
            };
            let mut s = Sampler::new(settings).unwrap();
            assert_eq!(s.mirostat_mu(), 2.0 * tau);
            for n in 1..=3 {
                let mut l = base.clone();
                let t = s.sample(&mut l).unwrap();
                assert!(t.index() < 256);
                assert_eq!(kept(&l), kept(&base));
                let expected = 2.0 * tau + n as f32 * step;
                assert!((s.mirostat_mu() - expected).abs() < 1e-4, "{} vs {expected}", s.mirostat_mu());
            }
        }
        // mu below every surprise: only the most likely token survives.
        let mut l = vec![0.0, 0.1, -0.1, NEG];
        let mut mu = 0.5;
        let t = mirostat_v2(&mut l, 5.0, 0.1, &mut mu, &mut Vec::new(), &mut StdRng::seed_from_u64(1));
        assert_eq!(t, Some(TokenId(1)));
        assert_eq!(kept(&l), [false, true, false, false]);
        // Surprise 0 within the kept set < tau: mu rises by eta * tau.
        assert!((mu - 1.0).abs() < 1e-6);
        assert_eq!(mirostat_v2(&mut [NEG], 5.0, 0.1, &mut mu, &mut Vec::new(), &mut StdRng::seed_from_u64(1)), None);
    }

    #[test]
    fn mirostat_v1_truncates_a_zipf_distribution_at_the_predicted_k() {
        // p_i ∝ 1 / (i+1)^2 over N = 200 tokens: the fitted exponent is exactly s = 2, so
        // eps = 1 and k = (eps * 2^mu / (1 - N^-eps))^(1/s) = sqrt(1024 / 0.995) = 32.08 at
        // mu = 2 * tau = 10: the top 32 tokens survive.
        let n = 200;
        let base: Vec<f32> = (0..n).map(|i| -2.0 * ((i + 1) as f32).ln()).collect();
        for seed in 0..20 {
            let mut l = base.clone();
            let mut mu = 10.0f32;
            let mut rng = StdRng::seed_from_u64(seed);
            let t = mirostat_v1(&mut l, 5.0, 0.1, &mut mu, &mut Vec::new(), &mut rng).unwrap();
            let expected_kept: Vec<bool> = (0..n).map(|i| i < 32).collect();
            assert_eq!(kept(&l), expected_kept);
            assert!(t.index() < 32);
            // mu -= eta * (surprise - tau), the surprise within the kept 32, in bits.
            let z: f64 = (1..=32).map(|i| 1.0 / (i as f64 * i as f64)).sum();
            let p = 1.0 / ((t.index() + 1) as f64).powi(2) / z;
            let expected_mu = 10.0 - 0.1 * (-p.log2() - 5.0);
            assert!((mu as f64 - expected_mu).abs() < 1e-4, "{mu} vs {expected_mu}");
        }
        // A lower mu keeps fewer: mu = 4 gives sqrt(16 / 0.995) = 4.01, so 4 tokens.
        let mut l = base.clone();
        let mut mu = 4.0f32;
        mirostat_v1(&mut l, 5.0, 0.1, &mut mu, &mut Vec::new(), &mut StdRng::seed_from_u64(0)).unwrap();
        assert_eq!(kept(&l).iter().filter(|k| **k).count(), 4);
        // Degenerate inputs: one candidate, all equal, none.
        let mut mu = 10.0f32;
        let mut rng = StdRng::seed_from_u64(0);
        assert_eq!(mirostat_v1(&mut [NEG, 1.0], 5.0, 0.1, &mut mu, &mut Vec::new(), &mut rng), Some(TokenId(1)));
        let mut flat = vec![0.5f32; 8];
        assert!(mirostat_v1(&mut flat, 5.0, 0.1, &mut mu, &mut Vec::new(), &mut rng).is_some());
        assert!(mu.is_finite());
        assert_eq!(mirostat_v1(&mut [NEG, NEG], 5.0, 0.1, &mut mu, &mut Vec::new(), &mut rng), None);
    }

    /// Top-k by sorting every candidate: the definition `top_k`'s one pass must meet.
    fn top_k_by_sorting(logits: &mut [f32], k: usize) {
        let mut all = Vec::new();
        collect_candidates(logits, &mut all);
        if k == 0 || k >= all.len() {
            return;
        }
        all.sort_unstable_by(by_logit_desc);
        for &(_, id) in &all[k..] {
            logits[id as usize] = NEG;
        }
    }

    #[test]
    fn top_k_keeps_what_sorting_every_candidate_keeps() {
        let mut data = StdRng::seed_from_u64(43);
        for round in 0..400 {
            let n = data.random_range(1..6000);
            // Coarse values, so ties are common; some masked, a few NaN and +inf.
            let mut l: Vec<f32> = (0..n).map(|_| data.random_range(-40i32..40) as f32 / 4.0).collect();
            for x in l.iter_mut() {
                match data.random_range(0..100) {
                    0..30 => *x = NEG,
                    30 => *x = f32::NAN,
                    31 if round % 7 == 0 => *x = f32::INFINITY,
                    _ => {}
                }
            }
            let k = [1, 2, 5, 40, 100, 3000, 10_000][round % 7];
            let (mut fast, mut slow) = (l.clone(), l);
            let mut support = Vec::new();
            assert!(top_k_support(&mut fast, k, &mut Vec::new(), &mut support));
            top_k_by_sorting(&mut slow, k);
            let live = |x: &f32| !x.is_nan() && *x != NEG;
            for (id, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert_eq!(live(a), live(b), "round {round}, id {id}");
                if live(a) {
                    assert_eq!(a, b, "round {round}, id {id}");
                }
            }
            // The support is exactly the live ids, ascending.
            let want: Vec<u32> = (0..fast.len() as u32).filter(|&i| live(&fast[i as usize])).collect();
            assert_eq!(support, want, "round {round}");
        }
    }

    #[test]
    fn the_draw_over_the_support_is_the_draw_over_every_logit() {
        // The chain with top-k draws from the support; the same chain with top-k done by
        // sorting (no support) must draw the same token with the same seed.
        let mut data = StdRng::seed_from_u64(44);
        for (k, p, min, temp) in [(40, 0.95, 0.05, 0.8), (3, 1.0, 0.0, 1.0), (500, 0.5, 0.2, 1.3)] {
            let settings = SamplerSettings {
                top_k: k,
                top_p: p,
                min_p: min,
                temperature: temp,
                seed: Some(5),
                ..Default::default()
            };
            let mut sampler = Sampler::new(settings.clone()).unwrap();
            let mut rng = StdRng::seed_from_u64(5);
            for step in 0..300 {
                let base = random_logits(&mut data, 4096);
                let (mut a, mut b) = (base.clone(), base);
                let got = sampler.sample(&mut a);
                temperature(&mut b, temp);
                top_k_by_sorting(&mut b, k);
                top_p(&mut b, p, &mut Vec::new());
                min_p(&mut b, min);
                let mut probs = Vec::new();
                assert!(softmax(&b, &mut probs));
                assert_eq!(got.ok(), draw(&probs, &mut rng), "step {step}");
                assert_eq!(kept(&a), kept(&b), "step {step}");
            }
        }
    }

    /// Random logits with about a third masked (at least one of ids 2.. left).
    fn random_logits(rng: &mut StdRng, n: usize) -> Vec<f32> {
        let mut l: Vec<f32> = (0..n).map(|_| rng.random_range(-8.0f32..8.0)).collect();
        for x in l.iter_mut() {
            if rng.random_bool(0.33) {
                *x = NEG;
            }
        }
        let keep = rng.random_range(2..n);
        l[keep] = rng.random_range(-8.0f32..8.0);
        l
    }

    #[test]
    fn masked_tokens_are_never_drawn_in_any_order() {
        use SamplerKind::*;
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let all = [Penalties, TopK, TypicalP, TopP, MinP, Temperature];
        for round in 0..200 {
            // A random subset of the stages in a random order.
            let mut order: Vec<SamplerKind> = all.iter().copied().filter(|_| rng.random_bool(0.7)).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
            let settings = SamplerSettings {
                temperature: [0.0, 0.3, 1.0, 2.5][round % 4],
                top_k: rng.random_range(0..6),
                top_p: rng.random_range(0.05f32..=1.0),
                min_p: rng.random_range(0.0f32..0.5),
                typical_p: rng.random_range(0.05f32..=1.0),
                mirostat: (round % 3) as u8,
                repeat_penalty: 1.3,
                presence_penalty: 0.5,
                logit_bias: vec![(TokenId(0), 3.0), (TokenId(1), NEG)],
                samplers: order,
                seed: Some(round as u64),
                ..Default::default()
            };
            let mut s = Sampler::new(settings).unwrap();
            for _ in 0..5 {
                let base = random_logits(&mut rng, 40);
                let t = s.sample(&mut base.clone()).unwrap_or_else(|e| panic!("{e} {:?} {base:?}", s.settings()));
                assert!(base[t.index()] != NEG && t != TokenId(1), "round {round}: drew masked {t:?}");
                s.accept(t);
            }
        }
    }

    /// The chain as `Sampler::sample` ran it before the order became configurable, call for
    /// call, with its own window and RNG.
    fn old_chain(
        settings: &SamplerSettings,
        history: &std::collections::VecDeque<TokenId>,
        rng: &mut StdRng,
        logits: &mut [f32],
    ) -> Result<TokenId, Error> {
        let s = settings;
        let penalties = s.repeat_penalty != 1.0 || s.frequency_penalty != 0.0 || s.presence_penalty != 0.0;
        if penalties && !history.is_empty() {
            let mut sorted: Vec<TokenId> = history.iter().copied().collect();
            sorted.sort_unstable();
            let mut seen: Vec<(TokenId, u32)> = Vec::new();
            for id in sorted {
                match seen.last_mut() {
                    Some((last, count)) if *last == id => *count += 1,
                    _ => seen.push((id, 1)),
                }
            }
            repetition_penalty(logits, &seen, s.repeat_penalty);
            frequency_presence_penalty(logits, &seen, s.frequency_penalty, s.presence_penalty);
        }
        logit_bias(logits, &s.logit_bias);
        if s.temperature == 0.0 {
            return argmax(logits).ok_or(Error::NoCandidates);
        }
        temperature(logits, s.temperature);
        top_k(logits, s.top_k, &mut Vec::new());
        top_p(logits, s.top_p, &mut Vec::new());
        min_p(logits, s.min_p);
        let mut probs = Vec::new();
        if !softmax(logits, &mut probs) {
            return Err(Error::NoCandidates);
        }
        draw(&probs, rng).ok_or(Error::NoCandidates)
    }

    #[test]
    fn the_default_order_reproduces_the_old_chain() {
        let mut data = StdRng::seed_from_u64(41);
        for (temp, top_k, top_p, min_p) in [(0.8, 40, 0.95, 0.05), (1.0, 5, 0.7, 0.0), (0.0, 40, 0.95, 0.05)] {
            let settings = SamplerSettings {
                temperature: temp,
                top_k,
                top_p,
                min_p,
                repeat_penalty: 1.2,
                repeat_last_n: 16,
                frequency_penalty: 0.3,
                presence_penalty: 0.2,
                logit_bias: vec![(TokenId(3), 2.0), (TokenId(7), -1.5)],
                seed: Some(9),
                ..Default::default()
            };
            let mut sampler = Sampler::new(settings.clone()).unwrap();
            let mut rng = StdRng::seed_from_u64(9);
            let mut history = std::collections::VecDeque::new();
            for step in 0..1000 {
                let base = random_logits(&mut data, 64);
                let (mut a, mut b) = (base.clone(), base);
                let new = sampler.sample(&mut a);
                let old = old_chain(&settings, &history, &mut rng, &mut b);
                assert_eq!(new, old, "step {step}");
                assert_eq!(kept(&a), kept(&b), "step {step}");
                let t = new.unwrap();
                sampler.accept(t);
                if history.len() == 16 {
                    history.pop_front();
                }
                history.push_back(t);
            }
        }
    }

    #[test]
    fn the_order_is_the_order_stages_run_in() {
        // Probability ratio e^-3 = 0.0498 < min-p 0.05 at temperature 1, but e^-1.5 = 0.22
        // after temperature 2: min-p before temperature drops token 1, after it keeps it.
        let run = |order: &str| {
            let settings = SamplerSettings {
                temperature: 2.0,
                samplers: SamplerKind::parse_order(order).unwrap(),
                seed: Some(1),
                ..Default::default()
            };
            let mut l = vec![0.0, -3.0];
            Sampler::new(settings).unwrap().sample(&mut l).unwrap();
            kept(&l)
        };
        assert_eq!(run("min_p;temperature"), [true, false]);
        assert_eq!(run("temperature;min_p"), [true, true]);
        // No min-p stage at all: nothing is dropped.
        assert_eq!(run("top_k"), [true, true]);
    }

    #[test]
    fn sampler_orders_parse_like_llama_cpp() {
        use SamplerKind::*;
        assert_eq!(
            SamplerKind::parse_order("top_k;typ_p;top_p;min_p;temperature").unwrap(),
            vec![TopK, TypicalP, TopP, MinP, Temperature]
        );
        assert_eq!(
            SamplerKind::parse_order(" penalties ; top-k;typical_p;nucleus;min-p;temp;").unwrap(),
            vec![Penalties, TopK, TypicalP, TopP, MinP, Temperature]
        );
        assert_eq!(SamplerKind::parse_order("typical;top-p").unwrap(), vec![TypicalP, TopP]);
        assert_eq!(SamplerKind::parse_order("").unwrap(), Vec::new());
        for kind in SamplerKind::DEFAULT_ORDER {
            assert_eq!(SamplerKind::from_name(kind.name()), Ok(kind));
        }
        let named = |order: &str| match SamplerKind::parse_order(order) {
            Err(Error::InvalidSetting { name: "samplers", value, reason }) => (value, reason),
            other => panic!("{order}: {other:?}"),
        };
        assert_eq!(named("top_k;bogus;top_p").0, "bogus");
        let (value, reason) = named("penalties;dry;top_k");
        assert_eq!(value, "dry");
        assert!(reason.contains("not supported"));
        assert_eq!(named("xtc").0, "xtc");
        assert_eq!(named("top_k;top-k"), ("top-k".to_string(), "listed twice"));
        let message = SamplerKind::parse_order("Top_K").unwrap_err().to_string();
        assert!(message.contains("Top_K"), "{message}");
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

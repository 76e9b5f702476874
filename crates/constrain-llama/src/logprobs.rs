//! Log-probabilities of the tokens a generation produced, for callers that rank or score
//! outputs (OpenAI's `logprobs` and `top_logprobs`).
//!
//! A token's log-probability is taken from the distribution it was drawn from: the model's
//! logits after the grammar mask and the whole warper chain (penalties, bias, temperature,
//! top-k/p, min-p), renormalised over the tokens left. So a token the grammar or a warper
//! removed has no probability, and the values of one step sum to 1. Under greedy decoding
//! (temperature 0) the chain stops after the penalties and bias: the distribution is then
//! the masked one at temperature 1. A token the grammar dictated (jump-forward) was not drawn
//! from anything: it gets log-probability 0 and itself as its only alternative.
//!
//! Cost: one pass over the logits for the normaliser and a bounded selection of the top
//! `n` — only when a caller asked for log-probabilities.
use constrain::vocab::TokenId;

/// The most alternatives a step reports (OpenAI's limit for `top_logprobs`).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// One produced token with its log-probability and the step's most likely alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token.
    pub token: TokenId,
    /// Natural log of its probability under the distribution it was drawn from (0 for a
    /// forced token).
    pub logprob: f32,
    /// The step's most likely tokens and their log-probabilities, most likely first (at most
    /// the number asked for, and at most [`MAX_TOP_LOGPROBS`]).
    pub top: Vec<(TokenId, f32)>,
}

impl TokenLogprob {
    /// A token the grammar dictated: probability 1, no alternative.
    pub fn forced(token: TokenId, top_n: usize) -> TokenLogprob {
        let top = if top_n > 0 { vec![(token, 0.0)] } else { Vec::new() };
        TokenLogprob { token, logprob: 0.0, top }
    }

    /// The log-probability of `token` and the `top_n` most likely tokens under the softmax
    /// of `logits` (`-inf` entries have none). `None` when every logit is `-inf` or NaN.
    pub fn of(logits: &[f32], token: TokenId, top_n: usize) -> Option<TokenLogprob> {
        let (norm, top) = top_n_logprobs(logits, top_n.min(MAX_TOP_LOGPROBS))?;
        let logprob = logits.get(token.index()).map_or(f32::NEG_INFINITY, |&l| l - norm);
        Some(TokenLogprob { token, logprob, top })
    }
}

/// The log-softmax normaliser of `logits` (over the finite ones) and the `n` most likely
/// tokens with their log-probabilities, most likely first, ties towards the lower id (the
/// order greedy decoding's argmax breaks them in). `None` when no logit is finite.
pub(crate) fn top_n_logprobs(logits: &[f32], n: usize) -> Option<(f32, Vec<(TokenId, f32)>)> {
    let max = logits.iter().copied().filter(|l| l.is_finite()).fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return None;
    }
    let sum: f64 = logits.iter().filter(|l| l.is_finite()).map(|&l| f64::from(l - max).exp()).sum();
    let norm = max + sum.ln() as f32;
    // A bounded selection: the `n` best seen so far, best first.
    let mut top: Vec<(TokenId, f32)> = Vec::with_capacity(n + 1);
    if n > 0 {
        for (i, &l) in logits.iter().enumerate() {
            if !l.is_finite() || top.len() == n && top.last().is_some_and(|&(_, worst)| l <= worst) {
                continue;
            }
            let at = top.partition_point(|&(_, better)| better >= l);
            top.insert(at, (TokenId(i as u32), l));
            top.truncate(n);
        }
    }
    for (_, l) in &mut top {
        *l -= norm;
    }
    Some((norm, top))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_the_log_softmax_over_the_finite_logits() {
        let ninf = f32::NEG_INFINITY;
        let logits = [1.0, ninf, 3.0, 2.0, ninf];
        let z: f32 = [1.0f32, 3.0, 2.0].iter().map(|l| l.exp()).sum();
        let lp = TokenLogprob::of(&logits, TokenId(3), 2).unwrap();
        assert!((lp.logprob - (2.0 - z.ln())).abs() < 1e-6, "{lp:?}");
        assert_eq!(lp.top.iter().map(|t| t.0).collect::<Vec<_>>(), [TokenId(2), TokenId(3)]);
        assert!((lp.top[0].1 - (3.0 - z.ln())).abs() < 1e-6);
        // The probabilities of a step sum to 1.
        let all = TokenLogprob::of(&logits, TokenId(0), 5).unwrap();
        assert_eq!(all.top.len(), 3, "masked tokens are no alternatives: {all:?}");
        let total: f32 = all.top.iter().map(|t| t.1.exp()).sum();
        assert!((total - 1.0).abs() < 1e-5);
        // A masked token has no probability; all masked: nothing.
        assert_eq!(TokenLogprob::of(&logits, TokenId(1), 0).unwrap().logprob, ninf);
        assert!(TokenLogprob::of(&[ninf, ninf], TokenId(0), 3).is_none());
        assert_eq!(TokenLogprob::forced(TokenId(4), 3).top, [(TokenId(4), 0.0)]);
    }

    #[test]
    fn the_top_is_capped_and_ordered() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 100) as f32).collect();
        let lp = TokenLogprob::of(&logits, TokenId(0), 50).unwrap();
        assert_eq!(lp.top.len(), MAX_TOP_LOGPROBS);
        assert!(lp.top.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(logits[lp.top[0].0.index()], 99.0);
    }
}

//! Draft tokens for speculative decoding from n-gram lookup, with no second model.
//!
//! Input: the sequence so far (prompt and output tokens). Output: up to `k` tokens that
//! followed the most recent earlier occurrence of the sequence's last `n` tokens, trying
//! `n` from [`NGRAM_MAX`] down to [`NGRAM_MIN`]. JSON output repeats itself (keys of array
//! items, the prompt's schema and examples), so these guesses are often right.
//!
//! How the drafts are used ([`crate::Generator`] with `GeneratorSettings::lookup`): the
//! sampled token and its drafts are evaluated in one `llama_decode`, and each draft is then
//! checked by sampling the position before it exactly as plain decoding would (mask,
//! closing, warpers, the same seeded draw): the draft is kept if the draw equals it, and the
//! first draw that differs is the output token there. For a draft that is one fixed token,
//! this is the speculative rejection rule (accept with probability p(d), else draw from p
//! without d, renormalized), and since the draws are the same draws, the output is the
//! plain decoding's token for token at any temperature, up to the batched evaluation's
//! floating-point differences in the logits.
use constrain::vocab::TokenId;

/// The longest suffix looked up.
pub const NGRAM_MAX: usize = 3;

/// The shortest suffix looked up: single tokens (`"`, `,`) recur everywhere and would
/// mostly draft wrong continuations, and each draft costs a batch slot.
pub const NGRAM_MIN: usize = 2;

/// Writes into `out` (cleared first) up to `k` tokens that followed the latest earlier
/// occurrence of `history`'s last `n` tokens, for the longest `n` in
/// `NGRAM_MIN..=NGRAM_MAX` that occurs. Empty when none does. O(`history.len()` × n).
pub fn propose(history: &[TokenId], k: usize, out: &mut Vec<TokenId>) {
    out.clear();
    if k == 0 {
        return;
    }
    let len = history.len();
    for n in (NGRAM_MIN..=NGRAM_MAX).rev() {
        if len <= n {
            continue;
        }
        let tail = &history[len - n..];
        // The latest earlier start `i` (the tail itself starts at `len - n`).
        if let Some(i) = (0..len - n).rev().find(|&i| &history[i..i + n] == tail) {
            let from = i + n;
            out.extend_from_slice(&history[from..(from + k).min(len)]);
            if !out.is_empty() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[u32]) -> Vec<TokenId> {
        v.iter().map(|&t| TokenId(t)).collect()
    }

    #[test]
    fn drafts_follow_the_latest_longest_match() {
        let mut out = Vec::new();
        // `7 8` occurred twice; the latest occurrence (at 5) is followed by 4 5.
        propose(&ids(&[7, 8, 1, 2, 3, 7, 8, 4, 5, 9, 7, 8]), 3, &mut out);
        assert_eq!(out, ids(&[4, 5, 9]));
        // A 3-gram match wins over a later 2-gram one.
        propose(&ids(&[1, 2, 3, 6, 6, 2, 3, 5, 1, 2, 3]), 2, &mut out);
        assert_eq!(out, ids(&[6, 6]));
        // The draft stops at the end of the history.
        propose(&ids(&[1, 2, 9, 1, 2]), 5, &mut out);
        assert_eq!(out, ids(&[9, 1, 2]));
        // No repeated 2-gram: no draft; nor with k = 0 or a short history.
        propose(&ids(&[1, 2, 3, 4, 1]), 4, &mut out);
        assert!(out.is_empty());
        propose(&ids(&[1, 2, 1, 2]), 0, &mut out);
        assert!(out.is_empty());
        propose(&ids(&[1, 2]), 3, &mut out);
        assert!(out.is_empty());
    }
}

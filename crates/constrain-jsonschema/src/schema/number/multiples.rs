//! `multipleOf`: a step `q · 10^t` as a grid of digits, a last-digit test, or a remainder
//! automaton over the digits.

use crate::grammar::{Expr, GrammarBuilder, RuleId};

use super::{decimal::Dec, ranges::any_digits, ranges::digit, ranges::uint_range};

/// A positive `multipleOf` written as `q · 10^t`, with `q` a positive integer not divisible
/// by ten (digits, no leading zeros). `x` is a multiple iff `x = j · q · 10^t` for an integer
/// `j`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The significant digits.
    pub q: Vec<u8>,
    /// The power of ten (negative for a fractional step).
    pub t: i64,
}

impl Step {
    /// Splits a positive decimal.
    pub fn of(m: &Dec) -> Step {
        let mut q: Vec<u8> = m.int.iter().chain(&m.frac).copied().skip_while(|&d| d == 0).collect();
        let mut t = -(m.frac.len() as i64);
        while q.last() == Some(&0) {
            q.pop();
            t += 1;
        }
        Step { q, t }
    }

    /// `q` as an integer, if it fits in a `u64`.
    pub fn q_u64(&self) -> Option<u64> {
        if self.q.len() > 19 {
            return None;
        }
        self.q.iter().try_fold(0u64, |v, &d| v.checked_mul(10)?.checked_add(d as u64))
    }

    /// The step integers must keep: an integer `x` is a multiple of `q · 10^t` iff it is a
    /// multiple of `q' · 10^max(t, 0)`, where `q'` is `q` without the factors 2 and 5 that
    /// `10^-t` cancels when `t < 0`.
    pub fn for_integers(&self) -> Step {
        if self.t >= 0 {
            return self.clone();
        }
        let s = -self.t;
        let mut q = self.q.clone();
        for p in [2u8, 5] {
            let mut n = 0;
            while n < s {
                match div_small(&q, p) {
                    Some(d) => q = d,
                    None => break,
                }
                n += 1;
            }
        }
        Step { q, t: 0 }
    }
}

/// `d / p` if `p` divides the digit string `d` exactly.
fn div_small(d: &[u8], p: u8) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(d.len());
    let mut r: u32 = 0;
    for &x in d {
        let v = r * 10 + x as u32;
        out.push((v / p as u32) as u8);
        r = v % p as u32;
    }
    if r != 0 {
        return None;
    }
    let lead = out.iter().take_while(|&&x| x == 0).count();
    out.drain(..lead);
    Some(out)
}

/// Integers `y · 10^zeros` for integers `y` in `lo..=hi` (inclusive, `None` unbounded): the
/// multiples of `10^zeros` in a range, given the range divided by `10^zeros`.
pub fn scaled_int_range(lo: Option<&Dec>, hi: Option<&Dec>, zeros: usize) -> Expr {
    let z = Expr::Literal(vec![b'0'; zeros]);
    let one = vec![1u8];
    let mut alts = Vec::new();
    if lo.is_none_or(|l| l.neg || l.is_zero()) && hi.is_none_or(|h| !h.neg) {
        alts.push(Expr::lit("0"));
    }
    // Positive: y in max(lo, 1) ..= hi.
    if hi.is_none_or(|h| !h.neg && !h.is_zero()) {
        let l = match lo {
            Some(l) if !l.neg && !l.is_zero() => l.int.clone(),
            _ => one.clone(),
        };
        alts.push(Expr::seq([uint_range(&l, hi.map(|h| h.int.as_slice())), z.clone()]));
    }
    // Negative: y = -m, m in max(-hi, 1) ..= -lo.
    if lo.is_none_or(|l| l.neg) {
        let m = match hi {
            Some(h) if h.neg => h.int.clone(),
            _ => one,
        };
        alts.push(Expr::seq([Expr::lit("-"), uint_range(&m, lo.map(|l| l.int.as_slice())), z]));
    }
    Expr::alt(alts)
}

/// Unbounded integers that are multiples of `q · 10^zeros` for `q` in 1, 2, 5 (a last-digit
/// test): `None` for other `q`.
pub fn multiples_regular(q: u64, zeros: usize) -> Option<Expr> {
    let last = match q {
        1 => return Some(scaled_int_range(None, None, zeros)),
        2 => Expr::one_of_bytes(b"02468"),
        5 => Expr::one_of_bytes(b"05"),
        _ => return None,
    };
    let z = Expr::Literal(vec![b'0'; zeros]);
    // 0 alone, or a non-zero multiple: y ends in an even digit (or 0/5) and is not 0.
    let nonzero_single = match q {
        2 => Expr::one_of_bytes(b"2468"),
        _ => Expr::lit("5"),
    };
    let y = Expr::alt([nonzero_single, Expr::seq([digit(1, 9), any_digits(0, None), last])]);
    Some(Expr::alt([Expr::lit("0"), Expr::seq([Expr::opt(Expr::lit("-")), y, z])]))
}

/// Most grammar rules a remainder automaton may take (`q · (s + 1)` for a modulus `q` and `s`
/// fraction digits): a larger `multipleOf` is refused.
///
/// A constant of the algorithm, not a user limit: it bounds one rule family of
/// `multipleOf` (an error names the keyword past it), well below
/// [`crate::Limits::max_grammar_size`].
const MAX_REMAINDER_STATES: u64 = 1000;

/// Which signs a remainder automaton spells: the multiples `≥ 0`, `≤ 0`, or all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signs {
    /// Zero and positive multiples.
    NonNegative,
    /// Zero and negative multiples.
    NonPositive,
    /// Every multiple.
    All,
}

/// The numbers `x` without exponent, with at most `s` fraction digits, such that `x · 10^s` is
/// a multiple of `q`, followed by `zeros` literal zeros when `s = 0` and `x ≠ 0` (multiples of
/// `q · 10^zeros`). Built as rules, one per remainder: reading digit `d` in remainder `r` goes
/// to `(10r + d) mod q`; the integer part ends where `r · 10^s ≡ 0`, and after `L` fraction
/// digits where `r · 10^(s-L) ≡ 0`. The rules call each other once per integer digit, so a
/// number longer than the matcher's stack depth limit is cut (and reported there).
/// `None` when `q · (s + 1)` exceeds `MAX_REMAINDER_STATES` (1000).
pub fn remainder_multiples(b: &mut GrammarBuilder, q: u64, s: usize, zeros: usize, signs: Signs) -> Option<Expr> {
    let states = q.checked_mul(s as u64 + 1)?;
    if q == 0 || states > MAX_REMAINDER_STATES || (zeros > 0 && s > 0) {
        return None;
    }
    let qn = q as usize;
    // 10^k mod q for k in 0..=s.
    let mut p10 = vec![1 % q; s + 1];
    for k in 1..=s {
        p10[k] = p10[k - 1] * 10 % q;
    }
    let next = |r: usize, d: u8| ((r as u64 * 10 + d as u64) % q) as usize;
    // The rules are named after `base` (never handed out twice: see `fresh_name`), which is
    // also the number's own rule.
    let base = b.fresh_name("multiple");
    let top = b.declare(&base);
    let int_rules: Vec<RuleId> = (0..qn).map(|r| b.declare(&format!("{base}_i{r}"))).collect();
    // frac_rules[l - 1][r]: the fraction's digit `l` is next, remainder `r` so far.
    let frac_rules: Vec<Vec<RuleId>> =
        (1..=s).map(|l| (0..qn).map(|r| b.declare(&format!("{base}_f{l}_{r}"))).collect()).collect();
    let frac_start = |r: usize| -> Expr {
        match frac_rules.first().and_then(|f| f.get(r)) {
            Some(&id) => Expr::seq([Expr::lit("."), Expr::Ref(id)]),
            None => Expr::Nothing,
        }
    };
    for r in 0..qn {
        let mut alts: Vec<Expr> = (0..=9u8)
            .filter_map(|d| int_rules.get(next(r, d)).map(|&id| Expr::seq([digit(d, d), Expr::Ref(id)])))
            .collect();
        if (r as u64 * p10[s]) % q == 0 {
            alts.push(Expr::Literal(vec![b'0'; zeros]));
        }
        alts.push(frac_start(r));
        b.define(int_rules[r], Expr::alt(alts));
    }
    for l in 1..=s {
        for r in 0..qn {
            let mut alts = Vec::new();
            for d in 0..=9u8 {
                let r2 = next(r, d);
                let mut cont = Vec::new();
                if (r2 as u64 * p10[s - l]) % q == 0 {
                    cont.push(Expr::Empty);
                }
                if let Some(&id) = frac_rules.get(l).and_then(|f| f.get(r2)) {
                    cont.push(Expr::Ref(id));
                }
                alts.push(Expr::seq([digit(d, d), Expr::alt(cont)]));
            }
            b.define(frac_rules[l - 1][r], Expr::alt(alts));
        }
    }
    // Zero (with its fractions when s > 0), or a leading non-zero digit.
    let zero = Expr::seq([Expr::lit("0"), Expr::alt([Expr::Empty, frac_start(0)])]);
    let lead = Expr::alt(
        (1..=9u8).filter_map(|d| int_rules.get(next(0, d)).map(|&id| Expr::seq([digit(d, d), Expr::Ref(id)]))),
    );
    let magnitude = Expr::alt([zero, lead]);
    let number = match signs {
        Signs::NonNegative => magnitude,
        // Zero alone: `zero` also spells the positive `0.25`.
        Signs::NonPositive => Expr::alt([Expr::lit("0"), Expr::seq([Expr::lit("-"), magnitude])]),
        Signs::All => Expr::seq([Expr::opt(Expr::lit("-")), magnitude]),
    };
    b.define(top, number);
    Some(Expr::Ref(top))
}

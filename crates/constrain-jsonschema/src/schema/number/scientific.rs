//! Scientific notation within bounds: one leading digit and an exponent, as serializers
//! print floats, for bounded numbers, small multiples and large integers.

use crate::grammar::Expr;

use super::{
    decimal::cmp_dec, decimal::Bound, decimal::Dec, ranges::any_digits, ranges::any_fraction, ranges::by_sign,
    ranges::digit, ranges::empty_between, ranges::negative_zero, ranges::number_range, ranges::uint_range,
};

/// The power of ten of a positive value's leading digit: `floor(log10 x)`.
pub(super) fn decade(x: &Dec) -> i64 {
    if x.int.is_empty() {
        -(x.frac.iter().take_while(|&&d| d == 0).count() as i64) - 1
    } else {
        x.int.len() as i64 - 1
    }
}

/// `10^k`.
fn pow10(k: i64) -> Dec {
    let one = Dec { neg: false, int: vec![1], frac: vec![] };
    one.shift(k)
}

/// Numbers in scientific notation within the bounds: an optional minus, one digit 1–9, an
/// optional fraction and an exponent (`1e-07`, `1.6E+308`, `-2.5e3`), as Python, JavaScript
/// and C print floats. A documented subset: other mantissas (`16e307`, `0.5e1`) are not
/// generated or accepted where a bound applies.
///
/// How: a value `m · 10^k` with `1 ≤ m < 10` lies in the decade `[10^k, 10^(k+1))`. The
/// decades wholly in range are a range of exponents with any mantissa; each of the (at most
/// two per sign) decades a bound cuts takes the mantissas of [`number_range`] between the
/// bounds scaled by `10^-k`.
pub fn scientific_range(lo: Option<&Bound>, hi: Option<&Bound>) -> Expr {
    // Zero has no scientific spelling here (`0e0` is left out).
    by_sign(lo, hi, false, scientific_magnitudes)
}

/// Positive values `m · 10^k` (`1 ≤ m < 10`) within `lo` (positive, or zero exclusive) and
/// `hi`, in scientific notation.
fn scientific_magnitudes(lo: &Bound, hi: Option<&Bound>) -> Expr {
    use std::cmp::Ordering::*;
    if hi.is_some_and(|h| empty_between(lo, h)) {
        return Expr::Nothing;
    }
    let any_mantissa = Expr::seq([digit(1, 9), any_fraction(None)]);
    let mut alts = Vec::new();
    // Exponents of the decades wholly in range: from `first` (None: unbounded below) to
    // `last` (None: unbounded above).
    let (first, cut_lo) = if lo.value.is_zero() {
        (None, None)
    } else {
        let k = decade(&lo.value);
        let whole = !lo.strict && lo.value == pow10(k);
        (Some(if whole { k } else { k + 1 }), (!whole).then_some(k))
    };
    let (last, cut_hi) = match hi {
        None => (None, None),
        Some(h) => {
            let k = decade(&h.value);
            (Some(k - 1), Some(k))
        }
    };
    if first.zip(last).is_none_or(|(a, b)| a <= b) {
        alts.push(Expr::seq([any_mantissa, exponent_range(first, last)]));
    }
    // The decades a bound cuts: mantissas between the scaled bounds.
    let mut cut: Vec<i64> = cut_lo.into_iter().chain(cut_hi).collect();
    cut.dedup();
    for k in cut {
        let one = Bound { value: pow10(0), strict: false };
        let ten = Bound { value: pow10(1), strict: true };
        let scaled_lo = Bound { value: lo.value.shift(-k), strict: lo.strict };
        let scaled_hi = hi.map(|h| Bound { value: h.value.shift(-k), strict: h.strict });
        // On a tie the scaled bound wins: it may be exclusive (`exclusiveMaximum: -1e20`).
        let m_lo = if cmp_dec(&scaled_lo.value, &one.value) == Less { one } else { scaled_lo };
        let m_hi = match scaled_hi {
            Some(h) if cmp_dec(&h.value, &ten.value) == Less => h,
            _ => ten,
        };
        if empty_between(&m_lo, &m_hi) {
            continue;
        }
        alts.push(Expr::seq([number_range(Some(&m_lo), Some(&m_hi)), exponent_range(Some(k), Some(k))]));
    }
    Expr::alt(alts)
}

/// An exponent part (`e`, `E`, an optional sign, digits with leading zeros allowed) whose
/// value lies in `first..=last` (`None`: unbounded).
fn exponent_range(first: Option<i64>, last: Option<i64>) -> Expr {
    let e = Expr::one_of_bytes(b"Ee");
    let zeros = Expr::star(Expr::lit("0"));
    let digits = |v: i64| Dec::from_i128(v as i128).int;
    let mut alts = Vec::new();
    if last.is_none_or(|b| b >= 0) {
        let lo = digits(first.map_or(0, |a| a.max(0)));
        let hi = last.map(digits);
        alts.push(Expr::seq([Expr::opt(Expr::lit("+")), zeros.clone(), uint_range(&lo, hi.as_deref())]));
    }
    if first.is_none_or(|a| a < 0) {
        let lo = digits(last.map_or(1, |b| (-b).max(1)));
        let hi = first.map(|a| digits(-a));
        alts.push(Expr::seq([Expr::lit("-"), zeros, uint_range(&lo, hi.as_deref())]));
    }
    Expr::seq([e, Expr::alt(alts)])
}

/// The largest exponent [`small_multiples`] spells (`e-24`): a step with more fraction
/// digits takes its smallest multiples without an exponent only.
const SMALL_EXPONENTS: usize = 24;

/// Multiples of `10^-s` below 1 in magnitude, within the bounds, in scientific notation with
/// one leading digit, as serializers print small floats (`1e-05`, `2.5e-07`, `-3E-6`):
/// `d.f · 10^-e` is such a multiple iff the fraction's digits up to its last non-zero one
/// and `e` add up to at most `s`. Each exponent up to `SMALL_EXPONENTS` (24) is spelled where its
/// whole decade `[10^-e, 10^(1-e))` (for that sign) lies within the bounds.
///
/// ```
/// use constrain::grammar::GrammarBuilder;
/// use constrain::schema::number::small_multiples;
///
/// let mut b = GrammarBuilder::new();
/// let root = b.add("root", small_multiples(None, None, 5));
/// let pda = constrain::automaton::Pda::build(&b.build(root)?, &Default::default())?;
/// assert!(pda.matches(b"1e-05") && pda.matches(b"-2.5e-4") && pda.matches(b"3.0E-005"));
/// assert!(!pda.matches(b"1.5e-05") && !pda.matches(b"1e-06"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn small_multiples(lo: Option<&Bound>, hi: Option<&Bound>, s: usize) -> Expr {
    by_sign(lo, hi, false, |l, h| {
        let alts = (1..=s.min(SMALL_EXPONENTS) as i64)
            .filter(|&e| {
                // The decade's bottom is within `l`; its top (excluded) is at most `h`.
                let bottom = Bound { value: pow10(-e), strict: false };
                !empty_between(l, &bottom) && h.is_none_or(|h| cmp_dec(&h.value, &pow10(1 - e)).is_ge())
            })
            .map(|e| {
                let fraction = match s - e as usize {
                    0 => zero_fraction_digits(),
                    room => Expr::seq([Expr::lit("."), any_digits(1, Some(room as u32)), Expr::star(Expr::lit("0"))]),
                };
                Expr::seq([digit(1, 9), Expr::opt(fraction), exponent_range(Some(-e), Some(-e))])
            });
        Expr::alt(alts.collect::<Vec<_>>())
    })
}

/// `e` (integers without fraction or exponent) with the other spellings of the same
/// values: `-0` when zero lies within the bounds and, with `zero_fraction`, a zero fraction
/// (`1.0`, `-3.00`), which makes a number an integer from draft 6 on. `None` when there are
/// none (or `e` matches nothing).
pub fn integer_spellings(e: &Expr, lo: Option<&Bound>, hi: Option<&Bound>, zero_fraction: bool) -> Option<Expr> {
    let negative_zero = negative_zero(lo, hi, false);
    if *e == Expr::Nothing || (!zero_fraction && negative_zero == Expr::Nothing) {
        return None;
    }
    let body = Expr::alt([e.clone(), negative_zero]);
    Some(if zero_fraction { Expr::seq([body, Expr::opt(zero_fraction_digits())]) } else { body })
}

/// A fraction of zeros only: `.0`, `.00`, …
pub(super) fn zero_fraction_digits() -> Expr {
    Expr::seq([Expr::lit("."), Expr::repeat(Expr::lit("0"), 1, None)])
}

/// The smallest exponent [`large_integers`] spells: from `10^16` on, every double is an
/// integer, and a mantissa of at most 16 fraction digits leaves no fraction.
const LARGE_FIRST_EXPONENT: i64 = 16;

/// The largest exponent [`large_integers`] spells with any mantissa: the value stays below
/// `10^308`, a finite double, so validators that read numbers as doubles agree.
const LARGE_LAST_EXPONENT: i64 = 307;

/// Integers of magnitude at least `10^16` written in scientific notation, as serializers
/// print large floats (`2.8597758676078116e+18`): an optional minus, one digit 1–9, at most
/// 16 fraction digits and an exponent from 16 to 307, or 308 after a mantissa below 1.7
/// (`1e308`, `1.6999e308`: below the largest double, `1.7976931348623157e308`, with a few
/// states). Every such value is an integer, and a multiple of any `10^t` with `t ≤ 0`
/// (`multipleOf: 0.01`).
///
/// Bounds are honoured by sign: the positive ones are spelled when there is no maximum and
/// the minimum lets `10^16` through, the negative ones when there is no minimum and the
/// maximum lets `-10^16` through; otherwise that sign has none. A documented subset: smaller or bounded
/// integers in exponent form are left out.
///
/// ```
/// use constrain::automaton::Pda;
/// use constrain::grammar::GrammarBuilder;
/// use constrain::limits::Limits;
/// use constrain::schema::number::large_integers;
///
/// let mut b = GrammarBuilder::new();
/// let root = b.add("root", large_integers(None, None));
/// let pda = Pda::build(&b.build(root).unwrap(), &Limits::default()).unwrap();
/// assert!(pda.matches(b"2.8597758676078116e+18") && pda.matches(b"-1E16"));
/// assert!(pda.matches(b"1e308") && !pda.matches(b"1.8e308") && !pda.matches(b"1.5e1"));
/// ```
pub fn large_integers(lo: Option<&Bound>, hi: Option<&Bound>) -> Expr {
    let threshold = Bound { value: pow10(LARGE_FIRST_EXPONENT), strict: false };
    by_sign(lo, hi, false, |lo, hi| {
        if hi.is_some() || empty_between(lo, &threshold) {
            return Expr::Nothing;
        }
        let fraction = Expr::opt(Expr::seq([Expr::lit("."), any_digits(1, Some(16))]));
        let last = LARGE_LAST_EXPONENT + 1;
        let below_1_7 =
            Expr::seq([Expr::lit("1"), Expr::opt(Expr::seq([Expr::lit("."), digit(0, 6), any_digits(0, Some(15))]))]);
        Expr::alt([
            Expr::seq([digit(1, 9), fraction, exponent_range(Some(LARGE_FIRST_EXPONENT), Some(LARGE_LAST_EXPONENT))]),
            Expr::seq([below_1_7, exponent_range(Some(last), Some(last))]),
        ])
    })
}

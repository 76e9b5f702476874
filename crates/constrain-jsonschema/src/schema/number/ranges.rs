//! Integer and decimal ranges as digit-string grammars: the "numeric range as regex"
//! construction for integer parts, lexicographic bounds for fractions.

use crate::grammar::Expr;

use super::{
    any_number, decimal::cmp_dec, decimal::cmp_digits, decimal::decr, decimal::incr, decimal::Bound, decimal::Dec,
    scientific::zero_fraction_digits,
};

pub(super) fn digit(lo: u8, hi: u8) -> Expr {
    Expr::Bytes(vec![(b'0' + lo, b'0' + hi)])
}

pub(super) fn any_digits(min: u32, max: Option<u32>) -> Expr {
    Expr::repeat(digit(0, 9), min, max)
}

/// Digits as a literal.
fn digits_lit(d: &[u8]) -> Expr {
    if d.is_empty() {
        return Expr::Empty;
    }
    Expr::Literal(d.iter().map(|x| x + b'0').collect())
}

/// Equal-length digit strings between `a` and `b` inclusive (lexicographic = numeric).
pub(super) fn fixed_range(a: &[u8], b: &[u8]) -> Expr {
    // The common prefix, then the two edges of the first digit where they differ, each of
    // which is one-sided and spelled flat ([`one_sided`]): the nesting stays constant
    // however long the bounds (`1e250`).
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (prefix, a, b) = (digits_lit(&a[..common]), &a[common..], &b[common..]);
    let (Some(&first_a), Some(&first_b)) = (a.first(), b.first()) else {
        return prefix;
    };
    let rest = (a.len() - 1) as u32;
    let any_rest = || any_digits(rest, Some(rest));
    let spread = if a[1..].iter().all(|&d| d == 0) && b[1..].iter().all(|&d| d == 9) {
        Expr::seq([digit(first_a, first_b), any_rest()])
    } else {
        let mut alts = vec![Expr::seq([digits_lit(&a[..1]), one_sided(&a[1..], true)])];
        if first_b > first_a + 1 {
            alts.push(Expr::seq([digit(first_a + 1, first_b - 1), any_rest()]));
        }
        alts.push(Expr::seq([digits_lit(&b[..1]), one_sided(&b[1..], false)]));
        Expr::alt(alts)
    };
    Expr::seq([prefix, spread])
}

/// The digits above `d` (`above`) or below it, if any: where a one-sided bound is left.
fn beyond(d: u8, above: bool) -> Option<(u8, u8)> {
    match above {
        true if d < 9 => Some((d + 1, 9)),
        false if d > 0 => Some((0, d - 1)),
        _ => None,
    }
}

/// The digit strings as long as `edge` that are at least `edge` (`above`) or at most it:
/// for each position, the prefix of `edge` before it, a larger (smaller) digit there and
/// any digits after, or `edge` itself. Flat, without recursion.
fn one_sided(edge: &[u8], above: bool) -> Expr {
    let n = edge.len();
    if edge.iter().all(|&d| d == if above { 0 } else { 9 }) {
        return any_digits(n as u32, Some(n as u32));
    }
    let mut alts = vec![digits_lit(edge)];
    for (j, &d) in edge.iter().enumerate() {
        if let Some((lo, hi)) = beyond(d, above) {
            let rest = (n - 1 - j) as u32;
            alts.push(Expr::seq([digits_lit(&edge[..j]), digit(lo, hi), any_digits(rest, Some(rest))]));
        }
    }
    Expr::alt(alts)
}

/// Canonical non-negative integers (`0`, `[1-9][0-9]*`) in `lo..=hi` (`hi` `None`: no upper
/// bound). Digits are magnitudes without leading zeros; empty means 0.
pub(super) fn uint_range(lo: &[u8], hi: Option<&[u8]>) -> Expr {
    if let Some(h) = hi {
        if cmp_digits(lo, h) == std::cmp::Ordering::Greater {
            return Expr::Nothing;
        }
    }
    let mut alts = Vec::new();
    let mut lo = lo.to_vec();
    if lo.is_empty() {
        alts.push(Expr::lit("0"));
        lo = vec![1];
        if hi.is_some_and(|h| h.is_empty()) {
            return Expr::lit("0");
        }
    }
    let l = lo.len();
    match hi {
        None => {
            alts.push(fixed_range(&lo, &vec![9; l]));
            alts.push(Expr::seq([digit(1, 9), any_digits(l as u32, None)]));
        }
        Some(h) => {
            let hl = h.len();
            if hl == l {
                alts.push(fixed_range(&lo, h));
            } else {
                alts.push(fixed_range(&lo, &vec![9; l]));
                if hl > l + 1 {
                    alts.push(Expr::seq([digit(1, 9), any_digits(l as u32, Some(hl as u32 - 2))]));
                }
                let mut low = vec![0; hl];
                low[0] = 1;
                alts.push(fixed_range(&low, h));
            }
        }
    }
    Expr::alt(alts)
}

/// Signed JSON integers in `lo..=hi` (inclusive integer bounds, `None` unbounded).
pub fn int_range(lo: Option<&Dec>, hi: Option<&Dec>) -> Expr {
    let mut alts = Vec::new();
    // Non-negative part.
    if hi.is_none_or(|h| !h.neg) {
        let l: Vec<u8> = match lo {
            Some(l) if !l.neg => l.int.clone(),
            _ => vec![],
        };
        alts.push(uint_range(&l, hi.map(|h| h.int.as_slice())));
    }
    // Negative part: magnitude in max(1, -hi) ..= -lo.
    if lo.is_none_or(|l| l.neg) {
        let mlo: Vec<u8> = match hi {
            Some(h) if h.neg => h.int.clone(),
            _ => vec![1],
        };
        let mhi = lo.map(|l| l.int.clone());
        alts.push(Expr::seq([Expr::lit("-"), uint_range(&mlo, mhi.as_deref())]));
    }
    Expr::alt(alts)
}

/// Converts number bounds into inclusive integer bounds (ceil of the lower, floor of the upper).
pub fn integer_bounds(lo: Option<&Bound>, hi: Option<&Bound>) -> (Option<Dec>, Option<Dec>) {
    let lo = lo.map(|b| {
        let v = &b.value;
        // ceil for lower bound; strict on an integer adds one.
        let bump = if v.is_integer() { b.strict } else { !v.neg };
        let mag = if v.neg {
            // -m.f: ceil is -(m) when there is a fraction, strict on integer -m gives -(m-1).
            if bump {
                decr(&v.int).unwrap_or_default()
            } else {
                v.int.clone()
            }
        } else if bump {
            incr(&v.int)
        } else {
            v.int.clone()
        };
        let neg = v.neg && !mag.is_empty();
        Dec { neg, int: mag, frac: vec![] }
    });
    let hi = hi.map(|b| {
        let v = &b.value;
        let bump = if v.is_integer() { b.strict } else { v.neg };
        let mag = if !v.neg {
            if bump {
                decr(&v.int).map(Some).unwrap_or(None)
            } else {
                Some(v.int.clone())
            }
        } else if bump {
            Some(incr(&v.int))
        } else {
            Some(v.int.clone())
        };
        match mag {
            Some(m) => Dec { neg: v.neg && !m.is_empty(), int: m, frac: vec![] },
            // 0 exclusive as upper bound → -1.
            None => Dec { neg: true, int: vec![1], frac: vec![] },
        }
    });
    (lo, hi)
}

/// Fraction part (`""` or `.digits`) whose padded digits lie within the bounds, with at most
/// `max` digits (`None`: any number).
fn frac_part(lo: Option<(&[u8], bool)>, hi: Option<(&[u8], bool)>, max: Option<usize>) -> Expr {
    let (nonempty, empty_ok) = frac_rec(lo, hi, 0, lo.is_some(), hi.is_some(), max);
    let mut alts = Vec::new();
    if empty_ok {
        alts.push(Expr::Empty);
    }
    alts.push(Expr::seq([Expr::lit("."), nonempty]));
    Expr::alt(alts)
}

/// Digit strings from position `i` on, still tied to the low / high bound or not. Returns
/// the non-empty continuations and whether ending here is allowed. `max` caps the total
/// number of fraction digits.
fn frac_rec(
    lo: Option<(&[u8], bool)>,
    hi: Option<(&[u8], bool)>,
    i: usize,
    tl: bool,
    th: bool,
    max: Option<usize>,
) -> (Expr, bool) {
    let (ld, ls) = lo.unwrap_or((&[], false));
    let (hd, hs) = hi.unwrap_or((&[], false));
    let lo_rest_zero = ld.get(i..).is_none_or(|r| r.iter().all(|&d| d == 0));
    let hi_rest_zero = hd.get(i..).is_none_or(|r| r.iter().all(|&d| d == 0));
    let end_ok = (!tl || (lo_rest_zero && !ls)) && !(th && hi_rest_zero && hs);
    // Digits still allowed from position `i` on.
    let room = max.map(|m| m.saturating_sub(i) as u32);
    if room == Some(0) {
        return (Expr::Nothing, end_ok);
    }
    let after = room.map(|r| r - 1);
    // A non-strict low bound with nothing left is satisfied by any continuation.
    let tl = tl && (i < ld.len() || ls);
    if !tl && !th {
        return (any_digits(1, room), true);
    }
    let beyond_lo = i >= ld.len();
    let beyond_hi = i >= hd.len();
    if tl && beyond_lo && (!th) {
        // Strict low bound fully matched: some later digit must be non-zero.
        return match room {
            None => (Expr::seq([Expr::star(Expr::lit("0")), digit(1, 9), any_digits(0, None)]), false),
            // Within `r` digits: `j` zeros, a non-zero digit, then up to `r - j - 1` more.
            Some(r) => (
                Expr::alt((0..r).map(|j| {
                    Expr::seq([Expr::Literal(vec![b'0'; j as usize]), digit(1, 9), any_digits(0, Some(r - j - 1))])
                })),
                false,
            ),
        };
    }
    if th && beyond_hi && !tl {
        // Everything after the high bound must be zero (and equal is excluded when strict).
        return if hs { (Expr::Nothing, false) } else { (Expr::repeat(Expr::lit("0"), 1, room), true) };
    }
    if tl && th && beyond_lo && beyond_hi {
        return (Expr::Nothing, end_ok);
    }
    // One bound still tied: its remaining digits spelled flat, however many (`1e-300`).
    if tl != th {
        let (d, above) = if tl { (&ld[i..], true) } else { (&hd[i..], false) };
        return (one_sided_fraction(d, above, room, |k| frac_rec(lo, hi, i + k, tl, th, max)), end_ok);
    }
    // Both bounds tied: their digits here (a strict low bound past its end reads zeros).
    let dl = ld.get(i).copied().unwrap_or(0);
    let dh = hd.get(i).copied().unwrap_or(0);
    if dl > dh {
        return (Expr::Nothing, end_ok);
    }
    let cont = |tl2: bool, th2: bool| {
        let (ne, e) = frac_rec(lo, hi, i + 1, tl2, th2, max);
        if e {
            Expr::opt(ne)
        } else {
            ne
        }
    };
    let mut alts = Vec::new();
    if dl == dh {
        alts.push(Expr::seq([digit(dl, dl), cont(true, true)]));
    } else {
        alts.push(Expr::seq([digit(dl, dl), cont(true, false)]));
        if dh > dl + 1 {
            alts.push(Expr::seq([digit(dl + 1, dh - 1), any_digits(0, after)]));
        }
        alts.push(Expr::seq([digit(dh, dh), cont(false, true)]));
    }
    (Expr::alt(alts), end_ok)
}

/// The fraction digits from where a bound's remaining digits `d` (non-empty, the last
/// non-zero) start, when only that bound is still tied: at least `d` (`above`) or at most
/// it, within `room` digits. For each position, the prefix of `d` before it, a larger
/// (smaller) digit there and any digits after; below, also the prefix alone (a non-zero
/// digit of `d` is still to come); and `d` itself, then what `past(end of d)` allows. Flat:
/// one level of alternatives however long `d`.
fn one_sided_fraction(d: &[u8], above: bool, room: Option<u32>, past: impl Fn(usize) -> (Expr, bool)) -> Expr {
    let fits = |len: usize| room.is_none_or(|r| len as u32 <= r);
    let mut alts = Vec::new();
    for (j, &x) in d.iter().enumerate() {
        if !above && j > 0 && fits(j) {
            alts.push(digits_lit(&d[..j]));
        }
        if !fits(j + 1) {
            break;
        }
        if let Some((lo, hi)) = beyond(x, above) {
            let after = room.map(|r| r - j as u32 - 1);
            alts.push(Expr::seq([digits_lit(&d[..j]), digit(lo, hi), any_digits(0, after)]));
        }
    }
    if fits(d.len()) {
        let (rest, end) = past(d.len());
        alts.push(Expr::seq([digits_lit(d), if end { Expr::opt(rest) } else { rest }]));
    }
    Expr::alt(alts)
}

/// Non-negative decimals without exponent (`I(.F)?`) within the magnitude bounds, with at
/// most `max` fraction digits.
fn mag_range(lo: &Bound, hi: Option<&Bound>, max: Option<usize>) -> Expr {
    let any_frac = any_fraction(max);
    let frac_part = |lo, hi| frac_part(lo, hi, max);
    let lo_int = &lo.value.int;
    let lo_frac = (lo.value.frac.as_slice(), lo.strict);
    let int_lit = |d: &[u8]| if d.is_empty() { Expr::lit("0") } else { digits_lit(d) };
    let mut alts = Vec::new();
    match hi {
        None => {
            alts.push(Expr::seq([int_lit(lo_int), frac_part(Some(lo_frac), None)]));
            alts.push(Expr::seq([uint_range(&incr(lo_int), None), any_frac]));
        }
        Some(h) => {
            let hi_frac = (h.value.frac.as_slice(), h.strict);
            match cmp_digits(lo_int, &h.value.int) {
                std::cmp::Ordering::Greater => return Expr::Nothing,
                std::cmp::Ordering::Equal => {
                    alts.push(Expr::seq([int_lit(lo_int), frac_part(Some(lo_frac), Some(hi_frac))]));
                }
                std::cmp::Ordering::Less => {
                    alts.push(Expr::seq([int_lit(lo_int), frac_part(Some(lo_frac), None)]));
                    if let Some(below) = decr(&h.value.int) {
                        let above = incr(lo_int);
                        if cmp_digits(&above, &below) != std::cmp::Ordering::Greater {
                            alts.push(Expr::seq([uint_range(&above, Some(&below)), any_frac]));
                        }
                    }
                    alts.push(Expr::seq([int_lit(&h.value.int), frac_part(None, Some(hi_frac))]));
                }
            }
        }
    }
    Expr::alt(alts)
}

/// An optional fraction `.digits` with at most `max` digits.
pub(super) fn any_fraction(max: Option<usize>) -> Expr {
    match max {
        Some(0) => Expr::Empty,
        m => Expr::opt(Expr::seq([Expr::lit("."), any_digits(1, m.map(|m| m as u32))])),
    }
}

/// JSON numbers (no exponent) within the bounds; both `None` gives any JSON number.
pub fn number_range(lo: Option<&Bound>, hi: Option<&Bound>) -> Expr {
    number_grid(lo, hi, None)
}

/// JSON numbers without exponent within the bounds and with at most `max_frac` fraction
/// digits (`None`: any). With `max_frac = Some(s)` these are exactly the multiples of
/// `10^-s` in range that are written without an exponent.
pub fn number_grid(lo: Option<&Bound>, hi: Option<&Bound>, max_frac: Option<usize>) -> Expr {
    if lo.is_none() && hi.is_none() {
        return match max_frac {
            None => any_number(),
            Some(_) => Expr::seq([
                Expr::opt(Expr::lit("-")),
                Expr::alt([Expr::lit("0"), Expr::seq([digit(1, 9), any_digits(0, None)])]),
                any_fraction(max_frac),
            ]),
        };
    }
    // Zero is written without a sign here (`-0` is [`negative_zero`]'s).
    by_sign(lo, hi, true, |l, h| mag_range(l, h, max_frac))
}

/// The tighter of two lower (`lower`) or upper bounds; at equal values the strict one.
pub fn tighter(a: Option<Bound>, b: Option<Bound>, lower: bool) -> Option<Bound> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(a), Some(b)) => {
            let ord = cmp_dec(&a.value, &b.value);
            let pick_a = match ord {
                std::cmp::Ordering::Equal => a.strict,
                std::cmp::Ordering::Greater => lower,
                std::cmp::Ordering::Less => !lower,
            };
            Some(if pick_a { a } else { b })
        }
    }
}

/// Whether no value lies between `lo` and `hi`.
pub(super) fn empty_between(lo: &Bound, hi: &Bound) -> bool {
    match cmp_dec(&lo.value, &hi.value) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => lo.strict || hi.strict,
        std::cmp::Ordering::Less => false,
    }
}

/// The numbers within the bounds, split by sign: `magnitudes(lo, hi)` spells the positive
/// ones (with zero when `zero_positive`), and again, after a minus, the magnitudes of the
/// negative ones (`x = -m`, `m > 0`, `m >= -hi`, `m <= -lo`).
pub(super) fn by_sign(
    lo: Option<&Bound>,
    hi: Option<&Bound>,
    zero_positive: bool,
    magnitudes: impl Fn(&Bound, Option<&Bound>) -> Expr,
) -> Expr {
    let zero = Bound { value: Dec::default(), strict: !zero_positive };
    let mut alts = Vec::new();
    if hi.is_none_or(|h| !empty_between(&zero, h)) {
        let l = tighter(lo.cloned(), Some(zero.clone()), true).unwrap_or(zero.clone());
        alts.push(magnitudes(&l, hi));
    }
    if lo.is_none_or(|l| l.value.neg) {
        let mlo = match hi {
            Some(h) if h.value.neg => Bound { value: h.value.negate(), strict: h.strict },
            _ => Bound { value: Dec::default(), strict: true },
        };
        let mhi = lo.map(|l| Bound { value: l.value.negate(), strict: l.strict });
        alts.push(Expr::seq([Expr::lit("-"), magnitudes(&mlo, mhi.as_ref())]));
    }
    Expr::alt(alts)
}

/// Whether zero lies within the bounds.
fn holds_zero(lo: Option<&Bound>, hi: Option<&Bound>) -> bool {
    let zero = Bound { value: Dec::default(), strict: false };
    lo.is_none_or(|l| !empty_between(l, &zero)) && hi.is_none_or(|h| !empty_between(&zero, h))
}

/// Zero written with a minus sign (`-0`, and `-0.0`, `-0.00`, … when `fraction`), when zero
/// lies within the bounds: JSON's `-0` is the number 0.
pub fn negative_zero(lo: Option<&Bound>, hi: Option<&Bound>, fraction: bool) -> Expr {
    if !holds_zero(lo, hi) {
        return Expr::Nothing;
    }
    Expr::seq([Expr::lit("-0"), if fraction { Expr::opt(zero_fraction_digits()) } else { Expr::Empty }])
}

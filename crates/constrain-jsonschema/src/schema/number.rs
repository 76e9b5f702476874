//! Numbers and integers with bounds, as digit-string grammars.
//!
//! Input: bounds from `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` (any JSON
//! number, kept as exact decimal digit strings, never as floats). Output: an [`Expr`] matching
//! exactly the JSON numbers in range.
//!
//! How: a number is split into sign, integer part and fraction. Integer parts in a range are
//! the classic "numeric range as regex" construction over equal-length digit strings; a
//! fraction bound is a lexicographic bound on the fraction digits (trailing zeros do not
//! matter). Bounded numbers are plain decimals, scientific notation with one leading digit
//! (`1e-07`, `1.6e+308`: [`scientific_range`]) and `-0`/`-0.0` when zero is in range ([`negative_zero`]);
//! other exponent spellings (`16e307`, `0.5e1`) are a documented subset left out where a
//! bound applies. Unbounded numbers are full JSON numbers. Integers take exponents only as
//! [`large_integers`] (magnitude `10^16` and more, as serializers print large floats).
//!
//! `multipleOf` is exact too: a step `q · 10^t` ([`Step`]) is a grid of trailing zeros or
//! fraction digits when `q = 1` ([`scaled_int_range`], [`number_grid`], any bounds), a last
//! digit test for `q` in 2 and 5, and otherwise a remainder automaton over the digits
//! ([`remainder_multiples`], no bound but 0) or a list of the multiples (small ranges, in the
//! compiler). Multiples are written without an exponent, but for those of `10^-s` below 1 in
//! magnitude, also written as serializers print small floats (`1e-05`: [`small_multiples`]).

use crate::grammar::{Expr, GrammarBuilder, RuleId};

/// An exact decimal: sign, integer digits (no leading zeros; empty for 0), fraction digits
/// (no trailing zeros). The default is zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dec {
    /// Whether the value is below zero (never set for zero).
    pub neg: bool,
    /// The integer part's ASCII digits, most significant first; empty for 0.
    pub int: Vec<u8>,
    /// The fraction's ASCII digits, without trailing zeros.
    pub frac: Vec<u8>,
}

/// One bound: the value and whether it is exclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The bound's value.
    pub value: Dec,
    /// Whether the bound itself is excluded (`exclusiveMinimum`/`exclusiveMaximum`).
    pub strict: bool,
}

impl Dec {
    /// Parses a JSON number's text (with optional exponent) exactly. `None` if malformed or
    /// absurdly large (exponent beyond ±400).
    pub fn parse(s: &str) -> Option<Dec> {
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (mant, exp) = match s.find(['e', 'E']) {
            Some(i) => (&s[..i], s[i + 1..].parse::<i32>().ok()?),
            None => (s, 0),
        };
        if !(-400..=400).contains(&exp) {
            return None;
        }
        let (ip, fp) = match mant.split_once('.') {
            Some((a, b)) => (a, b),
            None => (mant, ""),
        };
        if ip.is_empty() && fp.is_empty() {
            return None;
        }
        if !ip.bytes().chain(fp.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut digits: Vec<u8> = ip.bytes().chain(fp.bytes()).map(|b| b - b'0').collect();
        let mut point = ip.len() as i64 + exp as i64;
        // Normalise so that the point lies within or at the ends of the digits.
        if point < 0 {
            let pad = (-point) as usize;
            let mut v = vec![0; pad];
            v.extend(digits);
            digits = v;
            point = 0;
        }
        while (digits.len() as i64) < point {
            digits.push(0);
        }
        let (i, f) = digits.split_at(point as usize);
        let mut int: Vec<u8> = i.iter().copied().skip_while(|&d| d == 0).collect();
        let mut frac = f.to_vec();
        while frac.last() == Some(&0) {
            frac.pop();
        }
        if int.is_empty() && frac.is_empty() {
            return Some(Dec { neg: false, int, frac });
        }
        int.shrink_to_fit();
        Some(Dec { neg, int, frac })
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.int.is_empty() && self.frac.is_empty()
    }

    /// Whether the value is an integer.
    pub fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    /// The value in plain decimal notation (`-12.5`, `0`, `0.001`): the shortest exact
    /// spelling without an exponent.
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(self.int.len() + self.frac.len() + 3);
        if self.neg {
            s.push('-');
        }
        if self.int.is_empty() {
            s.push('0');
        }
        s.extend(self.int.iter().map(|d| (d + b'0') as char));
        if !self.frac.is_empty() {
            s.push('.');
            s.extend(self.frac.iter().map(|d| (d + b'0') as char));
        }
        s
    }

    /// The value times `10^e` (exact: the decimal point moves).
    pub fn shift(&self, e: i64) -> Dec {
        let all: Vec<u8> = self.int.iter().chain(&self.frac).copied().collect();
        let point = self.int.len() as i64 + e;
        let (mut int, frac): (Vec<u8>, Vec<u8>) = if point <= 0 {
            let mut f = vec![0; (-point) as usize];
            f.extend(&all);
            (vec![], f)
        } else if point as usize >= all.len() {
            let mut i = all.clone();
            i.resize(point as usize, 0);
            (i, vec![])
        } else {
            (all[..point as usize].to_vec(), all[point as usize..].to_vec())
        };
        let lead = int.iter().take_while(|&&d| d == 0).count();
        int.drain(..lead);
        let mut frac = frac;
        while frac.last() == Some(&0) {
            frac.pop();
        }
        let zero = int.is_empty() && frac.is_empty();
        Dec { neg: self.neg && !zero, int, frac }
    }

    /// The value as an `i128` if it is an integer that fits.
    pub fn to_i128(&self) -> Option<i128> {
        if !self.frac.is_empty() || self.int.len() > 38 {
            return None;
        }
        let mut v: i128 = 0;
        for &d in &self.int {
            v = v.checked_mul(10)?.checked_add(d as i128)?;
        }
        Some(if self.neg { -v } else { v })
    }

    /// The integer `v` as a decimal.
    pub fn from_i128(v: i128) -> Dec {
        let digits: Vec<u8> = v.unsigned_abs().to_string().bytes().map(|b| b - b'0').filter(|_| v != 0).collect();
        Dec { neg: v < 0, int: digits, frac: vec![] }
    }

    fn negate(&self) -> Dec {
        Dec { neg: !self.neg && !self.is_zero(), int: self.int.clone(), frac: self.frac.clone() }
    }
}

/// Compares magnitudes (ignoring sign).
fn cmp_mag(a: &Dec, b: &Dec) -> std::cmp::Ordering {
    a.int.len().cmp(&b.int.len()).then_with(|| a.int.cmp(&b.int)).then_with(|| a.frac.cmp(&b.frac))
}

/// Compares signed values.
pub fn cmp_dec(a: &Dec, b: &Dec) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.neg, b.neg) {
        (false, true) => Greater,
        (true, false) => Less,
        (false, false) => cmp_mag(a, b),
        (true, true) => cmp_mag(b, a),
    }
}

fn digit(lo: u8, hi: u8) -> Expr {
    Expr::Bytes(vec![(b'0' + lo, b'0' + hi)])
}

fn any_digits(min: u32, max: Option<u32>) -> Expr {
    Expr::repeat(digit(0, 9), min, max)
}

/// Digits as a literal.
fn digits_lit(d: &[u8]) -> Expr {
    if d.is_empty() {
        return Expr::Empty;
    }
    Expr::Literal(d.iter().map(|x| x + b'0').collect())
}

/// Adds one to a magnitude's digits (canonical, no leading zeros).
fn incr(d: &[u8]) -> Vec<u8> {
    let mut v = d.to_vec();
    let mut i = v.len();
    loop {
        if i == 0 {
            v.insert(0, 1);
            return v;
        }
        i -= 1;
        if v[i] == 9 {
            v[i] = 0;
        } else {
            v[i] += 1;
            return v;
        }
    }
}

/// Subtracts one from a positive magnitude's digits; `None` for zero.
fn decr(d: &[u8]) -> Option<Vec<u8>> {
    if d.is_empty() {
        return None;
    }
    let mut v = d.to_vec();
    let mut i = v.len();
    while i > 0 {
        i -= 1;
        if v[i] == 0 {
            v[i] = 9;
        } else {
            v[i] -= 1;
            break;
        }
    }
    Some(v.into_iter().skip_while(|&x| x == 0).collect())
}

fn cmp_digits(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// Equal-length digit strings between `a` and `b` inclusive (lexicographic = numeric).
fn fixed_range(a: &[u8], b: &[u8]) -> Expr {
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
pub fn uint_range(lo: &[u8], hi: Option<&[u8]>) -> Expr {
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
fn any_fraction(max: Option<usize>) -> Expr {
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
fn empty_between(lo: &Bound, hi: &Bound) -> bool {
    match cmp_dec(&lo.value, &hi.value) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => lo.strict || hi.strict,
        std::cmp::Ordering::Less => false,
    }
}

/// The numbers within the bounds, split by sign: `magnitudes(lo, hi)` spells the positive
/// ones (with zero when `zero_positive`), and again, after a minus, the magnitudes of the
/// negative ones (`x = -m`, `m > 0`, `m >= -hi`, `m <= -lo`).
fn by_sign(
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

/// The power of ten of a positive value's leading digit: `floor(log10 x)`.
fn decade(x: &Dec) -> i64 {
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
pub const SMALL_EXPONENTS: usize = 24;

/// Multiples of `10^-s` below 1 in magnitude, within the bounds, in scientific notation with
/// one leading digit, as serializers print small floats (`1e-05`, `2.5e-07`, `-3E-6`):
/// `d.f · 10^-e` is such a multiple iff the fraction's digits up to its last non-zero one
/// and `e` add up to at most `s`. Each exponent up to [`SMALL_EXPONENTS`] is spelled where its
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
fn zero_fraction_digits() -> Expr {
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

/// Any JSON number.
pub fn any_number() -> Expr {
    Expr::seq([
        Expr::opt(Expr::lit("-")),
        Expr::alt([Expr::lit("0"), Expr::seq([digit(1, 9), any_digits(0, None)])]),
        Expr::opt(Expr::seq([Expr::lit("."), any_digits(1, None)])),
        Expr::opt(Expr::seq([Expr::one_of_bytes(b"Ee"), Expr::opt(Expr::one_of_bytes(b"+-")), any_digits(1, None)])),
    ])
}

/// Any JSON integer written without fraction or exponent.
pub fn any_integer() -> Expr {
    int_range(None, None)
}

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
pub const MAX_REMAINDER_STATES: u64 = 1000;

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
/// `None` when `q · (s + 1)` exceeds [`MAX_REMAINDER_STATES`].
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::Pda;
    use crate::grammar::GrammarBuilder;
    use crate::Limits;

    fn pda(e: Expr) -> Pda {
        let mut b = GrammarBuilder::new();
        let r = b.add("root", e);
        Pda::build(&b.build(r).unwrap(), &Limits::default()).unwrap()
    }

    fn dec(s: &str) -> Dec {
        Dec::parse(s).unwrap()
    }

    /// Test oracle: whether `v` lies within the bounds, by digit comparison (`cmp_dec`).
    fn within(v: &Dec, lo: Option<&Bound>, hi: Option<&Bound>) -> bool {
        use std::cmp::Ordering::*;
        let cmp = |b: &Bound| cmp_dec(v, &b.value);
        lo.is_none_or(|b| cmp(b) == Greater || (cmp(b) == Equal && !b.strict))
            && hi.is_none_or(|b| cmp(b) == Less || (cmp(b) == Equal && !b.strict))
    }

    #[test]
    fn parse_decimals() {
        assert_eq!(dec("12.50"), Dec { neg: false, int: vec![1, 2], frac: vec![5] });
        assert_eq!(dec("-0.0"), Dec { neg: false, int: vec![], frac: vec![] });
        assert_eq!(dec("1.5e2"), Dec { neg: false, int: vec![1, 5, 0], frac: vec![] });
        assert_eq!(dec("25e-3"), Dec { neg: false, int: vec![], frac: vec![0, 2, 5] });
    }

    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [
            (Some(-15i64), Some(120i64)),
            (Some(0), None),
            (None, Some(-3)),
            (Some(7), Some(7)),
            (Some(10), Some(99)),
            (Some(-100), Some(-10)),
            (Some(1), Some(1000)),
        ] {
            let lod = lo.map(|v| dec(&v.to_string()));
            let hid = hi.map(|v| dec(&v.to_string()));
            let p = pda(int_range(lod.as_ref(), hid.as_ref()));
            for x in -1200i64..1200 {
                let inside = lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h);
                assert_eq!(p.matches(x.to_string().as_bytes()), inside, "{x} in {lo:?}..{hi:?}");
            }
            assert!(!p.matches(b"007") && !p.matches(b"-0"));
        }
    }

    #[test]
    fn integer_bounds_from_fractions() {
        let b = |s: &str, strict| Bound { value: dec(s), strict };
        let (lo, hi) = integer_bounds(Some(&b("-2.5", false)), Some(&b("3", true)));
        assert_eq!(lo, Some(dec("-2")));
        assert_eq!(hi, Some(dec("2")));
        let (lo, hi) = integer_bounds(Some(&b("0", true)), Some(&b("0.5", false)));
        assert_eq!(lo, Some(dec("1")));
        assert_eq!(hi, Some(dec("0")));
        let (lo, hi) = integer_bounds(Some(&b("-1", true)), Some(&b("-0.5", false)));
        assert_eq!(lo, Some(dec("0")));
        assert_eq!(hi, Some(dec("-1")));
    }

    /// Bounds on a power of ten, inclusive and exclusive, against scientific spellings at
    /// and around them (the fuzzer found `-1e+20` accepted under `exclusiveMaximum: -1e20`).
    #[test]
    fn scientific_spellings_at_powers_of_ten() {
        for (l, ls, h, hs) in [
            ("", false, "-1e20", true),
            ("", false, "-1e20", false),
            ("1e20", true, "", false),
            ("1e20", false, "", false),
            ("0.01", true, "100", true),
            ("0.01", false, "100", false),
            ("-100", true, "-0.001", false),
        ] {
            let lo = (!l.is_empty()).then(|| Bound { value: dec(l), strict: ls });
            let hi = (!h.is_empty()).then(|| Bound { value: dec(h), strict: hs });
            let p = pda(scientific_range(lo.as_ref(), hi.as_ref()));
            for m in ["1", "1.0", "9.99", "1.0001", "5"] {
                for k in -25i64..=25 {
                    for sign in ["", "-"] {
                        let text = format!("{sign}{m}e{k}");
                        let inside = within(&dec(&text), lo.as_ref(), hi.as_ref());
                        assert_eq!(p.matches(text.as_bytes()), inside, "{text} in {l}({ls})..{h}({hs})");
                    }
                }
            }
        }
    }

    /// Equal-length digit ranges are exact, runs of zeros and nines at the edges included.
    #[test]
    fn fixed_ranges_are_exact() {
        let pairs = [
            ("0000", "9999"),
            ("0001", "9999"),
            ("0010", "9999"),
            ("0000", "9998"),
            ("0000", "9989"),
            ("0012", "9987"),
            ("1000", "9999"),
            ("0999", "9000"),
            ("0005", "0007"),
            ("4500", "4599"),
            ("0000", "0000"),
        ];
        let digits = |t: &str| t.bytes().map(|c| c - b'0').collect::<Vec<u8>>();
        for (a, b) in pairs {
            let p = pda(fixed_range(&digits(a), &digits(b)));
            for x in 0..10_000 {
                let t = format!("{x:04}");
                let inside = a <= t.as_str() && t.as_str() <= b;
                assert_eq!(p.matches(t.as_bytes()), inside, "{t} in {a}..={b}");
            }
        }
        // Bounds of 251 and 300 digits, of any digits, stay within the nesting budget.
        let _ = pda(uint_range(&digits(&format!("1{}1", "0".repeat(249))), None));
        let _ = pda(uint_range(&digits(&"7".repeat(300)), Some(&digits(&"8".repeat(300)))));
    }

    /// Fraction bounds with runs of zeros (`0.0012`, `1e-300`) are exact, with and without
    /// a cap on the fraction digits.
    #[test]
    fn fraction_bounds_with_zero_runs_are_exact() {
        let b = |s: &str, strict| Bound { value: dec(s), strict };
        let mut samples = vec!["0".to_string(), "1".to_string()];
        for len in 1..=5u32 {
            for f in 0..10u32.pow(len) {
                samples.push(format!("0.{f:0width$}", width = len as usize));
            }
        }
        for (lo, hi) in [
            (Some(b("0.0012", false)), None),
            (Some(b("0.0012", true)), None),
            (None, Some(b("0.0012", false))),
            (None, Some(b("0.0012", true))),
            (Some(b("0.00101", false)), Some(b("0.2", false))),
            (Some(b("0", true)), Some(b("0.00012", true))),
        ] {
            for max in [None, Some(3), Some(4)] {
                let e = number_grid(lo.as_ref(), hi.as_ref(), max);
                let p = (e != Expr::Nothing).then(|| pda(e));
                for t in &samples {
                    let digits = t.split_once('.').map_or(0, |(_, f)| f.len());
                    let want = within(&dec(t), lo.as_ref(), hi.as_ref()) && max.is_none_or(|m| digits <= m);
                    let matched = p.as_ref().is_some_and(|p| p.matches(t.as_bytes()));
                    assert_eq!(matched, want, "{t} in {lo:?}..{hi:?}, at most {max:?} digits");
                }
            }
        }
        // Bounds of 300 zeros stay within the nesting budget.
        let tiny = b("4.9e-324", true);
        let _ = pda(number_range(Some(&tiny), None));
        let _ = pda(number_range(None, Some(&b("1e-300", false))));
        let _ = pda(number_range(Some(&b("0", false)), Some(&b(&format!("1.{}", "7".repeat(400)), false))));
    }

    /// Large integers in exponent form are integers within the bounds, and the ones
    /// serializers print are there whenever the bounds allow them.
    #[test]
    fn large_integers_are_integers_within_bounds() {
        let b = |s: &str, strict| Some(Bound { value: dec(s), strict });
        let bounds = [
            (None, None),
            (b("0", false), None),
            (b("0", true), None),
            (b("1", false), None),
            (b("-5e30", false), None),
            (b("1e16", true), None),
            (None, b("0", false)),
            (None, b("10", false)),
            (None, b("-1e16", false)),
            (b("1", false), b("1e40", false)),
        ];
        let mantissas = ["1", "9", "2.5", "2.8597758676078116", "1.00000000000000001", "7.0"];
        let exponents = ["e15", "e16", "E16", "e+018", "e-16", "e307", "e308", "e0400"];
        for (lo, hi) in &bounds {
            let e = large_integers(lo.as_ref(), hi.as_ref());
            let p = (e != Expr::Nothing).then(|| pda(e));
            for sign in ["", "-"] {
                for m in mantissas {
                    for e in exponents {
                        let text = format!("{sign}{m}{e}");
                        let v = dec(&text.replace("e0400", "e400"));
                        let exponent = e.trim_start_matches(['e', 'E', '+', '0']).parse::<i64>();
                        let below_1_7 = Bound { value: dec("1.7"), strict: true };
                        let shape = m.len() <= 18
                            && exponent.is_ok_and(|x| {
                                (16..=307).contains(&x) || (x == 308 && within(&dec(m), None, Some(&below_1_7)))
                            });
                        let sound = shape && v.is_integer() && within(&v, lo.as_ref(), hi.as_ref());
                        // The documented subset: a sign is spelled when its side is unbounded
                        // and the other bound leaves every value of magnitude 10^16 and more.
                        let spelled = shape
                            && if sign.is_empty() {
                                hi.is_none() && within(&dec("1e16"), lo.as_ref(), None)
                            } else {
                                lo.is_none() && within(&dec("-1e16"), None, hi.as_ref())
                            };
                        let matched = p.as_ref().is_some_and(|p| p.matches(text.as_bytes()));
                        assert!(!matched || sound, "{text} accepted in {lo:?}..{hi:?}");
                        assert!(matched || !spelled, "{text} refused in {lo:?}..{hi:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn number_ranges_are_exact() {
        let cases = [
            ("0", false, "1", false),
            ("0", true, "1", true),
            ("-1.5", false, "2.25", true),
            ("0.1", false, "0.15", false),
            ("-10", true, "-0.5", false),
            ("2", false, "", false),
            ("", false, "-0.01", true),
        ];
        let samples: Vec<String> = (-120..=120)
            .flat_map(|i| {
                let x = i as f64 / 8.0;
                vec![format!("{}", x), format!("{:.1}", x), format!("{:.3}", x)]
            })
            .chain(
                [
                    "0.0",
                    "0.15",
                    "0.150",
                    "0.1500001",
                    "0.1",
                    "2.25",
                    "2.2500",
                    "-0.5",
                    "-0.50",
                    "-0.01",
                    "-0.010",
                    "-0.0099",
                ]
                .map(String::from),
            )
            .collect();
        for (l, ls, h, hs) in cases {
            let lo = (!l.is_empty()).then(|| Bound { value: dec(l), strict: ls });
            let hi = (!h.is_empty()).then(|| Bound { value: dec(h), strict: hs });
            let p = pda(number_range(lo.as_ref(), hi.as_ref()));
            for s in &samples {
                let x: f64 = s.parse().unwrap();
                let lf: Option<f64> = lo.as_ref().map(|_| l.parse().unwrap());
                let hf: Option<f64> = hi.as_ref().map(|_| h.parse().unwrap());
                let inside = lf.is_none_or(|v| if ls { x > v } else { x >= v })
                    && hf.is_none_or(|v| if hs { x < v } else { x <= v });
                let canonical = !s.starts_with("-0")
                    || s.trim_start_matches("-0").trim_start_matches('.').chars().any(|c| c != '0');
                if canonical {
                    assert_eq!(p.matches(s.as_bytes()), inside, "{s} in {l}({ls})..{h}({hs})");
                } else {
                    assert!(!p.matches(s.as_bytes()) || inside, "{s}");
                }
            }
        }
    }

    #[test]
    fn multiples_regular_last_digit() {
        let p = pda(multiples_regular(5, 0).unwrap());
        assert!(p.matches(b"0") && p.matches(b"15") && p.matches(b"-20") && p.matches(b"5"));
        assert!(!p.matches(b"12") && !p.matches(b"05") && !p.matches(b"-0"));
        let p = pda(multiples_regular(1, 2).unwrap());
        assert!(p.matches(b"0") && p.matches(b"300") && !p.matches(b"30") && !p.matches(b"00"));
        assert!(multiples_regular(7, 0).is_none());
    }

    #[test]
    fn steps_split_exactly() {
        assert_eq!(Step::of(&dec("1e20")), Step { q: vec![1], t: 20 });
        assert_eq!(Step::of(&dec("0.01")), Step { q: vec![1], t: -2 });
        assert_eq!(Step::of(&dec("1.5")), Step { q: vec![1, 5], t: -1 });
        assert_eq!(Step::of(&dec("0.123456789")).for_integers(), Step { q: vec![1, 2, 3, 4, 5, 6, 7, 8, 9], t: 0 });
        // 1.5 = 15/10: an integer multiple of 1.5 is a multiple of 3.
        assert_eq!(Step::of(&dec("1.5")).for_integers(), Step { q: vec![3], t: 0 });
        assert_eq!(Step::of(&dec("1e-8")).for_integers(), Step { q: vec![1], t: 0 });
        assert_eq!(dec("12.5").shift(3).to_text(), "12500");
        assert_eq!(dec("-12.5").shift(-3).to_text(), "-0.0125");
        assert_eq!(Dec::from_i128(-120).to_text(), "-120");
        assert_eq!(dec("12345678901234567890123").to_i128(), Some(12345678901234567890123));
    }

    /// Exact oracle: whether the number spelled `x` lies in the bounds and is a multiple of
    /// `m` (decimal text), computed on digit strings (no floats).
    fn oracle(x: &str, lo: Option<(&str, bool)>, hi: Option<(&str, bool)>, m: Option<&str>, integer: bool) -> bool {
        let v = dec(x);
        let bound = |(b, strict): (&str, bool)| Bound { value: dec(b), strict };
        let in_bounds = within(&v, lo.map(bound).as_ref(), hi.map(bound).as_ref());
        let multiple = m.is_none_or(|m| {
            let m = dec(m);
            // Scale both to integers with the same number of fraction digits, then divide.
            let k = v.frac.len().max(m.frac.len());
            let digits = |d: &Dec| {
                let mut f = d.frac.clone();
                f.resize(k, 0);
                d.int.iter().chain(&f).copied().collect::<Vec<u8>>()
            };
            let md: u128 = digits(&m).iter().fold(0u128, |a, &d| a * 10 + d as u128);
            let r = digits(&v).iter().fold(0u128, |a, &d| (a * 10 + d as u128) % md);
            r == 0
        });
        in_bounds && multiple && (!integer || v.is_integer())
    }

    /// Candidate spellings: integers and decimals around the interesting values, big ones,
    /// non-canonical spellings and exponents.
    fn candidates(around: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for i in -60i64..=60 {
            out.push(i.to_string());
            for f in ["5", "25", "01", "0001", "5001", "0", "50", "99"] {
                out.push(format!("{}{}.{f}", if i < 0 { "-" } else { "" }, i.unsigned_abs()));
                if i == 0 {
                    out.push(format!("-0.{f}"));
                }
            }
        }
        for a in around {
            let d = dec(a);
            for delta in ["0", "1", "0.5", "0.01", "0.0001", "1e20", "3", "7", "1.5", "100"] {
                for sign in [false, true] {
                    let mut dd = dec(delta);
                    dd.neg = sign && !dd.is_zero();
                    out.push(add(&d, &dd).to_text());
                }
            }
        }
        out.extend(
            [
                "1e2",
                "1E2",
                "-1e-2",
                "1.0e1",
                "00",
                "-0",
                "1.",
                ".5",
                "1.500",
                "100000000000000000000",
                "200000000000000000000",
                "150000000000000000000",
                "100000000000000000000.0",
            ]
            .map(String::from),
        );
        // Scientific spellings of each plain one (`1.25e+02`, `-5E-3`), and zero with a minus.
        let sci: Vec<String> = out.iter().filter_map(|c| Dec::parse(c)).flat_map(|d| scientific(&d)).collect();
        out.extend(sci);
        out.extend(["-0", "-0.0", "-0.000", "-0e0"].map(String::from));
        out.sort();
        out.dedup();
        out
    }

    /// `d` in scientific notation, as Python (`1.5e-07`, `1e+20`) and Rust (`1.5e-7`,
    /// `1E20`) print it; none for zero.
    fn scientific(d: &Dec) -> Vec<String> {
        if d.is_zero() {
            return vec![];
        }
        let k = decade(d);
        let digits: Vec<u8> = d.int.iter().chain(&d.frac).copied().skip_while(|&x| x == 0).collect();
        let mut m = format!("{}{}", if d.neg { "-" } else { "" }, digits[0]);
        let rest: String = digits[1..].iter().map(|x| (x + b'0') as char).collect();
        let rest = rest.trim_end_matches('0');
        if !rest.is_empty() {
            m = format!("{m}.{rest}");
        }
        let sign = if k < 0 { '-' } else { '+' };
        vec![format!("{m}e{sign}{:02}", k.abs()), format!("{m}E{k}")]
    }

    /// Whether `c` is a spelling every compiled number or integer schema must accept when
    /// its value is inside: canonical plain decimals; scientific notation and `-0.0` for
    /// numbers without `multipleOf`; `-0` always, `-0.0` for integers (draft 2020-12).
    fn must_accept(c: &str, v: &Dec, integer: bool, multiple: bool) -> bool {
        let sci = c.contains(['e', 'E']) && scientific(v).iter().any(|s| s == c);
        v.to_text() == c || c == "-0" || (c == "-0.0" && (integer || !multiple)) || (sci && !integer && !multiple)
    }

    /// Exact sum of two decimals (test helper; digit strings, no floats).
    fn add(a: &Dec, b: &Dec) -> Dec {
        let k = a.frac.len().max(b.frac.len());
        let as_int = |d: &Dec| -> i128 {
            let mut f = d.frac.clone();
            f.resize(k, 0);
            let v = d.int.iter().chain(&f).fold(0i128, |acc, &x| acc * 10 + x as i128);
            if d.neg {
                -v
            } else {
                v
            }
        };
        Dec::from_i128(as_int(a) + as_int(b)).shift(-(k as i64))
    }

    /// Compiles a schema from text (so numbers keep their digits) and checks every candidate
    /// against the oracle: nothing outside the set is accepted, and every canonical spelling
    /// (`Dec::to_text`) inside it is.
    fn check_exact(
        schema: &str,
        lo: Option<(&str, bool)>,
        hi: Option<(&str, bool)>,
        m: Option<&str>,
        integer: bool,
        extra: &[&str],
    ) {
        let value: serde_json::Value = serde_json::from_str(schema).unwrap();
        let g = crate::schema::compile(&value, &crate::schema::Options::default().with_runtime_checks(false))
            .unwrap_or_else(|e| panic!("{schema}: {e}"));
        let p = Pda::build(g.grammar(), &Limits::default()).unwrap();
        let mut around: Vec<&str> = extra.to_vec();
        around.extend(lo.map(|l| l.0));
        around.extend(hi.map(|h| h.0));
        around.extend(m);
        let mut accepted = 0;
        for c in candidates(&around) {
            let Some(v) = Dec::parse(&c) else { continue };
            let valid_json = serde_json::from_str::<serde_json::Value>(&c).is_ok_and(|v| v.is_number());
            let inside = valid_json && oracle(&c, lo, hi, m, integer);
            let got = p.matches(c.as_bytes());
            assert!(!got || inside, "{schema} accepts {c}, outside the set");
            if inside && v.to_text() == c {
                assert!(got, "{schema} rejects canonical {c}");
            }
            accepted += got as usize;
        }
        assert!(accepted > 0, "{schema} accepted no candidate");
    }

    #[test]
    fn big_integers_and_decimals_are_exact() {
        check_exact(
            r#"{"type": "integer", "minimum": 18446744073709551616, "maximum": 18446744073709551716}"#,
            Some(("18446744073709551616", false)),
            Some(("18446744073709551716", false)),
            None,
            true,
            &[],
        );
        check_exact(
            r#"{"type": "integer", "maximum": -9223372036854775809, "exclusiveMinimum": -9223372036854775909}"#,
            Some(("-9223372036854775909", true)),
            Some(("-9223372036854775809", false)),
            None,
            true,
            &[],
        );
        check_exact(
            r#"{"type": "number", "exclusiveMaximum": 972783798187987123879878123.18878137}"#,
            None,
            Some(("972783798187987123879878123.18878137", true)),
            None,
            false,
            &["972783798187987123879878123.188781371", "972783798187987123879878123.18878136"],
        );
        check_exact(
            r#"{"type": "number", "minimum": 0.1000000000000000055511151231257827}"#,
            Some(("0.1000000000000000055511151231257827", false)),
            None,
            None,
            false,
            &["0.1", "0.10000000000000000555111512312578271"],
        );
    }

    #[test]
    fn multiple_of_is_exact() {
        check_exact(r#"{"type": "integer", "multipleOf": 1e20}"#, None, None, Some("100000000000000000000"), true, &[]);
        check_exact(
            r#"{"type": "integer", "multipleOf": 1e20, "minimum": -3e20, "exclusiveMaximum": 2e20}"#,
            Some(("-300000000000000000000", false)),
            Some(("200000000000000000000", true)),
            Some("100000000000000000000"),
            true,
            &[],
        );
        check_exact(r#"{"multipleOf": 0.01}"#, None, None, Some("0.01"), false, &["1.23", "1.235"]);
        check_exact(
            r#"{"type": "number", "multipleOf": 0.01, "minimum": -1.5, "exclusiveMaximum": 2.345}"#,
            Some(("-1.5", false)),
            Some(("2.345", true)),
            Some("0.01"),
            false,
            &["2.34", "2.35", "-1.49", "-1.51"],
        );
        check_exact(
            r#"{"type": "number", "multipleOf": 0.0001}"#,
            None,
            None,
            Some("0.0001"),
            false,
            &["0.00751", "0.0075"],
        );
        check_exact(
            r#"{"type": "number", "multipleOf": 0.0001, "minimum": 0, "maximum": 1}"#,
            Some(("0", false)),
            Some(("1", false)),
            Some("0.0001"),
            false,
            &["0.00751", "0.0075", "0.99999"],
        );
        check_exact(
            r#"{"type": "number", "multipleOf": 1.5, "minimum": -10, "maximum": 100}"#,
            Some(("-10", false)),
            Some(("100", false)),
            Some("1.5"),
            false,
            &["4.5", "35", "7.5", "99"],
        );
        check_exact(
            r#"{"type": "integer", "multipleOf": 1.5, "minimum": -10, "maximum": 100}"#,
            Some(("-10", false)),
            Some(("100", false)),
            Some("1.5"),
            true,
            &["4.5", "6", "9"],
        );
        check_exact(
            r#"{"type": "integer", "multipleOf": 7, "minimum": 100000000000000000000, "maximum": 100000000000000000500}"#,
            Some(("100000000000000000000", false)),
            Some(("100000000000000000500", false)),
            Some("7"),
            true,
            &["100000000000000000002", "100000000000000000009"],
        );
        check_exact(r#"{"type": "integer", "multipleOf": 2}"#, None, None, Some("2"), true, &[]);
    }

    #[test]
    fn small_multiples_in_scientific_notation_are_exact() {
        // (schema, lower bound, upper bound, step)
        type Side<'a> = Option<(&'a str, bool)>;
        let cases: [(&str, Side, Side, &str); 6] = [
            (r#"{"type": "number", "multipleOf": 0.00001}"#, None, None, "0.00001"),
            (r#"{"type": "number", "multipleOf": 1e-7, "minimum": 0}"#, Some(("0", false)), None, "0.0000001"),
            (
                r#"{"type": "number", "multipleOf": 0.001, "exclusiveMinimum": -1, "maximum": 1}"#,
                Some(("-1", true)),
                Some(("1", false)),
                "0.001",
            ),
            (
                r#"{"type": "number", "multipleOf": 0.000001, "minimum": 0.00002, "maximum": 0.5}"#,
                Some(("0.00002", false)),
                Some(("0.5", false)),
                "0.000001",
            ),
            (
                r#"{"type": "number", "multipleOf": 0.00001, "exclusiveMaximum": 0.001}"#,
                None,
                Some(("0.001", true)),
                "0.00001",
            ),
            (
                r#"{"type": "number", "multipleOf": 0.00001, "exclusiveMinimum": 0.0001}"#,
                Some(("0.0001", true)),
                None,
                "0.00001",
            ),
        ];
        let mantissas = ["1", "2.5", "9.99", "1.0", "1.50", "3.000", "7.0001", "5.25", "10", "0.5"];
        for (schema, lo, hi, m) in cases {
            let value: serde_json::Value = serde_json::from_str(schema).unwrap();
            let g = crate::schema::compile(&value, &crate::schema::Options::default().with_runtime_checks(false))
                .unwrap_or_else(|e| panic!("{schema}: {e}"));
            let p = Pda::build(g.grammar(), &Limits::default()).unwrap();
            let mut accepted = 0;
            for sign in ["", "-"] {
                for mantissa in mantissas {
                    for k in 1..=9 {
                        for exp in [format!("e-{k}"), format!("E-0{k}"), format!("e-00{k}"), format!("e{k}")] {
                            let c = format!("{sign}{mantissa}{exp}");
                            let inside = oracle(&c, lo, hi, Some(m), false);
                            let got = p.matches(c.as_bytes());
                            assert!(!got || inside, "{schema} accepts {c}, outside the set");
                            // Serializers' spellings (one leading digit, no trailing zero).
                            let printed = !mantissa.ends_with('0') && !mantissa.starts_with('0') && exp.contains('-');
                            if inside
                                && printed
                                && (lo.is_none_or(|l| l.0.starts_with('-') || l.0 == "0") || sign.is_empty())
                            {
                                let decade_inside =
                                    hi.is_none_or(|h| h.0 == "1") && lo.is_none_or(|l| l.0 == "0" || l.0 == "-1");
                                assert!(!decade_inside || got, "{schema} rejects {c}");
                            }
                            accepted += got as usize;
                        }
                    }
                }
            }
            assert!(accepted > 0, "{schema} accepted no candidate");
        }
    }

    #[test]
    fn remainder_automata_are_exact() {
        check_exact(r#"{"type": "integer", "multipleOf": 7}"#, None, None, Some("7"), true, &["700", "-7007", "1001"]);
        check_exact(
            r#"{"type": "integer", "multipleOf": 3, "minimum": 0}"#,
            Some(("0", false)),
            None,
            Some("3"),
            true,
            &["123456789", "-3"],
        );
        check_exact(
            r#"{"type": "integer", "multipleOf": 12, "exclusiveMaximum": 0.5}"#,
            None,
            Some(("0.5", true)),
            Some("12"),
            true,
            &["-144", "-1200", "12"],
        );
        check_exact(
            r#"{"type": "integer", "multipleOf": 300}"#,
            None,
            None,
            Some("300"),
            true,
            &["900", "-1200", "1000"],
        );
        check_exact(
            r#"{"type": "number", "multipleOf": 1.5}"#,
            None,
            None,
            Some("1.5"),
            false,
            &["4.5", "35", "-7.5", "1.05"],
        );
        check_exact(
            r#"{"type": "number", "multipleOf": 0.25, "minimum": 0}"#,
            Some(("0", false)),
            None,
            Some("0.25"),
            false,
            &["12.75", "0.125", "-0.25"],
        );
        // Found by the property test: `0.25` is not at most 0.
        check_exact(
            r#"{"type": "number", "maximum": 0, "multipleOf": 0.25}"#,
            None,
            Some(("0", false)),
            Some("0.25"),
            false,
            &["0.25", "-0.25", "-12.75"],
        );
        check_exact(
            r#"{"type": "number", "multipleOf": 0.07}"#,
            None,
            None,
            Some("0.07"),
            false,
            &["0.21", "1.4", "-0.7", "0.2"],
        );
        check_exact(
            r#"{"type": "integer", "multipleOf": 0.0123}"#,
            None,
            None,
            Some("0.0123"),
            true,
            &["123", "-246", "1230"],
        );
    }

    #[test]
    fn unbounded_moduli_are_refused_not_dropped() {
        let compile = |s: &str| {
            crate::schema::compile(
                &serde_json::from_str(s).unwrap(),
                &crate::schema::Options::default().with_runtime_checks(false),
            )
        };
        for s in [
            r#"{"type": "integer", "multipleOf": 1234567}"#,
            r#"{"type": "integer", "multipleOf": 7, "minimum": 5}"#,
            r#"{"multipleOf": 0.123456789}"#,
            r#"{"type": "integer", "multipleOf": 0.123456789}"#,
            r#"{"type": "number", "multipleOf": 1.5, "minimum": -1e30, "maximum": 1e30}"#,
            r#"{"type": "integer", "multipleOf": 1e500}"#,
        ] {
            let e = compile(s).err().unwrap_or_else(|| panic!("{s} compiled"));
            assert_eq!(e.keyword(), "multipleOf", "{s}: {e}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]
        /// Random bounds, types and steps compiled from schema text: whatever compiles accepts
        /// no candidate outside the exact set and every canonical candidate inside it.
        #[test]
        fn random_number_schemas_are_exact(
            lo in proptest::option::of(("-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,3})?", proptest::bool::ANY)),
            hi in proptest::option::of(("-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,3})?", proptest::bool::ANY)),
            integer in proptest::bool::ANY,
            m in proptest::option::of(proptest::sample::select(vec!["0.01", "0.5", "1.5", "7", "0.25", "1e20", "3", "0.0001", "12", "0.07"])),
            picked in proptest::collection::vec("-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,4})?", 40),
        ) {
            let mut schema = format!(r#"{{"type": "{}""#, if integer { "integer" } else { "number" });
            if let Some((l, strict)) = &lo {
                schema += &format!(r#", "{}": {l}"#, if *strict { "exclusiveMinimum" } else { "minimum" });
            }
            if let Some((h, strict)) = &hi {
                schema += &format!(r#", "{}": {h}"#, if *strict { "exclusiveMaximum" } else { "maximum" });
            }
            if let Some(m) = m {
                schema += &format!(r#", "multipleOf": {m}"#);
            }
            schema += "}";
            let value: serde_json::Value = serde_json::from_str(&schema).unwrap();
            if let Ok(g) = crate::schema::compile(&value, &crate::schema::Options::default().with_runtime_checks(false)) {
                // An empty set does not build (`Empty`): then every candidate must be outside.
                let p = Pda::build(g.grammar(), &Limits::default()).ok();
                let lo_b = lo.as_ref().map(|(l, s)| (l.as_str(), *s));
                let hi_b = hi.as_ref().map(|(h, s)| (h.as_str(), *s));
                let mut around: Vec<&str> = picked.iter().map(|x| x.as_str()).collect();
                around.extend(lo_b.map(|l| l.0));
                around.extend(hi_b.map(|h| h.0));
                for c in candidates(&around).into_iter().chain(picked.iter().cloned()) {
                    let Some(v) = Dec::parse(&c) else { continue };
                    let valid_json = serde_json::from_str::<serde_json::Value>(&c).is_ok_and(|v| v.is_number());
                    let m_exact = m.map(|m| dec(m).to_text());
                    let inside = valid_json && oracle(&c, lo_b, hi_b, m_exact.as_deref(), integer);
                    let got = p.as_ref().is_some_and(|p| p.matches(c.as_bytes()));
                    proptest::prop_assert!(!got || inside, "{} accepts {}, outside the set", schema, c);
                    if inside && must_accept(&c, &v, integer || m.is_some_and(|m| dec(m).is_integer()), m.is_some()) {
                        proptest::prop_assert!(got, "{} rejects {}", schema, c);
                    }
                }
            }
        }
    }
}

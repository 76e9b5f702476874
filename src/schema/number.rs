//! Numbers and integers with bounds, as digit-string grammars.
//!
//! Input: bounds from `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` (any JSON
//! number, kept as exact decimal digit strings, never as floats). Output: an [`Expr`] matching
//! exactly the JSON numbers in range.
//!
//! How: a number is split into sign, integer part and fraction. Integer parts in a range are
//! the classic "numeric range as regex" construction over equal-length digit strings; a
//! fraction bound is a lexicographic bound on the fraction digits (trailing zeros do not
//! matter). Bounded numbers are written without an exponent (a documented subset: `1e2` is
//! not generated or accepted where a bound applies); unbounded numbers are full JSON numbers.

use crate::grammar::Expr;

/// An exact decimal: sign, integer digits (no leading zeros; empty for 0), fraction digits
/// (no trailing zeros).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dec {
    pub neg: bool,
    pub int: Vec<u8>,
    pub frac: Vec<u8>,
}

/// One bound: the value and whether it is exclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub value: Dec,
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
    // Iterative over the common prefix, recursive only into the two edge branches, each of
    // which only recurses along one edge: depth ≤ length.
    let n = a.len();
    if n == 0 {
        return Expr::Empty;
    }
    if a.iter().all(|&d| d == 0) && b.iter().all(|&d| d == 9) {
        return any_digits(n as u32, Some(n as u32));
    }
    if a[0] == b[0] {
        return Expr::seq([digits_lit(&a[..1]), fixed_range(&a[1..], &b[1..])]);
    }
    let nines = vec![9; n - 1];
    let zeros = vec![0; n - 1];
    let mut alts = vec![Expr::seq([digits_lit(&a[..1]), fixed_range(&a[1..], &nines)])];
    if b[0] > a[0] + 1 {
        alts.push(Expr::seq([digit(a[0] + 1, b[0] - 1), any_digits(n as u32 - 1, Some(n as u32 - 1))]));
    }
    alts.push(Expr::seq([digits_lit(&b[..1]), fixed_range(&zeros, &b[1..])]));
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

/// Fraction part (`""` or `.digits`) whose padded digits lie within the bounds.
fn frac_part(lo: Option<(&[u8], bool)>, hi: Option<(&[u8], bool)>) -> Expr {
    let (nonempty, empty_ok) = frac_rec(lo, hi, 0, lo.is_some(), hi.is_some());
    let mut alts = Vec::new();
    if empty_ok {
        alts.push(Expr::Empty);
    }
    alts.push(Expr::seq([Expr::lit("."), nonempty]));
    Expr::alt(alts)
}

/// Digit strings from position `i` on, still tied to the low / high bound or not. Returns
/// the non-empty continuations and whether ending here is allowed.
fn frac_rec(lo: Option<(&[u8], bool)>, hi: Option<(&[u8], bool)>, i: usize, tl: bool, th: bool) -> (Expr, bool) {
    let (ld, ls) = lo.unwrap_or((&[], false));
    let (hd, hs) = hi.unwrap_or((&[], false));
    let lo_rest_zero = ld.get(i..).is_none_or(|r| r.iter().all(|&d| d == 0));
    let hi_rest_zero = hd.get(i..).is_none_or(|r| r.iter().all(|&d| d == 0));
    let end_ok = (!tl || (lo_rest_zero && !ls)) && !(th && hi_rest_zero && hs);
    // A non-strict low bound with nothing left is satisfied by any continuation.
    let tl = tl && (i < ld.len() || ls);
    if !tl && !th {
        return (any_digits(1, None), true);
    }
    let beyond_lo = i >= ld.len();
    let beyond_hi = i >= hd.len();
    if tl && beyond_lo && (!th) {
        // Strict low bound fully matched: some later digit must be non-zero.
        return (Expr::seq([Expr::star(Expr::lit("0")), digit(1, 9), any_digits(0, None)]), false);
    }
    if th && beyond_hi && !tl {
        // Everything after the high bound must be zero (and equal is excluded when strict).
        return if hs { (Expr::Nothing, false) } else { (Expr::repeat(Expr::lit("0"), 1, None), true) };
    }
    if tl && th && beyond_lo && beyond_hi {
        return (Expr::Nothing, end_ok);
    }
    let dl = if tl { ld.get(i).copied().unwrap_or(0) } else { 0 };
    let dh = if th { hd.get(i).copied().unwrap_or(0) } else { 9 };
    if dl > dh {
        return (Expr::Nothing, end_ok);
    }
    let cont = |tl2: bool, th2: bool| {
        let (ne, e) = frac_rec(lo, hi, i + 1, tl2, th2);
        if e {
            Expr::opt(ne)
        } else {
            ne
        }
    };
    let mut alts = Vec::new();
    if dl == dh {
        alts.push(Expr::seq([digit(dl, dl), cont(tl, th)]));
    } else {
        alts.push(Expr::seq([digit(dl, dl), cont(tl, false)]));
        if dh > dl + 1 {
            alts.push(Expr::seq([digit(dl + 1, dh - 1), any_digits(0, None)]));
        }
        alts.push(Expr::seq([digit(dh, dh), cont(false, th)]));
    }
    (Expr::alt(alts), end_ok)
}

/// Non-negative decimals without exponent (`I(.F)?`) within the magnitude bounds.
fn mag_range(lo: &Bound, hi: Option<&Bound>) -> Expr {
    let any_frac = Expr::opt(Expr::seq([Expr::lit("."), any_digits(1, None)]));
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

/// JSON numbers (no exponent) within the bounds; both `None` gives any JSON number.
pub fn number_range(lo: Option<&Bound>, hi: Option<&Bound>) -> Expr {
    if lo.is_none() && hi.is_none() {
        return any_number();
    }
    let zero = Dec { neg: false, int: vec![], frac: vec![] };
    let mut alts = Vec::new();
    // Non-negative part: x >= max(lo, 0), x <= hi.
    let nonneg_possible = match hi {
        None => true,
        Some(h) => !(h.value.neg || (h.value.is_zero() && h.strict)),
    };
    if nonneg_possible {
        let l = match lo {
            Some(l) if !l.value.neg => l.clone(),
            _ => Bound { value: zero.clone(), strict: false },
        };
        alts.push(mag_range(&l, hi));
    }
    // Negative part: x = -m, m > 0, m >= -hi, m <= -lo.
    let neg_possible = match lo {
        None => true,
        Some(l) => l.value.neg,
    };
    if neg_possible {
        let mlo = match hi {
            Some(h) if h.value.neg => Bound { value: h.value.negate(), strict: h.strict },
            _ => Bound { value: zero, strict: true },
        };
        let mhi = lo.map(|l| Bound { value: l.value.negate(), strict: l.strict });
        alts.push(Expr::seq([Expr::lit("-"), mag_range(&mlo, mhi.as_ref())]));
    }
    Expr::alt(alts)
}

/// Any JSON number.
pub fn any_number() -> Expr {
    Expr::seq([
        Expr::opt(Expr::lit("-")),
        Expr::alt([Expr::lit("0"), Expr::seq([digit(1, 9), any_digits(0, None)])]),
        Expr::opt(Expr::seq([Expr::lit("."), any_digits(1, None)])),
        Expr::opt(Expr::seq([Expr::Bytes(vec![(b'E', b'E'), (b'e', b'e')]), Expr::opt(Expr::Bytes(vec![(b'+', b'+'), (b'-', b'-')])), any_digits(1, None)])),
    ])
}

/// Any JSON integer written without fraction or exponent.
pub fn any_integer() -> Expr {
    int_range(None, None)
}

/// Integers divisible by `m` (small `m`), as a modular automaton over the digits built from
/// counted pieces: for `m` a power of ten, trailing zeros; otherwise explicit residues.
/// Returns `None` when `m` is too large to enumerate.
pub fn multiple_of_digits(m: u64) -> Option<Expr> {
    if m == 0 {
        return None;
    }
    if m == 1 {
        return Some(any_integer());
    }
    // Powers of ten: the number is 0 or ends with k zeros.
    let mut k = 0u32;
    let mut x = m;
    while x % 10 == 0 {
        x /= 10;
        k += 1;
    }
    let mag = match (x, k) {
        (1, k) => Expr::alt([Expr::lit("0"), Expr::seq([digit(1, 9), any_digits(0, None), Expr::Literal(vec![b'0'; k as usize])])]),
        (2, _) | (5, _) if k == 0 => {
            let last = if x == 2 { Expr::Bytes(vec![(b'0', b'0'), (b'2', b'2'), (b'4', b'4'), (b'6', b'6'), (b'8', b'8')]) } else { Expr::Bytes(vec![(b'0', b'0'), (b'5', b'5')]) };
            Expr::alt([last.clone(), Expr::seq([digit(1, 9), any_digits(0, None), last])])
        }
        _ => return None,
    };
    Some(Expr::seq([Expr::opt(Expr::lit("-")), mag]))
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

    #[test]
    fn parse_decimals() {
        assert_eq!(dec("12.50"), Dec { neg: false, int: vec![1, 2], frac: vec![5] });
        assert_eq!(dec("-0.0"), Dec { neg: false, int: vec![], frac: vec![] });
        assert_eq!(dec("1.5e2"), Dec { neg: false, int: vec![1, 5, 0], frac: vec![] });
        assert_eq!(dec("25e-3"), Dec { neg: false, int: vec![], frac: vec![0, 2, 5] });
    }

    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [(Some(-15i64), Some(120i64)), (Some(0), None), (None, Some(-3)), (Some(7), Some(7)), (Some(10), Some(99)), (Some(-100), Some(-10)), (Some(1), Some(1000))] {
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

    #[test]
    fn number_ranges_are_exact() {
        let cases = [("0", false, "1", false), ("0", true, "1", true), ("-1.5", false, "2.25", true), ("0.1", false, "0.15", false), ("-10", true, "-0.5", false), ("2", false, "", false), ("", false, "-0.01", true)];
        let samples: Vec<String> = (-120..=120)
            .flat_map(|i| {
                let x = i as f64 / 8.0;
                vec![format!("{}", x), format!("{:.1}", x), format!("{:.3}", x)]
            })
            .chain(["0.0", "0.15", "0.150", "0.1500001", "0.1", "2.25", "2.2500", "-0.5", "-0.50", "-0.01", "-0.010", "-0.0099"].map(String::from))
            .collect();
        for (l, ls, h, hs) in cases {
            let lo = (!l.is_empty()).then(|| Bound { value: dec(l), strict: ls });
            let hi = (!h.is_empty()).then(|| Bound { value: dec(h), strict: hs });
            let p = pda(number_range(lo.as_ref(), hi.as_ref()));
            for s in &samples {
                let x: f64 = s.parse().unwrap();
                let lf: Option<f64> = lo.as_ref().map(|_| l.parse().unwrap());
                let hf: Option<f64> = hi.as_ref().map(|_| h.parse().unwrap());
                let inside = lf.is_none_or(|v| if ls { x > v } else { x >= v }) && hf.is_none_or(|v| if hs { x < v } else { x <= v });
                let canonical = !s.starts_with("-0") || s.trim_start_matches("-0").trim_start_matches('.').chars().any(|c| c != '0');
                if canonical {
                    assert_eq!(p.matches(s.as_bytes()), inside, "{s} in {l}({ls})..{h}({hs})");
                } else {
                    assert!(!p.matches(s.as_bytes()) || inside, "{s}");
                }
            }
        }
    }

    #[test]
    fn multiples() {
        let p = pda(multiple_of_digits(5).unwrap());
        assert!(p.matches(b"0") && p.matches(b"15") && p.matches(b"-20"));
        assert!(!p.matches(b"12") && !p.matches(b"05"));
        let p = pda(multiple_of_digits(100).unwrap());
        assert!(p.matches(b"0") && p.matches(b"300") && !p.matches(b"30") && !p.matches(b"00"));
        assert!(multiple_of_digits(7).is_none());
    }
}

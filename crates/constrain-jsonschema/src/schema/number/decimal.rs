//! [`Dec`], the exact decimal every bound is kept as, and digit-string arithmetic.

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

    pub(super) fn negate(&self) -> Dec {
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

/// Adds one to a magnitude's digits (canonical, no leading zeros).
pub(super) fn incr(d: &[u8]) -> Vec<u8> {
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
pub(super) fn decr(d: &[u8]) -> Option<Vec<u8>> {
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

pub(super) fn cmp_digits(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

//! `type: number`/`integer` with `minimum`, `maximum`, their exclusive forms and
//! `multipleOf`: reads the keywords and picks one of the constructions of [`number`]
//! (a range, a grid, a list of multiples or a remainder automaton).

use serde_json::{Map, Value};

use super::dialect::Draft;
use super::number::{self, Bound, Dec};
use super::{json, Compiler, Error, Note, SharedRule};
use crate::grammar::Expr;

impl<'a> Compiler<'a> {
    /// The bound keyword `key` (`strict`: an exclusive one), if present.
    fn bound(&self, map: &Map<String, Value>, ptr: &str, key: &str, strict: bool) -> Result<Option<Bound>, Error> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match Dec::parse(&n.to_string()) {
                Some(d) => Ok(Some(Bound { value: d, strict })),
                None => Err(Error::new(ptr, key, "bound is out of range")),
            },
            Some(_) => Err(Error::new(ptr, key, "bound must be a number")),
        }
    }

    /// A `number` (or, with `integer`, an `integer`) schema's expression under its bounds
    /// and `multipleOf`.
    pub(super) fn compile_number(&mut self, map: &Map<String, Value>, ptr: &str, integer: bool) -> Result<Expr, Error> {
        let lo = number::tighter(
            self.bound(map, ptr, "minimum", false)?,
            self.bound(map, ptr, "exclusiveMinimum", true)?,
            true,
        );
        let hi = number::tighter(
            self.bound(map, ptr, "maximum", false)?,
            self.bound(map, ptr, "exclusiveMaximum", true)?,
            false,
        );
        let multiple = match map.get("multipleOf") {
            None => None,
            Some(Value::Number(n)) => match Dec::parse(&n.to_string()) {
                Some(d) if !d.neg && !d.is_zero() => Some(d),
                Some(_) => return Err(Error::new(ptr, "multipleOf", "multipleOf must be a positive number")),
                None => return Err(Error::new(ptr, "multipleOf", "multipleOf is out of range (exponent beyond ±400)")),
            },
            Some(_) => return Err(Error::new(ptr, "multipleOf", "multipleOf must be a number")),
        };
        // Exact decimal arithmetic throughout: a multiple of `q · 10^t` (see `number::Step`).
        let step = multiple.as_ref().map(number::Step::of);
        if step.as_ref().is_some_and(|s| s.t < 0) {
            // Also under `type: integer`: `-7` is a multiple of `0.07`, but `-7 / 0.07` is
            // `-99.99999999999999`.
            self.float_multiples(ptr);
        }
        // A number with an integral multipleOf is an integer. Written with a zero fraction
        // (`6000.0`) it is still a number and a multiple in every draft, but an `integer`
        // only from draft 6 on.
        let zero_fraction = !integer || self.draft >= Draft::Draft6;
        let integer = integer || step.as_ref().is_some_and(|s| s.t >= 0);
        // Large integers in exponent form (`2.8597758676078116e+18`) are integers, so
        // multiples of every step that leaves all integers multiples (1, 0.5, 0.25, 0.1,
        // 0.01, …), but an `integer` only where `1.0` is one.
        let large = zero_fraction
            && step.as_ref().is_none_or(|s| {
                let s = s.for_integers();
                s.q == [1] && s.t == 0
            });
        if integer && large && lo.is_none() && hi.is_none() && step.is_none() {
            // Plain `type: integer`, the common case, shares one rule.
            return Ok(self.shared_rule(SharedRule::IntegerValue));
        }
        if integer {
            let e = self.compile_integer(ptr, lo.clone(), hi.clone(), step)?;
            let e = self.integer_spellings(e, lo.as_ref(), hi.as_ref(), zero_fraction);
            return Ok(self.with_large(e, large, lo.as_ref(), hi.as_ref()));
        }
        if lo.is_none() && hi.is_none() && step.is_none() {
            return Ok(self.shared_rule(SharedRule::Number));
        }
        let (l, h) = (lo.as_ref(), hi.as_ref());
        let Some(step) = step else {
            // Plain decimals, scientific notation (`1e-07`) and `-0`, `-0.0`.
            let e = Expr::alt([
                number::number_range(l, h),
                number::scientific_range(l, h),
                number::negative_zero(l, h, true),
            ]);
            return Ok(self.rule("number_range", e));
        };
        let negative_zero = number::negative_zero(l, h, true);
        let e = self.compile_fraction_multiples(ptr, lo.clone(), hi.clone(), step)?;
        let e = match negative_zero {
            Expr::Nothing => e,
            z => self.rule("number_multiples", Expr::alt([e, z])),
        };
        Ok(self.with_large(e, large, lo.as_ref(), hi.as_ref()))
    }

    /// A fractional `multipleOf` on a number: the grammar keeps the exact decimal
    /// multiples, and a run-time check also holds each number to the reading of validators
    /// that divide in binary floating point (Python's `jsonschema`, ajv), which refuse some
    /// exact multiples (`1.15` of `0.01`: `1.15 / 0.01` is `114.99999999999999`). A
    /// document then validates under both ([`super::keywords::MultipleOf`]). Without
    /// run-time checks, a note says that those validators may refuse some outputs.
    fn float_multiples(&mut self, ptr: &str) {
        if self.relaxes("multipleOf") {
            self.relax(ptr, "multipleOf");
        } else if !self.lenient() {
            self.notes.push(Note::new(
                ptr,
                "multipleOf",
                "exact decimal multiples: validators that divide in binary floating point (Python's jsonschema, ajv) refuse some of them (1.15 of 0.01); run-time checks hold outputs to both readings",
            ));
        }
    }

    /// `e` or, with `large`, the integers in exponent form within the bounds
    /// ([`number::large_integers`]).
    fn with_large(&mut self, e: Expr, large: bool, lo: Option<&Bound>, hi: Option<&Bound>) -> Expr {
        match if large { number::large_integers(lo, hi) } else { Expr::Nothing } {
            Expr::Nothing => e,
            spelled => self.rule("number_large", Expr::alt([e, spelled])),
        }
    }

    /// The other spellings of the integers `e` matches (see [`number::integer_spellings`]),
    /// as a rule when there are any.
    fn integer_spellings(&mut self, e: Expr, lo: Option<&Bound>, hi: Option<&Bound>, zero_fraction: bool) -> Expr {
        match number::integer_spellings(&e, lo, hi, zero_fraction) {
            Some(spelled) => self.rule("integer", spelled),
            None => e,
        }
    }

    /// An integer between `lo` and `hi` and a multiple of `step` (of 1 when `None`).
    fn compile_integer(
        &mut self,
        ptr: &str,
        lo: Option<Bound>,
        hi: Option<Bound>,
        step: Option<number::Step>,
    ) -> Result<Expr, Error> {
        let step = step.map(|s| s.for_integers()).unwrap_or(number::Step { q: vec![1], t: 0 });
        let zeros = usize::try_from(step.t).unwrap_or(usize::MAX);
        // Bounds on y = x / 10^t, rounded inwards to integers.
        let (ylo, yhi) = number::integer_bounds(shifted(&lo, -step.t).as_ref(), shifted(&hi, -step.t).as_ref());
        if step.q == [1] && step.t == 0 && ylo.is_none() && yhi.is_none() {
            return Ok(self.shared_rule(SharedRule::Integer));
        }
        if zeros > MAX_STEP_ZEROS {
            self.unsupported(ptr, "multipleOf", "multipleOf is a power of ten too large to spell")?;
            let (ilo, ihi) = number::integer_bounds(lo.as_ref(), hi.as_ref());
            return Ok(self.rule("integer_range", number::int_range(ilo.as_ref(), ihi.as_ref())));
        }
        let q = step.q_u64();
        if q == Some(1) {
            return Ok(self.rule("integer_range", number::scaled_int_range(ylo.as_ref(), yhi.as_ref(), zeros)));
        }
        if ylo.is_none() && yhi.is_none() {
            if let Some(e) = q.and_then(|q| number::multiples_regular(q, zeros)) {
                return Ok(self.rule("integer_range", e));
            }
        }
        let listed = match (ylo.as_ref().and_then(Dec::to_i128), yhi.as_ref().and_then(Dec::to_i128), q) {
            (Some(a), Some(b), Some(q)) => list_multiples(a, b, q as i128).map(|ys| {
                ys.into_iter().map(|y| Expr::lit(&Dec::from_i128(y).shift(step.t).to_text())).collect::<Vec<_>>()
            }),
            _ => None,
        };
        if let Some(alts) = listed {
            return Ok(self.rule("integer_range", Expr::alt(alts)));
        }
        let automaton = match (q, zero_sided(ylo.as_ref(), yhi.as_ref())) {
            (Some(q), Some(signs)) => number::remainder_multiples(&mut self.b, q, 0, zeros, signs),
            _ => None,
        };
        match automaton {
            Some(e) => Ok(self.rule("integer_range", e)),
            None => {
                self.unsupported(ptr, "multipleOf", "this multipleOf needs a range of at most 2000 multiples, or no bound other than 0 and a modulus of at most 1000")?;
                Ok(self.rule("integer_range", number::scaled_int_range(ylo.as_ref(), yhi.as_ref(), zeros)))
            }
        }
    }

    /// A number between `lo` and `hi` and a multiple of the fractional `step`.
    fn compile_fraction_multiples(
        &mut self,
        ptr: &str,
        lo: Option<Bound>,
        hi: Option<Bound>,
        step: number::Step,
    ) -> Result<Expr, Error> {
        // A fractional step q · 10^-s: at most s fraction digits, and x · 10^s a multiple of q.
        let s = usize::try_from(-step.t).unwrap_or(usize::MAX);
        if s > MAX_STEP_ZEROS {
            self.unsupported(ptr, "multipleOf", "multipleOf has too many fraction digits")?;
            return Ok(self.rule("number_range", number::number_range(lo.as_ref(), hi.as_ref())));
        }
        let q = step.q_u64();
        if q == Some(1) {
            let (l, h) = (lo.as_ref(), hi.as_ref());
            let e = Expr::alt([number::number_grid(l, h, Some(s)), number::small_multiples(l, h, s)]);
            return Ok(self.rule("number_range", e));
        }
        let (ylo, yhi) = number::integer_bounds(shifted(&lo, -step.t).as_ref(), shifted(&hi, -step.t).as_ref());
        let listed = match (ylo.as_ref().and_then(Dec::to_i128), yhi.as_ref().and_then(Dec::to_i128), q) {
            (Some(a), Some(b), Some(q)) => list_multiples(a, b, q as i128).map(|ys| {
                ys.into_iter()
                    .flat_map(|y| json::dec_spellings(&Dec::from_i128(y).shift(step.t), false))
                    .map(|t| Expr::lit(&t))
                    .collect::<Vec<_>>()
            }),
            _ => None,
        };
        if let Some(alts) = listed {
            return Ok(self.rule("number_range", Expr::alt(alts)));
        }
        let automaton = match (q, zero_sided(ylo.as_ref(), yhi.as_ref())) {
            (Some(q), Some(signs)) => number::remainder_multiples(&mut self.b, q, s, 0, signs),
            _ => None,
        };
        match automaton {
            Some(e) => Ok(self.rule("number_range", e)),
            None => {
                self.unsupported(ptr, "multipleOf", "this multipleOf needs a range of at most 2000 multiples, or no bound other than 0 and at most 1000 remainder states (its digits times its fraction digits plus one)")?;
                Ok(self.rule("number_range", number::number_range(lo.as_ref(), hi.as_ref())))
            }
        }
    }
}

/// `b` multiplied by `10^e`.
fn shifted(b: &Option<Bound>, e: i64) -> Option<Bound> {
    b.as_ref().map(|b| Bound { value: b.value.shift(e), strict: b.strict })
}

/// Largest number of multiples compiled by listing them (for `multipleOf` with bounds).
///
/// A constant of the algorithm, not a user limit: it picks between two exact
/// spellings of the same multiples (a list, or a remainder automaton).
const MAX_ENUMERATED: i128 = 2000;

/// Largest power of ten a `multipleOf` may carry (trailing zeros or fraction digits spelled).
///
/// A constant of the algorithm, not a user limit: exact decimals stop at exponents of
/// ±400 ([`number::Dec::parse`]), so no larger power of ten can be spelled at all.
const MAX_STEP_ZEROS: usize = 400;

/// Which signs the integer bounds `lo..=hi` leave when they are at most 0 and ∞ (a remainder
/// automaton spells those); `None` for any other bound.
fn zero_sided(lo: Option<&Dec>, hi: Option<&Dec>) -> Option<number::Signs> {
    match (lo, hi) {
        (None, None) => Some(number::Signs::All),
        (Some(l), None) if l.is_zero() => Some(number::Signs::NonNegative),
        (None, Some(h)) if h.is_zero() => Some(number::Signs::NonPositive),
        _ => None,
    }
}

/// The multiples of `q` in `a..=b`, or `None` when there are more than [`MAX_ENUMERATED`].
fn list_multiples(a: i128, b: i128, q: i128) -> Option<Vec<i128>> {
    if q <= 0 {
        return None;
    }
    if b < a {
        return Some(vec![]);
    }
    let first = a.checked_add((q - a.rem_euclid(q)) % q)?;
    if first > b {
        return Some(vec![]);
    }
    let count = b.checked_sub(first)? / q + 1;
    if count > MAX_ENUMERATED {
        return None;
    }
    Some((0..count).filter_map(|i| first.checked_add(i.checked_mul(q)?)).collect())
}

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
//!
//! Files: `decimal.rs` (exact decimals and digit arithmetic), `ranges.rs` (integer and
//! decimal ranges), `scientific.rs` (exponent spellings) and `multiples.rs` (`multipleOf`).

use crate::grammar::Expr;

mod decimal;
mod multiples;
mod ranges;
mod scientific;
#[cfg(test)]
mod tests;

pub use decimal::{cmp_dec, Bound, Dec};
pub use multiples::{multiples_regular, remainder_multiples, scaled_int_range, Signs, Step};
use ranges::any_digits;
use ranges::digit;
pub use ranges::{int_range, integer_bounds, negative_zero, number_grid, number_range, tighter};
pub use scientific::{integer_spellings, large_integers, scientific_range, small_multiples};

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

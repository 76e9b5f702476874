//! Parse limits that cut a path of the automaton: [`Cut`], the set of limits hit (what the
//! stacks, the mask stage and the matcher carry), and [`LimitHit`], a cut together with the
//! budgets in force (what [`crate::matcher::Error::Limit`] reports).
//!
//! The engine names limits by their [`Limits`] fields; a front end that exposes them as
//! flags maps each [`ParseLimit`] to its flag ([`LimitHit::message`]).

use crate::Limits;

/// Work items one closure may take whatever the fuel ([`ParseLimit::Closure`]).
///
/// A constant of the algorithm, not a user limit: it bounds one closure's work even under a
/// huge [`Limits::mask_fuel`]; past it the path is cut and reported as
/// [`ParseLimit::Closure`], never dropped silently.
pub(crate) const CLOSURE_BUDGET: u64 = 1 << 20;

/// One parse limit that can cut a path of the automaton.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseLimit {
    /// More parallel parse stacks than [`Limits::max_parse_stacks`].
    Stacks,
    /// A stack deeper than [`Limits::max_stack_depth`].
    Depth,
    /// The fixed work budget of one closure (2^20 items).
    Closure,
    /// [`Limits::mask_fuel`] ran out.
    Fuel,
}

impl ParseLimit {
    /// Every limit, in the order messages list them.
    pub const ALL: [ParseLimit; 4] = [ParseLimit::Stacks, ParseLimit::Depth, ParseLimit::Closure, ParseLimit::Fuel];

    #[inline]
    const fn bit(self) -> u8 {
        match self {
            ParseLimit::Depth => 1,
            ParseLimit::Stacks => 2,
            ParseLimit::Closure => 4,
            ParseLimit::Fuel => 8,
        }
    }

    /// The [`Limits`] field that raises this limit (`None`: the budget is fixed).
    pub fn field(self) -> Option<&'static str> {
        match self {
            ParseLimit::Stacks => Some("max_parse_stacks"),
            ParseLimit::Depth => Some("max_stack_depth"),
            ParseLimit::Closure => None,
            ParseLimit::Fuel => Some("mask_fuel"),
        }
    }
}

/// The set of parse limits that cut a path off (empty: every path was followed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cut(u8);

impl Cut {
    /// No limit cut a path.
    pub const NONE: Cut = Cut(0);
    /// [`ParseLimit::Depth`] alone.
    pub const DEPTH: Cut = Cut::of(ParseLimit::Depth);
    /// [`ParseLimit::Stacks`] alone.
    pub const STACKS: Cut = Cut::of(ParseLimit::Stacks);
    /// [`ParseLimit::Closure`] alone.
    pub const CLOSURE: Cut = Cut::of(ParseLimit::Closure);
    /// [`ParseLimit::Fuel`] alone.
    pub const FUEL: Cut = Cut::of(ParseLimit::Fuel);

    /// The set holding `limit` alone.
    #[inline]
    pub const fn of(limit: ParseLimit) -> Cut {
        Cut(limit.bit())
    }

    /// Whether no limit cut a path.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The limits of either set.
    #[inline]
    #[must_use]
    pub const fn union(self, other: Cut) -> Cut {
        Cut(self.0 | other.0)
    }

    /// Whether `limit` cut a path.
    #[inline]
    pub const fn contains(self, limit: ParseLimit) -> bool {
        self.0 & limit.bit() != 0
    }

    /// Whether the mask fuel ran out (the mask is then an error, not a narrower mask).
    #[inline]
    pub const fn out_of_fuel(self) -> bool {
        self.contains(ParseLimit::Fuel)
    }

    /// The limits hit, in [`ParseLimit::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = ParseLimit> {
        ParseLimit::ALL.into_iter().filter(move |&l| self.contains(l))
    }
}

impl std::ops::BitOr for Cut {
    type Output = Cut;
    #[inline]
    fn bitor(self, other: Cut) -> Cut {
        self.union(other)
    }
}

impl std::ops::BitOrAssign for Cut {
    #[inline]
    fn bitor_assign(&mut self, other: Cut) {
        *self = self.union(other);
    }
}

/// A parse limit error: the limits that cut a path, with the budgets that were in force.
/// Displays in the engine's words (the [`Limits`] fields to raise); [`LimitHit::message`]
/// adds a front end's flag names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitHit {
    cut: Cut,
    max_parse_stacks: usize,
    max_stack_depth: usize,
    mask_fuel: u64,
}

impl LimitHit {
    /// The hit of `cut` under `limits`.
    pub fn new(cut: Cut, limits: &Limits) -> LimitHit {
        LimitHit {
            cut,
            max_parse_stacks: limits.max_parse_stacks,
            max_stack_depth: limits.max_stack_depth,
            mask_fuel: limits.mask_fuel,
        }
    }

    /// The limits that cut a path.
    pub fn cut(&self) -> Cut {
        self.cut
    }

    /// Whether `limit` cut a path.
    pub fn contains(&self, limit: ParseLimit) -> bool {
        self.cut.contains(limit)
    }

    /// The budget of `limit` that was in force (`None` for [`ParseLimit::Closure`], whose
    /// budget is fixed).
    pub fn budget(&self, limit: ParseLimit) -> Option<u64> {
        match limit {
            ParseLimit::Stacks => Some(self.max_parse_stacks as u64),
            ParseLimit::Depth => Some(self.max_stack_depth as u64),
            ParseLimit::Closure => None,
            ParseLimit::Fuel => Some(self.mask_fuel),
        }
    }

    /// The message naming every limit hit and how to raise it; `flag` names a front end's
    /// option for a limit, added after the [`Limits`] field (`None`: the field alone).
    pub fn message(&self, flag: impl Fn(ParseLimit) -> Option<&'static str>) -> String {
        let parts: Vec<String> = self
            .cut
            .iter()
            .map(|limit| {
                let what = match limit {
                    ParseLimit::Stacks => format!("more than {} parallel parse stacks", self.max_parse_stacks),
                    ParseLimit::Depth => format!("stack deeper than {}", self.max_stack_depth),
                    ParseLimit::Closure => {
                        return "the closure work budget of 2^20 items (fixed; simplify the grammar)".to_string()
                    }
                    ParseLimit::Fuel => format!("more than {} steps of mask work", self.mask_fuel),
                };
                let field = limit.field().unwrap_or_default();
                match flag(limit) {
                    Some(f) => format!("{what} (raise Limits::{field}; flag `{f}`)"),
                    None => format!("{what} (raise Limits::{field})"),
                }
            })
            .collect();
        format!("a parse limit cut a possibly valid path: {}", parts.join("; "))
    }
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(|_| None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_list_their_limits_in_message_order() {
        let cut = Cut::FUEL | Cut::STACKS;
        assert!(!cut.is_empty() && Cut::NONE.is_empty());
        assert_eq!(cut.iter().collect::<Vec<_>>(), [ParseLimit::Stacks, ParseLimit::Fuel]);
        assert!(cut.out_of_fuel() && !Cut::DEPTH.union(Cut::CLOSURE).out_of_fuel());
        let hit = LimitHit::new(cut, &Limits::default().with_max_parse_stacks(7));
        let text = hit.message(|l| (l == ParseLimit::Stacks).then_some("--stacks"));
        assert!(text.starts_with("a parse limit cut a possibly valid path: more than 7 parallel parse stacks (raise Limits::max_parse_stacks; flag `--stacks`); more than"), "{text}");
        assert!(hit.to_string().contains("(raise Limits::mask_fuel)"), "{hit}");
    }
}

//! Step 1 of the build: counted repetitions too large to unroll become loop rules.

use crate::automaton::{Error, UNBOUNDED};
use crate::grammar::Expr;
use crate::Limits;
use std::borrow::Cow;

/// Deepest expression nesting accepted (guards the recursive construction), whatever
/// [`Limits::max_nesting_depth`] says.
///
/// A constant of the algorithm, not a user limit: it bounds the builder's recursion (the
/// thread's stack, which no setting grows); past it the build is an error.
pub(super) const MAX_EXPR_DEPTH: usize = 500;

/// Most NFA states a small counted repetition may unroll to (its body's unrolled size times
/// its count); past it the repetition keeps a run-time counter, as large counts do.
///
/// A constant of the algorithm, not a user limit: it picks between two exact forms of the
/// same repetition and never changes what is accepted.
pub(super) const UNROLL_COST: u64 = 4096;

/// A rule after lifting: either a regular body (borrowed from the grammar when nothing in it
/// was lifted, which is almost always) or a counted loop over another rule.
pub(super) enum Lifted<'g> {
    Body(Cow<'g, Expr>),
    Loop { body: u32, min: u32, max: u32 },
}

pub(super) struct Lifter<'g, 'l> {
    pub(super) rules: Vec<(String, Lifted<'g>)>,
    pub(super) limits: &'l Limits,
}

impl Lifter<'_, '_> {
    /// Replaces counted repetitions too large to unroll by references to new loop rules;
    /// `None` when `e` holds none (the caller keeps borrowing it). Also returns an estimate
    /// of the NFA states the result unrolls to.
    ///
    /// A repetition is too large to unroll when its count is above
    /// [`Limits::unroll_limit`], or when its body, already unrolled, times its count would
    /// exceed [`UNROLL_COST`]: nested small counts (`((a|b){1,6}){1,6}…`, `a{2}{2}{2}…`)
    /// multiply, and past that point each level keeps a run-time counter instead.
    pub(super) fn lift(&mut self, e: &Expr, owner: &str, depth: usize) -> Result<(Option<Expr>, u64), Error> {
        if depth > MAX_EXPR_DEPTH {
            return Err(Error::Budget { limit: crate::limits::LimitExceeded::NestingDepth, rule: owner.to_string() });
        }
        Ok(match e {
            Expr::Literal(b) => (None, b.len() as u64 + 1),
            Expr::Chars(r) => (None, 4 * r.len() as u64 + 1),
            Expr::Seq(v) | Expr::Alt(v) => {
                let mut changed: Option<Vec<Expr>> = None;
                let mut cost = 1u64;
                for (i, x) in v.iter().enumerate() {
                    let (lifted, c) = self.lift(x, owner, depth + 1)?;
                    cost = cost.saturating_add(c);
                    match (lifted, &mut changed) {
                        (Some(new), Some(out)) => out.push(new),
                        (Some(new), None) => {
                            let mut out = Vec::with_capacity(v.len());
                            out.extend_from_slice(&v[..i]);
                            out.push(new);
                            changed = Some(out);
                        }
                        (None, Some(out)) => out.push(x.clone()),
                        (None, None) => {}
                    }
                }
                (changed.map(|v| if matches!(e, Expr::Seq(_)) { Expr::Seq(v) } else { Expr::Alt(v) }), cost)
            }
            Expr::Repeat { expr, min, max } => {
                let (inner, inner_cost) = self.lift(expr, owner, depth + 1)?;
                let lim = self.limits.unroll_limit;
                let copies = u64::from(max.unwrap_or(min.saturating_add(1)).max(1));
                let cost = inner_cost.saturating_mul(copies).saturating_add(1);
                let small = *min <= lim && max.is_none_or(|m| m <= lim) && cost <= UNROLL_COST;
                if small {
                    (inner.map(|inner| Expr::Repeat { expr: Box::new(inner), min: *min, max: *max }), cost)
                } else {
                    let body = match inner.as_ref().unwrap_or(expr) {
                        Expr::Ref(r) => r.0,
                        _ => {
                            let id = self.rules.len() as u32;
                            let item = inner.unwrap_or_else(|| (**expr).clone());
                            self.rules.push((format!("{owner}_item"), Lifted::Body(Cow::Owned(item))));
                            id
                        }
                    };
                    let id = self.rules.len() as u32;
                    let max = max.unwrap_or(UNBOUNDED);
                    self.rules.push((format!("{owner}_rep"), Lifted::Loop { body, min: *min, max }));
                    (Some(Expr::Ref(crate::grammar::RuleId(id))), 1)
                }
            }
            _ => (None, 1),
        })
    }
}

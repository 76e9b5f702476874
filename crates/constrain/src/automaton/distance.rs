//! Distance to the end: for every node of a [`Pda`], the fewest bytes that complete its rule.
//!
//! Input: a [`Pda`] and the set of bytes a path may use (the bytes the vocabulary has a
//! single-byte token for, so that a path of `d` bytes is also a path of at most `d` tokens).
//! Output: [`Distances`], one number per node and per rule, from which the distance of any
//! parse stack is a sum over its frames (see `Distances::of_frame`).
//!
//! How: a fixpoint. `node(n)` is the minimum of 0 (if `n` is final), `1 + node(t)` over each
//! allowed byte edge `n → t`, `rule(c) + node(r)` over each call edge (callee `c`, return `r`),
//! and for a loop node `min × rule(body)` (the frame's count starts at 0); `rule(r)` is
//! `node(start of r)`. Values only decrease from "unreachable", so repeated sweeps terminate;
//! sweeping nodes from last to first follows the subset construction's numbering (targets
//! mostly come after their sources), which makes a sweep settle most of a rule at once.
//! Cost: a few sweeps over every edge, computed once per constraint (on first use).

use super::Pda;
use crate::automaton::exec::Frame;

/// "Cannot complete" (with the allowed bytes).
pub const UNREACHABLE: u64 = u64::MAX;

/// The fewest bytes from each node to the end of its rule (see the module doc).
#[derive(Clone, Debug)]
pub struct Distances {
    node: Vec<u64>,
    rule: Vec<u64>,
}

/// Saturating sum that keeps [`UNREACHABLE`] absorbing.
fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

impl Distances {
    /// Computes the distances of `pda` using only the bytes `b` with `allowed[b]`.
    pub fn compute(pda: &Pda, allowed: &[bool; 256]) -> Distances {
        let mut node = vec![UNREACHABLE; pda.nodes.len()];
        let mut rule = vec![UNREACHABLE; pda.rules.len()];
        loop {
            let mut changed = false;
            for id in (0..pda.nodes.len()).rev() {
                let n = &pda.nodes[id];
                let mut best = if n.is_final { 0 } else { UNREACHABLE };
                for e in pda.bytes(n) {
                    let t = node.get(e.target as usize).copied().unwrap_or(UNREACHABLE);
                    if t < best && (e.lo..=e.hi).any(|b| allowed[b as usize]) {
                        best = best.min(add(t, 1));
                    }
                }
                for c in pda.calls(n) {
                    let r = rule.get(c.callee as usize).copied().unwrap_or(UNREACHABLE);
                    let t = node.get(c.ret as usize).copied().unwrap_or(UNREACHABLE);
                    best = best.min(add(r, t));
                }
                if let Some(l) = n.repeat {
                    let body = rule.get(l.body as usize).copied().unwrap_or(UNREACHABLE);
                    best = best.min(loop_rest(l.min, 0, body));
                }
                if best < node[id] {
                    node[id] = best;
                    changed = true;
                    let r = n.rule as usize;
                    if pda.rules.get(r).is_some_and(|info| info.start as usize == id) {
                        rule[r] = best;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Distances { node, rule }
    }

    /// The bytes that complete frame `f`'s rule from where it stands (its node, and for a
    /// loop frame its count), not counting the frames below.
    pub(crate) fn of_frame(&self, pda: &Pda, f: &Frame) -> u64 {
        let Some(n) = pda.nodes.get(f.node as usize) else { return UNREACHABLE };
        if let Some(l) = n.repeat {
            let body = self.rule.get(l.body as usize).copied().unwrap_or(UNREACHABLE);
            return loop_rest(l.min, f.count, body);
        }
        self.node.get(f.node as usize).copied().unwrap_or(UNREACHABLE)
    }

    /// The distance of the grammar's start (what an empty output needs).
    pub fn start(&self, pda: &Pda) -> u64 {
        self.rule.get(pda.start_rule as usize).copied().unwrap_or(UNREACHABLE)
    }

    /// Approximate heap bytes held.
    pub fn memory_usage(&self) -> usize {
        (self.node.len() + self.rule.len()) * 8
    }
}

/// Bytes a loop still needs at iteration count `count`: the iterations below `min`, each at
/// the body's shortest. (`max` never forces more; an unbounded loop is no different.)
fn loop_rest(min: u32, count: u32, body: u64) -> u64 {
    let left = u64::from(min.saturating_sub(count));
    if left == 0 {
        0
    } else if body == UNREACHABLE {
        UNREACHABLE
    } else {
        body.saturating_mul(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{Expr, GrammarBuilder};
    use crate::Limits;

    fn pda(build: impl FnOnce(&mut GrammarBuilder) -> crate::grammar::RuleId) -> Pda {
        let mut b = GrammarBuilder::new();
        let root = build(&mut b);
        Pda::build(&b.build(root).unwrap(), &Limits::default()).unwrap()
    }

    #[test]
    fn start_distance_is_the_shortest_string() {
        let all = [true; 256];
        let p = pda(|b| {
            b.add(
                "r",
                Expr::seq([Expr::lit("ab"), Expr::alt([Expr::lit("xyz"), Expr::lit("q")]), Expr::star(Expr::lit("w"))]),
            )
        });
        assert_eq!(Distances::compute(&p, &all).start(&p), 3);
        // Recursion: value ::= "[" value "]" | "12".
        let p = pda(|b| {
            let v = b.declare("v");
            b.define(v, Expr::alt([Expr::seq([Expr::lit("["), Expr::Ref(v), Expr::lit("]")]), Expr::lit("12")]));
            v
        });
        assert_eq!(Distances::compute(&p, &all).start(&p), 2);
        // A counted loop too large to unroll: 500 × "ab".
        let p = pda(|b| {
            let ab = b.add("ab", Expr::lit("ab"));
            b.add("r", Expr::repeat(Expr::Ref(ab), 500, Some(100_000)))
        });
        assert_eq!(Distances::compute(&p, &all).start(&p), 1000, "{}", p.listing());
        // Without the byte `q`, the short branch is out of reach.
        let p = pda(|b| b.add("r", Expr::alt([Expr::lit("xyz"), Expr::lit("q")])));
        let mut no_q = all;
        no_q[b'q' as usize] = false;
        assert_eq!(Distances::compute(&p, &no_q).start(&p), 3);
    }
}

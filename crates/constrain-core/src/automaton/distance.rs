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
//!
//! Each node also keeps the step that last lowered its value (`Distances::walk` follows
//! them to spell a shortest completion). A node's step points to nodes whose values were
//! final before its own last change, so following steps never cycles, not even through
//! calls of rules that match the empty string.

use super::{NodeId, Pda};
use crate::automaton::exec::Frame;

/// "Cannot complete" (with the allowed bytes).
pub const UNREACHABLE: u64 = u64::MAX;

/// In `Distances::step`: the node completes its rule (or no step is known).
const STEP_END: u32 = u32::MAX;
/// In `Distances::step`: set on a call edge's index (clear: a byte edge's index).
const STEP_CALL: u32 = 1 << 31;

/// The fewest bytes from each node to the end of its rule (see the module doc).
#[derive(Clone, Debug)]
pub struct Distances {
    node: Vec<u64>,
    rule: Vec<u64>,
    /// Per node: the first step of a shortest way (an index into the automaton's byte
    /// edges, or `STEP_CALL` | an index into its call edges, or `STEP_END`).
    step: Vec<u32>,
    /// The bytes paths may use.
    allowed: [bool; 256],
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
        let mut step = vec![STEP_END; pda.nodes.len()];
        loop {
            let mut changed = false;
            for id in (0..pda.nodes.len()).rev() {
                let n = &pda.nodes[id];
                let mut best = if n.is_final { 0 } else { UNREACHABLE };
                let mut how = STEP_END;
                for (i, e) in pda.bytes(n).iter().enumerate() {
                    let t = node.get(e.target.index()).copied().unwrap_or(UNREACHABLE);
                    if add(t, 1) < best && (e.lo..=e.hi).any(|b| allowed[b as usize]) {
                        best = add(t, 1);
                        how = n.bytes.start + i as u32;
                    }
                }
                for (i, c) in pda.calls(n).iter().enumerate() {
                    let r = rule.get(c.callee.index()).copied().unwrap_or(UNREACHABLE);
                    let t = node.get(c.ret.index()).copied().unwrap_or(UNREACHABLE);
                    if add(r, t) < best {
                        best = add(r, t);
                        how = STEP_CALL | (n.calls.start + i as u32);
                    }
                }
                if let Some(l) = n.repeat {
                    let body = rule.get(l.body.index()).copied().unwrap_or(UNREACHABLE);
                    best = best.min(loop_rest(l.min, 0, body));
                }
                if best < node[id] {
                    node[id] = best;
                    step[id] = how;
                    changed = true;
                    let r = n.rule.index();
                    if pda.rules.get(r).is_some_and(|info| info.start.index() == id) {
                        rule[r] = best;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        Distances { node, rule, step, allowed: *allowed }
    }

    /// Appends to `out` the bytes of a shortest completion of the stack `frames` (bottom
    /// first, as `(node, loop count)`; consumed as it is walked): exactly
    /// [`Distances::of_frame`] summed over the frames, when that is finite. Returns false
    /// when the steps do not lead to the end (no completion over the allowed bytes), or
    /// when the walk would exceed `max_bytes` bytes or `max_depth` frames.
    pub(crate) fn walk(
        &self,
        pda: &Pda,
        frames: &mut Vec<(NodeId, u32)>,
        out: &mut Vec<u8>,
        max_bytes: usize,
        max_depth: usize,
    ) -> bool {
        let limit = out.len().saturating_add(max_bytes);
        while let Some(top) = frames.last_mut() {
            let Some(n) = pda.nodes.get(top.0.index()) else { return false };
            if let Some(l) = n.repeat {
                if top.1 >= l.min {
                    frames.pop();
                    continue;
                }
                top.1 += 1;
                let Some(body) = pda.rules.get(l.body.index()) else { return false };
                frames.push((body.start, 0));
            } else {
                let how = self.step.get(top.0.index()).copied().unwrap_or(STEP_END);
                if how == STEP_END {
                    if !n.is_final {
                        return false;
                    }
                    frames.pop();
                    continue;
                }
                if how & STEP_CALL != 0 {
                    let Some(c) = pda.call_edges.get((how & !STEP_CALL) as usize) else { return false };
                    let Some(callee) = pda.rules.get(c.callee.index()) else { return false };
                    top.0 = c.ret;
                    frames.push((callee.start, 0));
                } else {
                    let Some(e) = pda.edges.get(how as usize) else { return false };
                    let Some(b) = (e.lo..=e.hi).find(|&b| self.allowed[b as usize]) else { return false };
                    if out.len() >= limit {
                        return false;
                    }
                    out.push(b);
                    top.0 = e.target;
                }
            }
            if frames.len() > max_depth {
                return false;
            }
        }
        true
    }

    /// The bytes that complete frame `f`'s rule from where it stands (its node, and for a
    /// loop frame its count), not counting the frames below.
    pub(crate) fn of_frame(&self, pda: &Pda, f: &Frame) -> u64 {
        let Some(n) = pda.nodes.get(f.node().index()) else { return UNREACHABLE };
        if let Some(l) = n.repeat {
            let body = self.rule.get(l.body.index()).copied().unwrap_or(UNREACHABLE);
            return loop_rest(l.min, f.count(), body);
        }
        self.node.get(f.node().index()).copied().unwrap_or(UNREACHABLE)
    }

    /// The distance of the grammar's start (what an empty output needs).
    pub fn start(&self, pda: &Pda) -> u64 {
        self.rule.get(pda.start_rule.index()).copied().unwrap_or(UNREACHABLE)
    }

    /// Approximate heap bytes held.
    pub fn memory_usage(&self) -> usize {
        (self.node.len() + self.rule.len()) * 8 + self.step.len() * 4
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

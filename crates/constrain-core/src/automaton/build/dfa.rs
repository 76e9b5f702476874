//! Step 3 of the build: subset construction of a rule's NFA into a DFA, and which of its
//! nodes reach a final node.

use super::nfa::{Grouped, Nfa};
use crate::automaton::{ByteEdge, CallEdge, NodeId, RuleIdx, Span};
use crate::util::hash128;
use crate::util::subset::{self, Exceeded};

/// A determinised rule: nodes with local targets, their edges in two flat lists as in a
/// [`Pda`].
#[derive(Default)]
pub(super) struct Dfa {
    /// Per node: final, byte edges, call edges.
    pub(super) nodes: Vec<(bool, Span, Span)>,
    pub(super) bytes: Vec<ByteEdge>,
    pub(super) calls: Vec<CallEdge>,
}

/// Subset construction of a rule's NFA ([`subset::determinise`]): per DFA state, byte
/// edges over the windows between the bounds of its NFA states' byte ranges, then one call
/// edge per callee; final where the set holds `accept`. Spends fuel for every NFA state of
/// every subset visited, so the work is bounded even where the number of subsets is not the
/// problem.
pub(super) fn determinise(nfa: &Nfa, start: u32, accept: u32, budget: usize, fuel: &mut u64) -> Result<Dfa, Exceeded> {
    let mut out = Dfa::default();
    // Buffers reused for every DFA state.
    let mut edges: Vec<(u8, u8, u32)> = Vec::new();
    let mut bounds: Vec<u16> = Vec::new();
    let mut target: Vec<u32> = Vec::new();
    let mut cover: Vec<(u16, u32)> = Vec::new();
    let mut by_callee: Vec<(u32, u32)> = Vec::new();
    subset::determinise(nfa, start, budget, fuel, |set, next| {
        let is_final = set.binary_search(&accept).is_ok();
        // Byte edges: sweep over the boundaries of this set's edges.
        edges.clear();
        edges.extend(set.iter().flat_map(|&s| nfa.bytes.of(s).iter().copied()));
        bounds.clear();
        bounds.extend(edges.iter().flat_map(|&(lo, hi, _)| [lo as u16, hi as u16 + 1]));
        bounds.sort_unstable();
        bounds.dedup();
        // Each edge covers the windows between consecutive bounds from its `lo` to its `hi`:
        // list (window, target) pairs and group them by window (linear in the coverage,
        // where testing every edge against every window was quadratic on wide classes).
        cover.clear();
        for &(lo, hi, t) in edges.iter() {
            let first = bounds.partition_point(|&b| b < lo as u16);
            let end = bounds.partition_point(|&b| b <= hi as u16);
            cover.extend((first..end).map(|w| (w as u16, t)));
        }
        cover.sort_unstable();
        let bytes_start = out.bytes.len();
        let mut k = 0;
        while k < cover.len() {
            let w = cover[k].0 as usize;
            target.clear();
            while k < cover.len() && cover[k].0 as usize == w {
                target.push(cover[k].1);
                k += 1;
            }
            let (lo, hi) = (bounds[w], bounds[w + 1] - 1);
            let t = next.intern(&mut target);
            let own = out.bytes.len() > bytes_start;
            match out.bytes.last_mut() {
                Some(last) if own && last.target == NodeId::new(t) && last.hi as u16 + 1 == lo => last.hi = hi as u8,
                _ => out.bytes.push(ByteEdge { lo: lo as u8, hi: hi as u8, target: NodeId::new(t) }),
            }
        }
        // Call edges: one per callee.
        by_callee.clear();
        by_callee.extend(set.iter().flat_map(|&s| nfa.calls.of(s).iter().copied()));
        by_callee.sort_unstable();
        let calls_start = out.calls.len();
        let mut j = 0;
        while j < by_callee.len() {
            let callee = by_callee[j].0;
            target.clear();
            while j < by_callee.len() && by_callee[j].0 == callee {
                target.push(by_callee[j].1);
                j += 1;
            }
            let t = next.intern(&mut target);
            out.calls.push(CallEdge { callee: RuleIdx::new(callee), ret: NodeId::new(t) });
        }
        let span = |start: usize, end: usize| Span { start: start as u32, len: (end - start) as u32 };
        out.nodes.push((is_final, span(bytes_start, out.bytes.len()), span(calls_start, out.calls.len())));
    })?;
    Ok(out)
}

impl Dfa {
    /// Node `i`'s byte edges and call edges.
    pub(super) fn edges(&self, i: usize) -> (&[ByteEdge], &[CallEdge]) {
        let Some(&(_, bytes, calls)) = self.nodes.get(i) else { return (&[], &[]) };
        (self.bytes.get(bytes.range()).unwrap_or(&[]), self.calls.get(calls.range()).unwrap_or(&[]))
    }

    /// A structural hash: every node's encoding ([`crate::automaton::keys::encode_parts`]), with local
    /// targets and callees by their local number.
    pub(super) fn shape(&self) -> u128 {
        let mut buf: Vec<u64> = Vec::with_capacity(self.nodes.len() * 4);
        for (i, &(is_final, _, _)) in self.nodes.iter().enumerate() {
            let (bytes, calls) = self.edges(i);
            let (target, callee) = (|t: NodeId| u64::from(t.as_u32()), |c: RuleIdx| u128::from(c.as_u32()));
            crate::automaton::keys::encode_parts(&mut buf, is_final, bytes, calls, None, target, callee);
        }
        hash128(&buf)
    }

    /// Whether every node reaches a final node along byte edges and call edges (to their
    /// return nodes).
    pub(super) fn all_live(&self) -> bool {
        let edges = (0..self.nodes.len()).flat_map(|i| {
            let (bytes, calls) = self.edges(i);
            bytes.iter().map(|e| e.target).chain(calls.iter().map(|c| c.ret)).map(move |t| (i as u32, t.as_u32()))
        });
        CoReach::default().run(self.nodes.len(), edges, |i| self.nodes[i].0).iter().all(|&l| l)
    }
}

/// Which nodes of an automaton reach a final node: a walk back from the final nodes over
/// predecessor lists, linear in the automaton. The buffers serve automaton after automaton.
#[derive(Default)]
pub(super) struct CoReach {
    pub(super) preds: Grouped<u32>,
    pub(super) live: Vec<bool>,
    pub(super) todo: Vec<u32>,
}

impl CoReach {
    /// Per node of `0..len`, whether it reaches a final node along `edges` (`(from, to)`
    /// pairs, both below `len`).
    pub(super) fn run(
        &mut self,
        len: usize,
        edges: impl Iterator<Item = (u32, u32)>,
        is_final: impl Fn(usize) -> bool,
    ) -> &[bool] {
        let CoReach { preds, live, todo } = self;
        preds.clear();
        for (from, to) in edges {
            preds.push(to, from);
        }
        preds.seal(len as u32);
        live.clear();
        live.extend((0..len).map(is_final));
        todo.clear();
        todo.extend((0..len as u32).filter(|&i| live[i as usize]));
        while let Some(t) = todo.pop() {
            for &p in preds.of(t) {
                if !live[p as usize] {
                    live[p as usize] = true;
                    todo.push(p);
                }
            }
        }
        live
    }
}

//! The one subset construction of the engine: determinises a Thompson NFA, for the PDA
//! builder (a rule's byte-level NFA, `automaton/build/dfa.rs`) and for the character
//! automata behind complement and intersection (`grammar/dfa`).
//!
//! What: [`determinise`] numbers the ε-closed sets of NFA states reachable from a start in
//! the order it meets them (the start's set is 0), and hands each set, in that order, to the
//! caller, who reads its moves, asks [`Targets::intern`] for the number of each successor
//! and writes the DFA state's edges in its own form. The caller says what a move reads
//! (byte ranges and rule calls, or character classes) and what a final state is; this module
//! holds what the two have in common: the ε-closure, the interner of state sets, and the
//! worklist with its budgets.
//!
//! Why here: the two callers sit on both sides of [`crate::grammar`] and
//! [`crate::automaton`], and [`crate::util`] is below both. One copy means one place for
//! the budgets' meaning and for the hot path's care not to allocate per DFA state.
//!
//! How: sets are sorted, distinct `u32` lists, stored back to back in one flat buffer and
//! found by their hash ([`Subsets`]); the ε-closure marks visited states with a generation
//! stamp, so neither allocates per set. Before expanding a set the loop checks the state
//! budget (more sets met than allowed: [`Exceeded::States`]), then spends one unit of fuel
//! per NFA state of the set plus one ([`Exceeded::Fuel`]), so the work stays bounded even
//! where the number of sets does not. The caller's code is a closure, monomorphised into
//! the loop: no dynamic dispatch per state.

use rustc_hash::FxHashMap as HashMap;

/// An NFA as the subset construction reads it: states `0..states()`, each with its ε-moves.
/// The moves that read input stay the caller's business ([`determinise`]).
pub(crate) trait EpsilonMoves {
    /// The number of states; every state named by a move is below it.
    fn states(&self) -> usize;
    /// The states `s` moves to without reading anything.
    fn eps(&self, s: u32) -> &[u32];
}

/// Which budget a determinisation ran out of.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Exceeded {
    /// More DFA states than the caller allows (for the PDA builder,
    /// [`crate::Limits::max_automaton_states`]).
    States,
    /// The fuel ran out (for the PDA builder, [`crate::Limits::compile_fuel`]).
    Fuel,
}

/// Subset construction of `nfa` from `start`. Calls `expand(set, targets)` once per DFA
/// state, in the order of their numbers, with the state's NFA states (sorted, distinct,
/// ε-closed); `expand` emits the state's edges, numbering each successor with
/// [`Targets::intern`], which numbers new sets in the order it is asked.
///
/// Fails with [`Exceeded::States`] when more than `max_states` sets are met, and with
/// [`Exceeded::Fuel`] when `fuel` cannot pay for the next set (its size plus one); the
/// budgets are checked in that order before each set is expanded, and the fuel spent stays
/// spent. Pass `u64::MAX` to leave the fuel out: no automaton here spends that much.
pub(crate) fn determinise<N, F>(
    nfa: &N,
    start: u32,
    max_states: usize,
    fuel: &mut u64,
    mut expand: F,
) -> Result<(), Exceeded>
where
    N: EpsilonMoves,
    F: FnMut(&[u32], &mut Targets<'_, N>),
{
    let mut sets = Subsets::default();
    let mut scratch = ClosureScratch::default();
    let mut first = vec![start];
    closure(nfa, &mut first, &mut scratch);
    sets.intern(&first);
    // Reused for every DFA state: the set being expanded, copied out of the interner,
    // which grows while it is expanded.
    let mut set: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < sets.len() {
        if sets.len() > max_states {
            return Err(Exceeded::States);
        }
        set.clear();
        set.extend_from_slice(sets.get(i));
        let work = set.len() as u64 + 1;
        if *fuel < work {
            return Err(Exceeded::Fuel);
        }
        *fuel -= work;
        expand(&set, &mut Targets { nfa, sets: &mut sets, scratch: &mut scratch });
        i += 1;
    }
    Ok(())
}

/// What [`determinise`] lends the caller's `expand`: numbers the successors of the DFA
/// state being expanded.
pub(crate) struct Targets<'a, N> {
    nfa: &'a N,
    sets: &'a mut Subsets,
    scratch: &'a mut ClosureScratch,
}

impl<N: EpsilonMoves> Targets<'_, N> {
    /// The DFA state of the NFA states in `states` (any order, repeats allowed): extends
    /// `states` to its ε-closure, sorted and distinct, and returns the closure's number, a
    /// new one the first time the closure is met.
    #[inline]
    pub(crate) fn intern(&mut self, states: &mut Vec<u32>) -> u32 {
        closure(self.nfa, states, self.scratch);
        self.sets.intern(states)
    }
}

/// Extends `set` with every state reachable by ε-moves, sorted and deduplicated.
/// `scratch` is reused across calls so determinisation does not allocate per set.
fn closure<N: EpsilonMoves>(nfa: &N, set: &mut Vec<u32>, scratch: &mut ClosureScratch) {
    let ClosureScratch { stamp, generation, todo } = scratch;
    let states = nfa.states();
    if stamp.len() < states {
        stamp.resize(states, 0);
    }
    *generation = generation.wrapping_add(1);
    if *generation == 0 {
        stamp.fill(0);
        *generation = 1;
    }
    let g = *generation;
    todo.clear();
    for &s in set.iter() {
        if let Some(m) = stamp.get_mut(s as usize) {
            if *m != g {
                *m = g;
                todo.push(s);
            }
        }
    }
    while let Some(s) = todo.pop() {
        for &t in nfa.eps(s) {
            if stamp[t as usize] != g {
                stamp[t as usize] = g;
                set.push(t);
                todo.push(t);
            }
        }
    }
    set.sort_unstable();
    set.dedup();
}

/// Reusable buffers for [`closure`]: a visited stamp per NFA state and a work list.
#[derive(Default)]
struct ClosureScratch {
    stamp: Vec<u32>,
    generation: u32,
    todo: Vec<u32>,
}

/// The NFA state sets a subset construction has met, numbered in order: each stored once
/// in one flat list and found by its hash, so a new DFA state costs no allocation of its own.
#[derive(Default)]
struct Subsets {
    data: Vec<u32>,
    /// Set `i` is `data[ends[i - 1]..ends[i]]` (from 0 for the first).
    ends: Vec<usize>,
    /// The newest set with each hash; older ones with the same hash follow `older`.
    by_hash: HashMap<u64, u32>,
    older: Vec<u32>,
}

impl Subsets {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Set `i`'s NFA states (sorted, distinct).
    fn get(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.ends.get(i - 1).copied().unwrap_or(0) };
        let end = self.ends.get(i).copied().unwrap_or(start);
        self.data.get(start..end).unwrap_or(&[])
    }

    /// The number of `set`, given a new one the first time it is seen.
    fn intern(&mut self, set: &[u32]) -> u32 {
        let hash = std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, set);
        let newest = self.by_hash.get(&hash).copied();
        let mut at = newest;
        while let Some(id) = at {
            if self.get(id as usize) == set {
                return id;
            }
            at = self.older.get(id as usize).copied().filter(|&o| o != u32::MAX);
        }
        let id = self.len() as u32;
        self.data.extend_from_slice(set);
        self.ends.push(self.data.len());
        self.older.push(newest.unwrap_or(u32::MAX));
        self.by_hash.insert(hash, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An NFA of ε-moves only, as lists per state.
    struct Eps(Vec<Vec<u32>>);

    impl EpsilonMoves for Eps {
        fn states(&self) -> usize {
            self.0.len()
        }
        fn eps(&self, s: u32) -> &[u32] {
            self.0.get(s as usize).map_or(&[], Vec::as_slice)
        }
    }

    /// Reading moves `s` to `s + 1` below 4; ε-moves from 1 to 3 and back.
    fn run(max_states: usize, fuel: &mut u64) -> Result<Vec<(Vec<u32>, u32)>, Exceeded> {
        let nfa = Eps(vec![vec![], vec![3], vec![], vec![1]]);
        let mut out = Vec::new();
        let mut to = Vec::new();
        determinise(&nfa, 0, max_states, fuel, |set, targets| {
            to.clear();
            to.extend(set.iter().map(|&s| s + 1).filter(|&s| s < 4));
            out.push((set.to_vec(), targets.intern(&mut to)));
        })?;
        Ok(out)
    }

    #[test]
    fn numbers_closed_sets_in_order_and_keeps_the_budgets() {
        let mut fuel = u64::MAX;
        let got = run(3, &mut fuel).expect("small");
        assert_eq!(got, vec![(vec![0], 1), (vec![1, 3], 2), (vec![2], 1)]);
        // Each set's size plus one: 2 + 3 + 2.
        assert_eq!(u64::MAX - fuel, 7);
        assert!(matches!(run(2, &mut fuel), Err(Exceeded::States)));
        let mut short = 6;
        assert!(matches!(run(3, &mut short), Err(Exceeded::Fuel)));
        assert_eq!(short, 1, "the fuel of the sets expanded stays spent");
    }
}

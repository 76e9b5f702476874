//! The complement of a regular expression over characters: every string of Unicode scalar
//! values it does *not* match, as another [`Expr`].
//!
//! Why: an object with `patternProperties` allows its other keys too (valued by
//! `additionalProperties`). A grammar holds the two kinds of keys apart only if it can spell
//! "a key that matches none of the patterns"; this module spells it, so the object compiles
//! exactly, without a run-time check.
//!
//! How: the characters are split into classes that no part of the expression tells apart;
//! a Thompson automaton over those classes is determinised (subset construction) and
//! minimised (Moore), its accepting states are flipped, and state elimination turns it back
//! into an expression. Each step has a budget; past one, [`complement`] returns `None` and
//! the caller keeps its other route (a refusal or a run-time check), never an approximation.
//!
//! ```rust
//! use constrain::grammar::complement::complement;
//! use constrain::grammar::regex::{to_expr, RegexOptions};
//!
//! let keys = to_expr("^x-", &RegexOptions::json_schema())?; // keys that begin with "x-"
//! let others = complement(&keys).expect("small enough");
//! let mut b = constrain::grammar::GrammarBuilder::new();
//! let root = b.add("root", others);
//! let pda = constrain::automaton::Pda::build(&b.build(root)?, &constrain::Limits::default())?;
//! assert!(pda.matches(b"name") && pda.matches(b"x") && pda.matches(b"y-x-"));
//! assert!(!pda.matches(b"x-") && !pda.matches(b"x-rate"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::gbnf::charset;
use super::Expr;
use rustc_hash::FxHashMap as HashMap;

/// Most distinct character classes the expression may tell apart.
const MAX_CLASSES: usize = 64;
/// Most automaton states, before and after determinising.
const MAX_NFA_STATES: usize = 2_000;
const MAX_DFA_STATES: usize = 256;
/// Largest result (see [`Expr::size`]): past it the complement is too costly to compile.
const MAX_RESULT_SIZE: usize = 20_000;
/// Deepest nesting of the result: state elimination over a long chain of states (`[a-z]{0,250}`)
/// nests once per state, and every later pass over the grammar recurses that deep.
const MAX_RESULT_DEPTH: usize = 64;

/// The strings of scalar values that `e` does not match, or `None` when `e` is not a plain
/// expression over characters (it holds a rule reference or non-ASCII byte ranges) or the
/// construction outgrows its budget.
pub fn complement(e: &Expr) -> Option<Expr> {
    let classes = Classes::of(e)?;
    let mut nfa = Nfa::default();
    let start = nfa.state()?;
    let end = nfa.build(e, start, &classes, 0)?;
    let dfa = Dfa::determinise(&nfa, start, end, classes.len())?.minimise();
    let flipped: Vec<bool> = dfa.accepting.iter().map(|a| !a).collect();
    let out = eliminate(&dfa.next, &flipped, &classes)?;
    (out.size() <= MAX_RESULT_SIZE && depth(&out, 0) <= MAX_RESULT_DEPTH).then_some(out)
}

/// How deeply `e` nests (stops counting past [`MAX_RESULT_DEPTH`]).
fn depth(e: &Expr, at: usize) -> usize {
    if at > MAX_RESULT_DEPTH {
        return at;
    }
    match e {
        Expr::Seq(v) | Expr::Alt(v) => v.iter().map(|x| depth(x, at + 1)).max().unwrap_or(at),
        Expr::Repeat { expr, .. } => depth(expr, at + 1),
        _ => at,
    }
}

/// A partition of the scalar values into classes: two values share a class when every
/// character set of the expression holds both or neither.
struct Classes {
    /// Each class's ranges (normalised scalar ranges).
    ranges: Vec<Vec<(u32, u32)>>,
    /// Elementary intervals (start, end, class), sorted: the map from a range to classes.
    intervals: Vec<(u32, u32, usize)>,
}

impl Classes {
    fn of(e: &Expr) -> Option<Classes> {
        let mut sets: Vec<Vec<(u32, u32)>> = Vec::new();
        collect_sets(e, &mut sets, 0)?;
        // A set written twice tells nothing new apart.
        sets.sort_unstable();
        sets.dedup();
        let mut cuts: Vec<u32> = vec![0, 0xD800, 0xE000, 0x11_0000];
        for s in &sets {
            for &(a, b) in s {
                cuts.push(a);
                cuts.push(b + 1);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut by_signature: HashMap<Vec<u32>, usize> = HashMap::default();
        let mut ranges: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut intervals = Vec::new();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1] - 1);
            if (0xD800..0xE000).contains(&a) {
                continue;
            }
            let signature: Vec<u32> = sets
                .iter()
                .enumerate()
                .filter(|(_, s)| s.iter().any(|&(x, y)| x <= a && a <= y))
                .map(|(i, _)| i as u32)
                .collect();
            let next = ranges.len();
            let class = *by_signature.entry(signature).or_insert(next);
            if class == next {
                if next == MAX_CLASSES {
                    return None;
                }
                ranges.push(Vec::new());
            }
            ranges[class].push((a, b));
            intervals.push((a, b, class));
        }
        for r in &mut ranges {
            *r = charset::normalize(std::mem::take(r));
        }
        Some(Classes { ranges, intervals })
    }

    fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The classes a character set covers (the partition makes it a union of classes).
    fn covering(&self, set: &[(u32, u32)]) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .intervals
            .iter()
            .filter(|&&(a, _, _)| set.iter().any(|&(x, y)| x <= a && a <= y))
            .map(|&(_, _, c)| c)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The expression of one character out of the classes `set`.
    fn chars(&self, set: &[usize]) -> Expr {
        let all: Vec<(u32, u32)> = set.iter().flat_map(|&c| self.ranges[c].iter().copied()).collect();
        let all = charset::normalize(all);
        if all.is_empty() {
            Expr::Nothing
        } else {
            Expr::Chars(charset::to_chars(&all))
        }
    }
}

/// The character sets of `e` (as normalised scalar ranges).
fn collect_sets(e: &Expr, out: &mut Vec<Vec<(u32, u32)>>, depth: usize) -> Option<()> {
    if depth > 200 {
        return None;
    }
    match e {
        Expr::Empty | Expr::Nothing => {}
        Expr::Literal(b) => {
            for c in std::str::from_utf8(b).ok()?.chars() {
                out.push(vec![(c as u32, c as u32)]);
            }
        }
        Expr::Chars(_) | Expr::Bytes(_) => out.push(char_ranges(e)?),
        Expr::Seq(v) | Expr::Alt(v) => {
            for x in v {
                collect_sets(x, out, depth + 1)?;
            }
        }
        Expr::Repeat { expr, .. } => collect_sets(expr, out, depth + 1)?,
        Expr::Ref(_) => return None,
    }
    Some(())
}

/// The characters one `Chars` or (ASCII) `Bytes` expression matches, as normalised scalar
/// ranges; `None` for any other expression, or bytes that are not whole characters.
fn char_ranges(e: &Expr) -> Option<Vec<(u32, u32)>> {
    let raw: Vec<(u32, u32)> = match e {
        Expr::Chars(r) => r.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
        Expr::Bytes(r) if r.iter().all(|&(_, b)| b < 0x80) => r.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
        _ => return None,
    };
    Some(charset::normalize(raw))
}

/// A Thompson automaton over classes: per state, its ε-moves and its class moves.
#[derive(Default)]
struct Nfa {
    eps: Vec<Vec<u32>>,
    moves: Vec<Vec<(Vec<usize>, u32)>>,
}

impl Nfa {
    fn state(&mut self) -> Option<u32> {
        if self.eps.len() >= MAX_NFA_STATES {
            return None;
        }
        self.eps.push(Vec::new());
        self.moves.push(Vec::new());
        Some(self.eps.len() as u32 - 1)
    }

    /// Adds `e` from state `from`; returns the state its matches end in.
    fn build(&mut self, e: &Expr, from: u32, classes: &Classes, depth: usize) -> Option<u32> {
        if depth > 200 {
            return None;
        }
        Some(match e {
            Expr::Empty => from,
            Expr::Nothing => self.state()?,
            Expr::Literal(b) => {
                let mut at = from;
                for c in std::str::from_utf8(b).ok()?.chars() {
                    let set = classes.covering(&[(c as u32, c as u32)]);
                    at = self.step(at, set)?;
                }
                at
            }
            Expr::Chars(_) | Expr::Bytes(_) => {
                let set = char_ranges(e)?;
                self.step(from, classes.covering(&set))?
            }
            Expr::Seq(v) => {
                let mut at = from;
                for x in v {
                    at = self.build(x, at, classes, depth + 1)?;
                }
                at
            }
            Expr::Alt(v) => {
                let end = self.state()?;
                for x in v {
                    let s = self.state()?;
                    self.eps[from as usize].push(s);
                    let t = self.build(x, s, classes, depth + 1)?;
                    self.eps[t as usize].push(end);
                }
                end
            }
            Expr::Repeat { expr, min, max } => {
                let mut at = from;
                for _ in 0..*min {
                    let s = self.state()?;
                    self.eps[at as usize].push(s);
                    at = self.build(expr, s, classes, depth + 1)?;
                }
                match max {
                    None => {
                        // at → loop → (body → loop) → end
                        let lp = self.state()?;
                        self.eps[at as usize].push(lp);
                        let s = self.state()?;
                        self.eps[lp as usize].push(s);
                        let t = self.build(expr, s, classes, depth + 1)?;
                        self.eps[t as usize].push(lp);
                        lp
                    }
                    Some(max) => {
                        let end = self.state()?;
                        self.eps[at as usize].push(end);
                        for _ in *min..*max {
                            let s = self.state()?;
                            self.eps[at as usize].push(s);
                            at = self.build(expr, s, classes, depth + 1)?;
                            self.eps[at as usize].push(end);
                        }
                        end
                    }
                }
            }
            Expr::Ref(_) => return None,
        })
    }

    fn step(&mut self, from: u32, set: Vec<usize>) -> Option<u32> {
        let to = self.state()?;
        self.moves[from as usize].push((set, to));
        Some(to)
    }

    /// The ε-closure of `states` (distinct), sorted; `seen` is all false on entry and exit.
    fn closure(&self, states: &mut Vec<u32>, seen: &mut [bool]) {
        for &s in states.iter() {
            seen[s as usize] = true;
        }
        let mut i = 0;
        while i < states.len() {
            let s = states[i] as usize;
            for &t in &self.eps[s] {
                if !seen[t as usize] {
                    seen[t as usize] = true;
                    states.push(t);
                }
            }
            i += 1;
        }
        for &s in states.iter() {
            seen[s as usize] = false;
        }
        states.sort_unstable();
    }
}

/// A complete deterministic automaton over classes (state 0 starts).
struct Dfa {
    /// `next[s][class]`.
    next: Vec<Vec<u32>>,
    accepting: Vec<bool>,
}

impl Dfa {
    fn determinise(nfa: &Nfa, start: u32, end: u32, n_classes: usize) -> Option<Dfa> {
        let mut seen = vec![false; nfa.eps.len()];
        let mut first = vec![start];
        nfa.closure(&mut first, &mut seen);
        let mut ids: HashMap<Vec<u32>, u32> = HashMap::default();
        let mut sets = vec![first.clone()];
        ids.insert(first, 0);
        let mut next: Vec<Vec<u32>> = Vec::new();
        let mut i = 0;
        while i < sets.len() {
            let mut row = Vec::with_capacity(n_classes);
            for class in 0..n_classes {
                let mut to: Vec<u32> = Vec::new();
                for &s in &sets[i] {
                    for (set, t) in &nfa.moves[s as usize] {
                        if set.binary_search(&class).is_ok() && !seen[*t as usize] {
                            seen[*t as usize] = true;
                            to.push(*t);
                        }
                    }
                }
                for &t in &to {
                    seen[t as usize] = false;
                }
                nfa.closure(&mut to, &mut seen);
                let id = match ids.get(&to) {
                    Some(&id) => id,
                    None => {
                        if sets.len() >= MAX_DFA_STATES {
                            return None;
                        }
                        let id = sets.len() as u32;
                        ids.insert(to.clone(), id);
                        sets.push(to);
                        id
                    }
                };
                row.push(id);
            }
            next.push(row);
            i += 1;
        }
        let accepting = sets.iter().map(|s| s.binary_search(&end).is_ok()).collect();
        Some(Dfa { next, accepting })
    }

    /// Merges equivalent states (Moore's partition refinement).
    fn minimise(self) -> Dfa {
        let n = self.next.len();
        let mut block: Vec<u32> = self.accepting.iter().map(|&a| a as u32).collect();
        loop {
            let mut ids: HashMap<(u32, Vec<u32>), u32> = HashMap::default();
            let mut fresh = vec![0u32; n];
            for s in 0..n {
                let key = (block[s], self.next[s].iter().map(|&t| block[t as usize]).collect::<Vec<u32>>());
                let len = ids.len() as u32;
                fresh[s] = *ids.entry(key).or_insert(len);
            }
            let stable = ids.len() == block.iter().collect::<std::collections::HashSet<_>>().len();
            block = fresh;
            if stable {
                break;
            }
        }
        // Renumber so that the start's block is 0.
        let mut order: Vec<u32> = vec![u32::MAX; n];
        let mut reps: Vec<usize> = Vec::new();
        let mut queue = vec![0usize];
        while let Some(s) = queue.pop() {
            let b = block[s] as usize;
            if order[b] != u32::MAX {
                continue;
            }
            order[b] = reps.len() as u32;
            reps.push(s);
            for &t in self.next[s].iter().rev() {
                queue.push(t as usize);
            }
        }
        let next =
            reps.iter().map(|&s| self.next[s].iter().map(|&t| order[block[t as usize] as usize]).collect()).collect();
        let accepting = reps.iter().map(|&s| self.accepting[s]).collect();
        Dfa { next, accepting }
    }
}

/// State elimination: the expression of the words that `next` leads from state 0 to an
/// accepting state.
fn eliminate(next: &[Vec<u32>], accepting: &[bool], classes: &Classes) -> Option<Expr> {
    let n = next.len();
    // Only states on some path from the start to an accepting state matter.
    let mut live = accepting.to_vec();
    loop {
        let mut changed = false;
        for s in 0..n {
            if !live[s] && next[s].iter().any(|&t| live[t as usize]) {
                live[s] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if !live[0] {
        return Some(Expr::Nothing);
    }
    // Generalised automaton: nodes 0..n are the states, n is the final node. The start node
    // is state 0 itself, entered from outside by ε; it is kept to the end, with its loop.
    let fin = n;
    let mut edge: HashMap<(usize, usize), Expr> = HashMap::default();
    for s in (0..n).filter(|&s| live[s]) {
        let mut by_target: HashMap<u32, Vec<usize>> = HashMap::default();
        for (class, &t) in next[s].iter().enumerate() {
            if live[t as usize] {
                by_target.entry(t).or_default().push(class);
            }
        }
        for (t, set) in by_target {
            edge.insert((s, t as usize), classes.chars(&set));
        }
        if accepting[s] {
            edge.insert((s, fin), Expr::Empty);
        }
    }
    let mut remaining: Vec<usize> = (1..n).filter(|&s| live[s]).collect();
    while !remaining.is_empty() {
        // Eliminate the state with the fewest paths through it.
        let cost = |k: usize| {
            let ins = edge.keys().filter(|&&(a, b)| b == k && a != k).count();
            let outs = edge.keys().filter(|&&(a, b)| a == k && b != k).count();
            ins * outs
        };
        let (pos, &k) = remaining.iter().enumerate().min_by_key(|&(_, &k)| cost(k))?;
        remaining.swap_remove(pos);
        let lp = edge.remove(&(k, k)).map(Expr::star).unwrap_or(Expr::Empty);
        let ins: Vec<(usize, Expr)> =
            edge.iter().filter(|(&(_, b), _)| b == k).map(|(&(a, _), e)| (a, e.clone())).collect();
        let outs: Vec<(usize, Expr)> =
            edge.iter().filter(|(&(a, _), _)| a == k).map(|(&(_, b), e)| (b, e.clone())).collect();
        edge.retain(|&(a, b), _| a != k && b != k);
        for (a, ea) in &ins {
            for (b, eb) in &outs {
                let through = Expr::seq([ea.clone(), lp.clone(), eb.clone()]);
                let merged = match edge.remove(&(*a, *b)) {
                    Some(old) => Expr::alt([old, through]),
                    None => through,
                };
                if merged.size() > MAX_RESULT_SIZE {
                    return None;
                }
                edge.insert((*a, *b), merged);
            }
        }
    }
    let lp = edge.remove(&(0, 0)).map(Expr::star).unwrap_or(Expr::Empty);
    let out = edge.remove(&(0, fin)).unwrap_or(Expr::Nothing);
    Some(Expr::seq([lp, out]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::Pda;
    use crate::grammar::regex::{ecma_is_match, to_expr, RegexOptions};
    use crate::grammar::GrammarBuilder;
    use crate::Limits;

    fn pda(e: Expr) -> Pda {
        let mut b = GrammarBuilder::new();
        let root = b.add("root", e);
        Pda::build(&b.build(root).expect("grammar"), &Limits::default()).expect("builds")
    }

    /// Every string of `alphabet` up to length `n`.
    fn strings(alphabet: &[char], n: usize) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut layer = vec![String::new()];
        for _ in 0..n {
            layer = layer.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            out.extend(layer.iter().cloned());
        }
        out
    }

    #[test]
    fn complements_partition_every_short_string() {
        let alphabet = ['a', 'b', 'x', '-', '1', 'é', '_'];
        for pattern in ["^x-", "^[a-z]+$", "a", "^a$", "^(ab|b)*$", "[0-9]{2}", "^[a-z]{1,3}_?$", "é$", "^$"] {
            let e = to_expr(pattern, &RegexOptions::json_schema()).expect("pattern");
            let c = complement(&e).unwrap_or_else(|| panic!("{pattern}: over budget"));
            let (yes, no) = (pda(e), pda(c));
            for s in strings(&alphabet, 4) {
                let is = ecma_is_match(pattern, &s).expect("pattern");
                assert_eq!(yes.matches(s.as_bytes()), is, "{pattern} on {s:?}");
                assert_eq!(no.matches(s.as_bytes()), !is, "complement of {pattern} on {s:?}");
            }
        }
    }

    #[test]
    fn rule_references_and_huge_automata_are_refused() {
        assert!(complement(&Expr::Ref(crate::grammar::RuleId(0))).is_none());
        // Strings whose 30th character from the end is an `a`: 2^30 states deterministic.
        let e = to_expr("a[ab]{29}$", &RegexOptions::json_schema()).expect("pattern");
        assert!(complement(&e).is_none());
        // A chain of 250 states: small, but its expression would nest 250 deep.
        let e = to_expr("^[a-z]{0,250}$", &RegexOptions::json_schema()).expect("pattern");
        assert!(complement(&e).is_none());
    }
}

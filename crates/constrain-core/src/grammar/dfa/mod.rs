//! Regular languages over characters as minimal deterministic automata ([`CharDfa`]): built
//! from expressions, complemented, intersected, joined, concatenated, cut to a length range,
//! and written back as an [`Expr`] or as grammar rules.
//!
//! Why: a JSON Schema string can be under several regular constraints at once: a `pattern`
//! (with look-arounds, which the JSON Schema front end compiles through these automata), a
//! `format`, `minLength`/`maxLength`. The grammar states their intersection exactly only if
//! something computes it; otherwise a keyword is left to a run-time check, and a model can
//! write a string that no ending makes pass (a dead end, issue 37). Object keys need the
//! complement ([`super::complement`]).
//!
//! How: the characters are split into classes that no part tells apart; a Thompson automaton
//! over those classes is determinised (subset construction) and minimised (Moore).
//! Intersection, union and length ranges are product constructions; complement flips the
//! accepting states of the complete automaton. Back to the grammar:
//! - [`CharDfa::to_expr`]: state elimination, for small automata whose expression stays small;
//! - [`CharDfa::to_rules`]: one rule per state (a right-linear grammar), whose size is the
//!   automaton's, for the rest: `(?=.*\d)(?=.*[A-Z]).{8,20}` is 84 states, whose expression
//!   would run to hundreds of thousands of nodes.
//!
//! Each step has a budget; past one the answer is `None` and the caller keeps its other
//! route (a refusal or a run-time check), never an approximation.
//!
//! ```rust
//! use constrain::grammar::dfa::CharDfa;
//! use constrain::grammar::regex::{to_expr, RegexOptions};
//!
//! let digit = CharDfa::of(&to_expr("[0-9]", &RegexOptions::search())?).expect("small");
//! let upper = CharDfa::of(&to_expr("[A-Z]", &RegexOptions::search())?).expect("small");
//! let password = digit.intersect(&upper).and_then(|d| d.with_length(8, Some(20))).expect("small");
//! let mut b = constrain::grammar::GrammarBuilder::new();
//! let body = password.to_rules(&mut b, "password", &|e| e.clone(), 10_000).expect("small");
//! let root = b.add("root", body);
//! let pda = constrain::automaton::Pda::build(&b.build(root)?, &constrain::Limits::default())?;
//! assert!(pda.matches(b"abcdefG1") && !pda.matches(b"abcdefgh") && !pda.matches(b"abcdG1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Files: this one holds [`CharDfa`] and its operations; `classes.rs` splits the
//! characters into classes; `nfa.rs` builds the Thompson automaton, determinised by the
//! subset construction the PDA builder uses too (`util/subset.rs` of `constrain-core`).

use super::{Expr, GrammarBuilder, RuleId};
use crate::util::subset;
use rustc_hash::FxHashMap as HashMap;

mod classes;
mod nfa;

use classes::collect_sets;
use classes::Classes;
use nfa::Nfa;

/// Most distinct character classes one automaton may tell apart.
///
/// A constant of the algorithm, not a user limit: past any of these budgets the answer is
/// `None` and the caller takes its other route (a run-time check or a refusal), never an
/// approximation; they bound one keyword's automaton the way [`crate::Limits`] bounds the
/// whole constraint. The same holds for the other `MAX_*` here.
const MAX_CLASSES: usize = 64;
/// Most states of the Thompson automaton behind one determinisation.
/// A constant of the algorithm, not a user limit (see [`MAX_CLASSES`]).
const MAX_NFA_STATES: usize = 8_000;
/// Most states of a deterministic automaton (before minimising).
/// A constant of the algorithm, not a user limit (see [`MAX_CLASSES`]).
const MAX_DFA_STATES: usize = 2_048;
/// Most states [`CharDfa::to_expr`] eliminates: elimination is cubic, and past this its
/// expression is too big anyway.
/// A constant of the algorithm, not a user limit (see [`MAX_CLASSES`]).
const MAX_ELIMINATED_STATES: usize = 256;
/// Largest expression [`CharDfa::to_expr`] returns (see [`Expr::size`]).
/// A constant of the algorithm, not a user limit (see [`MAX_CLASSES`]).
const MAX_RESULT_SIZE: usize = 20_000;
/// Deepest nesting of [`CharDfa::to_expr`]'s expression: elimination over a long chain of
/// states (`[a-z]{0,250}`) nests once per state, and every later pass over the grammar
/// recurses that deep.
/// A constant of the algorithm, not a user limit (see [`MAX_CLASSES`]).
const MAX_RESULT_DEPTH: usize = 64;

/// A complete deterministic automaton over character classes, minimal, state 0 the start.
/// Every class is a set of Unicode scalar values and the classes partition them all, so each
/// step reads one character.
#[derive(Clone, Debug)]
pub struct CharDfa {
    classes: Classes,
    /// `next[state][class]`.
    next: Vec<Vec<u32>>,
    accepting: Vec<bool>,
}

/// One part of a concatenation ([`CharDfa::seq`]).
#[derive(Clone, Copy, Debug)]
pub enum Part<'a> {
    /// The strings an expression over characters matches.
    Expr(&'a Expr),
    /// The strings an automaton accepts.
    Dfa(&'a CharDfa),
}

impl CharDfa {
    /// The strings `e` matches; `None` when `e` is not a plain expression over characters (it
    /// holds a rule reference or non-ASCII byte ranges) or outgrows the budgets.
    pub fn of(e: &Expr) -> Option<CharDfa> {
        Self::seq(&[Part::Expr(e)])
    }

    /// The concatenation of `parts`, in order.
    pub fn seq(parts: &[Part<'_>]) -> Option<CharDfa> {
        let mut sets: Vec<Vec<(u32, u32)>> = Vec::new();
        for p in parts {
            match p {
                Part::Expr(e) => collect_sets(e, &mut sets, 0)?,
                Part::Dfa(d) => sets.extend(d.classes.ranges.iter().cloned()),
            }
        }
        let classes = Classes::of_sets(sets)?;
        let mut nfa = Nfa::default();
        let start = nfa.state()?;
        let mut at = start;
        for p in parts {
            at = match p {
                Part::Expr(e) => nfa.build(e, at, &classes, 0)?,
                Part::Dfa(d) => nfa.embed(d, &d.columns(&classes)?, at)?,
            };
        }
        Some(Self::determinise(&nfa, start, at, classes)?.minimise())
    }

    /// The strings this automaton rejects.
    pub fn complement(&self) -> CharDfa {
        let accepting = self.accepting.iter().map(|a| !a).collect();
        CharDfa { classes: self.classes.clone(), next: self.next.clone(), accepting }
    }

    /// The strings both automata accept.
    pub fn intersect(&self, other: &CharDfa) -> Option<CharDfa> {
        self.product(other, |a, b| a && b)
    }

    /// The strings either automaton accepts.
    pub fn union(&self, other: &CharDfa) -> Option<CharDfa> {
        self.product(other, |a, b| a || b)
    }

    /// The strings this automaton accepts that have at least `min` and at most `max`
    /// characters.
    pub fn with_length(&self, min: u32, max: Option<u32>) -> Option<CharDfa> {
        // Counts run to `cap`; without a maximum they stay there once `min` is reached.
        let cap = max.unwrap_or(min);
        if cap as usize >= MAX_DFA_STATES {
            return None;
        }
        let n_classes = self.classes.len();
        let mut ids: HashMap<(u32, u32), u32> = HashMap::default();
        let mut states: Vec<(u32, u32)> = vec![(0, 0)];
        ids.insert((0, 0), 0);
        let mut next: Vec<Vec<u32>> = Vec::new();
        let mut dead: Option<u32> = None;
        let mut i = 0;
        while i < states.len() {
            let (s, k) = states[i];
            let mut row = Vec::with_capacity(n_classes);
            for class in 0..n_classes {
                // The sink (`u32::MAX` count) stays the sink.
                let to = if k == u32::MAX || (max.is_some() && k == cap) {
                    *dead.get_or_insert_with(|| {
                        states.push((0, u32::MAX));
                        states.len() as u32 - 1
                    })
                } else {
                    let key = (self.next[s as usize][class], (k + 1).min(cap));
                    match ids.get(&key) {
                        Some(&id) => id,
                        None => {
                            states.push(key);
                            let id = states.len() as u32 - 1;
                            ids.insert(key, id);
                            id
                        }
                    }
                };
                row.push(to);
            }
            if states.len() > MAX_DFA_STATES {
                return None;
            }
            next.push(row);
            i += 1;
        }
        let accepting = states.iter().map(|&(s, k)| k != u32::MAX && k >= min && self.accepting[s as usize]).collect();
        Some(CharDfa { classes: self.classes.clone(), next, accepting }.minimise())
    }

    /// Whether the automaton accepts no string at all.
    pub fn is_empty(&self) -> bool {
        !self.live()[0]
    }

    /// One of the shortest accepted strings, each character the plainest of its class
    /// (a letter or digit where the class has one, else printable ASCII); `None` for the
    /// empty language.
    pub fn shortest(&self) -> Option<String> {
        let n = self.next.len();
        // Breadth-first from the start: per state, the state and class it was reached by.
        let mut from: Vec<Option<(u32, usize)>> = vec![None; n];
        let mut seen = vec![false; n];
        seen[0] = true;
        let mut queue = std::collections::VecDeque::from([0u32]);
        let mut end = None;
        while let Some(s) = queue.pop_front() {
            if self.accepting[s as usize] {
                end = Some(s);
                break;
            }
            for (class, &t) in self.next[s as usize].iter().enumerate() {
                if !seen[t as usize] {
                    seen[t as usize] = true;
                    from[t as usize] = Some((s, class));
                    queue.push_back(t);
                }
            }
        }
        let mut at = end?;
        let mut out: Vec<char> = Vec::new();
        while let Some((s, class)) = from[at as usize] {
            out.push(self.classes.plainest(class)?);
            at = s;
        }
        Some(out.into_iter().rev().collect())
    }

    /// Number of states (the sink included): the size of [`CharDfa::to_rules`]'s grammar.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// The accepted strings as one expression, by state elimination; `None` when the
    /// automaton or the expression is over budget ([`CharDfa::to_rules`] always works).
    pub fn to_expr(&self) -> Option<Expr> {
        if self.next.len() > MAX_ELIMINATED_STATES {
            return None;
        }
        let out = eliminate(&self.next, &self.accepting, &self.classes)?;
        (out.size() <= MAX_RESULT_SIZE && depth(&out, 0) <= MAX_RESULT_DEPTH).then_some(out)
    }

    /// The accepted strings as rules of `b`, one per state that can still reach an accepting
    /// one (named after `base`): a state's rule loops over its own characters, then may end
    /// (if accepting) or reads a character and continues with the next state's rule. `edge`
    /// turns one character class (an [`Expr::Chars`]) into what the grammar reads for it: the
    /// class itself, or its JSON escapes inside a string. Returns the start's reference
    /// ([`Expr::Nothing`] for the empty language), or `None`, adding nothing, when the rules
    /// would be larger than `max_size` ([`Expr::size`] summed).
    ///
    /// A state whose strings are one class counted (`K{a,b}` or `K{a,}`, [`CountedTail`]) is
    /// one rule holding that repetition, not a chain of states: a length cut of an
    /// unanchored pattern (`[a-z]` with `maxLength: 255`) ends in 255 states that each read
    /// any character, and as one counted loop the mask stage derives every count from one
    /// classification instead of walking the vocabulary once per position.
    pub fn to_rules(
        &self,
        b: &mut GrammarBuilder,
        base: &str,
        edge: &dyn Fn(&Expr) -> Expr,
        max_size: usize,
    ) -> Option<Expr> {
        let live = self.live();
        if !live[0] {
            return Some(Expr::Nothing);
        }
        // Per live state: what it loops on and its (target, classes) edges, the classes
        // grouped by target in the order the targets first appear (deterministic).
        let edges: Vec<Option<Edges>> = self
            .next
            .iter()
            .enumerate()
            .map(|(s, row)| {
                live[s].then(|| {
                    let mut looped = None;
                    let mut out: Vec<(u32, Vec<usize>)> = Vec::new();
                    for (class, &t) in row.iter().enumerate() {
                        if !live[t as usize] {
                            continue;
                        }
                        if t as usize == s {
                            looped.get_or_insert_with(Vec::new).push(class);
                        } else {
                            match out.iter_mut().find(|(x, _)| *x == t) {
                                Some((_, set)) => set.push(class),
                                None => out.push((t, vec![class])),
                            }
                        }
                    }
                    Edges { looped, out }
                })
            })
            .collect();
        let tails = counted_tails(&edges, &self.accepting);
        // The states that get a rule: the start, and every target of a state whose rule
        // reads on (a counted tail's own chain is its repetition).
        let mut needed = vec![false; self.next.len()];
        needed[0] = true;
        let mut todo = vec![0usize];
        while let Some(s) = todo.pop() {
            if tails[s].is_some() {
                continue;
            }
            for &(t, _) in edges[s].as_ref().map_or(&[][..], |e| &e.out) {
                if !needed[t as usize] {
                    needed[t as usize] = true;
                    todo.push(t as usize);
                }
            }
        }
        let mut reads: HashMap<Vec<usize>, Expr> = HashMap::default();
        let mut read =
            |set: &[usize]| reads.entry(set.to_vec()).or_insert_with(|| edge(&self.classes.chars(set))).clone();
        // State `s`'s rule body, its targets' rules given by `id`.
        let mut body = |s: usize, e: &Edges, id: &dyn Fn(u32) -> Expr| match &tails[s] {
            Some(tail) => Expr::repeat(tail.set.as_deref().map_or(Expr::Empty, &mut read), tail.min, tail.max),
            None => {
                let mut alts = Vec::with_capacity(e.out.len() + 1);
                if self.accepting[s] {
                    alts.push(Expr::Empty);
                }
                alts.extend(e.out.iter().map(|(t, set)| Expr::seq([read(set), id(*t)])));
                Expr::seq([e.looped.as_deref().map_or(Expr::Empty, |l| Expr::star(read(l))), Expr::alt(alts)])
            }
        };
        let rules = || (0..self.next.len()).filter(|&s| needed[s]).filter_map(|s| Some((s, edges[s].as_ref()?)));
        // Sized before any rule is declared, so that a grammar over budget adds nothing.
        let mut size = 0usize;
        for (s, e) in rules() {
            size += body(s, e, &|_| Expr::Empty).size();
            if size > max_size {
                return None;
            }
        }
        let ids: Vec<Option<RuleId>> = needed
            .iter()
            .map(|&n| {
                n.then(|| {
                    let name = b.fresh_name(base);
                    b.declare(&name)
                })
            })
            .collect();
        let id = |t: u32| ids[t as usize].map_or(Expr::Nothing, Expr::Ref);
        for (s, e) in rules() {
            let rule = body(s, e, &id);
            if let Some(rule_id) = ids[s] {
                b.define(rule_id, rule);
            }
        }
        Some(ids[0].map_or(Expr::Nothing, Expr::Ref))
    }

    /// Per state, whether some accepting state is reachable from it.
    fn live(&self) -> Vec<bool> {
        let mut live = self.accepting.clone();
        loop {
            let mut changed = false;
            for s in 0..self.next.len() {
                if !live[s] && self.next[s].iter().any(|&t| live[t as usize]) {
                    live[s] = true;
                    changed = true;
                }
            }
            if !changed {
                return live;
            }
        }
    }

    /// Per class of `finer` (a refinement of this automaton's classes), the class of this
    /// automaton it lies in.
    fn columns(&self, finer: &Classes) -> Option<Vec<usize>> {
        finer.ranges.iter().map(|r| self.classes.class_of(r.first()?.0)).collect()
    }

    /// The product automaton, accepting where `accept` says of the two states.
    fn product(&self, other: &CharDfa, accept: fn(bool, bool) -> bool) -> Option<CharDfa> {
        let sets = self.classes.ranges.iter().chain(&other.classes.ranges).cloned().collect();
        let classes = Classes::of_sets(sets)?;
        let (ca, cb) = (self.columns(&classes)?, other.columns(&classes)?);
        let mut ids: HashMap<(u32, u32), u32> = HashMap::default();
        let mut pairs: Vec<(u32, u32)> = vec![(0, 0)];
        ids.insert((0, 0), 0);
        let mut next: Vec<Vec<u32>> = Vec::new();
        let mut i = 0;
        while i < pairs.len() {
            let (s, t) = pairs[i];
            let mut row = Vec::with_capacity(classes.len());
            for k in 0..classes.len() {
                let key = (self.next[s as usize][ca[k]], other.next[t as usize][cb[k]]);
                let id = match ids.get(&key) {
                    Some(&id) => id,
                    None => {
                        if pairs.len() >= MAX_DFA_STATES {
                            return None;
                        }
                        pairs.push(key);
                        let id = pairs.len() as u32 - 1;
                        ids.insert(key, id);
                        id
                    }
                };
                row.push(id);
            }
            next.push(row);
            i += 1;
        }
        let accepting =
            pairs.iter().map(|&(s, t)| accept(self.accepting[s as usize], other.accepting[t as usize])).collect();
        Some(CharDfa { classes, next, accepting }.minimise())
    }

    /// Subset construction ([`crate::util::subset::determinise`]): a state's row holds,
    /// per class, the state of the moves that read it; accepting where the set holds `end`.
    /// `None` past [`MAX_DFA_STATES`]. No fuel: the budgets on states bound the work.
    fn determinise(nfa: &Nfa, start: u32, end: u32, classes: Classes) -> Option<CharDfa> {
        let n_classes = classes.len();
        let mut next: Vec<Vec<u32>> = Vec::new();
        let mut accepting: Vec<bool> = Vec::new();
        let mut to: Vec<u32> = Vec::new();
        let mut no_fuel = u64::MAX;
        subset::determinise(nfa, start, MAX_DFA_STATES, &mut no_fuel, |set, targets| {
            let mut row = Vec::with_capacity(n_classes);
            for class in 0..n_classes {
                to.clear();
                for &s in set {
                    let moves = nfa.moves.get(s as usize).map_or(&[][..], Vec::as_slice);
                    to.extend(moves.iter().filter(|(read, _)| read.binary_search(&class).is_ok()).map(|&(_, t)| t));
                }
                row.push(targets.intern(&mut to));
            }
            next.push(row);
            accepting.push(set.binary_search(&end).is_ok());
        })
        .ok()?;
        Some(CharDfa { classes, next, accepting })
    }

    /// Merges equivalent states (Moore's partition refinement) and drops unreachable ones.
    fn minimise(self) -> CharDfa {
        let n = self.next.len();
        let mut block: Vec<u32> = self.accepting.iter().map(|&a| a as u32).collect();
        let mut blocks = block.iter().collect::<std::collections::HashSet<_>>().len();
        loop {
            let mut ids: HashMap<(u32, Vec<u32>), u32> = HashMap::default();
            let mut fresh = vec![0u32; n];
            for s in 0..n {
                let key = (block[s], self.next[s].iter().map(|&t| block[t as usize]).collect::<Vec<u32>>());
                let len = ids.len() as u32;
                fresh[s] = *ids.entry(key).or_insert(len);
            }
            let stable = ids.len() == blocks;
            blocks = ids.len();
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
        CharDfa { classes: self.classes, next, accepting }
    }
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

/// A live state's edges for [`CharDfa::to_rules`]: the classes it loops on, and per other
/// live target the classes that lead there.
struct Edges {
    looped: Option<Vec<usize>>,
    out: Vec<(u32, Vec<usize>)>,
}

/// The strings from a state when they are one class counted: `set{min,max}` (`set` `None`
/// for the empty string alone).
struct CountedTail {
    set: Option<Vec<usize>>,
    min: u32,
    max: Option<u32>,
}

/// Per state, its [`CountedTail`] if it has one. A state has one when it accepts and reads
/// nothing but its loop (`K*`), or nothing at all (the empty string); or when it reads one
/// class `K`, to one state whose tail counts `K` too (or is the empty string): `K` then
/// that tail, which is one counted range unless the state accepts and the tail needs a
/// character (`ε | K{2,5}` is no range).
fn counted_tails(edges: &[Option<Edges>], accepting: &[bool]) -> Vec<Option<CountedTail>> {
    /// Not looked at yet, being followed down a chain, or decided.
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        No,
        OnPath,
        Done,
    }
    let n = edges.len();
    let mut tails: Vec<Option<CountedTail>> = (0..n).map(|_| None).collect();
    let mut seen = vec![Seen::No; n];
    for first in 0..n {
        // Follow the chain of one-edge states from `first` to a state decided already (or
        // one that is no link), then decide the states on the way back.
        let mut path: Vec<usize> = Vec::new();
        let mut s = first;
        while seen[s] == Seen::No {
            seen[s] = Seen::OnPath;
            path.push(s);
            match &edges[s] {
                Some(Edges { looped: None, out }) if out.len() == 1 => s = out[0].0 as usize,
                _ => break,
            }
        }
        while let Some(s) = path.pop() {
            seen[s] = Seen::Done;
            let Some(e) = &edges[s] else { continue };
            tails[s] = match (&e.looped, e.out.as_slice()) {
                (looped, []) if accepting[s] => Some(CountedTail {
                    set: looped.clone(),
                    min: 0,
                    max: if looped.is_some() { None } else { Some(0) },
                }),
                (None, [(t, set)]) => tails[*t as usize].as_ref().and_then(|tail| {
                    if tail.set.as_ref().is_some_and(|k| k != set) || (accepting[s] && tail.min > 0) {
                        return None;
                    }
                    let min = if accepting[s] { 0 } else { tail.min + 1 };
                    Some(CountedTail { set: Some(set.clone()), min, max: tail.max.map(|m| m + 1) })
                }),
                _ => None,
            };
        }
    }
    tails
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::automaton::Pda;
    use crate::grammar::regex::{to_expr, RegexOptions};
    use crate::Limits;

    fn dfa(pattern: &str) -> CharDfa {
        CharDfa::of(&to_expr(pattern, &RegexOptions::search()).expect("pattern")).expect("small")
    }

    /// Both ways back to the grammar, as automata.
    fn pdas(d: &CharDfa) -> Vec<Pda> {
        let mut out = Vec::new();
        let mut b = GrammarBuilder::new();
        let body = d.to_rules(&mut b, "s", &|e| e.clone(), usize::MAX).expect("no budget");
        let root = b.add("root", body);
        out.push(Pda::build(&b.build(root).expect("grammar"), &Limits::default()).expect("builds"));
        if let Some(e) = d.to_expr() {
            let mut b = GrammarBuilder::new();
            let root = b.add("root", e);
            out.push(Pda::build(&b.build(root).expect("grammar"), &Limits::default()).expect("builds"));
        }
        out
    }

    /// Every string of `alphabet` up to length `n`.
    pub(crate) fn strings(alphabet: &[char], n: usize) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut layer = vec![String::new()];
        for _ in 0..n {
            layer = layer.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            out.extend(layer.iter().cloned());
        }
        out
    }

    #[test]
    fn operations_agree_with_the_regexes() {
        let alphabet = ['a', 'b', '1', 'é', '-'];
        let (p, q) = ("^[a-z]+1?$", "b");
        let (dp, dq) = (dfa(p), dfa(q));
        type Case = (&'static str, CharDfa, Box<dyn Fn(&str) -> bool>);
        let cases: Vec<Case> = vec![
            ("and", dp.intersect(&dq).expect("small"), Box::new(move |s| found(p, s) && found(q, s))),
            ("or", dp.union(&dq).expect("small"), Box::new(move |s| found(p, s) || found(q, s))),
            ("not", dp.complement(), Box::new(move |s| !found(p, s))),
            (
                "length",
                dq.with_length(2, Some(3)).expect("small"),
                Box::new(move |s| found(q, s) && (2..=3).contains(&s.chars().count())),
            ),
            (
                "at least",
                dq.with_length(2, None).expect("small"),
                Box::new(move |s| found(q, s) && s.chars().count() >= 2),
            ),
            (
                "then",
                CharDfa::seq(&[Part::Expr(&Expr::lit("-")), Part::Dfa(&dp)]).expect("small"),
                Box::new(move |s| s.strip_prefix('-').is_some_and(|r| found(p, r))),
            ),
            // Counted tails (`to_rules`): after the match, any character up to the length; an
            // accepting state whose tail needs two characters (`ε | aa` is no range).
            (
                "tail",
                dfa("^1").with_length(2, Some(4)).expect("small"),
                Box::new(|s| s.starts_with('1') && (2..=4).contains(&s.chars().count())),
            ),
            ("gap", dfa("^(aa)?$"), Box::new(|s| s.is_empty() || s == "aa")),
            (
                "open tail",
                dfa("1").with_length(3, None).expect("small"),
                Box::new(|s| s.contains('1') && s.chars().count() >= 3),
            ),
        ];
        for (name, d, truth) in cases {
            for pda in pdas(&d) {
                for s in strings(&alphabet, 4) {
                    assert_eq!(pda.matches(s.as_bytes()), truth(&s), "{name} on {s:?}");
                }
            }
        }
    }

    /// Whether `pattern` matches somewhere in `s` (regex-automata, the reference).
    fn found(pattern: &str, s: &str) -> bool {
        regex_automata::meta::Regex::new(pattern).expect("pattern").is_match(s)
    }

    #[test]
    fn big_automata_become_rules() {
        // Eight to sixty-four characters with a lower-case letter, a digit and a capital.
        let d = dfa("[a-z]")
            .intersect(&dfa("[0-9]"))
            .and_then(|d| d.intersect(&dfa("[A-Z]")))
            .and_then(|d| d.with_length(8, Some(64)))
            .expect("small");
        assert!(d.len() > MAX_ELIMINATED_STATES && d.to_expr().is_none(), "{} states", d.len());
        let pda = pdas(&d).remove(0);
        assert!(pda.matches(b"abcdefG1") && pda.matches("é1Aaé1Aé1Aé1Aé1Aé1Aéé".as_bytes()));
        assert!(!pda.matches(b"abcdefgh") && !pda.matches(b"abcdG1") && !pda.matches(b"ABCDEFG1"));
        assert!(pda.matches(&[b"aB3".repeat(21), b"x".to_vec()].concat()));
        assert!(!pda.matches(&[b"aB3".repeat(21), b"xy".to_vec()].concat()));
        assert!(dfa("^a$").with_length(2, None).expect("small").is_empty());
        // A searched pattern cut to a length: after the match, one counted loop per state
        // it can be reached from, not a chain of states.
        let cut = dfa("[a-z]").with_length(1, Some(100)).expect("small");
        let mut b = GrammarBuilder::new();
        let body = cut.to_rules(&mut b, "s", &|e| e.clone(), usize::MAX).expect("no budget");
        let root = b.add("root", body);
        let grammar = b.build(root).expect("grammar");
        let loops = grammar.rules().iter().filter(|r| matches!(r.expr, Expr::Repeat { max: Some(_), .. })).count();
        assert!(loops >= 99, "{loops} counted loops in {} rules", grammar.rules().len());
        assert!(!dfa("^a$").is_empty());
    }
}

//! Building a [`Pda`] from a [`Grammar`]: lift large counted repetitions into loop rules,
//! determinise each rule (Thompson NFA → subset construction), trim, check, fingerprint.

use super::{ByteEdge, CallEdge, Error, Loop, Node, Pda, RuleInfo, Span, UNBOUNDED};
use crate::grammar::{Expr, Grammar};
use crate::util::cache::GenCache;
use crate::util::hash128;
use crate::Limits;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

/// Deepest expression nesting accepted (guards the recursive construction), whatever
/// [`Limits::max_nesting_depth`] says.
const MAX_EXPR_DEPTH: usize = 500;

/// Most NFA states a small counted repetition may unroll to (its body's unrolled size times
/// its count); past it the repetition keeps a run-time counter, as large counts do.
const UNROLL_COST: u64 = 4096;

/// A rule after lifting: either a regular body (borrowed from the grammar when nothing in it
/// was lifted, which is almost always) or a counted loop over another rule.
enum Lifted<'g> {
    Body(Cow<'g, Expr>),
    Loop { body: u32, min: u32, max: u32 },
}

struct Lifter<'g, 'l> {
    rules: Vec<(String, Lifted<'g>)>,
    limits: &'l Limits,
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
    fn lift(&mut self, e: &Expr, owner: &str, depth: usize) -> Result<(Option<Expr>, u64), Error> {
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

/// A Thompson NFA for one rule. Edges are listed with their source state while the NFA
/// is built ([`Nfa::add`]), then grouped by state in one pass ([`Nfa::seal`]): no list per
/// state, so building one allocates a few buffers, not three per state.
#[derive(Default)]
struct Nfa {
    states: u32,
    eps: Grouped<u32>,
    bytes: Grouped<(u8, u8, u32)>,
    calls: Grouped<(u32, u32)>,
}

/// Items listed by key as `(key, item)`, then grouped by key in one counting sort, those of
/// `k` being `items[offsets[k]..offsets[k + 1]]` in the order they were listed: an NFA's
/// edges by state, a rule's predecessor lists by node ([`CoReach`]), the callers of each
/// rule. The buffers serve list after list ([`Grouped::clear`]).
struct Grouped<T> {
    listed: Vec<(u32, T)>,
    offsets: Vec<u32>,
    items: Vec<T>,
    fill: Vec<u32>,
}

impl<T> Default for Grouped<T> {
    fn default() -> Self {
        Grouped { listed: Vec::new(), offsets: Vec::new(), items: Vec::new(), fill: Vec::new() }
    }
}

impl<T: Copy> Grouped<T> {
    fn push(&mut self, key: u32, item: T) {
        self.listed.push((key, item));
    }

    /// Forgets what was listed, keeping the buffers.
    fn clear(&mut self) {
        self.listed.clear();
    }

    /// Groups what was listed under the keys `0..keys` (every key listed is below it).
    fn seal(&mut self, keys: u32) {
        let n = keys as usize;
        self.offsets.clear();
        self.offsets.resize(n + 1, 0);
        for &(s, _) in &self.listed {
            self.offsets[s as usize + 1] += 1;
        }
        for i in 0..n {
            self.offsets[i + 1] += self.offsets[i];
        }
        self.fill.clear();
        self.fill.extend_from_slice(&self.offsets[..n]);
        let fill = &mut self.fill;
        self.items.clear();
        self.items.reserve_exact(self.listed.len());
        // Every slot is written once below; the first edge stands in until then.
        if let Some(&(_, first)) = self.listed.first() {
            self.items.resize(self.listed.len(), first);
        }
        for &(s, e) in &self.listed {
            let slot = &mut fill[s as usize];
            self.items[*slot as usize] = e;
            *slot += 1;
        }
    }

    /// The items of key `s` (after [`Grouped::seal`]).
    #[inline]
    fn of(&self, s: u32) -> &[T] {
        let (Some(&a), Some(&b)) = (self.offsets.get(s as usize), self.offsets.get(s as usize + 1)) else {
            return &[];
        };
        self.items.get(a as usize..b as usize).unwrap_or(&[])
    }
}

impl Nfa {
    fn state(&mut self) -> u32 {
        self.states += 1;
        self.states - 1
    }

    fn len(&self) -> usize {
        self.states as usize
    }

    /// Groups the edges by state; [`Nfa::closure`] and the subset construction read them
    /// only after this.
    fn seal(&mut self) {
        self.eps.seal(self.states);
        self.bytes.seal(self.states);
        self.calls.seal(self.states);
    }

    /// Adds a fragment matching `e` from `from` to `to`.
    fn add(&mut self, e: &Expr, from: u32, to: u32, depth: usize, budget: usize) -> Result<(), ()> {
        if depth > MAX_EXPR_DEPTH || self.len() > budget {
            return Err(());
        }
        match e {
            Expr::Empty => self.eps.push(from, to),
            Expr::Nothing => {}
            Expr::Literal(bs) => {
                let mut cur = from;
                for (i, &b) in bs.iter().enumerate() {
                    let next = if i + 1 == bs.len() { to } else { self.state() };
                    self.bytes.push(cur, (b, b, next));
                    cur = next;
                }
                if bs.is_empty() {
                    self.eps.push(from, to);
                }
            }
            Expr::Bytes(ranges) => {
                for &(lo, hi) in ranges {
                    self.bytes.push(from, (lo, hi, to));
                }
            }
            Expr::Chars(ranges) => {
                for &(lo, hi) in ranges {
                    for seq in regex_syntax::utf8::Utf8Sequences::new(lo, hi) {
                        let rs = seq.as_slice();
                        let mut cur = from;
                        for (i, r) in rs.iter().enumerate() {
                            let next = if i + 1 == rs.len() { to } else { self.state() };
                            self.bytes.push(cur, (r.start, r.end, next));
                            cur = next;
                        }
                    }
                }
            }
            Expr::Seq(v) => {
                let mut cur = from;
                for (i, x) in v.iter().enumerate() {
                    let next = if i + 1 == v.len() { to } else { self.state() };
                    self.add(x, cur, next, depth + 1, budget)?;
                    cur = next;
                }
                if v.is_empty() {
                    self.eps.push(from, to);
                }
            }
            Expr::Alt(v) => {
                for x in v {
                    self.add(x, from, to, depth + 1, budget)?;
                }
            }
            Expr::Repeat { expr, min, max } => {
                let mut cur = from;
                for _ in 0..*min {
                    let next = self.state();
                    self.add(expr, cur, next, depth + 1, budget)?;
                    cur = next;
                }
                match max {
                    None => {
                        let a = self.state();
                        let b = self.state();
                        self.eps.push(cur, a);
                        self.add(expr, a, b, depth + 1, budget)?;
                        self.eps.push(b, a);
                        self.eps.push(a, to);
                    }
                    Some(m) => {
                        for _ in *min..*m {
                            let next = self.state();
                            self.eps.push(cur, to);
                            self.add(expr, cur, next, depth + 1, budget)?;
                            cur = next;
                        }
                        self.eps.push(cur, to);
                    }
                }
            }
            Expr::Ref(r) => self.calls.push(from, (r.0, to)),
        }
        Ok(())
    }

    /// Extends `set` with every state reachable by epsilon moves, sorted and deduplicated.
    /// `scratch` is reused across calls so determinisation does not allocate per set.
    fn closure(&self, set: &mut Vec<u32>, scratch: &mut ClosureScratch) {
        let ClosureScratch { stamp, generation, todo } = scratch;
        if stamp.len() < self.len() {
            stamp.resize(self.len(), 0);
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
            for &t in self.eps.of(s) {
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
}

/// Reusable buffers for [`Nfa::closure`]: a visited stamp per NFA state and a work list.
#[derive(Default)]
struct ClosureScratch {
    stamp: Vec<u32>,
    generation: u32,
    todo: Vec<u32>,
}

/// A determinised rule: nodes with local targets, their edges in two flat lists as in a
/// [`Pda`].
#[derive(Default)]
struct Dfa {
    /// Per node: final, byte edges, call edges.
    nodes: Vec<(bool, Span, Span)>,
    bytes: Vec<ByteEdge>,
    calls: Vec<CallEdge>,
}

/// Which budget a determinisation ran out of.
#[derive(Clone, Copy, Debug)]
enum Exceeded {
    /// [`Limits::max_automaton_states`].
    States,
    /// [`Limits::compile_fuel`].
    Fuel,
}

/// Subset construction. Spends fuel for every NFA state and edge of every subset visited,
/// so the work is bounded even where the number of subsets is not the problem.
fn determinise(nfa: &Nfa, start: u32, accept: u32, budget: usize, fuel: &mut u64) -> Result<Dfa, Exceeded> {
    let mut sets = Subsets::default();
    let mut out = Dfa::default();
    let mut scratch = ClosureScratch::default();
    let mut first = vec![start];
    nfa.closure(&mut first, &mut scratch);
    sets.intern(&first);
    // Buffers reused for every DFA state.
    let mut edges: Vec<(u8, u8, u32)> = Vec::new();
    let mut bounds: Vec<u16> = Vec::new();
    let mut target: Vec<u32> = Vec::new();
    let mut cover: Vec<(u16, u32)> = Vec::new();
    let mut by_callee: Vec<(u32, u32)> = Vec::new();
    let mut set: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < sets.len() {
        if sets.len() > budget {
            return Err(Exceeded::States);
        }
        set.clear();
        set.extend_from_slice(sets.get(i));
        let work = set.len() as u64 + 1;
        if *fuel < work {
            return Err(Exceeded::Fuel);
        }
        *fuel -= work;
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
            nfa.closure(&mut target, &mut scratch);
            let t = sets.intern(&target);
            let own = out.bytes.len() > bytes_start;
            match out.bytes.last_mut() {
                Some(last) if own && last.target == t && last.hi as u16 + 1 == lo => last.hi = hi as u8,
                _ => out.bytes.push(ByteEdge { lo: lo as u8, hi: hi as u8, target: t }),
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
            nfa.closure(&mut target, &mut scratch);
            let t = sets.intern(&target);
            out.calls.push(CallEdge { callee, ret: t });
        }
        let span = |start: usize, end: usize| Span { start: start as u32, len: (end - start) as u32 };
        out.nodes.push((is_final, span(bytes_start, out.bytes.len()), span(calls_start, out.calls.len())));
        i += 1;
    }
    Ok(out)
}

impl Dfa {
    /// Node `i`'s byte edges and call edges.
    fn edges(&self, i: usize) -> (&[ByteEdge], &[CallEdge]) {
        let Some(&(_, bytes, calls)) = self.nodes.get(i) else { return (&[], &[]) };
        (self.bytes.get(bytes.range()).unwrap_or(&[]), self.calls.get(calls.range()).unwrap_or(&[]))
    }

    /// A structural hash: every node's encoding ([`super::keys::encode_parts`]), with local
    /// targets and callees by their local number.
    fn shape(&self) -> u128 {
        let mut buf: Vec<u64> = Vec::with_capacity(self.nodes.len() * 4);
        for (i, &(is_final, _, _)) in self.nodes.iter().enumerate() {
            let (bytes, calls) = self.edges(i);
            super::keys::encode_parts(&mut buf, is_final, bytes, calls, None, u64::from, u128::from);
        }
        hash128(&buf)
    }

    /// Whether every node reaches a final node along byte edges and call edges (to their
    /// return nodes).
    fn all_live(&self) -> bool {
        let edges = (0..self.nodes.len()).flat_map(|i| {
            let (bytes, calls) = self.edges(i);
            bytes.iter().map(|e| e.target).chain(calls.iter().map(|c| c.ret)).map(move |t| (i as u32, t))
        });
        CoReach::default().run(self.nodes.len(), edges, |i| self.nodes[i].0).iter().all(|&l| l)
    }
}

/// Which nodes of an automaton reach a final node: a walk back from the final nodes over
/// predecessor lists, linear in the automaton. The buffers serve automaton after automaton.
#[derive(Default)]
struct CoReach {
    preds: Grouped<u32>,
    live: Vec<bool>,
    todo: Vec<u32>,
}

impl CoReach {
    /// Per node of `0..len`, whether it reaches a final node along `edges` (`(from, to)`
    /// pairs, both below `len`).
    fn run(
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

/// A rule body in canonical form: its expression serialised with rule references numbered
/// by first appearance, so bodies that differ only in which rules they call (the JSON string
/// of every schema, most enums, many objects) have equal keys and share one determinisation
/// through a [`RuleCache`]. Buffers are reused from rule to rule.
#[derive(Default)]
struct CanonicalRule {
    key: Vec<u8>,
    /// The rules referenced, in order of first appearance: local callee `i` is `refs[i]`.
    refs: Vec<u32>,
    local: HashMap<u32, u32>,
}

/// A determinised rule kept in a [`RuleCache`]; its call edges name local callees.
struct CachedRule {
    nfa_states: usize,
    dfa: Dfa,
    /// Every node can reach a final node along the DFA's own edges, so trimming leaves
    /// the rule as it is unless a call of it is removed (see [`Pda::trim`]).
    live: bool,
    /// A structural hash of the DFA, callees by local number: with its callees'
    /// fingerprints, the fingerprint of a rule that kept this automaton as built
    /// ([`Shapes`]).
    shape: u128,
}

/// Determinised rule bodies by canonical key, shared by the grammars built with one cache,
/// and the salts of their fingerprints. Owned by the caller: a token index holds one for
/// every constraint compiled against it ([`Pda::build_with`]); [`Pda::build`] uses a fresh
/// one. Bounded in bytes like the mask cache (a generational `GenCache`): new rules go to
/// the young generation; when it holds half of the bound it becomes the old one and the
/// previous old one is dropped. A hit in the old one is copied back to the young one, so
/// rules still in use survive a rotation.
///
/// Salts: rules in or above a call cycle cannot be fingerprinted by structure alone, so
/// each grammar built with this cache draws a new salt for them, and two grammars never
/// share such a fingerprint. A cache keyed by fingerprints (the mask cache) must hold only
/// automata whose salts come from one `RuleCache`, which is why binding an automaton built
/// elsewhere to a token index salts it again from the index's cache.
pub struct RuleCache {
    rules: GenCache<Box<[u8]>, std::sync::Arc<CachedRule>>,
    /// The next salt (never 0: 0 marks the rules fingerprinted by structure).
    salts: AtomicU64,
}

impl RuleCache {
    /// An empty cache of about `max_bytes` of determinised rules.
    pub fn new(max_bytes: usize) -> RuleCache {
        // One shard: determinised rules are large and unevenly sized (a 64-way split made
        // shards holding a big rule rotate all the time, and JSONSchemaBench's compile
        // slower), and they are looked up while compiling, not while filling masks.
        RuleCache { rules: GenCache::new(max_bytes, 1), salts: AtomicU64::new(1) }
    }

    /// A salt no other grammar built with (or salted from) this cache has.
    pub(crate) fn next_salt(&self) -> u64 {
        self.salts.fetch_add(1, Ordering::Relaxed)
    }
}

impl Default for RuleCache {
    /// An empty cache of [`RULE_CACHE_BYTES`].
    fn default() -> Self {
        RuleCache::new(RULE_CACHE_BYTES)
    }
}

/// The default bound of a [`RuleCache`]'s heap bytes. Determinising every rule of all of
/// JSONSchemaBench's 8.5k schemas adds up to about 340 MB; a quarter of it keeps what
/// schemas share.
pub const RULE_CACHE_BYTES: usize = 96 << 20;

impl CanonicalRule {
    /// The automaton of `expr` with local callees (see [`CanonicalRule::refs`]), from the
    /// cache or determinised now; `Err` if it needs more than `budget` states.
    fn determinised(
        &mut self,
        expr: &Expr,
        budget: usize,
        fuel: &mut u64,
        cache: &RuleCache,
    ) -> Result<std::sync::Arc<CachedRule>, Exceeded> {
        self.key.clear();
        self.refs.clear();
        self.local.clear();
        self.encode(expr);
        if let Some(rule) = cache.rules.get(self.key.as_slice()) {
            // A fresh build fails exactly when the automaton exceeds the budget. The NFA guard
            // is checked while the NFA grows, so when this NFA came near it, build afresh:
            // either way the outcome is the one a fresh build gives.
            if rule.dfa.nodes.len() > budget {
                return Err(Exceeded::States);
            }
            if rule.nfa_states <= budget.saturating_mul(4) / 2 {
                return Ok(rule);
            }
        }
        let mut nfa = Nfa::default();
        let s = nfa.state();
        let a = nfa.state();
        let nfa_budget = budget.saturating_mul(4).min(usize::try_from(*fuel).unwrap_or(usize::MAX));
        nfa.add(expr, s, a, 0, nfa_budget).map_err(|()| {
            if nfa.len() > budget.saturating_mul(4) {
                Exceeded::States
            } else {
                Exceeded::Fuel
            }
        })?;
        *fuel = fuel.saturating_sub(nfa.len() as u64);
        nfa.seal();
        let mut dfa = determinise(&nfa, s, a, budget, fuel)?;
        for c in dfa.calls.iter_mut() {
            let local = self.local.get(&c.callee).copied();
            // Every callee the DFA names was numbered while encoding the key; u32::MAX
            // (no rule) would make the call edge dead: fewer strings, never more.
            debug_assert!(local.is_some(), "call edge to callee {} the canonical key did not number", c.callee);
            c.callee = local.unwrap_or(u32::MAX);
        }
        let bytes = self.key.len()
            + std::mem::size_of::<CachedRule>()
            + dfa.nodes.len() * std::mem::size_of::<(bool, Span, Span)>()
            + dfa.bytes.len() * std::mem::size_of::<ByteEdge>()
            + dfa.calls.len() * std::mem::size_of::<CallEdge>();
        let live = dfa.all_live();
        let shape = dfa.shape();
        let rule = std::sync::Arc::new(CachedRule { nfa_states: nfa.len(), dfa, live, shape });
        cache.rules.insert(self.key.as_slice().into(), rule.clone(), bytes);
        Ok(rule)
    }

    /// Appends the canonical serialisation of `e` to the key.
    fn encode(&mut self, e: &Expr) {
        let key = &mut self.key;
        let len = |key: &mut Vec<u8>, n: usize| key.extend_from_slice(&(n as u32).to_le_bytes());
        match e {
            Expr::Empty => key.push(0),
            Expr::Nothing => key.push(1),
            Expr::Literal(b) => {
                key.push(2);
                len(key, b.len());
                key.extend_from_slice(b);
            }
            Expr::Bytes(r) => {
                key.push(3);
                len(key, r.len());
                key.extend(r.iter().flat_map(|&(lo, hi)| [lo, hi]));
            }
            Expr::Chars(r) => {
                key.push(4);
                len(key, r.len());
                for &(lo, hi) in r {
                    key.extend_from_slice(&(lo as u32).to_le_bytes());
                    key.extend_from_slice(&(hi as u32).to_le_bytes());
                }
            }
            Expr::Seq(v) | Expr::Alt(v) => {
                key.push(if matches!(e, Expr::Seq(_)) { 5 } else { 6 });
                len(key, v.len());
                for x in v {
                    self.encode(x);
                }
            }
            Expr::Repeat { expr, min, max } => {
                key.push(7);
                len(key, *min as usize);
                match max {
                    Some(m) => {
                        key.push(1);
                        len(key, *m as usize);
                    }
                    None => key.push(0),
                }
                self.encode(expr);
            }
            Expr::Ref(r) => {
                let next = self.refs.len() as u32;
                let local = *self.local.entry(r.0).or_insert(next);
                if local == next {
                    self.refs.push(r.0);
                }
                key.push(8);
                len(key, local as usize);
            }
        }
    }
}

pub(super) fn build(grammar: &Grammar, limits: &Limits, cache: &RuleCache) -> Result<Pda, Error> {
    let start_name = grammar.rule(grammar.start()).name.clone();
    if grammar.size() > limits.max_grammar_size {
        return Err(Error::Budget { limit: crate::limits::LimitExceeded::GrammarSize, rule: start_name });
    }
    // 1. Lift large counted repetitions into loop rules.
    let mut lifter = Lifter { rules: Vec::new(), limits };
    for r in grammar.rules() {
        lifter.rules.push((r.name.clone(), Lifted::Body(Cow::Borrowed(&r.expr))));
    }
    for (i, r) in grammar.rules().iter().enumerate() {
        let stats = grammar.stats(crate::grammar::RuleId(i as u32));
        if stats.depth as usize > MAX_EXPR_DEPTH.min(limits.max_nesting_depth) {
            return Err(Error::Budget { limit: crate::limits::LimitExceeded::NestingDepth, rule: r.name.clone() });
        }
        if stats.max_alts as usize > limits.max_alternatives {
            return Err(Error::Budget { limit: crate::limits::LimitExceeded::Alternatives, rule: r.name.clone() });
        }
        if stats.max_count < 2 {
            continue;
        }
        if let (Some(e), _) = lifter.lift(&r.expr, &r.name, 0)? {
            lifter.rules[i].1 = Lifted::Body(Cow::Owned(e));
        }
    }
    // Lifted item rules may themselves contain large repeats (already lifted: `lift` recursed
    // into the inner expression first), so nothing more to do.

    // 2. Determinise each rule (or reuse an equal rule's automaton).
    let mut canonical = CanonicalRule::default();
    let mut fuel = limits.compile_fuel;
    let mut nodes: Vec<Node> = Vec::new();
    let mut edges: Vec<ByteEdge> = Vec::new();
    let mut call_edges: Vec<CallEdge> = Vec::new();
    let mut rules: Vec<RuleInfo> = Vec::with_capacity(lifter.rules.len());
    // Per rule: its automaton is known to need no trimming (see `CachedRule::live`).
    let mut live: Vec<bool> = Vec::with_capacity(lifter.rules.len());
    let mut shapes = Shapes { of: Vec::with_capacity(lifter.rules.len()), refs: Vec::new() };
    for (ri, (name, lifted)) in lifter.rules.iter().enumerate() {
        let first = nodes.len() as u32;
        let budget = limits.max_automaton_states.saturating_sub(nodes.len());
        match lifted {
            Lifted::Loop { body, min, max } => {
                live.push(false);
                shapes.of.push(None);
                nodes.push(Node {
                    rule: ri as u32,
                    is_final: false,
                    repeat: Some(Loop { body: *body, min: *min, max: *max }),
                    ..Node::default()
                })
            }
            Lifted::Body(expr) => {
                let dfa = canonical.determinised(expr, budget, &mut fuel, cache).map_err(|e| match e {
                    Exceeded::States => Error::TooManyStates { rule: name.clone(), limit: limits.max_automaton_states },
                    Exceeded::Fuel => {
                        Error::Budget { limit: crate::limits::LimitExceeded::CompileFuel, rule: name.clone() }
                    }
                })?;
                live.push(dfa.live);
                // Its shape stands for it while every callee is one of the rules it names.
                let named = dfa.dfa.calls.iter().all(|c| (c.callee as usize) < canonical.refs.len());
                shapes.of.push(named.then(|| {
                    let at = shapes.refs.len() as u32;
                    shapes.refs.extend_from_slice(&canonical.refs);
                    (dfa.shape, Span { start: at, len: canonical.refs.len() as u32 })
                }));
                // The rule's byte edges in one pass, its nodes' spans moved by as much.
                let dfa = &dfa.dfa;
                let edges_at = edges.len() as u32;
                edges.extend(dfa.bytes.iter().map(|e| ByteEdge { target: e.target + first, ..*e }));
                nodes.reserve(dfa.nodes.len());
                for &(is_final, bytes, calls) in dfa.nodes.iter() {
                    let calls_at = call_edges.len();
                    call_edges.extend(dfa.calls.get(calls.range()).unwrap_or(&[]).iter().filter_map(|c| {
                        Some(CallEdge { callee: *canonical.refs.get(c.callee as usize)?, ret: c.ret + first })
                    }));
                    nodes.push(Node {
                        rule: ri as u32,
                        is_final,
                        bytes: Span { start: bytes.start + edges_at, len: bytes.len },
                        calls: Span { start: calls_at as u32, len: (call_edges.len() - calls_at) as u32 },
                        repeat: None,
                        dense: None,
                    });
                }
            }
        }
        if nodes.len() > limits.max_automaton_states {
            return Err(Error::TooManyStates { rule: name.clone(), limit: limits.max_automaton_states });
        }
        rules.push(RuleInfo { name: name.clone(), start: first, first_node: first, fingerprint: 0 });
    }
    let mut pda = Pda { nodes, edges, call_edges, rules, start_rule: grammar.start().0, excluded: Default::default() };
    let nullable = pda.trim(&mut live)?;
    pda.check_left_recursion(&nullable)?;
    // A rule trimming changed is hashed from its nodes.
    for (shape, kept) in shapes.of.iter_mut().zip(&live) {
        if !kept {
            *shape = None;
        }
    }
    pda.fingerprint_with(cache.next_salt(), &shapes);
    pda.add_dense_tables();
    pda.excluded = super::ExcludedWords::locate(&pda, grammar.exclusions());
    Ok(pda)
}

impl Pda {
    fn rule_nodes(&self, r: usize) -> std::ops::Range<usize> {
        let start = self.rules[r].first_node as usize;
        let end = self.rules.get(r + 1).map(|x| x.first_node as usize).unwrap_or(self.nodes.len());
        start..end
    }

    /// Fixpoint over rules: `ok(rule)` given which callees count as usable; `via_bytes`
    /// says whether byte edges count (productive) or not (nullable). Runs in rounds: a rule
    /// is checked again only when one of its callees became `ok`.
    fn rule_fixpoint(&self, via_bytes: bool, callers: &Grouped<u32>) -> Vec<bool> {
        let n = self.rules.len();
        let mut ok = vec![false; n];
        // Rounds over the rules still in question, from the last rule to the first (rules
        // are usually defined after the rules they call); a rule is in the next round only if
        // a callee became `ok` after it was checked.
        let mut queued = vec![true; n];
        let mut round: Vec<u32> = (0..n as u32).collect();
        let mut next: Vec<u32> = Vec::new();
        let mut seen = vec![0u32; self.nodes.len()];
        let mut generation = 0u32;
        let mut todo: Vec<usize> = Vec::new();
        while !round.is_empty() {
            round.sort_unstable();
            for r in round.drain(..).rev() {
                let r = r as usize;
                queued[r] = false;
                if ok[r] {
                    continue;
                }
                let start = self.rules[r].start as usize;
                let reach = match self.nodes[start].repeat {
                    Some(l) => l.min == 0 || ok[l.body as usize],
                    None => {
                        generation += 1;
                        todo.clear();
                        todo.push(start);
                        seen[start] = generation;
                        let mut found = false;
                        while let Some(i) = todo.pop() {
                            let node = &self.nodes[i];
                            if node.is_final {
                                found = true;
                                break;
                            }
                            let nexts = self
                                .calls(node)
                                .iter()
                                .filter(|c| ok[c.callee as usize])
                                .map(|c| c.ret)
                                .chain(self.bytes(node).iter().filter(|_| via_bytes).map(|e| e.target));
                            for t in nexts {
                                if seen[t as usize] != generation {
                                    seen[t as usize] = generation;
                                    todo.push(t as usize);
                                }
                            }
                        }
                        found
                    }
                };
                if reach {
                    ok[r] = true;
                    for &caller in callers.of(r as u32) {
                        if !ok[caller as usize] && !queued[caller as usize] {
                            queued[caller as usize] = true;
                            next.push(caller);
                        }
                    }
                }
            }
            std::mem::swap(&mut round, &mut next);
        }
        ok
    }

    /// For each rule, the rules that call it (or loop over it). A caller may be listed more
    /// than once, or after trimming removed its call: [`Pda::rule_fixpoint`] only uses it to
    /// know what to check again.
    fn callers(&self) -> Grouped<u32> {
        let mut callers = Grouped::default();
        for node in &self.nodes {
            for c in self.calls(node).iter().map(|c| c.callee).chain(node.repeat.map(|l| l.body)) {
                callers.push(c, node.rule);
            }
        }
        callers.seal(self.rules.len() as u32);
        callers
    }

    /// Removes the calls to rules that are not `productive` (marking their rules as no
    /// longer known live) and stops loops over them.
    fn drop_unproductive(&mut self, productive: &[bool], live_rules: &mut [bool]) {
        for n in &mut self.nodes {
            let kept = retain(&mut self.call_edges, n.calls, |c| productive[c.callee as usize]);
            if kept != n.calls {
                // Fewer ways on: its nodes' liveness must be computed again.
                if let Some(l) = live_rules.get_mut(n.rule as usize) {
                    *l = false;
                }
                n.calls = kept;
            }
            if let Some(l) = &mut n.repeat {
                if !productive[l.body as usize] {
                    l.max = 0;
                }
            }
        }
    }

    /// Removes calls to rules that match nothing and edges into nodes that cannot complete
    /// their rule, so every live configuration can always be completed.
    /// Returns which rules are nullable (match the empty string), as trimmed.
    /// `live[r]`: rule `r`'s automaton, as built, has every node reach a final node; on
    /// return, also that trimming left it as it was.
    fn trim(&mut self, live_rules: &mut [bool]) -> Result<Vec<bool>, Error> {
        let callers = self.callers();
        let productive = self.rule_fixpoint(true, &callers);
        if !productive[self.start_rule as usize] {
            return Err(Error::Empty(self.rules[self.start_rule as usize].name.clone()));
        }
        // Usually every rule is productive, and there is nothing to take out.
        if productive.iter().any(|&p| !p) {
            self.drop_unproductive(&productive, live_rules);
        }
        // Co-reachability within each normal rule (the buffers serve every rule).
        let mut co_reach = CoReach::default();
        for (r, &known_live) in live_rules.iter().enumerate() {
            let range = self.rule_nodes(r);
            if self.nodes[range.start].repeat.is_some() || known_live {
                continue;
            }
            let base = range.start;
            let local = |t: u32| t - base as u32;
            let edges = self.nodes[range.clone()].iter().enumerate().flat_map(|(i, n)| {
                let targets = self.bytes(n).iter().map(|e| e.target).chain(self.calls(n).iter().map(|c| c.ret));
                targets.map(move |t| (i as u32, local(t)))
            });
            let live = co_reach.run(range.len(), edges, |i| self.nodes[base + i].is_final);
            if live.iter().all(|&l| l) {
                continue;
            }
            let keep = |t: u32| live[t as usize - base];
            for n in &mut self.nodes[range] {
                n.bytes = retain(&mut self.edges, n.bytes, |e| keep(e.target));
                n.calls = retain(&mut self.call_edges, n.calls, |c| keep(c.ret));
            }
        }
        // Loops whose body can match the empty string: an empty iteration never helps, so
        // the matcher skips it, which is exact once `min` is 0.
        let nullable = self.rule_fixpoint(false, &callers);
        for n in &mut self.nodes {
            if let Some(l) = &mut n.repeat {
                if nullable[l.body as usize] {
                    l.min = 0;
                }
                n.is_final = l.min == 0;
            }
        }
        Ok(nullable)
    }

    /// Rejects grammars where a rule can call itself before consuming a byte.
    fn check_left_recursion(&self, nullable: &[bool]) -> Result<(), Error> {
        // left[r] = rules r may enter before consuming anything.
        let mut left: Vec<Vec<u32>> = vec![Vec::new(); self.rules.len()];
        for (r, l) in left.iter_mut().enumerate() {
            let start = self.rules[r].start as usize;
            if let Some(lp) = self.nodes[start].repeat {
                l.push(lp.body);
                continue;
            }
            let mut seen = HashSet::default();
            let mut todo = vec![start];
            seen.insert(start);
            while let Some(n) = todo.pop() {
                for c in self.calls(&self.nodes[n]) {
                    l.push(c.callee);
                    if nullable[c.callee as usize] && seen.insert(c.ret as usize) {
                        todo.push(c.ret as usize);
                    }
                }
            }
        }
        // Cycle detection with an explicit stack (0 = new, 1 = on stack, 2 = done).
        let mut color = vec![0u8; self.rules.len()];
        for root in 0..self.rules.len() {
            if color[root] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            color[root] = 1;
            while let Some(&mut (r, ref mut i)) = stack.last_mut() {
                if let Some(&next) = left[r].get(*i) {
                    *i += 1;
                    match color[next as usize] {
                        0 => {
                            color[next as usize] = 1;
                            stack.push((next as usize, 0));
                        }
                        1 => return Err(Error::LeftRecursion(self.rules[next as usize].name.clone())),
                        _ => {}
                    }
                } else {
                    color[r] = 2;
                    stack.pop();
                }
            }
        }
        Ok(())
    }

    /// Gives nodes with many byte edges a byte-indexed target table (see [`Node::dense`]).
    fn add_dense_tables(&mut self) {
        // Ids must leave the flag bit free (an automaton this large never fits in memory).
        if self.nodes.len() >= super::PLAIN_TARGET as usize {
            return;
        }
        let plain: Vec<bool> = self.nodes.iter().map(Node::is_plain).collect();
        for node in &mut self.nodes {
            if node.bytes.len() > super::DENSE_MIN_EDGES {
                let mut table = Box::new([super::NO_TARGET; 256]);
                for e in self.edges.get(node.bytes.range()).unwrap_or(&[]) {
                    let flag = if plain.get(e.target as usize) == Some(&true) { super::PLAIN_TARGET } else { 0 };
                    for b in e.lo..=e.hi {
                        table[b as usize] = e.target | flag;
                    }
                }
                node.dense = Some(table);
            }
        }
    }

    /// Gives every rule a structural fingerprint: rules outside call cycles hash their own
    /// structure plus their callees' fingerprints (so equal fingerprints ⇒ equal behaviour,
    /// across grammars too); rules in or above a cycle get `salt` (non-zero, unique per
    /// grammar among those sharing a [`RuleCache`]). Called again with a new salt when an
    /// automaton is bound to another cache's owner.
    pub(crate) fn fingerprint(&mut self, salt: u64) {
        self.fingerprint_with(salt, &Shapes::default());
    }

    /// [`Pda::fingerprint`], hashing the rules `shapes` knows by their shape instead of
    /// their nodes.
    fn fingerprint_with(&mut self, salt: u64, shapes: &Shapes) {
        debug_assert!(salt != 0, "salt 0 is the one of rules outside cycles");
        let n = self.rules.len();
        // Callees before callers (Kahn's order over the call graph): linear, where repeated
        // sweeps until nothing changes were quadratic on a chain of 100k rules. A rule waits
        // for each of its calls (and its loop), and each is counted off once done.
        let mut done: Vec<Option<u128>> = vec![None; n];
        let mut pending: Vec<usize> = vec![0; n];
        for node in &self.nodes {
            pending[node.rule as usize] += self.calls(node).len() + usize::from(node.repeat.is_some());
        }
        let callers = self.callers();
        let mut ready: Vec<usize> = (0..n).filter(|&r| pending[r] == 0).collect();
        while let Some(r) = ready.pop() {
            done[r] = Some(self.hash_rule(r, |c| done[c as usize].unwrap_or(0), 0, shapes));
            for &caller in callers.of(r as u32) {
                let p = &mut pending[caller as usize];
                *p -= 1;
                if *p == 0 {
                    ready.push(caller as usize);
                }
            }
        }
        // Rules in or above cycles: salted, computed in two passes so callers still see a
        // (salted) value for their callees.
        let provisional: Vec<u128> = (0..n).map(|r| done[r].unwrap_or_else(|| hash128(&(salt, r as u64)))).collect();
        for (r, known) in done.iter().enumerate() {
            let fp = match known {
                Some(fp) => *fp,
                None => self.hash_rule(r, |c| provisional[c as usize], salt, shapes),
            };
            self.rules[r].fingerprint = fp;
        }
    }

    /// Rule `r`'s fingerprint: its shape (see [`Shapes`]) and its callees' fingerprints in
    /// their local order, or else its nodes' encoding, targets relative to the rule.
    fn hash_rule(&self, r: usize, callee_fp: impl Fn(u32) -> u128, salt: u64, shapes: &Shapes) -> u128 {
        if let Some(Some((shape, refs))) = shapes.of.get(r) {
            let refs = shapes.refs.get(refs.range()).unwrap_or(&[]);
            let mut buf: Vec<u64> = Vec::with_capacity(4 + 2 * refs.len());
            buf.extend([TAG_SHAPE, salt, *shape as u64, (*shape >> 64) as u64]);
            for &c in refs {
                let fp = callee_fp(c);
                buf.extend([fp as u64, (fp >> 64) as u64]);
            }
            return hash128(&buf);
        }
        let base = self.rules[r].first_node;
        let mut buf: Vec<u64> = vec![salt, (self.rules[r].start - base) as u64];
        for i in self.rule_nodes(r) {
            super::keys::encode_node(&mut buf, self, &self.nodes[i], |t| (t - base) as u64, &callee_fp);
        }
        hash128(&buf)
    }
}

/// Opens the fingerprint of a rule hashed by its shape, so that no rule hashed by its nodes
/// (whose buffer opens with a salt and its start) shares it.
const TAG_SHAPE: u64 = 0x5AA9E_u64 << 40;

/// Rules whose automaton is a cached DFA exactly as it was determinised (not trimmed): its
/// [`CachedRule::shape`] and the rules its local callees stand for, so its fingerprint
/// needs no pass over its nodes. Equal shapes and equal callee fingerprints mean equal
/// automata, node by node.
#[derive(Default)]
struct Shapes {
    /// Per rule, if known: its shape and where its callees are in `refs`.
    of: Vec<Option<(u128, Span)>>,
    refs: Vec<u32>,
}

/// Keeps the edges of `span` in `list` that `keep` says to, in order, at the start of the
/// span; returns the shorter span (the edges past it stay unused).
fn retain<T: Copy>(list: &mut [T], span: Span, keep: impl Fn(&T) -> bool) -> Span {
    let mut kept = span.start as usize;
    for i in span.range() {
        if let Some(&e) = list.get(i) {
            if keep(&e) {
                list[kept] = e;
                kept += 1;
            }
        }
    }
    Span { start: span.start, len: (kept - span.start as usize) as u32 }
}

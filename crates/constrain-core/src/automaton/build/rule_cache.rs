//! Determinised rules shared between grammars: canonical rule keys and the [`RuleCache`].

use super::dfa::{determinise, Dfa};
use super::nfa::Nfa;
use crate::automaton::{ByteEdge, CallEdge, RuleIdx, Span};
use crate::grammar::Expr;
use crate::util::cache::GenCache;
use crate::util::subset::Exceeded;
use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A rule body in canonical form: its expression serialised with rule references numbered
/// by first appearance, so bodies that differ only in which rules they call (the JSON string
/// of every schema, most enums, many objects) have equal keys and share one determinisation
/// through a [`RuleCache`]. Buffers are reused from rule to rule.
#[derive(Default)]
pub(super) struct CanonicalRule {
    pub(super) key: Vec<u8>,
    /// The rules referenced, in order of first appearance: local callee `i` is `refs[i]`.
    pub(super) refs: Vec<u32>,
    pub(super) local: HashMap<u32, u32>,
}

/// A determinised rule kept in a [`RuleCache`]; its call edges name local callees.
pub(super) struct CachedRule {
    pub(super) nfa_states: usize,
    pub(super) dfa: Dfa,
    /// Every node can reach a final node along the DFA's own edges, so trimming leaves
    /// the rule as it is unless a call of it is removed (see [`Pda::trim`]).
    pub(super) live: bool,
    /// A structural hash of the DFA, callees by local number: with its callees'
    /// fingerprints, the fingerprint of a rule that kept this automaton as built
    /// ([`Shapes`]).
    pub(super) shape: u128,
}

/// Determinised rule bodies by canonical key, shared by the grammars built with one cache,
/// and the salts of their fingerprints. Owned by the caller: a token index holds one for
/// every constraint compiled against it ([`crate::automaton::Pda::build_with`]); [`crate::automaton::Pda::build`] uses a fresh
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

    /// The number of rules kept and their accounted bytes (what the bound applies to).
    /// Counts by a scan of the cache: for reports.
    pub fn stats(&self) -> (usize, usize) {
        let mut n = 0;
        self.rules.visit(|_, _| n += 1);
        (n, self.rules.bytes())
    }

    /// The accounted bytes of the rules kept, without a scan: for metrics.
    pub fn bytes(&self) -> usize {
        self.rules.bytes()
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

/// The bound of a [`RuleCache`] made with `RuleCache::default()` (a token index takes its
/// bound from [`crate::mask::IndexConfig`] instead). Determinising every rule of all of
/// JSONSchemaBench's 8.5k schemas adds up to about 340 MB; a quarter of it keeps what
/// schemas share.
pub const RULE_CACHE_BYTES: usize = 96 << 20;

impl CanonicalRule {
    /// The automaton of `expr` with local callees (see [`CanonicalRule::refs`]), from the
    /// cache or determinised now; `Err` if it needs more than `budget` states.
    pub(super) fn determinised(
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
            let local = self.local.get(&c.callee.as_u32()).copied();
            // Every callee the DFA names was numbered while encoding the key; u32::MAX
            // (no rule) would make the call edge dead: fewer strings, never more.
            debug_assert!(local.is_some(), "call edge to callee {:?} the canonical key did not number", c.callee);
            c.callee = RuleIdx::new(local.unwrap_or(u32::MAX));
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
    pub(super) fn encode(&mut self, e: &Expr) {
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

//! Building a [`Pda`] from a [`Grammar`]: lift large counted repetitions into loop rules,
//! determinise each rule (Thompson NFA → subset construction), trim, check, fingerprint.
//!
//! The steps, one file each: `lift` (loop rules), `nfa` (Thompson construction), `dfa`
//! (subset construction, on the engine shared with the character automata in
//! `util/subset.rs`; co-reachability), `rule_cache` (determinised rules shared between
//! grammars), `trim` (trimming, left recursion, dense tables, fingerprints). This file runs
//! them in order ([`build`]).

use super::{ByteEdge, CallEdge, Error, Loop, Node, NodeId, Pda, RuleIdx, RuleInfo, Span};
use crate::grammar::Grammar;
use crate::util::subset::Exceeded;
use crate::Limits;
use std::borrow::Cow;

mod dfa;
mod lift;
mod nfa;
mod rule_cache;
mod trim;

use lift::{Lifted, Lifter, MAX_EXPR_DEPTH};
use rule_cache::CanonicalRule;
pub use rule_cache::{RuleCache, RULE_CACHE_BYTES};

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
                    rule: RuleIdx::new(ri as u32),
                    is_final: false,
                    repeat: Some(Loop { body: RuleIdx::new(*body), min: *min, max: *max }),
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
                let named = dfa.dfa.calls.iter().all(|c| c.callee.index() < canonical.refs.len());
                shapes.of.push(named.then(|| {
                    let at = shapes.refs.len() as u32;
                    shapes.refs.extend_from_slice(&canonical.refs);
                    (dfa.shape, Span { start: at, len: canonical.refs.len() as u32 })
                }));
                // The rule's byte edges in one pass, its nodes' spans moved by as much.
                let dfa = &dfa.dfa;
                let edges_at = edges.len() as u32;
                edges.extend(
                    dfa.bytes.iter().map(|e| ByteEdge { target: NodeId::new(e.target.as_u32() + first), ..*e }),
                );
                nodes.reserve(dfa.nodes.len());
                for &(is_final, bytes, calls) in dfa.nodes.iter() {
                    let calls_at = call_edges.len();
                    call_edges.extend(dfa.calls.get(calls.range()).unwrap_or(&[]).iter().filter_map(|c| {
                        let callee = RuleIdx::new(*canonical.refs.get(c.callee.index())?);
                        Some(CallEdge { callee, ret: NodeId::new(c.ret.as_u32() + first) })
                    }));
                    nodes.push(Node {
                        rule: RuleIdx::new(ri as u32),
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
        let first = NodeId::new(first);
        rules.push(RuleInfo { name: name.clone(), start: first, first_node: first, fingerprint: 0 });
    }
    let start_rule = RuleIdx::new(grammar.start().0);
    let mut pda = Pda { nodes, edges, call_edges, rules, start_rule, excluded: Default::default() };
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

//! Contexts that take any text once its first character is allowed.
//!
//! A string searched for a run of characters (`"pattern": "[0-9a-f]{24}"`) compiles to
//! `(c{0,23} d)* c{24} .*`: after a character `d` outside the class, any text can follow, but
//! a walk of the vocabulary cannot see that. Each character of each token spawns counted
//! loops whose counts tell the configurations apart, so the walk of such a context costs 1–3
//! ms, and reaching the string makes up to three of them at once.
//!
//! Instead, the context's own configurations are explored — over the automaton's byte
//! classes, not the vocabulary — until every configuration that text reaches is seen. When
//! every text character from every one of them leads on, and the first character either
//! leads on or dies at once, a text token's fate is decided by its first character
//! ([`first_char_refused`]). The exploration steps the same [`Configs`] the walk does, so it
//! is exact: a search for a run of 162 characters explores 225 (configuration, decoder state)
//! pairs over 15 byte classes, where the walk visits 272k trie nodes.

use super::configs::{Configs, State};
use super::text::{text_step, Refused, Utf8State, BOUNDARY, UTF8_STATES};
use crate::automaton::exec::{Frame, Runner};
use crate::automaton::{NodeId, Pda};
use crate::Limits;
use rustc_hash::{FxHashMap, FxHashSet};

/// Nodes the byte classes are computed over, at most (past it, the context is no string
/// body and the exploration gives up).
const MAX_NODES: usize = 1024;

/// (configuration, decoder state) pairs explored, at most.
const MAX_PAIRS: usize = 512;

/// The bytes where the UTF-8 decoder of [`text_step`] changes behaviour (see there).
const DECODER_CUTS: [u8; 22] = [
    0x20, 0x22, 0x23, 0x5C, 0x5D, 0x80, 0x90, 0xA0, 0xA8, 0xAA, 0xC0, 0xC2, 0xE0, 0xE1, 0xE2, 0xE3, 0xED, 0xEE, 0xF0,
    0xF1, 0xF4, 0xF5,
];

/// One class of text bytes that no node text can reach tells apart: a representative and,
/// for ASCII, its members as [`Refused`] bits.
#[derive(Clone, Copy, Debug)]
struct ByteClass {
    rep: u8,
    ascii: u128,
}

/// Whether edge bytes `lo..=hi` include a byte of text (a character's own bytes).
fn edge_takes_text(lo: u8, hi: u8) -> bool {
    (lo..=hi).any(|b| text_step(BOUNDARY, b).is_some() || (0x80..=0xBF).contains(&b))
}

/// The nodes the stacks of `context` can reach while reading text: its frames' nodes, and
/// from each, the targets of edges that take text, the callees' starts, the return nodes of
/// calls and the bodies of loops. (A superset: the stacks are not followed.) `None` past
/// [`MAX_NODES`].
fn text_nodes(pda: &Pda, context: &[Frame]) -> Option<Vec<NodeId>> {
    let mut seen: FxHashSet<NodeId> = FxHashSet::default();
    let mut todo: Vec<NodeId> = context.iter().map(|f| f.node()).collect();
    let mut nodes = Vec::new();
    while let Some(n) = todo.pop() {
        if !seen.insert(n) {
            continue;
        }
        if seen.len() > MAX_NODES {
            return None;
        }
        nodes.push(n);
        let node = pda.get_node(n)?;
        todo.extend(pda.bytes(node).iter().filter(|e| edge_takes_text(e.lo(), e.hi())).map(|e| e.target()));
        for call in pda.calls(node) {
            todo.push(pda.rule(call.callee())?.start());
            todo.push(call.ret());
        }
        if let Some(l) = node.repeat() {
            todo.push(pda.rule(l.body())?.start());
        }
    }
    Some(nodes)
}

/// The text bytes split into classes that every node of `nodes` and the UTF-8 decoder treat
/// alike: a configuration steps the same way on every byte of a class.
fn byte_classes(pda: &Pda, nodes: &[NodeId]) -> Vec<ByteClass> {
    let mut cut = [false; 257];
    cut[0] = true;
    cut[256] = true;
    for &c in &DECODER_CUTS {
        cut[c as usize] = true;
    }
    for node in nodes.iter().filter_map(|&n| pda.get_node(n)) {
        for e in pda.bytes(node) {
            cut[e.lo() as usize] = true;
            cut[e.hi() as usize + 1] = true;
        }
    }
    // What a byte does: the decoder's step from each state, then each node's target.
    let signature = |b: u8| -> Vec<u32> {
        let decoder = (0..UTF8_STATES).map(|s| text_step(s, b).map_or(u32::MAX, u32::from));
        let targets =
            nodes.iter().map(|&n| pda.get_node(n).and_then(|node| pda.step(node, b)).map_or(u32::MAX, NodeId::as_u32));
        decoder.chain(targets).collect()
    };
    let mut classes: Vec<ByteClass> = Vec::new();
    let mut by_signature: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
    let mut lo = 0usize;
    while lo < 256 {
        let hi = (lo + 1..=256).find(|&c| cut[c]).unwrap_or(256);
        let rep = lo as u8;
        // Bytes that are never part of text (controls, the quote, the backslash, F5–FF).
        if (0..UTF8_STATES).any(|s| text_step(s, rep).is_some()) {
            let ascii: u128 = if lo < 0x80 { (lo..hi.min(0x80)).fold(0, |m, b| m | 1 << b) } else { 0 };
            let slot = *by_signature.entry(signature(rep)).or_insert_with(|| {
                classes.push(ByteClass { rep, ascii: 0 });
                classes.len() - 1
            });
            classes[slot].ascii |= ascii;
        }
        lo = hi;
    }
    classes
}

/// What `context` (frames bottom first, its top's own byte edges taking the first byte, as
/// in a walk) does with text, when a text token's fate depends on its first character only:
/// the characters refused there (`Some`), every text token starting with another one being
/// consumed whole without completing the context's bottom. `None` when some text dies
/// later, completes the bottom, or splits the characters of one lead byte; also when the
/// automaton text reaches is too large to explore.
pub(super) fn first_char_refused(
    pda: &Pda,
    limits: &Limits,
    context: &[Frame],
    configs: &mut Configs,
) -> Option<Refused> {
    let nodes = text_nodes(pda, context)?;
    let classes = byte_classes(pda, &nodes);
    let mut runner = Runner::with_context(pda, limits, context);
    let start = configs.reset(pda, &runner, false);
    // (state, decoder state, still inside the first character)
    let mut seen: FxHashSet<(State, Utf8State, bool)> = FxHashSet::default();
    // Breadth first: text that dies usually does so within a few characters.
    let mut todo = std::collections::VecDeque::from([(start, BOUNDARY, true)]);
    seen.insert((start, BOUNDARY, true));
    let mut refused = Refused::default();
    let mut lead_taken = false;
    while let Some((state, decoder, first)) = todo.pop_front() {
        for class in &classes {
            let Some(after) = text_step(decoder, class.rep) else { continue };
            let step = configs.step(pda, &mut runner, state, class.rep);
            if step.crossed() {
                return None;
            }
            let next = step.state();
            let starts_token = first && decoder == BOUNDARY;
            if next == State::DEAD {
                if !starts_token {
                    return None;
                }
                refused.ascii |= class.ascii;
                refused.non_ascii |= class.rep >= 0x80;
                continue;
            }
            lead_taken |= starts_token && class.rep >= 0x80;
            let pair = (next, after, first && after != BOUNDARY);
            if seen.insert(pair) {
                if seen.len() > MAX_PAIRS {
                    return None;
                }
                todo.push_back(pair);
            }
        }
    }
    // Some non-ASCII characters refused and others taken: not one class.
    if refused.non_ascii && lead_taken {
        return None;
    }
    Some(refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::exec::BOTTOM;

    /// Every node of each schema's automaton, alone on the stack: where the exploration
    /// answers, a run of the automaton over every string of up to three characters of a
    /// mixed alphabet agrees with it (taken whole exactly when the first character is not
    /// refused). Searches for a run of characters must be answered both ways: a refused
    /// first character (after a short run) and none (after the run).
    #[test]
    fn first_characters_decide_exactly_where_answered() {
        let limits = Limits::default();
        let alphabet = ["0", "7", "a", "b", "f", "g", "z", "A", "-", " ", ",", "é", "日", "😀"];
        let mut strings: Vec<String> = Vec::new();
        for a in alphabet {
            strings.push(a.to_string());
            for b in alphabet {
                strings.push(format!("{a}{b}"));
                for c in alphabet {
                    strings.push(format!("{a}{b}{c}"));
                }
            }
        }
        let cases = [
            (serde_json::json!({"type": "string", "pattern": "[0-9a-f]{4}"}), true),
            (serde_json::json!({"type": "string", "pattern": "[a-z0-9-]{3}"}), true),
            (serde_json::json!({"type": "string", "pattern": "^[a-z]+"}), false),
            (serde_json::json!({"type": "string", "pattern": "^[a-z]+$"}), false),
            (serde_json::json!({"type": "string", "pattern": "^a|b$"}), false),
            // `a` and `b` alike at the start, apart after it: byte classes must see both.
            (serde_json::json!({"type": "string", "pattern": "^[ab][^b]*$"}), false),
        ];
        for (schema, search) in cases {
            let grammar = crate::test_support::default_schema_grammar(&schema);
            let pda = Pda::build(&grammar, &limits).expect("automaton");
            let (mut refusing, mut open) = (0, 0);
            for node in (0..pda.num_states() as u32).map(NodeId::new).filter(|&n| pda.node(n).has_bytes()) {
                let context = [Frame::new(node, 0, BOTTOM, 0)];
                let Some(refused) = first_char_refused(&pda, &limits, &context, &mut Configs::default()) else {
                    continue;
                };
                if refused.is_empty() {
                    open += 1;
                } else {
                    refusing += 1;
                }
                for s in &strings {
                    let mut runner = Runner::with_context(&pda, &limits, &context);
                    let taken = runner.feed(s.as_bytes()) && !runner.is_accepting();
                    assert_eq!(
                        taken,
                        !refused.refuses(s.as_bytes()[0]),
                        "{schema} at node {node:?} on {s:?}: {}",
                        pda.listing()
                    );
                }
            }
            if search {
                assert!(refusing > 0 && open > 0, "{schema}: {refusing} refusing, {open} open: {}", pda.listing());
            }
        }
    }
}

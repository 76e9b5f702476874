//! Structural identity of rules and nodes: the one place that encodes an automaton's shape
//! for hashing. Rule fingerprints ([`Pda`]'s `RuleInfo::fingerprint`, computed at build time)
//! and node keys ([`NodeKeys`], computed on first use by the mask stage's cache keys) feed
//! the same encoding of a node ([`encode_node`]), with the same tags, so that the two never
//! drift apart.

use super::{ByteEdge, CallEdge, Loop, Node, NodeId, Pda, RuleIdx};
use crate::util::hash128;
use std::sync::OnceLock;

/// Tag opening a node in [`encode_node`] (plus 1 for a final node).
pub(crate) const TAG_NODE: u64 = 0xF1;
/// Tag of a call edge in [`encode_node`].
pub(crate) const TAG_CALL: u64 = 0xCA11;
/// Tag of a loop node in [`encode_node`] and of a [`NodeKeys::loop_shape`].
pub(crate) const TAG_LOOP: u64 = 0x100F;

/// Appends the encoding of `node` to `buf`: see [`encode_parts`].
pub(crate) fn encode_node(
    buf: &mut Vec<u64>,
    pda: &Pda,
    node: &Node,
    target: impl FnMut(NodeId) -> u64,
    callee_fp: impl Fn(RuleIdx) -> u128,
) {
    encode_parts(buf, node.is_final, pda.bytes(node), pda.calls(node), node.repeat, target, callee_fp);
}

/// Appends the encoding of a node to `buf`: its final flag, its byte edges (ranges and
/// `target`'s number for each target node), its call edges (callee fingerprint by
/// `callee_fp`, `target`'s number for the return node) and its loop (body fingerprint,
/// bounds). `target` is called for the byte edges' targets, then the calls' return nodes,
/// in edge order. Takes the node's parts, so a determinised rule not yet placed in an
/// automaton is encoded alike.
pub(crate) fn encode_parts(
    buf: &mut Vec<u64>,
    is_final: bool,
    bytes: &[ByteEdge],
    calls: &[CallEdge],
    repeat: Option<Loop>,
    mut target: impl FnMut(NodeId) -> u64,
    callee_fp: impl Fn(RuleIdx) -> u128,
) {
    buf.push(TAG_NODE + is_final as u64);
    for e in bytes {
        let t = target(e.target);
        buf.push(((e.lo as u64) << 40) | ((e.hi as u64) << 32) | t);
    }
    for c in calls {
        let fp = callee_fp(c.callee);
        let t = target(c.ret);
        buf.extend([TAG_CALL, fp as u64, (fp >> 64) as u64, t]);
    }
    if let Some(l) = repeat {
        let fp = callee_fp(l.body);
        buf.extend([TAG_LOOP, fp as u64, (fp >> 64) as u64, l.min as u64, l.max as u64]);
    }
}

/// Identifies what each node can do, for the mask cache: the canonical shape of the part of
/// its rule's automaton reachable from it (callees by fingerprint). Isomorphic pieces — the
/// tail of every JSON string, whatever keys came before it — get the same key across rules
/// and grammars. Nodes reaching more than [`MAX_CANONICAL_NODES`] nodes fall back to (rule
/// fingerprint, position in the rule). Computed on first use: a decode visits a small part
/// of a large schema's automaton, so computing every key up front would dominate compile time.
pub(crate) struct NodeKeys {
    keys: Box<[OnceLock<u128>]>,
    /// Per node: for loop nodes, a hash of the loop's body (bounds excluded), else 0.
    loop_shape: Box<[u128]>,
}

impl NodeKeys {
    /// Room for the keys of `pda`'s nodes, none computed yet (the loop shapes are).
    pub fn new(pda: &Pda) -> NodeKeys {
        let loop_shape = pda
            .nodes
            .iter()
            .map(|n| match n.repeat {
                Some(l) => pda.rules.get(l.body.index()).map_or(0, |r| hash128(&(TAG_LOOP as u32, r.fingerprint))),
                None => 0,
            })
            .collect();
        NodeKeys { keys: (0..pda.nodes.len()).map(|_| OnceLock::new()).collect(), loop_shape }
    }

    /// The key of `node` (0 for a node outside the automaton).
    pub fn get(&self, pda: &Pda, node: NodeId) -> u128 {
        match self.keys.get(node.index()) {
            Some(slot) => *slot.get_or_init(|| node_key(pda, node)),
            None => 0,
        }
    }

    /// For a loop node, a hash of its body rule (not of its bounds): loops of one body share
    /// it. 0 for other nodes.
    pub fn loop_shape(&self, node: NodeId) -> u128 {
        self.loop_shape.get(node.index()).copied().unwrap_or(0)
    }

    /// Approximate heap bytes.
    pub fn memory_usage(&self) -> usize {
        self.keys.len() * std::mem::size_of::<OnceLock<u128>>() + self.loop_shape.len() * 16
    }
}

/// See [`NodeKeys`]: a breadth-first walk of the nodes reachable from `start` inside its
/// rule, numbering them in visit order, hashed with their edges.
fn node_key(pda: &Pda, start: NodeId) -> u128 {
    // Nodes in BFS order; a node's number is its position. At most MAX_CANONICAL_NODES + 1
    // of them, so a scan finds a number faster than a hash map is built (this runs once per
    // node a decode visits, inside its first mask).
    let mut order: Vec<NodeId> = Vec::with_capacity(16);
    order.push(start);
    let mut buf: Vec<u64> = Vec::with_capacity(32);
    let fingerprint = |r: RuleIdx| pda.rules.get(r.index()).map_or(0, |r| r.fingerprint);
    let mut k = 0;
    while k < order.len() {
        if order.len() > MAX_CANONICAL_NODES {
            let rule = &pda.rules[pda.nodes[start.index()].rule.index()];
            return hash128(&(rule.fingerprint, start.as_u32() - rule.first_node.as_u32()));
        }
        let node = &pda.nodes[order[k].index()];
        k += 1;
        let visit = |t: NodeId| -> u64 {
            match order.iter().position(|&o| o == t) {
                Some(i) => i as u64,
                None => {
                    order.push(t);
                    order.len() as u64 - 1
                }
            }
        };
        encode_node(&mut buf, pda, node, visit, fingerprint);
    }
    hash128(&buf)
}

/// See [`NodeKeys`].
///
/// A constant of the algorithm, not a user limit: it only decides which states share a
/// cache key, never what a mask holds.
const MAX_CANONICAL_NODES: usize = 64;

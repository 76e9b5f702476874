use super::cache::Cached;
use super::configs::{Configs, State};
use super::index::TokenIndex;
use super::relaxed::Cond;
use super::walk::{Accepted, WholeSubtrees};
use crate::automaton::exec::{Frame, Runner, BOTTOM};
use crate::automaton::Recognizer;
use crate::automaton::{FrameId, NodeId, Pda};
use crate::util::{hash128, is_allowed, ForkVec, Hasher128};
use std::sync::Arc;

/// The outcome of walking the descendants of one first-byte trie node from one parse state:
/// which of their tokens were accepted (see [`SubtreeAccepted`]) and which became
/// stack-dependent. The state is identified by where its stacks' frames are in their rules
/// (rule fingerprint and position), so states that differ only in what came before — the
/// start of every "other property name", whatever names the schema declares, once its first
/// byte left the declared names — share the walk: the second schema copies bits instead of
/// walking most of the vocabulary again.
#[derive(Debug)]
pub(super) struct SubtreeMemo {
    pub(super) accepted: SubtreeAccepted,
    pub(super) pending: Box<[(u32, u32)]>,
}

/// The accepted tokens of a [`SubtreeMemo`], in the form that is cheaper to replay: the ids
/// themselves when few of the subtree's tokens survived (replaying costs the survivors, not
/// the subtree); the ids that did not when nearly all did (the subtree's tokens are then
/// OR-ed in a word at a time from [`TokenIndex::subtree_ids`], the exceptions cleared: a
/// string body accepts most of the vocabulary, and setting 100k bits one by one was most
/// of its cost); else a bitset over the subtree's positions in trie order.
#[derive(Debug)]
pub(super) enum SubtreeAccepted {
    Ids(Box<[u32]>),
    AllBut(Box<[u32]>),
    Positions(Box<[u64]>),
}

impl SubtreeMemo {
    pub(super) fn memory_usage(&self) -> usize {
        let accepted = match &self.accepted {
            SubtreeAccepted::Ids(v) | SubtreeAccepted::AllBut(v) => v.len() * 4,
            SubtreeAccepted::Positions(v) => v.len() * 8,
        };
        std::mem::size_of::<Self>() + accepted + self.pending.len() * 8
    }

    /// Adds the memo's accepted tokens (the subtree is the one below first byte `byte`, its
    /// tokens are `ids`, in trie order); a whole subtree is only noted in `whole`.
    pub(super) fn replay(&self, byte: u8, ids: &[u32], acc: &mut Accepted, whole: &mut WholeSubtrees) {
        match &self.accepted {
            SubtreeAccepted::AllBut(except) => {
                whole.bytes.push(byte);
                whole.excepted.extend_from_slice(except);
                acc.always_count += ids.len().saturating_sub(except.len());
            }
            SubtreeAccepted::Ids(list) => {
                for &id in list.iter() {
                    acc.add(id, Cond::Always);
                }
            }
            SubtreeAccepted::Positions(bits) => {
                for (w, &word) in bits.iter().enumerate() {
                    let mut word = word;
                    while word != 0 {
                        let k = w * 64 + word.trailing_zeros() as usize;
                        if let Some(&id) = ids.get(k) {
                            acc.add_fresh(id);
                        }
                        word &= word - 1;
                    }
                }
            }
        }
    }
}

/// A memo lists the rejected ids of its subtree when at most one in this many was rejected
/// (see [`SubtreeAccepted::AllBut`]).
pub(super) const ALL_BUT_RATIO: usize = 8;

/// Subtrees with fewer surviving tokens than this are not memoized (see [`SubtreeMemo`]).
pub(super) const MEMO_MIN_SURVIVORS: usize = 32;

/// Identifies the stacks of a parse state for [`state_key`]: every stack as the rule
/// positions ([`position_key`]) and loop counts of its frames, order-free.
pub(super) fn stacks_key(pda: &Pda, arena: &ForkVec<Frame>, tops: &[FrameId], chains: &mut Vec<u128>) -> u128 {
    chains.clear();
    chains.extend(tops.iter().map(|&top| {
        let mut h = Hasher128::new();
        let mut f = top;
        while f != BOTTOM {
            let fr = arena[f.index()];
            h.add(&(position_key(pda, fr.node()), fr.count()));
            f = fr.parent();
        }
        h.finish128()
    }));
    chains.sort_unstable();
    chains.dedup();
    hash128(chains.as_slice())
}

/// A node as its rule's fingerprint and its position in the rule. Equal fingerprints are
/// equal rules laid out alike (a fingerprint hashes every node at its position, directly or
/// through the shape of the cached automaton the rule was copied from), so the
/// pair identifies what the node does across automata, as a node key does, but costs two
/// reads where a node key, computed on first use, walks the rest of the rule: the stacks
/// met after a walk's first byte hold many nodes no mask context ever names (every key an
/// object may start with), and keying them was a tenth of JSONSchemaBench's mask time.
fn position_key(pda: &Pda, node: NodeId) -> (u128, u32) {
    match pda.get_node(node).and_then(|n| pda.rule(n.rule())) {
        Some(r) => (r.fingerprint(), node.as_u32().wrapping_sub(r.first_node().as_u32())),
        None => (0, node.as_u32()),
    }
}

/// Identifies a parse state of [`Classified::compute`]'s walk at first-byte trie node
/// `trie_node`: its stacks ([`stacks_key`]), plus the bottom crossings so far and whether the
/// context is the whole stack. Equal keys walk the node's subtree identically.
pub(super) fn state_key(stacks: u128, crossings: &[(u32, Cond)], trie_node: usize, whole_stack: bool) -> u128 {
    let mut h = Hasher128::new();
    h.add(&stacks);
    h.add(&crossings.len());
    for &(j, _) in crossings {
        h.add(&j);
    }
    h.add(&(trie_node as u64, whole_stack));
    h.finish128()
}

/// The [`stacks_key`] of the few states a walk meets at depth 1 (most first bytes lead to
/// the same one or two), so that each is hashed once.
#[derive(Default)]
pub(super) struct StacksKeys {
    pub(super) known: Vec<(State, u128)>,
    pub(super) chains: Vec<u128>,
}

impl StacksKeys {
    /// Only this many states are remembered; later ones are hashed every time.
    const MAX: usize = 16;

    pub(super) fn get(&mut self, state: State, pda: &Pda, configs: &Configs, runner: &mut Runner) -> u128 {
        if let Some(&(_, key)) = self.known.iter().find(|(s, _)| *s == state) {
            return key;
        }
        configs.materialize(state, runner);
        let key = stacks_key(pda, runner.stacks().frames(), runner.current_tops(), &mut self.chains);
        runner.pop_bytes(1);
        if self.known.len() < Self::MAX {
            self.known.push((state, key));
        }
        key
    }
}

impl SubtreeMemo {
    /// The memo of a subtree whose tokens are `ids` (in trie order), from the ids its walk
    /// accepted (`acc.log`) and the pending entries it added.
    pub(super) fn record(ids: &[u32], acc: &Accepted, pending: &[(u32, u32, Cond)]) -> SubtreeMemo {
        // A list costs 32 bits per listed id, the bitset one bit per token of the subtree.
        let is_set = |id: u32| is_allowed(&acc.always, crate::TokenId(id));
        let excepted = ids.len() - acc.log.len().min(ids.len());
        let accepted = if acc.log.len() * 32 <= ids.len() {
            SubtreeAccepted::Ids(acc.log.clone().into_boxed_slice())
        } else if excepted * ALL_BUT_RATIO <= ids.len() {
            SubtreeAccepted::AllBut(ids.iter().copied().filter(|&id| !is_set(id)).collect())
        } else {
            let mut bits = vec![0u64; ids.len().div_ceil(64)];
            for (k, &id) in ids.iter().enumerate() {
                if is_set(id) {
                    bits[k / 64] |= 1 << (k % 64);
                }
            }
            SubtreeAccepted::Positions(bits.into_boxed_slice())
        };
        let pending = pending.iter().map(|&(id, j, _)| (id, j)).collect();
        SubtreeMemo { accepted, pending }
    }
}

impl TokenIndex {
    pub(super) fn subtree(&self, key: u128) -> Option<Arc<SubtreeMemo>> {
        self.cache.subtree(key)
    }

    pub(super) fn store_subtree(&self, key: u128, memo: SubtreeMemo) {
        let bytes = memo.memory_usage();
        self.cache.insert(key, Cached::Subtree(Arc::new(memo)), bytes);
    }
}

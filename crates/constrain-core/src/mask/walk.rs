use super::configs::{Configs, State};
use super::index::TokenIndex;
use super::memo::{state_key, StacksKeys, SubtreeMemo, MEMO_MIN_SURVIVORS};
use super::relaxed::Cond;
use super::text;
use super::trie::ByteTrie;
use crate::automaton::exec::{Frame, Runner, BOTTOM, RELAXED};
use crate::automaton::{Cut, NodeId, Pda};
use crate::util::or_into;
use crate::Limits;
use std::sync::Arc;

/// One classification's walk: the context and what it runs over.
#[derive(Clone, Copy)]
pub(super) struct Walk<'a> {
    pub(super) index: &'a TokenIndex,
    pub(super) pda: &'a Pda,
    pub(super) limits: &'a Limits,
    pub(super) context: &'a [Frame],
    pub(super) relaxed: Option<usize>,
    /// The parse limits that cut a path in any walk of this classification, shared by the
    /// walks it makes.
    pub(super) cut: &'a std::cell::Cell<Cut>,
}

impl Walk<'_> {
    /// Walks `trie` from the context, adding to `acc` and `pending`. With `use_memo`, walks
    /// of first-byte subtrees are recorded and replayed ([`SubtreeMemo`]): only for the whole
    /// vocabulary's trie, and only without a relaxed loop (memos hold unconditional results).
    pub(super) fn run(
        &self,
        trie: &ByteTrie,
        use_memo: bool,
        acc: &mut Accepted,
        pending: &mut Vec<(u32, u32, Cond)>,
        configs: &mut Configs,
    ) {
        let Walk { index, pda, limits, context, relaxed, cut } = *self;
        let mut frames = context.to_vec();
        if let Some(f) = relaxed.and_then(|i| frames.get_mut(i)) {
            *f = f.with_count(RELAXED);
        }
        let mut runner = Runner::with_context(pda, limits, &frames);
        // When the context is the whole stack (its bottom frame has no parent), completing
        // the bottom completes the output: a token with bytes left after that is dead.
        let whole_stack = context.first().is_some_and(|f| f.parent() == BOTTOM);
        // (bytes consumed, condition) where the context's bottom completed, along the path.
        let mut crossings: Vec<(u32, Cond)> = Vec::new();
        let mut stacks_keys = StacksKeys::default();
        // The configuration after each byte of the current path: `path[d]` after `d` bytes.
        let start = configs.reset(pda, &runner, relaxed.is_some());
        let live = configs.live_bytes(pda, &runner, start);
        let mut path: Vec<State> = vec![start];
        // The first-byte subtree being walked for the memo: (memo key, id range, where its
        // pending entries start).
        let mut open_memo: Option<(u128, std::ops::Range<usize>, usize, usize)> = None;
        let mut whole = WholeSubtrees::default();
        // Scratch for `PlainRun::walk`.
        let mut plain_nodes: Vec<NodeId> = Vec::new();
        let mut i = 0usize;
        // The first-byte nodes not reached yet (see `ByteTrie::skip_dead_roots`).
        let mut roots = 0usize;
        loop {
            // A first byte the context refuses dies there, before any crossing.
            i = trie.skip_dead_roots(i, &mut roots, &live);
            let node = trie.nodes.get(i);
            if node.is_none_or(|n| n.depth == 1) {
                if let Some((key, ids, pending_start, count_start)) = open_memo.take() {
                    acc.logging = false;
                    // Only subtrees where many tokens survived were expensive to walk and are
                    // worth a memo.
                    let survivors = acc.always_count - count_start + pending.len() - pending_start;
                    // A limit may have cut this subtree short: such a walk is not replayed.
                    if survivors >= MEMO_MIN_SURVIVORS && runner.stacks().cut().is_empty() {
                        let memo = SubtreeMemo::record(&trie.ids[ids], acc, &pending[pending_start..]);
                        index.store_subtree(key, memo);
                    }
                }
            }
            let Some(node) = node else { break };
            let depth = node.depth;
            path.truncate(depth as usize);
            while crossings.last().is_some_and(|&(j, _)| j >= depth) {
                crossings.pop();
            }
            let parent = path.last().copied().unwrap_or(State::DEAD);
            let next = configs.step(pda, &mut runner, parent, node.byte);
            if next.crossed() {
                crossings.extend(configs.last_reached().iter().map(|&c| (depth, c)));
            }
            let next = next.state();
            if next != State::DEAD {
                path.push(next);
                let ids = trie.ids_at(node);
                if !ids.is_empty() {
                    let alive = Alive { conds: configs.conds(next), crossings: &crossings, whole_stack };
                    alive.add(ids, depth, acc, pending);
                }
                if use_memo && depth == 1 {
                    let end = node.end as usize;
                    let ids = trie.descendant_ids(i);
                    let stacks = stacks_keys.get(next, pda, configs, &mut runner);
                    let key = state_key(stacks, &crossings, i, whole_stack);
                    if let Some(memo) = index.subtree(key) {
                        memo.replay(node.byte, &trie.ids[ids], acc, &mut whole);
                        pending.extend(memo.pending.iter().map(|&(id, j)| (id, j, Cond::Always)));
                        i = end;
                        continue;
                    }
                    acc.log.clear();
                    acc.logging = true;
                    open_memo = Some((key, ids, pending.len(), acc.always_count));
                }
                if let Some((from, base)) = next.plain_parts() {
                    let run = PlainRun { from, base, conds: configs.conds(next), crossings: &crossings, whole_stack };
                    i = run.walk(trie, pda, i, acc, pending, &mut path, &mut plain_nodes);
                    continue;
                }
                i += 1;
                continue;
            }
            // Dead inside the context: only tokens that left it earlier can still be allowed.
            let end = node.end as usize;
            // Without a crossing, nothing below is allowed (checked here: a walk meets a
            // million dead subtrees, and most have no crossing above).
            if !crossings.is_empty() {
                dead_subtree(trie, i, &crossings, whole_stack, acc, pending);
            }
            i = end;
        }
        configs.shrink();
        whole.apply(index, &mut acc.always);
        cut.set(cut.get() | runner.stacks().cut());
    }

    /// The classes of the text tokens under the relaxed loop at `context[i]`, each of whose
    /// iterations is one text character ([`text::units_loop`]: it refuses `refused`), found
    /// by walking the [`text::probes`] from the loop up (so a probe leaving the loop is
    /// pending there, not followed into what comes next); `exit` says what follows the
    /// loop does with the rest of such a probe (see [`text::ByChars::new`]).
    /// With `walked` lead bytes, the tokens holding such a character are left out (they are
    /// walked instead), and only a loop followed by no text is answered.
    pub(super) fn probe(
        &self,
        i: usize,
        refused: text::Refused,
        walked: u128,
        exit: Option<text::Refused>,
        configs: &mut Configs,
    ) -> Option<text::ByChars> {
        // Prefix groups only where something follows that takes text, and the loop refuses
        // some: otherwise a token holding a refused character is rejected.
        let prefixes = !refused.is_empty() && exit.is_some_and(|e| e != text::Refused::ALL);
        let lists = match (prefixes, walked != 0) {
            (true, true) => return None,
            (true, false) => self.index.char_lists(refused),
            (false, true) => Arc::new(text::CharLists::ascii_only(&self.index.text, refused)),
            (false, false) => Arc::new(text::CharLists::lengths_only(&self.index.text, refused)),
        };
        let probes = text::probes(lists.lengths(), refused, prefixes)?;
        let mut acc = Accepted::new(vec![0; probes.ids.len().div_ceil(32)], Vec::new());
        let mut pending = Vec::new();
        let from_loop = Walk { context: self.context.get(i..)?, relaxed: Some(0), ..*self };
        from_loop.run(&probes, false, &mut acc, &mut pending, configs);
        text::ByChars::new(&acc, &pending, refused, exit, lists)
    }
}

/// Every stack died at trie node `i`: the tokens of its subtree can only be allowed through
/// a bottom crossing on the path (they left the context earlier): accepted when they end at
/// the crossing, else pending a check against the real stack (none when the context is the
/// whole stack: nothing can follow it). Without a crossing nothing below is allowed, and the
/// callers skip the call.
pub(super) fn dead_subtree(
    trie: &ByteTrie,
    i: usize,
    crossings: &[(u32, Cond)],
    whole_stack: bool,
    acc: &mut Accepted,
    pending: &mut Vec<(u32, u32, Cond)>,
) {
    let end = trie.nodes.get(i).map_or(i, |n| n.end as usize);
    // No stack is alive below: only the crossings' conditions apply.
    let dead = Alive { conds: &[], crossings, whole_stack };
    for sub in &trie.nodes[i..end] {
        dead.add_crossed(trie.ids_at(sub), sub.depth, acc, pending);
    }
}

/// Where a walk is alive at a trie node: the conditions of its stacks there, and the bottom
/// crossings along the path.
pub(super) struct Alive<'a> {
    pub(super) conds: &'a [Cond],
    pub(super) crossings: &'a [(u32, Cond)],
    pub(super) whole_stack: bool,
}

impl Alive<'_> {
    /// Adds the tokens `ids` ending at a trie node of `depth`: accepted under each condition
    /// of the stacks and of a crossing at that very depth. A crossing above leaves them
    /// pending under its condition as well, unless they are accepted whatever the count
    /// (only a relaxed walk has other conditions, and one of its stacks may hold where the
    /// other does not).
    #[inline(always)]
    pub(super) fn add(&self, ids: &[u32], depth: u32, acc: &mut Accepted, pending: &mut Vec<(u32, u32, Cond)>) {
        if self.crossings.is_empty() {
            // The walk's hottest case (inside a string body): kept to the bare loop.
            for &id in ids {
                for &c in self.conds {
                    acc.add(id, c);
                }
            }
        } else {
            self.add_crossed(ids, depth, acc, pending);
        }
    }

    /// [`Alive::add`] with crossings along the path (also for a dead subtree, without
    /// conditions of its own: [`dead_subtree`]).
    pub(super) fn add_crossed(&self, ids: &[u32], depth: u32, acc: &mut Accepted, pending: &mut Vec<(u32, u32, Cond)>) {
        let unconditional = self.conds.contains(&Cond::Always);
        for &id in ids {
            for &c in self.conds {
                acc.add(id, c);
            }
            for &(j, c) in self.crossings {
                if j == depth {
                    // Crossed exactly at its last byte: nothing left to check.
                    acc.add(id, c);
                } else if !unconditional && !self.whole_stack {
                    pending.push((id, j, c));
                }
            }
        }
    }
}

/// A single stack at a plain node ([`State::plain_parts`]) at some trie node: the walk of
/// that node's subtree, while every step stays on plain nodes, needs neither configurations
/// nor crossing bookkeeping (plain nodes cannot complete a rule), so it runs as a tight loop
/// of one automaton step per trie node — most of the vocabulary, inside a string body.
pub(super) struct PlainRun<'a> {
    /// The automaton node the stack is at.
    pub(super) from: NodeId,
    /// The configuration whose single stack this is, with its top moved.
    pub(super) base: u32,
    /// The conditions of the stack.
    pub(super) conds: &'a [Cond],
    /// The bottom crossings along the path so far (all above the run).
    pub(super) crossings: &'a [(u32, Cond)],
    pub(super) whole_stack: bool,
}

impl PlainRun<'_> {
    /// Walks the descendants of trie node `start`. Returns the index of the next node for the
    /// general walk: the end of `start`'s subtree, or the first descendant whose step lands
    /// on a node that is not plain (`path` then holds the state of every depth above it, as
    /// the general walk would have left it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk(
        &self,
        trie: &ByteTrie,
        pda: &Pda,
        start: usize,
        acc: &mut Accepted,
        pending: &mut Vec<(u32, u32, Cond)>,
        path: &mut Vec<State>,
        nodes_by_depth: &mut Vec<NodeId>,
    ) -> usize {
        let Some(root) = trie.nodes.get(start) else { return start + 1 };
        let base_depth = root.depth as usize;
        let end = root.end as usize;
        nodes_by_depth.clear();
        nodes_by_depth.push(self.from);
        let mut i = start + 1;
        while i < end {
            let node = &trie.nodes[i];
            let rel = node.depth as usize - base_depth;
            nodes_by_depth.truncate(rel);
            let from = nodes_by_depth[rel - 1];
            match pda.step_to_plain(pda.node(from), node.byte) {
                None => {
                    if !self.crossings.is_empty() {
                        dead_subtree(trie, i, self.crossings, self.whole_stack, acc, pending);
                    }
                    i = node.end as usize;
                }
                Some((t, true)) => {
                    nodes_by_depth.push(t);
                    let ids = trie.ids_at(node);
                    if !ids.is_empty() {
                        let alive =
                            Alive { conds: self.conds, crossings: self.crossings, whole_stack: self.whole_stack };
                        alive.add(ids, node.depth, acc, pending);
                    }
                    i += 1;
                }
                Some(_) => {
                    // The general walk takes over at `i`, from its parent's state.
                    let base = self.base;
                    path.extend(nodes_by_depth[1..].iter().map(|&n| State::plain(n, base)));
                    return i;
                }
            }
        }
        end
    }
}

/// Replayed memos that accept their whole subtree but a few ids
/// ([`super::memo::SubtreeAccepted::AllBut`]), applied once the walk is done.
#[derive(Default)]
pub(super) struct WholeSubtrees {
    /// The subtrees' first bytes.
    pub(super) bytes: Vec<u8>,
    /// The ids of those subtrees not accepted.
    pub(super) excepted: Vec<u32>,
}

impl WholeSubtrees {
    /// ORs each subtree's tokens into `always` a word at a time, then clears the exceptions
    /// (subtrees are disjoint, so nothing else set those).
    pub(super) fn apply(&self, index: &TokenIndex, always: &mut [u32]) {
        match self.bytes.as_slice() {
            [] => {}
            &[byte] => or_into(always, index.subtree_ids(byte)),
            bytes => or_into(always, &index.subtree_union(bytes)),
        }
        for &id in &self.excepted {
            if let Some(w) = always.get_mut((id / 32) as usize) {
                *w &= !(1 << (id % 32));
            }
        }
    }
}

/// The accepted tokens of [`Classified::compute`]'s walk: unconditional ones in a bitset
/// (with their count), conditional ones listed.
pub(super) struct Accepted {
    pub(super) always: Vec<u32>,
    pub(super) always_count: usize,
    /// The ids set in `always`, while they fit a list entry (complete iff
    /// `always_ids.len() == always_count`): small sets skip a scan of the bitset.
    pub(super) always_ids: Vec<u32>,
    pub(super) conditional: Vec<(u32, Cond)>,
    /// While `logging`: the ids newly set in `always` (what a [`SubtreeMemo`] records).
    pub(super) log: Vec<u32>,
    pub(super) logging: bool,
}

impl Accepted {
    /// Nothing accepted yet: `always` is a zeroed bitset, `conditional` an empty list (both
    /// passed in for their buffers).
    pub(super) fn new(always: Vec<u32>, conditional: Vec<(u32, Cond)>) -> Accepted {
        Accepted { always, always_count: 0, always_ids: Vec::new(), conditional, log: Vec::new(), logging: false }
    }

    /// Adds, unconditionally, an id the walk has not set yet (each token sits at one trie
    /// node, so the ids of a replayed subtree are new): no test, no list, no log. The count
    /// stays exact; only the short id list stops being complete, which costs a bitset scan
    /// later, never a wrong result.
    #[inline]
    pub(super) fn add_fresh(&mut self, id: u32) {
        if let Some(w) = self.always.get_mut((id / 32) as usize) {
            *w |= 1 << (id % 32);
            self.always_count += 1;
        }
    }

    #[inline]
    pub(super) fn add(&mut self, id: u32, c: Cond) {
        if c == Cond::Always {
            if let Some(w) = self.always.get_mut((id / 32) as usize) {
                let bit = 1 << (id % 32);
                if *w & bit == 0 {
                    *w |= bit;
                    self.always_count += 1;
                    if self.logging {
                        self.log.push(id);
                    }
                    if self.always_ids.len() * 4 < self.always.len() {
                        self.always_ids.push(id);
                    }
                }
            }
        } else {
            self.conditional.push((id, c));
        }
    }
}

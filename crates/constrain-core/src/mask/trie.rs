//! A byte trie over token strings, stored flat in preorder.
//!
//! Tokens are sorted by their bytes and laid out depth-first, so a walk is one forward pass:
//! a node's subtree is the contiguous range `index..end`, and skipping a dead prefix is a
//! jump to `end`. Several ids with the same bytes share one node. The same structure serves
//! the whole vocabulary ([`super::TokenIndex`]) and the small per-state sets of token
//! suffixes that must be checked against the real stack at run time.

use crate::util::ByteSet;

/// One node: the byte on the edge into it, its depth (bytes from the root, ≥ 1), where its
/// subtree ends, and the ids of the tokens that end exactly here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TrieNode {
    pub byte: u8,
    pub depth: u32,
    /// One past the last node of this node's subtree.
    pub end: u32,
    pub ids_start: u32,
    pub ids_end: u32,
}

/// A flat preorder byte trie mapping byte strings to token ids.
#[derive(Clone, Debug, Default)]
pub(crate) struct ByteTrie {
    pub nodes: Box<[TrieNode]>,
    pub ids: Box<[u32]>,
    /// The first-byte nodes (depth 1) in order, as (index, byte): a walk that skips the
    /// first bytes its context refuses reads this short list instead of nodes spread over
    /// the whole trie (each a likely cache miss at 129k tokens).
    pub roots: Box<[(u32, u8)]>,
}

impl ByteTrie {
    /// Builds the trie from `(bytes, id)` pairs (any order; empty strings are dropped).
    pub fn build<'a>(items: impl IntoIterator<Item = (&'a [u8], u32)>) -> ByteTrie {
        let mut items: Vec<(&[u8], u32)> = items.into_iter().filter(|(b, _)| !b.is_empty()).collect();
        items.sort_unstable();
        let mut nodes: Vec<TrieNode> = Vec::new();
        let mut ids: Vec<u32> = Vec::with_capacity(items.len());
        // Node indices along the current path; path[k] is the node at depth k + 1.
        let mut path: Vec<usize> = Vec::new();
        let mut prev: &[u8] = &[];
        for (bytes, id) in items {
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > common {
                if let Some(done) = path.pop() {
                    nodes[done].end = nodes.len() as u32;
                }
            }
            for (k, &byte) in bytes.iter().enumerate().skip(common) {
                nodes.push(TrieNode {
                    byte,
                    depth: k as u32 + 1,
                    end: 0,
                    ids_start: ids.len() as u32,
                    ids_end: ids.len() as u32,
                });
                path.push(nodes.len() - 1);
            }
            // The token ends at the last node of the path; equal byte strings are adjacent
            // in sorted order, so a node's ids stay contiguous.
            if let Some(&last) = path.last() {
                ids.push(id);
                nodes[last].ids_end = ids.len() as u32;
            }
            prev = bytes;
        }
        for done in path {
            nodes[done].end = nodes.len() as u32;
        }
        let roots = nodes.iter().enumerate().filter(|(_, n)| n.depth == 1).map(|(i, n)| (i as u32, n.byte)).collect();
        ByteTrie { nodes: nodes.into_boxed_slice(), ids: ids.into_boxed_slice(), roots }
    }

    /// The trie of the ids `keep` keeps (asked by their position in [`ByteTrie::ids`], so a
    /// caller's per-token table is read in order), equal to [`ByteTrie::build`] over their
    /// strings but made by copying nodes, with no sorting or byte comparisons. `held(i)`
    /// says whether node `i`'s subtree (the node included) keeps an id (a summary made once
    /// by [`ByteTrie::or_below`]): only those nodes are visited, and the first-byte nodes of
    /// the rest.
    pub fn filtered(&self, held: impl Fn(usize) -> bool, keep: impl Fn(usize) -> bool) -> ByteTrie {
        let mut nodes: Vec<TrieNode> = Vec::new();
        let mut ids: Vec<u32> = Vec::new();
        // The copied nodes whose subtree is still open: (new index, old end).
        let mut open: Vec<(usize, u32)> = Vec::new();
        let mut i = 0;
        while let Some(&node) = self.nodes.get(i) {
            while open.last().is_some_and(|&(_, end)| end as usize <= i) {
                if let Some((at, _)) = open.pop() {
                    nodes[at].end = nodes.len() as u32;
                }
            }
            if !held(i) {
                i = node.end as usize;
                continue;
            }
            let ids_start = ids.len() as u32;
            let own = node.ids_start as usize..node.ids_end as usize;
            ids.extend(own.filter(|&at| keep(at)).filter_map(|at| self.ids.get(at).copied()));
            open.push((nodes.len(), node.end));
            nodes.push(TrieNode { end: 0, ids_start, ids_end: ids.len() as u32, ..node });
            i += 1;
        }
        for (at, _) in open {
            nodes[at].end = nodes.len() as u32;
        }
        let roots = nodes.iter().enumerate().filter(|(_, n)| n.depth == 1).map(|(i, n)| (i as u32, n.byte)).collect();
        ByteTrie { nodes: nodes.into_boxed_slice(), ids: ids.into_boxed_slice(), roots }
    }

    /// Per node, the OR of `value` over the ids at the node and below it (`value` asked by
    /// position in [`ByteTrie::ids`]): a summary that tells which subtrees to skip.
    pub fn or_below(&self, value: impl Fn(usize) -> u32) -> Box<[u32]> {
        let mut below = vec![0u32; self.nodes.len()];
        for i in (0..self.nodes.len()).rev() {
            let node = self.nodes[i];
            let mut v = (node.ids_start as usize..node.ids_end as usize).fold(0, |v, at| v | value(at));
            let mut child = i + 1;
            while child < node.end as usize {
                v |= below[child];
                child = self.nodes[child].end as usize;
            }
            below[i] = v;
        }
        below.into_boxed_slice()
    }

    /// Where a forward walk standing at node `i` goes on when it takes only the first bytes
    /// in `live`: `i` itself, unless `i` is a first-byte node whose byte `live` lacks; then
    /// the next one whose byte it holds (`nodes.len()` past the last), reached through
    /// [`ByteTrie::roots`] without touching the nodes in between. `cursor` starts at 0 and
    /// keeps the first-byte nodes not reached yet; a walk never jumps past one unseen.
    #[inline]
    pub fn skip_dead_roots(&self, i: usize, cursor: &mut usize, live: &ByteSet) -> usize {
        if self.roots.get(*cursor).is_none_or(|&(r, _)| r as usize != i) {
            return i;
        }
        while self.roots.get(*cursor).is_some_and(|&(_, b)| !live.contains(b)) {
            *cursor += 1;
        }
        let at = self.roots.get(*cursor).map_or(self.nodes.len(), |&(r, _)| r as usize);
        *cursor += 1;
        at
    }

    /// Whether the trie holds no strings.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The ids of tokens ending at `node`.
    #[inline]
    pub fn ids_at(&self, node: &TrieNode) -> &[u32] {
        &self.ids[node.ids_start as usize..node.ids_end as usize]
    }

    /// Where the ids of the tokens strictly below node `i` (its descendants, not the node's
    /// own tokens) sit in `ids`.
    pub fn descendant_ids(&self, i: usize) -> std::ops::Range<usize> {
        let Some(node) = self.nodes.get(i) else { return 0..0 };
        let end = node.end as usize;
        let last = self.nodes.get(end.wrapping_sub(1)).map_or(node.ids_end, |n| n.ids_end);
        node.ids_end as usize..last.max(node.ids_end) as usize
    }

    /// The node spelling `bytes`, if some token starts with them.
    pub fn find(&self, bytes: &[u8]) -> Option<usize> {
        // Children of the node at hand lie in `i..end`, each sibling's subtree skipped whole.
        let (mut i, mut end) = (0usize, self.nodes.len());
        for (k, &b) in bytes.iter().enumerate() {
            loop {
                let node = self.nodes.get(i).filter(|_| i < end)?;
                if node.byte == b {
                    break;
                }
                if node.byte > b {
                    return None;
                }
                i = node.end as usize;
            }
            if k + 1 == bytes.len() {
                return Some(i);
            }
            end = self.nodes[i].end as usize;
            i += 1;
        }
        None
    }

    /// The ids of the tokens at node `i` and below it.
    pub fn ids_from(&self, i: usize) -> &[u32] {
        let Some(node) = self.nodes.get(i) else { return &[] };
        let below = self.descendant_ids(i);
        &self.ids[node.ids_start as usize..below.end.max(node.ids_end as usize)]
    }

    /// Heap bytes held.
    pub fn memory_usage(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<TrieNode>() + self.ids.len() * 4 + self.roots.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rebuilds every (string, id) pair by walking the trie.
    fn contents(t: &ByteTrie) -> Vec<(Vec<u8>, u32)> {
        let mut out = Vec::new();
        let mut path: Vec<u8> = Vec::new();
        for n in t.nodes.iter() {
            path.truncate(n.depth as usize - 1);
            path.push(n.byte);
            for &id in t.ids_at(n) {
                out.push((path.clone(), id));
            }
        }
        out
    }

    /// A filtered trie is the trie built from the kept strings, whichever are kept.
    #[test]
    fn filtered_is_built_from_what_it_keeps() {
        let words: Vec<Vec<u8>> =
            (0..300u32).map(|k| (0..1 + k % 5).map(|d| b"abc"[((k * 7 + d * 13) % 3) as usize]).collect()).collect();
        let items: Vec<(&[u8], u32)> = words.iter().enumerate().map(|(id, w)| (w.as_slice(), id as u32)).collect();
        let trie = ByteTrie::build(items.iter().copied());
        // Through the summary of the subtrees a caller keeps.
        let filtered = |keep: &dyn Fn(u32) -> bool| {
            let below = trie.or_below(|at| u32::from(keep(trie.ids[at])));
            trie.filtered(|i| below[i] != 0, |at| keep(trie.ids[at]))
        };
        for m in [1u32, 2, 3, 7, 50, 301] {
            let keep = |id: u32| id % m == 0 && id != 7;
            let cut = filtered(&keep);
            let built = ByteTrie::build(items.iter().copied().filter(|&(_, id)| keep(id)));
            assert_eq!((&cut.nodes, &cut.ids, &cut.roots), (&built.nodes, &built.ids, &built.roots), "every {m}th");
        }
        assert!(filtered(&|_| false).is_empty());
        // A summary of several bits, asked for one of them.
        let below = trie.or_below(|at| trie.ids[at] % 3);
        let cut = trie.filtered(|i| below[i] & 2 != 0, |at| trie.ids[at] % 3 == 2);
        let built = ByteTrie::build(items.iter().copied().filter(|&(_, id)| id % 3 == 2));
        assert_eq!((&cut.nodes, &cut.ids, &cut.roots), (&built.nodes, &built.ids, &built.roots), "by summary");
    }

    #[test]
    fn shared_prefixes_and_duplicate_strings() {
        let items: Vec<(&[u8], u32)> = vec![(b"ab", 0), (b"a", 1), (b"abc", 2), (b"b", 3), (b"ab", 4), (b"", 5)];
        let t = ByteTrie::build(items);
        // a, ab, abc, b
        assert_eq!(t.nodes.len(), 4);
        assert_eq!(t.nodes[0].end, 3, "subtree of `a` spans a, ab, abc");
        assert_eq!(t.ids_at(&t.nodes[1]), &[0, 4], "both ids of `ab` share a node");
        assert_eq!(t.find(b"ab"), Some(1));
        assert_eq!((t.find(b"ac"), t.find(b"abcd"), t.find(b"c")), (None, None, None));
        assert_eq!(t.ids_from(0), &[1, 0, 4, 2], "a, both ab, abc");
        assert_eq!(t.ids_from(3), &[3]);
        assert_eq!(&*t.roots, &[(0, b'a'), (3, b'b')]);
        let (mut live, mut cursor) = (ByteSet::default(), 0);
        live.insert(b'b');
        assert_eq!(t.skip_dead_roots(0, &mut cursor, &live), 3, "`a` skipped whole");
        assert_eq!(t.skip_dead_roots(3, &mut cursor, &live), 3, "past its cursor: no jump");
        assert_eq!(t.skip_dead_roots(0, &mut 0, &ByteSet::default()), 4, "nothing live: the end");
        let mut got = contents(&t);
        got.sort();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), 1),
                (b"ab".to_vec(), 0),
                (b"ab".to_vec(), 4),
                (b"abc".to_vec(), 2),
                (b"b".to_vec(), 3)
            ]
        );
    }
}

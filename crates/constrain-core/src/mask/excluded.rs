use super::cache::Cached;
use super::classify::{Classified, WalkScratch};
use super::entry::Entry;
use super::index::TokenIndex;
use crate::automaton::exec::{Frame, BOTTOM};
use crate::automaton::keys::NodeKeys;
use crate::automaton::Pda;
use crate::util::hash128;
use crate::Limits;
use std::sync::Arc;

impl TokenIndex {
    /// The entry of a context whose single frame is at a node of a string-exclusion rule
    /// ([`crate::automaton::ExcludedWords`]), derived from the classification of the shared
    /// string rest instead of a walk: every schema's "other property name" differs only by
    /// its declared names, and a walk costs 0.1–5 ms where this costs a copy of one bitset.
    /// `None` when the frame is at no such node.
    pub(super) fn excluding_entry(
        &self,
        pda: &Pda,
        node_keys: &NodeKeys,
        limits: &Limits,
        frame: &Frame,
        scratch: &mut WalkScratch,
    ) -> Option<Entry> {
        let (rest, words) = pda.excluded().at(frame.node())?;
        // The frame's own byte edges take the first byte; its calls are tops of their own.
        let node = pda.node(frame.node());
        let mut firsts = [0u64; 4];
        for b in 0..=255u8 {
            if pda.step(node, b).is_some() {
                firsts[b as usize / 64] |= 1 << (b % 64);
            }
        }
        let first_byte = |b: u8| firsts[b as usize / 64] >> (b % 64) & 1 == 1;
        let like = frame.with_node(rest);
        let whole_stack = like.parent() == BOTTOM;
        let key = hash128(&(node_keys.get(pda, rest), 0x5E57u16, whole_stack, firsts));
        let cached = self.cache.classified(key);
        let classified = cached.unwrap_or_else(|| {
            let mut classified = Classified::compute(self, pda, node_keys, limits, &[like], None, scratch);
            classified.keep_first_bytes(self, first_byte);
            let classified = Arc::new(classified);
            if classified.cut.out_of_fuel() {
                return classified;
            }
            self.cache.insert(key, Cached::Classified(classified.clone()), classified.memory_usage());
            classified
        });
        Some(classified.derive_excluding(self, words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::{FrameId, NodeId};
    use crate::mask::entry::TokenSet;
    use crate::vocab::Vocabulary;

    fn ids_of(set: &TokenSet, words: usize) -> Vec<u32> {
        let mut mask = vec![0u32; words];
        set.add_to(&mut mask);
        (0..words as u32 * 32).filter(|&id| mask[(id / 32) as usize] >> (id % 32) & 1 == 1).collect()
    }

    /// At every node of an "other property name" rule, the entry derived from the shared
    /// string rest (minus the declared names) equals the entry a walk computes, on a
    /// vocabulary with every short string over the names' letters, quotes and a backslash.
    #[test]
    fn excluded_names_derive_what_a_walk_computes() {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let alphabet = b"abx\":\\ 1";
        let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            strings =
                strings.iter().flat_map(|s| alphabet.iter().map(move |&c| [s.as_slice(), &[c]].concat())).collect();
            tokens.extend(strings.iter().filter(|s| s.len() > 1).cloned());
        }
        tokens.extend([b"abx\":\"".to_vec(), "é\"".as_bytes().to_vec(), b"\\u0061\"".to_vec()]);
        let eos = crate::TokenId(tokens.len() as u32);
        tokens.push(Vec::new());
        let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("vocabulary"));
        let schema = serde_json::json!({
            "properties": {"ab": {"type": "integer"}, "abx": {}, "b": {}, "x1": {}, "": {}},
            "additionalProperties": {"type": "string"}
        });
        let grammar = crate::test_support::default_schema_grammar(&schema);
        let limits = Limits::default();
        let pda = Pda::build(&grammar, &limits).expect("automaton");
        let node_keys = NodeKeys::new(&pda);
        let words = index.vocab().mask_words();
        let nodes: Vec<NodeId> =
            (0..pda.num_states() as u32).map(NodeId::new).filter(|&n| pda.excluded().at(n).is_some()).collect();
        // The node after the quote (where the name "" ends), and one per prefix of the other
        // names: a, ab, abx, b, x, x1.
        assert_eq!(nodes.len(), 7, "{}", pda.listing());
        for node in nodes {
            for parent in [BOTTOM, FrameId::new(0)] {
                let frame = Frame::new(node, 0, parent, 1);
                let scratch = &mut WalkScratch::default();
                let derived =
                    index.excluding_entry(&pda, &node_keys, &limits, &frame, scratch).expect("an exclusion node");
                let walked = Classified::compute(&index, &pda, &node_keys, &limits, &[frame], None, scratch);
                let walked = walked.derive(&index, None);
                let (d, w) = (ids_of(&derived.accepted, words), ids_of(&walked.accepted, words));
                let vocab = index.vocab();
                let text = |id: &u32| String::from_utf8_lossy(vocab.token_bytes(crate::TokenId(*id))).into_owned();
                let only = |a: &[u32], b: &[u32]| a.iter().filter(|i| !b.contains(i)).map(text).collect::<Vec<_>>();
                assert!(d == w, "node {node:?}: only derived {:?}, only walked {:?}", only(&d, &w), only(&w, &d));
                assert_eq!(derived.suffixes.nodes, walked.suffixes.nodes, "node {node:?}");
                assert_eq!(derived.suffixes.ids, walked.suffixes.ids, "node {node:?}");
            }
        }
    }
}

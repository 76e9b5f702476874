//! Stage 4: per-state token masks over a vocabulary trie (API pinned; being written).
use crate::vocab::Vocabulary;
use std::sync::Arc;

/// Everything that depends only on the tokenizer: the vocabulary, its byte trie, and the cache
/// of per-state masks shared by every constraint compiled against it. Build once per tokenizer.
pub struct TokenIndex {
    vocab: Vocabulary,
}

impl TokenIndex {
    /// Builds the trie for `vocab`.
    pub fn new(vocab: Vocabulary) -> Arc<TokenIndex> {
        Arc::new(TokenIndex { vocab })
    }
    /// The vocabulary.
    pub fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }
}

/// Whether token `id` is allowed in `mask`.
#[inline]
pub fn is_allowed(mask: &[u32], id: crate::TokenId) -> bool {
    mask.get(id.index() / 32).is_some_and(|w| w >> (id.index() % 32) & 1 == 1)
}

//! The token side: a [`Vocabulary`] maps token ids to the exact bytes each token emits.
//!
//! Input: a HF `tokenizer.json` ([`Vocabulary::from_tokenizer_json`]), or a plain list of byte
//! strings ([`Vocabulary::new`], which the llama.cpp engine feeds from the GGUF file).
//! Output: what [`crate::mask`] needs and nothing more — token bytes, which ids are special
//! (never allowed by a grammar), the *set* of end-of-generation ids, and the mask width.
//!
//! This module knows nothing about grammars, so it can be tested with a toy vocabulary.
//!
//! ## Example
//!
//! ```rust
//! use constrain::{TokenId, Vocabulary};
//!
//! let tokens = vec![b"{".to_vec(), b"}".to_vec(), b"\"a\"".to_vec(), b"</s>".to_vec()];
//! let vocab = Vocabulary::new(tokens, &[], &[TokenId(3)]).unwrap();
//! assert_eq!(vocab.token_bytes(TokenId(2)), b"\"a\"");
//! assert!(vocab.is_eos(TokenId(3)));
//! assert_eq!(vocab.mask_words(), 1); // one u32 holds the 4 tokens' bits
//! ```

mod tokenizer_json;

use std::path::Path;

/// A token id: an index into the model's logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenId(pub u32);

impl TokenId {
    /// The id as an index into a logits or mask slice.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Token id → bytes, plus which ids a grammar may never emit and which ids end generation.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    /// Bytes each token emits; empty for special tokens.
    tokens: Vec<Vec<u8>>,
    /// `special[i]`: token `i` is a control/special token, never produced by a grammar.
    special: Vec<bool>,
    /// Every end-of-generation id (EOS, EOT, `<|im_end|>`, …), allowed only where the grammar
    /// may stop.
    eos: Vec<TokenId>,
    /// Width of the masks handed out: at least `tokens.len()`; models often have more logits
    /// than tokenizer entries.
    mask_len: usize,
}

impl Vocabulary {
    /// A vocabulary from each token's bytes, the ids of special tokens, and the
    /// end-of-generation ids. End-of-generation ids are treated as special for grammar purposes.
    ///
    /// Fails if an id is out of range or no end-of-generation id is given.
    pub fn new(tokens: Vec<Vec<u8>>, special: &[TokenId], eos: &[TokenId]) -> Result<Self, Error> {
        if tokens.len() > u32::MAX as usize {
            return Err(Error::TooLarge(tokens.len()));
        }
        let mut is_special = vec![false; tokens.len()];
        for &id in special.iter().chain(eos) {
            match is_special.get_mut(id.index()) {
                Some(s) => *s = true,
                None => return Err(Error::IdOutOfRange { id: id.0, len: tokens.len() }),
            }
        }
        if eos.is_empty() {
            return Err(Error::NoEos);
        }
        let mut eos = eos.to_vec();
        eos.sort();
        eos.dedup();
        let mask_len = tokens.len();
        Ok(Vocabulary { tokens, special: is_special, eos, mask_len })
    }

    /// The 256 single bytes (id = the byte) and one end-of-generation id, 256: byte-level
    /// matching without a tokenizer (`constrain check`, the differential fuzzer, tests).
    pub fn bytes() -> Self {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(Vec::new());
        let mut special = vec![false; 257];
        special[256] = true;
        Vocabulary { tokens, special, eos: vec![TokenId(256)], mask_len: 257 }
    }

    /// Loads a HF `tokenizer.json` (byte-level BPE or SentencePiece-style), decoding every
    /// token to the exact bytes it emits. Added tokens marked `special` become special ids;
    /// end-of-generation ids are guessed from the usual names (`</s>`, `<|endoftext|>`,
    /// `<|im_end|>`, `<|eot_id|>`, `<｜end▁of▁sentence｜>`, …) unless `eos` is given.
    pub fn from_tokenizer_json(path: impl AsRef<Path>, eos: Option<&[TokenId]>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text =
            std::fs::read(path).map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
        tokenizer_json::load(&text, eos)
    }

    /// Same as [`Vocabulary::from_tokenizer_json`] from the file's bytes.
    pub fn from_tokenizer_json_bytes(json: &[u8], eos: Option<&[TokenId]>) -> Result<Self, Error> {
        tokenizer_json::load(json, eos)
    }

    /// Widens the masks to `mask_len` entries (the model's logits width). Ids past the
    /// tokenizer are never allowed. Fails if `mask_len` is smaller than the vocabulary.
    pub fn with_mask_len(mut self, mask_len: usize) -> Result<Self, Error> {
        if mask_len < self.tokens.len() {
            return Err(Error::MaskTooNarrow { mask_len, vocab: self.tokens.len() });
        }
        self.mask_len = mask_len;
        Ok(self)
    }

    /// Number of token ids the tokenizer defines.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True for an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Width of masks, in tokens (≥ [`Vocabulary::len`]).
    pub fn mask_len(&self) -> usize {
        self.mask_len
    }

    /// Number of `u32` words in a mask: `ceil(mask_len / 32)`.
    pub fn mask_words(&self) -> usize {
        self.mask_len.div_ceil(32)
    }

    /// The bytes token `id` emits (empty for special or unknown ids).
    pub fn token_bytes(&self, id: TokenId) -> &[u8] {
        self.tokens.get(id.index()).map(|t| t.as_slice()).unwrap_or(&[])
    }

    /// Whether `id` is a special (control) token, never allowed by a grammar.
    pub fn is_special(&self, id: TokenId) -> bool {
        self.special.get(id.index()).copied().unwrap_or(false)
    }

    /// Every end-of-generation id, sorted.
    pub fn eos_tokens(&self) -> &[TokenId] {
        &self.eos
    }

    /// Whether `id` ends generation.
    pub fn is_eos(&self, id: TokenId) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    /// Iterates `(id, bytes)` over the tokens a grammar may produce: not special, not empty.
    pub fn grammar_tokens(&self) -> impl Iterator<Item = (TokenId, &[u8])> {
        self.tokens
            .iter()
            .enumerate()
            .filter(|(i, t)| !self.special[*i] && !t.is_empty())
            .map(|(i, t)| (TokenId(i as u32), t.as_slice()))
    }
}

/// Why a vocabulary could not be built or loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read tokenizer file {path}: {message}")]
    Io {
        /// The file's path.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The tokenizer file is not a tokenizer this crate understands.
    #[error("invalid tokenizer.json: {0}")]
    Format(String),
    /// A special or end-of-generation id past the end of the vocabulary.
    #[error("token id {id} is out of range for a vocabulary of {len} tokens")]
    IdOutOfRange {
        /// The id given.
        id: u32,
        /// The number of tokens.
        len: usize,
    },
    /// No end-of-generation id was given or found.
    #[error("no end-of-generation token: pass the EOS ids explicitly")]
    NoEos,
    /// More than `u32::MAX` tokens.
    #[error("vocabulary of {0} tokens is too large")]
    TooLarge(usize),
    /// The mask width is smaller than the vocabulary.
    #[error("mask length {mask_len} is smaller than the vocabulary ({vocab} tokens)")]
    MaskTooNarrow {
        /// The mask width asked for, in tokens.
        mask_len: usize,
        /// The number of tokens.
        vocab: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eos_is_a_set_and_special() {
        let v = Vocabulary::new(
            vec![b"a".to_vec(), b"".to_vec(), b"b".to_vec(), b"".to_vec()],
            &[],
            &[TokenId(3), TokenId(1), TokenId(3)],
        )
        .unwrap();
        assert_eq!(v.eos_tokens(), &[TokenId(1), TokenId(3)]);
        assert!(v.is_special(TokenId(1)) && v.is_eos(TokenId(3)));
        let ids: Vec<u32> = v.grammar_tokens().map(|(i, _)| i.0).collect();
        assert_eq!(ids, vec![0, 2]);
    }

    #[test]
    fn mask_len_widens_but_never_narrows() {
        let v = Vocabulary::new(vec![b"a".to_vec(); 40], &[], &[TokenId(0)]).unwrap();
        assert_eq!(v.mask_words(), 2);
        let v = v.with_mask_len(100).unwrap();
        assert_eq!(v.mask_words(), 4);
        assert!(v.with_mask_len(10).is_err());
        assert!(Vocabulary::new(vec![], &[], &[TokenId(5)]).is_err());
    }
}

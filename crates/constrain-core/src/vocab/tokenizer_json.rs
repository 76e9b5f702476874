//! Loading a Hugging Face `tokenizer.json` into a [`Vocabulary`].
//!
//! Input: the bytes of a `tokenizer.json` file. Output: every token id mapped to the exact bytes
//! the token emits when decoded, which ids are special, and the end-of-generation set.
//!
//! How: the file is read with `serde_json` (only the `model.vocab`, `added_tokens` and `decoder`
//! parts; the merges are skipped), and each token string is turned into bytes according to the
//! decoder the file declares:
//!
//! - **Byte-level BPE** (GPT-2, Llama 3, Qwen, DeepSeek: decoder `ByteLevel`): every character of
//!   a token stands for one byte through GPT-2's byte↔unicode table (`Ġ` is the space byte);
//!   the table is inverted here.
//! - **SentencePiece** (Llama 2, Mistral, Gemma: decoder `Replace("▁", " ")`/`Metaspace`,
//!   `ByteFallback`): `▁` becomes a space and `<0xNN>` byte-fallback tokens become the single
//!   byte `NN`. A decoder `Strip` that removes the leading space of the whole text only affects
//!   the first token of a sequence and is ignored: masks are over the bytes a token appends.
//! - Models whose token bytes depend on the neighbouring tokens (WordPiece `##` pieces,
//!   WordLevel, BPE with a `</w>` word suffix, CTC) are refused with [`Error::Format`] rather
//!   than given approximate bytes.
//!
//! Added tokens override the model's entry for their id: `special: true` ones become special
//! ids (no bytes, never produced by a grammar); others emit their content text verbatim. Ids
//! that no entry names ("holes") are special with no bytes. The model's `unk_token` is special.
//! The vocabulary size is the largest id plus one.

use super::{Error, TokenId, Vocabulary};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;

/// Token names that end generation in common chat models; any of them present in the file
/// joins the end-of-generation set when the caller gives none.
const EOS_NAMES: &[&str] = &[
    "</s>",
    "<|endoftext|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<｜end▁of▁sentence｜>",
    "<eos>",
    "<|end|>",
];

/// Largest token id accepted; above this the file is considered malformed (a dense table of
/// that many entries would be allocated).
///
/// A constant of the algorithm, not a user limit: past it the file is an error.
const MAX_TOKEN_ID: u32 = (1 << 24) - 1;

/// Decoder nesting (`Sequence` inside `Sequence`) deeper than this is refused.
///
/// A constant of the algorithm, not a user limit: real tokenizers nest one level; past it
/// the file is an error.
const MAX_DECODER_DEPTH: usize = 8;

/// The parts of `tokenizer.json` that decide token bytes.
#[derive(Deserialize)]
struct TokenizerFile {
    model: Model,
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
    #[serde(default)]
    decoder: Option<serde_json::Value>,
    #[serde(default)]
    pre_tokenizer: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    vocab: VocabEntries,
    #[serde(default)]
    byte_fallback: bool,
    /// Unigram models name their unknown token by id, BPE/WordPiece by string.
    #[serde(default)]
    unk_token: Option<serde_json::Value>,
    #[serde(default)]
    unk_id: Option<u32>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
}

#[derive(Deserialize)]
struct AddedToken {
    id: u32,
    content: String,
    #[serde(default)]
    special: bool,
}

/// `model.vocab` in file order: a `{piece: id}` map (BPE, WordPiece, WordLevel) or a
/// `[[piece, score], …]` list whose index is the id (Unigram).
struct VocabEntries(Vec<(String, u32)>);

impl<'de> Deserialize<'de> for VocabEntries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VocabEntries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map from token to id, or a list of [token, score] pairs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VocabEntries, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((piece, id)) = map.next_entry::<String, u32>()? {
                    out.push((piece, id));
                }
                Ok(VocabEntries(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<VocabEntries, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some((piece, _score)) = seq.next_element::<(String, f64)>()? {
                    let id = u32::try_from(out.len()).map_err(|_| de::Error::custom("too many tokens"))?;
                    out.push((piece, id));
                }
                Ok(VocabEntries(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// How the file's decoder turns token strings into text.
#[derive(Default, Debug)]
struct DecodeRules {
    /// Characters stand for bytes through GPT-2's byte↔unicode table.
    byte_level: bool,
    /// `<0xNN>` tokens are the single byte `NN`.
    byte_fallback: bool,
    /// Literal replacements applied in order (`▁` → space).
    replacements: Vec<(String, String)>,
}

pub(crate) fn load(json: &[u8], eos: Option<&[TokenId]>) -> Result<Vocabulary, Error> {
    let file: TokenizerFile =
        serde_json::from_slice(json).map_err(|e| Error::Format(format!("not a tokenizer.json: {e}")))?;
    let model = &file.model;
    let kind = model.kind.as_deref().unwrap_or("BPE");
    match kind {
        "BPE" | "Unigram" => {}
        other => {
            return Err(Error::Format(format!(
                "{other} tokenizers are not supported: a token's bytes depend on its neighbours"
            )))
        }
    }
    if let Some(prefix) = model.continuing_subword_prefix.as_deref().filter(|p| !p.is_empty()) {
        return Err(Error::Format(format!(
            "BPE with continuing_subword_prefix {prefix:?} is not supported: a token's bytes depend on its neighbours"
        )));
    }
    if let Some(suffix) = model.end_of_word_suffix.as_deref().filter(|s| !s.is_empty()) {
        return Err(Error::Format(format!(
            "BPE with end_of_word_suffix {suffix:?} is not supported: a token's bytes depend on its neighbours"
        )));
    }

    let mut rules = DecodeRules::default();
    match &file.decoder {
        Some(decoder) if !decoder.is_null() => read_decoder(decoder, &mut rules, 0)?,
        _ => {
            // No decoder: a ByteLevel pre-tokenizer still means byte-mapped token strings.
            if file.pre_tokenizer.as_ref().is_some_and(|p| mentions_type(p, "ByteLevel", 0)) {
                rules.byte_level = true;
            }
        }
    }
    rules.byte_fallback |= model.byte_fallback;

    // Size: largest id over the model and the added tokens, plus one.
    let max_id = model
        .vocab
        .0
        .iter()
        .map(|(_, id)| *id)
        .chain(file.added_tokens.iter().map(|t| t.id))
        .max()
        .ok_or_else(|| Error::Format("the tokenizer has no tokens".into()))?;
    if max_id > MAX_TOKEN_ID {
        return Err(Error::Format(format!("token id {max_id} is implausibly large (limit {MAX_TOKEN_ID})")));
    }
    let len = max_id as usize + 1;

    let byte_of_char = byte_level_decode_table();
    let mut tokens: Vec<Option<Vec<u8>>> = vec![None; len];
    let mut special = vec![false; len];
    for (piece, id) in &model.vocab.0 {
        let slot = &mut tokens[*id as usize];
        if slot.is_some() {
            return Err(Error::Format(format!("token id {id} appears twice in model.vocab")));
        }
        *slot = Some(decode_piece(piece, &rules, &byte_of_char));
    }
    for added in &file.added_tokens {
        let i = added.id as usize;
        if added.special {
            special[i] = true;
            tokens[i] = Some(Vec::new());
        } else {
            tokens[i] = Some(added.content.as_bytes().to_vec());
        }
    }
    for unk in unk_ids(model) {
        if let Some(s) = special.get_mut(unk as usize) {
            *s = true;
            tokens[unk as usize] = Some(Vec::new());
        }
    }

    let eos_ids: Vec<TokenId> = match eos {
        Some(ids) => ids.to_vec(),
        None => guess_eos(&file),
    };
    if eos_ids.is_empty() {
        return Err(Error::NoEos);
    }

    let mut special_ids = Vec::new();
    let tokens: Vec<Vec<u8>> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            if t.is_none() || special[i] {
                special_ids.push(TokenId(i as u32));
            }
            match t {
                Some(bytes) if !special[i] => bytes,
                _ => Vec::new(),
            }
        })
        .collect();
    Vocabulary::new(tokens, &special_ids, &eos_ids)
}

/// Collects the decode rules of a decoder object (recursing into `Sequence`).
fn read_decoder(decoder: &serde_json::Value, rules: &mut DecodeRules, depth: usize) -> Result<(), Error> {
    if depth > MAX_DECODER_DEPTH {
        return Err(Error::Format("decoder nested too deeply".into()));
    }
    let kind = decoder.get("type").and_then(|t| t.as_str()).unwrap_or("");
    match kind {
        "Sequence" => {
            let parts = decoder
                .get("decoders")
                .and_then(|d| d.as_array())
                .ok_or_else(|| Error::Format("decoder Sequence without a `decoders` list".into()))?;
            for part in parts {
                read_decoder(part, rules, depth + 1)?;
            }
        }
        "ByteLevel" => rules.byte_level = true,
        "ByteFallback" => rules.byte_fallback = true,
        "Replace" => {
            let pattern = decoder.get("pattern").and_then(|p| p.get("String")).and_then(|s| s.as_str());
            let content = decoder.get("content").and_then(|c| c.as_str());
            match (pattern, content) {
                (Some(p), Some(c)) if !p.is_empty() => rules.replacements.push((p.to_string(), c.to_string())),
                _ => {
                    return Err(Error::Format(
                        "decoder Replace is supported only with a literal `String` pattern".into(),
                    ))
                }
            }
        }
        "Metaspace" => {
            let replacement = decoder.get("replacement").and_then(|r| r.as_str()).unwrap_or("▁");
            if !replacement.is_empty() {
                rules.replacements.push((replacement.to_string(), " ".to_string()));
            }
        }
        // Fuse joins strings (no effect on bytes); Strip only trims the start or end of the
        // whole decoded text, which a per-token mask cannot and need not model.
        "Fuse" | "Strip" => {}
        other => {
            return Err(Error::Format(format!(
                "decoder {other:?} is not supported: a token's bytes depend on its neighbours"
            )))
        }
    }
    Ok(())
}

/// Whether a (pre-tokenizer) object of type `kind` appears in `value`, looking into sequences.
fn mentions_type(value: &serde_json::Value, kind: &str, depth: usize) -> bool {
    if depth > MAX_DECODER_DEPTH {
        return false;
    }
    if value.get("type").and_then(|t| t.as_str()) == Some(kind) {
        return true;
    }
    ["pretokenizers", "decoders"].iter().any(|key| {
        value
            .get(key)
            .and_then(|v| v.as_array())
            .is_some_and(|parts| parts.iter().any(|p| mentions_type(p, kind, depth + 1)))
    })
}

/// The bytes a model token emits under `rules`.
fn decode_piece(piece: &str, rules: &DecodeRules, byte_of_char: &HashMap<char, u8>) -> Vec<u8> {
    if rules.byte_fallback {
        if let Some(b) = byte_fallback_value(piece) {
            return vec![b];
        }
    }
    let mut text = std::borrow::Cow::Borrowed(piece);
    for (from, to) in &rules.replacements {
        if text.contains(from.as_str()) {
            text = std::borrow::Cow::Owned(text.replace(from.as_str(), to));
        }
    }
    if rules.byte_level {
        let mut out = Vec::with_capacity(text.len());
        for c in text.chars() {
            match byte_of_char.get(&c) {
                Some(&b) => out.push(b),
                // Not in the byte table: a malformed or hand-added entry; keep its UTF-8.
                None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            }
        }
        out
    } else {
        text.into_owned().into_bytes()
    }
}

/// `<0xNN>` (two hex digits) → `NN`.
fn byte_fallback_value(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's byte↔unicode table, inverted: the printable Latin-1 bytes (`!`..=`~`, `¡`..=`¬`,
/// `®`..=`ÿ`) stand for themselves; the other 68 bytes, in increasing order, are written as
/// U+0100, U+0101, … (so the space byte 0x20 is `Ġ` U+0120).
fn byte_level_decode_table() -> HashMap<char, u8> {
    let stands_for_itself = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = HashMap::with_capacity(256);
    let mut next_shifted = 0x100u32;
    for b in 0..=255u8 {
        let c = if stands_for_itself(b) {
            char::from(b)
        } else {
            let c = char::from_u32(next_shifted).unwrap_or(char::REPLACEMENT_CHARACTER);
            next_shifted += 1;
            c
        };
        table.insert(c, b);
    }
    table
}

/// The model's unknown-token id, if it names one.
fn unk_ids(model: &Model) -> Vec<u32> {
    let mut out = Vec::new();
    if let Some(id) = model.unk_id {
        out.push(id);
    }
    match &model.unk_token {
        Some(serde_json::Value::String(name)) => {
            out.extend(model.vocab.0.iter().filter(|(p, _)| p == name).map(|(_, id)| *id));
        }
        Some(serde_json::Value::Number(n)) => out.extend(n.as_u64().and_then(|n| u32::try_from(n).ok())),
        _ => {}
    }
    out
}

/// The ids whose text is one of [`EOS_NAMES`], among the added tokens and the model vocabulary.
fn guess_eos(file: &TokenizerFile) -> Vec<TokenId> {
    let mut ids: Vec<TokenId> = file
        .added_tokens
        .iter()
        .filter(|t| EOS_NAMES.contains(&t.content.as_str()))
        .map(|t| TokenId(t.id))
        .chain(file.model.vocab.0.iter().filter(|(p, _)| EOS_NAMES.contains(&p.as_str())).map(|(_, id)| TokenId(*id)))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GPT-2 byte table in the forward direction, for building test files.
    fn char_of_byte() -> HashMap<u8, char> {
        byte_level_decode_table().into_iter().map(|(c, b)| (b, c)).collect()
    }

    /// A byte-level BPE tokenizer.json: ids 0..256 are the 256 single bytes, then a few merges,
    /// then `<|endoftext|>` (special) and `<tool>` (added, not special).
    fn byte_level_json() -> String {
        let map = char_of_byte();
        let mut vocab: Vec<(String, u32)> = (0..=255u8).map(|b| (map[&b].to_string(), b as u32)).collect();
        let merged = ["Ġw", "Ġwo", "{\"", "\":", "é", "ĊĊ"];
        // "é" is 0xC3 0xA9: its byte-level spelling is two table characters.
        let e_acute: String = "é".bytes().map(|b| map[&b]).collect();
        for (i, m) in merged.iter().enumerate() {
            let piece = if *m == "é" { e_acute.clone() } else { m.to_string() };
            vocab.push((piece, 256 + i as u32));
        }
        let vocab_json: Vec<String> =
            vocab.iter().map(|(p, id)| format!("{}: {id}", serde_json::to_string(p).unwrap())).collect();
        let c3 = map[&0xC3].to_string();
        let a9 = map[&0xA9].to_string();
        let merges = vec![
            vec!["Ġ".to_string(), "w".to_string()],
            vec!["Ġw".to_string(), "o".to_string()],
            vec!["{".to_string(), "\"".to_string()],
            vec!["\"".to_string(), ":".to_string()],
            vec![c3, a9],
            vec!["Ċ".to_string(), "Ċ".to_string()],
        ];
        format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {{"id": 262, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}},
    {{"id": 263, "content": "<tool>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}}
  ],
  "normalizer": null,
  "pre_tokenizer": {{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}},
  "post_processor": null,
  "decoder": {{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}},
  "model": {{"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
    "vocab": {{{}}}, "merges": {}}}}}"#,
            vocab_json.join(", "),
            serde_json::to_string(&merges).unwrap()
        )
    }

    /// A Llama-2-style SentencePiece BPE with byte fallback: `<unk>`, `<s>`, `</s>`, the 256
    /// `<0xNN>` tokens, then a few pieces. Id 300 is left unused (a hole).
    fn sentencepiece_json() -> String {
        let mut vocab: Vec<(String, u32)> = vec![("<unk>".into(), 0), ("<s>".into(), 1), ("</s>".into(), 2)];
        for b in 0..=255u32 {
            vocab.push((format!("<0x{b:02X}>"), 3 + b));
        }
        for (i, p) in ["▁", "▁a", "b", "▁ab", "é", "\"", ":", "a"].iter().enumerate() {
            vocab.push((p.to_string(), 259 + i as u32));
        }
        vocab.push(("x".into(), 301));
        let vocab_json: Vec<String> =
            vocab.iter().map(|(p, id)| format!("{}: {id}", serde_json::to_string(p).unwrap())).collect();
        format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {{"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}},
    {{"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}},
    {{"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}}
  ],
  "normalizer": {{"type": "Sequence", "normalizers": [{{"type": "Prepend", "prepend": "▁"}}, {{"type": "Replace", "pattern": {{"String": " "}}, "content": "▁"}}]}},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": {{"type": "Sequence", "decoders": [
    {{"type": "Replace", "pattern": {{"String": "▁"}}, "content": " "}},
    {{"type": "ByteFallback"}}, {{"type": "Fuse"}}, {{"type": "Strip", "content": " ", "start": 1, "stop": 0}}]}},
  "model": {{"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
    "vocab": {{{}}}, "merges": ["▁ a", "▁a b"]}}}}"#,
            vocab_json.join(", ")
        )
    }

    #[test]
    fn byte_level_tokens_decode_through_the_byte_table() {
        let v = load(byte_level_json().as_bytes(), None).unwrap();
        assert_eq!(v.len(), 264);
        assert_eq!(v.token_bytes(TokenId(b' ' as u32)), b" ");
        assert_eq!(v.token_bytes(TokenId(b'\n' as u32)), b"\n");
        assert_eq!(v.token_bytes(TokenId(0xFF)), &[0xFF]);
        assert_eq!(v.token_bytes(TokenId(256)), b" w");
        assert_eq!(v.token_bytes(TokenId(257)), b" wo");
        assert_eq!(v.token_bytes(TokenId(258)), b"{\"");
        assert_eq!(v.token_bytes(TokenId(260)), "é".as_bytes());
        // "Ċ" in the vocab is the newline byte 0x0A, not U+010A.
        assert_eq!(v.token_bytes(TokenId(261)), b"\n\n");
        // Special added token: no bytes, special, and guessed as EOS.
        assert!(v.is_special(TokenId(262)) && v.token_bytes(TokenId(262)).is_empty());
        assert_eq!(v.eos_tokens(), &[TokenId(262)]);
        // Non-special added token: its content, verbatim; a normal token.
        assert_eq!(v.token_bytes(TokenId(263)), b"<tool>");
        assert!(!v.is_special(TokenId(263)));
    }

    #[test]
    fn byte_level_agrees_with_the_tokenizers_crate() {
        let json = byte_level_json();
        let v = load(json.as_bytes(), None).unwrap();
        let tok = tokenizers::Tokenizer::from_bytes(json.as_bytes()).unwrap();
        for text in ["{\"a\": 1, \"b\": [true, null]}", " wow héllo\n\tÿ€😀", "<tool> x"] {
            let enc = tok.encode(text, false).unwrap();
            let bytes: Vec<u8> = enc.get_ids().iter().flat_map(|&id| v.token_bytes(TokenId(id)).to_vec()).collect();
            assert_eq!(bytes, text.as_bytes(), "{text:?} → {:?}", enc.get_ids());
        }
        // Every token that is valid UTF-8 decodes the same way in the tokenizers crate.
        for (id, bytes) in v.grammar_tokens() {
            if let Ok(s) = std::str::from_utf8(bytes) {
                assert_eq!(tok.decode(&[id.0], false).unwrap(), s, "token {}", id.0);
            }
        }
    }

    #[test]
    fn sentencepiece_space_marker_and_byte_fallback() {
        let v = load(sentencepiece_json().as_bytes(), None).unwrap();
        assert_eq!(v.len(), 302);
        for special in [0, 1, 2, 300] {
            assert!(v.is_special(TokenId(special)), "{special}");
            assert!(v.token_bytes(TokenId(special)).is_empty());
        }
        assert_eq!(v.eos_tokens(), &[TokenId(2)]);
        assert_eq!(v.token_bytes(TokenId(3 + 0x0A)), b"\n");
        assert_eq!(v.token_bytes(TokenId(3 + 0xE2)), &[0xE2]);
        assert_eq!(v.token_bytes(TokenId(259)), b" ");
        assert_eq!(v.token_bytes(TokenId(262)), b" ab");
        assert_eq!(v.token_bytes(TokenId(263)), "é".as_bytes());
        assert_eq!(v.token_bytes(TokenId(301)), b"x");
        assert!(!v.is_special(TokenId(301)));
    }

    #[test]
    fn sentencepiece_agrees_with_the_tokenizers_crate() {
        let json = sentencepiece_json();
        let v = load(json.as_bytes(), None).unwrap();
        let tok = tokenizers::Tokenizer::from_bytes(json.as_bytes()).unwrap();
        for text in ["ab b\"é\":x", "a\n€😀"] {
            let enc = tok.encode(text, false).unwrap();
            let bytes: Vec<u8> = enc.get_ids().iter().flat_map(|&id| v.token_bytes(TokenId(id)).to_vec()).collect();
            // The normalizer prepends "▁", which decodes to a leading space.
            assert_eq!(bytes, format!(" {text}").as_bytes(), "{text:?} → {:?}", enc.get_ids());
        }
    }

    #[test]
    fn explicit_eos_overrides_the_guess() {
        let v = load(byte_level_json().as_bytes(), Some(&[TokenId(5), TokenId(262)])).unwrap();
        assert_eq!(v.eos_tokens(), &[TokenId(5), TokenId(262)]);
        assert!(v.is_special(TokenId(5)));
        assert!(matches!(
            load(byte_level_json().as_bytes(), Some(&[TokenId(9999)])),
            Err(Error::IdOutOfRange { id: 9999, .. })
        ));
    }

    #[test]
    fn unigram_vocab_list_and_metaspace() {
        let json = r#"{"added_tokens": [{"id": 0, "content": "<pad>", "special": true},
            {"id": 1, "content": "</s>", "special": true}],
          "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
          "model": {"type": "Unigram", "unk_id": 2, "vocab": [["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0],
             ["▁the", -1.5], ["s", -2.0]], "byte_fallback": false}}"#;
        let v = load(json.as_bytes(), None).unwrap();
        assert_eq!(v.len(), 5);
        assert_eq!(v.token_bytes(TokenId(3)), b" the");
        assert!(v.is_special(TokenId(2)), "unk is special");
        assert_eq!(v.eos_tokens(), &[TokenId(1)]);
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let no_eos = r#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}"#;
        assert_eq!(load(no_eos.as_bytes(), None).unwrap_err(), Error::NoEos);
        let wordpiece = r###"{"model": {"type": "WordPiece", "vocab": {"a": 0, "##b": 1}}}"###;
        assert!(matches!(load(wordpiece.as_bytes(), None), Err(Error::Format(_))));
        let suffix = r#"{"model": {"type": "BPE", "end_of_word_suffix": "</w>", "vocab": {"a</w>": 0}, "merges": []}}"#;
        assert!(matches!(load(suffix.as_bytes(), Some(&[TokenId(0)])), Err(Error::Format(_))));
        let dup = r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}"#;
        assert!(matches!(load(dup.as_bytes(), Some(&[TokenId(0)])), Err(Error::Format(_))));
        let huge = r#"{"model": {"type": "BPE", "vocab": {"a": 4000000000}, "merges": []}}"#;
        assert!(matches!(load(huge.as_bytes(), Some(&[TokenId(0)])), Err(Error::Format(_))));
        let empty = r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}}"#;
        assert!(matches!(load(empty.as_bytes(), None), Err(Error::Format(_))));
        assert!(matches!(load(b"not json", None), Err(Error::Format(_))));
        assert!(matches!(load(b"{\"model\": 3}", None), Err(Error::Format(_))));
        let regex_replace = r#"{"decoder": {"type": "Replace", "pattern": {"Regex": "x+"}, "content": ""},
            "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}"#;
        assert!(matches!(load(regex_replace.as_bytes(), Some(&[TokenId(0)])), Err(Error::Format(_))));
    }

    #[test]
    fn hole_ids_are_special_and_empty() {
        let json = r#"{"added_tokens": [{"id": 5, "content": "<|im_end|>", "special": true}],
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}}"#;
        let v = load(json.as_bytes(), None).unwrap();
        assert_eq!(v.len(), 6);
        assert!(v.is_special(TokenId(1)) && v.is_special(TokenId(3)) && !v.is_special(TokenId(2)));
        assert_eq!(v.eos_tokens(), &[TokenId(5)]);
        let ids: Vec<u32> = v.grammar_tokens().map(|(i, _)| i.0).collect();
        assert_eq!(ids, vec![0, 2]);
    }
}

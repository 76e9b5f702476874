//! Fixtures shared by the integration tests that drive `constrain eval`.
use serde_json::{json, Value};

/// GPT-2's byte → unicode table: printable Latin-1 bytes stand for themselves, the other 68
/// bytes map in order to U+0100, U+0101, …
pub fn byte_char(b: u8) -> char {
    let itself = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if itself(b) {
        return char::from(b);
    }
    let shifted = (0..b).filter(|&x| !itself(x)).count() as u32;
    char::from_u32(0x100 + shifted).unwrap()
}

/// A byte-level BPE tokenizer: the 256 bytes (ids 0..256), a few merges (`{"`, `":`, `Ġ"`,
/// `ab`), and `<|endoftext|>` (special, id 260).
pub fn tokenizer_json() -> String {
    let mut vocab = serde_json::Map::new();
    for b in 0..=255u8 {
        vocab.insert(byte_char(b).to_string(), json!(b as u32));
    }
    let merges = [("{", "\""), ("\"", ":"), ("Ġ", "\""), ("a", "b")];
    for (i, (l, r)) in merges.iter().enumerate() {
        vocab.insert(format!("{l}{r}"), json!(256 + i as u32));
    }
    let merges: Vec<Value> = merges.iter().map(|(l, r)| json!([l, r])).collect();
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 260, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "vocab": vocab, "merges": merges}
    })
    .to_string()
}

//! A GGUF file's tokenizer, read from its metadata without llama.cpp.
//!
//! Input: the path of a GGUF model file. Output: a [`Vocabulary`] with the bytes, special
//! ids and end-of-generation ids that `constrain-llama` gets from llama.cpp for the same
//! file (`token_to_piece(t, special = true)`, the control/unknown/unused attributes,
//! `is_eog`), so a Python user with a GGUF and no llama.cpp build gets the same masks.
//!
//! How: the header's key/value section is parsed (GGUF v2 and v3, little-endian) up to the
//! tokenizer keys; tensors are never read. Token text becomes bytes as llama.cpp decodes it:
//! `gpt2` (byte-level BPE) through GPT-2's byte↔unicode table, `llama` (SentencePiece) with
//! `▁` as a space and `<0xNN>` byte tokens as that byte; user-defined tokens are their text
//! verbatim. The end-of-generation set is llama.cpp's: the `eos`/`eot`/`eom` ids plus the
//! tokens it recognises by name (listed in [`EOG_NAMES`]). Other tokenizer models (`bert`,
//! `t5`, `rwkv`, …) are refused rather than approximated.

use constrain::{TokenId, Vocabulary};
use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::path::Path;

/// Token texts llama.cpp adds to the end-of-generation set when the file has them
/// (`llama-vocab.cpp`: the EOT/EOG names and the FIM pad/repo/separator names it knows).
/// Checked against llama.cpp for the default model by `tests/test_gguf.py`.
const EOG_NAMES: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
];

/// Longest string or array the reader accepts: past it the file is malformed.
///
/// A constant of the format reader, not a user limit.
const MAX_LEN: u64 = 1 << 28;

/// Why a GGUF file's tokenizer could not be read.
#[derive(Debug)]
pub enum Error {
    /// The file could not be read.
    Io(std::io::Error),
    /// The file is not a GGUF file this reader understands, or lacks the tokenizer.
    Format(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Format(m) => f.write_str(m),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::Format(msg.into())
}

/// One metadata value; only the kinds the tokenizer keys use are kept.
enum Value {
    Int(i64),
    Str(Vec<u8>),
    StrArray(Vec<Vec<u8>>),
    IntArray(Vec<i64>),
    Other,
}

struct Reader<R> {
    r: R,
}

impl<R: Read> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b)?;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }
    fn len(&mut self) -> Result<usize, Error> {
        let n = self.u64()?;
        if n > MAX_LEN {
            return Err(bad(format!("length {n} is too large: not a GGUF file?")));
        }
        Ok(n as usize)
    }
    fn string(&mut self) -> Result<Vec<u8>, Error> {
        let n = self.len()?;
        let mut s = vec![0u8; n];
        self.r.read_exact(&mut s)?;
        Ok(s)
    }
    /// A scalar of type `t` as an integer (`None`: a float or a bool's own kind).
    fn scalar(&mut self, t: u32) -> Result<Option<i64>, Error> {
        Ok(Some(match t {
            0 => self.bytes::<1>()?[0] as i64,
            1 => self.bytes::<1>()?[0] as i8 as i64,
            2 => u16::from_le_bytes(self.bytes()?) as i64,
            3 => i16::from_le_bytes(self.bytes()?) as i64,
            4 => self.u32()? as i64,
            5 => i32::from_le_bytes(self.bytes()?) as i64,
            6 => {
                self.bytes::<4>()?;
                return Ok(None);
            }
            7 => self.bytes::<1>()?[0] as i64,
            10 => self.u64()? as i64,
            11 => i64::from_le_bytes(self.bytes()?),
            12 => {
                self.bytes::<8>()?;
                return Ok(None);
            }
            _ => return Err(bad(format!("unknown GGUF value type {t}"))),
        }))
    }
    fn value(&mut self, t: u32) -> Result<Value, Error> {
        match t {
            8 => Ok(Value::Str(self.string()?)),
            9 => {
                let et = self.u32()?;
                let n = self.len()?;
                match et {
                    8 => (0..n).map(|_| self.string()).collect::<Result<_, _>>().map(Value::StrArray),
                    9 => Err(bad("nested GGUF arrays are not supported")),
                    _ => {
                        let mut out = Vec::with_capacity(n.min(1 << 20));
                        for _ in 0..n {
                            out.push(self.scalar(et)?.unwrap_or(0));
                        }
                        Ok(Value::IntArray(out))
                    }
                }
            }
            _ => Ok(self.scalar(t)?.map_or(Value::Other, Value::Int)),
        }
    }
}

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const TYPE_UNKNOWN: i64 = 2;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;
const TYPE_UNUSED: i64 = 5;
const TYPE_BYTE: i64 = 6;

/// Reads the tokenizer of the GGUF file at `path`. `eos` overrides the end-of-generation set.
pub fn load(path: &Path, eos: Option<&[TokenId]>) -> Result<Vocabulary, Error> {
    let file = std::fs::File::open(path)?;
    let mut r = Reader { r: BufReader::with_capacity(1 << 20, file) };
    if &r.bytes::<4>()? != b"GGUF" {
        return Err(bad("not a GGUF file (bad magic)"));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(bad(format!("GGUF version {version} is not supported (2 and 3 are)")));
    }
    let _tensors = r.u64()?;
    let kvs = r.u64()?;
    let mut meta: HashMap<String, Value> = HashMap::new();
    for _ in 0..kvs {
        let key = String::from_utf8_lossy(&r.string()?).into_owned();
        let t = r.u32()?;
        let v = r.value(t)?;
        if key.starts_with("tokenizer.ggml.") {
            meta.insert(key, v);
        }
    }
    let model = match meta.get("tokenizer.ggml.model") {
        Some(Value::Str(s)) => String::from_utf8_lossy(s).into_owned(),
        _ => return Err(bad("the GGUF file has no tokenizer (tokenizer.ggml.model)")),
    };
    let Some(Value::StrArray(texts)) = meta.remove("tokenizer.ggml.tokens") else {
        return Err(bad("the GGUF file has no tokenizer.ggml.tokens"));
    };
    let types = match meta.remove("tokenizer.ggml.token_type") {
        Some(Value::IntArray(t)) => t,
        _ => vec![1; texts.len()],
    };
    let byte_of_char = gpt2_byte_decoder();
    let mut tokens = Vec::with_capacity(texts.len());
    let mut special = Vec::new();
    let mut eog: Vec<TokenId> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let id = TokenId(u32::try_from(i).map_err(|_| bad("too many tokens"))?);
        let kind = types.get(i).copied().unwrap_or(1);
        let text_str = String::from_utf8_lossy(text);
        if EOG_NAMES.contains(&text_str.as_ref()) {
            eog.push(id);
        }
        if matches!(kind, TYPE_CONTROL | TYPE_UNKNOWN | TYPE_UNUSED) {
            special.push(id);
            tokens.push(text.clone());
            continue;
        }
        let bytes = match (model.as_str(), kind) {
            (_, TYPE_USER_DEFINED) => text.clone(),
            ("llama", TYPE_BYTE) => byte_token(&text_str).map(|b| vec![b]).unwrap_or_else(|| text.clone()),
            ("llama", _) => text_str.replace('\u{2581}', " ").into_bytes(),
            ("gpt2", _) => {
                let mut out = Vec::with_capacity(text.len());
                for c in text_str.chars() {
                    match byte_of_char.get(&c) {
                        Some(&b) => out.push(b),
                        // llama.cpp keeps a character outside the table as its UTF-8.
                        None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
                out
            }
            (other, _) => {
                return Err(bad(format!(
                    "tokenizer model `{other}` is not supported from GGUF (gpt2 and llama are); \
                     load its tokenizer.json instead"
                )))
            }
        };
        tokens.push(bytes);
    }
    for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"] {
        if let Some(Value::Int(id)) = meta.get(key) {
            if let Ok(id) = u32::try_from(*id) {
                if (id as usize) < tokens.len() {
                    eog.push(TokenId(id));
                }
            }
        }
    }
    let eos = eos.map(<[TokenId]>::to_vec).unwrap_or(eog);
    // As constrain-llama: special tokens keep their text; the vocabulary never lets a
    // grammar produce them.
    Vocabulary::new(tokens, &special, &eos).map_err(|e| bad(e.to_string()))
}

/// The byte of a SentencePiece byte token `<0xNN>`.
fn byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's byte↔unicode table, inverted: printable Latin-1 bytes stand for themselves, the
/// other 68 bytes for the characters from U+0100 on, in byte order.
fn gpt2_byte_decoder() -> HashMap<char, u8> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut map = HashMap::with_capacity(256);
    let mut next = 256u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            let c = char::from_u32(next).unwrap_or('\u{FFFD}');
            next += 1;
            c
        };
        map.insert(c, b);
    }
    map
}

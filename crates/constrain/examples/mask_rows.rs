//! Prints every mask the engine computes along one text: the reference the Python package's
//! masks are compared with, bit for bit (`crates/constrain-python/tests/test_masks.py`).
//!
//! ```text
//! cargo run --release -p constrain --example mask_rows -- TOKENIZER_JSON SCHEMA_FILE TEXT [compact|pretty]
//! ```
//!
//! The schema compiles with the default options (whitespace `pretty` unless given), as in
//! `constrain eval`; `TEXT` is tokenized with the `tokenizers` crate (no special tokens), as
//! `eval` tokenizes instances. Prints `tokens ID…`, then before each token (and once after the
//! last) `mask HEX` — the row's `u32` words in little-endian bytes, as numpy's
//! `row.tobytes().hex()` — then `accept OK` for the token; it stops after a refused token.
//! Ends with `accepting BOOL`.
use constrain::schema::{self, Options};
use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
use std::fmt::Write as _;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(tok), Some(schema_file), Some(text)) = (args.get(1), args.get(2), args.get(3)) else {
        anyhow::bail!("usage: mask_rows TOKENIZER_JSON SCHEMA_FILE TEXT [compact|pretty]");
    };
    let whitespace = match args.get(4).map(String::as_str) {
        None | Some("pretty") => schema::Whitespace::Pretty,
        Some("compact") => schema::Whitespace::Compact,
        Some(other) => anyhow::bail!("unknown whitespace {other}"),
    };
    let index = TokenIndex::new(Vocabulary::from_tokenizer_json(tok, None)?);
    let encoder = tokenizers::Tokenizer::from_file(tok).map_err(|e| anyhow::anyhow!("{e}"))?;
    let ids = encoder.encode(text.as_str(), false).map_err(|e| anyhow::anyhow!("{e}"))?.get_ids().to_vec();
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(schema_file)?)?;
    let compiled = schema::compile(&value, &Options::default().with_whitespace(whitespace))?;
    let constraint = Constraint::new(&compiled, index.clone(), &Limits::default())?;
    let mut m = constraint.matcher();
    let mut mask = vec![0u32; index.vocab().mask_words()];
    let mut line = String::new();
    println!("tokens {}", ids.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" "));
    for (i, step) in ids.iter().map(Some).chain([None]).enumerate() {
        m.fill_mask(&mut mask)?;
        line.clear();
        for w in &mask {
            for b in w.to_le_bytes() {
                write!(line, "{b:02x}")?;
            }
        }
        println!("mask {line}");
        let Some(&t) = step else { break };
        let ok = m.accept_token(TokenId(t)).is_ok();
        println!("accept {ok}");
        if !ok {
            eprintln!("token {i} ({t}) refused");
            break;
        }
    }
    println!("accepting {}", m.is_accepting());
    Ok(())
}

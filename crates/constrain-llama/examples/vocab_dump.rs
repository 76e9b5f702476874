//! Prints the vocabulary llama.cpp gives for a GGUF model, as the engine sees it: the
//! reference `constrain.Tokenizer.from_gguf` (the Python package's own GGUF reader) is
//! compared with (`crates/constrain-python/tests/test_gguf.py`).
//!
//! ```text
//! cargo run --release -p constrain-llama --example vocab_dump -- MODEL.gguf
//! ```
//!
//! Prints `eos ID…`, `special ID…`, then one line per token: its id and its bytes in hex.
use constrain::TokenId;
use constrain_llama::{Generator, GeneratorSettings};

fn main() -> anyhow::Result<()> {
    let Some(path) = std::env::args().nth(1) else { anyhow::bail!("usage: vocab_dump MODEL.gguf") };
    let generator = Generator::load(path, GeneratorSettings::default())?;
    let vocab = generator.index().vocab();
    let ids = |f: &dyn Fn(TokenId) -> bool| {
        (0..vocab.len() as u32).map(TokenId).filter(|&t| f(t)).map(|t| t.0.to_string()).collect::<Vec<_>>().join(" ")
    };
    println!("eos {}", ids(&|t| vocab.is_eos(t)));
    println!("special {}", ids(&|t| vocab.is_special(t)));
    for i in 0..vocab.len() as u32 {
        let hex: String = vocab.token_bytes(TokenId(i)).iter().map(|b| format!("{b:02x}")).collect();
        println!("{i} {hex}");
    }
    Ok(())
}

//! Generate a JSON document for `examples/person.json` with the default model.
//!
//! ```text
//! cargo run --release --example generate -- "Invent a person who lives in Lyon."
//! ```
use constrain::sampling::SamplerSettings;
use constrain_llama::{Generator, GeneratorSettings, Prompt};

fn main() -> anyhow::Result<()> {
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "Invent a person who lives in Lyon.".into());
    let schema: serde_json::Value = serde_json::from_str(include_str!("../../../examples/person.json"))?;

    // Greedy decoding: the same output every run.
    let settings = GeneratorSettings { sampler: SamplerSettings::greedy(), max_tokens: 256, ..Default::default() };
    let generator = Generator::load_default(settings)?;
    let constraint = generator.schema_constraint(&schema)?;
    let out = generator.generate(Prompt::user(prompt).with_schema(&schema), &constraint)?;

    println!("{}", out.text);
    eprintln!(
        "{} tokens ({} forced by the grammar) at {:.1} tok/s",
        out.generated_tokens,
        out.forced_tokens,
        out.tokens_per_second()
    );
    Ok(())
}

//! Streaming: print each piece of text as the model produces it.
//!
//! ```text
//! cargo run --release --example stream -- "Describe the weather in Oslo."
//! ```
use constrain::sampling::SamplerSettings;
use constrain_llama::{Generator, GeneratorSettings, Prompt};
use std::io::Write;

fn main() -> anyhow::Result<()> {
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "Describe the weather in Oslo.".into());
    let schema: serde_json::Value = serde_json::from_str(include_str!("../../../examples/weather.json"))?;
    let settings = GeneratorSettings {
        sampler: SamplerSettings { seed: Some(42), ..SamplerSettings::default() },
        max_tokens: 256,
        ..Default::default()
    };
    let generator = Generator::load_default(settings)?;
    let constraint = generator.schema_constraint(&schema)?;
    let mut stdout = std::io::stdout();
    let out = generator.generate_with(Prompt::user(prompt).with_schema(&schema), &constraint, |piece| {
        let _ = stdout.write_all(piece.as_bytes());
        let _ = stdout.flush();
    })?;
    println!();
    eprintln!("parsed: {}", out.value.is_some());
    Ok(())
}

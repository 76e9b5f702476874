//! Typed generation: the schema comes from a Rust type, the result is that type.
//!
//! ```text
//! cargo run --release --example typed
//! ```
use constrain::sampling::SamplerSettings;
use constrain_llama::{Generator, GeneratorSettings};
use serde::Deserialize;

/// A book recommendation; the derived JSON Schema constrains the model's output.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Book {
    /// Title of the book.
    #[schemars(length(min = 1, max = 60))]
    title: String,
    /// Author's full name.
    #[schemars(length(min = 1, max = 40))]
    author: String,
    /// Year of first publication.
    #[schemars(range(min = 1450, max = 2025))]
    year: u16,
    /// Genre.
    genre: Genre,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Genre {
    Novel,
    Poetry,
    Science,
    History,
}

fn main() -> anyhow::Result<()> {
    let settings = GeneratorSettings { sampler: SamplerSettings::greedy(), max_tokens: 200, ..Default::default() };
    let generator = Generator::load_default(settings)?;
    let book: Book = generator.generate_json("Recommend a classic novel.")?;
    println!("{book:#?}");
    Ok(())
}

//! What the sampling chain costs per token over a 49k vocabulary, no model needed.
//!
//! Times `Sampler::sample` with the default chain (temperature 0.8, top-k 40, top-p 0.95,
//! min-p 0.05) on seeded logits, unmasked (free text) and with 90% of the vocabulary masked
//! (a constraint's mask), and prints microseconds per call.
//!
//! ```text
//! cargo run --release -p constrain --example sampler_cost
//! ```
use constrain::sampling::{Sampler, SamplerSettings};
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// SmolLM2's vocabulary size, the default model's.
const VOCAB: usize = 49_152;

fn main() -> anyhow::Result<()> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    // Spread like a model's logits: most tokens unlikely, a few far above the rest.
    let free: Vec<f32> =
        (0..VOCAB).map(|_| rng.random_range(-6.0f32..6.0) + if rng.random_bool(0.001) { 8.0 } else { 0.0 }).collect();
    let masked: Vec<f32> = free.iter().map(|&l| if rng.random_bool(0.9) { f32::NEG_INFINITY } else { l }).collect();
    for (name, base) in [("free text", &free), ("90% masked", &masked)] {
        let mut sampler = Sampler::new(SamplerSettings { seed: Some(1), ..SamplerSettings::default() })?;
        let mut logits = base.clone();
        let reps = 2000;
        let start = Instant::now();
        for _ in 0..reps {
            logits.copy_from_slice(base);
            sampler.sample(&mut logits)?;
        }
        println!("{name}: {:.1} µs per sample", start.elapsed().as_secs_f64() * 1e6 / reps as f64);
    }
    Ok(())
}

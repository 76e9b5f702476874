//! The matcher inside your own decode loop — no model, no llama.cpp.
//!
//! A toy vocabulary and a fake "model" (seeded random logits) show the four calls a real
//! integration makes per step: `fill_mask`, mask the logits, sample, `accept_token`.
//!
//! ```text
//! cargo run -p constrain --example matcher_loop
//! ```
use constrain::grammar::{Expr, GrammarBuilder};
use constrain::mask::{is_allowed, TokenIndex};
use constrain::sampling::{Sampler, SamplerSettings};
use constrain::{Constraint, Limits, TokenId, Vocabulary};
use rand::{Rng, SeedableRng};

fn main() -> anyhow::Result<()> {
    // 1. The tokenizer side: every token's bytes, plus an end-of-generation token.
    let pieces = ["[", "]", ",", "0", "1", "2", "3", "42", "[1", ",7", "]]", "a", " ", "<eos>"];
    let eos = TokenId(pieces.len() as u32 - 1);
    let tokens: Vec<Vec<u8>> = pieces.iter().map(|p| p.as_bytes().to_vec()).collect();
    let vocab = Vocabulary::new(tokens, &[], &[eos])?;
    let index = TokenIndex::new(vocab); // build once per tokenizer

    // 2. The grammar: a JSON array of 1 to 5 numbers below 1000, `[1,42,7]` (no leading zeros).
    let mut g = GrammarBuilder::new();
    let digit = Expr::Bytes(vec![(b'0', b'9')]);
    let nonzero = Expr::Bytes(vec![(b'1', b'9')]);
    let number = g.add("number", Expr::alt([Expr::lit("0"), Expr::seq([nonzero, Expr::repeat(digit, 0, Some(2))])]));
    let root = g.declare("root");
    let items =
        Expr::seq([Expr::Ref(number), Expr::repeat(Expr::seq([Expr::lit(","), Expr::Ref(number)]), 0, Some(4))]);
    g.define(root, Expr::seq([Expr::lit("["), items, Expr::lit("]")]));
    let grammar = g.build(root)?;
    println!("grammar:\n{grammar}");

    // 3. Compile once, then one matcher per sequence.
    let constraint = Constraint::new(&grammar, index.clone(), &Limits::default())?;
    let mut matcher = constraint.matcher();
    let mut sampler = Sampler::new(SamplerSettings { seed: Some(7), temperature: 1.0, ..Default::default() })?;
    let mut model = rand::rngs::StdRng::seed_from_u64(1);
    let mut mask = vec![0u32; index.vocab().mask_words()];
    let mut out = Vec::new();

    for step in 0..64 {
        // The "model": random logits over the vocabulary.
        let mut logits: Vec<f32> = (0..index.vocab().mask_len()).map(|_| model.random_range(-3.0..3.0)).collect();
        matcher.fill_mask(&mut mask)?;
        for (i, l) in logits.iter_mut().enumerate() {
            if !is_allowed(&mask, TokenId(i as u32)) {
                *l = f32::NEG_INFINITY;
            }
        }
        let token = sampler.sample(&mut logits)?;
        matcher.accept_token(token)?;
        if index.vocab().is_eos(token) {
            println!("step {step}: <eos>");
            break;
        }
        sampler.accept(token);
        out.extend_from_slice(index.vocab().token_bytes(token));
        println!("step {step}: {:?}", pieces[token.index()]);
        if matcher.is_finished() {
            break;
        }
    }
    let text = String::from_utf8(out)?;
    println!("output: {text}");
    anyhow::ensure!(matcher.is_accepting(), "the loop ended before the grammar was complete");
    let value: serde_json::Value = serde_json::from_str(&text)?;
    anyhow::ensure!(value.is_array(), "not an array");
    Ok(())
}

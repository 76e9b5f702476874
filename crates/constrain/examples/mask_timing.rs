//! Times `fill_mask` over real schemas and a real tokenizer, without a model: each valid
//! instance of a JSONSchemaBench subset is fed token by token (the longest allowed token that
//! continues its compact text), and every `fill_mask` on the way is timed.
//!
//! ```text
//! cargo run --release -p constrain --example mask_timing -- TOKENIZER_JSON BENCH_DIR [MAX_SCHEMAS]
//! ```
//!
//! `BENCH_DIR` is one subset (`<name>.json` schemas, `tests/<name>.json` instances). Prints
//! the number of masks, their mean and p99 in µs, and a checksum of the allowed counts (equal
//! across builds when the masks are).
use constrain::mask::is_allowed;
use constrain::schema::{self, Options};
use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
use std::collections::HashMap;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(tok), Some(dir)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: mask_timing TOKENIZER_JSON BENCH_DIR [MAX_SCHEMAS]");
    };
    let max: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(usize::MAX);
    let vocab = Vocabulary::from_tokenizer_json(tok, None)?;
    let by_bytes: HashMap<Vec<u8>, TokenId> = (0..vocab.len() as u32)
        .map(TokenId)
        .filter(|&t| !vocab.is_special(t) && !vocab.token_bytes(t).is_empty())
        .map(|t| (vocab.token_bytes(t).to_vec(), t))
        .collect();
    let longest = by_bytes.keys().map(Vec::len).max().unwrap_or(1).min(32);
    let index = TokenIndex::new(vocab);
    let vocab = index.vocab();
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    let mut times: Vec<f64> = Vec::new();
    let mut checksum: u64 = 0;
    let mut mask = vec![0u32; vocab.mask_words()];
    let (mut schemas, mut limit_errors) = (0, 0);
    for path in names.into_iter().take(max) {
        let Some(file) = path.file_name() else { continue };
        let tests = path.with_file_name("tests").join(file);
        let (Ok(schema_text), Ok(tests_text)) = (std::fs::read_to_string(&path), std::fs::read_to_string(&tests))
        else {
            continue;
        };
        let Ok(schema) = serde_json::from_str::<serde_json::Value>(&schema_text) else { continue };
        let Ok(grammar) = schema::compile(&schema, &Options::default()) else { continue };
        let Ok(constraint) = Constraint::new(&grammar, index.clone(), &Limits::default()) else { continue };
        schemas += 1;
        let tests: serde_json::Value = serde_json::from_str(&tests_text)?;
        let Some(cases) = tests.get("tests").and_then(|t| t.as_array()) else { continue };
        for case in cases.iter().filter(|c| c.get("valid") == Some(&serde_json::Value::Bool(true))) {
            let Some(data) = case.get("data") else { continue };
            let text = serde_json::to_string(data)?.into_bytes();
            let mut matcher = constraint.matcher();
            let mut at = 0;
            while at < text.len() {
                let start = Instant::now();
                let r = matcher.fill_mask(&mut mask);
                times.push(start.elapsed().as_secs_f64() * 1e6);
                if r.is_err() {
                    limit_errors += 1;
                    break;
                }
                let allowed: u64 = mask.iter().map(|w| u64::from(w.count_ones())).sum();
                checksum = checksum.wrapping_mul(31).wrapping_add(allowed);
                let rest = &text[at..];
                let pick = (1..=longest.min(rest.len()))
                    .rev()
                    .filter_map(|n| by_bytes.get(&rest[..n]))
                    .find(|&&t| is_allowed(&mask, t));
                let Some(&t) = pick else { break };
                if matcher.accept_token(t).is_err() {
                    break;
                }
                at += vocab.token_bytes(t).len();
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let p99 = times.get(times.len() * 99 / 100).copied().unwrap_or(0.0);
    println!(
        "schemas {schemas} masks {} mean {mean:.2} µs p99 {p99:.1} µs limit errors {limit_errors} checksum {checksum}",
        times.len()
    );
    Ok(())
}

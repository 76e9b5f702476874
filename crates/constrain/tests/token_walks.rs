//! Token-level random walks: sample uniformly among the tokens the matcher allows until it
//! finishes, then check the text independently — JSON Schema fixtures with `serde_json` and
//! the `jsonschema` crate, GBNF grammars with a separately built automaton (and `serde_json`
//! for the JSON grammars).

use constrain::grammar::gbnf;
use constrain::mask::is_allowed;
use constrain::schema::{self, Options};
use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Every single byte, common JSON and text fragments (some duplicated under two ids), a
/// special token and three end-of-generation ids.
fn vocabulary() -> Arc<TokenIndex> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let fragments = [
        "{\"", "\":", "\": ", "\", \"", "\"}", "\"]", "[\"", "{}", "[]", ", ", ",\n", "\n  ", "  ", "true", "false",
        "null", "name", "id", "type", "value", "12", "0.", "-1", "e+", "10", "http", "://", ".com", "@", "-0", "T12",
        ":00", "Z", "ab", "é", "日本", "\\n", "\\u00", "\"\"", "a\"", "1,", "1}", "0]", " \"", "}]", "2024-01-",
        "name", "\"}}", "}}", "]]",
    ];
    tokens.extend(fragments.iter().map(|f| f.as_bytes().to_vec()));
    let special = tokens.len() as u32;
    tokens.push(b"<tool>".to_vec());
    let eos: Vec<TokenId> = (0..3).map(|k| TokenId(special + 1 + k)).collect();
    tokens.extend([Vec::new(), Vec::new(), Vec::new()]);
    let vocab = Vocabulary::new(tokens, &[TokenId(special)], &eos).expect("valid vocabulary");
    // A model with more logits than tokenizer entries.
    TokenIndex::new(vocab.with_mask_len(400).expect("wider mask"))
}

/// Walks `constraint` once; returns the text if the matcher finished within `max_tokens`.
///
/// A run-time check (a repeated key, say) can leave a prefix no token extends: the walk
/// then backs out the way a decode loop does, rolling the last token back and banning it
/// at that position. `dead_ends` counts those.
fn walk(constraint: &Constraint, rng: &mut StdRng, max_tokens: usize, dead_ends: &mut usize) -> Option<Vec<u8>> {
    let vocab = constraint.index().vocab();
    let mut matcher = constraint.matcher();
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut text = Vec::new();
    // The tokens accepted, and per position the tokens banned there (one more entry).
    let mut path: Vec<TokenId> = Vec::new();
    let mut banned: Vec<Vec<TokenId>> = vec![Vec::new()];
    for _ in 0..max_tokens {
        matcher.fill_mask(&mut mask).expect("mask");
        let allowed: Vec<TokenId> =
            (0..vocab.mask_len() as u32).map(TokenId).filter(|&t| is_allowed(&mask, t)).collect();
        for &t in &allowed {
            assert!(
                t.index() < vocab.len() && (vocab.is_eos(t) || !vocab.is_special(t)),
                "special or out-of-range id {t:?} allowed"
            );
        }
        // Uniform among the allowed tokens, except that once the output may end we stop
        // with probability 1/3 (pure uniform choice rarely picks one of 3 EOS ids).
        let eos_ok = allowed.iter().any(|&t| vocab.is_eos(t));
        assert_eq!(eos_ok, matcher.is_accepting());
        let here: &[TokenId] = banned.last().map_or(&[], |b| b);
        let open: Vec<TokenId> = allowed.into_iter().filter(|t| !here.contains(t)).collect();
        if open.is_empty() {
            // A dead end: only a run-time check can make one (the grammar alone never does).
            assert!(constraint.checks().is_some(), "nothing allowed after {:?}", String::from_utf8_lossy(&text));
            *dead_ends += 1;
            let last = path.pop()?;
            banned.pop();
            banned.last_mut()?.push(last);
            matcher.rollback(1).expect("roll back");
            text.truncate(text.len() - vocab.token_bytes(last).len());
            continue;
        }
        let pick = if eos_ok && rng.random_range(0..3) == 0 {
            vocab.eos_tokens()[0]
        } else {
            open[rng.random_range(0..open.len())]
        };
        matcher.accept_token(pick).expect("an allowed token is accepted");
        if vocab.is_eos(pick) {
            return Some(text);
        }
        text.extend_from_slice(vocab.token_bytes(pick));
        path.push(pick);
        banned.push(Vec::new());
        if matcher.is_finished() {
            return Some(text);
        }
    }
    None
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("readable dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                // Instances, and the liveness test's sample (`tests/liveness.rs`).
                if p.file_name().is_some_and(|n| n != "tests" && n != "sample") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn random_walks_over_fixture_schemas_validate() {
    let index = vocabulary();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jsonschemabench");
    let schemas = files(&dir, "json");
    assert!(schemas.len() >= 20, "fixtures missing");
    let (mut finished, mut walks, mut dead_ends) = (0, 0, 0);
    for path in &schemas {
        let text = std::fs::read_to_string(path).expect("fixture");
        let schema: serde_json::Value = serde_json::from_str(&text).expect("fixture JSON");
        let grammar =
            schema::compile(&schema, &Options::default()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let constraint = Constraint::new(&grammar, index.clone(), &Limits::default()).expect("constraint");
        let validator = jsonschema::validator_for(&schema).expect("the jsonschema crate reads the schema");
        let mut rng = StdRng::seed_from_u64(42);
        for _ in 0..6 {
            walks += 1;
            let Some(out) = walk(&constraint, &mut rng, 1500, &mut dead_ends) else { continue };
            finished += 1;
            let value: serde_json::Value = match serde_json::from_slice(&out) {
                Ok(v) => v,
                // Valid JSON that serde_json cannot hold (an exponent past f64, e.g. `1e999`):
                // JSON Schema places no limit on it, so neither does the grammar.
                Err(e) if e.to_string().starts_with("number out of range") => continue,
                Err(e) => panic!("{}: output is not JSON ({e}): {}", path.display(), String::from_utf8_lossy(&out)),
            };
            assert!(
                validator.is_valid(&value),
                "{}: output does not validate: {}",
                path.display(),
                String::from_utf8_lossy(&out)
            );
        }
    }
    assert!(finished * 2 >= walks, "only {finished} of {walks} walks finished");
    // A uniform walk picks keys at random, so it repeats keys far more often than a model;
    // backing out of each dead end costs a token. Measured: 622 in 162 walks.
    assert!(dead_ends <= 6 * walks, "{dead_ends} dead ends in {walks} walks");
}

#[test]
fn random_walks_over_the_grammars_folder_stay_in_the_language() {
    let index = vocabulary();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../grammars");
    let grammars = files(&dir, "gbnf");
    assert!(grammars.len() >= 7);
    for path in &grammars {
        let text = std::fs::read_to_string(path).expect("grammar file");
        let grammar = gbnf::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let constraint = Constraint::new(&grammar, index.clone(), &Limits::default()).expect("constraint");
        // An automaton built from the printed grammar, independent of the matcher's state.
        let check = constrain::automaton::Pda::build(
            &gbnf::parse(&grammar.to_string()).expect("printed grammar parses"),
            &Limits::default(),
        )
        .expect("automaton");
        let mut rng = StdRng::seed_from_u64(7);
        let (mut finished, mut dead_ends) = (0, 0);
        for _ in 0..10 {
            let Some(out) = walk(&constraint, &mut rng, 400, &mut dead_ends) else { continue };
            finished += 1;
            assert!(check.matches(&out), "{}: {:?}", path.display(), String::from_utf8_lossy(&out));
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with("json") {
                serde_json::from_slice::<serde_json::Value>(&out)
                    .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}", String::from_utf8_lossy(&out)));
            }
        }
        assert!(finished > 0, "{}: no walk finished", path.display());
    }
}

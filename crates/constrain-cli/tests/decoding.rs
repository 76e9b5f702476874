//! `--beams` and `--model-draft` end to end with the default model: with the warpers beam
//! search ignores (temperature, mirostat, typical) and the one it keeps (`--logit-bias`),
//! every example schema's document validates, and one beam prints what greedy decoding
//! prints (on `person`); with the model as its own draft, greedy output is unchanged.
#![cfg(feature = "llama")]

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn run(schema: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .arg("--schema")
        .arg(schema)
        .args(["-p", "Fill this in with realistic values.", "--format", "compact", "-n", "300", "-t", "1"])
        .args(extra)
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", schema.display());
    String::from_utf8(out.stdout).expect("UTF-8").trim_end().to_string()
}

#[test]
fn beam_outputs_validate_and_one_beam_is_greedy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    // A bias on one token (id 28): beam search scores with it, and the mask still governs.
    let warped = ["--beams", "4", "--temp", "1", "--mirostat", "2", "--typical", "0.9", "--logit-bias", "28+2"];
    for name in ["person", "tree"] {
        let path = root.join(format!("{name}.json"));
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let validator = jsonschema::validator_for(&schema).expect("schema");
        let text = run(&path, &warped);
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
        assert!(validator.is_valid(&value), "{name}: {text}");
    }
    // One schema is enough for the flags' path: the library's beam test compares one beam
    // with greedy decoding on others, token for token.
    let person = root.join("person.json");
    assert_eq!(run(&person, &["--beams", "1"]), run(&person, &["--temp", "0"]), "one beam is greedy");
}

#[test]
fn exclusive_decoding_flags_are_usage_errors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/person.json");
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .arg("--schema")
        .arg(root)
        .args(["-p", "x", "--beams", "2", "--lookup", "4"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lookup"));
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .arg("--schema")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/person.json"))
        .args(["-p", "x", "--beams", "2", "--model-draft", "m.gguf"])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2), "a usage error");
}

#[test]
fn a_draft_model_leaves_greedy_output_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let model = constrain_llama::default_model_path().expect("the default model");
    let model = model.to_str().expect("a UTF-8 path");
    for name in ["person", "catalog"] {
        let path = root.join(format!("{name}.json"));
        let drafted = run(&path, &["--temp", "0", "--model-draft", model, "--draft", "5"]);
        assert_eq!(drafted, run(&path, &["--temp", "0"]), "{name}");
    }
}

//! The first run reads well (issue 38): the real binary with the default model on
//! `examples/person.json`, as `scripts/run-example.sh` runs it, with stdout piped.
//!
//! - stderr holds no warning and at most one `note:` line;
//! - piped stdout is one line of compact JSON that validates;
//! - `--format raw` prints exactly what `--stream` prints, and both are the same value as the
//!   compact document (formatting only re-spaces);
//! - `--format pretty` is the same value, indented.
//!
//! Runs the model three times in a row (one process at a time), a few seconds each.
#![cfg(feature = "llama")]

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const PROMPT: &str = "Invent a person who lives in Lyon and likes the outdoors.";

/// Runs `constrain --schema examples/person.json -p PROMPT --seed 3 ARGS…`: (stdout, stderr).
fn run(args: &[&str]) -> (String, String) {
    let exe = Path::new(env!("CARGO_BIN_EXE_constrain"));
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/person.json");
    let out = Command::new(exe)
        .arg("--schema")
        .arg(&schema)
        .args(["-p", PROMPT, "--seed", "3"])
        .args(args)
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 stdout");
    let stderr = String::from_utf8(out.stderr).expect("UTF-8 stderr");
    assert!(out.status.success(), "constrain {args:?} failed: {stderr}");
    (stdout, stderr)
}

fn valid_person(text: &str) -> Value {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/person.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let validator = jsonschema::validator_for(&schema).expect("schema");
    assert!(validator.is_valid(&value), "does not validate: {text}");
    value
}

#[test]
fn quiet_compact_and_raw_equals_stream() {
    let (piped, stderr) = run(&[]);
    assert!(!stderr.contains("warning"), "a warning on the first run: {stderr}");
    assert!(stderr.lines().filter(|l| l.starts_with("note:")).count() <= 1, "{stderr}");
    let doc = piped.strip_suffix('\n').unwrap_or(&piped);
    assert!(!doc.contains('\n') && !doc.contains(": ") && !doc.contains(", "), "not compact: {piped:?}");
    let value = valid_person(doc);

    let (raw, _) = run(&["--format", "raw"]);
    let (streamed, _) = run(&["--stream"]);
    assert_eq!(raw, streamed, "--format raw prints the bytes --stream shows");
    assert_eq!(valid_person(raw.trim_end()), value, "the same document however it is printed");

    let (pretty, _) = run(&["--format", "pretty"]);
    assert!(pretty.contains("\n  \""), "indented: {pretty}");
    assert_eq!(valid_person(pretty.trim_end()), value);
}

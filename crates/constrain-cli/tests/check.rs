//! Parse limits are never silent (issue 18): `constrain check` reports a document refused
//! because a limit cut its path as a limit (exit code 7), apart from a plain refusal (6).
//! (The matcher's and `explain`'s side is in the engine's tests/limits_and_check.rs.)
use constrain_cli::cli::check::{check as run_check, CheckArgs, EXIT_LIMIT, EXIT_REJECTED};
use constrain_cli::cli::constraint_args::LimitArgs;
use serde_json::{json, Value};

/// `anyOf` of 300 closed objects, each with its own required key: 300 parse stacks after `{`.
fn any_of_300() -> Value {
    let alts: Vec<Value> = (0..300)
        .map(
            |i| json!({"type": "object", "properties": {format!("k{i}"): {"const": i}}, "required": [format!("k{i}")], "additionalProperties": false}),
        )
        .collect();
    json!({ "anyOf": alts })
}

fn check(schema: &Value, doc: &str, limits: LimitArgs) -> u8 {
    let dir = std::env::temp_dir().join(format!("constrain-check-{}-{}", std::process::id(), doc.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("doc.json");
    std::fs::write(&path, doc).unwrap();
    let args = CheckArgs {
        constraint: constrain_cli::cli::constraint_args::ConstraintArgs {
            json_schema: Some(schema.to_string()),
            limits,
            ..Default::default()
        },
        doc: path,
        tokenizer: None,
    };
    let code = run_check(&args).unwrap_or_else(|f| panic!("{:#}", f.error));
    let _ = std::fs::remove_dir_all(&dir);
    code
}

#[test]
fn check_exit_codes() {
    let schema = any_of_300();
    assert_eq!(check(&schema, r#"{"k299":299}"#, LimitArgs::default()), 0);
    assert_eq!(
        check(&schema, r#"{"k5":6}"#, LimitArgs { max_parse_stacks: Some(1000), ..Default::default() }),
        EXIT_REJECTED
    );
    assert_eq!(check(&schema, r#"{"k5":5}"#, LimitArgs::default()), EXIT_LIMIT);
    assert_eq!(check(&schema, r#"{"k5":5}"#, LimitArgs { max_parse_stacks: Some(1000), ..Default::default() }), 0);
    assert_eq!(check(&json!({"type": "string"}), "\"ab", LimitArgs::default()), EXIT_REJECTED);
}

/// A document checked against a schema may end with whitespace, as files and `constrain`'s
/// own output do; whitespace is not the value, so nothing more is accepted.
#[test]
fn check_ignores_whitespace_after_the_value() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    assert_eq!(check(&schema, "{\"a\": 1}\n", LimitArgs::default()), 0);
    assert_eq!(check(&schema, "{\"a\": 1}\r\n \t\n", LimitArgs::default()), 0);
    assert_eq!(check(&schema, "{\"a\": \"x\"}\n", LimitArgs::default()), EXIT_REJECTED);
    assert_eq!(check(&schema, "{\"a\": 1}\nx", LimitArgs::default()), EXIT_REJECTED);
    assert_eq!(check(&schema, "\n", LimitArgs::default()), EXIT_REJECTED);
}

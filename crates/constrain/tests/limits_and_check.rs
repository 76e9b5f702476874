//! Parse limits are never silent (issue 18): a document refused because a limit cut its
//! path is reported as a limit, by the matcher, `explain` and `constrain check`; and `check`
//! locates refusals.
use constrain::cli::check::{byte_index, check as run_check, CheckArgs, EXIT_LIMIT, EXIT_REJECTED};
use constrain::cli::constraint_args::LimitArgs;
use constrain::explain::{explain, Verdict};
use constrain::matcher::Error;
use constrain::{Constraint, Limits};
use serde_json::{json, Value};

/// `anyOf` of 300 objects, each with its own required key: 300 parse stacks after `{`.
fn any_of_300() -> Value {
    let alts: Vec<Value> =
        (0..300).map(|i| json!({"type": "object", "properties": {format!("k{i}"): {"const": i}}, "required": [format!("k{i}")]})).collect();
    json!({ "anyOf": alts })
}

fn constraint(schema: &Value, limits: &Limits) -> Constraint {
    let g = constrain::schema::compile(schema, &Default::default()).expect("compiles");
    Constraint::new(&g, byte_index().expect("byte vocabulary"), limits).expect("builds")
}

#[test]
fn a_limit_that_cuts_a_valid_path_is_reported() {
    let schema = any_of_300();
    let c = constraint(&schema, &Limits::default());
    let mut m = c.matcher();
    // The stacks past the 256th are cut: those of the first alternatives, here.
    let err = m.accept_bytes(br#"{"k5":5}"#).unwrap_err();
    match &err {
        Error::Limit(msg) => assert!(msg.contains("max_parse_stacks"), "{msg}"),
        other => panic!("expected a limit error, got {other:?}"),
    }
    // An instance the limit does not cut is accepted, with the limit still on record.
    let mut m = c.matcher();
    m.accept_bytes(br#"{"k299":299}"#).unwrap();
    assert!(m.is_accepting());
    assert!(m.hit_limit(), "300 alternatives were cut to 256 on the way");
    assert!(matches!(explain(&c, br#"{"k5":5}"#, true).verdict, Verdict::Limit(_)));
    // Raised, the same instance is accepted and no limit is hit.
    let c = constraint(&schema, &Limits::default().with_max_parse_stacks(1000));
    let mut m = c.matcher();
    m.accept_bytes(br#"{"k5":5}"#).unwrap();
    assert!(m.is_accepting() && !m.hit_limit());
    // A plain refusal without any limit is not reported as one.
    let c = constraint(&json!({"type": "integer"}), &Limits::default());
    assert_eq!(c.matcher().accept_bytes(b"1x").unwrap_err(), Error::RejectedBytes);
}

#[test]
fn explain_locates_the_refusal() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    let c = constraint(&schema, &Limits::default());
    let e = explain(&c, b"{\"a\": [1,\n 2.5]}", true);
    assert_eq!(e.verdict, Verdict::Refused(b'.'));
    assert_eq!((e.offset, e.line, e.column), (12, 2, 3));
    assert_eq!(e.pointer.as_deref(), Some("/a/1"));
    assert!(e.allowed[b'0' as usize] && e.allowed[b']' as usize] && !e.allowed[b'.' as usize]);
    let e = explain(&c, b"{\"a\": [1", true);
    assert_eq!(e.verdict, Verdict::Incomplete);
    assert!(e.render().contains("incomplete"), "{}", e.render());
    assert!(explain(&c, b"{\"a\": [1]}", true).accepted());
}

fn check(schema: &Value, doc: &str, limits: LimitArgs) -> u8 {
    let dir = std::env::temp_dir().join(format!("constrain-check-{}-{}", std::process::id(), doc.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("doc.json");
    std::fs::write(&path, doc).unwrap();
    let args = CheckArgs {
        constraint: constrain::cli::constraint_args::ConstraintArgs { json_schema: Some(schema.to_string()), limits, ..Default::default() },
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
    assert_eq!(check(&schema, r#"{"k5":6}"#, LimitArgs { max_parse_stacks: Some(1000), ..Default::default() }), EXIT_REJECTED);
    assert_eq!(check(&schema, r#"{"k5":5}"#, LimitArgs::default()), EXIT_LIMIT);
    assert_eq!(check(&schema, r#"{"k5":5}"#, LimitArgs { max_parse_stacks: Some(1000), ..Default::default() }), 0);
    assert_eq!(check(&json!({"type": "string"}), "\"ab", LimitArgs::default()), EXIT_REJECTED);
}

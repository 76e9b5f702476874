//! Parse limits are never silent (issue 18): a document refused because a limit cut its
//! path is reported as a limit, by the matcher and `explain`; and `explain` locates
//! refusals. (`constrain check`'s side is in constrain-cli's tests/check.rs.)
use constrain::explain::{explain, Verdict};
use constrain::matcher::Error;
use constrain::vocab::Vocabulary;
use constrain::{Constraint, Limits, TokenIndex};
use serde_json::{json, Value};

/// `anyOf` of 300 closed objects, each with its own required key: 300 parse stacks after `{`.
fn any_of_300() -> Value {
    let alts: Vec<Value> = (0..300)
        .map(|i| {
            json!({"type": "object", "properties": {format!("k{i}"): {"const": i}}, "required": [format!("k{i}")],
                "additionalProperties": false})
        })
        .collect();
    json!({ "anyOf": alts })
}

fn constraint(schema: &Value, limits: &Limits) -> Constraint {
    let g = constrain::schema::compile(schema, &Default::default()).expect("compiles");
    Constraint::new(&g, TokenIndex::new(Vocabulary::bytes()), limits).expect("builds")
}

#[test]
fn a_limit_that_cuts_a_valid_path_is_reported() {
    let schema = any_of_300();
    let c = constraint(&schema, &Limits::default());
    let mut m = c.matcher();
    // The stacks past the 256th are cut: those of the first alternatives, here.
    let err = m.accept_bytes(br#"{"k5":5}"#).unwrap_err();
    match &err {
        Error::Limit(hit) => assert!(hit.to_string().contains("max_parse_stacks"), "{hit}"),
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
    // Integers take an exponent only after one leading digit (`2.5e16`); `2.0` is an integer
    // from draft 6 on.
    let e = explain(&c, b"{\"a\": [1,\n 12e5]}", true);
    assert_eq!(e.verdict, Verdict::Refused(b'e'));
    assert_eq!((e.offset, e.line, e.column), (13, 2, 4));
    assert_eq!(e.pointer.as_deref(), Some("/a/1"));
    assert!(e.allowed[b'0' as usize] && e.allowed[b']' as usize] && e.allowed[b'.' as usize]);
    assert!(!e.allowed[b'e' as usize]);
    let e = explain(&c, b"{\"a\": [1", true);
    assert_eq!(e.verdict, Verdict::Incomplete);
    assert!(e.render().contains("incomplete"), "{}", e.render());
    assert!(explain(&c, b"{\"a\": [1]}", true).accepted());
}

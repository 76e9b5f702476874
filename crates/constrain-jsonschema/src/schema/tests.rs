//! Per-keyword tests: each schema with instances that must be accepted and rejected.

use super::*;
use crate::automaton::Pda;
use crate::Limits;
use crate::{compile, with_order_hint};
use serde_json::json;

fn pda_with(schema: Value, opts: &Options) -> Pda {
    let g = compile(&schema, opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    Pda::build(g.grammar(), &Limits::default()).unwrap_or_else(|e| panic!("{schema}: {e}\n{g}"))
}

/// Whether the whole constraint (grammar and run-time checks) accepts `doc` whole.
fn accepts(c: &crate::Constraint, doc: &str) -> bool {
    let mut m = c.matcher();
    m.accept_bytes(doc.as_bytes()).is_ok() && m.is_accepting()
}

fn constraint(schema: &Value) -> crate::Constraint {
    let g = compile(schema, &Options::default()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let index = crate::TokenIndex::new(crate::Vocabulary::bytes());
    crate::Constraint::new(&g, index, &Limits::default()).unwrap_or_else(|e| panic!("{schema}: {e}\n{g}"))
}

/// The constraint compiled with the default options (run-time checks on) accepts every
/// `good` document and no `bad` one.
fn check(schema: Value, good: &[&str], bad: &[&str]) {
    let c = constraint(&schema);
    for g in good {
        assert!(accepts(&c, g), "{schema} should accept {g}");
    }
    for b in bad {
        assert!(!accepts(&c, b), "{schema} should reject {b}");
    }
}

/// The keyword the grammar alone (no run-time checks) refuses, or "" when it compiles.
fn error_keyword(schema: Value) -> String {
    compile(&schema, &Options::default().with_runtime_checks(false))
        .map(|_| String::new())
        .unwrap_or_else(|e| e.keyword().to_string())
}

#[test]
fn types_and_type_arrays() {
    check(json!({"type": "integer"}), &["0", "-12", "345"], &["1.5", "\"1\"", "01", "-"]);
    check(json!({"type": ["string", "null"]}), &["\"a\"", "null"], &["1", "true"]);
    check(json!({"type": "boolean"}), &["true", "false"], &["null", "1"]);
    // A misspelt type is an error at its pointer, never a silently empty alternative.
    let err = compile(&json!({"properties": {"a": {"type": "strin"}}}), &Options::default()).unwrap_err();
    assert_eq!(err.pointer(), "/properties/a/type");
    assert!(err.message().contains("\"strin\""), "{err}");
    assert_eq!(error_keyword(json!({"type": ["string", 3]})), "type");
    assert_eq!(error_keyword(json!({"type": "string"})), "");
    check(json!({"type": "number"}), &["1", "-1.5e+20", "0.25"], &["01", ".5", "1."]);
    check(json!(true), &["1", "{\"a\": [1, \"x\"]}", "null"], &["{", "nul"]);
    assert!(compile(&json!(false), &Options::default()).is_ok());
}

#[test]
fn enum_and_const() {
    check(
        json!({"enum": ["a", 1, null, {"k": [true]}]}),
        &["\"a\"", "1", "null", "{\"k\": [true]}"],
        &["\"b\"", "2", "{\"k\": []}"],
    );
    check(json!({"const": "x\"y"}), &["\"x\\\"y\""], &["\"xy\""]);
    // Values that fail sibling keywords are dropped.
    check(json!({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1}), &["\"a\""], &["1", "\"bb\""]);
    // A sibling `$ref` is resolved against the root's definitions (copied in only then).
    check(
        json!({
            "definitions": {"short": {"maxLength": 2}},
            "properties": {"p": {"enum": [{"a": "x"}, {"a": "yyy"}], "properties": {"a": {"$ref": "#/definitions/short"}}}}
        }),
        &["{\"p\": {\"a\": \"x\"}}"],
        &["{\"p\": {\"a\": \"yyy\"}}"],
    );
}

#[test]
fn objects_properties_required_additional() {
    let s =
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]});
    check(
        s,
        &[
            "{\"b\": \"x\"}",
            "{\"a\": 1, \"b\": \"x\"}",
            "{\"a\": 1, \"b\": \"x\", \"c\": [1]}",
            "{\"b\":\"x\",\"zz\":null}",
        ],
        &["{}", "{\"a\": 1}", "{\"a\": \"1\", \"b\": \"x\"}", "{\"b\": \"x\", \"a\": \"no\"}"],
    );
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false});
    check(s, &["{}", "{\"a\": 1}"], &["{\"b\": 1}", "{\"a\": 1, \"b\": 1}"]);
    let s = json!({"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 2});
    check(s, &["{}", "{\"x\": 1, \"y\": 2}"], &["{\"x\": \"1\"}", "{\"x\": 1, \"y\": 2, \"z\": 3}"]);
    let s =
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 1, "additionalProperties": false});
    check(s, &["{\"a\": 1}", "{\"b\": 1}", "{\"a\": 1, \"b\": 2}"], &["{}"]);
}

#[test]
fn strict_forbids_unnamed_properties() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let p = pda_with(s, &Options { strict: true, ..Options::default() });
    assert!(p.matches(b"{\"a\": 1}"));
    assert!(!p.matches(b"{\"a\": 1, \"b\": 2}"));
}

#[test]
fn pattern_properties() {
    let s = json!({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": false});
    check(s, &["{}", "{\"x-a\": 1, \"x-b\": 2}"], &["{\"y\": 1}", "{\"x-a\": \"s\"}"]);
}

#[test]
fn pattern_properties_allow_other_keys_unless_forbidden() {
    // Keys that match no pattern take `additionalProperties`, `true` when absent: when every
    // value compiles alike, the grammar alone is exact.
    let s = json!({"type": "object", "patternProperties": {"^a$": {}}});
    assert!(compile(&s, &Options::default()).expect("compiles").checks().is_none());
    check(s, &["{}", "{\"b\": 1}", "{\"a\": [], \"zz\": {\"q\": null}}"], &["[]", "1"]);
    let s = json!({"type": "object", "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": {"type": "string"}});
    check(
        s,
        &["{\"id\": 1, \"x-a\": \"s\", \"b\": \"t\"}", "{\"b\": \"t\", \"id\": 2}"],
        &["{\"b\": 1}", "{\"id\": \"s\"}"],
    );
    // Values that differ: the keys matching no pattern (and naming no property) are spelled
    // as a complement, still without run-time checks.
    for s in [
        json!({"type": "object", "patternProperties": {"^a$": {"type": "integer"}}}),
        json!({"type": "object", "properties": {"b": {"type": "string"}}, "patternProperties": {"^a": {"type": "integer"}}}),
    ] {
        assert!(compile(&s, &Options::default()).expect("compiles").checks().is_none(), "{s}");
    }
    check(
        json!({"type": "object", "patternProperties": {"^a$": {"type": "integer"}}}),
        &["{\"x\": \"x\"}", "{\"a\": 1, \"b\": {}}", "{\"aa\": \"s\"}", "{}"],
        &["{\"a\": \"x\"}", "{\"\\u0061\": \"x\"}"],
    );
    check(
        json!({"type": "object", "properties": {"b": {"type": "string"}}, "patternProperties": {"^a": {"type": "integer"}}}),
        &["{\"b\": \"s\", \"a1\": 2, \"c\": null}", "{\"ba\": 1}", "{\"xa\": \"s\"}"],
        &["{\"b\": 1}", "{\"a1\": \"s\"}", "{\"b\": \"s\", \"a\": []}"],
    );
}

#[test]
fn arrays_items_prefix_counts() {
    check(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
        &["[1]", "[1, 2, 3]"],
        &["[]", "[1, 2, 3, 4]", "[\"a\"]"],
    );
    check(
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
        &["[]", "[\"a\"]", "[\"a\", 1]"],
        &["[1]", "[\"a\", 1, 2]"],
    );
    check(
        json!({"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "boolean"}, "minItems": 2}),
        &["[\"a\", true]", "[\"a\", true, false]"],
        &["[\"a\"]", "[\"a\", 1]"],
    );
    assert_eq!(error_keyword(json!({"type": "array", "uniqueItems": true})), "uniqueItems");
    assert_eq!(error_keyword(json!({"type": "array", "contains": {"type": "integer"}})), "contains");
    // A `contains` no allowed item can match by type: no array, and only the null is left.
    check(
        json!({"type": ["array", "null"], "prefixItems": [{"type": "string"}], "items": false, "contains": {"type": "object"}}),
        &["null"],
        &["[]", "[\"a\"]", "[{}]"],
    );
    check(
        json!({"type": "array", "prefixItems": [{"type": "string"}], "contains": {"type": "object"}}),
        &["[\"a\", {}]"],
        &["[]", "[\"a\"]"],
    );
}

#[test]
fn string_lengths_count_code_points() {
    check(
        json!({"type": "string", "minLength": 2, "maxLength": 3}),
        &["\"ab\"", "\"héé\"", "\"a\\nb\"", "\"\\u00e9\\u00e9\""],
        &["\"a\"", "\"abcd\"", "\"é\""],
    );
}

#[test]
fn patterns_unanchored_and_escaped() {
    check(json!({"type": "string", "pattern": "^[a-z]+$"}), &["\"abc\""], &["\"ab1\"", "\"\""]);
    check(json!({"type": "string", "pattern": "\\d{3}"}), &["\"ab123cd\"", "\"a\\\"123\""], &["\"12\""]);
    check(json!({"type": "string", "pattern": "^a.b$"}), &["\"a\\\"b\"", "\"a\\\\b\""], &["\"a\\nb\""]);
    check(json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}), &["\"abc\""], &["\"abcd\""]);
    // Unanchored pattern with a length: exactly, through the automaton (`grammar::dfa`).
    check(
        json!({"type": "string", "pattern": "[0-9a-f]+", "minLength": 4, "maxLength": 4}),
        &["\"00ff\"", "\"00fg\"", "\"xyz0\""],
        &["\"0ff\"", "\"00fff\"", "\"ghij\""],
    );
    // A look-around pattern with a length, and a pattern with a format: exactly as well.
    check(
        json!({"type": "string", "pattern": "^(?=.*[0-9])(?=.*[A-Z]).{8,}$", "maxLength": 20}),
        &["\"abcdefG1\"", "\"aB3aB3aB3aB3aB3aB3aB\""],
        &["\"abcdefgh\"", "\"abcG1\"", "\"aB3aB3aB3aB3aB3aB3aB3\""],
    );
    check(
        json!({"type": "string", "format": "date", "pattern": "^2020-"}),
        &["\"2020-01-31\""],
        &["\"2021-01-31\"", "\"2020-02-31\""],
    );
    assert_eq!(error_keyword(json!({"type": "string", "format": "date", "pattern": "^2020-"})), "");
    assert_eq!(error_keyword(json!({"type": "string", "format": "time", "maxLength": 2})), "");
    // A look-around compiles exactly (`schema::ecma::lookaround`); a back-reference cannot.
    check(json!({"type": "string", "pattern": "(?=a)"}), &["\"xa\""], &["\"x\""]);
    assert_eq!(error_keyword(json!({"type": "string", "pattern": "(a)\\1"})), "pattern");
}

#[test]
fn formats_are_a_valid_subset() {
    check(json!({"type": "string", "format": "date"}), &["\"2020-01-31\""], &["\"2020-02-31\"", "\"x\""]);
    check(json!({"type": "string", "format": "email"}), &["\"a.b@example.org\""], &["\"a@\""]);
    // Unknown formats are annotations.
    check(json!({"type": "string", "format": "color"}), &["\"red\""], &["1"]);
}

#[test]
fn numeric_bounds() {
    check(json!({"type": "integer", "minimum": 1, "exclusiveMaximum": 10}), &["1", "9"], &["0", "10", "-1"]);
    check(json!({"type": "integer", "maximum": 5, "exclusiveMaximum": true}), &["4", "-3"], &["5"]);
    check(json!({"type": "number", "minimum": 0, "maximum": 1}), &["0", "0.5", "1", "1.0"], &["1.01", "-0.1", "2"]);
    check(json!({"type": "number", "exclusiveMinimum": 0.5}), &["0.51", "3"], &["0.5", "0.49"]);
    check(json!({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 20}), &["0", "15", "20"], &["3", "25"]);
    check(json!({"type": "integer", "multipleOf": 10}), &["0", "-120"], &["15"]);
    check(json!({"type": "number", "multipleOf": 0.01}), &["0", "1.25", "-3.1"], &["1.255", "0.001"]);
    check(json!({"type": "number", "multipleOf": 0.07}), &["0.14", "0"], &["0.1", "0.007"]);
    assert_eq!(error_keyword(json!({"type": "number", "multipleOf": 0.07, "minimum": 1})), "multipleOf");
}

/// A fractional `multipleOf` holds in exact decimals and where validators divide in `f64`
/// (Python's `jsonschema`, ajv): `1.15 / 0.01` is `114.99999999999999` there, so `1.15` is
/// refused although it is a multiple; without run-time checks a note says so.
#[test]
fn fractional_multiples_hold_in_floating_point_too() {
    let cents = json!({"type": "number", "multipleOf": 0.01});
    check(cents.clone(), &["1.25", "1.1", "3", "0.5", "1.2"], &["1.15", "0.07", "19.99"]);
    // No integer from -70 to 70 but 0 divides by 0.07 into an integer in `f64`.
    check(json!({"type": "integer", "multipleOf": 0.07}), &["0"], &["7", "-7", "14", "5"]);
    check(json!({"type": "number", "multipleOf": 0.07}), &["0.14", "2.1"], &["0.21", "7"]);
    check(json!({"type": "number", "multipleOf": 0.0001}), &["0.0075"], &["0.00751"]);
    let obj = json!({"type": "object", "properties": {"price": cents}, "additionalProperties": false});
    check(obj.clone(), &[r#"{"price": 1.25}"#], &[r#"{"price": 1.15}"#]);
    let c = constraint(&obj);
    let mut m = c.matcher();
    m.accept_bytes(br#"{"price": 1.15"#).expect("a prefix of a multiple");
    assert!(m.accept_bytes(b"}").is_err(), "the brace would complete 1.15");
    let exact = compile(&obj, &Options::default().with_runtime_checks(false)).expect("compiles");
    assert!(exact.notes().iter().any(|n| n.to_string().contains("floating point")), "{:?}", exact.notes());
}

/// Two `multipleOf` in one schema each keep their own remainder rules (the second once
/// took the first's rule names and redefined them: `[4]` passed as a multiple of 3).
#[test]
fn several_multiples_in_one_schema() {
    let pair = |a: f64, b: f64| json!({"type": "array", "prefixItems": [{"multipleOf": a}, {"multipleOf": b}], "items": false});
    check(pair(3.0, 0.5), &["[3]", "[-6, 1.5]", "[0, 2]"], &["[4]", "[3, 1.25]", "[1.5]"]);
    check(pair(0.5, 3.0), &["[1.5]", "[2.5, 9]"], &["[1.25]", "[1.5, 4]"]);
    check(pair(7.0, 0.25), &["[14, 0.75]"], &["[15]", "[7, 0.3]"]);
    check(
        json!({"type": "object", "properties": {"pack": {"type": "integer", "multipleOf": 6},
            "weight": {"type": "number", "multipleOf": 0.5}, "step": {"type": "number", "multipleOf": 0.2}}}),
        &[r#"{"pack": 12, "weight": 1.5, "step": 0.4}"#],
        &[r#"{"pack": 10}"#, r#"{"pack": 8}"#, r#"{"weight": 1.2}"#, r#"{"step": 0.3}"#],
    );
}

#[test]
fn any_of_one_of_all_of() {
    check(
        json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}),
        &["1", "\"a\""],
        &["\"ab\"", "null"],
    );
    check(json!({"oneOf": [{"type": "integer"}, {"type": "string"}]}), &["1", "\"a\""], &["null"]);
    let disc = json!({"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
        {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}
    ]});
    check(
        disc,
        &["{\"kind\": \"a\", \"x\": 1}", "{\"kind\": \"b\", \"y\": \"s\"}"],
        &["{\"kind\": \"c\"}", "{\"kind\": \"a\", \"x\": \"s\"}"],
    );
    assert_eq!(error_keyword(json!({"oneOf": [{"type": "integer"}, {"type": "number"}]})), "oneOf");
    check(
        json!({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}),
        &["{\"a\": 1, \"b\": \"x\"}"],
        &["{\"a\": 1}", "{\"b\": \"x\"}"],
    );
    check(json!({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 3}]}), &["0", "3"], &["4", "-1"]);
}

#[test]
fn refs_and_recursion() {
    let s = json!({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}, "required": ["v"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    });
    check(
        s,
        &["{\"v\": 1}", "{\"v\": 1, \"next\": {\"v\": 2, \"next\": {\"v\": 3}}}"],
        &["{\"v\": 1, \"next\": {}}", "{}"],
    );
    let s = json!({"definitions": {"a~b/c": {"type": "integer"}}, "properties": {"x": {"$ref": "#/definitions/a~0b~1c"}}, "type": "object"});
    check(s, &["{\"x\": 1}"], &["{\"x\": \"1\"}"]);
    assert_eq!(error_keyword(json!({"$ref": "http://example.com/x.json"})), "$ref");
}

#[test]
fn not_and_unsupported_keywords() {
    check(json!({"not": {"type": "string"}}), &["1", "null"], &["\"a\""]);
    // `required` holds for every non-object, so its negation takes objects only.
    check(json!({"not": {"required": ["a"]}}), &["{}", "{\"b\": 1}"], &["5", "\"ab\"", "[]", "null", "{\"a\": 1}"]);
    check(json!({"type": ["object", "array"], "not": {"required": ["a"]}}), &["{}"], &["[]"]);
    check(json!({"enum": [{"a": 1}, {"b": 1}, 5], "not": {"required": ["a"]}}), &["{\"b\": 1}"], &["5", "{\"a\": 1}"]);
    assert_eq!(error_keyword(json!({"if": {"type": "string"}, "then": {"minLength": 1}})), "if");
    assert_eq!(
        error_keyword(json!({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}})),
        "dependentSchemas"
    );
    // Vendor keywords and annotations are ignored.
    check(
        json!({"type": "integer", "x-foo": 1, "title": "t", "description": "d", "examples": [1]}),
        &["1"],
        &["\"1\""],
    );
}

#[test]
fn whitespace_policies() {
    let s = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    let compact = pda_with(s.clone(), &Options { whitespace: Whitespace::Compact, ..Options::default() });
    assert!(compact.matches(b"{\"a\":[1,2]}"));
    assert!(!compact.matches(b"{\"a\": [1, 2]}"));
    let pretty = pda_with(s.clone(), &Options::default());
    assert!(pretty.matches(b"{\"a\": [1, 2]}"));
    assert!(pretty.matches(b"{\n  \"a\": [\n    1,\n    2\n  ]\n}"));
    assert!(!pretty.matches(b"{\"a\":  [1]}"));
    assert!(!pretty.matches(format!("{{\n{}\"a\": []}}", " ".repeat(40)).as_bytes()));
    let unbounded = pda_with(s, &Options { whitespace: Whitespace::Unbounded, ..Options::default() });
    assert!(unbounded.matches(b"{ \t \"a\"  :\n\n [ 1 ,2 ] }"));
}

#[test]
fn one_of_made_disjoint_by_required_properties() {
    let s = json!({"type": "object", "oneOf": [
        {"properties": {"lock": {"type": "string"}}, "required": ["lock"]},
        {"properties": {"error": {"type": "string"}}, "required": ["error"]}
    ]});
    check(
        s,
        &["{\"lock\": \"a\"}", "{\"error\": \"e\"}", "{\"lock\": \"a\", \"x\": 1}"],
        &["{\"lock\": \"a\", \"error\": \"e\"}", "{\"error\": \"e\", \"lock\": \"a\"}", "{}"],
    );
    let s = json!({"oneOf": [{"$ref": "#/$defs/s"}, {"type": "object"}], "$defs": {"s": {"oneOf": [{"type": "string"}, {"type": "array"}]}}});
    check(s, &["\"a\"", "[]", "{}"], &["1"]);
    // Branch values compare as JSON Schema values: `1` and `1.0` are one, so both match.
    check(json!({"oneOf": [{"const": 1}, {"const": 1.0}]}), &[], &["1", "1.0"]);
    check(json!({"oneOf": [{"enum": [2, "x"]}, {"enum": [2.0, "y"]}]}), &["\"x\"", "\"y\""], &["2", "2.0"]);
    let kind = |v: Value| json!({"properties": {"kind": {"const": v}}, "required": ["kind"]});
    check(json!({"type": "object", "oneOf": [kind(json!(1)), kind(json!(1.0))]}), &[], &["{\"kind\": 1}"]);
    // ... and in `allOf` merging (where `Value` equality only refused more).
    check(json!({"allOf": [{"enum": [1, 2]}, {"enum": [1.0, 2]}]}), &["1", "2"], &["3"]);
}

#[test]
fn one_of_required_only_branches() {
    let s = json!({"type": "object", "properties": {"base": {"type": "number"}, "radius": {"type": "number"}, "width": {"type": "number"}},
        "oneOf": [{"required": ["radius"]}, {"required": ["base", "width"]}]});
    // `base` with `radius` matches the first branch only: valid (forbidding `base` and
    // `width` in the first branch would refuse it; the run-time check keeps it).
    check(
        s.clone(),
        &[
            "{\"radius\": 5}",
            "{\"base\": 1, \"width\": 2}",
            "{\"base\": 1, \"radius\": 5}",
            "{\"radius\": 5, \"width\": 2}",
        ],
        &["{\"base\": 1, \"radius\": 5, \"width\": 2}", "{\"base\": 1}", "{}"],
    );
    let notes = compile(&s, &Options::default().with_runtime_checks(false)).unwrap().notes().to_vec();
    assert!(notes.iter().any(|n| n.keyword() == "oneOf"), "the narrower grammar says so: {notes:?}");
    // One property apart, and the other branch asks nothing else: forbidding it is exact.
    let s = json!({"type": "object", "properties": {"a": {}, "b": {}},
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
    let notes = compile(&s, &Options::default()).unwrap().notes().to_vec();
    assert!(notes.is_empty(), "{notes:?}");
    check(s, &["{\"a\": 1}", "{\"b\": 1}"], &["{\"a\": 1, \"b\": 2}", "{\"b\": 1, \"a\": 2}", "{}"]);
}

#[test]
fn properties_in_any_order_for_any_size() {
    // Five properties: more than ANY_ORDER_MAX. The grammar alone accepts two orders...
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}, "d": {}, "e": {}}, "required": ["c", "a"], "additionalProperties": false});
    let grammar_only = pda_with(s.clone(), &Options::default().with_runtime_checks(false));
    assert!(grammar_only.matches(b"{\"a\": 1, \"b\": 2, \"c\": 3}"));
    assert!(grammar_only.matches(b"{\"c\": 3, \"a\": 1, \"b\": 2}"));
    assert!(!grammar_only.matches(b"{\"b\": 2, \"a\": 1, \"c\": 3}"));
    // ...and says so.
    let notes = compile(&s, &Options::default().with_runtime_checks(false)).unwrap().notes().to_vec();
    assert!(notes.iter().any(|n| n.keyword() == "properties"), "{notes:?}");
    let notes = compile(&s, &Options::default()).unwrap().notes().to_vec();
    assert!(!notes.iter().any(|n| n.keyword() == "properties"), "{notes:?}");
    // ...with run-time checks, any order, and still no repeated or missing key.
    check(
        s,
        &[
            "{\"a\": 1, \"b\": 2, \"c\": 3}",
            "{\"c\": 3, \"a\": 1, \"b\": 2}",
            "{\"c\": 3, \"a\": 1}",
            "{\"b\": 2, \"a\": 1, \"c\": 3}",
            "{\"e\": [], \"d\": 1, \"a\": 1, \"c\": 3}",
        ],
        &[
            "{\"c\": 3}",
            "{\"b\": 2, \"a\": 1}",
            "{\"a\": 1, \"c\": 3, \"a\": 1}",
            "{\"a\": 1, \"c\": 3, \"\\u0061\": 1}",
            "{\"a\": 1, \"c\": 3, \"f\": 1}",
            "{\"a\": 1, \"c\": \"3\"}",
        ],
    );
}

#[test]
fn any_order_beyond_the_tracked_required_properties() {
    // Eight required properties (more than are tracked as a set): all go in any order,
    // tracked by the weight written, each exactly once. Other keys go anywhere.
    let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let props: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.to_string(), json!({"type": "integer"}))).collect();
    let reversed: Vec<&str> = names.iter().rev().copied().collect();
    let s = json!({"type": "object", "properties": props, "required": reversed});
    let doc = |keys: &[&str]| {
        let members: Vec<String> = keys.iter().map(|k| format!("\"{k}\": 1")).collect();
        format!("{{{}}}", members.join(", "))
    };
    let c = constraint(&s);
    for good in [
        &names[..],
        &reversed[..],
        &["$schema", "a", "b", "c", "d", "e", "f", "g", "h"],
        &["e", "f", "a", "x", "d", "g", "c", "b", "h"],
        &["h", "c", "g", "f", "e", "d", "b", "a"],
        &["f", "h", "g", "a", "b", "c", "d", "e"],
        &["g", "a", "h", "b", "f", "c", "e", "d"],
    ] {
        assert!(accepts(&c, &doc(good)), "{}", doc(good));
    }
    for bad in [
        &names[..7],
        &names[1..],
        // Nine members whose weights sum past the total, and eight with one repeated.
        &["a", "b", "c", "d", "e", "f", "f", "g", "h"],
        &["a", "b", "c", "d", "e", "f", "f", "g"],
        &["x", "a", "b", "c", "d", "e", "x", "f", "g", "h"],
    ] {
        assert!(!accepts(&c, &doc(bad)), "{}", doc(bad));
    }
    let wrong_type: Vec<String> =
        names.iter().map(|k| format!("\"{k}\": {}", if *k == "h" { "\"x\"" } else { "1" })).collect();
    assert!(!accepts(&c, &format!("{{{}}}", wrong_type.join(", "))));
    // No note: nothing is left in an order.
    let notes = compile(&s, &Options::default()).unwrap().notes().to_vec();
    assert!(!notes.iter().any(|n| n.keyword() == "required"), "{notes:?}");
}

#[test]
fn weighted_required_members_keep_closing_distances_exact() {
    // Members of different lengths: after the shortest is written, the distance to the end
    // is that of the members still missing, not of writing the shortest again.
    let names = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg"];
    let props: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.to_string(), json!({"type": "boolean"}))).collect();
    let s = json!({"type": "object", "properties": props, "required": names, "additionalProperties": false});
    let g = compile(&s, &Options::default().with_whitespace(Whitespace::Compact)).unwrap();
    let c = crate::Constraint::new(&g, crate::TokenIndex::new(crate::Vocabulary::bytes()), &Limits::default()).unwrap();
    let mut m = c.matcher();
    m.accept_bytes(br#"{"a":true"#).unwrap();
    let rest: String = names[1..].iter().map(|n| format!(",\"{n}\":true")).collect::<String>() + "}";
    assert_eq!(m.min_bytes_to_finish(), Some(rest.len() as u64), "{rest}");
    m.accept_bytes(rest.as_bytes()).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn weights_see_definitions_compiled_after_the_object() {
    // Members whose values are references to a definition compiled after the object (and
    // an object of the same layout inside one): the weights are still their fewest bytes,
    // so the distance with `to` missing is exactly that of writing it (a weight of `,"to":`
    // alone would be that of `,"e":0`, and the grammar's shortest way a repeat of `e`).
    let names = ["a", "b", "c", "d", "from"];
    let mut props: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.to_string(), json!({"type": "boolean"}))).collect();
    props.insert("e".into(), json!({"type": "integer"}));
    props.insert("from".into(), json!({"$ref": "#/$defs/place"}));
    props.insert("to".into(), json!({"$ref": "#/$defs/place"}));
    let place_props: serde_json::Map<String, Value> =
        ["p", "q", "r", "s", "t", "u"].iter().map(|n| (n.to_string(), json!({"enum": ["xyz"]}))).collect();
    let s = json!({
        "type": "object", "properties": props, "additionalProperties": false,
        "required": ["a", "b", "c", "d", "e", "from", "to"],
        "$defs": {"place": {"type": "object", "properties": place_props, "additionalProperties": false,
                            "required": ["p", "q", "r", "s", "t", "u"]}}
    });
    let g = compile(&s, &Options::default().with_whitespace(Whitespace::Compact)).unwrap();
    let c = crate::Constraint::new(&g, crate::TokenIndex::new(crate::Vocabulary::bytes()), &Limits::default()).unwrap();
    let place = r#"{"p":"xyz","q":"xyz","r":"xyz","s":"xyz","t":"xyz","u":"xyz"}"#;
    let mut m = c.matcher();
    m.accept_bytes(format!(r#"{{"e":0,"from":{place},"a":true,"d":true,"c":true,"b":true"#).as_bytes()).unwrap();
    let rest = format!(r#","to":{place}}}"#);
    assert_eq!(m.min_bytes_to_finish(), Some(rest.len() as u64), "{rest}");
    m.accept_bytes(rest.as_bytes()).unwrap();
    assert!(m.is_accepting());
    let shortest = format!(r#"{{"a":true,"b":true,"c":true,"d":true,"e":0,"from":{place},"to":{place}}}"#);
    assert_eq!(c.min_bytes_from_start(), Some(shortest.len() as u64));
}

#[test]
fn other_keys_exclude_named_keys() {
    let s = json!({"type": "object", "properties": {"ab": {"type": "integer"}, "a\"c": {"type": "integer"}}});
    check(
        s,
        &[
            "{\"ab\": 1}",
            "{\"ab\": 1, \"a\": \"x\"}",
            "{\"ab\": 1, \"abc\": \"x\"}",
            "{\"ab\": 1, \"b\\n\": \"x\"}",
            "{\"a\\\"c\": 2}",
            "{\"a\\\"\": \"x\"}",
        ],
        &["{\"ab\": \"x\"}", "{\"ab\": 1, \"ab\": \"x\"}", "{\"a\\\"c\": \"x\"}"],
    );
    let s = json!({"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": {"type": "integer"}});
    check(
        s,
        &["{\"name\": \"n\", \"\\\\x\": 1}", "{\"nam\": 1}", "{\"names\": 2}"],
        &["{\"name\": 1}", "{\"x\": \"s\"}"],
    );
    // A control character written as `\u00XX` (JSON's only spelling for most of them)
    // where a name could go on: at the start, and inside `nam`; `\u006e` spells `n`, which
    // a name goes on with, and stays refused.
    let s = json!({"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": {"type": "integer"}});
    check(
        s,
        &[r#"{"\u0005": 1}"#, r#"{"nam\u001F": 1}"#, r#"{"\u0005\u0061": 1}"#],
        &[r#"{"\u0005": "x"}"#, r#"{"\u006eame": 1}"#, r#"{"\u0020": 1}"#],
    );
}

#[test]
fn free_keys_come_anywhere_in_small_objects() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]});
    check(
        s,
        &[
            "{\"a\": 1, \"x\": 2, \"b\": 3}",
            "{\"x\": 2, \"a\": 1, \"b\": 3}",
            "{\"b\": 1, \"a\": 2, \"x\": [], \"y\": {}}",
        ],
        &["{\"a\": 1, \"x\": 2}", "{\"x\": 1, \"a\": \"s\", \"b\": 2}", "{\"a\": 1, \"b\": 2, \"a\": 3}", "{\"x\": 1}"],
    );
}

#[test]
fn small_objects_accept_any_order() {
    let s = json!({"type": "object", "properties": {"jsonrpc": {"const": "2.0"}, "method": {"type": "string"}, "id": {"type": "integer"}, "params": {"type": "array"}}, "required": ["jsonrpc", "method"], "additionalProperties": false});
    check(
        s,
        &[
            "{\"jsonrpc\": \"2.0\", \"method\": \"m\", \"params\": [], \"id\": 1}",
            "{\"method\": \"m\", \"jsonrpc\": \"2.0\"}",
            "{\"id\": 1, \"method\": \"m\", \"jsonrpc\": \"2.0\"}",
        ],
        &[
            "{\"method\": \"m\"}",
            "{\"jsonrpc\": \"2.0\", \"method\": \"m\", \"method\": \"n\"}",
            "{\"jsonrpc\": \"2.0\", \"method\": \"m\", \"x\": 1}",
            "{}",
        ],
    );
}

// The cases below come from JSON-Schema-Test-Suite (MIT), trimmed; each was a wrong accept.

#[test]
fn unevaluated_properties_see_only_their_own_object() {
    // unevaluatedProperties--22: a sibling allOf part's properties are not evaluated by it.
    check(
        json!({"allOf": [{"properties": {"foo": true}}, {"unevaluatedProperties": false}]}),
        &["{}"],
        &["{\"foo\": 1}"],
    );
    // Properties of an in-place allOf part and of a $ref target count as evaluated.
    check(
        json!({"allOf": [{"properties": {"foo": {"type": "string"}}}], "unevaluatedProperties": false}),
        &["{\"foo\": \"a\"}", "{}"],
        &["{\"bar\": 1}", "{\"foo\": 1}"],
    );
    check(
        json!({"$defs": {"a": {"properties": {"foo": true}}}, "$ref": "#/$defs/a", "properties": {"bar": true}, "unevaluatedProperties": false}),
        &["{\"foo\": 1, \"bar\": 2}"],
        &["{\"baz\": 1}"],
    );
    // ref--13: $ref beside properties, the target with unevaluatedProperties: false.
    check(
        json!({"$defs": {"bar": {"unevaluatedProperties": false}}, "$ref": "#/$defs/bar", "properties": {"foo": {"type": "string"}}}),
        &["{}"],
        &["{\"foo\": \"x\"}"],
    );
    // Names only anyOf may evaluate: without run-time checks, rewritten per branch, so
    // names two branches evaluate together are treated as unevaluated (fewer instances,
    // with a note).
    let s = json!({"properties": {"a": true}, "anyOf": [{"properties": {"b": true}}], "unevaluatedProperties": false});
    let grammar_only = Options::default().with_runtime_checks(false);
    let notes = compile(&s, &grammar_only).unwrap().notes().to_vec();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].pointer(), "/unevaluatedProperties");
    let pda = pda_with(s.clone(), &grammar_only);
    assert!(pda.matches(b"{\"a\": 1}") && pda.matches(b"{\"b\": 1}") && !pda.matches(b"{\"c\": 1}"));
    // With them the grammar counts them as evaluated and the check decides: exact.
    let g = compile(&s, &Options::default()).unwrap();
    let notes = g.notes();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(g.checks().map(|c| c.relaxed()[0].pointer.as_str()), Some("/unevaluatedProperties"));
    check(s, &["{\"a\": 1}", "{\"b\": 1}", "{\"a\": 1, \"b\": 2}"], &["{\"c\": 1}", "{\"b\": 1, \"c\": 1}"]);
    // `unevaluatedProperties: true` constrains nothing: no note, no run-time check.
    let t = json!({"properties": {"a": true}, "anyOf": [{"properties": {"b": true}}], "unevaluatedProperties": true});
    let g = compile(&t, &Options::default()).unwrap();
    let notes = g.notes();
    assert!(notes.is_empty(), "{notes:?}");
    assert!(g.checks().is_none_or(|c| c.relaxed().iter().all(|r| r.keyword != "unevaluatedProperties")));
    // Two anyOf branches that both hold evaluate together (suite unevaluatedProperties--11
    // style); an `if` without a match evaluates nothing of its own.
    check(
        json!({"anyOf": [{"properties": {"a": true}, "required": ["a"]}, {"properties": {"b": true}, "required": ["b"]}],
               "unevaluatedProperties": false}),
        &["{\"a\": 1, \"b\": 2}", "{\"b\": 2}"],
        &["{\"a\": 1, \"c\": 2}"],
    );
    check(
        json!({"if": {"properties": {"k": {"const": "x"}}, "required": ["k"]}, "then": {"properties": {"t": true}},
               "else": {"properties": {"e": true}}, "unevaluatedProperties": false}),
        &["{\"k\": \"x\", \"t\": 1}", "{\"e\": 1}"],
        &["{\"k\": \"y\", \"e\": 1}", "{\"k\": \"x\", \"e\": 1}", "{\"t\": 1}", "{\"k\": \"y\"}"],
    );
}

#[test]
fn unevaluated_items_and_items_beside_prefix_items() {
    check(json!({"prefixItems": [{"type": "string"}], "unevaluatedItems": false}), &["[\"a\"]", "[]"], &["[\"a\", 1]"]);
    check(json!({"allOf": [{"prefixItems": [true]}], "unevaluatedItems": false}), &["[1]"], &["[1, 2]"]);
    check(json!({"allOf": [{"prefixItems": [true]}, {"unevaluatedItems": false}]}), &["[]"], &["[1]"]);
    // items--6: items beside an allOf holding prefixItems applies from index 0.
    check(
        json!({"allOf": [{"prefixItems": [{"minimum": 3}]}], "items": {"minimum": 5}}),
        &["[5, 5]"],
        &["[3, 5]", "[5, 4]"],
    );
    // Items evaluated by the one branch of `oneOf` that holds (suite unevaluatedItems--12).
    let one_of = json!({"prefixItems": [{"const": "foo"}],
        "oneOf": [{"prefixItems": [true, {"const": "bar"}]}, {"prefixItems": [true, {"const": "baz"}]}],
        "unevaluatedItems": false});
    check(
        one_of,
        &[r#"["foo", "bar"]"#, r#"["foo", "baz"]"#],
        &[r#"["foo", "bar", 1]"#, r#"["foo"]"#, r#"["foo", "qux"]"#],
    );
    // `if`/`then`/`else` (suite unevaluatedItems--14): the `else` side keeps only what both
    // sides evaluate.
    let cond = json!({"prefixItems": [{"const": "foo"}],
        "if": {"prefixItems": [true, {"const": "bar"}]},
        "then": {"prefixItems": [true, true, {"const": "then"}]},
        "else": {"prefixItems": [true, true, true, {"const": "else"}]},
        "unevaluatedItems": false});
    check(
        cond,
        &[r#"["foo", "bar", "then"]"#, r#"["foo", "x", "y"]"#],
        &[r#"["foo", "bar", "then", 1]"#, r#"["foo", "bar", "x"]"#, r#"["foo", "x", "y", "z"]"#],
    );
    // `items` as `unevaluatedItems` in a branch evaluates every item.
    check(
        json!({"oneOf": [{"items": {"type": "string"}}, {"prefixItems": [{"type": "integer"}]}], "unevaluatedItems": false}),
        &[r#"["a", "b"]"#, "[1]"],
        &["[1, 2]"],
    );
}

#[test]
fn recursive_refs_beside_siblings_compile_once() {
    // The merged child is the same schema at every depth, so it becomes one rule.
    let tree = json!({"$ref": "#/$defs/node", "type": "object", "$defs": {"node": {"type": "object",
        "properties": {"v": {"type": "integer"}, "child": {"$ref": "#/$defs/node", "required": ["v"]}}}}});
    check(
        tree,
        &[r#"{"v": 1}"#, r#"{"child": {"v": 2, "child": {"v": 3}}}"#],
        &[r#"{"child": {"child": {"v": 3}}}"#, r#"{"child": {"v": 2, "child": {"v": "x"}}}"#, "5"],
    );
    // The pydantic v1 shape: `allOf` of one `$ref`, with an annotation beside it.
    let list = json!({"$defs": {"item": {"type": "object", "properties": {"next": {"allOf": [{"$ref": "#/$defs/item"}], "description": "d"}}, "additionalProperties": false}},
        "$ref": "#/$defs/item"});
    check(list, &[r#"{"next": {"next": {}}}"#], &[r#"{"next": {"x": 1}}"#]);
}

#[test]
fn ids_and_refs_follow_real_subschema_positions() {
    // unknownKeyword--0: an $id inside an unknown keyword is not an identifier.
    let s = json!({
        "$defs": {
            "id_in_unknown0": {"not": {"array_of_schemas": [{"$id": "https://localhost:1234/my_identifier.json", "type": "null"}]}},
            "real_id_in_schema": {"$id": "https://localhost:1234/my_identifier.json", "type": "string"},
        },
        "anyOf": [{"$ref": "#/$defs/id_in_unknown0"}, {"$ref": "https://localhost:1234/my_identifier.json"}]
    });
    // (`not` of a schema with only an unknown keyword is `false`.)
    check(s, &["\"a\""], &["1", "null"]);
    let s = json!({
        "$defs": {
            "id_in_unknown0": {"not": {"array_of_schemas": [{"$id": "https://localhost:1234/my_identifier.json", "type": "null"}]}},
            "real_id_in_schema": {"$id": "https://localhost:1234/my_identifier.json", "type": "string"},
        },
        "$ref": "https://localhost:1234/my_identifier.json"
    });
    check(s, &["\"a\""], &["null"]);
    // A reference to another document is refused, never resolved to some other schema.
    assert_eq!(error_keyword(json!({"$ref": "https://example.com/other.json"})), "$ref");
    // Relative ids set the base of nested references.
    let s = json!({
        "$id": "http://example.com/root.json",
        "properties": {"a": {"$ref": "nested/b.json"}},
        "$defs": {"b": {"$id": "nested/b.json", "type": "integer"}, "c": {"$id": "b.json", "type": "string"}}
    });
    check(s, &["{\"a\": 1}"], &["{\"a\": \"x\"}"]);
}

#[test]
fn dialects_give_their_own_meaning() {
    let d4 = "http://json-schema.org/draft-04/schema#";
    let d7 = "http://json-schema.org/draft-07/schema#";
    let d19 = "https://json-schema.org/draft/2019-09/schema";
    // draft-04: const is an unknown keyword; boolean exclusiveMinimum.
    check(json!({"$schema": d4, "const": 1}), &["2"], &[]);
    check(json!({"$schema": d4, "minimum": 1, "exclusiveMinimum": true}), &["2"], &["1"]);
    // draft-04: `1.0` is not an `integer`, but a `number` that is a multiple of 1.
    check(json!({"$schema": d4, "type": "integer"}), &["1", "-0"], &["1.0"]);
    check(json!({"$schema": d4, "type": "number", "multipleOf": 1}), &["6000.0", "6000", "0.00"], &["0.5", "1.01"]);
    check(json!({"$schema": d4, "type": "number", "multipleOf": 5, "maximum": 10}), &["10.0", "5"], &["15.0", "2.0"]);
    // ... and so in `enum`/`const` under `integer`, where from draft-06 on `2.0` is the integer 2.
    check(json!({"$schema": d4, "type": "integer", "enum": [1, 2]}), &["2"], &["2.0"]);
    check(json!({"type": "integer", "enum": [1, 2, 2.5]}), &["2", "2.0", "1.0"], &["2.5", "3.0"]);
    check(json!({"type": "integer", "const": 2}), &["2", "2.0"], &["2.5", "20"]);
    // Up to draft-07 $ref overrides its siblings; from 2019-09 they apply too.
    let refd = |d: &str| json!({"$schema": d, "definitions": {"i": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/i", "maximum": 3}}});
    check(refd(d7), &["{\"a\": 5}"], &["{\"a\": \"x\"}"]);
    check(refd(d19), &["{\"a\": 2}"], &["{\"a\": 5}"]);
    // Tuple items: array-form items with additionalItems before 2020-12, and without $schema.
    check(
        json!({"$schema": d19, "items": [{"type": "string"}], "additionalItems": false}),
        &["[\"a\"]"],
        &["[\"a\", 1]", "[1]"],
    );
    check(json!({"items": [{"type": "string"}], "additionalItems": false}), &["[\"a\"]"], &["[\"a\", 1]"]);
    // prefixItems is unknown in draft-07.
    check(json!({"$schema": d7, "prefixItems": [{"type": "string"}]}), &["[1]"], &[]);
    // dependencies: required names (array) and schemas.
    check(json!({"$schema": d7, "dependencies": {"a": ["b"]}}), &["{\"a\": 1, \"b\": 2}"], &["{\"a\": 1}"]);
    // (the error names the keyword as written, not the `dependentSchemas` it became)
    assert_eq!(error_keyword(json!({"$schema": d7, "dependencies": {"a": {"minProperties": 3}}})), "dependencies");
    // --draft forces a dialect over $schema.
    let opts = Options { draft: Some(dialect::Draft::Draft4), ..Options::default() };
    let g = compile(&json!({"$schema": d19, "const": 1}), &opts).unwrap();
    let p = Pda::build(g.grammar(), &Limits::default()).unwrap();
    assert!(p.matches(b"2"));
}

#[test]
fn dependent_required_for_small_objects() {
    let s = json!({"dependentRequired": {"bar": ["foo"]}});
    check(
        s,
        &["{}", "{\"foo\": 1}", "{\"foo\": 1, \"bar\": 2}", "{\"bar\": 2, \"foo\": 1}", "{\"x\": 1}"],
        &["{\"bar\": 2}", "{\"bar\": 2, \"x\": 1}"],
    );
    let d4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": {"type": "integer"}}, "dependencies": {"a": ["b", "c"]}});
    check(d4, &["{\"a\": 1, \"b\": 2, \"c\": 3}", "{\"b\": 1}"], &["{\"a\": 1, \"b\": 2}"]);
    // A needed name that can never be present makes its dependant impossible.
    check(
        json!({"properties": {"b": false}, "dependentRequired": {"a": ["b"]}}),
        &["{}"],
        &["{\"a\": 1}", "{\"a\": 1, \"b\": 1}"],
    );
    // Too many named properties to track: refused, not ignored.
    let big = json!({"properties": {"a": true, "b": true, "c": true, "d": true, "e": true}, "dependentRequired": {"a": ["b"]}});
    assert_eq!(error_keyword(big), "dependentRequired");
}

#[test]
fn property_names_for_objects_without_named_properties() {
    check(json!({"propertyNames": {"maxLength": 3}}), &["{}", "{\"abc\": 1}", "[]"], &["{\"abcd\": 1}"]);
    check(json!({"propertyNames": {"pattern": "^a+$"}}), &["{\"aa\": 1}"], &["{\"ab\": 1}"]);
    check(json!({"propertyNames": false}), &["{}", "1"], &["{\"a\": 1}"]);
    check(json!({"propertyNames": {"enum": ["foo", "bar"]}}), &["{\"foo\": 1}"], &["{\"baz\": 1}"]);
    assert_eq!(error_keyword(json!({"properties": {"a": true}, "propertyNames": {"maxLength": 3}})), "propertyNames");
}

#[test]
fn the_order_hint_takes_the_schema_order_only() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {}},
        "required": ["a", "b"]});
    let hint = order_hint(&s, &Options::default()).expect("compiles");
    let index = crate::TokenIndex::new(crate::Vocabulary::bytes());
    let c = crate::Constraint::new(&hint, index, &Limits::default()).expect("builds");
    for (doc, ok) in [
        ("{\"a\": 1, \"b\": 2}", true),
        ("{\"a\": 1, \"b\": 2, \"c\": 3, \"x\": 4}", true),
        ("{\"b\": 2, \"a\": 1}", false),
        ("{\"a\": 1, \"c\": 3, \"b\": 2}", false),
    ] {
        assert_eq!(accepts(&c, doc), ok, "{doc}");
    }
    // The constraint itself still takes any order, and carries the hint.
    let main = constraint(&s).with_order_hint(c);
    assert!(accepts(&main, "{\"b\": 2, \"a\": 1}"));
    assert!(main.order_hint().is_some_and(|h| !accepts(h, "{\"b\": 2, \"a\": 1}")));
    // Built from the schema over the constraint's own vocabulary, the same hint.
    let built = with_order_hint(constraint(&s), &s, &Options::default());
    assert!(built
        .order_hint()
        .is_some_and(|h| accepts(h, "{\"a\": 1, \"b\": 2}") && !accepts(h, "{\"b\": 2, \"a\": 1}")));
}

/// A declared name spelled with escapes is never taken for another key: `{"\u0061": "x"}`
/// is the key `a`, so it must meet `a`'s schema, not the other keys'. Such spellings are
/// refused where a declared name could go on (fewer strings, never more); escapes after a
/// key has left every declared name are kept.
#[test]
fn escaped_spellings_of_declared_names() {
    let free = json!({"type": "object", "properties": {"a": {"type": "integer"}, "card": {}, "cvv": {}}});
    check(
        free.clone(),
        &[r#"{"a": 1}"#, r#"{"x\u0061": "x"}"#, r#"{"b": "\u0061"}"#, r#"{"ab\n": 2}"#],
        &[r#"{"\u0061": "x"}"#, r#"{"\u0041": 1, "\u0061": "x"}"#, r#"{"c\u0061rd": 1, "\u0061": "y"}"#],
    );
    check(
        json!({"type": "object", "properties": {"user": {"type": "object", "properties": {"age": {"minimum": 0}}}}}),
        &[r#"{"user": {"age": 5}}"#],
        &[r#"{"user": {"\u0061ge": -5}}"#, r#"{"user": {"a\u0067e": -5}}"#],
    );
    check(
        json!({"type": "object", "dependentRequired": {"card": ["cvv"]}}),
        &[r#"{"card": 1, "cvv": 2}"#, r#"{"x": 1}"#],
        &[r#"{"card": 1}"#, r#"{"c\u0061rd": "1"}"#],
    );
    check(json!({"not": {"required": ["a"]}}), &["{}", r#"{"b": 1}"#], &[r#"{"a": 1}"#, r#"{"\u0061": 1}"#]);
}

/// `unevaluatedProperties` beside one conditional applicator: each branch evaluates its own
/// names with the object's (labels from Python's jsonschema). Exact for `oneOf` and when
/// `if` holds; `else` counts only the names the `if` branch evaluates too, and `anyOf`
/// refuses properties that only two branches together evaluate (both documented subsets).
#[test]
fn unevaluated_properties_per_branch() {
    check(
        json!({"type": "object", "properties": {"k": {}}, "if": {"properties": {"k": {"const": "a"}}, "required": ["k"]},
            "then": {"properties": {"x": {}}}, "else": {"properties": {"y": {}}}, "unevaluatedProperties": false}),
        &[r#"{"k": "a", "x": 1}"#, r#"{"k": "b"}"#, r#"{"k": "a"}"#],
        &[r#"{"k": "a", "y": 1}"#, r#"{"k": "b", "x": 1}"#, r#"{"k": "a", "x": 1, "z": 0}"#],
    );
    check(
        json!({"type": "object", "oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]}], "unevaluatedProperties": false}),
        &[r#"{"a": 1}"#, r#"{"b": 1}"#],
        &[r#"{"a": 1, "b": 2}"#, r#"{"a": 1, "c": 1}"#, r#"{"a": 1, "b": "x"}"#],
    );
    check(
        json!({"type": "object", "anyOf": [{"properties": {"a": {}}, "required": ["a"]},
            {"properties": {"b": {}}, "required": ["b"]}], "unevaluatedProperties": false}),
        &[r#"{"a": 1}"#, r#"{"b": 1}"#],
        &[r#"{"a": 1, "c": 1}"#, "{}"],
    );
    // Unevaluated properties must meet the schema given, in every branch.
    check(
        json!({"type": "object", "oneOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]},
            {"properties": {"b": {"const": 2}}, "required": ["b"]}], "unevaluatedProperties": {"type": "string"}}),
        &[r#"{"a": 1, "z": "s"}"#, r#"{"b": 2, "z": "s"}"#],
        &[r#"{"a": 1, "z": 3}"#, r#"{"b": 2, "a": 5}"#, r#"{"b": 2, "z": 5}"#],
    );
}

/// Objects of an `enum`/`const` equal the value whatever the order of their members
/// (JSON objects are unordered); nothing more: no other member, none missing or repeated.
#[test]
fn enum_and_const_objects_in_any_member_order() {
    check(
        json!({"enum": [{"w": 1, "h": 2}, 3]}),
        &[r#"{"w": 1, "h": 2}"#, r#"{"h": 2, "w": 1}"#, r#"{"h": 2, "w": 1.0}"#, "3"],
        &[r#"{"w": 1}"#, r#"{"w": 1, "h": 2, "z": 1}"#, r#"{"w": 1, "w": 1}"#, r#"{"h": 1, "w": 2}"#],
    );
    check(
        json!({"const": {"x": 0, "y": {"a": [1, 2], "d": null}}}),
        &[r#"{"y": {"d": null, "a": [1, 2]}, "x": 0}"#, r#"{"x": 0.0, "y": {"a": [1, 2], "d": null}}"#],
        &[r#"{"x": 0, "y": {"a": [2, 1], "d": null}}"#, r#"{"x": 0, "y": {"a": [1, 2], "d": null}, "x": 0}"#],
    );
}

#[test]
fn legacy_dependencies_keep_to_both_readings() {
    let s2020 = "https://json-schema.org/draft/2020-12/schema";
    // Beside oneOf: honoured (the suite's optional tests) it makes `{"email", "phone"}` valid
    // (only the second branch holds); ignored (Python's `jsonschema`) it makes it invalid
    // (both hold). Only what both readings accept is accepted.
    let schema = json!({"$schema": s2020, "type": "object", "oneOf": [
        {"required": ["email"], "dependencies": {"email": ["verified"]}},
        {"required": ["phone"]}]});
    check(
        schema.clone(),
        &[r#"{"phone": "1"}"#, r#"{"email": "a", "verified": true}"#],
        &[r#"{"email": "a", "phone": "1"}"#, r#"{"email": "a", "verified": true, "phone": "1"}"#],
    );
    // Without run-time checks the schema is refused at the keyword, not compiled loosely.
    assert_eq!(error_keyword(schema), "dependencies");
    // Where honouring it only rejects more, the grammar alone honours it (the suite's reading).
    let plain = json!({"$schema": s2020, "dependencies": {"bar": ["foo"]}});
    assert_eq!(error_keyword(plain.clone()), "");
    check(plain, &[r#"{"foo": 1, "bar": 2}"#, "12"], &[r#"{"bar": 2}"#]);
    // A `$ref` into `dependencies` still resolves for the check that ignores the keyword.
    let into = json!({"$schema": s2020, "$ref": "#/dependencies/a", "dependencies": {"a": {"required": ["b"]}},
                      "not": {"required": ["z"]}});
    check(into, &[r#"{"b": 1}"#, r#"{"a": 1, "b": 2}"#], &["{}", r#"{"a": 1}"#, r#"{"b": 1, "z": 2}"#]);
    // Draft-07: a keyword, one reading.
    let d7 = json!({"$schema": "http://json-schema.org/draft-07/schema#",
                    "not": {"dependencies": {"a": ["b"]}}});
    check(d7, &[r#"{"a": 1}"#], &[r#"{"a": 1, "b": 2}"#, "{}"]);
}

#[test]
fn look_around_pattern_properties_are_checked_at_run_time() {
    // JsonSchemaStore's browser.i18n shape: any key but those starting `@@`.
    let s = json!({"type": "object", "patternProperties": {"^(?!@@)[a-z@]+$": {"type": "string"}},
                   "additionalProperties": false});
    check(
        s.clone(),
        &[r#"{"ab": "x"}"#, r#"{"a@": "x", "b": "y"}"#, "{}"],
        &[r#"{"@@a": "x"}"#, r#"{"ab": 1}"#, r#"{"A": "x"}"#],
    );
    assert_eq!(error_keyword(s), "patternProperties");
    // A declared name that a look-around pattern also matches takes both schemas.
    check(
        json!({"properties": {"ab": {"minLength": 2}}, "patternProperties": {"^(?!x)a": {"maxLength": 3}}}),
        &[r#"{"ab": "xyz"}"#],
        &[r#"{"ab": "wxyz"}"#, r#"{"ab": "x"}"#],
    );
}

/// Draft-07's `contentEncoding: base64` and `contentMediaType: application/json` (also
/// draft-06's, which the `jsonschema` crate asserts) are asserted on strings, as the official
/// suite's optional tests want; other values pass. Later drafts keep them as annotations.
#[test]
fn content_keywords_are_asserted_in_draft_7() {
    let d7 = "http://json-schema.org/draft-07/schema#";
    // The suite's `optional/content.json` cases.
    check(
        json!({"$schema": d7, "contentEncoding": "base64"}),
        &["\"eyJmb28iOiAiYmFyIn0K\"", "\"\"", "\"QQ==\"", "\"QUI=\"", "100"],
        &["\"eyJmb28iOi%iYmFyIn0K\"", "\"QQ\"", "\"QR==\"", "\"QUJ=\"", "\"Q===\"", "\"QUJD\\n\""],
    );
    check(
        json!({"$schema": d7, "contentMediaType": "application/json"}),
        &[r#""{\"foo\":\"bar\"}""#, r#""[1,true,null,{}]""#, r#""-1.5e3""#, r#""\"é\"""#, "100"],
        // Invalid JSON; and valid JSON outside the subset (whitespace, escapes in strings).
        &[r#""{:}""#, r#""{\"a\":}""#, r#""""#, r#""{\"foo\": \"bar\"}""#, r#""\"a\\nb\"""#],
    );
    check(
        json!({"$schema": d7, "type": "string", "contentEncoding": "base64", "minLength": 4, "maxLength": 4}),
        &["\"QUJD\"", "\"QQ==\""],
        &["\"\"", "\"QUJDREVG\""],
    );
    // Under `not` the readings part ways: both must hold, so a string passes only if it is
    // not base64 (asserted) and the schema holds with the keyword ignored (never).
    check(json!({"$schema": d7, "not": {"contentEncoding": "base64"}}), &[], &["\"%%\"", "\"QQ==\"", "1"]);
    let elsewhere =
        json!({"$schema": d7, "properties": {"a": {"contentEncoding": "base64"}, "b": {"not": {"type": "string"}}}});
    check(elsewhere.clone(), &[r#"{"a": "QQ==", "b": 1}"#], &[r#"{"a": "%%"}"#, r#"{"b": "x"}"#]);
    let err = compile(&elsewhere, &Options::default().with_runtime_checks(false)).unwrap_err();
    assert_eq!((err.pointer(), err.keyword()), ("/properties/a/contentEncoding", "contentEncoding"));
    // In an enum, values are filtered by it.
    check(json!({"$schema": d7, "enum": ["QQ==", "%%"], "contentEncoding": "base64"}), &["\"QQ==\""], &["\"%%\""]);
    // Base64 of JSON, and the other encodings the `jsonschema` crate checks, are refused.
    let err = compile(
        &json!({"$schema": d7, "contentEncoding": "base64", "contentMediaType": "application/json"}),
        &Options::default(),
    )
    .unwrap_err();
    assert_eq!((err.pointer(), err.keyword()), ("/contentMediaType", "contentMediaType"));
    assert_eq!(
        error_keyword(json!({"$schema": d7, "properties": {"a": {"contentEncoding": "base32"}}})),
        "contentEncoding"
    );
    // Unknown encodings and media types, and the keywords in 2020-12 and draft-04, assert
    // nothing.
    check(json!({"$schema": d7, "contentEncoding": "7bit", "contentMediaType": "text/html"}), &["\"%%\""], &[]);
    check(json!({"contentEncoding": "base64", "contentMediaType": "application/json"}), &["\"%%\""], &[]);
    check(json!({"$schema": "http://json-schema.org/draft-04/schema#", "contentEncoding": "base64"}), &["\"%%\""], &[]);
}

#[test]
fn applicators_the_siblings_decide() {
    // `not` that every object of the siblings matches: nothing, with a warning there.
    let s = json!({"type": "object", "properties": {"p": {
        "type": "object", "required": ["a", "b"], "not": {"required": ["a", "b"]}
    }}});
    let g = compile(&s, &Options::default()).unwrap();
    let notes = g.notes();
    assert!(notes.iter().any(|n| n.is_warning() && n.pointer() == "/properties/p/not"), "{notes:?}");
    assert!(Pda::build(g.grammar(), &Limits::default()).is_ok_and(|p| !p.matches_prefix(b"{\"p\":")), "{g}");
    check(s, &["{}", "{\"q\": 1}"], &["{\"p\": {\"a\": 1, \"b\": 2}}", "{\"p\": {}}"]);
    // `not` that no object of the siblings matches: no constraint, and no run-time check.
    let s = json!({"type": "object", "properties": {"a": false}, "not": {"required": ["a", "b"]}});
    let g = compile(&s, &Options::default()).unwrap();
    assert!(g.checks().is_none());
    check(s, &["{}", "{\"b\": 1}"], &["{\"a\": 1}"]);
    // A oneOf branch no object can match is left out: the others are disjoint, and exact.
    let s = json!({
        "type": "object", "required": ["k"], "additionalProperties": false,
        "properties": {"k": {}, "x": {"type": "string"}, "y": {"type": "number"}},
        "oneOf": [{"required": ["x"], "not": {"required": ["y"]}}, {"required": ["z"]}]
    });
    assert_eq!(error_keyword(s.clone()), "");
    check(s, &["{\"k\": 1, \"x\": \"s\"}"], &["{\"k\": 1}", "{\"k\": 1, \"x\": \"s\", \"y\": 1}"]);
    // Undecided branches change nothing.
    let s = json!({"type": "object", "required": ["a"], "anyOf": [{"required": ["b"]}, {"minProperties": 3}]});
    let notes = compile(&s, &Options::default()).unwrap().notes().to_vec();
    assert!(notes.is_empty(), "{notes:?}");
    check(s, &["{\"a\": 1, \"b\": 2}", "{\"a\": 1, \"c\": 2, \"d\": 3}"], &["{\"a\": 1}", "{\"a\": 1, \"c\": 2}"]);
}

//! Run-time checks: the keywords a grammar cannot express, enforced exactly by the matcher.
//! Each schema is compiled with the default options and judged on documents fed byte by
//! byte (a vocabulary of the 256 bytes) and through token masks; the grammar alone would
//! refuse these schemas, or accept more than they allow.

use constrain::mask::is_allowed;
use constrain::schema::{self, Options};
use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
use serde_json::{json, Value};

fn constraint(schema: &Value) -> Constraint {
    let g = schema::compile(schema, &Options::default()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    assert!(g.checks().is_some(), "{schema}: expected run-time checks");
    Constraint::new(&g, TokenIndex::new(Vocabulary::bytes()), &Limits::default()).expect("constraint")
}

fn accepts(c: &Constraint, doc: &str) -> bool {
    let mut m = c.matcher();
    m.accept_bytes(doc.as_bytes()).is_ok() && m.is_accepting()
}

/// Every `good` document is accepted and no `bad` one, and the jsonschema crate agrees on
/// each (so the lists themselves are right).
fn check(schema: Value, good: &[&str], bad: &[&str]) {
    let c = constraint(&schema);
    let v = jsonschema::validator_for(&schema).expect("schema");
    for g in good {
        assert!(v.is_valid(&serde_json::from_str(g).expect("JSON")), "{schema}: {g} is not valid");
        assert!(accepts(&c, g), "{schema} should accept {g}");
    }
    for b in bad {
        assert!(!v.is_valid(&serde_json::from_str(b).expect("JSON")), "{schema}: {b} is valid");
        assert!(!accepts(&c, b), "{schema} should reject {b}");
    }
}

#[test]
fn unique_items_with_json_equality() {
    check(
        json!({"type": "array", "uniqueItems": true}),
        &["[]", "[1, 2]", "[{\"a\": 1}, {\"a\": 2}]", "[[1], [1, 1]]", "[1, \"1\"]"],
        &["[1, 1]", "[1, 1.0]", "[{\"a\": 1, \"b\": 2}, {\"b\": 2, \"a\": 1}]", "[null, null]"],
    );
}

#[test]
fn contains_with_bounds() {
    check(
        json!({"type": "array", "contains": {"type": "integer", "minimum": 5}, "minContains": 2, "maxContains": 3}),
        &["[5, 6]", "[1, 5, 7, 9]"],
        &["[5]", "[1, 2]", "[5, 6, 7, 8]"],
    );
}

#[test]
fn if_then_else() {
    check(
        json!({"type": "object", "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
               "then": {"required": ["a"]}, "else": {"required": ["b"]}}),
        &["{\"kind\": \"a\", \"a\": 1}", "{\"kind\": \"x\", \"b\": 1}", "{\"b\": 2}"],
        &["{\"kind\": \"a\", \"b\": 1}", "{\"kind\": \"x\", \"a\": 1}", "{}"],
    );
}

#[test]
fn one_of_with_overlapping_branches() {
    check(
        json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]}),
        &["3", "10.5", "-7"],
        &["12", "10"],
    );
}

#[test]
fn not_beyond_type_and_required() {
    check(json!({"type": "string", "not": {"pattern": "^a"}}), &["\"b\"", "\"ba\""], &["\"a\"", "\"abc\""]);
}

#[test]
fn multiple_of_any_value() {
    check(
        json!({"type": "number", "multipleOf": 0.123456789, "minimum": -1e30}),
        &["0", "0.246913578", "-0.123456789"],
        &["0.1", "1"],
    );
}

#[test]
fn pattern_with_lookaround() {
    // A quantified look-around stays a run-time check (a top-level one compiles exactly:
    // `schema::ecma::lookaround`).
    check(
        json!({"type": "string", "pattern": "^(?:(?!ab)[a-z])+$"}),
        &["\"ba\"", "\"a\""],
        &["\"ab\"", "\"abc\"", "\"cab\"", "\"\""],
    );
}

#[test]
fn dependencies_in_both_forms_and_dependent_schemas() {
    check(
        json!({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}, "dependencies": {"c": ["d"], "e": {"properties": {"f": {"type": "integer"}}}}}),
        &["{}", "{\"a\": 1, \"b\": 2}", "{\"c\": 1, \"d\": 1}", "{\"e\": 1, \"f\": 2}"],
        &["{\"a\": 1}", "{\"c\": 1}", "{\"e\": 1, \"f\": \"x\"}"],
    );
}

#[test]
fn property_names_and_counts_over_free_keys() {
    check(
        json!({"type": "object", "properties": {"id": {}}, "propertyNames": {"maxLength": 3}, "minProperties": 2, "maxProperties": 3}),
        &["{\"id\": 1, \"a\": 2}", "{\"ab\": 1, \"cd\": 2, \"ef\": 3}"],
        &["{\"id\": 1}", "{\"long\": 1, \"a\": 2}", "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4}"],
    );
}

#[test]
fn pattern_properties_with_several_matching_patterns() {
    check(
        json!({"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 10}}}),
        &["{\"ab\": 12}", "{\"a\": 1, \"xb\": 11}"],
        &["{\"ab\": 5}", "{\"ab\": \"x\"}", "{\"b\": 3}"],
    );
}

#[test]
fn unevaluated_properties_under_not() {
    // `not` around `unevaluatedProperties`: the check validates the schema as written.
    check(
        json!({"type": "object", "not": {"properties": {"a": true}, "unevaluatedProperties": false}}),
        &["{\"b\": 1}", "{\"a\": 1, \"b\": 2}"],
        &["{}", "{\"a\": 1}"],
    );
}

#[test]
fn duplicate_keys_are_refused_when_the_key_closes() {
    let c = constraint(&json!({"type": "object", "properties": {"a": {}, "b": {}, "c": {}, "d": {}, "e": {}},
        "required": ["a"]}));
    let mut m = c.matcher();
    m.accept_bytes(b"{\"a\": 1, \"b\": 2, ").expect("prefix");
    assert!(m.accept_bytes(b"\"a\"").is_err(), "a repeated key closes");
    assert!(m.accept_bytes(b"\"\\u0061\"").is_err(), "the same key, escaped");
    m.accept_bytes(b"\"c\": 3}").expect("a new key");
    assert!(m.is_accepting());
}

/// The mask and the matcher agree token by token, over a vocabulary of multi-byte tokens
/// that complete checked values in the middle of a token.
#[test]
fn masks_leave_out_tokens_that_complete_a_failing_value() {
    let pieces = ["[", "1", "2", ",", "]", "1]", ",1]", ",2]", ", ", "3", "1,", "2,"];
    let mut tokens: Vec<Vec<u8>> = pieces.iter().map(|p| p.as_bytes().to_vec()).collect();
    tokens.push(Vec::new());
    let eos = TokenId(pieces.len() as u32);
    let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("vocabulary"));
    let schema = json!({"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": true});
    let g = schema::compile(&schema, &Options::default()).expect("compiles");
    let c = Constraint::new(&g, index.clone(), &Limits::default()).expect("constraint");
    let mut m = c.matcher();
    let mut mask = vec![0u32; index.vocab().mask_words()];
    let allowed = |m: &mut constrain::Matcher, mask: &mut Vec<u32>| {
        m.fill_mask(mask).expect("mask");
        (0..pieces.len()).filter(|&i| is_allowed(mask, TokenId(i as u32))).map(|i| pieces[i]).collect::<Vec<_>>()
    };
    m.accept_token(TokenId(0)).expect("[");
    m.accept_token(TokenId(10)).expect("1,");
    // `1]` and `1` followed by `]` would repeat 1; `2,` and `2` are fine.
    let a = allowed(&mut m, &mut mask);
    assert!(a.contains(&"2") && a.contains(&"2,") && a.contains(&"1"), "{a:?}");
    assert!(!a.contains(&"1]"), "{a:?}");
    m.accept_token(TokenId(11)).expect("2,");
    m.accept_token(TokenId(1)).expect("1 (a number may still grow)");
    let a = allowed(&mut m, &mut mask);
    // The 1 would complete as a repeat: refused at once, not when the array closes.
    assert!(!a.contains(&"]") && !a.contains(&",") && !a.contains(&", "), "[1,2,1 is a repeat: {a:?}");
    assert!(a.contains(&"2") || a.contains(&"3") || a.is_empty(), "{a:?}");
    // Every allowed token is accepted and every other refused.
    for (i, p) in pieces.iter().enumerate() {
        let ok = m.accept_token(TokenId(i as u32)).is_ok();
        assert_eq!(ok, a.contains(p), "{p}");
        if ok {
            m.rollback(1).expect("roll back");
        }
    }
    m.rollback(2).expect("back to [1,");
    m.accept_token(TokenId(9)).expect("3");
    m.accept_token(TokenId(4)).expect("]");
    m.fill_mask(&mut mask).expect("mask");
    assert!(is_allowed(&mask, eos) && m.is_accepting());
}

#[test]
fn a_number_at_the_top_level_is_checked_at_the_end() {
    let c = constraint(&json!({"type": "integer", "multipleOf": 7, "minimum": 5}));
    let mut m = c.matcher();
    m.accept_bytes(b"1").expect("prefix");
    assert!(!m.is_accepting(), "1 is not a multiple of 7");
    m.accept_bytes(b"4").expect("14");
    assert!(m.is_accepting());
    assert!(!accepts(&c, "0") && accepts(&c, "7") && !accepts(&c, "-7"));
}

#[test]
fn runtime_checks_can_be_turned_off() {
    let s = json!({"type": "array", "uniqueItems": true});
    let e = schema::compile(&s, &Options::default().with_runtime_checks(false)).expect_err("refused");
    assert_eq!(e.keyword(), "uniqueItems");
    assert_eq!(e.pointer(), "/uniqueItems");
}

/// Every 1-, 2- and 3-byte string over an alphabet of JSON's structural bytes, letters,
/// a digit, a space and a backslash: tokens that end keys and strings, close brackets and
/// start the next member in one, or escape a quote. One end-of-generation id.
fn structural_vocabulary() -> std::sync::Arc<TokenIndex> {
    let alphabet = b"{}[]\",:ab1\\ e";
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    for &x in alphabet {
        tokens.push(vec![x]);
        for &y in alphabet {
            tokens.push(vec![x, y]);
            for &z in alphabet {
                tokens.push(vec![x, y, z]);
            }
        }
    }
    let eos = TokenId(tokens.len() as u32);
    tokens.push(Vec::new());
    TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("vocabulary"))
}

/// The tokens `m` accepts now, asserting that they are exactly those of its mask.
fn assert_mask_is_exact(m: &mut constrain::Matcher, mask: &mut [u32], vocab: &Vocabulary, what: &str) -> Vec<TokenId> {
    m.fill_mask(mask).expect("mask");
    let mut allowed = Vec::new();
    for id in 0..vocab.len() as u32 {
        let t = TokenId(id);
        if vocab.is_eos(t) {
            continue;
        }
        let ok = m.accept_token(t).is_ok();
        if ok {
            m.rollback(1).expect("roll back");
            allowed.push(t);
        }
        let bytes = String::from_utf8_lossy(vocab.token_bytes(t));
        assert_eq!(is_allowed(mask, t), ok, "{what}: token {bytes:?}");
    }
    allowed
}

/// The mask's shortcuts (tokens no check can refuse from a lexical context, keys decided
/// from their spelling, names still open to a key, strings whose end nothing checks) leave
/// out exactly the tokens the matcher refuses: after prefixes chosen to reach them, and
/// along seeded random walks through checked objects and arrays, every token of the mask
/// is accepted and every other refused.
#[test]
fn mask_shortcuts_agree_with_the_matcher_token_by_token() {
    use rand::{Rng, SeedableRng};
    let index = structural_vocabulary();
    let vocab = index.vocab();
    // Each schema, with prefixes after which a shortcut decides.
    let schemas = [
        // Any order with closed names (more than four properties), a unique array inside.
        (
            json!({"type": "object", "properties": {
                "a": {"type": "string"}, "b": {"type": "integer"}, "ab": {"type": "string"}, "ba": {},
                "bb": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}},
                "required": ["a"], "additionalProperties": false}),
            vec![
                "{\"a\":\"a\",\"ab\":\"",
                "{\"a\":\"\",\"a",
                "{\"bb\":[\"a\",\"",
                "{\"a\":\"\",\"ab\":\"\" ,",
                "{\"a\":\"\",\"b\":1,\"ba\":1,\"bb\":[],\"ab\":\"a",
            ],
        ),
        // Free keys, checked (a count over free keys): keys must not repeat.
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 2}),
            vec!["{\"a\":\"\",\"", "{\"ab\":\"\",\"a", "{\"a\\\"\":\"\",\"a"],
        ),
        // Unique strings.
        (json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}), vec!["[\"a\",\"", "[\"ab\",\"a"]),
        // Overlapping oneOf of closed objects: the union of their names.
        (
            json!({"oneOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false},
                {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                 "additionalProperties": false}]}),
            vec!["{\"a\":\"a\",\"b\":\"b", "{\"b\":\"\",\"", "{\"b\":\"\", "],
        ),
        // A checked string inside objects inside an array.
        (
            json!({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?:(?!b).)+"}}}}),
            vec!["[{\"a\":\"", "[{\"a\":\"b", "[{\"b\":\"b"],
        ),
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut steps = 0;
    for (schema, prefixes) in &schemas {
        let g = schema::compile(schema, &Options::default()).unwrap_or_else(|e| panic!("{schema}: {e}"));
        assert!(g.checks().is_some(), "{schema}: expected run-time checks");
        let c = Constraint::new(&g, index.clone(), &Limits::default()).expect("constraint");
        for prefix in prefixes {
            let mut m = c.matcher();
            m.accept_bytes(prefix.as_bytes()).unwrap_or_else(|e| panic!("{schema}: {prefix}: {e}"));
            assert_mask_is_exact(&mut m, &mut mask, vocab, &format!("{schema} after {prefix}"));
        }
        for _walk in 0..6 {
            let mut m = c.matcher();
            let mut text = Vec::new();
            for _ in 0..24 {
                let what = format!("{schema} after {:?}", String::from_utf8_lossy(&text));
                let allowed = assert_mask_is_exact(&mut m, &mut mask, vocab, &what);
                steps += 1;
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.random_range(0..allowed.len())];
                text.extend_from_slice(vocab.token_bytes(t));
                m.accept_token(t).expect("allowed token");
            }
        }
    }
    assert!(steps > 400, "the walks took {steps} steps");
}

#[test]
fn pattern_properties_beside_other_keys() {
    // Keys that match no pattern are allowed (additionalProperties is absent); those that
    // match one take its schema. A counted pattern's complement is too deep to spell, so
    // the value is checked at run time.
    check(
        json!({"type": "object", "patternProperties": {"^[a-c]{0,80}$": {"type": "integer"}}}),
        &["{\"x\": \"x\"}", "{\"a\": 1, \"x\": {}}", "{}"],
        &["{\"a\": \"x\"}", "{\"x\": 1, \"ab\": []}"],
    );
    check(
        json!({"type": "object", "patternProperties": {"^x-[a-z]{0,80}$": {"type": "integer"}, "y$": {"minimum": 3}},
               "additionalProperties": {"type": "string"}}),
        &["{\"x-a\": 1, \"b\": \"s\"}", "{\"x-y\": 4}", "{\"y\": \"s\"}"],
        &["{\"x-a\": \"s\"}", "{\"b\": 1}", "{\"x-y\": 2}"],
    );
}

#[test]
fn pattern_property_values_are_refused_when_they_complete() {
    let c = constraint(&json!({"type": "object",
        "patternProperties": {"^a[a-z]{0,80}$": {"type": "string", "maxLength": 2}}}));
    let mut m = c.matcher();
    m.accept_bytes(b"{\"b\": \"long text\", \"ab\": \"xyz").expect("prefix");
    assert!(m.accept_bytes(b"\"").is_err(), "the quote would complete a string too long for ^a");
}

/// `Matcher::prove_live`: a prefix every completion of which fails a check is proved dead
/// (the choices left are finite), one with a passing completion live, whatever the
/// grammar's shortest way says; without checks everything is live at once.
#[test]
fn liveness_proofs_see_past_the_grammar() {
    use constrain::Liveness;
    let prove = |c: &Constraint, prefix: &str| {
        let mut m = c.matcher();
        m.accept_bytes(prefix.as_bytes()).unwrap_or_else(|e| panic!("{prefix}: {e}"));
        let before = m.num_tokens();
        let verdict = m.prove_live(4096).expect("no matcher error");
        assert_eq!(m.num_tokens(), before, "the search leaves the matcher where it was");
        verdict
    };
    // Two values, both written: a third item has nothing left; a second still does.
    let unique = constraint(&json!({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true}));
    assert_eq!(prove(&unique, r#"["a","b","#), Liveness::Dead);
    assert_eq!(prove(&unique, r#"["a","#), Liveness::Live);
    assert_eq!(prove(&unique, r#"["a","b""#), Liveness::Live);
    // The grammar's shortest completion (`]`) fails `contains`; a longer one passes.
    let contains = constraint(&json!({"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}}));
    assert_eq!(prove(&contains, "["), Liveness::Live);
    assert_eq!(prove(&contains, "[1,2"), Liveness::Live);
    // `not` over a finite choice: only `true` is left, and it is refused.
    let not = constraint(&json!({"type": "object", "properties": {"b": {"type": "boolean", "not": {"const": false}}},
                                  "required": ["b"], "additionalProperties": false,
                                  "not": {"properties": {"b": {"const": true}}}}));
    assert_eq!(prove(&not, r#"{"b":"#), Liveness::Dead);
    // Out of fuel on an infinite choice: unknown, never a false verdict.
    let mut m = contains.matcher();
    m.accept_bytes(b"[").unwrap();
    assert_ne!(m.prove_live(0), Ok(Liveness::Dead));
    // No checks: live at once.
    let g = schema::compile(&json!({"type": "string"}), &Options::default()).unwrap();
    let plain = Constraint::new(&g, TokenIndex::new(Vocabulary::bytes()), &Limits::default()).unwrap();
    let mut m = plain.matcher();
    m.accept_bytes(b"\"abc").unwrap();
    assert_eq!(m.prove_live(0), Ok(Liveness::Live));
}

/// A fork follows its own tokens from the point it was made: its masks equal those of a
/// matcher that accepted the same tokens from the start, and nothing the original does
/// later reaches it (nor the other way round). Run on a schema with run-time checks, whose
/// tracker is forked too.
#[test]
fn fork_is_independent_and_equal_to_replay() {
    let c = constraint(&json!({"type": "array", "uniqueItems": true, "items": {"type": "integer"}, "maxItems": 4}));
    let words = c.index().vocab().mask_words();
    let mask_after = |tokens: &[&[u8]]| {
        let mut m = c.matcher();
        for t in tokens {
            m.accept_bytes(t).expect("replayed token");
        }
        let mut mask = vec![0u32; words];
        m.fill_mask(&mut mask).expect("mask");
        mask
    };
    let mut original = c.matcher();
    for t in [&b"["[..], b"1", b","] {
        original.accept_bytes(t).expect("prefix");
    }
    let mut fork = original.fork();
    assert_eq!(fork.num_tokens(), 3);
    // The original goes on with 2; the fork must still refuse a second 1 and allow 3.
    original.accept_bytes(b"2").expect("2 after [1,");
    assert!(fork.accept_bytes(b"1]").is_err(), "uniqueItems holds in the fork");
    fork.accept_bytes(b"3").expect("3 after [1,");
    let mut mask = vec![0u32; words];
    fork.fill_mask(&mut mask).expect("mask");
    assert_eq!(mask, mask_after(&[b"[", b"1", b",", b"3"]));
    original.fill_mask(&mut mask).expect("mask");
    assert_eq!(mask, mask_after(&[b"[", b"1", b",", b"2"]));
    // The fork inherited the rollback history: back to `[1`, then on to the end.
    fork.rollback(2).expect("rollback into the inherited tokens");
    fork.accept_bytes(b"]").expect("]");
    assert!(fork.is_accepting());
    fork.fill_mask(&mut mask).expect("mask");
    assert_eq!(mask, mask_after(&[b"[", b"1", b"]"]));
    assert!(!is_allowed(&mask, TokenId(u32::from(b'1'))), "the array is closed");
    assert!(!original.is_accepting() && original.accept_bytes(b"]").is_ok() && original.is_accepting());
}

/// Forks of forks over long outputs, with rollbacks, on a schema with run-time checks: the
/// shared parse state and check history cross many chunks of [`constrain::util::CHUNK`]
/// items, rollbacks thaw shared chunks, and at every step each matcher's mask must be that
/// of a matcher that was never forked (made by replay when the fork was made, then given
/// the same tokens and rollbacks). A fixed-seed walk: each step takes a random allowed byte.
#[test]
fn forks_of_forks_over_long_outputs_equal_replay() {
    let c = constraint(&json!({
        "type": "array", "uniqueItems": true,
        "items": {"type": "object", "additionalProperties": false, "required": ["name", "n"],
            "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer", "maximum": 99}}}
    }));
    let words = c.index().vocab().mask_words();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let replay = |tokens: &[u32]| {
        let mut m = c.matcher();
        for &t in tokens {
            m.accept_token(TokenId(t)).expect("replayed token");
        }
        m
    };
    // Per sequence: the matcher under test, its never-forked twin, its tokens.
    let mut pool = vec![(c.matcher(), c.matcher(), Vec::<u32>::new())];
    let (mut mask, mut twin_mask) = (vec![0u32; words], vec![0u32; words]);
    let (mut forks, mut thawing_rollbacks, mut longest) = (0, 0, 0);
    for step in 0..40_000 {
        let (k, n_pool) = (next(pool.len()), pool.len());
        let (m, twin, tokens) = &mut pool[k];
        m.fill_mask(&mut mask).expect("mask");
        twin.fill_mask(&mut twin_mask).expect("mask");
        assert_eq!(mask, twin_mask, "step {step}: sequence {k} after {} tokens", tokens.len());
        assert_eq!(m.is_accepting(), twin.is_accepting(), "step {step}");
        // The closing bracket is taken rarely, so the outputs grow long.
        let allowed: Vec<u32> = (0..256).filter(|&t| is_allowed(&mask, TokenId(t))).collect();
        let grow: Vec<u32> = allowed.iter().copied().filter(|&t| t != u32::from(b']')).collect();
        let pick = if grow.is_empty() || next(500) == 0 { &allowed } else { &grow };
        let mut fork = None;
        let rollback = match next(100) {
            0..=1 if n_pool < 5 => {
                fork = Some((m.fork(), replay(tokens), tokens.clone()));
                forks += 1;
                0
            }
            2 => next(tokens.len().min(300) + 1),
            3 if n_pool > 2 => {
                pool.swap_remove(k);
                continue;
            }
            _ if !pick.is_empty() => {
                let t = pick[next(pick.len())];
                m.accept_token(TokenId(t)).expect("an allowed token");
                twin.accept_token(TokenId(t)).expect("an allowed token");
                tokens.push(t);
                longest = longest.max(tokens.len());
                0
            }
            // The document is complete: back into it.
            _ => tokens.len().min(50),
        };
        if rollback > 0 {
            m.rollback(rollback).expect("rollback");
            twin.rollback(rollback).expect("rollback");
            tokens.truncate(tokens.len() - rollback);
            thawing_rollbacks += usize::from(rollback >= constrain::util::CHUNK);
        }
        pool.extend(fork);
    }
    assert!(
        forks > 200 && thawing_rollbacks > 10 && longest > 4 * constrain::util::CHUNK,
        "forks {forks}, rollbacks over a chunk {thawing_rollbacks}, longest {longest}"
    );
}

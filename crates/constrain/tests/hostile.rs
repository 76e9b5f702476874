//! Hostile inputs (issue 19): each once crashed the process (stack overflow), hung
//! (exponential or quadratic work) or took gigabytes. Sizes here are the smallest that still
//! showed the old failure, so the whole file runs in a few seconds; each test ends with a
//! correct result or a clear error, never a crash.

use constrain::automaton::{Error as PdaError, Pda};
use constrain::grammar::{gbnf, regex, Grammar};
use constrain::limits::LimitExceeded;
use constrain::schema::{self, Options};
use constrain::Limits;
use serde_json::{json, Value};

/// The grammar alone: these tests check what the grammar and automaton make of hostile
/// schemas, not the run-time checks.
fn compile(schema: &Value) -> Result<Grammar, schema::Error> {
    schema::compile(schema, &Options::default()).map(schema::Compiled::into_grammar)
}

fn pda(g: &Grammar) -> Result<Pda, PdaError> {
    Pda::build(g, &Limits::default())
}

/// A 30k-character property name overflowed the stack (one recursion per character while
/// excluding the name from other keys): now a clear error naming the cause.
#[test]
fn very_long_property_name_is_an_error_not_a_crash() {
    let name = "a".repeat(30_000);
    let s = json!({"type": "object", "properties": {name.clone(): {"type": "string"}}});
    let e = compile(&s).unwrap_err();
    assert!(e.message().contains("30000 characters"), "{e}");
    assert_eq!(e.pointer(), "/additionalProperties");
    // Without other properties the name is a plain literal and compiles.
    let s = json!({"type": "object", "properties": {name.clone(): {"type": "string"}}, "additionalProperties": false});
    let p = pda(&compile(&s).unwrap()).unwrap();
    assert!(p.matches(format!("{{\"{name}\":\"x\"}}").as_bytes()));
}

/// A 250-character name was refused as "too deeply nested"; it compiles now, exactly.
#[test]
fn long_property_name_compiles_and_is_excluded_exactly() {
    let name = "p".repeat(250);
    let s = json!({"type": "object", "properties": {name.clone(): {"type": "integer"}}});
    let p = pda(&compile(&s).unwrap()).unwrap();
    assert!(p.matches(format!("{{\"{name}\":1}}").as_bytes()));
    assert!(!p.matches(format!("{{\"{name}\":\"x\"}}").as_bytes()), "the name must not take the free route");
    let shorter = "p".repeat(249);
    assert!(p.matches(format!("{{\"{shorter}\":\"x\"}}").as_bytes()));
    let longer = "p".repeat(251);
    assert!(p.matches(format!("{{\"{longer}\":\"x\"}}").as_bytes()));
}

/// `prefixItems` with 100k entries overflowed the stack (each item nested the rest deeper).
#[test]
fn many_prefix_items_compile() {
    let items: Vec<Value> = (0..20_000).map(|i| json!({"const": i % 7})).collect();
    let s = json!({"type": "array", "prefixItems": items});
    let p = pda(&compile(&s).unwrap()).unwrap();
    assert!(p.matches(b"[0,1,2]"));
    assert!(!p.matches(b"[0,2]"));
}

/// `a_i = anyOf[$ref a_i+1, {$ref a_i+1, minLength: 1}]` compiled 2^N merged schemas.
#[test]
fn merged_ref_chain_is_linear() {
    let n = 40;
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        let next = format!("#/$defs/a{}", i + 1);
        defs.insert(format!("a{i}"), json!({"anyOf": [{"$ref": next}, {"$ref": next, "minLength": 1}]}));
    }
    defs.insert(format!("a{n}"), json!({"type": "string"}));
    let s = json!({"$ref": "#/$defs/a0", "$defs": defs});
    let p = pda(&compile(&s).unwrap()).unwrap();
    assert!(p.matches(b"\"\"") && p.matches(b"\"x\"") && !p.matches(b"1"));
}

/// Deduplicating alternatives was quadratic (`Vec::contains`).
#[test]
fn wide_alternations_are_linear() {
    let consts: Vec<Value> = (0..30_000).map(|i| json!({"const": i})).collect();
    let p = pda(&compile(&json!({"anyOf": consts})).unwrap()).unwrap();
    assert!(p.matches(b"29999") && !p.matches(b"30000"));
    let text = format!("root ::= {}\n", (0..50_000).map(|i| format!("\"x{i}\"")).collect::<Vec<_>>().join(" | "));
    let p = pda(&gbnf::parse(&text).unwrap()).unwrap();
    assert!(p.matches(b"x49999") && !p.matches(b"x50000"));
    let pattern = format!("^({})$", (0..30_000).map(|i| format!("w{i}")).collect::<Vec<_>>().join("|"));
    let p = pda(&compile(&json!({"type": "string", "pattern": pattern})).unwrap()).unwrap();
    assert!(p.matches(b"\"w123\"") && !p.matches(b"\"w30000\""));
}

/// 100k chained rules `rI ::= rI+1` were quadratic (fingerprints swept to a fixpoint).
#[test]
fn long_rule_chains_are_linear() {
    let n = 50_000;
    let mut text = String::from("root ::= r0\n");
    for i in 0..n {
        text.push_str(&format!("r{i} ::= r{}\n", i + 1));
    }
    text.push_str(&format!("r{n} ::= \"a\"\n"));
    let p = pda(&gbnf::parse(&text).unwrap()).unwrap();
    assert!(p.num_states() > 50_000);
    // Matching a chain as deep as this needs a stack of 50k rules, over the default
    // Limits::max_stack_depth: a shorter chain is matched exactly.
    let text = format!(
        "root ::= r0\n{}r1000 ::= \"a\"\n",
        (0..1000).map(|i| format!("r{i} ::= r{}\n", i + 1)).collect::<String>()
    );
    let p = pda(&gbnf::parse(&text).unwrap()).unwrap();
    assert!(p.matches(b"a") && !p.matches(b"b") && !p.matches(b"aa"));
}

/// Nested small counts were multiplied out (6^6 copies: minutes and gigabytes); now each
/// level past a size keeps a run-time counter, and the result is exact.
#[test]
fn nested_counted_repetitions_are_not_multiplied_out() {
    let g = gbnf::parse(r#"root ::= (((((("a"|"b"){1,6}){1,6}){1,6}){1,6}){1,6}){1,6}"#).unwrap();
    let p = pda(&g).unwrap();
    assert!(p.num_states() < 10_000, "{} states", p.num_states());
    assert!(p.matches(b"ab") && !p.matches(b"") && !p.matches(b"abc"));
    // The loops are ambiguous (where one iteration ends), so long inputs run into
    // Limits::max_parse_stacks: a wrong reject, never a wrong accept (seen from ~5k bytes).
    for n in [1usize, 2, 7, 36, 37, 216, 300, 1296] {
        assert!(p.matches(&"ab".repeat(n / 2 + 1).as_bytes()[..n]), "{n}");
    }
    assert!(!p.matches("a".repeat(46_657).as_bytes()));
    let g = regex::compile_anchored(&format!("a{}", "{2}".repeat(40))).unwrap();
    let p = pda(&g).unwrap();
    assert!(p.num_states() < 10_000);
    assert!(!p.matches(b"aa") && p.matches_prefix(b"aaaa"));
    let g = regex::compile_anchored(&format!("{}a{}", "(".repeat(12), "){2}".repeat(12))).unwrap();
    let p = pda(&g).unwrap();
    assert!(p.matches("a".repeat(4096).as_bytes()) && !p.matches("a".repeat(4095).as_bytes()));
}

/// Huge literals are measured by their bytes and stopped by the grammar-size budget
/// before any automaton is built.
#[test]
fn huge_literals_hit_the_grammar_size_budget() {
    let text = format!("root ::= \"{}\"\n", "a".repeat(300_000));
    let g = gbnf::parse(&text).unwrap();
    let limits = Limits::default().with_max_grammar_size(100_000);
    match Pda::build(&g, &limits) {
        Err(PdaError::Budget { limit: LimitExceeded::GrammarSize, .. }) => {}
        other => panic!("expected the grammar-size budget, got {:?}", other.err()),
    }
    let strings: Vec<String> = "abcde".chars().map(|c| c.to_string().repeat(100_000)).collect();
    let g = compile(&json!({"enum": strings})).unwrap();
    let e = Pda::build(&g, &limits).unwrap_err();
    assert!(e.to_string().contains("Limits::max_grammar_size"), "{e}");
}

/// Compile fuel stops determinisation with an error naming the budget and the flag.
#[test]
fn compile_fuel_is_a_typed_error() {
    let g = regex::compile_anchored("[a-z]{0,6}x[a-z]{0,6}").unwrap();
    let e = Pda::build(&g, &Limits::default().with_compile_fuel(50)).unwrap_err();
    assert!(matches!(e, PdaError::Budget { limit: LimitExceeded::CompileFuel, .. }), "{e}");
    assert!(e.to_string().contains("--max-fuel"), "{e}");
    assert!(Pda::build(&g, &Limits::default()).is_ok());
}

/// Grammars that match nothing are errors at automaton build time.
#[test]
fn grammars_matching_nothing_are_errors() {
    for text in ["root ::= root", "root ::= []", "root ::= root \"a\" | \"b\""] {
        let g = gbnf::parse(text).unwrap();
        assert!(pda(&g).is_err(), "{text}");
    }
}

/// Deeply nested input is refused by the parsers with a clear error.
#[test]
fn deep_nesting_is_refused() {
    let text = format!("root ::= {}\"a\"{}", "(".repeat(20_000), ")".repeat(20_000));
    assert!(gbnf::parse(&text).is_err());
    let pattern = format!("{}a{}", "(".repeat(20_000), ")".repeat(20_000));
    assert!(regex::compile_anchored(&pattern).is_err());
    let mut s = json!({"type": "string"});
    for _ in 0..200 {
        s = json!({"type": "array", "items": s});
    }
    let e = compile(&s).unwrap_err();
    assert!(e.message().contains("nests too deeply"), "{e}");
}

/// An ambiguous grammar (every letter may start or continue a word, nested) makes each mask
/// step hundreds of parse stacks over every token: `Limits::mask_fuel` bounds that work with
/// a typed error naming the budget, and a larger budget computes the mask.
#[test]
fn mask_fuel_is_a_typed_error() {
    use constrain::matcher::Error as MatchError;
    use constrain::{Constraint, TokenId, TokenIndex, Vocabulary};
    let mut tokens: Vec<Vec<u8>> = (b'a'..=b'z').map(|b| vec![b]).collect();
    for len in 2..=12 {
        tokens.push(b"ab cd efgh ijklm".iter().copied().cycle().take(len).collect());
    }
    tokens.push(b"<eos>".to_vec());
    let eos = TokenId(tokens.len() as u32 - 1);
    let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("valid vocabulary"));
    let g = gbnf::parse("root ::= x*\nx ::= y | z\ny ::= [a-z ] x?\nz ::= [a-z ] [a-z ]? x?\n").unwrap();
    let words = index.vocab().mask_words();
    let run = |limits: &Limits| {
        let c = Constraint::new(&g, index.clone(), limits).unwrap();
        let mut m = c.matcher();
        m.accept_bytes(b"ab cd ab cd ab cd ab").unwrap();
        let mut mask = vec![0u32; words];
        m.fill_mask(&mut mask).map(|()| mask)
    };
    let small = Limits::default().with_mask_fuel(1_000);
    match run(&small) {
        Err(MatchError::Limit(hit)) => {
            // The engine names the `Limits` field; a front end adds its flag.
            assert!(hit.contains(constrain::automaton::ParseLimit::Fuel), "{hit}");
            assert!(hit.to_string().contains("Limits::mask_fuel"), "{hit}");
            let shown = hit.message(|_| Some("--max-mask-fuel"));
            assert!(shown.contains("Limits::mask_fuel; flag `--max-mask-fuel`"), "{shown}");
        }
        other => panic!("expected the mask fuel limit, got {other:?}"),
    }
    let mask = run(&Limits::default().with_max_parse_stacks(10_000)).expect("the default budget computes this mask");
    assert!(mask.iter().any(|&w| w != 0), "letters are allowed");
}

/// `.++++…` (found by the regex fuzz target): every `+` nested the one before, and each level
/// doubled the automaton (17 levels: 12 s and 580 MB). Nested repetitions now collapse.
#[test]
fn nested_unbounded_repetitions_are_linear() {
    let pattern = format!(".{}*2PP", "+".repeat(40));
    let g = regex::compile_anchored(&pattern).unwrap();
    let p = pda(&g).unwrap();
    assert!(p.matches(b"xyz2PP"));
    assert!(p.matches(b"2PP") && !p.matches(b"xyz2P"), "(.+)* is .*");
    let g = gbnf::parse(&format!("root ::= {}\"a\"{} \"b\"\n", "(".repeat(30), "+)".repeat(30))).unwrap();
    let p = pda(&g).unwrap();
    assert!(p.matches(b"aaab") && !p.matches(b"b"));
}

/// Patterns the regex fuzz target found slow (tests/fixtures/fuzz-regex/): each compiles or
/// stops at a budget with a typed error, with the fuzz target's own budgets and the defaults.
#[test]
fn regexes_found_by_fuzzing_end_within_their_budgets() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz-regex");
    let fuzz_limits =
        Limits::default().with_compile_fuel(2_000_000).with_max_automaton_states(50_000).with_max_grammar_size(100_000);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let pattern = std::str::from_utf8(&bytes).unwrap();
        let Ok(g) = regex::compile_anchored(pattern) else { continue };
        for limits in [&fuzz_limits, &Limits::default()] {
            match Pda::build(&g, limits) {
                Ok(_) | Err(PdaError::TooManyStates { .. }) | Err(PdaError::Budget { .. }) => {}
                Err(e) => panic!("{pattern:?}: unexpected error {e}"),
            }
        }
        n += 1;
    }
    assert_eq!(n, 3, "the three fuzz finds compile to grammars");
}

//! Closing mode, as a property: for random grammars and random JSON Schemas, and any token
//! budget at or above the start's distance to the end (in bytes, or, with a vocabulary of
//! many multi-byte tokens, in tokens: the fewest that spell the shortest output), a decode
//! loop that picks tokens
//! uniformly at random inside the mask — narrowed by the engine's own [`Closer`] — always
//! ends with a complete output within the budget. Grammar outputs are checked by the
//! automaton's byte-level matcher, schema outputs by `serde_json` and the `jsonschema` crate.

use constrain::closing::{BudgetTooSmall, Closer, Verdict};
use constrain::grammar::{Expr, GrammarBuilder, RuleId};
use constrain::mask::is_allowed;
use constrain::schema::{self, Options};
use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

/// Every single byte, some multi-byte fragments (so a token can overshoot a short end), and
/// one end-of-generation id.
fn vocabulary() -> Arc<TokenIndex> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for f in [
        "{\"", "\":", "\", \"", "\"}", "[\"", "[[", "]]", ", ", "true", "null", "12", "abc", "aaaa", "xyzxyz", "((",
        "))", "1,", "é",
    ] {
        tokens.push(f.as_bytes().to_vec());
    }
    let eos = TokenId(tokens.len() as u32);
    tokens.push(Vec::new());
    TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("valid vocabulary"))
}

/// [`vocabulary`] plus every pair of the bytes the random grammars and schemas write most
/// and a few longer JSON pieces: the fewest tokens of a completion are then well below its
/// bytes, so budgets between the two exercise closing's plan.
fn rich_vocabulary() -> Arc<TokenIndex> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let common = b"[<kz;()abcxyz0123456789\"{}:,p-.e ";
    for &a in common {
        for &b in common {
            tokens.push(vec![a, b]);
        }
    }
    for f in ["{\"p0\":", ",\"p1\":", ",\"p2\":", "true", "null", "false", "\"red\"", "kzk", "zzz", "xyz", "((("] {
        tokens.push(f.as_bytes().to_vec());
    }
    let eos = TokenId(tokens.len() as u32);
    tokens.push(Vec::new());
    TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("valid vocabulary"))
}

/// The start's distances of `c`: (bytes, fewest tokens spelling the shortest output).
fn start_distances(c: &Constraint) -> Option<(usize, usize)> {
    let bytes = c.min_bytes_from_start()? as usize;
    let tokens = c.min_tokens_from_start().expect("no limit at the start")? as usize;
    assert!(tokens <= bytes, "{tokens} tokens, {bytes} bytes");
    Some((bytes, tokens))
}

/// Runs one decode loop with the engine's closing policy and uniform token choice. Returns
/// the output bytes and the tokens used, or a description of what went wrong.
///
/// Both ways the engine narrows run, each from the same random state: the mask narrowed
/// before the draw ([`Closer::narrow`]), and left to the check of the token drawn
/// ([`Closer::narrow_for_check`]); both must close within the budget.
fn close_within(constraint: &Constraint, budget: usize, rng: &mut StdRng) -> Result<(Vec<u8>, usize), String> {
    let mut checked_rng = rng.clone();
    close_within_as(constraint, budget, &mut checked_rng, true).map_err(|e| format!("{e} (with narrow_for_check)"))?;
    close_within_reporting(constraint, budget, rng).map(|(text, used, _)| (text, used))
}

/// How [`close_within`] reports a dead end that a parse limit caused: the matcher says so
/// ([`constrain::Matcher::hit_limit`], which the engine turns into a limit error), and the
/// closing guarantee covers only parses no limit cut.
const LIMIT_CUT: &str = "a parse limit cut the path";

/// [`close_within`], also saying whether closing mode started.
fn close_within_reporting(
    constraint: &Constraint,
    budget: usize,
    rng: &mut StdRng,
) -> Result<(Vec<u8>, usize, bool), String> {
    close_within_as(constraint, budget, rng, false)
}

/// [`close_within_reporting`], narrowing with [`Closer::narrow_for_check`] when `defer`.
fn close_within_as(
    constraint: &Constraint,
    budget: usize,
    rng: &mut StdRng,
    defer: bool,
) -> Result<(Vec<u8>, usize, bool), String> {
    let vocab = constraint.index().vocab();
    let mut m = constraint.matcher();
    let mut closer = match Closer::new(constraint, true, budget, usize::MAX) {
        Ok(c) => c,
        Err(e) => return Err(format!("refused: {e}")),
    };
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut text = Vec::new();
    let mut used = 0;
    let pick = |mask: &[u32], rng: &mut StdRng| -> Option<TokenId> {
        let allowed: Vec<u32> = (0..vocab.mask_len() as u32).filter(|&i| is_allowed(mask, TokenId(i))).collect();
        (!allowed.is_empty()).then(|| TokenId(allowed[rng.random_range(0..allowed.len())]))
    };
    loop {
        if m.is_finished() {
            break;
        }
        let remaining = budget - used;
        if closer.should_stop(&m, remaining) {
            break;
        }
        if remaining == 0 {
            return Err(format!("budget {budget} ran out: {:?}", String::from_utf8_lossy(&text)));
        }
        m.fill_mask(&mut mask).map_err(|e| e.to_string())?;
        let narrowed = if defer {
            closer.narrow_for_check(&mut m, &mut mask, remaining)
        } else {
            closer.narrow(&mut m, &mut mask, remaining)
        };
        narrowed.map_err(|e| e.to_string())?;
        let mut token = pick(&mask, rng).ok_or_else(|| {
            let why = if m.hit_limit() { LIMIT_CUT } else { "empty mask" };
            format!("{why} after {:?}", String::from_utf8_lossy(&text))
        })?;
        m.accept_token(token).map_err(|e| e.to_string())?;
        // The decode loop's: a token the closer refuses is drawn again from its mask.
        while closer.check(&mut m, token, &mut mask, remaining).map_err(|e| e.to_string())? == Verdict::Resample {
            token = pick(&mask, rng).ok_or_else(|| {
                let why = if m.hit_limit() { LIMIT_CUT } else { "empty closing mask" };
                format!("{why} after {:?}", String::from_utf8_lossy(&text))
            })?;
            m.accept_token(token).map_err(|e| e.to_string())?;
        }
        if vocab.is_eos(token) {
            break;
        }
        text.extend_from_slice(vocab.token_bytes(token));
        used += 1;
    }
    if !m.is_accepting() {
        return Err(format!("ended incomplete: {:?}", String::from_utf8_lossy(&text)));
    }
    Ok((text, used, closer.is_closing()))
}

/// A random expression over a few rules (`rules` may be referenced; `depth` bounds nesting).
fn random_expr(rng: &mut StdRng, rules: &[RuleId], depth: u32) -> Expr {
    let leaf = depth == 0 || rng.random_bool(0.3);
    if leaf {
        return match rng.random_range(0..4) {
            0 => Expr::lit(["a", "bc", "xyz", "((", "1", "é"][rng.random_range(0..6)]),
            1 => Expr::Chars(vec![('a', 'c'), ('x', 'z')]),
            2 if !rules.is_empty() => Expr::Ref(rules[rng.random_range(0..rules.len())]),
            _ => Expr::Bytes(vec![(b'0', b'9')]),
        };
    }
    let sub = |rng: &mut StdRng| random_expr(rng, rules, depth - 1);
    match rng.random_range(0..6) {
        0 => Expr::seq((0..rng.random_range(1..4)).map(|_| sub(rng)).collect::<Vec<_>>()),
        1 => Expr::alt((0..rng.random_range(1..4)).map(|_| sub(rng)).collect::<Vec<_>>()),
        2 => Expr::star(sub(rng)),
        3 => Expr::opt(sub(rng)),
        // Large counts become loop rules with the count on the stack.
        4 => {
            let min = rng.random_range(0..40);
            let max = if rng.random_bool(0.5) { None } else { Some(min + rng.random_range(0..200_000)) };
            Expr::repeat(sub(rng), min, max)
        }
        _ => Expr::seq([Expr::lit("("), sub(rng), Expr::lit(")")]),
    }
}

/// A random grammar: a few rules, possibly recursive (each rule's body starts with a byte, so
/// no left recursion), rooted at the first. `None` when it does not compile (matches nothing).
fn random_grammar(seed: u64, index: &Arc<TokenIndex>) -> Option<Constraint> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut b = GrammarBuilder::new();
    let n = rng.random_range(1..4);
    let ids: Vec<RuleId> = (0..n).map(|i| b.declare(&format!("r{i}"))).collect();
    for &id in &ids {
        let body = Expr::seq([Expr::lit(["[", "<", "k"][rng.random_range(0..3)]), random_expr(&mut rng, &ids, 3)]);
        // A non-recursive way out, so the rule can end.
        let out = Expr::alt([body, Expr::lit("z")]);
        b.define(id, out);
    }
    // The root wanders: a repetition a uniform walk rarely leaves on its own.
    let wander = Expr::star(random_expr(&mut rng, &ids, 2));
    let root = b.add("root", Expr::seq([Expr::Ref(ids[0]), wander, Expr::lit(";")]));
    let grammar = b.build(root).ok()?;
    Constraint::new(&grammar, index.clone(), &Limits::default()).ok()
}

/// A random JSON Schema: objects with optional and required properties, open objects, free
/// `{}` values, bounded and unbounded strings, numbers, arrays and enums.
fn random_schema(rng: &mut StdRng, depth: u32) -> Value {
    let leaf = depth == 0 || rng.random_bool(0.35);
    let kinds = if leaf { 6 } else { 9 };
    match rng.random_range(0..kinds) {
        0 => json!({"type": "string", "minLength": rng.random_range(0..5), "maxLength": rng.random_range(5..300)}),
        1 => json!({"type": "string"}),
        2 => json!({"type": "integer", "minimum": rng.random_range(-50..0), "maximum": rng.random_range(1..100_000)}),
        3 => json!({"type": "number", "minimum": -1000, "maximum": 1000}),
        4 => json!({"enum": ["red", "green", 7, null]}),
        5 => json!({"type": "boolean"}),
        6 => json!({}),
        7 => json!({
            "type": "array",
            "items": random_schema(rng, depth - 1),
            "minItems": rng.random_range(0..3),
            "maxItems": rng.random_range(3..500)
        }),
        _ => {
            let n = rng.random_range(1..5);
            let mut props = serde_json::Map::new();
            let mut required = Vec::new();
            for i in 0..n {
                let name = format!("p{i}");
                props.insert(name.clone(), random_schema(rng, depth - 1));
                if rng.random_bool(0.5) {
                    required.push(Value::String(name));
                }
            }
            let mut o = json!({"type": "object", "properties": props, "required": required});
            if rng.random_bool(0.5) {
                o["additionalProperties"] = json!(false);
            }
            o
        }
    }
}

/// A random object of six to eleven properties (more than are tracked as a set), names of
/// different lengths, most of them required, open or closed to other keys, some values
/// references to a definition (compiled after the object).
fn random_big_object(rng: &mut StdRng) -> Value {
    let n = rng.random_range(6..12);
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for i in 0..n {
        let name = format!("{}{i}", "k".repeat(rng.random_range(1..6)));
        let value = if rng.random_bool(0.2) { json!({"$ref": "#/$defs/d"}) } else { random_schema(rng, 1) };
        props.insert(name.clone(), value);
        if rng.random_bool(0.8) {
            required.push(Value::String(name));
        }
    }
    let mut o =
        json!({"type": "object", "properties": props, "required": required, "$defs": {"d": random_schema(rng, 2)}});
    if rng.random_bool(0.5) {
        o["additionalProperties"] = json!(false);
    }
    o
}

/// One walk of `c` (seeded `walk`) under a budget of `budget` tokens: it must end within the
/// budget, in the grammar's language. Ambiguous recursion can outgrow the parallel-stack
/// limit; that is reported, and passes.
fn grammar_closes_within(c: &Constraint, budget: usize, walk: u64) -> Result<(), TestCaseError> {
    let mut rng = StdRng::seed_from_u64(walk);
    let (text, used) = match close_within(c, budget, &mut rng) {
        Ok(done) => done,
        Err(e) if e.starts_with(LIMIT_CUT) => return Ok(()),
        Err(e) => return Err(TestCaseError::fail(format!("{e}\n{}", c.pda().listing()))),
    };
    prop_assert!(used <= budget);
    prop_assert!(c.pda().matches(&text), "not in the language: {:?}", String::from_utf8_lossy(&text));
    Ok(())
}

/// One walk of `c`, compiled from `schema`, under a budget of `budget` tokens: it must end
/// within the budget with a document the `jsonschema` crate finds valid.
fn schema_closes_within(schema: &Value, c: &Constraint, budget: usize, walk: u64) -> Result<(), TestCaseError> {
    let mut rng = StdRng::seed_from_u64(walk);
    let (text, used) = close_within(c, budget, &mut rng).map_err(|e| TestCaseError::fail(format!("{schema}\n{e}")))?;
    prop_assert!(used <= budget);
    prop_assert!(c.pda().matches(&text));
    let doc: Value = match serde_json::from_slice(&text) {
        Ok(doc) => doc,
        // A valid JSON number serde_json cannot hold (`77E852` under `{}`): the automaton's
        // verdict above is all that can be checked.
        Err(e) if e.to_string().starts_with("number out of range") => return Ok(()),
        Err(e) => return Err(TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&text)))),
    };
    let validator = jsonschema::draft202012::new(schema).expect("valid schema");
    prop_assert!(validator.is_valid(&doc), "{schema}\n{doc}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn big_objects_close_to_a_valid_document(seed in any::<u64>(), extra in 0usize..80, walk in any::<u64>()) {
        let index = vocabulary();
        let mut rng = StdRng::seed_from_u64(seed);
        let schema = random_big_object(&mut rng);
        let grammar = schema::compile(&schema, &Options::default()).expect("compiles");
        let c = Constraint::new(&grammar, index, &Limits::default()).expect("constraint");
        let start = c.min_bytes_from_start().expect("every byte has a token");
        let budget = start as usize + extra;
        let mut rng = StdRng::seed_from_u64(walk);
        let (text, used) = close_within(&c, budget, &mut rng).map_err(|e| TestCaseError::fail(format!("{schema}\n{e}")))?;
        prop_assert!(used <= budget);
        let doc: Value = serde_json::from_slice(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let validator = jsonschema::draft202012::new(&schema).expect("valid schema");
        prop_assert!(validator.is_valid(&doc), "{schema}\n{doc}");
    }

    #[test]
    fn grammars_always_close_within_the_budget(seed in any::<u64>(), extra in 0usize..60, walk in any::<u64>()) {
        let index = vocabulary();
        let Some(c) = random_grammar(seed, &index) else { return Ok(()) };
        let Some(start) = c.min_bytes_from_start() else { return Ok(()) };
        grammar_closes_within(&c, start as usize + extra, walk)?;
    }

    #[test]
    fn grammars_close_within_a_token_budget(seed in any::<u64>(), extra in 0usize..40, walk in any::<u64>()) {
        let index = rich_vocabulary();
        let Some(c) = random_grammar(seed, &index) else { return Ok(()) };
        let Some((_, tokens)) = start_distances(&c) else { return Ok(()) };
        grammar_closes_within(&c, tokens + extra, walk)?;
    }

    #[test]
    fn schemas_close_within_a_token_budget(seed in any::<u64>(), extra in 0usize..40, walk in any::<u64>(), big in any::<bool>()) {
        let index = rich_vocabulary();
        let mut rng = StdRng::seed_from_u64(seed);
        let schema = if big { random_big_object(&mut rng) } else { random_schema(&mut rng, 3) };
        let Ok(grammar) = schema::compile(&schema, &Options::default()) else { return Ok(()) };
        let c = Constraint::new(&grammar, index, &Limits::default()).expect("constraint");
        let (_, tokens) = start_distances(&c).expect("every byte has a token");
        schema_closes_within(&schema, &c, tokens + extra, walk)?;
    }

    #[test]
    fn schemas_always_close_to_a_valid_document(seed in any::<u64>(), extra in 0usize..80, walk in any::<u64>()) {
        let index = vocabulary();
        let mut rng = StdRng::seed_from_u64(seed);
        let schema = random_schema(&mut rng, 3);
        let Ok(grammar) = schema::compile(&schema, &Options::default()) else { return Ok(()) };
        let c = Constraint::new(&grammar, index, &Limits::default()).expect("constraint");
        let start = c.min_bytes_from_start().expect("every byte has a token");
        schema_closes_within(&schema, &c, start as usize + extra, walk)?;
    }
}

/// The start distance in bytes is the length of the shortest document; in tokens, the
/// fewest tokens that spell it. A budget one below the tokens is refused up front with that
/// minimum; at the tokens, below the bytes, it is accepted and closes.
#[test]
fn budget_below_the_token_distance_is_refused() {
    for index in [vocabulary(), rich_vocabulary(), TokenIndex::new(Vocabulary::bytes())] {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 3}}, "required": ["name"], "additionalProperties": false});
        let grammar = schema::compile(&schema, &Options::default()).expect("schema");
        let c = Constraint::new(&grammar, index.clone(), &Limits::default()).expect("constraint");
        let (bytes, tokens) = start_distances(&c).expect("reachable");
        assert_eq!(bytes, r#"{"name":"aaa"}"#.len());
        // The count is over the shortest document's bytes, each token once.
        let mut shortest = Vec::new();
        assert!(c.matcher().shortest_completion(&mut shortest).unwrap());
        assert_eq!(shortest.len(), bytes);
        assert!(c.pda().matches(&shortest));
        let mut cost = Vec::new();
        index.fewest_tokens(&shortest, &mut cost);
        assert_eq!(cost[0] as usize, tokens);
        match Closer::new(&c, true, tokens - 1, 4096) {
            Err(e @ BudgetTooSmall { .. }) => {
                assert_eq!(e.needed, tokens as u64);
                assert!(e.to_string().contains(&format!("takes {tokens} tokens")), "{e}");
            }
            other => panic!("expected BudgetTooSmall, got {other:?}"),
        }
        assert!(Closer::new(&c, true, tokens, 4096).is_ok());
        // The context counts too.
        assert!(matches!(Closer::new(&c, true, 1000, tokens - 1), Err(BudgetTooSmall { .. })));
        // At exactly the start distance in tokens, walks still end valid.
        for walk in 0..20 {
            let mut rng = StdRng::seed_from_u64(walk);
            let (text, used) = close_within(&c, tokens, &mut rng).expect("closes");
            assert!(used <= tokens);
            let doc: Value = serde_json::from_slice(&text).expect("JSON");
            assert!(jsonschema::draft202012::new(&schema).unwrap().is_valid(&doc), "{doc}");
        }
    }
    // The rich vocabulary spells it in fewer tokens than bytes.
    let schema = json!({"type": "object", "properties": {"name": {"type": "string", "minLength": 3}}, "required": ["name"], "additionalProperties": false});
    let c =
        Constraint::new(&schema::compile(&schema, &Options::default()).unwrap(), rich_vocabulary(), &Limits::default())
            .unwrap();
    let (bytes, tokens) = start_distances(&c).unwrap();
    assert!(tokens < bytes, "{tokens} tokens, {bytes} bytes");
}

/// `fewest_tokens` counts each suffix's fewest ordinary tokens (never EOS, never special).
#[test]
fn fewest_tokens_counts_each_suffix() {
    let tokens: Vec<Vec<u8>> =
        ["a", "b", "ab", "abb", "bba", "<s>", "ba"].iter().map(|t| t.as_bytes().to_vec()).collect();
    let index = TokenIndex::new(Vocabulary::new(tokens, &[TokenId(5)], &[TokenId(6)]).unwrap());
    let mut cost = Vec::new();
    index.fewest_tokens(b"abba", &mut cost);
    // `abba` = `abb` `a`, `bba` is one token, and `ba` is EOS here: `b` `a`.
    assert_eq!(cost, vec![2, 1, 2, 1, 0]);
    index.fewest_tokens(b"<s>", &mut cost);
    assert_eq!(cost[0], constrain::mask::NO_SPELLING);
}

/// Where the budget is ample, closing never narrows anything: walks finish as they would
/// without it (the check only looks, and the result is a normal stop).
#[test]
fn ample_budgets_do_not_close() {
    let index = vocabulary();
    let schema = json!({"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"], "additionalProperties": false});
    let c =
        Constraint::new(&schema::compile(&schema, &Options::default()).unwrap(), index, &Limits::default()).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let (text, _) = close_within(&c, 10_000, &mut rng).expect("finishes");
    let doc: Value = serde_json::from_slice(&text).unwrap();
    assert!(doc["a"].is_boolean());
}

/// The generators above are not vacuous: most random grammars and schemas compile, and with
/// budgets near the start distance most walks go through closing mode.
#[test]
fn the_properties_exercise_closing() {
    let index = vocabulary();
    let (mut built, mut closed, mut schemas_closed) = (0, 0, 0);
    for seed in 0..100u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        if let Some(c) = random_grammar(seed, &index) {
            built += 1;
            let start = c.min_bytes_from_start().unwrap() as usize;
            let (text, _, closing) = close_within_reporting(&c, start + 5, &mut rng).unwrap();
            assert!(c.pda().matches(&text));
            closed += usize::from(closing);
        }
        let schema = random_schema(&mut rng, 3);
        if let Ok(g) = schema::compile(&schema, &Options::default()) {
            let c = Constraint::new(&g, index.clone(), &Limits::default()).unwrap();
            let start = c.min_bytes_from_start().unwrap() as usize;
            let (_, _, closing) = close_within_reporting(&c, start + 5, &mut rng).unwrap();
            schemas_closed += usize::from(closing);
        }
    }
    assert!(
        built >= 80 && closed >= 40 && schemas_closed >= 20,
        "{built} grammars built, {closed} closed; {schemas_closed} schemas closed"
    );
    // With many multi-byte tokens, most starts need fewer tokens than bytes, so budgets
    // between the two (closing's plan) are common.
    let rich = rich_vocabulary();
    let (mut fewer, mut schemas_fewer) = (0, 0);
    for seed in 0..100u64 {
        if let Some((bytes, tokens)) = random_grammar(seed, &rich).and_then(|c| start_distances(&c)) {
            fewer += usize::from(tokens < bytes);
        }
        let schema = random_schema(&mut StdRng::seed_from_u64(seed), 3);
        if let Ok(g) = schema::compile(&schema, &Options::default()) {
            let c = Constraint::new(&g, rich.clone(), &Limits::default()).unwrap();
            let (bytes, tokens) = start_distances(&c).unwrap();
            schemas_fewer += usize::from(tokens < bytes);
        }
    }
    assert!(
        fewer >= 50 && schemas_fewer >= 50,
        "{fewer} grammars and {schemas_fewer} schemas need fewer tokens than bytes"
    );
}

/// Inside a key that spells a written name so far, in an object that takes other keys, the
/// distance runs through an undeclared key that goes past the name, not through the repeat
/// the check refuses (nor is it unknown, which would start closing for nothing).
#[test]
fn a_key_past_a_written_name_keeps_a_finite_exact_distance() {
    let names = ["k1", "k2", "k3", "k4", "k5", "k6"];
    let props: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.to_string(), json!({"type": "integer"}))).collect();
    let schema = json!({"type": "object", "properties": props, "required": names});
    let options = Options::default().with_whitespace(schema::Whitespace::Compact);
    let c = Constraint::new(&schema::compile(&schema, &options).unwrap(), vocabulary(), &Limits::default()).unwrap();
    let mut m = c.matcher();
    m.accept_bytes(br#"{"k1":0,"k2":0,"k1"#).unwrap();
    // The grammar alone ends the repeat (`":0`) and counts it as one of the four names
    // left: one name short.
    let rest = r#","k3":0,"k4":0,"k5":0,"k6":0}"#;
    assert_eq!(m.min_bytes_to_finish(), Some((r#"":0"#.len() + rest.len() - r#","k6":0"#.len()) as u64));
    // The way the check allows goes past the name: `a":0`, then the four names.
    assert_eq!(m.min_bytes_to_finish_checked().unwrap(), Some((r#"a":0"#.len() + rest.len()) as u64));
    m.accept_bytes(format!(r#"a":0{rest}"#).as_bytes()).unwrap();
    assert!(m.is_accepting());
}

/// Closing that respects the run-time checks (issue 37): schemas whose grammar allows a
/// shorter end than the checks do (`minProperties` over free keys, a `then` decided by an
/// earlier choice, `uniqueItems` with `minItems`, a `not`). The closer follows a completion
/// a liveness proof found, so every walk under every budget from the smallest up ends with a
/// valid document; with the grammar's distance alone, closing steered into the end the
/// checks refuse (`Snowplow/sp_348_Normalized` under `serve`).
#[test]
fn closing_respects_the_run_time_checks() {
    let index = vocabulary();
    let schemas = [
        json!({"type": "object", "minProperties": 3, "maxProperties": 4}),
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2,
               "additionalProperties": {"type": "boolean"}}),
        json!({"type": "object", "required": ["kind", "level"],
               "properties": {"kind": {"enum": ["a", "bb"]}, "level": {"enum": [1, 22]}},
               "if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"level": {"const": 22}}},
               "else": {"properties": {"level": {"const": 1}}}}),
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": true}),
        json!({"type": "array", "items": {"enum": [1, 2, 3]}, "minItems": 2, "uniqueItems": true}),
        json!({"type": "object", "properties": {"x": {"type": "string", "not": {"const": ""}}}, "required": ["x"]}),
    ];
    let mut refused_or_closed = 0;
    for schema in &schemas {
        let options = Options::default();
        let grammar = schema::compile(schema, &options).expect("compiles");
        assert!(grammar.checks().is_some(), "{schema}: no run-time check to respect");
        let c = Constraint::new(&grammar, index.clone(), &Limits::default()).expect("constraint");
        let start = c.min_bytes_from_start().expect("every byte has a token") as usize;
        for budget in start..start + 16 {
            for walk in 0..3u64 {
                match schema_closes_within(schema, &c, budget, walk) {
                    Ok(()) => {}
                    // A budget below the checked plan's tokens is refused up front.
                    Err(e) if e.to_string().contains("refused: the token budget is too small") => {
                        refused_or_closed += 1;
                    }
                    Err(e) => panic!("{schema} at budget {budget}, walk {walk}: {e}"),
                }
            }
        }
    }
    assert!(refused_or_closed > 0, "no budget was below what the checks need: the test is too easy");
}

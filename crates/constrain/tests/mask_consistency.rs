//! The mask is exactly what the matcher accepts, token by token, on a vocabulary large enough
//! that the precomputation takes its shortcuts: first-byte subtrees walked for one schema are
//! memoized and replayed for the next (as id lists, trie-position bitsets, or whole subtrees
//! minus exceptions), and counted loops (`maxLength`, `minLength`, counted patterns) derive
//! one entry per count from a single classification, and walks through several parse
//! stacks read their steps from the configuration table once computed; string bodies that
//! take any text, and loops of one character an iteration, leave text tokens unwalked.

use constrain::grammar::{Expr, GrammarBuilder};
use constrain::mask::is_allowed;
use constrain::schema::{self, Options};
use constrain::{Constraint, Limits, Matcher, TokenId, TokenIndex, Vocabulary};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// Every single byte, then every 2- and 3-byte string over a small alphabet (with quotes,
/// separators and digits, so that some tokens of a subtree survive a string body and some do
/// not) after six first bytes, and 4-byte strings after `a`, `b` and `x`: first-byte subtrees
/// of hundreds to thousands of tokens. One end-of-generation id.
fn vocabulary() -> Arc<TokenIndex> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let alphabet = b"ab\",: 1x";
    for &first in b"ab\" x{" {
        for &second in alphabet {
            tokens.push(vec![first, second]);
            for &third in alphabet {
                tokens.push(vec![first, second, third]);
            }
        }
    }
    for &first in b"ab" {
        for s in 0..4 * 4 * 4 {
            let letter = |k: usize| b"abcx"[k % 4];
            tokens.push(vec![first, letter(s), letter(s / 4), letter(s / 16)]);
        }
    }
    // A subtree large enough that a few dozen survivors are memoized as an id list.
    let wide = b"ab\",: 1xyz-.";
    for s in 0..wide.len().pow(3) {
        let letter = |k: usize| wide[k % wide.len()];
        tokens.push(vec![b'x', letter(s), letter(s / wide.len()), letter(s / wide.len() / wide.len())]);
    }
    // Text of several characters and widths, line separators (which an ECMA `.` refuses)
    // and partial characters: counted loops over characters classify text tokens by their
    // number of characters.
    for text in ["é", "日本", "aé", "éa1", "ab日x", "😀", "a😀b", "\u{2028}", "a\u{2029}", "abcab", "xx1xx1", "ab,x"]
    {
        tokens.push(text.as_bytes().to_vec());
    }
    tokens.extend([b"\xE6\x97".to_vec(), b"a\xC3".to_vec(), b"\xA9a".to_vec()]);
    let eos = TokenId(tokens.len() as u32);
    tokens.push(Vec::new());
    TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("valid vocabulary"))
}

/// The constraint of the schema `text` (default options and limits) over `index`.
fn constraint_for(index: &Arc<TokenIndex>, text: &str) -> Constraint {
    let schema: serde_json::Value = serde_json::from_str(text).expect("schema JSON");
    let grammar = schema::compile(&schema, &Options::default()).expect("schema compiles");
    Constraint::new(&grammar, index.clone(), &Limits::default()).expect("constraint")
}

/// The tokens `matcher` accepts now, tried one by one (each accepted one is rolled back).
fn accepted_by_matcher(matcher: &mut Matcher, vocab: &Vocabulary) -> Vec<u32> {
    let mut out = Vec::new();
    for id in 0..vocab.len() as u32 {
        let t = TokenId(id);
        if vocab.is_eos(t) {
            if matcher.is_accepting() {
                out.push(id);
            }
        } else if matcher.accept_token(t).is_ok() {
            out.push(id);
            matcher.rollback(1).expect("roll back the probe");
        }
    }
    out
}

#[test]
fn masks_equal_what_the_matcher_accepts() {
    let index = vocabulary();
    let vocab = index.vocab();
    // Compiled in turn against one index: later schemas replay what earlier ones memoized.
    let schemas = [
        r#"{"type":"object","properties":{"name":{"type":"string"},"tag":{"type":"string","maxLength":12}},
            "additionalProperties":{"type":"string"}}"#,
        r#"{"type":"object","properties":{"ab":{"type":"string","minLength":2},"code":{"type":"string","pattern":"^[ab]{3,9}$"}},
            "additionalProperties":{"type":"string","maxLength":30}}"#,
        r#"{"type":"array","items":{"type":"string","pattern":"x{8}"},"maxItems":20}"#,
        r#"{"type":"array","items":{"type":"string","minLength":5,"maxLength":14}}"#,
        r#"{"type":"object","properties":{"b":{"type":"string"},"x":{"type":"integer"}},"additionalProperties":{"type":"string"}}"#,
        r#"{"type":"object","properties":{"p":{"type":"string","pattern":"^[x1a]+$"},"q":{"type":"string","pattern":"^[x1a]+$"}},
            "required":["p","q"],"additionalProperties":false}"#,
        // Several parse stacks through most of a walk, in configurations that repeat (a
        // pattern searched for anywhere, alternatives that stay alive together): the walk's
        // configuration table steps them.
        r#"{"type":"object","properties":{"s":{"type":"string","pattern":"ab"},"t":{"type":"string","pattern":"x1"}},
            "required":["s","t"]}"#,
        r#"{"type":"array","items":{"anyOf":[{"type":"string","pattern":"^a[ab]*$"},{"type":"string","pattern":"^[ax]+b$"},
            {"enum":["ab","abx","b1"]},{"type":"integer"}]}}"#,
        // Counted loops over characters: any, all but a few ASCII ones, all but the line
        // separators (ECMA `.`), ASCII only; and a loop followed by more pattern.
        r#"{"type":"object","properties":{"m":{"type":"string","maxLength":40},"n":{"type":"string","pattern":"^[^,\"]+$","maxLength":30},
            "d":{"type":"string","pattern":"^.{1,25}$"},"k":{"type":"string","pattern":"^[ -~]{2,20}$"},"e":{"type":"string","pattern":"^.{2,30}x$"}},
            "required":["m","n","d","k","e"],"additionalProperties":false}"#,
        r#"{"type":"array","items":{"type":"string","minLength":3,"maxLength":9},"maxItems":12}"#,
        // Loops searched for, so followed by any text.
        r#"{"type":"array","items":{"type":"string","pattern":"[ab1]{7}"},"maxItems":8}"#,
        r#"{"type":"object","properties":{"s":{"type":"string","pattern":"x[^,x]{7,12}"},"t":{"type":"string","pattern":"[a-z]{8,}"}},
            "required":["s","t"],"additionalProperties":false}"#,
        // Any text after a first character that must not be `a` or `b`.
        r#"{"type":"array","items":{"type":"string","pattern":"^[^ab]"},"maxItems":8}"#,
    ];
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut steps = 0;
    for (n, text) in schemas.iter().enumerate() {
        let constraint = constraint_for(&index, text);
        for seed in 0..6 {
            let mut rng = StdRng::seed_from_u64(seed * 31 + n as u64);
            let mut matcher = constraint.matcher();
            let mut text = Vec::new();
            for _ in 0..80 {
                matcher.fill_mask(&mut mask).expect("mask");
                let masked: Vec<u32> = (0..vocab.len() as u32).filter(|&id| is_allowed(&mask, TokenId(id))).collect();
                let expected = accepted_by_matcher(&mut matcher, vocab);
                assert_eq!(masked, expected, "schema {n}, after {:?}", String::from_utf8_lossy(&text));
                steps += 1;
                // Prefer tokens that continue over the end, so walks get deep.
                let pick = loop {
                    let id = expected[rng.random_range(0..expected.len())];
                    if !vocab.is_eos(TokenId(id)) || expected.len() == 1 || rng.random_range(0..8) == 0 {
                        break TokenId(id);
                    }
                };
                matcher.accept_token(pick).expect("an allowed token is accepted");
                if vocab.is_eos(pick) || matcher.is_finished() {
                    break;
                }
                text.extend_from_slice(vocab.token_bytes(pick));
            }
        }
    }
    assert!(steps > 300, "only {steps} steps checked");
}

/// Loops of one character an iteration at every count, after prefixes chosen to reach each:
/// anchored (followed by the closing quote only: text tokens are classified by length, those
/// holding a refused character rejected), `maxLength` strings, and loops followed by more
/// text (searched for, or anchored at the start only), which are walked.
#[test]
fn one_character_loops_at_every_count() {
    let index = vocabulary();
    let vocab = index.vocab();
    let mut mask = vec![0u32; vocab.mask_words()];
    let cases: [(&str, &[&str]); 9] = [
        (
            r#"{"type":"string","pattern":"[ab1]{7}"}"#,
            &["\"", "\"x", "\"xa", "\"a1", "\"ab1", "\"ab1a", "\"ab1ab", "\"ab1ab1", "\"ab1ab1a", "\"ab1ab1ax"],
        ),
        (
            r#"{"type":"string","pattern":"^[ab1]{7}"}"#,
            &["\"", "\"a", "\"a1", "\"ab1", "\"ab1a", "\"ab1ab", "\"ab1ab1", "\"ab1ab1a", "\"ab1ab1ax"],
        ),
        (
            r#"{"type":"string","pattern":"x[^,x]{7,9}"}"#,
            &["\"x", "\"xa", "\"xab", "\"xab1", "\"xab1é", "\"xab1éa", "\"xab1éab", "\"xab1éab1", "\"xab1éab1a"],
        ),
        (
            r#"{"type":"string","pattern":"^[ab]{7,9}$"}"#,
            &["\"", "\"a", "\"ab", "\"abb", "\"abba", "\"abbab", "\"abbaba", "\"abbabab", "\"abbababa"],
        ),
        (
            r#"{"type":"string","maxLength":8}"#,
            &["\"", "\"a", "\"a,", "\"a,b", "\"a,bé", "\"a,béx", "\"a,béx ", "\"a,béx 1", "\"a,béx 1a"],
        ),
        // A loop that takes one non-ASCII character and refuses the others.
        (
            r#"{"type":"string","pattern":"^[ab1é]{7,9}$"}"#,
            &["\"", "\"a", "\"aé", "\"aéb", "\"aéb1", "\"aéb1é", "\"aéb1éa", "\"aéb1éab", "\"aéb1éab1", "\"aéb1éab1é"],
        ),
        // Followed by a class that takes some of the loop's characters and not others.
        (
            r#"{"type":"string","pattern":"^x[a-c1]{2,8}[ab,]"}"#,
            &[
                "\"x",
                "\"xa",
                "\"xa1",
                "\"xa1c",
                "\"xa1cb",
                "\"xa1cba",
                "\"xa1cbac",
                "\"xa1cbac1",
                "\"xa1cbac1a",
                "\"xa1cbac1ab",
                "\"xa1cbac1ab,",
            ],
        ),
        // A length cut of a pattern searched for: counted loops in rules of their own,
        // reached through a chain of rules that only end (one frame per character).
        (
            r#"{"type":"string","pattern":"[ab]","maxLength":9}"#,
            &["\"", "\"x", "\"x,", "\"x,a", "\"x,a1", "\"x,a1é", "\"x,a1éx", "\"x,a1éx ", "\"x,a1éx b", "\"x,a1éx bb"],
        ),
        (
            r#"{"type":"object","properties":{"v":{"type":"string","pattern":"^1\\.[ab].*$","minLength":5,"maxLength":10}}}"#,
            &[
                "{\"v\":\"1.",
                "{\"v\":\"1.a",
                "{\"v\":\"1.a1",
                "{\"v\":\"1.a1x",
                "{\"v\":\"1.a1x,",
                "{\"v\":\"1.a1x,é",
                "{\"v\":\"1.a1x,éb",
                "{\"v\":\"1.a1x,éb ",
                "{\"v\":\"1.a1x,éb a",
            ],
        ),
    ];
    for (text, prefixes) in cases {
        let constraint = constraint_for(&index, text);
        for prefix in prefixes {
            let mut matcher = constraint.matcher();
            matcher.accept_bytes(prefix.as_bytes()).expect("the prefix is valid");
            matcher.fill_mask(&mut mask).expect("mask");
            let masked: Vec<u32> = (0..vocab.len() as u32).filter(|&id| is_allowed(&mask, TokenId(id))).collect();
            assert_eq!(masked, accepted_by_matcher(&mut matcher, vocab), "{text} after {prefix}");
        }
    }
}

/// A length cut of a pattern searched for (`[ab]` with `maxLength`) makes no new entry after
/// the pattern matched, wherever it matched, and its masks stay exact: the rest is one
/// counted loop whose counts share entries. Before, each position was a state of its own,
/// and each of its masks a walk of the whole vocabulary.
#[test]
fn a_searched_pattern_cut_to_a_length_makes_no_entry_after_the_match() {
    let index = vocabulary();
    let vocab = index.vocab();
    let constraint = constraint_for(&index, r#"{"type":"string","pattern":"[ab]","maxLength":40}"#);
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut entries = None;
    // Matched after one character, and after six.
    for prefix in ["\"xa", "\"x,1 \u{e9}xa"] {
        let mut matcher = constraint.matcher();
        matcher.accept_bytes(prefix.as_bytes()).expect("valid prefix");
        for c in " 1x,\u{e9}b".repeat(3).chars() {
            matcher.fill_mask(&mut mask).expect("mask");
            let masked: Vec<u32> = (0..vocab.len() as u32).filter(|&id| is_allowed(&mask, TokenId(id))).collect();
            assert_eq!(masked, accepted_by_matcher(&mut matcher, vocab), "{prefix:?}, then up to {c:?}");
            let now = index.cache_report().entries.values;
            assert_eq!(*entries.get_or_insert(now), now, "a new entry in {prefix:?} before {c:?}");
            matcher.accept_bytes(c.to_string().as_bytes()).expect("any character after the match");
        }
    }
}

/// Masks after rollbacks equal a fresh matcher's after the same tokens: what a matcher
/// keeps between masks (the stack-dependent tokens it added on its own stacks, by frame)
/// must not outlive the frames a rollback removed. Random walks that roll back one to three
/// tokens a quarter of the time, then take other tokens, so that new frames reuse the
/// arena positions of the removed ones.
#[test]
fn masks_after_rollbacks_equal_a_fresh_matchers() {
    let index = vocabulary();
    let vocab = index.vocab();
    let schemas = [
        r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"string"}},
            "x":{"type":"object","properties":{"a":{"type":"string","maxLength":5}}}},"additionalProperties":false}"#,
        r#"{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"string"}},{"type":"integer"}]}}"#,
        r#"{"type":"object","additionalProperties":{"type":"array","items":{"type":"string","pattern":"^[ab1]+$"}}}"#,
    ];
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut fresh_mask = vec![0u32; vocab.mask_words()];
    let (mut checked, mut rollbacks) = (0, 0);
    for (n, text) in schemas.iter().enumerate() {
        let constraint = constraint_for(&index, text);
        for seed in 0..4 {
            let mut rng = StdRng::seed_from_u64(seed * 17 + n as u64);
            let mut matcher = constraint.matcher();
            let mut taken: Vec<TokenId> = Vec::new();
            for _ in 0..120 {
                let back = if taken.len() >= 3 && rng.random_range(0..4) == 0 { rng.random_range(1..=3) } else { 0 };
                if back > 0 {
                    matcher.rollback(back).expect("roll back");
                    taken.truncate(taken.len() - back);
                    rollbacks += 1;
                }
                matcher.fill_mask(&mut mask).expect("mask");
                let mut fresh = constraint.matcher();
                for &t in &taken {
                    fresh.accept_token(t).expect("replay");
                }
                fresh.fill_mask(&mut fresh_mask).expect("fresh mask");
                let text: Vec<u8> = taken.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
                assert!(mask == fresh_mask, "schema {n}, after {:?}", String::from_utf8_lossy(&text));
                checked += 1;
                // Tokens that are not the end, so the walk goes on.
                let allowed: Vec<u32> = (0..vocab.len() as u32)
                    .filter(|&id| is_allowed(&mask, TokenId(id)) && !vocab.is_eos(TokenId(id)))
                    .collect();
                if allowed.is_empty() {
                    break;
                }
                let pick = TokenId(allowed[rng.random_range(0..allowed.len())]);
                matcher.accept_token(pick).expect("an allowed token is accepted");
                taken.push(pick);
            }
        }
    }
    assert!(checked > 500 && rollbacks > 100, "only {checked} masks and {rollbacks} rollbacks checked");
}

/// The entries derived for "other" keys (the string rest minus the declared names) refuse
/// what the grammar refuses where a declared name goes on: escapes that could spell its next
/// character (`\u…` but a control character's, `\/` before a `/`), in tokens that start with
/// a name's prefix or not.
#[test]
fn other_keys_refuse_escaped_names_in_masks_too() {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in [
        "\\u",
        "\\u0061",
        "\\u0041",
        "a\\u",
        "a\\u0062",
        "a\\/",
        "a\\/b",
        "\\/",
        "\\\\",
        "\\n",
        "a\\n",
        "x\\u0061",
        "\"a",
        "\"a\"",
        "ab\"",
        "a/b\"",
        "\": ",
        "\\\"",
        "a\\\"",
        "u0061\"",
        "0061",
        "ab",
        "a/",
        // Control characters' escapes, which other keys take where a name goes on.
        "\\u00",
        "\\u0005",
        "a\\u001F",
        "a\\u001fb",
        "\\u0020",
    ] {
        tokens.push(t.as_bytes().to_vec());
    }
    let eos = TokenId(tokens.len() as u32);
    tokens.push(Vec::new());
    let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("valid vocabulary"));
    let vocab = index.vocab();
    let constraint = constraint_for(
        &index,
        r#"{"type": "object", "properties": {"ab": {"type": "integer"}, "a/b": {"type": "integer"},
            "x": {"type": "integer"}}, "additionalProperties": {"type": "string"}}"#,
    );
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut checked = 0;
    for seed in 0..40 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut matcher = constraint.matcher();
        for _ in 0..12 {
            matcher.fill_mask(&mut mask).expect("mask");
            let masked: Vec<u32> = (0..vocab.len() as u32).filter(|&id| is_allowed(&mask, TokenId(id))).collect();
            let expected = accepted_by_matcher(&mut matcher, vocab);
            assert_eq!(masked, expected, "seed {seed}");
            checked += 1;
            let multi: Vec<u32> =
                expected.iter().copied().filter(|&id| id > 255 && !vocab.is_eos(TokenId(id))).collect();
            let pool = if !multi.is_empty() && rng.random_range(0..2) == 0 { &multi } else { &expected };
            let pick = TokenId(pool[rng.random_range(0..pool.len())]);
            if vocab.is_eos(pick) {
                break;
            }
            matcher.accept_token(pick).expect("an allowed token is accepted");
        }
    }
    assert!(checked > 200, "only {checked} masks checked");
    // The names themselves, spelled with escapes, are refused as other keys.
    for doc in [r#"{"\u0061b": "s"}"#, r#"{"a\/b": "s"}"#, r#"{"\u0078": "s"}"#] {
        let mut m = constraint.matcher();
        assert!(m.accept_bytes(doc.as_bytes()).is_err() || !m.is_accepting(), "{doc}");
    }
}

/// Counted loops nested in counted loops, each keeping a run-time counter (unroll limit 1):
/// `([0-9]{3,4}){2,4};` (the inner loop the outer one's whole body) and
/// `(a[0-9]{3,4}){2,4};` (the inner loop ends the outer one's body). A token whose first
/// byte is the inner loop's last iteration and whose second leaves both loops (`5;` after
/// `1234`, where the second group holds one or two digits) must be refused: the inner
/// loop's count decides it, though the outer loop's frame is what the exit lands in. The
/// masks equal the matcher's answers after every prefix of a few walks, with the bytes
/// and every pair of the grammars' bytes as tokens.
#[test]
fn nested_counted_loops_decide_exits_by_the_inner_count() {
    let alphabet = b"0123456789a;";
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for &a in alphabet {
        for &b in alphabet {
            tokens.push(vec![a, b]);
        }
    }
    let eos = TokenId(tokens.len() as u32);
    tokens.push(Vec::new());
    let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[eos]).expect("valid vocabulary"));
    let vocab = index.vocab();
    let limits = Limits::default().with_unroll_limit(1);
    let digits = || Expr::repeat(Expr::Bytes(vec![(b'0', b'9')]), 3, Some(4));
    let cases = [
        (Expr::repeat(digits(), 2, Some(4)), ["1234", "1234567890", "123456789012345"]),
        (
            Expr::repeat(Expr::seq([Expr::lit("a"), digits()]), 2, Some(4)),
            ["a123a1", "a1234a123a12", "a123a123a1234a12"],
        ),
    ];
    let mut mask = vec![0u32; vocab.mask_words()];
    for (n, (body, walks)) in cases.into_iter().enumerate() {
        let mut b = GrammarBuilder::new();
        let root = b.add("root", Expr::seq([body, Expr::lit(";")]));
        let grammar = b.build(root).expect("grammar");
        let constraint = Constraint::new(&grammar, index.clone(), &limits).expect("constraint");
        for walk in walks {
            for end in 0..=walk.len() {
                let prefix = &walk[..end];
                let mut matcher = constraint.matcher();
                matcher.accept_bytes(prefix.as_bytes()).expect("the prefix is valid");
                matcher.fill_mask(&mut mask).expect("mask");
                let masked: Vec<u32> = (0..vocab.len() as u32).filter(|&id| is_allowed(&mask, TokenId(id))).collect();
                assert_eq!(masked, accepted_by_matcher(&mut matcher, vocab), "grammar {n} after {prefix:?}");
            }
        }
    }
    // The case the property test found: after `1234` the token `5;` is refused, `56` taken.
    let mut b = GrammarBuilder::new();
    let root = b.add("root", Expr::seq([Expr::repeat(digits(), 2, Some(4)), Expr::lit(";")]));
    let constraint = Constraint::new(&b.build(root).expect("grammar"), index.clone(), &limits).expect("constraint");
    let id = |t: &[u8]| TokenId((0..vocab.len() as u32).find(|&i| vocab.token_bytes(TokenId(i)) == t).expect("token"));
    let mut matcher = constraint.matcher();
    matcher.accept_bytes(b"1234").expect("prefix");
    matcher.fill_mask(&mut mask).expect("mask");
    assert!(!is_allowed(&mask, id(b"5;")));
    assert!(matcher.accept_token(id(b"5;")).is_err());
    assert!(is_allowed(&mask, id(b"56")));
    matcher.accept_token(id(b"56")).expect("six digits");
    matcher.accept_token(id(b";")).expect("two groups of three");
    assert!(matcher.is_accepting());
}

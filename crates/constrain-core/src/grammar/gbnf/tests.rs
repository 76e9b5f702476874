//! Unit tests for the GBNF parser and printer.

use super::*;
use crate::automaton::{self, Pda};
use crate::grammar::{ErrorKind, Expr, GrammarBuilder};
use crate::Limits;

fn pda(text: &str) -> Pda {
    let g = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Pda::build(&g, &Limits::default()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn err(text: &str) -> crate::grammar::Error {
    match parse(text) {
        Ok(g) => panic!("expected an error for {text:?}, got\n{g}"),
        Err(e) => e,
    }
}

fn check(text: &str, accept: &[&str], reject: &[&str]) {
    let p = pda(text);
    for s in accept {
        assert!(p.matches(s.as_bytes()), "{text}\nshould accept {s:?}");
    }
    for s in reject {
        assert!(!p.matches(s.as_bytes()), "{text}\nshould reject {s:?}");
    }
}

#[test]
fn sequences_alternatives_groups() {
    check(r#"root ::= "a" ("b" | "cd") "e" | "x""#, &["abe", "acde", "x"], &["", "ae", "abcde", "xa", "a"]);
    check("root ::= | \"a\"", &["", "a"], &["aa"]);
    check("root ::= \"\"", &[""], &["a"]);
}

#[test]
fn rules_may_span_lines_and_be_used_before_definition() {
    let text = "# list of items\nroot ::= item\n   (\",\" item)*   # more\n\nitem ::=\n  \"a\"\n  | \"b\"\n";
    check(text, &["a", "a,b,a", "b"], &["", "a,", ",a", "ab"]);
    // A newline inside a group is plain whitespace too.
    check("root ::= (\n\"x\"\n|\n\"y\"\n)+", &["x", "xyx"], &["", "z"]);
}

#[test]
fn windows_line_ends_and_byte_order_mark() {
    check(
        "\u{FEFF}# list\r\nroot ::= item (\",\" item)*\r\n\r\nitem ::= [a-z]+ # word\r\n",
        &["ab,c"],
        &["ab,", "a\r"],
    );
}

#[test]
fn repetition_forms() {
    let t = |op: &str| format!("root ::= \"a\"{op}");
    check(&t("*"), &["", "a", "aaaa"], &["b"]);
    check(&t("+"), &["a", "aaaa"], &["", "b"]);
    check(&t("?"), &["", "a"], &["aa"]);
    check(&t("{3}"), &["aaa"], &["aa", "aaaa"]);
    check(&t("{2,}"), &["aa", "aaaaaaa"], &["", "a"]);
    check(&t("{1,3}"), &["a", "aa", "aaa"], &["", "aaaa"]);
    check(&t("{ 0 , 2 }"), &["", "aa"], &["aaa"]);
    check(&t("{0}"), &[""], &["a"]);
    check("root ::= (\"ab\"){2,40000}", &["abab", &"ab".repeat(40000)], &["ab", &"ab".repeat(40001)]);
    // Postfix operators stack: ("a"?){2}
    check("root ::= \"a\"?{2}", &["", "a", "aa"], &["aaa"]);
}

#[test]
fn string_escapes() {
    check(r#"root ::= "\n\t\r\\\"\[\]""#, &["\n\t\r\\\"[]"], &["\\n"]);
    check(r#"root ::= "\x41\u00e9\U0001F600""#, &["Aé😀"], &["A"]);
    // \xNN is a code point (as in llama.cpp), so \xE9 is two UTF-8 bytes.
    check(r#"root ::= "\xE9""#, &["é"], &[]);
    assert!(!pda(r#"root ::= "\xE9""#).matches(&[0xE9]));
    check("root ::= \"héllo wörld\"", &["héllo wörld"], &["hello world"]);
}

#[test]
fn character_classes() {
    check("root ::= [a-cx]+", &["abcx", "x"], &["", "d", "abd"]);
    check(r"root ::= [\x30-\x39\x2D]", &["0", "9", "-"], &["a", "\\"]);
    check(r"root ::= [a-]", &["a", "-"], &["b"]);
    check(r"root ::= [\]\[\\]", &["]", "[", "\\"], &["a"]);
    check("root ::= [α-ω]", &["β"], &["a", "Α"]);
    check(r"root ::= [\u0100-\U0010FFFF]", &["\u{100}", "\u{10FFFF}", "\u{E000}"], &["a", "\u{FF}"]);
}

#[test]
fn negated_classes_and_any_char() {
    check(r#"root ::= "\"" [^"\\]* "\"""#, &["\"\"", "\"abc é 😀\""], &["\"a\"b\"", "\"\\\""]);
    check(r"root ::= [^a-z]", &["A", "\u{10FFFF}", "\u{D7FF}", "\u{E000}", "\n"], &["a", "q", "z"]);
    // Negation is over code points: a lone UTF-8 continuation byte is still rejected.
    let p = pda(r"root ::= [^a]");
    assert!(!p.matches(&[0x80]));
    assert!(!p.matches(&[0xFF]));
    check("root ::= .", &["a", "\n", "é", "😀", "\u{0}"], &["", "ab"]);
    assert!(!pda("root ::= .").matches(&[0xED, 0xA0, 0x80])); // a UTF-8-encoded surrogate
                                                              // `[^…]` of everything matches nothing; `[]` too.
    let g = parse(r"root ::= [^\x00-\U0010FFFF] | [] | ").unwrap();
    assert_eq!(g.rule(g.start()).expr, Expr::Empty);
}

#[test]
fn raw_byte_extension() {
    let p = pda("root ::= %xC3 %x80-BF | \"x\"");
    assert!(p.matches("é".as_bytes()));
    assert!(p.matches(b"x"));
    assert!(!p.matches(&[0xC3, 0x7F]));
    assert!(!p.matches(&[0xC3]));
}

#[test]
fn undefined_rule_is_named_with_position() {
    let e = err("root ::= item\n  \"x\" missing-rule\nitem ::= \"a\"\n");
    assert!(matches!(e.kind(), ErrorKind::UnknownRule(n) if n.contains("missing-rule")), "{e}");
    assert_eq!(e.rule(), "root");
    assert_eq!(e.position(), Some((2, 7)));
    assert!(e.to_string().contains("missing-rule"), "{e}");
}

#[test]
fn missing_root_is_an_error() {
    let e = err("start ::= \"a\"\n");
    assert!(matches!(e.kind(), ErrorKind::Syntax(m) if m.contains("root")), "{e}");
    let e = err("# nothing but a comment\n");
    assert!(e.to_string().contains("root"), "{e}");
}

#[test]
fn syntax_errors_have_line_and_column() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        ("root ::= \"abc", (1, 10), "never closed"),
        ("root ::= \"a\"\nx ::= [a-z", (2, 7), "never closed"),
        ("root ::= (\"a\" | \"b\"", (1, 10), "never closed"),
        ("root ::= \"a\" )", (1, 14), "unmatched"),
        ("root ::= \"a\"\n  foo bar", (2, 3), "unknown rule `foo`"),
        ("root ::= \"\\q\"", (1, 11), "unknown escape"),
        ("root ::= \"\\x4\"", (1, 11), "hex digits"),
        ("root ::= \"\\uD800\"", (1, 11), "surrogate"),
        ("root ::= \"\\U00110000\"", (1, 11), "surrogate or above"),
        ("root ::= * \"a\"", (1, 10), "must follow"),
        ("root ::= \"a\"{2", (1, 14), "expected `,` or `}`"),
        ("root ::= \"a\"{x}", (1, 14), "expected a number"),
        ("root ::= \"a\"{99999999999}", (1, 14), "too large"),
        ("root ::= \"a\"{3,2}", (1, 13), "range is empty"),
        ("root ::= [z-a]", (1, 11), "range is empty"),
        ("root ::= <[12]>", (1, 10), "token references"),
        ("root = \"a\"", (1, 6), "expected `::=`"),
        ("root ::= \"a\"\n\"b\" ::= \"c\"", (2, 5), "must follow a rule name"),
        ("root ::= \"a\"\nroot ::= \"b\"", (2, 1), "defined twice"),
        ("root ::= \"é€\" @", (1, 15), "unexpected `@`"),
        ("root ::= \"a\nb\"", (1, 12), "line break"),
        ("root ::= %xG0", (1, 10), "%xNN"),
        ("  ::= \"a\"", (1, 3), "expected a rule name"),
    ];
    for (text, pos, msg) in cases {
        let e = err(text);
        assert_eq!(e.position(), Some(*pos), "{text:?}: {e}");
        assert!(e.to_string().contains(msg), "{text:?}: `{e}` should mention `{msg}`");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(100_000), ")".repeat(100_000));
    let e = err(&deep);
    assert!(e.to_string().contains("nested deeper"), "{e}");
    let e = err(&format!("root ::= \"a\"{}", "?".repeat(100_000)));
    assert!(e.to_string().contains("repetition operators in a row"), "{e}");
    let ok = format!("root ::= {}\"a\"{}", "(".repeat(50), ")".repeat(50));
    check(&ok, &["a"], &["aa"]);
}

#[test]
fn left_recursion_is_rejected_by_the_automaton() {
    let g = parse("root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]+\n").unwrap();
    let e = Pda::build(&g, &Limits::default()).unwrap_err();
    assert!(matches!(e, automaton::Error::LeftRecursion(ref r) if r == "expr"), "{e}");
    // The right-recursive / repetition form is fine.
    check("root ::= num (\"+\" num)*\nnum ::= [0-9]+\n", &["1", "1+22+3"], &["1+", "+1"]);
}

#[test]
fn printing_round_trips_and_escapes() {
    let text =
        "root ::= (item (\",\" item)*)? \"\\n\"\nitem ::= \"\\\"\" [^\"\\\\\\x00-\\x1F]* \"\\\"\" | [0-9]{1,3} | .\n";
    let g = parse(text).unwrap();
    let printed = to_gbnf(&g);
    let g2 = parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(to_gbnf(&g2), printed);
    assert_eq!(g.to_string(), printed);
    assert!(printed.starts_with("root ::= "), "{printed}");
    assert!(printed.contains("[^\\x00-\\x1F\"\\\\]*"), "{printed}");
    assert!(printed.contains("[0-9]{1,3}"), "{printed}");
}

#[test]
fn printing_handles_any_names_bytes_and_start_rule() {
    let mut b = GrammarBuilder::new();
    let other_root = b.add("root", Expr::lit("r"));
    let weird = b.add("my rule/x", Expr::Bytes(vec![(b'a', b'c'), (0x7F, 0x90), (0xFF, 0xFF)]));
    let empty_name = b.add("", Expr::Literal(vec![b'q', 0xFF, b'"', 0xC3]));
    let start = b.add(
        "start",
        Expr::seq([
            Expr::Ref(other_root),
            Expr::Ref(weird),
            Expr::Ref(empty_name),
            Expr::star(Expr::Chars(vec![('-', '-'), ('^', '^')])),
        ]),
    );
    let g = b.build(start).unwrap();
    let printed = to_gbnf(&g);
    assert!(printed.starts_with("root ::= root-2 my-rule-x rule"), "{printed}");
    assert!(printed.contains("my-rule-x ::= [a-c\\x7F] | %x80-90 | %xFF\n"), "{printed}");
    assert!(printed.contains("rule ::= \"q\" %xFF \"\\\"\" %xC3\n"), "{printed}");
    let p1 = Pda::build(&g, &Limits::default()).unwrap();
    let p2 = pda(&printed);
    let samples: &[&[u8]] =
        &[b"r\xFFq\xFF\"\xC3", b"rbq\xFF\"\xC3", b"r\x85q\xFF\"\xC3-^-", b"ra", b"r\x91q\xFF\"\xC3", b"rbq\"\xC3"];
    for s in samples {
        assert_eq!(p1.matches(s), p2.matches(s), "{s:?}\n{printed}");
    }
    assert!(p2.matches(samples[0]) && p2.matches(samples[1]) && p2.matches(samples[2]));
}

#[test]
fn printing_deep_expressions_does_not_recurse() {
    let mut e = Expr::lit("a");
    for _ in 0..100_000 {
        e = Expr::Repeat { expr: Box::new(Expr::Seq(vec![e, Expr::lit("b")])), min: 0, max: Some(1) };
    }
    let mut b = GrammarBuilder::new();
    let root = b.add("root", e);
    let g = b.build(root).unwrap();
    let printed = to_gbnf(&g);
    assert!(printed.len() > 100_000);
    // Dropping a deeply nested Expr is recursive; leak it rather than overflow the stack in
    // the test harness (this test is about the printer only).
    std::mem::forget(g);
}

/// Round trip on random grammars: `parse(to_gbnf(g))` accepts exactly what `g` accepts, on
/// random byte strings and on strings generated from `g`.
mod round_trip {
    use super::*;
    use crate::grammar::{Grammar, RuleId};
    use proptest::prelude::*;

    /// Byte alphabet for literals and byte classes: class/string syntax characters, control
    /// bytes, and bytes that are not UTF-8 on their own.
    const BYTES: &[u8] = &[b'a', b'b', b'-', b'^', b']', b'[', b'"', b'\\', b'\n', 0x00, 0x7F, 0x80, 0xA9, 0xC3, 0xFF];
    /// Character alphabet for character classes.
    const CHARS: &[char] =
        &['a', 'b', '-', '^', ']', '\\', '"', '\t', 'é', '\u{80}', '\u{D7FF}', '\u{E000}', '\u{10FFFF}'];

    /// Sample pieces: every byte of the alphabet and the UTF-8 of every character.
    fn pieces() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = BYTES.iter().map(|&b| vec![b]).collect();
        v.extend(CHARS.iter().map(|c| c.to_string().into_bytes()));
        v
    }

    fn leaf() -> impl Strategy<Value = Expr> {
        let byte = prop::sample::select(BYTES);
        let ch = prop::sample::select(CHARS);
        prop_oneof![
            1 => Just(Expr::Empty),
            1 => Just(Expr::Nothing),
            4 => prop::collection::vec(byte.clone(), 0..4).prop_map(Expr::Literal),
            3 => prop::collection::vec((byte.clone(), byte).prop_map(|(a, b)| (a.min(b), a.max(b))), 0..3).prop_map(Expr::Bytes),
            3 => prop::collection::vec((ch.clone(), ch).prop_map(|(a, b)| (a.min(b), a.max(b))), 0..3).prop_map(Expr::Chars),
            3 => (0..3u32).prop_map(|i| Expr::Ref(RuleId(i))),
        ]
    }

    fn expr() -> impl Strategy<Value = Expr> {
        leaf().prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Expr::Seq),
                prop::collection::vec(inner.clone(), 0..4).prop_map(Expr::Alt),
                (inner, 0..9u32, prop::option::of(0..4u32)).prop_map(|(e, min, extra)| Expr::Repeat {
                    expr: Box::new(e),
                    min,
                    max: extra.map(|x| min + x),
                }),
            ]
        })
    }

    fn grammar() -> impl Strategy<Value = Grammar> {
        let names = prop::sample::select(vec!["root", "a b", "", "item", "root-2", "é/x", "x_1"]);
        (prop::collection::vec((names, expr()), 3), 0..3u32).prop_map(|(rules, start)| {
            let mut b = GrammarBuilder::new();
            let ids: Vec<RuleId> = rules
                .iter()
                .map(|(n, _)| {
                    let name = b.fresh_name(n);
                    b.declare(&name)
                })
                .collect();
            for (id, (_, e)) in ids.iter().zip(rules) {
                b.define(*id, e);
            }
            b.build(RuleId(start)).expect("valid by construction")
        })
    }

    /// A few strings of `pda`'s language (or prefixes of it) built from sample pieces.
    fn generated(pda: &Pda, seed: &[usize]) -> Vec<Vec<u8>> {
        let pieces = pieces();
        let mut out = Vec::new();
        let mut text = Vec::new();
        for &choice in seed {
            let live: Vec<&Vec<u8>> = pieces
                .iter()
                .filter(|p| {
                    let mut t = text.clone();
                    t.extend_from_slice(p);
                    pda.matches_prefix(&t)
                })
                .collect();
            if live.is_empty() {
                break;
            }
            text.extend_from_slice(live[choice % live.len()]);
            out.push(text.clone());
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        #[test]
        fn parsing_never_panics_and_parsed_grammars_print_back(
            body in r#"[a-c:=" \[\]^()|*+?{},0-2#\\xuU.%\n-]{0,40}"#,
            junk in any::<String>(),
        ) {
            for text in [format!("root ::= {body}"), body.clone(), junk.clone(), format!("root ::= \"{junk}\" [{junk}]")] {
                if let Ok(g) = parse(&text) {
                    let printed = to_gbnf(&g);
                    prop_assert!(parse(&printed).is_ok(), "{}\n{}", text, printed);
                }
            }
        }

        #[test]
        fn printed_grammar_accepts_the_same_strings(
            g in grammar(),
            random in prop::collection::vec(prop::collection::vec(0..28usize, 0..6), 24),
            seed in prop::collection::vec(0..1000usize, 12),
        ) {
            let text = to_gbnf(&g);
            let g2 = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            // Printing is stable once the text has been through the parser (which
            // simplifies, e.g. `"" ""` to `""`).
            let text2 = to_gbnf(&g2);
            let g3 = parse(&text2).map_err(|e| TestCaseError::fail(format!("{e}\n{text2}")))?;
            prop_assert_eq!(to_gbnf(&g3), text2);
            let limits = Limits::default();
            match (Pda::build(&g, &limits), Pda::build(&g2, &limits)) {
                (Ok(p1), Ok(p2)) => {
                    let pieces = pieces();
                    let mut samples: Vec<Vec<u8>> = random
                        .iter()
                        .map(|idx| idx.iter().flat_map(|&i| pieces[i % pieces.len()].clone()).collect())
                        .collect();
                    samples.extend(generated(&p1, &seed));
                    for s in &samples {
                        prop_assert_eq!(p1.matches(s), p2.matches(s), "{:?}\n{}", s, text);
                        prop_assert_eq!(p1.matches_prefix(s), p2.matches_prefix(s), "prefix {:?}\n{}", s, text);
                    }
                }
                (Err(e1), Err(e2)) => {
                    prop_assert_eq!(std::mem::discriminant(&e1), std::mem::discriminant(&e2), "{} / {}\n{}", e1, e2, text);
                }
                (r1, r2) => prop_assert!(false, "{:?} / {:?}\n{}", r1.err(), r2.err(), text),
            }
        }
    }
}

//! The translation of an ECMA-262 pattern into Rust `regex` syntax ([`to_rust`]), which the
//! core's [`crate::grammar::regex`] then compiles into a grammar expression.

use super::{DIGIT, SPACE, WORD};
use crate::grammar::regex::unsupported;
use crate::grammar::Error;

/// Rewrites an ECMA-262 pattern into `regex-syntax` (Rust `regex`) syntax that matches the
/// same strings: `\d`, `\w` and `\s` become ECMA-262's classes ([`DIGIT`], [`WORD`],
/// [`SPACE`]), `.` excludes line terminators, `[]` and `[^]` match nothing and any character,
/// a `{` that does not open a quantifier is a literal, escaped characters (`\uXXXX` with
/// surrogate pairs, `\u{…}`, `\xHH`, `\cX`, `\0`, `\n`, `\/`, …) are written as `\x{…}` so
/// nothing is read differently, and Unicode property escapes (`\p{L}`) are kept.
/// Look-arounds, back-references, word boundaries and octal escapes are
/// [`ErrorKind::UnsupportedRegex`](crate::grammar::ErrorKind::UnsupportedRegex) errors: no
/// `regex-syntax` pattern says them (look-arounds go to [`super::lookaround`] instead).
///
/// ```rust
/// use constrain::schema::ecma;
///
/// assert_eq!(ecma::to_rust(r"^\d{3}$")?, "^[0-9]{3}$");
/// assert!(ecma::to_rust(r"(a)\1").is_err());
/// # Ok::<(), constrain::grammar::Error>(())
/// ```
pub fn to_rust(pattern: &str) -> Result<String, Error> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut class_start = false; // just after `[` or `[^`
    let mut i = 0;
    let lit = |out: &mut String, c: char| out.push_str(&format!("\\x{{{:X}}}", c as u32));
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        let at_class_start = class_start;
        class_start = false;
        if c == '\\' {
            let Some(&e) = chars.get(i) else {
                return Err(unsupported(format!("pattern {pattern:?} ends with a lone backslash")));
            };
            i += 1;
            let class_esc = |out: &mut String, body: &str, negated: bool, in_class: bool| match (in_class, negated) {
                (true, false) => out.push_str(body),
                (_, true) => out.push_str(&format!("[^{body}]")),
                (false, false) => out.push_str(&format!("[{body}]")),
            };
            match e {
                'd' => class_esc(&mut out, DIGIT, false, in_class),
                'D' => class_esc(&mut out, DIGIT, true, in_class),
                'w' => class_esc(&mut out, WORD, false, in_class),
                'W' => class_esc(&mut out, WORD, true, in_class),
                's' => class_esc(&mut out, SPACE, false, in_class),
                'S' => class_esc(&mut out, SPACE, true, in_class),
                'b' if in_class => lit(&mut out, '\u{8}'),
                'b' | 'B' => {
                    return Err(unsupported(format!(
                        "pattern {pattern:?} uses a word boundary (\\{e}), which cannot be compiled exactly"
                    )))
                }
                '1'..='9' => {
                    return Err(unsupported(format!(
                        "pattern {pattern:?} uses a backreference (\\{e}), which is not regular"
                    )))
                }
                'k' if chars.get(i) == Some(&'<') => {
                    return Err(unsupported(format!("pattern {pattern:?} uses a named backreference")))
                }
                '0' => {
                    if chars.get(i).is_some_and(|d| d.is_ascii_digit()) {
                        return Err(unsupported(format!("pattern {pattern:?} uses an octal escape")));
                    }
                    lit(&mut out, '\0')
                }
                'n' => lit(&mut out, '\n'),
                'r' => lit(&mut out, '\r'),
                't' => lit(&mut out, '\t'),
                'f' => lit(&mut out, '\u{C}'),
                'v' => lit(&mut out, '\u{B}'),
                'c' => match chars.get(i) {
                    Some(&l) if l.is_ascii_alphabetic() => {
                        i += 1;
                        lit(&mut out, char::from((l as u8) % 32))
                    }
                    _ => lit(&mut out, 'c'),
                },
                'x' => {
                    let hex: String = chars.iter().skip(i).take(2).collect();
                    match u32::from_str_radix(&hex, 16) {
                        Ok(v) if hex.len() == 2 => {
                            i += 2;
                            lit(&mut out, char::from_u32(v).unwrap_or('x'))
                        }
                        _ => lit(&mut out, 'x'),
                    }
                }
                'u' => {
                    if chars.get(i) == Some(&'{') {
                        let close = chars[i..].iter().position(|&c| c == '}');
                        let value = close.and_then(|n| {
                            let hex: String = chars[i + 1..i + n].iter().collect();
                            u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32).map(|c| (c, n))
                        });
                        match value {
                            Some((ch, n)) => {
                                i += n + 1;
                                lit(&mut out, ch)
                            }
                            None => return Err(unsupported(format!("pattern {pattern:?} has a bad \\u{{…}} escape"))),
                        }
                    } else {
                        let hex4 = |at: usize| -> Option<u32> {
                            let s: String = chars.iter().skip(at).take(4).collect();
                            if s.len() == 4 {
                                u32::from_str_radix(&s, 16).ok()
                            } else {
                                None
                            }
                        };
                        match hex4(i) {
                            Some(hi @ 0xD800..=0xDBFF)
                                if chars.get(i + 4) == Some(&'\\') && chars.get(i + 5) == Some(&'u') =>
                            {
                                match hex4(i + 6) {
                                    Some(lo @ 0xDC00..=0xDFFF) => {
                                        let v = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                        i += 10;
                                        lit(&mut out, char::from_u32(v).unwrap_or('\u{FFFD}'))
                                    }
                                    _ => {
                                        return Err(unsupported(format!(
                                            "pattern {pattern:?} has a lone surrogate escape"
                                        )))
                                    }
                                }
                            }
                            Some(v) => match char::from_u32(v) {
                                Some(ch) => {
                                    i += 4;
                                    lit(&mut out, ch)
                                }
                                None => {
                                    return Err(unsupported(format!("pattern {pattern:?} has a lone surrogate escape")))
                                }
                            },
                            None => lit(&mut out, 'u'),
                        }
                    }
                }
                'p' | 'P' => {
                    // Unicode property escapes (`\p{L}`) mean the same in both dialects.
                    out.push('\\');
                    out.push(e);
                }
                other => lit(&mut out, other),
            }
            continue;
        }
        if in_class {
            match c {
                ']' => {
                    in_class = false;
                    out.push(']');
                }
                '[' | '&' | '~' => lit(&mut out, c),
                '^' if at_class_start => out.push('^'),
                '-' if at_class_start => lit(&mut out, '-'),
                '-' if chars.get(i) == Some(&']') => lit(&mut out, '-'),
                '-' if chars.get(i) == Some(&'-') => lit(&mut out, '-'),
                _ => out.push(c),
            }
            if c == '^' && at_class_start {
                class_start = true;
            }
            continue;
        }
        match c {
            '[' => {
                if chars.get(i) == Some(&']') {
                    // `[]` matches nothing.
                    i += 1;
                    out.push_str(r"[^\x{0}-\x{10FFFF}]");
                } else if chars.get(i) == Some(&'^') && chars.get(i + 1) == Some(&']') {
                    // `[^]` matches any character.
                    i += 2;
                    out.push_str("(?s:.)");
                } else {
                    in_class = true;
                    class_start = true;
                    out.push('[');
                }
            }
            '.' => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '(' => {
                if chars.get(i) == Some(&'?') {
                    let next: String = chars.iter().skip(i + 1).take(2).collect();
                    if next.starts_with('=') || next.starts_with('!') || next == "<=" || next == "<!" {
                        return Err(unsupported(format!(
                            "pattern {pattern:?} uses a lookaround assertion, which cannot be compiled exactly"
                        )));
                    }
                }
                out.push('(');
            }
            '{' => {
                // A quantifier only if it reads `{n}`, `{n,}` or `{n,m}`; otherwise a literal.
                let rest: String = chars[i..].iter().take_while(|&&c| c != '}').collect();
                let closes = chars.len() > i + rest.len();
                let is_quant = closes && {
                    let mut parts = rest.splitn(2, ',');
                    let a = parts.next().unwrap_or("");
                    let b = parts.next();
                    !a.is_empty()
                        && a.chars().all(|c| c.is_ascii_digit())
                        && b.is_none_or(|b| b.chars().all(|c| c.is_ascii_digit()))
                };
                if is_quant {
                    out.push('{');
                    out.push_str(&rest);
                    out.push('}');
                    i += rest.len() + 1;
                } else {
                    lit(&mut out, '{')
                }
            }
            '}' | ']' => lit(&mut out, c),
            ' ' | '#' => lit(&mut out, c),
            _ => out.push(c),
        }
    }
    if in_class {
        return Err(unsupported(format!("pattern {pattern:?} has an unclosed character class")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{is_match, regex, to_expr};
    use crate::automaton::Pda;
    use crate::grammar::regex::RegexOptions;
    use crate::grammar::{ErrorKind, GrammarBuilder};
    use crate::Limits;

    /// The automaton of an ECMA-262 pattern under JSON Schema's search semantics.
    fn pda(pattern: &str) -> Pda {
        let expr = to_expr(pattern, &RegexOptions::search()).unwrap();
        let mut b = GrammarBuilder::new();
        let root = b.add("root", expr);
        Pda::build(&b.build(root).unwrap(), &Limits::default()).unwrap()
    }

    #[test]
    fn ecma_classes_are_ascii() {
        let p = pda(r"^\d+\w$");
        assert!(p.matches(b"12_"));
        assert!(!p.matches("١٢a".as_bytes()));
        assert!(!p.matches("12é".as_bytes()));
        let p = pda(r"^.$");
        assert!(p.matches(b"x") && p.matches("é".as_bytes()));
        assert!(!p.matches(b"\n"));
        let p = pda(r"^[\d\-.]+$");
        assert!(p.matches(b"1-2.3"));
        assert!(!p.matches(b"a"));
    }

    #[test]
    fn ecma_literal_braces_and_escapes() {
        let p = pda(r"^\{x}\/\u0041$");
        assert!(p.matches(b"{x}/A"));
        let p = pda(r"^a{2}{$");
        assert!(p.matches(b"aa{"));
        assert!(!p.matches(b"a{"));
    }

    #[test]
    fn unsupported_features_are_errors() {
        for pat in [r"(?=a)b", r"(a)\1", r"\bword", "a(?<!b)c"] {
            let err = to_expr(pat, &RegexOptions::search()).unwrap_err();
            assert!(matches!(err.kind(), ErrorKind::UnsupportedRegex(_)), "{pat}: {err}");
        }
    }

    #[test]
    fn ecma_matching_is_a_search() {
        assert!(is_match("^x-", "x-foo").unwrap());
        assert!(!is_match("^x-", "ax-foo").unwrap());
        assert!(is_match(r"\d", "a1").unwrap());
    }

    /// The grammar and the compiled regex agree on ECMA-262 patterns whose unanchored edges
    /// the core trims (`\w` is ASCII here, unlike Rust's).
    #[test]
    fn grammar_and_matcher_agree() {
        for (pat, yes, no) in [
            (r"\w{1,16}", &["a", "--a--", "é_"][..], &["", "--", "é"][..]),
            (r"\w{3}", &["abc", "x-abcd", "ab-abc-", "é_1_"], &["", "ab", "ab-ab", "éé"]),
            (r"\d{3}$", &["123", "a1234", "12-345"], &["12", "123a", "1-23", "", "١٢٣"]),
            (r"^(\s|,)+$", &[" ", "\u{FEFF},"], &["", "\u{85}"]),
        ] {
            let p = pda(pat);
            let re = regex(pat).unwrap();
            for y in yes {
                assert!(p.matches(y.as_bytes()), "{pat} should match {y:?}");
                assert!(re.is_match(y), "{pat} vs {y:?}");
            }
            for n in no {
                assert!(!p.matches(n.as_bytes()), "{pat} should not match {n:?}");
                assert!(!re.is_match(n), "{pat} vs {n:?}");
            }
        }
    }

    #[test]
    fn errors_quote_the_pattern_as_written() {
        let err = to_expr(r"\d(", &RegexOptions::search()).unwrap_err();
        assert!(err.to_string().contains(r#""\\d(""#), "{err}");
    }
}

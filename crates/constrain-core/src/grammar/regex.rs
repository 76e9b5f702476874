//! Regular expressions → grammar expressions.
//!
//! Input: a pattern in Rust `regex` syntax or, with [`RegexOptions::ecma`], in the ECMA-262
//! dialect JSON Schema's `pattern` uses. Output: an [`Expr`] over Unicode characters (only
//! `Literal` with UTF-8 bytes, `Chars`, `Seq`, `Alt`, `Repeat`, `Empty`, `Nothing`), or a whole
//! [`Grammar`] from [`compile_anchored`] (the `--regex` flag).
//!
//! How: ECMA-isms are first rewritten into `regex-syntax` syntax (`\d` is `[0-9]`, `\w` is ASCII,
//! `.` excludes line terminators, a stray `{` is a literal, `\uXXXX` escapes), then
//! `regex-syntax` parses the pattern into its high-level IR (`Hir`), which is walked into an
//! [`Expr`]. Anchors are only understood at the edges of the pattern (or of its top-level
//! alternatives); with [`RegexOptions::unanchored`] a side without an anchor is padded with
//! "any characters", which is what the JSON Schema `pattern` keyword means; what a search
//! cannot tell apart at such a side is dropped first (`trim_edge`, `leftmost_run`), so
//! large counts there do not become run-time counters followed by many parse stacks. Lookaround,
//! backreferences and word boundaries cannot be expressed in a context-free grammar over the
//! exact language and are [`ErrorKind::UnsupportedRegex`] errors.
//!
//! Cost: linear in the size of the pattern's `Hir` (counted repeats stay counts).
//!
//! ## Example
//!
//! ```rust
//! use constrain::automaton::Pda;
//! use constrain::grammar::regex;
//! use constrain::Limits;
//!
//! let g = regex::compile_anchored(r"[0-9]{3}-[0-9]{4}").unwrap();
//! let pda = Pda::build(&g, &Limits::default()).unwrap();
//! assert!(pda.matches(b"555-0199"));
//! assert!(!pda.matches(b"555-01"));
//! ```

use super::{Error, ErrorKind, Expr, Grammar, GrammarBuilder};
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// How a pattern is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegexOptions {
    /// Search semantics: the pattern may match anywhere inside the string unless anchored
    /// with `^`/`$` (JSON Schema `pattern`). When false, the whole string must match.
    pub unanchored: bool,
    /// Read the pattern as ECMA-262 (JSON Schema) rather than Rust `regex` syntax.
    pub ecma: bool,
}

impl RegexOptions {
    /// The options for a JSON Schema `pattern` or `patternProperties` key: ECMA-262,
    /// unanchored.
    pub fn json_schema() -> Self {
        RegexOptions { unanchored: true, ecma: true }
    }
}

/// The rule name used in errors from this module.
const RULE: &str = "<regex>";

fn unsupported(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::UnsupportedRegex(msg.into()), RULE)
}

/// Every Unicode scalar value, as character ranges.
pub fn any_char() -> Expr {
    Expr::Chars(vec![('\0', '\u{D7FF}'), ('\u{E000}', '\u{10FFFF}')])
}

/// Converts `pattern` into an expression over characters (see the module docs).
pub fn to_expr(pattern: &str, opts: &RegexOptions) -> Result<Expr, Error> {
    let translated;
    let source = if opts.ecma {
        translated = ecma_to_rust(pattern)?;
        translated.as_str()
    } else {
        pattern
    };
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .parse(source)
        .map_err(|e| unsupported(format!("pattern {pattern:?} does not parse: {e}")))?;
    let mut alts = Vec::new();
    for (start, mut body, end) in anchored_parts(&hir, pattern)? {
        let mut parts = Vec::new();
        if opts.unanchored && !start {
            body = trim_edge(body, Edge::Start);
        }
        if opts.unanchored && !end {
            body = trim_edge(body, Edge::End);
        }
        if opts.unanchored && !start {
            if let Some(run) = leftmost_run(&body, end) {
                alts.push(run);
                continue;
            }
            parts.push(Expr::star(any_char()));
        }
        parts.push(body);
        if opts.unanchored && !end {
            parts.push(Expr::star(any_char()));
        }
        alts.push(Expr::seq(parts));
    }
    Ok(Expr::alt(alts))
}

/// A side of a pattern body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Edge {
    Start,
    End,
}

/// Drops what a search cannot tell apart at an unanchored `edge` of `body`: a string contains
/// a match of `A{m,n} R` exactly when it contains one of `A{m} R` (the last `m` copies of any
/// longer run are such a match), and likewise `R A{m,n}` and `R A{m}`. So a repetition at the
/// edge keeps only its minimum count; one with minimum 0 goes, and the next part is trimmed
/// in turn. This is exact, and it keeps counted loops such as `\w{1,255}` (searched for
/// anywhere in a key) from becoming run-time counters that every mask has to track.
fn trim_edge(body: Expr, edge: Edge) -> Expr {
    match body {
        Expr::Repeat { expr, min, .. } => match min {
            0 => Expr::Empty,
            1 => *expr,
            _ => Expr::Repeat { expr, min, max: Some(min) },
        },
        Expr::Seq(mut parts) => {
            // Trim the edge part; while it vanishes, trim the next one.
            let mut kept = Vec::with_capacity(parts.len());
            if edge == Edge::End {
                parts.reverse();
            }
            let mut trimming = true;
            for part in parts {
                if trimming {
                    let t = trim_edge(part, edge);
                    trimming = t == Expr::Empty;
                    kept.push(t);
                } else {
                    kept.push(part);
                }
            }
            if edge == Edge::End {
                kept.reverse();
            }
            Expr::seq(kept)
        }
        // A match starts (ends) with one of the branches: each branch's edge is the edge.
        Expr::Alt(branches) => Expr::alt(branches.into_iter().map(|b| trim_edge(b, edge))),
        other => other,
    }
}

/// The search for a run of `n` characters of one class `c` (what `\w{24}` or `[0-9a-f]{32}`
/// unanchored becomes after [`trim_edge`]), written so that one parse follows it: `.*c{n}.*`
/// lets every position start a count, so a counter that outgrows unrolling would run as up
/// to `n` parallel stacks, and every mask would pay for each. Splitting the string at the
/// first run long enough gives the same language with at most two stacks: runs shorter than
/// `n`, each ended by a non-member `d`, then the run: `(c{0,n-1} d)* c{n} .*`; when the end
/// is anchored (`\w{9}$`: the string ends with such a run), `(.* d)? c{n,}`. `None` for any
/// other body.
fn leftmost_run(body: &Expr, end_anchored: bool) -> Option<Expr> {
    use super::gbnf::charset;
    let Expr::Repeat { expr, min: n, max: Some(max) } = body else { return None };
    let Expr::Chars(c) = &**expr else { return None };
    if *n < 2 || max != n {
        return None;
    }
    let members = charset::normalize(c.iter().map(|&(a, b)| (a as u32, b as u32)).collect());
    let others = charset::complement(&members);
    let d = if others.is_empty() { Expr::Nothing } else { Expr::Chars(charset::to_chars(&others)) };
    let c = Expr::Chars(c.clone());
    Some(if end_anchored {
        Expr::seq([Expr::opt(Expr::seq([Expr::star(any_char()), d])), Expr::repeat(c, *n, None)])
    } else {
        let short_runs = Expr::star(Expr::seq([Expr::repeat(c.clone(), 0, Some(n - 1)), d]));
        Expr::seq([short_runs, body.clone(), Expr::star(any_char())])
    })
}

/// A grammar whose whole output must match `pattern` (Rust `regex` syntax), for `--regex`.
pub fn compile_anchored(pattern: &str) -> Result<Grammar, Error> {
    let expr = to_expr(pattern, &RegexOptions::default())?;
    let mut b = GrammarBuilder::new();
    let root = b.add("root", expr);
    b.build(root)
}

/// Whether an ECMA-262 `pattern` (search semantics, as in JSON Schema) matches `text`.
/// Used to decide which `patternProperties` a named property falls under.
pub fn ecma_is_match(pattern: &str, text: &str) -> Result<bool, Error> {
    Ok(ecma_regex(pattern)?.is_match(text))
}

/// An ECMA-262 `pattern` (search semantics) compiled for matching many texts: the run-time
/// checks (`crate::check`) use it to find the `patternProperties` a generated key falls under.
pub fn ecma_regex(pattern: &str) -> Result<regex_automata::meta::Regex, Error> {
    let translated = ecma_to_rust(pattern)?;
    // A full DFA is not worth building for a few matches; the lazy DFA/NFA engines suffice.
    regex_automata::meta::Regex::builder()
        .configure(regex_automata::meta::Regex::config().dfa(false).onepass(false).backtrack(false))
        .build(&translated)
        .map_err(|e| unsupported(format!("pattern {pattern:?} does not compile: {e}")))
}

/// Most branches a pattern's anchors may split it into.
///
/// A constant of the algorithm, not a user limit: it bounds the branches one pattern
/// splits into (an error past it); the grammar's size is bounded by
/// [`crate::Limits::max_grammar_size`], the user's limit.
const MAX_ANCHORED_BRANCHES: usize = 256;

/// Splits a pattern into branches `(anchored at start, body, anchored at end)`. Anchors may
/// sit inside groups and alternations (`^a$|^b$`, `^(?:a|b$)`) as long as nothing can be
/// matched before a `^` or after a `$`; branches where something would be are dropped, as
/// they can never match.
fn anchored_parts(hir: &Hir, pattern: &str) -> Result<Vec<(bool, Expr, bool)>, Error> {
    if !hir.properties().look_set().contains(Look::Start) && !hir.properties().look_set().contains(Look::End) {
        return Ok(vec![(false, hir_to_expr(hir, pattern)?, false)]);
    }
    Ok(match hir.kind() {
        HirKind::Look(Look::Start) => vec![(true, Expr::Empty, false)],
        HirKind::Look(Look::End) => vec![(false, Expr::Empty, true)],
        HirKind::Capture(c) => anchored_parts(&c.sub, pattern)?,
        HirKind::Alternation(alts) => {
            let mut out = Vec::new();
            for a in alts {
                out.extend(anchored_parts(a, pattern)?);
            }
            out
        }
        HirKind::Concat(items) => {
            let mut acc = vec![(false, Expr::Empty, false)];
            for item in items {
                let parts = anchored_parts(item, pattern)?;
                let mut next = Vec::new();
                for (s1, b1, e1) in &acc {
                    for (s2, b2, e2) in &parts {
                        if *e1 && *b2 != Expr::Empty {
                            continue;
                        }
                        if *s2 && *b1 != Expr::Empty {
                            continue;
                        }
                        next.push((*s1 || *s2, Expr::seq([b1.clone(), b2.clone()]), *e1 || *e2));
                    }
                }
                if next.len() > MAX_ANCHORED_BRANCHES {
                    return Err(unsupported(format!("pattern {pattern:?} has too many anchored alternatives")));
                }
                acc = next;
            }
            acc
        }
        HirKind::Repetition(rep) => {
            // `(x|y$){m,M}`: iterations before the first that passes a `$` are free, and
            // those after it must match the empty string. So the end-anchored branch is
            // `free{m-1,M-1}` then an end-anchored iteration, or `free{0,M-1}` when an
            // iteration can be empty. A `^` inside a repetition is not compiled.
            let parts = anchored_parts(&rep.sub, pattern)?;
            if parts.iter().any(|&(start, _, _)| start) {
                return Err(unsupported(format!("pattern {pattern:?} repeats a `^` anchor")));
            }
            let free = Expr::alt(parts.iter().filter(|p| !p.2).map(|p| p.1.clone()));
            let ends = Expr::alt(parts.iter().filter(|p| p.2).map(|p| p.1.clone()));
            let empty = parts.iter().any(|p| p.1 == Expr::Empty);
            let mut out = vec![(false, Expr::repeat(free.clone(), rep.min, rep.max), false)];
            if rep.max != Some(0) && parts.iter().any(|p| p.2) {
                let before_min = if empty { 0 } else { rep.min.saturating_sub(1) };
                let before_max = rep.max.map(|m| m - 1);
                out.push((false, Expr::seq([Expr::repeat(free, before_min, before_max), ends]), true));
            }
            out
        }
        _ => vec![(false, hir_to_expr(hir, pattern)?, false)],
    })
}

/// Walks a `Hir` into an [`Expr`]. Recursion depth is bounded by regex-syntax's nesting
/// limit (250 by default).
fn hir_to_expr(hir: &Hir, pattern: &str) -> Result<Expr, Error> {
    Ok(match hir.kind() {
        HirKind::Empty => Expr::Empty,
        HirKind::Literal(lit) => Expr::Literal(lit.0.to_vec()),
        HirKind::Class(Class::Unicode(cls)) => {
            let ranges: Vec<(char, char)> = cls.ranges().iter().map(|r| (r.start(), r.end())).collect();
            if ranges.is_empty() {
                Expr::Nothing
            } else {
                Expr::Chars(ranges)
            }
        }
        HirKind::Class(Class::Bytes(cls)) => {
            let mut ranges = Vec::new();
            for r in cls.ranges() {
                if r.end() > 0x7f {
                    return Err(unsupported(format!("pattern {pattern:?} matches non-UTF-8 bytes")));
                }
                ranges.push((r.start() as char, r.end() as char));
            }
            if ranges.is_empty() {
                Expr::Nothing
            } else {
                Expr::Chars(ranges)
            }
        }
        HirKind::Look(look @ (Look::StartLF | Look::EndLF | Look::StartCRLF | Look::EndCRLF)) => {
            return Err(unsupported(format!(
                "pattern {pattern:?} uses the multi-line anchor {look:?} ((?m) ^ or $, which match at \
                 line breaks); only whole-input anchors can be compiled"
            )))
        }
        HirKind::Look(
            look @ (Look::WordAscii
            | Look::WordAsciiNegate
            | Look::WordUnicode
            | Look::WordUnicodeNegate
            | Look::WordStartAscii
            | Look::WordEndAscii
            | Look::WordStartUnicode
            | Look::WordEndUnicode
            | Look::WordStartHalfAscii
            | Look::WordEndHalfAscii
            | Look::WordStartHalfUnicode
            | Look::WordEndHalfUnicode),
        ) => {
            return Err(unsupported(format!(
                "pattern {pattern:?} uses the word-boundary assertion {look:?}, which cannot be compiled"
            )))
        }
        HirKind::Look(look) => {
            return Err(unsupported(format!(
                "pattern {pattern:?} uses the assertion {look:?} away from the start or end of the pattern; \
                 only a leading ^ and a trailing $ can be compiled"
            )))
        }
        HirKind::Repetition(rep) => Expr::repeat(hir_to_expr(&rep.sub, pattern)?, rep.min, rep.max),
        HirKind::Capture(c) => hir_to_expr(&c.sub, pattern)?,
        HirKind::Concat(items) => {
            let mut parts = Vec::with_capacity(items.len());
            for h in items {
                parts.push(hir_to_expr(h, pattern)?);
            }
            Expr::seq(parts)
        }
        HirKind::Alternation(items) => {
            let mut parts = Vec::with_capacity(items.len());
            for h in items {
                parts.push(hir_to_expr(h, pattern)?);
            }
            Expr::alt(parts)
        }
    })
}

/// ECMA-262 whitespace (`\s`), as the inside of a character class, in the `\uXXXX` escapes
/// that both `regex-syntax` and ECMA-262 read (so the JSON Schema front end can hand it to the
/// `jsonschema` crate, which refuses `\x{…}` as not ECMA-262).
pub const ECMA_SPACE: &str = r"\t\n\x0B\x0C\r \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF";
/// ECMA-262's `\d`, as the inside of a character class.
pub const ECMA_DIGIT: &str = "0-9";
/// ECMA-262's `\w` (ASCII only), as the inside of a character class.
pub const ECMA_WORD: &str = "0-9A-Za-z_";

/// Rewrites an ECMA-262 pattern into equivalent `regex-syntax` syntax.
fn ecma_to_rust(pattern: &str) -> Result<String, Error> {
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
                'd' => class_esc(&mut out, ECMA_DIGIT, false, in_class),
                'D' => class_esc(&mut out, ECMA_DIGIT, true, in_class),
                'w' => class_esc(&mut out, ECMA_WORD, false, in_class),
                'W' => class_esc(&mut out, ECMA_WORD, true, in_class),
                's' => class_esc(&mut out, ECMA_SPACE, false, in_class),
                'S' => class_esc(&mut out, ECMA_SPACE, true, in_class),
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
    use super::*;
    use crate::automaton::Pda;
    use crate::Limits;

    fn pda(pattern: &str, opts: RegexOptions) -> Pda {
        let expr = to_expr(pattern, &opts).unwrap();
        let mut b = GrammarBuilder::new();
        let root = b.add("root", expr);
        Pda::build(&b.build(root).unwrap(), &Limits::default()).unwrap()
    }

    #[test]
    fn anchored_rust_syntax() {
        let p = pda(r"[a-c]+\d{2}", RegexOptions::default());
        assert!(p.matches(b"ab12"));
        assert!(!p.matches(b"ab1"));
        assert!(!p.matches(b"xab12"));
        // Rust's \d is Unicode: Arabic-Indic digits are digits.
        assert!(p.matches("a١٢".as_bytes()));
    }

    #[test]
    fn ecma_unanchored_search() {
        let p = pda("ab+", RegexOptions::json_schema());
        assert!(p.matches(b"ab"));
        assert!(p.matches(b"xxabbby"));
        assert!(!p.matches(b"axb"));
        let p = pda("^ab+$", RegexOptions::json_schema());
        assert!(p.matches(b"abb"));
        assert!(!p.matches(b"xabb"));
        assert!(!p.matches(b"abbx"));
        let p = pda("^a|b$", RegexOptions::json_schema());
        assert!(p.matches(b"axx") && p.matches(b"xxb"));
        assert!(!p.matches(b"xax"));
        let p = pda("^$|^x+$", RegexOptions::json_schema());
        assert!(p.matches(b"") && p.matches(b"xx"));
        assert!(!p.matches(b"xa"));
        let p = pda("^(a$|b)", RegexOptions::json_schema());
        assert!(p.matches(b"a") && p.matches(b"bzz"));
        assert!(!p.matches(b"az"));
    }

    /// A `$` inside a repetition (a JSONSchemaStore pattern: at least 3 comma-separated
    /// items), checked against the ECMA regex on every string over a small alphabet.
    #[test]
    fn end_anchor_inside_a_repetition() {
        for pattern in [r"^([^,]+(,|$)){3,}$", r"(a(,|$)){2}", r"^(a|b$){0,2}", r"^(x?(;|$)){1,3}"] {
            let p = pda(pattern, RegexOptions::json_schema());
            let re = ecma_regex(pattern).unwrap();
            let alphabet = [b'a', b'b', b',', b'x', b';'];
            let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
            for len in 1..=6 {
                let shorter: Vec<Vec<u8>> = strings.iter().filter(|s| s.len() == len - 1).cloned().collect();
                for s in shorter {
                    for &c in &alphabet {
                        strings.push([s.as_slice(), &[c]].concat());
                    }
                }
            }
            for s in &strings {
                let text = std::str::from_utf8(s).unwrap();
                assert_eq!(p.matches(s), re.is_match(text), "{pattern} on {text:?}");
            }
        }
        assert!(to_expr(r"(^a)+", &RegexOptions::json_schema()).is_err());
    }

    #[test]
    fn unanchored_edges_drop_counts_a_search_cannot_see() {
        let opts = RegexOptions::json_schema();
        let expr = |p: &str| format!("{:?}", to_expr(p, &opts).unwrap());
        let bounds = |min: u32, max: u32| format!("min: {min}, max: Some({max})");
        // `\w{1,255}` anywhere is one word character anywhere: no counter left.
        assert!(!expr(r"\w{1,255}").contains("255"));
        // Only an unanchored side is trimmed; an anchored one keeps its bounds.
        assert!(expr(r"^a{2,5}$").contains(&bounds(2, 5)));
        assert!(expr(r"^a{2,5}b").contains(&bounds(2, 5)));
        assert!(expr(r"^a{2,5}").contains(&bounds(2, 2)));
        assert!(expr(r"a{2,5}$").contains(&bounds(2, 2)));
        // A vanishing edge part trims the next one; inner counts stay.
        assert!(!expr(r"x*y{3,9}z").contains(&bounds(3, 9)));
        assert!(expr(r"x*y{3,9}z").contains(&bounds(3, 3)));
        assert!(expr(r"^q[0-9]{2,4}-[a-z]{1,8}").contains(&bounds(2, 4)));
        // The language is unchanged (a search either way).
        for (pat, yes, no) in [
            (r"\w{1,16}", &["a", "--a--", "é_"][..], &["", "--", "é"][..]),
            (r"a{2,5}$", &["aa", "xaaaaaaa"], &["a", "aab"]),
            (r"^ab{2,3}", &["abb", "abbbbx"], &["ab", "xabb"]),
            (r"(x{2,}|y+)z?", &["xx", "ay", "yz"], &["x", "zx"]),
            (r"c{3,4}d{0,2}", &["ccc", "accccdx"], &["cc", "cdcd"]),
            // Runs of one class, searched for anywhere or at the end (see `leftmost_run`).
            (r"\w{3}", &["abc", "x-abcd", "ab-abc-", "é_1_"], &["", "ab", "ab-ab", "éé"]),
            (r"[0-9]{3}$", &["123", "a1234", "12-345"], &["12", "123a", "1-23", ""]),
            (r"[^a]{2}", &["bb", "abba", "éé"], &["", "a", "abab"]),
        ] {
            let p = pda(pat, opts);
            for y in yes {
                assert!(p.matches(y.as_bytes()), "{pat} should match {y:?}");
                assert!(ecma_is_match(pat, y).unwrap(), "{pat} vs {y:?}");
            }
            for n in no {
                assert!(!p.matches(n.as_bytes()), "{pat} should not match {n:?}");
                assert!(!ecma_is_match(pat, n).unwrap(), "{pat} vs {n:?}");
            }
        }
    }

    #[test]
    fn ecma_classes_are_ascii() {
        let p = pda(r"^\d+\w$", RegexOptions::json_schema());
        assert!(p.matches(b"12_"));
        assert!(!p.matches("١٢a".as_bytes()));
        assert!(!p.matches("12é".as_bytes()));
        let p = pda(r"^.$", RegexOptions::json_schema());
        assert!(p.matches(b"x") && p.matches("é".as_bytes()));
        assert!(!p.matches(b"\n"));
        let p = pda(r"^[\d\-.]+$", RegexOptions::json_schema());
        assert!(p.matches(b"1-2.3"));
        assert!(!p.matches(b"a"));
    }

    #[test]
    fn ecma_literal_braces_and_escapes() {
        let p = pda(r"^\{x}\/\u0041$", RegexOptions::json_schema());
        assert!(p.matches(b"{x}/A"));
        let p = pda(r"^a{2}{$", RegexOptions::json_schema());
        assert!(p.matches(b"aa{"));
        assert!(!p.matches(b"a{"));
    }

    #[test]
    fn unsupported_features_are_errors() {
        for pat in [r"(?=a)b", r"(a)\1", r"\bword", "a(?<!b)c"] {
            let err = to_expr(pat, &RegexOptions::json_schema()).unwrap_err();
            assert!(matches!(err.kind(), ErrorKind::UnsupportedRegex(_)), "{pat}: {err}");
        }
    }

    #[test]
    fn ecma_matching_is_a_search() {
        assert!(ecma_is_match("^x-", "x-foo").unwrap());
        assert!(!ecma_is_match("^x-", "ax-foo").unwrap());
        assert!(ecma_is_match(r"\d", "a1").unwrap());
    }

    #[test]
    fn compile_anchored_whole_match() {
        let g = compile_anchored("(yes|no)!").unwrap();
        let p = Pda::build(&g, &Limits::default()).unwrap();
        assert!(p.matches(b"yes!") && p.matches(b"no!"));
        assert!(!p.matches(b"yes") && !p.matches(b"maybe!"));
    }
}

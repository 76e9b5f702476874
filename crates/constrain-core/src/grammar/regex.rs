//! Regular expressions → grammar expressions.
//!
//! Input: a pattern in Rust `regex` syntax. Output: an [`Expr`] over Unicode characters (only
//! `Literal` with UTF-8 bytes, `Chars`, `Seq`, `Alt`, `Repeat`, `Empty`, `Nothing`), or a whole
//! [`Grammar`] from [`compile_anchored`] (the `--regex` flag). A front end whose patterns are
//! in another dialect translates them into this syntax first and calls
//! [`translated_to_expr`] (JSON Schema's ECMA-262 patterns: `constrain::schema::ecma`).
//!
//! How: `regex-syntax` parses the pattern into its high-level IR (`Hir`), which is walked into
//! an [`Expr`]. Anchors are only understood at the edges of the pattern (or of its top-level
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
}

impl RegexOptions {
    /// Search semantics ([`RegexOptions::unanchored`]), what a JSON Schema `pattern` or
    /// `patternProperties` key means.
    pub fn search() -> Self {
        RegexOptions { unanchored: true }
    }
}

/// The rule name used in errors from this module.
const RULE: &str = "<regex>";

/// An [`ErrorKind::UnsupportedRegex`] error as this module reports it: also for a front end
/// that refuses a feature of its own dialect while translating a pattern into Rust syntax.
pub fn unsupported(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::UnsupportedRegex(msg.into()), RULE)
}

/// Every Unicode scalar value, as character ranges.
pub fn any_char() -> Expr {
    Expr::Chars(vec![('\0', '\u{D7FF}'), ('\u{E000}', '\u{10FFFF}')])
}

/// Converts `pattern` (Rust `regex` syntax) into an expression over characters (see the
/// module docs).
pub fn to_expr(pattern: &str, opts: &RegexOptions) -> Result<Expr, Error> {
    translated_to_expr(pattern, pattern, opts)
}

/// [`to_expr`] for a pattern a front end has translated from its own dialect: `source` (Rust
/// `regex` syntax) is compiled, and errors quote `written`, the pattern as its author wrote
/// it, so that they name what the author can find.
pub fn translated_to_expr(source: &str, written: &str, opts: &RegexOptions) -> Result<Expr, Error> {
    let pattern = written;
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

    /// The reference for search semantics: regex-automata's matcher (a search by default).
    fn search(pattern: &str) -> regex_automata::meta::Regex {
        regex_automata::meta::Regex::new(pattern).unwrap()
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
    fn unanchored_search() {
        let p = pda("ab+", RegexOptions::search());
        assert!(p.matches(b"ab"));
        assert!(p.matches(b"xxabbby"));
        assert!(!p.matches(b"axb"));
        let p = pda("^ab+$", RegexOptions::search());
        assert!(p.matches(b"abb"));
        assert!(!p.matches(b"xabb"));
        assert!(!p.matches(b"abbx"));
        let p = pda("^a|b$", RegexOptions::search());
        assert!(p.matches(b"axx") && p.matches(b"xxb"));
        assert!(!p.matches(b"xax"));
        let p = pda("^$|^x+$", RegexOptions::search());
        assert!(p.matches(b"") && p.matches(b"xx"));
        assert!(!p.matches(b"xa"));
        let p = pda("^(a$|b)", RegexOptions::search());
        assert!(p.matches(b"a") && p.matches(b"bzz"));
        assert!(!p.matches(b"az"));
    }

    /// A `$` inside a repetition (a JSONSchemaStore pattern: at least 3 comma-separated
    /// items), checked against regex-automata on every string over a small alphabet.
    #[test]
    fn end_anchor_inside_a_repetition() {
        for pattern in [r"^([^,]+(,|$)){3,}$", r"(a(,|$)){2}", r"^(a|b$){0,2}", r"^(x?(;|$)){1,3}"] {
            let p = pda(pattern, RegexOptions::search());
            let re = search(pattern);
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
        assert!(to_expr(r"(^a)+", &RegexOptions::search()).is_err());
    }

    #[test]
    fn unanchored_edges_drop_counts_a_search_cannot_see() {
        let opts = RegexOptions::search();
        let expr = |p: &str| format!("{:?}", to_expr(p, &opts).unwrap());
        let bounds = |min: u32, max: u32| format!("min: {min}, max: Some({max})");
        // `[0-9A-Za-z_]{1,255}` anywhere is one word character anywhere: no counter left.
        assert!(!expr(r"[0-9A-Za-z_]{1,255}").contains("255"));
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
            (r"[0-9A-Za-z_]{1,16}", &["a", "--a--", "é_"][..], &["", "--", "é"][..]),
            (r"a{2,5}$", &["aa", "xaaaaaaa"], &["a", "aab"]),
            (r"^ab{2,3}", &["abb", "abbbbx"], &["ab", "xabb"]),
            (r"(x{2,}|y+)z?", &["xx", "ay", "yz"], &["x", "zx"]),
            (r"c{3,4}d{0,2}", &["ccc", "accccdx"], &["cc", "cdcd"]),
            // Runs of one class, searched for anywhere or at the end (see `leftmost_run`).
            (r"[0-9A-Za-z_]{3}", &["abc", "x-abcd", "ab-abc-", "é_1_"], &["", "ab", "ab-ab", "éé"]),
            (r"[0-9]{3}$", &["123", "a1234", "12-345"], &["12", "123a", "1-23", ""]),
            (r"[^a]{2}", &["bb", "abba", "éé"], &["", "a", "abab"]),
        ] {
            let p = pda(pat, opts);
            let re = search(pat);
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
    fn unsupported_features_are_errors() {
        for pat in [r"(?=a)b", r"(a)\1", r"\bword", r"a\Bc", "(?m)^a", "a(?<!b)c"] {
            let err = to_expr(pat, &RegexOptions::search()).unwrap_err();
            assert!(matches!(err.kind(), ErrorKind::UnsupportedRegex(_)), "{pat}: {err}");
        }
    }

    #[test]
    fn errors_quote_the_pattern_as_written() {
        let err = translated_to_expr("[0-9](", r"\d(", &RegexOptions::search()).unwrap_err();
        assert!(err.to_string().contains(r#""\\d(""#), "{err}");
    }

    #[test]
    fn compile_anchored_whole_match() {
        let g = compile_anchored("(yes|no)!").unwrap();
        let p = Pda::build(&g, &Limits::default()).unwrap();
        assert!(p.matches(b"yes!") && p.matches(b"no!"));
        assert!(!p.matches(b"yes") && !p.matches(b"maybe!"));
    }
}

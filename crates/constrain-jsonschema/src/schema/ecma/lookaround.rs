//! Patterns with look-around assertions, compiled exactly where they are still regular.
//!
//! Input: an ECMA-262 `pattern` (JSON Schema search semantics) that [`super::to_expr`]
//! refuses because it holds `(?=…)`, `(?!…)`, `(?<=…)` or `(?<!…)`. Output: an [`Expr`] over
//! characters matching exactly the strings the pattern matches, or `None` (the caller then
//! keeps its run-time check).
//!
//! Why: a look-around without back-references asserts a regular language at a position, so
//! the pattern's language is regular too; loosening it to a run-time check lets a model write
//! a string that no ending can make pass (a dead end, issue 37).
//!
//! How: each top-level alternative is cut at its look-arounds, which must sit at the top
//! level of the alternative and all look the same way. For look-aheads `P0 (?=B1) P1 … Pn`,
//! from the right: `R = Pn·Σ*`, then `R = P(i-1)·(Bi·Σ* ∩ R)` (`¬(Bi·Σ*)` for a negative
//! one), and last `Σ*·R` (no `Σ*` at an anchored edge, none after a body ending in `$`).
//! Look-behinds mirror that from the left. Every step is an operation on the core's automata
//! ([`crate::grammar::dfa`]), whose budgets bound the work; past them the answer is `None`,
//! never an approximation. Anything else (a nested or quantified look-around, mixed
//! directions, an anchor inside, inline flags, back-references) is `None` as well.
//!
//! Why here, not in the core: the cutting reads ECMA-262 syntax (Rust `regex` syntax has no
//! look-around to cut), and each piece is translated by [`super::to_expr`]; only the automata
//! are the core's.
//!
//! ```rust
//! use constrain::schema::ecma::lookaround::to_expr;
//!
//! // "contains a digit and an upper-case letter, 4 or more characters"
//! let e = to_expr(r"^(?=.*\d)(?=.*[A-Z]).{4,}$").expect("regular");
//! let mut b = constrain::grammar::GrammarBuilder::new();
//! let root = b.add("root", e);
//! let pda = constrain::automaton::Pda::build(&b.build(root)?, &constrain::Limits::default())?;
//! assert!(pda.matches(b"ab1Z") && !pda.matches(b"ab12") && !pda.matches(b"a1Z"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::grammar::dfa::{CharDfa, Part};
use crate::grammar::regex::{any_char, RegexOptions};
use crate::grammar::Expr;

/// One top-level part of an alternative.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    /// Pattern text without look-arounds.
    Plain(String),
    /// A look-around assertion and its body.
    Look { ahead: bool, negative: bool, body: String },
}

/// The exact language of `pattern` (see the module doc) as an automaton, or `None`.
pub fn to_dfa(pattern: &str) -> Option<CharDfa> {
    let mut out: Option<CharDfa> = None;
    for pieces in split(pattern)? {
        let d = branch(pieces)?;
        out = Some(match out {
            None => d,
            Some(o) => o.union(&d)?,
        });
    }
    out
}

/// The exact language of `pattern` as one expression, or `None` (also when the automaton is
/// too big to write as one: [`to_dfa`] and [`CharDfa::to_rules`] may then still work).
pub fn to_expr(pattern: &str) -> Option<Expr> {
    to_dfa(pattern)?.to_expr()
}

/// `Σ*`.
fn anything() -> Expr {
    Expr::star(any_char())
}

/// An anchor-free piece of pattern, matched whole.
fn plain(text: &str) -> Option<Expr> {
    if has_anchor(text) {
        return None;
    }
    super::to_expr(text, &RegexOptions::default()).ok()
}

/// One alternative's pieces as an automaton.
fn branch(mut pieces: Vec<Piece>) -> Option<CharDfa> {
    // An alternative without look-around: the ordinary way.
    match &pieces[..] {
        [] => return CharDfa::of(&super::to_expr("", &RegexOptions::search()).ok()?),
        [Piece::Plain(text)] => return CharDfa::of(&super::to_expr(text, &RegexOptions::search()).ok()?),
        _ => {}
    }
    // Edge anchors belong to the first and last plain pieces.
    let mut start_anchored = false;
    let mut end_anchored = false;
    if let Some(Piece::Plain(first)) = pieces.first_mut() {
        if let Some(rest) = first.strip_prefix('^') {
            *first = rest.to_string();
            start_anchored = true;
        }
    }
    if let Some(Piece::Plain(last)) = pieces.last_mut() {
        if last.ends_with('$') && !ends_escaped(last) {
            last.pop();
            end_anchored = true;
        }
    }
    let ahead = pieces.iter().find_map(|p| match p {
        Piece::Look { ahead, .. } => Some(*ahead),
        Piece::Plain(_) => None,
    })?;
    if pieces.iter().any(|p| matches!(p, Piece::Look { ahead: a, .. } if *a != ahead)) {
        return None;
    }
    // Plain pieces between the look-arounds (empty ones where two meet), one more than those.
    let mut plains: Vec<Expr> = vec![Expr::Empty];
    let mut looks: Vec<CharDfa> = Vec::new();
    for p in pieces {
        match p {
            Piece::Plain(text) => {
                let e = plain(&text)?;
                let last = plains.pop().unwrap_or(Expr::Empty);
                plains.push(Expr::seq([last, e]));
            }
            Piece::Look { ahead, negative, body } => {
                looks.push(assertion(ahead, negative, &body)?);
                plains.push(Expr::Empty);
            }
        }
    }
    let pad = |anchored: bool| if anchored { Expr::Empty } else { anything() };
    if ahead {
        let mut rest = CharDfa::of(&Expr::seq([plains.pop()?, pad(end_anchored)]))?;
        while let (Some(look), Some(before)) = (looks.pop(), plains.pop()) {
            rest = CharDfa::seq(&[Part::Expr(&before), Part::Dfa(&look.intersect(&rest)?)])?;
        }
        CharDfa::seq(&[Part::Expr(&pad(start_anchored)), Part::Dfa(&rest)])
    } else {
        plains.reverse();
        looks.reverse();
        let mut done = CharDfa::of(&Expr::seq([pad(start_anchored), plains.pop()?]))?;
        while let (Some(look), Some(after)) = (looks.pop(), plains.pop()) {
            done = CharDfa::seq(&[Part::Dfa(&done.intersect(&look)?), Part::Expr(&after)])?;
        }
        CharDfa::seq(&[Part::Dfa(&done), Part::Expr(&pad(end_anchored))])
    }
}

/// The strings a look-around's body asserts of the text after (or before) its position.
fn assertion(ahead: bool, negative: bool, body: &str) -> Option<CharDfa> {
    let mut body = body.to_string();
    let mut anchored = false;
    if ahead && body.ends_with('$') && !ends_escaped(&body) {
        body.pop();
        anchored = true;
    }
    if !ahead {
        if let Some(rest) = body.strip_prefix('^') {
            body = rest.to_string();
            anchored = true;
        }
    }
    let e = plain(&body)?;
    let pad = if anchored { Expr::Empty } else { anything() };
    let e = if ahead { Expr::seq([e, pad]) } else { Expr::seq([pad, e]) };
    let d = CharDfa::of(&e)?;
    Some(if negative { d.complement() } else { d })
}

/// Whether `text` ends with an escaped character (`\$`).
fn ends_escaped(text: &str) -> bool {
    let slashes = text.bytes().rev().skip(1).take_while(|&b| b == b'\\').count();
    slashes % 2 == 1
}

/// Whether `text` holds `^` or `$` as an assertion (outside classes, unescaped).
fn has_anchor(text: &str) -> bool {
    let mut chars = text.chars();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '^' | '$' if !in_class => return true,
            _ => {}
        }
    }
    false
}

/// Cuts `pattern` into top-level alternatives, each into plain text and look-arounds. `None`
/// when a look-around is nested or quantified, or the pattern sets flags inline.
fn split(pattern: &str) -> Option<Vec<Vec<Piece>>> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut branches = Vec::new();
    let mut pieces: Vec<Piece> = Vec::new();
    let mut text = String::new();
    let mut depth = 0usize;
    let mut in_class = false;
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        i += 1;
        match c {
            '\\' => {
                text.push(c);
                text.push(*chars.get(i)?);
                i += 1;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            _ if in_class => {}
            '(' if chars.get(i) == Some(&'?') => {
                let kind: String = chars.iter().skip(i + 1).take(2).collect();
                let look = if kind.starts_with('=') || kind.starts_with('!') {
                    Some((true, kind.starts_with('!'), 2))
                } else if kind == "<=" || kind == "<!" {
                    Some((false, kind == "<!", 3))
                } else {
                    None
                };
                match look {
                    Some(_) if depth > 0 => return None,
                    Some((ahead, negative, skip)) => {
                        let (body, end) = group_body(&chars, i + skip)?;
                        if matches!(chars.get(end), Some('*' | '+' | '?' | '{')) {
                            return None;
                        }
                        if !text.is_empty() {
                            pieces.push(Piece::Plain(std::mem::take(&mut text)));
                        }
                        pieces.push(Piece::Look { ahead, negative, body });
                        i = end;
                        continue;
                    }
                    // Inline flags would reach past the cut.
                    None if chars.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == '-') => return None,
                    None => depth += 1,
                }
            }
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            '|' if depth == 0 => {
                if !text.is_empty() {
                    pieces.push(Piece::Plain(std::mem::take(&mut text)));
                }
                branches.push(std::mem::take(&mut pieces));
                continue;
            }
            _ => {}
        }
        text.push(c);
    }
    if !text.is_empty() {
        pieces.push(Piece::Plain(text));
    }
    branches.push(pieces);
    Some(branches)
}

/// The body of the group whose text starts at `from` (just after `(?=` and the like), and
/// the index after its closing parenthesis. `None` when the body itself holds a look-around
/// (nested assertions are not handled) or the group does not close.
fn group_body(chars: &[char], from: usize) -> Option<(String, usize)> {
    let mut depth = 0usize;
    let mut in_class = false;
    let mut i = from;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => i += 1,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            _ if in_class => {}
            '(' => {
                // `(?=`, `(?!`, `(?<=`, `(?<!` (not a named group `(?<name>`).
                let look = matches!(
                    (chars.get(i + 1), chars.get(i + 2), chars.get(i + 3)),
                    (Some('?'), Some('=' | '!'), _) | (Some('?'), Some('<'), Some('=' | '!'))
                );
                if look {
                    return None;
                }
                depth += 1;
            }
            ')' if depth == 0 => return Some((chars.get(from..i)?.iter().collect(), i + 1)),
            ')' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::Pda;
    use crate::grammar::GrammarBuilder;
    use crate::Limits;

    fn pda(pattern: &str) -> Pda {
        let d = to_dfa(pattern).unwrap_or_else(|| panic!("{pattern:?} not compiled"));
        let mut b = GrammarBuilder::new();
        let body = d.to_rules(&mut b, "s", &|e| e.clone(), usize::MAX).expect("no budget");
        let root = b.add("root", body);
        Pda::build(&b.build(root).expect("grammar"), &Limits::default()).expect("automaton")
    }

    /// The compiled pattern agrees with the ECMA validator's regex on `texts`.
    fn agrees(pattern: &str, texts: &[&str]) {
        let p = pda(pattern);
        let re = fancy_like(pattern);
        for t in texts {
            assert_eq!(p.matches(t.as_bytes()), re(t), "{pattern:?} on {t:?}");
        }
    }

    /// The reference: what the run-time check decides (the jsonschema crate's `pattern`).
    fn fancy_like(pattern: &str) -> impl Fn(&str) -> bool {
        let schema = serde_json::json!({"type": "string", "pattern": pattern});
        let v = jsonschema::validator_for(&schema).expect("validator");
        move |t: &str| v.is_valid(&serde_json::json!(t))
    }

    #[test]
    fn catalogue_entry_path() {
        // JSONSchemaBench JsonSchemaStore/catalogue-entry-schema.json, `oas_path`.
        agrees(
            r"((?:[^/]*/)*)(?=\.(yaml|yml|json))",
            &["../oas/pet-store.yaml", "a.json", "x", "", ".yml", "a/b/c", "a.yaml.txt", "/.jsonx", "yaml"],
        );
    }

    #[test]
    fn look_aheads_and_look_behinds() {
        let texts = [
            "",
            "a",
            "A1",
            "ab1Z",
            "abcd",
            "ABC1",
            "foo",
            "foobar",
            "barfoo",
            "xfoo",
            "fo",
            "1Zab",
            "a-b",
            "abcdefG1",
            "abcdefgh",
            "aB3aB3aB3aB3aB3aB3aB",
            "aB3aB3aB3aB3aB3aB3aB3",
            "aB3aB3a\nB3",
        ];
        for p in [
            r"^(?=.*\d)(?=.*[A-Z]).{4,}$",
            r"^(?=.*[0-9])(?=.*[A-Z]).{8,20}$",
            r"^(?=.*[a-z])(?=.*[A-Z])(?=.*\d)(?=.*[@$!%*?&])[A-Za-z\d@$!%*?&]{8,64}$",
            r"^(?!foo)",
            r"^(?!.*foo$).*$",
            r"foo(?!bar)",
            r"(?<=a)b",
            r"(?<!x)foo",
            r"^a(?=b)|1Z",
            r"^[a-z](?![0-9])",
        ] {
            agrees(p, &texts);
        }
    }

    #[test]
    fn what_is_not_handled() {
        for p in [r"(a(?=b))", r"(?=a)*b", r"a(?=b)(?<=a)", r"(?i)a(?=b)", r"(a)\1(?=b)", r"a(?=(?!b)c)"] {
            assert!(to_expr(p).is_none(), "{p:?}");
        }
    }
}

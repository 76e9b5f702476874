//! `type: string`: `minLength`/`maxLength`, `pattern` and `format`, the intersection of a
//! pattern with a length range, and the key grammar of property names that must differ from
//! a set of named keys ([`not_in_set`]).

use serde_json::{Map, Value};

use super::ecma::{self, to_expr};
use super::{format, json, Compiler, Error, Note, SharedRule, JSON_TEXT};
use crate::grammar::dfa::CharDfa;
use crate::grammar::regex::RegexOptions;
use crate::grammar::{Expr, GrammarBuilder};

/// A regular constraint on a string's content: as an expression, or (look-arounds, which
/// [`ecma::lookaround`] compiles through automata) as an automaton.
enum Lang {
    Expr(Expr),
    Dfa(CharDfa),
}

impl Lang {
    fn to_dfa(&self) -> Option<CharDfa> {
        match self {
            Lang::Expr(e) => CharDfa::of(e),
            Lang::Dfa(d) => Some(d.clone()),
        }
    }
}

impl<'a> Compiler<'a> {
    /// A `string` schema's expression: a quoted string under its lengths, `pattern` or
    /// `format`.
    pub(super) fn compile_string(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        let min = match map.get("minLength") {
            None => 0,
            Some(v) => v
                .as_u64()
                .map(|x| x.min(u32::MAX as u64) as u32)
                .ok_or_else(|| Error::new(ptr, "minLength", "minLength must be a non-negative integer"))?,
        };
        let max = match map.get("maxLength") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .map(|x| x.min(u32::MAX as u64) as u32)
                    .ok_or_else(|| Error::new(ptr, "maxLength", "maxLength must be a non-negative integer"))?,
            ),
        };
        let pattern = match map.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.as_str()),
            Some(_) => return Err(Error::new(ptr, "pattern", "pattern must be a string")),
        };
        let fmt = match map.get("format") {
            Some(Value::String(f)) => {
                let known = format::format_expr(f);
                if known.is_none() && format::is_checked_elsewhere(f) {
                    self.unsupported(ptr, "format", &format!("format {f:?} is not supported"))?;
                }
                if let (Some(_), Some(why)) = (&known, format::under_approximation(f)) {
                    self.notes.push(Note::new(ptr, "format", why));
                }
                known.map(|e| (f.clone(), e))
            }
            _ => None,
        };
        if map.contains_key(JSON_TEXT) {
            if pattern.is_some() || fmt.is_some() || min > 0 || max.is_some() {
                return Err(Error::new(
                    ptr,
                    "contentMediaType",
                    "contentMediaType application/json together with pattern, format, minLength or maxLength cannot be compiled",
                ));
            }
            let body = self.shared_rule(SharedRule::JsonText);
            return Ok(self.rule("string_c", Expr::seq([Expr::lit("\""), body, Expr::lit("\"")])));
        }
        // The regular constraints on the content, each with its keyword.
        let mut parts: Vec<(Lang, &str)> = Vec::new();
        if let Some(p) = pattern {
            if let Some(lang) = self.pattern_lang(p, ptr)? {
                parts.push((lang, "pattern"));
            }
        }
        if let Some((_, e)) = &fmt {
            parts.push((Lang::Expr(e.clone()), "format"));
        }
        let length = (min > 0 || max.is_some()).then_some((min, max));
        let body = match parts.len() {
            0 => {
                if length.is_none() {
                    return Ok(self.shared_rule(SharedRule::String));
                }
                Expr::repeat(json::any_unit(), min, max)
            }
            1 => {
                let (lang, keyword) = parts.remove(0);
                self.one_constraint(lang, keyword, pattern, length, ptr)?
            }
            _ => {
                let both = parts.iter().map(|(l, _)| l.to_dfa()).collect::<Option<Vec<_>>>().and_then(|d| {
                    let d = d[0].intersect(&d[1])?;
                    match length {
                        Some((min, max)) => d.with_length(min, max),
                        None => Some(d),
                    }
                });
                match both.and_then(|d| self.emit(&d)) {
                    Some(out) => out,
                    None => {
                        let f = fmt.as_ref().map(|(f, _)| f.as_str()).unwrap_or_default();
                        self.unsupported(
                            ptr,
                            "format",
                            &format!("format {f:?} together with pattern cannot be compiled"),
                        )?;
                        let (lang, keyword) = parts.remove(0);
                        self.one_constraint(lang, keyword, pattern, length, ptr)?
                    }
                }
            }
        };
        let e = Expr::seq([Expr::lit("\""), body, Expr::lit("\"")]);
        Ok(self.rule("string_c", e))
    }

    /// The language of `pattern`; `None` when the pattern has no regular form (backreferences,
    /// look-arounds [`ecma::lookaround`] cannot compile) and is left to a run-time
    /// check instead.
    fn pattern_lang(&mut self, pattern: &str, ptr: &str) -> Result<Option<Lang>, Error> {
        let err = match to_expr(pattern, &RegexOptions::search()) {
            Ok(e) => return Ok(Some(Lang::Expr(e))),
            Err(e) => e,
        };
        if let Some(d) = ecma::lookaround::to_dfa(pattern) {
            return Ok(Some(Lang::Dfa(d)));
        }
        if self.relaxes("pattern") {
            self.relax(ptr, "pattern");
            return Ok(None);
        }
        Err(Error::new(ptr, "pattern", err.to_string()))
    }

    /// The content of a string under one regular constraint (from `keyword`) and `length`
    /// (characters), JSON-escaped: exactly where the expression's shape allows or its
    /// automaton fits the budgets; else, for an unanchored `pattern`, the subset where it
    /// matches the whole string; else the length is left out and the keyword relaxed
    /// ([`Compiler::unsupported`]).
    fn one_constraint(
        &mut self,
        lang: Lang,
        keyword: &str,
        pattern: Option<&str>,
        length: Option<(u32, Option<u32>)>,
        ptr: &str,
    ) -> Result<Expr, Error> {
        let too_hard = format!("{keyword} together with minLength/maxLength cannot be compiled exactly");
        let e = match lang {
            Lang::Expr(e) => e,
            Lang::Dfa(d) => {
                if let Some((min, max)) = length {
                    if let Some(out) = d.with_length(min, max).and_then(|cut| self.emit(&cut)) {
                        return Ok(out);
                    }
                }
                if let Some(out) = self.emit(&d) {
                    if length.is_some() {
                        self.unsupported(ptr, keyword, &too_hard)?;
                    }
                    return Ok(out);
                }
                // Exact but too big to write: the keyword is left out (to its run-time check).
                self.unsupported(ptr, keyword, &format!("{keyword} compiles to a grammar over the size budget"))?;
                let (min, max) = length.unwrap_or((0, None));
                return Ok(Expr::repeat(json::any_unit(), min, max));
            }
        };
        let Some((min, max)) = length else { return Ok(json::escape_expr(&e)) };
        if let Some(cut) = constrain_length(&e, min, max) {
            return Ok(json::escape_expr(&cut));
        }
        if let Some(out) = CharDfa::of(&e).and_then(|d| d.with_length(min, max)).and_then(|cut| self.emit(&cut)) {
            return Ok(out);
        }
        // The subset where an unanchored pattern matches the whole string (e.g. `[0-9a-f]+`
        // with length 12).
        let whole = pattern
            .filter(|_| keyword == "pattern")
            .and_then(|p| to_expr(p, &RegexOptions::default()).ok())
            .and_then(|w| constrain_length(&w, min, max));
        if let Some(cut) = whole {
            return Ok(json::escape_expr(&cut));
        }
        self.unsupported(ptr, keyword, &too_hard)?;
        Ok(json::escape_expr(&e))
    }

    /// A string content automaton in the grammar, JSON-escaped: one expression when it is
    /// small, else one rule per state ([`CharDfa::to_rules`]); `None` when both are too big.
    fn emit(&mut self, d: &CharDfa) -> Option<Expr> {
        /// Largest escaped grammar kept for one string: every character class grows by its
        /// escapes (`\S` is most of Unicode, each character also spelled `\uXXXX`).
        ///
        /// A constant of the algorithm, not a user limit: past it the keyword takes its other
        /// route (a run-time check or a refusal), never an approximation.
        const MAX_ESCAPED_SIZE: usize = 50_000;
        if let Some(e) = d.to_expr().map(|e| json::escape_expr(&e)).filter(|e| e.size() <= MAX_ESCAPED_SIZE) {
            return Some(e);
        }
        d.to_rules(&mut self.b, "string_state", &json::escape_expr, MAX_ESCAPED_SIZE)
    }

    /// The key of an object member whose name is none of `excluded` (a JSON string, quotes
    /// included): a trie of the excluded names ([`not_in_set`]), recorded with the grammar
    /// builder so the mask stage can take its shortcut.
    pub(super) fn other_key(&mut self, excluded: &[String], ptr: &str) -> Result<Expr, Error> {
        let chars: Vec<Vec<char>> = excluded.iter().map(|s| s.chars().collect()).collect();
        if let Some(long) = chars.iter().find(|k| k.len() > MAX_EXCLUDED_KEY_CHARS) {
            return Err(Error::new(
                ptr,
                "additionalProperties",
                format!(
                    "a property name of {} characters is longer than the {MAX_EXCLUDED_KEY_CHARS} \
                     that other property names can be told apart from; forbid other properties \
                     (additionalProperties: false) or shorten the name",
                    long.len()
                ),
            ));
        }
        let tails = RestRules {
            rest: self.shared_rule(SharedRule::StringRest),
            escape: self.shared_rule(SharedRule::EscapeRest),
            control_escape: self.shared_rule(SharedRule::ControlEscapeRest),
            nonascii: self.shared_rule(SharedRule::NonasciiRest),
        };
        let content = not_in_set(&chars.iter().map(|v| v.as_slice()).collect::<Vec<_>>(), &tails, &mut self.b, 0);
        let e = Expr::seq([Expr::lit("\""), content]);
        let key = self.rule("other_key", e);
        // Keys split over several rules (see `not_in_set`) are not recorded: the
        // mask stage's shortcut follows one rule's automaton only.
        let short = chars.iter().all(|k| k.len() < KEY_CHUNK);
        if let (Expr::Ref(rule), Expr::Ref(rest), true) = (&key, &tails.rest, short) {
            let words: Vec<&str> = excluded.iter().map(String::as_str).collect();
            self.b.note_exclusion(*rule, *rest, &words);
        }
        Ok(key)
    }
}

/// The shared rules [`not_in_set`] continues with once a key can no longer be excluded.
struct RestRules {
    /// The rest of a string, closing quote included.
    rest: Expr,
    /// After a backslash: the rest of an escape, then of the string.
    escape: Expr,
    /// After a backslash: the rest of a control character's `\u00XX`, then of the string.
    control_escape: Expr,
    /// A non-ASCII character, then the rest of the string.
    nonascii: Expr,
}

/// The rest of a JSON string after its opening quote, for names *not* in `keys`: the
/// closing quote where no key ends, or a character no key continues with followed by the
/// rest of the string (see [`RestRules`]). Only canonical spellings of the keys' own
/// characters are followed down the trie; other characters go to `rest`. An escape that
/// could spell a key's next character (`\u…`, and `\/` where `/` is one) is taken only
/// where no key goes on, so a declared name spelled with escapes is never taken for
/// another key.
///
/// The expression nests two levels per character; every [`KEY_CHUNK`] characters the rest is
/// made a rule of its own, so a long key (30k characters) neither nests deeper than the
/// automaton accepts nor recurses deeper than that here.
fn not_in_set(keys: &[&[char]], rules: &RestRules, b: &mut GrammarBuilder, depth: usize) -> Expr {
    let RestRules { rest, escape: escape_rest, control_escape, nonascii: nonascii_rest } = rules;
    if keys.is_empty() {
        return rest.clone();
    }
    let mut firsts: Vec<char> = keys.iter().filter_map(|k| k.first().copied()).collect();
    firsts.sort_unstable();
    firsts.dedup();
    let mut alts = Vec::with_capacity(firsts.len() + 4);
    if !keys.iter().any(|k| k.is_empty()) {
        alts.push(Expr::lit("\""));
    }
    let needs_escape = |c: char| c == '"' || c == '\\' || (c as u32) < 0x20;
    if firsts.iter().copied().any(needs_escape) {
        // Characters other than the first characters of keys: anything may follow.
        let others = other_chars(&firsts);
        if !others.is_empty() {
            alts.push(Expr::seq([json::class_units(&others), rest.clone()]));
        }
    } else if let Some((raw, any_nonascii)) = raw_other_chars(&firsts) {
        // No key character needs an escape here: the raw class, the non-ASCII characters
        // through the shared rule when they are all "other", and the escapes below.
        if !raw.is_empty() {
            alts.push(Expr::seq([Expr::Chars(raw), rest.clone()]));
        }
        if any_nonascii {
            alts.push(nonascii_rest.clone());
        }
        // An escape may spell a key's next character (`\u0061` is `a`). Where no key goes
        // on, any escape spells some other character. Where one does, only the escapes of
        // characters no key continues with are taken (`\"`, `\\`, the controls, short or
        // as `\u00XX`, and `\/` unless `/` is a next character); another `\u` escape is
        // refused there, so a name spelled with one is refused (fewer strings, never more).
        if firsts.is_empty() {
            alts.push(Expr::seq([Expr::lit("\\"), escape_rest.clone()]));
        } else {
            alts.push(short_escapes(&firsts, rest, control_escape));
        }
    }
    for c in firsts {
        let tails: Vec<&[char]> = keys.iter().filter(|k| k.first() == Some(&c)).map(|k| &k[1..]).collect();
        let tail = trie_tail(&tails, rules, b, depth);
        let unit = if c.is_ascii() && !needs_escape(c) {
            Expr::Literal(vec![c as u8])
        } else {
            json::str_units(&c.to_string())
        };
        alts.push(Expr::seq([unit, tail]));
    }
    Expr::alt(alts)
}

/// The characters other than `firsts` (sorted, distinct), as ranges without the surrogates.
fn other_chars(firsts: &[char]) -> Vec<(char, char)> {
    let mut others = Vec::new();
    let mut lo = '\0';
    let mut open = true;
    for &c in firsts {
        if open && c > lo {
            others.push((lo, prev(c)));
        }
        match next(c) {
            Some(n) => lo = n,
            None => open = false,
        }
    }
    if open {
        others.push((lo, '\u{10FFFF}'));
    }
    others.into_iter().flat_map(split_surrogates).collect()
}

/// For `firsts` none of which needs an escape: the characters other than them that are
/// written raw (no control, quote or backslash), and whether the non-ASCII ones among them
/// go to the shared non-ASCII rule instead, which they do when every first character is
/// ASCII (their UTF-8 paths would otherwise be rebuilt at every position). `None` when no
/// character is left.
fn raw_other_chars(firsts: &[char]) -> Option<(Vec<(char, char)>, bool)> {
    if firsts.iter().all(char::is_ascii) {
        // Runs of the printable ASCII characters taken by no first character, a run at a
        // time off a 128-bit set; every non-ASCII character is left.
        let taken = firsts.iter().fold((1u128 << b'"') | (1u128 << b'\\'), |m, &c| m | (1u128 << c as u32));
        let mut free = !taken & !((1u128 << 0x20) - 1);
        let mut raw = Vec::new();
        while free != 0 {
            let start = free.trailing_zeros();
            let len = (free >> start).trailing_ones();
            raw.push((char::from(start as u8), char::from((start + len - 1) as u8)));
            free &= !(((1u128 << len) - 1) << start);
        }
        return Some((raw, true));
    }
    let others = other_chars(firsts);
    if others.is_empty() {
        return None;
    }
    let raw = others
        .iter()
        .filter_map(|&(a, b)| {
            let a = a.max(' ');
            (a <= b).then_some((a, b))
        })
        .flat_map(|(a, b)| split_out(a, b, &['"', '\\']))
        .collect();
    Some((raw, false))
}

/// Where some key goes on with one of `firsts` (none of them a control character): a
/// backslash and an escape of a character no key continues with, then the rest of the string
/// (see [`not_in_set`]): a short escape, or the `\u00XX` escape of a control character
/// (`\u0005`, which is how JSON writes those without a short form), through the shared
/// `control_escape` rule so that its states exist once, not at every trie node.
fn short_escapes(firsts: &[char], rest: &Expr, control_escape: &Expr) -> Expr {
    let short: &[u8] = if firsts.contains(&'/') { b"\"\\bfnrt" } else { b"\"/\\bfnrt" };
    Expr::seq([
        Expr::lit("\\"),
        Expr::alt([Expr::seq([Expr::one_of_bytes(short), rest.clone()]), control_escape.clone()]),
    ])
}

/// The trie below one character at `depth`: [`not_in_set`] of the keys' tails, made a rule
/// of its own every [`KEY_CHUNK`] characters.
fn trie_tail(tails: &[&[char]], rules: &RestRules, b: &mut GrammarBuilder, depth: usize) -> Expr {
    if depth + 1 >= KEY_CHUNK {
        let e = not_in_set(tails, rules, b, 0);
        match e {
            Expr::Ref(_) | Expr::Literal(_) | Expr::Empty | Expr::Nothing => e,
            e => Expr::Ref(b.add("other_key_rest", e)),
        }
    } else {
        not_in_set(tails, rules, b, depth + 1)
    }
}

/// Characters of an excluded key followed before [`not_in_set`] continues in a new rule.
const KEY_CHUNK: usize = 64;

/// Longest property name [`not_in_set`] excludes from other keys (its recursion follows the
/// name's characters); a longer declared name with additional properties allowed is an error.
///
/// A constant of the algorithm, not a user limit: the exclusion's recursion follows
/// the name's characters, so this bounds the compiler's stack, which no setting can raise.
const MAX_EXCLUDED_KEY_CHARS: usize = 1024;

/// The range `a..=b` without the characters in `holes`.
fn split_out(a: char, b: char, holes: &[char]) -> Vec<(char, char)> {
    let mut out = vec![(a, b)];
    for &h in holes {
        out = out
            .into_iter()
            .flat_map(|(x, y)| {
                if h < x || h > y {
                    vec![(x, y)]
                } else {
                    let mut v = Vec::new();
                    if h > x {
                        v.push((x, prev(h)));
                    }
                    if let Some(n) = next(h) {
                        if n <= y {
                            v.push((n, y));
                        }
                    }
                    v
                }
            })
            .collect();
    }
    out
}

/// The character before `c` (skipping the surrogates; `\0` for `\0`).
fn prev(c: char) -> char {
    match c as u32 {
        0 => '\0',
        0xE000 => '\u{D7FF}',
        n => {
            // Only 0 and the first character after the surrogates lack a plain predecessor.
            let p = char::from_u32(n - 1);
            debug_assert!(p.is_some(), "U+{n:04X} has no predecessor");
            p.unwrap_or('\0')
        }
    }
}

/// The character after `c` (skipping the surrogates; `None` after U+10FFFF).
fn next(c: char) -> Option<char> {
    match c as u32 {
        0xD7FF => Some('\u{E000}'),
        n => char::from_u32(n + 1),
    }
}

/// A character range without the surrogates it spans, as one or two ranges.
fn split_surrogates((a, b): (char, char)) -> Vec<(char, char)> {
    if (a as u32) < 0xD800 && (b as u32) > 0xDFFF {
        vec![(a, '\u{D7FF}'), ('\u{E000}', b)]
    } else {
        vec![(a, b)]
    }
}

/// Length range in characters of a character-level expression (`None` max: unbounded).
fn char_len(e: &Expr) -> (u64, Option<u64>) {
    match e {
        Expr::Empty => (0, Some(0)),
        Expr::Nothing => (0, Some(0)),
        Expr::Literal(b) => {
            let n = String::from_utf8_lossy(b).chars().count() as u64;
            (n, Some(n))
        }
        Expr::Chars(_) | Expr::Bytes(_) => (1, Some(1)),
        Expr::Seq(v) => {
            v.iter().map(char_len).fold((0, Some(0)), |(a, b), (c, d)| (a + c, b.zip(d).map(|(x, y)| x + y)))
        }
        Expr::Alt(v) => {
            let mut lo = u64::MAX;
            let mut hi = Some(0);
            for x in v {
                let (a, b) = char_len(x);
                lo = lo.min(a);
                hi = hi.zip(b).map(|(x, y)| x.max(y));
            }
            (if lo == u64::MAX { 0 } else { lo }, hi)
        }
        Expr::Repeat { expr, min, max } => {
            let (a, b) = char_len(expr);
            (a.saturating_mul(*min as u64), max.and_then(|m| b.map(|b| b.saturating_mul(m as u64))))
        }
        Expr::Ref(_) => (0, None),
    }
}

/// Restricts a character-level expression to strings of `min..=max` characters, when that
/// can be done exactly: the expression's lengths already fit, or exactly one part of a
/// sequence varies in length and is a repetition of single characters.
fn constrain_length(e: &Expr, min: u32, max: Option<u32>) -> Option<Expr> {
    let (lo, hi) = char_len(e);
    let fits = lo >= min as u64 && max.is_none_or(|m| hi.is_some_and(|h| h <= m as u64));
    if fits {
        return Some(e.clone());
    }
    match e {
        Expr::Alt(v) => {
            let parts: Option<Vec<Expr>> = v.iter().map(|x| constrain_length(x, min, max)).collect();
            parts.map(Expr::alt)
        }
        Expr::Repeat { expr, min: rmin, max: rmax } if char_len(expr) == (1, Some(1)) => {
            let nmin = (*rmin).max(min);
            let nmax = match (rmax, max) {
                (Some(a), Some(b)) => Some((*a).min(b)),
                (a, b) => a.or(b),
            };
            Some(Expr::repeat((**expr).clone(), nmin, nmax))
        }
        Expr::Seq(v) => {
            let lens: Vec<(u64, Option<u64>)> = v.iter().map(char_len).collect();
            let varying: Vec<usize> = (0..v.len()).filter(|&i| lens[i].1 != Some(lens[i].0)).collect();
            if varying.len() != 1 {
                return None;
            }
            let i = varying[0];
            let fixed: u64 = lens.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, l)| l.0).sum();
            let fixed = u32::try_from(fixed).ok()?;
            let nmin = min.saturating_sub(fixed);
            let nmax = match max {
                Some(m) => Some(m.checked_sub(fixed)?),
                None => None,
            };
            let inner = constrain_length(&v[i], nmin, nmax)?;
            let mut parts = v.clone();
            parts[i] = inner;
            Some(Expr::seq(parts))
        }
        _ => None,
    }
}

//! JSON text pieces as grammar expressions: whitespace, string characters with their escapes,
//! literal JSON values.
//!
//! Input: Rust values (characters, `serde_json::Value`s, character-level expressions from
//! [`crate::grammar::regex`]). Output: [`Expr`]s over the bytes of JSON text.
//!
//! A *string unit* is what one Unicode code point looks like inside a JSON string: the
//! character itself, or one of its escapes. `minLength`/`maxLength` count units, so they count
//! code points as the spec requires. For characters that must be escaped (`"`, `\`, control
//! characters) only escaped forms are emitted; for other characters in constrained strings
//! (`pattern`, `enum`, property names) only the raw character is accepted — a safe subset
//! that includes everything Python's `json.dumps(ensure_ascii=False)` writes.

use crate::grammar::Expr;
use serde_json::Value;

use super::number::Dec;
use super::Whitespace;

/// Longest run of indentation spaces the bounded whitespace policy allows after a newline.
///
/// A constant of the algorithm, not a user limit: it is part of what
/// [`super::Whitespace::Pretty`] means (a fixed policy), not a budget.
pub const MAX_INDENT: u32 = 20;

/// Whitespace allowed between JSON tokens under `policy`.
pub fn ws(policy: Whitespace) -> Expr {
    match policy {
        Whitespace::Compact => Expr::Empty,
        Whitespace::Pretty => Expr::opt(Expr::alt([
            Expr::lit(" "),
            Expr::seq([Expr::lit("\n"), Expr::repeat(Expr::lit(" "), 0, Some(MAX_INDENT))]),
        ])),
        Whitespace::Unbounded => Expr::star(Expr::Bytes(vec![(b'\t', b'\n'), (b'\r', b'\r'), (b' ', b' ')])),
    }
}

/// One hexadecimal digit, either case.
pub(super) fn hex_digit() -> Expr {
    Expr::Bytes(vec![(b'0', b'9'), (b'A', b'F'), (b'a', b'f')])
}

/// Any string unit: a raw character other than `"`, `\` and controls, or any valid escape
/// (`\uXXXX` excluding lone surrogates; a surrogate pair counts as one unit).
pub fn any_unit() -> Expr {
    let hex = hex_digit;
    let non_surrogate = Expr::alt([
        Expr::seq([
            Expr::Bytes(vec![(b'0', b'9'), (b'A', b'C'), (b'a', b'c'), (b'E', b'F'), (b'e', b'f')]),
            hex(),
            hex(),
            hex(),
        ]),
        Expr::seq([Expr::Bytes(vec![(b'D', b'D'), (b'd', b'd')]), Expr::Bytes(vec![(b'0', b'7')]), hex(), hex()]),
    ]);
    let pair = Expr::seq([
        Expr::Bytes(vec![(b'D', b'D'), (b'd', b'd')]),
        Expr::Bytes(vec![(b'8', b'9'), (b'A', b'B'), (b'a', b'b')]),
        hex(),
        hex(),
        Expr::lit("\\u"),
        Expr::Bytes(vec![(b'D', b'D'), (b'd', b'd')]),
        Expr::Bytes(vec![(b'C', b'F'), (b'c', b'f')]),
        hex(),
        hex(),
    ]);
    Expr::alt([
        Expr::Chars(vec![(' ', '!'), ('#', '['), (']', '\u{D7FF}'), ('\u{E000}', '\u{10FFFF}')]),
        Expr::seq([
            Expr::lit("\\"),
            Expr::alt([
                Expr::Bytes(vec![
                    (b'"', b'"'),
                    (b'/', b'/'),
                    (b'\\', b'\\'),
                    (b'b', b'b'),
                    (b'f', b'f'),
                    (b'n', b'n'),
                    (b'r', b'r'),
                    (b't', b't'),
                ]),
                Expr::seq([Expr::lit("u"), Expr::alt([non_surrogate, pair])]),
            ]),
        ]),
    ])
}

/// The `\u00XX` escape of a control character, hex digits in either case.
fn control_u_escape(c: u8) -> Expr {
    let hi = b"0123456789abcdef"[(c >> 4) as usize];
    let lo = b"0123456789abcdef"[(c & 15) as usize];
    let case = |d: u8| {
        if d.is_ascii_alphabetic() {
            Expr::Bytes(vec![(d.to_ascii_uppercase(), d.to_ascii_uppercase()), (d, d)])
        } else {
            Expr::Bytes(vec![(d, d)])
        }
    };
    Expr::seq([Expr::lit("\\u00"), case(hi), case(lo)])
}

/// The escaped forms of one character that needs escaping (`"`, `\`, controls), or `None`.
fn escapes_of(c: char) -> Option<Expr> {
    Some(match c {
        '"' => Expr::lit("\\\""),
        '\\' => Expr::lit("\\\\"),
        '\u{8}' => Expr::alt([Expr::lit("\\b"), control_u_escape(8)]),
        '\t' => Expr::alt([Expr::lit("\\t"), control_u_escape(9)]),
        '\n' => Expr::alt([Expr::lit("\\n"), control_u_escape(10)]),
        '\u{C}' => Expr::alt([Expr::lit("\\f"), control_u_escape(12)]),
        '\r' => Expr::alt([Expr::lit("\\r"), control_u_escape(13)]),
        c if (c as u32) < 0x20 => control_u_escape(c as u8),
        _ => return None,
    })
}

/// One string unit for any character in `ranges` (see the module docs for which forms).
pub fn class_units(ranges: &[(char, char)]) -> Expr {
    let mut raw = Vec::new();
    let mut escaped = Vec::new();
    for &(lo, hi) in ranges {
        // Raw part: the range minus controls, '"' and '\\'.
        let mut a = lo.max(' ');
        while a <= hi {
            // Find the end of the run that avoids '"' and '\\'.
            let stop = ['"', '\\'].iter().copied().filter(|&s| s >= a && s <= hi).min();
            match stop {
                Some(s) => {
                    if s > a {
                        raw.push((a, prev_char(s)));
                    }
                    match next_char(s) {
                        Some(n) => a = n,
                        None => break,
                    }
                }
                None => {
                    raw.push((a, hi));
                    break;
                }
            }
        }
        // Escaped part: controls and the two specials inside the range.
        let full_controls = lo == '\0' && hi >= '\u{1F}';
        if full_controls {
            escaped.push(Expr::seq([
                Expr::lit("\\"),
                Expr::alt([
                    Expr::Bytes(vec![(b'b', b'b'), (b'f', b'f'), (b'n', b'n'), (b'r', b'r'), (b't', b't')]),
                    Expr::seq([Expr::lit("u00"), Expr::Bytes(vec![(b'0', b'1')]), hex_digit()]),
                ]),
            ]));
        } else {
            let mut c = lo;
            while c <= hi && (c as u32) < 0x20 {
                if let Some(e) = escapes_of(c) {
                    escaped.push(e);
                }
                match next_char(c) {
                    Some(n) => c = n,
                    None => break,
                }
            }
        }
        for s in ['"', '\\'] {
            if s >= lo && s <= hi {
                if let Some(e) = escapes_of(s) {
                    escaped.push(e);
                }
            }
        }
    }
    let mut parts = Vec::new();
    if !raw.is_empty() {
        parts.push(Expr::Chars(raw));
    }
    parts.extend(escaped);
    Expr::alt(parts)
}

fn prev_char(c: char) -> char {
    match c as u32 {
        0 => '\0',
        0xE000 => '\u{D7FF}',
        n => char::from_u32(n - 1).unwrap_or('\0'),
    }
}

fn next_char(c: char) -> Option<char> {
    match c as u32 {
        0xD7FF => Some('\u{E000}'),
        n => char::from_u32(n + 1),
    }
}

/// The string units spelling `s` (without quotes): raw characters, escapes where required.
pub fn str_units(s: &str) -> Expr {
    let mut parts = Vec::new();
    let mut run = String::new();
    for c in s.chars() {
        match escapes_of(c) {
            Some(e) => {
                if !run.is_empty() {
                    parts.push(Expr::lit(&run));
                    run.clear();
                }
                parts.push(e);
            }
            None => run.push(c),
        }
    }
    if !run.is_empty() {
        parts.push(Expr::lit(&run));
    }
    Expr::seq(parts)
}

/// A quoted JSON string literal for `s`.
pub fn string_literal(s: &str) -> Expr {
    Expr::seq([Expr::lit("\""), str_units(s), Expr::lit("\"")])
}

/// Maps a character-level expression (from [`crate::grammar::regex`]) to the JSON string
/// units spelling the same characters.
pub fn escape_expr(e: &Expr) -> Expr {
    match e {
        Expr::Empty | Expr::Nothing | Expr::Ref(_) | Expr::Bytes(_) => e.clone(),
        Expr::Literal(bytes) => match std::str::from_utf8(bytes) {
            Ok(s) => str_units(s),
            Err(_) => Expr::Nothing,
        },
        Expr::Chars(r) => class_units(r),
        Expr::Seq(v) => Expr::seq(v.iter().map(escape_expr)),
        Expr::Alt(v) => Expr::alt(v.iter().map(escape_expr)),
        Expr::Repeat { expr, min, max } => Expr::repeat(escape_expr(expr), *min, *max),
    }
}

/// The spellings of a JSON number value, all denoting exactly its value (the text read with
/// serde_json's `arbitrary_precision`, so no digit is lost): see [`dec_spellings`]. A number
/// whose exponent is beyond what [`Dec`] holds keeps only its own text.
pub fn number_spellings(n: &serde_json::Number) -> Vec<String> {
    let text = n.to_string();
    match Dec::parse(&text) {
        Some(d) => dec_spellings(&d, false),
        None => vec![text],
    }
}

/// The spellings of an exact decimal, sorted: plain decimal notation (`12.5`, `100`); for an
/// integer also `100.0` unless `integer_only` (a draft-04 validator calls `1.0` a non-integer);
/// and Python's `repr` of the nearest float (`1e+20`, `1e-05`) when it spells exactly the same
/// value. Never a spelling of a different value: `0.1000000000000000055511151231257827` is
/// spelled only with all its digits.
pub fn dec_spellings(d: &Dec, integer_only: bool) -> Vec<String> {
    let fixed = d.to_text();
    let mut out = Vec::with_capacity(3);
    if integer_only {
        if d.is_integer() {
            out.push(fixed);
        }
        return out;
    }
    if d.is_integer() {
        out.push(format!("{fixed}.0"));
    }
    if let Ok(f) = fixed.parse::<f64>() {
        let py = python_float_repr(f);
        if Dec::parse(&py).as_ref() == Some(d) {
            out.push(py);
        }
    }
    out.push(fixed);
    out.sort();
    out.dedup();
    out
}

/// JSON Schema equality: numbers by exact value (`1` equals `1.0` and `1e0`), arrays item by
/// item, objects key by key regardless of order, everything else as written. Iterative, so
/// deep values cannot overflow the stack.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    let mut todo = vec![(a, b)];
    while let Some((x, y)) = todo.pop() {
        match (x, y) {
            (Value::Number(m), Value::Number(n)) => {
                let (ms, ns) = (m.to_string(), n.to_string());
                let same = match (Dec::parse(&ms), Dec::parse(&ns)) {
                    (Some(p), Some(q)) => p == q,
                    _ => ms == ns,
                };
                if !same {
                    return false;
                }
            }
            (Value::Array(p), Value::Array(q)) => {
                if p.len() != q.len() {
                    return false;
                }
                todo.extend(p.iter().zip(q));
            }
            (Value::Object(p), Value::Object(q)) => {
                if p.len() != q.len() {
                    return false;
                }
                for (k, v) in p {
                    match q.get(k) {
                        Some(w) => todo.push((v, w)),
                        None => return false,
                    }
                }
            }
            _ => {
                if x != y {
                    return false;
                }
            }
        }
    }
    true
}

/// Python's `repr(float)`: shortest round-trip digits, fixed notation for exponents in
/// `-4..16`, otherwise `d.ddde+XX`.
pub fn python_float_repr(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // `{:e}` gives the shortest round-trip digits as d.ddde±x.
    let sci = format!("{:e}", f);
    let (mant, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => return sci,
    };
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            format!("{sign}0.{}{}", "0".repeat((-point) as usize), digits)
        } else if (point as usize) >= digits.len() {
            format!("{sign}{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (a, b) = digits.split_at(point as usize);
            format!("{sign}{a}.{b}")
        }
    } else {
        let (a, b) = digits.split_at(1);
        let mant = if b.is_empty() { a.to_string() } else { format!("{a}.{b}") };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mant}e{esign}{:02}", exp.abs())
    }
}

/// An expression matching the JSON text of `value` (object keys in the given order), with
/// `ws` between tokens. Iterative over the value's nesting, so deep values cannot overflow
/// the stack.
pub fn value_literal(value: &Value, ws: &Expr) -> Expr {
    enum Task<'a> {
        Visit(&'a Value),
        Build { kind: u8, n: usize, keys: Vec<&'a str> },
    }
    let mut tasks = vec![Task::Visit(value)];
    let mut done: Vec<Expr> = Vec::new();
    while let Some(t) = tasks.pop() {
        match t {
            Task::Visit(v) => match v {
                Value::Null => done.push(Expr::lit("null")),
                Value::Bool(b) => done.push(Expr::lit(if *b { "true" } else { "false" })),
                Value::Number(n) => done.push(Expr::alt(number_spellings(n).iter().map(|s| Expr::lit(s)))),
                Value::String(s) => done.push(string_literal(s)),
                Value::Array(items) => {
                    tasks.push(Task::Build { kind: 0, n: items.len(), keys: vec![] });
                    for it in items.iter().rev() {
                        tasks.push(Task::Visit(it));
                    }
                }
                Value::Object(map) => {
                    tasks.push(Task::Build { kind: 1, n: map.len(), keys: map.keys().map(|k| k.as_str()).collect() });
                    for it in map.values().rev() {
                        tasks.push(Task::Visit(it));
                    }
                }
            },
            Task::Build { kind, n, keys } => {
                let items = done.split_off(done.len().saturating_sub(n));
                let (open, close) = if kind == 0 { ("[", "]") } else { ("{", "}") };
                let mut parts = vec![Expr::lit(open), ws.clone()];
                for (i, item) in items.into_iter().enumerate() {
                    if i > 0 {
                        parts.extend([ws.clone(), Expr::lit(","), ws.clone()]);
                    }
                    if kind == 1 {
                        parts.push(string_literal(keys.get(i).copied().unwrap_or("")));
                        parts.extend([ws.clone(), Expr::lit(":"), ws.clone()]);
                    }
                    parts.push(item);
                }
                if n > 0 {
                    parts.push(ws.clone());
                }
                parts.push(Expr::lit(close));
                done.push(Expr::seq(parts));
            }
        }
    }
    done.pop().unwrap_or(Expr::Nothing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_repr_matches_known_outputs() {
        for (f, s) in [
            (1.0, "1.0"),
            (1e20, "1e+20"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
        ] {
            assert_eq!(python_float_repr(f), s);
        }
    }
}

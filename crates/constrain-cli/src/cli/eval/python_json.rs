//! JSON text → the exact text Python's `json.dumps(json.loads(text), ensure_ascii=False)` gives.
//!
//! Input: JSON bytes (a JSONSchemaBench test file). Output: a [`PyValue`] tree that keeps what
//! Python keeps, and [`dumps`], which prints it with Python's `", "` / `": "` separators.
//!
//! Why not `serde_json::Value`: without serde_json's `arbitrary_precision` feature (not enabled
//! in this crate) an integer beyond 64 bits becomes an `f64`, while Python keeps every integer
//! exact. So this module parses JSON itself and mirrors `json.loads`:
//!
//! - A number without fraction or exponent is a Python `int`: printed with its exact digits
//!   (`-0` → `0`). Any other number is a Python `float` (`float(text)`, correctly rounded), printed
//!   as Python's `repr` does: the shortest digits that round-trip, in fixed notation when the
//!   decimal exponent is in -5 < e < 16 (`1.0`, `0.0001`, `1000000000000000.0`) and scientific
//!   otherwise with a signed two-digit-minimum exponent (`1e-05`, `1.5e-07`, `1e+16`). Overflow
//!   gives `Infinity`; `NaN`, `Infinity`, `-Infinity` are read and written as Python does.
//! - One exception: a finite float whose `repr` has another value than its text (more
//!   significant digits than a double holds: `972783798187987123879878123.188781371`) keeps its
//!   text. Its label is about the value written, which the constraint compares exactly; the
//!   rounded text may lie on the other side of a bound.
//! - A duplicate object key keeps its first position and takes the last value (a Python dict).
//! - Strings print raw (`ensure_ascii=False`) except `"` `\` and control characters below
//!   U+0020: `\n \r \t \b \f`, the rest as `\u00XX` (lowercase hex).
//! - A lone UTF-16 surrogate escape (`"\ud800"`) is legal for Python but cannot be encoded as
//!   UTF-8, so it is an error here ([`ParseError`]); the caller skips that instance.
//!
//! Nesting deeper than [`MAX_DEPTH`] is an error (both parsing and printing recurse).

use std::collections::HashMap;
use std::fmt::Write as _;

/// Deepest nesting accepted (Python's own recursion limit is about 1000).
pub(crate) const MAX_DEPTH: usize = 1000;

/// A JSON value as Python's `json.loads` holds it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PyValue {
    /// `None`.
    Null,
    /// `True` / `False`.
    Bool(bool),
    /// An `int`: its decimal digits with an optional leading `-`, exactly as written.
    Int(String),
    /// A `float`.
    Float(f64),
    /// A float that Python would round to another value: its text as written (see the
    /// module docs).
    Exact(String),
    /// A `str`.
    Str(String),
    /// A `list`.
    Array(Vec<PyValue>),
    /// A `dict` in insertion order.
    Object(Vec<(String, PyValue)>),
}

impl PyValue {
    /// Puts the members of every object inside (this one included) in a random order.
    pub(crate) fn shuffle_members(&mut self, rng: &mut impl rand::Rng) {
        use rand::seq::SliceRandom as _;
        match self {
            PyValue::Object(entries) => {
                entries.shuffle(rng);
                entries.iter_mut().for_each(|(_, v)| v.shuffle_members(rng));
            }
            PyValue::Array(items) => items.iter_mut().for_each(|v| v.shuffle_members(rng)),
            _ => {}
        }
    }

    /// The value of `key` if `self` is an object holding it.
    pub(crate) fn get(&self, key: &str) -> Option<&PyValue> {
        match self {
            PyValue::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Why a JSON text could not be read the way Python reads it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParseError {
    /// Not JSON (or trailing garbage), at this byte offset.
    #[error("invalid JSON at byte {offset}: {what}")]
    Syntax { offset: usize, what: &'static str },
    /// A lone surrogate escape: valid for Python, not encodable as UTF-8.
    #[error("string holds a lone UTF-16 surrogate at byte {0}; it cannot be encoded as UTF-8")]
    LoneSurrogate(usize),
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("JSON nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

/// Parses one JSON text (surrounding whitespace allowed).
pub(crate) fn parse(text: &[u8]) -> Result<PyValue, ParseError> {
    let mut p = Parser { text, pos: 0 };
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != text.len() {
        return Err(p.err("trailing characters after the value"));
    }
    Ok(v)
}

/// Prints `value` like `json.dumps(value, ensure_ascii=False)`.
///
/// Fails only on nesting deeper than [`MAX_DEPTH`] (impossible for a parsed value).
pub(crate) fn dumps(value: &PyValue) -> Result<String, ParseError> {
    let mut out = String::new();
    write_value(value, &mut out, 0)?;
    Ok(out)
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, what: &'static str) -> ParseError {
        ParseError::Syntax { offset: self.pos, what }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, word: &[u8]) -> bool {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<PyValue, ParseError> {
        if depth > MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(PyValue::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => {
                if self.eat(b"-Infinity") {
                    Ok(PyValue::Float(f64::NEG_INFINITY))
                } else {
                    self.number()
                }
            }
            Some(_) => {
                if self.eat(b"null") {
                    Ok(PyValue::Null)
                } else if self.eat(b"true") {
                    Ok(PyValue::Bool(true))
                } else if self.eat(b"false") {
                    Ok(PyValue::Bool(false))
                } else if self.eat(b"NaN") {
                    Ok(PyValue::Float(f64::NAN))
                } else if self.eat(b"Infinity") {
                    Ok(PyValue::Float(f64::INFINITY))
                } else {
                    Err(self.err("expected a value"))
                }
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<PyValue, ParseError> {
        self.pos += 1; // '{'
        let mut entries: Vec<(String, PyValue)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        self.skip_ws();
        if self.eat(b"}") {
            return Ok(PyValue::Object(entries));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a string key"));
            }
            let key = self.string()?;
            self.skip_ws();
            if !self.eat(b":") {
                return Err(self.err("expected ':'"));
            }
            self.skip_ws();
            let value = self.value(depth + 1)?;
            match index.get(&key) {
                Some(&i) => entries[i].1 = value,
                None => {
                    index.insert(key.clone(), entries.len());
                    entries.push((key, value));
                }
            }
            self.skip_ws();
            if self.eat(b",") {
                continue;
            }
            if self.eat(b"}") {
                return Ok(PyValue::Object(entries));
            }
            return Err(self.err("expected ',' or '}'"));
        }
    }

    fn array(&mut self, depth: usize) -> Result<PyValue, ParseError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.eat(b"]") {
            return Ok(PyValue::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            if self.eat(b",") {
                continue;
            }
            if self.eat(b"]") {
                return Ok(PyValue::Array(items));
            }
            return Err(self.err("expected ',' or ']'"));
        }
    }

    fn number(&mut self) -> Result<PyValue, ParseError> {
        let start = self.pos;
        let negative = self.eat(b"-");
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while matches!(self.peek(), Some(b'0'..=b'9')) {
                    self.pos += 1;
                }
            }
            _ => return Err(self.err("expected a digit")),
        }
        let int_end = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("expected a digit after '.'"));
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            is_float = true;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("expected a digit in the exponent"));
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        // Only ASCII digits, signs, '.', 'e' were consumed.
        let literal = std::str::from_utf8(&self.text[start..self.pos]).map_err(|_| self.err("bad number"))?;
        if is_float {
            let x: f64 = literal.parse().map_err(|_| self.err("bad number"))?;
            let exact = |t: &str| constrain::schema::number::Dec::parse(t);
            if x.is_finite() && exact(literal).is_some_and(|d| Some(d) != exact(&float_repr(x))) {
                return Ok(PyValue::Exact(literal.to_string()));
            }
            return Ok(PyValue::Float(x));
        }
        let digits = &literal[usize::from(negative)..int_end - start];
        if digits == "0" {
            return Ok(PyValue::Int("0".into()));
        }
        Ok(PyValue::Int(literal.to_string()))
    }

    /// Reads a string starting at the opening quote.
    fn string(&mut self) -> Result<String, ParseError> {
        self.pos += 1; // '"'
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.err("unterminated string"));
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    return String::from_utf8(out).map_err(|_| self.err("string is not valid UTF-8"));
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.err("unterminated escape"));
                    };
                    self.pos += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(self.err("unknown escape")),
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                0..=0x1f => return Err(self.err("control character in string")),
                _ => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    /// After `\u`: four hex digits, combined with a following `\uDC00`-`\uDFFF` escape when
    /// they are a high surrogate.
    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        let at = self.pos;
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) {
            if self.text[self.pos..].starts_with(b"\\u") {
                let save = self.pos;
                self.pos += 2;
                let second = self.hex4()?;
                if (0xDC00..0xE000).contains(&second) {
                    let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                    return char::from_u32(c).ok_or(ParseError::LoneSurrogate(at));
                }
                self.pos = save;
            }
            return Err(ParseError::LoneSurrogate(at));
        }
        char::from_u32(first).ok_or(ParseError::LoneSurrogate(at))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self.text.get(self.pos..self.pos + 4).ok_or_else(|| self.err("short \\u escape"))?;
        let mut v = 0u32;
        for &d in digits {
            let n = (d as char).to_digit(16).ok_or_else(|| self.err("bad hex digit in \\u escape"))?;
            v = v * 16 + n;
        }
        self.pos += 4;
        Ok(v)
    }
}

fn write_value(v: &PyValue, out: &mut String, depth: usize) -> Result<(), ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError::TooDeep);
    }
    match v {
        PyValue::Null => out.push_str("null"),
        PyValue::Bool(true) => out.push_str("true"),
        PyValue::Bool(false) => out.push_str("false"),
        PyValue::Int(digits) => out.push_str(digits),
        PyValue::Float(x) => out.push_str(&float_repr(*x)),
        PyValue::Exact(text) => out.push_str(text),
        PyValue::Str(s) => write_string(s, out),
        PyValue::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(item, out, depth + 1)?;
            }
            out.push(']');
        }
        PyValue::Object(entries) => {
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(key, out);
                out.push_str(": ");
                write_value(value, out, depth + 1)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)` as `json.dumps` prints it (`NaN` and `±Infinity` included).
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    constrain::schema::python_float_repr(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(text: &str) -> String {
        dumps(&parse(text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn floats_print_like_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1e20, "1e+20"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (1e100, "1e+100"),
            (12345.678, "12345.678"),
            (0.3333333333333333, "0.3333333333333333"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x:?}");
        }
    }

    #[test]
    fn numbers_follow_json_loads() {
        assert_eq!(py("[1, -0, 1.0, 1E5, 1e400, -1e400, 2.50]"), "[1, 0, 1.0, 100000.0, Infinity, -Infinity, 2.5]");
        // Integers keep every digit, beyond 64 bits too.
        assert_eq!(py("123456789012345678901234567890"), "123456789012345678901234567890");
        assert_eq!(py("-18446744073709551617"), "-18446744073709551617");
        assert_eq!(py("[NaN, Infinity, -Infinity]"), "[NaN, Infinity, -Infinity]");
        // A float a double cannot hold exactly keeps its text when rounding would change it.
        assert_eq!(
            py("[0.1, 1.50e-7, 972783798187987123879878123.188781371]"),
            "[0.1, 1.5e-07, 972783798187987123879878123.188781371]"
        );
    }

    #[test]
    fn separators_escapes_and_key_order() {
        assert_eq!(
            py(r#"{"b":[1,{"x":null}],"a":true , "c" : "q\"\\\/\n\t\u0001\u007f é\u00e9😀\ud83d\ude00"}"#),
            "{\"b\": [1, {\"x\": null}], \"a\": true, \"c\": \"q\\\"\\\\/\\n\\t\\u0001\u{7f} éé😀😀\"}"
        );
        // A duplicate key keeps its first position and its last value.
        assert_eq!(py(r#"{"a": 1, "b": 2, "a": 3}"#), r#"{"a": 3, "b": 2}"#);
        assert_eq!(py("[ ]"), "[]");
        assert_eq!(py("{ }"), "{}");
        assert_eq!(py("\"\\b\\f\\r\""), "\"\\b\\f\\r\"");
    }

    #[test]
    fn bad_json_is_an_error() {
        for bad in ["", "[1,]", "{\"a\" 1}", "01", "1.", "1e", "[1] x", "\"\u{1}\"", "tru", "\"\\x\"", "-", "{1: 2}"] {
            assert!(matches!(parse(bad.as_bytes()), Err(ParseError::Syntax { .. })), "{bad:?}");
        }
        assert!(matches!(parse(br#""\ud800""#), Err(ParseError::LoneSurrogate(_))));
        assert!(matches!(parse(br#""\udc00x""#), Err(ParseError::LoneSurrogate(_))));
        assert!(matches!(parse(br#""\ud800\u0041""#), Err(ParseError::LoneSurrogate(_))));
        let deep = "[".repeat(MAX_DEPTH + 5) + &"]".repeat(MAX_DEPTH + 5);
        assert_eq!(parse(deep.as_bytes()), Err(ParseError::TooDeep));
        let ok = "[".repeat(100) + &"]".repeat(100);
        assert_eq!(py(&ok), ok);
    }

    #[test]
    fn get_reads_object_members() {
        let v = parse(br#"{"valid": true, "data": {"x": 1}}"#).unwrap();
        assert_eq!(v.get("valid"), Some(&PyValue::Bool(true)));
        assert_eq!(v.get("missing"), None);
        assert_eq!(PyValue::Null.get("x"), None);
    }
}

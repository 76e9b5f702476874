//! Why a constraint refuses a document: the byte offset, line and column, the JSON pointer of
//! the value being read, and what the constraint allowed there.
//!
//! Input: a [`Constraint`] and a document's bytes. Output: an [`Explanation`]. Used by
//! `constrain check`, `constrain eval --explain` and the differential fuzzer.
//!
//! How: the whole document is first fed at once (the common, accepted case costs one pass);
//! when that fails it is fed again byte by byte to find the first refused byte, and every
//! byte value is tried at that point to list the allowed ones. The JSON pointer comes from a
//! small incremental tracker ([`JsonPath`], over the shared lexer [`crate::json`]) over the
//! accepted prefix; it assumes the prefix is JSON, which holds for constraints compiled from
//! a schema.
//!
//! ## Example
//!
//! ```rust
//! use constrain::explain::{explain, Verdict};
//! use constrain::schema::{self, Options};
//! use constrain::{Constraint, Limits, TokenIndex, Vocabulary};
//!
//! // Byte-level checking: a vocabulary of the 256 single bytes.
//! let index = TokenIndex::new(Vocabulary::bytes());
//! let schema = serde_json::json!({"type": "object", "properties": {"age": {"type": "integer"}}});
//! let grammar = schema::compile(&schema, &Options::default()).unwrap();
//! let c = Constraint::new(&grammar, index, &Limits::default()).unwrap();
//!
//! // `4.0` is an integer (draft 2020-12); `4.5` is refused where it ends: it could
//! // still have become `4.5e16`, an integer.
//! let e = explain(&c, br#"{"age": 4.5}"#, true);
//! assert_eq!(e.verdict, Verdict::Refused(b'}'));
//! assert_eq!((e.offset, e.pointer.as_deref()), (11, Some("/age")));
//! ```
use crate::json::{Container, Event, Lex};
use crate::matcher::{Constraint, Error};

/// How the constraint judged a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The whole document is accepted and the output may end there.
    Accepted,
    /// The byte at the offset is not allowed.
    Refused(u8),
    /// Every byte is allowed but the document cannot end there: it is a prefix.
    Incomplete,
    /// A parse limit cut a path before the refusal: no verdict (the hit names the limits
    /// and how to raise them).
    Limit(crate::automaton::LimitHit),
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Explanation {
    /// The verdict.
    pub verdict: Verdict,
    /// Byte offset of the refused byte (the document's length when incomplete or accepted).
    pub offset: usize,
    /// 1-based line of `offset`.
    pub line: usize,
    /// 1-based column of `offset`, in characters.
    pub column: usize,
    /// JSON pointer of the value being read at `offset` (when tracked).
    pub pointer: Option<String>,
    /// Bytes the constraint allowed at `offset` (256 flags).
    pub allowed: Vec<bool>,
    /// Whether the document may end at `offset`.
    pub may_end: bool,
}

impl Explanation {
    /// Whether the constraint accepted the document.
    pub fn accepted(&self) -> bool {
        self.verdict == Verdict::Accepted
    }

    /// The explanation as one or two human-readable lines.
    pub fn render(&self) -> String {
        self.render_with(|_| None)
    }

    /// [`Explanation::render`], naming a front end's option for each limit a
    /// [`Verdict::Limit`] reports (see [`crate::automaton::LimitHit::message`]).
    pub fn render_with(&self, flag: impl Fn(crate::automaton::ParseLimit) -> Option<&'static str>) -> String {
        let at = format!(
            "byte {} (line {}, column {}){}",
            self.offset,
            self.line,
            self.column,
            self.pointer.as_ref().map(|p| format!(", in the value at JSON pointer \"{p}\"")).unwrap_or_default()
        );
        let allowed = self.allowed_text();
        match &self.verdict {
            Verdict::Accepted => format!("accepted whole ({} bytes)", self.offset),
            Verdict::Refused(b) => format!("refused {} at {at}; allowed there: {allowed}", show_byte(*b)),
            Verdict::Incomplete => format!("incomplete: the document ends at {at}, but could continue with: {allowed}"),
            Verdict::Limit(hit) => format!("no verdict at {at}: {}", hit.message(flag)),
        }
    }

    /// The allowed set as readable character classes (plus "end of document").
    pub fn allowed_text(&self) -> String {
        let mut parts = byte_classes(&self.allowed);
        if self.may_end {
            parts.push("end of document".into());
        }
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(" ")
        }
    }
}

/// Judges `doc` against `constraint` at the byte level; with `track_json`, the pointer of the
/// value being read is reported (meaningful for schema constraints only).
pub fn explain(constraint: &Constraint, doc: &[u8], track_json: bool) -> Explanation {
    let mut m = constraint.matcher();
    let whole = if doc.is_empty() { Ok(()) } else { m.accept_bytes(doc) };
    let mut verdict = match whole {
        Ok(()) if m.is_accepting() => Verdict::Accepted,
        Ok(()) => Verdict::Incomplete,
        Err(Error::Limit(msg)) => Verdict::Limit(msg),
        Err(_) => Verdict::Refused(0),
    };
    let mut offset = doc.len();
    if !doc.is_empty() && verdict != Verdict::Accepted && verdict != Verdict::Incomplete {
        // Find the first refused byte.
        m.reset();
        for (i, &b) in doc.iter().enumerate() {
            match m.accept_bytes(&[b]) {
                Ok(()) => {}
                Err(Error::Limit(msg)) => {
                    verdict = Verdict::Limit(msg);
                    offset = i;
                    break;
                }
                Err(_) => {
                    verdict = match m.limit_error() {
                        Some(Error::Limit(msg)) => Verdict::Limit(msg),
                        _ => Verdict::Refused(b),
                    };
                    offset = i;
                    break;
                }
            }
        }
    } else if doc.is_empty() {
        m.reset();
    }
    if verdict == Verdict::Incomplete {
        if let Some(Error::Limit(msg)) = m.limit_error() {
            verdict = Verdict::Limit(msg);
        }
    }
    let mut allowed = vec![false; 256];
    let may_end = m.is_accepting();
    if verdict != Verdict::Accepted {
        for (b, slot) in allowed.iter_mut().enumerate() {
            if m.accept_bytes(&[b as u8]).is_ok() {
                *slot = true;
                let _ = m.rollback(1);
            }
        }
    }
    let prefix = doc.get(..offset).unwrap_or(doc);
    let (line, column) = line_column(prefix);
    let pointer = track_json.then(|| {
        let mut p = JsonPath::default();
        prefix.iter().for_each(|&b| p.push(b));
        p.pointer()
    });
    Explanation { verdict, offset, line, column, pointer, allowed, may_end }
}

/// 1-based line and column (in characters) just after `prefix`.
pub fn line_column(prefix: &[u8]) -> (usize, usize) {
    let line_start = prefix.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let line = prefix.iter().filter(|&&b| b == b'\n').count() + 1;
    let tail = prefix.get(line_start..).unwrap_or(&[]);
    // Characters: bytes that are not UTF-8 continuation bytes.
    let column = tail.iter().filter(|&&b| b & 0xC0 != 0x80).count() + 1;
    (line, column)
}

/// One byte for a message: a quoted character when printable ASCII, an escape otherwise.
pub fn show_byte(b: u8) -> String {
    match b {
        b'\n' => "'\\n'".into(),
        b'\r' => "'\\r'".into(),
        b'\t' => "'\\t'".into(),
        b'\'' => "'\\''".into(),
        0x21..=0x7E | b' ' => format!("'{}'", b as char),
        _ => format!("0x{b:02X}"),
    }
}

/// The set bytes of `allowed` as ranges: `'0'-'9'`, `'"'`, and for non-ASCII bytes a named
/// UTF-8 role (lead or continuation bytes) with the range.
pub fn byte_classes(allowed: &[bool]) -> Vec<String> {
    let mut out = Vec::new();
    let mut b = 0usize;
    while b < allowed.len().min(256) {
        if !allowed[b] {
            b += 1;
            continue;
        }
        let lo = b;
        // Runs do not cross the ASCII / continuation / lead boundaries, so each run gets one name.
        let group_end = match lo {
            0x00..=0x7F => 0x7F,
            0x80..=0xBF => 0xBF,
            _ => 0xFF,
        };
        while b < group_end && allowed.get(b + 1).copied().unwrap_or(false) {
            b += 1;
        }
        let hi = b;
        let range =
            if lo == hi { show_byte(lo as u8) } else { format!("{}-{}", show_byte(lo as u8), show_byte(hi as u8)) };
        out.push(match lo {
            0x80..=0xBF => format!("UTF-8 continuation bytes {range}"),
            0xC0..=0xFF => format!("non-ASCII characters (lead bytes {range})"),
            _ => range,
        });
        b += 1;
    }
    out
}

/// Tracks the JSON pointer of the value being read, one byte at a time, over a prefix of a
/// JSON document (no validation: it trusts the constraint to have checked the syntax). The
/// structure comes from the shared lexer ([`crate::json::Lex`]); this keeps the pointer's
/// parts: each open container's current key or index.
#[derive(Clone, Debug, Default)]
pub struct JsonPath {
    lex: Lex,
    stack: Vec<Segment>,
    /// The key being read (escapes decoded but for `\u`, kept as written).
    key: Vec<u8>,
}

/// An open container's part of the pointer.
#[derive(Clone, Debug)]
enum Segment {
    /// An object: the current member's key, once complete.
    Object { key: Option<String> },
    /// An array: the current element's index, and whether that element has started.
    Array { index: usize, started: bool },
}

impl Container for Segment {
    fn is_object(&self) -> bool {
        matches!(self, Segment::Object { .. })
    }
}

impl JsonPath {
    /// Consumes one byte of the document.
    pub fn push(&mut self, b: u8) {
        let before = self.lex;
        match self.lex.step(b, &self.stack) {
            Event::None => {
                if let Lex::Str { key: true, esc } = before {
                    match (esc, b) {
                        (0, b'\\') => {}
                        (1, b'u') => self.key.extend_from_slice(b"\\u"),
                        (1, b'n') => self.key.push(b'\n'),
                        (1, b't') => self.key.push(b'\t'),
                        (1, b'r') => self.key.push(b'\r'),
                        (1, b'b') => self.key.push(8),
                        (1, b'f') => self.key.push(12),
                        _ => self.key.push(b),
                    }
                }
            }
            Event::Begin => {
                if let Some(Segment::Array { started, .. }) = self.stack.last_mut() {
                    *started = true;
                }
                match b {
                    b'{' => self.stack.push(Segment::Object { key: None }),
                    b'[' => self.stack.push(Segment::Array { index: 0, started: false }),
                    _ => {}
                }
            }
            Event::KeyStart => self.key.clear(),
            Event::KeyEnd => {
                if let Some(Segment::Object { key }) = self.stack.last_mut() {
                    *key = Some(String::from_utf8_lossy(&self.key).into_owned());
                }
            }
            Event::Comma => match self.stack.last_mut() {
                Some(Segment::Object { key }) => *key = None,
                Some(Segment::Array { index, started }) => {
                    *index += 1;
                    *started = false;
                }
                None => {}
            },
            Event::Close => {
                self.stack.pop();
            }
            Event::ScalarEnd => {}
            // The byte after a number is read again, after it.
            Event::NumberEnd => self.push(b),
        }
    }

    /// The pointer of the value being read ("" for the root): an object member's key once
    /// the key is complete, an array element's index once the element has started.
    pub fn pointer(&self) -> String {
        let mut out = String::new();
        for c in &self.stack {
            match c {
                Segment::Object { key: Some(k) } => {
                    out.push('/');
                    out.push_str(&k.replace('~', "~0").replace('/', "~1"));
                }
                Segment::Array { index, started: true } => {
                    out.push('/');
                    out.push_str(&index.to_string());
                }
                _ => break,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(prefix: &str) -> String {
        let mut p = JsonPath::default();
        prefix.bytes().for_each(|b| p.push(b));
        p.pointer()
    }

    #[test]
    fn pointers_follow_the_prefix() {
        assert_eq!(path_of(""), "");
        assert_eq!(path_of("{\"a\": "), "/a");
        assert_eq!(path_of("{\"a\": [1, {\"b/c\": \"x"), "/a/1/b~1c");
        assert_eq!(path_of("{\"a\": [1, "), "/a");
        assert_eq!(path_of("{\"a\": 1, \"b"), "");
        assert_eq!(path_of("{\"a\": {\"x\": 1}, \"b\": [[], 3"), "/b/1");
        assert_eq!(path_of("{\"q\\\"\": 2"), "/q\"");
        assert_eq!(path_of("{\"a\\u0041\\n\": [true, {\"b\": -1.5e3"), "/a\\u0041\n/1/b");
        assert_eq!(path_of("{\"a\": [null, 12]"), "/a");
        assert_eq!(path_of("[3, 4]  "), "");
    }

    #[test]
    fn classes_are_readable() {
        let mut a = vec![false; 256];
        for b in b'0'..=b'9' {
            a[b as usize] = true;
        }
        a[b'"' as usize] = true;
        a[0xC2..=0xF4].fill(true);
        assert_eq!(byte_classes(&a), vec!["'\"'", "'0'-'9'", "non-ASCII characters (lead bytes 0xC2-0xF4)"]);
        assert_eq!(line_column(b"ab\ncd\xC3\xA9"), (2, 4));
    }
}

//! The incremental JSON structure lexer shared by [`crate::explain`]'s pointer tracker and
//! the run-time checks' tracker (in `constrain-jsonschema`): one byte at a time, it follows
//! where a JSON document is (a value expected, inside a key, a string, a number, a literal,
//! between members) and says what each byte did ([`Event`]): a value began, a key began or
//! ended, a container closed, a scalar completed.
//!
//! It knows JSON *syntax* only, never a schema, and it trusts its input: the constraints
//! that feed it keep the output JSON, so it follows structure without judging it (a byte
//! JSON does not allow somewhere is passed over or read leniently, never an error).
//!
//! The lexer is the state between two bytes ([`Lex`], two bytes, `Copy`); the stack of open
//! containers stays with the caller, which pushes on [`Event::Begin`] of `{`/`[` and pops on
//! [`Event::Close`], and which the lexer reads (through [`Container`]) only where the next
//! state depends on it: whether a `,` separates members or elements, and whether a
//! completed value was the document's. Why not own the stack here: the checks' containers
//! carry their own data (schema positions, key offsets and hashes), are snapshotted per
//! token and copied per simulated token on the decode hot path; a second stack to keep in
//! step would cost a copy and a push per container there, and give the caller nothing it
//! does not have. The keys' text and the arrays' indices are kept by the callers for the
//! same reason: `explain` decodes keys into strings, the checks hash spans of the output.
//!
//! Per byte the lexer allocates nothing and reads at most the innermost container.
//!
//! ```rust
//! use constrain_core::json::{Container, Event, Lex};
//!
//! struct Open(bool);
//! impl Container for Open {
//!     fn is_object(&self) -> bool {
//!         self.0
//!     }
//! }
//!
//! let (mut lex, mut stack): (Lex, Vec<Open>) = (Lex::default(), Vec::new());
//! let mut events = Vec::new();
//! for &b in br#"{"a": 12}"# {
//!     loop {
//!         let e = lex.step(b, &stack);
//!         match e {
//!             Event::Begin if b == b'{' || b == b'[' => stack.push(Open(b == b'{')),
//!             Event::Close => {
//!                 stack.pop();
//!             }
//!             _ => {}
//!         }
//!         if e != Event::None {
//!             events.push(e);
//!         }
//!         // A number ends before the byte that cannot continue it: read that byte again.
//!         if e != Event::NumberEnd {
//!             break;
//!         }
//!     }
//! }
//! use Event::*;
//! assert_eq!(events, [Begin, KeyStart, KeyEnd, Begin, NumberEnd, Close]);
//! assert_eq!(lex, Lex::Done);
//! ```

/// The lexical state between two bytes of a JSON document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Lex {
    /// A value is expected (the document's start, after `:`, after `,` in an array).
    #[default]
    Value,
    /// Right after `[`: a value or `]`.
    ArrOpen,
    /// Right after `{`: a key or `}`.
    ObjOpen,
    /// After `,` in an object: a key.
    ObjKey,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    After,
    /// Inside a string (an object key when `key`); `esc` is 0, 1 after a backslash, or
    /// 10 + the hex digits left of a `\u` escape.
    Str {
        /// The string is an object key.
        key: bool,
        /// The escape being read (see the variant).
        esc: u8,
    },
    /// Inside a number (it completes at the first byte that cannot continue it).
    Num,
    /// Inside `true`/`false`/`null`, with this many letters left.
    Lit(u8),
    /// The document's value is complete.
    Done,
}

/// What one byte did (see [`Lex::step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Nothing structural: whitespace, a `:`, a string's, number's or literal's inner
    /// bytes, or a byte out of place.
    None,
    /// A value begins with this byte: `{` or `[` opens a container (the caller pushes it),
    /// any other byte a scalar.
    Begin,
    /// `"` begins an object key.
    KeyStart,
    /// `"` ends an object key.
    KeyEnd,
    /// `,` ends a member (in an object) or an element (in an array).
    Comma,
    /// `}` or `]` closes the innermost container (the caller pops it).
    Close,
    /// The string or literal being read completes with this byte.
    ScalarEnd,
    /// The number being read completed just before this byte, which is *not* consumed:
    /// the caller feeds it again, in the state after the number.
    NumberEnd,
}

/// An open object or array on the caller's stack, as [`Lex::step`] reads it.
pub trait Container {
    /// Whether it is an object (not an array).
    fn is_object(&self) -> bool;
}

/// Whether `b` is JSON whitespace.
#[inline]
pub fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl Lex {
    /// Reads byte `b`, with `open` the caller's stack of open containers (outermost first)
    /// as it stands before the byte. The state moves on first: on [`Event::Begin`] it is
    /// already inside the new value, on [`Event::Close`] and on the completion of a scalar
    /// already after the value (at the top level: [`Lex::Done`]).
    #[inline]
    pub fn step<C: Container>(&mut self, b: u8, open: &[C]) -> Event {
        match *self {
            Lex::Value => {
                if is_ws(b) {
                    Event::None
                } else {
                    self.begin(b)
                }
            }
            Lex::ArrOpen => match b {
                _ if is_ws(b) => Event::None,
                b']' => self.close(open),
                _ => self.begin(b),
            },
            Lex::ObjOpen | Lex::ObjKey => match b {
                b'"' => {
                    *self = Lex::Str { key: true, esc: 0 };
                    Event::KeyStart
                }
                b'}' if *self == Lex::ObjOpen => self.close(open),
                _ => Event::None,
            },
            Lex::Colon => {
                if b == b':' {
                    *self = Lex::Value;
                }
                Event::None
            }
            Lex::After => match b {
                b',' => {
                    *self = if open.last().is_some_and(C::is_object) { Lex::ObjKey } else { Lex::Value };
                    Event::Comma
                }
                b']' | b'}' => self.close(open),
                _ => Event::None,
            },
            Lex::Str { key, esc } => {
                let esc = match esc {
                    0 if b == b'\\' => 1,
                    0 if b == b'"' => {
                        if key {
                            *self = Lex::Colon;
                            return Event::KeyEnd;
                        }
                        *self = Lex::after_value(open.len());
                        return Event::ScalarEnd;
                    }
                    0 => 0,
                    1 if b == b'u' => 14,
                    1 => 0,
                    11 => 0,
                    n => n - 1,
                };
                *self = Lex::Str { key, esc };
                Event::None
            }
            Lex::Num => {
                if matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    return Event::None;
                }
                *self = Lex::after_value(open.len());
                Event::NumberEnd
            }
            Lex::Lit(left) => {
                if left <= 1 {
                    *self = Lex::after_value(open.len());
                    return Event::ScalarEnd;
                }
                *self = Lex::Lit(left - 1);
                Event::None
            }
            Lex::Done => Event::None,
        }
    }

    /// Whether the state is inside a string, a number or a literal (not between tokens,
    /// where whitespace may come).
    #[inline]
    pub fn in_scalar(self) -> bool {
        matches!(self, Lex::Str { .. } | Lex::Num | Lex::Lit(_))
    }

    /// A value begins with `b`.
    #[inline]
    fn begin(&mut self, b: u8) -> Event {
        *self = match b {
            b'{' => Lex::ObjOpen,
            b'[' => Lex::ArrOpen,
            b'"' => Lex::Str { key: false, esc: 0 },
            b'f' => Lex::Lit(4),
            b't' | b'n' => Lex::Lit(3),
            _ => Lex::Num,
        };
        Event::Begin
    }

    /// The innermost container closes (nothing happens with none open).
    #[inline]
    fn close<C>(&mut self, open: &[C]) -> Event {
        if open.is_empty() {
            return Event::None;
        }
        *self = Lex::after_value(open.len() - 1);
        Event::Close
    }

    /// The state after a complete value with `depth` containers open around it.
    #[inline]
    fn after_value(depth: usize) -> Lex {
        if depth == 0 {
            Lex::Done
        } else {
            Lex::After
        }
    }
}

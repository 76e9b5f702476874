//! ECMA-262, the regular-expression dialect of JSON Schema's `pattern` and
//! `patternProperties`: everything the compiler and the run-time checks do with it.
//!
//! The engine below (`constrain-core`) reads Rust `regex` syntax only; this module is the
//! seam. A pattern is first rewritten into Rust syntax that matches the same strings
//! ([`to_rust`]: `\d` is `[0-9]`, `\w` is ASCII, `.` excludes line terminators, a stray `{`
//! is a literal, `\uXXXX` escapes), then handed to the core:
//!
//! - [`to_expr`]: the pattern as a grammar expression ([`crate::grammar::regex::to_expr`] on
//!   the translation), with JSON Schema's search semantics under [`RegexOptions::search`];
//! - [`regex`] and [`is_match`]: the pattern compiled for matching texts (which
//!   `patternProperties` a property name falls under);
//! - [`lookaround`]: the patterns with look-around assertions that are still regular, as
//!   automata (Rust syntax has no look-around, so these never reach the core as text);
//! - `portable.rs`: patterns respelled so that the `jsonschema` crate's validators, which
//!   the run-time checks use, read them as ECMA-262 does.
//!
//! ```rust
//! use constrain::grammar::regex::RegexOptions;
//! use constrain::schema::ecma;
//!
//! // `\d` is ASCII in ECMA-262 (Unicode in Rust `regex` syntax).
//! assert!(ecma::is_match(r"^\d+$", "42")? && !ecma::is_match(r"^\d+$", "٤٢")?);
//! let expr = ecma::to_expr(r"^\d+$", &RegexOptions::search())?;
//! let mut b = constrain::grammar::GrammarBuilder::new();
//! let root = b.add("root", expr);
//! let pda = constrain::automaton::Pda::build(&b.build(root)?, &constrain::Limits::default())?;
//! assert!(pda.matches(b"42") && !pda.matches("٤٢".as_bytes()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod lookaround;
mod portable;
mod translate;

pub(crate) use portable::ecma_portable;
pub use translate::to_rust;

use crate::grammar::regex::{self as core_regex, unsupported, RegexOptions};
use crate::grammar::{Error, Expr};

/// ECMA-262 whitespace (`\s`), as the inside of a character class, in the `\uXXXX` escapes
/// that both `regex-syntax` and ECMA-262 read (so the run-time checks can hand it to the
/// `jsonschema` crate, which refuses `\x{…}` as not ECMA-262).
pub const SPACE: &str = r"\t\n\x0B\x0C\r \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF";
/// ECMA-262's `\d`, as the inside of a character class.
pub const DIGIT: &str = "0-9";
/// ECMA-262's `\w` (ASCII only), as the inside of a character class.
pub const WORD: &str = "0-9A-Za-z_";

/// Converts an ECMA-262 `pattern` into an expression over characters: [`to_rust`], then the
/// core's [`crate::grammar::regex::translated_to_expr`] (whose errors quote `pattern` as
/// written). `opts` as there: [`RegexOptions::search`] for what a JSON Schema `pattern` means.
pub fn to_expr(pattern: &str, opts: &RegexOptions) -> Result<Expr, Error> {
    core_regex::translated_to_expr(&to_rust(pattern)?, pattern, opts)
}

/// Whether an ECMA-262 `pattern` (search semantics, as in JSON Schema) matches `text`.
/// Used to decide which `patternProperties` a named property falls under.
pub fn is_match(pattern: &str, text: &str) -> Result<bool, Error> {
    Ok(regex(pattern)?.is_match(text))
}

/// An ECMA-262 `pattern` (search semantics) compiled for matching many texts: the run-time
/// checks ([`crate::check`]) use it to find the `patternProperties` a generated key falls
/// under.
pub fn regex(pattern: &str) -> Result<regex_automata::meta::Regex, Error> {
    let translated = to_rust(pattern)?;
    // A full DFA is not worth building for a few matches; the lazy DFA/NFA engines suffice.
    regex_automata::meta::Regex::builder()
        .configure(regex_automata::meta::Regex::config().dfa(false).onepass(false).backtrack(false))
        .build(&translated)
        .map_err(|e| unsupported(format!("pattern {pattern:?} does not compile: {e}")))
}

//! GBNF, llama.cpp's grammar format: text → [`Grammar`] ([`parse`]) and back ([`to_gbnf`]).
//!
//! Input: GBNF text such as the files in the repository's `grammars/` folder, or a grammar
//! written by hand. Output: a [`Grammar`] with one rule per GBNF rule (groups and repetitions
//! stay inside the rule's [`Expr`](super::Expr)), whose start rule is `root`. [`to_gbnf`] goes the other way
//! for any [`Grammar`] (this is how `constrain grammar --schema` shows what a schema compiles
//! to), and `parse(&to_gbnf(g))` accepts exactly the strings `g` accepts.
//!
//! ## The dialect
//!
//! ```text
//! # A comment runs to the end of the line.
//! root   ::= "[" ws ( item ( "," ws item )* )? "]"
//! item   ::= [a-z]+ | num
//! num    ::= "-"? [0-9]{1,6}        # {m}  {m,}  {m,n}  as well as  *  +  ?
//! ws     ::= | " " | "\n" [ \t]{0,20}
//! ```
//!
//! - **Rules**: `name ::= alternatives`. Names use `a-z A-Z 0-9 - _`. A rule runs until the
//!   next `name ::=` (or the end of the text), so a rule may span several lines; newlines are
//!   plain whitespace everywhere. Defining a rule twice is an error. The start rule is `root`;
//!   a grammar without one is an error, and so is a reference to a rule that is never defined.
//! - **Expressions**: sequences (juxtaposition), alternation `|`, grouping `( … )`, postfix
//!   `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` (counts up to `u32::MAX`; large counts are cheap, the
//!   automaton keeps a counter). Operators may be stacked (`"a"?*`), at most four in a row. An empty alternative (`a ::= | "x"`) matches the empty string.
//! - **Literals**: `"…"` with escapes `\n \t \r \\ \" \[ \] \xNN \uNNNN \UNNNNNNNN`. Characters
//!   are Unicode code points matched as their UTF-8 bytes: as in llama.cpp, `\xNN` is the code
//!   point U+00NN (so `"\xE9"` is `é`, two bytes), not a raw byte. Surrogates and values above
//!   U+10FFFF are errors.
//! - **Character classes**: `[abc]`, ranges `[a-z0-9]`, negation `[^"\\]` (every code point in
//!   U+0000..=U+10FFFF, surrogates excluded, that is not listed), the same escapes as literals;
//!   `.` is any code point. An empty class `[]` matches nothing.
//! - **Raw bytes** (an extension; llama.cpp has no way to write them): `%xNN` matches the single
//!   byte 0xNN and `%xNN-MM` one byte in that range, as in ABNF. [`to_gbnf`] uses them for
//!   [`Expr::Bytes`](super::Expr::Bytes) ranges above 0x7F and for literal bytes that are not valid UTF-8 (which
//!   code-point syntax cannot express exactly); grammars written for llama.cpp never contain
//!   them, and llama.cpp rejects them rather than misreading them.
//! - **Not supported**: llama.cpp's token references (`<[1234]>`, `<think>`) are an error.
//!
//! **Left recursion** (`expr ::= expr "+" term | term`) parses fine here but is rejected when
//! the grammar is compiled: [`crate::automaton::Pda::build`] returns
//! [`crate::automaton::Error::LeftRecursion`] naming the rule. Write such rules with repetition
//! instead: `expr ::= term ("+" term)*`.
//!
//! Errors carry the rule being parsed and the 1-based line and column (in characters) of the
//! problem; parsing never panics and its recursion depth is bounded ([`MAX_GROUP_DEPTH`]).
//!
//! Cost: parsing and printing are linear in the text / grammar size.
//!
//! ## Example
//!
//! ```rust
//! use constrain::grammar::gbnf;
//!
//! let g = gbnf::parse("root ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [0-9]+\n").unwrap();
//! let text = gbnf::to_gbnf(&g);
//! // Printing and parsing again gives a grammar with the same rules.
//! assert_eq!(gbnf::parse(&text).unwrap().rules().len(), g.rules().len());
//! ```

mod parser;
mod printer;
#[cfg(test)]
mod tests;

use super::{Error, Grammar};

pub use parser::MAX_GROUP_DEPTH;

/// Parses GBNF text into a [`Grammar`] whose start rule is `root`.
///
/// Errors (a [`super::ErrorKind::Syntax`], [`super::ErrorKind::UnknownRule`] or
/// [`super::ErrorKind::BadRange`]) carry the rule and the line and column of the problem.
pub fn parse(text: &str) -> Result<Grammar, Error> {
    parser::parse(text)
}

/// Prints any [`Grammar`] as GBNF that [`parse`] reads back to a grammar accepting the same
/// strings.
///
/// The start rule is printed first and named `root`; other rule names are kept where they are
/// valid GBNF names and otherwise rewritten (invalid characters become `-`, clashes get a
/// numeric suffix). Raw bytes that are not UTF-8 text are printed with the `%xNN` extension
/// (see the module documentation).
pub fn to_gbnf(grammar: &Grammar) -> String {
    printer::to_gbnf(grammar)
}

/// Sorted, merged code point ranges, treating the surrogate gap as contiguous (so `U+D7FF`
/// and `U+E000` are neighbours). Shared by the parser (negation) and printer.
pub(crate) mod charset {
    /// Highest Unicode scalar value.
    pub const MAX: u32 = 0x10FFFF;
    /// First and last surrogate code points (not characters).
    pub const SURROGATES: (u32, u32) = (0xD800, 0xDFFF);

    /// The next scalar value after `c`, skipping the surrogates.
    fn next(c: u32) -> u32 {
        if c + 1 == SURROGATES.0 {
            SURROGATES.1 + 1
        } else {
            c + 1
        }
    }

    /// The scalar value before `c`, skipping the surrogates.
    fn prev(c: u32) -> u32 {
        if c == SURROGATES.1 + 1 {
            SURROGATES.0 - 1
        } else {
            c - 1
        }
    }

    /// Sorts and merges ranges of scalar values (ranges may span the surrogate gap).
    pub fn normalize(mut ranges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
        ranges.retain(|&(a, b)| a <= b);
        ranges.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if a <= last.1 || a == next(last.1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        out
    }

    /// Every scalar value in `0..=MAX` not in the (normalized) `ranges`.
    pub fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut lo = 0u32;
        for &(a, b) in ranges {
            if a > lo {
                out.push((lo, prev(a)));
            }
            if b >= MAX {
                return out;
            }
            lo = next(b);
        }
        out.push((lo, MAX));
        out
    }

    /// Converts ranges of scalar values to `char` ranges (endpoints off the surrogates are
    /// always valid; a range spanning the gap is a valid `char` range too).
    pub fn to_chars(ranges: &[(u32, u32)]) -> Vec<(char, char)> {
        ranges.iter().filter_map(|&(a, b)| Some((char::from_u32(a)?, char::from_u32(b)?))).collect()
    }
}

//! Stage 1: JSON Schema → [`Grammar`] (being written).
use crate::grammar::Grammar;

/// How much whitespace the generated JSON may contain between tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Whitespace {
    /// No whitespace at all: `{"a":1}`.
    Compact,
    /// The usual pretty-printing whitespace (a space after `,`/`:`, newlines with indentation),
    /// but bounded so a model can never loop on whitespace.
    #[default]
    Pretty,
    /// Any JSON whitespace, unbounded (for validating arbitrary text, not for generation).
    Unbounded,
}

/// Options for compiling a schema.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Whitespace policy between JSON tokens.
    pub whitespace: Whitespace,
    /// Forbid properties the schema does not name (as if `additionalProperties: false`
    /// wherever it is absent).
    pub strict: bool,
    /// Documented lenient mode: ignore unsupported keywords instead of failing.
    pub lenient: bool,
}

/// Why a schema could not be compiled: the JSON pointer of the offending keyword and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct Error {
    pointer: String,
    keyword: String,
    message: String,
}

impl Error {
    /// JSON pointer of the offending keyword, e.g. `/properties/age/minimum`.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }
    /// The keyword at fault (e.g. `"not"`), for grouping errors in reports.
    pub fn keyword(&self) -> &str {
        &self.keyword
    }
}

/// Compiles a JSON Schema into a grammar whose start rule matches exactly the JSON texts
/// (under `options.whitespace`) that validate against the schema.
pub fn compile(_schema: &serde_json::Value, _options: &Options) -> Result<Grammar, Error> {
    Err(Error { pointer: String::new(), keyword: String::new(), message: "schema compiler not written yet".into() })
}

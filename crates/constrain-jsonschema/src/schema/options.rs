//! What a compile takes and gives besides the grammar: the [`Options`], and the
//! [`Note`]s and [`Error`]s located at a keyword of the schema.

use super::dialect;
use super::pointers::escape_pointer;
use serde_json::Value;

/// How much whitespace the generated JSON may contain between tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// Options for compiling a schema. `#[non_exhaustive]`: build it from `Options::default()`
/// and the `with_*` methods, so new options do not break callers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// Whitespace policy between JSON tokens.
    pub whitespace: Whitespace,
    /// Forbid properties the schema does not name (as if `additionalProperties: false`
    /// wherever it is absent).
    pub strict: bool,
    /// Documented lenient mode: ignore unsupported keywords instead of failing, and treat a
    /// `oneOf` whose branches may overlap as `anyOf`. The grammar may then accept invalid
    /// instances.
    pub lenient: bool,
    /// Forces a dialect; `None`: the one `$schema` names (2020-12 without it). See
    /// [`dialect`].
    pub draft: Option<dialect::Draft>,
    /// Enforce the keywords a grammar cannot express with run-time checks ([`crate::check`])
    /// instead of refusing them. Default true; `false` refuses them with an [`Error`].
    pub runtime_checks: bool,
    /// Named properties only in the order the schema lists them (default false). Accepts
    /// less than the schema: for the preference of [`order_hint`](super::order_hint), never for a constraint.
    pub schema_order: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            whitespace: Whitespace::default(),
            strict: false,
            lenient: false,
            draft: None,
            runtime_checks: true,
            schema_order: false,
        }
    }
}

impl Options {
    /// Sets [`Options::whitespace`].
    pub fn with_whitespace(mut self, whitespace: Whitespace) -> Self {
        self.whitespace = whitespace;
        self
    }

    /// Sets [`Options::strict`].
    pub fn with_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Sets [`Options::lenient`].
    pub fn with_lenient(mut self, lenient: bool) -> Self {
        self.lenient = lenient;
        self
    }

    /// Sets [`Options::draft`].
    pub fn with_draft(mut self, draft: Option<dialect::Draft>) -> Self {
        self.draft = draft;
        self
    }

    /// Sets [`Options::runtime_checks`].
    pub fn with_runtime_checks(mut self, on: bool) -> Self {
        self.runtime_checks = on;
        self
    }
}

/// A message about one keyword of a schema: the keyword's JSON pointer (in the schema as
/// written), the keyword, and the text. Shared by [`Note`] and [`Error`], which differ only in
/// what the message means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub(super) pointer: String,
    pub(super) keyword: String,
    pub(super) message: String,
}

impl Located {
    /// A message about `keyword` of the schema at pointer `at`.
    pub(super) fn new(at: &str, keyword: &str, message: impl Into<String>) -> Self {
        Located {
            pointer: format!("{at}/{}", escape_pointer(keyword)),
            keyword: keyword.to_string(),
            message: message.into(),
        }
    }
    /// Points the message at the schema as written (`written`), from the canonical form's
    /// pointer: see [`super::dialect::as_written`]. A renamed keyword gets its written name.
    pub(super) fn point_as_written(&mut self, written: &Value) {
        let pointer = super::dialect::as_written(written, &self.pointer);
        let last = |p: &str| p.rsplit_once('/').map(|(_, k)| k.replace("~1", "/").replace("~0", "~"));
        if !self.keyword.is_empty() && last(&self.pointer).as_deref() == Some(self.keyword.as_str()) {
            if let Some(k) = last(&pointer) {
                self.keyword = k;
            }
        }
        self.pointer = pointer;
    }
    /// JSON pointer of the keyword, e.g. `/properties/age/minimum`.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }
    /// The keyword (e.g. `"not"`), for grouping messages in reports.
    pub fn keyword(&self) -> &str {
        &self.keyword
    }
    /// The message, without the pointer.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.pointer, self.message)
    }
}

/// Something a successful compilation wants said, at the keyword's JSON pointer: a
/// documented subset (the grammar accepts *less* than the schema, as documented) or a
/// warning (something the user should act on); [`Note::is_warning`] tells which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub(super) at: Located,
    pub(super) warning: bool,
}

impl Note {
    /// A documented subset at `keyword` of the schema at pointer `at`.
    pub(crate) fn new(at: &str, keyword: &str, message: impl Into<String>) -> Self {
        Note { at: Located::new(at, keyword, message), warning: false }
    }

    /// A warning at `keyword` of the schema at pointer `at`.
    pub(crate) fn warning(at: &str, keyword: &str, message: impl Into<String>) -> Self {
        Note { at: Located::new(at, keyword, message), warning: true }
    }

    /// Whether the user should act on this note (an unknown `$schema`, say), rather than
    /// read it as a documented subset: front ends show warnings always, subsets on request.
    pub fn is_warning(&self) -> bool {
        self.warning
    }
}

impl std::ops::Deref for Note {
    type Target = Located;
    fn deref(&self) -> &Located {
        &self.at
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.at.fmt(f)
    }
}

/// Why a schema could not be compiled: the JSON pointer of the offending keyword and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(pub(super) Located);

impl Error {
    /// An error about `keyword` of the schema at pointer `at`.
    pub(crate) fn new(at: &str, keyword: &str, message: impl Into<String>) -> Self {
        Error(Located::new(at, keyword, message))
    }
}

impl std::ops::Deref for Error {
    type Target = Located;
    fn deref(&self) -> &Located {
        &self.0
    }
}

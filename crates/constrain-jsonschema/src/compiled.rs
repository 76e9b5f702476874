//! The front end's entry point: [`compile`] runs the schema compiler ([`crate::schema`]),
//! builds the run-time checks ([`crate::check`]) for what it left out, and returns both as a
//! [`Compiled`], which becomes a constraint. It sits above both modules, so that neither
//! imports the other's caller: the checks read the schema compiler's helpers, and the schema
//! compiler knows nothing of the checks.

use crate::check::ValueChecks;
use crate::grammar::Grammar;
use crate::matcher::{ConstraintSource, Error as MatchError, RuntimeChecks};
use crate::schema::{dialect, lower, order_hint, Error, Lowered, Note, Options, Relaxed};
use crate::{Constraint, Limits, TokenIndex};
use serde_json::Value;
use std::sync::Arc;

/// A compiled schema: the grammar, the run-time checks for the keywords the grammar could
/// not say, and the notes on where the grammar accepts less than the schema.
///
/// It is a [`ConstraintSource`]: [`Constraint::new`] on it (or [`Compiled::constraint`])
/// takes the checks along. It deliberately does not dereference to its [`Grammar`]: a
/// constraint built from [`Compiled::grammar`] alone would accept more than the schema
/// wherever there are checks.
#[derive(Clone, Debug)]
pub struct Compiled {
    grammar: Grammar,
    checks: Option<Arc<ValueChecks>>,
    notes: Vec<Note>,
}

/// Compiles a JSON Schema: a grammar whose start rule matches JSON texts (under
/// `options.whitespace`) that validate against the schema, the run-time checks for the
/// keywords it could not say, and the [`Note`]s on where it accepts less than the schema
/// allows (e.g. host names without A-labels). Build the constraint from the result
/// ([`Compiled::constraint`] or [`Constraint::new`]), so the checks come along.
pub fn compile(schema: &Value, options: &Options) -> Result<Compiled, Error> {
    let Lowered { grammar, notes, relaxed } = lower(schema, options)?;
    let checks = match relaxed {
        None => None,
        Some(Relaxed { list, normalised, draft }) => {
            let built = ValueChecks::build(&normalised, schema, draft, list, options.strict).map_err(|e| {
                // Name the keyword: the last segment of the pointer refused.
                let pointer = dialect::as_written(schema, &e.pointer);
                let (at, keyword) = pointer.rsplit_once('/').unwrap_or(("", ""));
                let keyword = keyword.replace("~1", "/").replace("~0", "~");
                Error::new(at, &keyword, format!("cannot build the run-time check: {}", e.message))
            })?;
            Some(Arc::new(built))
        }
    };
    Ok(Compiled { grammar, checks, notes })
}

impl Compiled {
    /// A plain grammar as a compile result with no checks and no notes, for callers that
    /// hold a schema's, a GBNF file's or a regex's grammar in one type.
    pub fn from_grammar(grammar: Grammar) -> Compiled {
        Compiled { grammar, checks: None, notes: Vec::new() }
    }

    /// The grammar. Exact on its own only when [`Compiled::checks`] is `None`.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// The grammar alone, dropping the checks: exact only when there are none.
    pub fn into_grammar(self) -> Grammar {
        self.grammar
    }

    /// The keywords left to run-time checks, if any: every matcher of a constraint built
    /// from this result validates the values they apply to as they complete.
    pub fn checks(&self) -> Option<&ValueChecks> {
        self.checks.as_deref()
    }

    /// Where the grammar accepts less than the schema allows, and warnings.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The constraint over `index`, with the checks.
    pub fn constraint(&self, index: Arc<TokenIndex>, limits: &Limits) -> Result<Constraint, MatchError> {
        Constraint::new(self, index, limits)
    }
}

/// Prints the grammar in GBNF, as [`Grammar`] does (the checks have no GBNF form).
impl std::fmt::Display for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.grammar.fmt(f)
    }
}

impl ConstraintSource for Compiled {
    fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    fn runtime_checks(&self) -> Option<Arc<dyn RuntimeChecks>> {
        self.checks.clone().map(|c| c as Arc<dyn RuntimeChecks>)
    }
}

/// `constraint` with the order hint of `schema` ([`order_hint`] under `options`) over the
/// same vocabulary and limits: the one way schema callers attach it
/// ([`Constraint::with_order_hint`]). Unchanged when the hint does not compile.
pub fn with_order_hint(constraint: Constraint, schema: &Value, options: &Options) -> Constraint {
    let hint = order_hint(schema, options)
        .and_then(|g| Constraint::new(&g, Arc::clone(constraint.index()), constraint.limits()).ok());
    match hint {
        Some(hint) => constraint.with_order_hint(hint),
        None => constraint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `(pointer, keyword)` of the error compiling `schema`.
    fn refused_at(schema: Value, options: &Options) -> (String, String) {
        let err = compile(&schema, options).unwrap_err();
        (err.pointer().to_string(), err.keyword().to_string())
    }

    fn at(pointer: &str, keyword: &str) -> (String, String) {
        (pointer.to_string(), keyword.to_string())
    }

    #[test]
    fn errors_name_the_keyword_as_written() {
        let checks = Options::default();
        // A pattern no validator can read: at the pattern, not at its subschema.
        let bad = json!({"type": "string", "pattern": "(?<x>a"});
        assert_eq!(refused_at(bad.clone(), &checks), at("/pattern", "pattern"));
        let nested = json!({"type": "object", "properties": {"a": bad.clone()}});
        assert_eq!(refused_at(nested, &checks), at("/properties/a/pattern", "pattern"));
        // Keywords the dialect renamed are named as written.
        let d7 = "http://json-schema.org/draft-07/schema#";
        let tuple = json!({"$schema": d7, "items": [true], "additionalItems": bad});
        assert_eq!(refused_at(tuple, &checks), at("/additionalItems/pattern", "pattern"));
        let deps = json!({"$schema": d7, "properties": {"a": {"dependencies": {"b": {"not": {"required": ["c"]}}}}}});
        let no_checks = Options::default().with_runtime_checks(false);
        assert_eq!(refused_at(deps.clone(), &no_checks), at("/properties/a/dependencies", "dependencies"));
        let compiled = compile(&deps, &checks).unwrap();
        let relaxed = compiled.checks().map(|c| c.relaxed().to_vec()).unwrap_or_default();
        assert_eq!(relaxed.len(), 1, "{relaxed:?}");
        assert_eq!(
            (relaxed[0].pointer.as_str(), relaxed[0].keyword.as_str()),
            ("/properties/a/dependencies", "dependencies")
        );
    }
}

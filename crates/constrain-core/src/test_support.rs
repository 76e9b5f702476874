//! Test-only helpers: grammars compiled from JSON Schemas for the engine's own unit tests.
//!
//! The schema compiler sits above this crate, and unit tests here link it through the facade
//! (a dev-dependency), which builds against this crate's normal library, not the test build:
//! its grammars are another crate's type. [`schema_grammar`] rebuilds one here, rule by
//! rule, with the same ids, bodies and string exclusions.

use crate::grammar::{Expr, Grammar, GrammarBuilder, RuleId};

/// The grammar `constrain::schema::compile` gives `schema` under `options`, as this crate's
/// type (the run-time checks are left out: the tests using this look at grammars only).
pub(crate) fn schema_grammar(schema: &serde_json::Value, options: &constrain::schema::Options) -> Grammar {
    let compiled = constrain::schema::compile(schema, options).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let foreign = compiled.grammar();
    let mut b = GrammarBuilder::new();
    let ids: Vec<RuleId> = foreign.rules().iter().map(|r| b.declare(&r.name)).collect();
    for (&id, rule) in ids.iter().zip(foreign.rules()) {
        b.define(id, expr(&rule.expr));
    }
    for e in foreign.exclusions() {
        let words: Vec<&str> = e.words.iter().map(|w| std::str::from_utf8(w).expect("printable ASCII")).collect();
        b.note_exclusion(RuleId(e.rule.0), RuleId(e.rest.0), &words);
    }
    b.build(RuleId(foreign.start().0)).expect("the compiler's grammar builds")
}

/// The schema grammar under the default options.
pub(crate) fn default_schema_grammar(schema: &serde_json::Value) -> Grammar {
    schema_grammar(schema, &constrain::schema::Options::default())
}

fn expr(e: &constrain::grammar::Expr) -> Expr {
    use constrain::grammar::Expr as F;
    match e {
        F::Empty => Expr::Empty,
        F::Nothing => Expr::Nothing,
        F::Literal(b) => Expr::Literal(b.clone()),
        F::Bytes(r) => Expr::Bytes(r.clone()),
        F::Chars(r) => Expr::Chars(r.clone()),
        F::Seq(v) => Expr::Seq(v.iter().map(expr).collect()),
        F::Alt(v) => Expr::Alt(v.iter().map(expr).collect()),
        F::Repeat { expr: inner, min, max } => Expr::Repeat { expr: Box::new(expr(inner)), min: *min, max: *max },
        F::Ref(id) => Expr::Ref(RuleId(id.0)),
    }
}

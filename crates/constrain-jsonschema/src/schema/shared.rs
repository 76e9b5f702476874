//! The rules every schema of one compilation shares: a plain string, number, integer, "any
//! JSON value", the indentation, and the string tails the key exclusion of
//! [`not_in_set`](super::strings) continues with.
//!
//! Each is declared at its first use and defined once, so the automaton's fingerprints share
//! their mask work. [`SharedRule`] names them: an exhaustive `match` gives each its rule name
//! and body, so there is no name without a body.

use super::{json, number, Compiler};
use crate::grammar::{Expr, RuleId};

/// One of the rules shared by a whole compilation (see the module doc). A closed set, so a
/// misspelt name is a compile error rather than an empty rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum SharedRule {
    /// Any JSON string, quotes included.
    String,
    /// The rest of any JSON string after its opening quote, closing quote included.
    StringRest,
    /// A non-ASCII character, then [`SharedRule::StringRest`].
    NonasciiRest,
    /// After a backslash: the rest of an escape, then [`SharedRule::StringRest`].
    EscapeRest,
    /// After a backslash: the rest of a control character's `\u00XX` escape, then
    /// [`SharedRule::StringRest`] (for other keys where a declared name could go on).
    ControlEscapeRest,
    /// The indentation after a newline (bounded by [`json::MAX_INDENT`]).
    Indent,
    /// Any JSON number.
    Number,
    /// Any JSON integer.
    Integer,
    /// Any integer in every spelling draft 6 on takes as one: [`SharedRule::Integer`], `-0`,
    /// a zero fraction and large integers in exponent form (`type: integer` with no bound).
    IntegerValue,
    /// Any JSON value.
    Any,
    /// The content of a JSON string (between its quotes) that is itself a JSON text, spelled
    /// compactly: no whitespace, and its strings of characters that need no escape in either
    /// text, their quotes written `\"` (`contentMediaType: application/json`).
    JsonText,
}

impl SharedRule {
    /// The rule's base name in the grammar (a suffix is added if it is taken).
    fn name(self) -> &'static str {
        match self {
            SharedRule::String => "string",
            SharedRule::StringRest => "string_rest",
            SharedRule::NonasciiRest => "nonascii_rest",
            SharedRule::EscapeRest => "escape_rest",
            SharedRule::ControlEscapeRest => "control_escape_rest",
            SharedRule::Indent => "indent",
            SharedRule::Number => "number",
            SharedRule::Integer => "integer",
            SharedRule::IntegerValue => "integer_value",
            SharedRule::Any => "any",
            SharedRule::JsonText => "json_text",
        }
    }
}

impl<'a> Compiler<'a> {
    /// A reference to the shared rule `rule`, declared and defined at its first use.
    pub(super) fn shared_rule(&mut self, rule: SharedRule) -> Expr {
        if let Some(&id) = self.shared.get(&rule) {
            return Expr::Ref(id);
        }
        let fresh = self.b.fresh_name(rule.name());
        let id = self.b.declare(&fresh);
        self.shared.insert(rule, id);
        let body = self.shared_body(rule, id);
        self.b.define(id, body);
        Expr::Ref(id)
    }

    /// The body of the shared rule `rule`, declared as `id` (which [`SharedRule::Any`] refers
    /// to, being recursive).
    fn shared_body(&mut self, rule: SharedRule, id: RuleId) -> Expr {
        match rule {
            SharedRule::String => Expr::seq([Expr::lit("\""), Expr::star(json::any_unit()), Expr::lit("\"")]),
            SharedRule::StringRest => Expr::seq([Expr::star(json::any_unit()), Expr::lit("\"")]),
            // A non-ASCII character, then the rest of the string: what follows an "other"
            // character in `not_in_set`, shared so that its UTF-8 byte paths exist once
            // instead of at every position of every excluded key.
            SharedRule::NonasciiRest => {
                let rest = self.shared_rule(SharedRule::StringRest);
                Expr::seq([Expr::Chars(vec![('\u{80}', '\u{D7FF}'), ('\u{E000}', '\u{10FFFF}')]), rest])
            }
            // After a backslash: the rest of an escape, then the rest of the string.
            SharedRule::EscapeRest => {
                let rest = self.shared_rule(SharedRule::StringRest);
                let unit = json::any_unit();
                let after_backslash = match unit {
                    Expr::Alt(v) => v.into_iter().find_map(|e| match e {
                        Expr::Seq(mut p) if p.first() == Some(&Expr::lit("\\")) => Some(Expr::seq(p.drain(1..))),
                        _ => None,
                    }),
                    _ => None,
                };
                // `json::any_unit` is an alternation with one `"\\" …` branch; were it missing,
                // keys with an escape would be rejected (less, never more).
                debug_assert!(after_backslash.is_some(), "json::any_unit has no escape branch");
                Expr::seq([after_backslash.unwrap_or(Expr::Nothing), rest])
            }
            SharedRule::ControlEscapeRest => {
                let rest = self.shared_rule(SharedRule::StringRest);
                Expr::seq([Expr::lit("u00"), Expr::one_of_bytes(b"01"), json::hex_digit(), rest])
            }
            SharedRule::Indent => Expr::repeat(Expr::lit(" "), 0, Some(json::MAX_INDENT)),
            SharedRule::Number => number::any_number(),
            SharedRule::Integer => number::any_integer(),
            SharedRule::IntegerValue => {
                let integer = self.shared_rule(SharedRule::Integer);
                let spelled = number::integer_spellings(&integer, None, None, true).unwrap_or(integer);
                Expr::alt([spelled, number::large_integers(None, None)])
            }
            SharedRule::Any => {
                let string = self.shared_rule(SharedRule::String);
                let number = self.shared_rule(SharedRule::Number);
                let any = Expr::Ref(id);
                let ws = self.ws.clone();
                let sep = Expr::seq([ws.clone(), Expr::lit(","), ws.clone()]);
                let member = Expr::seq([string.clone(), ws.clone(), Expr::lit(":"), ws.clone(), any.clone()]);
                let object = Expr::seq([
                    Expr::lit("{"),
                    ws.clone(),
                    Expr::opt(Expr::seq([member.clone(), Expr::star(Expr::seq([sep.clone(), member])), ws.clone()])),
                    Expr::lit("}"),
                ]);
                let array = Expr::seq([
                    Expr::lit("["),
                    ws.clone(),
                    Expr::opt(Expr::seq([any.clone(), Expr::star(Expr::seq([sep, any])), ws])),
                    Expr::lit("]"),
                ]);
                let object = Expr::Ref(self.b.add("any_object", object));
                let array = Expr::Ref(self.b.add("any_array", array));
                Expr::alt([object, array, string, number, Expr::lit("true"), Expr::lit("false"), Expr::lit("null")])
            }
            SharedRule::JsonText => {
                let number = self.shared_rule(SharedRule::Number);
                let value = Expr::Ref(id);
                // A raw character neither text escapes: no control, `"` or `\`.
                let plain = Expr::Chars(vec![(' ', '!'), ('#', '['), (']', '\u{D7FF}'), ('\u{E000}', '\u{10FFFF}')]);
                let string = Expr::seq([Expr::lit("\\\""), Expr::star(plain), Expr::lit("\\\"")]);
                let string = Expr::Ref(self.b.add("json_text_string", string));
                let member = Expr::seq([string.clone(), Expr::lit(":"), value.clone()]);
                let object = Expr::seq([
                    Expr::lit("{"),
                    Expr::opt(Expr::seq([member.clone(), Expr::star(Expr::seq([Expr::lit(","), member]))])),
                    Expr::lit("}"),
                ]);
                let array = Expr::seq([
                    Expr::lit("["),
                    Expr::opt(Expr::seq([value.clone(), Expr::star(Expr::seq([Expr::lit(","), value]))])),
                    Expr::lit("]"),
                ]);
                let object = Expr::Ref(self.b.add("json_text_object", object));
                let array = Expr::Ref(self.b.add("json_text_array", array));
                Expr::alt([object, array, string, number, Expr::lit("true"), Expr::lit("false"), Expr::lit("null")])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Options, Whitespace};

    const ALL: [SharedRule; 11] = [
        SharedRule::String,
        SharedRule::StringRest,
        SharedRule::NonasciiRest,
        SharedRule::EscapeRest,
        SharedRule::ControlEscapeRest,
        SharedRule::Indent,
        SharedRule::Number,
        SharedRule::Integer,
        SharedRule::IntegerValue,
        SharedRule::Any,
        SharedRule::JsonText,
    ];

    /// Each shared rule has its own name and a body that matches something, and is declared
    /// once however often it is used.
    #[test]
    fn every_shared_rule_has_a_name_and_a_body() {
        let names: std::collections::HashSet<&str> = ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), ALL.len());
        let root = serde_json::json!(true);
        for whitespace in [Whitespace::Compact, Whitespace::Pretty, Whitespace::Unbounded] {
            let opts = Options { whitespace, ..Options::default() };
            let mut c = Compiler::new(&root, &opts, crate::schema::dialect::Draft::Draft202012);
            for rule in ALL {
                let Expr::Ref(id) = c.shared_rule(rule) else { panic!("{rule:?} is not a rule reference") };
                let body = c.b.body(id).unwrap_or_else(|| panic!("{rule:?} has no body"));
                assert_ne!(body, &Expr::Nothing, "{rule:?} matches nothing");
                assert_eq!(c.shared_rule(rule), Expr::Ref(id), "{rule:?} was declared twice");
            }
        }
    }
}

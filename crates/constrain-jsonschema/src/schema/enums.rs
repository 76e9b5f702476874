//! `enum` and `const`: the listed values that also satisfy their sibling keywords, each
//! spelled as a JSON literal (numbers in every spelling a JSON serialiser gives them;
//! objects of a few members in any member order).

use serde_json::{Map, Value};

use super::dialect::Draft;
use super::number::Dec;
use super::{allowed_types, is_constraint_keyword, json, value_has_type, Compiler, Error, FORBIDDEN};
use crate::grammar::Expr;

impl<'a> Compiler<'a> {
    /// `enum`/`const`: the listed values that also satisfy the sibling keywords.
    pub(super) fn compile_enum(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        let mut values: Vec<Value> = match map.get("enum") {
            Some(Value::Array(v)) => v.clone(),
            Some(_) => return Err(Error::new(ptr, "enum", "enum must be an array")),
            None => vec![],
        };
        if let Some(c) = map.get("const") {
            if map.contains_key("enum") {
                values.retain(|v| json::values_equal(v, c));
            } else {
                values = vec![c.clone()];
            }
        }
        let keyword = if map.contains_key("enum") { "enum" } else { "const" };
        let others: Vec<&String> = map
            .keys()
            .filter(|k| is_constraint_keyword(k) && !["enum", "const", "type", FORBIDDEN].contains(&k.as_str()))
            .collect();
        let types = allowed_types(map);
        values.retain(|v| types.iter().any(|t| value_has_type(v, t)));
        if !others.is_empty() && !values.is_empty() {
            // Filter by the sibling keywords with a real validator.
            let mut doc = map.clone();
            doc.remove("enum");
            doc.remove("const");
            doc.remove(FORBIDDEN);
            let v = super::subschema_validator(self.root, doc).map_err(|e| {
                Error::new(ptr, keyword, format!("cannot check enum values against sibling keywords: {e}"))
            })?;
            values.retain(|x| v.is_valid(x));
        }
        if let Some(Value::Array(forbidden)) = map.get(FORBIDDEN) {
            values.retain(|x| {
                !x.as_object().is_some_and(|o| forbidden.iter().any(|f| f.as_str().is_some_and(|f| o.contains_key(f))))
            });
        }
        let ws = self.ws.clone();
        // Deduplicate with a hash set: `Expr::alt` compares pairwise, which is quadratic for
        // enums with thousands of values.
        let mut seen = std::collections::HashSet::new();
        let mut alts: Vec<Expr> = Vec::new();
        // A number allowed only as an integer must be one (exact decimal test, not a
        // float's); before draft 6 it is also spelled only as one (`1`, not `1.0`), as the
        // `integer` grammar does.
        let integer_only = !types.contains(&"number");
        let integer_spelling = integer_only && self.draft < Draft::Draft6;
        let objects = values.iter().filter(|v| v.is_object()).count();
        for v in &values {
            let lit = match v {
                Value::Number(n) => match Dec::parse(&n.to_string()) {
                    Some(d) if integer_only && !d.is_integer() => Expr::Nothing,
                    Some(d) => Expr::alt(json::dec_spellings(&d, integer_spelling).iter().map(|t| Expr::lit(t))),
                    None if integer_only => Expr::Nothing,
                    None => Expr::lit(&n.to_string()),
                },
                Value::Object(o) if (2..=MAX_ANY_ORDER_KEYS).contains(&o.len()) && objects <= MAX_ANY_ORDER_OBJECTS => {
                    self.any_order_object(o, ptr)?
                }
                _ => json::value_literal(v, &ws),
            };
            if lit == Expr::Nothing {
                continue;
            }
            if seen.insert(lit.clone()) {
                alts.push(lit);
            }
        }
        let e = match alts.len() {
            0 => Expr::Nothing,
            1 => alts.pop().unwrap_or(Expr::Nothing),
            _ => Expr::Alt(alts),
        };
        Ok(if e.size() > 8 { self.rule("enum", e) } else { e })
    }

    /// An object value of an `enum`/`const` with its members in any order (JSON objects
    /// are unordered: `{"h": 2, "w": 1}` equals `{"w": 1, "h": 2}`): compiled as the
    /// object whose properties are exactly these, each the `const` of its value.
    fn any_order_object(&mut self, o: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        let mut properties = Map::new();
        for (k, v) in o {
            let mut c = Map::new();
            c.insert("const".into(), v.clone());
            properties.insert(k.clone(), Value::Object(c));
        }
        let mut schema = Map::new();
        schema.insert("type".into(), Value::String("object".into()));
        schema.insert("properties".into(), Value::Object(properties));
        schema.insert("required".into(), Value::Array(o.keys().map(|k| Value::String(k.clone())).collect()));
        schema.insert("additionalProperties".into(), Value::Bool(false));
        self.compile_value(&Value::Object(schema), ptr)
    }
}

/// Objects of an `enum`/`const` with up to this many members are spelled in any order
/// (the members of larger ones in the order given: fewer strings, never more).
///
/// A constant of the algorithm, not a user limit: it chooses how an `enum` object is
/// spelled (a documented subset of orders), the same for every caller.
const MAX_ANY_ORDER_KEYS: usize = 4;

/// An `enum` of more objects than this spells them all in the order given (each object in
/// any order is an object grammar of its own, which a long list would multiply).
///
/// A constant of the algorithm, not a user limit: like [`MAX_ANY_ORDER_KEYS`], it
/// chooses the spelling, keeping the grammar's size linear in the list.
const MAX_ANY_ORDER_OBJECTS: usize = 32;

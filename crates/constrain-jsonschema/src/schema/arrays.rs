//! `type: array`: `prefixItems`/`items` (and draft-04's `items` array with
//! `additionalItems`), `minItems` and `maxItems`.

use serde_json::{Map, Value};

use super::{count, presence, Compiler, Error, Note, SharedRule};
use crate::grammar::Expr;

impl<'a> Compiler<'a> {
    /// An `array` schema's expression: `[`, the items under the counts, `]`.
    pub(super) fn compile_array(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        for k in ["contains", "minContains", "maxContains", "unevaluatedItems"] {
            if map.contains_key(k) && !(k == "unevaluatedItems" && map.get(k) == Some(&Value::Bool(true))) {
                self.unsupported(ptr, k, &format!("{k} is not supported"))?;
            }
        }
        let min = count(map, ptr, "minItems")?.unwrap_or(0);
        let max = count(map, ptr, "maxItems")?;
        if max.is_some_and(|m| m < min) {
            // No array has between min and max items (the `max == Some(0)` shortcut below
            // would otherwise accept `[]`).
            return Ok(Expr::Nothing);
        }
        if map.get("uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|m| m > 1) {
            self.unsupported(ptr, "uniqueItems", "uniqueItems cannot be enforced by a grammar")?;
        }
        let (prefix, prefix_key, rest, rest_key): (Vec<Value>, &str, Option<&Value>, &str) =
            match (map.get("prefixItems"), map.get("items")) {
                (Some(Value::Array(p)), items) => (p.clone(), "prefixItems", items, "items"),
                (_, Some(Value::Array(p))) => (p.clone(), "items", map.get("additionalItems"), "additionalItems"),
                (_, items) => (vec![], "prefixItems", items, "items"),
            };
        // A `contains` that no item can match by type: no array satisfies it.
        let contains = map.get("contains").filter(|_| map.get("minContains").and_then(Value::as_u64) != Some(0));
        if let Some(c) = contains {
            let wanted = presence::admitted_types(c, 0);
            let k = prefix.len() as u32;
            let mut slots: Vec<&Value> = prefix.iter().take(max.unwrap_or(u32::MAX) as usize).collect();
            let any = Value::Bool(true);
            if max.is_none_or(|m| m > k) {
                slots.push(rest.unwrap_or(&any));
            }
            let fits = |s: &&Value| {
                presence::admitted_types(s, 0).iter().any(|t| wanted.iter().any(|w| presence::overlap(t, w)))
            };
            if !slots.iter().any(fits) {
                self.notes.push(Note::warning(
                    ptr,
                    "contains",
                    "no array can satisfy this schema: no item it allows has a type the schema of contains admits",
                ));
                return Ok(Expr::Nothing);
            }
        }
        let mut prefix_exprs = Vec::new();
        for (i, p) in prefix.iter().enumerate() {
            prefix_exprs.push(self.compile_value(p, &format!("{ptr}/{prefix_key}/{i}"))?);
        }
        let item = match rest {
            None => self.shared_rule(SharedRule::Any),
            Some(s) => self.compile_value(s, &format!("{ptr}/{rest_key}"))?,
        };
        let sep = self.sep();
        let k = prefix_exprs.len() as u32;
        // Elements after the prefix.
        let rest_min = min.saturating_sub(k);
        let rest_max = max.map(|m| m.saturating_sub(k));
        let elements = if k == 0 {
            let e = Expr::seq([
                item.clone(),
                Expr::repeat(Expr::seq([sep.clone(), item]), min.saturating_sub(1), max.map(|m| m.saturating_sub(1))),
            ]);
            if max == Some(0) {
                None
            } else {
                Some(e)
            }
        } else {
            let mut tail = Expr::repeat(Expr::seq([sep.clone(), item]), rest_min, rest_max);
            for j in (0..k).rev() {
                let here = Expr::seq([prefix_exprs[j as usize].clone(), tail]);
                if j == 0 {
                    tail = here;
                } else if max.is_some_and(|m| j >= m) {
                    tail = Expr::Empty;
                } else if j >= min {
                    tail = Expr::opt(Expr::seq([sep.clone(), here]));
                } else {
                    tail = Expr::seq([sep.clone(), here]);
                }
                // Each item nests the rest two levels deeper: a rule every few items keeps
                // long prefixItems lists (100k entries) from nesting without bound.
                if j % 64 == 0 && j > 0 {
                    tail = self.rule("prefix_items", tail);
                }
            }
            if max == Some(0) {
                None
            } else {
                Some(tail)
            }
        };
        let ws = self.ws.clone();
        let body = match elements {
            None => Expr::seq([Expr::lit("["), ws, Expr::lit("]")]),
            Some(e) => {
                let inner = Expr::seq([e, ws.clone()]);
                let inner = if min == 0 { Expr::opt(inner) } else { inner };
                Expr::seq([Expr::lit("["), ws, inner, Expr::lit("]")])
            }
        };
        Ok(self.rule("array", body))
    }
}

//! `allOf`: merging several schemas into one.
//!
//! Input: the parts of an `allOf` (and a `$ref` with sibling keywords, which means the same
//! in draft 2019-09 and later). Output: one schema (a `serde_json::Value`) whose instances
//! are exactly those valid against every part, or an error naming a keyword whose
//! combination cannot be merged exactly (two different `pattern`s, for example).
//!
//! How: each part is first flattened (local `$ref`s are followed, nested `allOf`s spread),
//! then keywords are combined one by one: `type` and `enum` intersect, bounds take the
//! tightest value, `required` unions, `properties` of the same name become an `allOf` of
//! both, and a property named in one part only must also satisfy the other part's
//! `additionalProperties`. `anyOf`/`oneOf` of several parts become the product of their
//! branches (which keeps the meaning of both).

use serde_json::{Map, Value};

use super::number::{cmp_dec, Dec};
use super::{Compiler, Error};

/// Keywords that carry no constraint and are dropped from merged schemas.
fn is_dropped(k: &str) -> bool {
    matches!(
        k,
        "$schema"
            | "$id"
            | "id"
            | "$comment"
            | "title"
            | "description"
            | "default"
            | "examples"
            | "example"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "$defs"
            | "definitions"
            | "$anchor"
    )
}

/// Largest number of branches a product of `anyOf`/`oneOf` may have.
///
/// A constant of the algorithm, not a user limit: it bounds the branches one merge of
/// `allOf` parts writes out (an error names it past that); the grammar's overall size is
/// bounded by [`crate::Limits::max_grammar_size`], the user's limit.
const MAX_PRODUCT: usize = 64;

impl<'a> Compiler<'a> {
    /// Flattens `schema` (following `$ref` and `allOf`) into a list of plain schema objects.
    /// `Ok(None)` when some part is `false`.
    fn flatten(
        &self,
        schema: &Value,
        ptr: &str,
        depth: usize,
        out: &mut Vec<Map<String, Value>>,
    ) -> Result<bool, Error> {
        if depth > 32 {
            return Err(Error::new(ptr, "$ref", "reference chain inside allOf is too deep or recursive; cannot merge"));
        }
        match schema {
            Value::Bool(true) => Ok(true),
            Value::Bool(false) => Ok(false),
            Value::Object(map) => {
                let mut rest = map.clone();
                if let Some(r) = rest.remove("$ref") {
                    let Value::String(r) = r else {
                        return Err(Error::new(ptr, "$ref", "$ref must be a string"));
                    };
                    let target = self.resolve_ref(&r, ptr)?;
                    if !self.flatten(target.schema, &target.pointer, depth + 1, out)? {
                        return Ok(false);
                    }
                }
                if let Some(all) = rest.remove("allOf") {
                    let Value::Array(parts) = all else {
                        return Err(Error::new(ptr, "allOf", "allOf must be an array"));
                    };
                    for (i, p) in parts.iter().enumerate() {
                        if !self.flatten(p, &format!("{ptr}/allOf/{i}"), depth + 1, out)? {
                            return Ok(false);
                        }
                    }
                }
                rest.retain(|k, _| !is_dropped(k));
                out.push(rest);
                Ok(true)
            }
            _ => Err(Error::new(ptr, "allOf", "a schema must be an object or a boolean")),
        }
    }

    /// Merges the schemas into one (see the module docs).
    pub(super) fn merge_all(&self, parts: &[Value], ptr: &str) -> Result<Value, Error> {
        let mut flat = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            if !self.flatten(p, &format!("{ptr}/allOf/{i}"), 0, &mut flat)? {
                return Ok(Value::Bool(false));
            }
        }
        let mut acc = Map::new();
        // A conflict the merged map cannot say may be dropped (the grammar accepts more)
        // when a run-time check then enforces the keyword.
        let mut relax = |keyword: &str| {
            let ok = self.relaxes(keyword);
            if ok {
                self.relax(ptr, keyword);
            }
            ok
        };
        for part in flat {
            merge_into(&mut acc, part, ptr, &mut relax)?;
        }
        Ok(Value::Object(acc))
    }
}

fn all_of(a: Value, b: Value) -> Value {
    if a == b || b == Value::Bool(true) {
        return a;
    }
    if a == Value::Bool(true) {
        return b;
    }
    serde_json::json!({ "allOf": [a, b] })
}

fn type_set(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => vec![],
    }
}

fn intersect_types(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for t in a {
        if b.contains(t) {
            out.push(t.clone());
        } else if (t == "integer" && b.iter().any(|x| x == "number"))
            || (t == "number" && b.iter().any(|x| x == "integer"))
        {
            out.push("integer".into());
        }
    }
    out.dedup();
    out
}

fn num(v: &Value) -> Option<Dec> {
    match v {
        Value::Number(n) => Dec::parse(&n.to_string()),
        _ => None,
    }
}

/// Normalises draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` into the numeric form.
pub(super) fn normalise_bounds(m: &mut Map<String, Value>) {
    for (excl, plain) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
        match m.get(excl) {
            Some(Value::Bool(true)) => {
                if let Some(v) = m.remove(plain) {
                    m.insert(excl.into(), v);
                } else {
                    m.remove(excl);
                }
            }
            Some(Value::Bool(false)) => {
                m.remove(excl);
            }
            _ => {}
        }
    }
}

/// Splits off a schema's array keywords: the prefix schemas and the schema of the rest
/// (`None`: any). An array-form `items` (not in the canonical form) is a prefix.
fn take_items(m: &mut Map<String, Value>) -> (Vec<Value>, Option<Value>) {
    let mut prefix = match m.remove("prefixItems") {
        Some(Value::Array(p)) => p,
        _ => vec![],
    };
    let rest = match m.remove("items") {
        Some(Value::Array(p)) if prefix.is_empty() => {
            prefix = p;
            m.remove("additionalItems")
        }
        other => other,
    };
    (prefix, rest)
}

/// Merges the array keywords of two schemas by position: element `i` of the result must
/// satisfy each side's schema for position `i` (its prefix entry, or its rest schema).
fn merge_items(acc: &mut Map<String, Value>, part: &mut Map<String, Value>) {
    let has = |m: &Map<String, Value>| m.contains_key("prefixItems") || m.contains_key("items");
    if !(has(acc) && has(part)) {
        return;
    }
    let (pa, ra) = take_items(acc);
    let (pb, rb) = take_items(part);
    let at =
        |p: &[Value], r: &Option<Value>, i: usize| p.get(i).cloned().or_else(|| r.clone()).unwrap_or(Value::Bool(true));
    let n = pa.len().max(pb.len());
    let prefix: Vec<Value> = (0..n).map(|i| all_of(at(&pa, &ra, i), at(&pb, &rb, i))).collect();
    let rest = match (ra, rb) {
        (None, None) => None,
        (a, b) => Some(all_of(a.unwrap_or(Value::Bool(true)), b.unwrap_or(Value::Bool(true)))),
    };
    if !prefix.is_empty() {
        acc.insert("prefixItems".into(), Value::Array(prefix));
    }
    if let Some(r) = rest {
        acc.insert("items".into(), r);
    }
}

///
/// `relax(keyword)` says whether a conflict over `keyword` may be resolved by keeping the
/// looser side (recording it for a run-time check) instead of failing.
fn merge_into(
    acc: &mut Map<String, Value>,
    mut part: Map<String, Value>,
    ptr: &str,
    relax: &mut dyn FnMut(&str) -> bool,
) -> Result<(), Error> {
    normalise_bounds(&mut part);
    normalise_bounds(acc);
    merge_items(acc, &mut part);
    // additionalProperties interplay: names defined on one side only must satisfy the other
    // side's additionalProperties.
    let acc_props: Vec<String> =
        acc.get("properties").and_then(|p| p.as_object()).map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let part_props: Vec<String> =
        part.get("properties").and_then(|p| p.as_object()).map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let has_pattern = acc.contains_key("patternProperties") || part.contains_key("patternProperties");
    let mut acc_addl = acc.get("additionalProperties").cloned();
    let mut part_addl = part.get("additionalProperties").cloned();
    // A name matched by one side's patternProperties must still satisfy the other side's
    // additionalProperties, which one merged map cannot say.
    let trivial = |v: &Option<Value>| {
        v.as_ref().is_none_or(|v| v == &Value::Bool(true) || v.as_object().is_some_and(|m| m.is_empty()))
    };
    let cross = (acc.contains_key("patternProperties") && !trivial(&part_addl))
        || (part.contains_key("patternProperties") && !trivial(&acc_addl));
    let conflict = cross
        || (has_pattern
            && (acc_addl.is_some() || part_addl.is_some())
            && !(acc_props.is_empty() && part_props.is_empty()));
    if conflict && relax("allOf") {
        // Without `additionalProperties` on either side the merged map accepts more.
        acc.remove("additionalProperties");
        part.remove("additionalProperties");
        (acc_addl, part_addl) = (None, None);
    } else if conflict {
        return Err(Error::new(
            ptr,
            "allOf",
            "cannot merge patternProperties with additionalProperties across allOf parts",
        ));
    }
    if let Some(a) = &acc_addl {
        for k in &part_props {
            if !acc_props.contains(k) {
                let props = acc.entry("properties").or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(pm) = props {
                    pm.insert(k.clone(), a.clone());
                }
            }
        }
    }
    if let Some(a) = &part_addl {
        for k in &acc_props {
            if !part_props.contains(k) {
                let props = part.entry("properties").or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(pm) = props {
                    pm.insert(k.clone(), a.clone());
                }
            }
        }
    }
    for (k, v) in part {
        let Some(old) = acc.remove(&k) else {
            acc.insert(k, v);
            continue;
        };
        let merged = match k.as_str() {
            "type" => {
                let t = intersect_types(&type_set(&old), &type_set(&v));
                Value::Array(t.into_iter().map(Value::String).collect())
            }
            "enum" | "const" => {
                let a: Vec<Value> =
                    if k == "const" { vec![old.clone()] } else { old.as_array().cloned().unwrap_or_default() };
                let b: Vec<Value> =
                    if k == "const" { vec![v.clone()] } else { v.as_array().cloned().unwrap_or_default() };
                let both: Vec<Value> =
                    a.into_iter().filter(|x| b.iter().any(|y| super::json::values_equal(x, y))).collect();
                if k == "const" {
                    if both.is_empty() {
                        acc.insert("enum".into(), Value::Array(vec![]));
                        continue;
                    }
                    both.into_iter().next().unwrap_or(Value::Null)
                } else {
                    Value::Array(both)
                }
            }
            "properties" | "patternProperties" | "dependentSchemas" => {
                let mut m = old.as_object().cloned().unwrap_or_default();
                if let Value::Object(pm) = v {
                    for (pk, pv) in pm {
                        // Update in place: the order of properties is the generation order.
                        match m.get_mut(&pk) {
                            Some(slot) => {
                                let o = std::mem::replace(slot, Value::Bool(true));
                                *slot = all_of(o, pv);
                            }
                            None => {
                                m.insert(pk, pv);
                            }
                        }
                    }
                }
                Value::Object(m)
            }
            "required" | super::FORBIDDEN => {
                let mut r = old.as_array().cloned().unwrap_or_default();
                for x in v.as_array().cloned().unwrap_or_default() {
                    if !r.contains(&x) {
                        r.push(x);
                    }
                }
                Value::Array(r)
            }
            "additionalProperties"
            | "items"
            | "additionalItems"
            | "propertyNames"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "contains"
                if !(old.is_array() || v.is_array()) =>
            {
                all_of(old, v)
            }
            "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum" => {
                let (a, b) = (num(&old), num(&v));
                let (Some(a), Some(b)) = (a, b) else {
                    return Err(Error::new(ptr, &k, "bound must be a number"));
                };
                let greater = cmp_dec(&a, &b) == std::cmp::Ordering::Greater;
                let take_old = if k.starts_with("min") || k == "exclusiveMinimum" { greater } else { !greater };
                if take_old {
                    old
                } else {
                    v
                }
            }
            "minLength" | "minItems" | "minProperties" | "minContains" => {
                if v.as_u64() > old.as_u64() {
                    v
                } else {
                    old
                }
            }
            "maxLength" | "maxItems" | "maxProperties" | "maxContains" => {
                if v.as_u64() < old.as_u64() {
                    v
                } else {
                    old
                }
            }
            "uniqueItems" => Value::Bool(old.as_bool().unwrap_or(false) || v.as_bool().unwrap_or(false)),
            "anyOf" | "oneOf" => {
                let a = old.as_array().cloned().unwrap_or_default();
                let b = v.as_array().cloned().unwrap_or_default();
                if a.len() * b.len() > MAX_PRODUCT {
                    return Err(Error::new(
                        ptr,
                        &k,
                        "too many combinations of anyOf/oneOf branches across allOf parts",
                    ));
                }
                let mut out = Vec::new();
                for x in &a {
                    for y in &b {
                        out.push(all_of(x.clone(), y.clone()));
                    }
                }
                Value::Array(out)
            }
            // not A and not B = not (A or B): exact.
            "not" => serde_json::json!({ "anyOf": [old, v] }),
            _ => {
                if old == v || k.starts_with("x-") || !super::is_constraint_keyword(&k) {
                    old
                } else if relax(&k) {
                    // Keeping one side's value accepts more than both.
                    old
                } else {
                    return Err(Error::new(
                        ptr,
                        &k,
                        format!("allOf parts give different values for `{k}`, which cannot be merged"),
                    ));
                }
            }
        };
        acc.insert(k, merged);
    }
    Ok(())
}

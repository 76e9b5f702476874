//! `unevaluatedProperties` / `unevaluatedItems`: rewritten into plain keywords before merging.
//!
//! Input: a schema in the canonical form of [`dialect`](super::dialect) (every `$ref` a local
//! pointer). Output: the same schema where each `unevaluatedProperties: U` is replaced by one
//! more `allOf` part `{"properties": {n: true…}, "patternProperties": {p: true…},
//! "additionalProperties": U}` and each `unevaluatedItems: U` by `{"prefixItems": [true…],
//! "items": U}`, naming what the schema object *statically* evaluates: its own
//! `properties`/`patternProperties`/`additionalProperties` (or `prefixItems`/`items`), and
//! those of its in-place applicators that always apply (`allOf`, `$ref`, recursively; a
//! nested `unevaluated*` or `additional*` evaluates everything).
//!
//! Why this way: `allOf` merging mixes the parts' keywords, but `unevaluated*` only sees what
//! its own schema object evaluates, so it must be turned into plain keywords first, one
//! object at a time.
//!
//! Exactness: what `anyOf`/`oneOf`/`if`/`then`/`else`/`dependentSchemas`/`contains` may
//! evaluate depends on the instance. Those names are treated as *unevaluated* (so `U`
//! applies to them too): the result accepts a subset of the schema's instances, never more,
//! and a [`Note`] says so. `not` evaluates nothing (its subschema must fail).

use rustc_hash::FxHashSet as HashSet;
use serde_json::{Map, Value};

use super::{escape_pointer, Note};

/// What a schema object evaluates for sure.
#[derive(Default, Debug)]
struct Evaluated {
    all: bool,
    names: Vec<String>,
    patterns: Vec<String>,
    prefix: usize,
    all_items: bool,
}

/// One rewrite: the object's pointer, the keyword, and the part to add without `U` (`None`:
/// drop the keyword, which constrains nothing there).
type Edit = (String, &'static str, Option<Map<String, Value>>);

/// Rewrites every `unevaluated*` keyword of the canonical document `doc` (see the module
/// docs), recording under-approximations in `notes`.
pub(crate) fn rewrite(doc: &Value, notes: &mut Vec<Note>) -> Value {
    let mut edits: Vec<Edit> = Vec::new();
    let mut todo: Vec<(&Value, String)> = vec![(doc, String::new())];
    while let Some((v, ptr)) = todo.pop() {
        let Value::Object(m) = v else { continue };
        for (k, c) in m {
            let kp = format!("{ptr}/{}", escape_pointer(k));
            match (k.as_str(), c) {
                ("allOf" | "anyOf" | "oneOf" | "prefixItems", Value::Array(a)) => {
                    todo.extend(a.iter().enumerate().map(|(i, x)| (x, format!("{kp}/{i}"))));
                }
                (
                    "properties" | "patternProperties" | "dependentSchemas" | super::dialect::TARGETS,
                    Value::Object(o),
                ) => {
                    todo.extend(o.iter().map(|(n, x)| (x, format!("{kp}/{}", escape_pointer(n)))));
                }
                (
                    "additionalProperties"
                    | "items"
                    | "contains"
                    | "propertyNames"
                    | "not"
                    | "if"
                    | "then"
                    | "else"
                    | "unevaluatedProperties"
                    | "unevaluatedItems",
                    _,
                ) => todo.push((c, kp)),
                _ => {}
            }
        }
        for (key, items) in [("unevaluatedProperties", false), ("unevaluatedItems", true)] {
            let Some(u) = m.get(key) else { continue };
            let mut seen = HashSet::default();
            let mut ev = Evaluated::default();
            static_evaluated(doc, v, &mut ev, &mut seen, 0, true);
            let mut dynamic = Evaluated::default();
            dynamic_evaluated(doc, v, &mut dynamic, &mut HashSet::default(), 0);
            let covers = if items {
                ev.all_items || (!dynamic.all_items && dynamic.prefix <= ev.prefix)
            } else {
                ev.all
                    || (!dynamic.all
                        && dynamic.names.iter().all(|n| ev.names.contains(n))
                        && dynamic.patterns.iter().all(|p| ev.patterns.contains(p)))
            };
            if !covers {
                notes.push(Note::new(
                    &ptr,
                    key,
                    "what anyOf/oneOf/if/dependentSchemas/contains may evaluate is treated as unevaluated (valid instances may be rejected)",
                ));
            }
            let part = if items {
                if ev.all_items || *u == Value::Bool(true) {
                    None
                } else {
                    let mut p = Map::new();
                    p.insert("prefixItems".into(), Value::Array(vec![Value::Bool(true); ev.prefix]));
                    Some(p)
                }
            } else if ev.all || *u == Value::Bool(true) {
                None
            } else {
                let mut p = Map::new();
                if !ev.names.is_empty() {
                    p.insert(
                        "properties".into(),
                        Value::Object(ev.names.iter().map(|n| (n.clone(), Value::Bool(true))).collect()),
                    );
                }
                if !ev.patterns.is_empty() {
                    p.insert(
                        "patternProperties".into(),
                        Value::Object(ev.patterns.iter().map(|n| (n.clone(), Value::Bool(true))).collect()),
                    );
                }
                Some(p)
            };
            edits.push((ptr.clone(), key, part));
        }
    }
    let mut out = doc.clone();
    // Deepest first (an edit is found after its ancestors'), so a `U` moved into a new part
    // has already been rewritten.
    for (ptr, key, part) in edits.into_iter().rev() {
        let Some(Value::Object(m)) = out.pointer_mut(&ptr) else { continue };
        let Some(u) = m.remove(key) else { continue };
        let Some(mut part) = part else { continue };
        part.insert((if key == "unevaluatedItems" { "items" } else { "additionalProperties" }).into(), u);
        let part = Value::Object(part);
        match m.get_mut("allOf") {
            Some(Value::Array(a)) => a.push(part),
            _ => {
                m.insert("allOf".into(), Value::Array(vec![part]));
            }
        }
    }
    out
}

/// The `$ref` target of `m` in the canonical document, if any.
fn target<'d>(doc: &'d Value, m: &Map<String, Value>) -> Option<&'d Value> {
    let r = m.get("$ref")?.as_str()?;
    let frag = r.strip_prefix('#')?;
    doc.pointer(&super::percent_decode(frag))
}

/// Adds what `v` evaluates whenever it holds: itself, `allOf` parts and `$ref` targets.
/// `top`: `v` is the object whose own `unevaluated*` is being rewritten (not counted).
fn static_evaluated(doc: &Value, v: &Value, ev: &mut Evaluated, seen: &mut HashSet<usize>, depth: usize, top: bool) {
    let Value::Object(m) = v else { return };
    if depth > 64 || !seen.insert(v as *const Value as usize) {
        return;
    }
    if m.contains_key("additionalProperties") || (!top && m.contains_key("unevaluatedProperties")) {
        ev.all = true;
    }
    if m.contains_key("items") || (!top && m.contains_key("unevaluatedItems")) {
        ev.all_items = true;
    }
    if let Some(Value::Array(p)) = m.get("prefixItems") {
        ev.prefix = ev.prefix.max(p.len());
    }
    if let Some(Value::Object(p)) = m.get("properties") {
        for n in p.keys() {
            if !ev.names.contains(n) {
                ev.names.push(n.clone());
            }
        }
    }
    if let Some(Value::Object(p)) = m.get("patternProperties") {
        for n in p.keys() {
            if !ev.patterns.contains(n) {
                ev.patterns.push(n.clone());
            }
        }
    }
    if let Some(Value::Array(parts)) = m.get("allOf") {
        for p in parts {
            static_evaluated(doc, p, ev, seen, depth + 1, false);
        }
    }
    if let Some(t) = target(doc, m) {
        static_evaluated(doc, t, ev, seen, depth + 1, false);
    }
}

/// Adds everything that `v`'s conditional applicators (at any in-place depth) might evaluate.
fn dynamic_evaluated(doc: &Value, v: &Value, ev: &mut Evaluated, seen: &mut HashSet<usize>, depth: usize) {
    let Value::Object(m) = v else { return };
    if depth > 64 {
        ev.all = true;
        ev.all_items = true;
        return;
    }
    if !seen.insert(v as *const Value as usize) {
        return;
    }
    if m.contains_key("$dynamicRef") || m.contains_key("$recursiveRef") {
        ev.all = true;
        ev.all_items = true;
    }
    if m.contains_key("contains") {
        ev.all_items = true;
    }
    let mut conditional: Vec<&Value> = Vec::new();
    for k in ["anyOf", "oneOf"] {
        if let Some(Value::Array(a)) = m.get(k) {
            conditional.extend(a.iter());
        }
    }
    for k in ["if", "then", "else"] {
        conditional.extend(m.get(k));
    }
    if let Some(Value::Object(d)) = m.get("dependentSchemas") {
        conditional.extend(d.values());
    }
    for c in conditional {
        static_evaluated(doc, c, ev, &mut HashSet::default(), depth + 1, false);
        dynamic_evaluated(doc, c, ev, seen, depth + 1);
    }
    if let Some(Value::Array(parts)) = m.get("allOf") {
        for p in parts {
            dynamic_evaluated(doc, p, ev, seen, depth + 1);
        }
    }
    if let Some(t) = target(doc, m) {
        dynamic_evaluated(doc, t, ev, seen, depth + 1);
    }
}

//! Witnesses: a few small documents built from the schema itself, which a liveness proof
//! tries from the start of the output when its searches run out of fuel
//! ([`constrain_core::Matcher::prove_live_into`]).
//!
//! Why: a search over bytes cannot write a document that needs many exact parts (an object
//! with fifteen required properties under a `oneOf`), and without a proved completion from
//! the start, closing has no plan that the checks accept (issue 37). The schema spells those
//! parts out.
//!
//! How: a walk over the canonical schema that picks, per value, a few candidates: `const`,
//! `enum`, `examples`, `default`, then per type the smallest value the sibling keywords ask
//! for (the required properties, `minItems` items and a `contains` item, a number in range,
//! the shortest string of the pattern's automaton or a sample of the format). Local `$ref`s
//! and `allOf` are merged into the schema before it is read, and each `anyOf`/`oneOf`
//! branch and `if` outcome gives candidates of its own. Nothing here is trusted: a candidate
//! counts only once the grammar and every check accept it, so a wrong guess costs a walk,
//! never soundness. The work is bounded ([`MAX_WORK`]).

use std::cell::Cell;

use serde_json::{Map, Number, Value};

use crate::grammar::dfa::CharDfa;
use crate::grammar::regex::RegexOptions;
use crate::schema::ecma;

/// Most documents [`documents`] returns.
///
/// A constant of the algorithm, not a user limit: witnesses are candidates a liveness
/// proof tries first; they never change which bytes the matcher accepts, and they bound
/// the proof's work, not its soundness. The same holds for the other `MAX_*` here.
const MAX_WITNESSES: usize = 8;
/// Longest document kept, in bytes.
/// A constant of the algorithm, not a user limit (see [`MAX_WITNESSES`]).
const MAX_WITNESS_BYTES: usize = 16 * 1024;
/// Candidates kept per value.
/// A constant of the algorithm, not a user limit (see [`MAX_WITNESSES`]).
const MAX_CANDIDATES: usize = 3;
/// Branches of one `anyOf`/`oneOf` tried.
/// A constant of the algorithm, not a user limit (see [`MAX_WITNESSES`]).
const MAX_BRANCHES: usize = 6;
/// Deepest schema nesting followed.
/// A constant of the algorithm, not a user limit (see [`MAX_WITNESSES`]).
const MAX_DEPTH: usize = 24;
/// Schema nodes visited at most over one call of [`documents`].
/// A constant of the algorithm, not a user limit (see [`MAX_WITNESSES`]).
const MAX_WORK: usize = 20_000;

/// Compact JSON texts of candidate documents for the canonical schema `doc`, most likely
/// first, distinct, at most [`MAX_WITNESSES`] of at most [`MAX_WITNESS_BYTES`] bytes.
pub(crate) fn documents(doc: &Value) -> Vec<Vec<u8>> {
    let g = Gen { doc, work: Cell::new(0) };
    let mut out: Vec<Vec<u8>> = Vec::new();
    for v in g.values(doc, 0) {
        if let Ok(text) = serde_json::to_vec(&v) {
            if text.len() <= MAX_WITNESS_BYTES && !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out.truncate(MAX_WITNESSES);
    out
}

/// Members a repair search can insert into an object to satisfy its `required`: for every
/// required name of every object schema in `doc`, `"name":value` and `,"name":value` with a
/// witness value, compact, at most `max` of at most `max_bytes` bytes, in schema order.
pub(crate) fn required_members(doc: &Value, max: usize, max_bytes: usize) -> Vec<Vec<u8>> {
    let g = Gen { doc, work: Cell::new(0) };
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut work = vec![doc];
    while let Some(v) = work.pop() {
        if out.len() >= max {
            break;
        }
        match v {
            Value::Object(m) => {
                if let (Some(Value::Array(req)), props) = (m.get("required"), m.get("properties")) {
                    for name in req.iter().filter_map(Value::as_str) {
                        let schema = props.and_then(|p| p.get(name)).unwrap_or(&Value::Bool(true));
                        let (Some(value), Ok(key)) = (g.value(schema, 1), serde_json::to_string(name)) else {
                            continue;
                        };
                        let Ok(value) = serde_json::to_string(&value) else { continue };
                        let member = format!("{key}:{value}");
                        for text in [format!(",{member}"), member] {
                            if text.len() <= max_bytes && !out.iter().any(|o| o == text.as_bytes()) {
                                out.push(text.into_bytes());
                            }
                        }
                    }
                }
                work.extend(m.values().rev());
            }
            Value::Array(items) => work.extend(items.iter().rev()),
            _ => {}
        }
    }
    out.truncate(max);
    out
}

struct Gen<'d> {
    doc: &'d Value,
    work: Cell<usize>,
}

impl Gen<'_> {
    /// Candidates for a value under `schema`.
    fn values(&self, schema: &Value, depth: usize) -> Vec<Value> {
        self.work.set(self.work.get() + 1);
        if depth > MAX_DEPTH || self.work.get() > MAX_WORK {
            return Vec::new();
        }
        match schema {
            Value::Bool(true) => vec![Value::Null],
            Value::Object(m) => self.of_map(m, depth),
            _ => Vec::new(),
        }
    }

    /// The first candidate for a value under `schema`.
    fn value(&self, schema: &Value, depth: usize) -> Option<Value> {
        self.values(schema, depth).into_iter().next()
    }

    fn of_map(&self, m: &Map<String, Value>, depth: usize) -> Vec<Value> {
        let m = self.flatten(m, depth);
        // A choice: each branch (or outcome) merged with the rest.
        for key in ["oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = m.get(key) {
                let mut rest = m.clone();
                rest.remove(key);
                let mut out = Vec::new();
                for b in branches.iter().take(MAX_BRANCHES) {
                    match b {
                        Value::Object(bm) => out.extend(self.of_map(&merge(&rest, bm), depth + 1)),
                        Value::Bool(true) => out.extend(self.of_map(&rest, depth + 1)),
                        _ => {}
                    }
                }
                return distinct(out, MAX_CANDIDATES + 2);
            }
        }
        if let Some(cond) = m.get("if") {
            let mut rest = m.clone();
            for k in ["if", "then", "else"] {
                rest.remove(k);
            }
            let mut out = Vec::new();
            if let Some(c) = cond.as_object() {
                let with = merge(&rest, c);
                let then = m.get("then").and_then(Value::as_object).map_or(with.clone(), |t| merge(&with, t));
                out.extend(self.of_map(&then, depth + 1));
            }
            let other = m.get("else").and_then(Value::as_object).map_or(rest.clone(), |e| merge(&rest, e));
            out.extend(self.of_map(&other, depth + 1));
            return distinct(out, MAX_CANDIDATES + 2);
        }
        if let Some(c) = m.get("const") {
            return vec![c.clone()];
        }
        if let Some(Value::Array(e)) = m.get("enum") {
            return e.iter().take(MAX_CANDIDATES).cloned().collect();
        }
        let mut out = Vec::new();
        if let Some(Value::Array(ex)) = m.get("examples") {
            out.extend(ex.iter().take(2).cloned());
        }
        if let Some(d) = m.get("default") {
            out.push(d.clone());
        }
        for ty in types(&m) {
            let v = match ty {
                "null" => Some(Value::Null),
                "boolean" => Some(Value::Bool(false)),
                "integer" => number(&m, true),
                "number" => number(&m, false),
                "string" => string(&m),
                "array" => self.array(&m, depth),
                "object" => self.object(&m, depth),
                _ => None,
            };
            out.extend(v);
        }
        distinct(out, MAX_CANDIDATES)
    }

    /// `m` with its local `$ref` target and its `allOf` branches merged in (a heuristic:
    /// the candidates are checked by the matcher).
    fn flatten(&self, m: &Map<String, Value>, depth: usize) -> Map<String, Value> {
        let mut m = m.clone();
        for _ in 0..MAX_DEPTH.saturating_sub(depth) {
            let mut changed = false;
            if let Some(Value::String(r)) = m.remove("$ref") {
                if let Some(Value::Object(target)) = r.strip_prefix('#').and_then(|p| self.doc.pointer(p)) {
                    m = merge(target, &m);
                    changed = true;
                }
            }
            if let Some(Value::Array(all)) = m.remove("allOf") {
                for b in &all {
                    if let Value::Object(bm) = b {
                        m = merge(&m, bm);
                    }
                }
                changed = true;
            }
            if !changed {
                break;
            }
        }
        m
    }

    fn array(&self, m: &Map<String, Value>, depth: usize) -> Option<Value> {
        let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0).min(64) as usize;
        let prefix: &[Value] = match (m.get("prefixItems"), m.get("items")) {
            (Some(Value::Array(p)), _) | (None, Some(Value::Array(p))) => p,
            _ => &[],
        };
        let rest = match m.get("items") {
            Some(Value::Array(_)) => m.get("additionalItems"),
            other => other,
        };
        let rest = rest.cloned().unwrap_or(Value::Bool(true));
        let contains = m.get("contains").filter(|_| m.get("minContains").and_then(Value::as_u64) != Some(0));
        let unique = m.get("uniqueItems") == Some(&Value::Bool(true));
        let mut out: Vec<Value> = Vec::new();
        for s in prefix.iter().take(min) {
            out.push(self.value(s, depth + 1)?);
        }
        if let Some(c) = contains {
            let w = self.value(c, depth + 1)?;
            if !out.contains(&w) {
                out.push(w);
            }
        }
        if out.len() < min {
            let pool = self.values(&rest, depth + 1);
            for i in out.len()..min {
                let pick = if unique { pool.iter().find(|v| !out.contains(v)) } else { pool.first() };
                match pick {
                    Some(v) => out.push(v.clone()),
                    None if unique => out.push(Value::Number(Number::from(i))),
                    None => return None,
                }
            }
        }
        Some(Value::Array(out))
    }

    fn object(&self, m: &Map<String, Value>, depth: usize) -> Option<Value> {
        let props = m.get("properties").and_then(Value::as_object);
        let mut names: Vec<String> = Vec::new();
        let add = |n: &str, names: &mut Vec<String>| {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        };
        if let Some(Value::Array(req)) = m.get("required") {
            req.iter().filter_map(Value::as_str).for_each(|n| add(n, &mut names));
        }
        // Names that named ones bring along.
        for key in ["dependentRequired", "dependencies"] {
            if let Some(Value::Object(deps)) = m.get(key) {
                for _ in 0..4 {
                    for (n, also) in deps {
                        if let (true, Value::Array(also)) = (names.contains(n), also) {
                            also.iter().filter_map(Value::as_str).for_each(|a| add(a, &mut names));
                        }
                    }
                }
            }
        }
        let min = m.get("minProperties").and_then(Value::as_u64).unwrap_or(0).min(64) as usize;
        if let Some(p) = props {
            for n in p.keys() {
                if names.len() >= min {
                    break;
                }
                add(n, &mut names);
            }
        }
        let extra = m.get("additionalProperties").cloned().unwrap_or(Value::Bool(true));
        let mut i = 0;
        while names.len() < min && extra != Value::Bool(false) && i < 64 {
            add(&format!("p{i}"), &mut names);
            i += 1;
        }
        let mut out = Map::new();
        for n in names {
            let schema = props.and_then(|p| p.get(&n)).unwrap_or(&extra);
            out.insert(n, self.value(schema, depth + 1)?);
        }
        Some(Value::Object(out))
    }
}

/// The types to try, in order: those `type` names, else those the keywords suggest.
fn types(m: &Map<String, Value>) -> Vec<&str> {
    match m.get("type") {
        Some(Value::String(t)) => return vec![t.as_str()],
        Some(Value::Array(ts)) => return ts.iter().filter_map(Value::as_str).collect(),
        _ => {}
    }
    let has = |ks: &[&str]| ks.iter().any(|k| m.contains_key(*k));
    let mut out = Vec::new();
    if has(&["properties", "required", "additionalProperties", "minProperties", "patternProperties"]) {
        out.push("object");
    }
    if has(&["items", "prefixItems", "minItems", "contains"]) {
        out.push("array");
    }
    if has(&["minLength", "maxLength", "pattern", "format"]) {
        out.push("string");
    }
    if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
        out.push("number");
    }
    if out.is_empty() {
        out.extend(["null", "string", "object"]);
    }
    out
}

/// A number in the range `m` sets, a multiple of its `multipleOf`: 0 where allowed.
fn number(m: &Map<String, Value>, integer: bool) -> Option<Value> {
    let get = |k: &str| m.get(k).and_then(Value::as_f64);
    let flag = |k: &str| m.get(k) == Some(&Value::Bool(true));
    // Draft 4 spells exclusive bounds as flags beside `minimum`/`maximum`.
    let (lo, lo_open) = match (get("minimum"), get("exclusiveMinimum")) {
        (Some(a), Some(b)) => (a.max(b), b >= a),
        (Some(a), None) => (a, flag("exclusiveMinimum")),
        (None, Some(b)) => (b, true),
        (None, None) => (f64::NEG_INFINITY, false),
    };
    let (hi, hi_open) = match (get("maximum"), get("exclusiveMaximum")) {
        (Some(a), Some(b)) => (a.min(b), b <= a),
        (Some(a), None) => (a, flag("exclusiveMaximum")),
        (None, Some(b)) => (b, true),
        (None, None) => (f64::INFINITY, false),
    };
    let step = get("multipleOf").filter(|s| *s > 0.0).unwrap_or(if integer { 1.0 } else { 0.0 });
    let fits = |v: f64| (v > lo || (v == lo && !lo_open)) && (v < hi || (v == hi && !hi_open));
    let snap = |v: f64| if step > 0.0 { (v / step).ceil() * step } else { v };
    let candidates = [0.0, snap(lo), snap(lo + step), snap(lo + 1.0), snap((lo + hi) / 2.0)];
    let v = candidates.into_iter().find(|&v| v.is_finite() && fits(v))?;
    if integer || v.fract() == 0.0 && v.abs() < 9.0e15 {
        Some(Value::Number(Number::from(v as i64)))
    } else {
        Number::from_f64(v).map(Value::Number)
    }
}

/// A string under `m`: the shortest of its pattern's automaton within its lengths, or a
/// sample of its format, or `a`s to its `minLength`.
fn string(m: &Map<String, Value>) -> Option<Value> {
    let min = m.get("minLength").and_then(Value::as_u64).map(|x| x.min(u32::MAX as u64) as u32).unwrap_or(0);
    let max = m.get("maxLength").and_then(Value::as_u64).map(|x| x.min(u32::MAX as u64) as u32);
    if let Some(Value::String(p)) = m.get("pattern") {
        let dfa = match ecma::to_expr(p, &RegexOptions::search()) {
            Ok(e) => CharDfa::of(&e),
            Err(_) => ecma::lookaround::to_dfa(p),
        };
        let cut = dfa.and_then(|d| d.with_length(min, max));
        return cut.and_then(|d| d.shortest()).map(Value::String);
    }
    if let Some(Value::String(f)) = m.get("format") {
        if let Some(s) = format_sample(f) {
            return Some(Value::String(s.to_string()));
        }
    }
    Some(Value::String("a".repeat(min.min(4096) as usize)))
}

/// A valid sample of a `format`, where every common validator agrees it is one.
fn format_sample(format: &str) -> Option<&'static str> {
    Some(match format {
        "date-time" => "2024-01-01T00:00:00Z",
        "date" => "2024-01-01",
        "time" => "00:00:00Z",
        "duration" => "P1D",
        "email" | "idn-email" => "a@example.com",
        "hostname" | "idn-hostname" => "example.com",
        "ipv4" => "127.0.0.1",
        "ipv6" => "::1",
        "uri" | "iri" | "uri-reference" | "iri-reference" | "uri-template" => "https://example.com",
        "uuid" => "00000000-0000-4000-8000-000000000000",
        "json-pointer" => "/a",
        "relative-json-pointer" => "0",
        "regex" => "a",
        _ => return None,
    })
}

/// `a` with `b`'s keywords added: lists of names joined, bounds tightened, `properties`
/// joined (a name in both takes both schemas), `type`s intersected, the rest kept from `a`.
fn merge(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = a.clone();
    for (k, v) in b {
        let Some(old) = out.get(k).cloned() else {
            out.insert(k.clone(), v.clone());
            continue;
        };
        let merged = match (k.as_str(), &old, v) {
            ("required", Value::Array(x), Value::Array(y)) => {
                let mut all = x.clone();
                all.extend(y.iter().filter(|n| !x.contains(n)).cloned());
                Value::Array(all)
            }
            ("properties", Value::Object(x), Value::Object(y)) => {
                let mut all = x.clone();
                for (n, s) in y {
                    let joined = match all.get(n) {
                        Some(prev) if prev != s => serde_json::json!({"allOf": [prev, s]}),
                        _ => s.clone(),
                    };
                    all.insert(n.clone(), joined);
                }
                Value::Object(all)
            }
            ("type", x, y) => {
                let list = |t: &Value| -> Vec<Value> {
                    match t {
                        Value::Array(v) => v.clone(),
                        other => vec![other.clone()],
                    }
                };
                let ys = list(y);
                let both: Vec<Value> = list(x).into_iter().filter(|t| ys.contains(t)).collect();
                match both.len() {
                    0 => old,
                    1 => both[0].clone(),
                    _ => Value::Array(both),
                }
            }
            ("minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties", x, y) => {
                if y.as_f64() > x.as_f64() {
                    y.clone()
                } else {
                    old
                }
            }
            ("maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties", x, y) => {
                if y.as_f64() < x.as_f64() {
                    y.clone()
                } else {
                    old
                }
            }
            _ => old,
        };
        out.insert(k.clone(), merged);
    }
    out
}

/// The first `n` distinct values of `v`.
fn distinct(v: Vec<Value>, n: usize) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(n);
    for x in v {
        if out.len() == n {
            break;
        }
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(schema: Value) -> Value {
        let docs = documents(&schema);
        serde_json::from_slice(docs.first().expect("a witness")).expect("JSON")
    }

    #[test]
    fn witnesses_follow_the_keywords() {
        let person = json!({
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 2}, "age": {"type": "integer", "minimum": 18}},
            "required": ["name", "age"]
        });
        assert_eq!(first(person), json!({"name": "aa", "age": 18}));
        let tagged = json!({
            "oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
            "$defs": {
                "a": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                "b": {"properties": {"kind": {"const": "b"}, "n": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5}}, "required": ["kind", "n"]}
            }
        });
        let docs: Vec<Value> = documents(&tagged).iter().map(|d| serde_json::from_slice(d).expect("JSON")).collect();
        assert_eq!(docs, vec![json!({"kind": "a"}), json!({"kind": "b", "n": 0.5})]);
        let code = json!({"type": "string", "pattern": "^[A-Z]{3}-\\d+$"});
        assert_eq!(first(code), json!("AAA-0"));
        let tags = json!({"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 2, "uniqueItems": true, "contains": {"const": "y"}});
        assert_eq!(first(tags), json!(["y", "x"]));
        assert_eq!(first(json!({"type": "string", "format": "date"})), json!("2024-01-01"));
        assert!(documents(&json!(false)).is_empty());
    }
}

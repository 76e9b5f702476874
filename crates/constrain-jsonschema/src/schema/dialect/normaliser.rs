//! The walk that rewrites a schema into the canonical form: [`Normaliser::scan`] finds the
//! identifiers and bases, [`Normaliser::rewrite`] resolves references and each dialect's
//! keywords.

use crate::schema::{escape_pointer, percent_decode, Error};
use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

use super::{
    content_assertion, uri::resolve_uri, Ctx, Draft, ARRAYS, COUNTS, DEFAULT_BASE, MAPS, MAX_DEPTH, SINGLE, TARGETS,
};

pub(super) struct Normaliser<'a> {
    pub(super) root: &'a Value,
    pub(super) forced: Option<Draft>,
    /// Context inside each schema object at a real subschema position, by pointer.
    pub(super) ctx: HashMap<String, Ctx>,
    /// Absolute URIs (resources and `uri#anchor`) to pointers.
    pub(super) ids: HashMap<String, String>,
    /// `$dynamicAnchor`s: name and pointer.
    pub(super) dyn_anchors: Vec<(String, String)>,
    /// Pointers of resources with `$recursiveAnchor: true`.
    pub(super) recursive: Vec<String>,
}

impl<'a> Normaliser<'a> {
    /// The context inside `v`, given its parent's.
    pub(super) fn enter(&self, v: &Value, parent: &Ctx, is_root: bool) -> Ctx {
        let Value::Object(m) = v else { return parent.clone() };
        let mut draft = parent.draft;
        let id_key = |d: Draft| if d == Draft::Draft4 { "id" } else { "$id" };
        if let Some(f) = self.forced {
            draft = f;
        } else if let Some(Value::String(s)) = m.get("$schema") {
            let resource = is_root
                || m.get(id_key(draft)).is_some_and(|v| v.is_string())
                || m.get("$id").is_some_and(|v| v.is_string());
            if resource {
                if let Some(d) = Draft::from_uri(s) {
                    draft = d;
                }
            }
        }
        let mut base = parent.base.clone();
        // Up to draft-07 a `$ref`'s siblings, `$id` included, are ignored.
        let ref_alone = draft <= Draft::Draft7 && m.contains_key("$ref");
        if !ref_alone {
            if let Some(Value::String(id)) = m.get(id_key(draft)) {
                let no_frag = id.split('#').next().unwrap_or("");
                if !no_frag.is_empty() {
                    base = resolve_uri(&parent.base, no_frag);
                }
            }
        }
        Ctx { base, draft }
    }

    /// First walk: contexts, identifiers and anchors at real subschema positions.
    pub(super) fn scan(&mut self, v: &Value, ptr: String, ctx: Ctx, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(Error::new(&ptr, "$ref", "schema nests too deeply"));
        }
        let Value::Object(m) = v else {
            self.ctx.insert(ptr, ctx);
            return Ok(());
        };
        let draft = ctx.draft;
        let ref_alone = draft <= Draft::Draft7 && m.contains_key("$ref");
        if !ref_alone {
            let id_key = if draft == Draft::Draft4 { "id" } else { "$id" };
            if let Some(Value::String(id)) = m.get(id_key) {
                let no_frag = id.split('#').next().unwrap_or("");
                if !no_frag.is_empty() {
                    self.ids.entry(ctx.base.clone()).or_insert_with(|| ptr.clone());
                }
                // Before 2019-09 an `$id` of `#name` is a plain-name anchor.
                if draft <= Draft::Draft7 {
                    if let Some((_, frag)) = id.split_once('#') {
                        if !frag.is_empty() {
                            self.ids.entry(format!("{}#{frag}", ctx.base)).or_insert_with(|| ptr.clone());
                        }
                    }
                }
            }
            if draft >= Draft::Draft201909 {
                if let Some(Value::String(a)) = m.get("$anchor") {
                    self.ids.entry(format!("{}#{a}", ctx.base)).or_insert_with(|| ptr.clone());
                }
            }
            if draft == Draft::Draft202012 {
                if let Some(Value::String(a)) = m.get("$dynamicAnchor") {
                    self.ids.entry(format!("{}#{a}", ctx.base)).or_insert_with(|| ptr.clone());
                    self.dyn_anchors.push((a.clone(), ptr.clone()));
                }
            }
            if draft == Draft::Draft201909 && m.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                self.recursive.push(ptr.clone());
            }
        }
        if ptr.is_empty() {
            self.ids.entry(ctx.base.clone()).or_default();
        }
        for (k, c) in m {
            let kp = format!("{ptr}/{}", escape_pointer(k));
            let known = draft.knows(k) || k == "dependencies" || k == "definitions";
            if !known {
                continue;
            }
            if SINGLE.contains(&k.as_str()) && !c.is_array() {
                let cc = self.enter(c, &ctx, false);
                self.scan(c, kp, cc, depth + 1)?;
            } else if ARRAYS.contains(&k.as_str()) || (k == "items" && c.is_array()) {
                if let Value::Array(a) = c {
                    for (i, x) in a.iter().enumerate() {
                        let cc = self.enter(x, &ctx, false);
                        self.scan(x, format!("{kp}/{i}"), cc, depth + 1)?;
                    }
                }
            } else if MAPS.contains(&k.as_str()) {
                if let Value::Object(o) = c {
                    for (name, x) in o {
                        if k == "dependencies" && x.is_array() {
                            continue;
                        }
                        let cc = self.enter(x, &ctx, false);
                        self.scan(x, format!("{kp}/{}", escape_pointer(name)), cc, depth + 1)?;
                    }
                }
            }
        }
        self.ctx.insert(ptr, ctx);
        Ok(())
    }

    /// The context inside the schema at `ptr` (a `$ref` target): recorded by the scan, or,
    /// for a target at no real subschema position, its nearest recorded ancestor's.
    pub(super) fn ctx_at(&self, ptr: &str) -> Ctx {
        if let Some(c) = self.ctx.get(ptr) {
            return c.clone();
        }
        let mut p = ptr;
        while let Some(i) = p.rfind('/') {
            p = &p[..i];
            if let Some(c) = self.ctx.get(p) {
                let target = self.root.pointer(ptr).unwrap_or(&Value::Null);
                return self.enter(target, c, false);
            }
        }
        Ctx { base: DEFAULT_BASE.into(), draft: self.forced.unwrap_or(Draft::Draft202012) }
    }

    /// Resolves a reference written at `at` (inside a schema whose base is `base`) to the
    /// target's pointer in the original document.
    fn resolve(&self, r: &str, base: &str, at: &str, keyword: &str) -> Result<String, Error> {
        let full = resolve_uri(base, r);
        let (doc, frag) = match full.split_once('#') {
            Some((d, f)) => (d.to_string(), f.to_string()),
            None => (full.clone(), String::new()),
        };
        let ptr = if frag.is_empty() || frag.starts_with('/') {
            let Some(res) = self.ids.get(&doc) else {
                return Err(Error::new(
                    at,
                    keyword,
                    format!("reference {r:?} is not to this document (remote references are not supported)"),
                ));
            };
            format!("{res}{}", percent_decode(&frag))
        } else {
            let frag = percent_decode(&frag);
            match self.ids.get(&format!("{doc}#{frag}")) {
                Some(p) => p.clone(),
                None => return Err(Error::new(at, keyword, format!("anchor {r:?} not found"))),
            }
        };
        if self.root.pointer(&ptr).is_none() {
            return Err(Error::new(at, keyword, format!("reference {r:?} does not resolve")));
        }
        Ok(ptr)
    }

    /// The canonical `$ref` to the target at `ptr`, which is queued for rewriting.
    fn local_ref(ptr: &str, todo: &mut Vec<String>) -> Value {
        if ptr.is_empty() {
            return Value::String("#".into());
        }
        todo.push(ptr.to_string());
        // `%` is escaped: the compiler percent-decodes fragments.
        Value::String(format!("#/{TARGETS}/{}", escape_pointer(ptr).replace('%', "%25")))
    }

    /// Second walk: the canonical form of the schema `v` at `ptr` (context `ctx` inside it).
    pub(super) fn rewrite(
        &self,
        v: &Value,
        ptr: &str,
        ctx: &Ctx,
        todo: &mut Vec<String>,
        depth: usize,
    ) -> Result<Value, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::new(ptr, "$ref", "schema nests too deeply"));
        }
        let Value::Object(m) = v else { return Ok(v.clone()) };
        let draft = ctx.draft;
        let mut out = Map::new();
        let sub = |k: &str, c: &Value, todo: &mut Vec<String>| -> Result<Value, Error> {
            let cc = self.enter(c, ctx, false);
            self.rewrite(c, &format!("{ptr}/{}", escape_pointer(k)), &cc, todo, depth + 1)
        };
        if draft <= Draft::Draft7 {
            if let Some(r) = m.get("$ref") {
                let Value::String(r) = r else {
                    return Err(Error::new(ptr, "$ref", "$ref must be a string"));
                };
                // Siblings (and a sibling `id`) are ignored; the base is the parent's.
                let target = self.resolve(r, &ctx.base, ptr, "$ref")?;
                out.insert("$ref".into(), Self::local_ref(&target, todo));
                return Ok(Value::Object(out));
            }
        }
        let mut extra_all_of: Vec<Value> = Vec::new();
        if draft.asserts_content() {
            extra_all_of.extend(content_assertion(m, ptr)?);
        }
        let tuple = matches!(m.get("items"), Some(Value::Array(_)));
        for (k, c) in m {
            let k = k.as_str();
            if !draft.knows(k) && k != "dependencies" {
                continue;
            }
            match k {
                "$ref" => {
                    let Value::String(r) = c else {
                        return Err(Error::new(ptr, "$ref", "$ref must be a string"));
                    };
                    let target = self.resolve(r, &ctx.base, ptr, "$ref")?;
                    out.insert("$ref".into(), Self::local_ref(&target, todo));
                }
                "$dynamicRef" | "$recursiveRef" => {
                    let Value::String(r) = c else {
                        return Err(Error::new(ptr, k, format!("{k} must be a string")));
                    };
                    match self.static_dynamic_ref(k, r, ctx, ptr)? {
                        Some(target) => {
                            extra_all_of.push(serde_json::json!({ "$ref": Self::local_ref(&target, todo) }))
                        }
                        None => {
                            out.insert(k.into(), c.clone());
                        }
                    }
                }
                "items" if tuple => {
                    let Value::Array(a) = c else { continue };
                    let mut p = Vec::new();
                    for (i, x) in a.iter().enumerate() {
                        let cc = self.enter(x, ctx, false);
                        p.push(self.rewrite(x, &format!("{ptr}/items/{i}"), &cc, todo, depth + 1)?);
                    }
                    out.insert("prefixItems".into(), Value::Array(p));
                    if let Some(add) = m.get("additionalItems") {
                        out.insert("items".into(), sub("additionalItems", add, todo)?);
                    }
                }
                "additionalItems" | "prefixItems" if tuple => {}
                "additionalItems" => {}
                "dependencies" => {
                    let Value::Object(deps) = c else {
                        return Err(Error::new(ptr, k, "dependencies must be an object"));
                    };
                    for (name, d) in deps {
                        let (key, val) = match d {
                            Value::Array(_) => ("dependentRequired", d.clone()),
                            _ => {
                                let cc = self.enter(d, ctx, false);
                                (
                                    "dependentSchemas",
                                    self.rewrite(
                                        d,
                                        &format!("{ptr}/dependencies/{}", escape_pointer(name)),
                                        &cc,
                                        todo,
                                        depth + 1,
                                    )?,
                                )
                            }
                        };
                        add_dependency(&mut out, key, name, val);
                    }
                }
                "dependentRequired" => {
                    if let Value::Object(deps) = c {
                        for (name, d) in deps {
                            add_dependency(&mut out, k, name, d.clone());
                        }
                    } else {
                        out.insert(k.into(), c.clone());
                    }
                }
                // draft-04's boolean form (taken with that meaning in any dialect).
                "exclusiveMinimum" | "exclusiveMaximum" if c.is_boolean() => {
                    let plain = if k == "exclusiveMinimum" { "minimum" } else { "maximum" };
                    if c == &Value::Bool(true) {
                        if let Some(b) = m.get(plain) {
                            out.insert(k.into(), b.clone());
                        }
                    }
                }
                "minimum" | "maximum" => {
                    let excl = if k == "minimum" { "exclusiveMinimum" } else { "exclusiveMaximum" };
                    if m.get(excl) != Some(&Value::Bool(true)) {
                        out.insert(k.into(), c.clone());
                    }
                }
                // From draft-06 on, a count may be written as an integer-valued number
                // (`2.0`); it means the integer (taken so in any dialect).
                _ if COUNTS.contains(&k) => {
                    let whole = c.as_f64().filter(|f| c.as_u64().is_none() && *f >= 0.0 && f.fract() == 0.0);
                    let v = match whole {
                        Some(f) => Value::from(f as u64),
                        None => c.clone(),
                    };
                    out.insert(k.into(), v);
                }
                _ if SINGLE.contains(&k) => {
                    out.insert(k.into(), sub(k, c, todo)?);
                }
                _ if ARRAYS.contains(&k) => {
                    let Value::Array(a) = c else {
                        return Err(Error::new(ptr, k, format!("{k} must be an array")));
                    };
                    let mut p = Vec::new();
                    for (i, x) in a.iter().enumerate() {
                        let cc = self.enter(x, ctx, false);
                        p.push(self.rewrite(x, &format!("{ptr}/{k}/{i}"), &cc, todo, depth + 1)?);
                    }
                    match (k, out.get_mut(k)) {
                        ("allOf", Some(Value::Array(prev))) => prev.extend(p),
                        _ => {
                            out.insert(k.into(), Value::Array(p));
                        }
                    }
                }
                "definitions" | "$defs" => {}
                "dependentSchemas" | "properties" | "patternProperties" => {
                    let Value::Object(o) = c else {
                        return Err(Error::new(ptr, k, format!("{k} must be an object")));
                    };
                    for (name, x) in o {
                        let cc = self.enter(x, ctx, false);
                        let v =
                            self.rewrite(x, &format!("{ptr}/{k}/{}", escape_pointer(name)), &cc, todo, depth + 1)?;
                        if k == "dependentSchemas" {
                            add_dependency(&mut out, k, name, v);
                        } else {
                            let slot = out.entry(k.to_string()).or_insert_with(|| Value::Object(Map::new()));
                            if let Value::Object(s) = slot {
                                s.insert(name.clone(), v);
                            }
                        }
                    }
                }
                _ if crate::schema::is_constraint_keyword(k)
                    && k != crate::schema::FORBIDDEN
                    && k != crate::schema::JSON_TEXT =>
                {
                    out.insert(k.into(), c.clone());
                }
                _ => {}
            }
        }
        if !extra_all_of.is_empty() {
            match out.get_mut("allOf") {
                Some(Value::Array(a)) => a.extend(extra_all_of),
                _ => {
                    out.insert("allOf".into(), Value::Array(extra_all_of));
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// The target of a `$dynamicRef`/`$recursiveRef` when it is provably the same as a plain
    /// `$ref` (no other dynamic anchor of its name exists anywhere), else `None`.
    fn static_dynamic_ref(&self, k: &str, r: &str, ctx: &Ctx, ptr: &str) -> Result<Option<String>, Error> {
        let target = self.resolve(r, &ctx.base, ptr, k)?;
        let t = self.root.pointer(&target).unwrap_or(&Value::Null);
        if k == "$dynamicRef" {
            let name = r.split_once('#').map(|x| x.1).unwrap_or("");
            let anchored = !name.is_empty()
                && !name.starts_with('/')
                && t.get("$dynamicAnchor").and_then(|v| v.as_str()) == Some(name);
            if !anchored {
                return Ok(Some(target));
            }
            let others = self.dyn_anchors.iter().filter(|(n, p)| n == name && *p != target).count();
            Ok((others == 0).then_some(target))
        } else {
            if t.get("$recursiveAnchor") != Some(&Value::Bool(true)) {
                return Ok(Some(target));
            }
            let others = self.recursive.iter().filter(|p| **p != target).count();
            Ok((others == 0).then_some(target))
        }
    }
}

/// Adds one `dependentRequired`/`dependentSchemas` entry, combining with an existing one.
fn add_dependency(out: &mut Map<String, Value>, key: &str, name: &str, val: Value) {
    let slot = out.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(s) = slot else { return };
    match s.remove(name) {
        None => {
            s.insert(name.to_string(), val);
        }
        Some(old) => {
            let merged = if key == "dependentRequired" {
                let mut a = old.as_array().cloned().unwrap_or_default();
                for x in val.as_array().cloned().unwrap_or_default() {
                    if !a.contains(&x) {
                        a.push(x);
                    }
                }
                Value::Array(a)
            } else {
                serde_json::json!({ "allOf": [old, val] })
            };
            s.insert(name.to_string(), merged);
        }
    }
}

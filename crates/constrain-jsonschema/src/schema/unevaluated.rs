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
//! evaluate depends on the instance. An object with one conditional applicator (`oneOf`, or
//! `if` without `else`) and nothing else conditional is rewritten per branch, exactly, for
//! properties and items alike (see [`branches`]). Elsewhere, with run-time checks, the names
//! they may evaluate count as evaluated (a superset) and the keyword is checked as the value
//! completes: exact together. Without run-time checks they count as *unevaluated* (so `U`
//! applies to them too; per branch for one `anyOf` or `if` with `else`): a subset of the
//! schema's instances, never more, and a [`Note`] says so. `not` evaluates nothing (its
//! subschema must fail).

use rustc_hash::FxHashSet as HashSet;
use serde_json::{Map, Value};
use std::borrow::Cow;

use super::{escape_pointer, mentions_any, Note};

/// What a schema object evaluates for sure.
#[derive(Default, Debug, Clone)]
struct Evaluated {
    all: bool,
    names: Vec<String>,
    patterns: Vec<String>,
    prefix: usize,
    all_items: bool,
}

impl Evaluated {
    /// Adds property names (`patterns`: `patternProperties` patterns) not listed yet.
    fn add_names<'n>(&mut self, names: impl IntoIterator<Item = &'n String>, patterns: bool) {
        let list = if patterns { &mut self.patterns } else { &mut self.names };
        for n in names {
            if !list.contains(n) {
                list.push(n.clone());
            }
        }
    }

    /// Adds all that `other` evaluates.
    fn include(&mut self, other: &Evaluated) {
        self.all |= other.all;
        self.all_items |= other.all_items;
        self.prefix = self.prefix.max(other.prefix);
        self.add_names(&other.names, false);
        self.add_names(&other.patterns, true);
    }

    /// Whether no property is named (for what a conditional applicator adds).
    fn no_properties(&self) -> bool {
        !self.all && self.names.is_empty() && self.patterns.is_empty()
    }

    /// Whether no item is evaluated (for what a conditional applicator adds).
    fn no_items(&self) -> bool {
        !self.all_items && self.prefix == 0
    }

    /// The `prefixItems` part naming the evaluated items (all `true`).
    fn items_part(&self) -> Map<String, Value> {
        let mut p = Map::new();
        p.insert("prefixItems".into(), Value::Array(vec![Value::Bool(true); self.prefix]));
        p
    }

    /// The `properties`/`patternProperties` part naming these properties (all `true`).
    fn part(&self) -> Map<String, Value> {
        let mut p = Map::new();
        let all_true = |v: &[String]| Value::Object(v.iter().map(|n| (n.clone(), Value::Bool(true))).collect());
        if !self.names.is_empty() {
            p.insert("properties".into(), all_true(&self.names));
        }
        if !self.patterns.is_empty() {
            p.insert("patternProperties".into(), all_true(&self.patterns));
        }
        p
    }
}

/// How one `unevaluated*` keyword is rewritten.
enum Plan {
    /// One more `allOf` part naming what the object evaluates, to which `U` is added as
    /// `additionalProperties`/`items` (`None`: drop the keyword, which constrains nothing).
    Part(Option<Map<String, Value>>),
    /// The object has one conditional applicator (`anyOf`, `oneOf` or `if`), whose
    /// branches evaluate different names (or items): one more `allOf` part, an `anyOf` over
    /// the branches, each with the names it evaluates together with the object's own (the
    /// `Part` form, per branch; `None`: that branch evaluates everything). For `if`, the
    /// two branches are `if` with `then`, and `else` (see [`branches`]).
    Branches(&'static str, Vec<Option<Map<String, Value>>>),
}

/// One rewrite: the object's pointer, the keyword, and how.
type Edit = (String, &'static str, Plan);

/// The [`Plan::Branches`] of an object `m` whose own static evaluation is `own`, when it has
/// exactly one conditional applicator and nothing else it evaluates depends on the
/// instance (its `allOf` parts and `$ref` target have none, nor have the branches).
/// For `oneOf` the rewrite is exact: the one branch that holds names what is evaluated;
/// for `if` it is exact when `if` holds. It is a subset for `anyOf` (an instance whose
/// properties are evaluated only by two branches together is refused) and for `else`
/// (which counts only the names the `if` branch evaluates too).
fn branches(doc: &Value, m: &Map<String, Value>, own: &Evaluated, items: bool) -> Option<Plan> {
    let kinds: Vec<&'static str> = ["anyOf", "oneOf", "if"].into_iter().filter(|k| m.contains_key(*k)).collect();
    let [kind] = kinds.as_slice() else { return None };
    if ["dependentSchemas", "$dynamicRef", "$recursiveRef"].iter().any(|k| m.contains_key(*k))
        || (items && m.contains_key("contains"))
    {
        return None;
    }
    let conditional = |v: &Value| {
        let mut d = Evaluated::default();
        dynamic_evaluated(doc, v, &mut d, &mut HashSet::default(), 1);
        if items {
            !d.no_items()
        } else {
            !d.no_properties()
        }
    };
    if m.get("allOf").and_then(Value::as_array).is_some_and(|parts| parts.iter().any(conditional))
        || target(doc, m).is_some_and(conditional)
    {
        return None;
    }
    // What `start` and the schemas of one side evaluate, or `None` if one of them is itself
    // conditional.
    let evaluated = |mut ev: Evaluated, side: &[&Value]| -> Option<Evaluated> {
        for b in side {
            if conditional(b) {
                return None;
            }
            static_evaluated(doc, b, &mut ev, &mut HashSet::default(), 1, false);
        }
        Some(ev)
    };
    let names = |ev: &Evaluated| match items {
        false => (!ev.all).then(|| ev.part()),
        true => (!ev.all_items).then(|| ev.items_part()),
    };
    let sides = sides(m, kind)?;
    let named = if let (true, [then_side, else_side]) = (*kind == "if", sides.as_slice()) {
        let then_ev = evaluated(own.clone(), then_side)?;
        // The else branch is not guarded by `not if` (which may not compile): it names only
        // what `else` evaluates that the `if` branch does too, so it is a subset of the
        // schema's instances whether or not `if` holds.
        let else_only = evaluated(Evaluated::default(), else_side)?;
        let mut else_ev = own.clone();
        if items {
            // Items: the first `min` of what both sides evaluate.
            let reach = |ev: &Evaluated| if ev.all_items { usize::MAX } else { ev.prefix };
            let shared = reach(&else_only).min(reach(&then_ev));
            if shared == usize::MAX {
                else_ev.all_items = true;
            } else {
                else_ev.prefix = else_ev.prefix.max(shared);
            }
        } else if else_only.all {
            else_ev = then_ev.clone();
        } else {
            let shared = |n: &String, of: &[String]| then_ev.all || of.contains(n);
            else_ev.names.extend(else_only.names.iter().filter(|n| shared(n, &then_ev.names)).cloned());
            else_ev.patterns.extend(else_only.patterns.iter().filter(|p| shared(p, &then_ev.patterns)).cloned());
        }
        vec![names(&then_ev), names(&else_ev)]
    } else {
        sides.iter().map(|side| evaluated(own.clone(), side).map(|ev| names(&ev))).collect::<Option<Vec<_>>>()?
    };
    Some(Plan::Branches(kind, named))
}

/// The sides of the conditional applicator `kind` of `m`, each as the schemas an instance
/// on that side satisfies: for `if`, `if` with `then`, and `else`; for `anyOf`/`oneOf`,
/// each branch. `None` when the applicator is not a list.
fn sides<'m>(m: &'m Map<String, Value>, kind: &str) -> Option<Vec<Vec<&'m Value>>> {
    if kind == "if" {
        let then_side = [m.get("if"), m.get("then")].into_iter().flatten().collect();
        return Some(vec![then_side, m.get("else").into_iter().collect()]);
    }
    Some(m.get(kind)?.as_array()?.iter().map(|b| vec![b]).collect())
}

/// The [`Plan::Branches`] part for the object `m` (already rewritten below), with `u` the
/// value of `key` (`unevaluatedProperties` or `unevaluatedItems`):
/// `{"anyOf": [{"allOf": [branch…, names + u]}…]}`, `u` as `additionalProperties` or `items`.
fn branches_part(
    m: &Map<String, Value>,
    kind: &str,
    key: &str,
    names: Vec<Option<Map<String, Value>>>,
    u: &Value,
) -> Value {
    let rest = if key == "unevaluatedItems" { "items" } else { "additionalProperties" };
    let conj = |mut parts: Vec<Value>, names: Option<Map<String, Value>>| {
        if let Some(mut names) = names {
            names.insert(rest.into(), u.clone());
            parts.push(Value::Object(names));
        }
        let mut all = Map::new();
        all.insert("allOf".into(), Value::Array(parts));
        Value::Object(all)
    };
    let alts: Vec<Value> = self::sides(m, kind)
        .unwrap_or_default()
        .into_iter()
        .zip(names)
        .map(|(side, names)| conj(side.into_iter().cloned().collect(), names))
        .collect();
    let mut part = Map::new();
    part.insert("anyOf".into(), Value::Array(alts));
    Value::Object(part)
}

/// Rewrites every `unevaluated*` keyword of the canonical document `doc` (see the module
/// docs), recording under-approximations in `notes`.
///
/// With `checks` (run-time checks allowed), a keyword the rewrite cannot make exact is
/// rewritten the other way: everything a conditional applicator may evaluate counts as
/// evaluated, so the grammar accepts *more* there, and `(pointer, keyword)` is pushed to
/// `relaxed`, so the object (array) is validated against its subschema as it completes.
/// Together they accept exactly the schema's instances. Not where a dynamic reference
/// is in the document: the run-time check reads the canonical document, which no longer
/// holds their meaning.
pub(crate) fn rewrite<'d>(
    doc: &'d Value,
    notes: &mut Vec<Note>,
    checks: bool,
    relaxed: &mut Vec<(String, String)>,
) -> Cow<'d, Value> {
    if !mentions_unevaluated(doc) {
        // Most schemas: no scan with pointers, no copy.
        return Cow::Borrowed(doc);
    }
    let checks = checks && !mentions_any(doc, &["$dynamicRef", "$recursiveRef"]);
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
            if *u == Value::Bool(true) {
                // Constrains nothing: dropped.
                edits.push((ptr.clone(), key, Plan::Part(None)));
                continue;
            }
            if covers {
                edits.push((ptr.clone(), key, part(&ev, items)));
                continue;
            }
            // Properties (items) evaluated by one conditional applicator: per branch, which
            // is exact for `oneOf` and `if` without `else`, a subset otherwise.
            let plan = branches(doc, m, &ev, items);
            let subset = |kind: &str| kind == "anyOf" || (kind == "if" && m.contains_key("else"));
            let inexact = plan.as_ref().is_none_or(|p| matches!(p, Plan::Branches(kind, _) if subset(kind)));
            if inexact && checks {
                edits.push((ptr.clone(), key, widened(&ev, &dynamic, items)));
                relaxed.push((ptr.clone(), key.to_string()));
                continue;
            }
            let why = match (&plan, items) {
                (None, _) => "what anyOf/oneOf/if/dependentSchemas/contains may evaluate is treated as unevaluated (valid instances may be rejected)",
                (Some(_), true) => "items evaluated only by two anyOf branches together, or by else alone, are treated as unevaluated (valid instances may be rejected)",
                (Some(_), false) => "properties evaluated only by two anyOf branches together, or by else alone, are treated as unevaluated (valid instances may be rejected)",
            };
            if inexact {
                notes.push(Note::new(&ptr, key, why));
            }
            edits.push((ptr.clone(), key, plan.unwrap_or_else(|| part(&ev, items))));
        }
    }
    if edits.is_empty() {
        return Cow::Borrowed(doc);
    }
    let mut out = doc.clone();
    // Deepest first (an edit is found after its ancestors'), so a `U` moved into a new part
    // has already been rewritten.
    for (ptr, key, plan) in edits.into_iter().rev() {
        let Some(Value::Object(m)) = out.pointer_mut(&ptr) else { continue };
        let Some(u) = m.remove(key) else { continue };
        let part = match plan {
            Plan::Part(None) => continue,
            Plan::Part(Some(mut part)) => {
                part.insert((if key == "unevaluatedItems" { "items" } else { "additionalProperties" }).into(), u);
                Value::Object(part)
            }
            Plan::Branches(kind, sides) => branches_part(m, kind, key, sides, &u),
        };
        match m.get_mut("allOf") {
            Some(Value::Array(a)) => a.push(part),
            _ => {
                m.insert("allOf".into(), Value::Array(vec![part]));
            }
        }
    }
    Cow::Owned(out)
}

/// The [`Plan::Part`] naming what `ev` evaluates, `U` applying to the rest (`None`: `ev`
/// evaluates everything, and the keyword is dropped).
fn part(ev: &Evaluated, items: bool) -> Plan {
    Plan::Part(match items {
        true => (!ev.all_items).then(|| ev.items_part()),
        false => (!ev.all).then(|| ev.part()),
    })
}

/// The [`Plan::Part`] that counts as evaluated what the object evaluates for sure (`own`)
/// and all that its conditional applicators may evaluate (`dynamic`): every instance of
/// the schema satisfies it (`U` applies to fewer members than the schema's), so it is a
/// superset, for a run-time check to make exact.
fn widened(own: &Evaluated, dynamic: &Evaluated, items: bool) -> Plan {
    let mut ev = own.clone();
    ev.include(dynamic);
    part(&ev, items)
}

/// Whether some object of `doc` has an `unevaluatedProperties` or `unevaluatedItems` key
/// (anywhere, as a keyword or not): without one there is nothing to rewrite.
fn mentions_unevaluated(doc: &Value) -> bool {
    mentions_any(doc, &["unevaluatedProperties", "unevaluatedItems"])
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
        ev.add_names(p.keys(), false);
    }
    if let Some(Value::Object(p)) = m.get("patternProperties") {
        ev.add_names(p.keys(), true);
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

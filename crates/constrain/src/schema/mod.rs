//! Stage 1: JSON Schema → [`Grammar`].
//!
//! Input: a JSON Schema of draft-04, -06, -07, 2019-09 or 2020-12 (by `$schema`, or
//! [`Options::draft`]) as a `serde_json::Value`, plus [`Options`]. It is first rewritten into
//! one canonical form ([`dialect`]: every `$ref` resolved to a local pointer, each dialect's
//! meaning made explicit), then `unevaluated*` into plain keywords ([`unevaluated`]). Output: a [`Grammar`] whose start rule matches JSON texts (under the
//! whitespace policy) that validate against the schema — never one that does not. A keyword
//! or combination that cannot be enforced exactly is an [`Error`] naming the keyword and its
//! JSON pointer, unless [`Options::lenient`] is set. Where the grammar accepts less than the
//! schema, [`compile_with_notes`] says so in a [`Note`].
//!
//! How: the schema is walked recursively; each schema becomes an [`Expr`]. Objects, arrays
//! and constrained strings become rules of their own, interned so identical bodies are one
//! rule; every plain string, number, integer and "any JSON value" is one shared rule, so the
//! automaton's fingerprints share their mask work. Every `$ref` target is one rule (compiled
//! once, from a work list), which is how recursive schemas work. `allOf` is merged into one
//! schema first ([`merge`]); `anyOf` is an alternation; `oneOf` is an alternation only when
//! its branches are provably disjoint.
//!
//! Deviations from the spec (all make the grammar accept *less*, never more):
//! - property order: objects with at most four named properties accept them in any order
//!   (each at most once); larger objects accept schema order or "required first" order
//!   (the names of `required` in that order, then the others in schema order); extra
//!   properties (when allowed) come after the named ones; no key is ever repeated;
//! - `oneOf` branches that overlap only through optional properties are made disjoint by
//!   forbidding, in each branch, the properties only the other branch requires;
//! - `pattern` with `minLength`/`maxLength` that cannot be intersected exactly is an error;
//!   extra properties are not accepted next to `patternProperties`;
//! - bounded numbers are written without exponent; `format`s accept a documented subset
//!   ([`format`]); constrained strings accept only the escapes JSON requires.
//!
//! Cost: linear in the schema size, plus one jsonschema validator per `enum` whose values
//! must be filtered by sibling keywords.

pub mod dialect;
pub mod format;
mod json;

/// Python's `repr(float)`, the spelling `json.dumps` gives a float: the compiler spells
/// `const`/`enum` numbers this way too, and evaluation harnesses serialise instances with it.
pub use json::python_float_repr;
mod merge;
pub mod number;
mod unevaluated;

use rustc_hash::FxHashMap as HashMap;
use std::hash::BuildHasher;

use serde_json::{Map, Value};

use crate::grammar::regex::{ecma_is_match, to_expr, RegexOptions};
use crate::grammar::{Expr, Grammar, GrammarBuilder, RuleId};
use number::{Bound, Dec};

/// How much whitespace the generated JSON may contain between tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Whitespace {
    /// No whitespace at all: `{"a":1}`.
    Compact,
    /// The usual pretty-printing whitespace (a space after `,`/`:`, newlines with indentation),
    /// but bounded so a model can never loop on whitespace.
    #[default]
    Pretty,
    /// Any JSON whitespace, unbounded (for validating arbitrary text, not for generation).
    Unbounded,
}

/// Options for compiling a schema.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Whitespace policy between JSON tokens.
    pub whitespace: Whitespace,
    /// Forbid properties the schema does not name (as if `additionalProperties: false`
    /// wherever it is absent).
    pub strict: bool,
    /// Documented lenient mode: ignore unsupported keywords instead of failing, and treat a
    /// `oneOf` whose branches may overlap as `anyOf`. The grammar may then accept invalid
    /// instances.
    pub lenient: bool,
    /// Forces a dialect; `None`: the one `$schema` names (2020-12 without it). See
    /// [`dialect`].
    pub draft: Option<dialect::Draft>,
}

/// A message about one keyword of a schema: the keyword's JSON pointer (in the schema as
/// written), the keyword, and the text. Shared by [`Note`] and [`Error`], which differ only in
/// what the message means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pointer: String,
    keyword: String,
    message: String,
}

impl Located {
    fn new(at: &str, keyword: &str, message: impl Into<String>) -> Self {
        Located { pointer: format!("{at}/{}", escape_pointer(keyword)), keyword: keyword.to_string(), message: message.into() }
    }
    /// JSON pointer of the keyword, e.g. `/properties/age/minimum`.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }
    /// The keyword (e.g. `"not"`), for grouping messages in reports.
    pub fn keyword(&self) -> &str {
        &self.keyword
    }
    /// The message, without the pointer.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.pointer, self.message)
    }
}

/// Something a successful compilation wants said: where the grammar accepts *less* than the
/// schema (an under-approximation), at the keyword's JSON pointer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note(Located);

impl Note {
    pub(crate) fn new(at: &str, keyword: &str, message: impl Into<String>) -> Self {
        Note(Located::new(at, keyword, message))
    }
}

impl std::ops::Deref for Note {
    type Target = Located;
    fn deref(&self) -> &Located {
        &self.0
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a schema could not be compiled: the JSON pointer of the offending keyword and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(Located);

impl Error {
    pub(crate) fn new(at: &str, keyword: &str, message: impl Into<String>) -> Self {
        Error(Located::new(at, keyword, message))
    }
}

impl std::ops::Deref for Error {
    type Target = Located;
    fn deref(&self) -> &Located {
        &self.0
    }
}

/// Escapes one JSON-pointer segment (`~` → `~0`, `/` → `~1`).
fn escape_pointer(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

/// Compiles a JSON Schema into a grammar whose start rule matches exactly the JSON texts
/// (under `options.whitespace`) that validate against the schema.
pub fn compile(schema: &Value, options: &Options) -> Result<Grammar, Error> {
    compile_with_notes(schema, options).map(|(g, _)| g)
}

/// [`compile`], also returning the [`Note`]s on where the grammar accepts less than the
/// schema allows (e.g. host names without A-labels).
pub fn compile_with_notes(schema: &Value, options: &Options) -> Result<(Grammar, Vec<Note>), Error> {
    let (doc, _) = dialect::normalise(schema, options.draft)?;
    let mut notes = Vec::new();
    if let (None, Some(Value::String(uri))) = (options.draft, schema.get("$schema")) {
        if dialect::Draft::from_uri(uri).is_none() {
            notes.push(Note::new("", "$schema", format!("unknown dialect {uri:?}: compiled as draft 2020-12 (force one with --draft)")));
        }
    }
    let doc = unevaluated::rewrite(&doc, &mut notes);
    let mut c = Compiler::new(&doc, options);
    let start = c.ref_rule_for_pointer("");
    let built = c.drain().and_then(|_| c.b.build(start).map_err(|e| Error::new("", "$ref", format!("internal grammar error: {e}"))));
    notes.append(&mut c.notes);
    let g = built.map_err(|mut e| {
        e.0.pointer = dialect::original_pointer(&e.0.pointer);
        e
    })?;
    for n in &mut notes {
        n.0.pointer = dialect::original_pointer(&n.0.pointer);
    }
    notes.dedup();
    Ok((g, notes))
}

/// Keywords that constrain instances (everything else is an annotation or unknown, and is
/// ignored).
pub(crate) fn is_constraint_keyword(k: &str) -> bool {
    matches!(
        k,
        "type" | "enum" | "const" | "properties" | "required" | "additionalProperties" | "patternProperties" | "minProperties" | "maxProperties"
            | "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems" | "minLength" | "maxLength" | "pattern" | "format"
            | "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" | "anyOf" | "oneOf" | "allOf" | "$ref" | "not"
            | "uniqueItems" | "contains" | "minContains" | "maxContains" | "dependentRequired" | "dependentSchemas" | "dependencies" | "if"
            | "then" | "else" | "unevaluatedProperties" | "unevaluatedItems" | "propertyNames" | "$dynamicRef" | "$recursiveRef" | FORBIDDEN
    )
}

/// Internal keyword (set by `not: {required: [k]}` and by `oneOf` disambiguation): property
/// names an object instance must not have.
pub(crate) const FORBIDDEN: &str = "x-constrain-forbidden";

/// The JSON types, in a fixed order.
const TYPES: [&str; 7] = ["null", "boolean", "object", "array", "string", "number", "integer"];

/// Deepest schema nesting the compiler follows.
const MAX_DEPTH: usize = 128;

/// Most subschemas one schema may expand to (each `$ref` target or merged schema compiled
/// counts once per use): the schema-expansion fuel, which bounds merges that inline their
/// targets. JSONSchemaBench's largest schemas stay far below it.
const MAX_EXPANSION: usize = 500_000;

/// Objects with at most this many named properties accept them in any order (one rule per
/// subset of properties written so far); larger ones accept schema order or required-first
/// order.
const ANY_ORDER_MAX: usize = 4;

/// Largest number of multiples compiled by listing them (for `multipleOf` with bounds).
const MAX_ENUMERATED: i128 = 2000;

/// Largest power of ten a `multipleOf` may carry (trailing zeros or fraction digits spelled).
const MAX_STEP_ZEROS: usize = 400;

/// Which signs the integer bounds `lo..=hi` leave when they are at most 0 and ∞ (a remainder
/// automaton spells those); `None` for any other bound.
fn zero_sided(lo: Option<&Dec>, hi: Option<&Dec>) -> Option<number::Signs> {
    match (lo, hi) {
        (None, None) => Some(number::Signs::All),
        (Some(l), None) if l.is_zero() => Some(number::Signs::NonNegative),
        (None, Some(h)) if h.is_zero() => Some(number::Signs::NonPositive),
        _ => None,
    }
}

/// The multiples of `q` in `a..=b`, or `None` when there are more than [`MAX_ENUMERATED`].
fn list_multiples(a: i128, b: i128, q: i128) -> Option<Vec<i128>> {
    if q <= 0 {
        return None;
    }
    if b < a {
        return Some(vec![]);
    }
    let first = a.checked_add((q - a.rem_euclid(q)) % q)?;
    if first > b {
        return Some(vec![]);
    }
    let count = b.checked_sub(first)? / q + 1;
    if count > MAX_ENUMERATED {
        return None;
    }
    Some((0..count).filter_map(|i| first.checked_add(i.checked_mul(q)?)).collect())
}

/// The compiler's state: the grammar being built and the rules already made.
pub(crate) struct Compiler<'a> {
    root: &'a Value,
    opts: &'a Options,
    b: GrammarBuilder,
    ws: Expr,
    shared: HashMap<&'static str, RuleId>,
    /// Rules made by [`Compiler::rule`], by the hash of their body (a body is compared with
    /// the rule's before it is shared, so a collision only costs the sharing).
    interned: HashMap<u64, RuleId>,
    ref_rules: HashMap<String, RuleId>,
    pending: Vec<(RuleId, String)>,
    ids: HashMap<String, String>,
    depth: usize,
    /// Under-approximations made so far.
    notes: Vec<Note>,
    /// What [`Compiler::compile_merged`] made of each merged schema (by its JSON text).
    merged: HashMap<String, Expr>,
    /// Subschemas compiled so far (see [`MAX_EXPANSION`]).
    expanded: usize,
}

impl<'a> Compiler<'a> {
    fn new(root: &'a Value, opts: &'a Options) -> Self {
        let mut ids = HashMap::default();
        collect_ids(root, &mut ids);
        let mut c = Compiler {
            root,
            opts,
            b: GrammarBuilder::new(),
            ws: Expr::Empty,
            shared: HashMap::default(),
            interned: HashMap::default(),
            ref_rules: HashMap::default(),
            pending: Vec::new(),
            ids,
            depth: 0,
            notes: Vec::new(),
            merged: HashMap::default(),
            expanded: 0,
        };
        c.ws = match opts.whitespace {
            // The indentation after a newline is one shared rule, so the bounded count is one
            // automaton loop rather than one per whitespace position.
            Whitespace::Pretty => {
                let indent = c.shared_rule("indent");
                Expr::opt(Expr::alt([Expr::lit(" "), Expr::seq([Expr::lit("\n"), indent])]))
            }
            other => json::ws(other),
        };
        c
    }

    fn lenient(&self) -> bool {
        self.opts.lenient
    }

    /// `Err` unless lenient, in which case the keyword is ignored.
    fn unsupported(&self, ptr: &str, keyword: &str, why: &str) -> Result<(), Error> {
        if self.lenient() {
            Ok(())
        } else {
            Err(Error::new(ptr, keyword, why))
        }
    }

    fn drain(&mut self) -> Result<(), Error> {
        while let Some((id, ptr)) = self.pending.pop() {
            let root = self.root;
            let Some(schema) = root.pointer(&ptr) else {
                return Err(Error::new(&ptr, "$ref", "reference target does not exist"));
            };
            let e = self.compile_value(schema, &ptr)?;
            self.b.define(id, e);
        }
        Ok(())
    }

    fn ref_rule_for_pointer(&mut self, ptr: &str) -> RuleId {
        if let Some(&id) = self.ref_rules.get(ptr) {
            return id;
        }
        let base = match ptr.rsplit('/').next() {
            Some(s) if !s.is_empty() => {
                let clean: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(40).collect();
                format!("def_{clean}")
            }
            _ => "root".to_string(),
        };
        let name = self.b.fresh_name(&base);
        let id = self.b.declare(&name);
        self.ref_rules.insert(ptr.to_string(), id);
        self.pending.push((id, ptr.to_string()));
        id
    }

    /// Resolves a `$ref` string to its target schema and JSON pointer.
    pub(crate) fn resolve_ref(&self, r: &str, at: &str) -> Result<(&'a Value, String), Error> {
        let (base, frag) = match r.split_once('#') {
            Some((b, f)) => (b, f),
            None => (r, ""),
        };
        let mut ptr = String::new();
        if !base.is_empty() {
            match self.ids.get(base).or_else(|| self.ids.get(base.trim_end_matches('/'))) {
                Some(p) => ptr.push_str(p),
                None => return Err(Error::new(at, "$ref", format!("reference {r:?} is not local to this schema"))),
            }
        }
        if !frag.is_empty() {
            if !frag.starts_with('/') {
                // `#name`: a plain-name anchor.
                match self.ids.get(&format!("#{frag}")) {
                    Some(p) => ptr = p.clone(),
                    None => return Err(Error::new(at, "$ref", format!("anchor {r:?} not found"))),
                }
            } else {
                ptr.push_str(&percent_decode(frag));
            }
        }
        match self.root.pointer(&ptr) {
            Some(v) => Ok((v, ptr)),
            None => Err(Error::new(at, "$ref", format!("reference {r:?} does not resolve"))),
        }
    }

    fn shared_rule(&mut self, name: &'static str) -> Expr {
        if let Some(&id) = self.shared.get(name) {
            return Expr::Ref(id);
        }
        let fresh = self.b.fresh_name(name);
        let id = self.b.declare(&fresh);
        self.shared.insert(name, id);
        let body = match name {
            "string" => Expr::seq([Expr::lit("\""), Expr::star(json::any_unit()), Expr::lit("\"")]),
            "string_rest" => Expr::seq([Expr::star(json::any_unit()), Expr::lit("\"")]),
            // A non-ASCII character, then the rest of the string: what follows an "other"
            // character in `not_in_set`, shared so that its UTF-8 byte paths exist once
            // instead of at every position of every excluded key.
            "nonascii_rest" => {
                let rest = self.shared_rule("string_rest");
                Expr::seq([Expr::Chars(vec![('\u{80}', '\u{D7FF}'), ('\u{E000}', '\u{10FFFF}')]), rest])
            }
            // After a backslash: the rest of an escape, then the rest of the string.
            "escape_rest" => {
                let rest = self.shared_rule("string_rest");
                let unit = json::any_unit();
                let after_backslash = match unit {
                    Expr::Alt(v) => v.into_iter().find_map(|e| match e {
                        Expr::Seq(mut p) if p.first() == Some(&Expr::lit("\\")) => Some(Expr::seq(p.drain(1..))),
                        _ => None,
                    }),
                    _ => None,
                };
                Expr::seq([after_backslash.unwrap_or(Expr::Nothing), rest])
            }
            "indent" => Expr::repeat(Expr::lit(" "), 0, Some(json::MAX_INDENT)),
            "number" => number::any_number(),
            "integer" => number::any_integer(),
            "any" => {
                let string = self.shared_rule("string");
                let number = self.shared_rule("number");
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
            _ => Expr::Nothing,
        };
        self.b.define(id, body);
        Expr::Ref(id)
    }

    /// Makes `expr` a rule of its own (shared with identical bodies) unless it is tiny.
    fn rule(&mut self, base: &str, expr: Expr) -> Expr {
        match expr {
            Expr::Empty | Expr::Nothing | Expr::Literal(_) | Expr::Ref(_) => expr,
            _ => {
                let hash = rustc_hash::FxBuildHasher.hash_one(&expr);
                match self.interned.get(&hash) {
                    Some(&id) if self.b.body(id) == Some(&expr) => Expr::Ref(id),
                    Some(_) => Expr::Ref(self.b.add(base, expr)),
                    None => {
                        let id = self.b.add(base, expr);
                        self.interned.insert(hash, id);
                        Expr::Ref(id)
                    }
                }
            }
        }
    }

    fn sep(&self) -> Expr {
        Expr::seq([self.ws.clone(), Expr::lit(","), self.ws.clone()])
    }

    fn colon(&self) -> Expr {
        Expr::seq([self.ws.clone(), Expr::lit(":"), self.ws.clone()])
    }

    /// Compiles one schema into an expression for one JSON value.
    pub(crate) fn compile_value(&mut self, schema: &Value, ptr: &str) -> Result<Expr, Error> {
        if self.depth > MAX_DEPTH {
            return Err(Error::new(ptr, "$ref", "schema nests too deeply"));
        }
        self.expanded += 1;
        if self.expanded > MAX_EXPANSION {
            return Err(Error::new(
                ptr,
                "$ref",
                format!("schema expansion budget exceeded: more than {MAX_EXPANSION} subschemas compiled (references and merges expand them)"),
            ));
        }
        self.depth += 1;
        let r = self.compile_value_inner(schema, ptr);
        self.depth -= 1;
        r
    }

    /// Compiles a schema made by [`Compiler::merge_all`], once per distinct merged schema.
    /// Merging inlines a `$ref`'s target, so without the memo a chain of definitions whose
    /// branches each merge the next one (`a_i = anyOf[$ref a_i+1, {$ref a_i+1, minLength}]`)
    /// compiled 2^N schemas; the branches merge to equal schemas, so N with it.
    fn compile_merged(&mut self, merged: Value, ptr: &str) -> Result<Expr, Error> {
        let key = merged.to_string();
        if let Some(e) = self.merged.get(&key) {
            return Ok(e.clone());
        }
        let e = self.compile_value(&merged, ptr)?;
        self.merged.insert(key, e.clone());
        Ok(e)
    }

    fn compile_value_inner(&mut self, schema: &Value, ptr: &str) -> Result<Expr, Error> {
        let map = match schema {
            Value::Bool(true) => return Ok(self.shared_rule("any")),
            Value::Bool(false) => return Ok(Expr::Nothing),
            Value::Object(m) => m,
            _ => {
                // The schema itself is wrong, not a `type` keyword in it: point at it.
                let kind = match schema {
                    Value::Null => "null",
                    Value::Number(_) => "a number",
                    Value::String(_) => "a string",
                    _ => "an array",
                };
                let mut e = Error::new(ptr, "", format!("a schema must be an object or a boolean, not {kind}"));
                e.0.pointer = ptr.to_string();
                return Err(e);
            }
        };
        let constraining = |m: &Map<String, Value>, skip: &[&str]| m.keys().any(|k| is_constraint_keyword(k) && !skip.contains(&k.as_str()));

        // $ref: alone it is a rule reference; with sibling constraints it is an allOf.
        if let Some(r) = map.get("$ref") {
            let Value::String(r) = r else {
                return Err(Error::new(ptr, "$ref", "$ref must be a string"));
            };
            if !constraining(map, &["$ref"]) {
                let (_, target) = self.resolve_ref(r, ptr)?;
                return Ok(Expr::Ref(self.ref_rule_for_pointer(&target)));
            }
            let merged = self.merge_all(std::slice::from_ref(schema), ptr)?;
            return self.compile_merged(merged, ptr);
        }
        if map.contains_key("allOf") {
            let merged = self.merge_all(std::slice::from_ref(schema), ptr)?;
            return self.compile_merged(merged, ptr);
        }
        for key in ["anyOf", "oneOf"] {
            let Some(branches) = map.get(key) else { continue };
            let Value::Array(branches) = branches else {
                return Err(Error::new(ptr, key, format!("{key} must be an array")));
            };
            let mut rest = map.clone();
            rest.remove(key);
            let has_rest = constraining(&rest, &[]);
            let forbidden = if key == "oneOf" && !self.lenient() {
                self.check_disjoint(branches, &rest, ptr)?
            } else {
                vec![vec![]; branches.len()]
            };
            let mut parts = Vec::new();
            for (i, b) in branches.iter().enumerate() {
                let bptr = format!("{ptr}/{key}/{i}");
                let forbid = forbidden.get(i).cloned().unwrap_or_default();
                let e = if has_rest || !forbid.is_empty() {
                    let mut list = vec![Value::Object(rest.clone()), b.clone()];
                    if !forbid.is_empty() {
                        list.push(serde_json::json!({ FORBIDDEN: forbid }));
                    }
                    let merged = self.merge_all(&list, &bptr)?;
                    self.compile_merged(merged, &bptr)?
                } else {
                    self.compile_value(b, &bptr)?
                };
                parts.push(e);
            }
            return Ok(Expr::alt(parts));
        }
        // Copy the (shallow) map only when it must be rewritten.
        let needs_rewrite = map.contains_key("not")
            || matches!(map.get("exclusiveMinimum"), Some(Value::Bool(_)))
            || matches!(map.get("exclusiveMaximum"), Some(Value::Bool(_)));
        let owned;
        let map: &Map<String, Value> = if needs_rewrite {
            let mut m = map.clone();
            merge::normalise_bounds(&mut m);
            if let Some(not) = m.remove("not") {
                self.apply_not(&mut m, &not, ptr)?;
            }
            owned = m;
            &owned
        } else {
            map
        };
        if map.contains_key("enum") || map.contains_key("const") {
            return self.compile_enum(map, ptr);
        }
        self.compile_typed(map, ptr)
    }

    /// Turns `not` into restrictions on `map` for the cases that can be done exactly.
    fn apply_not(&mut self, map: &mut Map<String, Value>, not: &Value, ptr: &str) -> Result<(), Error> {
        let fail = |c: &Self| c.unsupported(ptr, "not", "only `not` with `type`, `required` or a boolean schema can be compiled");
        match not {
            Value::Bool(false) => Ok(()),
            Value::Bool(true) => {
                map.insert("type".into(), Value::Array(vec![]));
                Ok(())
            }
            Value::Object(n) => {
                let keys: Vec<&str> = n.keys().map(|k| k.as_str()).filter(|k| is_constraint_keyword(k)).collect();
                if keys.is_empty() {
                    map.insert("type".into(), Value::Array(vec![]));
                    return Ok(());
                }
                if keys == ["type"] {
                    let banned = type_list(n.get("type"));
                    let allowed: Vec<Value> = allowed_types(map)
                        .into_iter()
                        .filter(|t| !(banned.contains(t) || (*t == "integer" && banned.contains(&"number"))))
                        .map(|t| Value::String(t.into()))
                        .collect();
                    if allowed.iter().any(|t| t == "number") && banned.contains(&"integer") {
                        return fail(self);
                    }
                    map.insert("type".into(), Value::Array(allowed));
                    return Ok(());
                }
                if keys == ["required"] {
                    if let Some(Value::Array(req)) = n.get("required") {
                        if req.len() == 1 {
                            let banned: Vec<String> = req.iter().filter_map(|v| v.as_str().map(String::from)).collect();
                            let mut existing: Vec<Value> = map.get(FORBIDDEN).and_then(|v| v.as_array().cloned()).unwrap_or_default();
                            existing.extend(banned.into_iter().map(Value::String));
                            map.insert(FORBIDDEN.into(), Value::Array(existing));
                            return Ok(());
                        }
                    }
                }
                fail(self)
            }
            _ => Err(Error::new(ptr, "not", "`not` must be a schema")),
        }
    }

    /// `enum`/`const`: the listed values that also satisfy the sibling keywords.
    fn compile_enum(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
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
        let others: Vec<&String> = map.keys().filter(|k| is_constraint_keyword(k) && !["enum", "const", "type", FORBIDDEN].contains(&k.as_str())).collect();
        let types = allowed_types(map);
        values.retain(|v| types.iter().any(|t| value_has_type(v, t)));
        if !others.is_empty() && !values.is_empty() {
            // Filter by the sibling keywords with a real validator. References resolve
            // against the root's definitions, copied in only when the siblings hold a
            // reference: building a validator crawls everything it is given, and a large
            // schema's definitions copied for each of its enums took minutes.
            let mut doc = map.clone();
            doc.remove("enum");
            doc.remove("const");
            doc.remove(FORBIDDEN);
            let has_ref = doc.contains_key("$ref") || doc.values().any(contains_ref);
            if let (Value::Object(root), true) = (self.root, has_ref) {
                for k in ["definitions", "$defs", dialect::TARGETS] {
                    if let Some(d) = root.get(k) {
                        doc.insert(k.into(), d.clone());
                    }
                }
            }
            let v = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&Value::Object(doc))
                .map_err(|e| Error::new(ptr, keyword, format!("cannot check enum values against sibling keywords: {e}")))?;
            values.retain(|x| v.is_valid(x));
        }
        if let Some(Value::Array(forbidden)) = map.get(FORBIDDEN) {
            values.retain(|x| !x.as_object().is_some_and(|o| forbidden.iter().any(|f| f.as_str().is_some_and(|f| o.contains_key(f)))));
        }
        let ws = self.ws.clone();
        // Deduplicate with a hash set: `Expr::alt` compares pairwise, which is quadratic for
        // enums with thousands of values.
        let mut seen = std::collections::HashSet::new();
        let mut alts: Vec<Expr> = Vec::new();
        // A number allowed only as an integer is spelled only as one (`1`, not `1.0`), and a
        // non-integer is dropped: exact decimal test, not a float's.
        let integer_only = !types.contains(&"number");
        for v in &values {
            let lit = match v {
                Value::Number(n) => match Dec::parse(&n.to_string()) {
                    Some(d) => Expr::alt(json::dec_spellings(&d, integer_only).iter().map(|t| Expr::lit(t))),
                    None if integer_only => Expr::Nothing,
                    None => Expr::lit(&n.to_string()),
                },
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

    /// A schema without `$ref`/combinators/`enum`: one alternative per allowed type.
    fn compile_typed(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        let types = allowed_types(map);
        if let Some(t) = map.get("type") {
            if !matches!(t, Value::String(_) | Value::Array(_)) {
                return Err(Error::new(ptr, "type", "type must be a string or an array of strings"));
            }
            let names: Vec<&Value> = match t {
                Value::Array(a) => a.iter().collect(),
                one => vec![one],
            };
            for name in names {
                if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                    return Err(Error::new(
                        ptr,
                        "type",
                        format!("unknown type {name} (the types are {})", TYPES.join(", ")),
                    ));
                }
            }
        }
        if map.contains_key("if") {
            self.unsupported(ptr, "if", "if/then/else cannot be compiled")?;
        }
        for k in ["$dynamicRef", "$recursiveRef"] {
            if map.contains_key(k) {
                self.unsupported(ptr, k, "dynamic references are not supported")?;
            }
        }
        let mut alts = Vec::new();
        for t in &types {
            let e = match *t {
                "null" => Expr::lit("null"),
                "boolean" => Expr::alt([Expr::lit("true"), Expr::lit("false")]),
                "integer" => {
                    if types.contains(&"number") {
                        continue;
                    }
                    self.compile_number(map, ptr, true)?
                }
                "number" => self.compile_number(map, ptr, false)?,
                "string" => self.compile_string(map, ptr)?,
                "array" => self.compile_array(map, ptr)?,
                "object" => self.compile_object(map, ptr)?,
                _ => Expr::Nothing,
            };
            alts.push(e);
        }
        Ok(Expr::alt(alts))
    }

    fn bound(&self, map: &Map<String, Value>, ptr: &str, key: &str, strict: bool) -> Result<Option<Bound>, Error> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match Dec::parse(&n.to_string()) {
                Some(d) => Ok(Some(Bound { value: d, strict })),
                None => Err(Error::new(ptr, key, "bound is out of range")),
            },
            Some(_) => Err(Error::new(ptr, key, "bound must be a number")),
        }
    }

    fn compile_number(&mut self, map: &Map<String, Value>, ptr: &str, integer: bool) -> Result<Expr, Error> {
        let tighter = |a: Option<Bound>, b: Option<Bound>, lower: bool| -> Option<Bound> {
            match (a, b) {
                (None, x) | (x, None) => x,
                (Some(a), Some(b)) => {
                    let ord = number::cmp_dec(&a.value, &b.value);
                    let pick_a = match ord {
                        std::cmp::Ordering::Equal => a.strict,
                        std::cmp::Ordering::Greater => lower,
                        std::cmp::Ordering::Less => !lower,
                    };
                    Some(if pick_a { a } else { b })
                }
            }
        };
        let lo = tighter(self.bound(map, ptr, "minimum", false)?, self.bound(map, ptr, "exclusiveMinimum", true)?, true);
        let hi = tighter(self.bound(map, ptr, "maximum", false)?, self.bound(map, ptr, "exclusiveMaximum", true)?, false);
        let multiple = match map.get("multipleOf") {
            None => None,
            Some(Value::Number(n)) => match Dec::parse(&n.to_string()) {
                Some(d) if !d.neg && !d.is_zero() => Some(d),
                Some(_) => return Err(Error::new(ptr, "multipleOf", "multipleOf must be a positive number")),
                None => return Err(Error::new(ptr, "multipleOf", "multipleOf is out of range (exponent beyond ±400)")),
            },
            Some(_) => return Err(Error::new(ptr, "multipleOf", "multipleOf must be a number")),
        };
        // Exact decimal arithmetic throughout: a multiple of `q · 10^t` (see `number::Step`).
        let step = multiple.as_ref().map(number::Step::of);
        // A number with an integral multipleOf is an integer.
        let integer = integer || step.as_ref().is_some_and(|s| s.t >= 0);
        let shifted = |b: &Option<Bound>, e: i64| b.as_ref().map(|b| Bound { value: b.value.shift(e), strict: b.strict });
        if integer {
            let step = step.map(|s| s.for_integers()).unwrap_or(number::Step { q: vec![1], t: 0 });
            let zeros = usize::try_from(step.t).unwrap_or(usize::MAX);
            // Bounds on y = x / 10^t, rounded inwards to integers.
            let (ylo, yhi) = number::integer_bounds(shifted(&lo, -step.t).as_ref(), shifted(&hi, -step.t).as_ref());
            if step.q == [1] && step.t == 0 && ylo.is_none() && yhi.is_none() {
                return Ok(self.shared_rule("integer"));
            }
            if zeros > MAX_STEP_ZEROS {
                self.unsupported(ptr, "multipleOf", "multipleOf is a power of ten too large to spell")?;
                let (ilo, ihi) = number::integer_bounds(lo.as_ref(), hi.as_ref());
                return Ok(self.rule("integer_range", number::int_range(ilo.as_ref(), ihi.as_ref())));
            }
            let q = step.q_u64();
            if q == Some(1) {
                return Ok(self.rule("integer_range", number::scaled_int_range(ylo.as_ref(), yhi.as_ref(), zeros)));
            }
            if ylo.is_none() && yhi.is_none() {
                if let Some(e) = q.and_then(|q| number::multiples_regular(q, zeros)) {
                    return Ok(self.rule("integer_range", e));
                }
            }
            let listed = match (ylo.as_ref().and_then(Dec::to_i128), yhi.as_ref().and_then(Dec::to_i128), q) {
                (Some(a), Some(b), Some(q)) => list_multiples(a, b, q as i128).map(|ys| ys.into_iter().map(|y| Expr::lit(&Dec::from_i128(y).shift(step.t).to_text())).collect::<Vec<_>>()),
                _ => None,
            };
            if let Some(alts) = listed {
                return Ok(self.rule("integer_range", Expr::alt(alts)));
            }
            let automaton = match (q, zero_sided(ylo.as_ref(), yhi.as_ref())) {
                (Some(q), Some(signs)) => number::remainder_multiples(&mut self.b, q, 0, zeros, signs),
                _ => None,
            };
            return match automaton {
                Some(e) => Ok(self.rule("integer_range", e)),
                None => {
                    self.unsupported(ptr, "multipleOf", "this multipleOf needs a range of at most 2000 multiples, or no bound other than 0 and a modulus of at most 1000")?;
                    Ok(self.rule("integer_range", number::scaled_int_range(ylo.as_ref(), yhi.as_ref(), zeros)))
                }
            };
        }
        if lo.is_none() && hi.is_none() && step.is_none() {
            return Ok(self.shared_rule("number"));
        }
        let Some(step) = step else {
            let e = number::number_range(lo.as_ref(), hi.as_ref());
            return Ok(self.rule("number_range", e));
        };
        // A fractional step q · 10^-s: at most s fraction digits, and x · 10^s a multiple of q.
        let s = usize::try_from(-step.t).unwrap_or(usize::MAX);
        if s > MAX_STEP_ZEROS {
            self.unsupported(ptr, "multipleOf", "multipleOf has too many fraction digits")?;
            return Ok(self.rule("number_range", number::number_range(lo.as_ref(), hi.as_ref())));
        }
        let q = step.q_u64();
        if q == Some(1) {
            return Ok(self.rule("number_range", number::number_grid(lo.as_ref(), hi.as_ref(), Some(s))));
        }
        let (ylo, yhi) = number::integer_bounds(shifted(&lo, -step.t).as_ref(), shifted(&hi, -step.t).as_ref());
        let listed = match (ylo.as_ref().and_then(Dec::to_i128), yhi.as_ref().and_then(Dec::to_i128), q) {
            (Some(a), Some(b), Some(q)) => list_multiples(a, b, q as i128).map(|ys| {
                ys.into_iter()
                    .flat_map(|y| json::dec_spellings(&Dec::from_i128(y).shift(step.t), false))
                    .map(|t| Expr::lit(&t))
                    .collect::<Vec<_>>()
            }),
            _ => None,
        };
        if let Some(alts) = listed {
            return Ok(self.rule("number_range", Expr::alt(alts)));
        }
        let automaton = match (q, zero_sided(ylo.as_ref(), yhi.as_ref())) {
            (Some(q), Some(signs)) => number::remainder_multiples(&mut self.b, q, s, 0, signs),
            _ => None,
        };
        match automaton {
            Some(e) => Ok(self.rule("number_range", e)),
            None => {
                self.unsupported(ptr, "multipleOf", "this multipleOf needs a range of at most 2000 multiples, or no bound other than 0 and at most 1000 remainder states (its digits times its fraction digits plus one)")?;
                Ok(self.rule("number_range", number::number_range(lo.as_ref(), hi.as_ref())))
            }
        }
    }

    fn compile_string(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        let min = match map.get("minLength") {
            None => 0,
            Some(v) => v.as_u64().map(|x| x.min(u32::MAX as u64) as u32).ok_or_else(|| Error::new(ptr, "minLength", "minLength must be a non-negative integer"))?,
        };
        let max = match map.get("maxLength") {
            None => None,
            Some(v) => Some(v.as_u64().map(|x| x.min(u32::MAX as u64) as u32).ok_or_else(|| Error::new(ptr, "maxLength", "maxLength must be a non-negative integer"))?),
        };
        let pattern = match map.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.as_str()),
            Some(_) => return Err(Error::new(ptr, "pattern", "pattern must be a string")),
        };
        let fmt = match map.get("format") {
            Some(Value::String(f)) => {
                let known = format::format_expr(f);
                if known.is_none() && format::is_checked_elsewhere(f) {
                    self.unsupported(ptr, "format", &format!("format {f:?} is not supported"))?;
                }
                if let (Some(_), Some(why)) = (&known, format::under_approximation(f)) {
                    self.notes.push(Note::new(ptr, "format", why));
                }
                known.map(|e| (f.clone(), e))
            }
            _ => None,
        };
        let content: Option<(Expr, &str)> = match (pattern, fmt) {
            (Some(p), Some((f, _))) => {
                self.unsupported(ptr, "format", &format!("format {f:?} together with pattern cannot be compiled"))?;
                let e = to_expr(p, &RegexOptions::json_schema()).map_err(|e| Error::new(ptr, "pattern", e.to_string()))?;
                Some((e, "pattern"))
            }
            (Some(p), None) => {
                let e = to_expr(p, &RegexOptions::json_schema()).map_err(|e| Error::new(ptr, "pattern", e.to_string()))?;
                Some((e, "pattern"))
            }
            (None, Some((_, e))) => Some((e, "format")),
            (None, None) => None,
        };
        let body = match content {
            None => {
                if min == 0 && max.is_none() {
                    return Ok(self.shared_rule("string"));
                }
                Expr::repeat(json::any_unit(), min, max)
            }
            Some((e, keyword)) => {
                let e = if min > 0 || max.is_some() {
                    // Exactly if possible; otherwise the subset where an unanchored pattern
                    // matches the whole string (e.g. `[0-9a-f]+` with length 12).
                    let whole_match = || {
                        let p = pattern.filter(|_| keyword == "pattern")?;
                        to_expr(p, &RegexOptions { unanchored: false, ..RegexOptions::json_schema() }).ok()
                    };
                    match constrain_length(&e, min, max).or_else(|| constrain_length(&whole_match()?, min, max)) {
                        Some(e) => e,
                        None => {
                            self.unsupported(ptr, keyword, &format!("{keyword} together with minLength/maxLength cannot be compiled exactly"))?;
                            e
                        }
                    }
                } else {
                    e
                };
                json::escape_expr(&e)
            }
        };
        let e = Expr::seq([Expr::lit("\""), body, Expr::lit("\"")]);
        Ok(self.rule("string_c", e))
    }

    fn compile_array(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        for k in ["contains", "minContains", "maxContains", "unevaluatedItems"] {
            if map.contains_key(k) && !(k == "unevaluatedItems" && map.get(k) == Some(&Value::Bool(true))) {
                self.unsupported(ptr, k, &format!("{k} is not supported"))?;
            }
        }
        let count = |k: &str| -> Result<Option<u32>, Error> {
            match map.get(k) {
                None => Ok(None),
                Some(v) => v.as_u64().map(|x| Some(x.min(u32::MAX as u64) as u32)).ok_or_else(|| Error::new(ptr, k, format!("{k} must be a non-negative integer"))),
            }
        };
        let min = count("minItems")?.unwrap_or(0);
        let max = count("maxItems")?;
        if max.is_some_and(|m| m < min) {
            // No array has between min and max items (the `max == Some(0)` shortcut below
            // would otherwise accept `[]`).
            return Ok(Expr::Nothing);
        }
        if map.get("uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|m| m > 1) {
            self.unsupported(ptr, "uniqueItems", "uniqueItems cannot be enforced by a grammar")?;
        }
        let (prefix, prefix_key, rest, rest_key): (Vec<Value>, &str, Option<&Value>, &str) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(p)), items) => (p.clone(), "prefixItems", items, "items"),
            (_, Some(Value::Array(p))) => (p.clone(), "items", map.get("additionalItems"), "additionalItems"),
            (_, items) => (vec![], "prefixItems", items, "items"),
        };
        let mut prefix_exprs = Vec::new();
        for (i, p) in prefix.iter().enumerate() {
            prefix_exprs.push(self.compile_value(p, &format!("{ptr}/{prefix_key}/{i}"))?);
        }
        let item = match rest {
            None => self.shared_rule("any"),
            Some(s) => self.compile_value(s, &format!("{ptr}/{rest_key}"))?,
        };
        let sep = self.sep();
        let k = prefix_exprs.len() as u32;
        // Elements after the prefix.
        let rest_min = min.saturating_sub(k);
        let rest_max = max.map(|m| m.saturating_sub(k));
        let elements = if k == 0 {
            let e = Expr::seq([item.clone(), Expr::repeat(Expr::seq([sep.clone(), item]), min.saturating_sub(1), max.map(|m| m.saturating_sub(1)))]);
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

    fn compile_object(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        // dependentRequired: (name, names it needs), compiled exactly by the any-order
        // members below (so only for a few named properties).
        let mut dependent: Vec<(String, Vec<String>)> = Vec::new();
        if let Some(v) = map.get("dependentRequired") {
            let Value::Object(d) = v else {
                return Err(Error::new(ptr, "dependentRequired", "dependentRequired must be an object"));
            };
            for (name, needs) in d {
                let Value::Array(needs) = needs else {
                    return Err(Error::new(ptr, "dependentRequired", "dependentRequired values must be arrays of names"));
                };
                let needs: Vec<String> = needs.iter().filter_map(|x| x.as_str().map(String::from)).filter(|x| x != name).collect();
                if !needs.is_empty() {
                    dependent.push((name.clone(), needs));
                }
            }
        }
        // propertyNames: compiled as the key grammar of the free members, for objects that
        // name no property (a named one would have to be checked against it, and kept out of
        // the free keys).
        let key_schema: Option<&Value> = match map.get("propertyNames") {
            None | Some(Value::Bool(true)) => None,
            Some(v) if v.as_object().is_some_and(|m| !m.keys().any(|k| is_constraint_keyword(k))) => None,
            Some(v) => Some(v),
        };
        if key_schema.is_some() {
            let names_any = ["properties", "patternProperties", "required", "dependentRequired", FORBIDDEN]
                .iter()
                .any(|k| map.get(*k).is_some_and(|v| v.as_object().is_none_or(|o| !o.is_empty()) && v.as_array().is_none_or(|a| !a.is_empty())));
            if names_any {
                self.unsupported(ptr, "propertyNames", "propertyNames is compiled only for objects that name no property")?;
            }
        }
        for k in ["dependentSchemas", "dependencies"] {
            if let Some(v) = map.get(k) {
                let trivial = v.as_object().is_some_and(|m| m.is_empty()) || v == &Value::Bool(true);
                if !trivial {
                    self.unsupported(ptr, k, &format!("{k} is not supported"))?;
                }
            }
        }
        let empty = Map::new();
        let props = match map.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(Error::new(ptr, "properties", "properties must be an object")),
        };
        let patterns = match map.get("patternProperties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(Error::new(ptr, "patternProperties", "patternProperties must be an object")),
        };
        let required: Vec<String> = match map.get("required") {
            None => vec![],
            Some(Value::Array(r)) => r.iter().filter_map(|v| v.as_str().map(String::from)).collect(),
            Some(_) => return Err(Error::new(ptr, "required", "required must be an array")),
        };
        let forbidden: Vec<String> = map
            .get(FORBIDDEN)
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default();
        // unevaluatedProperties acts as additionalProperties when nothing else evaluates.
        let mut addl = map.get("additionalProperties");
        if let Some(u) = map.get("unevaluatedProperties") {
            if addl.is_none() {
                addl = Some(u);
            }
        }
        let addl_ptr = if map.contains_key("additionalProperties") { "additionalProperties" } else { "unevaluatedProperties" };
        let (default_true, default_false) = (Value::Bool(true), Value::Bool(false));
        let addl_schema: &Value = match addl {
            Some(a) => a,
            None if self.opts.strict => &default_false,
            None => &default_true,
        };
        // Which pattern applies to a name.
        let mut pattern_list = Vec::new();
        for (p, s) in patterns {
            pattern_list.push((p.clone(), s.clone()));
        }
        let matching = |name: &str| -> Result<Vec<usize>, Error> {
            let mut out = Vec::new();
            for (i, (p, _)) in pattern_list.iter().enumerate() {
                if ecma_is_match(p, name).map_err(|e| Error::new(ptr, "patternProperties", e.to_string()))? {
                    out.push(i);
                }
            }
            Ok(out)
        };
        // Named members: properties in schema order, then required names not in properties.
        let mut named: Vec<(String, Expr, bool)> = Vec::new();
        let mut names: Vec<String> = props.keys().cloned().collect();
        for r in &required {
            if !names.contains(r) {
                names.push(r.clone());
            }
        }
        for (a, needs) in &dependent {
            for n in std::iter::once(a).chain(needs) {
                if !names.contains(n) {
                    names.push(n.clone());
                }
                if !matching(n)?.is_empty() {
                    self.unsupported(ptr, "dependentRequired", &format!("property {n:?} of dependentRequired matches a patternProperties pattern"))?;
                }
            }
        }
        if !dependent.is_empty() && names.len() > ANY_ORDER_MAX {
            self.unsupported(ptr, "dependentRequired", &format!("dependentRequired is compiled only for objects of at most {ANY_ORDER_MAX} named properties"))?;
        }
        for name in &names {
            let is_req = required.contains(name);
            if forbidden.contains(name) {
                if is_req {
                    return Ok(Expr::Nothing);
                }
                continue;
            }
            let pats = matching(name)?;
            let own: Option<&Value> = props.get(name);
            let mut parts: Vec<Value> = own.into_iter().cloned().collect();
            for i in &pats {
                parts.push(pattern_list[*i].1.clone());
            }
            if own.is_none() && pats.is_empty() {
                parts.push(addl_schema.clone());
            }
            let pptr = format!("{ptr}/properties/{}", escape_pointer(name));
            let value = if parts.len() == 1 {
                self.compile_value(&parts[0], &pptr)?
            } else {
                let merged = self.merge_all(&parts, &pptr)?;
                self.compile_value(&merged, &pptr)?
            };
            if value == Expr::Nothing {
                if is_req {
                    return Ok(Expr::Nothing);
                }
                continue;
            }
            let member = Expr::seq([json::string_literal(name), self.colon(), value]);
            named.push((name.clone(), member, is_req));
        }
        for f in &forbidden {
            if !matching(f)?.is_empty() {
                self.unsupported(ptr, "patternProperties", &format!("property {f:?} must be absent but matches a patternProperties pattern"))?;
            }
        }
        // Free members: keys matching a pattern, or any other key when allowed.
        let mut free = Vec::new();
        if !pattern_list.is_empty() {
            let same_schema = pattern_list.iter().all(|(_, s)| *s == pattern_list[0].1);
            if pattern_list.len() > 1 && !same_schema {
                self.unsupported(ptr, "patternProperties", "several patternProperties with different schemas cannot be compiled exactly")?;
            }
            let mut key_alts = Vec::new();
            for (p, _) in &pattern_list {
                let e = to_expr(p, &RegexOptions::json_schema()).map_err(|e| Error::new(ptr, "patternProperties", e.to_string()))?;
                key_alts.push(e);
            }
            // Named keys must not be produced by a pattern route unless their value schema is
            // exactly the pattern's.
            for name in &names {
                let pats = matching(name)?;
                if !pats.is_empty() && props.get(name).is_some_and(|s| *s != pattern_list[pats[0]].1 && *s != Value::Bool(true) && !s.as_object().is_some_and(|o| o.is_empty())) {
                    self.unsupported(ptr, "patternProperties", &format!("property {name:?} also matches a patternProperties pattern"))?;
                }
            }
            let key = Expr::seq([Expr::lit("\""), json::escape_expr(&Expr::alt(key_alts)), Expr::lit("\"")]);
            let key = self.rule("pattern_key", key);
            let value = self.compile_value(&pattern_list[0].1, &format!("{ptr}/patternProperties/{}", escape_pointer(&pattern_list[0].0)))?;
            if value != Expr::Nothing {
                free.push(Expr::seq([key, self.colon(), value]));
            }
        } else if *addl_schema != Value::Bool(false) {
            let value = self.compile_value(addl_schema, &format!("{ptr}/{addl_ptr}"))?;
            if value != Expr::Nothing {
                let mut excluded: Vec<String> = names.clone();
                excluded.extend(forbidden.iter().cloned());
                let key = if let (Some(ks), true) = (key_schema, excluded.is_empty()) {
                    let ks = self.merge_all(&[ks.clone(), serde_json::json!({"type": "string"})], &format!("{ptr}/propertyNames"))?;
                    self.compile_value(&ks, &format!("{ptr}/propertyNames"))?
                } else if excluded.is_empty() {
                    self.shared_rule("string")
                } else {
                    let chars: Vec<Vec<char>> = excluded.iter().map(|s| s.chars().collect()).collect();
                    if let Some(long) = chars.iter().find(|k| k.len() > MAX_EXCLUDED_KEY_CHARS) {
                        return Err(Error::new(
                            ptr,
                            "additionalProperties",
                            format!(
                                "a property name of {} characters is longer than the {MAX_EXCLUDED_KEY_CHARS} \
                                 that other property names can be told apart from; forbid other properties \
                                 (additionalProperties: false) or shorten the name",
                                long.len()
                            ),
                        ));
                    }
                    let tails = RestRules {
                        rest: self.shared_rule("string_rest"),
                        escape: self.shared_rule("escape_rest"),
                        nonascii: self.shared_rule("nonascii_rest"),
                    };
                    let content = not_in_set(&chars.iter().map(|v| v.as_slice()).collect::<Vec<_>>(), &tails, &mut self.b, 0);
                    let e = Expr::seq([Expr::lit("\""), content]);
                    let key = self.rule("other_key", e);
                    // Keys split over several rules (see `not_in_set`) are not recorded: the
                    // mask stage's shortcut follows one rule's automaton only.
                    let short = chars.iter().all(|k| k.len() < KEY_CHUNK);
                    if let (Expr::Ref(rule), Expr::Ref(rest), true) = (&key, &tails.rest, short) {
                        let words: Vec<&str> = excluded.iter().map(String::as_str).collect();
                        self.b.note_exclusion(*rule, *rest, &words);
                    }
                    key
                };
                if key != Expr::Nothing {
                    free.push(Expr::seq([key, self.colon(), value]));
                }
            }
        }
        let free = Expr::alt(free);
        let has_free = free != Expr::Nothing;
        // Property counts.
        let count = |k: &str| -> Result<Option<u32>, Error> {
            match map.get(k) {
                None => Ok(None),
                Some(v) => v.as_u64().map(|x| Some(x.min(u32::MAX as u64) as u32)).ok_or_else(|| Error::new(ptr, k, format!("{k} must be a non-negative integer"))),
            }
        };
        let min_props = count("minProperties")?.unwrap_or(0);
        let max_props = count("maxProperties")?;
        if max_props.is_some_and(|m| m < min_props) {
            // No object has between min and max properties.
            return Ok(Expr::Nothing);
        }
        let n_required = named.iter().filter(|m| m.2).count() as u32;
        let n_named = named.len() as u32;
        let sep = self.sep();
        let free_tail = if has_free { Expr::star(Expr::seq([sep.clone(), free.clone()])) } else { Expr::Empty };
        let body: Option<Expr>; // None: the object must be empty
        let mut may_be_empty;
        if named.is_empty() {
            if !has_free {
                body = None;
                may_be_empty = true;
                if min_props > 0 {
                    return Ok(Expr::Nothing);
                }
            } else {
                if min_props > 1 {
                    self.unsupported(ptr, "minProperties", "minProperties above 1 over free-form keys cannot be enforced (keys could repeat)")?;
                }
                let lo = min_props.max(1);
                body = Some(Expr::seq([free.clone(), Expr::repeat(Expr::seq([sep.clone(), free.clone()]), lo - 1, max_props.map(|m| m.saturating_sub(1)))]));
                may_be_empty = min_props == 0;
                if max_props == Some(0) {
                    return Ok(Expr::seq([Expr::lit("{"), self.ws.clone(), Expr::lit("}")]));
                }
            }
        } else {
            if min_props > n_required.max(1) {
                self.unsupported(ptr, "minProperties", "minProperties above the number of required properties cannot be compiled")?;
            }
            if let Some(m) = max_props {
                if has_free || m < n_named {
                    self.unsupported(ptr, "maxProperties", "maxProperties below the number of possible properties cannot be compiled")?;
                }
            }
            let first_required = named.iter().any(|m| m.2);
            may_be_empty = !first_required;
            if named.len() <= ANY_ORDER_MAX {
                // Per dependentRequired entry: the member's bit and the bits it needs (a needed
                // name that can never be present makes the member impossible).
                let bit = |n: &str| named.iter().position(|m| m.0 == n).map(|i| 1usize << i);
                let deps: Vec<(usize, usize)> = dependent
                    .iter()
                    .filter_map(|(a, needs)| {
                        let a = bit(a)?;
                        let need = needs.iter().map(|n| bit(n).unwrap_or(a)).fold(0, |x, y| x | y);
                        Some((a, need | if needs.iter().any(|n| bit(n).is_none()) { usize::MAX } else { 0 }))
                    })
                    .collect();
                body = Some(self.any_order(&named, &deps, &free, &free_tail));
            } else {
                // Schema order, and also "required first" order (required names in the order
                // of `required`, then the others in schema order), which is how many documents
                // are written. Each order is exact on its own, so their union is too.
                let mut named_part = self.named_sequence(&named);
                // Hash lookups: linear in the number of properties (100k of them are hostile
                // input, not a quadratic hang).
                let mut req_first: Vec<(String, Expr, bool)> = Vec::new();
                let mut taken: rustc_hash::FxHashSet<&str> = Default::default();
                let by_name: HashMap<&str, &(String, Expr, bool)> = named.iter().map(|m| (m.0.as_str(), m)).collect();
                for r in &required {
                    if let Some(m) = by_name.get(r.as_str()) {
                        if taken.insert(m.0.as_str()) {
                            req_first.push((*m).clone());
                        }
                    }
                }
                for m in &named {
                    if taken.insert(m.0.as_str()) {
                        req_first.push(m.clone());
                    }
                }
                if req_first.iter().map(|m| &m.0).ne(named.iter().map(|m| &m.0)) {
                    let other = self.named_sequence(&req_first);
                    named_part = Expr::alt([named_part, other]);
                }
                if first_required || !has_free {
                    body = Some(Expr::seq([named_part, free_tail.clone()]));
                } else {
                    body = Some(Expr::alt([Expr::seq([named_part, free_tail.clone()]), Expr::seq([free.clone(), free_tail])]));
                }
            }
        }
        if min_props >= 1 {
            may_be_empty = false;
        }
        let ws = self.ws.clone();
        let e = match body {
            None => Expr::seq([Expr::lit("{"), ws, Expr::lit("}")]),
            Some(b) => {
                let inner = Expr::seq([b, ws.clone()]);
                let inner = if may_be_empty { Expr::opt(inner) } else { inner };
                Expr::seq([Expr::lit("{"), ws, inner, Expr::lit("}")])
            }
        };
        Ok(self.rule("object", e))
    }

    /// Named members in any order, each at most once, the required ones present, then the
    /// free members: one rule per set of members already written (so only for a few members).
    /// `deps`: (member bit, bits it needs) — the set may end only where each present member
    /// has what it needs. Non-empty; the caller makes it optional when nothing is required.
    fn any_order(&mut self, named: &[(String, Expr, bool)], deps: &[(usize, usize)], free: &Expr, free_tail: &Expr) -> Expr {
        let n = named.len();
        let required: usize = named.iter().enumerate().filter(|(_, m)| m.2).map(|(i, _)| 1 << i).sum();
        let may_end = |mask: usize| mask & required == required && deps.iter().all(|&(a, need)| mask & a == 0 || mask & need == need);
        let full = (1usize << n) - 1;
        let sep = self.sep();
        let mut after: Vec<Expr> = vec![Expr::Nothing; full + 1];
        for mask in (1..=full).rev() {
            let mut alts = Vec::new();
            for (k, m) in named.iter().enumerate() {
                if mask & (1 << k) == 0 {
                    alts.push(Expr::seq([sep.clone(), m.1.clone(), after[mask | (1 << k)].clone()]));
                }
            }
            if may_end(mask) {
                alts.push(free_tail.clone());
            }
            after[mask] = self.rule("members", Expr::alt(alts));
        }
        let mut alts: Vec<Expr> = named.iter().enumerate().map(|(k, m)| Expr::seq([m.1.clone(), after[1 << k].clone()])).collect();
        if required == 0 && *free != Expr::Nothing {
            alts.push(Expr::seq([free.clone(), free_tail.clone()]));
        }
        Expr::alt(alts)
    }

    /// Named members in order, separated by commas, optional ones omissible, at least one
    /// present.
    fn named_sequence(&mut self, named: &[(String, Expr, bool)]) -> Expr {
        let sep = self.sep();
        let n = named.len();
        if let Some(r0) = named.iter().position(|m| m.2) {
            let mut parts = Vec::new();
            for m in &named[..r0] {
                parts.push(Expr::opt(Expr::seq([m.1.clone(), sep.clone()])));
            }
            parts.push(named[r0].1.clone());
            for m in &named[r0 + 1..] {
                let e = Expr::seq([sep.clone(), m.1.clone()]);
                parts.push(if m.2 { e } else { Expr::opt(e) });
            }
            return Expr::seq(parts);
        }
        // All optional: the first present member, then any of the later ones.
        if n <= 3 {
            let tail = |k: usize| Expr::seq(named[k..].iter().map(|m| Expr::opt(Expr::seq([sep.clone(), m.1.clone()]))));
            return Expr::alt((0..n).map(|j| Expr::seq([named[j].1.clone(), tail(j + 1)])));
        }
        // Long lists: a chain of rules `rest_k ::= ("," member_k)? rest_{k+1}` keeps the
        // grammar linear in the number of members.
        let mut next = Expr::Empty;
        let mut rests = vec![Expr::Empty; n + 1];
        for k in (0..n).rev() {
            let body = Expr::seq([Expr::opt(Expr::seq([sep.clone(), named[k].1.clone()])), next.clone()]);
            next = Expr::Ref(self.b.add("object_rest", body));
            rests[k] = next.clone();
        }
        Expr::alt((0..n).map(|j| Expr::seq([named[j].1.clone(), rests[j + 1].clone()])))
    }

    /// Checks that the branches of a `oneOf` cannot both match one instance. Branches that
    /// overlap only through optional properties are made disjoint by forbidding, in each
    /// branch, the properties the other branch requires and it does not (a subset of the
    /// branch: instances with both sets of properties are rejected). Returns the properties to
    /// forbid per branch.
    fn check_disjoint(&self, branches: &[Value], rest: &Map<String, Value>, ptr: &str) -> Result<Vec<Vec<String>>, Error> {
        let infos: Vec<BranchInfo> = branches.iter().map(|b| self.branch_info(b, rest, 0)).collect();
        let mut forbidden: Vec<Vec<String>> = vec![vec![]; branches.len()];
        for i in 0..infos.len() {
            for j in i + 1..infos.len() {
                if infos[i].disjoint(&infos[j]) {
                    continue;
                }
                let objects_only = |x: &BranchInfo| x.types.as_ref().is_some_and(|t| t.iter().all(|t| t == "object"));
                let only_i: Vec<String> = infos[i].required.iter().filter(|r| !infos[j].required.contains(r)).cloned().collect();
                let only_j: Vec<String> = infos[j].required.iter().filter(|r| !infos[i].required.contains(r)).cloned().collect();
                if (objects_only(&infos[i]) || objects_only(&infos[j])) && !only_i.is_empty() && !only_j.is_empty() {
                    for k in only_j {
                        if !forbidden[i].contains(&k) {
                            forbidden[i].push(k);
                        }
                    }
                    for k in only_i {
                        if !forbidden[j].contains(&k) {
                            forbidden[j].push(k);
                        }
                    }
                    continue;
                }
                return Err(Error::new(
                    ptr,
                    "oneOf",
                    format!("oneOf branches {i} and {j} may both match the same instance; only provably disjoint branches can be compiled exactly"),
                ));
            }
        }
        Ok(forbidden)
    }

    fn deref<'v>(&'v self, s: &'v Value, depth: usize) -> &'v Value {
        if depth > 16 {
            return s;
        }
        if let Some(Value::String(r)) = s.get("$ref") {
            if let Ok((t, _)) = self.resolve_ref(r, "") {
                return self.deref(t, depth + 1);
            }
        }
        s
    }

    fn branch_info(&self, b: &Value, rest: &Map<String, Value>, depth: usize) -> BranchInfo {
        let b = self.deref(b, 0);
        let mut info = BranchInfo::default();
        let Value::Object(m) = b else {
            if b == &Value::Bool(false) {
                info.types = Some(vec![]);
            }
            return info;
        };
        let mut types: Option<Vec<String>> = None;
        for src in [m, rest] {
            if src.contains_key("type") {
                let t: Vec<String> = type_list(src.get("type")).into_iter().map(String::from).collect();
                types = Some(match types {
                    None => t,
                    Some(old) => intersect_types(old, &t),
                });
            }
        }
        // allOf parts contribute their types and discriminators.
        if let Some(Value::Array(parts)) = m.get("allOf") {
            if depth < 4 {
                for p in parts {
                    let pi = self.branch_info(p, &Map::new(), depth + 1);
                    if let Some(t) = pi.types {
                        types = Some(match types {
                            None => t,
                            Some(old) => intersect_types(old, &t),
                        });
                    }
                    info.consts.extend(pi.consts);
                    info.required.extend(pi.required);
                }
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let (Some(Value::Array(parts)), true) = (m.get(key), depth < 4) {
                let mut union: Option<Vec<String>> = Some(vec![]);
                for p in parts {
                    match (self.branch_info(p, &Map::new(), depth + 1).types, union.as_mut()) {
                        (Some(t), Some(u)) => u.extend(t),
                        _ => union = None,
                    }
                }
                if let Some(u) = union {
                    types = Some(match types {
                        None => u,
                        Some(old) => intersect_types(old, &u),
                    });
                }
            }
        }
        if let Some(c) = m.get("const") {
            info.values = Some(vec![c.clone()]);
        } else if let Some(Value::Array(e)) = m.get("enum") {
            info.values = Some(e.clone());
        }
        if let Some(vals) = &info.values {
            let t: Vec<String> = vals.iter().map(|v| json_type(v).to_string()).collect();
            if types.is_none() {
                types = Some(t);
            }
        }
        info.types = types;
        if let Some(Value::Array(r)) = m.get("required") {
            info.required.extend(r.iter().filter_map(|v| v.as_str().map(String::from)));
        }
        if let Some(Value::Object(props)) = m.get("properties") {
            for (k, v) in props {
                let v = self.deref(v, 0);
                if let Some(c) = v.get("const") {
                    info.consts.push((k.clone(), vec![c.clone()]));
                } else if let Some(Value::Array(e)) = v.get("enum") {
                    info.consts.push((k.clone(), e.clone()));
                }
            }
            info.closed = Some(props.keys().cloned().collect());
        }
        let closed = m.get("additionalProperties") == Some(&Value::Bool(false)) && !m.contains_key("patternProperties");
        if !closed {
            info.closed = None;
        } else if info.closed.is_none() {
            info.closed = Some(vec![]);
        }
        info
    }
}

/// What a `oneOf` branch is known to require, for the disjointness check.
#[derive(Default, Debug)]
struct BranchInfo {
    /// Possible JSON types (`None`: any).
    types: Option<Vec<String>>,
    /// The branch only accepts these values.
    values: Option<Vec<Value>>,
    /// Required property names.
    required: Vec<String>,
    /// Properties restricted to a set of values.
    consts: Vec<(String, Vec<Value>)>,
    /// With `additionalProperties: false`: the only allowed property names.
    closed: Option<Vec<String>>,
}

impl BranchInfo {
    fn disjoint(&self, other: &BranchInfo) -> bool {
        if let (Some(a), Some(b)) = (&self.types, &other.types) {
            let overlap = a.iter().any(|x| b.iter().any(|y| x == y || (x == "integer" && y == "number") || (x == "number" && y == "integer")));
            if !overlap {
                return true;
            }
        }
        if let (Some(a), Some(b)) = (&self.values, &other.values) {
            if !a.iter().any(|x| b.contains(x)) {
                return true;
            }
        }
        if let Some(vals) = &self.values {
            if let Some(t) = &other.types {
                if vals.iter().all(|v| !t.iter().any(|tt| value_has_type(v, tt))) {
                    return true;
                }
            }
        }
        // Both can only be objects from here on.
        let objects_only = |i: &BranchInfo| i.types.as_ref().is_some_and(|t| t.iter().all(|x| x == "object"));
        let either_object_only = objects_only(self) || objects_only(other);
        if !either_object_only {
            return false;
        }
        // A discriminating property: required by both (or by one, constrained in both) with
        // disjoint value sets.
        for (k, va) in &self.consts {
            for (k2, vb) in &other.consts {
                if k == k2 && (self.required.contains(k) || other.required.contains(k)) && !va.iter().any(|x| vb.contains(x)) {
                    // The property must be present in at least one branch; where absent in the
                    // other, that branch's instances lack it... only disjoint when both require.
                    if self.required.contains(k) && other.required.contains(k) {
                        return true;
                    }
                }
            }
        }
        // A property required by one branch that the other forbids.
        for (a, b) in [(self, other), (other, self)] {
            if let Some(allowed) = &b.closed {
                if a.required.iter().any(|r| !allowed.contains(r)) {
                    return true;
                }
            }
        }
        false
    }
}

/// The JSON types in both lists; `integer` is in `number`, so `number` and `integer` meet in
/// `integer` (dropping it would make a `oneOf` branch look empty, hence disjoint).
fn intersect_types(old: Vec<String>, new: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in &old {
        for y in new {
            let meet = if x == y {
                Some(x.as_str())
            } else if (x == "integer" && y == "number") || (x == "number" && y == "integer") {
                Some("integer")
            } else {
                None
            };
            if let Some(m) = meet {
                if !out.iter().any(|o| o == m) {
                    out.push(m.to_string());
                }
            }
        }
    }
    out
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                "integer"
            } else {
                "number"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn value_has_type(v: &Value, t: &str) -> bool {
    match (v, t) {
        (Value::Number(n), "integer") => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        (Value::Number(_), "number") => true,
        _ => json_type(v) == t,
    }
}

fn type_list(t: Option<&Value>) -> Vec<&'static str> {
    let names: Vec<String> = match t {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => return vec![],
    };
    TYPES.iter().copied().filter(|t| names.iter().any(|n| n == t)).collect()
}

/// The types a schema allows by its `type` keyword (all seven when absent).
fn allowed_types(map: &Map<String, Value>) -> Vec<&'static str> {
    match map.get("type") {
        None => TYPES.to_vec(),
        t => type_list(t),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() && s.is_char_boundary(i + 3) {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// Records every `$id`/`id` (and `$anchor`) in the document with the pointer where it sits.
fn collect_ids(root: &Value, out: &mut HashMap<String, String>) {
    let mut todo: Vec<(&Value, String)> = vec![(root, String::new())];
    while let Some((v, ptr)) = todo.pop() {
        match v {
            Value::Object(m) => {
                for key in ["$id", "id"] {
                    if let Some(Value::String(id)) = m.get(key) {
                        let id = id.split('#').next().unwrap_or("").to_string();
                        if !id.is_empty() {
                            out.entry(id.clone()).or_insert_with(|| ptr.clone());
                            // Also the last path segment, for relative references.
                            if let Some(last) = id.rsplit('/').next() {
                                out.entry(last.to_string()).or_insert_with(|| ptr.clone());
                            }
                        }
                    }
                }
                if let Some(Value::String(a)) = m.get("$anchor") {
                    out.entry(format!("#{a}")).or_insert_with(|| ptr.clone());
                }
                for (k, c) in m {
                    if k == "enum" || k == "const" || k == "examples" || k == "default" {
                        continue;
                    }
                    todo.push((c, format!("{ptr}/{}", escape_pointer(k))));
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    todo.push((c, format!("{ptr}/{i}")));
                }
            }
            _ => {}
        }
    }
}

/// Whether `v` holds a `$ref` keyword anywhere.
fn contains_ref(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("$ref") || m.values().any(contains_ref),
        Value::Array(a) => a.iter().any(contains_ref),
        _ => false,
    }
}

/// The shared rules [`not_in_set`] continues with once a key can no longer be excluded.
struct RestRules {
    /// The rest of a string, closing quote included.
    rest: Expr,
    /// After a backslash: the rest of an escape, then of the string.
    escape: Expr,
    /// A non-ASCII character, then the rest of the string.
    nonascii: Expr,
}

/// The rest of a JSON string after its opening quote, for names *not* in `keys`: the
/// closing quote where no key ends, or a character no key continues with followed by the
/// rest of the string (see [`RestRules`]). Only canonical spellings of the keys' own
/// characters are followed down the trie; other characters go to `rest`.
///
/// The expression nests two levels per character; every [`KEY_CHUNK`] characters the rest is
/// made a rule of its own, so a long key (30k characters) neither nests deeper than the
/// automaton accepts nor recurses deeper than that here.
fn not_in_set(keys: &[&[char]], rules: &RestRules, b: &mut GrammarBuilder, depth: usize) -> Expr {
    let RestRules { rest, escape: escape_rest, nonascii: nonascii_rest } = rules;
    if keys.is_empty() {
        return rest.clone();
    }
    let mut alts = Vec::new();
    if !keys.iter().any(|k| k.is_empty()) {
        alts.push(Expr::lit("\""));
    }
    let mut firsts: Vec<char> = keys.iter().filter_map(|k| k.first().copied()).collect();
    firsts.sort();
    firsts.dedup();
    // Characters other than the first characters of keys: anything may follow.
    let mut others = Vec::new();
    let mut lo = '\0';
    let mut open = true;
    for &c in &firsts {
        if open && c > lo {
            others.push((lo, prev(c)));
        }
        match next(c) {
            Some(n) => lo = n,
            None => open = false,
        }
    }
    if open {
        others.push((lo, '\u{10FFFF}'));
    }
    let others: Vec<(char, char)> = others.into_iter().flat_map(split_surrogates).collect();
    if !others.is_empty() {
        if firsts.iter().any(|&c| c == '"' || c == '\\' || (c as u32) < 0x20) {
            alts.push(Expr::seq([json::class_units(&others), rest.clone()]));
        } else {
            // No key character needs an escape here, so every escape is an "other" character:
            // the raw class, or a backslash followed by the shared escape-then-rest rule.
            let raw: Vec<(char, char)> = others
                .iter()
                .filter_map(|&(a, b)| {
                    let a = a.max(' ');
                    (a <= b).then_some((a, b))
                })
                .flat_map(|(a, b)| split_out(a, b, &['"', '\\']))
                .collect();
            // With only ASCII characters to exclude here, the non-ASCII ones all go to the
            // shared rule (their UTF-8 paths would otherwise be rebuilt at every position).
            let (raw, any_nonascii) = if firsts.iter().all(|c| c.is_ascii()) {
                let ascii: Vec<(char, char)> =
                    raw.iter().filter(|r| r.0.is_ascii()).map(|&(a, b)| (a, b.min('\u{7F}'))).collect();
                (ascii, raw.iter().any(|r| !r.1.is_ascii()))
            } else {
                (raw, false)
            };
            if !raw.is_empty() {
                alts.push(Expr::seq([Expr::Chars(raw), rest.clone()]));
            }
            if any_nonascii {
                alts.push(nonascii_rest.clone());
            }
            alts.push(Expr::seq([Expr::lit("\\"), escape_rest.clone()]));
        }
    }
    for c in firsts {
        let tails: Vec<&[char]> = keys.iter().filter(|k| k.first() == Some(&c)).map(|k| &k[1..]).collect();
        let tail = if depth + 1 >= KEY_CHUNK {
            let e = not_in_set(&tails, rules, b, 0);
            match e {
                Expr::Ref(_) | Expr::Literal(_) | Expr::Empty | Expr::Nothing => e,
                e => Expr::Ref(b.add("other_key_rest", e)),
            }
        } else {
            not_in_set(&tails, rules, b, depth + 1)
        };
        alts.push(Expr::seq([json::str_units(&c.to_string()), tail]));
    }
    Expr::alt(alts)
}

/// Characters of an excluded key followed before [`not_in_set`] continues in a new rule.
const KEY_CHUNK: usize = 64;

/// Longest property name [`not_in_set`] excludes from other keys (its recursion follows the
/// name's characters); a longer declared name with additional properties allowed is an error.
const MAX_EXCLUDED_KEY_CHARS: usize = 1024;

/// The range `a..=b` without the characters in `holes`.
fn split_out(a: char, b: char, holes: &[char]) -> Vec<(char, char)> {
    let mut out = vec![(a, b)];
    for &h in holes {
        out = out
            .into_iter()
            .flat_map(|(x, y)| {
                if h < x || h > y {
                    vec![(x, y)]
                } else {
                    let mut v = Vec::new();
                    if h > x {
                        v.push((x, prev(h)));
                    }
                    if let Some(n) = next(h) {
                        if n <= y {
                            v.push((n, y));
                        }
                    }
                    v
                }
            })
            .collect();
    }
    out
}

fn prev(c: char) -> char {
    match c as u32 {
        0 => '\0',
        0xE000 => '\u{D7FF}',
        n => char::from_u32(n - 1).unwrap_or('\0'),
    }
}

fn next(c: char) -> Option<char> {
    match c as u32 {
        0xD7FF => Some('\u{E000}'),
        n => char::from_u32(n + 1),
    }
}

fn split_surrogates((a, b): (char, char)) -> Vec<(char, char)> {
    if (a as u32) < 0xD800 && (b as u32) > 0xDFFF {
        vec![(a, '\u{D7FF}'), ('\u{E000}', b)]
    } else {
        vec![(a, b)]
    }
}

/// Length range in characters of a character-level expression (`None` max: unbounded).
fn char_len(e: &Expr) -> (u64, Option<u64>) {
    match e {
        Expr::Empty => (0, Some(0)),
        Expr::Nothing => (0, Some(0)),
        Expr::Literal(b) => {
            let n = String::from_utf8_lossy(b).chars().count() as u64;
            (n, Some(n))
        }
        Expr::Chars(_) | Expr::Bytes(_) => (1, Some(1)),
        Expr::Seq(v) => v.iter().map(char_len).fold((0, Some(0)), |(a, b), (c, d)| (a + c, b.zip(d).map(|(x, y)| x + y))),
        Expr::Alt(v) => {
            let mut lo = u64::MAX;
            let mut hi = Some(0);
            for x in v {
                let (a, b) = char_len(x);
                lo = lo.min(a);
                hi = hi.zip(b).map(|(x, y)| x.max(y));
            }
            (if lo == u64::MAX { 0 } else { lo }, hi)
        }
        Expr::Repeat { expr, min, max } => {
            let (a, b) = char_len(expr);
            (a.saturating_mul(*min as u64), max.and_then(|m| b.map(|b| b.saturating_mul(m as u64))))
        }
        Expr::Ref(_) => (0, None),
    }
}

/// Restricts a character-level expression to strings of `min..=max` characters, when that
/// can be done exactly: the expression's lengths already fit, or exactly one part of a
/// sequence varies in length and is a repetition of single characters.
fn constrain_length(e: &Expr, min: u32, max: Option<u32>) -> Option<Expr> {
    let (lo, hi) = char_len(e);
    let fits = lo >= min as u64 && max.is_none_or(|m| hi.is_some_and(|h| h <= m as u64));
    if fits {
        return Some(e.clone());
    }
    match e {
        Expr::Alt(v) => {
            let parts: Option<Vec<Expr>> = v.iter().map(|x| constrain_length(x, min, max)).collect();
            parts.map(Expr::alt)
        }
        Expr::Repeat { expr, min: rmin, max: rmax } if char_len(expr) == (1, Some(1)) => {
            let nmin = (*rmin).max(min);
            let nmax = match (rmax, max) {
                (Some(a), Some(b)) => Some((*a).min(b)),
                (a, b) => a.or(b),
            };
            Some(Expr::repeat((**expr).clone(), nmin, nmax))
        }
        Expr::Seq(v) => {
            let lens: Vec<(u64, Option<u64>)> = v.iter().map(char_len).collect();
            let varying: Vec<usize> = (0..v.len()).filter(|&i| lens[i].1 != Some(lens[i].0)).collect();
            if varying.len() != 1 {
                return None;
            }
            let i = varying[0];
            let fixed: u64 = lens.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, l)| l.0).sum();
            let fixed = u32::try_from(fixed).ok()?;
            let nmin = min.saturating_sub(fixed);
            let nmax = match max {
                Some(m) => Some(m.checked_sub(fixed)?),
                None => None,
            };
            let inner = constrain_length(&v[i], nmin, nmax)?;
            let mut parts = v.clone();
            parts[i] = inner;
            Some(Expr::seq(parts))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;

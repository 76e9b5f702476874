//! Stage 1: JSON Schema → [`Grammar`].
//!
//! Input: a JSON Schema of draft-04, -06, -07, 2019-09 or 2020-12 (by `$schema`, or
//! [`Options::draft`]) as a `serde_json::Value`, plus [`Options`]. It is first rewritten into
//! one canonical form ([`dialect`]: every `$ref` resolved to a local pointer, each dialect's
//! meaning made explicit), then `unevaluated*` into plain keywords (`unevaluated`). Output: a [`Grammar`] whose start rule matches JSON texts (under the
//! whitespace policy) that validate against the schema — never one that does not. A keyword
//! or combination no grammar can express is left out of the grammar and recorded: the
//! [`crate::Compiled`] result carries [`crate::check::ValueChecks`] beside the grammar, and every
//! matcher of a constraint built from it enforces them exactly at run time
//! ([`Options::runtime_checks`], on by default; off, it is an [`Error`] naming the keyword
//! and its JSON pointer, as it is for what no check can enforce either). Where the grammar
//! accepts less than the schema, the result says so in a [`Note`] ([`crate::Compiled::notes`]).
//!
//! How: the schema is walked recursively; each schema becomes an [`Expr`]. Objects, arrays
//! and constrained strings become rules of their own, interned so identical bodies are one
//! rule; every plain string, number, integer and "any JSON value" is one shared rule, so the
//! automaton's fingerprints share their mask work. Every `$ref` target is one rule (compiled
//! once, from a work list), which is how recursive schemas work. `allOf` is merged into one
//! schema first (`merge`); `anyOf` is an alternation; `oneOf` is an alternation only when
//! its branches are provably disjoint. An `anyOf`, `oneOf` or `not` that what its sibling
//! keywords force proves unsatisfiable (`presence`) matches nothing, with a warning [`Note`]:
//! such a schema compiles, to a grammar that matches no document.
//!
//! Deviations from the spec (all make the grammar accept *less*, never more):
//! - property order: objects with at most four named properties accept them in any order
//!   (each at most once); larger objects too with run-time checks when at most five of their
//!   properties are required; otherwise schema order or "required first" order (the names of
//!   `required` in that order, then the others in schema order), with extra properties (when
//!   allowed) after the named ones; no key is ever repeated;
//! - without run-time checks, `oneOf` branches that overlap only through optional
//!   properties are made disjoint by forbidding, in each branch, the properties only the
//!   other branch requires (with a note where that refuses objects one branch alone
//!   matches; with run-time checks such a `oneOf` is checked exactly instead);
//! - `pattern` with `minLength`/`maxLength` that cannot be intersected exactly is an error;
//!   extra properties are not accepted next to `patternProperties`;
//! - bounded numbers are written without exponent; `format`s accept a documented subset
//!   ([`format`](mod@format)); constrained strings accept only the escapes JSON requires.
//!
//! Cost: linear in the schema size, plus one jsonschema validator per `enum` whose values
//! must be filtered by sibling keywords.
//!
//! Where things are: this file holds the entry points and the `Compiler`, which dispatches
//! each schema (`$ref`, `allOf`, `anyOf`/`oneOf`, `not`, `enum`, then per type);
//! `options.rs` the [`Options`], [`Note`]s and [`Error`]s; `keywords.rs` what the compiler
//! knows of keywords and types. The keywords are compiled in `refs.rs` (`$ref` resolution
//! and the work list of reference rules), `objects/`, `arrays.rs`, `strings.rs` (with the
//! key exclusion and the intersection of a pattern with a length range), `numeric.rs` (with
//! the digit grammars of [`number`]), `enums.rs` (`enum`/`const`) and `one_of.rs`
//! (`anyOf`/`oneOf`, with the disjointness check), with `presence.rs` (which branches the
//! sibling keywords decide); `shared.rs` holds the rules all schemas share. For the run-time
//! checks, `pointers.rs` builds the subschema validators. Patterns are ECMA-262, whose
//! translation, look-around compilation and respelling for the validators are [`ecma`].
//!
//! # Example
//!
//! Compile a schema, print its grammar (GBNF, start rule `root`), and run the automaton
//! built from it over a few documents:
//!
//! ```rust
//! use constrain::automaton::Pda;
//! use constrain::schema::{self, Options, Whitespace};
//! use constrain::Limits;
//!
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
//!     "required": ["name"],
//!     "additionalProperties": false
//! });
//! let options = Options::default().with_whitespace(Whitespace::Compact);
//! let compiled = schema::compile(&schema, &options)?;
//! assert!(compiled.checks().is_none()); // all of it is grammar: the automaton alone is exact
//! let gbnf = compiled.to_string();
//! assert!(gbnf.starts_with("root ::= "), "{gbnf}");
//! assert!(gbnf.contains("\"age\""), "{gbnf}");
//!
//! let pda = Pda::build(compiled.grammar(), &Limits::default())?;
//! assert!(pda.matches(br#"{"name":"Ada","age":36}"#));
//! assert!(pda.matches(br#"{"age":36,"name":"Ada"}"#)); // a few properties: any order
//! assert!(!pda.matches(br#"{"age":36}"#)); // `name` is required
//! assert!(!pda.matches(br#"{"name":"Ada","age":-1}"#)); // below `minimum`
//! assert!(!pda.matches(br#"{"name":"Ada","nick":"A"}"#)); // no other properties
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod arrays;
pub mod dialect;
pub mod ecma;
mod enums;
pub mod format;
mod json;
mod keywords;

/// Python's `repr(float)`, the spelling `json.dumps` gives a float: the compiler spells
/// `const`/`enum` numbers this way too, and evaluation harnesses serialise instances with it.
pub use json::python_float_repr;
mod merge;
pub mod number;
mod numeric;
mod objects;
mod one_of;
mod options;
mod pointers;
mod presence;
mod refs;
mod shared;
mod strings;
mod unevaluated;

use rustc_hash::FxHashMap as HashMap;
use std::hash::BuildHasher;

use serde_json::{Map, Value};

use crate::grammar::{Expr, Grammar, GrammarBuilder, RuleId};
use keywords::allowed_types;
use keywords::checkable;
use keywords::count;
pub(crate) use keywords::is_constraint_keyword;
use keywords::json_type;
pub(crate) use keywords::mentions_any;
pub(crate) use keywords::own_keywords;
use keywords::type_list;
use keywords::value_has_type;
pub(crate) use keywords::FORBIDDEN;
pub(crate) use keywords::JSON_TEXT;
pub use keywords::{known_keywords, KnownKeyword, Treatment};
pub use options::Error;
pub use options::Located;
pub use options::Note;
pub use options::Options;
pub use options::Whitespace;
use pointers::escape_pointer;
pub(crate) use pointers::escape_pointer_segment;
pub(crate) use pointers::percent_decode_pointer;
pub(crate) use pointers::portable_patterns;
pub(crate) use pointers::subschema_validator;
pub(crate) use pointers::Refusal;
use refs::{collect_ids, percent_decode};
use shared::SharedRule;

/// The grammar of `schema`'s documents with every object's named properties in the order
/// the schema lists them, for generation to prefer (a constraint accepts them in any order:
/// [`crate::Constraint::with_order_hint`]). Lenient and without run-time checks, since it
/// only ranks tokens the real constraint allows; `None` when it does not compile.
pub fn order_hint(schema: &Value, options: &Options) -> Option<Grammar> {
    let mut options = options.clone();
    options.schema_order = true;
    options.lenient = true;
    options.runtime_checks = false;
    lower(schema, &options).ok().map(|l| l.grammar)
}

/// What the compiler makes of a schema before its run-time checks are built: the grammar, the
/// notes, and what the checks must enforce ([`crate::compile`] builds them and the result).
pub(crate) struct Lowered {
    /// The grammar: exact when `relaxed` is `None`, else a superset the checks narrow.
    pub grammar: Grammar,
    /// Where the grammar accepts less than the schema, and warnings.
    pub notes: Vec<Note>,
    /// The keywords left to run-time checks, if any, each as (pointer of the schema holding it
    /// in the canonical document, keyword, pointer as written), and what the checks read.
    pub relaxed: Option<Relaxed>,
}

/// What the run-time checks need from a compile (see [`Lowered::relaxed`]).
pub(crate) struct Relaxed {
    /// The keywords, as (canonical pointer, keyword, pointer as written).
    pub list: Vec<(String, String, String)>,
    /// The canonical document, before `unevaluated*` were rewritten.
    pub normalised: Value,
    /// The schema's dialect.
    pub draft: dialect::Draft,
}

/// Compiles `schema` into a grammar and notes, and lists what the run-time checks must
/// enforce ([`crate::compile`], the public entry point, builds them).
pub(crate) fn lower(schema: &Value, options: &Options) -> Result<Lowered, Error> {
    let (normalised, draft) = dialect::normalise(schema, options.draft)?;
    let mut notes = Vec::new();
    if let (None, Some(Value::String(uri))) = (options.draft, schema.get("$schema")) {
        if dialect::Draft::from_uri(uri).is_none() {
            notes.push(Note::warning(
                "",
                "$schema",
                format!("unknown dialect {uri:?}: compiled as draft 2020-12 (force one with --draft)"),
            ));
        }
    }
    let checks = options.runtime_checks && !options.lenient;
    let mut exact_later = Vec::new();
    let doc = unevaluated::rewrite(&normalised, &mut notes, checks, &mut exact_later);
    let mut c = Compiler::new(&doc, options, draft);
    c.relaxed.get_mut().append(&mut exact_later);
    let start = c.ref_rule_for_pointer("");
    let built = c.drain().and_then(|()| {
        c.finish_layouts();
        let b = std::mem::replace(&mut c.b, GrammarBuilder::new());
        b.build(start).map_err(|e| Error::new("", "$ref", format!("internal grammar error: {e}")))
    });
    notes.append(&mut c.notes);
    let relaxed = c.relaxed.take();
    let g = built.map_err(|mut e| {
        e.0.point_as_written(schema);
        e
    })?;
    // `dependencies` where 2019-09 dropped it: the document must also validate with it
    // ignored (the whole document's check reads it so), wherever that may differ.
    let legacy = if options.lenient { None } else { dialect::legacy_dependencies(schema, draft) };
    // The schema holding it, for messages.
    let holder = legacy.as_deref().map(|at| at.strip_suffix("/dependencies").unwrap_or(at));
    if let Some(at) = holder {
        if !checks {
            return Err(Error::new(
                at,
                "dependencies",
                "not a keyword of this dialect, and validators disagree on it here (beside not/if/oneOf/maxContains/unevaluated*): needs run-time checks (use dependentRequired/dependentSchemas)",
            ));
        }
        notes.push(Note::new(
            at,
            "dependencies",
            "not a keyword of this dialect: honoured, and the output must also validate with it ignored (valid instances of either reading may be rejected)",
        ));
    }
    // `contentEncoding`/`contentMediaType` in draft-06/-07 where asserting them could accept
    // more: the whole document's check ignores them, so both readings hold.
    let content = if options.lenient { None } else { dialect::content_disagreement(schema, draft) };
    if let Some(at) = &content {
        let (holder, keyword) = at.rsplit_once('/').unwrap_or(("", at));
        if !checks {
            return Err(Error::new(
                holder,
                keyword,
                "validators disagree on contentEncoding/contentMediaType (asserted or ignored), and here (beside not/if/oneOf/maxContains/unevaluated*) that can matter: needs run-time checks",
            ));
        }
        notes.push(Note::new(
            holder,
            keyword,
            "asserted (as draft-07's optional tests do), and the output must also validate with contentEncoding/contentMediaType ignored (as Python's jsonschema does)",
        ));
    }
    let relaxed = if !relaxed.is_empty() || legacy.is_some() || content.is_some() {
        let mut list = Vec::new();
        if let Some(shown) = content {
            let keyword = shown.rsplit_once('/').map_or("contentEncoding", |(_, k)| k).to_string();
            list.push((String::new(), keyword, shown));
        }
        for (ptr, keyword) in relaxed {
            let shown = dialect::as_written(schema, &format!("{ptr}/{}", escape_pointer(&keyword)));
            list.push((ptr, keyword, shown));
        }
        if let Some(shown) = legacy {
            list.push((String::new(), "dependencies".to_string(), shown));
        }
        // The checks validate against the schema before `unevaluated*` were rewritten (the
        // rewrite may narrow a subschema, which under `not` would widen it), and the whole
        // document against the schema as written, in its own dialect.
        Some(Relaxed { list, normalised, draft })
    } else {
        None
    };
    for n in &mut notes {
        n.at.point_as_written(schema);
    }
    notes.dedup();
    Ok(Lowered { grammar: g, notes, relaxed })
}

/// The JSON types, in a fixed order.
const TYPES: [&str; 7] = ["null", "boolean", "object", "array", "string", "number", "integer"];

/// Deepest schema nesting the compiler follows.
///
/// A constant of the algorithm, not a user limit: the compiler recurses once per level,
/// so this bounds its stack (the thread's, which no setting can grow); real schemas nest
/// far less.
const MAX_DEPTH: usize = 128;

/// Most subschemas one schema may expand to (each `$ref` target or merged schema compiled
/// counts once per use): the schema-expansion fuel, which bounds merges that inline their
/// targets. JSONSchemaBench's largest schemas stay far below it.
///
/// A constant of the algorithm, not a user limit: it bounds the compiler's work on
/// references and merges before any grammar exists, the way
/// [`crate::Limits::max_grammar_size`] bounds the result.
const MAX_EXPANSION: usize = 500_000;

/// The compiler's state: the grammar being built and the rules already made.
pub(crate) struct Compiler<'a> {
    /// The whole (canonical) document, which `$ref` pointers resolve against.
    root: &'a Value,
    opts: &'a Options,
    b: GrammarBuilder,
    /// The whitespace allowed between two JSON tokens (per [`Options::whitespace`]).
    ws: Expr,
    /// The [`SharedRule`]s declared so far.
    shared: HashMap<SharedRule, RuleId>,
    /// Rules made by [`Compiler::rule`], by the hash of their body (a body is compared with
    /// the rule's before it is shared, so a collision only costs the sharing).
    interned: HashMap<u64, RuleId>,
    /// The rule of each `$ref` target, by its JSON pointer.
    ref_rules: HashMap<String, RuleId>,
    /// Reference rules declared but not compiled yet.
    pending: Vec<refs::PendingRef>,
    /// The pointer of each `$id` and `$anchor` (`#name`) of the document.
    ids: HashMap<String, String>,
    /// Current schema nesting (see [`MAX_DEPTH`]).
    depth: usize,
    /// Under-approximations made so far.
    notes: Vec<Note>,
    /// What [`Compiler::compile_merged`] made of each merged schema (by its JSON text).
    merged: HashMap<String, Expr>,
    /// Merged schemas being compiled (by their JSON text), with the rule that stands for one
    /// met again inside itself (a recursive `$ref` beside sibling keywords).
    merging: HashMap<String, Option<RuleId>>,
    /// Subschemas compiled so far (see [`MAX_EXPANSION`]).
    expanded: usize,
    /// Keywords left to run-time checks: (canonical pointer of their schema, keyword).
    relaxed: std::cell::RefCell<Vec<(String, String)>>,
    /// The schema's dialect (where the drafts disagree on what a value is: `1.0` is an
    /// integer from draft 6 on).
    draft: dialect::Draft,
    /// Object layouts laid out once every rule is defined (see
    /// [`objects::DeferredLayout`]), by the rule standing for each.
    deferred: Vec<objects::DeferredLayout>,
}

impl<'a> Compiler<'a> {
    /// A compiler for the (canonical) document `root`.
    fn new(root: &'a Value, opts: &'a Options, draft: dialect::Draft) -> Self {
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
            merging: HashMap::default(),
            expanded: 0,
            relaxed: Default::default(),
            draft,
            deferred: Vec::new(),
        };
        c.ws = match opts.whitespace {
            // The indentation after a newline is one shared rule, so the bounded count is one
            // automaton loop rather than one per whitespace position.
            Whitespace::Pretty => {
                let indent = c.shared_rule(SharedRule::Indent);
                Expr::opt(Expr::alt([Expr::lit(" "), Expr::seq([Expr::lit("\n"), indent])]))
            }
            other => json::ws(other),
        };
        c
    }

    /// Whether [`Options::lenient`] is set.
    fn lenient(&self) -> bool {
        self.opts.lenient
    }

    /// A keyword the grammar cannot express. Lenient: ignored. With run-time checks: left
    /// out of the grammar (which then accepts more there) and recorded, so the value it
    /// applies to is validated as it completes ([`crate::check`]). Otherwise an error.
    fn unsupported(&self, ptr: &str, keyword: &str, why: &str) -> Result<(), Error> {
        if self.lenient() {
            Ok(())
        } else if self.opts.runtime_checks && checkable(keyword) {
            self.relax(ptr, keyword);
            Ok(())
        } else {
            Err(Error::new(ptr, keyword, why))
        }
    }

    /// Records `keyword` of the schema at `ptr` as left to a run-time check (once).
    fn relax(&self, ptr: &str, keyword: &str) {
        let mut relaxed = self.relaxed.borrow_mut();
        if !relaxed.iter().any(|(p, k)| p == ptr && k == keyword) {
            relaxed.push((ptr.to_string(), keyword.to_string()));
        }
    }

    /// Whether `keyword`'s refusal may become a run-time check (see [`Compiler::unsupported`]).
    fn relaxes(&self, keyword: &str) -> bool {
        !self.lenient() && self.opts.runtime_checks && checkable(keyword)
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

    /// A comma between JSON tokens, whitespace around it.
    fn sep(&self) -> Expr {
        Expr::seq([self.ws.clone(), Expr::lit(","), self.ws.clone()])
    }

    /// A colon between a key and its value, whitespace around it.
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
        // Met again while being compiled: the same merged schema one level down a recursive
        // `$ref` (`{"$ref": "#/$defs/node", "type": "object"}` inside `node`). It becomes a
        // rule, defined once the outer compile ends, instead of being inlined without end.
        if let Some(slot) = self.merging.get_mut(&key) {
            let id = match *slot {
                Some(id) => id,
                None => {
                    let name = self.b.fresh_name("merged");
                    let id = self.b.declare(&name);
                    *slot = Some(id);
                    id
                }
            };
            return Ok(Expr::Ref(id));
        }
        self.merging.insert(key.clone(), None);
        let compiled = self.compile_value(&merged, ptr);
        let rule = self.merging.remove(&key).flatten();
        let mut e = compiled?;
        if let Some(id) = rule {
            self.b.define(id, e);
            e = Expr::Ref(id);
        }
        self.merged.insert(key, e.clone());
        Ok(e)
    }

    /// [`Compiler::compile_value`] without the depth and expansion budgets: dispatches on
    /// `$ref`, `allOf`, `anyOf`/`oneOf`, `not`, `enum`/`const`, then the types.
    fn compile_value_inner(&mut self, schema: &Value, ptr: &str) -> Result<Expr, Error> {
        let map = match schema {
            Value::Bool(true) => return Ok(self.shared_rule(SharedRule::Any)),
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
        let constraining = |m: &Map<String, Value>, skip: &[&str]| {
            m.keys().any(|k| is_constraint_keyword(k) && !skip.contains(&k.as_str()))
        };

        // $ref: alone it is a rule reference; with sibling constraints it is an allOf.
        if let Some(r) = map.get("$ref") {
            let Value::String(r) = r else {
                return Err(Error::new(ptr, "$ref", "$ref must be a string"));
            };
            if !constraining(map, &["$ref"]) {
                let target = self.resolve_ref(r, ptr)?;
                return Ok(Expr::Ref(self.ref_rule_for_pointer(&target.pointer)));
            }
            let merged = self.merge_all(std::slice::from_ref(schema), ptr)?;
            return self.compile_merged(merged, ptr);
        }
        if map.contains_key("allOf") {
            let merged = self.merge_all(std::slice::from_ref(schema), ptr)?;
            return self.compile_merged(merged, ptr);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(key) {
                return self.compile_alternatives(map, key, branches, ptr);
            }
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
                // Decided by what the siblings force: no value, or no constraint.
                let wrapped = Value::Object(Map::from_iter([("not".to_string(), not.clone())]));
                match presence::Siblings::read(&m, self.opts.strict).map(|s| s.eval(&wrapped)) {
                    Some(presence::Presence::Never) => {
                        self.notes.push(Note::warning(ptr, "not", presence::unsatisfiable("not", &[])));
                        return Ok(Expr::Nothing);
                    }
                    Some(presence::Presence::Always) => {}
                    _ => self.apply_not(&mut m, &not, ptr)?,
                }
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
        let fail = |c: &Self| {
            c.unsupported(ptr, "not", "only `not` with `type`, `required` or a boolean schema can be compiled")
        };
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
                            let mut existing: Vec<Value> =
                                map.get(FORBIDDEN).and_then(|v| v.as_array().cloned()).unwrap_or_default();
                            existing.extend(banned.into_iter().map(Value::String));
                            map.insert(FORBIDDEN.into(), Value::Array(existing));
                            // `required` holds for every value that is not an object, so
                            // its negation also makes the value an object.
                            let object: Vec<Value> = allowed_types(map)
                                .into_iter()
                                .filter(|t| *t == "object")
                                .map(|t| Value::String(t.into()))
                                .collect();
                            map.insert("type".into(), Value::Array(object));
                            return Ok(());
                        }
                    }
                }
                fail(self)
            }
            _ => Err(Error::new(ptr, "not", "`not` must be a schema")),
        }
    }

    /// A schema without `$ref`/combinators/`enum`: one alternative per allowed type.
    fn compile_typed(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        let mut types = allowed_types(map);
        let excluded = presence::if_excludes(map, &types, self.opts.strict);
        if !excluded.is_empty() {
            types.retain(|t| !excluded.contains(t));
            self.notes.push(Note::warning(
                ptr,
                "if",
                format!(
                    "no value of type {} can satisfy if/then/else: `if` decides the branch for every such value, and that branch admits none",
                    excluded.join(", ")
                ),
            ));
        }
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
                other => {
                    // `allowed_types` gives only names of `TYPES`, each handled above.
                    debug_assert!(false, "type {other:?} has no compiler");
                    Expr::Nothing
                }
            };
            alts.push(e);
        }
        Ok(Expr::alt(alts))
    }
}

#[cfg(test)]
mod tests;

//! `type: object`: `properties`, `required`, `additionalProperties`, `patternProperties`,
//! `propertyNames`, `dependentRequired` and the property counts.
//!
//! Objects with at most [`ANY_ORDER_MAX`] named properties accept them in any order (one rule
//! per set of members already written). Larger ones, when run-time checks are on (the check
//! refuses repeated keys), accept every member in any order: optional and free members
//! anywhere, and the required ones tracked by the total *weight* of those written
//! ([`Compiler::weighted_layout`]); up to [`REQUIRED_TRACKED_MAX`] required ones are tracked
//! as a set instead. Only an object whose weights would take more than
//! [`WEIGHTED_EDGES_MAX`] grammar edges keeps an order among some of its required members
//! (with a note).
//! Without run-time checks they accept schema order or required-first order, with free
//! members (pattern or additional keys) after the named ones.
//!
//! [`Compiler::compile_object`] runs the steps in order: read the keywords
//! ([`ObjectKeywords::read`]), list the named properties ([`Compiler::member_names`]), compile
//! their values ([`Compiler::named_members`]), then the free members
//! ([`Compiler::free_members`]), and lay them out ([`Compiler::object_members`]).
//!
//! Files: this one reads the keywords and compiles the named members; [`members`] the free
//! ones (patterns, additional keys); [`layout`] orders them between the braces.

use super::{count, escape_pointer, is_constraint_keyword, json, Compiler, Error, FORBIDDEN};
use crate::grammar::Expr;
use serde_json::{Map, Value};
use std::borrow::Cow;

mod layout;
mod members;

/// Objects with at most this many named properties accept them in any order (one rule per
/// subset of properties written so far); larger ones accept schema order or required-first
/// order.
///
/// A constant of the algorithm, not a user limit: it picks the shape of an object's
/// grammar (which orders of valid members it spells), never whether a document is valid,
/// and a schema's GBNF must not depend on the caller's settings.
const ANY_ORDER_MAX: usize = 4;

/// Larger objects accept any order (with run-time checks) of up to this many required
/// properties (one rule per subset written); more required ones keep an order among
/// themselves (see [`Compiler::loose_members`]), interleaved with the others.
///
/// A constant of the algorithm, not a user limit: as [`ANY_ORDER_MAX`], it trades
/// grammar size for the member orders spelled; the documented subset is the same for every
/// caller.
const REQUIRED_TRACKED_MAX: usize = 5;

/// The most rules (states) one layout of an object's required members takes: fewer
/// properties go in any order when many keep their order.
///
/// A constant of the algorithm, not a user limit: a size bound inside one layout,
/// which keeps the grammar small; every layout accepts only valid objects.
const LOOSE_STATES_MAX: usize = 256;

/// The most edges (a state and a weight of members written from it) of
/// [`Compiler::weighted_layout`]: about the grammar's size for the object's members.
///
/// A constant of the algorithm, not a user limit: past it the object keeps an order
/// (with a note) instead of failing, and the grammar's size stays within
/// [`crate::Limits::max_grammar_size`], which is the user's limit.
const WEIGHTED_EDGES_MAX: usize = 32768;

/// One `dependentRequired` entry: where `name` is present, every name of `needs` must be.
struct Dependency {
    name: String,
    /// Never empty, and without `name` itself.
    needs: Vec<String>,
}

/// How [`Compiler::loose_members`] lays out an object's required members: `any` (positions
/// among them) in any order, the rest in either of two `orders` (the schema's and that of
/// `required`, equal when they agree) among themselves.
struct Layout {
    any: Vec<usize>,
    orders: [Vec<usize>; 2],
}

/// The required members of a large object ([`Compiler::loose_members`]), laid out by
/// [`Compiler::finish_layouts`] once every rule is defined: their weights are their fewest
/// bytes, and a member's value may refer to a definition compiled after the object.
pub(super) struct DeferredLayout {
    /// The rule standing for the members, declared now and defined then.
    rule: crate::grammar::RuleId,
    /// Each required member's `"name": value` rule.
    exprs: Vec<Expr>,
    optional: Expr,
    optional_run: Expr,
    /// The set-and-orders layout, for an object whose weights take too many edges.
    fallback: Layout,
    /// The object's pointer, for the note of the fallback.
    ptr: String,
}

/// One `patternProperties` entry.
struct PatternProperty<'m> {
    pattern: &'m str,
    schema: &'m Value,
}

/// A named member of an object: the property name, the expression for `"name": value`, and
/// whether `required` lists it.
#[derive(Clone)]
struct Member {
    name: String,
    expr: Expr,
    required: bool,
}

/// A `dependentRequired` entry as bits of member positions: a set of members may end only
/// where, if `member` is in it, all of `needs` are (`usize::MAX`: a needed name can never be
/// present, so neither can the member).
#[derive(Clone, Copy)]
struct DependencyBits {
    member: usize,
    needs: usize,
}

/// `minProperties` and `maxProperties`.
#[derive(Clone, Copy)]
struct PropertyCounts {
    min: u32,
    max: Option<u32>,
}

/// What goes between an object's braces, or an object decided early.
enum Members {
    /// The whole object's expression (not made a rule of its own).
    Done(Expr),
    /// The members (`None`: the object must be empty), and whether `{}` is accepted too.
    Body { body: Option<Expr>, may_be_empty: bool },
}

/// The object keywords of one schema, read and checked for their JSON types.
struct ObjectKeywords<'m> {
    /// `dependentRequired`.
    dependent: Vec<Dependency>,
    /// `propertyNames`, when it constrains anything.
    key_schema: Option<&'m Value>,
    properties: &'m Map<String, Value>,
    /// `patternProperties`, in schema order.
    patterns: Vec<PatternProperty<'m>>,
    required: Vec<String>,
    /// Names that must be absent ([`FORBIDDEN`]).
    forbidden: Vec<String>,
    /// The schema of the other properties: `additionalProperties`, else
    /// `unevaluatedProperties` (which acts as it when nothing else evaluates), else `false`
    /// under [`Options::strict`](super::Options::strict), else `true`.
    additional: Cow<'m, Value>,
    /// The keyword `additional` is read from, for pointers.
    additional_key: &'static str,
}

impl<'m> ObjectKeywords<'m> {
    /// Reads the keywords of `map` other than `dependentRequired` and `propertyNames` (read
    /// first, as their errors come first); `empty` stands for an absent `properties`.
    fn read(
        map: &'m Map<String, Value>,
        empty: &'m Map<String, Value>,
        ptr: &str,
        strict: bool,
        dependent: Vec<Dependency>,
        key_schema: Option<&'m Value>,
    ) -> Result<Self, Error> {
        let properties = match map.get("properties") {
            None => empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(Error::new(ptr, "properties", "properties must be an object")),
        };
        let patterns = match map.get("patternProperties") {
            None => vec![],
            Some(Value::Object(p)) => p.iter().map(|(pattern, schema)| PatternProperty { pattern, schema }).collect(),
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
        let additional = match map.get("additionalProperties").or_else(|| map.get("unevaluatedProperties")) {
            Some(a) => Cow::Borrowed(a),
            None => Cow::Owned(Value::Bool(!strict)),
        };
        let additional_key =
            if map.contains_key("additionalProperties") { "additionalProperties" } else { "unevaluatedProperties" };
        Ok(ObjectKeywords {
            dependent,
            key_schema,
            properties,
            patterns,
            required,
            forbidden,
            additional,
            additional_key,
        })
    }
}

/// Whether the schemas `a` and `b` are written alike, or both allow every value (`true`, or
/// an object of annotations only).
fn same_values(a: &Value, b: &Value) -> bool {
    let any = |v: &Value| match v {
        Value::Bool(b) => *b,
        Value::Object(m) => !m.keys().any(|k| is_constraint_keyword(k)),
        _ => false,
    };
    a == b || (any(a) && any(b))
}

/// `dependentRequired`: (name, names it needs), compiled exactly by the any-order members
/// (so only for a few named properties).
fn dependent_required(map: &Map<String, Value>, ptr: &str) -> Result<Vec<Dependency>, Error> {
    let mut dependent = Vec::new();
    if let Some(v) = map.get("dependentRequired") {
        let Value::Object(d) = v else {
            return Err(Error::new(ptr, "dependentRequired", "dependentRequired must be an object"));
        };
        for (name, needs) in d {
            let Value::Array(needs) = needs else {
                return Err(Error::new(ptr, "dependentRequired", "dependentRequired values must be arrays of names"));
            };
            let needs: Vec<String> =
                needs.iter().filter_map(|x| x.as_str().map(String::from)).filter(|x| x != name).collect();
            if !needs.is_empty() {
                dependent.push(Dependency { name: name.clone(), needs });
            }
        }
    }
    Ok(dependent)
}

impl<'a> Compiler<'a> {
    /// An object schema's expression: `{`, the members, `}`.
    pub(super) fn compile_object(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
        let dependent = dependent_required(map, ptr)?;
        let key_schema = self.property_names(map, ptr)?;
        for k in ["dependentSchemas", "dependencies"] {
            if let Some(v) = map.get(k) {
                let trivial = v.as_object().is_some_and(|m| m.is_empty()) || v == &Value::Bool(true);
                if !trivial {
                    self.unsupported(ptr, k, "schema-valued dependencies have no grammar: they need run-time checks")?;
                }
            }
        }
        let empty = Map::new();
        let kw = ObjectKeywords::read(map, &empty, ptr, self.opts.strict, dependent, key_schema)?;
        let names = self.member_names(&kw, ptr)?;
        let Some(named) = self.named_members(&kw, &names, ptr)? else {
            return Ok(Expr::Nothing);
        };
        let (free, names_spelled) = self.free_members(&kw, &names, ptr)?;
        let counts = PropertyCounts {
            min: count(map, ptr, "minProperties")?.unwrap_or(0),
            max: count(map, ptr, "maxProperties")?,
        };
        if counts.max.is_some_and(|m| m < counts.min) {
            // No object has between min and max properties.
            return Ok(Expr::Nothing);
        }
        let (body, may_be_empty) = match self.object_members(&kw, &named, free, names_spelled, counts, ptr)? {
            Members::Done(e) => return Ok(e),
            Members::Body { body, may_be_empty } => (body, may_be_empty && counts.min == 0),
        };
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

    /// `propertyNames`, when it constrains anything: compiled as the key grammar of the free
    /// members, for objects that name no property (a named one would have to be checked
    /// against it, and kept out of the free keys).
    fn property_names<'m>(&self, map: &'m Map<String, Value>, ptr: &str) -> Result<Option<&'m Value>, Error> {
        let key_schema: Option<&Value> = match map.get("propertyNames") {
            None | Some(Value::Bool(true)) => None,
            Some(v) if v.as_object().is_some_and(|m| !m.keys().any(|k| is_constraint_keyword(k))) => None,
            Some(v) => Some(v),
        };
        if key_schema.is_some() {
            let names_any =
                ["properties", "patternProperties", "required", "dependentRequired", FORBIDDEN].iter().any(|k| {
                    map.get(*k).is_some_and(|v| {
                        v.as_object().is_none_or(|o| !o.is_empty()) && v.as_array().is_none_or(|a| !a.is_empty())
                    })
                });
            if names_any {
                self.unsupported(
                    ptr,
                    "propertyNames",
                    "propertyNames is compiled only for objects that name no property",
                )?;
            }
        }
        Ok(key_schema)
    }

    /// The named properties: `properties` in schema order, then the names of `required` and
    /// of `dependentRequired` not among them.
    fn member_names(&self, kw: &ObjectKeywords, ptr: &str) -> Result<Vec<String>, Error> {
        let mut names: Vec<String> = kw.properties.keys().cloned().collect();
        for r in &kw.required {
            if !names.contains(r) {
                names.push(r.clone());
            }
        }
        for Dependency { name: a, needs } in &kw.dependent {
            for n in std::iter::once(a).chain(needs) {
                if !names.contains(n) {
                    names.push(n.clone());
                }
                if !self.matching(kw, n, ptr)?.is_empty() {
                    self.unsupported(
                        ptr,
                        "dependentRequired",
                        &format!("property {n:?} of dependentRequired matches a patternProperties pattern"),
                    )?;
                }
            }
        }
        if !kw.dependent.is_empty() && names.len() > ANY_ORDER_MAX {
            self.unsupported(
                ptr,
                "dependentRequired",
                &format!("dependentRequired is compiled only for objects of at most {ANY_ORDER_MAX} named properties"),
            )?;
        }
        Ok(names)
    }

    /// Compiles the value of each named property (its own schema, merged with the patterns
    /// it matches, or the additional-properties schema). Names that must be absent or whose
    /// value matches nothing are left out; `None` when such a name is required (no object
    /// matches).
    fn named_members(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<Option<Vec<Member>>, Error> {
        let mut named: Vec<Member> = Vec::new();
        for name in names {
            let is_req = kw.required.contains(name);
            if kw.forbidden.contains(name) {
                if is_req {
                    return Ok(None);
                }
                continue;
            }
            let pats = self.matching(kw, name, ptr)?;
            let own: Option<&Value> = kw.properties.get(name);
            let mut parts: Vec<Value> = own.into_iter().cloned().collect();
            for i in &pats {
                parts.push(kw.patterns[*i].schema.clone());
            }
            if own.is_none() && pats.is_empty() {
                parts.push((*kw.additional).clone());
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
                    return Ok(None);
                }
                continue;
            }
            let member = Expr::seq([json::string_literal(name), self.colon(), value]);
            named.push(Member { name: name.clone(), expr: member, required: is_req });
        }
        for f in &kw.forbidden {
            if !self.matching(kw, f, ptr)?.is_empty() {
                self.unsupported(
                    ptr,
                    "patternProperties",
                    &format!("property {f:?} must be absent but matches a patternProperties pattern"),
                )?;
            }
        }
        Ok(Some(named))
    }
}

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

use std::borrow::Cow;

use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

use super::{count, escape_pointer, is_constraint_keyword, json, Compiler, Error, Note, SharedRule, FORBIDDEN};
use crate::grammar::complement::complement;
use crate::grammar::regex::{ecma_is_match, to_expr, RegexOptions};
use crate::grammar::Expr;

/// Objects with at most this many named properties accept them in any order (one rule per
/// subset of properties written so far); larger ones accept schema order or required-first
/// order.
const ANY_ORDER_MAX: usize = 4;

/// Larger objects accept any order (with run-time checks) of up to this many required
/// properties (one rule per subset written); more required ones keep an order among
/// themselves (see [`Compiler::loose_members`]), interleaved with the others.
const REQUIRED_TRACKED_MAX: usize = 5;

/// The most rules (states) one layout of an object's required members takes: fewer
/// properties go in any order when many keep their order.
const LOOSE_STATES_MAX: usize = 256;

/// The most edges (a state and a weight of members written from it) of
/// [`Compiler::weighted_layout`]: about the grammar's size for the object's members.
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
                    self.unsupported(ptr, k, &format!("{k} is not supported"))?;
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

    /// Free members: keys matching a pattern, and any other key when allowed
    /// (`Expr::Nothing` when there are none); and how many named keys a free key may spell
    /// too (names a pattern matches, when they could not be taken out of it).
    fn free_members(&mut self, kw: &ObjectKeywords, names: &[String], ptr: &str) -> Result<(Expr, usize), Error> {
        let (free, names_spelled) = if kw.patterns.is_empty() {
            let other =
                if *kw.additional != Value::Bool(false) { self.additional_member(kw, names, ptr)? } else { None };
            (other, 0)
        } else if *kw.additional == Value::Bool(false) {
            self.pattern_member(kw, names, ptr)?
        } else {
            self.pattern_and_other_members(kw, names, ptr)?
        };
        Ok((free.unwrap_or(Expr::Nothing), names_spelled))
    }

    /// The free members of an object with `patternProperties` whose other keys are allowed
    /// too (valued by `additionalProperties`, `true` when absent). When every value compiles
    /// alike, any free key takes it, exactly. Otherwise the keys that match no pattern are
    /// spelled as the complement of the patterns (and names), exactly; when that is over
    /// its budget, every free key takes any of the values and a run-time check holds each
    /// value to the schemas its key selects.
    fn pattern_and_other_members(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<(Option<Expr>, usize), Error> {
        let other = self.compile_value(&kw.additional, &format!("{ptr}/{}", kw.additional_key))?;
        if other == Expr::Nothing {
            return self.pattern_member(kw, names, ptr);
        }
        let mut values = vec![other.clone()];
        for p in &kw.patterns {
            if same_values(p.schema, &kw.additional) {
                continue;
            }
            let v = self.compile_value(p.schema, &format!("{ptr}/patternProperties/{}", escape_pointer(p.pattern)))?;
            if !values.contains(&v) {
                values.push(v);
            }
        }
        if values.len() > 1 {
            // The keys that match no pattern and name no property, spelled apart from the
            // others when their complement is small enough. A pattern the grammar cannot
            // spell leaves the keys to the run-time check.
            let taken: Option<Vec<Expr>> =
                kw.patterns.iter().map(|p| to_expr(p.pattern, &RegexOptions::json_schema()).ok()).collect();
            let others = taken.and_then(|mut taken| {
                taken.extend(names.iter().chain(&kw.forbidden).map(|n| Expr::lit(n)));
                complement(&Expr::alt(taken))
            });
            if let Some(others) = others {
                let key = Expr::seq([Expr::lit("\""), json::escape_expr(&others), Expr::lit("\"")]);
                let key = self.rule("other_key", key);
                let (pattern, names_spelled) = self.pattern_member(kw, names, ptr)?;
                let mut free: Vec<Expr> = pattern.into_iter().collect();
                if key != Expr::Nothing {
                    free.push(Expr::seq([key, self.colon(), other]));
                }
                return Ok(((!free.is_empty()).then(|| Expr::alt(free)), names_spelled));
            }
            self.unsupported(
                ptr,
                "patternProperties",
                "patternProperties beside other allowed keys with other values cannot be compiled exactly",
            )?;
        }
        let value = Expr::alt(values);
        let key = self.free_key(kw, names, ptr)?;
        Ok(((key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])), 0))
    }

    /// The member whose key matches a `patternProperties` pattern (all patterns must share
    /// one schema); `None` when its value matches nothing. Its keys leave out the named ones
    /// where the complement's budget allows (the grammar stays unambiguous: one route per
    /// key); else the count of names it may spell too is returned.
    fn pattern_member(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<(Option<Expr>, usize), Error> {
        let Some(first) = kw.patterns.first() else {
            return Ok((None, 0));
        };
        let same_schema = kw.patterns.iter().all(|p| p.schema == first.schema);
        if kw.patterns.len() > 1 && !same_schema {
            self.unsupported(
                ptr,
                "patternProperties",
                "several patternProperties with different schemas cannot be compiled exactly",
            )?;
        }
        let mut key_alts = Vec::new();
        for p in &kw.patterns {
            match to_expr(p.pattern, &RegexOptions::json_schema()) {
                Ok(e) => key_alts.push(e),
                Err(e) if self.relaxes("patternProperties") => {
                    // A pattern the grammar cannot spell (look-around): any free key takes
                    // any pattern's value, and the run-time check validates the object.
                    self.unsupported(ptr, "patternProperties", &e.to_string())?;
                    return self.any_pattern_member(kw, names, ptr);
                }
                Err(e) => return Err(Error::new(ptr, "patternProperties", e.to_string())),
            }
        }
        // Named keys must not be produced by a pattern route unless their value schema is
        // exactly the pattern's; those a pattern matches are taken out of its keys below.
        let mut matched: Vec<&String> = Vec::new();
        for name in names {
            let pats = self.matching(kw, name, ptr)?;
            let Some(&p) = pats.first() else { continue };
            matched.push(name);
            if kw.properties.get(name).is_some_and(|s| {
                s != kw.patterns[p].schema && *s != Value::Bool(true) && !s.as_object().is_some_and(|o| o.is_empty())
            }) {
                self.unsupported(
                    ptr,
                    "patternProperties",
                    &format!("property {name:?} also matches a patternProperties pattern"),
                )?;
            }
        }
        let mut keys = Expr::alt(key_alts);
        let mut names_spelled = 0;
        if !matched.is_empty() {
            // The pattern keys but the named ones: the complement of (not a pattern key, or a
            // name).
            let without = complement(&keys).and_then(|not_keys| {
                complement(&Expr::alt(std::iter::once(not_keys).chain(matched.iter().map(|n| Expr::lit(n)))))
            });
            match without {
                Some(e) => keys = e,
                None => names_spelled = matched.len(),
            }
        }
        let key = Expr::seq([Expr::lit("\""), json::escape_expr(&keys), Expr::lit("\"")]);
        let key = self.rule("pattern_key", key);
        let value = if same_schema || !self.relaxes("patternProperties") {
            self.compile_value(first.schema, &format!("{ptr}/patternProperties/{}", escape_pointer(first.pattern)))?
        } else {
            // Patterns with different schemas: any of them (the run-time check holds a key
            // to every schema whose pattern it matches).
            self.any_pattern_value(kw, ptr)?
        };
        Ok((
            (value != Expr::Nothing && key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])),
            names_spelled,
        ))
    }

    /// The positions in [`ObjectKeywords::patterns`] of the patterns `name` matches. A
    /// pattern that cannot be decided here (look-around) counts as not matching, which
    /// leaves its schema out of `name`'s value (a superset), and the object to the run-time
    /// check (an error without run-time checks).
    fn matching(&self, kw: &ObjectKeywords, name: &str, ptr: &str) -> Result<Vec<usize>, Error> {
        let mut out = Vec::new();
        for (i, p) in kw.patterns.iter().enumerate() {
            match ecma_is_match(p.pattern, name) {
                Ok(true) => out.push(i),
                Ok(false) => {}
                Err(e) => self.unsupported(ptr, "patternProperties", &e.to_string())?,
            }
        }
        Ok(out)
    }

    /// [`Self::pattern_member`] when a pattern cannot be spelled: every free key (see
    /// [`Self::free_key`]) with the value of any pattern, a superset the run-time check
    /// makes exact (a key must match a pattern, and its value satisfy every pattern it
    /// matches).
    fn any_pattern_member(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<(Option<Expr>, usize), Error> {
        let value = self.any_pattern_value(kw, ptr)?;
        let key = self.free_key(kw, names, ptr)?;
        Ok(((value != Expr::Nothing && key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])), 0))
    }

    /// The value of a pattern key when which patterns it matches is left to the run-time
    /// check: any pattern's value.
    fn any_pattern_value(&mut self, kw: &ObjectKeywords, ptr: &str) -> Result<Expr, Error> {
        let mut values = Vec::new();
        for p in &kw.patterns {
            values
                .push(self.compile_value(p.schema, &format!("{ptr}/patternProperties/{}", escape_pointer(p.pattern)))?);
        }
        Ok(Expr::alt(values))
    }

    /// The member of any other key (not named, not forbidden; matching `propertyNames` when
    /// given), valued by the additional-properties schema; `None` when no key or no value is
    /// possible.
    fn additional_member(&mut self, kw: &ObjectKeywords, names: &[String], ptr: &str) -> Result<Option<Expr>, Error> {
        let value = self.compile_value(&kw.additional, &format!("{ptr}/{}", kw.additional_key))?;
        if value == Expr::Nothing {
            return Ok(None);
        }
        let key = self.free_key(kw, names, ptr)?;
        Ok((key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])))
    }

    /// The key of a free member: any string but the named and forbidden properties,
    /// matching `propertyNames` when given.
    fn free_key(&mut self, kw: &ObjectKeywords, names: &[String], ptr: &str) -> Result<Expr, Error> {
        let mut excluded: Vec<String> = names.to_vec();
        excluded.extend(kw.forbidden.iter().cloned());
        Ok(if let (Some(ks), true) = (kw.key_schema, excluded.is_empty()) {
            let ks =
                self.merge_all(&[ks.clone(), serde_json::json!({"type": "string"})], &format!("{ptr}/propertyNames"))?;
            self.compile_value(&ks, &format!("{ptr}/propertyNames"))?
        } else if excluded.is_empty() {
            self.shared_rule(SharedRule::String)
        } else {
            self.other_key(&excluded, ptr)?
        })
    }

    /// Lays out the named and free members between the braces, under the property counts.
    fn object_members(
        &mut self,
        kw: &ObjectKeywords,
        named: &[Member],
        free: Expr,
        names_spelled: usize,
        counts: PropertyCounts,
        ptr: &str,
    ) -> Result<Members, Error> {
        if named.is_empty() {
            return self.free_only_members(free, counts, ptr);
        }
        let has_free = free != Expr::Nothing;
        let free_tail = if has_free { Expr::star(Expr::seq([self.sep(), free.clone()])) } else { Expr::Empty };
        let n_required = named.iter().filter(|m| m.required).count() as u32;
        let n_named = named.len() as u32;
        if counts.min > n_required.max(1) {
            self.unsupported(
                ptr,
                "minProperties",
                "minProperties above the number of required properties cannot be compiled",
            )?;
        }
        if let Some(m) = counts.max {
            if has_free || m < n_named {
                self.unsupported(
                    ptr,
                    "maxProperties",
                    "maxProperties below the number of possible properties cannot be compiled",
                )?;
            }
        }
        let first_required = named.iter().any(|m| m.required);
        let n_req = named.iter().filter(|m| m.required).count();
        // The order hint's grammar (`schema_order`) takes the schema's order only.
        let any_order = !self.opts.schema_order;
        // A free key that may spell a named one makes that member ambiguous, and the parse
        // stacks double with each such member written: keep the ordered layout for many.
        let few_spelled = names_spelled <= ANY_ORDER_MAX;
        if any_order && named.len() > ANY_ORDER_MAX && few_spelled && self.relaxes("properties") {
            self.relax(ptr, "properties");
            let body = self.loose_members(named, &kw.required, &free, has_free, ptr);
            return Ok(Members::Body { body: Some(body), may_be_empty: n_req == 0 });
        }
        let body = if any_order && named.len() <= ANY_ORDER_MAX {
            let deps = dependency_bits(named, &kw.dependent);
            self.any_order(named, &deps, &free)
        } else {
            if any_order {
                let why = if few_spelled {
                    "no run-time checks: `--no-runtime-checks` or `--lenient`"
                } else {
                    "more than four of the names also match a patternProperties pattern"
                };
                self.notes.push(Note::new(
                    ptr,
                    "properties",
                    format!(
                        "an object of more than {ANY_ORDER_MAX} named properties is compiled with them in schema \
                         order or required-first order, other keys after them ({why})"
                    ),
                ));
            }
            let named_part =
                if any_order { self.ordered_members(named, &kw.required) } else { self.named_sequence(named) };
            if first_required || !has_free {
                Expr::seq([named_part, free_tail])
            } else {
                Expr::alt([Expr::seq([named_part, free_tail.clone()]), Expr::seq([free, free_tail])])
            }
        };
        Ok(Members::Body { body: Some(body), may_be_empty: !first_required })
    }

    /// Members in any order, for objects of any size, every required one exactly once and
    /// the optional and free ones any number of times (a run-time check refuses a repeated
    /// key when it closes, and what the keys cannot show, counts and dependencies, when the
    /// object closes). The grammar's state says how far the required members are written,
    /// so the object can close only once all are there and closing mode's distances see
    /// them.
    ///
    /// More than [`REQUIRED_TRACKED_MAX`] required members are tracked by weight
    /// ([`Compiler::weighted_layout`]). Fewer, or an object whose weights take too many
    /// edges (with a note at `ptr`), are tracked as a set of at most
    /// [`REQUIRED_TRACKED_MAX`]: those off the longest common subsequence of the schema's
    /// order and the order of `required` first; the others keep the schema's order or the
    /// order of `required` among themselves (one deterministic layout for both,
    /// [`Compiler::required_layout`]). Non-empty.
    fn loose_members(
        &mut self,
        named: &[Member],
        required_order: &[String],
        free: &Expr,
        has_free: bool,
        ptr: &str,
    ) -> Expr {
        let schema_order: Vec<&Member> = named.iter().filter(|m| m.required).collect();
        let optional = Expr::alt(
            named.iter().filter(|m| !m.required).map(|m| m.expr.clone()).chain(has_free.then(|| free.clone())),
        );
        let sep = self.sep();
        // The optional members between required ones: one rule, shared by every state.
        let optional_run = self.rule("optional_members", Expr::star(Expr::seq([sep.clone(), optional.clone()])));
        let exprs: Vec<Expr> = schema_order.iter().map(|m| self.rule("member", m.expr.clone())).collect();
        let n = schema_order.len();
        // Each member's place in `required` (its first mention; `required` names them all).
        let mut place: HashMap<&str, usize> = HashMap::default();
        for (i, r) in required_order.iter().enumerate() {
            place.entry(r.as_str()).or_insert(i);
        }
        let places: Vec<usize> =
            schema_order.iter().map(|m| place.get(m.name.as_str()).copied().unwrap_or(0)).collect();
        // Any-order members: off the common order first, then the earliest in schema order.
        let mut in_common = vec![false; n];
        for i in longest_increasing(&places) {
            in_common[i] = true;
        }
        let two_orders = in_common.iter().any(|&c| !c);
        let mut t = n.min(REQUIRED_TRACKED_MAX);
        while t > 0 && (1usize << t) * (n - t + 1) * if two_orders { 2 } else { 1 } > LOOSE_STATES_MAX {
            t -= 1;
        }
        let mut any: Vec<usize> = (0..n).filter(|&i| !in_common[i]).chain((0..n).filter(|&i| in_common[i])).collect();
        any.truncate(t);
        let mut is_any = vec![false; n];
        for &i in &any {
            is_any[i] = true;
        }
        let by_schema: Vec<usize> = (0..n).filter(|&i| !is_any[i]).collect();
        let mut by_required = by_schema.clone();
        by_required.sort_by_key(|&i| places[i]);
        let layout = Layout { any, orders: [by_schema, by_required] };
        if n > REQUIRED_TRACKED_MAX {
            let name = self.b.fresh_name("required_members");
            let rule = self.b.declare(&name);
            self.deferred.push(DeferredLayout {
                rule,
                exprs,
                optional,
                optional_run,
                fallback: layout,
                ptr: ptr.to_string(),
            });
            return Expr::Ref(rule);
        }
        self.required_layout(&layout, &exprs, &optional, &optional_run)
    }

    /// Defines the rules of the [`DeferredLayout`]s: by weight
    /// ([`Compiler::weighted_layout`]), or, over the edge budget, by the set-and-orders
    /// layout with a note.
    pub(super) fn finish_layouts(&mut self) {
        let deferred = std::mem::take(&mut self.deferred);
        // Each layout's fewest bytes first, for the weights of the layouts around it.
        let mut memo = HashMap::default();
        for d in &deferred {
            // Remembered in `memo` by the call.
            self.min_len(&Expr::Ref(d.rule), &mut memo, &deferred, 0);
        }
        for d in &deferred {
            let body = match self.weighted_layout(&d.exprs, &d.optional, &d.optional_run, &mut memo) {
                Ok(body) => body,
                Err(size) => {
                    let n = d.exprs.len();
                    self.notes.push(Note::new(
                        &d.ptr,
                        "required",
                        format!(
                            "{n} required properties whose any-order layout would be too large ({size}; at most \
                             {WEIGHTED_EDGES_MAX} grammar edges): up to {REQUIRED_TRACKED_MAX} of them go in any \
                             order, the others keep the schema's order or that of `required` among themselves"
                        ),
                    ));
                    self.required_layout(&d.fallback, &d.exprs, &d.optional, &d.optional_run)
                }
            };
            self.b.define(d.rule, body);
        }
    }

    /// The required members `exprs` of [`Compiler::loose_members`] in any order, interleaved
    /// with `optional` members, tracked by weight: each member has a positive weight, and a
    /// state is the sum of the weights written so far (one rule per sum from which the total
    /// is still reachable). The object may close only at the total. The run-time check
    /// refuses a repeated key, so the members written are distinct, and distinct members
    /// whose weights sum to the total of all are all of them: the language is exact for any
    /// positive weights, with one state per reachable sum instead of one per subset.
    ///
    /// The weight is the member's fewest bytes with its separator, so that every way to the
    /// total from a state is as long as writing the members still missing: closing mode's
    /// distances (bytes, summed over the grammar) are then those of the missing members,
    /// never of a repeat the check would refuse. Weights are divided by their common
    /// divisor (equal weights give one state per count). Each key leads to one state, so
    /// parsing stays deterministic.
    ///
    /// Says how large the layout would be instead when it takes more than
    /// [`WEIGHTED_EDGES_MAX`] edges.
    fn weighted_layout(
        &mut self,
        exprs: &[Expr],
        optional: &Expr,
        optional_run: &Expr,
        memo: &mut HashMap<u32, Option<u64>>,
    ) -> Result<Expr, String> {
        let sep = self.sep();
        let sep_len = self.min_len(&sep, memo, &[], 0).unwrap_or(1);
        let lens: Vec<u64> =
            exprs.iter().map(|e| self.min_len(e, memo, &[], 0).unwrap_or(0).saturating_add(sep_len).max(1)).collect();
        let g = lens.iter().fold(0, |a, &b| gcd(a, b)).max(1);
        let total_len: u64 = lens.iter().map(|l| l / g).fold(0u64, |a, b| a.saturating_add(b));
        // A sum past the edge budget has more states than edges allowed: refuse before
        // allocating anything of that size.
        let total = match usize::try_from(total_len) {
            Ok(total) if total < WEIGHTED_EDGES_MAX => total,
            _ => return Err(format!("weights summing to {total_len}")),
        };
        let weights: Vec<usize> = lens.iter().map(|&l| (l / g) as usize).collect();
        // The sums reached from 0 that can still reach the total.
        let mut reach = vec![false; total + 1];
        reach[0] = true;
        for s in 0..total {
            if reach[s] {
                for &w in &weights {
                    if let Some(r) = reach.get_mut(s + w) {
                        *r = true;
                    }
                }
            }
        }
        let mut live = vec![false; total + 1];
        live[total] = true;
        for s in (0..total).rev() {
            live[s] = reach[s] && weights.iter().any(|&w| live.get(s + w) == Some(&true));
        }
        // Members of one weight lead to the same state: one rule for each weight's members,
        // so a state has an edge per weight, not per member.
        let mut by_weight: Vec<(usize, Vec<Expr>)> = Vec::new();
        for (&w, e) in weights.iter().zip(exprs) {
            match by_weight.iter_mut().find(|(v, _)| *v == w) {
                Some((_, es)) => es.push(e.clone()),
                None => by_weight.push((w, vec![e.clone()])),
            }
        }
        // Whether weight `w` may be written at sum `s`.
        let fits = |s: usize, w: usize| s + w <= total && live[s + w];
        let edges: usize =
            (0..=total).filter(|&s| live[s]).map(|s| by_weight.iter().filter(|(w, _)| fits(s, *w)).count()).sum();
        if edges > WEIGHTED_EDGES_MAX {
            return Err(format!("{edges} edges"));
        }
        let groups: Vec<(usize, Expr)> =
            by_weight.into_iter().map(|(w, es)| (w, self.rule("members_of_weight", Expr::alt(es)))).collect();
        let steps = |s: usize| groups.iter().filter(move |(w, _)| fits(s, *w));
        let mut after: Vec<Expr> = vec![Expr::Nothing; total + 1];
        for s in (0..=total).rev().filter(|&s| live[s]) {
            let mut alts: Vec<Expr> =
                steps(s).map(|(w, g)| Expr::seq([sep.clone(), g.clone(), after[s + w].clone()])).collect();
            if s == total {
                alts.push(Expr::Empty);
            }
            after[s] = self.rule("members", Expr::seq([optional_run.clone(), Expr::alt(alts)]));
        }
        let mut first: Vec<Expr> = steps(0).map(|(w, g)| Expr::seq([g.clone(), after[*w].clone()])).collect();
        if *optional != Expr::Nothing {
            first.push(Expr::seq([optional.clone(), after[0].clone()]));
        }
        Ok(Expr::alt(first))
    }

    /// The fewest bytes `e` matches (`None`: none, or a rule met again inside itself), for
    /// [`Compiler::weighted_layout`]'s weights. Rules are looked up in the builder and
    /// remembered in `memo` (where [`Compiler::finish_layouts`] puts the deferred layouts'
    /// lengths, from their members in `deferred`); a rule not defined, or a chain deeper
    /// than [`MIN_LEN_DEPTH`], counts as 0 (a weight only needs to be positive; a wrong
    /// length costs closing mode its exact distances, not the language its exactness).
    fn min_len(
        &self,
        e: &Expr,
        memo: &mut HashMap<u32, Option<u64>>,
        deferred: &[DeferredLayout],
        depth: usize,
    ) -> Option<u64> {
        if depth > MIN_LEN_DEPTH {
            return Some(0);
        }
        match e {
            Expr::Empty => Some(0),
            Expr::Nothing => None,
            Expr::Literal(b) => Some(b.len() as u64),
            Expr::Bytes(_) => Some(1),
            Expr::Chars(ranges) => ranges.iter().map(|&(lo, _)| lo.len_utf8() as u64).min(),
            Expr::Seq(parts) => parts
                .iter()
                .try_fold(0u64, |sum, p| Some(sum.saturating_add(self.min_len(p, memo, deferred, depth + 1)?))),
            Expr::Alt(parts) => parts.iter().filter_map(|p| self.min_len(p, memo, deferred, depth + 1)).min(),
            Expr::Repeat { expr, min, .. } => {
                if *min == 0 {
                    Some(0)
                } else {
                    self.min_len(expr, memo, deferred, depth + 1).map(|l| l.saturating_mul(u64::from(*min)))
                }
            }
            Expr::Ref(id) => {
                if let Some(&known) = memo.get(&id.0) {
                    return known;
                }
                let Some(body) = self.b.body(*id) else {
                    // A deferred layout (defined only by `finish_layouts`): its fewest
                    // bytes are its members' with the separators between them.
                    let Some(d) = deferred.iter().find(|d| d.rule == *id) else { return Some(0) };
                    memo.insert(id.0, None);
                    let sep = self.min_len(&self.sep(), memo, deferred, depth + 1).unwrap_or(1);
                    let body = d.exprs.iter().map(|e| self.min_len(e, memo, deferred, depth + 1));
                    let len = body.sum::<Option<u64>>().map(|l| l + sep * (d.exprs.len() as u64).saturating_sub(1));
                    memo.insert(id.0, len);
                    return len;
                };
                memo.insert(id.0, None);
                let len = self.min_len(body, memo, deferred, depth + 1);
                memo.insert(id.0, len);
                len
            }
        }
    }

    /// The members of [`Compiler::loose_members`] laid out by `layout`, all interleaved with
    /// `optional` members: one rule per state reached, a state being the set of any-order
    /// members written and how far along each fixed order still followed the others are
    /// (`None` once one is left). Each key leads to one state, so parsing stays
    /// deterministic.
    fn required_layout(&mut self, layout: &Layout, exprs: &[Expr], optional: &Expr, optional_run: &Expr) -> Expr {
        type State = (usize, Option<usize>, Option<usize>);
        let full = (1usize << layout.any.len()) - 1;
        let u = layout.orders[0].len();
        // The states reached from the start, in breadth-first order: each step writes one
        // more member, so every state's successors come after it.
        let start: State = (0, Some(0), Some(0));
        let mut states = vec![start];
        let mut index: HashMap<State, usize> = HashMap::default();
        index.insert(start, 0);
        let mut edges: Vec<Vec<(usize, usize)>> = Vec::new();
        // How far along `order` a step writing member `m` leaves `j` (`None`: off it).
        let next = |j: Option<usize>, order: &[usize], m: usize| j.filter(|&j| order.get(j) == Some(&m)).map(|j| j + 1);
        let mut at = 0;
        while at < states.len() {
            let (set, ja, jb) = states[at];
            let mut out = Vec::new();
            for (k, &m) in layout.any.iter().enumerate() {
                if set & (1 << k) == 0 {
                    out.push((m, (set | (1 << k), ja, jb)));
                }
            }
            let mut candidates: Vec<usize> = [(ja, 0), (jb, 1)]
                .into_iter()
                .filter_map(|(j, o)| j.and_then(|j| layout.orders[o].get(j).copied()))
                .collect();
            candidates.dedup();
            for m in candidates {
                out.push((m, (set, next(ja, &layout.orders[0], m), next(jb, &layout.orders[1], m))));
            }
            let mut targets = Vec::with_capacity(out.len());
            for (m, st) in out {
                let id = *index.entry(st).or_insert_with(|| {
                    states.push(st);
                    states.len() - 1
                });
                targets.push((m, id));
            }
            edges.push(targets);
            at += 1;
        }
        let sep = self.sep();
        let mut after: Vec<Expr> = vec![Expr::Nothing; states.len()];
        for id in (0..states.len()).rev() {
            let (set, ja, jb) = states[id];
            let mut alts: Vec<Expr> = edges[id]
                .iter()
                .map(|&(m, to)| Expr::seq([sep.clone(), exprs[m].clone(), after[to].clone()]))
                .collect();
            if set == full && (ja == Some(u) || jb == Some(u)) {
                alts.push(Expr::Empty);
            }
            after[id] = self.rule("members", Expr::seq([optional_run.clone(), Expr::alt(alts)]));
        }
        let mut first: Vec<Expr> =
            edges[0].iter().map(|&(m, to)| Expr::seq([exprs[m].clone(), after[to].clone()])).collect();
        if *optional != Expr::Nothing {
            first.push(Expr::seq([optional.clone(), after[0].clone()]));
        }
        Expr::alt(first)
    }

    /// The members of an object without named properties: free members only, within the
    /// property counts.
    fn free_only_members(&mut self, free: Expr, counts: PropertyCounts, ptr: &str) -> Result<Members, Error> {
        if free == Expr::Nothing {
            if counts.min > 0 {
                return Ok(Members::Done(Expr::Nothing));
            }
            return Ok(Members::Body { body: None, may_be_empty: true });
        }
        if counts.min > 1 {
            self.unsupported(
                ptr,
                "minProperties",
                "minProperties above 1 over free-form keys cannot be enforced (keys could repeat)",
            )?;
        }
        let lo = counts.min.max(1);
        let sep = self.sep();
        let body = Expr::seq([
            free.clone(),
            Expr::repeat(Expr::seq([sep, free]), lo - 1, counts.max.map(|m| m.saturating_sub(1))),
        ]);
        if counts.max == Some(0) {
            return Ok(Members::Done(Expr::seq([Expr::lit("{"), self.ws.clone(), Expr::lit("}")])));
        }
        Ok(Members::Body { body: Some(body), may_be_empty: counts.min == 0 })
    }

    /// Named members in schema order, and also in "required first" order (required names in
    /// the order of `required`, then the others in schema order), which is how many
    /// documents are written. Each order is exact on its own, so their union is too.
    fn ordered_members(&mut self, named: &[Member], required: &[String]) -> Expr {
        let mut named_part = self.named_sequence(named);
        // Hash lookups: linear in the number of properties (100k of them are hostile
        // input, not a quadratic hang).
        let mut req_first: Vec<Member> = Vec::new();
        let mut taken: rustc_hash::FxHashSet<&str> = Default::default();
        let by_name: HashMap<&str, &Member> = named.iter().map(|m| (m.name.as_str(), m)).collect();
        for r in required {
            if let Some(m) = by_name.get(r.as_str()) {
                if taken.insert(m.name.as_str()) {
                    req_first.push((*m).clone());
                }
            }
        }
        for m in named {
            if taken.insert(m.name.as_str()) {
                req_first.push(m.clone());
            }
        }
        if req_first.iter().map(|m| &m.name).ne(named.iter().map(|m| &m.name)) {
            let other = self.named_sequence(&req_first);
            named_part = Expr::alt([named_part, other]);
        }
        named_part
    }

    /// Named members in any order, each at most once, the required ones present, with free
    /// members (keys no name takes) anywhere between them: one rule per set of members already
    /// written (so only for a few members). The set may end only where each present member
    /// has what `deps` says it needs. Non-empty; the caller makes it optional when nothing is
    /// required.
    fn any_order(&mut self, named: &[Member], deps: &[DependencyBits], free: &Expr) -> Expr {
        let n = named.len();
        let required: usize = named.iter().enumerate().filter(|(_, m)| m.required).map(|(i, _)| 1 << i).sum();
        let may_end = |mask: usize| {
            mask & required == required && deps.iter().all(|d| mask & d.member == 0 || mask & d.needs == d.needs)
        };
        let full = (1usize << n) - 1;
        let sep = self.sep();
        let has_free = *free != Expr::Nothing;
        // Free members between named ones: one rule, shared by every set.
        let free_run = if has_free {
            self.rule("free_members", Expr::star(Expr::seq([sep.clone(), free.clone()])))
        } else {
            Expr::Empty
        };
        let mut after: Vec<Expr> = vec![Expr::Nothing; full + 1];
        for mask in (0..=full).rev() {
            if mask == 0 && !has_free {
                break;
            }
            let mut alts = Vec::new();
            for (k, m) in named.iter().enumerate() {
                if mask & (1 << k) == 0 {
                    alts.push(Expr::seq([sep.clone(), m.expr.clone(), after[mask | (1 << k)].clone()]));
                }
            }
            if may_end(mask) {
                alts.push(Expr::Empty);
            }
            after[mask] = self.rule("members", Expr::seq([free_run.clone(), Expr::alt(alts)]));
        }
        let mut alts: Vec<Expr> =
            named.iter().enumerate().map(|(k, m)| Expr::seq([m.expr.clone(), after[1 << k].clone()])).collect();
        if has_free {
            alts.push(Expr::seq([free.clone(), after[0].clone()]));
        }
        Expr::alt(alts)
    }

    /// Named members in order, separated by commas, optional ones omissible, at least one
    /// present.
    fn named_sequence(&mut self, named: &[Member]) -> Expr {
        let sep = self.sep();
        let n = named.len();
        if let Some(r0) = named.iter().position(|m| m.required) {
            let mut parts = Vec::new();
            for m in &named[..r0] {
                parts.push(Expr::opt(Expr::seq([m.expr.clone(), sep.clone()])));
            }
            parts.push(named[r0].expr.clone());
            for m in &named[r0 + 1..] {
                let e = Expr::seq([sep.clone(), m.expr.clone()]);
                parts.push(if m.required { e } else { Expr::opt(e) });
            }
            return Expr::seq(parts);
        }
        // All optional: the first present member, then any of the later ones.
        if n <= 3 {
            let tail =
                |k: usize| Expr::seq(named[k..].iter().map(|m| Expr::opt(Expr::seq([sep.clone(), m.expr.clone()]))));
            return Expr::alt((0..n).map(|j| Expr::seq([named[j].expr.clone(), tail(j + 1)])));
        }
        // Long lists: a chain of rules `rest_k ::= ("," member_k)? rest_{k+1}` keeps the
        // grammar linear in the number of members.
        let mut next = Expr::Empty;
        let mut rests = vec![Expr::Empty; n + 1];
        for k in (0..n).rev() {
            let body = Expr::seq([Expr::opt(Expr::seq([sep.clone(), named[k].expr.clone()])), next.clone()]);
            next = Expr::Ref(self.b.add("object_rest", body));
            rests[k] = next.clone();
        }
        Expr::alt((0..n).map(|j| Expr::seq([named[j].expr.clone(), rests[j + 1].clone()])))
    }
}

/// How deep [`Compiler::min_len`] follows expressions and rules.
const MIN_LEN_DEPTH: usize = 200;

/// The greatest common divisor (`gcd(0, b) = b`).
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The positions of a longest strictly increasing subsequence of `xs`, in order
/// (patience sorting, O(n log n)).
fn longest_increasing(xs: &[usize]) -> Vec<usize> {
    // `tails[k]`: the position of the smallest last value of an increasing run of length k+1.
    let mut tails: Vec<usize> = Vec::new();
    let mut prev: Vec<Option<usize>> = vec![None; xs.len()];
    for (i, &x) in xs.iter().enumerate() {
        let k = tails.partition_point(|&t| xs[t] < x);
        prev[i] = k.checked_sub(1).map(|k| tails[k]);
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied();
    while let Some(i) = at {
        out.push(i);
        at = prev[i];
    }
    out.reverse();
    out
}

/// The `dependentRequired` entries whose member is named, as bits of `named` positions (a
/// needed name that can never be present makes the member impossible).
fn dependency_bits(named: &[Member], dependent: &[Dependency]) -> Vec<DependencyBits> {
    let bit = |n: &str| named.iter().position(|m| m.name == n).map(|i| 1usize << i);
    dependent
        .iter()
        .filter_map(|Dependency { name, needs }| {
            let member = bit(name)?;
            let need = needs.iter().map(|n| bit(n).unwrap_or(member)).fold(0, |x, y| x | y);
            Some(DependencyBits {
                member,
                needs: need | if needs.iter().any(|n| bit(n).is_none()) { usize::MAX } else { 0 },
            })
        })
        .collect()
}

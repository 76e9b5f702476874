//! Presence logic: a small static analysis that proves some `anyOf`/`oneOf`/`not` keywords of
//! an object schema always or never hold, from what their sibling keywords force.
//!
//! An object schema's siblings say which property names every instance has (`required`) and
//! which none can have (a name `properties` maps to `false`, one the compiler must forbid, or
//! one `additionalProperties: false` — or [`Options::strict`](super::Options::strict), which
//! closes an object the same way — leaves out). A branch that only speaks of such names then
//! has a fixed truth value over every object the siblings allow: [`Presence::Always`],
//! [`Presence::Never`], or [`Presence::Unknown`] when the analysis cannot tell.
//!
//! Rules, for a branch evaluated against [`Siblings`]: `true` is Always and `false` Never;
//! `required: R` is Always when R ⊆ present, Never when some name of R is absent; `not`
//! inverts; `allOf`/`anyOf`/`oneOf` combine in three-valued logic (`oneOf` is Never when
//! every branch is or when two are Always); annotations (any keyword that does not constrain
//! instances) are neutral; `type` is neutral when it admits objects and Never otherwise (the
//! siblings force an object); a `properties` entry is neutral when it equals the siblings'
//! schema for that name or allows every value (unless, under `strict`, it would admit a name
//! the siblings close out), and `false` for a present name is Never. Anything else is
//! Unknown, and Unknown never becomes Never: only a proved Never lets the compiler empty a
//! language ([`super::Compiler`] compiles such a keyword's schema to `Expr::Nothing`, with a
//! warning). Everything here reads the canonical schema as written and is linear in the
//! branch's size, bounded in depth.

use serde_json::{Map, Value};

use super::ecma;
use super::{is_constraint_keyword, type_list, FORBIDDEN};

/// Deepest nesting of `not`/`allOf`/`anyOf`/`oneOf` the analysis follows (deeper is Unknown).
///
/// A constant of the algorithm, not a user limit: past it the analysis answers
/// `Unknown`, which only keeps a branch (never a wrong grammar).
const MAX_DEPTH: usize = 32;

/// The truth value of a subschema over every object the sibling keywords allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Presence {
    /// Every such object matches it.
    Always,
    /// No such object matches it.
    Never,
    /// Not proved either way.
    Unknown,
}

impl Presence {
    /// `not`: Always and Never swap.
    fn invert(self) -> Self {
        match self {
            Presence::Always => Presence::Never,
            Presence::Never => Presence::Always,
            Presence::Unknown => Presence::Unknown,
        }
    }

    /// Conjunction: Never if either is, Always if both are.
    fn and(self, other: Self) -> Self {
        match (self, other) {
            (Presence::Never, _) | (_, Presence::Never) => Presence::Never,
            (Presence::Always, Presence::Always) => Presence::Always,
            _ => Presence::Unknown,
        }
    }

    /// Disjunction: Always if either is, Never if both are.
    fn or(self, other: Self) -> Self {
        self.invert().and(other.invert()).invert()
    }

    /// `oneOf` of branches with these values: Always when exactly one is Always and the others
    /// Never; Never when all are Never or at least two are Always; else Unknown.
    pub(super) fn exactly_one(values: &[Presence]) -> Self {
        let always = values.iter().filter(|p| **p == Presence::Always).count();
        let never = values.iter().filter(|p| **p == Presence::Never).count();
        if always >= 2 || never == values.len() {
            Presence::Never
        } else if always == 1 && never + 1 == values.len() {
            Presence::Always
        } else {
            Presence::Unknown
        }
    }

    /// `anyOf` of branches with these values.
    pub(super) fn any(values: &[Presence]) -> Self {
        values.iter().fold(Presence::Never, |acc, p| acc.or(*p))
    }
}

/// What the sibling keywords of an applicator force on an object: the names present in
/// every instance and a test for names absent from every one. Only built when the siblings
/// force the instance to be an object (`required` holds of every other value, so nothing
/// could be proved).
pub(super) struct Siblings<'m> {
    /// The siblings' `required`.
    required: Vec<&'m str>,
    /// The siblings' `properties`.
    properties: Option<&'m Map<String, Value>>,
    /// The siblings' `patternProperties` patterns.
    patterns: Vec<&'m str>,
    /// Names the compiler must forbid ([`FORBIDDEN`]).
    forbidden: Vec<&'m str>,
    /// Names neither `properties` nor a pattern admits are absent.
    closed: bool,
    /// `closed` holds only by [`Options::strict`](super::Options::strict): a branch that
    /// names other properties opens the compiled object to them.
    by_strict: bool,
}

impl<'m> Siblings<'m> {
    /// Reads the siblings `rest` of an applicator; `None` unless they force an object (then
    /// every branch is Unknown). `strict`: [`Options::strict`](super::Options::strict).
    pub(super) fn read(rest: &'m Map<String, Value>, strict: bool) -> Option<Self> {
        if type_list(rest.get("type")) != ["object"] {
            return None;
        }
        let names = |k: &str| -> Option<Vec<&'m str>> {
            match rest.get(k) {
                None => Some(vec![]),
                Some(Value::Array(a)) => a.iter().map(Value::as_str).collect(),
                Some(_) => None,
            }
        };
        let properties = match rest.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => return None,
        };
        let patterns = match rest.get("patternProperties") {
            None => vec![],
            Some(Value::Object(p)) => p.keys().map(String::as_str).collect(),
            Some(_) => return None,
        };
        // `unevaluatedProperties` sees what the branches evaluate: never read as closing.
        let (closed, by_strict) = match rest.get("additionalProperties") {
            Some(a) => (*a == Value::Bool(false), false),
            None if rest.contains_key("unevaluatedProperties") => (false, false),
            None => (strict, strict),
        };
        Some(Siblings {
            required: names("required")?,
            properties,
            patterns,
            forbidden: names(FORBIDDEN)?,
            closed,
            by_strict,
        })
    }

    /// Whether every instance has `name`.
    fn present(&self, name: &str) -> bool {
        self.required.contains(&name)
    }

    /// Whether no instance has `name`, given whether the object is closed for this branch.
    fn absent(&self, name: &str, closed: bool) -> bool {
        if self.forbidden.contains(&name) {
            return true;
        }
        if let Some(s) = self.properties.and_then(|p| p.get(name)) {
            return *s == Value::Bool(false);
        }
        closed && !self.patterns.iter().any(|p| ecma::is_match(p, name).unwrap_or(true))
    }

    /// Whether `name` is absent only because the object is closed (a branch naming it would
    /// open a `strict` object to it).
    fn closed_out(&self, name: &str) -> bool {
        self.closed && !self.forbidden.contains(&name) && self.absent(name, true) && !self.named(name)
    }

    /// Whether the siblings' `properties` lists `name`.
    fn named(&self, name: &str) -> bool {
        self.properties.is_some_and(|p| p.contains_key(name))
    }

    /// The value of `branch` (a subschema beside these siblings) over every object they allow.
    pub(super) fn eval(&self, branch: &Value) -> Presence {
        // Under `strict` the compiled object is closed over the names of the siblings *and*
        // the branch merged with them: a branch that may name others keeps it open.
        let closed = self.closed && !(self.by_strict && self.opens(branch, 0));
        Eval { sib: self, closed }.schema(branch, 0)
    }

    /// Whether `v` (a branch, at `depth`) has a keyword that may admit names the siblings
    /// close out, once merged with them: `properties` naming one, or any keyword that
    /// admits names or pulls in other schemas.
    fn opens(&self, v: &Value, depth: usize) -> bool {
        let Value::Object(m) = v else { return false };
        if depth > MAX_DEPTH {
            return true;
        }
        m.iter().any(|(k, x)| match k.as_str() {
            "properties" => {
                x.as_object().is_none_or(|p| p.iter().any(|(n, s)| *s != Value::Bool(false) && self.closed_out(n)))
            }
            "not" => self.opens(x, depth + 1),
            "allOf" | "anyOf" | "oneOf" => x.as_array().is_none_or(|a| a.iter().any(|b| self.opens(b, depth + 1))),
            "patternProperties"
            | "additionalProperties"
            | "unevaluatedProperties"
            | "$ref"
            | "$dynamicRef"
            | "$recursiveRef"
            | "dependentSchemas"
            | "dependencies"
            | "if"
            | "then"
            | "else" => true,
            _ => false,
        })
    }
}

/// One evaluation: the siblings and whether their object is closed for this branch.
struct Eval<'s, 'm> {
    sib: &'s Siblings<'m>,
    closed: bool,
}

impl Eval<'_, '_> {
    /// The value of the subschema `v` at nesting `depth`: the conjunction of its keywords.
    fn schema(&self, v: &Value, depth: usize) -> Presence {
        match v {
            Value::Bool(true) => Presence::Always,
            Value::Bool(false) => Presence::Never,
            Value::Object(_) if depth > MAX_DEPTH => Presence::Unknown,
            Value::Object(m) => {
                let mut acc = Presence::Always;
                for (k, x) in m {
                    acc = acc.and(self.keyword(k, x, depth));
                    if acc == Presence::Never {
                        break;
                    }
                }
                acc
            }
            _ => Presence::Unknown,
        }
    }

    /// The value of one keyword `k` with value `x`.
    fn keyword(&self, k: &str, x: &Value, depth: usize) -> Presence {
        let list = |x: &Value| {
            x.as_array()
                .filter(|a| !a.is_empty())
                .map(|a| a.iter().map(|b| self.schema(b, depth + 1)).collect::<Vec<_>>())
        };
        match k {
            _ if !is_constraint_keyword(k) => Presence::Always,
            "required" => match x.as_array().and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>()) {
                Some(names) if names.iter().any(|n| self.sib.absent(n, self.closed)) => Presence::Never,
                Some(names) if names.iter().all(|n| self.sib.present(n)) => Presence::Always,
                _ => Presence::Unknown,
            },
            "not" => self.schema(x, depth + 1).invert(),
            "allOf" => list(x).map_or(Presence::Unknown, |v| v.into_iter().fold(Presence::Always, Presence::and)),
            "anyOf" => list(x).map_or(Presence::Unknown, |v| Presence::any(&v)),
            "oneOf" => list(x).map_or(Presence::Unknown, |v| Presence::exactly_one(&v)),
            "type" => {
                let known = type_list(Some(x));
                let count = match x {
                    Value::String(_) => 1,
                    Value::Array(a) => a.len(),
                    _ => return Presence::Unknown,
                };
                if known.contains(&"object") {
                    Presence::Always
                } else if known.len() == count {
                    Presence::Never
                } else {
                    Presence::Unknown
                }
            }
            "properties" => match x {
                Value::Object(p) => p.iter().fold(Presence::Always, |acc, (n, s)| acc.and(self.property(n, s))),
                _ => Presence::Unknown,
            },
            _ => Presence::Unknown,
        }
    }

    /// The value of one `properties` entry `name: s` of a branch.
    fn property(&self, name: &str, s: &Value) -> Presence {
        if self.sib.properties.and_then(|p| p.get(name)) == Some(s) || self.sib.absent(name, self.closed) {
            // Equal to what the siblings ask of it, or never there to be asked.
            return Presence::Always;
        }
        let allows_all = match s {
            Value::Bool(b) => *b,
            Value::Object(m) => !m.keys().any(|k| is_constraint_keyword(k)),
            _ => false,
        };
        if allows_all && !(self.sib.by_strict && self.sib.closed_out(name)) {
            Presence::Always
        } else if *s == Value::Bool(false) && self.sib.present(name) {
            Presence::Never
        } else {
            Presence::Unknown
        }
    }
}

/// The JSON type whose values a keyword constrains (values of other types pass it), for the
/// keywords that have one.
fn keyword_type(k: &str) -> Option<&'static str> {
    Some(match k {
        "required"
        | "properties"
        | "additionalProperties"
        | "patternProperties"
        | "minProperties"
        | "maxProperties"
        | "dependentRequired"
        | "dependentSchemas"
        | "dependencies"
        | "propertyNames"
        | "unevaluatedProperties" => "object",
        "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems" | "uniqueItems" | "contains"
        | "minContains" | "maxContains" | "unevaluatedItems" => "array",
        "minLength" | "maxLength" | "pattern" | "format" | "contentEncoding" | "contentMediaType" => "string",
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => "number",
        _ => return None,
    })
}

/// Whether some value has both type `a` and type `b` (`integer` values are `number`s).
pub(super) fn overlap(a: &str, b: &str) -> bool {
    a == b || matches!((a, b), ("integer", "number") | ("number", "integer"))
}

/// The value of `schema` over every value of type `t`: Never when its `type` excludes `t`;
/// Always when each of its keywords constrains only other types (or its `type` admits all
/// of `t`); Unknown otherwise.
fn on_type(schema: &Value, t: &str) -> Presence {
    let m = match schema {
        Value::Bool(b) => return if *b { Presence::Always } else { Presence::Never },
        Value::Object(m) => m,
        _ => return Presence::Unknown,
    };
    let mut all = true;
    for k in m.keys().filter(|k| is_constraint_keyword(k)) {
        match (k.as_str(), keyword_type(k)) {
            ("type", _) => {
                let list = type_list(m.get("type"));
                if !list.iter().any(|x| overlap(t, x)) {
                    return Presence::Never;
                }
                // `integer` admits only some numbers.
                all &= list.iter().any(|x| *x == t || (*x == "number" && t == "integer"));
            }
            (_, Some(kt)) if !overlap(t, kt) => {}
            _ => all = false,
        }
    }
    if all {
        Presence::Always
    } else {
        Presence::Unknown
    }
}

/// The types some value satisfying `schema` may have: a superset, from `type`, `enum`,
/// `const` and the combinators (anything else admits every type).
pub(super) fn admitted_types(schema: &Value, depth: usize) -> Vec<&'static str> {
    let m = match schema {
        Value::Bool(false) => return Vec::new(),
        Value::Object(m) if depth < MAX_DEPTH => m,
        _ => return super::TYPES.to_vec(),
    };
    let mut out: Vec<&'static str> = match m.get("type") {
        Some(t) => type_list(Some(t)),
        None => super::TYPES.to_vec(),
    };
    let keep = |out: &mut Vec<&'static str>, allowed: &[&'static str]| {
        out.retain(|t| allowed.iter().any(|a| overlap(t, a)));
    };
    if let Some(c) = m.get("const") {
        keep(&mut out, &[super::json_type(c)]);
    }
    if let Some(Value::Array(vs)) = m.get("enum") {
        let types: Vec<&'static str> = vs.iter().map(super::json_type).collect();
        keep(&mut out, &types);
    }
    if let Some(Value::Array(all)) = m.get("allOf") {
        for b in all {
            keep(&mut out, &admitted_types(b, depth + 1));
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(bs)) = m.get(key) {
            let union: Vec<&'static str> = bs.iter().flat_map(|b| admitted_types(b, depth + 1)).collect();
            keep(&mut out, &union);
        }
    }
    out
}

/// The types among `types` that no value of satisfies the `if`/`then`/`else` of `map`:
/// those over which `if` is proved Always and `then` admits none of, or proved Never and
/// `else` admits none of. Over objects, `if` is also read against the siblings
/// ([`Siblings`], as if `type` were `object`). `strict`: [`Options::strict`](super::Options::strict).
pub(super) fn if_excludes(map: &Map<String, Value>, types: &[&'static str], strict: bool) -> Vec<&'static str> {
    let Some(cond) = map.get("if") else { return Vec::new() };
    let yes = Value::Bool(true);
    let then = map.get("then").unwrap_or(&yes);
    let other = map.get("else").unwrap_or(&yes);
    let mut as_object = map.clone();
    as_object.insert("type".into(), Value::String("object".into()));
    let siblings = Siblings::read(&as_object, strict);
    let mut out = Vec::new();
    for &t in types {
        let holds = match (on_type(cond, t), &siblings) {
            (Presence::Unknown, Some(s)) if t == "object" => s.eval(cond),
            (p, _) => p,
        };
        let branch = match holds {
            Presence::Always => then,
            Presence::Never => other,
            Presence::Unknown => continue,
        };
        if !admitted_types(branch, 0).iter().any(|a| overlap(t, a)) {
            out.push(t);
        }
    }
    out
}

/// The warning for an applicator `key` (`anyOf`, `oneOf` or `not`) proved Never, from its
/// branches' `values` (none for `not`): no value can satisfy the schema holding it, and why.
pub(super) fn unsatisfiable(key: &str, values: &[Presence]) -> String {
    let always: Vec<String> =
        values.iter().enumerate().filter(|(_, p)| **p == Presence::Always).map(|(i, _)| i.to_string()).collect();
    let why = if key == "not" {
        "every object its sibling keywords allow matches the schema of not".to_string()
    } else if key == "oneOf" && always.len() >= 2 {
        let (last, first) = always.split_last().map_or(("", &[][..]), |(l, f)| (l.as_str(), f));
        format!(
            "every object its sibling keywords allow matches branches {} and {last} of oneOf, which must match exactly one",
            first.join(", ")
        )
    } else {
        format!("no object its sibling keywords allow matches any branch of {key}")
    };
    format!("no value can satisfy this schema: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use Presence::{Always, Never, Unknown};

    /// The value of `branch` beside the siblings `rest`.
    fn eval(rest: Value, branch: Value, strict: bool) -> Presence {
        let rest = rest.as_object().cloned().unwrap_or_default();
        match Siblings::read(&rest, strict) {
            Some(s) => s.eval(&branch),
            None => Unknown,
        }
    }

    fn all_required() -> Value {
        json!({"type": "object", "required": ["a", "b", "c"], "properties": {"a": {"type": "number"}}})
    }

    #[test]
    fn required_is_always_never_or_unknown() {
        assert_eq!(eval(all_required(), json!({"required": ["a", "b"]}), false), Always);
        assert_eq!(eval(all_required(), json!({"required": []}), false), Always);
        assert_eq!(eval(all_required(), json!({"required": ["a", "d"]}), false), Unknown);
        let closed = json!({"type": "object", "required": ["a"], "properties": {"a": {}, "b": {}}, "additionalProperties": false});
        assert_eq!(eval(closed.clone(), json!({"required": ["a", "d"]}), false), Never);
        assert_eq!(eval(closed.clone(), json!({"required": ["b"]}), false), Unknown);
        let gone = json!({"type": "object", "properties": {"a": false}});
        assert_eq!(eval(gone.clone(), json!({"required": ["a"]}), false), Never);
        let forbidden = json!({"type": "object", FORBIDDEN: ["a"]});
        assert_eq!(eval(forbidden, json!({"required": ["a"]}), false), Never);
        // A pattern may admit the name: not absent.
        let patterned = json!({"type": "object", "patternProperties": {"^d": {}}, "additionalProperties": false});
        assert_eq!(eval(patterned.clone(), json!({"required": ["d1"]}), false), Unknown);
        assert_eq!(eval(patterned, json!({"required": ["e"]}), false), Never);
    }

    #[test]
    fn siblings_must_force_an_object() {
        // `required` holds of every non-object: nothing can be proved.
        let open = json!({"required": ["a", "b"]});
        assert_eq!(eval(open, json!({"required": ["a"]}), false), Unknown);
        let either = json!({"type": ["object", "null"], "required": ["a"]});
        assert_eq!(eval(either, json!({"required": ["a"]}), false), Unknown);
        let unevaluated = json!({"type": "object", "unevaluatedProperties": false});
        assert_eq!(eval(unevaluated, json!({"required": ["a"]}), false), Unknown);
    }

    #[test]
    fn not_inverts_and_combinators_combine() {
        let r = all_required;
        assert_eq!(eval(r(), json!({"not": {"required": ["a"]}}), false), Never);
        assert_eq!(eval(r(), json!({"not": {"required": ["d"]}}), false), Unknown);
        assert_eq!(eval(r(), json!({"not": {"required": ["a"]}, "required": ["b"]}), false), Never);
        assert_eq!(eval(r(), json!({"allOf": [{"required": ["a"]}, {"required": ["b"]}]}), false), Always);
        assert_eq!(eval(r(), json!({"allOf": [{"required": ["a"]}, {"required": ["d"]}]}), false), Unknown);
        assert_eq!(eval(r(), json!({"allOf": [{"not": {"required": ["a"]}}, {"required": ["d"]}]}), false), Never);
        assert_eq!(eval(r(), json!({"anyOf": [{"required": ["d"]}, {"required": ["a"]}]}), false), Always);
        assert_eq!(eval(r(), json!({"anyOf": [{"required": ["d"]}, false]}), false), Unknown);
        assert_eq!(eval(r(), json!({"anyOf": [{"not": {"required": ["a"]}}, false]}), false), Never);
        assert_eq!(eval(r(), json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}), false), Never);
        assert_eq!(eval(r(), json!({"oneOf": [{"required": ["a"]}, false]}), false), Always);
        assert_eq!(eval(r(), json!({"oneOf": [{"required": ["a"]}, {"required": ["d"]}]}), false), Unknown);
        assert_eq!(eval(r(), json!({"oneOf": [false, {"not": {}}]}), false), Never);
        // Empty lists are invalid schemas: nothing is proved of them.
        assert_eq!(eval(r(), json!({"anyOf": []}), false), Unknown);
        assert_eq!(eval(r(), json!(true), false), Always);
        assert_eq!(eval(r(), json!(false), false), Never);
    }

    #[test]
    fn annotations_and_types_are_neutral() {
        let r = all_required;
        let annotated = json!({"description": "d", "title": "t", "$comment": "c", "examples": [1], "required": ["a"]});
        assert_eq!(eval(r(), annotated, false), Always);
        assert_eq!(eval(r(), json!({"type": "object", "required": ["a"]}), false), Always);
        assert_eq!(eval(r(), json!({"type": ["object", "null"]}), false), Always);
        assert_eq!(eval(r(), json!({"type": "string"}), false), Never);
        assert_eq!(eval(r(), json!({"type": 3}), false), Unknown);
    }

    #[test]
    fn only_equal_or_trivial_properties_are_neutral() {
        let r = all_required;
        assert_eq!(eval(r(), json!({"properties": {"a": {"type": "number"}}, "required": ["a"]}), false), Always);
        assert_eq!(eval(r(), json!({"properties": {"a": {"type": "string"}}, "required": ["a"]}), false), Unknown);
        assert_eq!(eval(r(), json!({"properties": {"b": {}, "c": true, "d": {"title": "x"}}}), false), Always);
        assert_eq!(eval(r(), json!({"properties": {"a": false}}), false), Never);
        assert_eq!(eval(r(), json!({"properties": {"d": false}}), false), Unknown);
        // Keywords the analysis does not read stay Unknown, even beside Always ones.
        assert_eq!(eval(r(), json!({"minProperties": 2, "required": ["a"]}), false), Unknown);
        assert_eq!(eval(r(), json!({"properties": {"b": {"pattern": "^x"}}}), false), Unknown);
        assert_eq!(eval(r(), json!({"$ref": "#/$defs/x"}), false), Unknown);
        assert_eq!(eval(r(), json!({"enum": [{}]}), false), Unknown);
        // … but one proved Never conjunct decides.
        assert_eq!(eval(r(), json!({"minProperties": 2, "not": {"required": ["a"]}}), false), Never);
    }

    #[test]
    fn if_then_else_excludes_types() {
        let types = crate::schema::TYPES;
        // Non-objects pass `required`, so `then` applies to them, and it admits only objects.
        let m = json!({"if": {"required": ["a"]}, "then": {"type": "object"}});
        let out = if_excludes(m.as_object().expect("map"), &types, false);
        assert_eq!(out, ["null", "boolean", "array", "string", "number", "integer"]);
        // Objects cannot have `a`: `else` applies, and admits no object.
        let m = json!({
            "properties": {"x": true}, "additionalProperties": false,
            "if": {"required": ["a"]}, "then": {"type": "object"},
            "else": {"anyOf": [{"type": "integer"}, {"type": "array"}]}
        });
        let out = if_excludes(m.as_object().expect("map"), &types, false);
        assert_eq!(out, types.to_vec());
        // Undecided `if`: nothing excluded.
        let m = json!({"if": {"minLength": 2}, "then": {"const": "y"}, "else": {"const": "x"}});
        let out = if_excludes(m.as_object().expect("map"), &["string", "integer"], false);
        assert_eq!(out, ["integer"]);
        let m = json!({"if": {"type": "integer"}, "then": {"type": "number"}, "else": {"type": "string"}});
        let out = if_excludes(m.as_object().expect("map"), &["number", "integer", "string", "null"], false);
        assert_eq!(out, ["null"]);
    }

    #[test]
    fn messages_name_the_branches() {
        let m = unsatisfiable("oneOf", &[Always, Always, Unknown, Always]);
        assert!(m.contains("branches 0, 1 and 3 of oneOf"), "{m}");
        let m = unsatisfiable("anyOf", &[Never, Never]);
        assert!(m.contains("matches any branch of anyOf"), "{m}");
    }

    #[test]
    fn strict_closes_only_what_the_branch_does_not_name() {
        let rest = json!({"type": "object", "required": ["a"], "properties": {"a": {}}});
        assert_eq!(eval(rest.clone(), json!({"required": ["z"]}), true), Never);
        assert_eq!(eval(rest.clone(), json!({"required": ["z"]}), false), Unknown);
        // The branch names `z`: merged with the siblings, the strict object admits it.
        assert_eq!(eval(rest.clone(), json!({"required": ["z"], "properties": {"z": {}}}), true), Unknown);
        let nested = json!({"required": ["z"], "anyOf": [{"properties": {"z": {}}}]});
        assert_eq!(eval(rest.clone(), nested, true), Unknown);
        assert_eq!(eval(rest.clone(), json!({"required": ["z"], "additionalProperties": true}), true), Unknown);
        // An explicit `additionalProperties` is not strict's to close.
        let open = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true});
        assert_eq!(eval(open, json!({"required": ["z"]}), true), Unknown);
    }
}

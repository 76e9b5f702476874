//! What the compiler knows of keywords and JSON types: which keywords constrain a value,
//! every keyword it knows ([`known_keywords`]), the compiler's own `x-constrain-*`
//! keywords, and the type of a value.

use super::dialect::{self, Draft};
use super::options::Error;
use super::TYPES;
use serde_json::{Map, Value};

/// Whether some object of `doc` has one of `keys` (anywhere, as a keyword or not): a cheap
/// test before a walk that needs pointers. An explicit stack, so a deeply nested document
/// cannot overflow the thread's.
pub(crate) fn mentions_any(doc: &Value, keys: &[&str]) -> bool {
    let mut todo = vec![doc];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(m) => {
                if keys.iter().any(|k| m.contains_key(*k)) {
                    return true;
                }
                todo.extend(m.values());
            }
            Value::Array(a) => todo.extend(a.iter()),
            _ => {}
        }
    }
    false
}

/// Keywords a run-time check can enforce when the grammar cannot: all but the dynamic
/// references, whose meaning the canonical document no longer holds.
pub(super) fn checkable(keyword: &str) -> bool {
    !matches!(keyword, "$dynamicRef" | "$recursiveRef")
}

/// Keywords that constrain instances (everything else is an annotation or unknown, and is
/// ignored), but for the compiler's own ([`FORBIDDEN`], [`JSON_TEXT`]).
const CONSTRAINTS: [&str; 43] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "not",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "$dynamicRef",
    "$recursiveRef",
];

/// Keywords that constrain instances (everything else is an annotation or unknown, and is
/// ignored).
pub(crate) fn is_constraint_keyword(k: &str) -> bool {
    CONSTRAINTS.contains(&k) || k == FORBIDDEN || k == JSON_TEXT
}

/// A keyword of JSON Schema the compiler knows, and what it does with it: see
/// [`known_keywords`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownKeyword {
    /// The keyword as a schema spells it (`minLength`, `$ref`).
    pub name: &'static str,
    /// How the compiler treats it.
    pub treatment: Treatment,
}

impl KnownKeyword {
    /// Whether the dialect `draft` knows the keyword as a constraint or applicator (one it
    /// does not know is dropped from a schema of that dialect: `const` in draft-04).
    pub fn in_draft(&self, draft: Draft) -> bool {
        draft.knows(self.name)
    }
}

/// How the compiler treats a keyword it knows. Which schemas compile exactly, to a
/// documented subset, with a run-time check or not at all is the README's keyword table,
/// which a test holds to the compiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Treatment {
    /// Constrains instances, and a run-time check can enforce it where the grammar cannot
    /// say it exactly; with run-time checks off, such a use is refused at its JSON pointer
    /// (or compiled to a documented subset, with a note).
    Checkable,
    /// Constrains instances, but no run-time check can stand in for it (the dynamic
    /// references, whose meaning the canonical document no longer holds): a use the grammar
    /// cannot say is refused.
    GrammarOnly,
    /// Asserted only in the dialects that assert it, by being rewritten into constraints
    /// (draft-06/-07 `contentEncoding` and `contentMediaType`); an annotation elsewhere.
    Rewritten,
    /// Asserts nothing itself: it holds subschemas that references reach (`$defs`,
    /// `definitions`, `contentSchema`) or instances as annotations (`default`, `examples`).
    NotAsserted,
}

/// Every JSON Schema keyword the compiler reads (its own `x-constrain-*` keywords left out),
/// each once, with its [`Treatment`]: what a document of the keywords it supports, such as
/// the README's table, must cover.
///
/// ```rust
/// use constrain::schema::{known_keywords, Treatment};
///
/// let known = known_keywords();
/// let treatment = |name: &str| known.iter().find(|k| k.name == name).map(|k| k.treatment);
/// assert_eq!(treatment("uniqueItems"), Some(Treatment::Checkable));
/// assert_eq!(treatment("$dynamicRef"), Some(Treatment::GrammarOnly));
/// assert_eq!(treatment("title"), None); // an annotation it never reads
/// ```
pub fn known_keywords() -> Vec<KnownKeyword> {
    let mut out: Vec<KnownKeyword> = Vec::new();
    for name in CONSTRAINTS.into_iter().chain(dialect::named_keywords()) {
        if out.iter().any(|k| k.name == name) {
            continue;
        }
        let treatment = if CONSTRAINTS.contains(&name) {
            if checkable(name) {
                Treatment::Checkable
            } else {
                Treatment::GrammarOnly
            }
        } else if dialect::is_content_keyword(name) {
            Treatment::Rewritten
        } else {
            Treatment::NotAsserted
        };
        out.push(KnownKeyword { name, treatment });
    }
    out
}

/// Internal keyword (set by `not: {required: [k]}` and by `oneOf` disambiguation): property
/// names an object instance must not have.
pub(crate) const FORBIDDEN: &str = "x-constrain-forbidden";

/// Internal keyword (`contentMediaType: application/json` in draft-06 and -07, see
/// [`dialect`]): a string instance must be a JSON text. Validators the compiler builds know
/// it ([`JsonText`]).
pub(crate) const JSON_TEXT: &str = "x-constrain-json-text";

/// The [`JSON_TEXT`] keyword for the `jsonschema` crate's validators: strings must parse as
/// JSON; other values pass. Registered on every validator the compiler builds.
pub(crate) struct JsonText;

impl<'i> jsonschema::Keyword<'i> for JsonText {
    fn validate(&self, instance: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        if self.is_valid(instance) {
            Ok(())
        } else {
            Err(jsonschema::ValidationError::custom("the string is not a JSON text"))
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        instance.as_str().is_none_or(|s| serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok())
    }
}

/// The validator options with the compiler's own keywords: [`JSON_TEXT`] and `multipleOf`
/// in both readings ([`MultipleOf`]). Every validator the compiler builds starts here, so
/// that the grammar, the run-time checks and the final validation agree.
pub(crate) fn own_keywords(options: jsonschema::ValidationOptions) -> jsonschema::ValidationOptions {
    options.with_keyword(JSON_TEXT, |_, _, _| Ok(Box::new(JsonText))).with_keyword("multipleOf", |_, value, _| {
        MultipleOf::new(value)
            .map(|m| Box::new(m) as Box<dyn for<'i> jsonschema::Keyword<'i>>)
            .ok_or_else(|| jsonschema::ValidationError::custom("multipleOf must be a positive number"))
    })
}

/// `multipleOf` as the validators the compiler builds read it: a number must be a multiple
/// in exact decimal arithmetic (the specification's reading, and the `jsonschema` crate's)
/// and, for a fractional step, also where the division is done in binary floating point,
/// as Python's `jsonschema` and ajv do (the quotient must be a finite integer). `1.15` is a
/// multiple of `0.01`, but `1.15 / 0.01` is `114.99999999999999`, so those refuse it; a
/// document that passes here passes them all. Under `0.01` about one in nine two-decimal
/// amounts is refused; under `0.07`, `-7` is (`-99.99999999999999`).
pub(crate) struct MultipleOf {
    /// The `jsonschema` crate's own `multipleOf` (exact with arbitrary precision).
    exact: jsonschema::Validator,
    /// The step as an `f64`, for a fractional step (`None`: integral, one reading).
    float: Option<f64>,
}

impl MultipleOf {
    /// The keyword for the schema value `value` (`None` unless a positive number).
    fn new(value: &Value) -> Option<MultipleOf> {
        let n = value.as_number()?;
        let d = super::number::Dec::parse(&n.to_string())?;
        if d.neg || d.is_zero() {
            return None;
        }
        let exact = jsonschema::validator_for(&serde_json::json!({ "multipleOf": value })).ok()?;
        let float = (!d.is_integer()).then(|| n.as_f64()).flatten().filter(|f| *f > 0.0);
        Some(MultipleOf { exact, float })
    }

    /// Whether the number `instance` is a multiple in both readings.
    fn holds(&self, instance: &Value) -> bool {
        self.exact.is_valid(instance)
            && self.float.is_none_or(|m| {
                let quotient = instance.as_f64().map(|v| v / m);
                quotient.is_some_and(|q| q.is_finite() && q.trunc() == q)
            })
    }
}

impl<'i> jsonschema::Keyword<'i> for MultipleOf {
    fn validate(&self, instance: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        if self.is_valid(instance) {
            Ok(())
        } else {
            Err(jsonschema::ValidationError::custom(
                "the number is not a multiple of multipleOf (in exact decimal and in floating-point division)",
            ))
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        !instance.is_number() || self.holds(instance)
    }
}

/// The JSON type of `v` (`integer` for numbers written as integers).
pub(super) fn json_type(v: &Value) -> &'static str {
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

/// Whether `v` is an instance of the JSON type `t` (an integral number is an `integer`).
pub(super) fn value_has_type(v: &Value, t: &str) -> bool {
    match (v, t) {
        (Value::Number(n), "integer") => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        (Value::Number(_), "number") => true,
        _ => json_type(v) == t,
    }
}

/// The known type names of a `type` keyword's value, in [`TYPES`] order.
pub(super) fn type_list(t: Option<&Value>) -> Vec<&'static str> {
    let names: Vec<String> = match t {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => return vec![],
    };
    TYPES.iter().copied().filter(|t| names.iter().any(|n| n == t)).collect()
}

/// A count keyword (`minItems`, `maxProperties`, …): `None` when absent, capped at
/// `u32::MAX`; an error unless a non-negative integer.
pub(super) fn count(map: &Map<String, Value>, ptr: &str, k: &str) -> Result<Option<u32>, Error> {
    match map.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|x| Some(x.min(u32::MAX as u64) as u32))
            .ok_or_else(|| Error::new(ptr, k, format!("{k} must be a non-negative integer"))),
    }
}

/// The types a schema allows by its `type` keyword (all seven when absent).
pub(super) fn allowed_types(map: &Map<String, Value>) -> Vec<&'static str> {
    match map.get("type") {
        None => TYPES.to_vec(),
        t => type_list(t),
    }
}

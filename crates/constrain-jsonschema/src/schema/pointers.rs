//! JSON pointers and the validators the run-time checks build from subschemas.

use super::dialect;
use super::keywords::own_keywords;
use super::refs::percent_decode;
use serde_json::{Map, Value};

/// Escapes one JSON-pointer segment (`~` → `~0`, `/` → `~1`).
pub(super) fn escape_pointer(seg: &str) -> String {
    if !seg.contains(['~', '/']) {
        return seg.to_string();
    }
    seg.replace('~', "~0").replace('/', "~1")
}

/// A validator (2020-12, formats asserted) for `schema`, a subschema of the canonical
/// document `root`. References resolve against the root's definitions, copied in only when
/// the subschema holds a reference: building a validator crawls everything it is given, and
/// a large schema's definitions copied for each subschema took minutes. Used to filter
/// `enum` values by their sibling keywords and by the run-time checks.
pub(crate) fn subschema_validator(
    root: &Value,
    mut schema: Map<String, Value>,
) -> Result<jsonschema::Validator, Refusal> {
    let has_ref = schema.contains_key("$ref") || schema.values().any(contains_ref);
    if let (Value::Object(root), true) = (root, has_ref) {
        for k in ["definitions", "$defs", dialect::TARGETS] {
            if let Some(d) = root.get(k) {
                schema.entry(k.to_string()).or_insert_with(|| d.clone());
            }
        }
    }
    let mut schema = Value::Object(schema);
    portable_patterns(&mut schema)?;
    own_keywords(jsonschema::options().with_draft(jsonschema::Draft::Draft202012).should_validate_formats(true))
        .build(&schema)
        .map_err(Refusal::from)
}

/// Why a schema document was refused, by the `jsonschema` crate or by
/// [`portable_patterns`]: the JSON pointer, within that document, of the value refused
/// (`/properties/a/pattern` for a pattern that is not a regex), and the message. Callers
/// prefix the pointer with the document's own place, so the user's error names the keyword.
#[derive(Clone, Debug)]
pub(crate) struct Refusal {
    /// Pointer within the document refused (`""` for the document itself).
    pub(crate) at: String,
    /// What was wrong.
    pub(crate) message: String,
}

impl From<jsonschema::ValidationError<'_>> for Refusal {
    fn from(e: jsonschema::ValidationError<'_>) -> Self {
        Refusal { at: e.instance_path().to_string(), message: e.to_string() }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at.as_str() {
            "" => f.write_str(&self.message),
            at => write!(f, "{} (at {at})", self.message),
        }
    }
}

/// Rewrites, in place, every `pattern` and `patternProperties` name of a schema document with
/// `ecma_portable` (in [`super::ecma`]), so that a validator of the
/// `jsonschema` crate built from it reads them as ECMA-262 does. Every validator the
/// compiler builds goes through this. Values under `enum`, `const`, `default` and `examples`
/// are data and left alone; anything else is walked (a `$ref` may point anywhere).
pub(crate) fn portable_patterns(v: &mut Value) -> Result<(), Refusal> {
    let mut at = String::new();
    portable_at(v, &mut at).map_err(|message| Refusal { at, message })
}

/// [`portable_patterns`] of the value at pointer `at`; on an error `at` is left pointing at
/// the pattern refused.
fn portable_at(v: &mut Value, at: &mut String) -> Result<(), String> {
    use super::ecma::ecma_portable;
    let len = at.len();
    match v {
        Value::Object(m) => {
            if let Some(Value::String(p)) = m.get_mut("pattern") {
                at.push_str("/pattern");
                if let Some(new) = ecma_portable(p)? {
                    *p = new;
                }
                at.truncate(len);
            }
            for (k, c) in m.iter_mut() {
                match (k.as_str(), c) {
                    ("pattern" | "enum" | "const" | "default" | "examples", _) => {}
                    // Maps of names to subschemas: a name is never a keyword here.
                    (
                        "properties"
                        | "patternProperties"
                        | "$defs"
                        | "definitions"
                        | "dependentSchemas"
                        | "dependencies"
                        | dialect::TARGETS,
                        Value::Object(names),
                    ) => {
                        for (n, x) in names.iter_mut() {
                            at.push_str(&format!("/{}/{}", escape_pointer(k), escape_pointer(n)));
                            portable_at(x, at)?;
                            at.truncate(len);
                        }
                    }
                    (_, c) => {
                        at.push_str(&format!("/{}", escape_pointer(k)));
                        portable_at(c, at)?;
                        at.truncate(len);
                    }
                }
            }
            if let Some(Value::Object(pp)) = m.get_mut("patternProperties") {
                let mut renamed = Map::new();
                for (p, x) in std::mem::take(pp) {
                    at.push_str(&format!("/patternProperties/{}", escape_pointer(&p)));
                    let p = ecma_portable(&p)?.unwrap_or(p);
                    if renamed.insert(p.clone(), x).is_some() {
                        return Err(format!("two patternProperties patterns read alike as {p:?}"));
                    }
                    at.truncate(len);
                }
                *pp = renamed;
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                at.push_str(&format!("/{i}"));
                portable_at(x, at)?;
                at.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether a `$ref` appears anywhere in `v`.
fn contains_ref(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("$ref") || m.values().any(contains_ref),
        Value::Array(a) => a.iter().any(contains_ref),
        _ => false,
    }
}

/// [`escape_pointer`], for the run-time checks' map of subschemas.
pub(crate) fn escape_pointer_segment(seg: &str) -> String {
    escape_pointer(seg)
}

/// The JSON pointer a `$ref` fragment spells (percent-decoded), for the run-time checks.
pub(crate) fn percent_decode_pointer(fragment: &str) -> String {
    percent_decode(fragment)
}

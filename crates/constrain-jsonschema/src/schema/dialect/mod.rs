//! Dialects: rewriting a schema of any supported draft into one canonical internal form.
//!
//! Input: a JSON Schema document as written (draft-04, -06, -07, 2019-09 or 2020-12, chosen
//! by `$schema` or forced by [`Options::draft`](super::Options::draft)). Output: the same
//! schema in the compiler's canonical form, with the dialect's meaning made explicit:
//!
//! - tuple `items` (an array) becomes `prefixItems`, and `additionalItems` beside it becomes
//!   `items`; a schema-form `items` before 2020-12 applies to every element (no prefix);
//! - up to draft-07, `$ref` overrides its siblings (they are dropped);
//! - `dependencies` becomes `dependentRequired` (array values) and `dependentSchemas`
//!   (schema values) — also in 2019-09 and later, where it is no longer a keyword but
//!   validators differ: the official suite's optional tests honour it, Python's
//!   `jsonschema` ignores it. Where the two readings disagree, the constraint keeps to
//!   what both accept (see [`legacy_dependencies`]);
//! - in draft-06 and -07, `contentEncoding: base64` becomes a `pattern` and
//!   `contentMediaType: application/json` an internal keyword, both asserted (see
//!   [`content_disagreement`] for where the reading that ignores them must hold too);
//! - draft-04's boolean `exclusiveMinimum`/`exclusiveMaximum` become the numeric form;
//! - a count written as an integer-valued number (`"maxItems": 2.0`, valid from draft-06 on)
//!   becomes the integer;
//! - keywords the dialect does not know (`const` in draft-04, `prefixItems` in draft-07,
//!   annotations, anything unknown) are dropped, and so are identifiers;
//! - every `$ref` is resolved here, against the base URI that `$id`s (or draft-04 `id`s) at
//!   real subschema positions give, and rewritten to a local pointer into one table of
//!   targets, [`TARGETS`], kept at the root; `$dynamicRef`/`$recursiveRef` become plain
//!   references when no other dynamic anchor could take them over, and are otherwise left
//!   in place for the compiler to refuse.
//!
//! A reference that cannot be resolved exactly (a remote document, a missing anchor) is an
//! error, never a guess. Without `$schema` a schema is 2020-12, except that an array-form
//! `items` keeps its old tuple meaning.
//!
//! ```
//! use constrain::schema::dialect::{normalise, Draft};
//! use serde_json::json;
//! let old = json!({"$schema": "http://json-schema.org/draft-04/schema#",
//!                  "items": [{"type": "integer"}], "additionalItems": false,
//!                  "const": 3, "minimum": 1, "exclusiveMinimum": true});
//! let (new, draft) = normalise(&old, None).unwrap();
//! assert_eq!(draft, Draft::Draft4);
//! assert_eq!(new, json!({"prefixItems": [{"type": "integer"}], "items": false, "exclusiveMinimum": 1}));
//! ```
//!
//! Cost: two walks over the schema, plus one per `$ref` target.
//!
//! Files: this one holds the dialects and the entry point; `normaliser.rs` walks and
//! rewrites the schema; `uri.rs` resolves URI references.

use super::{escape_pointer, Error};
use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

mod normaliser;
mod uri;

use normaliser::Normaliser;

/// A JSON Schema dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Draft {
    /// draft-04 (`id`, boolean `exclusiveMinimum`, no `const`).
    Draft4,
    /// draft-06 (`$id`, `const`, `contains`, `propertyNames`, boolean schemas).
    Draft6,
    /// draft-07 (adds `if`/`then`/`else`).
    Draft7,
    /// 2019-09 (`$defs`, `$anchor`, `dependentRequired`, `unevaluated*`, `$recursiveRef`, and
    /// `$ref` beside other keywords).
    Draft201909,
    /// 2020-12 (`prefixItems`, `$dynamicRef`); the default.
    Draft202012,
}

impl Draft {
    /// The dialect a `$schema` URI names, if it is one of the supported ones.
    pub fn from_uri(uri: &str) -> Option<Draft> {
        let u = uri.trim_end_matches('#').trim_start_matches("https://").trim_start_matches("http://");
        let u = u.trim_end_matches('/');
        Some(match u {
            "json-schema.org/draft-04/schema" => Draft::Draft4,
            "json-schema.org/draft-06/schema" => Draft::Draft6,
            "json-schema.org/draft-07/schema" => Draft::Draft7,
            "json-schema.org/draft/2019-09/schema" => Draft::Draft201909,
            "json-schema.org/draft/2020-12/schema" => Draft::Draft202012,
            _ => return None,
        })
    }

    /// Parses the command-line spelling: `4`, `6`, `7`, `2019-09`, `2020-12` (also with a
    /// `draft` prefix).
    pub fn parse(s: &str) -> Option<Draft> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.trim_start_matches("draft").trim_start_matches('-').trim_start_matches('0');
        Some(match s {
            "4" => Draft::Draft4,
            "6" => Draft::Draft6,
            "7" => Draft::Draft7,
            "2019-09" | "201909" => Draft::Draft201909,
            "2020-12" | "202012" => Draft::Draft202012,
            _ => return None,
        })
    }

    /// The command-line spelling (the inverse of [`Draft::parse`]).
    pub fn name(self) -> &'static str {
        match self {
            Draft::Draft4 => "4",
            Draft::Draft6 => "6",
            Draft::Draft7 => "7",
            Draft::Draft201909 => "2019-09",
            Draft::Draft202012 => "2020-12",
        }
    }

    /// Whether the dialect knows `keyword` as a constraint or applicator.
    pub(super) fn knows(self, keyword: &str) -> bool {
        use Draft::*;
        match keyword {
            "const" | "contains" | "propertyNames" => self >= Draft6,
            "if" | "then" | "else" => self >= Draft7,
            "dependentRequired"
            | "dependentSchemas"
            | "minContains"
            | "maxContains"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "$defs" => self >= Draft201909,
            "$recursiveRef" => self == Draft201909,
            "$dynamicRef" | "prefixItems" => self == Draft202012,
            _ => true,
        }
    }
}

impl Draft {
    /// Whether validators of this dialect may assert `contentEncoding` and
    /// `contentMediaType`: draft-07 (whose optional suite tests do) and draft-06 (where the
    /// `jsonschema` crate does). Before, they are no keywords; from 2019-09 on, annotations.
    pub fn asserts_content(self) -> bool {
        matches!(self, Draft::Draft6 | Draft::Draft7)
    }
}

impl std::str::FromStr for Draft {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Draft::parse(s).ok_or_else(|| format!("unknown draft {s:?} (use 4, 6, 7, 2019-09 or 2020-12)"))
    }
}

/// The root key of the canonical form under which every `$ref` target sits, keyed by the
/// target's JSON pointer in the original document.
pub const TARGETS: &str = "x-constrain-targets";

/// The base URI of a document without `$id` (any absolute URI works: it only anchors
/// relative references).
const DEFAULT_BASE: &str = "constrain:/root.json";

/// Deepest nesting followed.
///
/// A constant of the algorithm, not a user limit: the walks recurse once per level, so
/// this bounds their stack, which no setting can grow.
const MAX_DEPTH: usize = 256;

/// Keywords whose value is one subschema.
const SINGLE: [&str; 12] = [
    "additionalProperties",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const ARRAYS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value is an object of subschemas.
const MAPS: [&str; 6] = ["properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"];

/// Every keyword named in this module's lists (subschemas, counts, instances, content), for
/// [`super::known_keywords`]; the draft-gated ones of [`Draft::knows`] are among them or
/// among the constraint keywords.
pub(super) fn named_keywords() -> impl Iterator<Item = &'static str> {
    SINGLE.into_iter().chain(ARRAYS).chain(MAPS).chain(COUNTS).chain(INSTANCES).chain(CONTENT)
}

/// Whether `keyword` is one of the content keywords that draft-06 and -07 assert
/// ([`content_assertion`]).
pub(super) fn is_content_keyword(keyword: &str) -> bool {
    CONTENT.contains(&keyword)
}

/// Keywords whose value is a count (a non-negative integer).
const COUNTS: [&str; 8] =
    ["minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties", "minContains", "maxContains"];

/// What a schema object's position says: its base URI and dialect.
#[derive(Clone, Debug)]
struct Ctx {
    base: String,
    draft: Draft,
}

/// Rewrites `schema` into the canonical form (see the module docs). Returns it with the
/// dialect of its root.
pub fn normalise(schema: &Value, forced: Option<Draft>) -> Result<(Value, Draft), Error> {
    let mut n = Normaliser {
        root: schema,
        forced,
        ctx: HashMap::default(),
        ids: HashMap::default(),
        dyn_anchors: Vec::new(),
        recursive: Vec::new(),
    };
    let root_ctx = n.enter(schema, &Ctx { base: DEFAULT_BASE.into(), draft: Draft::Draft202012 }, true);
    n.scan(schema, String::new(), root_ctx.clone(), 0)?;
    let mut targets: Map<String, Value> = Map::new();
    let mut todo: Vec<String> = Vec::new();
    let mut out = n.rewrite(schema, "", &root_ctx, &mut todo, 0)?;
    while let Some(ptr) = todo.pop() {
        if targets.contains_key(&ptr) {
            continue;
        }
        let Some(t) = schema.pointer(&ptr) else {
            return Err(Error::new(&ptr, "$ref", "reference target does not exist"));
        };
        let ctx = n.ctx_at(&ptr);
        targets.insert(ptr.clone(), Value::Null);
        let v = n.rewrite(t, &ptr, &ctx, &mut todo, 0)?;
        targets.insert(ptr, v);
    }
    if !targets.is_empty() {
        match &mut out {
            Value::Object(m) => {
                m.insert(TARGETS.into(), Value::Object(targets));
            }
            Value::Bool(b) => {
                let mut m = Map::new();
                if !*b {
                    m.insert("not".into(), Value::Bool(true));
                }
                m.insert(TARGETS.into(), Value::Object(targets));
                out = Value::Object(m);
            }
            _ => {}
        }
    }
    Ok((out, root_ctx.draft))
}

/// Keywords under which honouring `dependencies` can accept *more* than ignoring it: a
/// negation, a condition, an exclusive choice, an upper count, or an annotation it adds.
const NOT_MONOTONE: [&str; 6] = ["not", "if", "oneOf", "maxContains", "unevaluatedProperties", "unevaluatedItems"];

/// Keywords whose value is an instance, not a schema.
const INSTANCES: [&str; 4] = ["enum", "const", "default", "examples"];

/// Where the two readings of `dependencies` in a 2019-09 or 2020-12 document (`draft`, the
/// root's) may disagree: the pointer of its first use, when the document also holds a
/// keyword under which honouring it can accept more (`NOT_MONOTONE`, anywhere: a `$ref`
/// may lead there). `None` where honouring it only ever rejects more, and in older
/// drafts, where it is a keyword.
///
/// The grammar honours it; the schema compiler then adds a run-time check whose validator
/// of the whole document ignores it, so the constraint accepts only what both readings
/// accept.
///
/// ```
/// use constrain::schema::dialect::{legacy_dependencies, Draft};
/// use serde_json::json;
///
/// let deps = json!({"a": ["b"]});
/// let negated = json!({"not": {"dependencies": deps}});
/// assert_eq!(legacy_dependencies(&negated, Draft::Draft202012).as_deref(), Some("/not/dependencies"));
/// assert_eq!(legacy_dependencies(&negated, Draft::Draft7), None);
/// assert_eq!(legacy_dependencies(&json!({"dependencies": deps}), Draft::Draft202012), None);
/// ```
pub fn legacy_dependencies(schema: &Value, draft: Draft) -> Option<String> {
    // Most schemas: two scans without pointers.
    if draft < Draft::Draft201909
        || !super::mentions_any(schema, &["dependencies"])
        || !super::mentions_any(schema, &NOT_MONOTONE)
    {
        return None;
    }
    let mut todo = vec![(schema, String::new())];
    while let Some((v, ptr)) = todo.pop() {
        let Value::Object(m) = v else { continue };
        if m.get("dependencies").is_some_and(Value::is_object) {
            return Some(format!("{ptr}/dependencies"));
        }
        subschemas(m, &ptr, &mut |x, p| todo.push((x, p)));
    }
    None
}

/// The keywords whose values some validators of draft-06 and -07 check in a string and others
/// (Python's `jsonschema`) ignore.
const CONTENT: [&str; 2] = ["contentEncoding", "contentMediaType"];

/// RFC 4648 base64 with its `=` padding, in canonical form (the bits a final `=` or `==`
/// leaves over are zero, as the `jsonschema` crate's decoder requires; Python's
/// `b64decode(validate=True)` takes that too): what `contentEncoding: base64` becomes.
pub const BASE64_PATTERN: &str =
    "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

/// The part of a draft-06/-07 schema object `m` (at `ptr`) that its `contentEncoding` and
/// `contentMediaType` assert, as a schema for an `allOf`: `base64` becomes
/// [`BASE64_PATTERN`], `application/json` the internal [`JSON_TEXT`](super::JSON_TEXT)
/// keyword. Both together (base64 of a JSON text), and the other encodings the `jsonschema`
/// crate checks, are refused; other values assert nothing anywhere and are dropped.
fn content_assertion(m: &Map<String, Value>, ptr: &str) -> Result<Option<Value>, Error> {
    let encoding = m.get("contentEncoding").and_then(Value::as_str);
    let json = m.get("contentMediaType").and_then(Value::as_str) == Some("application/json");
    match encoding {
        Some("base64") if json => Err(Error::new(
            ptr,
            "contentMediaType",
            "contentMediaType application/json with contentEncoding base64 (a JSON text in base64) cannot be compiled",
        )),
        Some("base64") => Ok(Some(serde_json::json!({ "pattern": BASE64_PATTERN }))),
        Some(e @ ("base64url" | "base32" | "base32hex" | "base16")) => Err(Error::new(
            ptr,
            "contentEncoding",
            format!("contentEncoding {e:?} cannot be compiled (only base64 can)"),
        )),
        _ if json => Ok(Some(serde_json::json!({ (super::JSON_TEXT): true }))),
        _ => Ok(None),
    }
}

/// Where the two readings of `contentEncoding`/`contentMediaType` in a draft-06 or -07
/// document (`draft`, the root's) may disagree: the pointer of the first one, when the
/// document also holds a keyword under which asserting them can accept *more* than ignoring
/// them (`NOT_MONOTONE`; a `$ref` may lead there). `None` elsewhere: the grammar asserts
/// them, which only ever accepts less.
///
/// The grammar and the checks of its subschemas assert them; the compiler then adds a
/// run-time check whose validator of the whole document ignores them
/// (see [`legacy_dependencies`], which it mirrors).
pub fn content_disagreement(schema: &Value, draft: Draft) -> Option<String> {
    if !draft.asserts_content() || !super::mentions_any(schema, &CONTENT) || !super::mentions_any(schema, &NOT_MONOTONE)
    {
        return None;
    }
    let mut todo = vec![(schema, String::new())];
    while let Some((v, ptr)) = todo.pop() {
        let Value::Object(m) = v else { continue };
        if let Some(k) = CONTENT.iter().find(|k| m.get(**k).is_some_and(Value::is_string)) {
            return Some(format!("{ptr}/{k}"));
        }
        subschemas(m, &ptr, &mut |x, p| todo.push((x, p)));
    }
    None
}

/// Calls `f` with each value of `m` that may be a subschema and its pointer: those of the
/// subschema keywords, and of unknown keywords too (a `$ref` may point into them), never
/// an instance (`enum`, `const`, …).
fn subschemas<'v>(m: &'v Map<String, Value>, ptr: &str, f: &mut impl FnMut(&'v Value, String)) {
    for (k, c) in m {
        if INSTANCES.contains(&k.as_str()) {
            continue;
        }
        let kp = format!("{ptr}/{}", escape_pointer(k));
        match c {
            Value::Object(o) if MAPS.contains(&k.as_str()) => {
                o.iter().for_each(|(n, x)| f(x, format!("{kp}/{}", escape_pointer(n))));
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| f(x, format!("{kp}/{i}"))),
            other => f(other, kp),
        }
    }
}

/// Maps a pointer into the canonical form back to the schema as the user wrote it: first
/// [`original_pointer`], then the keywords the dialect renamed are given their written
/// names again, so that a draft-07 `dependencies` is named as such and not as the
/// `dependentSchemas` it became. `written` is the schema as written. A pointer that does
/// not lead through `written` (a reference target's URI) is returned as mapped so far.
///
/// ```
/// use constrain::schema::dialect::as_written;
/// use serde_json::json;
/// let doc = json!({"properties": {"a": {"dependencies": {"b": {"not": {}}},
///                                        "items": [true], "additionalItems": false}}});
/// assert_eq!(as_written(&doc, "/properties/a/dependentSchemas/b"), "/properties/a/dependencies/b");
/// assert_eq!(as_written(&doc, "/properties/a/prefixItems/0"), "/properties/a/items/0");
/// assert_eq!(as_written(&doc, "/properties/a/items"), "/properties/a/additionalItems");
/// assert_eq!(as_written(&doc, "/properties/a/minimum"), "/properties/a/minimum");
/// ```
pub fn as_written(written: &Value, ptr: &str) -> String {
    let mapped = original_pointer(ptr);
    if !mapped.starts_with('/') {
        return mapped;
    }
    let mut at = written;
    let mut out = String::new();
    let mut segments = mapped[1..].split('/');
    for seg in segments.by_ref() {
        let key = seg.replace("~1", "/").replace("~0", "~");
        let next = match at {
            // A tuple `items` became `prefixItems`, and `additionalItems` beside it `items`.
            Value::Object(m) if key == "items" && m.get("items").is_some_and(Value::is_array) => {
                m.get("additionalItems").map(|v| ("additionalItems".to_string(), v))
            }
            Value::Object(m) => match m.get(&key) {
                Some(v) => Some((seg.to_string(), v)),
                None => renamed_from(&key).iter().find_map(|old| Some((old.to_string(), m.get(*old)?))),
            },
            Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)).map(|v| (seg.to_string(), v)),
            _ => None,
        };
        match next {
            Some((name, v)) => {
                out.push('/');
                out.push_str(&name);
                at = v;
            }
            None => {
                out.push('/');
                out.push_str(seg);
                break;
            }
        }
    }
    for seg in segments {
        out.push('/');
        out.push_str(seg);
    }
    out
}

/// The keywords written before normalising that a canonical keyword may come from (see
/// the module documentation).
fn renamed_from(canonical: &str) -> &'static [&'static str] {
    match canonical {
        "dependentSchemas" | "dependentRequired" => &["dependencies"],
        "prefixItems" => &["items"],
        _ => &[],
    }
}

/// Maps a pointer into the canonical form back to the original document's pointer (a
/// pointer under [`TARGETS`] names its target's original pointer in its first segment).
pub fn original_pointer(ptr: &str) -> String {
    let prefix = format!("/{TARGETS}/");
    let Some(rest) = ptr.strip_prefix(&prefix) else {
        return ptr.to_string();
    };
    let (seg, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let orig = seg.replace("~1", "/").replace("~0", "~");
    format!("{orig}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drafts_parse_and_come_from_schema_uris() {
        assert_eq!(Draft::parse("2019-09"), Some(Draft::Draft201909));
        assert_eq!(Draft::parse("draft7"), Some(Draft::Draft7));
        assert_eq!(Draft::parse("04"), Some(Draft::Draft4));
        assert_eq!(Draft::parse("5"), None);
        assert_eq!(Draft::from_uri("http://json-schema.org/draft-06/schema#"), Some(Draft::Draft6));
        assert_eq!(Draft::from_uri("https://json-schema.org/draft/2020-12/schema"), Some(Draft::Draft202012));
    }

    #[test]
    fn integer_valued_counts_become_integers() {
        let s = json!({"maxItems": 2.0, "minLength": 1e1, "maxProperties": 1.5, "minItems": -1.0});
        let (n, _) = normalise(&s, None).unwrap();
        assert_eq!(n, json!({"maxItems": 2, "minLength": 10, "maxProperties": 1.5, "minItems": -1.0}));
        // Left for the compiler to refuse at its keyword.
        let err = crate::compile(&json!({"maxProperties": 1.5}), &Default::default()).unwrap_err();
        assert!(err.to_string().contains("/maxProperties"), "{err}");
    }

    #[test]
    fn ref_siblings_are_dropped_up_to_draft7_only() {
        let s = json!({"definitions": {"a": {"type": "integer"}}, "properties": {"x": {"$ref": "#/definitions/a", "maximum": 3}}});
        let (d7, _) = normalise(&s, Some(Draft::Draft7)).unwrap();
        assert_eq!(d7["properties"]["x"], json!({"$ref": "#/x-constrain-targets/~1definitions~1a"}));
        let (d20, _) = normalise(&s, None).unwrap();
        assert_eq!(d20["properties"]["x"]["maximum"], json!(3));
        assert_eq!(d20[TARGETS]["/definitions/a"], json!({"type": "integer"}));
    }

    #[test]
    fn ids_inside_unknown_keywords_are_not_identifiers() {
        let s = json!({"$defs": {"x": {"unknown": {"$id": "http://e.com/a.json", "type": "null"}},
                                 "y": {"$id": "http://e.com/a.json", "type": "string"}},
                       "$ref": "http://e.com/a.json"});
        let (n, _) = normalise(&s, None).unwrap();
        assert_eq!(n[TARGETS]["/$defs/y"], json!({"type": "string"}));
        // Remote references are refused, not guessed.
        let e = normalise(&json!({"$ref": "http://other.com/x.json"}), None).unwrap_err();
        assert_eq!(e.keyword(), "$ref");
    }

    #[test]
    fn relative_ids_change_the_base() {
        let s = json!({"$id": "http://e.com/root.json",
                       "$defs": {"a": {"$id": "sub/a.json", "$defs": {"b": {"$id": "b.json", "type": "null"}}, "$ref": "b.json"}}});
        assert!(normalise(&s, None).is_ok());
        let s2 = json!({"$id": "http://e.com/root.json", "$ref": "sub/b.json",
                        "$defs": {"a": {"$id": "sub/a.json", "$defs": {"b": {"$id": "b.json", "type": "null"}}}}});
        let (n2, _) = normalise(&s2, None).unwrap();
        assert_eq!(n2[TARGETS]["/$defs/a/$defs/b"], json!({"type": "null"}));
    }

    #[test]
    fn legacy_dependencies_are_found_where_they_are_keywords() {
        let in_defs = json!({"$defs": {"x": {"dependencies": {"a": ["b"]}}}, "if": {"$ref": "#/$defs/x"}});
        assert_eq!(legacy_dependencies(&in_defs, Draft::Draft201909).as_deref(), Some("/$defs/x/dependencies"));
        // A property named so is not the keyword.
        let named = json!({"properties": {"dependencies": {"type": "object"}}, "not": {"type": "null"}});
        assert_eq!(legacy_dependencies(&named, Draft::Draft202012), None);
    }

    #[test]
    fn dialect_keywords() {
        // draft-04: const is unknown; dependencies split.
        let s = json!({"$schema": "http://json-schema.org/draft-04/schema#", "const": 1,
                       "dependencies": {"a": ["b"], "c": {"required": ["d"]}}});
        let (n, _) = normalise(&s, None).unwrap();
        assert_eq!(n, json!({"dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"required": ["d"]}}}));
        // draft-07: prefixItems is unknown, schema items apply to all.
        let s = json!({"$schema": "http://json-schema.org/draft-07/schema#", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}});
        assert_eq!(normalise(&s, None).unwrap().0, json!({"items": {"type": "integer"}}));
        // Without $schema array items keep the tuple meaning.
        let s = json!({"items": [true], "additionalItems": false});
        assert_eq!(normalise(&s, None).unwrap().0, json!({"prefixItems": [true], "items": false}));
        // 2019-09: $recursiveRef with a single recursive anchor is a plain reference.
        let s = json!({"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": true,
                       "properties": {"a": {"$recursiveRef": "#"}}});
        assert_eq!(normalise(&s, None).unwrap().0["properties"]["a"], json!({"allOf": [{"$ref": "#"}]}));
    }
}

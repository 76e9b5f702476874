//! Stage 1b: run-time checks — the keywords a grammar cannot express, enforced exactly while
//! matching.
//!
//! Input: the canonical schema document (see [`crate::schema::dialect`]) and the keywords the
//! schema compiler could not turn into grammar (`uniqueItems`, overlapping `oneOf`,
//! `if`/`then`/`else`, `not`, `multipleOf` without a remainder automaton, `pattern` with
//! lookaround, `dependentSchemas`, `propertyNames`, …), each with the JSON pointer of the
//! schema holding it. Output: [`ValueChecks`], which the compile result carries
//! ([`crate::Compiled::checks`]) and every [`constrain_core::Matcher`] of its constraint
//! applies through the engine's hook ([`crate::matcher::RuntimeChecks`]).
//!
//! ## How
//!
//! The compiler leaves the keyword out of the grammar, so the grammar accepts *more* there.
//! The value the keyword applies to is then validated, as soon as it is complete, by a real
//! JSON Schema validator (the `jsonschema` crate) against the whole subschema holding the
//! keyword. The grammar and the check together accept exactly the schema's language:
//!
//! - Each such subschema is a *checked position*. The check is placed at the nearest
//!   enclosing position the instance reaches along **deterministic** keywords only
//!   (`properties`, `patternProperties`, `additionalProperties`, `prefixItems`, `items`,
//!   `allOf`, `$ref`): along those, which subschemas apply to a value follows from its
//!   location in the document alone. Under `anyOf`, `oneOf`, `not`, `if`, … it does not,
//!   so a keyword inside them is checked at the position of the `anyOf` (and so on) itself.
//! - While matching, an incremental JSON tracker (the private `tracker` module) follows the
//!   output, knows the set of positions that apply to each open value, and validates a value
//!   the moment it completes (closing quote, bracket, the byte after a number, the last
//!   letter of a literal). The mask leaves out every token that would complete a value that
//!   fails, and [`constrain_core::Matcher::accept_token`] refuses it.
//! - Last, the whole document is validated against the whole schema before the output may
//!   end: whatever the tracker could not place is still checked, so the constraint never
//!   accepts a document the schema rejects.
//!
//! A check at a value's end cannot see ahead: a prefix all of whose completions fail (two
//! equal items of a `uniqueItems` array whose items are an `enum` of two) is not refused
//! before the end. The language accepted is still exactly the schema's.
//!
//! Cost: nothing for schemas without such keywords. With them, a mask is filtered by running
//! the tracker over the few allowed tokens that could complete a checked value (inside a
//! string: only tokens with a quote), and each completed value is parsed and validated once.
//!
//! ## Example
//!
//! ```rust
//! use constrain::schema::{self, Options};
//! use constrain::{Constraint, Limits, TokenIndex, Vocabulary};
//!
//! // `uniqueItems` cannot be a grammar; it is checked when the array closes.
//! let schema = serde_json::json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
//! let compiled = schema::compile(&schema, &Options::default())?;
//! let checks = compiled.checks().expect("uniqueItems is checked at run time");
//! assert_eq!(checks.relaxed()[0].keyword, "uniqueItems");
//!
//! let c = Constraint::new(&compiled, TokenIndex::new(Vocabulary::bytes()), &Limits::default())?;
//! let mut m = c.matcher();
//! m.accept_bytes(b"[1,2")?;
//! assert!(m.accept_bytes(b",1]").is_err()); // the bracket would complete [1,2,1]
//! m.accept_bytes(b",3]")?;
//! assert!(m.is_accepting());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod hook;
pub(crate) mod tracker;
mod witness;

use crate::util::hash128;
use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};
use std::collections::VecDeque;

/// A keyword the compiler left to run-time checks: where it is and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relaxed {
    /// JSON pointer of the subschema holding the keyword (in the schema as written).
    pub pointer: String,
    /// The keyword.
    pub keyword: String,
}

/// Why [`ValueChecks`] could not be built: a subschema the validator refuses.
#[derive(Clone, Debug)]
pub(crate) struct BuildError {
    /// Pointer (canonical document) of the value refused: the keyword when the validator
    /// names one (`/properties/a/pattern`), else the subschema.
    pub pointer: String,
    /// The validator's message.
    pub message: String,
}

/// One subschema position of the canonical document.
#[derive(Debug, Default)]
struct Node {
    /// Pointer in the canonical document.
    ptr: String,
    /// `properties`, sorted by name.
    props: Vec<(Box<str>, u32)>,
    /// The names of `props` as JSON spells them (escaped where needed, without quotes), with
    /// the hashes of the names themselves: the keys closing mode may still end a key with
    /// ([`ValueChecks::key_endings`]).
    spelled: Names,
    /// `patternProperties` whose patterns compile.
    patterns: Vec<(regex_automata::meta::Regex, u32)>,
    /// `additionalProperties`.
    additional: Option<u32>,
    /// `prefixItems`.
    prefix: Vec<u32>,
    /// `items` (schema form: every element after `prefixItems`).
    items: Option<u32>,
    /// `allOf` parts and the `$ref` target: they apply to the same value.
    also: Vec<u32>,
    /// Subschemas under keywords whose application depends on more than the location.
    nondet: Vec<u32>,
    /// The `$ref` string, resolved after the walk.
    reference: Option<String>,
    /// A relaxed keyword's check is anchored here.
    marked: bool,
    /// The value of a member whose key selects this schema (`patternProperties`,
    /// `additionalProperties`) of an object whose `patternProperties` was relaxed: validated
    /// when the value completes, not only when the object does.
    member: bool,
    /// Values at this position are validated against it when they complete.
    needs: bool,
    /// Some value strictly inside a value here (along deterministic keywords) may need a
    /// check: the tracker has to watch its children.
    kids: bool,
    /// The hashes of the names this schema's own `required` lists: an object without one
    /// fails without being parsed.
    required: Box<[u128]>,
    /// Set when the object's keys alone decide this position's check (see [`KeySet`]).
    keyset: Option<KeySet>,
    /// The keywords relaxed here (the anchor is their own position, not an ancestor's).
    own_relaxed: Vec<String>,
    /// Some relaxed keyword is anchored here from below a non-deterministic keyword.
    anchored_from_below: bool,
    /// For an object schema that allows only its named properties: their names (as JSON
    /// spells them: no escapes needed) and hashes. A key of a checked object must stay a
    /// prefix of one not written yet, or the object could never complete.
    closed: Option<Names>,
    /// `uniqueItems: true`: a repeated item is refused as soon as it completes.
    unique: bool,
}

/// Property names as JSON spells them, with their hashes (see [`Node::closed`]).
type Names = Box<[(Box<[u8]>, u128)]>;

/// `name` as JSON spells it between its quotes (most names need no escape).
fn spelled(name: &str) -> Box<[u8]> {
    if name.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        return Box::from(name.as_bytes());
    }
    let quoted = serde_json::to_string(name).unwrap_or_default();
    Box::from(quoted.as_bytes().get(1..quoted.len().saturating_sub(1)).unwrap_or(&[]))
}

/// The check of an object whose grammar is exact but for which keys it has: written in any
/// order, the grammar cannot count them. Decided from the keys written, without parsing:
/// `required`, `dependentRequired`, `minProperties` and `maxProperties`.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    pub required: Box<[u128]>,
    pub dependent: Vec<(u128, Box<[u128]>)>,
    pub min: usize,
    pub max: Option<usize>,
}

impl KeySet {
    /// Whether an object with exactly the (distinct) keys `keys` passes.
    pub fn accepts(&self, keys: &[u128]) -> bool {
        keys.len() >= self.min
            && self.max.is_none_or(|m| keys.len() <= m)
            && self.required.iter().all(|r| keys.contains(r))
            && self.dependent.iter().all(|(k, needs)| !keys.contains(k) || needs.iter().all(|n| keys.contains(n)))
    }
}

/// Keywords whose presence beside a relaxed property order means the compiler may have
/// compiled more than the object's own map (merged parts, branches): then the object is
/// validated whole, not by its keys.
const NOT_KEYSET: [&str; 12] = [
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "$ref",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
];

/// The run-time checks of one compiled schema: the positions whose values are validated when
/// they complete, their validators, and the map from document locations to positions. Built
/// by the schema compiler; shared read-only by every matcher of the grammar.
pub struct ValueChecks {
    nodes: Vec<Node>,
    root: u32,
    relaxed: Vec<Relaxed>,
    /// One validator per position with `needs` (indexed like `nodes`).
    validators: Vec<Option<jsonschema::Validator>>,
    /// The whole document's validator: the last word before the output may end. `None`
    /// when the only keyword relaxed is `properties` (any order) and the keys decide every
    /// checked object ([`KeySet`]): the grammar and those checks are then exact, and the
    /// validator (often the costliest part of a compile) is not built.
    whole: Option<jsonschema::Validator>,
    /// JSON texts the schema names ([`ValueChecks::hints`]).
    hints: Vec<Vec<u8>>,
    /// Candidate documents built from the schema ([`ValueChecks::witnesses`]).
    witnesses: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ValueChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueChecks")
            .field("relaxed", &self.relaxed)
            .field("checked_positions", &self.nodes.iter().filter(|n| n.needs).map(|n| &n.ptr).collect::<Vec<_>>())
            .finish()
    }
}

/// Most [`ValueChecks::hints`] kept.
///
/// A constant of the algorithm, not a user limit: hints are guidance a liveness proof
/// tries first; they never change which bytes the matcher accepts.
const MAX_HINTS: usize = 256;

/// Longest [`ValueChecks::hints`] kept, in bytes.
///
/// A constant of the algorithm, not a user limit: as [`MAX_HINTS`].
const MAX_HINT_BYTES: usize = 64;

/// The hints of [`ValueChecks::hints`], from every object in `doc` (a name that happens to
/// be `const` or `enum` adds a hint too: harmless, they only order a search).
fn collect_hints(doc: &Value) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let add = |v: &Value, out: &mut Vec<Vec<u8>>| {
        if let Ok(text) = serde_json::to_vec(v) {
            if text.len() <= MAX_HINT_BYTES && !out.contains(&text) {
                out.push(text);
            }
        }
    };
    let mut work = vec![doc];
    while let Some(v) = work.pop() {
        if out.len() >= 4 * MAX_HINTS {
            break;
        }
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    match (k.as_str(), child) {
                        ("const", c) => add(c, &mut out),
                        ("enum", Value::Array(vs)) => vs.iter().for_each(|c| add(c, &mut out)),
                        ("required", Value::Array(vs)) => vs.iter().for_each(|c| add(c, &mut out)),
                        ("properties", Value::Object(props)) => {
                            props.keys().for_each(|name| add(&Value::String(name.clone()), &mut out))
                        }
                        _ => {}
                    }
                    work.push(child);
                }
            }
            Value::Array(items) => work.extend(items),
            _ => {}
        }
    }
    out.sort_by_key(Vec::len);
    out.truncate(MAX_HINTS);
    out
}

/// Keywords holding one subschema whose application depends on more than the location.
const NONDET_ONE: [&str; 10] = [
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "dependencies",
];

impl ValueChecks {
    /// Builds the checks for `doc` (canonical form) where the compiler relaxed `relaxed`
    /// (`(canonical pointer, keyword, pointer as written)`); `strict`: the grammar was
    /// compiled with [`crate::schema::Options::strict`]. Every validator is built here, so a
    /// subschema the validator cannot compile is an error at compile time.
    pub(crate) fn build(
        doc: &Value,
        original: &Value,
        draft: crate::schema::dialect::Draft,
        relaxed: Vec<(String, String, String)>,
        strict: bool,
    ) -> Result<ValueChecks, BuildError> {
        let mut nodes: Vec<Node> = Vec::new();
        let mut ids: HashMap<String, u32> = HashMap::default();
        // Parent and whether the edge from it is deterministic; roots have none.
        let mut parent: Vec<Option<(u32, bool)>> = Vec::new();
        let mut work: Vec<(u32, &Value)> = Vec::new();
        let mut add = |ptr: String, up: Option<(u32, bool)>, nodes: &mut Vec<Node>| -> u32 {
            let id = nodes.len() as u32;
            ids.insert(ptr.clone(), id);
            nodes.push(Node { ptr, ..Node::default() });
            parent.push(up);
            id
        };
        let root = add(String::new(), None, &mut nodes);
        work.push((root, doc));
        while let Some((id, v)) = work.pop() {
            let Value::Object(map) = v else { continue };
            let ptr = nodes[id as usize].ptr.clone();
            let mut pending: Vec<(String, &Value, Edge)> = Vec::new();
            collect_children(map, &ptr, &mut pending);
            let patterns_ok = match map.get("patternProperties") {
                Some(Value::Object(p)) => p.keys().all(|k| crate::schema::ecma::regex(k).is_ok()),
                _ => true,
            };
            if let Some(Value::String(r)) = map.get("$ref") {
                nodes[id as usize].reference = Some(r.clone());
            }
            for (cptr, cv, edge) in pending {
                let det = match edge {
                    Edge::Additional | Edge::Pattern(_) => patterns_ok,
                    Edge::Root | Edge::NonDet => false,
                    _ => true,
                };
                let up = if matches!(edge, Edge::Root) { None } else { Some((id, det)) };
                let c = add(cptr, up, &mut nodes);
                let n = &mut nodes[id as usize];
                match edge {
                    Edge::Prop(name) if det => n.props.push((name.into(), c)),
                    Edge::Pattern(p) if det => {
                        if let Ok(re) = crate::schema::ecma::regex(&p) {
                            n.patterns.push((re, c));
                        }
                    }
                    Edge::Additional if det => n.additional = Some(c),
                    Edge::Prefix => n.prefix.push(c),
                    Edge::Items => n.items = Some(c),
                    Edge::AllOf => n.also.push(c),
                    Edge::Root => {}
                    _ => n.nondet.push(c),
                }
                work.push((c, cv));
            }
            nodes[id as usize].props.sort_by(|a, b| a.0.cmp(&b.0));
        }
        // References: local pointers into the canonical document (the dialect stage resolved
        // every one). One that does not resolve makes its position opaque: checked whole.
        let mut opaque = Vec::new();
        for (i, n) in nodes.iter_mut().enumerate() {
            let Some(r) = n.reference.take() else { continue };
            let target = r.strip_prefix('#').map(crate::schema::percent_decode_pointer).and_then(|p| ids.get(&p));
            match target {
                Some(&t) => n.also.push(t),
                None => opaque.push(i),
            }
        }
        // Anchors: the nearest position above the keyword reached along deterministic edges.
        let mut out_relaxed = Vec::new();
        for (cptr, keyword, shown) in relaxed {
            let mut p = cptr.as_str();
            let mut at = ids.get(p).copied();
            while at.is_none() && !p.is_empty() {
                p = p.rfind('/').map_or("", |i| &p[..i]);
                at = ids.get(p).copied();
            }
            let mut chain = vec![at.unwrap_or(root)];
            while let Some(&Some((up, _))) = chain.last().and_then(|&c| parent.get(c as usize)) {
                chain.push(up);
            }
            // `chain` runs from the keyword's position up to its root; the anchor is the
            // position just above the topmost non-deterministic edge.
            let mut anchor = chain[0];
            for w in chain.windows(2).rev() {
                if let Some(&Some((_, false))) = parent.get(w[0] as usize) {
                    anchor = w[1];
                    break;
                }
            }
            nodes[anchor as usize].marked = true;
            if Some(anchor) == ids.get(cptr.as_str()).copied() {
                if keyword == "patternProperties" {
                    // Which schemas a member's value takes follows from its key: check the
                    // value when it completes.
                    let kids: Vec<u32> = {
                        let n = &nodes[anchor as usize];
                        n.patterns.iter().map(|p| p.1).chain(n.additional).collect()
                    };
                    for k in kids {
                        nodes[k as usize].member = true;
                    }
                }
                nodes[anchor as usize].own_relaxed.push(keyword.clone());
            } else {
                nodes[anchor as usize].anchored_from_below = true;
            }
            // Named as written: a draft-07 `dependencies` is not shown as `dependentSchemas`.
            let written = shown.rsplit_once('/').map(|(_, k)| k.replace("~1", "/").replace("~0", "~"));
            out_relaxed.push(Relaxed { keyword: written.unwrap_or(keyword), pointer: shown });
        }
        let any_mark = nodes.iter().any(|n| n.marked);
        for i in opaque {
            nodes[i].marked |= any_mark;
        }
        // A position needs a check when marked, or when a mark is reachable from it through
        // a keyword the tracker does not follow (anyOf, not, …): along any edges from there.
        let reach = reverse_reach(&nodes, |n| n.marked, all_children);
        for n in nodes.iter_mut() {
            let via_nondet = n.nondet.iter().any(|&c| reach.get(c as usize).copied().unwrap_or(true));
            n.needs = n.marked || n.member || via_nondet;
        }
        let det_reach = reverse_reach(&nodes, |n| n.needs, |n| det_children(n, true));
        for n in nodes.iter_mut() {
            let kids = det_children(n, false).any(|c| det_reach.get(c as usize).copied().unwrap_or(true));
            n.kids = kids;
        }
        for n in nodes.iter_mut() {
            n.spelled = n.props.iter().map(|(k, _)| (spelled(k), hash128(k.as_bytes()))).collect();
        }
        for n in nodes.iter_mut().filter(|n| n.needs) {
            let map = doc.pointer(&n.ptr).and_then(Value::as_object);
            n.closed = map
                .and_then(|m| closed_names(doc, m, strict, 0))
                .map(|names| names.iter().map(|k| (Box::from(k.as_bytes()), hash128(k.as_bytes()))).collect());
            n.required = names(map.and_then(|m| m.get("required")));
            n.unique = map.and_then(|m| m.get("uniqueItems")) == Some(&Value::Bool(true));
            let only_order = n.marked
                && !n.anchored_from_below
                && n.nondet.is_empty()
                && n.own_relaxed.iter().all(|k| k == "properties")
                && map.is_some_and(|m| !NOT_KEYSET.iter().any(|k| m.contains_key(*k)));
            if let (true, Some(m)) = (only_order, map) {
                let count = |k: &str| m.get(k).and_then(Value::as_u64).map(|c| c as usize);
                let dependent = match m.get("dependentRequired") {
                    Some(Value::Object(d)) => d.iter().map(|(k, v)| (hash128(k.as_bytes()), names(Some(v)))).collect(),
                    _ => Vec::new(),
                };
                n.keyset = Some(KeySet {
                    required: n.required.clone(),
                    dependent,
                    min: count("minProperties").unwrap_or(0),
                    max: count("maxProperties"),
                });
            }
        }
        let mut validators = Vec::with_capacity(nodes.len());
        for n in &nodes {
            validators.push(if n.needs && n.keyset.is_none() { Some(validator_at(doc, &n.ptr)?) } else { None });
        }
        let keys_decide_all = out_relaxed.iter().all(|r| r.keyword == "properties")
            && nodes.iter().all(|n| !n.needs || n.keyset.is_some());
        let whole = if keys_decide_all { None } else { Some(whole_validator(original, draft)?) };
        // Required members first: a repair that inserts them in turn satisfies a `required`.
        let mut hints = witness::required_members(doc, MAX_HINTS / 2, MAX_HINT_BYTES);
        let others: Vec<Vec<u8>> = collect_hints(doc).into_iter().filter(|h| !hints.contains(h)).collect();
        hints.extend(others);
        hints.truncate(MAX_HINTS);
        let witnesses = witness::documents(doc);
        Ok(ValueChecks { nodes, root, relaxed: out_relaxed, validators, whole, hints, witnesses })
    }

    /// JSON texts the schema names, compact: first the members an object's `required`
    /// asks for (`"name":value` and `,"name":value`, with a witness value), then every
    /// `const` and `enum` value and every property name (in `properties` or `required`,
    /// quoted), shortest first; at most [`MAX_HINTS`] of at most [`MAX_HINT_BYTES`] bytes. A liveness proof tries them where
    /// the checks refused its walk: the value a `contains` wants, the names a `oneOf`
    /// branch requires. Guidance only: the matcher still judges every byte.
    pub(crate) fn hints(&self) -> &[Vec<u8>] {
        &self.hints
    }

    /// Candidate whole documents built from the schema, compact (see `check/witness.rs`). A
    /// liveness proof from the start of the output tries them when its searches run out of
    /// fuel. Guidance only: the matcher still judges every byte.
    pub(crate) fn witnesses(&self) -> &[Vec<u8>] {
        &self.witnesses
    }

    /// The keywords left to run-time checks, with their pointers in the schema as written.
    pub fn relaxed(&self) -> &[Relaxed] {
        &self.relaxed
    }

    /// The pointers (canonical document) of the positions whose values are validated as
    /// they complete.
    pub fn checked_positions(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().filter(|n| n.needs).map(|n| n.ptr.as_str())
    }

    /// Whether the whole document `text` validates against the whole schema.
    pub(crate) fn whole_is_valid(&self, text: &[u8]) -> bool {
        let Some(whole) = &self.whole else { return true };
        match serde_json::from_slice::<Value>(text) {
            Ok(v) => whole.is_valid(&v),
            Err(_) => false,
        }
    }

    /// What the keys of an object of `set` decide: `Some(false)` when they make it fail,
    /// `Some(true)` when they decide it passes (every check of the set is a [`KeySet`]),
    /// `None` when it must be parsed and validated.
    fn keys_decide(&self, set: &[u32], keys: &[u128]) -> Option<bool> {
        let mut all_keyset = true;
        for n in set.iter().filter_map(|&n| self.nodes.get(n as usize)).filter(|n| n.needs) {
            match &n.keyset {
                Some(k) if !k.accepts(keys) => return Some(false),
                Some(_) => {}
                None if !n.required.iter().all(|r| keys.contains(r)) => return Some(false),
                None => all_keyset = false,
            }
        }
        all_keyset.then_some(true)
    }

    /// Whether a key that begins with `prefix` can still be a new name of an object of `set`
    /// whose written keys are `keys`: false when some schema of the set allows only names
    /// that are all written or that `prefix` does not begin.
    fn key_may_continue(&self, set: &[u32], prefix: &[u8], keys: &[u128]) -> bool {
        set.iter()
            .filter_map(|&n| self.nodes.get(n as usize))
            .filter_map(|n| n.closed.as_deref())
            .all(|names| names.iter().any(|(name, h)| name.starts_with(prefix) && !keys.contains(h)))
    }

    /// For [`tracker::Checker::key_endings`], over the schemas of `set`, the written keys'
    /// hashes `keys` and the key so far `prefix`: whether `prefix` begins a property name
    /// written already. If so, `out` gets the endings of the key, each after `lead` (the
    /// opening quote when the key is still to begin): the rest of each property name not
    /// written that `prefix` begins, with the closing quote, and the quote alone.
    fn key_endings(&self, set: &[u32], prefix: &[u8], keys: &[u128], lead: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
        let begun = || {
            set.iter()
                .filter_map(|&n| self.nodes.get(n as usize))
                .flat_map(|n| n.spelled.iter())
                .filter(|(name, _)| name.starts_with(prefix))
        };
        if !begun().any(|(_, h)| keys.contains(h)) {
            return false;
        }
        let rests = begun().filter(|(_, h)| !keys.contains(h)).map(|(name, _)| &name[prefix.len()..]);
        for rest in rests.chain([&[][..]]) {
            let ending = [lead, rest, b"\""].concat();
            if !out.contains(&ending) {
                out.push(ending);
            }
        }
        true
    }

    /// Whether `key` (its hash) is a name every closed schema of `set` allows (see
    /// [`Node::closed`]): a key that is not can never validate.
    fn key_is_name(&self, set: &[u32], key: u128) -> bool {
        set.iter()
            .filter_map(|&n| self.nodes.get(n as usize))
            .filter_map(|n| n.closed.as_deref())
            .all(|names| names.iter().any(|(_, h)| *h == key))
    }

    /// For the tracker's key trials: the names of the closed schemas of `set` (see
    /// [`Node::closed`]) that begin with `prefix` and are not among `keys`, as (the schema's
    /// rank among the closed ones, its node, the name's index). Returns how many closed
    /// schemas there are: a key may continue with bytes that every one of them still allows.
    fn open_names(&self, set: &[u32], prefix: &[u8], keys: &[u128], out: &mut Vec<(u32, u32, u32)>) -> u32 {
        out.clear();
        let mut rank = 0;
        for &n in set {
            let Some(names) = self.nodes.get(n as usize).and_then(|node| node.closed.as_deref()) else { continue };
            for (i, (name, h)) in names.iter().enumerate() {
                if name.starts_with(prefix) && !keys.contains(h) {
                    out.push((rank, n, i as u32));
                }
            }
            rank += 1;
        }
        rank
    }

    /// Name `i` of node `n`'s closed names (empty when there is none).
    fn closed_name(&self, n: u32, i: u32) -> &[u8] {
        self.nodes
            .get(n as usize)
            .and_then(|node| node.closed.as_deref())
            .and_then(|names| names.get(i as usize))
            .map_or(&[][..], |(name, _)| &name[..])
    }

    /// Whether `value` validates against every position of `set` that needs a check.
    fn set_is_valid(&self, set: &[u32], value: &Value) -> bool {
        set.iter().all(|&n| match self.validators.get(n as usize) {
            Some(Some(v)) => v.is_valid(value),
            _ => true,
        })
    }
}

/// How a child subschema hangs off its parent.
enum Edge {
    Prop(String),
    Pattern(String),
    Additional,
    Prefix,
    Items,
    AllOf,
    NonDet,
    /// A definition table entry: reached only through `$ref`.
    Root,
}

/// The subschemas of one schema object, with their pointers.
fn collect_children<'v>(map: &'v Map<String, Value>, ptr: &str, out: &mut Vec<(String, &'v Value, Edge)>) {
    use crate::schema::escape_pointer_segment as esc;
    for (k, v) in map {
        let at = format!("{ptr}/{}", esc(k));
        match (k.as_str(), v) {
            ("properties" | "patternProperties" | "dependentSchemas", Value::Object(m)) => {
                for (name, sub) in m {
                    let edge = match k.as_str() {
                        "properties" => Edge::Prop(name.clone()),
                        "patternProperties" => Edge::Pattern(name.clone()),
                        _ => Edge::NonDet,
                    };
                    out.push((format!("{at}/{}", esc(name)), sub, edge));
                }
            }
            ("$defs" | "definitions" | crate::schema::dialect::TARGETS, Value::Object(m)) => {
                for (name, sub) in m {
                    out.push((format!("{at}/{}", esc(name)), sub, Edge::Root));
                }
            }
            ("allOf" | "anyOf" | "oneOf" | "prefixItems", Value::Array(a)) => {
                for (i, sub) in a.iter().enumerate() {
                    let edge = match k.as_str() {
                        "allOf" => Edge::AllOf,
                        "prefixItems" => Edge::Prefix,
                        _ => Edge::NonDet,
                    };
                    out.push((format!("{at}/{i}"), sub, edge));
                }
            }
            ("items", Value::Object(_) | Value::Bool(_)) => out.push((at, v, Edge::Items)),
            ("items", Value::Array(a)) => {
                for (i, sub) in a.iter().enumerate() {
                    out.push((format!("{at}/{i}"), sub, Edge::NonDet));
                }
            }
            ("additionalProperties", _) => out.push((at, v, Edge::Additional)),
            (k, Value::Object(_) | Value::Bool(_)) if NONDET_ONE.contains(&k) => out.push((at, v, Edge::NonDet)),
            _ => {}
        }
    }
}

fn all_children(n: &Node) -> impl Iterator<Item = u32> + '_ {
    det_children(n, true).chain(n.nondet.iter().copied())
}

/// The deterministic children of `n` (with `also`: its `allOf` parts and `$ref` target).
fn det_children(n: &Node, also: bool) -> impl Iterator<Item = u32> + '_ {
    n.props
        .iter()
        .map(|p| p.1)
        .chain(n.patterns.iter().map(|p| p.1))
        .chain(n.additional)
        .chain(n.prefix.iter().copied())
        .chain(n.items)
        .chain(n.also.iter().copied().filter(move |_| also))
}

/// The positions from which some position with `seed` is reachable along `children`.
fn reverse_reach<'n, C: Iterator<Item = u32> + 'n>(
    nodes: &'n [Node],
    seed: impl Fn(&Node) -> bool,
    children: impl Fn(&'n Node) -> C,
) -> Vec<bool> {
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for c in children(n) {
            if let Some(p) = preds.get_mut(c as usize) {
                p.push(i as u32);
            }
        }
    }
    let mut reach: Vec<bool> = nodes.iter().map(&seed).collect();
    let mut queue: VecDeque<u32> = (0..nodes.len() as u32).filter(|&i| reach[i as usize]).collect();
    while let Some(i) = queue.pop_front() {
        for &p in &preds[i as usize] {
            if !reach[p as usize] {
                reach[p as usize] = true;
                queue.push_back(p);
            }
        }
    }
    reach
}

/// A validator for the subschema at `ptr` of `doc`, with the document's reference targets
/// copied in when it holds references.
fn validator_at(doc: &Value, ptr: &str) -> Result<jsonschema::Validator, BuildError> {
    use crate::schema::Refusal;
    let err = |r: Refusal| BuildError { pointer: format!("{ptr}{}", r.at), message: r.message };
    let built = match doc.pointer(ptr) {
        None => return Err(err(Refusal { at: String::new(), message: "no such subschema".into() })),
        Some(Value::Object(m)) if !ptr.is_empty() => crate::schema::subschema_validator(doc, m.clone()),
        Some(other) => {
            let mut other = other.clone();
            crate::schema::portable_patterns(&mut other).map_err(err)?;
            crate::schema::own_keywords(
                jsonschema::options().with_draft(jsonschema::Draft::Draft202012).should_validate_formats(true),
            )
            .build(&other)
            .map_err(Refusal::from)
        }
    };
    built.map_err(err)
}

/// The validator of the schema as written, in its own dialect. From 2019-09 on it ignores
/// `dependencies` (a keyword of its own that always holds: the crate would honour it), which
/// the compiled grammar and the other checks honour, so that together they accept only what
/// both readings of it accept ([`crate::schema::dialect::legacy_dependencies`]). The schema
/// is left as written, so `$ref`s into `dependencies` still resolve.
fn whole_validator(schema: &Value, draft: crate::schema::dialect::Draft) -> Result<jsonschema::Validator, BuildError> {
    use crate::schema::dialect::Draft as D;
    let d = match draft {
        D::Draft4 => jsonschema::Draft::Draft4,
        D::Draft6 => jsonschema::Draft::Draft6,
        D::Draft7 => jsonschema::Draft::Draft7,
        D::Draft201909 => jsonschema::Draft::Draft201909,
        D::Draft202012 => jsonschema::Draft::Draft202012,
    };
    let err = |r: crate::schema::Refusal| BuildError { pointer: r.at, message: r.message };
    let mut schema = schema.clone();
    crate::schema::portable_patterns(&mut schema).map_err(err)?;
    // `multipleOf` in both readings, as every check reads it ([`crate::schema::own_keywords`]).
    let mut options = crate::schema::own_keywords(jsonschema::options().with_draft(d).should_validate_formats(true));
    if draft >= D::Draft201909 {
        options = options.with_keyword("dependencies", |_, _, _| Ok(Box::new(Ignored)));
    }
    // The other reading of `contentEncoding`/`contentMediaType`: the grammar and the other
    // checks assert them ([`crate::schema::dialect::content_disagreement`]).
    if draft.asserts_content() {
        for k in ["contentEncoding", "contentMediaType"] {
            options = options.with_keyword(k, |_, _, _| Ok(Box::new(Ignored)));
        }
    }
    options.build(&schema).map_err(|e| err(e.into()))
}

/// A keyword read as no keyword at all: every instance satisfies it.
struct Ignored;

impl<'i> jsonschema::Keyword<'i> for Ignored {
    fn validate(&self, _: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        Ok(())
    }

    fn is_valid(&self, _: &'i Value) -> bool {
        true
    }
}

/// The names an object schema allows when it allows no others: its own (`additionalProperties:
/// false`, no `patternProperties`), or the union over `anyOf`/`oneOf` branches that all
/// are such (through `$ref`s). `None` when other names may be valid, or when a name needs
/// escapes in JSON (the check compares raw bytes).
///
/// Under `strict` the grammar reads an absent `additionalProperties` (and
/// `unevaluatedProperties`) as `false` wherever it compiles an object's own keywords: a
/// schema without combinators or references beside them is then closed as well, so that a
/// key the grammar lets begin can still end as a name not written yet.
fn closed_names<'d>(doc: &'d Value, m: &'d Map<String, Value>, strict: bool, depth: usize) -> Option<Vec<&'d str>> {
    if depth > 4 {
        return None;
    }
    let resolve = |v: &'d Value| -> Option<&'d Map<String, Value>> {
        let mut v = v;
        for _ in 0..8 {
            match v.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
                Some(r) => v = doc.pointer(&crate::schema::percent_decode_pointer(r))?,
                None => return v.as_object(),
            }
        }
        None
    };
    let no_patterns = m.get("patternProperties").and_then(Value::as_object).is_none_or(|p| p.is_empty());
    let strict_closed = strict
        && !m.contains_key("additionalProperties")
        && !m.contains_key("unevaluatedProperties")
        && !STRICT_OPEN.iter().any(|k| m.contains_key(*k));
    let own = (m.get("additionalProperties") == Some(&Value::Bool(false)) || strict_closed) && no_patterns;
    let names: Vec<&str> = if own {
        match m.get("properties") {
            Some(Value::Object(p)) => p.keys().map(String::as_str).collect(),
            None => Vec::new(),
            Some(_) => return None,
        }
    } else {
        let branches = m.get("anyOf").or_else(|| m.get("oneOf")).and_then(Value::as_array)?;
        let mut all = Vec::new();
        for b in branches {
            all.extend(closed_names(doc, resolve(b)?, strict, depth + 1)?);
        }
        all.sort_unstable();
        all.dedup();
        all
    };
    if names.iter().any(|k| k.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20)) {
        return None;
    }
    Some(names)
}

/// Keywords beside which [`closed_names`] does not take `strict` to close a schema's own
/// object: the object may then be compiled from more than the schema's own map.
const STRICT_OPEN: [&str; 8] = ["allOf", "anyOf", "oneOf", "not", "if", "$ref", "dependentSchemas", "dependencies"];

/// The hashes of the strings of a `required`-like array.
fn names(v: Option<&Value>) -> Box<[u128]> {
    match v {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(|s| hash128(s.as_bytes())).collect(),
        _ => Box::default(),
    }
}

//! `anyOf` and `oneOf` as alternations, and the check that a `oneOf`'s branches are
//! disjoint, so that it can be compiled as one. Branches that overlap only through optional
//! properties are made disjoint by forbidding, in each, the properties only the other
//! requires: exact when that is one property and the other branch asks nothing else;
//! otherwise an under-approximation, used (with a note) only without run-time checks, which
//! check such a `oneOf` exactly.

use serde_json::{Map, Value};

use super::json::values_equal;
use super::presence::{self, Presence, Siblings};
use super::{is_constraint_keyword, json_type, type_list, value_has_type, Compiler, Error, Note, FORBIDDEN};
use crate::grammar::Expr;

/// Whether the properties [`Compiler::check_disjoint`] forbids keep every instance the
/// `oneOf` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Exactness {
    /// Each forbidden property makes the object match the other branch too.
    Exact,
    /// Some object holding a forbidden property matches only its own branch: refused, though
    /// valid.
    Narrower,
}

impl<'a> Compiler<'a> {
    /// `anyOf` or `oneOf` (`key`) of `branches`: an alternation of the branches, each merged
    /// with the sibling keywords of `map`. A `oneOf` must have provably disjoint branches
    /// ([`Compiler::check_disjoint`], which may forbid properties per branch) unless lenient.
    pub(super) fn compile_alternatives(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        branches: &Value,
        ptr: &str,
    ) -> Result<Expr, Error> {
        let Value::Array(branches) = branches else {
            return Err(Error::new(ptr, key, format!("{key} must be an array")));
        };
        let mut rest = map.clone();
        rest.remove(key);
        let has_rest = rest.keys().any(|k| is_constraint_keyword(k));
        // What the siblings force may decide branches: a keyword no object can satisfy
        // matches nothing, and a branch none can match is left out (exactly: it adds no
        // instance to `anyOf`, and none to count against `oneOf`).
        let values: Vec<Presence> = match Siblings::read(&rest, self.opts.strict) {
            Some(sib) => branches.iter().map(|b| sib.eval(b)).collect(),
            None => vec![Presence::Unknown; branches.len()],
        };
        let whole =
            if key == "oneOf" && !self.lenient() { Presence::exactly_one(&values) } else { Presence::any(&values) };
        if whole == Presence::Never && !branches.is_empty() {
            self.notes.push(Note::warning(ptr, key, presence::unsatisfiable(key, &values)));
            return Ok(Expr::Nothing);
        }
        let never = |i: usize| values.get(i) == Some(&Presence::Never);
        let live: Vec<Value> =
            branches.iter().enumerate().map(|(i, b)| if never(i) { Value::Bool(false) } else { b.clone() }).collect();
        let branches = &live;
        let forbidden: Vec<Vec<String>> = if key == "oneOf" && !self.lenient() {
            match self.check_disjoint(branches, &rest, ptr) {
                Ok((f, Exactness::Exact)) => f,
                // Overlapping branches, or branches made disjoint by forbidding more than the
                // other branch needs: an alternation accepts values two branches match,
                // which the run-time check then refuses.
                Ok((_, Exactness::Narrower)) | Err(_) if self.relaxes("oneOf") => {
                    self.relax(ptr, "oneOf");
                    vec![vec![]; branches.len()]
                }
                Ok((f, Exactness::Narrower)) => {
                    self.notes.push(Note::new(
                        ptr,
                        "oneOf",
                        "branches that overlap through optional properties are kept apart by forbidding, in each, \
                         the properties only the other requires: an object holding some but not all of them is \
                         refused although one branch matches it"
                            .to_string(),
                    ));
                    f
                }
                Err(e) => return Err(e),
            }
        } else {
            vec![vec![]; branches.len()]
        };
        let mut parts = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            if never(i) {
                continue;
            }
            let bptr = format!("{ptr}/{key}/{i}");
            debug_assert_eq!(forbidden.len(), branches.len(), "one list of forbidden names per branch");
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
        Ok(Expr::alt(parts))
    }

    /// Checks that the branches of a `oneOf` cannot both match one instance. Branches that
    /// overlap only through optional properties are made disjoint by forbidding, in each
    /// branch, the properties the other branch requires and it does not (a subset of the
    /// branch: instances with both sets of properties are rejected). Returns the properties to
    /// forbid per branch, and whether forbidding them keeps every valid instance
    /// ([`Exactness`]).
    pub(super) fn check_disjoint(
        &self,
        branches: &[Value],
        rest: &Map<String, Value>,
        ptr: &str,
    ) -> Result<(Vec<Vec<String>>, Exactness), Error> {
        let infos: Vec<BranchInfo> = branches.iter().map(|b| self.branch_info(b, rest, 0)).collect();
        let mut forbidden: Vec<Vec<String>> = vec![vec![]; branches.len()];
        let mut exactness = Exactness::Exact;
        // Forbidding `only` (what branch `other` requires beyond this one) in this branch
        // refuses exactly the objects `other` matches too when `only` is one property and
        // `other` asks nothing else: an object of this branch holding it then matches both.
        // Otherwise it refuses some objects that only this branch matches.
        let exact = |only: &[String], other: &Value| {
            only.len() == 1
                && other.as_object().is_some_and(|m| {
                    m.keys().all(|k| matches!(k.as_str(), "required" | "description" | "title" | "$comment"))
                })
        };
        for i in 0..infos.len() {
            for j in i + 1..infos.len() {
                if infos[i].disjoint(&infos[j]) {
                    continue;
                }
                let objects_only = |x: &BranchInfo| x.types.as_ref().is_some_and(|t| t.iter().all(|t| t == "object"));
                let only_i: Vec<String> =
                    infos[i].required.iter().filter(|r| !infos[j].required.contains(r)).cloned().collect();
                let only_j: Vec<String> =
                    infos[j].required.iter().filter(|r| !infos[i].required.contains(r)).cloned().collect();
                if (objects_only(&infos[i]) || objects_only(&infos[j])) && !only_i.is_empty() && !only_j.is_empty() {
                    if !(exact(&only_j, &branches[j]) && exact(&only_i, &branches[i])) {
                        exactness = Exactness::Narrower;
                    }
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
        Ok((forbidden, exactness))
    }

    /// What `b` (with the `oneOf`'s sibling keywords `rest`) is known to require; looks
    /// into `allOf`/`anyOf`/`oneOf` parts up to depth 4 (beyond, it knows less and so proves
    /// fewer branches disjoint).
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
    /// Whether no instance can match both branches (`false` when not provable).
    fn disjoint(&self, other: &BranchInfo) -> bool {
        if let (Some(a), Some(b)) = (&self.types, &other.types) {
            let overlap = a.iter().any(|x| {
                b.iter().any(|y| x == y || (x == "integer" && y == "number") || (x == "number" && y == "integer"))
            });
            if !overlap {
                return true;
            }
        }
        // JSON Schema equality, not `Value`'s: `1`, `1.0` and `1e0` are one value.
        let shared = |a: &[Value], b: &[Value]| a.iter().any(|x| b.iter().any(|y| values_equal(x, y)));
        if let (Some(a), Some(b)) = (&self.values, &other.values) {
            if !shared(a, b) {
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
                if k == k2 && (self.required.contains(k) || other.required.contains(k)) && !shared(va, vb) {
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

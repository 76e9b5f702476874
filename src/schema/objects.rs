//! `type: object`: `properties`, `required`, `additionalProperties`, `patternProperties`,
//! `propertyNames`, `dependentRequired` and the property counts.
//!
//! Objects with at most [`ANY_ORDER_MAX`] named properties accept them in any order (one rule
//! per set of members already written); larger ones accept schema order or required-first
//! order. Free members (pattern or additional keys) come after the named ones.

use rustc_hash::FxHashMap as HashMap;
use serde_json::{Map, Value};

use super::strings::{not_in_set, RestRules, KEY_CHUNK, MAX_EXCLUDED_KEY_CHARS};
use super::{escape_pointer, is_constraint_keyword, json, Compiler, Error, SharedRule, FORBIDDEN};
use crate::grammar::regex::{ecma_is_match, to_expr, RegexOptions};
use crate::grammar::Expr;

impl<'a> Compiler<'a> {
    pub(super) fn compile_object(&mut self, map: &Map<String, Value>, ptr: &str) -> Result<Expr, Error> {
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
                    self.shared_rule(SharedRule::String)
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
                        rest: self.shared_rule(SharedRule::StringRest),
                        escape: self.shared_rule(SharedRule::EscapeRest),
                        nonascii: self.shared_rule(SharedRule::NonasciiRest),
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
}

/// Objects with at most this many named properties accept them in any order (one rule per
/// subset of properties written so far); larger ones accept schema order or required-first
/// order.
const ANY_ORDER_MAX: usize = 4;

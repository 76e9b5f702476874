//! `$ref` resolution: local pointers, `$id`/`$anchor` names, and one rule per target.
//!
//! Input: a `$ref` string met while compiling (the document is already in the canonical form
//! of [`dialect`](super::dialect), so every reference is local). Output: the target schema and
//! its JSON pointer ([`Compiler::resolve_ref`]), or the rule that stands for it
//! ([`Compiler::ref_rule_for_pointer`]). Each target is declared once and compiled later from
//! a work list ([`Compiler::drain`]), which is what makes recursive schemas finite.

use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;

use super::{escape_pointer, Compiler, Error};
use crate::grammar::RuleId;

/// A `$ref` target: the schema and its JSON pointer in the (canonical) document.
pub(crate) struct Target<'a> {
    pub(crate) schema: &'a Value,
    pub(crate) pointer: String,
}

/// A reference rule declared but not yet defined: its body is the schema at `pointer`.
pub(super) struct PendingRef {
    rule: RuleId,
    pointer: String,
}

impl<'a> Compiler<'a> {
    /// Compiles every declared but undefined reference rule, including those declared while
    /// doing so (the work list that makes recursive schemas finite).
    pub(super) fn drain(&mut self) -> Result<(), Error> {
        while let Some(PendingRef { rule: id, pointer: ptr }) = self.pending.pop() {
            let root = self.root;
            let Some(schema) = root.pointer(&ptr) else {
                return Err(Error::new(&ptr, "$ref", "reference target does not exist"));
            };
            let e = self.compile_value(schema, &ptr)?;
            self.b.define(id, e);
        }
        Ok(())
    }

    /// The rule standing for the schema at `ptr`: declared (and queued for [`Compiler::drain`])
    /// at the first reference, shared by every later one.
    pub(super) fn ref_rule_for_pointer(&mut self, ptr: &str) -> RuleId {
        if let Some(&id) = self.ref_rules.get(ptr) {
            return id;
        }
        let base = match ptr.rsplit('/').next() {
            Some(s) if !s.is_empty() => {
                let clean: String =
                    s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(40).collect();
                format!("def_{clean}")
            }
            _ => "root".to_string(),
        };
        let name = self.b.fresh_name(&base);
        let id = self.b.declare(&name);
        self.ref_rules.insert(ptr.to_string(), id);
        self.pending.push(PendingRef { rule: id, pointer: ptr.to_string() });
        id
    }

    /// Resolves a `$ref` string to its target schema and JSON pointer.
    pub(crate) fn resolve_ref(&self, r: &str, at: &str) -> Result<Target<'a>, Error> {
        let (base, frag) = match r.split_once('#') {
            Some((b, f)) => (b, f),
            None => (r, ""),
        };
        let mut ptr = String::new();
        if !base.is_empty() {
            match self.ids.get(base).or_else(|| self.ids.get(base.trim_end_matches('/'))) {
                Some(p) => ptr.push_str(p),
                None => return Err(Error::new(at, "$ref", format!("reference {r:?} is not local to this schema"))),
            }
        }
        if !frag.is_empty() {
            if !frag.starts_with('/') {
                // `#name`: a plain-name anchor.
                match self.ids.get(&format!("#{frag}")) {
                    Some(p) => ptr = p.clone(),
                    None => return Err(Error::new(at, "$ref", format!("anchor {r:?} not found"))),
                }
            } else {
                ptr.push_str(&percent_decode(frag));
            }
        }
        match self.root.pointer(&ptr) {
            Some(v) => Ok(Target { schema: v, pointer: ptr }),
            None => Err(Error::new(at, "$ref", format!("reference {r:?} does not resolve"))),
        }
    }

    /// `s` with its `$ref` chain followed (at most 16 steps, for the `oneOf` analysis: an
    /// unresolved reference tells it less, so it proves fewer branches disjoint).
    pub(super) fn deref<'v>(&'v self, s: &'v Value, depth: usize) -> &'v Value {
        if depth > 16 {
            return s;
        }
        if let Some(Value::String(r)) = s.get("$ref") {
            if let Ok(t) = self.resolve_ref(r, "") {
                return self.deref(t.schema, depth + 1);
            }
        }
        s
    }
}

/// Decodes `%XX` escapes in a JSON-pointer fragment of a URI (`s` itself if the result is not
/// UTF-8).
pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() && s.is_char_boundary(i + 3) {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// Records every `$id`/`id` (and `$anchor`) in the document with the pointer where it sits.
pub(super) fn collect_ids(root: &Value, out: &mut HashMap<String, String>) {
    let mut todo: Vec<(&Value, String)> = vec![(root, String::new())];
    while let Some((v, ptr)) = todo.pop() {
        match v {
            Value::Object(m) => {
                for key in ["$id", "id"] {
                    if let Some(Value::String(id)) = m.get(key) {
                        let id = id.split('#').next().unwrap_or("").to_string();
                        if !id.is_empty() {
                            out.entry(id.clone()).or_insert_with(|| ptr.clone());
                            // Also the last path segment, for relative references.
                            if let Some(last) = id.rsplit('/').next() {
                                out.entry(last.to_string()).or_insert_with(|| ptr.clone());
                            }
                        }
                    }
                }
                if let Some(Value::String(a)) = m.get("$anchor") {
                    out.entry(format!("#{a}")).or_insert_with(|| ptr.clone());
                }
                for (k, c) in m {
                    if k == "enum" || k == "const" || k == "examples" || k == "default" {
                        continue;
                    }
                    todo.push((c, format!("{ptr}/{}", escape_pointer(k))));
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    todo.push((c, format!("{ptr}/{i}")));
                }
            }
            _ => {}
        }
    }
}

//! Generators for the differential fuzzer: random schemas over the keywords the compiler
//! supports, random JSON values (seeded with a schema's names and constants so they hit its
//! interesting cases), mutations, and the shrinking steps of minimization.
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Map, Value};

/// Property names: ASCII, non-ASCII, and characters a JSON pointer escapes.
const NAMES: &[&str] = &["a", "b", "c", "xa", "xb", "é", "日本", "k/1", "t~0", ""];

/// Strings for `enum` / `const` and values: non-ASCII, escapes, empty.
const STRINGS: &[&str] = &["", "a", "ab", "abc", "é", "日本語", "🎉", "a\"b", "x\\y", "\n", "\u{7f}", "xa", "A1"];

/// Numbers for bounds, `enum` / `const` and values: small, large, fractional, negative
/// zero, and integers near the f64 and u64 limits.
const NUMBERS: &[f64] =
    &[0.0, 1.0, -1.0, 2.0, 3.0, 7.0, 10.0, 0.5, -2.5, 1.5, 100.0, 1e20, -1e20, 1e15, 9007199254740992.0, 1e300];

/// Formats the compiler supports.
const FORMATS: &[&str] = &[
    "date",
    "date-time",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    "iri",
    "idn-email",
];

fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// A random schema, nesting at most `depth` levels; the root may hold `$defs` that its
/// subschemas (and themselves) reference.
pub fn schema(rng: &mut StdRng, depth: u32) -> Value {
    let ndefs = if rng.random_bool(0.25) { rng.random_range(1..=2) } else { 0 };
    let mut g = Gen { ndefs, recursion: false, in_all_of: false };
    let mut root = g.node(rng, depth);
    if ndefs > 0 {
        let mut defs = Map::new();
        for i in 0..ndefs {
            // Recursive definitions: optional members, so the recursion can end.
            g.recursion = true;
            let d = if rng.random_bool(0.5) {
                json!({"type": "object", "properties": {"v": g.leaf(rng), "next": {"$ref": format!("#/$defs/d{i}")}}})
            } else {
                json!({"anyOf": [g.leaf(rng), {"type": "array", "maxItems": 2, "items": {"$ref": format!("#/$defs/d{i}")}}]})
            };
            defs.insert(format!("d{i}"), d);
        }
        match &mut root {
            Value::Object(o) => {
                o.insert("$defs".into(), Value::Object(defs));
            }
            other => {
                *other = json!({"allOf": [other.clone()], "$defs": defs});
            }
        }
    }
    root
}

struct Gen {
    ndefs: usize,
    recursion: bool,
    /// Generating inside an `allOf` branch.
    in_all_of: bool,
}

impl Gen {
    fn node(&mut self, rng: &mut StdRng, depth: u32) -> Value {
        if depth == 0 {
            return self.leaf(rng);
        }
        match rng.random_range(0..100) {
            0..=19 => self.leaf(rng),
            20..=39 => self.object(rng, depth),
            40..=54 => self.array(rng, depth),
            55..=64 => {
                let kw = *["anyOf", "oneOf", "allOf"].choose(rng).unwrap_or(&"anyOf");
                let n = rng.random_range(1..=3);
                let outer = self.in_all_of;
                self.in_all_of |= kw == "allOf";
                let subs: Vec<Value> = (0..n).map(|_| self.node(rng, depth - 1)).collect();
                self.in_all_of = outer;
                let mut o = Map::new();
                o.insert(kw.into(), Value::Array(subs));
                if rng.random_bool(0.3) {
                    o.insert("type".into(), json!(["object", "array", "string", "integer"].choose(rng)));
                }
                Value::Object(o)
            }
            // `not`, a third of the time of one `required` name (true of every non-object).
            65..=69 if rng.random_bool(0.35) => {
                json!({"not": {"required": [NAMES.choose(rng).copied().unwrap_or("a")]}})
            }
            65..=69 => json!({"not": self.node(rng, depth - 1)}),
            70..=77 => self.enum_const(rng),
            78..=81 if self.ndefs > 0 => json!({"$ref": format!("#/$defs/d{}", rng.random_range(0..self.ndefs))}),
            82..=89 => self.unevaluated(rng, depth),
            90..=92 => json!(rng.random_bool(0.8)),
            _ => {
                let mut o = Map::new();
                o.insert(
                    "type".into(),
                    json!([*["string", "null", "integer", "boolean", "number"].choose(rng).unwrap_or(&"null"), "null"]),
                );
                Value::Object(o)
            }
        }
    }

    /// A scalar schema with its type's keywords.
    fn leaf(&mut self, rng: &mut StdRng) -> Value {
        let mut o = Map::new();
        match rng.random_range(0..6) {
            0 | 1 => {
                o.insert("type".into(), json!("string"));
                if rng.random_bool(0.3) {
                    o.insert("minLength".into(), json!(rng.random_range(0..4)));
                }
                if rng.random_bool(0.3) {
                    o.insert("maxLength".into(), json!(rng.random_range(0..8)));
                }
                if rng.random_bool(0.35) {
                    o.insert("pattern".into(), json!(regex(rng, 2)));
                }
                if rng.random_bool(0.2) {
                    let f = FORMATS.choose(rng).copied().unwrap_or("date");
                    o.insert("format".into(), json!(f));
                }
            }
            2 | 3 => {
                let t = if rng.random_bool(0.5) { "integer" } else { "number" };
                o.insert("type".into(), json!(t));
                for kw in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
                    if rng.random_bool(0.2) {
                        o.insert(kw.into(), num(*NUMBERS.choose(rng).unwrap_or(&0.0)));
                    }
                }
                if rng.random_bool(0.25) {
                    let choices: &[f64] = &[2.0, 3.0, 5.0, 0.5, 0.25, 1e20, 1.5, 0.01];
                    let m = *choices.choose(rng).unwrap_or(&2.0);
                    o.insert("multipleOf".into(), num(m));
                }
            }
            4 => {
                o.insert("type".into(), json!("boolean"));
            }
            _ => {
                o.insert("type".into(), json!("null"));
            }
        }
        Value::Object(o)
    }

    fn enum_const(&mut self, rng: &mut StdRng) -> Value {
        let n = rng.random_range(1..=4);
        let vals: Vec<Value> = (0..n).map(|_| scalar(rng)).collect();
        if n == 1 && rng.random_bool(0.5) {
            json!({"const": vals[0]})
        } else {
            json!({"enum": vals})
        }
    }

    fn object(&mut self, rng: &mut StdRng, depth: u32) -> Value {
        let mut o = Map::new();
        if rng.random_bool(0.8) {
            o.insert("type".into(), json!("object"));
        }
        let mut props = Map::new();
        // Now and then a large object (more named properties than any-order sets track,
        // most of them required: the weighted layout of `schema::objects`).
        let large = rng.random_bool(0.1);
        let (count, p_required) = if large { (rng.random_range(5..=9), 0.8) } else { (rng.random_range(0..=3), 0.4) };
        for _ in 0..count {
            let name = NAMES.choose(rng).copied().unwrap_or("a");
            props.insert(name.into(), self.node(rng, depth - 1));
        }
        let names: Vec<String> = props.keys().cloned().collect();
        if !props.is_empty() {
            o.insert("properties".into(), Value::Object(props));
        }
        let required: Vec<&String> = names.iter().filter(|_| rng.random_bool(p_required)).collect();
        if !required.is_empty() {
            o.insert("required".into(), json!(required));
        }
        if rng.random_bool(0.2) {
            o.insert("patternProperties".into(), json!({ "^x": self.node(rng, depth - 1) }));
        }
        match rng.random_range(0..4) {
            0 => {
                o.insert("additionalProperties".into(), json!(false));
            }
            1 => {
                o.insert("additionalProperties".into(), self.node(rng, depth - 1));
            }
            _ => {}
        }
        if rng.random_bool(0.15) {
            o.insert("minProperties".into(), json!(rng.random_range(0..3)));
        }
        if rng.random_bool(0.15) {
            o.insert("maxProperties".into(), json!(rng.random_range(0..4)));
        }
        // Keywords only run-time checks enforce.
        if rng.random_bool(0.1) {
            o.insert("dependentRequired".into(), json!({"a": ["b"], "c": ["a"]}));
        }
        if rng.random_bool(0.1) {
            o.insert("propertyNames".into(), json!({"maxLength": rng.random_range(1..4)}));
        }
        if rng.random_bool(0.1) {
            o.insert("if".into(), json!({"required": ["a"]}));
            o.insert("then".into(), self.node(rng, depth - 1));
            if rng.random_bool(0.5) {
                o.insert("else".into(), self.node(rng, depth - 1));
            }
        }
        Value::Object(o)
    }

    fn array(&mut self, rng: &mut StdRng, depth: u32) -> Value {
        let mut o = Map::new();
        if rng.random_bool(0.8) {
            o.insert("type".into(), json!("array"));
        }
        if rng.random_bool(0.3) {
            let n = rng.random_range(1..=3);
            o.insert("prefixItems".into(), Value::Array((0..n).map(|_| self.node(rng, depth - 1)).collect()));
        }
        match rng.random_range(0..3) {
            0 => {
                o.insert("items".into(), self.node(rng, depth - 1));
            }
            1 => {
                o.insert("items".into(), json!(false));
            }
            _ => {}
        }
        if rng.random_bool(0.15) {
            o.insert("uniqueItems".into(), json!(true));
        }
        if rng.random_bool(0.2) {
            o.insert("contains".into(), self.node(rng, depth - 1));
            if rng.random_bool(0.4) {
                o.insert("minContains".into(), json!(rng.random_range(0..3)));
            }
            if rng.random_bool(0.4) {
                o.insert("maxContains".into(), json!(rng.random_range(1..4)));
            }
        }
        if rng.random_bool(0.3) {
            o.insert("minItems".into(), json!(rng.random_range(0..3)));
        }
        if rng.random_bool(0.3) {
            o.insert("maxItems".into(), json!(rng.random_range(0..5)));
        }
        Value::Object(o)
    }

    /// `unevaluatedProperties` / `unevaluatedItems` beside applicators that evaluate.
    fn unevaluated(&mut self, rng: &mut StdRng, depth: u32) -> Value {
        let after = if rng.random_bool(0.6) { json!(false) } else { self.leaf(rng) };
        if rng.random_bool(0.5) {
            let a = NAMES.choose(rng).copied().unwrap_or("a");
            let b = NAMES.choose(rng).copied().unwrap_or("b");
            let mut o = json!({
                "type": "object",
                "properties": { a: self.node(rng, depth - 1) },
                "unevaluatedProperties": after,
            });
            if rng.random_bool(0.6) {
                o["allOf"] = json!([{ "properties": { b: self.leaf(rng) } }]);
            }
            if rng.random_bool(0.3) {
                o["anyOf"] = json!([{ "properties": { "c": self.leaf(rng) }, "required": ["c"] }, true]);
            }
            if rng.random_bool(0.3) {
                // Two branches that may both hold, each evaluating its own name.
                o["anyOf"] = json!([{ "properties": { "c": self.leaf(rng) }, "required": ["c"] },
                                    { "properties": { "d": self.leaf(rng) }, "required": ["d"] }]);
            }
            if rng.random_bool(0.3) {
                o["if"] = json!({ "properties": { a: self.leaf(rng) }, "required": [a] });
                o["then"] = json!({ "properties": { "c": self.leaf(rng) } });
                o["else"] = json!({ "properties": { "d": true } });
            }
            o
        } else {
            let mut o = json!({
                "type": "array",
                "prefixItems": [self.node(rng, depth - 1)],
                "unevaluatedItems": after,
            });
            if rng.random_bool(0.5) {
                o["allOf"] = json!([{ "prefixItems": [true, self.leaf(rng)] }]);
            }
            if rng.random_bool(0.3) {
                o["contains"] = self.leaf(rng);
            }
            o
        }
    }
}

/// A scalar value for `enum` / `const` and instances. An integral number is now and then
/// written as a float (`1.0`), which JSON Schema holds equal to the integer.
fn scalar(rng: &mut StdRng) -> Value {
    match rng.random_range(0..5) {
        0 | 1 => json!(STRINGS.choose(rng)),
        2 => {
            let x = *NUMBERS.choose(rng).unwrap_or(&0.0);
            if x.fract() == 0.0 && rng.random_bool(0.3) {
                json!(x)
            } else {
                num(x)
            }
        }
        3 => json!(rng.random_bool(0.5)),
        _ => {
            if rng.random_bool(0.5) {
                Value::Null
            } else {
                json!([1, "a"])
            }
        }
    }
}

/// A small regular expression (ECMA-262 syntax the compiler and the validator agree on:
/// literal characters, explicit classes, `.`, quantifiers, groups, alternation, anchors).
pub fn regex(rng: &mut StdRng, depth: u32) -> String {
    let mut s = String::new();
    let anchored = rng.random_bool(0.6);
    if anchored {
        s.push('^');
    }
    s.push_str(&regex_seq(rng, depth));
    if anchored && rng.random_bool(0.8) {
        s.push('$');
    }
    s
}

fn regex_seq(rng: &mut StdRng, depth: u32) -> String {
    let mut s = String::new();
    for _ in 0..rng.random_range(1..=3) {
        let atom = match rng.random_range(0..8) {
            0..=2 => ["a", "b", "x", "é", "1", "\\.", "-"].choose(rng).copied().unwrap_or("a").to_string(),
            3 => ["[a-c]", "[^a]", "[0-9]", "[xé]", "[a-zA-Z_]"].choose(rng).copied().unwrap_or("[a-c]").to_string(),
            4 => ".".to_string(),
            5 if depth > 0 => format!("({}|{})", regex_seq(rng, depth - 1), regex_seq(rng, depth - 1)),
            _ => "a".to_string(),
        };
        s.push_str(&atom);
        match rng.random_range(0..8) {
            0 => s.push('*'),
            1 => s.push('+'),
            2 => s.push('?'),
            3 => s.push_str(&format!("{{{},{}}}", rng.random_range(0..2), rng.random_range(2..4))),
            _ => {}
        }
    }
    s
}

/// Names and constants found in a schema, so generated values hit its cases.
#[derive(Clone, Debug, Default)]
pub struct Hints {
    names: Vec<String>,
    constants: Vec<Value>,
}

impl Hints {
    /// Collects property names and `enum` / `const` / bound values from `schema`.
    pub fn of(schema: &Value) -> Hints {
        let mut h = Hints::default();
        let mut stack = vec![schema];
        while let Some(v) = stack.pop() {
            match v {
                Value::Object(o) => {
                    for (k, x) in o {
                        match k.as_str() {
                            "properties" => {
                                if let Value::Object(p) = x {
                                    h.names.extend(p.keys().cloned());
                                }
                            }
                            "const" => h.constants.push(x.clone()),
                            "enum" => {
                                if let Value::Array(a) = x {
                                    h.constants.extend(a.iter().cloned());
                                }
                            }
                            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
                                h.constants.push(x.clone())
                            }
                            _ => {}
                        }
                        stack.push(x);
                    }
                }
                Value::Array(a) => stack.extend(a.iter()),
                _ => {}
            }
        }
        h.names.extend(NAMES.iter().map(|s| s.to_string()));
        h
    }
}

/// A random JSON value of nesting at most `depth`, drawing on `hints`.
pub fn value(rng: &mut StdRng, depth: u32, hints: &Hints) -> Value {
    let pick = rng.random_range(0..10);
    match pick {
        0 | 1 if !hints.constants.is_empty() => hints.constants.choose(rng).cloned().unwrap_or(Value::Null),
        2 | 3 if depth > 0 => {
            let mut o = Map::new();
            for _ in 0..rng.random_range(0..=3) {
                let k = hints.names.choose(rng).cloned().unwrap_or_default();
                o.insert(k, value(rng, depth - 1, hints));
            }
            Value::Object(o)
        }
        4 | 5 if depth > 0 => {
            Value::Array((0..rng.random_range(0..=4)).map(|_| value(rng, depth - 1, hints)).collect())
        }
        6 => {
            // Numbers near a hinted constant.
            let base = hints.constants.iter().filter_map(|c| c.as_f64()).collect::<Vec<_>>();
            let b = base.choose(rng).copied().unwrap_or(0.0);
            num(b + *[-1.0, 0.0, 1.0, 0.5, -0.5].choose(rng).unwrap_or(&0.0))
        }
        7 => json!(format_like(rng)),
        _ => scalar(rng),
    }
}

/// Strings shaped like formats (valid and invalid), so format keywords are exercised.
fn format_like(rng: &mut StdRng) -> &'static str {
    [
        "2024-02-29",
        "2023-02-29",
        "2024-01-01T10:00:00Z",
        "10:00:00+01:00",
        "P1D",
        "PT1D",
        "P1YT",
        "a@b.co",
        "a@",
        "example.com",
        "xn--X",
        "-a.com",
        "192.168.0.1",
        "256.1.1.1",
        "::1",
        "http://x.y/z",
        "/p",
        "#/a",
        "0/a",
        "[",
        "a b",
        "123e4567-e89b-12d3-a456-426614174000",
        "xé",
        "abc",
    ]
    .choose(rng)
    .copied()
    .unwrap_or("a")
}

/// A mutation of `v`: one member or element removed, added or replaced somewhere.
pub fn mutate(rng: &mut StdRng, v: &Value, hints: &Hints) -> Value {
    let mut out = v.clone();
    let steps = rng.random_range(0..3);
    mutate_at(rng, &mut out, steps, hints);
    out
}

/// Descends `steps` random levels (while there are children), then mutates there.
fn mutate_at(rng: &mut StdRng, cur: &mut Value, steps: u32, hints: &Hints) {
    if steps > 0 {
        match cur {
            Value::Object(o) if !o.is_empty() => {
                let k = rng.random_range(0..o.len());
                if let Some(child) = o.values_mut().nth(k) {
                    return mutate_at(rng, child, steps - 1, hints);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                let k = rng.random_range(0..a.len());
                if let Some(child) = a.get_mut(k) {
                    return mutate_at(rng, child, steps - 1, hints);
                }
            }
            _ => {}
        }
    }
    let op = rng.random_range(0..4);
    match (op, &mut *cur) {
        (0, Value::Object(o)) if !o.is_empty() => {
            let k = rng.random_range(0..o.len());
            if let Some(key) = o.keys().nth(k).cloned() {
                o.shift_remove(&key);
            }
            return;
        }
        (1, Value::Object(o)) => {
            let k = hints.names.choose(rng).cloned().unwrap_or_default();
            let x = value(rng, 1, hints);
            o.insert(k, x);
            return;
        }
        (0, Value::Array(a)) if !a.is_empty() => {
            let k = rng.random_range(0..a.len());
            a.remove(k);
            return;
        }
        (1, Value::Array(a)) => {
            let x = value(rng, 1, hints);
            a.push(x);
            return;
        }
        _ => {}
    }
    *cur = value(rng, 1, hints);
}

/// Candidate simplifications of `v`, smallest first: for a schema (`is_schema`), members
/// removed and subschemas replaced by `true`; for an instance, members and elements removed
/// and values replaced by simpler ones.
pub fn shrink_value(v: &Value, is_schema: bool) -> Vec<Value> {
    let mut out = Vec::new();
    match v {
        Value::Object(o) => {
            for k in o.keys() {
                let mut c = o.clone();
                c.shift_remove(k);
                out.push(Value::Object(c));
            }
            for (k, x) in o {
                for s in shrink_value(x, is_schema) {
                    let mut c = o.clone();
                    c.insert(k.clone(), s);
                    out.push(Value::Object(c));
                }
            }
            if is_schema && !o.is_empty() {
                out.push(json!(true));
            }
        }
        Value::Array(a) => {
            for i in 0..a.len() {
                let mut c = a.clone();
                c.remove(i);
                out.push(Value::Array(c));
            }
            for (i, x) in a.iter().enumerate() {
                for s in shrink_value(x, is_schema) {
                    let mut c = a.clone();
                    c[i] = s;
                    out.push(Value::Array(c));
                }
            }
        }
        Value::String(s) if !is_schema && !s.is_empty() => {
            out.push(json!(""));
            let half: String = s.chars().take(s.chars().count() / 2).collect();
            out.push(json!(half));
        }
        Value::Number(n) if !is_schema && n.as_f64() != Some(0.0) => out.push(json!(0)),
        _ => {}
    }
    out
}

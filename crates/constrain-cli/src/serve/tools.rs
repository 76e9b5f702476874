//! Function calling: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`, as a
//! constraint and as the response's `tool_calls`.
//!
//! Input: the request's `tools` (functions with a JSON Schema `parameters`), `tool_choice`
//! and `parallel_tool_calls`. Output: a [`Tools`], which gives the JSON Schema the output must
//! match ([`Tools::schema`]), a system turn describing the functions to the model
//! ([`Tools::system_prompt`]), and reads the generated text back as calls ([`parse_calls`]).
//!
//! The call format: the default model's chat template (SmolLM2, ChatML) defines no tool-call
//! syntax, so a call is the JSON object `{"name": NAME, "arguments": ARGS}`, one `anyOf`
//! branch per function with `name` a `const` and `arguments` that function's `parameters`
//! (the branches are disjoint, so the schema compiler takes the `anyOf` exactly). With
//! `parallel_tool_calls` (OpenAI's default) the output may also be a JSON array of 1 to
//! [`MAX_PARALLEL_CALLS`] calls. The arguments therefore validate against the function's
//! schema by construction, through the same compile path as `response_format`.
//!
//! `tool_choice`: `none` drops the tools (free text, or the request's other constraint);
//! `required` constrains the output to calls; a named function to calls of that function;
//! `auto` (the default when tools are given) lets the model answer in text or call: the
//! grammar is `call | text`, where text is any output whose first byte opens no call (`{`,
//! or `[` with parallel calls) — the call's opening byte is the trigger. The run-time checks
//! of the schema front end read the whole output as one JSON value, so under `auto` the call
//! schema is compiled without them: a keyword that needs one is then taken as a documented
//! subset or refused with a 400 naming it (`required` keeps the checks).
use super::api::ApiError;
use constrain::grammar::{Expr, Grammar, GrammarBuilder};
use serde_json::{json, Map, Value};

/// Most calls in one parallel answer.
pub const MAX_PARALLEL_CALLS: usize = 8;

/// Most functions in one request.
pub const MAX_TOOLS: usize = 128;

/// One function of `tools`.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// Its name (`^[a-zA-Z0-9_-]{1,64}$`, as OpenAI requires).
    pub name: String,
    /// What it does, for the prompt.
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
    /// OpenAI's `strict`: no properties beyond those the schema names.
    pub strict: bool,
}

/// What `tool_choice` allows (`none` is no [`Tools`] at all).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Text or calls.
    Auto,
    /// Calls only.
    Required,
    /// Calls of this function only.
    Named(String),
}

/// A request's functions and how they may be called.
#[derive(Clone, Debug, PartialEq)]
pub struct Tools {
    /// Every function given (all are described to the model).
    pub functions: Vec<Function>,
    /// `tool_choice`.
    pub choice: Choice,
    /// `parallel_tool_calls`: the output may be an array of calls.
    pub parallel: bool,
}

/// Reads `tools`, `tool_choice` and `parallel_tool_calls`. `None`: no tools, or
/// `tool_choice: "none"`.
pub fn parse(tools: Option<Value>, choice: Option<Value>, parallel: Option<bool>) -> Result<Option<Tools>, ApiError> {
    let bad = |param: &str, msg: String| ApiError::bad(param.to_string(), msg);
    let list = match tools {
        None | Some(Value::Null) => {
            if matches!(&choice, Some(c) if !c.is_null() && c != "none") {
                return Err(bad("tool_choice", "`tool_choice` needs `tools`".into()));
            }
            return Ok(None);
        }
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad("tools", "`tools` must be an array".into())),
    };
    if list.is_empty() {
        return Err(bad("tools", "`tools` must not be empty".into()));
    }
    if list.len() > MAX_TOOLS {
        return Err(bad("tools", format!("at most {MAX_TOOLS} tools per request")));
    }
    let mut functions = Vec::with_capacity(list.len());
    for (i, tool) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(bad(&format!("{at}.type"), "only tools of type `function` are supported".into()));
        }
        let f = tool
            .get("function")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(&format!("{at}.function"), "`function` must be an object with a `name`".into()))?;
        let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
        let valid = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(bad(
                &format!("{at}.function.name"),
                "a function name is 1 to 64 of a-z, A-Z, 0-9, _ and -".into(),
            ));
        }
        if functions.iter().any(|g: &Function| g.name == name) {
            return Err(bad(&format!("{at}.function.name"), format!("two functions are named `{name}`")));
        }
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}, "additionalProperties": false}),
            Some(p @ (Value::Object(_) | Value::Bool(_))) => p.clone(),
            Some(_) => {
                return Err(bad(&format!("{at}.function.parameters"), "`parameters` must be a JSON Schema".into()))
            }
        };
        functions.push(Function {
            name: name.to_string(),
            description: f.get("description").and_then(Value::as_str).map(str::to_string),
            parameters,
            strict: f.get("strict").and_then(Value::as_bool).unwrap_or(false),
        });
    }
    let choice = match choice {
        None | Some(Value::Null) => Choice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => return Ok(None),
            "auto" => Choice::Auto,
            "required" => Choice::Required,
            _ => return Err(bad("tool_choice", "`tool_choice` is none, auto, required or a function".into())),
        },
        Some(v) => {
            let name = v
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|_| v.get("type").and_then(Value::as_str) == Some("function"))
                .ok_or_else(|| {
                    bad(
                        "tool_choice",
                        "a named `tool_choice` is {\"type\": \"function\", \"function\": {\"name\"}}".into(),
                    )
                })?;
            if !functions.iter().any(|f| f.name == name) {
                return Err(bad("tool_choice", format!("no tool is named `{name}`")));
            }
            Choice::Named(name.to_string())
        }
    };
    Ok(Some(Tools { functions, choice, parallel: parallel.unwrap_or(true) }))
}

impl Tools {
    /// Whether the model may answer in text instead of calling.
    pub fn auto(&self) -> bool {
        self.choice == Choice::Auto
    }

    /// The functions the output may call.
    fn callable(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(move |f| match &self.choice {
            Choice::Named(n) => &f.name == n,
            _ => true,
        })
    }

    /// Whether every callable function is `strict` (then the schema is compiled strict).
    pub fn strict(&self) -> bool {
        self.callable().all(|f| f.strict)
    }

    /// The JSON Schema of the output when it calls: one call, or (parallel) an array of
    /// calls. A `parameters` schema holding a `$ref` gets an `$id` of its own, so that its
    /// `#/…` references still resolve inside it once it is nested.
    pub fn schema(&self) -> Value {
        let calls: Vec<Value> = self
            .callable()
            .enumerate()
            .map(|(i, f)| {
                let mut parameters = f.parameters.clone();
                if let Value::Object(p) = &mut parameters {
                    if !p.contains_key("$id") && has_ref(&f.parameters) {
                        p.insert("$id".into(), json!(format!("https://constrain.invalid/tools/{i}/parameters.json")));
                    }
                }
                json!({
                    "type": "object",
                    "properties": {"name": {"const": f.name}, "arguments": parameters},
                    "required": ["name", "arguments"],
                    "additionalProperties": false
                })
            })
            .collect();
        let call =
            if calls.len() == 1 { calls.into_iter().next().unwrap_or(Value::Null) } else { json!({"anyOf": calls}) };
        if self.parallel {
            json!({"anyOf": [call, {"type": "array", "items": call, "minItems": 1, "maxItems": MAX_PARALLEL_CALLS}]})
        } else {
            call
        }
    }

    /// The system turn that tells the model which functions it has and how to call them.
    pub fn system_prompt(&self) -> String {
        let mut s = String::from("You can call functions. To call one, answer with only a JSON object ");
        s.push_str("{\"name\": <function name>, \"arguments\": <arguments object>}");
        if self.parallel {
            s.push_str(" (or a JSON array of such objects to call several)");
        }
        s.push_str(match self.choice {
            Choice::Auto => ". If no function helps, answer in plain text.\n\nFunctions:\n",
            _ => ". You must call a function.\n\nFunctions:\n",
        });
        for f in self.callable() {
            s.push_str("- ");
            s.push_str(&f.name);
            if let Some(d) = &f.description {
                s.push_str(": ");
                s.push_str(d);
            }
            s.push_str("\n  parameters: ");
            s.push_str(&constrain_llama::schema_without_annotations(&f.parameters).to_string());
            s.push('\n');
        }
        s
    }

    /// What distinguishes this constraint in the compiled-constraint cache.
    pub fn cache_text(&self) -> String {
        format!("tools:{}:{}:{}", self.auto(), self.strict(), self.schema())
    }
}

/// Whether `v` holds a `$ref` or `$dynamicRef` anywhere (iterative: no recursion whose
/// depth follows the request).
fn has_ref(v: &Value) -> bool {
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(m) => {
                if m.contains_key("$ref") || m.contains_key("$dynamicRef") || m.contains_key("$recursiveRef") {
                    return true;
                }
                todo.extend(m.values());
            }
            Value::Array(a) => todo.extend(a),
            _ => {}
        }
    }
    false
}

/// Whether `text` is a call under these tools rather than a text answer: its first byte is
/// the call's opening (the grammar's trigger).
pub fn is_call(tools: &Tools, text: &str) -> bool {
    match text.as_bytes().first() {
        Some(b'{') => true,
        Some(b'[') => tools.parallel,
        _ => false,
    }
}

/// `call | text`: the output is a call of `calls` (a compiled call schema, without run-time
/// checks) or text whose first byte is not a call's opening; empty output is text too.
pub fn call_or_text(calls: &Grammar, parallel: bool) -> Result<Grammar, constrain::grammar::Error> {
    let mut b = GrammarBuilder::new();
    // Declared in order, so every rule keeps its id and the bodies' references hold.
    for rule in calls.rules() {
        b.declare(&rule.name);
    }
    for (i, rule) in calls.rules().iter().enumerate() {
        b.define(constrain::grammar::RuleId(i as u32), rule.expr.clone());
    }
    for e in calls.exclusions() {
        let words: Vec<&str> = e.words.iter().filter_map(|w| std::str::from_utf8(w).ok()).collect();
        b.note_exclusion(e.rule, e.rest, &words);
    }
    let first = if parallel {
        Expr::Bytes(vec![(0, b'[' - 1), (b'[' + 1, b'{' - 1), (b'{' + 1, 0xFF)])
    } else {
        Expr::Bytes(vec![(0, b'{' - 1), (b'{' + 1, 0xFF)])
    };
    let text = b.add("text_answer", Expr::opt(Expr::seq([first, Expr::star(Expr::Bytes(vec![(0, 0xFF)]))])));
    let start = b.add("call_or_text", Expr::alt([Expr::Ref(calls.start()), Expr::Ref(text)]));
    b.build(start)
}

/// One call read from the output: the function's name and its arguments as JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The function.
    pub name: String,
    /// The arguments, a JSON text.
    pub arguments: String,
}

/// The calls in a call output (one object, or an array of them); `None` if it is not one
/// (which the grammar rules out).
pub fn parse_calls(text: &str) -> Option<Vec<Call>> {
    let value: Value = serde_json::from_str(text).ok()?;
    let one = |v: &Value| -> Option<Call> {
        let m: &Map<String, Value> = v.as_object()?;
        Some(Call { name: m.get("name")?.as_str()?.to_string(), arguments: m.get("arguments")?.to_string() })
    };
    match &value {
        Value::Array(items) if !items.is_empty() => items.iter().map(one).collect(),
        Value::Object(_) => one(&value).map(|c| vec![c]),
        _ => None,
    }
}

/// An assistant turn's `tool_calls` (from the conversation so far) as the text the model
/// would have written for them, so earlier calls read as the model's own format.
pub fn calls_as_text(calls: &[Value]) -> Result<String, String> {
    let mut out = Vec::with_capacity(calls.len());
    for c in calls {
        let f = c.get("function").ok_or("a tool call needs `function`")?;
        let name = f.get("name").and_then(Value::as_str).ok_or("a tool call needs `function.name`")?;
        let args = match f.get("arguments") {
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
            Some(v) => v.clone(),
            None => json!({}),
        };
        out.push(json!({"name": name, "arguments": args}));
    }
    Ok(match out.len() {
        1 => out.remove(0).to_string(),
        _ => Value::Array(out).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}])
    }

    #[test]
    fn choices_parse_and_bad_ones_are_named() {
        let t = parse(Some(weather()), None, None).unwrap().unwrap();
        assert_eq!((t.choice.clone(), t.parallel), (Choice::Auto, true));
        assert!(parse(Some(weather()), Some(json!("none")), None).unwrap().is_none());
        let t = parse(Some(weather()), Some(json!({"type": "function", "function": {"name": "add"}})), Some(false));
        let t = t.unwrap().unwrap();
        assert_eq!(t.choice, Choice::Named("add".into()));
        assert_eq!(t.schema()["properties"]["name"]["const"], "add");
        for (tools, choice) in [
            (Some(weather()), Some(json!({"type": "function", "function": {"name": "nope"}}))),
            (Some(weather()), Some(json!("sometimes"))),
            (Some(json!([])), None),
            (Some(json!({"a": 1})), None),
            (Some(json!([{"type": "function", "function": {"name": "a b"}}])), None),
            (Some(json!([{"type": "retrieval"}])), None),
            (Some(json!([{"type": "function", "function": {"name": "x", "parameters": 3}}])), None),
            (None, Some(json!("required"))),
        ] {
            let e = parse(tools.clone(), choice.clone(), None).unwrap_err();
            assert_eq!(e.status, 400, "{tools:?} {choice:?}");
            assert!(e.param.is_some());
        }
    }

    #[test]
    fn calls_read_back_and_the_grammar_takes_both() {
        let calls = parse_calls(r#"{"name":"add","arguments":{"a":1,"b":2}}"#).unwrap();
        assert_eq!(calls, vec![Call { name: "add".into(), arguments: r#"{"a":1,"b":2}"#.into() }]);
        let calls = parse_calls(r#"[{"name":"a","arguments":{}},{"name":"b","arguments":{"x":[1]}}]"#).unwrap();
        assert_eq!(calls.len(), 2);
        assert!(parse_calls("hello").is_none());
        let t = parse(Some(weather()), None, None).unwrap().unwrap();
        let compiled =
            constrain::schema::compile(&t.schema(), &constrain::schema::Options::default().with_runtime_checks(false))
                .unwrap();
        let g = call_or_text(compiled.grammar(), t.parallel).unwrap();
        let pda = constrain::automaton::Pda::build(&g, &constrain::Limits::default()).unwrap();
        for ok in [
            r#"{"name":"add","arguments":{"a":1,"b":2}}"#,
            r#"[{"name":"get_weather","arguments":{"city":"Oslo"}}]"#,
            "It is sunny.",
            "",
            " {not a call",
        ] {
            assert!(pda.matches(ok.as_bytes()), "{ok}");
        }
        for bad in [r#"{"name":"add","arguments":{"a":"x","b":2}}"#, r#"{"name":"mul","arguments":{}}"#, "[1]"] {
            assert!(!pda.matches(bad.as_bytes()), "{bad}");
        }
        assert!(is_call(&t, "[{") && is_call(&t, "{") && !is_call(&t, "x"));
    }

    #[test]
    fn refs_inside_parameters_still_resolve() {
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"p": {"$ref": "#/$defs/pos"}}, "required": ["p"],
            "$defs": {"pos": {"type": "integer", "minimum": 1}}}}}]);
        let t = parse(Some(tools), Some(json!("required")), Some(false)).unwrap().unwrap();
        let compiled = constrain::schema::compile(&t.schema(), &constrain::schema::Options::default()).unwrap();
        let pda = constrain::automaton::Pda::build(compiled.grammar(), &constrain::Limits::default()).unwrap();
        assert!(pda.matches(br#"{"name":"f","arguments":{"p":3}}"#));
        assert!(!pda.matches(br#"{"name":"f","arguments":{"p":0}}"#));
        assert!(!pda.matches(br#"{"name":"f","arguments":{"p":"x"}}"#));
    }
}

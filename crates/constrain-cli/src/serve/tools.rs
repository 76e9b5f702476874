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
use serde_json::{json, Value};

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
/// (which the grammar rules out). Each call's `arguments` is its text as generated (what
/// [`CallStream`] streams), so a streamed call and the same call not streamed are equal.
pub fn parse_calls(text: &str) -> Option<Vec<Call>> {
    let value: Value = serde_json::from_str(text).ok()?;
    let well_formed = |v: &Value| -> bool {
        v.as_object().is_some_and(|m| m.get("name").is_some_and(Value::is_string) && m.contains_key("arguments"))
    };
    let n = match &value {
        Value::Array(items) if !items.is_empty() && items.iter().all(well_formed) => items.len(),
        Value::Object(_) if well_formed(&value) => 1,
        _ => return None,
    };
    let mut calls: Vec<Call> = Vec::with_capacity(n);
    for delta in CallStream::default().push(text) {
        match delta {
            CallDelta::Open { index, name } if index == calls.len() => {
                calls.push(Call { name, arguments: String::new() });
            }
            CallDelta::Arguments { index, text } => calls.get_mut(index)?.arguments.push_str(&text),
            CallDelta::Open { .. } => return None,
        }
    }
    (calls.len() == n).then_some(calls)
}

/// What [`CallStream::push`] learned of the calls from a piece of output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallDelta {
    /// Call `index` begins, and its function is `name`.
    Open {
        /// The call's position in the output, from 0.
        index: usize,
        /// The function called.
        name: String,
    },
    /// More of call `index`'s arguments text (after its `Open`).
    Arguments {
        /// The call's position in the output.
        index: usize,
        /// The next bytes of its `arguments` value, as generated.
        text: String,
    },
}

/// Where a [`CallStream`] is at the level of a call object's members.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Expect {
    #[default]
    Key,
    Colon,
    Value,
    Comma,
}

/// The member value a [`CallStream`] is reading at a call object's level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Reading {
    #[default]
    Nothing,
    Key,
    Name,
    /// `arguments`: a container (ends when its bracket closes), a string (ends at its
    /// closing quote) or another scalar (ends before the next `,`, `}` or space).
    Arguments(ArgKind),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArgKind {
    Container,
    String,
    Scalar,
}

/// Reads a call output (a call object `{"name": …, "arguments": …}`, or an array of them)
/// as it is generated, so that a server can stream each call's name as soon as it is known
/// and its arguments piece by piece, as OpenAI's streaming `tool_calls` deltas do.
///
/// A byte scanner over the JSON text: it tracks strings and brackets, and at the level of a
/// call object's members reads the keys, decodes the `name` string and passes the
/// `arguments` value's bytes through unchanged. Arguments generated before the name (the
/// grammar lets members come in either order) are held until the name is known. It assumes
/// the text is a call output, as the grammar guarantees; on other text it reports what it
/// can and never panics.
#[derive(Clone, Debug, Default)]
pub struct CallStream {
    /// The open brackets, outermost first.
    stack: Vec<u8>,
    in_string: bool,
    escape: bool,
    expect: Expect,
    reading: Reading,
    /// The key or name string being read (without its quotes).
    buf: Vec<u8>,
    /// The last key read at a call's level.
    key: Vec<u8>,
    /// Calls begun so far.
    calls: usize,
    /// Whether the current call's name is known (its `Open` was reported).
    named: bool,
    /// The current call's argument bytes read before its name.
    pending: Vec<u8>,
}

impl CallStream {
    /// Reads the next piece of output; what it tells of the calls, in order (consecutive
    /// argument bytes of a call merged into one delta).
    pub fn push(&mut self, piece: &str) -> Vec<CallDelta> {
        let mut out: Vec<(usize, Option<String>, Vec<u8>)> = Vec::new();
        for &b in piece.as_bytes() {
            self.byte(b, &mut out);
        }
        out.into_iter()
            .map(|(index, name, bytes)| match name {
                Some(name) => CallDelta::Open { index, name },
                None => CallDelta::Arguments { index, text: String::from_utf8_lossy(&bytes).into_owned() },
            })
            .collect()
    }

    /// Whether the innermost open bracket is a call object's: the top-level object, or an
    /// object directly inside the top-level array.
    fn at_call(&self) -> bool {
        matches!(self.stack.as_slice(), [b'{'] | [b'[', b'{'])
    }

    /// One argument byte of the current call: reported, or held until the name is known.
    fn argument(&mut self, b: u8, out: &mut Vec<(usize, Option<String>, Vec<u8>)>) {
        if !self.named {
            self.pending.push(b);
            return;
        }
        let index = self.calls.saturating_sub(1);
        match out.last_mut() {
            Some((i, None, bytes)) if *i == index => bytes.push(b),
            _ => out.push((index, None, vec![b])),
        }
    }

    fn byte(&mut self, b: u8, out: &mut Vec<(usize, Option<String>, Vec<u8>)>) {
        if self.in_string {
            let closing = !self.escape && b == b'"';
            match self.reading {
                Reading::Arguments(_) => self.argument(b, out),
                Reading::Key | Reading::Name if !closing => self.buf.push(b),
                _ => {}
            }
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if closing {
                self.in_string = false;
                if self.at_call() {
                    self.string_ended(out);
                }
            }
            return;
        }
        let at_call = self.at_call();
        if at_call
            && self.reading == Reading::Arguments(ArgKind::Scalar)
            && matches!(b, b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
        {
            self.reading = Reading::Nothing;
            self.expect = Expect::Comma;
        }
        if matches!(self.reading, Reading::Arguments(_)) {
            self.argument(b, out);
        }
        match b {
            b'"' => {
                self.in_string = true;
                if at_call {
                    match self.expect {
                        Expect::Key => {
                            self.reading = Reading::Key;
                            self.buf.clear();
                        }
                        Expect::Value => self.value_starts(b, out),
                        _ => {}
                    }
                }
            }
            b'{' | b'[' => {
                if at_call && self.expect == Expect::Value {
                    self.value_starts(b, out);
                }
                self.stack.push(b);
                if b == b'{' && self.at_call() {
                    self.calls += 1;
                    self.named = false;
                    self.pending.clear();
                    self.expect = Expect::Key;
                    self.reading = Reading::Nothing;
                }
            }
            b'}' | b']' => {
                self.stack.pop();
                if self.at_call() && self.reading == Reading::Arguments(ArgKind::Container) {
                    self.reading = Reading::Nothing;
                    self.expect = Expect::Comma;
                }
            }
            b':' if at_call && self.expect == Expect::Colon => self.expect = Expect::Value,
            b',' if at_call => self.expect = Expect::Key,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ if at_call && self.expect == Expect::Value => self.value_starts(b, out),
            _ => {}
        }
    }

    /// A member's value begins at a call's level with byte `b`.
    fn value_starts(&mut self, b: u8, out: &mut Vec<(usize, Option<String>, Vec<u8>)>) {
        self.expect = Expect::Comma;
        self.reading = match self.key.as_slice() {
            b"arguments" => {
                let kind = match b {
                    b'{' | b'[' => ArgKind::Container,
                    b'"' => ArgKind::String,
                    _ => ArgKind::Scalar,
                };
                self.argument(b, out);
                Reading::Arguments(kind)
            }
            b"name" if b == b'"' => {
                self.buf.clear();
                Reading::Name
            }
            _ => Reading::Nothing,
        };
    }

    /// A string at a call's level closed: a key, the name, or string arguments.
    fn string_ended(&mut self, out: &mut Vec<(usize, Option<String>, Vec<u8>)>) {
        match self.reading {
            Reading::Key => {
                self.key = std::mem::take(&mut self.buf);
                self.expect = Expect::Colon;
            }
            Reading::Name => {
                let quoted = format!("\"{}\"", String::from_utf8_lossy(&self.buf));
                let name =
                    serde_json::from_str::<String>(&quoted).unwrap_or_else(|_| quoted[1..quoted.len() - 1].into());
                let index = self.calls.saturating_sub(1);
                out.push((index, Some(name), Vec::new()));
                self.named = true;
                let pending = std::mem::take(&mut self.pending);
                if !pending.is_empty() {
                    out.push((index, None, pending));
                }
            }
            Reading::Arguments(_) | Reading::Nothing => {}
        }
        self.reading = Reading::Nothing;
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

    /// Reads `text` in pieces of `size` bytes (at char boundaries) and reassembles the calls.
    fn streamed(text: &str, size: usize) -> Vec<(String, String)> {
        let mut stream = CallStream::default();
        let mut calls: Vec<(String, String)> = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + size).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            for d in stream.push(&text[at..end]) {
                match d {
                    CallDelta::Open { index, name } => {
                        assert_eq!(index, calls.len(), "{text}");
                        calls.push((name, String::new()));
                    }
                    CallDelta::Arguments { index, text } => calls[index].1.push_str(&text),
                }
            }
            at = end;
        }
        calls
    }

    #[test]
    fn calls_stream_piece_by_piece_and_equal_the_whole() {
        let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
            (r#"{"name":"add","arguments":{"a":1,"b":{"c":[2,"}"]}}}"#, vec![("add", r#"{"a":1,"b":{"c":[2,"}"]}}"#)]),
            (
                "{\n  \"name\": \"get_weather\",\n  \"arguments\": {\"city\": \"Os\\\"lo \u{e9}\"}\n}",
                vec![("get_weather", "{\"city\": \"Os\\\"lo \u{e9}\"}")],
            ),
            (r#"{"arguments":{"x":"name"},"name":"late"}"#, vec![("late", r#"{"x":"name"}"#)]),
            (
                r#"[{"name":"a","arguments":{}},{"name":"b\u0041","arguments":[1, 2]}]"#,
                vec![("a", "{}"), ("bA", "[1, 2]")],
            ),
            (r#"{"name":"s","arguments":"just \"text\""}"#, vec![("s", r#""just \"text\"""#)]),
            (r#"{"name":"n","arguments":12.5e3 }"#, vec![("n", "12.5e3")]),
        ];
        for (text, want) in cases {
            let want: Vec<(String, String)> = want.iter().map(|(n, a)| (n.to_string(), a.to_string())).collect();
            for size in [1, 2, 3, 7, text.len()] {
                assert_eq!(streamed(text, size), want, "{text} in pieces of {size}");
            }
            let whole = parse_calls(text).unwrap();
            let whole: Vec<(String, String)> = whole.into_iter().map(|c| (c.name, c.arguments)).collect();
            assert_eq!(whole, want, "{text}");
        }
        // Not a call output: no panic, and `parse_calls` refuses it.
        for junk in ["", "}}]]", "{\"name\":3}", "[", "\"\\", "{\"arguments\":{\"a\":1}}"] {
            let _ = streamed(junk, 1);
            assert!(parse_calls(junk).is_none(), "{junk}");
        }
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

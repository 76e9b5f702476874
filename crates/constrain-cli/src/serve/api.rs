//! The OpenAI request and response shapes `constrain serve` speaks, and their checks.
//!
//! Input: a request body already parsed as JSON. Output: a [`Job`] (prompt, constraint
//! spec, sampling settings, stop strings) or an [`ApiError`] naming the offending field.
//! Unknown fields are ignored, as OpenAI-compatible servers do.
use super::tools::{self, Tools};
use constrain::sampling::SamplerSettings;
use constrain::TokenId;
use constrain_llama::beam::BeamShape;
use constrain_llama::BatchPrompt;
use serde::Deserialize;
use serde_json::{json, Value};

/// An OpenAI-style error: HTTP status plus the `{"error": {...}}` body's fields.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// Human-readable message.
    pub message: String,
    /// `invalid_request_error`, `server_error`, …
    pub kind: &'static str,
    /// The request field at fault, if any.
    pub param: Option<String>,
    /// A short machine-readable code, if any.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A 400 about `param`.
    pub fn bad(param: impl Into<Option<String>>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.into(),
            code: None,
        }
    }

    /// Sets the code.
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// An error with any status.
    pub fn new(status: u16, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), kind, param: None, code: None }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

/// A chat message's content: a string or a list of parts (only text parts are used).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    /// An assistant turn's earlier calls.
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

/// `stop`: one string or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `prompt` of `/v1/completions`: a string or a list of one string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PromptField {
    One(String),
    Many(Vec<String>),
}

/// Every field either endpoint reads.
#[derive(Debug, Deserialize)]
struct Request {
    #[serde(default)]
    messages: Option<Vec<Message>>,
    #[serde(default)]
    prompt: Option<PromptField>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_p: Option<f32>,
    #[serde(default)]
    top_k: Option<i64>,
    #[serde(default)]
    min_p: Option<f32>,
    #[serde(default)]
    seed: Option<i64>,
    #[serde(default)]
    presence_penalty: Option<f32>,
    #[serde(default)]
    frequency_penalty: Option<f32>,
    #[serde(default)]
    repeat_penalty: Option<f32>,
    #[serde(default)]
    logit_bias: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    typical_p: Option<f32>,
    #[serde(default)]
    mirostat: Option<i64>,
    #[serde(default)]
    mirostat_tau: Option<f32>,
    #[serde(default)]
    mirostat_eta: Option<f32>,
    #[serde(default)]
    stop: Option<Stop>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    n: Option<u64>,
    #[serde(default)]
    best_of: Option<u64>,
    #[serde(default)]
    use_beam_search: Option<bool>,
    #[serde(default)]
    length_penalty: Option<f32>,
    /// Chat: `true`/`false`; completions: the number of alternatives per token.
    #[serde(default)]
    logprobs: Option<Value>,
    #[serde(default)]
    top_logprobs: Option<u64>,
    #[serde(default)]
    response_format: Option<Value>,
    #[serde(default)]
    grammar: Option<String>,
    #[serde(default)]
    json_schema: Option<Value>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    tools: Option<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
}

/// What to constrain the output to.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstraintSpec {
    /// A JSON Schema (`json_object` is the schema `{"type": "object"}`); `strict` forbids
    /// properties the schema does not name. `param` is the request field, for errors.
    Schema {
        /// The schema.
        schema: Value,
        /// OpenAI's `strict`.
        strict: bool,
        /// The request field holding it.
        param: &'static str,
    },
    /// A GBNF grammar (llama.cpp's `grammar`).
    Gbnf(String),
    /// A regular expression the whole output must match.
    Regex(String),
    /// Function calls (or, with `tool_choice: auto`, calls or text).
    Tools(Tools),
}

impl ConstraintSpec {
    /// A stable key for the compiled-constraint cache.
    pub fn cache_key(&self) -> u64 {
        let text = match self {
            ConstraintSpec::Schema { schema, strict, .. } => format!("schema:{strict}:{schema}"),
            ConstraintSpec::Gbnf(g) => format!("gbnf:{g}"),
            ConstraintSpec::Regex(r) => format!("regex:{r}"),
            ConstraintSpec::Tools(t) => t.cache_text(),
        };
        xxhash_rust::xxh3::xxh3_64(text.as_bytes())
    }
}

/// A checked request.
#[derive(Debug)]
pub struct Job {
    /// The prompt.
    pub prompt: BatchPrompt,
    /// The constraint, if any.
    pub constraint: Option<ConstraintSpec>,
    /// Sampling settings.
    pub sampler: SamplerSettings,
    /// Token budget.
    pub max_tokens: usize,
    /// Stop strings (at most 4, none empty).
    pub stop: Vec<String>,
    /// Server-sent events instead of one body.
    pub stream: bool,
    /// Whether a streamed response ends with a usage chunk.
    pub include_usage: bool,
    /// The functions the output may call (also in [`Job::constraint`]).
    pub tools: Option<Tools>,
    /// Choices to generate (OpenAI's `n`, at least 1); the server caps it at its batch size.
    pub n: usize,
    /// Log-probabilities asked for: `Some(alternatives per token)` (chat: `logprobs: true`
    /// with `top_logprobs`; completions: `logprobs: N`).
    pub logprobs: Option<usize>,
    /// Sequences to generate: `n`, or OpenAI's `best_of` when it samples more than `n`
    /// and returns the `n` with the highest log-probability per token.
    pub choices: usize,
    /// Beam search (vLLM's `use_beam_search`, with `best_of` beams, default `n`, and
    /// `length_penalty`): the `n` best beams are the choices. `None`: sample.
    pub beams: Option<BeamShape>,
}

/// Reads a request of either endpoint (`chat`: `/v1/chat/completions`).
pub fn parse(body: &[u8], chat: bool, default_max_tokens: usize) -> Result<Job, ApiError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad(None, format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad(None, "the body must be a JSON object"));
    }
    let mut r: Request = serde_json::from_value(value).map_err(|e| ApiError::bad(None, format!("bad request: {e}")))?;
    let prompt = if chat {
        let messages =
            r.messages.take().ok_or_else(|| ApiError::bad("messages".to_string(), "`messages` is required"))?;
        if messages.is_empty() {
            return Err(ApiError::bad("messages".to_string(), "`messages` must not be empty"));
        }
        let mut turns = Vec::with_capacity(messages.len());
        for (i, m) in messages.into_iter().enumerate() {
            let text = match m.content {
                None if m.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) => {
                    let calls = m.tool_calls.as_deref().unwrap_or_default();
                    tools::calls_as_text(calls).map_err(|e| ApiError::bad(format!("messages[{i}].tool_calls"), e))?
                }
                None => String::new(),
                Some(Content::Text(t)) => t,
                Some(Content::Parts(parts)) => {
                    let mut text = String::new();
                    for p in parts {
                        match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                            (Some("text"), Some(t)) => text.push_str(t),
                            _ => {
                                return Err(ApiError::bad(
                                    format!("messages[{i}].content"),
                                    "only text content parts are supported",
                                ))
                            }
                        }
                    }
                    text
                }
            };
            turns.push((m.role, text));
        }
        BatchPrompt::Chat(turns)
    } else {
        match r.prompt.take() {
            Some(PromptField::One(p)) => BatchPrompt::Raw(p),
            Some(PromptField::Many(mut ps)) if ps.len() == 1 => BatchPrompt::Raw(ps.remove(0)),
            Some(PromptField::Many(_)) => {
                return Err(ApiError::bad("prompt".to_string(), "only one prompt per request is supported"))
            }
            None => return Err(ApiError::bad("prompt".to_string(), "`prompt` is required")),
        }
    };
    if prompt == BatchPrompt::Raw(String::new()) {
        return Err(ApiError::bad("prompt".to_string(), "`prompt` must not be empty"));
    }
    let n = match r.n {
        None => 1,
        Some(n @ 1..=256) => n as usize,
        Some(_) => {
            return Err(ApiError::bad("n".to_string(), "n is from 1 to 256 (and at most the server's --parallel)"))
        }
    };
    let most = constrain_llama::logprobs::MAX_TOP_LOGPROBS as u64;
    let logprobs = match (chat, r.logprobs.take(), r.top_logprobs) {
        (_, None | Some(Value::Null) | Some(Value::Bool(false)), None) => None,
        (true, None | Some(Value::Null) | Some(Value::Bool(false)), Some(_)) => {
            return Err(ApiError::bad("top_logprobs".to_string(), "top_logprobs needs logprobs: true"))
        }
        (true, Some(Value::Bool(true)), top) => match top.unwrap_or(0) {
            n if n <= most => Some(n as usize),
            _ => return Err(ApiError::bad("top_logprobs".to_string(), format!("top_logprobs is from 0 to {most}"))),
        },
        (false, Some(v), None) => match v.as_u64() {
            Some(n) if n <= most => Some(n as usize),
            _ => return Err(ApiError::bad("logprobs".to_string(), format!("logprobs is a number from 0 to {most}"))),
        },
        (true, Some(_), _) => return Err(ApiError::bad("logprobs".to_string(), "logprobs is true or false")),
        (false, _, Some(_)) => {
            return Err(ApiError::bad("top_logprobs".to_string(), "completions take logprobs: N, not top_logprobs"))
        }
    };
    let max_tokens = match r.max_completion_tokens.or(r.max_tokens) {
        None => default_max_tokens,
        Some(0) => return Err(ApiError::bad("max_tokens".to_string(), "max_tokens must be at least 1")),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let sampler = sampler_settings(&r)?;
    let stop = match r.stop.take() {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    };
    if stop.len() > 4 || stop.iter().any(String::is_empty) {
        return Err(ApiError::bad("stop".to_string(), "`stop` takes at most 4 non-empty strings"));
    }
    let mut constraint =
        constraint_spec(r.response_format.take(), r.grammar.take(), r.json_schema.take(), r.regex.take())?;
    let tools = if chat { tools::parse(r.tools.take(), r.tool_choice.take(), r.parallel_tool_calls)? } else { None };
    let mut prompt = prompt;
    if let Some(t) = &tools {
        if constraint.is_some() {
            return Err(ApiError::bad(
                "tools".to_string(),
                "tools cannot be combined with response_format (json), grammar, json_schema or regex",
            ));
        }
        if !stop.is_empty() {
            return Err(ApiError::bad("stop".to_string(), "`stop` is not supported with tools"));
        }
        constraint = Some(ConstraintSpec::Tools(t.clone()));
        // The functions go into the system turn (the chat template has no place for them).
        if let BatchPrompt::Chat(turns) = &mut prompt {
            let about = t.system_prompt();
            match turns.first_mut() {
                Some((role, content)) if role == "system" => *content = format!("{content}\n\n{about}"),
                _ => turns.insert(0, ("system".to_string(), about)),
            }
        }
    }
    let include_usage =
        r.stream_options.as_ref().and_then(|o| o.get("include_usage")).and_then(Value::as_bool).unwrap_or(false);
    let stream = r.stream.unwrap_or(false);
    let (choices, beams) = choices(&r, n, stream)?;
    Ok(Job { prompt, constraint, sampler, max_tokens, stop, stream, include_usage, tools, n, logprobs, choices, beams })
}

/// The sequences to generate and whether by beam search, from `n`, `best_of`,
/// `use_beam_search` and `length_penalty`.
fn choices(r: &Request, n: usize, stream: bool) -> Result<(usize, Option<BeamShape>), ApiError> {
    let most = constrain_llama::beam::MAX_BEAMS;
    let best_of = match r.best_of {
        None => n,
        Some(b) if (n as u64..=256).contains(&b) => b as usize,
        Some(_) => return Err(ApiError::bad("best_of".to_string(), "best_of is from n to 256")),
    };
    if r.use_beam_search == Some(true) {
        if best_of > most {
            return Err(ApiError::bad("best_of".to_string(), format!("beam search keeps at most {most} beams")));
        }
        let length_penalty = r.length_penalty.unwrap_or(1.0);
        if !length_penalty.is_finite() {
            return Err(ApiError::bad("length_penalty".to_string(), "length_penalty must be a finite number"));
        }
        return Ok((n, Some(BeamShape { beams: best_of, length_penalty })));
    }
    if r.length_penalty.is_some() {
        return Err(ApiError::bad("length_penalty".to_string(), "length_penalty needs use_beam_search: true"));
    }
    if best_of > n && stream {
        return Err(ApiError::bad("best_of".to_string(), "best_of above n cannot be streamed"));
    }
    Ok((best_of, None))
}

/// The bias of a banned token (`logit_bias` -100).
const BAN: f32 = -1.0e30;

/// The sampling chain: llama.cpp's defaults for every field the request leaves out.
fn sampler_settings(r: &Request) -> Result<SamplerSettings, ApiError> {
    let mut s = SamplerSettings::default();
    if let Some(t) = r.temperature {
        s.temperature = t;
    }
    if let Some(p) = r.top_p {
        s.top_p = p;
    }
    if let Some(k) = r.top_k {
        s.top_k = usize::try_from(k.max(0)).unwrap_or(0);
    }
    if let Some(p) = r.min_p {
        s.min_p = p;
    }
    if let Some(p) = r.presence_penalty {
        s.presence_penalty = p;
    }
    if let Some(p) = r.frequency_penalty {
        s.frequency_penalty = p;
    }
    if let Some(p) = r.repeat_penalty {
        s.repeat_penalty = p;
    }
    if let Some(p) = r.typical_p {
        s.typical_p = p;
    }
    if let Some(m) = r.mirostat {
        s.mirostat = u8::try_from(m)
            .ok()
            .filter(|m| *m <= 2)
            .ok_or_else(|| ApiError::bad("mirostat".to_string(), "mirostat is 0 (off), 1 (v1) or 2 (v2)"))?;
    }
    if let Some(t) = r.mirostat_tau {
        s.mirostat_tau = t;
    }
    if let Some(e) = r.mirostat_eta {
        s.mirostat_eta = e;
    }
    s.seed = r.seed.map(|x| x as u64);
    if let Some(bias) = &r.logit_bias {
        for (key, value) in bias {
            let id: u32 = key
                .parse()
                .map_err(|_| ApiError::bad("logit_bias".to_string(), format!("`{key}` is not a token id")))?;
            let b = value
                .as_f64()
                .filter(|b| (-100.0..=100.0).contains(b))
                .ok_or_else(|| ApiError::bad("logit_bias".to_string(), "biases are numbers from -100 to 100"))?;
            // OpenAI: -100 bans the token. The sampler takes finite biases only (-inf would be
            // refused), and -1e30 leaves the token no probability.
            let b = if b <= -100.0 { BAN } else { b as f32 };
            s.logit_bias.push((TokenId(id), b));
        }
    }
    s.validate().map_err(|e| ApiError::bad(request_field(&e), e.to_string()))?;
    Ok(s)
}

/// The request field a settings error is about, for the new sampling fields (others: none).
fn request_field(e: &constrain::sampling::Error) -> Option<String> {
    let constrain::sampling::Error::InvalidSetting { name, .. } = e else { return None };
    let field = match *name {
        "typical" => "typical_p",
        "mirostat" => "mirostat",
        "mirostat-ent" => "mirostat_tau",
        "mirostat-lr" => "mirostat_eta",
        _ => return None,
    };
    Some(field.to_string())
}

/// At most one of `response_format` (non-text), `grammar`, `json_schema` and `regex`.
fn constraint_spec(
    response_format: Option<Value>,
    grammar: Option<String>,
    json_schema: Option<Value>,
    regex: Option<String>,
) -> Result<Option<ConstraintSpec>, ApiError> {
    let mut specs = Vec::new();
    if let Some(rf) = response_format {
        let param = "response_format".to_string();
        match rf.get("type").and_then(Value::as_str) {
            Some("text") => {}
            Some("json_object") => specs.push(ConstraintSpec::Schema {
                schema: json!({"type": "object"}),
                strict: false,
                param: "response_format",
            }),
            Some("json_schema") => {
                let js = rf
                    .get("json_schema")
                    .ok_or_else(|| ApiError::bad(param.clone(), "`response_format.json_schema` is required"))?;
                let schema = js.get("schema").cloned().unwrap_or_else(|| json!({}));
                let strict = js.get("strict").and_then(Value::as_bool).unwrap_or(false);
                specs.push(ConstraintSpec::Schema { schema, strict, param: "response_format.json_schema.schema" });
            }
            _ => {
                return Err(ApiError::bad(
                    "response_format.type".to_string(),
                    "`response_format.type` must be text, json_object or json_schema",
                ))
            }
        }
    }
    if let Some(g) = grammar {
        specs.push(ConstraintSpec::Gbnf(g));
    }
    if let Some(schema) = json_schema {
        specs.push(ConstraintSpec::Schema { schema, strict: false, param: "json_schema" });
    }
    if let Some(r) = regex {
        specs.push(ConstraintSpec::Regex(r));
    }
    if specs.len() > 1 {
        return Err(ApiError::bad(None, "give at most one of response_format (json), grammar, json_schema, regex"));
    }
    Ok(specs.pop())
}

/// The OpenAI `finish_reason`: `stop` when the model, the grammar or a stop string ended the
/// output, `length` when the token budget did (closing mode completing a constrained output
/// included: the document is valid but shorter than the model wanted).
pub fn finish_reason(stop: constrain_llama::StopReason, stop_string: bool) -> &'static str {
    use constrain_llama::StopReason as S;
    match stop {
        _ if stop_string => "stop",
        S::Finished | S::Eos => "stop",
        S::MaxTokens | S::Closed => "length",
    }
}

/// Holds back text that may be the start of a stop string, and cuts the output at the first
/// complete one.
#[derive(Debug, Default)]
pub struct StopFilter {
    stops: Vec<String>,
    text: String,
    emitted: usize,
    /// A stop string was found (the text ends before it).
    pub hit: bool,
}

impl StopFilter {
    /// A filter for `stops`.
    pub fn new(stops: Vec<String>) -> StopFilter {
        StopFilter { stops, ..StopFilter::default() }
    }

    /// Adds generated text; returns the part that is safe to send.
    pub fn push(&mut self, piece: &str) -> String {
        if self.hit {
            return String::new();
        }
        self.text.push_str(piece);
        if self.stops.is_empty() {
            return self.take(self.text.len());
        }
        let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
        let mut from = self.emitted.saturating_sub(longest);
        while !self.text.is_char_boundary(from) {
            from -= 1;
        }
        let found = self.stops.iter().filter_map(|s| self.text[from..].find(s.as_str()).map(|p| from + p)).min();
        if let Some(at) = found {
            self.hit = true;
            self.text.truncate(at);
            return self.take(at);
        }
        // Keep back the longest tail that starts some stop string.
        let mut keep = 0;
        for s in &self.stops {
            for n in (1..s.len().min(self.text.len() + 1)).rev() {
                if s.is_char_boundary(n) && self.text.ends_with(&s[..n]) {
                    keep = keep.max(n);
                    break;
                }
            }
        }
        let end = (self.text.len() - keep).max(self.emitted);
        self.take(end)
    }

    /// The rest of the held-back text, at the end of generation.
    pub fn finish(&mut self) -> String {
        self.take(self.text.len())
    }

    fn take(&mut self, end: usize) -> String {
        let mut end = end.min(self.text.len());
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        if end <= self.emitted {
            return String::new();
        }
        let out = self.text[self.emitted..end].to_string();
        self.emitted = end;
        out
    }
}

/// OpenAI's `logprobs` of a choice whose text is `text` (after stop strings: the tokens that
/// begin past its end are left out). Chat: `{"content": [{token, logprob, bytes,
/// top_logprobs}]}`; completions: `{tokens, token_logprobs, top_logprobs, text_offset}`.
/// A token with no probability has -9999 (JSON has no -inf).
pub fn logprobs_json(
    vocab: &constrain::vocab::Vocabulary,
    chat: bool,
    lps: &[constrain_llama::TokenLogprob],
    text: &str,
) -> Value {
    let finite = |l: f32| if l.is_finite() { f64::from(l) } else { -9999.0 };
    let bytes = |t: TokenId| vocab.token_bytes(t).to_vec();
    let piece = |t: TokenId| String::from_utf8_lossy(vocab.token_bytes(t)).into_owned();
    let mut offset = 0;
    let mut kept = Vec::new();
    for lp in lps {
        if offset >= text.len() {
            break;
        }
        kept.push((offset, lp));
        offset += vocab.token_bytes(lp.token).len();
    }
    if chat {
        let content: Vec<Value> = kept
            .iter()
            .map(|(_, lp)| {
                let top: Vec<Value> = lp
                    .top
                    .iter()
                    .map(|&(t, l)| json!({"token": piece(t), "logprob": finite(l), "bytes": bytes(t)}))
                    .collect();
                json!({"token": piece(lp.token), "logprob": finite(lp.logprob), "bytes": bytes(lp.token), "top_logprobs": top})
            })
            .collect();
        return json!({"content": content});
    }
    let tokens: Vec<String> = kept.iter().map(|(_, lp)| piece(lp.token)).collect();
    let token_logprobs: Vec<f64> = kept.iter().map(|(_, lp)| finite(lp.logprob)).collect();
    let top: Vec<Value> = kept
        .iter()
        .map(|(_, lp)| {
            let m: serde_json::Map<String, Value> = lp.top.iter().map(|&(t, l)| (piece(t), json!(finite(l)))).collect();
            Value::Object(m)
        })
        .collect();
    let offsets: Vec<usize> = kept.iter().map(|(o, _)| *o).collect();
    json!({"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": offsets})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_cut_and_hold_back() {
        let mut f = StopFilter::new(vec!["END".into()]);
        assert_eq!(f.push("abc E"), "abc ");
        assert_eq!(f.push("N"), "");
        assert_eq!(f.push("x"), "ENx");
        assert_eq!(f.push("yEND tail"), "y");
        assert!(f.hit);
        assert_eq!(f.finish(), "");
        let mut f = StopFilter::new(Vec::new());
        assert_eq!(f.push("é"), "é");
    }

    #[test]
    fn requests_parse_and_bad_fields_are_named() {
        let job = parse(
            br#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"seed":3,"temperature":0,
                "response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer"},"strict":true}}}"#,
            true,
            100,
        )
        .unwrap();
        assert_eq!(job.max_tokens, 5);
        assert_eq!(job.sampler.seed, Some(3));
        assert!(matches!(job.constraint, Some(ConstraintSpec::Schema { strict: true, .. })));
        let job = parse(br#"{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":3}"#, true, 1);
        assert_eq!(job.unwrap().logprobs, Some(3));
        assert_eq!(parse(br#"{"prompt":"x","logprobs":2}"#, false, 1).unwrap().logprobs, Some(2));
        assert_eq!(parse(br#"{"prompt":"x","logprobs":null}"#, false, 1).unwrap().logprobs, None);
        for bad in [
            &br#"{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":21}"#[..],
            br#"{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2}"#,
            br#"{"messages":[{"role":"user","content":"hi"}],"logprobs":3}"#,
        ] {
            assert_eq!(parse(bad, true, 1).unwrap_err().status, 400);
        }
        assert_eq!(parse(br#"{"prompt":"x","logprobs":true}"#, false, 1).unwrap_err().status, 400);
        let e = parse(br#"{"messages":[{"role":"user","content":"hi"}],"n":0}"#, true, 100).unwrap_err();
        assert_eq!((e.status, e.param.as_deref()), (400, Some("n")));
        let e = parse(br#"{"prompt":"x","grammar":"root ::= \"a\"","regex":"a"}"#, false, 100).unwrap_err();
        assert_eq!(e.status, 400);
        assert!(parse(b"{not json", true, 1).is_err());
        assert!(parse(br#"{"messages":[]}"#, true, 1).is_err());
        assert_eq!(parse(br#"{"prompt":""}"#, false, 1).unwrap_err().status, 400);
        let job = parse(br#"{"prompt":"x","logit_bias":{"2":-100,"7":5}}"#, false, 1).unwrap();
        assert_eq!(job.sampler.logit_bias, vec![(TokenId(2), BAN), (TokenId(7), 5.0)]);
        let e = parse(br#"{"prompt":"x","logit_bias":{"abc":1}}"#, false, 1).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("logit_bias"));
    }

    #[test]
    fn typical_and_mirostat_fields_parse_and_bad_ones_are_named() {
        let job =
            parse(br#"{"prompt":"x","typical_p":0.9,"mirostat":2,"mirostat_tau":4,"mirostat_eta":0.2}"#, false, 1)
                .unwrap();
        let s = &job.sampler;
        assert_eq!((s.typical_p, s.mirostat, s.mirostat_tau, s.mirostat_eta), (0.9, 2, 4.0, 0.2));
        let job = parse(br#"{"prompt":"x"}"#, false, 1).unwrap();
        assert_eq!((job.sampler.typical_p, job.sampler.mirostat), (1.0, 0));
        for (body, field) in [
            (&br#"{"prompt":"x","mirostat":3}"#[..], "mirostat"),
            (br#"{"prompt":"x","mirostat":-1}"#, "mirostat"),
            (br#"{"prompt":"x","typical_p":0}"#, "typical_p"),
            (br#"{"prompt":"x","typical_p":1.5}"#, "typical_p"),
            (br#"{"prompt":"x","mirostat_tau":-1}"#, "mirostat_tau"),
            (br#"{"prompt":"x","mirostat_eta":-0.5}"#, "mirostat_eta"),
        ] {
            let e = parse(body, false, 1).unwrap_err();
            assert_eq!((e.status, e.param.as_deref()), (400, Some(field)), "{}", String::from_utf8_lossy(body));
        }
    }
}

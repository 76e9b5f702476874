//! `constrain soak`: a bounded soak test of `constrain serve` on loopback.
//!
//! `--clients` threads share `--requests` requests that mix every kind of traffic a server
//! meets ([`Kind`]): JSON Schemas, GBNF and regex, tool calls (`required`, named, `auto`),
//! streaming, `n = 2`, log-probabilities, clients that hang up mid-stream, and malformed
//! bodies. Each answer is checked: a constrained output validates, a stream ends with
//! `[DONE]`, a malformed body gets a 4xx, and nothing gets a 5xx; at the end no sequence
//! or request is still held (`/health`). A thread samples the
//! server's resident memory (`/proc/PID/status`): after the warm-up (the first fifth of the
//! requests, and at least two of every kind) it must stay within `--max-rss-growth` of the
//! warm-up's peak. The run fails (exit code 1) if any check fails; its report is printed
//! either way.
use super::client::{open_stream, post_json, request, OwnServer, Server};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Arguments of `constrain soak`.
#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// Requests in all, shared by the clients.
    #[arg(long, default_value_t = 1000)]
    pub requests: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// `max_tokens` of each generating request.
    #[arg(short = 'n', long, default_value_t = 48)]
    pub max_tokens: usize,
    /// The server started here.
    #[command(flatten)]
    pub server: OwnServer,
    /// Largest growth of resident memory after the warm-up, as a fraction of the
    /// warm-up's peak.
    #[arg(long, default_value_t = 0.10)]
    pub max_rss_growth: f64,
    /// Seconds one request may take before the client gives up (a failure).
    #[arg(long, default_value_t = 300)]
    pub request_timeout: u64,
}

/// The kinds of request, in the order the requests cycle through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Schema,
    SchemaStream,
    Gbnf,
    Regex,
    ToolRequired,
    ToolNamedStream,
    ToolAuto,
    TwoChoices,
    Logprobs,
    Disconnect,
    Malformed,
}

const KINDS: [Kind; 11] = [
    Kind::Schema,
    Kind::SchemaStream,
    Kind::Gbnf,
    Kind::Regex,
    Kind::ToolRequired,
    Kind::ToolNamedStream,
    Kind::ToolAuto,
    Kind::TwoChoices,
    Kind::Logprobs,
    Kind::Disconnect,
    Kind::Malformed,
];

/// The schemas the schema requests cycle through.
fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
               "required": ["name", "age"], "additionalProperties": false}),
        json!({"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 4}),
        json!({"type": "object", "properties": {
               "title": {"type": "string", "maxLength": 40},
               "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
               "when": {"type": "string", "format": "date"},
               "score": {"type": "number", "minimum": 0, "maximum": 10}},
               "required": ["title", "when"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"items": {"type": "array", "maxItems": 3, "items": {
               "type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
               "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
               "required": ["sku", "qty"], "additionalProperties": false}}},
               "required": ["items"], "additionalProperties": false}),
    ]
}

/// The tools of the tool-call requests.
fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"],
                "additionalProperties": false}}},
        {"type": "function", "function": {"name": "add_note", "description": "Save a short note",
            "parameters": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 40},
                "priority": {"type": "integer", "minimum": 1, "maximum": 3}}, "required": ["text"],
                "additionalProperties": false}}}
    ])
}

/// Malformed bodies, and the statuses they may get.
fn malformed(i: usize) -> (Vec<u8>, &'static [u16]) {
    match i % 5 {
        0 => (b"{\"messages\": [".to_vec(), &[400]),
        1 => (br#"{"messages": "hello"}"#.to_vec(), &[400]),
        2 => (br#"{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"(unclosed"}}}}"#.to_vec(), &[400]),
        3 => (br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-5}"#.to_vec(), &[400]),
        _ => (vec![0xff, 0xfe, 0x00, b'{'], &[400]),
    }
}

/// One request's outcome.
struct Outcome {
    kind: Kind,
    status: u16,
    tokens: u64,
    /// What a check found wrong, if anything.
    problem: Option<String>,
}

/// What the soak test measured.
#[derive(Debug, Default)]
pub struct Report {
    /// Requests sent.
    pub requests: usize,
    /// Completion tokens over all answers.
    pub tokens: u64,
    /// Requests by HTTP status (0: no response).
    pub statuses: BTreeMap<u16, usize>,
    /// Failed checks, `kind #request: what`.
    pub failures: Vec<String>,
    /// The server's peak resident memory during the warm-up, in KiB (`None`: not measured).
    pub rss_warm_kib: Option<u64>,
    /// Its peak resident memory after the warm-up, in KiB.
    pub rss_after_kib: Option<u64>,
    /// Wall time of the run.
    pub wall: Duration,
}

impl Report {
    /// Resident memory growth after the warm-up, as a fraction of the warm-up's peak.
    pub fn rss_growth(&self) -> Option<f64> {
        match (self.rss_warm_kib, self.rss_after_kib) {
            (Some(w), Some(a)) if w > 0 => Some(a as f64 / w as f64 - 1.0),
            _ => None,
        }
    }
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Validates `text` against `schema`; the errors, if any.
fn invalid(schema: &Value, text: &str) -> Option<String> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Some(format!("not JSON ({e}): {text}")),
    };
    let validator = match jsonschema::draft202012::new(schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("bad test schema: {e}")),
    };
    let errors: Vec<String> = validator.iter_errors(&value).map(|e| format!("{e} at {}", e.instance_path())).collect();
    (!errors.is_empty()).then(|| format!("does not validate: {errors:?}: {text}"))
}

/// Checks tool calls (`message.tool_calls` or reassembled deltas): each names a tool and
/// its arguments validate.
fn invalid_calls(calls: &Calls) -> Option<String> {
    if calls.is_empty() {
        return Some("no tool call".into());
    }
    let tools = tools();
    for (name, args) in calls {
        let Some(tool) = tools.as_array()?.iter().find(|t| t["function"]["name"] == name.as_str()) else {
            return Some(format!("unknown function {name}"));
        };
        if let Some(p) = invalid(&tool["function"]["parameters"], args) {
            return Some(format!("{name}: {p}"));
        }
    }
    None
}

/// The calls of a non-streamed message.
fn message_calls(message: &Value) -> Calls {
    message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let name = c["function"]["name"].as_str().unwrap_or("").to_string();
            (name, c["function"]["arguments"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

/// Tool calls as `(name, arguments)`.
type Calls = Vec<(String, String)>;

/// A streamed chat answer reassembled: per choice, its content and its calls; `Err` if the
/// stream did not end with `[DONE]` or carried an error.
fn reassemble(data: &[String]) -> Result<Vec<(String, Calls)>, String> {
    if data.last().map(String::as_str) != Some("[DONE]") {
        return Err(format!("the stream did not end with [DONE]: {:?}", data.last()));
    }
    let mut choices: Vec<(String, Calls)> = Vec::new();
    for d in &data[..data.len() - 1] {
        let chunk: Value = serde_json::from_str(d).map_err(|e| format!("bad chunk ({e}): {d}"))?;
        if chunk.get("error").is_some() {
            return Err(format!("error event: {d}"));
        }
        for c in chunk["choices"].as_array().into_iter().flatten() {
            let i = c["index"].as_u64().unwrap_or(0) as usize;
            if choices.len() <= i {
                choices.resize_with(i + 1, Default::default);
            }
            let (text, calls) = &mut choices[i];
            if let Some(t) = c["delta"]["content"].as_str() {
                text.push_str(t);
            }
            for call in c["delta"]["tool_calls"].as_array().into_iter().flatten() {
                let k = call["index"].as_u64().unwrap_or(0) as usize;
                if calls.len() <= k {
                    calls.resize_with(k + 1, Default::default);
                }
                if let Some(n) = call["function"]["name"].as_str() {
                    calls[k].0.push_str(n);
                }
                if let Some(a) = call["function"]["arguments"].as_str() {
                    calls[k].1.push_str(a);
                }
            }
        }
    }
    Ok(choices)
}

/// Sends request `i` and checks its answer.
fn one(addr: &str, i: usize, max_tokens: usize, timeout: Duration) -> Outcome {
    let kind = KINDS[i % KINDS.len()];
    let schemas = schemas();
    let schema = &schemas[(i / KINDS.len()) % schemas.len()];
    let seed = i as u64;
    let chat = |prompt: &str| {
        json!({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
               "temperature": 1.0, "seed": seed})
    };
    let with_schema = |mut body: Value| {
        body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "soak", "schema": schema}});
        body
    };
    let mut out = Outcome { kind, status: 0, tokens: 0, problem: None };
    let result: Result<(), String> = (|| {
        let post = |path: &str, body: &Value| post_json(addr, path, body, timeout).map_err(|e| e.to_string());
        let ok = |status: u16, body: &str| match status {
            200 => Ok(()),
            s => Err(format!("HTTP {s}: {body}")),
        };
        // A `/v1/completions` answer's text, with its status and tokens noted.
        let completion = |body: &Value, out: &mut Outcome| -> Result<String, String> {
            let r = post("/v1/completions", body)?;
            out.status = r.status;
            ok(r.status, &r.body)?;
            let v = r.json().map_err(|e| e.to_string())?;
            out.tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
            Ok(v["choices"][0]["text"].as_str().unwrap_or("").to_string())
        };
        match kind {
            Kind::Schema | Kind::Logprobs | Kind::TwoChoices => {
                let mut body = with_schema(chat("Answer with a short example."));
                if kind == Kind::Logprobs {
                    body["logprobs"] = json!(true);
                    body["top_logprobs"] = json!(2);
                }
                if kind == Kind::TwoChoices {
                    body["n"] = json!(2);
                }
                let r = post("/v1/chat/completions", &body)?;
                out.status = r.status;
                ok(r.status, &r.body)?;
                let v = r.json().map_err(|e| e.to_string())?;
                out.tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
                let choices = v["choices"].as_array().cloned().unwrap_or_default();
                let want = if kind == Kind::TwoChoices { 2 } else { 1 };
                if choices.len() != want {
                    return Err(format!("{} choices, not {want}", choices.len()));
                }
                for c in &choices {
                    let text = c["message"]["content"].as_str().unwrap_or("");
                    if let Some(p) = invalid(schema, text) {
                        return Err(p);
                    }
                    if kind == Kind::Logprobs && !c["logprobs"]["content"].is_array() {
                        return Err(format!("no logprobs: {c}"));
                    }
                }
            }
            Kind::SchemaStream => {
                let mut body = with_schema(chat("Answer with a short example."));
                body["stream"] = json!(true);
                let r = post("/v1/chat/completions", &body)?;
                out.status = r.status;
                ok(r.status, &r.body)?;
                let choices = reassemble(&r.sse_data())?;
                let text = choices.first().map(|c| c.0.as_str()).unwrap_or("");
                if let Some(p) = invalid(schema, text) {
                    return Err(p);
                }
            }
            Kind::Gbnf => {
                let body = json!({"prompt": "Three animals:", "max_tokens": max_tokens, "temperature": 1.0,
                    "seed": seed, "grammar": "root ::= animal (\", \" animal){2}\nanimal ::= \"cat\" | \"dog\" | \"cow\""});
                let text = completion(&body, &mut out)?;
                let parts: Vec<&str> = text.split(", ").collect();
                if parts.len() != 3 || !parts.iter().all(|p| ["cat", "dog", "cow"].contains(p)) {
                    return Err(format!("not in the grammar: {text:?}"));
                }
            }
            Kind::Regex => {
                let body = json!({"prompt": "A phone number:", "max_tokens": max_tokens, "temperature": 1.0,
                    "seed": seed, "regex": "[0-9]{3}-[0-9]{4}"});
                let text = completion(&body, &mut out)?;
                let b = text.as_bytes();
                let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
                if !(b.len() == 8 && digits(0..3) && b[3] == b'-' && digits(4..8)) {
                    return Err(format!("does not match the regex: {text:?}"));
                }
            }
            Kind::ToolRequired | Kind::ToolAuto | Kind::ToolNamedStream => {
                let mut body = chat(if i % 2 == 0 { "What is the weather in Lima?" } else { "Note: buy milk." });
                body["tools"] = tools();
                body["tool_choice"] = match kind {
                    Kind::ToolRequired => json!("required"),
                    Kind::ToolAuto => json!("auto"),
                    _ => json!({"type": "function", "function": {"name": "add_note"}}),
                };
                if kind == Kind::ToolNamedStream {
                    body["stream"] = json!(true);
                }
                let r = post("/v1/chat/completions", &body)?;
                out.status = r.status;
                ok(r.status, &r.body)?;
                let (text, calls) = if kind == Kind::ToolNamedStream {
                    reassemble(&r.sse_data())?.into_iter().next().unwrap_or_default()
                } else {
                    let v = r.json().map_err(|e| e.to_string())?;
                    out.tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
                    let m = &v["choices"][0]["message"];
                    (m["content"].as_str().unwrap_or("").to_string(), message_calls(m))
                };
                if kind == Kind::ToolAuto && calls.is_empty() {
                    // `auto` may answer in text.
                    if text.is_empty() && max_tokens > 0 {
                        return Err("neither text nor a call".into());
                    }
                } else if let Some(p) = invalid_calls(&calls) {
                    return Err(p);
                } else if kind == Kind::ToolNamedStream && calls.iter().any(|c| c.0 != "add_note") {
                    return Err(format!("not the named function: {calls:?}"));
                }
            }
            Kind::Disconnect => {
                let mut body = with_schema(chat("Answer with a long example."));
                body["stream"] = json!(true);
                let bytes = body.to_string();
                let mut s = open_stream(addr, "POST", "/v1/chat/completions", &[], Some(bytes.as_bytes()), timeout)
                    .map_err(|e| e.to_string())?;
                out.status = s.status;
                ok(s.status, "")?;
                // Read one chunk, then hang up.
                s.next_data().map_err(|e| e.to_string())?;
            }
            Kind::Malformed => {
                let (body, allowed) = malformed(i / KINDS.len());
                let r =
                    request(addr, "POST", "/v1/chat/completions", Some(&body), timeout).map_err(|e| e.to_string())?;
                out.status = r.status;
                if !allowed.contains(&r.status) {
                    return Err(format!("HTTP {} (want {allowed:?}): {}", r.status, r.body));
                }
            }
        }
        Ok(())
    })();
    out.problem = result.err();
    if out.problem.is_none() && out.status >= 500 {
        out.problem = Some(format!("HTTP {}", out.status));
    }
    out
}

/// Runs the soak test against `addr`, sampling the memory of process `pid` if given.
pub fn soak(addr: &str, pid: Option<u32>, args: &SoakArgs) -> Report {
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let finished = AtomicBool::new(false);
    let warmup = (args.requests / 5).max(2 * KINDS.len()).min(args.requests);
    let outcomes = Mutex::new(Vec::with_capacity(args.requests));
    let timeout = Duration::from_secs(args.request_timeout.max(1));
    let (mut warm, mut after) = (None::<u64>, None::<u64>);
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let (mut warm, mut after) = (None::<u64>, None::<u64>);
            while let Some(kib) = pid.and_then(rss_kib) {
                let slot = if done.load(Ordering::SeqCst) < warmup { &mut warm } else { &mut after };
                *slot = Some(slot.map_or(kib, |k| k.max(kib)));
                if finished.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            (warm, after)
        });
        let clients: Vec<_> = (0..args.clients.max(1))
            .map(|_| {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= args.requests {
                        break;
                    }
                    let o = one(addr, i, args.max_tokens, timeout);
                    if let Some(p) = &o.problem {
                        eprintln!("soak: {:?} #{i}: {p}", o.kind);
                    }
                    if let Ok(mut v) = outcomes.lock() {
                        v.push((i, o));
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        for c in clients {
            let _ = c.join();
        }
        finished.store(true, Ordering::SeqCst);
        if let Ok(r) = sampler.join() {
            (warm, after) = r;
        }
    });
    let mut report = Report { requests: args.requests, wall: started.elapsed(), ..Report::default() };
    let mut outcomes = outcomes.into_inner().unwrap_or_default();
    outcomes.sort_by_key(|(i, _)| *i);
    for (i, o) in &outcomes {
        *report.statuses.entry(o.status).or_default() += 1;
        report.tokens += o.tokens;
        if let Some(p) = &o.problem {
            report.failures.push(format!("{:?} #{i}: {p}", o.kind));
        }
    }
    if outcomes.len() != args.requests {
        report.failures.push(format!(
            "{} of {} requests did not report",
            args.requests - outcomes.len(),
            args.requests
        ));
    }
    report.rss_warm_kib = warm;
    report.rss_after_kib = after;
    if let Some(p) = leftover(addr) {
        report.failures.push(p);
    }
    report
}

/// After the run, every sequence and request is freed (hung-up streams included) within a
/// few seconds; what is still held, if anything.
fn leftover(addr: &str) -> Option<String> {
    let mut last = String::new();
    for _ in 0..50 {
        match request(addr, "GET", "/health", None, Duration::from_secs(10)).and_then(|r| r.json()) {
            Ok(v) if v["slots_busy"] == 0 && v["requests_in_flight"] == 0 => return None,
            Ok(v) => last = v.to_string(),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(format!("sequences or requests still held after the run: {last}"))
}

/// Runs `constrain soak`: starts a server, soaks it, prints the report; fails if a check
/// failed or the memory grew too much.
pub fn run(args: &SoakArgs) -> anyhow::Result<()> {
    let mut server = Server::spawn_own(&args.server)?;
    let report = soak(&server.addr.clone(), Some(server.pid()), args);
    let alive = server.is_running();
    println!(
        "soak: {} requests from {} clients in {:.1} s, {} completion tokens",
        report.requests,
        args.clients,
        report.wall.as_secs_f64(),
        report.tokens
    );
    let statuses: Vec<String> = report.statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
    println!("statuses: {}", statuses.join(", "));
    let mib = |k: Option<u64>| k.map_or("n/a".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    println!(
        "resident memory: warm-up peak {}, after warm-up peak {}, growth {}",
        mib(report.rss_warm_kib),
        mib(report.rss_after_kib),
        report.rss_growth().map_or("n/a".into(), |g| format!("{:+.1}%", g * 100.0))
    );
    let mut failures = report.failures.clone();
    if !alive {
        failures.push("the server exited".into());
    }
    if let Some(g) = report.rss_growth().filter(|&g| g > args.max_rss_growth) {
        failures.push(format!("resident memory grew {:.1}% (at most {:.1}%)", g * 100.0, args.max_rss_growth * 100.0));
    }
    if failures.is_empty() {
        println!("soak: passed");
        return Ok(());
    }
    for f in failures.iter().take(20) {
        println!("failed: {f}");
    }
    anyhow::bail!("soak: {} checks failed", failures.len())
}

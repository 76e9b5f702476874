//! `constrain serve` end to end: the real binary with the default model on a free loopback
//! port, driven by the crate's HTTP client (`serve::client`, over `ureq`) and by the official `openai` Python package
//! (`tests/openai_client.py`; `scripts/install-deps.sh` installs it, and its absence fails
//! the test).
//!
//! One server for the whole file (one model process at a time), started and killed by one
//! test: a [`Server`] guard kills it on drop, also when an assertion fails. Every load is
//! bounded: a fixed number of requests with small `max_tokens`.
#![cfg(feature = "llama")]

use constrain_cli::serve::client::{open_stream, post_json, request, Server};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(120);
/// For requests decoded 4 at a time with long prompts (tool calls): a loaded 2-core machine
/// took over 2 minutes for them.
const SLOW_TIMEOUT: Duration = Duration::from_secs(400);

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3}
        },
        "required": ["name", "age", "pets"],
        "additionalProperties": false
    })
}

fn point_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "label": {"type": "string", "pattern": "^[a-z]{1,8}$"}},
        "required": ["x", "y", "label"]
    })
}

fn list_schema() -> Value {
    json!({"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 9}, "minItems": 2, "maxItems": 4})
}

/// Panics unless `text` is a JSON document valid against `schema`.
fn assert_valid(schema: &Value, text: &str) -> Value {
    let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let validator = jsonschema::draft202012::new(schema).expect("valid schema");
    let errors: Vec<String> = validator.iter_errors(&value).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "does not validate: {errors:?}\n{text}");
    value
}

fn chat_body(prompt: &str, schema: Option<&Value>, seed: u64, max_tokens: u64) -> Value {
    let mut body = json!({
        "model": "default",
        "messages": [{"role": "system", "content": "Answer with JSON."}, {"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.7,
        "seed": seed,
    });
    if let Some(schema) = schema {
        body["response_format"] =
            json!({"type": "json_schema", "json_schema": {"name": "doc", "schema": schema, "strict": true}});
    }
    body
}

fn content(v: &Value) -> &str {
    v["choices"][0]["message"]["content"].as_str().unwrap_or_else(|| panic!("no content: {v}"))
}

#[test]
fn serve_end_to_end() {
    let started = Instant::now();
    let exe = Path::new(env!("CARGO_BIN_EXE_constrain"));
    let mut server =
        Server::spawn(exe, &["--parallel", "8", "-c", "1024", "--max-queue", "0", "--max-body", "65536"], TIMEOUT)
            .expect("the server starts (default model: scripts/fetch-model.sh)");
    let addr = server.addr.clone();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    let timed = |name: &str, f: &dyn Fn(&str)| {
        let t = Instant::now();
        f(&addr);
        eprintln!("{name}: {:.1} s", t.elapsed().as_secs_f64());
    };
    timed("health and models", &health_and_models);
    let text = std::cell::RefCell::new(String::new());
    timed("schema request and stream", &|a| *text.borrow_mut() = schema_request_and_same_stream(a));
    timed("gbnf, regex, stop", &gbnf_and_regex);
    timed("n choices", &|a| several_choices(a, &text.borrow()));
    timed("beam search and best_of", &beams_and_best_of);
    timed("logprobs", &logprobs);
    timed("bad requests", &bad_requests);
    timed("cancelled clients", &cancelled_clients_free_their_sequence);
    timed("8 concurrent", &eight_concurrent_documents_validate);
    timed("full queue", &full_queue_is_503);
    timed("tool calls", &tool_calls);
    timed("metrics and logs", &|a| metrics_count_and_every_request_is_logged(a, &server));
    // Still serving after all that, with the same answer for the same seed.
    let body = chat_body("Invent a person.", Some(&person_schema()), 7, 48);
    let again = post_json(&addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(content(&again.json().unwrap()), *text.borrow());
    timed("openai python client", &openai_python_client);
    assert!(server.is_running());
    quiet_logs_name_failures(&server);
    drop(server);
    verbose_logs_notes_once_per_schema(exe);
    limits_and_graceful_shutdown(exe);
    eprintln!("serve tests took {:?}", started.elapsed());
}

/// A schema with documented subsets (`format: email`, a long pattern).
fn email_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"email": {"type": "string", "format": "email"}, "host": {"type": "string", "format": "hostname"}},
        "required": ["email"],
        "additionalProperties": false
    })
}

/// Without `--verbose` the server says nothing of notes (however many requests compiled
/// schemas), and one line per failed request, with its id and status.
fn quiet_logs_name_failures(server: &Server) {
    let lines = server.stderr_lines();
    assert!(!lines.iter().any(|l| l.contains("note")), "notes logged without --verbose: {lines:#?}");
    let failed: Vec<_> = lines.iter().filter(|l| l.contains("request failed")).collect();
    assert!(failed.iter().any(|l| l.contains("status=400") && l.contains("chatcmpl-")), "{lines:#?}");
    assert!(failed.iter().any(|l| l.contains("status=413") && l.contains("step=")), "{lines:#?}");
}

/// With `--verbose`, a schema's notes are logged at debug level when it is compiled: once,
/// not again for a request that finds it in the cache.
fn verbose_logs_notes_once_per_schema(exe: &Path) {
    let server = Server::spawn(exe, &["--parallel", "1", "-c", "512", "--verbose"], TIMEOUT).expect("verbose server");
    let note_lines = || server.stderr_lines().into_iter().filter(|l| l.contains("schema note")).count();
    let body = chat_body("An email address.", Some(&email_schema()), 1, 48);
    let r = post_json(&server.addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let first = note_lines();
    assert_eq!(first, 2, "one debug line per note (email, hostname): {:#?}", server.stderr_lines());
    let r = post_json(&server.addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(note_lines(), first, "a cached schema's notes are not logged again");
}

fn health_and_models(addr: &str) {
    let r = request(addr, "GET", "/health", None, TIMEOUT).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json().unwrap()["status"], "ok");
    let r = request(addr, "GET", "/v1/models", None, TIMEOUT).unwrap();
    let v = r.json().unwrap();
    assert_eq!(v["object"], "list");
    assert!(v["data"][0]["id"].as_str().is_some_and(|id| !id.is_empty()), "{v}");
}

/// A schema request, then the same request streamed: same text, `[DONE]` last.
fn schema_request_and_same_stream(addr: &str) -> String {
    let schema = person_schema();
    let body = chat_body("Invent a person.", Some(&schema), 7, 48);
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json().unwrap();
    assert_eq!(v["object"], "chat.completion");
    let text = content(&v).to_string();
    assert_valid(&schema, &text);
    assert!(matches!(v["choices"][0]["finish_reason"].as_str(), Some("stop" | "length")), "{v}");
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    let mut body = body;
    body["stream"] = json!(true);
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.header("content-type").is_some_and(|c| c.starts_with("text/event-stream")));
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    let mut streamed = String::new();
    let mut finish = None;
    for d in &data[..data.len() - 1] {
        let chunk: Value = serde_json::from_str(d).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if let Some(t) = chunk["choices"][0]["delta"]["content"].as_str() {
            streamed.push_str(t);
        }
        if let Some(f) = chunk["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    assert_eq!(streamed, text, "streaming and non-streaming differ for the same seed");
    assert!(finish.is_some());
    text
}

/// `n` = 3: three valid choices, indexed 0..3, the first the same as the request with n = 1
/// (same seed), the prompt counted once; streamed with n = 2, the chunks of each index
/// reassemble to that choice of the non-streamed answer.
fn several_choices(addr: &str, first: &str) {
    let schema = person_schema();
    let mut body = chat_body("Invent a person.", Some(&schema), 7, 48);
    body["n"] = json!(3);
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json().unwrap();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3, "{v}");
    let mut texts = Vec::new();
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i, "{v}");
        let text = c["message"]["content"].as_str().unwrap();
        assert_valid(&schema, text);
        texts.push(text.to_string());
    }
    assert_eq!(texts[0], first, "choice 0 differs from the same request with n = 1");
    assert!(texts[1] != texts[0] || texts[2] != texts[0], "the choices did not sample apart: {texts:?}");
    let single = chat_body("Invent a person.", Some(&schema), 7, 48);
    let one = post_json(addr, "/v1/chat/completions", &single, TIMEOUT).unwrap().json().unwrap();
    assert_eq!(v["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"], "the prompt counts once");

    body["n"] = json!(2);
    body["stream"] = json!(true);
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    let mut streamed = vec![String::new(); 2];
    let mut finished = [false; 2];
    for d in &data[..data.len() - 1] {
        let chunk: Value = serde_json::from_str(d).unwrap();
        let c = &chunk["choices"][0];
        let i = c["index"].as_u64().unwrap() as usize;
        assert!(!finished[i], "a chunk after choice {i} finished: {data:?}");
        if let Some(t) = c["delta"]["content"].as_str() {
            streamed[i].push_str(t);
        }
        finished[i] = c["finish_reason"].is_string();
    }
    assert_eq!(finished, [true, true], "{data:?}");
    assert_eq!(streamed, texts[..2], "streamed choices differ from the same request not streamed");
}

/// `use_beam_search` (vLLM's extension): `n` of `best_of` beams, each valid, the first the
/// best; with one beam the greedy document; streamed, the same text. `best_of` without beam
/// search (OpenAI's): `n` valid choices of `best_of` sampled, the usage counting them all.
fn beams_and_best_of(addr: &str) {
    let schema = person_schema();
    let mut greedy = chat_body("Invent a person.", Some(&schema), 7, 48);
    greedy["temperature"] = json!(0);
    let plain = post_json(addr, "/v1/chat/completions", &greedy, TIMEOUT).unwrap().json().unwrap();
    let mut one = greedy.clone();
    one["use_beam_search"] = json!(true);
    one["best_of"] = json!(1);
    let r = post_json(addr, "/v1/chat/completions", &one, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(content(&r.json().unwrap()), content(&plain), "one beam is greedy");

    let mut body = chat_body("Invent a person.", Some(&schema), 7, 48);
    body["use_beam_search"] = json!(true);
    body["best_of"] = json!(3);
    body["n"] = json!(2);
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json().unwrap();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2, "{v}");
    let texts: Vec<&str> = choices.iter().map(|c| c["message"]["content"].as_str().unwrap()).collect();
    for t in &texts {
        assert_valid(&schema, t);
    }
    body["stream"] = json!(true);
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    let mut streamed = vec![String::new(); 2];
    for d in &data[..data.len() - 1] {
        let chunk: Value = serde_json::from_str(d).unwrap();
        let c = &chunk["choices"][0];
        if let Some(t) = c["delta"]["content"].as_str() {
            streamed[c["index"].as_u64().unwrap() as usize].push_str(t);
        }
    }
    assert_eq!(streamed, texts, "streamed beams differ from the same request not streamed");

    let mut sampled = chat_body("Invent a person.", Some(&schema), 7, 48);
    sampled["best_of"] = json!(3);
    let r = post_json(addr, "/v1/chat/completions", &sampled, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json().unwrap();
    assert_eq!(v["choices"].as_array().unwrap().len(), 1, "{v}");
    assert!(v["choices"][0]["logprobs"].is_null(), "logprobs were not asked for: {v}");
    let best = content(&v);
    assert_valid(&schema, best);
    let single = post_json(addr, "/v1/chat/completions", &chat_body("Invent a person.", Some(&schema), 7, 48), TIMEOUT)
        .unwrap()
        .json()
        .unwrap();
    let tokens = |v: &Value| v["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(tokens(&v) > tokens(&single), "the usage counts all three sequences: {v}");
}

/// `logprobs`: one entry per token, spelling the text; values are log-probabilities (≤ 0),
/// the alternatives sorted and their mass at most 1; the same streamed; completions' shape.
fn logprobs(addr: &str) {
    let schema = person_schema();
    let check_entries = |content: &[Value], text: &str| {
        let mut spelled = Vec::new();
        for e in content {
            let lp = e["logprob"].as_f64().unwrap();
            assert!(lp <= 1e-6, "{e}");
            let top = e["top_logprobs"].as_array().unwrap();
            assert!(!top.is_empty() && top.len() <= 3, "{e}");
            let tops: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
            assert!(tops.windows(2).all(|w| w[0] >= w[1]), "top_logprobs not sorted: {e}");
            assert!(tops.iter().map(|l| l.exp()).sum::<f64>() <= 1.0 + 1e-4, "{e}");
            assert!(lp <= tops[0] + 1e-6, "the chosen token beats the best alternative: {e}");
            spelled.extend(e["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8));
        }
        assert_eq!(String::from_utf8_lossy(&spelled), text, "the tokens do not spell the text");
    };
    let mut body = chat_body("Invent a person.", Some(&schema), 3, 48);
    body["logprobs"] = json!(true);
    body["top_logprobs"] = json!(3);
    let v = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap().json().unwrap();
    let text = content(&v);
    assert_valid(&schema, text);
    let entries = v["choices"][0]["logprobs"]["content"].as_array().unwrap().clone();
    check_entries(&entries, text);
    // Greedy picks the most likely allowed token: its log-probability tops the list.
    let mut greedy = body.clone();
    greedy["temperature"] = json!(0);
    let g = post_json(addr, "/v1/chat/completions", &greedy, TIMEOUT).unwrap().json().unwrap();
    for e in g["choices"][0]["logprobs"]["content"].as_array().unwrap() {
        assert_eq!(e["top_logprobs"][0]["token"], e["token"], "{e}");
    }

    body["stream"] = json!(true);
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    let mut streamed = Vec::new();
    for d in r.sse_data().iter().filter(|d| *d != "[DONE]") {
        let chunk: Value = serde_json::from_str(d).unwrap();
        if let Some(c) = chunk["choices"][0]["logprobs"]["content"].as_array() {
            streamed.extend(c.iter().cloned());
        }
    }
    assert_eq!(streamed, entries, "streamed logprobs differ");

    let body = json!({"prompt": "Letters:", "grammar": "root ::= \"ab\" [c-e]+", "max_tokens": 6,
                      "temperature": 1, "seed": 2, "logprobs": 2});
    let v = post_json(addr, "/v1/completions", &body, TIMEOUT).unwrap().json().unwrap();
    let lp = &v["choices"][0]["logprobs"];
    let tokens = lp["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), lp["token_logprobs"].as_array().unwrap().len(), "{v}");
    assert_eq!(tokens.len(), lp["text_offset"].as_array().unwrap().len(), "{v}");
    let spelled: String = tokens.iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(spelled, v["choices"][0]["text"].as_str().unwrap(), "{v}");
    let chat_bad = json!({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21});
    for (path, bad, param) in [
        ("/v1/completions", json!({"prompt": "x", "logprobs": 21}), "logprobs"),
        ("/v1/chat/completions", chat_bad, "top_logprobs"),
    ] {
        let r = post_json(addr, path, &bad, TIMEOUT).unwrap();
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(r.json().unwrap()["error"]["param"], param);
    }
}

fn gbnf_and_regex(addr: &str) {
    let body = json!({
        "prompt": "Three animals:",
        "grammar": "root ::= animal (\", \" animal){2}\nanimal ::= \"cat\" | \"dog\" | \"cow\" | \"hen\"",
        "max_tokens": 32, "temperature": 0.5, "seed": 1
    });
    let r = post_json(addr, "/v1/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json().unwrap();
    assert_eq!(v["object"], "text_completion");
    let text = v["choices"][0]["text"].as_str().unwrap();
    let parts: Vec<&str> = text.split(", ").collect();
    assert_eq!(parts.len(), 3, "{text}");
    assert!(parts.iter().all(|p| ["cat", "dog", "cow", "hen"].contains(p)), "{text}");

    // A stop string cuts the output (and is not part of it).
    for stream in [false, true] {
        let body = json!({"prompt": "Letters:", "grammar": "root ::= \"abc\" [d-f] \"xyz\"", "stop": ["e", "d", "f"],
                          "stream": stream});
        let r = post_json(addr, "/v1/completions", &body, TIMEOUT).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let chunks: Vec<Value> = if stream {
            r.sse_data().iter().filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect()
        } else {
            vec![r.json().unwrap()]
        };
        let text: String = chunks.iter().filter_map(|c| c["choices"][0]["text"].as_str()).collect();
        assert_eq!(text, "abc", "{chunks:?}");
        assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
    }

    let body = json!({"messages": [{"role": "user", "content": "A date?"}], "regex": "20[0-9]{2}-[01][0-9]", "max_tokens": 16});
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json().unwrap();
    let t = content(&v);
    assert!(t.len() == 7 && t.starts_with("20") && t.as_bytes()[4] == b'-', "{t}");
}

fn bad_requests(addr: &str) {
    let post = |body: &[u8]| request(addr, "POST", "/v1/chat/completions", Some(body), TIMEOUT).unwrap();
    let error_of = |r: &constrain_cli::serve::client::Response| {
        let v = r.json().unwrap();
        assert!(v["error"]["message"].is_string(), "{v}");
        assert!(v["error"]["type"].is_string(), "{v}");
        v
    };
    // Not JSON.
    let r = post(b"{not json");
    assert_eq!(r.status, 400);
    error_of(&r);
    // A bad schema: the error names the keyword's JSON pointer.
    let bad = chat_body("x", Some(&json!({"type": "object", "properties": {"a": {"type": "nonsense"}}})), 1, 16);
    let r = post(bad.to_string().as_bytes());
    assert_eq!(r.status, 400, "{}", r.body);
    let v = error_of(&r);
    assert!(v["error"]["message"].as_str().unwrap().contains("/properties/a"), "{v}");
    // A bad grammar, a bad regex, n = 2, two constraints, a missing field.
    for body in [
        json!({"messages": [{"role": "user", "content": "x"}], "grammar": "root ::= (("}),
        json!({"messages": [{"role": "user", "content": "x"}], "regex": "a("}),
        json!({"messages": [{"role": "user", "content": "x"}], "n": 9}),
        json!({"messages": [{"role": "user", "content": "x"}], "n": 0}),
        json!({"messages": [{"role": "user", "content": "x"}], "n": 3, "best_of": 2}),
        json!({"messages": [{"role": "user", "content": "x"}], "use_beam_search": true, "best_of": 33}),
        json!({"messages": [{"role": "user", "content": "x"}], "length_penalty": 0.5}),
        json!({"messages": [{"role": "user", "content": "x"}], "best_of": 2, "stream": true}),
        json!({"messages": [{"role": "user", "content": "x"}], "regex": "a", "grammar": "root ::= \"a\""}),
        json!({"model": "x"}),
        json!({"messages": [{"role": "user", "content": "x"}], "temperature": -1}),
        json!({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}}),
    ] {
        let r = post(body.to_string().as_bytes());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        error_of(&r);
    }
    // Over the body limit (64 KiB in this test).
    let big = json!({"messages": [{"role": "user", "content": "x".repeat(100_000)}]});
    let r = post(big.to_string().as_bytes());
    assert_eq!(r.status, 413, "{}", r.body);
    error_of(&r);
    // A prompt longer than a sequence's context.
    let long = json!({"messages": [{"role": "user", "content": "word ".repeat(3000)}], "max_tokens": 4});
    let r = post(long.to_string().as_bytes());
    assert_eq!(r.status, 400, "{}", r.body);
    // Unknown endpoint.
    let r = request(addr, "GET", "/v2/nothing", None, TIMEOUT).unwrap();
    assert_eq!(r.status, 404);
}

/// Clients that hang up mid-generation (streaming and not) free their sequences: all 8
/// sequences are usable afterwards (the next test needs them all).
fn cancelled_clients_free_their_sequence(addr: &str) {
    for stream in [false, true, false, true] {
        let body = json!({"prompt": "Once upon a time", "max_tokens": 900, "stream": stream, "temperature": 1.0,
                          "seed": 3, "logit_bias": {"0": -100, "2": -100, "4": -100}})
        .to_string();
        if stream {
            // Wait for the first event of the stream, then hang up.
            let mut s = open_stream(addr, "POST", "/v1/completions", &[], Some(body.as_bytes()), TIMEOUT).unwrap();
            assert_eq!(s.status, 200);
            assert!(s.next_data().unwrap().is_some());
            drop(s);
        } else {
            // The 300 ms timeout hangs up long before 900 tokens are ready.
            let r = request(addr, "POST", "/v1/completions", Some(body.as_bytes()), Duration::from_millis(300));
            assert!(r.is_err(), "900 tokens in 300 ms: {r:?}");
        }
    }
    // Every sequence is freed soon after its client left (one step of the decode loop).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = request(addr, "GET", "/health", None, TIMEOUT).unwrap().json().unwrap();
        if v["slots_busy"] == 0 && v["requests_in_flight"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "sequences of cancelled requests are still busy: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn eight_concurrent_documents_validate(addr: &str) {
    let schemas = [person_schema(), point_schema(), list_schema()];
    let prompts = ["Invent a person.", "A point on a map.", "Some small numbers."];
    let results: Vec<(usize, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let schema = &schemas[i % 3];
                let prompt = prompts[i % 3];
                scope.spawn(move || {
                    let r = post_json(
                        addr,
                        "/v1/chat/completions",
                        &chat_body(prompt, Some(schema), i as u64, 48),
                        TIMEOUT,
                    )
                    .unwrap();
                    assert_eq!(r.status, 200, "{}", r.body);
                    (i, content(&r.json().unwrap()).to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.len(), 8);
    for (i, text) in &results {
        assert_valid(&schemas[i % 3], text);
    }
}

/// With `--max-queue 0`, a ninth request while eight run gets 503, and the others succeed.
fn full_queue_is_503(addr: &str) {
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..12)
            .map(|i| {
                scope.spawn(move || {
                    let body =
                        json!({"prompt": "Count: 1, 2, 3,", "max_tokens": 24, "seed": i, "regex": "( [0-9]+,){5,}"});
                    post_json(addr, "/v1/completions", &body, TIMEOUT).unwrap().status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(statuses.contains(&503), "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 503), "{statuses:?}");
    assert!(statuses.iter().filter(|s| **s == 200).count() >= 8, "{statuses:?}");
}

/// The official Python client: schema requests 8 at a time, streaming = non-streaming for a
/// seed, a bad schema raising `BadRequestError`. Python and `openai` must be installed.
fn openai_python_client(addr: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openai_client.py");
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| std::process::Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("python3 is needed for the openai client test (scripts/install-deps.sh installs it)");
    let out =
        std::process::Command::new(python).arg(&script).arg(format!("http://{addr}/v1")).output().expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the openai client test failed (install it with scripts/install-deps.sh):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("openai client: all checks passed"), "{stdout}\n{stderr}");
}

/// Two functions whose arguments the tests validate.
fn tool_defs() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "book_table", "description": "Book a restaurant table",
            "parameters": {"type": "object", "properties": {
                "restaurant": {"type": "string", "maxLength": 30},
                "people": {"type": "integer", "minimum": 1, "maximum": 12},
                "time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
                "notes": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 2}},
                "required": ["restaurant", "people", "time"], "additionalProperties": false}}}
    ])
}

/// Panics unless every call names a function of `tools` and its arguments string parses and
/// validates against that function's parameters; returns `(name, arguments)` per call.
fn assert_calls_valid(tools: &Value, calls: &Value) -> Vec<(String, String)> {
    let calls = calls.as_array().unwrap_or_else(|| panic!("no tool_calls: {calls}"));
    assert!(!calls.is_empty());
    calls
        .iter()
        .map(|c| {
            assert_eq!(c["type"], "function", "{c}");
            assert!(c["id"].as_str().is_some_and(|id| id.starts_with("call_")), "{c}");
            let name = c["function"]["name"].as_str().unwrap().to_string();
            let args = c["function"]["arguments"].as_str().unwrap_or_else(|| panic!("arguments not a string: {c}"));
            assert_call_valid(tools, &name, args);
            (name, args.to_string())
        })
        .collect()
}

/// Panics unless `name` is a function of `tools` and `args` validates against its parameters.
fn assert_call_valid(tools: &Value, name: &str, args: &str) {
    let f = tools.as_array().unwrap().iter().find(|t| t["function"]["name"] == name).expect("known name");
    assert_valid(&f["function"]["parameters"], args);
}

fn tool_body(prompt: &str, choice: Value, parallel: bool, seed: u64) -> Value {
    json!({
        "messages": [{"role": "user", "content": prompt}],
        "tools": tool_defs(), "tool_choice": choice, "parallel_tool_calls": parallel,
        "max_tokens": 60, "temperature": 0.8, "seed": seed,
    })
}

/// `required` and a named function give calls whose arguments validate (non-streaming and
/// streaming, which reassembles to the same calls); `auto` gives text or a valid call; a
/// conversation with earlier calls and tool results is accepted; a parameter keyword that
/// needs a run-time check is refused under `auto` (400 naming it) and kept under `required`.
fn tool_calls(addr: &str) {
    let tools = tool_defs();
    let prompts = ["What is the weather in Oslo?", "Book a table for 4 at Chez Lu at 19:30."];
    let named = json!({"type": "function", "function": {"name": "book_table"}});
    let cases: Vec<(usize, &str, Value)> =
        (0..prompts.len()).flat_map(|i| [(i, prompts[i], json!("required")), (i, prompts[i], named.clone())]).collect();
    // Decoded together (the server batches them): a quarter of the time of one by one.
    std::thread::scope(|scope| {
        for (i, prompt, choice) in &cases {
            let (i, tools) = (*i, &tools);
            scope.spawn(move || {
                let body = tool_body(prompt, choice.clone(), i % 2 == 0, i as u64);
                let r = post_json(addr, "/v1/chat/completions", &body, SLOW_TIMEOUT).unwrap();
                assert_eq!(r.status, 200, "{}", r.body);
                let v = r.json().unwrap();
                let choice0 = &v["choices"][0];
                assert_eq!(choice0["finish_reason"], "tool_calls", "{v}");
                assert!(choice0["message"]["content"].is_null(), "{v}");
                let calls = assert_calls_valid(tools, &choice0["message"]["tool_calls"]);
                if i % 2 == 1 {
                    assert_eq!(calls.len(), 1, "parallel_tool_calls false: one call");
                }
                if choice["type"] == "function" {
                    assert!(calls.iter().all(|(n, _)| n == "book_table"), "{calls:?}");
                }
                // Streamed, the deltas reassemble to whole calls that validate.
                let mut body = body;
                body["stream"] = json!(true);
                let r = post_json(addr, "/v1/chat/completions", &body, SLOW_TIMEOUT).unwrap();
                assert_eq!(r.status, 200, "{}", r.body);
                let data = r.sse_data();
                assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
                let mut streamed: Vec<(String, String)> = Vec::new();
                let mut finish = None;
                let mut pieces = 0;
                for d in &data[..data.len() - 1] {
                    let chunk: Value = serde_json::from_str(d).unwrap();
                    let c = &chunk["choices"][0];
                    for call in c["delta"]["tool_calls"].as_array().into_iter().flatten() {
                        let index = call["index"].as_u64().unwrap() as usize;
                        if index == streamed.len() {
                            assert!(call["id"].is_string() && call["type"] == "function", "{call}");
                            assert_eq!(call["function"]["arguments"], "", "the opening carries no arguments: {call}");
                            streamed.push((call["function"]["name"].as_str().unwrap().to_string(), String::new()));
                        }
                        let piece = call["function"]["arguments"].as_str().unwrap_or("");
                        streamed[index].1.push_str(piece);
                        pieces += usize::from(!piece.is_empty());
                    }
                    if let Some(f) = c["finish_reason"].as_str() {
                        finish = Some(f.to_string());
                    }
                }
                assert_eq!(finish.as_deref(), Some("tool_calls"));
                // The same seed usually gives the same calls, but the prompt's cached cells make
                // the floats differ slightly: the streamed calls are checked on their own.
                assert!(!streamed.is_empty());
                // Each call opens (name, empty arguments) before its arguments arrive: they
                // stream as generated (short ones may fall in the held-back tail in one piece).
                assert!(pieces >= streamed.len(), "a call without arguments: {data:?}");
                for (name, args) in &streamed {
                    assert_call_valid(tools, name, args);
                }
            });
        }
    });
    // `auto`: text or a valid call.
    for (i, prompt) in ["Say hello to me.", "What is the weather in Rome, in celsius?"].iter().enumerate() {
        let r =
            post_json(addr, "/v1/chat/completions", &tool_body(prompt, json!("auto"), true, 10 + i as u64), TIMEOUT)
                .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json().unwrap();
        let m = &v["choices"][0]["message"];
        match m["tool_calls"].as_array() {
            Some(_) => {
                assert_calls_valid(&tools, &m["tool_calls"]);
                assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
            }
            None => assert!(m["content"].as_str().is_some_and(|t| !t.starts_with('{') && !t.starts_with('[')), "{v}"),
        }
    }
    // A conversation with an earlier call and its result.
    let body = json!({
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"unit\":\"celsius\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 3}"}
        ],
        "tools": tools, "tool_choice": "none", "max_tokens": 16, "seed": 1
    });
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json().unwrap()["choices"][0]["message"]["content"].is_string());
    // A keyword that needs a run-time check: refused under auto, kept under required.
    let needs_check = json!([{"type": "function", "function": {"name": "tag", "parameters": {"type": "object",
        "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true, "maxItems": 3}},
        "required": ["tags"], "additionalProperties": false}}}]);
    let mut body = tool_body("Tag it.", json!("auto"), false, 3);
    body["tools"] = needs_check.clone();
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("uniqueItems"), "{}", r.body);
    body["tool_choice"] = json!("required");
    let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_calls_valid(&needs_check, &r.json().unwrap()["choices"][0]["message"]["tool_calls"]);
    // Bad tool requests are 400s naming the field.
    for (tools, choice) in [
        (json!([{"type": "function", "function": {"name": "x y"}}]), json!("auto")),
        (tool_defs(), json!({"type": "function", "function": {"name": "nope"}})),
        (json!("tools"), json!("auto")),
    ] {
        let body = json!({"messages": [{"role": "user", "content": "x"}], "tools": tools, "tool_choice": choice});
        let r = post_json(addr, "/v1/chat/completions", &body, TIMEOUT).unwrap();
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.json().unwrap()["error"]["param"].is_string(), "{}", r.body);
    }
}

/// The value of the sample `name{labels}` in an OpenMetrics text (0 if absent).
fn sample(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels).and_then(|rest| rest.strip_prefix(' ')))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0.0)
}

/// `/metrics` is OpenMetrics text whose counters move by exactly the requests sent (by
/// status) and their completion tokens; every request leaves one log line with its id.
fn metrics_count_and_every_request_is_logged(addr: &str, server: &Server) {
    let scrape = || {
        let r = request(addr, "GET", "/metrics", None, TIMEOUT).unwrap();
        assert_eq!(r.status, 200);
        assert!(r.header("content-type").is_some_and(|c| c.starts_with("application/openmetrics-text")));
        r.body
    };
    let before = scrape();
    // Every line is a comment (HELP, TYPE, UNIT, EOF) or `name{labels} value`.
    for line in before.lines() {
        let ok = line.starts_with("# HELP ")
            || line.starts_with("# TYPE ")
            || line.starts_with("# UNIT ")
            || line == "# EOF"
            || line.rsplit_once(' ').is_some_and(|(name, v)| {
                name.starts_with("constrain_") && (v.parse::<f64>().is_ok() || v == "+Inf" || v == "NaN")
            });
        assert!(ok, "not OpenMetrics text: {line:?}");
    }
    assert_eq!(before.lines().last(), Some("# EOF"));
    for name in ["decode_step_seconds", "batch_sequences", "mask_seconds", "compile_seconds", "queue_wait_seconds"] {
        assert!(before.contains(&format!("# TYPE constrain_{name} histogram")), "{name} missing:\n{before}");
    }
    let ok_key = r#"constrain_requests_total{route="/v1/chat/completions",status="200"}"#;
    let bad_key = r#"constrain_requests_total{route="/v1/chat/completions",status="400"}"#;
    let mut ids = Vec::new();
    let mut tokens = 0;
    for i in 0..3u64 {
        let r = post_json(addr, "/v1/chat/completions", &chat_body("A point.", Some(&point_schema()), i, 24), TIMEOUT)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json().unwrap();
        tokens += v["usage"]["completion_tokens"].as_u64().unwrap();
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    for _ in 0..2 {
        let r = request(addr, "POST", "/v1/chat/completions", Some(b"{oops"), TIMEOUT).unwrap();
        assert_eq!(r.status, 400);
    }
    let after = scrape();
    assert_eq!(sample(&after, ok_key) - sample(&before, ok_key), 3.0, "{after}");
    assert_eq!(sample(&after, bad_key) - sample(&before, bad_key), 2.0, "{after}");
    let toks = "constrain_completion_tokens_total";
    assert_eq!(sample(&after, toks) - sample(&before, toks), tokens as f64, "{after}");
    // The point schema was compiled and its masks cached: every cache the budget bounds
    // holds something, and none more than the default budget.
    for cache in ["mask", "rules", "constraints"] {
        let bytes = sample(&after, &format!(r#"constrain_cache_bytes{{cache="{cache}"}}"#));
        assert!(bytes > 0.0 && bytes < 256.0 * 1048576.0, "{cache}: {bytes}\n{after}");
    }
    // The last log line of a request is written when its record drops: wait a moment.
    std::thread::sleep(Duration::from_millis(200));
    let lines = server.stderr_lines();
    for id in &ids {
        let mine: Vec<_> = lines.iter().filter(|l| l.contains(id.as_str())).collect();
        assert_eq!(mine.len(), 1, "{id}: {lines:#?}");
        for field in [
            "status=200",
            "prompt_tokens=",
            "completion_tokens=",
            "queue_ms=",
            "ttft_ms=",
            "total_ms=",
            "cache=hit",
            "finish=",
            "backtracks=",
        ] {
            assert!(mine[0].contains(field), "{field} missing: {}", mine[0]);
        }
    }
}

/// Two more servers: `--api-key`, `--max-tokens-limit`, `--request-timeout` and JSON logs
/// on one; on the other, SIGTERM during 8 streaming requests: every stream ends with
/// `[DONE]` (after an error event if it was cut), and the process exits 0.
fn limits_and_graceful_shutdown(exe: &Path) {
    let spawn = |extra: &[&str]| {
        let mut args = vec!["--parallel", "8", "-c", "1024", "--api-key", "s3cret", "--max-tokens-limit", "500"];
        args.extend(["--shutdown-grace", "0.5", "--log-format", "json"]);
        args.extend(extra);
        Server::spawn(exe, &args, TIMEOUT).expect("second server")
    };
    let long = |stream: bool, max: u64| {
        json!({"prompt": "Once upon a time", "max_tokens": max, "stream": stream, "temperature": 1.0, "seed": 5,
               "logit_bias": {"0": -100, "2": -100, "4": -100}})
        .to_string()
    };
    let post = |addr: &str, body: &str, key: Option<&str>| {
        let auth = key.map(|k| format!("Bearer {k}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
        open_stream(addr, "POST", "/v1/completions", &headers, Some(body.as_bytes()), TIMEOUT).unwrap()
    };
    let status = |s: constrain_cli::serve::client::Stream| s.read_rest().unwrap().status;

    // Limits, on a server with a 3 s request timeout.
    let server = spawn(&["--request-timeout", "3"]);
    let addr = server.addr.clone();
    assert_eq!(status(post(&addr, &long(false, 4), None)), 401);
    assert_eq!(status(post(&addr, &long(false, 4), Some("wrong"))), 401);
    // With the key: `/v1/models` answers (a generation could exceed the 3 s timeout on a
    // loaded machine).
    let models = |key: &str| {
        let auth = format!("Bearer {key}");
        open_stream(&addr, "GET", "/v1/models", &[("authorization", &auth)], None, TIMEOUT).unwrap()
    };
    assert_eq!(status(models("wrong")), 401);
    assert_eq!(status(models("s3cret")), 200);
    assert_eq!(status(post(&addr, &long(false, 501), Some("s3cret"))), 400);
    // 500 tokens take over 5 s on this machine (more under load): the 3 s timeout ends the request.
    let r = post(&addr, &long(false, 500), Some("s3cret")).read_rest().unwrap();
    assert_eq!(r.status, 408, "{}", r.body);
    // The 408's log line is written when its handler ends, which can be just after the
    // client has the response: wait for it (at most 5 s).
    let timed_out = |l: &Value| l["status"] == 408 && l["step"] == "timeout";
    let mut lines = server.stderr_lines();
    for _ in 0..50 {
        if lines.iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()).any(|l| timed_out(&l)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        lines = server.stderr_lines();
    }
    let json_lines: Vec<Value> = lines.iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(json_lines.iter().any(|l| l["message"] == "request failed" && l["status"] == 401), "{lines:#?}");
    assert!(json_lines.iter().any(timed_out), "{lines:#?}");
    drop(server);

    // Shutdown, on a server without a timeout (so that a loaded machine cannot end the
    // streams before the signal): SIGTERM during 8 streams ends each with `[DONE]` (after
    // an error event if the grace ran out), and the process exits 0.
    let mut server = spawn(&[]);
    let addr = server.addr.clone();
    let streams: Vec<_> = (0..8).map(|_| post(&addr, &long(true, 400), Some("s3cret"))).collect();
    let streams: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            assert_eq!(s.status, 200);
            let kind = s.headers.iter().find(|(n, _)| n == "content-type").map(|(_, v)| v.clone());
            assert!(kind.as_deref().is_some_and(|k| k.contains("text/event-stream")), "{kind:?}");
            let first = s.next_data().unwrap().expect("a first event");
            (s, first)
        })
        .collect();
    let pid = server.pid().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    for (mut s, first) in streams {
        let mut data = vec![first];
        while let Some(d) = s.next_data().unwrap() {
            data.push(d);
        }
        assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "a stream did not end: {data:?}");
    }
    let code = server.wait_exit(Duration::from_secs(30)).expect("the server exits after SIGTERM");
    assert_eq!(code, Some(0), "exit status after SIGTERM");
}

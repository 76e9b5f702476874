//! `constrain serve`: an OpenAI-compatible HTTP server with batched, constrained decoding.
//!
//! Input: HTTP requests (`POST /v1/chat/completions`, `POST /v1/completions`,
//! `GET /v1/models`, `GET /health`). Output: OpenAI-shaped JSON bodies, or Server-Sent Events
//! ending with `data: [DONE]` for `stream: true`; errors as `{"error": {...}}` with 400 (bad
//! request, schema or grammar — a schema error names its JSON pointer), 413 (body over the
//! limit), 503 (queue full), 500 (generation failed).
//!
//! How: one OS thread owns the model and the llama.cpp context and runs
//! [`constrain_llama::Generator::serve_batched`] (continuous batching, one decode per step for
//! every active sequence). Handlers on a small tokio runtime check the request
//! ([`api::parse`]), compile the constraint on a blocking thread (cached by a hash of the
//! schema or grammar: a repeated schema is not compiled again), send the job to the decode
//! thread and await its events on a channel. A client that goes away drops that channel; the
//! decode thread then frees the sequence and its KV cells. Function calling (`tools`) is
//! a constraint like the others ([`tools`]).
//!
//! Operations: every request leaves one log line ([`obs::Record`]), `GET /metrics` serves
//! Prometheus metrics ([`obs::Metrics`]); SIGTERM or Ctrl-C stops accepting, gives in-flight
//! requests `--shutdown-grace` seconds, ends the rest with an error (an error event on a
//! stream) and exits 0. Limits: `--request-timeout`, `--max-tokens-limit`, `--api-key`.
pub mod api;
pub mod bench;
pub mod client;
pub mod obs;
pub mod soak;
pub mod tools;

use api::{ApiError, ConstraintSpec, Job, StopFilter};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use constrain::mask::TokenIndex;
use constrain::matcher::Constraint;
use constrain::schema::Compiled;
use constrain_llama::{BatchChoice, BatchEvent, BatchRequest, EventSink, Generator, GeneratorSettings, Output};
use obs::{Metrics, Record};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// `--ctx-size`'s default: tokens per sequence.
pub const DEFAULT_CTX_SIZE: u32 = 2048;

/// Arguments of `constrain serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// GGUF model file [default: $CONSTRAIN_MODEL, else the cached SmolLM2-135M-Instruct].
    #[arg(short = 'm', long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on; 0 picks a free one (the address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Sequences decoded together in one batch.
    #[arg(long, default_value_t = 8)]
    pub parallel: usize,
    /// Context size of each sequence in tokens (prompt + output); the KV cache holds
    /// `parallel` times this.
    #[arg(short = 'c', long = "ctx-size", default_value_t = DEFAULT_CTX_SIZE)]
    pub ctx_size: u32,
    /// CPU threads for llama.cpp [default: all available cores].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Requests allowed to wait for a free sequence; more get 503.
    #[arg(long, default_value_t = 64)]
    pub max_queue: usize,
    /// Largest request body in bytes; larger ones get 413.
    #[arg(long, default_value_t = 4 << 20)]
    pub max_body: usize,
    /// `max_tokens` of a request that gives none.
    #[arg(long, default_value_t = 512)]
    pub default_max_tokens: usize,
    /// Whitespace in JSON Schema output (`compact`: none, as OpenAI's structured outputs;
    /// `pretty`: bounded indentation, as the command line's default).
    #[arg(long, value_enum, default_value_t = crate::cli::constraint_args::WhitespaceArg::Compact)]
    pub whitespace: crate::cli::constraint_args::WhitespaceArg,
    /// Compiled constraints kept (least recently used ones are dropped; their bytes are
    /// bounded by an eighth of `--memory-budget` too).
    #[arg(long, default_value_t = 64)]
    pub cache_size: usize,
    #[command(flatten)]
    pub memory: crate::cli::constraint_args::MemoryArgs,
    /// Show llama.cpp's logs, and debug lines (each newly compiled schema's notes).
    #[arg(long)]
    pub verbose: bool,
    /// Log lines as `text` (`key=value` fields) or `json` (one object per line).
    #[arg(long, value_enum, default_value_t = obs::LogFormat::Text)]
    pub log_format: obs::LogFormat,
    /// Seconds in-flight requests get to finish after SIGTERM or Ctrl-C; then they end with
    /// an error and the server exits.
    #[arg(long, default_value_t = 30.0)]
    pub shutdown_grace: f64,
    /// Seconds a request may take, queueing included; then it ends with an error (408, or
    /// an error event on a stream). 0: no limit.
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout: f64,
    /// Largest `max_tokens` a request may ask for (larger: 400).
    #[arg(long, default_value_t = 8192)]
    pub max_tokens_limit: usize,
    /// Require `Authorization: Bearer KEY` on the `/v1` routes (compared in constant time).
    /// Off by default.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
}

/// What every handler shares.
struct AppState {
    /// `None` once the server is shutting down (the decode thread then ends).
    jobs: Mutex<Option<mpsc::Sender<BatchRequest>>>,
    index: Arc<TokenIndex>,
    /// Compiled constraints by request hash.
    cache: constrain::matcher::ConstraintCache<u64, Constraint>,
    inflight: AtomicUsize,
    max_inflight: usize,
    model_id: String,
    /// Sequences in use (kept by the decode thread).
    busy: Arc<AtomicUsize>,
    parallel: usize,
    default_max_tokens: usize,
    whitespace: constrain::schema::Whitespace,
    /// `--verbose`: debug lines on stderr (each compiled schema's notes, once).
    verbose: bool,
    metrics: Arc<Metrics>,
    /// The event channel of every request waiting for the decode thread, by key: shutdown
    /// ends them through it.
    live: Mutex<HashMap<u64, UnboundedSender<Ev>>>,
    next_key: AtomicUsize,
    /// Set by SIGTERM or Ctrl-C: new requests get 503.
    shutting_down: AtomicBool,
    request_timeout: Option<Duration>,
    max_tokens_limit: usize,
    api_key: Option<String>,
}

/// Decrements the in-flight count and forgets the request's channel when it ends, however
/// it ends.
struct Inflight {
    state: Arc<AppState>,
    key: Option<u64>,
    /// Tells the decode thread to stop the sequence (the request is over, or its client is
    /// gone: the handler was dropped).
    cancel: Arc<AtomicBool>,
}

impl Drop for Inflight {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.state.inflight.fetch_sub(1, Ordering::SeqCst);
        if let (Some(key), Ok(mut live)) = (self.key, self.state.live.lock()) {
            live.remove(&key);
        }
    }
}

/// What the decode thread sends a handler (after stop strings are applied), or the server
/// itself when it ends a request (shutdown).
enum Ev {
    /// Text of the choice with this index.
    Text(usize, String),
    /// The choice with this index is done (and whether a stop string ended it).
    Done(usize, Box<Output>, bool),
    /// A choice failed: the whole request fails.
    Failed(constrain_llama::Error),
    /// Ended by the server: the error, and the step (`shutdown`, `timeout`).
    Aborted(ApiError, &'static str),
}

/// A failed request: the error and the step it failed at.
struct Failure(ApiError, &'static str);

/// `.map_err(at("step"))`: an error at that step.
fn at(step: &'static str) -> impl Fn(ApiError) -> Failure {
    move |e| Failure(e, step)
}

/// Whether two secrets are equal, in time that depends only on their lengths.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
        diff = std::hint::black_box(diff);
    }
    diff == 0
}

/// The next event, or an abort once `deadline` passes.
async fn next_event(rx: &mut UnboundedReceiver<Ev>, deadline: Option<tokio::time::Instant>) -> Option<Ev> {
    let Some(deadline) = deadline else { return rx.recv().await };
    match tokio::time::timeout_at(deadline, rx.recv()).await {
        Ok(ev) => ev,
        Err(_) => Some(Ev::Aborted(
            ApiError::new(408, "timeout", "the request took longer than the server's --request-timeout"),
            "timeout",
        )),
    }
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = Box::pin(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            let term = Box::pin(async move {
                term.recv().await;
            });
            futures_util::future::select(ctrl_c, term).await;
            return;
        }
    }
    ctrl_c.await;
}

/// Ends every request still waiting for the decode thread with a 503 (an error event on a
/// stream); their sequences are freed at the decode thread's next step.
fn abort_all(state: &AppState) {
    let live = state.live.lock().map(|l| l.values().cloned().collect::<Vec<_>>()).unwrap_or_default();
    tracing::warn!(requests = live.len(), "shutdown grace over: ending the requests still running");
    for tx in live {
        let e = ApiError::new(503, "server_shutting_down", "the server is shutting down");
        let _ = tx.send(Ev::Aborted(e, "shutdown"));
    }
}

/// Runs the server until SIGTERM or Ctrl-C, then shuts down gracefully (see the module doc).
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    obs::init_logs(args.log_format, args.verbose);
    let metrics = Arc::new(Metrics::new());
    let path = match &args.model {
        Some(p) => p.clone(),
        None => constrain_llama::default_model_path()?,
    };
    let model_id = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "model".into());
    let settings = GeneratorSettings {
        ctx_size: args.ctx_size,
        threads: args.threads,
        verbose: args.verbose,
        index: args.memory.index_config(),
        ..GeneratorSettings::default()
    };
    let (jobs_tx, jobs_rx) = mpsc::channel::<BatchRequest>();
    let (ready_tx, ready_rx) = mpsc::channel();
    let parallel = args.parallel.clamp(1, 256);
    let busy = Arc::new(AtomicUsize::new(0));
    let busy_decode = busy.clone();
    let step_metrics = metrics.clone();
    let (ended_tx, ended_rx) = mpsc::channel::<()>();
    // The decode thread owns the model and the context for the server's lifetime.
    std::thread::Builder::new().name("decode".into()).spawn(move || {
        let _ended = ended_tx;
        let generator = match Generator::load(&path, settings) {
            Ok(g) => g,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let index = generator.index().clone();
        let announced = std::cell::Cell::new(false);
        let served = generator.serve_batched(
            parallel,
            jobs_rx,
            &busy_decode,
            || {
                announced.set(true);
                let _ = ready_tx.send(Ok(index));
            },
            |step| step_metrics.step(step),
        );
        match served {
            Ok(()) => {}
            // The context could not be created: the main thread is still waiting.
            Err(e) if !announced.get() => {
                let _ = ready_tx.send(Err(e));
            }
            Err(e) => {
                tracing::error!(cause = %e, step = "decode", "the decode loop failed");
                std::process::exit(1);
            }
        }
    })?;
    let index = ready_rx.recv().map_err(|_| anyhow::anyhow!("the decode thread ended while loading the model"))??;
    let cache = constrain::matcher::ConstraintCache::new(args.cache_size.max(1), index.config().constraint_cache_bytes);
    let state = Arc::new(AppState {
        jobs: Mutex::new(Some(jobs_tx)),
        index,
        cache,
        inflight: AtomicUsize::new(0),
        max_inflight: parallel + args.max_queue,
        model_id,
        busy,
        parallel,
        default_max_tokens: args.default_max_tokens.clamp(1, args.max_tokens_limit.max(1)),
        whitespace: args.whitespace.into(),
        verbose: args.verbose,
        metrics,
        live: Mutex::new(HashMap::new()),
        next_key: AtomicUsize::new(0),
        shutting_down: AtomicBool::new(false),
        request_timeout: Some(Duration::from_secs_f64(args.request_timeout.max(0.0))).filter(|d| !d.is_zero()),
        max_tokens_limit: args.max_tokens_limit.max(1),
        api_key: args.api_key.clone().filter(|k| !k.is_empty()),
    });
    let app = router(state.clone(), args.max_body);
    let grace = Duration::from_secs_f64(args.shutdown_grace.max(0.0));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let served: anyhow::Result<()> = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port)).await?;
        eprintln!("constrain serve: listening on http://{}", listener.local_addr()?);
        let st = state.clone();
        let shutdown = async move {
            shutdown_signal().await;
            tracing::info!(grace_s = grace.as_secs_f64(), "shutting down: no new requests; in-flight ones may finish");
            st.shutting_down.store(true, Ordering::SeqCst);
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                abort_all(&st);
                // A client that reads nothing more would hold the server open: not forever.
                tokio::time::sleep(Duration::from_secs(5)).await;
                tracing::warn!("connections still open 5 s after the grace: exiting");
                std::process::exit(0);
            });
        };
        axum::serve(listener, app).with_graceful_shutdown(shutdown).await?;
        Ok(())
    });
    // The decode thread ends once its channel closes and its sequences are freed.
    if let Ok(mut jobs) = state.jobs.lock() {
        jobs.take();
    }
    drop(state);
    runtime.shutdown_timeout(Duration::from_secs(1));
    let _ = ended_rx.recv_timeout(Duration::from_secs(10));
    tracing::info!("stopped");
    served
}

fn router(state: Arc<AppState>, max_body: usize) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

async fn not_found(State(state): State<Arc<AppState>>) -> Response {
    let mut rec = Record::new(state.metrics.clone(), request_id("req"), "other");
    let e = ApiError::new(404, "invalid_request_error", "no such endpoint");
    rec.fail(404, e.kind, "route", &e.message);
    error_response(&e)
}

fn request_id(prefix: &str) -> String {
    format!("{prefix}-{:x}", rand::random::<u64>())
}

/// `--api-key`: `Authorization: Bearer KEY`, or a 401.
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &state.api_key else { return Ok(()) };
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if same_secret(given.trim().as_bytes(), key.as_bytes()) {
        return Ok(());
    }
    Err(ApiError::new(401, "invalid_request_error", "a valid API key is required (Authorization: Bearer KEY)")
        .with_code("invalid_api_key"))
}

/// Prometheus metrics (OpenMetrics text).
async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let mut rec = Record::new(state.metrics.clone(), request_id("req"), "/metrics");
    rec.quiet = true;
    let busy = state.busy.load(Ordering::Relaxed);
    let queued = state.inflight.load(Ordering::SeqCst).saturating_sub(busy);
    let caches = [
        ("mask", state.index.cache_bytes()),
        ("rules", state.index.rule_cache().bytes()),
        ("constraints", state.cache.stats().1),
    ];
    let body = state.metrics.render(busy, queued, &caches);
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(axum::http::header::CONTENT_TYPE, content_type)], body).into_response()
}

fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(e.body())).into_response()
}

/// `{"status": "ok"}` (`shutting_down` after SIGTERM) plus the sequences in use and the
/// requests in flight.
async fn health(State(state): State<Arc<AppState>>) -> Json<Value> {
    let mut rec = Record::new(state.metrics.clone(), request_id("req"), "/health");
    rec.quiet = true;
    let down = state.shutting_down.load(Ordering::SeqCst);
    Json(json!({
        "status": if down { "shutting_down" } else { "ok" },
        "slots_busy": state.busy.load(Ordering::Relaxed),
        "slots_total": state.parallel,
        "requests_in_flight": state.inflight.load(Ordering::SeqCst),
    }))
}

async fn models(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let mut rec = Record::new(state.metrics.clone(), request_id("req"), "/v1/models");
    if let Err(e) = authorize(&state, &headers) {
        rec.fail(e.status, e.kind, "auth", &e.message);
        return error_response(&e);
    }
    rec.finish = "stop";
    Json(json!({"object": "list", "data": [
        {"id": state.model_id, "object": "model", "created": 0, "owned_by": "constrain"}
    ]}))
    .into_response()
}

async fn chat(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    handle(state, headers, body, true).await
}

async fn completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(state, headers, body, false).await
}

async fn handle(state: Arc<AppState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>, chat: bool) -> Response {
    let id = request_id(if chat { "chatcmpl" } else { "cmpl" });
    let route = if chat { "/v1/chat/completions" } else { "/v1/completions" };
    let mut rec = Some(Record::new(state.metrics.clone(), id.clone(), route));
    let result = match authorize(&state, &headers) {
        Ok(()) => respond(state, body, chat, &id, &mut rec).await,
        Err(e) => Err(Failure(e, "auth")),
    };
    match result {
        Ok(r) => r,
        Err(Failure(e, step)) => {
            if let Some(rec) = rec.as_mut() {
                rec.fail(e.status, e.kind, step, &e.message);
            }
            error_response(&e)
        }
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Maps a generation error to an HTTP error.
fn generation_error(e: &constrain_llama::Error) -> ApiError {
    use constrain_llama::Error as E;
    match e {
        E::PromptTooLong { .. } => {
            ApiError::bad("messages".to_string(), e.to_string()).with_code("context_length_exceeded")
        }
        E::BudgetTooSmall { .. } => ApiError::bad("max_tokens".to_string(), e.to_string()),
        E::Settings(_) | E::Schema(_) | E::Constraint(_) => ApiError::bad(None, e.to_string()),
        _ => ApiError::new(500, "server_error", e.to_string()),
    }
}

/// The schema compiler's options of a request (`strict`: OpenAI's `strict` flag).
fn schema_options(state: &AppState, strict: bool) -> constrain::schema::Options {
    constrain::schema::Options::default().with_strict(strict).with_whitespace(state.whitespace)
}

/// With `--verbose`, the notes of a newly compiled schema, one debug line each: once per
/// schema (a cached schema is not compiled again), never per request. Warnings (an unknown
/// `$schema`) are logged without `--verbose`, as the user should act on them.
fn log_notes(state: &AppState, key: u64, notes: &[constrain::schema::Note]) {
    for n in notes {
        if n.is_warning() {
            tracing::warn!(schema = %format!("{key:016x}"), warning = %n, "schema warning");
        } else if state.verbose {
            tracing::debug!(schema = %format!("{key:016x}"), note = %n, "schema note");
        }
    }
}

/// Compiles (or finds in the cache: `true`) the constraint of `spec`, and counts it.
fn compile(state: &AppState, spec: &ConstraintSpec) -> Result<(Constraint, bool), ApiError> {
    let started = Instant::now();
    let key = spec.cache_key();
    if let Some(c) = state.cache.get(&key) {
        state.metrics.constraint(true, started.elapsed());
        return Ok((c, true));
    }
    let grammar = match spec {
        ConstraintSpec::Schema { schema, strict, param } => {
            let compiled = constrain::schema::compile(schema, &schema_options(state, *strict));
            compiled.inspect(|compiled| log_notes(state, key, compiled.notes())).map_err(|e| {
                let at = if e.pointer().is_empty() { "the schema root".to_string() } else { e.pointer().to_string() };
                ApiError::bad(
                    param.to_string(),
                    format!("unsupported or invalid schema at {at} (keyword `{}`): {}", e.keyword(), e.message()),
                )
                .with_code("invalid_schema")
            })?
        }
        ConstraintSpec::Gbnf(text) => {
            constrain::grammar::gbnf::parse(text).map(Compiled::from_grammar).map_err(|e| {
                ApiError::bad("grammar".to_string(), format!("invalid GBNF grammar: {e}")).with_code("invalid_grammar")
            })?
        }
        ConstraintSpec::Tools(t) => {
            // Under `auto` the output may be text, which the run-time checks cannot read:
            // the calls are compiled without them (see `tools`).
            let options = schema_options(state, t.strict()).with_runtime_checks(!t.auto());
            let compiled = constrain::schema::compile(&t.schema(), &options)
                .inspect(|compiled| log_notes(state, key, compiled.notes()))
                .map_err(|e| {
                    let at = if e.pointer().is_empty() { "the root".to_string() } else { e.pointer().to_string() };
                    let hint = if t.auto() { " (with tool_choice auto no run-time checks are available; try required)" } else { "" };
                    ApiError::bad(
                        "tools".to_string(),
                        format!(
                            "unsupported or invalid tool parameters at {at} of the call schema (keyword `{}`): {}{hint}",
                            e.keyword(),
                            e.message()
                        ),
                    )
                    .with_code("invalid_schema")
                })?;
            if t.auto() {
                if compiled.checks().is_some() {
                    return Err(ApiError::new(
                        500,
                        "server_error",
                        "tool calls under auto compiled with run-time checks",
                    ));
                }
                let g = tools::call_or_text(compiled.grammar(), t.parallel).map_err(|e| {
                    ApiError::bad("tools".to_string(), format!("the tool grammar cannot be built: {e}"))
                })?;
                Compiled::from_grammar(g)
            } else {
                compiled
            }
        }
        ConstraintSpec::Regex(pattern) => {
            constrain::grammar::regex::compile_anchored(pattern).map(Compiled::from_grammar).map_err(|e| {
                ApiError::bad("regex".to_string(), format!("invalid regex: {e}")).with_code("invalid_regex")
            })?
        }
    };
    let mut c = Constraint::new(&grammar, state.index.clone(), &constrain::Limits::default()).map_err(|e| {
        ApiError::bad(None, format!("the constraint cannot be compiled: {e}")).with_code("invalid_constraint")
    })?;
    if let ConstraintSpec::Schema { schema, strict, .. } = spec {
        // Generation prefers the schema's property order (the constraint takes any).
        c = constrain::schema::with_order_hint(c, schema, &schema_options(state, *strict));
    }
    if let ConstraintSpec::Tools(t) = spec {
        // `name` before `arguments`; not under `auto`, where the output may be text.
        if !t.auto() {
            c = constrain::schema::with_order_hint(c, &t.schema(), &schema_options(state, t.strict()));
        }
    }
    let bytes = c.memory_usage();
    state.cache.insert(key, c.clone(), bytes);
    state.metrics.constraint(false, started.elapsed());
    Ok((c, false))
}

async fn respond(
    state: Arc<AppState>,
    body: Result<Bytes, BytesRejection>,
    chat: bool,
    id: &str,
    rec: &mut Option<Record>,
) -> Result<Response, Failure> {
    let body = body.map_err(|e| {
        let status = e.status().as_u16();
        let kind = if status == 413 { "request_too_large" } else { "invalid_request_error" };
        Failure(ApiError::new(status, kind, e.body_text()), "read")
    })?;
    let job = api::parse(&body, chat, state.default_max_tokens).map_err(at("parse"))?;
    if job.beams.is_none() && job.choices > state.parallel {
        let param = if job.choices > job.n { "best_of" } else { "n" };
        let msg = format!("{param} is at most {} on this server (its --parallel)", state.parallel);
        return Err(Failure(ApiError::bad(param.to_string(), msg), "parse"));
    }
    if job.max_tokens > state.max_tokens_limit {
        let msg = format!("max_tokens is at most {} on this server", state.max_tokens_limit);
        return Err(Failure(ApiError::bad("max_tokens".to_string(), msg), "parse"));
    }
    if state.shutting_down.load(Ordering::SeqCst) {
        return Err(Failure(ApiError::new(503, "server_shutting_down", "the server is shutting down"), "queue"));
    }
    if state.inflight.fetch_add(1, Ordering::SeqCst) >= state.max_inflight {
        state.inflight.fetch_sub(1, Ordering::SeqCst);
        return Err(Failure(ApiError::new(503, "server_busy", "the request queue is full; retry later"), "queue"));
    }
    let mut guard = Inflight { state: state.clone(), key: None, cancel: Arc::new(AtomicBool::new(false)) };
    let deadline = state.request_timeout.map(|t| tokio::time::Instant::now() + t);
    let constraint = match job.constraint.clone() {
        None => None,
        Some(spec) => {
            let st = state.clone();
            let (compiled, hit) = tokio::task::spawn_blocking(move || compile(&st, &spec))
                .await
                .map_err(|e| {
                    Failure(ApiError::new(500, "server_error", format!("compilation failed: {e}")), "compile")
                })?
                .map_err(at("compile"))?;
            if let Some(rec) = rec.as_mut() {
                rec.cache_hit = Some(hit);
            }
            Some(compiled)
        }
    };
    let (mut rx, key) = submit(&state, &job, constraint, guard.cancel.clone()).map_err(at("queue"))?;
    guard.key = Some(key);
    let meta = Meta {
        id: id.to_string(),
        created: now(),
        model: state.model_id.clone(),
        chat,
        include_usage: job.include_usage,
        tools: job.tools.clone(),
        logprobs: job.logprobs.map(|_| state.index.clone()),
    };
    if job.stream {
        // The first event decides the status: an early failure is still an HTTP error.
        let first = next_event(&mut rx, deadline).await;
        match first {
            Some(Ev::Failed(e)) => return Err(Failure(generation_error(&e), "generate")),
            Some(Ev::Aborted(e, step)) => return Err(Failure(e, step)),
            _ => {}
        }
        let Some(rec) = rec.take() else {
            return Err(Failure(ApiError::new(500, "server_error", "no request record"), "respond"));
        };
        let stream = sse_stream(meta, job.n, first, rx, guard, rec, deadline);
        return Ok(Sse::new(stream).into_response());
    }
    let mut texts = vec![String::new(); job.choices];
    let mut outs: Vec<Option<(Box<Output>, bool)>> = (0..job.choices).map(|_| None).collect();
    let mut left = job.choices;
    while left > 0 {
        match next_event(&mut rx, deadline).await {
            Some(Ev::Text(i, t)) => texts.get_mut(i).into_iter().for_each(|text| text.push_str(&t)),
            Some(Ev::Failed(e)) => return Err(Failure(generation_error(&e), "generate")),
            Some(Ev::Aborted(e, step)) => return Err(Failure(e, step)),
            Some(Ev::Done(i, out, hit)) => {
                if let Some(slot @ None) = outs.get_mut(i) {
                    *slot = Some((out, hit));
                    left -= 1;
                }
            }
            None => return Err(Failure(ApiError::new(500, "server_error", "the decode thread stopped"), "generate")),
        }
    }
    drop(guard);
    let (ranked, dropped) = best_of(texts, outs, job.n);
    let mut choices = Vec::with_capacity(job.n);
    let mut finished = Vec::with_capacity(job.n);
    for (i, (text, out)) in ranked.into_iter().enumerate() {
        let text = text.as_str();
        let Some((out, hit)) = out else { continue };
        let mut finish = api::finish_reason(out.stop, hit);
        let calls = match meta.tools.as_ref().filter(|t| tools::is_call(t, text)) {
            Some(_) => Some(tools::parse_calls(text).ok_or_else(|| {
                let msg = format!("the tool call output does not parse: {text}");
                Failure(ApiError::new(500, "server_error", msg), "respond")
            })?),
            None => None,
        };
        let choice = if let Some(calls) = calls {
            finish = "tool_calls";
            let message = json!({"role": "assistant", "content": null, "tool_calls": tool_calls_json(&calls)});
            json!({"index": i, "message": message, "logprobs": null, "finish_reason": finish})
        } else if chat {
            json!({"index": i, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": finish})
        } else {
            json!({"index": i, "text": text, "logprobs": null, "finish_reason": finish})
        };
        let mut choice = choice;
        if job.logprobs.is_some() {
            choice["logprobs"] = api::logprobs_json(state.index.vocab(), chat, &out.logprobs, text);
        }
        if let Some(rec) = rec.as_mut() {
            rec.output(&out);
            rec.finish = finish;
        }
        choices.push(choice);
        finished.push(*out);
    }
    // Every sequence generated counts, those `best_of` dropped too.
    finished.extend(dropped);
    Ok(Json(json!({
        "id": meta.id, "object": meta.object(false), "created": meta.created, "model": meta.model,
        "choices": choices, "usage": usage(&finished), "system_fingerprint": null
    }))
    .into_response())
}

/// One generated sequence as `respond` collects it: its text, and its output with whether
/// a stop string ended it.
type Collected = (String, Option<(Box<Output>, bool)>);

/// The `n` choices to return of those generated: all of them in order or, when `best_of`
/// sampled more, the `n` with the highest log-probability per token (OpenAI's `best_of`),
/// best first. The others are returned apart (their tokens count in `usage`).
fn best_of(texts: Vec<String>, outs: Vec<Option<(Box<Output>, bool)>>, n: usize) -> (Vec<Collected>, Vec<Output>) {
    let mut all: Vec<Collected> = texts.into_iter().zip(outs).collect();
    if all.len() <= n {
        return (all, Vec::new());
    }
    let per_token = |c: &Collected| {
        c.1.as_ref().map_or(f32::NEG_INFINITY, |(o, _)| {
            o.logprobs.iter().map(|l| l.logprob).sum::<f32>() / o.generated_tokens.max(1) as f32
        })
    };
    // A stable sort: ties keep the order of generation.
    all.sort_by(|a, b| per_token(b).total_cmp(&per_token(a)));
    let rest = all.split_off(n).into_iter().filter_map(|(_, o)| o.map(|(o, _)| *o)).collect();
    (all, rest)
}

/// OpenAI's `usage`, plus `backtracks`: the dead ends the decode loop backed out of (0
/// normally; see `constrain_llama::Output::backtracks`), `dead_tokens`: sampled tokens
/// refused because a search proved them dead ends (`constrain_llama::Output::dead_tokens`),
/// and `unproved_tokens`: those refused because the search ran out of fuel. Of several
/// choices (`n`): the prompt once, the rest summed.
fn usage(outs: &[Output]) -> Value {
    let prompt = outs.first().map_or(0, |o| o.prompt_tokens);
    let sum = |f: fn(&Output) -> usize| outs.iter().map(f).sum::<usize>();
    let completion = sum(|o| o.generated_tokens);
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
           "backtracks": sum(|o| o.backtracks), "dead_tokens": sum(|o| o.dead_tokens),
           "unproved_tokens": sum(|o| o.unproved_tokens)})
}

/// The `tool_calls` of a message: an id per call, the arguments as a JSON string.
fn tool_calls_json(calls: &[tools::Call]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({"id": call_id(), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    Value::Array(calls)
}

/// A new tool call id.
fn call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

/// Sends `job` to the decode thread; its events come back on the returned channel, which is
/// registered (under the returned key) for shutdown to end.
fn submit(
    state: &AppState,
    job: &Job,
    constraint: Option<Constraint>,
    cancel: Arc<AtomicBool>,
) -> Result<(UnboundedReceiver<Ev>, u64), ApiError> {
    let (tx, rx) = unbounded_channel();
    let key = state.next_key.fetch_add(1, Ordering::Relaxed) as u64;
    if let Ok(mut live) = state.live.lock() {
        live.insert(key, tx.clone());
    }
    // One sink per choice, all into the request's channel.
    let sink = |index: usize| -> EventSink {
        let tx = tx.clone();
        let mut filter = StopFilter::new(job.stop.clone());
        let mut gone = false;
        Box::new(move |ev: BatchEvent| -> bool {
            if gone {
                return false;
            }
            // `false` stops the sequence: the client is gone (a send failed) or a stop
            // string was seen (then the final `Done` still goes through).
            let sent = match ev {
                BatchEvent::Text(t) => {
                    let out = filter.push(&t);
                    let sent = out.is_empty() || tx.send(Ev::Text(index, out)).is_ok();
                    if sent && filter.hit {
                        return false;
                    }
                    sent
                }
                BatchEvent::Done(output) => {
                    let rest = filter.finish();
                    if !rest.is_empty() {
                        let _ = tx.send(Ev::Text(index, rest));
                    }
                    tx.send(Ev::Done(index, output, filter.hit)).is_ok()
                }
                BatchEvent::Failed(e) => tx.send(Ev::Failed(e)).is_ok(),
            };
            gone = !sent;
            sent
        })
    };
    // Each further choice draws with its own seed: the request's plus its index, or a
    // random one.
    let more = (1..job.choices)
        .map(|i| {
            let seed = job.sampler.seed.map_or_else(rand::random::<u64>, |s| s.wrapping_add(i as u64));
            BatchChoice {
                sampler: constrain::sampling::SamplerSettings { seed: Some(seed), ..job.sampler.clone() },
                events: sink(i),
            }
        })
        .collect();
    let request = BatchRequest {
        prompt: job.prompt.clone(),
        constraint,
        sampler: job.sampler.clone(),
        max_tokens: job.max_tokens,
        stream: job.stream,
        events: sink(0),
        cancel: Some(cancel),
        // `best_of` ranks the sampled choices by their log-probabilities.
        logprobs: job.logprobs.or((job.choices > job.n).then_some(0)),
        more,
        beams: job.beams,
    };
    let jobs = state.jobs.lock().map_err(|_| ApiError::new(500, "server_error", "the job queue is broken"))?;
    let stopped = || ApiError::new(503, "server_shutting_down", "the server is shutting down");
    jobs.as_ref().ok_or_else(stopped)?.send(request).map_err(|_| stopped())?;
    Ok((rx, key))
}

/// The fields every chunk repeats.
struct Meta {
    id: String,
    created: u64,
    model: String,
    chat: bool,
    include_usage: bool,
    /// The request's functions: text that opens a call is streamed as `tool_calls`
    /// deltas ([`tools::CallStream`]).
    tools: Option<tools::Tools>,
    /// With `logprobs` asked: the vocabulary that names the tokens of each choice's final
    /// chunk's log-probabilities.
    logprobs: Option<Arc<TokenIndex>>,
}

impl Meta {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.chat, chunk) {
            (true, true) => "chat.completion.chunk",
            (true, false) => "chat.completion",
            (false, _) => "text_completion",
        }
    }

    /// A chunk of choice `index`: its text (`first`: the choice's first chunk, which names
    /// the role) and finish reason.
    fn chunk(&self, index: usize, text: Option<&str>, finish: Option<&str>, first: bool) -> Value {
        if self.chat {
            let delta = match (text, first) {
                (Some(t), true) => json!({"role": "assistant", "content": t}),
                (Some(t), false) => json!({"content": t}),
                (None, _) => json!({}),
            };
            return self.delta_chunk(index, delta, finish);
        }
        let choice = json!({"index": index, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish});
        json!({"id": self.id, "object": self.object(true), "created": self.created, "model": self.model,
               "choices": [choice], "system_fingerprint": null})
    }

    /// A chat chunk of choice `index` with this delta.
    fn delta_chunk(&self, index: usize, delta: Value, finish: Option<&str>) -> Value {
        let choice = json!({"index": index, "delta": delta, "logprobs": null, "finish_reason": finish});
        json!({"id": self.id, "object": self.object(true), "created": self.created, "model": self.model,
               "choices": [choice], "system_fingerprint": null})
    }

    /// The chunk of a call delta of choice `index` (`first`: the choice's first chunk, which
    /// names the role): a call's opening (index, id, type, name, empty arguments) or more of
    /// its arguments, OpenAI's way.
    fn call_chunk(&self, index: usize, delta: &tools::CallDelta, first: bool) -> Value {
        let call = match delta {
            tools::CallDelta::Open { index, name } => json!({"index": index, "id": call_id(), "type": "function",
                                                             "function": {"name": name, "arguments": ""}}),
            tools::CallDelta::Arguments { index, text } => json!({"index": index, "function": {"arguments": text}}),
        };
        let mut delta = json!({"tool_calls": [call]});
        if first {
            delta["role"] = json!("assistant");
            delta["content"] = Value::Null;
        }
        self.delta_chunk(index, delta, None)
    }
}

/// What a streamed response tracks of one choice.
#[derive(Default)]
struct ChoiceStream {
    /// Whether a chunk of it was sent.
    started: bool,
    /// With tools: whether the output is a call (decided by its first byte), the call's
    /// text (checked at the end), and the reader that streams its calls as they come.
    call: Option<bool>,
    held: String,
    calls: tools::CallStream,
    /// Every piece of its text so far (sent or held), for its log-probabilities.
    text: String,
}

/// The SSE events of a streamed response: a chunk per text piece of each choice (with
/// tools, a call's opening as soon as its name is generated, then its arguments piece by
/// piece: [`tools::CallStream`]), a final chunk per choice with its finish reason, once every choice is done a usage chunk if
/// asked, then `[DONE]`.
fn sse_stream(
    meta: Meta,
    n: usize,
    first: Option<Ev>,
    rx: UnboundedReceiver<Ev>,
    guard: Inflight,
    rec: Record,
    deadline: Option<tokio::time::Instant>,
) -> impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>> {
    struct St {
        meta: Meta,
        first: Option<Ev>,
        rx: UnboundedReceiver<Ev>,
        choices: Vec<ChoiceStream>,
        /// The outputs of the choices done so far.
        outs: Vec<Output>,
        done: bool,
        queued: std::collections::VecDeque<Event>,
        rec: Record,
        deadline: Option<tokio::time::Instant>,
        _guard: Inflight,
    }
    let st = St {
        meta,
        first,
        rx,
        choices: (0..n).map(|_| ChoiceStream::default()).collect(),
        outs: Vec::new(),
        done: false,
        queued: std::collections::VecDeque::new(),
        rec,
        deadline,
        _guard: guard,
    };
    futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(ev) = st.queued.pop_front() {
                return Some((Ok(ev), st));
            }
            if st.done {
                return None;
            }
            let ev = match st.first.take() {
                Some(ev) => Some(ev),
                None => next_event(&mut st.rx, st.deadline).await,
            };
            let data = |v: Value| Event::default().data(v.to_string());
            match ev {
                Some(Ev::Text(i, t)) => {
                    if st.rec.ttft.is_none() {
                        st.rec.ttft = Some(st.rec.elapsed());
                    }
                    let Some(choice) = st.choices.get_mut(i) else { continue };
                    if st.meta.logprobs.is_some() {
                        choice.text.push_str(&t);
                    }
                    if let Some(tools) = &st.meta.tools {
                        if choice.call.is_none() && !t.is_empty() {
                            choice.call = Some(tools::is_call(tools, &t));
                        }
                        if choice.call == Some(true) {
                            choice.held.push_str(&t);
                            for delta in choice.calls.push(&t) {
                                st.queued.push_back(data(st.meta.call_chunk(i, &delta, !choice.started)));
                                choice.started = true;
                            }
                            continue;
                        }
                    }
                    let chunk = st.meta.chunk(i, Some(&t), None, !choice.started);
                    choice.started = true;
                    return Some((Ok(data(chunk)), st));
                }
                Some(Ev::Done(i, out, hit)) => {
                    let Some(choice) = st.choices.get(i) else { continue };
                    let mut finish = api::finish_reason(out.stop, hit);
                    // The calls went out as they were generated; the whole text must read
                    // as calls (the grammar ensures it).
                    let is_call = choice.call == Some(true);
                    if is_call && tools::parse_calls(&choice.held).is_none() {
                        st.done = true;
                        let e = ApiError::new(500, "server_error", "the tool call output does not parse");
                        st.rec.fail(e.status, e.kind, "respond", &e.message);
                        st.queued.push_back(data(e.body()));
                        st.queued.push_back(Event::default().data("[DONE]"));
                        continue;
                    }
                    if is_call {
                        finish = "tool_calls";
                    }
                    st.rec.output(&out);
                    st.rec.finish = finish;
                    let mut last = match is_call {
                        true => st.meta.delta_chunk(i, json!({}), Some(finish)),
                        false => st.meta.chunk(
                            i,
                            if choice.started || !st.meta.chat { None } else { Some("") },
                            Some(finish),
                            !choice.started,
                        ),
                    };
                    if let Some(index) = &st.meta.logprobs {
                        let lps = api::logprobs_json(index.vocab(), st.meta.chat, &out.logprobs, &choice.text);
                        last["choices"][0]["logprobs"] = lps;
                    }
                    st.outs.push(*out);
                    let all_done = st.outs.len() == st.choices.len();
                    if all_done && !st.meta.include_usage {
                        last["usage"] = usage(&st.outs);
                    }
                    st.queued.push_back(data(last));
                    if all_done {
                        st.done = true;
                        if st.meta.include_usage {
                            let mut u = st.meta.chunk(0, None, None, false);
                            u["choices"] = json!([]);
                            u["usage"] = usage(&st.outs);
                            st.queued.push_back(data(u));
                        }
                        st.queued.push_back(Event::default().data("[DONE]"));
                    }
                }
                ev => {
                    // The text streamed so far stays with the client; the error ends it.
                    st.done = true;
                    let (e, step) = match ev {
                        Some(Ev::Failed(e)) => (generation_error(&e), "generate"),
                        Some(Ev::Aborted(e, step)) => (e, step),
                        _ => (ApiError::new(500, "server_error", "the decode thread stopped"), "generate"),
                    };
                    // The stream's status is 200 already: the log keeps the error's.
                    st.rec.fail(e.status, e.kind, step, &e.message);
                    st.queued.push_back(data(e.body()));
                    st.queued.push_back(Event::default().data("[DONE]"));
                }
            }
        }
    })
}

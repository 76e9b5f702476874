//! What `constrain serve` tells an operator: one log line per request ([`Record`]) through
//! `tracing`, and Prometheus metrics ([`Metrics`], served at `GET /metrics`).
//!
//! Input: what a handler learns about its request (status, token counts, timings, cache
//! hit, finish reason) and what the decode thread reports per step
//! ([`constrain_llama::StepStats`]). Output: log lines on stderr (`--log-format text|json`)
//! and the OpenMetrics text exposition, which Prometheus reads.
//!
//! A [`Record`] logs when it is dropped, so every request leaves exactly one line however it
//! ends: answered, failed at any step, or abandoned by its client mid-stream (`finish` is then
//! `cancelled`).
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::{Duration, Instant};

/// `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `key=value` fields after the time, level and message.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Sends `tracing` events to stderr in `format`; debug lines only with `verbose`. Called once,
/// by `serve` only: the other commands keep their quiet output.
pub fn init_logs(format: LogFormat, verbose: bool) {
    let level = if verbose { tracing::Level::DEBUG } else { tracing::Level::INFO };
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_max_level(level).with_target(false);
    // A subscriber set before (a test harness) is kept.
    let _ = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

type Labels = Vec<(&'static str, String)>;

/// Every metric the server keeps.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    prompt_tokens: Counter,
    completion_tokens: Counter,
    backtracks: Counter,
    cache: Family<Labels, Counter>,
    memory: Family<Labels, Gauge>,
    active: Gauge,
    queued: Gauge,
    request_seconds: Histogram,
    queue_seconds: Histogram,
    ttft_seconds: Histogram,
    mask_seconds: Histogram,
    compile_seconds: Histogram,
    batch_sequences: Histogram,
    batch_tokens: Histogram,
    step_decode_seconds: Histogram,
    step_sample_seconds: Histogram,
}

/// Buckets from 0.5 ms to about 65 s, doubling.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric, under the prefix `constrain`.
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("constrain");
        let m = Metrics {
            requests: Family::default(),
            prompt_tokens: Counter::default(),
            completion_tokens: Counter::default(),
            backtracks: Counter::default(),
            cache: Family::default(),
            memory: Family::default(),
            active: Gauge::default(),
            queued: Gauge::default(),
            request_seconds: seconds(),
            queue_seconds: seconds(),
            ttft_seconds: seconds(),
            mask_seconds: seconds(),
            compile_seconds: seconds(),
            batch_sequences: Histogram::new(exponential_buckets(1.0, 2.0, 9)),
            batch_tokens: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            step_decode_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            step_sample_seconds: Histogram::new(exponential_buckets(0.00005, 2.0, 16)),
            registry: Registry::default(),
        };
        r.register("requests", "HTTP requests answered, by route and status", m.requests.clone());
        r.register("prompt_tokens", "Prompt tokens of finished requests", m.prompt_tokens.clone());
        r.register("completion_tokens", "Completion tokens of finished requests", m.completion_tokens.clone());
        r.register("backtracks", "Dead ends the decode loop backed out of", m.backtracks.clone());
        r.register("constraint_cache", "Compiled-constraint cache look-ups, by result (hit, miss)", m.cache.clone());
        r.register(
            "cache_bytes",
            "Accounted bytes of the caches the memory budget bounds, by cache (mask, rules, constraints)",
            m.memory.clone(),
        );
        r.register("active_sequences", "Sequences being decoded", m.active.clone());
        r.register("queued_requests", "Requests in flight that hold no sequence yet", m.queued.clone());
        r.register("request_duration_seconds", "Time from request to its last byte", m.request_seconds.clone());
        r.register("queue_wait_seconds", "Time a request waited for a sequence", m.queue_seconds.clone());
        r.register("time_to_first_token_seconds", "Time from request to its first token", m.ttft_seconds.clone());
        r.register("mask_seconds", "Mask time of one request (all its tokens)", m.mask_seconds.clone());
        r.register("compile_seconds", "Time to compile a constraint (cache misses)", m.compile_seconds.clone());
        r.register("batch_sequences", "Sequences in one decode step's batch", m.batch_sequences.clone());
        r.register("batch_tokens", "Tokens in one decode step's batch", m.batch_tokens.clone());
        r.register("decode_step_seconds", "Time of one llama_decode", m.step_decode_seconds.clone());
        r.register(
            "sample_step_seconds",
            "Masks and sampling of one step, all sequences",
            m.step_sample_seconds.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// The OpenMetrics text, with the gauges set first: `active` and `queued` sequences,
    /// and the caches' bytes (`(cache, bytes)` pairs).
    pub fn render(&self, active: usize, queued: usize, caches: &[(&str, usize)]) -> String {
        self.active.set(active as i64);
        self.queued.set(queued as i64);
        for &(cache, bytes) in caches {
            self.memory.get_or_create(&vec![("cache", cache.to_string())]).set(bytes as i64);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Counts one decode step.
    pub fn step(&self, s: &constrain_llama::StepStats) {
        self.batch_sequences.observe(s.sequences as f64);
        self.batch_tokens.observe(s.tokens as f64);
        self.step_decode_seconds.observe(s.decode.as_secs_f64());
        self.step_sample_seconds.observe(s.sample.as_secs_f64());
    }

    /// Counts one constraint look-up (and the compile time of a miss).
    pub fn constraint(&self, hit: bool, compile: Duration) {
        self.cache.get_or_create(&vec![("result", if hit { "hit" } else { "miss" }.to_string())]).inc();
        if !hit {
            self.compile_seconds.observe(compile.as_secs_f64());
        }
    }
}

/// What one request did, logged (one line) and counted when dropped.
pub struct Record {
    metrics: std::sync::Arc<Metrics>,
    /// The response id (`chatcmpl-…`), or a request id for other routes.
    pub id: String,
    /// The route, e.g. `/v1/chat/completions`.
    pub route: &'static str,
    started: Instant,
    /// HTTP status sent.
    pub status: u16,
    /// Prompt tokens, once known.
    pub prompt_tokens: usize,
    /// Completion tokens, once known.
    pub completion_tokens: usize,
    /// Time waiting for a sequence.
    pub queue: Option<Duration>,
    /// Time to the first token.
    pub ttft: Option<Duration>,
    /// Mask time over the request's tokens.
    pub mask: Option<Duration>,
    /// Whether the constraint came from the cache (`None`: unconstrained).
    pub cache_hit: Option<bool>,
    /// OpenAI's finish reason, `error`, or `cancelled` (the client left first).
    pub finish: &'static str,
    /// Dead ends backed out of.
    pub backtracks: usize,
    /// The error's type, step and message, if the request failed.
    pub error: Option<(&'static str, &'static str, String)>,
    /// Whether to log at debug level only (health checks, scrapes).
    pub quiet: bool,
}

impl Record {
    /// A record of a request that starts now.
    pub fn new(metrics: std::sync::Arc<Metrics>, id: String, route: &'static str) -> Record {
        Record {
            metrics,
            id,
            route,
            started: Instant::now(),
            status: 200,
            prompt_tokens: 0,
            completion_tokens: 0,
            queue: None,
            ttft: None,
            mask: None,
            cache_hit: None,
            finish: "cancelled",
            backtracks: 0,
            error: None,
            quiet: false,
        }
    }

    /// Time since the request started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Takes the numbers of a finished generation. `ttft` is measured by the caller when it
    /// saw text early (streaming); otherwise it is the queue wait plus the prompt's time.
    /// Called once per choice of a request with several (`n`): the prompt counts once, the
    /// completion tokens, backtracks and mask time add up.
    pub fn output(&mut self, out: &constrain_llama::Output) {
        if self.queue.is_some() {
            self.completion_tokens += out.generated_tokens;
            self.backtracks += out.backtracks;
            self.mask = self.mask.map(|m| m + out.timings.mask);
            return;
        }
        self.prompt_tokens = out.prompt_tokens;
        self.completion_tokens = out.generated_tokens;
        self.backtracks = out.backtracks;
        self.mask = Some(out.timings.mask);
        // The decode thread times a request from its admission: the rest was queueing.
        let busy = out.timings.prompt + out.timings.generation + out.timings.closing;
        let queue = self.elapsed().saturating_sub(busy);
        self.queue = Some(queue);
        if self.ttft.is_none() {
            self.ttft = Some(queue + out.timings.prompt);
        }
    }

    /// Marks the request failed: its status, error type, the step it failed at, and why.
    pub fn fail(&mut self, status: u16, kind: &'static str, step: &'static str, message: &str) {
        self.status = status;
        self.finish = "error";
        self.error = Some((kind, step, message.to_string()));
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let total = self.elapsed();
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        let m = &self.metrics;
        m.requests.get_or_create(&vec![("route", self.route.to_string()), ("status", self.status.to_string())]).inc();
        if !self.quiet {
            m.prompt_tokens.inc_by(self.prompt_tokens as u64);
            m.completion_tokens.inc_by(self.completion_tokens as u64);
            m.backtracks.inc_by(self.backtracks as u64);
            m.request_seconds.observe(total.as_secs_f64());
            for (h, v) in [(&m.queue_seconds, self.queue), (&m.ttft_seconds, self.ttft), (&m.mask_seconds, self.mask)] {
                if let Some(v) = v {
                    h.observe(v.as_secs_f64());
                }
            }
        }
        let cache = match self.cache_hit {
            None => "none",
            Some(true) => "hit",
            Some(false) => "miss",
        };
        let total_ms = total.as_secs_f64() * 1000.0;
        match &self.error {
            Some((kind, step, message)) => tracing::warn!(
                id = %self.id, route = %self.route, status = self.status, error_type = %kind, step = %step,
                prompt_tokens = self.prompt_tokens, completion_tokens = self.completion_tokens,
                total_ms, cache = %cache, cause = %message, "request failed"
            ),
            None if self.quiet => {
                tracing::debug!(id = %self.id, route = %self.route, status = self.status, total_ms, "request")
            }
            None => tracing::info!(
                id = %self.id, route = %self.route, status = self.status,
                prompt_tokens = self.prompt_tokens, completion_tokens = self.completion_tokens,
                queue_ms = ms(self.queue), ttft_ms = ms(self.ttft), total_ms,
                cache = %cache, finish = %self.finish, backtracks = self.backtracks, "request"
            ),
        }
    }
}

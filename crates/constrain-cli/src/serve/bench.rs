//! `constrain bench-serve`: load test of `constrain serve` with 1, 4 and 8 concurrent clients,
//! constrained (a JSON Schema) and unconstrained.
//!
//! Input: a running server's address (`--addr`), or none: a server is started as a child
//! process (`constrain serve --port 0 --parallel P`) and stopped at the end. Output: one line
//! per (mode, clients): requests, aggregate completion tokens per second over the wall time,
//! and p50/p99 latency per request. Bounded: every client sends `--requests` requests.
use super::client::{post_json, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Arguments of `constrain bench-serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchServeArgs {
    /// `host:port` of a running `constrain serve`; without it one is started.
    #[arg(long)]
    pub addr: Option<String>,
    /// Concurrent clients to try, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    pub clients: Vec<usize>,
    /// Requests each client sends per measurement.
    #[arg(long, default_value_t = 4)]
    pub requests: usize,
    /// `max_tokens` of each request.
    #[arg(short = 'n', long, default_value_t = 128)]
    pub max_tokens: usize,
    /// `--parallel` of the server started here.
    #[arg(long, default_value_t = 8)]
    pub parallel: usize,
    /// GGUF model of the server started here.
    #[arg(short = 'm', long)]
    pub model: Option<std::path::PathBuf>,
    /// CPU threads of the server started here [default: all cores].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
}

/// The schema of the constrained runs: a list of people long enough that, like the free
/// text of the unconstrained runs, most outputs use the whole token budget (closing mode
/// ends them valid), so both modes produce about as many tokens per request.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "people": {
                "type": "array",
                "minItems": 2,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": 40},
                        "age": {"type": "integer", "minimum": 0, "maximum": 120},
                        "city": {"type": "string", "maxLength": 40},
                        "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 5}
                    },
                    "required": ["name", "age", "city", "hobbies"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["people"],
        "additionalProperties": false
    })
}

/// The prompt of every request.
const PROMPT: &str = "Invent six people with their name, age, city and hobbies, and describe each in detail.";

/// One measurement's numbers.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Requests completed.
    pub requests: usize,
    /// Completion tokens over all requests.
    pub tokens: u64,
    /// Wall time of the whole measurement.
    pub wall: Duration,
    /// Per-request latencies, sorted.
    pub latencies: Vec<Duration>,
}

impl Measurement {
    /// Aggregate completion tokens per second.
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The `q` quantile of the latencies (nearest rank).
    pub fn latency(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[rank - 1]
    }
}

/// Runs `clients` clients, each sending `requests` requests, and measures them.
pub fn measure(
    addr: &str,
    clients: usize,
    requests: usize,
    max_tokens: usize,
    constrained: bool,
) -> anyhow::Result<Measurement> {
    let start = Instant::now();
    let results: Vec<anyhow::Result<Vec<(Duration, u64)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                scope.spawn(move || {
                    let mut out = Vec::new();
                    for r in 0..requests {
                        let mut body = json!({
                            "messages": [{"role": "user", "content": PROMPT}],
                            "max_tokens": max_tokens,
                            "temperature": 0.8,
                            "seed": (c * 1000 + r) as u64,
                        });
                        if constrained {
                            body["response_format"] =
                                json!({"type": "json_schema", "json_schema": {"name": "person", "schema": schema()}});
                        }
                        let t = Instant::now();
                        let resp = post_json(addr, "/v1/chat/completions", &body, Duration::from_secs(600))?;
                        let elapsed = t.elapsed();
                        anyhow::ensure!(resp.status == 200, "HTTP {}: {}", resp.status, resp.body);
                        let v = resp.json()?;
                        let tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
                        out.push((elapsed, tokens));
                    }
                    Ok(out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a client panicked")))).collect()
    });
    let wall = start.elapsed();
    let mut latencies = Vec::new();
    let mut tokens = 0;
    for r in results {
        for (l, t) in r? {
            latencies.push(l);
            tokens += t;
        }
    }
    latencies.sort();
    Ok(Measurement { requests: latencies.len(), tokens, wall, latencies })
}

/// Runs the benchmark and prints its table.
pub fn run(args: &BenchServeArgs) -> anyhow::Result<()> {
    let mut _server = None;
    let addr = match &args.addr {
        Some(a) => a.clone(),
        None => {
            let exe = std::env::current_exe()?;
            let parallel = args.parallel.to_string();
            let mut extra = vec!["--parallel", parallel.as_str()];
            let model;
            if let Some(m) = &args.model {
                model = m.display().to_string();
                extra.extend(["-m", model.as_str()]);
            }
            let threads;
            if let Some(t) = args.threads {
                threads = t.to_string();
                extra.extend(["-t", threads.as_str()]);
            }
            let s = Server::spawn(&exe, &extra, Duration::from_secs(120))?;
            let addr = s.addr.clone();
            _server = Some(s);
            addr
        }
    };
    // Warm-up: compiles the schema once (later requests hit the cache) and pages the model in.
    measure(&addr, 1, 1, args.max_tokens, true)?;
    println!("mode           clients  requests  tokens   tok/s    p50 ms   p99 ms");
    let mut rows = Vec::new();
    // Interleaved (both modes at one client count, then the next), so that the two modes of
    // a row pair run under the same machine load.
    for &clients in &args.clients {
        for constrained in [false, true] {
            let m = measure(&addr, clients.max(1), args.requests.max(1), args.max_tokens, constrained)?;
            let mode = if constrained { "constrained" } else { "unconstrained" };
            println!(
                "{mode:<14} {clients:>7} {:>9} {:>7} {:>7.1} {:>8.0} {:>8.0}",
                m.requests,
                m.tokens,
                m.tokens_per_second(),
                m.latency(0.5).as_secs_f64() * 1000.0,
                m.latency(0.99).as_secs_f64() * 1000.0
            );
            rows.push((constrained, clients, m.tokens_per_second()));
        }
    }
    let tps = |c: bool, n: usize| rows.iter().find(|r| r.0 == c && r.1 == n).map(|r| r.2);
    for c in [false, true] {
        if let (Some(one), Some(eight)) = (tps(c, 1), tps(c, 8)) {
            let mode = if c { "constrained" } else { "unconstrained" };
            println!("{mode}: 8 clients / 1 client = {:.2}x", eight / one.max(1e-9));
        }
    }
    if let (Some(c), Some(u)) = (tps(true, 8), tps(false, 8)) {
        println!("8 clients: constrained / unconstrained = {:.2}x", c / u.max(1e-9));
    }
    Ok(())
}

//! `constrain bench-serve`: load test of `constrain serve` with 1, 4 and 8 concurrent clients,
//! constrained (a JSON Schema) and unconstrained.
//!
//! Input: a running server's address (`--addr`), or none: a server is started as a child
//! process (`constrain serve --port 0 --parallel P`) and stopped at the end. Output: one line
//! per (mode, clients): requests, aggregate completion tokens per second over the wall time,
//! p50/p99 latency per request, the steady tokens/s (while every client has a request in
//! flight: no ramp-down), and serving efficiency: the steady tokens/s divided by the rate
//! of raw batched `llama_decode` at the same number of sequences
//! ([`constrain_llama::Generator::raw_decode`], measured in this process right before the
//! row's clients run, while the server is idle, with the same model, threads and context).
//! Bounded: every client sends `--requests` requests.
use super::client::{post_json, OwnServer, Server};
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
    /// The server started here (its threads and model also serve the raw decode
    /// measurement).
    #[command(flatten)]
    pub server: OwnServer,
    /// Skip the raw batched decode measurement (and the efficiency column).
    #[arg(long)]
    pub no_raw: bool,
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
    /// Completion tokens per second while every client had a request in flight (see
    /// [`steady_rate`]): the rate without the ramp-down, when the last requests run in a
    /// batch that is no longer full.
    pub steady_tokens_per_second: f64,
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
    let results: Vec<anyhow::Result<Vec<Timed>>> = std::thread::scope(|scope| {
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
                        let (begin, end) = (t - start, start.elapsed());
                        anyhow::ensure!(resp.status == 200, "HTTP {}: {}", resp.status, resp.body);
                        let v = resp.json()?;
                        let tokens = v["usage"]["completion_tokens"].as_u64().unwrap_or(0);
                        out.push(Timed { begin, end, tokens });
                    }
                    Ok(out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a client panicked")))).collect()
    });
    let wall = start.elapsed();
    let per_client: Vec<Vec<Timed>> = results.into_iter().collect::<anyhow::Result<_>>()?;
    let mut latencies: Vec<Duration> = per_client.iter().flatten().map(|r| r.end - r.begin).collect();
    let tokens = per_client.iter().flatten().map(|r| r.tokens).sum();
    latencies.sort();
    let steady_tokens_per_second = steady_rate(&per_client);
    Ok(Measurement { requests: latencies.len(), tokens, wall, latencies, steady_tokens_per_second })
}

/// One request's span (from the measurement's start) and its completion tokens.
#[derive(Clone, Copy, Debug)]
struct Timed {
    begin: Duration,
    end: Duration,
    tokens: u64,
}

/// Completion tokens per second over the window in which every client had a request in
/// flight (from the latest first request's start to the earliest last request's end),
/// counting each request's tokens as spread evenly over its span. With closed-loop clients
/// that send a fixed number of requests, the last ones run in a batch that empties as they
/// finish; this rate leaves that ramp-down out. 0 when the window is empty.
fn steady_rate(per_client: &[Vec<Timed>]) -> f64 {
    let from = per_client.iter().filter_map(|c| c.first()).map(|r| r.begin).max().unwrap_or_default();
    let to = per_client.iter().filter_map(|c| c.last()).map(|r| r.end).min().unwrap_or_default();
    if to <= from {
        return 0.0;
    }
    let mut tokens = 0.0;
    for r in per_client.iter().flatten() {
        let span = (r.end - r.begin).as_secs_f64();
        let overlap = (r.end.min(to).saturating_sub(r.begin.max(from))).as_secs_f64();
        if span > 0.0 {
            tokens += r.tokens as f64 * overlap / span;
        }
    }
    tokens / (to - from).as_secs_f64()
}

/// Runs the benchmark and prints its table.
pub fn run(args: &BenchServeArgs) -> anyhow::Result<()> {
    let mut _server = None;
    let addr = match &args.addr {
        Some(a) => a.clone(),
        None => {
            let s = Server::spawn_own(&args.server)?;
            let addr = s.addr.clone();
            _server = Some(s);
            addr
        }
    };
    // The raw decode's own model: the server's file, threads and context size.
    let raw = if args.no_raw { None } else { Some(raw_generator(args)?) };
    let prompt_tokens = match &raw {
        Some(g) => g.chat_tokens(&[("user", PROMPT)]).map(|t| t.len()).unwrap_or(64),
        None => 0,
    };
    // Warm-up: compiles the schema once (later requests hit the cache) and pages the model in.
    measure(&addr, 1, 1, args.max_tokens, true)?;
    println!(
        "mode           clients  requests  tokens   tok/s    p50 ms   p99 ms  steady tok/s  raw tok/s  efficiency"
    );
    let mut rows = Vec::new();
    // Interleaved (raw decode, then both modes at one client count, then the next), so that
    // the numbers of a row group run under the same machine load.
    for &clients in &args.clients {
        let clients = clients.max(1);
        let raw_tps = match &raw {
            Some(g) => {
                Some(g.raw_decode(args.server.parallel, clients, prompt_tokens, args.max_tokens)?.tokens_per_second())
            }
            None => None,
        };
        for constrained in [false, true] {
            let m = measure(&addr, clients, args.requests.max(1), args.max_tokens, constrained)?;
            let mode = if constrained { "constrained" } else { "unconstrained" };
            let (raw_col, eff) = match raw_tps {
                Some(r) => (format!("{r:.1}"), format!("{:.2}", m.steady_tokens_per_second / r.max(1e-9))),
                None => ("-".into(), "-".into()),
            };
            println!(
                "{mode:<14} {clients:>7} {:>9} {:>7} {:>7.1} {:>8.0} {:>8.0} {:>13.1} {raw_col:>10} {eff:>11}",
                m.requests,
                m.tokens,
                m.tokens_per_second(),
                m.latency(0.5).as_secs_f64() * 1000.0,
                m.latency(0.99).as_secs_f64() * 1000.0,
                m.steady_tokens_per_second
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

/// The model of the raw decode measurement: `--model` (or the default), with the server's
/// threads and its default context size per sequence.
fn raw_generator(args: &BenchServeArgs) -> anyhow::Result<constrain_llama::Generator> {
    let settings = constrain_llama::GeneratorSettings {
        threads: args.server.threads,
        ctx_size: super::DEFAULT_CTX_SIZE,
        ..constrain_llama::GeneratorSettings::default()
    };
    Ok(match &args.server.model {
        Some(m) => constrain_llama::Generator::load(m, settings)?,
        None => constrain_llama::Generator::load_default(settings)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate_counts_only_the_window_where_every_client_is_busy() {
        let ms = Duration::from_millis;
        let r = |b, e, tokens| Timed { begin: ms(b), end: ms(e), tokens };
        // Client A: two requests over 0–2 s; client B: one over 0–1 s. Window 0–1 s: A's
        // first request (100 tokens) and B's (50 tokens), all of them: 150 tok/s.
        let clients = vec![vec![r(0, 1000, 100), r(1000, 2000, 100)], vec![r(0, 1000, 50)]];
        assert!((steady_rate(&clients) - 150.0).abs() < 1e-9);
        // Half a request inside the window counts half its tokens.
        let clients = vec![vec![r(0, 2000, 100)], vec![r(0, 1000, 40)]];
        assert!((steady_rate(&clients) - 90.0).abs() < 1e-9);
        assert_eq!(steady_rate(&[]), 0.0);
        assert_eq!(steady_rate(&[vec![r(5, 5, 3)]]), 0.0);
    }
}

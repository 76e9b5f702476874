//! What a [`constrain::Matcher::fork`] costs as the output grows, against replaying the
//! output into a fresh matcher (what an engine without forks does for every beam).
//!
//! Byte vocabulary; the output is an array of `{"name": "item number i", "n": i}` objects,
//! with and without run-time checks (`uniqueItems`). For each length it prints the first
//! fork (which hands the matcher's whole history over to the shared part at once), the mean
//! of the next 200 forks of the same matcher, the mean of the last 200 forks in a beam-like
//! loop (from the start, every token is accepted by a fork of the matcher before it, and the
//! old one dropped), and one replay. Lengths by `FORK_COST_ITEMS=10,100` (objects).
//!
//! ```text
//! cargo run --release -p constrain --example fork_cost
//! ```
use constrain::schema::{self, Options, Whitespace};
use constrain::{Constraint, Limits, Matcher, TokenIndex, Vocabulary};
use serde_json::json;
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let item = json!({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}});
    let schemas = [
        ("no checks", json!({"type": "array", "items": item})),
        ("uniqueItems", json!({"type": "array", "items": item, "uniqueItems": true})),
    ];
    let index = TokenIndex::new(Vocabulary::bytes());
    println!("| output bytes (= tokens) | schema | first fork | next forks, mean | beam-like fork, mean | replay |");
    println!("|---|---|---|---|---|---|");
    let sizes: Vec<usize> = match std::env::var("FORK_COST_ITEMS") {
        Ok(s) => s.split(',').filter_map(|x| x.parse().ok()).collect(),
        Err(_) => vec![10, 100, 400, 1_600],
    };
    for items in sizes {
        let doc = document(items);
        for (name, s) in &schemas {
            let grammar = schema::compile(s, &Options::default().with_whitespace(Whitespace::Compact))?;
            let c = Constraint::new(&grammar, index.clone(), &Limits::default())?;
            let mut m = fed(&c, &doc)?;
            let t = Instant::now();
            let first = m.fork();
            let first_fork = t.elapsed();
            drop(first);
            let t = Instant::now();
            for _ in 0..200 {
                std::hint::black_box(m.fork());
            }
            let next_forks = t.elapsed() / 200;
            let beam = beam_like(&c, &doc)?;
            let t = Instant::now();
            std::hint::black_box(fed(&c, &doc)?);
            let replay = t.elapsed();
            println!(
                "| {} | {name} | {} | {} | {} | {} |",
                doc.len(),
                show(first_fork),
                show(next_forks),
                show(beam),
                show(replay)
            );
        }
    }
    Ok(())
}

/// `[{"name":"item number 0","n":0},…]` with `items` objects.
fn document(items: usize) -> Vec<u8> {
    let parts: Vec<String> = (0..items).map(|i| format!("{{\"name\":\"item number {i}\",\"n\":{i}}}")).collect();
    format!("[{}]", parts.join(",")).into_bytes()
}

/// A matcher that accepted `doc` a byte (= a token) at a time.
fn fed(c: &Constraint, doc: &[u8]) -> anyhow::Result<Matcher> {
    let mut m = c.matcher();
    for b in doc.chunks(1) {
        m.accept_bytes(b)?;
    }
    Ok(m)
}

/// The mean fork over the last 200 bytes of `doc` when every byte from the start is
/// accepted by a fork of the matcher before it, as a beam search step does.
fn beam_like(c: &Constraint, doc: &[u8]) -> anyhow::Result<Duration> {
    let split = doc.len().saturating_sub(200);
    let mut m = c.matcher();
    let mut spent = Duration::ZERO;
    for (i, b) in doc.chunks(1).enumerate() {
        let t = Instant::now();
        let mut child = m.fork();
        if i >= split {
            spent += t.elapsed();
        }
        child.accept_bytes(b)?;
        m = child;
    }
    Ok(spent / (doc.len() - split).max(1) as u32)
}

fn show(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

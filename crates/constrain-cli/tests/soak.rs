//! `constrain soak` in its reduced form: 100 mixed requests (schemas, grammars, tool calls,
//! streaming, `n = 2`, log-probabilities, hang-ups, malformed bodies) from 16 clients
//! against a server it starts on loopback with the default model. Passes when every answer
//! checks out, nothing gets a 5xx, every stream ends, and the server's resident memory
//! after the warm-up stays within 10% of the warm-up's peak. The full run (1,000 requests)
//! is the documented command in BENCHMARKS.md.
#![cfg(feature = "llama")]

use std::process::Command;
use std::time::Instant;

#[test]
fn soak_100_requests_from_16_clients() {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_constrain"))
        .args(["soak", "--requests", "100", "--clients", "16", "--request-timeout", "400"])
        .output()
        .expect("run constrain soak");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(out.status.success(), "soak failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("soak: passed"), "{stdout}");
    // The report names what it measured: no 5xx line, and a memory reading.
    let statuses = stdout.lines().find_map(|l| l.strip_prefix("statuses: ")).expect("a statuses line");
    for entry in statuses.split(", ") {
        let status: u16 = entry.split(':').next().and_then(|s| s.parse().ok()).expect("status: count");
        assert!((200..500).contains(&status), "status {status} in {stdout}");
    }
    assert!(stdout.contains("growth +") || stdout.contains("growth -"), "no memory reading: {stdout}");
    eprintln!("soak test took {:?}", started.elapsed());
}

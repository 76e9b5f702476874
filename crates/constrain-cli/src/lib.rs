//! The `constrain` command line, as a library so that tests can call its commands.
//!
//! - [`cli`]: argument parsing and the commands (generation, `grammar`, `bench`, `eval`,
//!   `check`, `fuzz`); the binary's `main` is [`cli::main`].
//! - `serve` (feature `llama`): `constrain serve`, the OpenAI-compatible HTTP server, and
//!   `constrain bench-serve`, its load benchmark.
//! - [`fuzz`]: the differential fuzzer behind `constrain fuzz` (the schema compiler against
//!   the `jsonschema` crate).
//!
//! The engine is the crate `constrain`; generation needs the `llama` feature (on by
//! default), which brings in `constrain-llama` and llama.cpp.

pub mod cli;
pub mod fuzz;
#[cfg(feature = "llama")]
pub mod serve;

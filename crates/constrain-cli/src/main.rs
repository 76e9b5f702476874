//! The `constrain` command line; everything lives in [`constrain_cli::cli`].

/// mimalloc instead of the system allocator: schema compilation and first visits of parse
/// states allocate many small short-lived buffers (see Cargo.toml). Library users keep
/// whatever allocator their program chose. mimalloc's own default returns freed memory to
/// the OS after 10 ms: keeping it for the life of the process instead (as this binary did)
/// cost 11% more resident memory in a full eval (582–586 MB against 516–530) and bought no
/// speed measurable in interleaved runs (mask mean 8.4–8.7 µs against 8.3–9.4).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    constrain_cli::cli::main()
}

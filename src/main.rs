//! The `constrain` command line; everything lives in [`constrain::cli`].

/// mimalloc instead of the system allocator: schema compilation and first visits of parse
/// states allocate many small short-lived buffers (see Cargo.toml). Library users keep
/// whatever allocator their program chose.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    constrain::cli::main()
}

//! The `constrain` command line; everything lives in [`constrain::cli`].
fn main() -> std::process::ExitCode {
    constrain::cli::main()
}

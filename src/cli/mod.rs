//! The `constrain` command line (being written).
pub mod constraint_args;
pub mod eval;

/// Entry point of the `constrain` binary.
pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::FAILURE
}

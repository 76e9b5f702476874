//! Writing to stdout without panicking.
//!
//! `print!` panics when stdout is closed (`constrain … | head -c 1`) or full (`> /dev/full`).
//! Every write of the command line to stdout goes through [`write`](fn@write) instead: a closed pipe
//! ends the program quietly (exit 0: the reader has all it wanted), any other write error
//! ends it with one line on stderr and exit code 1. Neither unwinds or aborts.
use std::io::Write;

/// Writes `args` to stdout and flushes; on failure ends the process as described above.
pub fn write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        end(&e);
    }
}

/// Ends the process after a failed write to stdout.
pub fn end(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("constrain: error: cannot write to stdout: {e}");
    std::process::exit(i32::from(super::EXIT_OTHER));
}

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::out::write(format_args!($($arg)*)) };
}

/// `println!` through [`write`].
macro_rules! outln {
    () => { $crate::cli::out::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::out::write(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {out, outln};

//! Fingerprints the GBNF the schema compiler prints for every schema under a directory, so a
//! refactoring can show that no grammar changed.
//!
//! For each `*.json` file under DIR (recursively, skipping `tests/` folders, in sorted order) it compiles the schema with
//! the default options and prints `path\t<xxh3-64 of the GBNF>\t<xxh3-64 of the notes>\tchecks`
//! (`checks` is `rc` when the grammar carries run-time checks, `-` otherwise), or
//! `path\tERR\t<error>` when the schema does not compile. Diff two runs to compare builds.
//!
//! Usage: `cargo run --release -p constrain --example dump_gbnf -- DIR > out.tsv`.

use std::io::Write;
use std::path::{Path, PathBuf};

use constrain::grammar::gbnf::to_gbnf;
use constrain::schema::{compile, Options};
use serde_json::Value;
use xxhash_rust::xxh3::xxh3_64;

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            // JSONSchemaBench keeps each schema's instances under `tests/`: not schemas.
            if path.file_name().is_some_and(|n| n != "tests") {
                collect(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: dump_gbnf DIR");
        std::process::exit(2);
    };
    let mut files = Vec::new();
    collect(Path::new(&dir), &mut files);
    files.sort();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for path in files {
        let shown = path.strip_prefix(&dir).unwrap_or(&path).display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                let _ = writeln!(out, "{shown}\tREAD\t{e}");
                continue;
            }
        };
        let Ok(schema) = serde_json::from_str::<Value>(&text) else {
            let _ = writeln!(out, "{shown}\tJSON");
            continue;
        };
        let line = match compile(&schema, &Options::default()) {
            Ok(compiled) => {
                let gbnf = to_gbnf(compiled.grammar());
                let notes = format!("{:?}", compiled.notes());
                let checks = if compiled.checks().is_some() { "rc" } else { "-" };
                format!("{shown}\t{:016x}\t{:016x}\t{checks}", xxh3_64(gbnf.as_bytes()), xxh3_64(notes.as_bytes()))
            }
            Err(e) => format!("{shown}\tERR\t{}", e.to_string().replace(['\n', '\t'], " ")),
        };
        let _ = writeln!(out, "{line}");
    }
}

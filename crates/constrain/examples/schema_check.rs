//! Grammar-level check of the schema compiler against JSONSchemaBench (no tokenizer).
//!
//! For every schema that has test instances: compile it with the default options (spec
//! semantics, bounded pretty whitespace), build the automaton, serialise every instance the
//! way Python's `json.dumps(x, ensure_ascii=False)` does, and check that valid instances are
//! accepted and invalid ones rejected. Prints counts per subset and in total, and compile
//! errors grouped by keyword.
//!
//! Usage: `cargo run --release -p constrain --example schema_check -- [DIR]
//! [--subset NAME] [--failures FILE]` (DIR defaults to `../shared/jsonschemabench`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use constrain::automaton::Pda;
use constrain::schema::{compile, Options};
use constrain::Limits;
use serde_json::Value;

/// Python `repr(float)` as `json.dumps` prints it.
fn py_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    constrain::schema::python_float_repr(f)
}

fn py_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `json.dumps(v, ensure_ascii=False)`.
fn json_dumps(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                out.push_str(&n.to_string())
            } else {
                out.push_str(&py_float(n.as_f64().unwrap_or(0.0)))
            }
        }
        Value::String(s) => py_str(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_dumps(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_str(k, out);
                out.push_str(": ");
                json_dumps(x, out);
            }
            out.push('}');
        }
    }
}

#[derive(Default, Clone)]
struct Counts {
    schemas: usize,
    compiled: usize,
    passing: usize,
    wrong_accept_schemas: usize,
    wrong_accepts: usize,
    wrong_reject_schemas: usize,
    wrong_rejects: usize,
    pda_errors: usize,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.schemas += o.schemas;
        self.compiled += o.compiled;
        self.passing += o.passing;
        self.wrong_accept_schemas += o.wrong_accept_schemas;
        self.wrong_accepts += o.wrong_accepts;
        self.wrong_reject_schemas += o.wrong_reject_schemas;
        self.wrong_rejects += o.wrong_rejects;
        self.pda_errors += o.pda_errors;
    }
    fn line(&self, name: &str) -> String {
        format!(
            "{name:<16} schemas {:>5}  compiled {:>5}  passing {:>5}  wrong-accept {:>3} ({:>3} inst)  wrong-reject {:>4} ({:>4} inst)  pda-errors {:>3}",
            self.schemas, self.compiled, self.passing, self.wrong_accept_schemas, self.wrong_accepts, self.wrong_reject_schemas, self.wrong_rejects, self.pda_errors
        )
    }
}

fn main() -> anyhow::Result<()> {
    let mut dir = PathBuf::from("../shared/jsonschemabench");
    let mut subset: Option<String> = None;
    let mut failures: Option<PathBuf> = None;
    let mut trace = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--subset" => subset = args.next(),
            "--failures" => failures = args.next().map(PathBuf::from),
            "--trace" => trace = true,
            _ => dir = PathBuf::from(a),
        }
    }
    let mut fail_out = match &failures {
        Some(p) => Some(std::fs::File::create(p)?),
        None => None,
    };
    let mut subsets: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("tests").is_dir())
        .collect();
    subsets.sort();
    if dir.join("tests").is_dir() {
        // A single set folder.
        subsets = vec![dir.clone()];
    }
    let mut total = Counts::default();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    let limits = Limits::default();
    let started = std::time::Instant::now();
    for sub in subsets {
        let name = sub.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        if subset.as_ref().is_some_and(|s| *s != name) {
            continue;
        }
        let mut counts = Counts::default();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&sub)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for f in files {
            let Some(stem) = f.file_name() else { continue };
            let tests_path = sub.join("tests").join(stem);
            let Ok(tests_text) = std::fs::read_to_string(&tests_path) else { continue };
            let tests: Value = serde_json::from_str(&tests_text)?;
            let Some(tests) = tests.get("tests").and_then(|t| t.as_array()).cloned() else { continue };
            if tests.is_empty() {
                continue;
            }
            counts.schemas += 1;
            let schema: Value = match std::fs::read_to_string(&f).ok().and_then(|t| serde_json::from_str(&t).ok()) {
                Some(s) => s,
                None => continue,
            };
            let id = format!("{name}/{}", Path::new(stem).display());
            let schema_started = std::time::Instant::now();
            if trace {
                eprint!("{id} ... ");
            }
            let compiled = std::panic::catch_unwind(|| compile(&schema, &Options::default()));
            let grammar = match compiled {
                Err(_) => {
                    *errors.entry("PANIC".into()).or_default() += 1;
                    if let Some(o) = fail_out.as_mut() {
                        writeln!(o, "PANIC {id}")?;
                    }
                    continue;
                }
                Ok(Err(e)) => {
                    *errors.entry(e.keyword().to_string()).or_default() += 1;
                    if let Some(o) = fail_out.as_mut() {
                        writeln!(o, "ERROR {id} [{}] {e}", e.keyword())?;
                    }
                    continue;
                }
                Ok(Ok(g)) => g.into_grammar(),
            };
            let compile_ms = schema_started.elapsed().as_secs_f64() * 1e3;
            let pda = match Pda::build(&grammar, &limits) {
                Ok(p) => p,
                Err(e) => {
                    counts.pda_errors += 1;
                    *errors.entry(format!("pda: {}", e.to_string().split(':').next().unwrap_or(""))).or_default() += 1;
                    if let Some(o) = fail_out.as_mut() {
                        writeln!(o, "PDA {id} {e}")?;
                    }
                    continue;
                }
            };
            counts.compiled += 1;
            let build_ms = schema_started.elapsed().as_secs_f64() * 1e3 - compile_ms;
            if trace {
                eprint!(
                    "compile {compile_ms:.1} ms, pda {build_ms:.1} ms ({} states, {} rules, grammar size {}), ",
                    pda.num_states(),
                    pda.num_rules(),
                    grammar.size()
                );
            }
            if std::env::var("SHOW_RULES").is_ok() {
                let mut sizes: Vec<(usize, &str)> =
                    grammar.rules().iter().map(|r| (r.expr.size(), r.name.as_str())).collect();
                sizes.sort_by(|a, b| b.cmp(a));
                let mut names: BTreeMap<String, usize> = BTreeMap::new();
                for r in grammar.rules() {
                    *names.entry(r.name.split('_').next().unwrap_or("").to_string()).or_default() += 1;
                }
                eprintln!("\nlargest rules: {:?}\nrule kinds: {:?}", &sizes[..sizes.len().min(8)], names);
            }
            let (mut wa, mut wr) = (0, 0);
            for (i, t) in tests.iter().enumerate() {
                let valid = t.get("valid").and_then(|v| v.as_bool()).unwrap_or(false);
                let mut text = String::new();
                json_dumps(t.get("data").unwrap_or(&Value::Null), &mut text);
                let ok = pda.matches(text.as_bytes());
                if ok != valid {
                    if valid {
                        wr += 1;
                    } else {
                        wa += 1;
                    }
                    if let Some(o) = fail_out.as_mut() {
                        // Where a rejected valid instance stops being a viable prefix.
                        if valid {
                            let bytes = text.as_bytes();
                            let (mut lo, mut hi) = (0usize, bytes.len());
                            while lo < hi {
                                let mid = (lo + hi).div_ceil(2);
                                if pda.matches_prefix(&bytes[..mid]) {
                                    lo = mid;
                                } else {
                                    hi = mid - 1;
                                }
                            }
                            let from = lo.saturating_sub(60);
                            let to = (lo + 40).min(bytes.len());
                            writeln!(
                                o,
                                "  stops at byte {lo}: {}<<HERE>>{}",
                                String::from_utf8_lossy(&bytes[from..lo]),
                                String::from_utf8_lossy(&bytes[lo..to])
                            )?;
                        }
                        let shown: String = text.chars().take(400).collect();
                        writeln!(o, "{} {id} #{i} {shown}", if valid { "WRONG-REJECT" } else { "WRONG-ACCEPT" })?;
                    }
                }
            }
            counts.wrong_accepts += wa;
            counts.wrong_rejects += wr;
            if wa > 0 {
                counts.wrong_accept_schemas += 1;
            }
            if wr > 0 {
                counts.wrong_reject_schemas += 1;
            }
            if wa == 0 && wr == 0 {
                counts.passing += 1;
            }
            if trace {
                eprintln!("{:.1} ms", schema_started.elapsed().as_secs_f64() * 1e3);
            }
        }
        println!("{}", counts.line(&name));
        total.add(&counts);
    }
    println!("{}", total.line("TOTAL"));
    let mut errs: Vec<(String, usize)> = errors.into_iter().collect();
    errs.sort_by_key(|e| std::cmp::Reverse(e.1));
    println!("compile errors by keyword:");
    for (k, n) in errs {
        println!("  {n:>5} {k}");
    }
    println!("time {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

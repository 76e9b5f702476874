//! The format-agreement probe: every string a compiled `format` accepts must be accepted by
//! the `jsonschema` crate with formats asserted, by the rules of Python's `jsonschema`
//! written down in [`super::python`], and, where Python and its `jsonschema` are installed,
//! by Python's `jsonschema` itself.
//!
//! The strings, for each format of [`COMPILED`]: hand-picked valid, near-miss and edge values
//! ([`edges`]); random walks of the compiled schema's own automaton from a fixed seed, byte
//! by byte, which is what generation can produce ([`walk`]); and near misses made from each
//! walk by deleting, doubling, replacing or swapping characters ([`mutants`]). Each is
//! judged by the automaton of `{"type": "string", "format": F}` compiled with
//! [`crate::compile`], on its quoted JSON spelling.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::python;
use crate::automaton::Pda;
use crate::compile;
use crate::schema::{Options, Whitespace};
use crate::Limits;

/// Every format [`super::format_expr`] compiles.
const COMPILED: [&str; 10] =
    ["date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"];

/// Random walks per format.
const WALKS: usize = 400;

/// Near misses made from each walk.
const MUTANTS: usize = 6;

/// The seed of the walks and near misses.
const SEED: u64 = 0x000f_0a7e;

/// The automaton of `{"type": "string", "format": name}` (compact), over JSON texts.
fn schema_pda(name: &str) -> Pda {
    let schema = serde_json::json!({"type": "string", "format": name});
    let grammar = compile(&schema, &Options::default().with_whitespace(Whitespace::Compact))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    Pda::build(grammar.grammar(), &Limits::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Whether the compiled format accepts `s` (spelled as a JSON string).
fn accepts(pda: &Pda, s: &str) -> bool {
    serde_json::to_string(s).is_ok_and(|json| pda.matches(json.as_bytes()))
}

/// A random walk of `pda` from its start: each step takes one byte, uniformly, among those
/// that keep a live prefix or end the text; a text that may end stops with chance 1/20.
/// `None` when the walk runs past 2,000 bytes, or does not parse as a JSON string. It runs
/// a matcher over single-byte tokens: a byte it accepts keeps a live prefix or ends the text
/// ([`constrain_core::Matcher::is_accepting`]), and the text can go on unless it is finished.
fn walk(pda: &Pda, rng: &mut StdRng) -> Option<String> {
    let index = crate::TokenIndex::new(crate::Vocabulary::bytes());
    let constraint = crate::Constraint::from_pda(pda.clone(), index, &Limits::default());
    let mut m = constraint.matcher();
    let mut text = Vec::new();
    let mut accepting = m.is_accepting();
    while text.len() < 2_000 {
        if accepting && rng.random_bool(0.05) {
            return serde_json::from_slice(&text).ok();
        }
        let mut next = Vec::new();
        for b in 0..=255u8 {
            if m.accept_bytes(&[b]).is_ok() {
                next.push((b, m.is_accepting(), !m.is_finished()));
                m.rollback(1).ok()?;
            }
        }
        if next.is_empty() {
            return accepting.then(|| serde_json::from_slice(&text).ok()).flatten();
        }
        let (b, reached_end, alive) = next[rng.random_range(0..next.len())];
        m.accept_bytes(&[b]).ok()?;
        text.push(b);
        accepting = reached_end;
        if !alive {
            return serde_json::from_slice(&text).ok();
        }
    }
    None
}

/// Characters near misses are made of: the punctuation of every format, digits around the
/// bounds, the letters formats use, a space, a non-ASCII letter and a control character.
const NEAR: &[char] = &[
    '0', '1', '2', '3', '5', '6', '9', '-', '+', ':', '.', '/', '@', '%', '[', ']', '#', '?', '=', '_', '~', 'T', 't',
    'Z', 'z', 'P', 'W', 'D', 'H', 'M', 'S', 'Y', 'a', 'f', 'g', 'x', 'v', ' ', 'é', '\n',
];

/// `n` near misses of `s`: one character deleted, doubled, replaced from [`NEAR`], or two
/// neighbours swapped.
fn mutants(s: &str, n: usize, rng: &mut StdRng) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    if chars.is_empty() {
        return out;
    }
    for _ in 0..n {
        let mut c = chars.clone();
        let i = rng.random_range(0..c.len());
        match rng.random_range(0..4) {
            0 => {
                c.remove(i);
            }
            1 => c.insert(i, c[i]),
            2 => c[i] = NEAR[rng.random_range(0..NEAR.len())],
            _ if i + 1 < c.len() => c.swap(i, i + 1),
            _ => c.push(NEAR[rng.random_range(0..NEAR.len())]),
        }
        out.push(c.into_iter().collect());
    }
    out
}

/// Hand-picked strings for `name`: valid ones, near misses and edge values (year 0000, the
/// last day of each kind of month, the largest hours and octets, the longest labels, …).
fn edges(name: &str) -> Vec<String> {
    let fixed: &[&str] = match name {
        "date" => &[
            "0000-01-01",
            "0000-02-29",
            "0001-01-01",
            "0004-02-29",
            "0100-02-29",
            "0400-02-29",
            "1900-02-29",
            "2000-02-29",
            "9999-12-31",
            "2024-04-31",
            "2024-00-10",
            "2024-13-01",
            "2024-01-00",
            "20240101",
            "2024-1-1",
            "+2024-01-01",
            "10000-01-01",
        ],
        "date-time" => &[
            "0000-01-01T00:00:00Z",
            "0000-02-29T12:00:00+01:00",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999Z",
            "2024-02-29t00:00:00z",
            "2024-01-01T23:59:60Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00+23:59",
            "2024-01-01T00:00:00-24:00",
            "2024-01-01T00:00:00",
            "2024-01-01 00:00:00Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00Z",
            "2024-01-01T00:00:00+0100",
        ],
        "time" => &[
            "00:00:00Z",
            "23:59:59.5+23:59",
            "23:59:60Z",
            "24:00:00Z",
            "12:00:00",
            "12:00Z",
            "12:00:00z",
            "12:00:00-00:00",
        ],
        "duration" => &[
            "P1D",
            "PT0S",
            "P0D",
            "P1W",
            "P1Y2M3DT4H5M6S",
            "P1Y2D",
            "PT1H2S",
            "P1W2D",
            "P",
            "PT",
            "P1DT",
            "P1.5D",
            "P1,5D",
            "-P1D",
            "P1d",
            "P99999999999999999999D",
            "P1Y1Y",
        ],
        "email" => &["a@b", "a@[127.0.0.1]", "a@[IPv6:::1]", "a.b@c.d", "@", "a@", "@b", "a@@b", "a@b.c."],
        "hostname" => &[
            "a",
            "a.",
            "a-b",
            "1.2.3.4",
            "xn--a",
            "a--b",
            "-a",
            "a-",
            "a..b",
            ".a",
            "a_b",
            "a.b.c.d.e.f.g.h.i.j.k.l.m",
        ],
        "ipv4" => &["0.0.0.0", "255.255.255.255", "256.0.0.0", "01.1.1.1", "1.1.1", "1.1.1.1.", " 1.1.1.1"],
        "ipv6" => &[
            "::",
            "::1",
            "1::",
            "1:2:3:4:5:6:7:8",
            "1:2:3:4:5:6:7::",
            "::2:3:4:5:6:7:8",
            "::ffff:1.2.3.4",
            "1:2:3:4:5:6:1.2.3.4",
            "::01.2.3.4",
            "1::2::3",
            "1:2:3:4:5:6:7:8:9",
            ":1::",
            "fe80::1%eth0",
            "12345::",
        ],
        "uuid" => &[
            "00000000-0000-0000-0000-000000000000",
            "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
            "{00000000-0000-0000-0000-000000000000}",
            "00000000000000000000000000000000",
            "0000000-00000-0000-0000-000000000000",
        ],
        "uri" => &[
            "a:",
            "a:b",
            "a:/",
            "a://",
            "a://b",
            "a://b:",
            "a://b:99999",
            "a://[::1]",
            "a://[v1.x]",
            "a://1.2.3.4",
            "a://b/%zz",
            "a://b/%20",
            "a://u@b",
            "a://b?#",
            "file:///x",
            "1a:b",
            "a b:c",
            "a:b c",
            "a:[",
            "a://b@c@d",
        ],
        _ => &[],
    };
    let mut v: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
    match name {
        // More digits than Python's decimal context holds (overflow at 10^999999).
        "duration" => v.push(format!("P{}D", "9".repeat(1_000_000))),
        "hostname" => {
            v.push(format!("{}.b", "a".repeat(63)));
            v.push(format!("{}.b", "a".repeat(64)));
            v.push(vec!["a".repeat(63); 4].join("."));
        }
        "date-time" => v.push(format!("2024-01-01T00:00:00.{}Z", "9".repeat(500))),
        _ => {}
    }
    v
}

/// The strings of each format the probe draws, with the compiled format's verdict on each.
struct Drawn {
    /// (format, string, accepted by the compiled format).
    cases: Vec<(&'static str, String, bool)>,
}

/// The probe's strings, drawn once (see the module docs).
fn drawn() -> &'static Drawn {
    static DRAWN: OnceLock<Drawn> = OnceLock::new();
    DRAWN.get_or_init(|| {
        let mut cases = Vec::new();
        for (i, name) in COMPILED.iter().enumerate() {
            let pda = schema_pda(name);
            let mut rng = StdRng::seed_from_u64(SEED + i as u64);
            let mut pool: BTreeSet<String> = edges(name).into_iter().collect();
            for _ in 0..WALKS {
                if let Some(s) = walk(&pda, &mut rng) {
                    assert!(accepts(&pda, &s), "{name}: the walk {s:?} is not accepted");
                    pool.extend(mutants(&s, MUTANTS, &mut rng));
                    pool.insert(s);
                }
            }
            cases.extend(pool.into_iter().map(|s| {
                let ok = accepts(&pda, &s);
                (*name, s, ok)
            }));
        }
        Drawn { cases }
    })
}

/// Shortens a string for a message.
fn shown(s: &str) -> String {
    if s.chars().count() > 80 {
        format!("{:?}… ({} chars)", s.chars().take(60).collect::<String>(), s.chars().count())
    } else {
        format!("{s:?}")
    }
}

/// What the compiled formats accept, the `jsonschema` crate and the Python table accept too.
#[test]
fn compiled_formats_accept_only_what_both_readings_accept() {
    let d = drawn();
    let mut wrong = Vec::new();
    let mut per_format = Vec::new();
    for name in COMPILED {
        let v = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&serde_json::json!({"format": name}))
            .expect("format schema");
        let (mut n, mut accepted) = (0, 0);
        for (_, s, ok) in d.cases.iter().filter(|(f, _, _)| *f == name) {
            n += 1;
            if !*ok {
                continue;
            }
            accepted += 1;
            if !v.is_valid(&serde_json::json!(s)) {
                wrong.push(format!("{name}: the jsonschema crate refuses {}", shown(s)));
            }
            if python::accepts(name, s) != Some(true) {
                wrong.push(format!("{name}: Python's rules refuse {}", shown(s)));
            }
        }
        per_format.push(format!("{name} {accepted}/{n}"));
    }
    eprintln!("format probe (accepted/drawn): {}", per_format.join(", "));
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
}

/// The checker of Python's `jsonschema` for draft 2020-12, reading JSON lines `[format,
/// string]` and printing `1` or `0` per line.
const PYTHON_CHECK: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
checker = Draft202012Validator.FORMAT_CHECKER
for line in sys.stdin.read().splitlines():
    f, s = json.loads(line)
    print(1 if checker.conforms(s, f) else 0)
"#;

/// Python's `jsonschema` verdicts on `cases`, or `None` (with a note) when `python3` or its
/// `jsonschema` is missing.
fn python_verdicts(cases: &[(&str, &str)]) -> Option<Vec<bool>> {
    let probe = Command::new("python3").args(["-c", "import jsonschema"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("note: python3 with jsonschema is not installed: the Python part of the format probe is skipped");
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", PYTHON_CHECK])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for (f, s) in cases {
            let line = serde_json::to_string(&(f, s)).expect("a JSON line");
            writeln!(stdin, "{line}").expect("write to python3");
        }
    }
    let out = child.wait_with_output().expect("python3 runs");
    assert!(out.status.success(), "python3 failed");
    let verdicts: Vec<bool> = String::from_utf8_lossy(&out.stdout).lines().map(|l| l == "1").collect();
    assert_eq!(verdicts.len(), cases.len(), "one verdict per string");
    Some(verdicts)
}

/// With Python's `jsonschema` installed: everything the compiled formats accept, and
/// everything the Rust table of its rules accepts, it accepts too. (Strings too long for a
/// pipe of reasonable size are left to the table.)
#[test]
fn compiled_formats_and_the_table_agree_with_python() {
    let d = drawn();
    let cases: Vec<(&str, &str, bool)> =
        d.cases.iter().filter(|(_, s, _)| s.len() <= 10_000).map(|(f, s, ok)| (*f, s.as_str(), *ok)).collect();
    // The table's own checks, on strings of formats without a grammar too.
    let extra: [(&str, &str); 8] = [
        ("json-pointer", ""),
        ("json-pointer", "/a~01"),
        ("json-pointer", "/a~2"),
        ("json-pointer", "a/b"),
        ("idn-email", "é@x"),
        ("idn-email", "x"),
        ("duration", "P0Y1W"),
        ("duration", "P1T2H"),
    ];
    let all: Vec<(&str, &str)> = cases.iter().map(|(f, s, _)| (*f, *s)).chain(extra).collect();
    let Some(python) = python_verdicts(&all) else {
        return;
    };
    let mut wrong = Vec::new();
    let mut stricter = 0;
    for (i, (f, s)) in all.iter().enumerate() {
        let compiled = cases.get(i).is_some_and(|c| c.2);
        if compiled && !python[i] {
            wrong.push(format!("{f}: Python's jsonschema refuses {}, which the format accepts", shown(s)));
        }
        match (python::accepts(f, s), python[i]) {
            (Some(true), false) => wrong.push(format!("{f}: the table accepts {}, Python refuses it", shown(s))),
            (Some(false), true) => stricter += 1,
            _ => {}
        }
    }
    eprintln!(
        "format probe against Python's jsonschema: {} strings, {} accepted by the compiled formats, {stricter} that only the table refuses",
        all.len(),
        cases.iter().filter(|c| c.2).count()
    );
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
}

//! End-to-end test of `constrain eval` on a tiny JSONSchemaBench-like directory built in a
//! temporary folder, with a small byte-level BPE tokenizer.json written inline.

use constrain_cli::cli::eval::{run, EvalArgs};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

mod common;
use common::tokenizer_json;

/// A fresh, empty folder under the system temp dir.
fn temp_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("constrain-eval-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn tests_file(cases: &[(bool, Value)]) -> String {
    let tests: Vec<Value> =
        cases.iter().map(|(valid, data)| json!({"description": "t", "valid": valid, "data": data})).collect();
    json!({"description": "x", "meta": {}, "tests": tests}).to_string()
}

/// `root/SetA` with two schemas that have tests, one whose test list is empty and one without
/// a test file (neither of those two counts), plus the tokenizer file.
fn bench(tag: &str, broken_schema: bool) -> PathBuf {
    let root = temp_dir(tag);
    let set = root.join("SetA");
    write(
        &set.join("obj.json"),
        &json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}).to_string(),
    );
    write(
        &set.join("tests/obj.json"),
        &tests_file(&[(true, json!({"a": 12})), (false, json!({"a": "x"})), (false, json!({}))]),
    );
    let str_schema =
        if broken_schema { "{\"type\": ".to_string() } else { json!({"type": "string", "maxLength": 3}).to_string() };
    write(&set.join("str.json"), &str_schema);
    write(&set.join("tests/str.json"), &tests_file(&[(true, json!("abc")), (false, json!("abcd")), (false, json!(5))]));
    write(&set.join("empty.json"), "{}");
    write(&set.join("tests/empty.json"), &tests_file(&[]));
    write(&set.join("untested.json"), "{}");
    write(&root.join("tokenizer.json"), &tokenizer_json());
    root
}

fn args(dir: PathBuf, root: &Path) -> EvalArgs {
    EvalArgs {
        dir,
        tokenizer: root.join("tokenizer.json"),
        json_report: Some(root.join("report.json")),
        grammar_file: None,
        limit: None,
        filter: None,
        whitespace: Default::default(),
        verbose: false,
        explain: false,
        shuffle_keys: None,
        limits: Default::default(),
        draft: None,
        lenient: false,
        no_runtime_checks: false,
    }
}

fn report(root: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(root.join("report.json")).unwrap()).unwrap()
}

const TOTALS_KEYS: [&str; 13] = [
    "schemas",
    "compiled",
    "passing",
    "wrong_accepts",
    "wrong_rejects",
    "tokens",
    "mask_mean_us",
    "mask_p50_us",
    "mask_p99_us",
    "mask_p999_us",
    "mask_max_us",
    "ttfm_p50_us",
    "ttfm_p99_us",
];

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(|k| k.as_str()).collect()
}

#[test]
fn report_has_the_fixed_keys_and_counts_only_schemas_with_tests() {
    let root = bench("keys", true);
    run(&args(root.clone(), &root)).unwrap();
    let r = report(&root);
    assert_eq!(keys(&r["totals"]), TOTALS_KEYS);
    assert_eq!(keys(&r["sets"]), ["SetA"]);
    assert_eq!(keys(&r["sets"]["SetA"]), TOTALS_KEYS);
    assert_eq!(r["totals"]["schemas"], 2);
    assert_eq!(r["vocab_size"], 261);
    let schemas = r["schemas"].as_array().unwrap();
    let ids: Vec<&str> = schemas.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["SetA/obj.json", "SetA/str.json"]);
    // The broken schema file is a compile failure with its reason.
    assert_eq!(schemas[1]["compiled"], false);
    assert_eq!(r["details"]["totals"]["compile_errors"]["invalid schema JSON"], 1);
    for s in schemas {
        for k in ["id", "compiled", "ttfm_us", "masks", "mask_mean_us", "mask_max_us", "wrong_accepts", "wrong_rejects"]
        {
            assert!(s.get(k).is_some(), "{k} missing in {s}");
        }
    }

    // A single set folder, --filter and --limit.
    let mut a = args(root.join("SetA"), &root);
    a.filter = Some("str".into());
    run(&a).unwrap();
    let r = report(&root);
    assert_eq!(r["totals"]["schemas"], 1);
    assert_eq!(r["schemas"][0]["id"], "SetA/str.json");
    let mut a = args(root.clone(), &root);
    a.limit = Some(1);
    run(&a).unwrap();
    assert_eq!(report(&root)["totals"]["schemas"], 1);

    // Not a benchmark directory, or a missing tokenizer: errors, not panics.
    let empty = temp_dir("empty");
    assert!(run(&args(empty.clone(), &root)).is_err());
    let mut a = args(root.clone(), &root);
    a.tokenizer = empty.join("missing.json");
    assert!(run(&a).is_err());
    std::fs::remove_dir_all(&root).ok();
    std::fs::remove_dir_all(&empty).ok();
}

/// Needs the schema compiler and the matcher: both schemas compile, every valid instance is
/// accepted and every invalid one rejected.
#[test]
fn valid_instances_accepted_and_invalid_rejected() {
    let root = bench("real", false);
    let code = run(&args(root.clone(), &root)).unwrap();
    let r = report(&root);
    let t = &r["totals"];
    assert_eq!(t["schemas"], 2, "{r:#}");
    assert_eq!(t["compiled"], 2, "{r:#}");
    assert_eq!(t["passing"], 2, "{r:#}");
    assert_eq!(t["wrong_accepts"], 0);
    assert_eq!(t["wrong_rejects"], 0);
    assert!(t["tokens"].as_u64().unwrap() >= 10);
    assert!(t["mask_p50_us"].as_f64().unwrap() > 0.0);
    assert!(t["ttfm_p50_us"].as_f64().unwrap() > 0.0);
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    std::fs::remove_dir_all(&root).ok();
}

/// `--grammar-file`: one grammar for every schema, instances judged by their `valid` flag.
/// Exercises the real matcher without the schema compiler.
#[test]
fn grammar_file_replaces_the_schemas() {
    let root = bench("gbnf", false);
    // Accepts exactly `{"a": <digits>}`: right for every `obj` test, wrong for the valid "abc".
    write(&root.join("a.gbnf"), "root ::= \"{\\\"a\\\": \" [0-9]+ \"}\"\n");
    let mut a = args(root.clone(), &root);
    a.grammar_file = Some(root.join("a.gbnf"));
    let code = run(&a).unwrap();
    let r = report(&root);
    let t = &r["totals"];
    assert_eq!((t["schemas"].as_u64(), t["compiled"].as_u64()), (Some(2), Some(2)), "{r:#}");
    assert_eq!(t["passing"], 1, "{r:#}");
    assert_eq!(t["wrong_accepts"], 0, "{r:#}");
    assert_eq!(t["wrong_rejects"], 1, "{r:#}");
    assert_eq!(r["schemas"][0]["passing"], true);
    assert_eq!(r["schemas"][1]["wrong_rejects"], 1);
    assert!(t["tokens"].as_u64().unwrap() >= 6);
    for k in ["mask_mean_us", "mask_p50_us", "mask_p99_us", "mask_p999_us", "mask_max_us", "ttfm_p50_us"] {
        assert!(t[k].as_f64().unwrap() > 0.0, "{k}");
    }
    assert_eq!(code, std::process::ExitCode::SUCCESS);

    // Any JSON: every invalid instance here is still JSON, so all four are wrong accepts,
    // and the exit code says so.
    a.grammar_file = Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../grammars/json.gbnf"));
    let code = run(&a).unwrap();
    let t = report(&root)["totals"].clone();
    assert_eq!(
        (t["passing"].as_u64(), t["wrong_accepts"].as_u64(), t["wrong_rejects"].as_u64()),
        (Some(0), Some(4), Some(0))
    );
    assert_eq!(code, std::process::ExitCode::FAILURE);

    // A grammar that does not parse: a compile error per schema, grouped by kind.
    write(&root.join("bad.gbnf"), "root ::= (\n");
    a.grammar_file = Some(root.join("bad.gbnf"));
    run(&a).unwrap();
    let r = report(&root);
    assert_eq!(r["totals"]["compiled"], 0);
    assert_eq!(r["details"]["totals"]["compile_errors"]["gbnf: Syntax"], 2, "{r:#}");
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn limit_hits_are_counted_and_fail_the_run() {
    // anyOf of 300 closed objects: 300 parse stacks after `{`, over the default 256; the first
    // alternatives' stacks are cut.
    let root = temp_dir("limits");
    let set = root.join("SetL");
    let alts: Vec<Value> = (0..300)
        .map(
            |i| json!({"type": "object", "properties": {format!("k{i}"): {"const": i}}, "required": [format!("k{i}")], "additionalProperties": false}),
        )
        .collect();
    write(&set.join("any.json"), &json!({ "anyOf": alts }).to_string());
    write(
        &set.join("tests/any.json"),
        &tests_file(&[(true, json!({"k5": 5})), (true, json!({"k299": 299})), (false, json!({"k5": 6}))]),
    );
    write(&root.join("tokenizer.json"), &tokenizer_json());
    let mut a = args(set.clone(), &root);
    a.explain = true;
    let code = run(&a).unwrap();
    assert_eq!(
        format!("{code:?}"),
        format!("{:?}", std::process::ExitCode::from(constrain_cli::cli::check::EXIT_LIMIT))
    );
    let r = report(&root);
    assert_eq!(r["details"]["totals"]["limit_hits"], 1);
    assert_eq!(r["totals"]["wrong_rejects"], 1);
    assert_eq!(r["totals"]["wrong_accepts"], 0);
    // Raised, the limit cuts nothing and the schema passes.
    a.limits.max_parse_stacks = Some(1000);
    assert_eq!(format!("{:?}", run(&a).unwrap()), format!("{:?}", std::process::ExitCode::SUCCESS));
    assert_eq!(report(&root)["totals"]["passing"], 1);
}

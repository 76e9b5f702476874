//! `constrain eval` on a small copy of JSON-Schema-Test-Suite groups (tests/fixtures/
//! suite-subset, see its README): the groups that were wrong accepts, and a few per draft
//! whose meaning depends on the dialect. Every folder must give 0 wrong accepts.

use constrain_cli::cli::eval::{run, EvalArgs};
use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::tokenizer_json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// `constrain eval` of the suite-subset folder `set` (see [`eval_dir`]).
fn eval(set: &str, tag: &str) -> Value {
    eval_dir(fixtures().join("suite-subset").join(set), tag)
}

/// `constrain eval` of `set_dir` with the test tokenizer: its JSON report, after checking
/// that it exited successfully.
fn eval_dir(set_dir: PathBuf, tag: &str) -> Value {
    eval_dir_shuffled(set_dir, tag, None)
}

/// [`eval_dir`], with `--shuffle-keys` when `shuffle` is set.
fn eval_dir_shuffled(set_dir: PathBuf, tag: &str, shuffle: Option<u64>) -> Value {
    let dir = std::env::temp_dir().join(format!("constrain-suite-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json()).unwrap();
    let args = EvalArgs {
        dir: set_dir.clone(),
        tokenizer: dir.join("tokenizer.json"),
        json_report: Some(dir.join("report.json")),
        grammar_file: None,
        limit: None,
        filter: None,
        whitespace: Default::default(),
        verbose: false,
        draft: None,
        lenient: false,
        no_runtime_checks: false,
        explain: false,
        shuffle_keys: shuffle,
        limits: Default::default(),
    };
    let code = run(&args).unwrap();
    let r: Value = serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, std::process::ExitCode::SUCCESS, "{}: {r:#}", set_dir.display());
    r
}

fn wrong_accepts(r: &Value) -> Vec<String> {
    r["schemas"].as_array().unwrap().iter().filter(|s| s["wrong_accepts"] != 0).map(|s| s["id"].to_string()).collect()
}

#[test]
fn former_wrong_accepts_are_gone_in_every_draft() {
    for (set, min_passing) in [("d2020", 10), ("d6", 5), ("d4", 5)] {
        let r = eval(set, set);
        assert_eq!(wrong_accepts(&r), Vec::<String>::new(), "{set}");
        assert_eq!(r["totals"]["wrong_accepts"], 0, "{set}");
        assert!(r["totals"]["passing"].as_u64().unwrap() >= min_passing, "{set}: {:#}", r["totals"]);
    }
}

#[test]
fn hostname_under_approximation_is_reported() {
    let r = eval("d2020", "notes");
    let host =
        r["schemas"].as_array().unwrap().iter().find(|s| s["id"].as_str().unwrap().contains("hostname")).unwrap();
    assert!(host["notes"][0].as_str().unwrap().contains("A-labels"), "{host}");
    assert!(r["details"]["totals"]["schemas_with_notes"].as_u64().unwrap() >= 1);
}

/// The hand-written schemas (tests/fixtures/handwritten, see its README): every one passes,
/// `unevaluated*` beside `anyOf` and `if`/`else` included (checked at run time).
#[test]
fn hand_written_schemas_all_pass() {
    let r = eval_dir(fixtures().join("handwritten"), "hand");
    assert_hand_written(&r);
}

/// The same with every object's members shuffled (`--shuffle-keys`): member order changes
/// no verdict, for objects of any size (`shipment_many_required` has ten required ones).
#[test]
fn hand_written_schemas_take_members_in_any_order() {
    let r = eval_dir_shuffled(fixtures().join("handwritten"), "hand-shuffled", Some(7));
    assert_hand_written(&r);
}

/// 0 wrong accepts, all 66 compiled, none failing.
fn assert_hand_written(r: &Value) {
    assert_eq!(wrong_accepts(r), Vec::<String>::new());
    let failing: Vec<&str> = r["schemas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["passing"] != true)
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(r["totals"]["compiled"], 66, "{:#}", r["totals"]);
    assert_eq!(failing, Vec::<&str>::new());
}

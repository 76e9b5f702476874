//! `--trace` end to end with the default model: a greedy run on `examples/person.json` writes
//! one JSON line per output token whose numbers are within their bounds and whose texts
//! spell the printed document; `constrain plot` draws it. The math itself is unit-tested in
//! `constrain_llama::trace` (the logits are not at hand here).
#![cfg(feature = "llama")]

use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn trace_lines_spell_the_output_within_bounds() {
    let exe = Path::new(env!("CARGO_BIN_EXE_constrain"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("constrain-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.jsonl");
    let out = Command::new(exe)
        .arg("--schema")
        .arg(root.join("examples/person.json"))
        .args(["-p", "Invent a person who lives in Lyon.", "--temp", "0", "--format", "raw", "--trace"])
        .arg(&trace)
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let printed = String::from_utf8(out.stdout).unwrap();
    let printed = printed.strip_suffix('\n').unwrap_or(&printed);

    let text = std::fs::read_to_string(&trace).expect("the trace was written");
    let (mut spelled, mut sampled, mut forced) = (String::new(), 0, 0);
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}: {line}", i + 1));
        if v.get("event").is_some() {
            assert!(v["step"].is_u64(), "{line}");
            continue;
        }
        spelled.push_str(v["text"].as_str().expect("text"));
        let allowed = v["allowed"].as_u64().expect("allowed");
        assert!(allowed >= 1, "{line}");
        assert!(v["token"].is_u64(), "{line}");
        match v["kind"].as_str() {
            Some("sampled") => {
                sampled += 1;
                let m = v["mass_removed"].as_f64().expect("mass_removed");
                assert!((0.0..=1.0).contains(&m), "{line}");
                let before = v["entropy_before"].as_f64().expect("entropy_before");
                let after = v["entropy_after"].as_f64().expect("entropy_after");
                assert!(before >= 0.0 && after >= 0.0 && after <= (allowed as f64).ln() + 1e-9, "{line}");
                assert!(v["rank_unmasked"].is_u64(), "{line}");
                if allowed == 1 {
                    assert_eq!(after, 0.0, "{line}");
                }
            }
            Some("forced") => {
                forced += 1;
                assert_eq!(allowed, 1, "{line}");
                assert!(v["mass_removed"].is_null(), "{line}");
            }
            k => panic!("kind {k:?}: {line}"),
        }
    }
    assert_eq!(spelled, printed, "the token lines spell the printed output");
    assert!(sampled > 0 && forced > 0, "{sampled} sampled, {forced} forced");

    let svg = dir.join("t.svg");
    let plot = Command::new(exe).arg("plot").arg(&trace).arg("-o").arg(&svg).output().unwrap();
    assert!(plot.status.success(), "{}", String::from_utf8_lossy(&plot.stderr));
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.contains(&format!("Mask trace: {} steps, {forced} forced", sampled + forced)), "{drawn}");
    let _ = std::fs::remove_dir_all(dir);
}

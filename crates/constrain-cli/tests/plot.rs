//! `constrain plot` (no model): a small fixed trace renders to an SVG with its title, the
//! tokens' labels escaped; a malformed line is an error naming it, with exit code 1 and no
//! panic.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn constrain(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_constrain")).args(args).output().expect("the binary runs")
}

/// A fresh directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("constrain-plot-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn renders_a_fixed_trace() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/trace/small.jsonl");
    let dir = temp_dir("render");
    let svg = dir.join("t.svg");
    let out = constrain(&["plot".as_ref(), fixture.as_os_str(), "-o".as_ref(), svg.as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).expect("the SVG was written");
    assert!(text.starts_with("<svg") || text.starts_with("<?xml"), "{}", &text[..text.len().min(200)]);
    assert!(text.trim_end().ends_with("</svg>"));
    assert!(
        text.contains("Mask trace: 8 steps, 4 forced, mean mass removed 0.515 (over 4 sampled), 1 backtrack"),
        "no title in {text}"
    );
    // The labels: a space as ␣, a newline escaped, markup characters escaped for XML.
    assert!(text.contains("yon") && text.contains("\\n&lt;&amp;&gt;"), "labels missing");
    assert!(!text.contains("<&>"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_malformed_line_is_an_error_naming_it() {
    let dir = temp_dir("malformed");
    let bad = dir.join("bad.jsonl");
    let line = r#"{"step":0,"token":1,"text":"{","kind":"sampled","allowed":3,"mass_removed":0.5}"#;
    std::fs::write(&bad, format!("{line}\n{line}\n{{\"step\": 2, \"text\": \n")).unwrap();
    let out = constrain(&["plot".as_ref(), bad.as_os_str(), "-o".as_ref(), dir.join("x.svg").as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("bad.jsonl: line 3: not JSON"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!dir.join("x.svg").exists(), "no SVG for a bad trace");

    std::fs::write(&bad, "").unwrap();
    let out = constrain(&["plot".as_ref(), bad.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no token lines"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

//! Snapshots of stable artefacts: the GBNF every schema in `examples/` compiles to, and the
//! automaton listing of a few small constraints. A change in the schema compiler or the
//! automaton builder shows up here as a readable diff (`cargo insta review`); under
//! `CI=true` a changed snapshot fails.

use constrain::automaton::Pda;
use constrain::grammar::{gbnf, regex};
use constrain::schema::{self, Options};
use constrain::Limits;
use std::path::Path;

#[test]
fn gbnf_of_every_example_schema() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/ is readable")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "expected the example schemas in {}", dir.display());
    for path in files {
        let name = path.file_stem().and_then(|s| s.to_str()).expect("file name").to_string();
        let text = std::fs::read_to_string(&path).expect("readable schema");
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let grammar = schema::compile(&value, &Options::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_snapshot!(format!("gbnf_{name}"), grammar.to_string());
    }
}

#[test]
fn automaton_listings_of_small_constraints() {
    let cases = [
        ("regex_phone", regex::compile_anchored("[0-9]{3}-[0-9]{4}").expect("valid regex")),
        (
            "gbnf_list",
            gbnf::parse("root ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= [a-z]+\n").expect("valid GBNF"),
        ),
        (
            "schema_enum",
            schema::compile(&serde_json::json!({"enum": ["red", "green", 7]}), &Options::default())
                .expect("compiles")
                .into_grammar(),
        ),
    ];
    for (name, grammar) in cases {
        let pda = Pda::build(&grammar, &Limits::default()).expect("builds");
        insta::assert_snapshot!(format!("automaton_{name}"), pda.listing());
    }
}

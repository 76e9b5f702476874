//! The README's keyword table, kept true by the compiler.
//!
//! The table (between `<!-- keyword-table -->` and `<!-- /keyword-table -->` in README.md)
//! has one row per JSON Schema keyword or group of keywords (every keyword in backticks in
//! the first cell) and four columns: exact in the grammar, documented subset, run-time
//! check, refused. A cell starting with `✓` marks the column. This test reads the table and
//! holds probes: small schemas, each showing one keyword behaving one way. It fails, naming
//! the keyword, when
//!
//! - a probe's behaviour is not marked in its keyword's row, or a marked column has no probe
//!   of a keyword of that row (so the table and the probes say the same thing);
//! - a probe does not behave as its column says:
//!   - **exact**: compiles with no run-time check and no subset note, and a matcher over a
//!     byte vocabulary accepts the valid documents and refuses the invalid ones, as the
//!     `jsonschema` crate (formats asserted) judges them;
//!   - **documented subset**: compiles (with run-time checks off for the probes that say
//!     so), a note names a keyword of the row or the cell links a page of `docs/` naming
//!     one, the documents are judged as for exact, and the valid documents the probe lists
//!     as left out are refused;
//!   - **run-time check**: compiles with checks on, a keyword of the row is among the checked
//!     ones, and the documents are judged as for exact; with checks off it is refused at the
//!     keyword's JSON pointer, or, where the row also marks a subset, compiles as that subset;
//!   - **refused**: compiling fails with checks on, and with checks off the error names the
//!     keyword's JSON pointer;
//! - a keyword the compiler knows ([`schema::known_keywords`]) has no row;
//! - a keyword no run-time check can enforce ([`Treatment::GrammarOnly`]) has a row that
//!   marks a run-time check, or marks nothing refused (what the grammar cannot say is).
//!
//! Run with `cargo test --release -p constrain --test keyword_table`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use constrain::schema::{self, Note, Options, Treatment};
use constrain::{Constraint, Limits, TokenIndex, Vocabulary};
use serde_json::{json, Value};

/// A column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// Exact in the grammar.
    Exact,
    /// A documented subset: the grammar accepts less, and says so.
    Subset,
    /// Enforced exactly by a run-time check.
    Checked,
    /// Refused with an error at the keyword's pointer.
    Refused,
}

impl Kind {
    /// The column whose header contains `header` (lowercase), if any.
    fn of_header(header: &str) -> Option<Kind> {
        let h = header.to_lowercase();
        if h.contains("exact") {
            Some(Kind::Exact)
        } else if h.contains("subset") {
            Some(Kind::Subset)
        } else if h.contains("run-time") {
            Some(Kind::Checked)
        } else if h.contains("refused") {
            Some(Kind::Refused)
        } else {
            None
        }
    }
}

// ---------------------------------------------------------------------------------------
// The one place that knows the compiler's API (adapt here when it moves).
// ---------------------------------------------------------------------------------------

/// What compiling a schema gave: the constraint over a byte vocabulary, the keywords left to
/// run-time checks (`None`: no checks) and the notes.
struct Compiled {
    constraint: Constraint,
    checked: Option<Vec<String>>,
    notes: Vec<Note>,
}

/// Compiles `schema` with default options, run-time checks on or off.
fn compile(schema: &Value, checks: bool) -> Result<Compiled, schema::Error> {
    let options = Options::default().with_runtime_checks(checks);
    let compiled = schema::compile(schema, &options)?;
    let checked = compiled.checks().map(|c| c.relaxed().iter().map(|r| r.keyword.clone()).collect());
    let constraint = Constraint::new(&compiled, TokenIndex::new(Vocabulary::bytes()), &Limits::default())
        .unwrap_or_else(|e| panic!("{schema}: no constraint: {e}"));
    Ok(Compiled { constraint, checked, notes: compiled.notes().to_vec() })
}

/// Every keyword the compiler knows, with how it treats it.
fn known_keywords() -> Vec<schema::KnownKeyword> {
    schema::known_keywords()
}

// ---------------------------------------------------------------------------------------
// Probes.
// ---------------------------------------------------------------------------------------

/// One keyword behaving one way on one schema.
struct Probe {
    keyword: &'static str,
    kind: Kind,
    schema: Value,
    /// Documents the schema accepts (the `jsonschema` crate agrees): the matcher must too.
    valid: Vec<&'static str>,
    /// Documents the schema refuses: the matcher must too.
    invalid: Vec<&'static str>,
    /// Subset probes: valid documents the grammar leaves out (the subset), refused.
    left_out: Vec<&'static str>,
    /// Pointer of the keyword in errors (default: `/K` for a keyword `K` of its row).
    at: Option<&'static str>,
    /// Subset probes: compiled with run-time checks off (the subset is what
    /// `--no-runtime-checks` gives).
    without_checks: bool,
}

fn probe(keyword: &'static str, kind: Kind, schema: Value) -> Probe {
    Probe {
        keyword,
        kind,
        schema,
        valid: Vec::new(),
        invalid: Vec::new(),
        left_out: Vec::new(),
        at: None,
        without_checks: false,
    }
}

impl Probe {
    fn valid(mut self, docs: &[&'static str]) -> Self {
        self.valid.extend_from_slice(docs);
        self
    }
    fn invalid(mut self, docs: &[&'static str]) -> Self {
        self.invalid.extend_from_slice(docs);
        self
    }
    fn left_out(mut self, docs: &[&'static str]) -> Self {
        self.left_out.extend_from_slice(docs);
        self
    }
    fn at(mut self, pointer: &'static str) -> Self {
        self.at = Some(pointer);
        self
    }
    fn without_checks(mut self) -> Self {
        self.without_checks = true;
        self
    }
}

const D4: &str = "http://json-schema.org/draft-04/schema#";
const D7: &str = "http://json-schema.org/draft-07/schema#";
const D2019: &str = "https://json-schema.org/draft/2019-09/schema";

fn probes() -> Vec<Probe> {
    use Kind::*;
    let mut p = vec![
        // Types and values.
        probe("type", Exact, json!({"type": ["integer", "null"]})).valid(&["3", "null", "3.0"]).invalid(&["1.5", "\"a\""]),
        probe("enum", Exact, json!({"enum": [1, "a", null, {"b": [true]}]}))
            .valid(&["1", "\"a\"", "null", "{\"b\":[true]}"])
            .invalid(&["2", "\"b\"", "{\"b\":[false]}"]),
        // Other spellings of an `enum`/`const` number are left out (docs/soundness.md).
        probe("enum", Subset, json!({"enum": [0.2, 3]})).valid(&["0.2", "3"]).invalid(&["0.3"]).left_out(&["0.20"]),
        probe("const", Exact, json!({"const": {"a": 1, "b": "x"}}))
            .valid(&["{\"a\":1,\"b\":\"x\"}", "{\"b\":\"x\",\"a\":1}"])
            .invalid(&["{\"a\":1}", "{\"a\":2,\"b\":\"x\"}"]),
        // Objects.
        probe("properties", Exact, json!({"type": "object", "properties": {"a": {"type": "integer"}}}))
            .valid(&["{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":2}"])
            .invalid(&["{\"a\":\"x\"}"]),
        probe("required", Exact, json!({"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}))
            .valid(&["{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}"])
            .invalid(&["{\"a\":1}", "{}"]),
        probe("additionalProperties", Exact, json!({"type": "object", "additionalProperties": {"type": "integer"}}))
            .valid(&["{}", "{\"x\":1,\"y\":2}"])
            .invalid(&["{\"x\":\"a\"}"]),
        probe(
            "patternProperties",
            Exact,
            json!({"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": false}),
        )
        .valid(&["{}", "{\"x1\":1,\"xy\":2}"])
        .invalid(&["{\"x1\":\"a\"}", "{\"y\":1}"]),
        // A look-around pattern beside keys of other values.
        probe("patternProperties", Checked, json!({"type": "object", "patternProperties": {"^(?=a)": {"type": "integer"}}}))
            .valid(&["{\"ab\":1,\"b\":\"x\"}"])
            .invalid(&["{\"ab\":\"x\"}"]),
        probe("propertyNames", Exact, json!({"type": "object", "propertyNames": {"maxLength": 3}}))
            .valid(&["{}", "{\"abc\":1}"])
            .invalid(&["{\"abcd\":1}"]),
        // Beside named properties.
        probe("propertyNames", Checked, json!({"type": "object", "properties": {"ab": {}}, "propertyNames": {"minLength": 2}}))
            .valid(&["{\"ab\":1}", "{\"cd\":1}"])
            .invalid(&["{\"a\":1}"]),
        probe("minProperties", Exact, json!({"type": "object", "minProperties": 1, "maxProperties": 2}))
            .valid(&["{\"a\":1}", "{\"a\":1,\"b\":2}"])
            .invalid(&["{}", "{\"a\":1,\"b\":2,\"c\":3}"]),
        probe("maxProperties", Exact, json!({"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "maxProperties": 1}))
            .valid(&["{}", "{\"x\":1}"])
            .invalid(&["{\"x\":1,\"y\":2}"]),
        probe("minProperties", Checked, json!({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2}))
            .valid(&["{\"a\":1,\"b\":2}"])
            .invalid(&["{\"a\":1}"]),
        probe(
            "maxProperties",
            Checked,
            json!({"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": false, "maxProperties": 1}),
        )
        .valid(&["{}", "{\"a\":1}"])
        .invalid(&["{\"a\":1,\"b\":2}"]),
        probe("dependentRequired", Exact, json!({"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}}))
            .valid(&["{}", "{\"b\":1}", "{\"a\":1,\"b\":2}"])
            .invalid(&["{\"a\":1}"]),
        probe("dependentSchemas", Checked, json!({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}))
            .valid(&["{}", "{\"a\":1,\"b\":2}"])
            .invalid(&["{\"a\":1}"]),
        probe("dependencies", Exact, json!({"$schema": D7, "type": "object", "dependencies": {"a": ["b"]}}))
            .valid(&["{}", "{\"a\":1,\"b\":2}"])
            .invalid(&["{\"a\":1}"]),
        // The schema form is compiled as `dependentSchemas`; the error names it as written.
        probe("dependencies", Checked, json!({"$schema": D7, "type": "object", "dependencies": {"a": {"required": ["b"]}}}))
            .valid(&["{}", "{\"a\":1,\"b\":2}"])
            .invalid(&["{\"a\":1}"])
            .at("/dependencies"),
        // Arrays.
        probe("items", Exact, json!({"type": "array", "items": {"type": "integer"}})).valid(&["[]", "[1,2]"]).invalid(&["[1,\"a\"]"]),
        probe("prefixItems", Exact, json!({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false}))
            .valid(&["[]", "[1]", "[1,\"a\"]"])
            .invalid(&["[\"a\"]", "[1,\"a\",2]"]),
        probe("additionalItems", Exact, json!({"$schema": D7, "type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}}))
            .valid(&["[1]", "[1,\"a\",\"b\"]"])
            .invalid(&["[1,2]"]),
        probe("contains", Checked, json!({"type": "array", "contains": {"type": "integer"}}))
            .valid(&["[1]", "[\"a\",2]"])
            .invalid(&["[]", "[\"a\"]"]),
        probe("minContains", Checked, json!({"type": "array", "contains": {"type": "integer"}, "minContains": 2}))
            .valid(&["[1,2]"])
            .invalid(&["[1,\"a\"]"]),
        probe("maxContains", Checked, json!({"type": "array", "contains": {"type": "integer"}, "maxContains": 1}))
            .valid(&["[1,\"a\"]"])
            .invalid(&["[1,2]"]),
        probe("minItems", Exact, json!({"type": "array", "minItems": 1, "maxItems": 2})).valid(&["[1]", "[1,2]"]).invalid(&["[]", "[1,2,3]"]),
        probe("maxItems", Exact, json!({"type": "array", "maxItems": 1})).valid(&["[]", "[1]"]).invalid(&["[1,2]"]),
        probe("uniqueItems", Checked, json!({"type": "array", "uniqueItems": true}))
            .valid(&["[]", "[1,2]", "[1,\"1\"]"])
            .invalid(&["[1,1]", "[{\"a\":1},{\"a\":1}]"]),
        probe("unevaluatedItems", Exact, json!({"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": false}))
            .valid(&["[]", "[1]"])
            .invalid(&["[1,2]"]),
        probe("unevaluatedProperties", Exact, json!({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": false}))
            .valid(&["{}", "{\"a\":1}"])
            .invalid(&["{\"b\":1}"]),
        probe(
            "unevaluatedProperties",
            Checked,
            json!({"type": "object", "anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}], "unevaluatedProperties": false}),
        )
        .valid(&["{\"a\":1}", "{\"a\":1,\"b\":2}"])
        .invalid(&["{\"c\":1}"]),
        probe(
            "unevaluatedProperties",
            Subset,
            json!({"type": "object", "anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}], "unevaluatedProperties": false}),
        )
        .valid(&["{\"a\":1}"])
        .invalid(&["{\"c\":1}"])
        .without_checks(),
        // Strings.
        probe("minLength", Exact, json!({"type": "string", "minLength": 1, "maxLength": 3}))
            .valid(&["\"a\"", "\"abc\"", "\"\\u00e9\""])
            .invalid(&["\"\"", "\"abcd\""]),
        probe("maxLength", Exact, json!({"type": "string", "maxLength": 2})).valid(&["\"\"", "\"ab\""]).invalid(&["\"abc\""]),
        probe("pattern", Exact, json!({"type": "string", "pattern": "^a+[0-9]$"})).valid(&["\"a1\"", "\"aaa9\""]).invalid(&["\"a\"", "\"b1\""]),
        probe("pattern", Exact, json!({"type": "string", "pattern": "(?<=a)b"})).valid(&["\"ab\"", "\"xab\""]).invalid(&["\"b\"", "\"cb\""]),
        // A backreference is not regular.
        probe("pattern", Checked, json!({"type": "string", "pattern": "^(a)\\1$"})).valid(&["\"aa\""]).invalid(&["\"a\""]),
        probe("pattern", Refused, json!({"type": "string", "pattern": "(a"})),
        probe("format", Exact, json!({"type": "string", "format": "ipv4"}))
            .valid(&["\"192.168.0.1\""])
            .invalid(&["\"256.1.1.1\"", "\"1.2.3\""]),
        probe("format", Exact, json!({"type": "string", "format": "uuid"}))
            .valid(&["\"123e4567-e89b-12d3-a456-426614174000\""])
            .invalid(&["\"123e4567\""]),
        probe("format", Exact, json!({"type": "string", "format": "made-up"})).valid(&["\"x\""]).invalid(&["1"]),
        probe("format", Subset, json!({"type": "string", "format": "date"})).valid(&["\"2024-02-29\""]).invalid(&["\"2023-02-29\""]),
        probe("format", Subset, json!({"type": "string", "format": "hostname"}))
            .valid(&["\"example.com\""])
            .invalid(&["\"-a.com\""])
            .left_out(&["\"xn--bcher-kva.example\""]),
        probe("format", Checked, json!({"type": "string", "format": "iri"}))
            .valid(&["\"https://example.com/\""])
            .invalid(&["\"not an iri\""]),
        probe("contentEncoding", Exact, json!({"$schema": D7, "type": "string", "contentEncoding": "base64"}))
            .valid(&["\"YQ==\""])
            .invalid(&["\"*\""]),
        probe("contentMediaType", Exact, json!({"$schema": D7, "type": "string", "contentMediaType": "application/json"}))
            .valid(&["\"{}\"", "\"[1]\""])
            .invalid(&["\"{\""]),
        // JSON inside a string is written compactly (docs/formats.md).
        probe("contentMediaType", Subset, json!({"$schema": D7, "type": "string", "contentMediaType": "application/json"}))
            .valid(&["\"[1]\""])
            .left_out(&["\"[1, 2]\""]),
        probe("contentEncoding", Exact, json!({"type": "string", "contentEncoding": "base64"})).valid(&["\"*\""]).invalid(&["1"]),
        probe("contentSchema", Exact, json!({"type": "string", "contentMediaType": "application/json", "contentSchema": {"type": "object"}}))
            .valid(&["\"1\""])
            .invalid(&["1"]),
        // Numbers.
        probe("minimum", Exact, json!({"type": "number", "minimum": 1.5, "maximum": 10})).valid(&["1.5", "10", "2"]).invalid(&["1.4", "10.01"]),
        // Exponents other than one leading digit are left out where a bound applies (docs/soundness.md).
        probe("minimum", Subset, json!({"type": "number", "minimum": 0})).valid(&["5", "1e-07"]).invalid(&["-1"]).left_out(&["16e307"]),
        probe("maximum", Exact, json!({"type": "integer", "maximum": 10})).valid(&["10", "-3"]).invalid(&["11"]),
        probe("exclusiveMinimum", Exact, json!({"type": "number", "exclusiveMinimum": 0})).valid(&["0.001", "5"]).invalid(&["0", "-1"]),
        probe("exclusiveMaximum", Exact, json!({"type": "number", "exclusiveMaximum": 1})).valid(&["0.999", "-5"]).invalid(&["1", "2"]),
        probe("exclusiveMinimum", Exact, json!({"$schema": D4, "type": "number", "minimum": 0, "exclusiveMinimum": true}))
            .valid(&["0.5"])
            .invalid(&["0"]),
        probe("multipleOf", Exact, json!({"type": "integer", "multipleOf": 3})).valid(&["0", "-3", "9"]).invalid(&["4"]),
        probe("multipleOf", Exact, json!({"type": "number", "multipleOf": 37})).valid(&["74"]).invalid(&["5"]),
        // No small remainder automaton: a huge range of multiples.
        probe("multipleOf", Checked, json!({"type": "number", "multipleOf": 7.3, "minimum": -1e30})).valid(&["14.6"]).invalid(&["14"]),
        // Combinators.
        probe("allOf", Exact, json!({"allOf": [{"type": "integer"}, {"minimum": 3}]})).valid(&["3"]).invalid(&["2", "3.5"]),
        probe("anyOf", Exact, json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}))
            .valid(&["1", "\"a\""])
            .invalid(&["\"ab\"", "null"]),
        probe("oneOf", Exact, json!({"oneOf": [{"type": "integer"}, {"type": "string"}]})).valid(&["1", "\"a\""]).invalid(&["null"]),
        probe("oneOf", Checked, json!({"oneOf": [{"type": "integer"}, {"minimum": 3}]})).valid(&["1", "3.5"]).invalid(&["4", "2.5"]),
        probe(
            "oneOf",
            Subset,
            json!({"oneOf": [{"type": "object", "properties": {"a": {}}, "required": ["a"]}, {"type": "object", "properties": {"b": {}}, "required": ["b"]}]}),
        )
        .valid(&["{\"a\":1}", "{\"b\":1}"])
        .invalid(&["{\"a\":1,\"b\":2}", "{}"])
        .without_checks(),
        probe("not", Exact, json!({"not": {"type": "object"}})).valid(&["1", "[]"]).invalid(&["{}"]),
        probe("not", Exact, json!({"type": "object", "not": {"required": ["a"]}})).valid(&["{}", "{\"b\":1}"]).invalid(&["{\"a\":1}"]),
        probe("not", Checked, json!({"type": "integer", "not": {"const": 3}})).valid(&["2", "4"]).invalid(&["3"]),
        probe("if", Checked, json!({"type": "integer", "if": {"minimum": 3}, "then": {"multipleOf": 2}, "else": {"maximum": 0}}))
            .valid(&["0", "4"])
            .invalid(&["1", "5"]),
        // References and identifiers.
        probe("$ref", Exact, json!({"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}))
            .valid(&["{\"a\":1}"])
            .invalid(&["{\"a\":\"x\"}"]),
        probe("$ref", Exact, json!({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"}))
            .valid(&["[]", "[[],[[]]]"])
            .invalid(&["[1]"]),
        probe("$ref", Refused, json!({"$ref": "https://example.com/remote.json"})),
        probe("$defs", Exact, json!({"$defs": {"a": {"type": "integer"}}, "$ref": "#/$defs/a"})).valid(&["1"]).invalid(&["\"a\""]),
        probe("definitions", Exact, json!({"definitions": {"a": {"type": "integer"}}, "$ref": "#/definitions/a"})).valid(&["1"]).invalid(&["\"a\""]),
        probe("$id", Exact, json!({"$id": "https://example.com/root", "$defs": {"a": {"$id": "a.json", "type": "integer"}}, "$ref": "a.json"}))
            .valid(&["1"])
            .invalid(&["\"a\""]),
        probe("$anchor", Exact, json!({"$defs": {"a": {"$anchor": "x", "type": "integer"}}, "$ref": "#x"})).valid(&["1"]).invalid(&["\"a\""]),
        probe("$dynamicRef", Exact, json!({"$dynamicAnchor": "n", "type": "object", "properties": {"c": {"$dynamicRef": "#n"}}}))
            .valid(&["{}", "{\"c\":{\"c\":{}}}"])
            .invalid(&["{\"c\":1}"]),
        // Another dynamic anchor could take the reference over.
        probe(
            "$dynamicRef",
            Refused,
            json!({"$id": "https://e.com/a", "$defs": {"t": {"$dynamicAnchor": "n", "type": "integer"}, "u": {"$id": "b", "$dynamicAnchor": "n", "type": "string"}}, "$dynamicRef": "#n"}),
        ),
        probe("$recursiveRef", Exact, json!({"$schema": D2019, "$recursiveAnchor": true, "type": "object", "properties": {"c": {"$recursiveRef": "#"}}}))
            .valid(&["{}", "{\"c\":{}}"])
            .invalid(&["{\"c\":1}"]),
        probe(
            "properties",
            Checked,
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}, "c": {}, "d": {}, "e": {}}, "required": ["a"]}),
        )
        .valid(&["{\"e\":1,\"a\":2}", "{\"a\":1}"])
        .invalid(&["{\"a\":\"x\"}", "{\"b\":1}"]),
        probe(
            "properties",
            Subset,
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}, "c": {}, "d": {}, "e": {}}, "required": ["a"]}),
        )
        .valid(&["{\"a\":1,\"e\":2}"])
        .invalid(&["{\"a\":\"x\"}", "{\"b\":1}"])
        .left_out(&["{\"e\":1,\"a\":2}"])
        .without_checks(),
        probe("contentEncoding", Refused, json!({"$schema": D7, "type": "string", "contentEncoding": "base64", "contentMediaType": "application/json"})),
        probe("$schema", Exact, json!({"$schema": D7, "type": "integer"})).valid(&["1"]).invalid(&["\"a\""]),
    ];
    // Annotations: ignored, which is exact.
    for (k, v) in [
        ("title", json!("t")),
        ("description", json!("d")),
        ("default", json!("not an integer")),
        ("examples", json!(["x"])),
        ("$comment", json!("c")),
        ("readOnly", json!(true)),
        ("writeOnly", json!(false)),
        ("deprecated", json!(true)),
    ] {
        let mut s = json!({"type": "integer"});
        s[k] = v;
        p.push(probe(k, Kind::Exact, s).valid(&["1"]).invalid(&["\"a\""]));
    }
    p
}

// ---------------------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------------------

/// One row: its keywords and the text of each marked column.
#[derive(Debug)]
struct Row {
    keywords: Vec<String>,
    marks: BTreeMap<Kind, String>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The rows of the README's keyword table.
fn table() -> Vec<Row> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let start = readme.find("<!-- keyword-table -->").expect("README.md has no `<!-- keyword-table -->` marker");
    let end = readme[start..].find("<!-- /keyword-table -->").expect("keyword table not closed") + start;
    let lines: Vec<&str> = readme[start..end].lines().filter(|l| l.trim_start().starts_with('|')).collect();
    let cells = |l: &str| -> Vec<String> {
        let l = l.trim().trim_start_matches('|').trim_end_matches('|');
        l.split('|').map(|c| c.trim().to_string()).collect()
    };
    let header = cells(lines.first().expect("keyword table has no header"));
    let columns: Vec<Option<Kind>> = header.iter().map(|h| Kind::of_header(h)).collect();
    for kind in [Kind::Exact, Kind::Subset, Kind::Checked, Kind::Refused] {
        assert!(columns.contains(&Some(kind)), "keyword table: no column for {kind:?} in {header:?}");
    }
    let mut rows = Vec::new();
    for line in lines.iter().skip(2) {
        let cells = cells(line);
        assert_eq!(cells.len(), header.len(), "keyword table: wrong number of cells in {line}");
        let keywords: Vec<String> = cells[0].split('`').skip(1).step_by(2).map(str::to_string).collect();
        assert!(!keywords.is_empty(), "keyword table: no `keyword` in the first cell of {line}");
        let mut marks = BTreeMap::new();
        for (cell, column) in cells.iter().zip(&columns) {
            if let (Some(kind), true) = (column, cell.starts_with('✓')) {
                marks.insert(*kind, cell.clone());
            }
        }
        assert!(!marks.is_empty(), "keyword table: row {keywords:?} marks no column");
        rows.push(Row { keywords, marks });
    }
    rows
}

// ---------------------------------------------------------------------------------------
// Judging a probe.
// ---------------------------------------------------------------------------------------

fn accepts(c: &Constraint, doc: &str) -> bool {
    let mut m = c.matcher();
    m.accept_bytes(doc.as_bytes()).is_ok() && m.is_accepting()
}

/// The `jsonschema` crate's verdict (formats asserted, the schema's own dialect).
fn oracle(schema: &Value, doc: &str) -> bool {
    let v =
        jsonschema::options().should_validate_formats(true).build(schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    v.is_valid(&serde_json::from_str(doc).unwrap_or_else(|e| panic!("{doc}: {e}")))
}

/// The valid and invalid documents of `p`: labelled right, and judged so by `c`.
fn judge_documents(p: &Probe, c: &Constraint, errors: &mut Vec<String>) {
    let k = p.keyword;
    for d in &p.valid {
        if !oracle(&p.schema, d) {
            errors.push(format!("`{k}`: probe {} lists {d} as valid; jsonschema refuses it", p.schema));
        } else if !accepts(c, d) {
            errors.push(format!("`{k}` ({:?}): {} refuses the valid {d}", p.kind, p.schema));
        }
    }
    for d in &p.invalid {
        if oracle(&p.schema, d) {
            errors.push(format!("`{k}`: probe {} lists {d} as invalid; jsonschema accepts it", p.schema));
        } else if accepts(c, d) {
            errors.push(format!("`{k}` ({:?}): {} accepts the invalid {d} (a wrong accept)", p.kind, p.schema));
        }
    }
}

/// Whether a link of `cell` to a page of `docs/` names one of `keywords`.
fn documented_in_linked_page(cell: &str, keywords: &[String]) -> bool {
    cell.split("](").skip(1).filter_map(|s| s.split(')').next()).any(|link| {
        let file = link.split('#').next().unwrap_or(link);
        file.starts_with("docs/")
            && std::fs::read_to_string(repo_root().join(file))
                .is_ok_and(|t| keywords.iter().any(|k| t.contains(&format!("`{k}")) || t.contains(&format!("{k}`"))))
    })
}

/// Whether the row marks a subset and it is said: a note names a keyword of the row, or the
/// subset cell links a page of `docs/` that names one.
fn subset_said(c: &Compiled, row: &Row) -> bool {
    let Some(cell) = row.marks.get(&Kind::Subset) else { return false };
    c.notes.iter().any(|n| !n.is_warning() && row.keywords.iter().any(|k| k == n.keyword()))
        || documented_in_linked_page(cell, &row.keywords)
}

fn judge(p: &Probe, row: &Row, errors: &mut Vec<String>) {
    let k = p.keyword;
    let in_row = |keyword: &str| row.keywords.iter().any(|r| r == keyword);
    let pointers: Vec<String> = match p.at {
        Some(at) => vec![at.to_string()],
        None => row.keywords.iter().map(|r| format!("/{r}")).collect(),
    };
    let at_keyword = |e: &schema::Error| pointers.iter().any(|at| at == e.pointer());
    let on = compile(&p.schema, true);
    let off = compile(&p.schema, false);
    match p.kind {
        Kind::Exact => match on {
            Err(e) => errors.push(format!("`{k}` marked exact: {} is refused: {e}", p.schema)),
            Ok(c) => {
                if let Some(checked) = &c.checked {
                    errors.push(format!("`{k}` marked exact: {} needs run-time checks of {checked:?}", p.schema));
                }
                let subsets: Vec<String> = c.notes.iter().filter(|n| !n.is_warning()).map(|n| n.to_string()).collect();
                if !subsets.is_empty() {
                    errors.push(format!("`{k}` marked exact: {} compiles with subset notes {subsets:?}", p.schema));
                }
                judge_documents(p, &c.constraint, errors);
            }
        },
        Kind::Subset => match if p.without_checks { off } else { on } {
            Err(e) => errors.push(format!("`{k}` marked as a subset: {} is refused: {e}", p.schema)),
            Ok(c) => {
                if !subset_said(&c, row) {
                    errors.push(format!(
                        "`{k}` marked as a subset: {} gives no note naming it, and the cell links no docs/ page naming it",
                        p.schema
                    ));
                }
                judge_documents(p, &c.constraint, errors);
                for d in &p.left_out {
                    if !oracle(&p.schema, d) {
                        errors.push(format!("`{k}`: probe {} lists {d} as left out, but it is invalid", p.schema));
                    } else if accepts(&c.constraint, d) {
                        errors.push(format!(
                            "`{k}` marked as a subset: {} accepts {d}, which the probe says is left out",
                            p.schema
                        ));
                    }
                }
            }
        },
        Kind::Checked => {
            match on {
                Err(e) => errors
                    .push(format!("`{k}` marked as a run-time check: {} is refused with checks on: {e}", p.schema)),
                Ok(c) => match &c.checked {
                    Some(checked)
                        if checked
                            .iter()
                            .any(|c| in_row(c) || pointers.iter().any(|at| at.ends_with(&format!("/{c}")))) =>
                    {
                        judge_documents(p, &c.constraint, errors)
                    }
                    other => errors.push(format!("`{k}` marked as a run-time check: {} checks {other:?}", p.schema)),
                },
            }
            // Without checks: refused at the keyword, or (where the row says so) a subset.
            match off {
                Ok(c) if subset_said(&c, row) => {}
                Ok(_) => {
                    errors.push(format!("`{k}` marked as a run-time check: {} compiles with checks off", p.schema))
                }
                Err(e) if !at_keyword(&e) => errors.push(format!(
                    "`{k}`: with checks off, {} is refused at {} ({e}), not at {pointers:?}",
                    p.schema,
                    e.pointer()
                )),
                Err(_) => {}
            }
        }
        Kind::Refused => {
            // With checks on, refused too (else it would be a run-time check).
            if on.is_ok() {
                errors.push(format!("`{k}` marked refused: {} compiles with run-time checks on", p.schema));
            }
            match off {
                Ok(_) => errors.push(format!("`{k}` marked refused: {} compiles", p.schema)),
                Err(e) if !at_keyword(&e) => errors.push(format!(
                    "`{k}` marked refused: {} is refused at {} ({e}), not at {pointers:?}",
                    p.schema,
                    e.pointer()
                )),
                Err(_) => {}
            }
        }
    }
}

#[test]
fn the_readme_keyword_table_agrees_with_the_compiler() {
    let rows = table();
    let mut by_keyword: BTreeMap<&str, usize> = BTreeMap::new();
    let mut errors = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        for k in &row.keywords {
            if by_keyword.insert(k, i).is_some() {
                errors.push(format!("`{k}` has two rows"));
            }
        }
    }
    // (row, column) pairs some probe shows.
    let mut shown: BTreeSet<(usize, Kind)> = BTreeSet::new();
    for p in &probes() {
        let Some(&i) = by_keyword.get(p.keyword) else {
            errors.push(format!("`{}` has a probe but no row in the README's keyword table", p.keyword));
            continue;
        };
        shown.insert((i, p.kind));
        if rows[i].marks.contains_key(&p.kind) {
            judge(p, &rows[i], &mut errors);
        } else {
            errors
                .push(format!("`{}` behaves as {:?} on {}, but its row does not say so", p.keyword, p.kind, p.schema));
        }
    }
    for (i, row) in rows.iter().enumerate() {
        for kind in row.marks.keys() {
            if !shown.contains(&(i, *kind)) {
                errors.push(format!(
                    "{:?}: the row marks {kind:?}, but no probe shows it (add one to probes())",
                    row.keywords
                ));
            }
        }
    }
    let known = known_keywords();
    assert!(!known.is_empty(), "the compiler knows no keyword");
    for k in &known {
        let Some(&i) = by_keyword.get(k.name) else {
            errors
                .push(format!("`{}`: the compiler knows it, but the README's keyword table has no row for it", k.name));
            continue;
        };
        let marks = &rows[i].marks;
        if k.treatment == Treatment::GrammarOnly
            && (marks.contains_key(&Kind::Checked) || !marks.contains_key(&Kind::Refused))
        {
            errors.push(format!(
                "`{}`: no run-time check can enforce it (what the grammar cannot say is refused), but its row marks {:?}",
                k.name,
                marks.keys().collect::<Vec<_>>()
            ));
        }
    }
    assert!(errors.is_empty(), "the README's keyword table disagrees with the compiler:\n- {}", errors.join("\n- "));
}

//! The ECMA-262 reading of `pattern`, as the run-time checks' validators see it.

use crate::grammar::regex::ecma_portable;

#[test]
fn portable_patterns_read_as_ecma_in_the_checks_validators() {
    assert_eq!(ecma_portable("^[a-z]+$").unwrap(), None);
    assert_eq!(ecma_portable(r"^\d[\w-]$").unwrap().as_deref(), Some(r"^[0-9][0-9A-Za-z_-]$"));
    assert_eq!(ecma_portable(r"[\D]").unwrap().as_deref(), Some(r"(?:[^0-9])"));
    assert_eq!(ecma_portable(r"[^\D]").unwrap().as_deref(), Some(r"(?:[0-9])"));
    assert_eq!(ecma_portable(r"[a\W]+").unwrap().as_deref(), Some(r"(?:[a]|[^0-9A-Za-z_])+"));
    assert_eq!(ecma_portable(r"[^\W_]").unwrap().as_deref(), Some(r"(?:(?![_])[0-9A-Za-z_])"));
    assert!(ecma_portable(r"[^]\d").is_err());
    // What a validator built by the compiler says, against ECMA-262.
    let cases: &[(&str, &[&str], &[&str])] = &[
        (r"^(?=.)\d$", &["3"], &["٣"]),
        (r"^(?=.)\w$", &["a", "_"], &["é"]),
        (r"^(?=.)\s$", &[" ", "\u{FEFF}", "\u{3000}"], &["\u{85}", "\u{2028}"]),
        (r"^(?=.)\S$", &["a", "\u{85}"], &["\u{FEFF}"]),
        (r"^(?=a)a.b$", &["axb", "a\u{85}b"], &["a\rb", "a\nb", "a\u{2028}b"]),
        (r"^(\d)\1$", &["33"], &["٣٣", "34"]),
        (r"^(?=x)x\b", &["x", "x-", "xé"], &["xa", "x1"]),
        (r"^(?!a)[\b]$", &["\u{8}"], &["b"]),
        (r"^a.b$", &["axb"], &["a\rb"]),
        (r"^[a-zA-Z0-9\W]*$", &["a-b", "é9"], &[]),
        (r"^[^\W_]+$", &["ab9"], &["a_b", "é"]),
        (r"^[\d\S]$", &["1", "x"], &[" "]),
    ];
    for (pattern, good, bad) in cases {
        let schema = serde_json::json!({"type": "string", "pattern": pattern});
        let v = crate::schema::subschema_validator(&serde_json::Value::Null, schema.as_object().unwrap().clone())
            .unwrap_or_else(|e| panic!("{pattern}: {e}"));
        for g in *good {
            assert!(v.is_valid(&serde_json::json!(g)), "{pattern} refuses {g:?}");
        }
        for b in *bad {
            assert!(!v.is_valid(&serde_json::json!(b)), "{pattern} takes {b:?}");
        }
    }
}

//! ECMA-262 patterns as the run-time checks' validators need them: the `jsonschema` crate's
//! engines read some ECMA-isms their own way, so a pattern is rewritten into a spelling that
//! every one of them reads as ECMA-262 does ([`ecma_portable`]).
//!
//! The translation of a pattern for the grammar is [`super::to_rust`]'s; this one keeps
//! ECMA-262 syntax, for the validators.

use super::{DIGIT as ECMA_DIGIT, SPACE as ECMA_SPACE, WORD as ECMA_WORD};

/// ECMA-262's `\b` (between a word character, ASCII, and anything else), in lookaround.
const ASCII_BOUNDARY: &str = r"(?:(?<=[0-9A-Za-z_])(?![0-9A-Za-z_])|(?<![0-9A-Za-z_])(?=[0-9A-Za-z_]))";
/// ECMA-262's `\B`, in lookaround.
const ASCII_NON_BOUNDARY: &str = r"(?:(?<=[0-9A-Za-z_])(?=[0-9A-Za-z_])|(?<![0-9A-Za-z_])(?![0-9A-Za-z_]))";

/// Rewrites an ECMA-262 pattern so that the engines behind the `jsonschema` crate read it
/// as ECMA-262 does, or `None` when it needs no change. The run-time checks hand patterns to
/// that crate, which translates ECMA-isms only in patterns `regex-syntax` parses: one with
/// lookaround or a backreference goes to `fancy-regex` as written, where `\d`, `\w`, `\s` and
/// `\b` are Unicode-aware; and `.` is never rewritten, so it takes `\r`, U+2028 and U+2029.
/// Either way a check could pass a value the schema refuses (`^(?=.)\d$` and `"٣"`).
///
/// This writes the class escapes out as ASCII ranges (whitespace as ECMA-262's list), `.` as
/// "not a line terminator", and `\b`/`\B` as lookaround over ASCII word characters, in a
/// syntax every one of those readers takes the same way (the crate also checks that a pattern
/// is valid ECMA-262); the rest is copied. A negated class escape inside a class (`[\Da-f]`)
/// would need class set operations, so that class becomes an alternation or lookaround
/// ([`write_class`]). ECMA-262's empty classes `[]` and `[^]` are an error.
pub(crate) fn ecma_portable(pattern: &str) -> Result<Option<String>, String> {
    if !pattern.contains(['\\', '.']) {
        return Ok(None);
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut changed = false;
    // The open class, if any: whether negated, its items so far (rewritten), and the bodies
    // of the negated class escapes among them (`\D` in `[\Da-f]`), set apart.
    let mut class: Option<(bool, String, Vec<&str>)> = None;
    // Where copied text goes: the open class's items, or the output.
    let copy = |out: &mut String, class: &mut Option<(bool, String, Vec<&str>)>, t: &[char]| match class {
        Some((_, items, _)) => items.extend(t),
        None => out.extend(t),
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '\\' => {
                let Some(&e) = chars.get(i) else {
                    copy(&mut out, &mut class, &[c]);
                    continue;
                };
                i += 1;
                let body = match e.to_ascii_lowercase() {
                    'd' => Some(ECMA_DIGIT),
                    'w' => Some(ECMA_WORD),
                    's' => Some(ECMA_SPACE),
                    _ => None,
                };
                let negated = e.is_ascii_uppercase();
                match (body, &mut class) {
                    (Some(b), None) => {
                        out.push_str(if negated { "[^" } else { "[" });
                        out.push_str(b);
                        out.push(']');
                    }
                    (Some(b), Some((_, items, _))) if !negated => items.push_str(b),
                    (Some(b), Some((_, _, apart))) => apart.push(b),
                    // Word boundaries spelled with lookaround over ASCII word characters.
                    (None, None) if e == 'b' || e == 'B' => {
                        out.push_str(if e == 'b' { ASCII_BOUNDARY } else { ASCII_NON_BOUNDARY });
                    }
                    // A backspace inside a class.
                    (None, Some((_, items, _))) if e == 'b' => items.push_str(r"\x08"),
                    (None, _) => {
                        copy(&mut out, &mut class, &['\\', e]);
                        continue;
                    }
                }
                changed = true;
            }
            '[' if class.is_none() => {
                let negated = chars.get(i) == Some(&'^');
                if negated {
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    // ECMA-262's `[]` and `[^]`, which Rust reads as a literal `]`.
                    return Err(format!("pattern {pattern:?} has an empty character class"));
                }
                class = Some((negated, String::new(), Vec::new()));
            }
            ']' if class.is_some() => {
                let Some((negated, items, apart)) = class.take() else { continue };
                write_class(&mut out, negated, &items, &apart);
            }
            '.' if class.is_none() => {
                out.push_str(r"[^\n\r\u2028\u2029]");
                changed = true;
            }
            _ => copy(&mut out, &mut class, &[c]),
        }
    }
    if let Some((negated, items, _)) = class {
        // Unterminated: left for the validator to refuse.
        out.push_str(if negated { "[^" } else { "[" });
        out.push_str(&items);
    }
    Ok(changed.then_some(out))
}

/// Writes a class of `items` (rewritten) and the negated class escapes with bodies `apart`:
/// as is when there are none; else a positive class is the alternation of `[items]` and
/// each `[^body]`, and a negated one is one character in every body but not in `items`
/// (`[^\W_]` is `(?:(?![_])[0-9A-Za-z_])`).
fn write_class(out: &mut String, negated: bool, items: &str, apart: &[&str]) {
    let Some((last, rest)) = apart.split_last() else {
        out.push_str(if negated { "[^" } else { "[" });
        out.push_str(items);
        out.push(']');
        return;
    };
    out.push_str("(?:");
    if negated {
        if !items.is_empty() {
            out.push_str(&format!("(?![{items}])"));
        }
        for b in rest {
            out.push_str(&format!("(?=[{b}])"));
        }
        out.push_str(&format!("[{last}]"));
    } else {
        let mut parts: Vec<String> = Vec::with_capacity(apart.len() + 1);
        if !items.is_empty() {
            parts.push(format!("[{items}]"));
        }
        parts.extend(apart.iter().map(|b| format!("[^{b}]")));
        out.push_str(&parts.join("|"));
    }
    out.push(')');
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! `--format`: how a generated JSON document is printed.
//!
//! Input: the generated text, already valid JSON. Output: the same text re-spaced. Strings and
//! numbers are copied byte for byte (no parse and print round trip: `1.0`, `1e400` and
//! 20-digit integers keep their spelling), so the printed value is exactly the generated one.

/// How the document is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Indented with 2 spaces, one member or item per line (the default on a terminal).
    Pretty,
    /// No whitespace at all (the default when stdout is not a terminal).
    Compact,
    /// The bytes as generated (what `--stream` shows).
    Raw,
}

/// `json` re-spaced as `format` says (see the module doc). `json` must be JSON text (the
/// caller checks it parses); anything else is returned as is.
pub fn reformat(json: &str, format: OutputFormat) -> String {
    let pretty = match format {
        OutputFormat::Raw => return json.to_string(),
        OutputFormat::Pretty => true,
        OutputFormat::Compact => false,
    };
    let bytes = json.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 2);
    let mut depth = 0usize;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        if pretty {
            out.push(b'\n');
            out.extend(std::iter::repeat_n(b' ', 2 * depth));
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            b'"' => {
                // Copy the string through its closing quote, escapes included.
                let start = i - 1;
                let mut escaped = false;
                while i < bytes.len() {
                    let c = bytes[i];
                    i += 1;
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, b'\\') => escaped = true,
                        (false, b'"') => break,
                        _ => {}
                    }
                }
                out.extend_from_slice(&bytes[start..i]);
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                let next = bytes[i..].iter().position(|c| !c.is_ascii_whitespace()).map(|k| i + k);
                out.push(b);
                if let Some(k) = next.filter(|&k| bytes[k] == close) {
                    out.push(close);
                    i = k + 1;
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b);
                newline(&mut out, depth);
            }
            b':' => {
                out.push(b);
                if pretty {
                    out.push(b' ');
                }
            }
            _ => out.push(b),
        }
    }
    // Only ASCII bytes were added or dropped outside strings: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str =
        "{ \"a\" :1.0,\"b\":[ ],\"c\":{\"d\":[1e400, 12345678901234567890123 ,\"x, y: {\\\"z\\\"}\"]},\"e\":{}\n}";

    #[test]
    fn compact_and_pretty_keep_every_value_spelled_as_generated() {
        let compact = reformat(DOC, OutputFormat::Compact);
        assert_eq!(compact, r#"{"a":1.0,"b":[],"c":{"d":[1e400,12345678901234567890123,"x, y: {\"z\"}"]},"e":{}}"#);
        let pretty = reformat(DOC, OutputFormat::Pretty);
        let want = "{\n  \"a\": 1.0,\n  \"b\": [],\n  \"c\": {\n    \"d\": [\n      1e400,\n      12345678901234567890123,\n      \"x, y: {\\\"z\\\"}\"\n    ]\n  },\n  \"e\": {}\n}";
        assert_eq!(pretty, want);
        assert_eq!(reformat(&pretty, OutputFormat::Compact), compact, "formats are interchangeable");
        assert_eq!(reformat(DOC, OutputFormat::Raw), DOC);
    }

    #[test]
    fn scalars_and_unicode_pass_through() {
        assert_eq!(reformat(" \"é\\u00e9\" ", OutputFormat::Pretty), "\"é\\u00e9\"");
        assert_eq!(reformat("[true,null]", OutputFormat::Pretty), "[\n  true,\n  null\n]");
    }
}

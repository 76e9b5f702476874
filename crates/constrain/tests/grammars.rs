//! The grammars in `grammars/`: every `.gbnf` file there is compiled and checked against
//! accepted and near-miss rejected samples, printed back with `to_gbnf` and re-read, and
//! random-walked at byte level; walk outputs are checked by the automaton and, where a
//! grammar has one, by an independent checker (serde_json, an arithmetic evaluator, a SAN
//! token check, …). A new file in `grammars/` is picked up automatically and fails until it
//! gets a [`samples`] entry.

use constrain::automaton::Pda;
use constrain::grammar::gbnf;
use constrain::Limits;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

/// Strings a grammar must accept and near misses it must reject.
struct Samples {
    accept: &'static [&'static str],
    reject: &'static [&'static str],
}

/// The samples for each grammar file, by file name.
fn samples(file: &str) -> Option<Samples> {
    Some(match file {
        "json.gbnf" => Samples {
            accept: &[
                "null",
                "true",
                "0",
                "-12.5e+3",
                "\"\"",
                "\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00 é\"",
                "[]",
                "{}",
                "[1, [2, [3]], {\"a\": null}]",
                "{\"key\": \"value\",\n  \"n\": [1.0, -0, 2E-7],\n  \"o\": {}}",
                " {\"a\":1} ",
                "\n\t[true,false]",
            ],
            reject: &[
                "",
                "nul",
                "01",
                "1.",
                "-",
                "+1",
                ".5",
                "[1,]",
                "{\"a\"}",
                "{a: 1}",
                "\"tab\there\"",
                "\"\\x41\"",
                "\"\\ud800\"",
                "\"\\udc00\\ud800\"",
                "[1  ,2]",
                "{\"a\": 1}}",
                "'single'",
                "[1]\n\n",
            ],
        },
        "json_arr.gbnf" => Samples {
            accept: &["[]", "[1]", "[ {\"a\": [true, null]}, \"x\", -0.5 ]", "[[], {}]", "[\n  1,\n  2\n]"],
            reject: &["", "{}", "1", "\"x\"", "[1,]", "[1 2]", "[", "[1]]"],
        },
        "list.gbnf" => Samples {
            accept: &["- a\n", "- first item\n- second, with ünïcode\n", TEN_ITEMS],
            reject: &["", "- \n", "-a\n", "- a", "* a\n", "- a\nb\n", ELEVEN_ITEMS, "- tab\there\n"],
        },
        "arithmetic.gbnf" => Samples {
            accept: &["1", "1+2*3", "-(4.5 / 3) - 2", "((1))", "2 * -3", "10 / (2 + 3) * 7", "0.25-1"],
            reject: &["", "1+", "+1", "(1", "1)", "1  + 2", "1.", ".5", "1 2", "--1", "( 1 + 2 ))", "a+1"],
        },
        "chess.gbnf" => Samples {
            accept: &[
                "1. e4",
                "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6",
                "1. d4 d5 2. c4 dxc4 3. Nf3 Nf6 4. e3 Bg4 5. Bxc4 e6 6. O-O Nbd7 1/2-1/2",
                "12. exd8=Q+ Kxd8 13. R1e1#",
                "1. e4 *",
                "40. O-O-O Qh4+ 41. Nxh4 0-1",
            ],
            reject: &["", "1.e4", "1. e9", "1. Ni3", "1. e4 e5 2 Nf3", "1. e8", "1. O-O-O-O", "1. Px4", "1. e4  e5", "1. e4 2. d4"],
        },
        "c.gbnf" => Samples {
            accept: &[
                "int main() { return 0; }",
                "#include <stdio.h>\nint main(void) {\n  int x = 1;\n  printf(\"%d\\n\", x + 2);\n  return 0;\n}\n",
                "long fib(int n) { if (n < 2) return n; else return fib(n - 1) + fib(n - 2); }",
                "int g = 3;\nvoid f(char *s, int n) { for (int i = 0; i < n; i = i + 1) { s[i] = 'a'; *s = s[i + 1]; } }",
                "double avg(double *v, int n) { double s = 0; int i = 0; while (i < n) { s = s + *v; i = i + 1; } return s / n; }",
                "char c = 'x'; int t(void) { if (!c && 1) { break; } else { continue; } }",
            ],
            reject: &[
                "",
                "int main() { return 0 }",
                "int main() { return 0; ",
                "main() { }",
                "int main() { int x = ; }",
                "int main() { x = ; }",
                "intmain() { }",
                "int main() { if x { } }",
                "int main() { return 0;; }",
                "int f() { s = \"unterminated; }",
            ],
        },
        "english.gbnf" => Samples {
            accept: &[
                "Alice sleeps.",
                "The quick fox chases a lazy dog near the river.",
                "Every small red cat likes Bob! A child reads this old book in the garden.",
                "Bob runs. Alice runs. Paris sleeps. The dog sees the cat. This fox finds a book!",
            ],
            reject: &[
                "",
                "alice sleeps.",
                "Alice sleeps",
                "Alice sleep.",
                "The cat.",
                "The  cat sleeps.",
                "The small red quick cat sleeps.",
                "Bob runs. Alice runs. Paris sleeps. The dog sees the cat. This fox finds a book! Bob runs.",
                "Alice sleeps.Bob runs.",
            ],
        },
        _ => return None,
    })
}

const TEN_ITEMS: &str = "- a\n- b\n- c\n- d\n- e\n- f\n- g\n- h\n- i\n- j\n";
const ELEVEN_ITEMS: &str = "- a\n- b\n- c\n- d\n- e\n- f\n- g\n- h\n- i\n- j\n- k\n";

/// Every `.gbnf` file in `grammars/`, sorted by name: (file name, text).
fn grammar_files() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../grammars");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "gbnf"))
        .map(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).expect("UTF-8 file name").to_string();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, text)
        })
        .collect();
    files.sort();
    assert!(files.len() >= 7, "expected the grammar files in {}", dir.display());
    files
}

fn compile(name: &str, text: &str) -> Pda {
    let g = gbnf::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    Pda::build(&g, &Limits::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_grammar_compiles_and_matches_its_samples() {
    let mut failures = Vec::new();
    for (name, text) in grammar_files() {
        if !text.starts_with('#') {
            failures.push(format!("{name}: must start with a comment saying what it accepts"));
        }
        let Some(s) = samples(&name) else {
            failures.push(format!("{name}: no samples entry in tests/grammars.rs"));
            continue;
        };
        let pda = compile(&name, &text);
        for ok in s.accept {
            if !pda.matches(ok.as_bytes()) {
                failures.push(format!("{name}: should accept {ok:?}"));
            }
        }
        for bad in s.reject {
            if pda.matches(bad.as_bytes()) {
                failures.push(format!("{name}: should reject {bad:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn printed_grammars_read_back_equivalently() {
    for (name, text) in grammar_files() {
        let g = gbnf::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = gbnf::to_gbnf(&g);
        let again = compile(&format!("{name} (printed)"), &printed);
        let original = compile(&name, &text);
        let Some(s) = samples(&name) else { continue };
        for sample in s.accept.iter().chain(s.reject) {
            assert_eq!(
                original.matches(sample.as_bytes()),
                again.matches(sample.as_bytes()),
                "{name}: {sample:?}\n{printed}"
            );
        }
        // Printing is stable: the printed grammar prints the same again.
        let reparsed = gbnf::parse(&printed).unwrap_or_else(|e| panic!("{name}: {e}\n{printed}"));
        assert_eq!(gbnf::to_gbnf(&reparsed), printed, "{name}");
    }
}

// ---- random walks ----

/// Bytes that keep `prefix` a live prefix of the language.
fn live_bytes(pda: &Pda, prefix: &mut Vec<u8>) -> Vec<u8> {
    (0..=255u8)
        .filter(|&b| {
            prefix.push(b);
            let live = pda.matches_prefix(prefix);
            prefix.pop();
            live
        })
        .collect()
}

/// One generated output; `complete` when the whole output is in the language.
struct Walk {
    text: Vec<u8>,
    complete: bool,
}

/// A byte-level random walk: pick uniformly among the bytes that keep a live prefix; once the
/// output is in the language stop with probability `STOP_CHANCE`. After `max_len` bytes try to
/// finish within `finish_len` more: take a byte that completes the output if there is one,
/// else prefer punctuation and digits (which close strings, groups and words).
fn random_walk(pda: &Pda, rng: &mut StdRng, max_len: usize, finish_len: usize) -> Walk {
    const STOP_CHANCE: f64 = 0.05;
    let mut text = Vec::new();
    while text.len() < max_len {
        if pda.matches(&text) && rng.random_bool(STOP_CHANCE) {
            return Walk { text, complete: true };
        }
        let live = live_bytes(pda, &mut text);
        if live.is_empty() {
            break;
        }
        text.push(live[rng.random_range(0..live.len())]);
    }
    for _ in 0..finish_len {
        if pda.matches(&text) {
            break;
        }
        let live = live_bytes(pda, &mut text);
        let completing = live.iter().copied().find(|&b| {
            text.push(b);
            let done = pda.matches(&text);
            text.pop();
            done
        });
        if let Some(b) = completing {
            text.push(b);
            break;
        }
        let preferred: Vec<u8> =
            live.iter().copied().filter(|b| b.is_ascii_punctuation() || b.is_ascii_digit()).collect();
        let pool = if preferred.is_empty() { &live } else { &preferred };
        if pool.is_empty() {
            break;
        }
        text.push(pool[rng.random_range(0..pool.len())]);
    }
    let complete = pda.matches(&text);
    Walk { text, complete }
}

#[test]
fn random_walks_stay_in_the_language() {
    // One thread per grammar; a failed check panics its thread, and `join` re-raises it.
    let files = grammar_files();
    let report: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, (name, text))| scope.spawn(move || walk_grammar(0x5eed + i as u64, name, text)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    eprintln!("{}", report.join("\n"));
}

/// Random walks under one grammar, each checked by the grammar, by the grammar printed with
/// `to_gbnf` and read back, and by the independent checkers. Returns a one-line summary.
fn walk_grammar(seed: u64, name: &str, text: &str) -> String {
    const WALKS: usize = 16;
    let pda = compile(name, text);
    let printed = gbnf::to_gbnf(&gbnf::parse(text).unwrap_or_else(|e| panic!("{name}: {e}")));
    let reprinted = compile(&format!("{name} (printed)"), &printed);
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut complete, mut total_len) = (0, 0);
    for _ in 0..WALKS {
        let walk = random_walk(&pda, &mut rng, 60, 80);
        let shown = String::from_utf8_lossy(&walk.text).into_owned();
        assert!(pda.matches_prefix(&walk.text), "{name}: walk left the language: {shown:?}");
        assert_eq!(reprinted.matches(&walk.text), walk.complete, "{name}: printed grammar disagrees on {shown:?}");
        if walk.complete {
            complete += 1;
            total_len += walk.text.len();
            let s = std::str::from_utf8(&walk.text).unwrap_or_else(|e| panic!("{name}: {shown:?} is not UTF-8: {e}"));
            if let Err(why) = independent_check(name, s) {
                panic!("{name}: independent check failed on {s:?}: {why}");
            }
        } else if let Err(why) = independent_prefix_check(name, &walk.text) {
            panic!("{name}: independent prefix check failed on {shown:?}: {why}");
        }
    }
    assert!(complete > WALKS / 2, "{name}: only {complete} of {WALKS} random walks finished");
    format!("{name}: {complete}/{WALKS} walks complete, mean length {}", total_len / complete.max(1))
}

/// Checks a complete output with something that does not use the grammar.
fn independent_check(name: &str, s: &str) -> Result<(), String> {
    match name {
        "json.gbnf" | "json_arr.gbnf" => {
            serde_json::from_str::<serde::de::IgnoredAny>(s).map_err(|e| e.to_string())?;
            match serde_json::from_str::<serde_json::Value>(s) {
                Ok(v) if name == "json_arr.gbnf" && !v.is_array() => Err("not an array".into()),
                Ok(_) => Ok(()),
                // Syntax is fine (checked above); only f64 range can fail here.
                Err(e) if e.to_string().contains("out of range") => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        "arithmetic.gbnf" => arithmetic::evaluate(s).map(|_| ()).ok_or_else(|| "does not parse as arithmetic".into()),
        "chess.gbnf" => check_san_movetext(s),
        "list.gbnf" => check_list(s),
        "english.gbnf" => check_english(s),
        _ => Ok(()),
    }
}

/// Checks an unfinished output where a checker can tell a truncated document from a wrong one.
fn independent_prefix_check(name: &str, bytes: &[u8]) -> Result<(), String> {
    match name {
        "json.gbnf" | "json_arr.gbnf" => match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Err(e) if e.is_eof() => Ok(()),
            Err(e) => Err(format!("not a truncated JSON document: {e}")),
            Ok(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// A tiny recursive-descent evaluator for the language of `arithmetic.gbnf`, written from the
/// grammar's comment, not from the grammar.
mod arithmetic {
    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    /// The value of `s`, or `None` if `s` is not an arithmetic expression.
    pub fn evaluate(s: &str) -> Option<f64> {
        let mut p = Parser { s: s.as_bytes(), i: 0 };
        let v = p.expr(0)?;
        (p.i == p.s.len()).then_some(v)
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }

        fn space(&mut self) {
            if self.peek() == Some(b' ') {
                self.i += 1;
            }
        }

        /// `term (op term)*` where `op` is one of `ops`, optionally with a space either side.
        fn binary(&mut self, ops: &[u8], depth: usize, operand: fn(&mut Self, usize) -> Option<f64>) -> Option<f64> {
            let mut value = operand(self, depth)?;
            loop {
                let save = self.i;
                self.space();
                match self.peek() {
                    Some(op) if ops.contains(&op) => {
                        self.i += 1;
                        self.space();
                        let rhs = operand(self, depth)?;
                        value = match op {
                            b'+' => value + rhs,
                            b'-' => value - rhs,
                            b'*' => value * rhs,
                            _ => value / rhs,
                        };
                    }
                    _ => {
                        self.i = save;
                        return Some(value);
                    }
                }
            }
        }

        fn expr(&mut self, depth: usize) -> Option<f64> {
            self.binary(b"+-", depth, Self::term)
        }

        fn term(&mut self, depth: usize) -> Option<f64> {
            self.binary(b"*/", depth, Self::factor)
        }

        fn factor(&mut self, depth: usize) -> Option<f64> {
            if depth > 200 {
                return None;
            }
            let negative = self.peek() == Some(b'-');
            if negative {
                self.i += 1;
            }
            let value = if self.peek() == Some(b'(') {
                self.i += 1;
                self.space();
                let v = self.expr(depth + 1)?;
                self.space();
                (self.peek() == Some(b')')).then_some(())?;
                self.i += 1;
                v
            } else {
                self.number()?
            };
            Some(if negative { -value } else { value })
        }

        fn digits(&mut self) -> usize {
            let start = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1;
            }
            self.i - start
        }

        fn number(&mut self) -> Option<f64> {
            let start = self.i;
            if !(1..=15).contains(&self.digits()) {
                return None;
            }
            if self.peek() == Some(b'.') {
                self.i += 1;
                if !(1..=15).contains(&self.digits()) {
                    return None;
                }
            }
            std::str::from_utf8(self.s.get(start..self.i)?).ok()?.parse().ok()
        }
    }

    #[test]
    fn evaluator_works() {
        assert_eq!(evaluate("1+2*3"), Some(7.0));
        assert_eq!(evaluate("-(4.5 / 3) - 2"), Some(-3.5));
        assert_eq!(evaluate("2 * -3"), Some(-6.0));
        assert_eq!(evaluate("1+"), None);
        assert_eq!(evaluate("(1"), None);
        assert_eq!(evaluate("1 "), None);
    }
}

/// Checks PGN movetext token by token with a SAN regular expression.
fn check_san_movetext(s: &str) -> Result<(), String> {
    use regex_automata::meta::Regex;
    let number = Regex::new(r"^[1-9][0-9]{0,2}\.$").map_err(|e| e.to_string())?;
    let san = Regex::new(r"^(?:[KQRBN][a-h]?[1-8]?x?[a-h][1-8]|(?:[a-h]x)?[a-h](?:[2-7]|[18]=[QRBN])|O-O|O-O-O)[+#]?$")
        .map_err(|e| e.to_string())?;
    let is_result = |t: &str| matches!(t, "1-0" | "0-1" | "1/2-1/2" | "*");
    let tokens: Vec<&str> = s.split(' ').collect();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        if is_result(t) && i > 0 && i + 1 == tokens.len() {
            return Ok(());
        }
        if !number.is_match(t) {
            return Err(format!("`{t}` is not a move number"));
        }
        let moves = tokens.iter().skip(i + 1).take(2).take_while(|t| san.is_match(t)).count();
        if moves == 0 {
            return Err(format!("no move after `{t}`"));
        }
        i += 1 + moves;
        if moves == 1 && i < tokens.len() && !(is_result(tokens[i]) && i + 1 == tokens.len()) {
            return Err(format!("a one-move turn must be the last, before `{}`", tokens[i]));
        }
    }
    Ok(())
}

/// Checks the list format described in `list.gbnf`'s comment.
fn check_list(s: &str) -> Result<(), String> {
    let body = s.strip_suffix('\n').ok_or("no final newline")?;
    let lines: Vec<&str> = body.split('\n').collect();
    if !(1..=10).contains(&lines.len()) {
        return Err(format!("{} items", lines.len()));
    }
    for line in lines {
        let text = line.strip_prefix("- ").ok_or_else(|| format!("line {line:?} has no bullet"))?;
        let n = text.chars().count();
        if !(1..=80).contains(&n) || text.chars().any(char::is_control) {
            return Err(format!("bad item text {text:?}"));
        }
    }
    Ok(())
}

/// Checks sentences against the vocabulary in `english.gbnf`'s comment and a capital letter
/// at the start of each sentence.
fn check_english(s: &str) -> Result<(), String> {
    const WORDS: &str = "the a this every small red quick lazy old bright cat dog fox child river book garden \
                         alice bob paris sees likes chases reads sleeps finds runs in near under with";
    let mut sentence_start = true;
    let mut sentences = 0;
    for word in s.split(' ') {
        let (bare, ends) = match word.strip_suffix(['.', '!']) {
            Some(w) => (w, true),
            None => (word, false),
        };
        let upper = bare.starts_with(|c: char| c.is_ascii_uppercase());
        let is_name = matches!(bare, "Alice" | "Bob" | "Paris");
        if (sentence_start && !upper) || (!sentence_start && upper && !is_name) {
            return Err(format!("capitalisation of {word:?}"));
        }
        if !WORDS.split_whitespace().any(|w| w == bare.to_ascii_lowercase()) {
            return Err(format!("unknown word {word:?}"));
        }
        if ends {
            sentences += 1;
        }
        sentence_start = ends;
    }
    if !sentence_start || !(1..=5).contains(&sentences) {
        return Err(format!("{sentences} sentences / unfinished"));
    }
    Ok(())
}

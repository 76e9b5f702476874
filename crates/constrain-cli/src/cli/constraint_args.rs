//! Choosing the constraint on the command line.
//!
//! Input: the flags `--schema FILE`, `--json-schema JSON`, `--grammar-file FILE`,
//! `--grammar GBNF`, `--regex PATTERN` (at most one) plus `--whitespace` and `--strict`.
//! Output: the [`Grammar`] they select (or `None`: unconstrained), and for JSON Schema the
//! schema itself, so the model can be told about it.
use anyhow::Context;
use constrain::grammar::Grammar;
use constrain::schema::Compiled;
use std::path::PathBuf;

/// The constraint flags shared by every command: exactly one of them, or none
/// (unconstrained).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConstraintArgs {
    /// JSON Schema file.
    #[arg(long, value_name = "FILE", group = "constraint")]
    pub schema: Option<PathBuf>,
    /// JSON Schema given inline (llama.cpp's flag name).
    #[arg(long = "json-schema", value_name = "JSON", group = "constraint")]
    pub json_schema: Option<String>,
    /// GBNF grammar file.
    #[arg(long = "grammar-file", value_name = "FILE", group = "constraint")]
    pub grammar_file: Option<PathBuf>,
    /// GBNF grammar given inline.
    #[arg(long, value_name = "GBNF", group = "constraint")]
    pub grammar: Option<String>,
    /// The whole output must match this regular expression.
    #[arg(long, value_name = "PATTERN", group = "constraint")]
    pub regex: Option<String>,
    /// Whitespace policy for JSON Schema output [default: compact for generation (the
    /// separators are fixed, so they cost no sampling); pretty for `check`].
    #[arg(long, value_enum)]
    pub whitespace: Option<WhitespaceArg>,
    /// The policy when `--whitespace` is not given: each command sets its own.
    #[arg(skip)]
    pub default_whitespace: WhitespaceArg,
    /// Forbid object properties the schema does not name.
    #[arg(long)]
    pub strict: bool,
    /// JSON Schema dialect (4, 6, 7, 2019-09, 2020-12), instead of the schema's `$schema`.
    #[arg(long)]
    pub draft: Option<constrain::schema::dialect::Draft>,
    /// Refuse the JSON Schema keywords a grammar cannot express (`uniqueItems`, `if`,
    /// overlapping `oneOf`, …) instead of checking them at run time.
    #[arg(long)]
    pub no_runtime_checks: bool,
    /// List every documented subset and run-time check the schema compiled with (by
    /// default one line counts them; warnings are always shown).
    #[arg(long)]
    pub notes: bool,
    /// Budgets for compiling and matching (see [`constrain::Limits`]).
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Command-line overrides of [`constrain::Limits`]; each flag left out keeps the default.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LimitArgs {
    /// Largest schema, grammar, prompt or instance file read, in bytes [default: 16 MiB].
    #[arg(long = "max-input-bytes", value_name = "BYTES")]
    pub max_input_bytes: Option<usize>,
    /// Work allowed to compile one constraint (expansion and determinisation steps)
    /// [default: 50 million].
    #[arg(long = "max-fuel", value_name = "STEPS")]
    pub max_fuel: Option<u64>,
    /// Most automaton states one constraint may compile to [default: 250 000].
    #[arg(long = "max-states", value_name = "N")]
    pub max_states: Option<usize>,
    /// Most simultaneous parse stacks while matching (`Limits::max_parse_stacks`) [default: 256].
    #[arg(long, value_name = "N")]
    pub max_parse_stacks: Option<usize>,
    /// Deepest parse stack while matching (`Limits::max_stack_depth`) [default: 2000].
    #[arg(long, value_name = "N")]
    pub max_stack_depth: Option<usize>,
    /// Work one mask computation (or one accepted byte) may spend (`Limits::mask_fuel`)
    /// [default: 10000000].
    #[arg(long, value_name = "N")]
    pub max_mask_fuel: Option<u64>,
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// The engine's memory budget on the command line.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MemoryArgs {
    /// Memory for everything kept for reuse across schemas: masks, determinised rules and
    /// compiled constraints, in MiB (`mask::IndexConfig`) [default: 256].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub memory_budget: Option<u64>,
}

impl MemoryArgs {
    /// The token index's cache bounds for the budget (the default one without the flag).
    pub fn index_config(&self) -> constrain::mask::IndexConfig {
        match self.memory_budget {
            Some(mib) => constrain::mask::IndexConfig::with_memory_budget((mib as usize) << 20),
            None => constrain::mask::IndexConfig::default(),
        }
    }
}

/// The flag that raises a parse limit, for messages about a
/// [`constrain::automaton::LimitHit`] (`None`: the limit is fixed).
pub fn limit_flag(limit: constrain::automaton::ParseLimit) -> Option<&'static str> {
    use constrain::automaton::ParseLimit;
    match limit {
        ParseLimit::Stacks => Some("--max-parse-stacks"),
        ParseLimit::Depth => Some("--max-stack-depth"),
        ParseLimit::Fuel => Some("--max-mask-fuel"),
        _ => None,
    }
}

impl LimitArgs {
    /// The default limits with these flags applied.
    pub fn limits(&self) -> constrain::Limits {
        let mut l = constrain::Limits::default();
        if let Some(n) = self.max_input_bytes {
            l = l.with_max_input_bytes(n);
        }
        if let Some(n) = self.max_fuel {
            l = l.with_compile_fuel(n);
        }
        if let Some(n) = self.max_states {
            l = l.with_max_automaton_states(n);
        }
        if let Some(n) = self.max_parse_stacks {
            l = l.with_max_parse_stacks(n);
        }
        if let Some(n) = self.max_stack_depth {
            l = l.with_max_stack_depth(n);
        }
        if let Some(n) = self.max_mask_fuel {
            l = l.with_mask_fuel(n);
        }
        l
    }
}

/// Says why `what` could not be read as JSON: nesting past the reader's depth limit is not
/// a syntax error, and is named as such.
fn json_error(e: serde_json::Error, what: &str) -> anyhow::Error {
    if e.to_string().starts_with("recursion limit exceeded") {
        anyhow::anyhow!(
            "{what} nests arrays and objects more than 128 levels deep (the JSON reader's limit), at line {} column {}",
            e.line(),
            e.column()
        )
    } else {
        anyhow::Error::new(e).context(format!("{what} is not valid JSON"))
    }
}

impl ConstraintArgs {
    /// The budgets these flags select.
    pub fn limits(&self) -> constrain::Limits {
        self.limits.limits()
    }

    /// The schema compiler's options these flags select.
    pub fn schema_options(&self) -> constrain::schema::Options {
        constrain::schema::Options::default()
            .with_whitespace(self.whitespace.unwrap_or(self.default_whitespace).into())
            .with_strict(self.strict)
            .with_draft(self.draft)
            .with_runtime_checks(!self.no_runtime_checks)
    }

    /// The JSON Schema given by `--schema` or `--json-schema`, if any.
    pub fn schema_value(&self) -> anyhow::Result<Option<serde_json::Value>> {
        if let Some(path) = &self.schema {
            let text = constrain::limits::read_capped(path, self.limits().max_input_bytes)
                .with_context(|| format!("cannot read schema file {}", path.display()))?;
            let value = serde_json::from_str(&text).map_err(|e| json_error(e, &path.display().to_string()))?;
            return Ok(Some(value));
        }
        if let Some(text) = &self.json_schema {
            let value = serde_json::from_str(text).map_err(|e| json_error(e, "--json-schema"))?;
            return Ok(Some(value));
        }
        Ok(None)
    }

    /// The grammar these flags select, with a schema's run-time checks; `None` means
    /// unconstrained.
    pub fn grammar(&self) -> anyhow::Result<Option<Compiled>> {
        let given = [
            self.schema.is_some(),
            self.json_schema.is_some(),
            self.grammar_file.is_some(),
            self.grammar.is_some(),
            self.regex.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            anyhow::bail!("give at most one of --schema, --json-schema, --grammar-file, --grammar, --regex");
        }
        let max = self.limits().max_input_bytes;
        for text in [&self.json_schema, &self.grammar, &self.regex].into_iter().flatten() {
            if text.len() > max {
                anyhow::bail!(
                    "the constraint is {} bytes, over the {max}-byte {}",
                    text.len(),
                    constrain::limits::LimitExceeded::InputBytes
                );
            }
        }
        if let Some(schema) = self.schema_value()? {
            let options = self.schema_options();
            let compiled = constrain::schema::compile(&schema, &options).map_err(|e| {
                let at = if e.pointer().is_empty() { "the schema root".to_string() } else { e.pointer().to_string() };
                anyhow::anyhow!("unsupported or invalid schema at {at}: {}", e.message())
            })?;
            let checked: Vec<String> = compiled
                .checks()
                .map(|c| c.relaxed().iter().map(|r| format!("{} at {}", r.keyword, r.pointer)).collect())
                .unwrap_or_default();
            for line in note_lines(compiled.notes(), &checked, self.notes) {
                eprintln!("{line}");
            }
            return Ok(Some(compiled));
        }
        let plain = if let Some(path) = &self.grammar_file {
            let text = constrain::limits::read_capped(path, self.limits().max_input_bytes)
                .with_context(|| format!("cannot read grammar file {}", path.display()))?;
            parse_gbnf(&text).with_context(|| format!("in grammar file {}", path.display()))?
        } else if let Some(text) = &self.grammar {
            parse_gbnf(text).context("in --grammar")?
        } else if let Some(pattern) = &self.regex {
            compile_regex(pattern).context("in --regex")?
        } else {
            return Ok(None);
        };
        Ok(Some(Compiled::from_grammar(plain)))
    }
}

/// What a compiled schema says on stderr: every warning (something to act on, such as an
/// unknown `$schema`); then, with `all` (`--notes`), each documented subset and the keywords
/// checked at run time, else one line counting them (none when there are none).
fn note_lines(notes: &[constrain::schema::Note], checked: &[String], all: bool) -> Vec<String> {
    let mut out: Vec<String> = notes.iter().filter(|n| n.is_warning()).map(|n| format!("warning: {n}")).collect();
    let subsets = notes.iter().filter(|n| !n.is_warning());
    if all {
        out.extend(subsets.map(|n| format!("note: {n}")));
        if !checked.is_empty() {
            out.push(format!("note: checked at run time, as each value completes: {}", checked.join(", ")));
        }
        return out;
    }
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = Vec::new();
    let n = subsets.count();
    if n > 0 {
        parts.push(plural(n, "keyword compiled as a documented subset", "keywords compiled as documented subsets"));
    }
    if !checked.is_empty() {
        parts.push(plural(checked.len(), "keyword checked at run time", "keywords checked at run time"));
    }
    if !parts.is_empty() {
        out.push(format!("note: {} (--notes to list them)", parts.join(", ")));
    }
    out
}

/// GBNF text → grammar (errors carry line and column).
fn parse_gbnf(text: &str) -> anyhow::Result<Grammar> {
    Ok(constrain::grammar::gbnf::parse(text)?)
}

/// Anchored regex → grammar: the whole output must match.
fn compile_regex(pattern: &str) -> anyhow::Result<Grammar> {
    Ok(constrain::grammar::regex::compile_anchored(pattern)?)
}

/// `--whitespace`: the command line's spelling of [`constrain::schema::Whitespace`] (the
/// engine does not depend on clap). Same variants, same names in `--help` and in reports.
/// The default is the engine's (`pretty`); generation asks for `compact`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum WhitespaceArg {
    /// No whitespace at all: `{"a":1}`.
    Compact,
    /// The usual pretty-printing whitespace (a space after `,`/`:`, newlines with
    /// indentation), but bounded so a model can never loop on whitespace. With `--format`
    /// other than raw, the printed document is formatted anyway: this lets the model choose
    /// (and see) the whitespace it writes.
    #[default]
    Pretty,
    /// Any JSON whitespace, unbounded (for validating arbitrary text, not for generation).
    Unbounded,
}

impl From<WhitespaceArg> for constrain::schema::Whitespace {
    fn from(w: WhitespaceArg) -> Self {
        match w {
            WhitespaceArg::Compact => Self::Compact,
            WhitespaceArg::Pretty => Self::Pretty,
            WhitespaceArg::Unbounded => Self::Unbounded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flags_is_unconstrained() {
        assert!(ConstraintArgs::default().grammar().unwrap().is_none());
    }

    #[test]
    fn two_constraints_are_refused() {
        let args =
            ConstraintArgs { regex: Some("a".into()), grammar: Some("root ::= \"a\"".into()), ..Default::default() };
        assert!(args.grammar().is_err());
    }

    #[test]
    fn inline_gbnf_compiles_and_bad_gbnf_is_an_error() {
        let args = ConstraintArgs { grammar: Some("root ::= \"a\" [0-9]+".into()), ..Default::default() };
        let g = args.grammar().unwrap().expect("a grammar");
        let pda = constrain::automaton::Pda::build(g.grammar(), &constrain::Limits::default()).unwrap();
        assert!(pda.matches(b"a12") && !pda.matches(b"a"));
        let args = ConstraintArgs { grammar: Some("root ::= (".into()), ..Default::default() };
        assert!(args.grammar().is_err());
    }

    #[test]
    fn notes_are_one_line_unless_listed() {
        let schema = serde_json::json!({
            "$schema": "https://example.com/unknown",
            "type": "object",
            "properties": {"e": {"type": "string", "format": "email"}, "h": {"type": "string", "format": "hostname"}},
            "uniqueItems": true,
            "not": {"required": ["x"]}
        });
        let compiled = constrain::schema::compile(&schema, &Default::default()).unwrap();
        let notes = compiled.notes();
        let checked = vec!["not at /not".to_string()];
        let quiet = note_lines(notes, &checked, false);
        assert_eq!(quiet.iter().filter(|l| l.starts_with("note:")).count(), 1, "{quiet:?}");
        assert!(quiet.iter().any(|l| l.starts_with("warning: /$schema")), "{quiet:?}");
        let last = quiet.last().unwrap();
        assert!(last.contains("2 keywords compiled as documented subsets, 1 keyword checked at run time"), "{last}");
        let all = note_lines(notes, &checked, true);
        assert_eq!(all.iter().filter(|l| l.starts_with("note: /properties/")).count(), 2, "{all:?}");
        assert!(all.iter().any(|l| l.contains("checked at run time, as each value completes: not at /not")));
        assert!(note_lines(&[], &[], false).is_empty(), "nothing to say: silence");
    }

    #[test]
    fn bad_json_is_a_clear_error() {
        let args = ConstraintArgs { json_schema: Some("{not json".into()), ..Default::default() };
        let err = format!("{:#}", args.grammar().unwrap_err());
        assert!(err.contains("--json-schema is not valid JSON"), "{err}");
        let args = ConstraintArgs { schema: Some("/nonexistent/x.json".into()), ..Default::default() };
        assert!(format!("{:#}", args.grammar().unwrap_err()).contains("cannot read schema file"));
    }
}

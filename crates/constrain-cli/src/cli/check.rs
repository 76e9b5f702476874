//! `constrain check`: does a constraint accept a document, and if not, where and why.
//!
//! Input: a constraint (`--schema`, `--json-schema`, `--grammar-file`, `--grammar`,
//! `--regex`) and a document (a file, or `-` for stdin; against a schema, whitespace after
//! the JSON value is ignored); optionally `--tokenizer` to replay the document token by
//! token through the masks, as generation would.
//! Output: exit 0 when the constraint accepts the whole document and may end there;
//! otherwise exit [`EXIT_REJECTED`] (refused or incomplete) or [`EXIT_LIMIT`] (a parse limit
//! cut a path: no verdict), with the explanation on stderr (see [`constrain::explain`]).
use super::constraint_args::{limit_flag, ConstraintArgs};
use super::{Failure, EXIT_USAGE};
use anyhow::Context as _;
use constrain::explain::{explain, show_byte, Verdict};
use constrain::mask::{is_allowed, TokenIndex};
use constrain::matcher::Constraint;
use constrain::{TokenId, Vocabulary};
use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code of `check`: the document is refused or incomplete.
pub const EXIT_REJECTED: u8 = 6;
/// Exit code of `check` (and `eval`): a parse limit cut a path, so there is no verdict.
pub const EXIT_LIMIT: u8 = 7;

/// Arguments of `constrain check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The constraint to check against.
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    /// The document: a file path, or `-` for stdin.
    pub doc: PathBuf,
    /// Also replay the document token by token (this tokenizer.json) through the masks.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
}

/// Runs `constrain check`.
pub fn run(args: &CheckArgs) -> Result<ExitCode, Failure> {
    check(args).map(ExitCode::from)
}

/// Runs `constrain check`, returning the exit code as a number.
pub fn check(args: &CheckArgs) -> Result<u8, Failure> {
    let grammar = args.constraint.grammar().map_err(Failure::constraint)?.ok_or_else(|| {
        Failure::new(
            EXIT_USAGE,
            anyhow::anyhow!("give a constraint: --schema, --json-schema, --grammar-file, --grammar or --regex"),
        )
    })?;
    let is_schema = args.constraint.schema.is_some() || args.constraint.json_schema.is_some();
    let mut doc = read_doc(&args.doc).map_err(Failure::from)?;
    if is_schema {
        // A JSON text may end with whitespace (RFC 8259), and files and `constrain`'s own
        // output end with a newline: the value is what is checked.
        let end = doc.iter().rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')).map_or(0, |i| i + 1);
        doc.truncate(end);
    }
    let limits = args.constraint.limits.limits();

    if let Some(tok_path) = &args.tokenizer {
        let json = std::fs::read(tok_path)
            .with_context(|| format!("cannot read tokenizer file {}", tok_path.display()))
            .map_err(Failure::from)?;
        let vocab = Vocabulary::from_tokenizer_json_bytes(&json, None)
            .with_context(|| format!("cannot load vocabulary from {}", tok_path.display()))
            .map_err(Failure::from)?;
        let tokenizer = tokenizers::Tokenizer::from_bytes(&json)
            .map_err(|e| Failure::from(anyhow::anyhow!("cannot load tokenizer {}: {e}", tok_path.display())))?;
        let index = TokenIndex::with_config(vocab, args.constraint.limits.memory.index_config());
        let constraint = Constraint::new(&grammar, index.clone(), &limits).map_err(Failure::constraint)?;
        let text = std::str::from_utf8(&doc)
            .map_err(|e| Failure::from(anyhow::anyhow!("the document is not UTF-8, cannot tokenize it: {e}")))?;
        let enc = tokenizer
            .encode(text, false)
            .map_err(|e| Failure::from(anyhow::anyhow!("cannot tokenize the document: {e}")))?;
        if let Some(code) = check_tokens(&constraint, &doc, enc.get_ids(), is_schema)? {
            return Ok(code);
        }
        // The tokens were all allowed: the byte-level verdict below must agree.
        let e = explain(&constraint, &doc, is_schema);
        return Ok(report_code(&e));
    }
    let index = TokenIndex::with_config(Vocabulary::bytes(), args.constraint.limits.memory.index_config());
    let constraint = Constraint::new(&grammar, index, &limits).map_err(Failure::constraint)?;
    let e = explain(&constraint, &doc, is_schema);
    Ok(report_code(&e))
}

/// Replays `ids` through the masks; `Some(exit code)` when a token or the end is refused.
fn check_tokens(constraint: &Constraint, doc: &[u8], ids: &[u32], is_schema: bool) -> Result<Option<u8>, Failure> {
    let vocab = constraint.index().vocab();
    let mut m = constraint.matcher();
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut offset = 0usize;
    for (k, &id) in ids.iter().enumerate() {
        let t = TokenId(id);
        if let Some(code) = fill(&mut m, &mut mask, offset)? {
            return Ok(Some(code));
        }
        if !is_allowed(&mask, t) {
            let bytes = vocab.token_bytes(t);
            eprintln!(
                "token {k} (id {id}, {:?}) at byte {offset} is not allowed by the mask",
                String::from_utf8_lossy(bytes)
            );
            // The byte-level explanation of the same document says why.
            let e = explain(constraint, doc, is_schema);
            if e.accepted() {
                eprintln!(
                    "constrain: internal inconsistency: the bytes are accepted but the mask refused token {k}{}",
                    if m.hit_limit() { " (a parse limit was hit)" } else { "" }
                );
                return Ok(Some(super::EXIT_OTHER));
            }
            return Ok(Some(report_code(&e)));
        }
        if let Err(e) = m.accept_token(t) {
            eprintln!("constrain: internal inconsistency: the mask allowed token {k} but the matcher refused it: {e}");
            return Ok(Some(super::EXIT_OTHER));
        }
        offset += vocab.token_bytes(t).len();
    }
    if let Some(code) = fill(&mut m, &mut mask, offset)? {
        return Ok(Some(code));
    }
    let eos = vocab.eos_tokens().iter().any(|&e| is_allowed(&mask, e));
    if eos != m.is_accepting() {
        eprintln!(
            "constrain: internal inconsistency: end-of-generation in mask = {eos}, accepting = {}",
            m.is_accepting()
        );
        return Ok(Some(super::EXIT_OTHER));
    }
    Ok(None)
}

/// Fills the mask at byte `offset`; a budget running out there is a limit verdict
/// (`Some(EXIT_LIMIT)`), not a failure of the tool.
fn fill(m: &mut constrain::Matcher, mask: &mut [u32], offset: usize) -> Result<Option<u8>, Failure> {
    match m.fill_mask(mask) {
        Ok(()) => Ok(None),
        Err(constrain::matcher::Error::Limit(hit)) => {
            eprintln!("limit hit: no verdict at byte {offset}: {}", hit.message(limit_flag));
            Ok(Some(EXIT_LIMIT))
        }
        Err(e) => Err(Failure::from(anyhow::anyhow!("matcher: {e}"))),
    }
}

/// Prints the explanation and picks the exit code.
fn report_code(e: &constrain::explain::Explanation) -> u8 {
    match &e.verdict {
        Verdict::Accepted => {
            eprintln!("ok: {}", e.render());
            0
        }
        Verdict::Refused(b) => {
            eprintln!("rejected: {}", e.render());
            if *b >= 0x80 {
                eprintln!("(byte {} is part of a non-ASCII character)", show_byte(*b));
            }
            EXIT_REJECTED
        }
        Verdict::Incomplete => {
            eprintln!("rejected: {}", e.render());
            EXIT_REJECTED
        }
        Verdict::Limit(_) => {
            eprintln!("limit hit: {}", e.render_with(limit_flag));
            EXIT_LIMIT
        }
    }
}

fn read_doc(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).context("cannot read the document from stdin")?;
        Ok(buf)
    } else {
        std::fs::read(path).with_context(|| format!("cannot read document {}", path.display()))
    }
}

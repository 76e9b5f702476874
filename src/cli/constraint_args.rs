//! Choosing the constraint on the command line (being written).
use crate::grammar::Grammar;
use std::path::PathBuf;

/// The constraint flags shared by every command: exactly one of them, or none
/// (unconstrained).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConstraintArgs {
    /// JSON Schema file.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// JSON Schema given inline (llama.cpp's flag name).
    #[arg(long = "json-schema")]
    pub json_schema: Option<String>,
    /// GBNF grammar file.
    #[arg(long = "grammar-file")]
    pub grammar_file: Option<PathBuf>,
    /// GBNF grammar given inline.
    #[arg(long)]
    pub grammar: Option<String>,
    /// The whole output must match this regular expression.
    #[arg(long)]
    pub regex: Option<String>,
    /// Whitespace policy for JSON Schema output.
    #[arg(long, value_enum, default_value_t)]
    pub whitespace: crate::schema::Whitespace,
    /// Forbid object properties the schema does not name.
    #[arg(long)]
    pub strict: bool,
}

impl ConstraintArgs {
    /// The grammar these flags select; `None` means unconstrained.
    pub fn grammar(&self) -> anyhow::Result<Option<Grammar>> {
        anyhow::bail!("constraint flags not written yet")
    }
}

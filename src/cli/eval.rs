//! `constrain eval`: the JSONSchemaBench-style evaluation (being written).
use std::path::PathBuf;

/// Arguments of `constrain eval`.
#[derive(clap::Args, Debug, Clone)]
pub struct EvalArgs {
    /// A directory laid out like JSONSchemaBench, or one set folder.
    pub dir: PathBuf,
    /// HF tokenizer.json used to tokenize the instances.
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// Where to write the JSON report.
    #[arg(long)]
    pub json_report: Option<PathBuf>,
}

/// Runs the evaluation.
pub fn run(_args: &EvalArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("eval not written yet")
}

//! GBNF (llama.cpp's grammar format): parsing and printing (being written).
use super::Grammar;

/// Prints a grammar as GBNF text.
pub fn to_gbnf(g: &Grammar) -> String {
    format!("# {} rules\n", g.rules().len())
}

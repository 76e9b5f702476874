//! Budgets that keep compilation and matching bounded on any input.
//!
//! Going over a limit is a typed error, never a hang or an out-of-memory. The defaults are
//! generous for real-world schemas (all of JSONSchemaBench fits) and small enough that a
//! hostile schema fails in milliseconds.

/// Size budgets for every stage. `Limits::default()` suits generation; raise them for huge
/// grammars.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum total expression size of a grammar (nodes over all rules).
    pub max_grammar_size: usize,
    /// Maximum number of automaton states over all rules.
    pub max_automaton_states: usize,
    /// Counted repetitions whose bound is at most this are unrolled; larger ones keep a
    /// run-time counter on the stack.
    pub unroll_limit: u32,
    /// Maximum stack depth while matching (deep recursion in the output is refused).
    pub max_stack_depth: usize,
    /// Maximum number of simultaneous parse stacks (ambiguous grammars).
    pub max_parse_stacks: usize,
    /// Bytes the shared per-tokenizer mask cache may hold before it is cleared.
    pub max_mask_cache_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_grammar_size: 2_000_000,
            max_automaton_states: 1_000_000,
            unroll_limit: 6,
            max_stack_depth: 2_000,
            max_parse_stacks: 256,
            max_mask_cache_bytes: 1 << 30,
        }
    }
}

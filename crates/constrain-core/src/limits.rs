//! Budgets that keep compilation and matching bounded on any input.
//!
//! Going over a limit is a typed error naming the limit ([`LimitExceeded`]), never a hang, an
//! abort or an out-of-memory. The defaults are generous for real-world schemas (every
//! JSONSchemaBench schema and every grammar in `grammars/` compiles under them) and small
//! enough that a hostile schema fails in well under a second.
//!
//! | budget | default | bounds |
//! |---|---|---|
//! | [`Limits::max_input_bytes`] | 16 MiB | schema, grammar, prompt and instance text read by the CLI |
//! | [`Limits::max_grammar_size`] | 1 M | expression nodes plus literal bytes over all rules |
//! | [`Limits::max_nesting_depth`] | 500 | expression nesting (recursive passes over an expression) |
//! | [`Limits::max_alternatives`] | 200 k | branches of one alternation |
//! | [`Limits::compile_fuel`] | 50 M | steps of unrolling and determinisation for one constraint (≈ 1 s) |
//! | [`Limits::max_automaton_states`] | 250 k | automaton states over all rules |
//! | [`Limits::max_stack_depth`] | 2 000 | parse stack depth while matching |
//! | [`Limits::max_parse_stacks`] | 256 | simultaneous parse stacks (ambiguity) |
//! | [`Limits::mask_fuel`] | 10 M | stack steps of one mask computation, or of one accepted byte |
//!
//! Set them with the `with_*` methods (the struct is `#[non_exhaustive]`, so new budgets can
//! be added without breaking callers); the command line has a flag for the compile ones.
//!
//! The `MAX_*` constants of the algorithm (bounds on one step's recursion or work, the same
//! for every caller) are each documented where they are defined, and listed with what
//! happens past them in the repository's `docs/limits.md`.
//!
//! The shared per-tokenizer mask cache is bounded by the token index that owns it
//! (`mask::IndexConfig`: 256 MiB in all by default, with the rule and constraint caches),
//! not per constraint.
//!
//! ## Example
//!
//! ```rust
//! use constrain::grammar::gbnf;
//! use constrain::automaton::{Error, Pda};
//! use constrain::limits::LimitExceeded;
//! use constrain::Limits;
//!
//! let g = gbnf::parse("root ::= [a-z]{1,6} [0-9]{1,6} [a-z]{1,6}\n").unwrap();
//! let tight = Limits::default().with_compile_fuel(10);
//! match Pda::build(&g, &tight) {
//!     Err(Error::Budget { limit: LimitExceeded::CompileFuel, .. }) => {}
//!     other => panic!("expected the compile-fuel budget, got {other:?}"),
//! }
//! assert!(Pda::build(&g, &Limits::default()).is_ok());
//! ```

/// Size budgets for every stage. `Limits::default()` suits generation; raise them for huge
/// grammars.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest input text (schema, grammar, prompt, instance) the command line reads, in
    /// bytes. Flag: `--max-input-bytes`.
    pub max_input_bytes: usize,
    /// Maximum total grammar size: expression nodes plus literal bytes over all rules.
    pub max_grammar_size: usize,
    /// Deepest expression nesting a grammar may have (every pass over an expression that
    /// recurses is bounded by it).
    pub max_nesting_depth: usize,
    /// Most branches one alternation may have.
    pub max_alternatives: usize,
    /// Work units allowed to compile one grammar into an automaton: every unrolled copy of a
    /// counted repetition and every step of determinisation spends one. Flag: `--max-fuel`.
    pub compile_fuel: u64,
    /// Maximum number of automaton states over all rules. Flag: `--max-states`.
    pub max_automaton_states: usize,
    /// Counted repetitions whose bound is at most this are unrolled; larger ones keep a
    /// run-time counter on the stack.
    pub unroll_limit: u32,
    /// Maximum stack depth while matching (deep recursion in the output is refused).
    pub max_stack_depth: usize,
    /// Maximum number of simultaneous parse stacks (ambiguous grammars).
    pub max_parse_stacks: usize,
    /// Work units one mask computation may spend (each walk of the vocabulary when a state
    /// is first classified, and the run-time check of the stack-dependent tokens), and one
    /// accepted byte: a parse stack moved over a byte or one step of a closure spends one.
    /// Running out is [`crate::matcher::Error::Limit`], never a silently smaller mask.
    /// Flag: `--max-mask-fuel`.
    pub mask_fuel: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_input_bytes: 16 << 20,
            max_grammar_size: 1_000_000,
            max_nesting_depth: 500,
            max_alternatives: 200_000,
            compile_fuel: 50_000_000,
            max_automaton_states: 250_000,
            unroll_limit: 6,
            max_stack_depth: 2_000,
            max_parse_stacks: 256,
            mask_fuel: 10_000_000,
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident => $field:ident: $ty:ty;)*) => {
        impl Limits {
            $($(#[$doc])* pub fn $name(mut self, value: $ty) -> Self {
                self.$field = value;
                self
            })*
        }
    };
}

setters! {
    /// Sets [`Limits::max_input_bytes`].
    with_max_input_bytes => max_input_bytes: usize;
    /// Sets [`Limits::max_grammar_size`].
    with_max_grammar_size => max_grammar_size: usize;
    /// Sets [`Limits::max_nesting_depth`].
    with_max_nesting_depth => max_nesting_depth: usize;
    /// Sets [`Limits::max_alternatives`].
    with_max_alternatives => max_alternatives: usize;
    /// Sets [`Limits::compile_fuel`].
    with_compile_fuel => compile_fuel: u64;
    /// Sets [`Limits::max_automaton_states`].
    with_max_automaton_states => max_automaton_states: usize;
    /// Sets [`Limits::unroll_limit`].
    with_unroll_limit => unroll_limit: u32;
    /// Sets [`Limits::max_stack_depth`].
    with_max_stack_depth => max_stack_depth: usize;
    /// Sets [`Limits::max_parse_stacks`].
    with_max_parse_stacks => max_parse_stacks: usize;
    /// Sets [`Limits::mask_fuel`].
    with_mask_fuel => mask_fuel: u64;
}

/// Which budget an input went over: carried by the stage errors so a caller can tell a
/// budget from a bad input, and printed with the way to raise it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitExceeded {
    /// [`Limits::max_input_bytes`].
    InputBytes,
    /// [`Limits::max_grammar_size`].
    GrammarSize,
    /// [`Limits::max_nesting_depth`].
    NestingDepth,
    /// [`Limits::max_alternatives`].
    Alternatives,
    /// [`Limits::compile_fuel`].
    CompileFuel,
    /// [`Limits::max_automaton_states`].
    AutomatonStates,
}

impl LimitExceeded {
    /// How to raise this budget: the `Limits` field, and the command-line flag if any.
    pub fn how_to_raise(self) -> &'static str {
        match self {
            LimitExceeded::InputBytes => "Limits::max_input_bytes, flag --max-input-bytes",
            LimitExceeded::GrammarSize => "Limits::max_grammar_size",
            LimitExceeded::NestingDepth => "Limits::max_nesting_depth",
            LimitExceeded::Alternatives => "Limits::max_alternatives",
            LimitExceeded::CompileFuel => "Limits::compile_fuel, flag --max-fuel",
            LimitExceeded::AutomatonStates => "Limits::max_automaton_states, flag --max-states",
        }
    }
}

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self {
            LimitExceeded::InputBytes => "input size",
            LimitExceeded::GrammarSize => "grammar size",
            LimitExceeded::NestingDepth => "nesting depth",
            LimitExceeded::Alternatives => "number of alternatives",
            LimitExceeded::CompileFuel => "compile fuel",
            LimitExceeded::AutomatonStates => "automaton states",
        };
        write!(f, "{what} budget exceeded (raise it with {})", self.how_to_raise())
    }
}

/// Reads a whole file, refusing one larger than `max` bytes (checked before reading, and
/// again while reading, for files whose size is not known up front such as pipes).
pub fn read_capped(path: &std::path::Path, max: usize) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::Error::other("is a directory"));
    }
    let too_big = || std::io::Error::other(format!("larger than {max} bytes ({})", LimitExceeded::InputBytes));
    if meta.len() > max as u64 {
        return Err(too_big());
    }
    let mut text = String::new();
    file.take(max as u64 + 1).read_to_string(&mut text)?;
    if text.len() > max {
        return Err(too_big());
    }
    Ok(text)
}

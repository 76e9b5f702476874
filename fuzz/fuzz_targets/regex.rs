//! The regex translator (anchored, as `--regex` and `pattern` use it) and the automaton.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else { return };
    let Ok(g) = constrain::grammar::regex::compile_anchored(pattern) else { return };
    let limits = constrain::Limits::default().with_compile_fuel(2_000_000).with_max_automaton_states(50_000).with_max_grammar_size(100_000);
    let _ = constrain::automaton::Pda::build(&g, &limits);
});

//! The schema compiler on arbitrary JSON, then the automaton: any input ends in a grammar or
//! an error, never a panic, an abort or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let limits = small_limits();
    for options in [constrain::schema::Options::default(), constrain::schema::Options { lenient: true, ..Default::default() }] {
        if let Ok(g) = constrain::schema::compile(&value, &options) {
            let _ = constrain::automaton::Pda::build(g.grammar(), &limits);
        }
    }
});

/// Budgets small enough that each input runs in milliseconds.
fn small_limits() -> constrain::Limits {
    constrain::Limits::default().with_compile_fuel(2_000_000).with_max_automaton_states(50_000).with_max_grammar_size(100_000)
}

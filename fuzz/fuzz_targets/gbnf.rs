//! The GBNF parser and the automaton on arbitrary text; a grammar that parses is also
//! printed and re-read, and must read back to the same grammar.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(g) = constrain::grammar::gbnf::parse(text) else { return };
    let limits = constrain::Limits::default().with_compile_fuel(2_000_000).with_max_automaton_states(50_000).with_max_grammar_size(100_000);
    let _ = constrain::automaton::Pda::build(&g, &limits);
    let printed = constrain::grammar::gbnf::to_gbnf(&g);
    assert!(constrain::grammar::gbnf::parse(&printed).is_ok(), "printed grammar does not parse:\n{printed}");
});

//! The matcher fed arbitrary bytes and tokens: the first input byte picks one of a few
//! grammars, the rest is split into a byte string (checked by the automaton) and a token
//! sequence over a toy vocabulary (masks filled, tokens accepted or refused, rolled back).
//! The mask and `accept_token` must agree, and nothing may panic.
#![no_main]
use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

const GRAMMARS: [&str; 4] = [
    r#"root ::= "{" ws ("\"a\"" ws ":" ws [0-9]+ ws)? "}" ws ::= [ \n]{0,3}"#,
    r#"root ::= ("ab" | "a" [b-d]{1,6})* "!""#,
    r#"root ::= item ("," item)* item ::= "[" (item ("," item)*)? "]" | [a-z]{1,3}"#,
    r#"root ::= [^"\\]* ("\\" [nt"\\] [^"\\]*)*"#,
];

fn index() -> &'static Arc<TokenIndex> {
    static INDEX: OnceLock<Arc<TokenIndex>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut pieces: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        for p in ["ab", "{\"a\"", "\":", "12", "},", "[a", "],", "\\n", "abc", "  \n", "!"] {
            pieces.push(p.as_bytes().to_vec());
        }
        let eos = TokenId(pieces.len() as u32);
        pieces.push(b"<eos>".to_vec());
        TokenIndex::new(Vocabulary::new(pieces, &[eos], &[eos]).expect("toy vocabulary"))
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(g) = constrain::grammar::gbnf::parse(GRAMMARS[pick as usize % GRAMMARS.len()]) else { return };
    let limits = Limits::default();
    if let Ok(p) = constrain::automaton::Pda::build(&g, &limits) {
        let _ = p.matches(rest);
        let _ = p.matches_prefix(rest);
    }
    let index = index().clone();
    let n = index.vocab().len() as u32;
    let Ok(c) = Constraint::new(&g, index.clone(), &limits) else { return };
    let mut m = c.matcher();
    let mut mask = vec![0u32; index.vocab().mask_words()];
    for pair in rest.chunks(2) {
        let t = TokenId(u32::from(pair[0]) * 256 % n.max(1) + u32::from(*pair.get(1).unwrap_or(&0)) % 16);
        let t = TokenId(t.0 % n);
        if pair[0] == 0xFF {
            let _ = m.rollback(1);
            continue;
        }
        if m.fill_mask(&mut mask).is_err() {
            return;
        }
        let allowed = constrain::mask::is_allowed(&mask, t);
        let accepted = m.accept_token(t).is_ok();
        assert!(!accepted || allowed || index.vocab().is_eos(t), "token {t:?} accepted but masked out");
        if allowed && !index.vocab().is_eos(t) {
            assert!(accepted, "token {t:?} allowed by the mask but refused");
        }
        if !accepted {
            return;
        }
    }
});

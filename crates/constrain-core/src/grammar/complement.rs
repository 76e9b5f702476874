//! The complement of a regular expression over characters: every string of Unicode scalar
//! values it does *not* match, as another [`Expr`].
//!
//! Why: an object with `patternProperties` allows its other keys too (valued by
//! `additionalProperties`). A grammar holds the two kinds of keys apart only if it can spell
//! "a key that matches none of the patterns"; this module spells it, so the object compiles
//! exactly, without a run-time check.
//!
//! How: [`CharDfa`] builds the minimal automaton, flips its accepting states and eliminates
//! it back into an expression. Past a budget, [`complement`] returns `None` and the caller
//! keeps its other route (a refusal or a run-time check), never an approximation.
//!
//! ```rust
//! use constrain::grammar::complement::complement;
//! use constrain::grammar::regex::{to_expr, RegexOptions};
//!
//! let keys = to_expr("^x-", &RegexOptions::search())?; // keys that begin with "x-"
//! let others = complement(&keys).expect("small enough");
//! let mut b = constrain::grammar::GrammarBuilder::new();
//! let root = b.add("root", others);
//! let pda = constrain::automaton::Pda::build(&b.build(root)?, &constrain::Limits::default())?;
//! assert!(pda.matches(b"name") && pda.matches(b"x") && pda.matches(b"y-x-"));
//! assert!(!pda.matches(b"x-") && !pda.matches(b"x-rate"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::dfa::CharDfa;
use super::Expr;

/// The strings of scalar values that `e` does not match, or `None` when `e` is not a plain
/// expression over characters (it holds a rule reference or non-ASCII byte ranges) or the
/// construction outgrows its budget.
pub fn complement(e: &Expr) -> Option<Expr> {
    CharDfa::of(e)?.complement().to_expr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::Pda;
    use crate::grammar::dfa::tests::strings;
    use crate::grammar::regex::{to_expr, RegexOptions};
    use crate::grammar::GrammarBuilder;
    use crate::Limits;

    fn pda(e: Expr) -> Pda {
        let mut b = GrammarBuilder::new();
        let root = b.add("root", e);
        Pda::build(&b.build(root).expect("grammar"), &Limits::default()).expect("builds")
    }

    #[test]
    fn complements_partition_every_short_string() {
        let alphabet = ['a', 'b', 'x', '-', '1', 'é', '_'];
        for pattern in ["^x-", "^[a-z]+$", "a", "^a$", "^(ab|b)*$", "[0-9]{2}", "^[a-z]{1,3}_?$", "é$", "^$"] {
            let e = to_expr(pattern, &RegexOptions::search()).expect("pattern");
            let c = complement(&e).unwrap_or_else(|| panic!("{pattern}: over budget"));
            let (yes, no) = (pda(e), pda(c));
            let re = regex_automata::meta::Regex::new(pattern).expect("pattern");
            for s in strings(&alphabet, 4) {
                let is = re.is_match(&s);
                assert_eq!(yes.matches(s.as_bytes()), is, "{pattern} on {s:?}");
                assert_eq!(no.matches(s.as_bytes()), !is, "complement of {pattern} on {s:?}");
            }
        }
    }

    #[test]
    fn rule_references_and_huge_automata_are_refused() {
        assert!(complement(&Expr::Ref(crate::grammar::RuleId(0))).is_none());
        // Strings whose 30th character from the end is an `a`: 2^30 states deterministic.
        let e = to_expr("a[ab]{29}$", &RegexOptions::search()).expect("pattern");
        assert!(complement(&e).is_none());
        // A chain of 250 states: small, but its expression would nest 250 deep.
        let e = to_expr("^[a-z]{0,250}$", &RegexOptions::search()).expect("pattern");
        assert!(complement(&e).is_none());
    }
}

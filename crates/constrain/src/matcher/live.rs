//! Proving a prefix live: that some completion of the output so far passes the grammar
//! *and* every run-time check ([`crate::check`]).
//!
//! The grammar alone is live by construction (every automaton state reaches the end), so a
//! constraint without run-time checks needs no proof. With checks, the mask can allow a
//! token after which every completion completes some value that fails its check (`not`,
//! `if`/`then`/`else`, `uniqueItems`, a `oneOf` that overlaps): a *dead end* the decode
//! loop would only meet later. [`Matcher::prove_live`] decides it for the current prefix
//! with a bounded search, so that a decode loop can refuse such a token before the model
//! builds on it.
//!
//! ## How
//!
//! An iterative-deepening search over bytes (depth-first rounds, each allowed deeper than
//! the last), each a byte the vocabulary has a single-byte token for (so any byte path
//! found is also a token path). At each prefix it first tries the
//! shortest completion ([`Matcher::shortest_completion`], which already steers keys around
//! names written before): when the checks accept it, the prefix is live, and that is the
//! usual case, costing one walk. When they refuse it, the prefix's children are tried, each
//! byte the matcher accepts, nearest to the end first ([`Matcher::min_bytes_to_finish_checked`]),
//! and the search goes on from the first that is not proved dead. A prefix whose every
//! child is proved dead is dead; one with no child at all, too. Two cuts keep it small:
//! whitespace between JSON tokens is not tried (it changes no value, and the grammars that
//! allow it there allow its absence too), and a complete document the checks refuse is
//! dead at once (only whitespace may follow it).
//!
//! Every byte taken (a walk's, a child's) costs one unit of *fuel*, and trying the bytes
//! after a prefix a few more (the refused ones are an automaton step each). When the fuel runs out the answer is
//! [`Liveness::Unknown`]: infinite languages (strings, numbers) can never be exhausted, so
//! a search can prove a prefix dead only where the choices left are finite (a key that can
//! only repeat a name written already, the last items of a `uniqueItems` enum array).
//! Callers treat `Unknown` as not proved live.
use super::{Error, Matcher};
use crate::automaton::distance::UNREACHABLE;

/// Bytes deep the search goes at most below the prefix it starts from (a bound on its
/// recursion, whatever the fuel).
const MAX_DEPTH: usize = 256;

/// Fuel one expansion (trying every byte after a prefix) costs besides the bytes it takes:
/// the refused bytes are cheap, an automaton step each, but not free.
const EXPANSION_FUEL: usize = 16;

/// What [`Matcher::prove_live`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// A completion exists that the grammar and every check accept.
    Live,
    /// No completion exists: every way on is refused by the grammar or a check.
    Dead,
    /// The fuel ran out before either was proved.
    Unknown,
}

impl Matcher {
    /// Whether the output so far can still be completed to an output that passes the
    /// grammar and every run-time check (see the [module](self) doc), searching at most
    /// `fuel` byte steps. Without run-time checks, or where the output is complete, the
    /// answer is [`Liveness::Live`] at once (the automaton is trimmed: every state reaches
    /// the end). The matcher is left where it was. Costs one shortest completion in the
    /// usual case; call it after accepting a sampled token, not per allowed token.
    pub fn prove_live(&mut self, fuel: usize) -> Result<Liveness, Error> {
        if self.level().accepting || self.checker.is_none() {
            return Ok(Liveness::Live);
        }
        if self.level().finished {
            return Ok(Liveness::Dead);
        }
        let before = self.num_tokens();
        let mut fuel = fuel;
        let mut walk = Vec::new();
        // Iterative deepening: each round searches every prefix up to `limit` bytes deeper
        // (so a passing completion one byte away is not missed behind an endless first
        // child); a round that met no cut-off decides.
        let mut limit = 1;
        let found = loop {
            let mut cut = false;
            let r = self.live_from(&mut fuel, &mut walk, 0, limit, &mut cut);
            match r {
                Ok(Liveness::Dead) if cut => {}
                other => break other,
            }
            if fuel == 0 || limit >= MAX_DEPTH {
                break Ok(Liveness::Unknown);
            }
            limit = (limit * 2).min(MAX_DEPTH);
        };
        let back = self.num_tokens() - before;
        self.rollback(back)?;
        found
    }

    /// The search of [`Matcher::prove_live`] from the current prefix (left where it was).
    /// One round of it, at most `limit` bytes below the start (`depth` so far): `Dead` with
    /// `cut` set means only that no completion was found above the limit.
    fn live_from(
        &mut self,
        fuel: &mut usize,
        walk: &mut Vec<u8>,
        depth: usize,
        limit: usize,
        cut: &mut bool,
    ) -> Result<Liveness, Error> {
        if self.level().accepting {
            return Ok(Liveness::Live);
        }
        if self.checker.as_ref().is_some_and(|c| c.document_done()) {
            // The value is complete and refused: whitespace after it changes nothing.
            return Ok(Liveness::Dead);
        }
        if *fuel == 0 {
            return Ok(Liveness::Unknown);
        }
        // The shortest completion first: one walk, and the usual answer. It costs about the
        // grammar's distance to the end whether the checks take it or not.
        let cost = self.min_bytes_to_finish().map_or(1, |d| usize::try_from(d).unwrap_or(usize::MAX).max(1));
        let found = self.shortest_completion(walk)?;
        *fuel = fuel.saturating_sub(cost.max(walk.len()));
        if found {
            return Ok(Liveness::Live);
        }
        if depth >= limit {
            *cut = true;
            return Ok(Liveness::Dead);
        }
        // Refused somewhere: the children, nearest to the end first. Trying the bytes costs
        // [`EXPANSION_FUEL`], each one taken one more.
        *fuel = fuel.saturating_sub(EXPANSION_FUEL);
        let single = *self.constraint.single_byte_tokens();
        // Between JSON tokens whitespace changes no value: a completion through it is one
        // without it too (the grammars that allow it there allow none as well).
        let skip_space = self.checker.as_ref().is_some_and(|c| c.between_tokens());
        let mut children: Vec<(u64, u8)> = Vec::new();
        for b in 0..=255u8 {
            if !single[b as usize] || (skip_space && matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
                continue;
            }
            if *fuel == 0 {
                return Ok(Liveness::Unknown);
            }
            match self.accept_bytes(&[b]) {
                Ok(()) => {
                    // Only a byte taken costs fuel: a refused one is one automaton step.
                    *fuel -= 1;
                    let d = self.min_bytes_to_finish_checked()?.unwrap_or(UNREACHABLE);
                    self.rollback(1)?;
                    if d != UNREACHABLE {
                        children.push((d, b));
                    }
                }
                Err(Error::RejectedBytes) => {}
                // A parse limit cut the path: not a proof either way.
                Err(Error::Limit(_)) => return Ok(Liveness::Unknown),
                Err(e) => return Err(e),
            }
        }
        children.sort_unstable();
        let mut unknown = false;
        for (_, b) in children {
            if *fuel == 0 {
                return Ok(Liveness::Unknown);
            }
            self.accept_bytes(&[b])?;
            let r = self.live_from(fuel, walk, depth + 1, limit, cut);
            self.rollback(1)?;
            match r? {
                Liveness::Live => return Ok(Liveness::Live),
                Liveness::Dead => {}
                Liveness::Unknown => unknown = true,
            }
        }
        Ok(if unknown { Liveness::Unknown } else { Liveness::Dead })
    }
}

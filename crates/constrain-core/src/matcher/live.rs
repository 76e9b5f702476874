//! Proving a prefix live: that some completion of the output so far passes the grammar
//! *and* every run-time check (a [`crate::matcher::RuntimeChecks`]).
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
//!
//! Where that search runs out of fuel, the walk is *repaired*: greedily first (the first of
//! the schema's hints that fits where a JSON token begins or ends, kept, and a walk again:
//! one step per member a `required` names), then in rounds of 1, 2, 4, … changes. At the
//! start of the output, last, the schema's witness documents are tried (`check/witness.rs`).
use super::{Error, Matcher};
use crate::automaton::distance::UNREACHABLE;

/// Bytes deep the search goes at most below the prefix it starts from (a bound on its
/// recursion, whatever the fuel).
const MAX_DEPTH: usize = 256;

/// Bytes changed at most, one below another, in a repair search ([`Matcher::prove_live`]).
const MAX_REPAIRS: usize = 64;

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
    /// grammar and every run-time check (see the doc of `matcher/live.rs`), searching at most
    /// `fuel` byte steps. Without run-time checks, or where the output is complete, the
    /// answer is [`Liveness::Live`] at once (the automaton is trimmed: every state reaches
    /// the end). The matcher is left where it was. Costs one shortest completion in the
    /// usual case; call it after accepting a sampled token, not per allowed token.
    pub fn prove_live(&mut self, fuel: usize) -> Result<Liveness, Error> {
        if self.level().accepting || self.checker.is_none() {
            return Ok(Liveness::Live);
        }
        let mut completion = Vec::new();
        self.prove_live_into(fuel, &mut completion)
    }

    /// [`Matcher::prove_live`], also writing into `completion` the completion it found when
    /// the answer is [`Liveness::Live`] (bytes that bring the output to a complete one the
    /// grammar and every check accept, each a byte with a single-byte token; empty where
    /// the output is complete). Without run-time checks it is the grammar's shortest
    /// completion. Otherwise `completion` is left empty. Closing follows such a completion
    /// ([`crate::closing::Closer`]).
    pub fn prove_live_into(&mut self, fuel: usize, completion: &mut Vec<u8>) -> Result<Liveness, Error> {
        completion.clear();
        if self.level().accepting {
            return Ok(Liveness::Live);
        }
        if self.checker.is_none() {
            return Ok(if self.shortest_completion(completion)? { Liveness::Live } else { Liveness::Unknown });
        }
        if self.level().finished {
            return Ok(Liveness::Dead);
        }
        let before = self.num_tokens();
        // A quarter for the exhaustive search (it proves dead ends, which are near), the
        // rest for the repair search should that run out.
        let repair_fuel = fuel - fuel / 4;
        let mut fuel = fuel / 4;
        let mut walk = Vec::new();
        let mut path = Vec::new();
        // Iterative deepening: each round searches every prefix up to `limit` bytes deeper
        // (so a passing completion one byte away is not missed behind an endless first
        // child); a round that met no cut-off decides.
        let mut limit = 1;
        let found = loop {
            let mut cut = false;
            let r = self.live_from(&mut fuel, &mut walk, &mut path, limit, &mut cut);
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
        if matches!(found, Ok(Liveness::Live)) {
            // The bytes taken down to the prefix that proved live, then its walk.
            completion.extend_from_slice(&path);
            completion.extend_from_slice(&walk);
        }
        if !matches!(found, Ok(Liveness::Unknown)) || repair_fuel == 0 {
            return found;
        }
        // Out of its fuel: the walk failed far below the prefix (a `then` a choice many
        // bytes back decides, an object short of `minProperties`). Repair it there instead.
        // Rounds of more and more changes (one, two, four, ...): the few changes a check
        // wants are found before a deep search below a wrong first change eats the fuel.
        // First greedily, for half: where the checks want many parts (the members a
        // `required` names), inserting the first hint that fits, again and again, finds
        // them at the cost of one walk each, where the rounds below would spend all their
        // fuel on the first few.
        let mut fuel = repair_fuel / 2;
        path.clear();
        if self.repair_greedily(&mut fuel, &mut path)? {
            completion.extend_from_slice(&path);
            return Ok(Liveness::Live);
        }
        let mut fuel = repair_fuel - repair_fuel / 2 + fuel;
        let mut repairs = 1;
        let found = loop {
            path.clear();
            let r = self.repair(&mut fuel, &mut path, repairs);
            if !matches!(r, Ok(Liveness::Unknown)) || fuel == 0 || repairs >= MAX_REPAIRS {
                break r;
            }
            repairs = (repairs * 2).min(MAX_REPAIRS);
        };
        let back = self.num_tokens() - before;
        self.rollback(back)?;
        if matches!(found, Ok(Liveness::Live)) {
            completion.extend_from_slice(&path);
            return found;
        }
        // At the start of the output, the documents the schema spells out.
        if before == 0 && matches!(found, Ok(Liveness::Unknown)) && self.try_witnesses(completion)? {
            return Ok(Liveness::Live);
        }
        found
    }

    /// Whether one of the schema's witnesses ([`crate::matcher::RuntimeChecks::witnesses`]),
    /// spelled with single-byte tokens, completes the output here; it is then `completion`.
    /// The matcher is left where it was.
    fn try_witnesses(&mut self, completion: &mut Vec<u8>) -> Result<bool, Error> {
        let constraint = self.constraint.clone();
        let Some(checks) = constraint.checks() else { return Ok(false) };
        let single = *constraint.single_byte_tokens();
        for w in checks.witnesses() {
            if w.iter().any(|&b| !single[b as usize]) {
                continue;
            }
            let before = self.num_tokens();
            let done = match self.accept_bytes(w) {
                Ok(()) => self.level().accepting,
                Err(Error::RejectedBytes | Error::Limit(_)) => false,
                Err(e) => return Err(e),
            };
            let back = self.num_tokens() - before;
            self.rollback(back)?;
            if done {
                completion.clear();
                completion.extend_from_slice(w);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The repair search of [`Matcher::prove_live`] from the current prefix (left where it
    /// was), `path` the bytes taken below the start, at most `repairs` deep: the shortest
    /// walk, and where the checks refuse it, the walk with one byte changed, latest first
    /// (each byte the walk took, then the one before, ...), each such prefix searched the
    /// same way. On `Live`, `path` holds the whole completion. Never `Dead`: it does not
    /// search exhaustively.
    fn repair(&mut self, fuel: &mut usize, path: &mut Vec<u8>, repairs: usize) -> Result<Liveness, Error> {
        if self.level().accepting {
            return Ok(Liveness::Live);
        }
        if *fuel == 0 || self.checker.as_ref().is_some_and(|c| c.document_done()) {
            return Ok(Liveness::Unknown);
        }
        let mut walk = Vec::new();
        let complete = self.attempt_completion(&mut walk)?;
        *fuel = fuel.saturating_sub(walk.len().max(1));
        if complete {
            path.extend_from_slice(&walk);
            return Ok(Liveness::Live);
        }
        if repairs == 0 {
            return Ok(Liveness::Unknown);
        }
        let mut children: Vec<(u64, u8)> = Vec::new();
        for j in (0..=walk.len()).rev() {
            if *fuel == 0 {
                return Ok(Liveness::Unknown);
            }
            let lead = &walk[..j];
            if !lead.is_empty() {
                self.accept_bytes(lead)?;
            }
            // The schema's hints first (a whole value or name, where a check wants one), then
            // the bytes other than the walk's (those a limit cut are left out).
            let mut r = self.repair_with_hints(fuel, path, lead, repairs);
            if !matches!(r, Ok(Liveness::Unknown)) {
                if !lead.is_empty() {
                    self.rollback(1)?;
                }
                return r;
            }
            self.children(fuel, walk.get(j).copied(), &mut children)?;
            for &(_, b) in &children {
                if *fuel == 0 {
                    break;
                }
                let mark = path.len();
                path.extend_from_slice(lead);
                path.push(b);
                self.accept_bytes(&[b])?;
                r = self.repair(fuel, path, repairs - 1);
                self.rollback(1)?;
                if !matches!(r, Ok(Liveness::Unknown)) {
                    break;
                }
                path.truncate(mark);
            }
            if !lead.is_empty() {
                self.rollback(1)?;
            }
            if matches!(r, Ok(Liveness::Live) | Err(_)) {
                return r;
            }
        }
        Ok(Liveness::Unknown)
    }

    /// The greedy repair of [`Matcher::prove_live`] from the current prefix (left where it
    /// was): the shortest walk, and while the checks refuse it, the first of the schema's
    /// hints ([`crate::matcher::RuntimeChecks::hints`]) that the matcher accepts somewhere along
    /// the walk (latest position first) with a way to the end left, kept, and a walk again;
    /// at most [`MAX_REPAIRS`] hints. True with the whole completion in `path` when a walk
    /// passed.
    fn repair_greedily(&mut self, fuel: &mut usize, path: &mut Vec<u8>) -> Result<bool, Error> {
        let constraint = self.constraint.clone();
        let Some(checks) = constraint.checks() else { return Ok(false) };
        let single = *constraint.single_byte_tokens();
        let before = self.num_tokens();
        let mut live = false;
        let mut walk = Vec::new();
        'steps: for _ in 0..MAX_REPAIRS {
            if *fuel == 0 || self.checker.as_ref().is_some_and(|c| c.document_done()) {
                break;
            }
            let complete = self.attempt_completion(&mut walk)?;
            *fuel = fuel.saturating_sub(walk.len().max(1));
            if complete {
                path.extend_from_slice(&walk);
                live = true;
                break;
            }
            // Hints are whole values, names and members: they fit only where a JSON token
            // begins or ends (after `{`, `[`, `,` or `:`; before `,`, `}` or `]`).
            let fits = |j: usize| {
                j == 0
                    || matches!(walk[j - 1], b'{' | b'[' | b',' | b':')
                    || matches!(walk.get(j), Some(b',' | b'}' | b']'))
            };
            for j in (0..=walk.len()).rev().filter(|&j| fits(j)) {
                let lead = &walk[..j];
                if !lead.is_empty() {
                    self.accept_bytes(lead)?;
                }
                for hint in checks.hints() {
                    if *fuel == 0 {
                        break 'steps;
                    }
                    *fuel -= 1;
                    if !self.accept_hint(hint, &single)? {
                        continue;
                    }
                    *fuel = fuel.saturating_sub(hint.len());
                    if self.min_bytes_to_finish_checked()?.unwrap_or(UNREACHABLE) != UNREACHABLE {
                        path.extend_from_slice(lead);
                        path.extend_from_slice(hint);
                        continue 'steps;
                    }
                    self.rollback(1)?;
                }
                if !lead.is_empty() {
                    self.rollback(1)?;
                }
            }
            break;
        }
        let back = self.num_tokens() - before;
        self.rollback(back)?;
        if !live {
            path.clear();
        }
        Ok(live)
    }

    /// The search of [`Matcher::prove_live`] from the current prefix (left where it was),
    /// `path` the bytes taken below the start. One round of it, at most `limit` bytes below
    /// the start: `Dead` with `cut` set means only that no completion was found above the
    /// limit. On `Live`, `path` holds the bytes down to the prefix that proved it and `walk`
    /// that prefix's completion.
    fn live_from(
        &mut self,
        fuel: &mut usize,
        walk: &mut Vec<u8>,
        path: &mut Vec<u8>,
        limit: usize,
        cut: &mut bool,
    ) -> Result<Liveness, Error> {
        let depth = path.len();
        if self.level().accepting {
            walk.clear();
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
        // Refused somewhere: the children, nearest to the end first. A parse limit that cut
        // one, or fuel run out, leaves the proof undecided.
        let mut children: Vec<(u64, u8)> = Vec::new();
        if !self.children(fuel, None, &mut children)? {
            return Ok(Liveness::Unknown);
        }
        let mut unknown = false;
        for (_, b) in children {
            if *fuel == 0 {
                return Ok(Liveness::Unknown);
            }
            self.accept_bytes(&[b])?;
            path.push(b);
            let r = self.live_from(fuel, walk, path, limit, cut);
            self.rollback(1)?;
            match r? {
                // `path` keeps the bytes down to the prefix that proved it.
                Liveness::Live => return Ok(Liveness::Live),
                Liveness::Dead => {}
                Liveness::Unknown => unknown = true,
            }
            path.pop();
        }
        Ok(if unknown { Liveness::Unknown } else { Liveness::Dead })
    }

    /// The bytes the matcher accepts after the current prefix (left where it was), other
    /// than `except`, each with a single-byte token and a way to the end, into `children`
    /// nearest to the end first. Whitespace between JSON tokens is left out: it changes no
    /// value, and the grammars that allow it there allow its absence too. Trying the bytes
    /// costs [`EXPANSION_FUEL`], each one taken one more (a refused byte is one automaton
    /// step). False when a parse limit cut a byte or the fuel ran out: `children` then
    /// holds only some of them.
    fn children(&mut self, fuel: &mut usize, except: Option<u8>, children: &mut Vec<(u64, u8)>) -> Result<bool, Error> {
        children.clear();
        *fuel = fuel.saturating_sub(EXPANSION_FUEL);
        let single = *self.constraint.single_byte_tokens();
        let skip_space = self.checker.as_ref().is_some_and(|c| c.between_tokens());
        let mut whole = true;
        for b in 0..=255u8 {
            if !single[b as usize] || except == Some(b) || (skip_space && matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
                continue;
            }
            if *fuel == 0 {
                whole = false;
                break;
            }
            match self.accept_bytes(&[b]) {
                Ok(()) => {
                    *fuel -= 1;
                    let d = self.min_bytes_to_finish_checked()?.unwrap_or(UNREACHABLE);
                    self.rollback(1)?;
                    if d != UNREACHABLE {
                        children.push((d, b));
                    }
                }
                Err(Error::RejectedBytes) => {}
                Err(Error::Limit(_)) => whole = false,
                Err(e) => return Err(e),
            }
        }
        children.sort_unstable();
        Ok(whole)
    }

    /// Accepts `hint` here, as one step (taken back with `rollback(1)`), when each of its
    /// bytes has a single-byte token (`single`) and the matcher takes it; false, with the
    /// matcher unchanged, otherwise.
    fn accept_hint(&mut self, hint: &[u8], single: &[bool; 256]) -> Result<bool, Error> {
        if hint.iter().any(|&b| !single[b as usize]) {
            return Ok(false);
        }
        match self.accept_bytes(hint) {
            Ok(()) => Ok(true),
            Err(Error::RejectedBytes | Error::Limit(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The hints step of [`Matcher::repair`] at the prefix reached by `lead` (accepted):
    /// each of the schema's hints ([`crate::matcher::RuntimeChecks::hints`]) the matcher accepts
    /// here, spelled with single-byte tokens, searched on. `path` gains `lead`, the hint and
    /// the rest on `Live`, and is as it was otherwise.
    fn repair_with_hints(
        &mut self,
        fuel: &mut usize,
        path: &mut Vec<u8>,
        lead: &[u8],
        repairs: usize,
    ) -> Result<Liveness, Error> {
        let constraint = self.constraint.clone();
        let Some(checks) = constraint.checks() else { return Ok(Liveness::Unknown) };
        let single = *constraint.single_byte_tokens();
        for hint in checks.hints() {
            if *fuel == 0 {
                break;
            }
            if !self.accept_hint(hint, &single)? {
                continue;
            }
            *fuel = fuel.saturating_sub(hint.len());
            let mark = path.len();
            path.extend_from_slice(lead);
            path.extend_from_slice(hint);
            let r = self.repair(fuel, path, repairs - 1);
            self.rollback(1)?;
            if !matches!(r, Ok(Liveness::Unknown)) {
                return r;
            }
            path.truncate(mark);
        }
        Ok(Liveness::Unknown)
    }
}

//! The Thompson automaton over character classes; [`CharDfa`] determinises it with the
//! engine's one subset construction ([`crate::util::subset`]).

use crate::grammar::Expr;
use crate::util::subset::EpsilonMoves;

use super::{classes::char_ranges, classes::Classes, CharDfa, MAX_NFA_STATES};

#[derive(Default)]
pub(super) struct Nfa {
    pub(super) eps: Vec<Vec<u32>>,
    pub(super) moves: Vec<Vec<(Vec<usize>, u32)>>,
    /// The classes covering each character class built so far, by the address of its
    /// expression: a counted repetition builds its body once per count (`[a-z0-9_]{1,500}`
    /// 500 times), and covering a set scans every class interval.
    covered: rustc_hash::FxHashMap<usize, Vec<usize>>,
}

impl Nfa {
    pub(super) fn state(&mut self) -> Option<u32> {
        if self.eps.len() >= MAX_NFA_STATES {
            return None;
        }
        self.eps.push(Vec::new());
        self.moves.push(Vec::new());
        Some(self.eps.len() as u32 - 1)
    }

    /// Adds `e` from state `from`; returns the state its matches end in.
    pub(super) fn build(&mut self, e: &Expr, from: u32, classes: &Classes, depth: usize) -> Option<u32> {
        if depth > 200 {
            return None;
        }
        Some(match e {
            Expr::Empty => from,
            Expr::Nothing => self.state()?,
            Expr::Literal(b) => {
                let mut at = from;
                for c in std::str::from_utf8(b).ok()?.chars() {
                    let set = classes.covering(&[(c as u32, c as u32)]);
                    at = self.step(at, set)?;
                }
                at
            }
            Expr::Chars(_) | Expr::Bytes(_) => {
                // The expressions outlive the automaton's build: an address names one.
                let key = e as *const Expr as usize;
                let set = match self.covered.get(&key) {
                    Some(set) => set.clone(),
                    None => {
                        let set = classes.covering(&char_ranges(e)?);
                        self.covered.insert(key, set.clone());
                        set
                    }
                };
                self.step(from, set)?
            }
            Expr::Seq(v) => {
                let mut at = from;
                for x in v {
                    at = self.build(x, at, classes, depth + 1)?;
                }
                at
            }
            Expr::Alt(v) => {
                let end = self.state()?;
                for x in v {
                    let s = self.state()?;
                    self.eps[from as usize].push(s);
                    let t = self.build(x, s, classes, depth + 1)?;
                    self.eps[t as usize].push(end);
                }
                end
            }
            Expr::Repeat { expr, min, max } => {
                let mut at = from;
                for _ in 0..*min {
                    let s = self.state()?;
                    self.eps[at as usize].push(s);
                    at = self.build(expr, s, classes, depth + 1)?;
                }
                match max {
                    None => {
                        // at → loop → (body → loop) → end
                        let lp = self.state()?;
                        self.eps[at as usize].push(lp);
                        let s = self.state()?;
                        self.eps[lp as usize].push(s);
                        let t = self.build(expr, s, classes, depth + 1)?;
                        self.eps[t as usize].push(lp);
                        lp
                    }
                    Some(max) => {
                        let end = self.state()?;
                        self.eps[at as usize].push(end);
                        for _ in *min..*max {
                            let s = self.state()?;
                            self.eps[at as usize].push(s);
                            at = self.build(expr, s, classes, depth + 1)?;
                            self.eps[at as usize].push(end);
                        }
                        end
                    }
                }
            }
            Expr::Ref(_) => return None,
        })
    }

    /// Adds the automaton `d` from state `from`, reading class `k` of this automaton as
    /// `d`'s class `columns[k]`; returns the state its accepted strings end in. States that
    /// cannot accept are left out.
    pub(super) fn embed(&mut self, d: &CharDfa, columns: &[usize], from: u32) -> Option<u32> {
        let live = d.live();
        let end = self.state()?;
        let mut ids: Vec<u32> = Vec::with_capacity(d.next.len());
        for &l in &live {
            ids.push(if l { self.state()? } else { u32::MAX });
        }
        if live[0] {
            self.eps[from as usize].push(ids[0]);
        }
        for (s, row) in d.next.iter().enumerate() {
            if !live[s] {
                continue;
            }
            if d.accepting[s] {
                self.eps[ids[s] as usize].push(end);
            }
            let mut targets: Vec<(u32, Vec<usize>)> = Vec::new();
            for (k, &c) in columns.iter().enumerate() {
                let t = row[c];
                if !live[t as usize] {
                    continue;
                }
                match targets.iter_mut().find(|(x, _)| *x == t) {
                    Some((_, set)) => set.push(k),
                    None => targets.push((t, vec![k])),
                }
            }
            for (t, set) in targets {
                self.moves[ids[s] as usize].push((set, ids[t as usize]));
            }
        }
        Some(end)
    }

    fn step(&mut self, from: u32, set: Vec<usize>) -> Option<u32> {
        let to = self.state()?;
        self.moves[from as usize].push((set, to));
        Some(to)
    }
}

/// What the subset construction ([`crate::util::subset::determinise`]) reads of the
/// automaton itself: its ε-moves.
impl EpsilonMoves for Nfa {
    fn states(&self) -> usize {
        self.eps.len()
    }

    fn eps(&self, s: u32) -> &[u32] {
        self.eps.get(s as usize).map_or(&[], Vec::as_slice)
    }
}

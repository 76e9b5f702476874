//! Step 2 of the build: a Thompson NFA per rule, its edges grouped by state.

use super::lift::MAX_EXPR_DEPTH;
use crate::grammar::Expr;
use crate::util::subset::EpsilonMoves;

/// A Thompson NFA for one rule. Edges are listed with their source state while the NFA
/// is built ([`Nfa::add`]), then grouped by state in one pass ([`Nfa::seal`]): no list per
/// state, so building one allocates a few buffers, not three per state.
#[derive(Default)]
pub(super) struct Nfa {
    pub(super) states: u32,
    pub(super) eps: Grouped<u32>,
    pub(super) bytes: Grouped<(u8, u8, u32)>,
    pub(super) calls: Grouped<(u32, u32)>,
}

/// Items listed by key as `(key, item)`, then grouped by key in one counting sort, those of
/// `k` being `items[offsets[k]..offsets[k + 1]]` in the order they were listed: an NFA's
/// edges by state, a rule's predecessor lists by node ([`CoReach`]), the callers of each
/// rule. The buffers serve list after list ([`Grouped::clear`]).
pub(super) struct Grouped<T> {
    pub(super) listed: Vec<(u32, T)>,
    pub(super) offsets: Vec<u32>,
    pub(super) items: Vec<T>,
    pub(super) fill: Vec<u32>,
}

impl<T> Default for Grouped<T> {
    fn default() -> Self {
        Grouped { listed: Vec::new(), offsets: Vec::new(), items: Vec::new(), fill: Vec::new() }
    }
}

impl<T: Copy> Grouped<T> {
    pub(super) fn push(&mut self, key: u32, item: T) {
        self.listed.push((key, item));
    }

    /// Forgets what was listed, keeping the buffers.
    pub(super) fn clear(&mut self) {
        self.listed.clear();
    }

    /// Groups what was listed under the keys `0..keys` (every key listed is below it).
    pub(super) fn seal(&mut self, keys: u32) {
        let n = keys as usize;
        self.offsets.clear();
        self.offsets.resize(n + 1, 0);
        for &(s, _) in &self.listed {
            self.offsets[s as usize + 1] += 1;
        }
        for i in 0..n {
            self.offsets[i + 1] += self.offsets[i];
        }
        self.fill.clear();
        self.fill.extend_from_slice(&self.offsets[..n]);
        let fill = &mut self.fill;
        self.items.clear();
        self.items.reserve_exact(self.listed.len());
        // Every slot is written once below; the first edge stands in until then.
        if let Some(&(_, first)) = self.listed.first() {
            self.items.resize(self.listed.len(), first);
        }
        for &(s, e) in &self.listed {
            let slot = &mut fill[s as usize];
            self.items[*slot as usize] = e;
            *slot += 1;
        }
    }

    /// The items of key `s` (after [`Grouped::seal`]).
    #[inline]
    pub(super) fn of(&self, s: u32) -> &[T] {
        let (Some(&a), Some(&b)) = (self.offsets.get(s as usize), self.offsets.get(s as usize + 1)) else {
            return &[];
        };
        self.items.get(a as usize..b as usize).unwrap_or(&[])
    }
}

impl Nfa {
    pub(super) fn state(&mut self) -> u32 {
        self.states += 1;
        self.states - 1
    }

    pub(super) fn len(&self) -> usize {
        self.states as usize
    }

    /// Groups the edges by state; the subset construction reads them only after this.
    pub(super) fn seal(&mut self) {
        self.eps.seal(self.states);
        self.bytes.seal(self.states);
        self.calls.seal(self.states);
    }

    /// Adds a fragment matching `e` from `from` to `to`.
    pub(super) fn add(&mut self, e: &Expr, from: u32, to: u32, depth: usize, budget: usize) -> Result<(), ()> {
        if depth > MAX_EXPR_DEPTH || self.len() > budget {
            return Err(());
        }
        match e {
            Expr::Empty => self.eps.push(from, to),
            Expr::Nothing => {}
            Expr::Literal(bs) => {
                let mut cur = from;
                for (i, &b) in bs.iter().enumerate() {
                    let next = if i + 1 == bs.len() { to } else { self.state() };
                    self.bytes.push(cur, (b, b, next));
                    cur = next;
                }
                if bs.is_empty() {
                    self.eps.push(from, to);
                }
            }
            Expr::Bytes(ranges) => {
                for &(lo, hi) in ranges {
                    self.bytes.push(from, (lo, hi, to));
                }
            }
            Expr::Chars(ranges) => {
                for &(lo, hi) in ranges {
                    for seq in regex_syntax::utf8::Utf8Sequences::new(lo, hi) {
                        let rs = seq.as_slice();
                        let mut cur = from;
                        for (i, r) in rs.iter().enumerate() {
                            let next = if i + 1 == rs.len() { to } else { self.state() };
                            self.bytes.push(cur, (r.start, r.end, next));
                            cur = next;
                        }
                    }
                }
            }
            Expr::Seq(v) => {
                let mut cur = from;
                for (i, x) in v.iter().enumerate() {
                    let next = if i + 1 == v.len() { to } else { self.state() };
                    self.add(x, cur, next, depth + 1, budget)?;
                    cur = next;
                }
                if v.is_empty() {
                    self.eps.push(from, to);
                }
            }
            Expr::Alt(v) => {
                for x in v {
                    self.add(x, from, to, depth + 1, budget)?;
                }
            }
            Expr::Repeat { expr, min, max } => {
                let mut cur = from;
                for _ in 0..*min {
                    let next = self.state();
                    self.add(expr, cur, next, depth + 1, budget)?;
                    cur = next;
                }
                match max {
                    None => {
                        let a = self.state();
                        let b = self.state();
                        self.eps.push(cur, a);
                        self.add(expr, a, b, depth + 1, budget)?;
                        self.eps.push(b, a);
                        self.eps.push(a, to);
                    }
                    Some(m) => {
                        for _ in *min..*m {
                            let next = self.state();
                            self.eps.push(cur, to);
                            self.add(expr, cur, next, depth + 1, budget)?;
                            cur = next;
                        }
                        self.eps.push(cur, to);
                    }
                }
            }
            Expr::Ref(r) => self.calls.push(from, (r.0, to)),
        }
        Ok(())
    }
}

/// What the subset construction ([`super::dfa::determinise`]) reads of the NFA itself: its
/// ε-moves, grouped by state.
impl EpsilonMoves for Nfa {
    #[inline]
    fn states(&self) -> usize {
        self.len()
    }

    #[inline]
    fn eps(&self, s: u32) -> &[u32] {
        self.eps.of(s)
    }
}

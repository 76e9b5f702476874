use super::entry::TokenSet;
use super::text;
use super::text::TextTokens;
use crate::automaton::exec::RELAXED;
use crate::util::{is_allowed, set_bit};
use std::sync::Arc;

/// The loop frame of a mask context whose count is handled by derivation instead of by
/// separate classification: its position in the context (bottom first), its actual count
/// and its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RelaxedLoop {
    pub context_index: usize,
    pub count: u32,
    pub min: u32,
    pub max: u32,
}

/// When a token option is valid, in terms of the relaxed loop's actual count `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cond {
    /// Valid whatever the count.
    Always,
    /// Still inside the loop after starting `k` more iterations: needs `c + k ≤ max`.
    Inside(u32),
    /// Left the loop after `k` more iterations: needs `min ≤ c + k ≤ max`.
    Exited(u32),
}

impl Cond {
    pub(super) fn holds(self, r: Option<RelaxedLoop>) -> bool {
        let Some(r) = r else { return true };
        let (c, min, max) = (r.count as u64, r.min as u64, r.max as u64);
        match self {
            Cond::Always => true,
            Cond::Inside(k) => c + k as u64 <= max,
            Cond::Exited(k) => min <= c + k as u64 && c + k as u64 <= max,
        }
    }

    /// The iterations the condition counts (0 for [`Cond::Always`]).
    pub(super) fn iterations(self) -> u32 {
        match self {
            Cond::Always => 0,
            Cond::Inside(k) | Cond::Exited(k) => k,
        }
    }

    pub(super) fn of_count(count: u32, is_loop: bool) -> Cond {
        if count & RELAXED == 0 {
            Cond::Always
        } else if is_loop {
            Cond::Inside(count & !RELAXED)
        } else {
            Cond::Exited(count & !RELAXED)
        }
    }
}

/// The conditional tokens of a [`Classified`] arranged so that deriving the accepted set for
/// one count costs a copy of one bitset plus a look at the tokens that count may exclude,
/// instead of a test of every conditional token (inside a `maxLength` string nearly every
/// token is conditional, and each new count derives an entry).
///
/// A token is allowed for count `c` when one of its conditions holds: `Inside(k)` when
/// `k ≤ max − c`, `Exited(k)` when `min − c ≤ k ≤ max − c`. So a token whose smallest `Inside`
/// iteration number is at most `max − c` is allowed whatever its other conditions; only the
/// tokens above that — few, unless the count nears its maximum — need checking.
#[derive(Debug)]
pub(super) struct ByCount {
    /// `always` plus every conditional token: the accepted set when every condition holds.
    pub(super) all: Box<[u32]>,
    pub(super) all_count: usize,
    /// Conditional tokens outside `always`, by decreasing smallest `Inside` iteration number
    /// ([`ONLY_EXITS`] for a token without one): (that number, id, its `Exited` iteration
    /// numbers as a range of `exits`).
    pub(super) candidates: Box<[(u32, u32, u32, u32)]>,
    pub(super) exits: Box<[u32]>,
    /// Text tokens left to a shortcut ([`text::ByChars`]), a group per number of
    /// characters or position of the first refused one, in the order of `candidates`:
    /// (smallest `Inside` iteration number, the group's number in `lists`, `Exited` numbers
    /// as a range of `exits`). Derived from lists shared per tokenizer, not listed here: a
    /// `maxLength` string's quarter million conditions were 3 MB to write and fault in per
    /// new context.
    pub(super) groups: Box<[text::Group]>,
    pub(super) lists: Option<Arc<text::CharLists>>,
}

/// In [`ByCount::candidates`]: the token has no `Inside` condition.
pub(super) const ONLY_EXITS: u32 = u32::MAX;

impl ByCount {
    /// Arranges `conditional` (id, when) over the unconditional set `always`. Linear when the
    /// conditions of each token are adjacent, as the walk adds them (a token sits at one trie
    /// node); otherwise they are sorted by id first.
    /// With `text`, the text tokens are added by the groups [`text::units_loop`]'s shortcut
    /// found for them.
    pub(super) fn new(
        always: &[u32],
        conditional: &[(u32, Cond)],
        text: Option<(&TextTokens, text::ByChars)>,
    ) -> ByCount {
        let mut by_count = if conditions_adjacent(always.len(), conditional) {
            Self::from_adjacent(always, conditional)
        } else {
            let mut sorted = conditional.to_vec();
            sorted.sort_unstable_by_key(|&(id, _)| id);
            Self::from_adjacent(always, &sorted)
        };
        if let Some((tokens, by_chars)) = text {
            by_count.all_count += by_chars.set_grouped(tokens, &mut by_count.all);
            let mut exits = std::mem::take(&mut by_count.exits).into_vec();
            by_count.groups = by_chars.groups(&mut exits).into_boxed_slice();
            by_count.exits = exits.into_boxed_slice();
            by_count.lists = Some(by_chars.lists().clone());
        }
        by_count
    }

    /// [`ByCount::new`] when each token's conditions are adjacent in `conditional`.
    pub(super) fn from_adjacent(always: &[u32], conditional: &[(u32, Cond)]) -> ByCount {
        let mut all = always.to_vec();
        let mut candidates = Vec::new();
        let mut exits = Vec::new();
        let mut top = 0;
        for group in conditional.chunk_by(|a, b| a.0 == b.0) {
            let id = group[0].0;
            if is_allowed(always, crate::TokenId(id)) {
                continue;
            }
            set_bit(&mut all, id);
            let start = exits.len() as u32;
            let mut inside = ONLY_EXITS;
            for &(_, c) in group {
                match c {
                    Cond::Inside(k) => inside = inside.min(k),
                    Cond::Exited(k) => exits.push(k),
                    // Not produced for tokens outside `always`.
                    Cond::Always => inside = 0,
                }
            }
            if inside != ONLY_EXITS {
                top = top.max(inside);
            }
            candidates.push((inside, id, start, exits.len() as u32));
        }
        let all_count = all.iter().map(|w| w.count_ones() as usize).sum();
        ByCount {
            all: all.into_boxed_slice(),
            all_count,
            candidates: by_decreasing_inside(candidates, top),
            exits: exits.into_boxed_slice(),
            groups: Box::new([]),
            lists: None,
        }
    }

    /// The accepted set for `r`'s count (equal to filtering every condition).
    pub(super) fn accepted(&self, r: RelaxedLoop) -> TokenSet {
        let to_max = r.max as i64 - r.count as i64;
        let to_min = r.min as i64 - r.count as i64;
        let mut bits = self.all.to_vec();
        let mut count = self.all_count;
        let lists = self.lists.as_deref();
        let grouped =
            self.failing(&self.groups, to_min, to_max).flat_map(|g| lists.map_or(&[][..], |l| l.group(g as usize)));
        for id in self.failing(&self.candidates, to_min, to_max).chain(grouped.copied()) {
            if let Some(w) = bits.get_mut((id / 32) as usize) {
                count -= (*w >> (id % 32) & 1) as usize;
                *w &= !(1 << (id % 32));
            }
        }
        TokenSet::from_bits_and_ids(&bits, count, None, Vec::new())
    }

    /// Of `entries` (candidates or groups, by decreasing `Inside` number), the second field
    /// of those none of whose conditions holds when the count is `to_min` below the minimum
    /// and `to_max` below the maximum.
    pub(super) fn failing<'a>(
        &'a self,
        entries: &'a [(u32, u32, u32, u32)],
        to_min: i64,
        to_max: i64,
    ) -> impl Iterator<Item = u32> + 'a {
        let inside_fails = move |&&(inside, ..): &&(u32, u32, u32, u32)| inside == ONLY_EXITS || inside as i64 > to_max;
        entries.iter().take_while(inside_fails).filter_map(move |&(_, what, lo, hi)| {
            let exits = self.exits.get(lo as usize..hi as usize).unwrap_or(&[]);
            (!exits.iter().any(|&k| to_min <= k as i64 && k as i64 <= to_max)).then_some(what)
        })
    }

    pub(super) fn memory_usage(&self) -> usize {
        self.all.len() * 4 + (self.candidates.len() + self.groups.len()) * 16 + self.exits.len() * 4
    }
}

/// The largest iteration number [`by_decreasing_inside`] buckets.
pub(super) const MAX_COUNTING_SORT: usize = 1 << 16;

/// Whether every token's conditions in `conditional` are adjacent (tokens below `words` × 32).
pub(super) fn conditions_adjacent(words: usize, conditional: &[(u32, Cond)]) -> bool {
    let mut seen = vec![0u32; words];
    conditional.chunk_by(|a, b| a.0 == b.0).all(|group| {
        let id = group[0].0;
        let fresh = !is_allowed(&seen, crate::TokenId(id));
        set_bit(&mut seen, id);
        fresh
    })
}

/// `candidates` of [`ByCount`] ordered by decreasing `Inside` iteration number
/// ([`ONLY_EXITS`] first), none above `top`: a counting sort, as the numbers are token
/// lengths at most (a comparison sort past [`MAX_COUNTING_SORT`]).
pub(super) fn by_decreasing_inside(mut candidates: Vec<(u32, u32, u32, u32)>, top: u32) -> Box<[(u32, u32, u32, u32)]> {
    if top as usize > MAX_COUNTING_SORT {
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        return candidates.into_boxed_slice();
    }
    // Bucket 0 holds ONLY_EXITS, bucket 1 + (top - k) the number k.
    let bucket = |inside: u32| if inside == ONLY_EXITS { 0 } else { 1 + (top - inside) as usize };
    let mut starts = vec![0usize; top as usize + 3];
    for c in &candidates {
        starts[bucket(c.0) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut sorted = vec![(0, 0, 0, 0); candidates.len()];
    for c in candidates {
        let slot = &mut starts[bucket(c.0)];
        sorted[*slot] = c;
        *slot += 1;
    }
    sorted.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Candidates come out with `ONLY_EXITS` first, then by decreasing iteration number,
    /// whether counted into buckets or, past the bucket bound, sorted.
    #[test]
    fn candidates_by_decreasing_inside() {
        for top in [5, MAX_COUNTING_SORT as u32 + 1] {
            let insides = [3, ONLY_EXITS, 0, top, 3, 1, ONLY_EXITS];
            let candidates: Vec<_> = insides.iter().enumerate().map(|(k, &i)| (i, k as u32, 0, 0)).collect();
            let sorted = by_decreasing_inside(candidates, top);
            let got: Vec<u32> = sorted.iter().map(|c| c.0).collect();
            assert_eq!(got, [ONLY_EXITS, ONLY_EXITS, top, 3, 3, 1, 0], "top {top}");
        }
    }
}

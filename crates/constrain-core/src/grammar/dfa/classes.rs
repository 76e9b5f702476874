//! The character classes an automaton reads: the coarsest partition of the scalar values
//! that the character sets of its parts tell apart.

use crate::grammar::gbnf::charset;
use crate::grammar::Expr;
use rustc_hash::FxHashMap as HashMap;

use super::MAX_CLASSES;

/// A partition of the scalar values into classes: two values share a class when every
/// character set it was made from holds both or neither.
#[derive(Clone, Debug)]
pub(super) struct Classes {
    /// Each class's ranges (normalised scalar ranges).
    pub(super) ranges: Vec<Vec<(u32, u32)>>,
    /// Elementary intervals (start, end, class), sorted: the map from a range to classes.
    intervals: Vec<(u32, u32, usize)>,
}

impl Classes {
    /// The coarsest partition that tells apart what each of `sets` holds.
    pub(super) fn of_sets(mut sets: Vec<Vec<(u32, u32)>>) -> Option<Classes> {
        // A set written twice tells nothing new apart.
        sets.sort_unstable();
        sets.dedup();
        let mut cuts: Vec<u32> = vec![0, 0xD800, 0xE000, 0x11_0000];
        for s in &sets {
            for &(a, b) in s {
                cuts.push(a);
                cuts.push(b + 1);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut by_signature: HashMap<Vec<u32>, usize> = HashMap::default();
        let mut ranges: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut intervals = Vec::new();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1] - 1);
            if (0xD800..0xE000).contains(&a) {
                continue;
            }
            let signature: Vec<u32> = sets
                .iter()
                .enumerate()
                .filter(|(_, s)| s.iter().any(|&(x, y)| x <= a && a <= y))
                .map(|(i, _)| i as u32)
                .collect();
            let next = ranges.len();
            let class = *by_signature.entry(signature).or_insert(next);
            if class == next {
                if next == MAX_CLASSES {
                    return None;
                }
                ranges.push(Vec::new());
            }
            ranges[class].push((a, b));
            intervals.push((a, b, class));
        }
        for r in &mut ranges {
            *r = charset::normalize(std::mem::take(r));
        }
        Some(Classes { ranges, intervals })
    }

    pub(super) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The class of the scalar value `c`.
    pub(super) fn class_of(&self, c: u32) -> Option<usize> {
        let i = self.intervals.partition_point(|&(_, b, _)| b < c);
        self.intervals.get(i).filter(|&&(a, _, _)| a <= c).map(|&(_, _, class)| class)
    }

    /// The plainest character of `class`: its first ASCII letter or digit, else its first
    /// printable ASCII character other than `"` and `\\`, else its first character.
    pub(super) fn plainest(&self, class: usize) -> Option<char> {
        let ranges = self.ranges.get(class)?;
        let first_in = |lo: u32, hi: u32| {
            ranges.iter().find_map(|&(a, b)| {
                let (a, b) = (a.max(lo), b.min(hi));
                (a <= b).then_some(a)
            })
        };
        let pick = [('A', 'Z'), ('a', 'z'), ('0', '9')]
            .iter()
            .filter_map(|&(lo, hi)| first_in(lo as u32, hi as u32))
            .next()
            .or_else(|| (0x20..0x7F).find(|&c| c != 0x22 && c != 0x5C && first_in(c, c).is_some()))
            .or_else(|| ranges.first().map(|r| r.0))?;
        char::from_u32(pick)
    }

    /// The classes a character set covers (the partition makes it a union of classes).
    pub(super) fn covering(&self, set: &[(u32, u32)]) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .intervals
            .iter()
            .filter(|&&(a, _, _)| set.iter().any(|&(x, y)| x <= a && a <= y))
            .map(|&(_, _, c)| c)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The expression of one character out of the classes `set`.
    pub(super) fn chars(&self, set: &[usize]) -> Expr {
        let all: Vec<(u32, u32)> = set.iter().flat_map(|&c| self.ranges[c].iter().copied()).collect();
        let all = charset::normalize(all);
        if all.is_empty() {
            Expr::Nothing
        } else {
            Expr::Chars(charset::to_chars(&all))
        }
    }
}

/// The character sets of `e` (as normalised scalar ranges).
pub(super) fn collect_sets(e: &Expr, out: &mut Vec<Vec<(u32, u32)>>, depth: usize) -> Option<()> {
    if depth > 200 {
        return None;
    }
    match e {
        Expr::Empty | Expr::Nothing => {}
        Expr::Literal(b) => {
            for c in std::str::from_utf8(b).ok()?.chars() {
                out.push(vec![(c as u32, c as u32)]);
            }
        }
        Expr::Chars(_) | Expr::Bytes(_) => out.push(char_ranges(e)?),
        Expr::Seq(v) | Expr::Alt(v) => {
            for x in v {
                collect_sets(x, out, depth + 1)?;
            }
        }
        Expr::Repeat { expr, .. } => collect_sets(expr, out, depth + 1)?,
        Expr::Ref(_) => return None,
    }
    Some(())
}

/// The characters one `Chars` or (ASCII) `Bytes` expression matches, as normalised scalar
/// ranges; `None` for any other expression, or bytes that are not whole characters.
pub(super) fn char_ranges(e: &Expr) -> Option<Vec<(u32, u32)>> {
    let raw: Vec<(u32, u32)> = match e {
        Expr::Chars(r) => r.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
        Expr::Bytes(r) if r.iter().all(|&(_, b)| b < 0x80) => r.iter().map(|&(a, b)| (a as u32, b as u32)).collect(),
        _ => return None,
    };
    Some(charset::normalize(raw))
}

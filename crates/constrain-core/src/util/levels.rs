//! [`Levels`]: a stack of levels over one arena of items, for state that grows a step at a
//! time and rolls back whole steps.
//!
//! The parsers of the engine keep their per-step state this way: each accepted token (the
//! matcher), each byte of a trie walk (the mask's suffix check), each token of the run-time
//! checks appends its items (parse-stack tops, output bytes) to one `Vec` and remembers where
//! they started, so that rolling back a step is popping its level and truncating the arena
//! there. Written once here instead of by hand at each site: a level's items are always
//! `items[start..next start]`, and a pop always truncates to its level's start.
//!
//! The arena and the levels are [`ForkVec`]s, so [`Levels::fork`] costs the same at any
//! length; the innermost level's items are always owned, so [`Levels::top`] is one slice.
//! No allocation beyond the vectors' growth (kept across [`Levels::clear`]); every method
//! on the hot path is a few instructions and inlined.

use super::ForkVec;

/// Levels over an arena: level `i` holds a value of `M` (what the caller needs to know or
/// undo about that step) and the items pushed since it was opened, up to the next level.
#[derive(Clone, Debug)]
pub struct Levels<T, M> {
    items: ForkVec<T>,
    /// Per level: where its items start in `items`, and its value.
    levels: ForkVec<(usize, M)>,
}

impl<T, M> Default for Levels<T, M> {
    fn default() -> Self {
        Levels { items: ForkVec::new(), levels: ForkVec::new() }
    }
}

impl<T, M> Levels<T, M> {
    /// No level and no item.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops every level and item (keeps the allocations).
    #[inline]
    pub fn clear(&mut self) {
        self.items.clear();
        self.levels.clear();
    }

    /// Opens a level with value `meta` and returns the arena's owned tail, to append the
    /// level's items to. Only append: the items below belong to the levels underneath.
    #[inline]
    pub fn open(&mut self, meta: M) -> &mut Vec<T> {
        self.levels.push((self.items.len(), meta));
        self.items.tail_mut()
    }

    /// The number of levels.
    #[inline]
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// Whether there is no level.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The innermost level's value.
    #[inline]
    pub fn last(&self) -> Option<&M> {
        self.levels.last().map(|(_, m)| m)
    }

    /// Where the innermost level's items start (0 when there is no level).
    #[inline]
    fn top_start(&self) -> usize {
        self.levels.last().map_or(0, |l| l.0)
    }

    /// The innermost level's items (all items when there is no level).
    #[inline]
    pub fn top(&self) -> &[T] {
        let start = self.top_start();
        debug_assert!(start >= self.items.shared_len(), "the innermost level's items are owned");
        self.items.owned_from(start).unwrap_or(&[])
    }

    /// Every level's items, outermost first.
    #[inline]
    pub fn items(&self) -> &ForkVec<T> {
        &self.items
    }
}

impl<T: Clone, M: Clone> Levels<T, M> {
    /// Closes the innermost level: drops its items and returns its value.
    #[inline]
    pub fn pop(&mut self) -> Option<M> {
        let (start, meta) = self.levels.pop()?;
        self.items.truncate(start);
        let top = self.top_start();
        if top < self.items.shared_len() {
            self.items.thaw_from(top);
        }
        Some(meta)
    }

    /// The innermost level's value, to change.
    #[inline]
    pub fn last_mut(&mut self) -> Option<&mut M> {
        self.levels.last_mut().map(|(_, m)| m)
    }

    /// Opens a level with value `meta` holding a copy of the innermost level's items.
    #[inline]
    pub fn open_copy(&mut self, meta: M) {
        let start = self.top_start();
        let end = self.items.len();
        self.levels.push((end, meta));
        self.items.extend_from_within(start..end);
    }

    /// An independent copy at the same point, in time that does not grow with the number
    /// of levels ([`ForkVec::fork`]): both share everything below the innermost level.
    pub fn fork(&mut self) -> Levels<T, M> {
        let top = self.top_start();
        Levels { items: self.items.fork(top), levels: self.levels.fork(usize::MAX) }
    }
}

#[cfg(test)]
mod tests {
    use super::Levels;

    #[test]
    fn a_pop_drops_its_level_s_items_only() {
        let mut l: Levels<u32, char> = Levels::new();
        l.open('a').extend_from_slice(&[1, 2]);
        l.open('b').push(3);
        l.open_copy('c');
        assert_eq!((l.len(), l.last(), l.top()), (3, Some(&'c'), &[3][..]));
        assert_eq!(&*l.items().as_contiguous(), &[1, 2, 3, 3][..]);
        assert_eq!(l.pop(), Some('c'));
        assert_eq!(l.pop(), Some('b'));
        assert_eq!((l.top(), &*l.items().as_contiguous()), (&[1, 2][..], &[1, 2][..]));
        if let Some(m) = l.last_mut() {
            *m = 'z';
        }
        assert_eq!(l.pop(), Some('z'));
        assert_eq!((l.pop(), l.is_empty(), l.items().len()), (None, true, 0));
    }

    /// Forks at every level of a long history, then pops both sides down to the start: each
    /// sees its own levels, and every top is one slice of the right items.
    #[test]
    fn forks_pop_apart_and_keep_their_tops() {
        let mut l: Levels<u32, usize> = Levels::new();
        let mut reference: Vec<Vec<u32>> = Vec::new();
        for i in 0..1_000u32 {
            let items: Vec<u32> = (0..i % 7).map(|j| i * 10 + j).collect();
            l.open(i as usize).extend_from_slice(&items);
            reference.push(items);
            if i % 97 == 0 {
                let mut f = l.fork();
                f.open(usize::MAX).push(u32::MAX);
                assert_eq!(f.top(), &[u32::MAX][..]);
                assert_eq!(f.pop(), Some(usize::MAX));
                for (k, items) in reference.iter().enumerate().rev().take(300) {
                    assert_eq!((f.last(), f.top()), (Some(&k), &items[..]));
                    f.pop();
                }
            }
        }
        for (k, items) in reference.iter().enumerate().rev() {
            assert_eq!((l.last(), l.top()), (Some(&k), &items[..]));
            assert_eq!(l.items().len(), reference[..=k].iter().map(Vec::len).sum::<usize>());
            l.pop();
        }
        assert!(l.is_empty());
    }
}

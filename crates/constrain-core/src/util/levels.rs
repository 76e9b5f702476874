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
//! No allocation beyond the two `Vec`s' growth (kept across [`Levels::clear`]); every
//! method is a few instructions and inlined.

/// Levels over an arena: level `i` holds a value of `M` (what the caller needs to know or
/// undo about that step) and the items pushed since it was opened, up to the next level.
#[derive(Clone, Debug)]
pub struct Levels<T, M> {
    items: Vec<T>,
    /// Per level: where its items start in `items`, and its value.
    levels: Vec<(usize, M)>,
}

impl<T, M> Default for Levels<T, M> {
    fn default() -> Self {
        Levels { items: Vec::new(), levels: Vec::new() }
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

    /// Opens a level with value `meta` and returns the arena, to append the level's items
    /// to. Only append: the items below belong to the levels underneath.
    #[inline]
    pub fn open(&mut self, meta: M) -> &mut Vec<T> {
        self.levels.push((self.items.len(), meta));
        &mut self.items
    }

    /// Closes the innermost level: drops its items and returns its value.
    #[inline]
    pub fn pop(&mut self) -> Option<M> {
        let (start, meta) = self.levels.pop()?;
        self.items.truncate(start);
        Some(meta)
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

    /// The innermost level's value, to change.
    #[inline]
    pub fn last_mut(&mut self) -> Option<&mut M> {
        self.levels.last_mut().map(|(_, m)| m)
    }

    /// The innermost level's items (all items when there is no level).
    #[inline]
    pub fn top(&self) -> &[T] {
        let start = self.levels.last().map_or(0, |l| l.0);
        self.items.get(start..).unwrap_or(&[])
    }

    /// Every level's items, outermost first.
    #[inline]
    pub fn items(&self) -> &[T] {
        &self.items
    }
}

impl<T: Clone, M> Levels<T, M> {
    /// Opens a level with value `meta` holding a copy of the innermost level's items.
    #[inline]
    pub fn open_copy(&mut self, meta: M) {
        let start = self.levels.last().map_or(0, |l| l.0);
        let end = self.items.len();
        self.levels.push((end, meta));
        self.items.extend_from_within(start..end);
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
        assert_eq!((l.len(), l.last(), l.top(), l.items()), (3, Some(&'c'), &[3][..], &[1, 2, 3, 3][..]));
        assert_eq!(l.pop(), Some('c'));
        assert_eq!(l.pop(), Some('b'));
        assert_eq!((l.top(), l.items()), (&[1, 2][..], &[1, 2][..]));
        if let Some(m) = l.last_mut() {
            *m = 'z';
        }
        assert_eq!(l.pop(), Some('z'));
        assert_eq!((l.pop(), l.is_empty(), l.items()), (None, true, &[][..]));
    }
}

//! [`ForkVec`]: a vector that forks in constant time, for the per-sequence state that beam
//! search copies at every step (the parse stacks' frames, the matcher's levels, the run-time
//! checks' text and snapshots).
//!
//! Its items are kept in two parts. Below [`ForkVec::shared_len`] they sit in full chunks of
//! [`CHUNK`] items behind `Arc`s, shared by every fork and never written again; above it they
//! sit in an owned tail, an ordinary `Vec`. Pushing, popping and reading the tail cost what a
//! `Vec`'s do, and reading a shared item costs two loads more. A vector that is never forked
//! has no shared part at all.
//!
//! [`ForkVec::fork`] first moves the tail's full chunks into the shared part (each item is
//! moved once in its life, and moved, not cloned, so this is a `memcpy` per pushed item
//! over time), then copies
//! what is left of the tail: under one chunk, plus what the caller asks to keep owned. So
//! the cost of a fork does not grow with the vector's length. Truncating into the shared
//! part copies the chunks it reaches back into the tail ("thawing"), since a shared chunk is
//! never written.
//!
//! The list of shared chunks is itself behind an `Arc`, so a fork clones one pointer for
//! it. Adding chunks to a list that another fork also holds copies the list (one pointer a
//! chunk), once per [`CHUNK`] items pushed after a fork.

use std::borrow::Cow;
use std::ops::{Index, Range};
use std::sync::Arc;

/// Items per shared chunk (a power of two): the most a fork copies beyond what its caller
/// keeps owned. A constant of the structure, not a limit.
pub const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNK_BITS: u32 = 8;
const CHUNK_MASK: usize = CHUNK - 1;

/// A vector of `T` with constant-time forks: old items shared behind `Arc`s, recent ones
/// owned (see the [module docs](self)).
#[derive(Debug)]
pub struct ForkVec<T> {
    /// Chunk `k` holds items `k * CHUNK ..(k + 1) * CHUNK`; each has exactly `CHUNK` items.
    shared: Arc<Vec<Arc<[T]>>>,
    /// `shared.len() * CHUNK`: the index of `tail[0]`.
    base: usize,
    tail: Vec<T>,
}

impl<T> Default for ForkVec<T> {
    fn default() -> Self {
        ForkVec { shared: Arc::new(Vec::new()), base: 0, tail: Vec::new() }
    }
}

impl<T: Clone> Clone for ForkVec<T> {
    /// Shares the shared part and copies the tail (as it is: see [`ForkVec::fork`]).
    fn clone(&self) -> Self {
        ForkVec { shared: Arc::clone(&self.shared), base: self.base, tail: self.tail.clone() }
    }
}

impl<T> ForkVec<T> {
    /// An empty vector.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of items.
    #[inline]
    pub fn len(&self) -> usize {
        self.base + self.tail.len()
    }

    /// Whether there is no item.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of items in the shared part: those at lower indices are read only.
    #[inline]
    pub fn shared_len(&self) -> usize {
        self.base
    }

    /// Item `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.base {
            self.tail.get(i - self.base)
        } else {
            self.shared.get(i >> CHUNK_BITS).and_then(|c| c.get(i & CHUNK_MASK))
        }
    }

    /// The last item.
    #[inline]
    pub fn last(&self) -> Option<&T> {
        match self.tail.last() {
            Some(x) => Some(x),
            None => self.shared.last().and_then(|c| c.last()),
        }
    }

    /// Appends an item (to the owned tail).
    #[inline]
    pub fn push(&mut self, item: T) {
        self.tail.push(item);
    }

    /// The owned tail, to append to: its items are those from [`ForkVec::shared_len`] on.
    #[inline]
    pub fn tail_mut(&mut self) -> &mut Vec<T> {
        &mut self.tail
    }

    /// Items `start..` when all of them are owned (`start` ≥ [`ForkVec::shared_len`]);
    /// `None` otherwise (see [`ForkVec::thaw_from`]).
    #[inline]
    pub fn owned_from(&self, start: usize) -> Option<&[T]> {
        self.tail.get(start.checked_sub(self.base)?..)
    }

    /// Drops every item (and the share in other forks' chunks; keeps the tail's allocation).
    pub fn clear(&mut self) {
        if self.base > 0 {
            self.shared = Arc::new(Vec::new());
            self.base = 0;
        }
        self.tail.clear();
    }
}

impl<T: Clone> ForkVec<T> {
    /// Makes items `start..` owned, copying the shared chunks that hold them into the tail.
    pub fn thaw_from(&mut self, start: usize) {
        if start >= self.base {
            return;
        }
        let first = start >> CHUNK_BITS;
        let chunks = &self.shared[first..];
        let mut tail = Vec::with_capacity(chunks.len() * CHUNK + self.tail.len());
        for c in chunks {
            tail.extend_from_slice(c);
        }
        tail.append(&mut self.tail);
        self.tail = tail;
        Arc::make_mut(&mut self.shared).truncate(first);
        self.base = first * CHUNK;
    }

    /// Keeps the first `len` items.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.base {
            self.thaw_from(len);
        }
        self.tail.truncate(len - self.base);
    }

    /// Removes and returns the last item.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.tail.is_empty() && self.base > 0 {
            self.thaw_from(self.base - 1);
        }
        self.tail.pop()
    }

    /// The last item, to change (made owned first if it is shared).
    #[inline]
    pub fn last_mut(&mut self) -> Option<&mut T> {
        if self.tail.is_empty() && self.base > 0 {
            self.thaw_from(self.base - 1);
        }
        self.tail.last_mut()
    }

    /// An independent vector with the same items, in time that does not grow with the length:
    /// the full chunks of the tail below `keep_owned_from` become shared (here and in the fork),
    /// and the fork copies the rest of the tail. Owned items from `keep_owned_from` on stay
    /// owned in both, so that a caller can keep reading them as one slice
    /// ([`ForkVec::owned_from`]).
    pub fn fork(&mut self, keep_owned_from: usize) -> ForkVec<T> {
        let end = keep_owned_from.min(self.len());
        let full = end.saturating_sub(self.base) >> CHUNK_BITS;
        if full > 0 {
            // Moved, not cloned: the items' own allocations go with them.
            let rest = self.tail.split_off(full * CHUNK);
            let mut moved = std::mem::replace(&mut self.tail, rest).into_iter();
            let shared = Arc::make_mut(&mut self.shared);
            for _ in 0..full {
                shared.push(Arc::from(moved.by_ref().take(CHUNK).collect::<Vec<T>>()));
            }
            self.base += full * CHUNK;
        }
        self.clone()
    }

    /// Items `range` as one slice: borrowed when they sit in one chunk or in the tail, copied
    /// otherwise.
    pub fn slice(&self, range: Range<usize>) -> Cow<'_, [T]> {
        let Range { start, end } = range;
        let end = end.min(self.len());
        if start >= end {
            return Cow::Borrowed(&[]);
        }
        if start >= self.base {
            return Cow::Borrowed(&self.tail[start - self.base..end - self.base]);
        }
        if end <= self.base && start >> CHUNK_BITS == (end - 1) >> CHUNK_BITS {
            let c = &self.shared[start >> CHUNK_BITS];
            return Cow::Borrowed(&c[start & CHUNK_MASK..((end - 1) & CHUNK_MASK) + 1]);
        }
        let mut out = Vec::with_capacity(end - start);
        self.extend_into(start..end, &mut out);
        Cow::Owned(out)
    }

    /// Appends items `range` (clipped to the length) to `out`.
    pub fn extend_into(&self, range: Range<usize>, out: &mut Vec<T>) {
        let end = range.end.min(self.len());
        let mut i = range.start;
        while i < end.min(self.base) {
            let c = &self.shared[i >> CHUNK_BITS];
            let to = (((i >> CHUNK_BITS) + 1) * CHUNK).min(end);
            let from = i & CHUNK_MASK;
            out.extend_from_slice(&c[from..from + (to - i)]);
            i = to;
        }
        if i < end {
            out.extend_from_slice(&self.tail[i - self.base..end - self.base]);
        }
    }

    /// Appends a copy of items `range`, which must be owned (a no-op where they are not).
    #[inline]
    pub fn extend_from_within(&mut self, range: Range<usize>) {
        if range.start >= self.base && range.end <= self.len() && range.start <= range.end {
            self.tail.extend_from_within(range.start - self.base..range.end - self.base);
        }
    }

    /// Every item, as one slice: borrowed while nothing is shared.
    pub fn as_contiguous(&self) -> Cow<'_, [T]> {
        self.slice(0..self.len())
    }
}

impl<T> Index<usize> for ForkVec<T> {
    type Output = T;

    /// Item `i`; panics past the end, as a slice does.
    #[inline]
    fn index(&self, i: usize) -> &T {
        if i >= self.base {
            &self.tail[i - self.base]
        } else {
            &self.shared[i >> CHUNK_BITS][i & CHUNK_MASK]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ForkVec, CHUNK};

    fn items<T: Clone>(v: &ForkVec<T>) -> Vec<T> {
        v.as_contiguous().into_owned()
    }

    /// A fixed-seed walk of pushes, pops, truncations and forks, each vector checked against
    /// a plain `Vec` after every operation; forks must not see each other's changes.
    #[test]
    fn forks_behave_as_independent_copies() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut vecs: Vec<(ForkVec<u32>, Vec<u32>)> = vec![(ForkVec::new(), Vec::new())];
        let mut counter = 0u32;
        for step in 0..20_000 {
            let k = next(vecs.len() as u64) as usize;
            match next(100) {
                0..=59 => {
                    for _ in 0..=next(40) {
                        counter += 1;
                        vecs[k].0.push(counter);
                        vecs[k].1.push(counter);
                    }
                }
                60..=69 => {
                    let (v, r) = &mut vecs[k];
                    assert_eq!(v.pop(), r.pop());
                }
                70..=79 => {
                    let (v, r) = &mut vecs[k];
                    let len = next(r.len() as u64 + 1) as usize;
                    v.truncate(len);
                    r.truncate(len);
                }
                80..=84 => {
                    let (v, r) = &mut vecs[k];
                    if let (Some(a), Some(b)) = (v.last_mut(), r.last_mut()) {
                        *a += 1_000_000;
                        *b += 1_000_000;
                    }
                }
                _ if vecs.len() < 12 => {
                    let keep = next(vecs[k].1.len() as u64 + 1) as usize;
                    let owned = keep.max(vecs[k].0.shared_len());
                    let f = vecs[k].0.fork(keep);
                    for v in [&vecs[k].0, &f] {
                        assert!(v.owned_from(owned).is_some(), "step {step}: items from {owned} stay owned");
                    }
                    let r = vecs[k].1.clone();
                    vecs.push((f, r));
                }
                _ => {
                    vecs.swap_remove(k);
                }
            }
            for (v, r) in &vecs {
                assert_eq!(v.len(), r.len(), "step {step}");
                assert_eq!(v.last(), r.last(), "step {step}");
            }
        }
        for (v, r) in &vecs {
            assert_eq!(&items(v), r);
            for (i, x) in r.iter().enumerate() {
                assert_eq!((v[i], v.get(i)), (*x, Some(x)));
            }
            for a in (0..r.len()).step_by(37) {
                for b in (a..=r.len()).step_by(101) {
                    assert_eq!(&*v.slice(a..b), &r[a..b]);
                }
            }
        }
    }

    #[test]
    fn a_fork_copies_at_most_a_chunk_of_what_is_not_kept() {
        let mut v: ForkVec<u32> = ForkVec::new();
        for i in 0..10 * CHUNK as u32 + 17 {
            v.push(i);
        }
        let w = v.fork(usize::MAX);
        assert_eq!((v.shared_len(), w.shared_len()), (10 * CHUNK, 10 * CHUNK));
        assert_eq!(w.owned_from(10 * CHUNK).map(<[u32]>::len), Some(17));
        let keep = 12 * CHUNK + 3;
        for i in 0..3 * CHUNK as u32 {
            v.push(i);
        }
        let w = v.fork(keep);
        assert_eq!(v.shared_len(), 12 * CHUNK);
        assert_eq!(w.owned_from(keep).map(<[u32]>::len), Some(v.len() - keep));
        // A slice within one shared chunk is borrowed; one across chunks is copied.
        assert!(matches!(w.slice(3..9), std::borrow::Cow::Borrowed(_)));
        assert!(matches!(w.slice(CHUNK - 1..CHUNK + 1), std::borrow::Cow::Owned(_)));
    }
}

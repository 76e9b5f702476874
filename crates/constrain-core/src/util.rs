//! Small helpers shared by the stages: 128-bit structural hashing (the keys of every cache),
//! token bitsets (the masks), [`Levels`] (per-step state with rollback) over [`ForkVec`]
//! (a vector that forks in constant time), and the one subset
//! construction (`subset`, for the PDA builder and the character automata of
//! [`crate::grammar::dfa`]). They sit below [`crate::grammar`], [`crate::automaton`] and
//! [`crate::mask`] so that none needs to reach into another for them.

pub(crate) mod cache;
mod forkvec;
mod levels;
pub(crate) mod subset;

pub use forkvec::{ForkVec, CHUNK};
pub use levels::Levels;

use std::hash::Hash;

/// A streaming form of [`hash128`], for keys built from many parts without collecting them
/// first.
pub(crate) struct Hasher128(xxhash_rust::xxh3::Xxh3);

impl Hasher128 {
    /// A hasher with nothing fed yet, keyed by this process's [`secret`].
    pub(crate) fn new() -> Self {
        Hasher128(xxhash_rust::xxh3::Xxh3::with_secret(*secret()))
    }

    /// Feeds `x`.
    pub(crate) fn add<T: Hash + ?Sized>(&mut self, x: &T) {
        x.hash(&mut self.0);
    }

    /// The 128-bit hash of what was fed.
    pub(crate) fn finish128(&self) -> u128 {
        self.0.digest128()
    }
}

/// The XXH3 secret of every [`hash128`] in this process: 192 bytes drawn once, at random,
/// from the standard library's per-process hash keys.
///
/// Cache keys are 128-bit hashes, and two equal keys are taken to be the same entry (the
/// caches never compare the values behind them: a collision between two different contexts
/// would hand one the other's mask). By chance that is about 2^-64 for a pair. Keying the
/// hash per process means a schema or grammar cannot be crafted ahead of time to collide
/// with another: the keys it would need are different in every run. The one read-only
/// process-wide value in the engine.
fn secret() -> &'static [u8; 192] {
    static SECRET: std::sync::OnceLock<[u8; 192]> = std::sync::OnceLock::new();
    SECRET.get_or_init(|| {
        use std::hash::BuildHasher;
        let keys = std::collections::hash_map::RandomState::new();
        let mut out = [0u8; 192];
        for (i, chunk) in out.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&keys.hash_one(i as u64).to_le_bytes());
        }
        out
    })
}

/// A 128-bit hash of `x` (XXH3-128 with a secret drawn once per process): the same within a
/// process, different between processes, so no input can be crafted ahead of time to
/// collide. The key of every cache in the engine, and of the front ends' memos.
pub fn hash128<T: Hash + ?Sized>(x: &T) -> u128 {
    let mut h = Hasher128::new();
    h.add(x);
    h.finish128()
}

/// A set of bytes as 256 bits: the first bytes a parse state takes, or a cache key made of
/// first bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    /// Adds `byte`.
    #[inline]
    pub(crate) fn insert(&mut self, byte: u8) {
        self.0[byte as usize / 64] |= 1 << (byte % 64);
    }

    /// Adds the bytes `lo..=hi`, a word at a time.
    #[inline]
    pub(crate) fn insert_range(&mut self, lo: u8, hi: u8) {
        for w in lo as usize / 64..=hi as usize / 64 {
            let first = if w == lo as usize / 64 { lo % 64 } else { 0 };
            let last = if w == hi as usize / 64 { hi % 64 } else { 63 };
            self.0[w] |= (u64::MAX >> (63 - last)) & (u64::MAX << first);
        }
    }

    /// Whether `byte` is in the set.
    #[inline]
    pub(crate) fn contains(&self, byte: u8) -> bool {
        self.0[byte as usize / 64] & (1 << (byte % 64)) != 0
    }
}

/// Sets bit `id` of a mask (ignored past its end).
#[inline]
pub(crate) fn set_bit(mask: &mut [u32], id: u32) {
    if let Some(w) = mask.get_mut((id / 32) as usize) {
        *w |= 1 << (id % 32);
    }
}

/// Whether token `id` is allowed in `mask`.
#[inline]
pub fn is_allowed(mask: &[u32], id: crate::TokenId) -> bool {
    mask.get(id.index() / 32).is_some_and(|w| w >> (id.index() % 32) & 1 == 1)
}

/// Keeps in `mask` the allowed tokens `keep` says yes to (asked in increasing id order) and
/// clears the others; returns how many are left. Stops at `keep`'s first error, the mask then
/// filtered only that far.
pub(crate) fn try_retain_tokens<E>(
    mask: &mut [u32],
    mut keep: impl FnMut(crate::TokenId) -> Result<bool, E>,
) -> Result<usize, E> {
    let mut left = 0;
    for (w, slot) in mask.iter_mut().enumerate() {
        let mut word = *slot;
        while word != 0 {
            let bit = word.trailing_zeros();
            word &= word - 1;
            if keep(crate::TokenId((w as u32) * 32 + bit))? {
                left += 1;
            } else {
                *slot &= !(1 << bit);
            }
        }
    }
    Ok(left)
}

/// Clears the bits of `ids` in `bits`.
pub(crate) fn clear_bits(bits: &mut [u32], ids: &[u32]) {
    for &id in ids {
        if let Some(w) = bits.get_mut((id / 32) as usize) {
            *w &= !(1 << (id % 32));
        }
    }
}

/// `*a |= b`, word by word.
#[inline]
pub(crate) fn or_into(a: &mut [u32], b: &[u32]) {
    for (w, &s) in a.iter_mut().zip(b) {
        *w |= s;
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSet;

    #[test]
    fn byte_set_ranges_match_single_inserts() {
        for (lo, hi) in [(0u8, 0u8), (0, 255), (3, 70), (63, 64), (64, 127), (100, 200), (128, 191), (255, 255)] {
            let (mut ranged, mut single) = (ByteSet::default(), ByteSet::default());
            ranged.insert_range(lo, hi);
            (lo..=hi).for_each(|b| single.insert(b));
            assert_eq!(ranged, single, "{lo}..={hi}");
            assert!((0..=255u8).all(|b| ranged.contains(b) == (lo..=hi).contains(&b)));
        }
    }
}

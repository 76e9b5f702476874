//! Closing: how far the output is from a complete one, the shortest way there, and which
//! tokens bring it nearer (what a decode loop uses when its token budget runs low).

use super::{Error, Matcher};
use crate::automaton::distance::UNREACHABLE;
use crate::automaton::exec::BOTTOM;
use crate::automaton::FrameId;

/// Ends of an undeclared key that goes past a written name ([`Matcher::min_bytes_to_finish_checked`]),
/// inside the key and, after a comma, with its opening quote.
const PAST_WRITTEN_NAME: [&[u8]; 8] = [b"a\"", b"0\"", b"_\"", b"x\"", b"\"a\"", b"\"0\"", b"\"_\"", b"\"x\""];

/// Where [`Matcher::min_bytes_to_finish_checked`] goes first: nowhere (the grammar's
/// shortest way), or through one of the key endings it tried.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// The grammar's way from here.
    Grammar,
    /// Through `Matcher::key_endings[i]`.
    Ending(usize),
    /// Through `PAST_WRITTEN_NAME[i]`.
    Past(usize),
}

impl Matcher {
    /// The fewest bytes that bring the output so far to a complete string of the grammar:
    /// 0 when it is complete, else the minimum over the parse stacks of the sum over each
    /// stack's frames of what completes that frame's rule. Paths use only bytes the
    /// vocabulary has single-byte tokens for, so this also bounds the tokens needed. `None`
    /// when no completion exists with those tokens.
    pub fn min_bytes_to_finish(&self) -> Option<u64> {
        let level = self.level();
        if level.finished || level.accepting {
            return Some(0);
        }
        self.nearest_top().map(|(_, d)| d)
    }

    /// The current top whose stack is nearest the end, and its distance (see
    /// [`Matcher::min_bytes_to_finish`]); `None` when no stack can complete.
    fn nearest_top(&self) -> Option<(FrameId, u64)> {
        let inner = &self.constraint.inner;
        let dist = self.constraint.distances();
        let mut best = (BOTTOM, UNREACHABLE);
        for &top in self.current_tops() {
            let mut sum = 0u64;
            let mut f = top;
            while f != BOTTOM && sum < best.1 {
                let Some(frame) = self.stacks.frame(f) else { break };
                sum = sum.saturating_add(dist.of_frame(&inner.pda, frame));
                f = frame.parent();
            }
            if sum < best.1 {
                best = (top, sum);
            }
        }
        Some(best).filter(|&(_, d)| d != UNREACHABLE)
    }

    /// Writes into `out` a shortest completion of the output so far, as far as run-time
    /// checks allow: bytes that bring it to a complete output the matcher accepts, checks
    /// included, each a byte the vocabulary has a single-byte token for. Empty when the
    /// output is complete. Returns false (and leaves `out` empty) when none is found.
    ///
    /// How: the distances' steps are walked down the nearest stack, through the key ending
    /// [`Matcher::min_bytes_to_finish_checked`] measures (so without checks it is that many
    /// bytes). The walk is then fed to the matcher; a check knows only the key it is in, so
    /// the walk is made again at each later key it has a say in (and where it refuses a
    /// byte), from there. Costs the walks' length in byte steps (all rolled back): call it
    /// only near the end of a budget.
    pub fn shortest_completion(&mut self, out: &mut Vec<u8>) -> Result<bool, Error> {
        let found = self.attempt_completion(out);
        if !matches!(found, Ok(true)) {
            out.clear();
        }
        found
    }

    /// [`Matcher::shortest_completion`], leaving in `out` the bytes the matcher accepted also
    /// when it fails: the walk up to the byte refused (where a liveness proof repairs it).
    pub(crate) fn attempt_completion(&mut self, out: &mut Vec<u8>) -> Result<bool, Error> {
        /// Walks made again at most (each after a refused byte), and their bytes at most: a
        /// constant of the algorithm, not a user limit (past it the answer is "not found",
        /// which the liveness proof repairs; never a wrong completion).
        const MAX_WALKS: usize = 256;
        const MAX_BYTES: usize = 1 << 20;
        out.clear();
        let before = self.num_tokens();
        let mut piece = Vec::new();
        let mut found = Ok(false);
        for _ in 0..MAX_WALKS {
            match self.walk_completion(&mut piece) {
                Ok(true) => {}
                other => {
                    found = other;
                    break;
                }
            }
            let mut taken = 0;
            for &b in &piece {
                match self.accept_bytes(&[b]) {
                    Ok(()) => taken += 1,
                    Err(Error::RejectedBytes) => break,
                    Err(e) => {
                        found = Err(e);
                        break;
                    }
                }
                if taken < piece.len() && self.at_checked_key() {
                    break;
                }
            }
            out.extend_from_slice(&piece[..taken]);
            if found.is_err() || taken == 0 || out.len() > MAX_BYTES {
                break;
            }
            if taken == piece.len() {
                found = Ok(self.is_accepting());
                break;
            }
        }
        self.rollback(self.num_tokens() - before)?;
        found
    }

    /// Whether the run-time checks have a say in how the key here ends (see
    /// [`Matcher::min_bytes_to_finish_checked`]): where a walk must be made again.
    fn at_checked_key(&mut self) -> bool {
        let mut endings = std::mem::take(&mut self.key_endings);
        let checked = self.checker.as_mut().is_some_and(|c| c.key_endings(&mut endings));
        self.key_endings = endings;
        checked
    }

    /// One walk of [`Matcher::shortest_completion`]: the distances' steps from here, through
    /// the key ending [`Matcher::min_bytes_to_finish_checked`] goes through, written into
    /// `out`; exactly that many bytes. False when the walk finds no way.
    fn walk_completion(&mut self, out: &mut Vec<u8>) -> Result<bool, Error> {
        out.clear();
        let (way, d) = self.checked_way()?;
        let Some(d) = d else { return Ok(false) };
        match way {
            Way::Grammar => {}
            Way::Ending(i) => out.extend_from_slice(self.key_endings.get(i).map_or(&[][..], |e| e.as_slice())),
            Way::Past(i) => out.extend_from_slice(PAST_WRITTEN_NAME.get(i).copied().unwrap_or_default()),
        }
        let lead = !out.is_empty();
        if lead {
            self.accept_bytes(out)?;
        }
        let mut frames = Vec::new();
        let done = self.level().accepting
            || self.nearest_top().is_some_and(|(top, _)| {
                let mut f = top;
                while let Some(frame) = self.stacks.frame(f) {
                    frames.push((frame.node(), frame.count()));
                    f = frame.parent();
                }
                frames.reverse();
                let inner = &self.constraint.inner;
                let max_bytes = usize::try_from(d).unwrap_or(usize::MAX);
                self.constraint.distances().walk(&inner.pda, &mut frames, out, max_bytes, inner.limits.max_stack_depth)
            });
        if lead {
            self.rollback(1)?;
        }
        Ok(done && out.len() as u64 == d)
    }

    /// [`Matcher::min_bytes_to_finish`], with what run-time checks refuse taken into
    /// account where it matters: inside a key of a checked object (or after its comma) that
    /// so far begins a name written already, the grammar's shortest way may finish that
    /// name again, which the check refuses. There the distance is the least over the ways
    /// to end the key that the check allows (each tried: accepted, measured, rolled back);
    /// where no name can end it, over a few undeclared keys that go past it; where none of
    /// those is allowed either, the grammar's. Elsewhere it is the grammar's. Closing mode
    /// measures with this.
    pub fn min_bytes_to_finish_checked(&mut self) -> Result<Option<u64>, Error> {
        Ok(self.checked_way()?.1)
    }

    /// The way [`Matcher::min_bytes_to_finish_checked`] measures, and its distance.
    fn checked_way(&mut self) -> Result<(Way, Option<u64>), Error> {
        let mut endings = std::mem::take(&mut self.key_endings);
        if !self.checker.as_mut().is_some_and(|c| c.key_endings(&mut endings)) {
            self.key_endings = endings;
            return Ok((Way::Grammar, self.min_bytes_to_finish()));
        }
        let best = endings.iter().enumerate().try_fold(None, |best: Option<(usize, u64)>, (i, e)| {
            Ok::<_, Error>(match self.distance_after(e)? {
                Some(d) if best.is_none_or(|(_, b)| d < b) => Some((i, d)),
                _ => best,
            })
        });
        self.key_endings = endings;
        if let Some((i, d)) = best? {
            return Ok((Way::Ending(i), Some(d)));
        }
        // No name is left to finish the key (it spells a written one so far): the way on is
        // an undeclared key that goes past it, when the object takes one. Try a few; failing
        // those, the grammar's distance (possibly short, as said above) stands.
        for (i, past) in PAST_WRITTEN_NAME.iter().enumerate() {
            if let Ok(Some(d)) = self.distance_after(past) {
                return Ok((Way::Past(i), Some(d)));
            }
        }
        Ok((Way::Grammar, self.min_bytes_to_finish()))
    }

    /// `bytes` and then [`Matcher::min_bytes_to_finish`] from after them, measured without
    /// keeping them (accepted, measured, rolled back); `None` when they are refused or
    /// lead nowhere.
    fn distance_after(&mut self, bytes: &[u8]) -> Result<Option<u64>, Error> {
        match self.accept_bytes(bytes) {
            Ok(()) => {
                let d = self.min_bytes_to_finish().map(|d| d.saturating_add(bytes.len() as u64));
                self.rollback(1)?;
                Ok(d)
            }
            Err(Error::RejectedBytes) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Closing mode: clears from `mask` (a mask [`Matcher::fill_mask`] wrote) every token
    /// after which [`Matcher::min_bytes_to_finish_checked`] is not below `below`; EOS stays only
    /// where the output is complete. Tries each allowed token (accept, measure, roll back),
    /// so it costs one token step per allowed token: call it only when closing. Returns the
    /// number of tokens left.
    pub fn retain_shortening(&mut self, mask: &mut [u32], below: u64) -> Result<usize, Error> {
        let accepting = self.level().accepting;
        // The trials reset the mask's limit record; what they cut is added back to it, so a
        // token dropped because a limit cut its shortening path is reported
        // ([`Matcher::hit_limit`]), not mistaken for a dead end.
        let mut cut = self.mask_cut;
        let left = crate::util::try_retain_tokens(mask, |token| {
            if self.constraint.inner.index.vocab().is_eos(token) {
                return Ok(accepting);
            }
            match self.accept_token(token) {
                Ok(()) => {
                    cut |= self.level().cut;
                    let d = self.min_bytes_to_finish_checked()?.unwrap_or(UNREACHABLE);
                    self.rollback(1)?;
                    Ok(d < below)
                }
                Err(Error::Rejected(_)) => Ok(false),
                Err(e) => Err(e),
            }
        });
        self.mask_cut = cut;
        left
    }
}

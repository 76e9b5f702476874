//! The mask context of a stack top: which frames of the real stack an entry is classified
//! for, and the cache keys that identify it (see [`Context::build`]).

use super::RelaxedLoop;
use crate::automaton::exec::{Frame, BOTTOM};
use crate::automaton::keys::NodeKeys;
use crate::automaton::{FrameId, Pda, UNBOUNDED};
use crate::util::{hash128, ForkVec};
use crate::Limits;

/// How many frames below the top (beyond counted loops) a mask context may include.
const MAX_EXTRA_FRAMES: usize = 3;

/// How many frames that only end their rule ([`crate::automaton::Node::only_returns`]) a
/// context leaves out on its way to the frames that decide (a right-linear chain of
/// rules has one per character read; `CharDfa::to_rules` writes up to 2,048).
const MAX_PASSED_RETURNS: usize = 4096;

/// Salt of the key step adding the relaxed loop (the counted loop directly below the top).
const SALT_RELAXED: u16 = 0x4E1A;
/// Salt of the key step adding a counted-loop frame below the loops (by shape and class).
const SALT_LOOP_BELOW: u8 = 0xB1;
/// Salt of the key step adding an ordinary frame below the loops (by node key).
const SALT_FRAME_BELOW: u8 = 0xB0;
/// Salt marking a context that is the whole stack (nothing can follow its bottom).
const SALT_WHOLE_STACK: u16 = 0xB07;

/// The automaton a mask is computed for, as the mask stage sees it: the automaton, the
/// structural keys of its nodes (what the shared cache keys are made of) and the limits of
/// the constraint. Borrowed for one [`super::TokenIndex::fill`] call.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    /// The automaton.
    pub pda: &'a Pda,
    /// Its node keys (computed on first use, kept by the constraint).
    pub keys: &'a NodeKeys,
    /// The parse limits of the constraint (stack depth, parallel stacks, mask fuel).
    pub limits: &'a Limits,
}

/// The context of one stack top, rebuilt for each top by [`Context::build`] (its buffers
/// are kept): the frames the entry is classified from and the keys of the shared cache.
///
/// The context is the top frame; then the counted-loop frame directly below it, if any
/// (*relaxed*: classified once whatever its count, see [`crate::mask`]); then, if there was
/// a loop or the top's rule may end here, the frames below while their rule may end right
/// after (at most [`MAX_EXTRA_FRAMES`], leaving out the frames that only end their rule,
/// which change nothing that follows), so that what follows a string or a number is part
/// of the classification: counted loops among them by count class, except below a relaxed
/// loop, where the context ends above the first counted loop. A relaxed loop's iterations
/// are counted on its frame and carried on by the ordinary frames its exit returns to, but a
/// counted loop's frame holds its own count: leaving the relaxed loop into one would drop
/// the relaxed count, and with it the condition that the relaxed loop may end there
/// (`([0-9]{3,4}){2,4};` took `0;` after `123`, ending a group of one digit). Ending the
/// context above it makes such tokens stack-dependent instead: the condition stays with
/// them, and the rest of the token is checked against the real loop frame.
///
/// Keys: the top's node key, then each frame below hashed in with a named salt
/// (`SALT_*`), then a salt when the context is the whole stack; a relaxed loop's count
/// class is hashed in last, so `key` names the entry and `base_key` the classification it
/// derives from (equal without a relaxed loop).
#[derive(Clone, Debug, Default)]
pub(crate) struct Context {
    /// The context's frames as arena indices, top first.
    chain: Vec<FrameId>,
    /// The context's frames, bottom first.
    pub(super) frames: Vec<Frame>,
    /// The entry's cache key.
    pub(super) key: u128,
    /// The key of the classification the entry derives from.
    pub(super) base_key: u128,
    /// The loop whose count the entry derives from the classification, if any.
    pub(super) relaxed: Option<RelaxedLoop>,
}

impl Context {
    /// Sets this context to `top`'s in the stacks' `arena`; `cap` caps loop distances
    /// (the longest token length + 1: no token can tell two counts apart beyond that).
    pub(super) fn build(&mut self, target: &Target, cap: u32, arena: &ForkVec<Frame>, top: FrameId) {
        let Target { pda, keys, .. } = *target;
        let class = |frame: &Frame, l: &crate::automaton::Loop| {
            let (count, min, max) = (frame.count(), l.min(), l.max());
            let below_min = if count < min { (min - count).min(cap) } else { 0 };
            let to_max = if max == UNBOUNDED { cap } else { max.saturating_sub(count).min(cap) };
            (below_min, to_max)
        };
        self.chain.clear();
        self.chain.push(top);
        let top_frame = arena[top.index()];
        let mut key = keys.get(pda, top_frame.node());
        let mut relaxed: Option<(usize, RelaxedLoop)> = None;
        let mut f = top_frame.parent();
        if let Some(frame) = arena.get(f.index()) {
            if let Some(l) = pda.node(frame.node()).repeat() {
                key = hash128(&(key, SALT_RELAXED, keys.loop_shape(frame.node())));
                let r = RelaxedLoop { context_index: 0, count: frame.count(), min: l.min(), max: l.max() };
                relaxed = Some((self.chain.len(), r));
                self.chain.push(f);
                f = frame.parent();
            }
        }
        let mut extend = relaxed.is_some() || pda.node(top_frame.node()).is_final();
        let (mut extra, mut passed) = (0, 0);
        while extend && f != BOTTOM && extra < MAX_EXTRA_FRAMES {
            let frame = arena[f.index()];
            let node = pda.node(frame.node());
            if node.only_returns() && passed < MAX_PASSED_RETURNS {
                // A frame that only ends its rule changes nothing that follows: left out (the
                // walk links the frames above it to the frame below), so every position of a
                // chain shares the entry of what the chain returns to.
                passed += 1;
                f = frame.parent();
                continue;
            }
            if relaxed.is_some() && node.repeat().is_some() {
                // Below a relaxed loop, a counted loop ends the context (see above).
                break;
            }
            key = match node.repeat() {
                Some(l) => hash128(&(key, SALT_LOOP_BELOW, keys.loop_shape(frame.node()), class(&frame, &l))),
                None => hash128(&(key, SALT_FRAME_BELOW, keys.get(pda, frame.node()))),
            };
            extend = node.is_final() || node.repeat().is_some();
            self.chain.push(f);
            extra += 1;
            f = frame.parent();
        }
        let whole_stack = f == BOTTOM;
        if whole_stack {
            // The context is the whole stack: nothing can follow its bottom, which changes
            // its classification (see `Classified::compute`).
            key = hash128(&(key, SALT_WHOLE_STACK));
        }
        (self.key, self.base_key, self.relaxed) = match relaxed {
            Some((pos, mut r)) => {
                // Positions count from the bottom of the context.
                r.context_index = self.chain.len() - 1 - pos;
                let below_min = r.min.saturating_sub(r.count).min(cap);
                let to_max = if r.max == UNBOUNDED { cap } else { r.max.saturating_sub(r.count).min(cap) };
                (hash128(&(key, below_min, to_max)), key, Some(r))
            }
            None => (key, key, None),
        };
        self.frames.clear();
        self.frames.extend(self.chain.iter().rev().map(|&f| arena[f.index()]));
        if whole_stack {
            // Frames that only return may have been left out between the bottom and the
            // stack's end: the bottom's parent is the end all the same.
            if let Some(bottom) = self.frames.first_mut() {
                *bottom = bottom.with_parent(BOTTOM);
            }
        }
    }

    /// The arena index of the context's bottom frame (where its stack-dependent tokens
    /// continue on the real stack).
    pub(super) fn bottom(&self) -> Option<FrameId> {
        self.chain.last().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::exec::Runner;

    /// The context of the stack after `text` whose top is in a counted loop.
    fn context_after(pda: &Pda, keys: &NodeKeys, text: &str) -> Context {
        let limits = Limits::default();
        let mut runner = Runner::new(pda, &limits);
        assert!(runner.feed(text.as_bytes()), "{text:?} is a valid prefix");
        let target = Target { pda, keys, limits: &limits };
        let in_loop = runner.current_tops().iter().find_map(|&top| {
            let mut context = Context::default();
            context.build(&target, 8, runner.stacks().frames(), top);
            context.relaxed.is_some().then_some(context)
        });
        in_loop.unwrap_or_else(|| panic!("no stack in a counted loop after {text:?}"))
    }

    /// After a searched pattern matched, a length cut reads on in a counted loop reached
    /// through a chain of rules, one frame per character before the match, each only
    /// ending its rule. The context leaves them out and reaches the closing quote: wherever
    /// the match was, the rest is classified once.
    #[test]
    fn frames_that_only_return_are_left_out() {
        let schema = serde_json::json!({"type": "string", "pattern": "[ab]", "maxLength": 40});
        let pda = Pda::build(&crate::test_support::default_schema_grammar(&schema), &Limits::default()).expect("pda");
        let keys = NodeKeys::new(&pda);
        let late = context_after(&pda, &keys, "\"x,1 xxa");
        let early = context_after(&pda, &keys, "\"xa");
        assert!(late.frames.iter().all(|f| !pda.node(f.node()).only_returns()), "{:?}", late.frames);
        // Below the chain: the closing quote, which ends the context.
        let bottom = late.frames.first().map(|f| pda.node(f.node()));
        assert!(bottom.is_some_and(|n| !n.only_returns() && !n.is_final()), "{:?}", late.frames);
        assert_eq!(late.base_key, early.base_key, "one classification wherever the pattern matched");
    }
}

//! Running a [`Pda`]: a set of stacks stored as a persistent tree of frames.
//!
//! A stack is a chain of [`Frame`]s linked by `parent` indices into one arena, so stacks that
//! share a bottom share its frames, pushing is an append and rolling back is a truncate. A
//! *configuration* is the set of stack tops that can consume a byte ("tops"), plus whether
//! some stack has completed the start rule ("reached the bottom").
//!
//! Stepping a byte moves every top along its byte edge, then takes the *closure*: enter the
//! callees of call edges (push), leave completed rules (pop), iterate or leave counted loops.
//! The closure is an explicit work list, so its depth never follows user input.

use super::cut::{Cut, CLOSURE_BUDGET};
use super::{FrameId, NodeId, Pda};
use crate::util::{ForkVec, Levels};
use crate::Limits;

/// "No parent": the frame is the bottom of its stack ([`FrameId::BOTTOM`]).
pub(crate) const BOTTOM: FrameId = FrameId::BOTTOM;

/// One stack frame: the node the rule is at, the loop count (loop nodes only), the frame
/// below, and the stack depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    node: NodeId,
    count: u32,
    parent: FrameId,
    depth: u32,
}

impl Frame {
    /// A frame at `node` with loop count `count` over `parent`, `depth` frames deep (tests
    /// build contexts by hand; the runtime makes frames only here, in `exec`).
    #[cfg(test)]
    pub fn new(node: NodeId, count: u32, parent: FrameId, depth: u32) -> Frame {
        Frame { node, count, parent, depth }
    }

    /// The node the frame's rule is at.
    #[inline]
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The loop count (loop nodes only; [`RELAXED`] marks a relaxed loop's count).
    #[inline]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The frame below ([`BOTTOM`] for a stack's bottom frame).
    #[inline]
    pub fn parent(&self) -> FrameId {
        self.parent
    }

    /// This frame moved to `node`.
    #[inline]
    pub fn with_node(self, node: NodeId) -> Frame {
        Frame { node, ..self }
    }

    /// This frame with loop count `count`.
    #[inline]
    pub fn with_count(self, count: u32) -> Frame {
        Frame { count, ..self }
    }

    /// This frame over `parent`.
    #[inline]
    pub fn with_parent(self, parent: FrameId) -> Frame {
        Frame { parent, ..self }
    }
}

/// Closure bookkeeping for a frame created during the current closure.
#[derive(Clone, Copy, Debug, Default)]
struct ClosureInfo {
    /// Processed as (bit 0) fresh / (bit 1) non-fresh.
    done: u8,
    /// For return frames: the freshness of the caller when the call was made (same bits).
    ret_fresh: u8,
}

/// The arena of frames plus reusable scratch space for closures. Owned by each matcher and
/// each mask computation; a matcher's fork shares the older frames ([`Stacks::fork`]).
#[derive(Clone, Debug)]
pub(crate) struct Stacks {
    /// Frames by [`FrameId`]; forks share the older ones, and new ones go to its owned tail.
    arena: ForkVec<Frame>,
    /// The lowest arena length since [`Stacks::take_low_water`] (`usize::MAX`: not
    /// truncated since): what answers kept about frames must forget.
    low_water: usize,
    work: Vec<Work>,
    closure: Vec<ClosureInfo>,
    /// The frames made by the current closure, once there are many (see [`Stacks::alloc`]).
    made: rustc_hash::FxHashMap<Frame, FrameId>,
    /// The tops the current closure put out, once there are many (node, parent, count).
    tops_out: rustc_hash::FxHashSet<(NodeId, FrameId, u32)>,
    old_done: Vec<(FrameId, bool)>,
    max_depth: u32,
    max_tops: usize,
    /// Work left ([`Limits::mask_fuel`]): a top moved over a byte or a closure item spends
    /// one. At zero every step is cut ([`Cut::FUEL`]) until [`Stacks::refuel`].
    fuel: u64,
    /// What [`Stacks::refuel`] restores.
    fuel_limit: u64,
    /// Which limits cut a path off since the cut was last cleared or restored.
    cut: Cut,
    /// The `count` of every frame that completed the bottom rule in the last step (how a
    /// relaxed loop's iteration count is reported to the mask precomputation).
    reached_counts: Vec<u32>,
}

/// A point of a [`Stacks`] to come back to ([`Stacks::mark`]): its arena length and the
/// limits that had cut a path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use]
pub(crate) struct Mark {
    arena_len: usize,
    cut: Cut,
}

/// Marks a loop frame whose bounds are ignored (`count` then counts iterations started since
/// the mask context began). Set only by the mask stage while classifying tokens; the count
/// travels to the frames that continue after the loop so the final iteration count is known.
pub(crate) const RELAXED: u32 = 1 << 31;

#[derive(Clone, Copy, Debug)]
enum Work {
    /// Expand this frame (it is at its node, nothing consumed since `fresh` says).
    Visit(FrameId, bool),
    /// The rule of this frame completed: continue in its parent.
    Pop(FrameId, bool),
}

/// [`Stacks::alloc`] scans for duplicates up to this many frames made, then hashes.
const ALLOC_SCAN: usize = 16;

const FRESH: u8 = 1;
const CONSUMED: u8 = 2;

fn bit(fresh: bool) -> u8 {
    if fresh {
        FRESH
    } else {
        CONSUMED
    }
}

impl Stacks {
    /// Empty stacks with the limits' depth and width budgets.
    pub fn new(limits: &Limits) -> Self {
        Stacks {
            arena: ForkVec::new(),
            low_water: usize::MAX,
            work: Vec::new(),
            closure: Vec::new(),
            made: Default::default(),
            tops_out: Default::default(),
            old_done: Vec::new(),
            max_depth: limits.max_stack_depth.min(u32::MAX as usize) as u32,
            max_tops: limits.max_parse_stacks.max(1),
            fuel: limits.mask_fuel,
            fuel_limit: limits.mask_fuel,
            cut: Cut::NONE,
            reached_counts: Vec::new(),
        }
    }

    /// An independent copy of these stacks for a forked matcher: the same frames and
    /// limits, fresh scratch space. The frames are shared, not copied ([`ForkVec::fork`]), so
    /// the cost does not grow with their number.
    pub fn fork(&mut self) -> Stacks {
        Stacks {
            arena: self.arena.fork(usize::MAX),
            low_water: usize::MAX,
            work: Vec::new(),
            closure: Vec::new(),
            made: Default::default(),
            tops_out: Default::default(),
            old_done: Vec::new(),
            max_depth: self.max_depth,
            max_tops: self.max_tops,
            fuel: self.fuel_limit,
            fuel_limit: self.fuel_limit,
            cut: self.cut,
            reached_counts: Vec::new(),
        }
    }

    /// The frame `id` of the arena, if it is there.
    #[inline]
    pub fn frame(&self, id: FrameId) -> Option<&Frame> {
        self.arena.get(id.index())
    }

    /// The whole arena (frames are found by index; see [`Frame::parent`]).
    #[inline]
    pub fn frames(&self) -> &ForkVec<Frame> {
        &self.arena
    }

    /// The limits that cut a path since the cut was last cleared.
    #[inline]
    pub fn cut(&self) -> Cut {
        self.cut
    }

    /// Forgets the limits hit so far.
    #[inline]
    pub fn clear_cut(&mut self) {
        self.cut = Cut::NONE;
    }

    /// The `count` of every frame that completed the bottom rule in the last step (how a
    /// relaxed loop's iteration count reaches the mask precomputation).
    #[inline]
    pub fn reached_counts(&self) -> &[u32] {
        &self.reached_counts
    }

    /// The current arena length and cut, for [`Stacks::restore`] or [`Stacks::rewind`].
    #[inline]
    pub fn mark(&self) -> Mark {
        Mark { arena_len: self.arena.len(), cut: self.cut }
    }

    /// Back to `mark`: frames made since are dropped and the cut is the mark's again.
    #[inline]
    pub fn restore(&mut self, mark: Mark) {
        self.truncate(mark.arena_len);
        self.cut = mark.cut;
    }

    /// Drops the frames made since `mark`, keeping the limits hit since (a walk's cuts add
    /// up over its branches).
    #[inline]
    pub fn rewind(&mut self, mark: Mark) {
        self.truncate(mark.arena_len);
    }

    /// Empties the arena (the stacks are then unstarted) and clears the cut.
    pub fn reset(&mut self) {
        self.truncate(0);
        self.cut = Cut::NONE;
    }

    /// Runs `f` with the cut cleared; returns its result and the limits it hit, which are
    /// added to the cut from before.
    #[inline]
    pub fn with_own_cut<R>(&mut self, f: impl FnOnce(&mut Stacks) -> R) -> (R, Cut) {
        let before = std::mem::take(&mut self.cut);
        let r = f(self);
        let own = self.cut;
        self.cut = before | own;
        (r, own)
    }

    /// The lowest arena length since the last call (`None`: not truncated since), so that
    /// answers kept about frames forget those that were dropped; every truncation goes
    /// through here, so no caller can miss one.
    #[inline]
    pub fn take_low_water(&mut self) -> Option<usize> {
        let low = std::mem::replace(&mut self.low_water, usize::MAX);
        (low != usize::MAX).then_some(low)
    }

    #[inline]
    fn truncate(&mut self, len: usize) {
        if len < self.arena.len() {
            self.arena.truncate(len);
            self.low_water = self.low_water.min(len);
        }
    }

    /// Restores the whole [`Limits::mask_fuel`] budget: at the start of each bounded unit of
    /// work (one mask computation, one accepted byte).
    pub fn refuel(&mut self) {
        self.fuel = self.fuel_limit;
    }

    /// Pushes the start rule's frame and closes over it; returns whether the empty string
    /// already completes the start rule.
    pub fn start(&mut self, pda: &Pda, out: &mut Vec<FrameId>) -> bool {
        let node = pda.rules[pda.start_rule.index()].start;
        self.arena.push(Frame { node, count: 0, parent: BOTTOM, depth: 1 });
        let root = FrameId::at(self.arena.len() - 1);
        self.close(pda, &[Work::Visit(root, false)], out)
    }

    /// Moves every top in `tops` over `byte`; the closed result goes to `out` (appended).
    /// Returns whether some stack completed its bottom rule with this byte.
    pub fn step(&mut self, pda: &Pda, tops: &[FrameId], byte: u8, out: &mut Vec<FrameId>) -> bool {
        self.reached_counts.clear();
        let cost = tops.len() as u64;
        if cost > self.fuel {
            self.fuel = 0;
            self.cut |= Cut::FUEL;
            return false;
        }
        self.fuel -= cost;
        let first_seed = self.arena.len();
        for &t in tops {
            let f = self.arena[t.index()];
            if let Some(target) = pda.step(&pda.nodes[f.node.index()], byte) {
                self.arena.push(Frame { node: target, ..f });
            }
        }
        let seeds = self.arena.len();
        if seeds == first_seed {
            return false;
        }
        // Fast path: one stack landing on a node that only consumes bytes (no calls, cannot
        // complete, no loop) has a trivial closure — itself.
        if seeds == first_seed + 1 && pda.nodes[self.arena[first_seed].node.index()].is_plain() {
            out.push(FrameId::at(first_seed));
            return false;
        }
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.extend((first_seed..seeds).map(|i| Work::Visit(FrameId::at(i), false)));
        let reached = self.close_from(pda, &mut work, out);
        self.work = work;
        reached
    }

    /// Completes frame `f`'s rule and closes over what follows in its parents: the
    /// configuration right after a token crosses the end of a cached mask's context.
    pub fn pop_into(&mut self, pda: &Pda, f: FrameId, out: &mut Vec<FrameId>) -> bool {
        self.close(pda, &[Work::Pop(f, false)], out)
    }

    fn close(&mut self, pda: &Pda, init: &[Work], out: &mut Vec<FrameId>) -> bool {
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.extend_from_slice(init);
        let r = self.close_from(pda, &mut work, out);
        self.work = work;
        r
    }

    /// Allocates a frame during a closure, reusing an identical frame made in this closure:
    /// found by a scan while the closure has made few frames, through `made` (which then
    /// holds every frame made since `boundary`) beyond that, so that wide closures — an
    /// object with a hundred optional properties left — stay linear.
    fn alloc(&mut self, boundary: usize, frame: Frame) -> FrameId {
        let made = self.arena.len() - boundary;
        if made <= ALLOC_SCAN {
            // A closure's frames are all owned: forks happen between steps, never inside one.
            let own = self.arena.owned_from(boundary).unwrap_or(&[]);
            if let Some(i) = own.iter().position(|f| *f == frame) {
                return FrameId::at(boundary + i);
            }
        } else if let Some(&i) = self.made.get(&frame) {
            return i;
        }
        let id = FrameId::at(self.arena.len());
        self.arena.push(frame);
        self.closure.push(ClosureInfo::default());
        if made == ALLOC_SCAN {
            for (i, f) in self.arena.owned_from(boundary).unwrap_or(&[]).iter().enumerate() {
                self.made.insert(*f, FrameId::at(boundary + i));
            }
        } else if made > ALLOC_SCAN {
            self.made.insert(frame, id);
        }
        id
    }

    fn close_from(&mut self, pda: &Pda, work: &mut Vec<Work>, out: &mut Vec<FrameId>) -> bool {
        let boundary = self.arena.len();
        if !self.made.is_empty() {
            self.made.clear();
        }
        if !self.tops_out.is_empty() {
            self.tops_out.clear();
        }
        self.closure.clear();
        self.reached_counts.clear();
        self.old_done.clear();
        let out_start = out.len();
        let mut reached = false;
        // A closure is bounded by the grammar, but guard against any surprise; the fuel
        // bounds the closures of one unit of work together.
        let by_fuel = self.fuel < CLOSURE_BUDGET;
        let start_budget = if by_fuel { self.fuel } else { CLOSURE_BUDGET };
        let mut budget = start_budget;
        while let Some(item) = work.pop() {
            if budget == 0 {
                self.cut |= if by_fuel { Cut::FUEL } else { Cut::CLOSURE };
                break;
            }
            budget -= 1;
            match item {
                Work::Visit(f, fresh) => {
                    // Skip frames already expanded with this freshness.
                    if f.index() >= boundary {
                        let info = &mut self.closure[f.index() - boundary];
                        if info.done & bit(fresh) != 0 {
                            continue;
                        }
                        info.done |= bit(fresh);
                    } else if self.old_done.contains(&(f, fresh)) {
                        continue;
                    } else {
                        self.old_done.push((f, fresh));
                    }
                    let fr = self.arena[f.index()];
                    let node = &pda.nodes[fr.node.index()];
                    if let Some(l) = node.repeat {
                        let relaxed = fr.count & RELAXED != 0;
                        if relaxed || fr.count < l.max {
                            if fr.depth >= self.max_depth {
                                self.cut |= Cut::DEPTH;
                            } else {
                                let ret = self.alloc(boundary, Frame { count: fr.count + 1, ..fr });
                                self.closure[ret.index() - boundary].ret_fresh |= bit(fresh);
                                let start = pda.rules[l.body.index()].start;
                                let child = self
                                    .alloc(boundary, Frame { node: start, count: 0, parent: ret, depth: fr.depth + 1 });
                                work.push(Work::Visit(child, true));
                            }
                        }
                        if relaxed || fr.count >= l.min {
                            work.push(Work::Pop(f, fresh));
                        }
                        continue;
                    }
                    if !node.bytes.is_empty() {
                        // A top equal to one already out is a duplicate stack: scanned while
                        // few, hashed beyond (as in `alloc`).
                        let key = (fr.node, fr.parent, fr.count);
                        let n_out = out.len() - out_start;
                        let dup = if n_out <= ALLOC_SCAN {
                            out[out_start..].iter().any(|&o| {
                                let of = self.arena[o.index()];
                                (of.node, of.parent, of.count) == key
                            })
                        } else {
                            self.tops_out.contains(&key)
                        };
                        if !dup {
                            if n_out >= self.max_tops {
                                self.cut |= Cut::STACKS;
                            } else {
                                out.push(f);
                                if n_out == ALLOC_SCAN {
                                    for &o in &out[out_start..] {
                                        let of = self.arena[o.index()];
                                        self.tops_out.insert((of.node, of.parent, of.count));
                                    }
                                } else if n_out > ALLOC_SCAN {
                                    self.tops_out.insert(key);
                                }
                            }
                        }
                    }
                    for ci in 0..node.calls.len() {
                        let c = pda.calls(&pda.nodes[fr.node.index()])[ci];
                        if fr.depth >= self.max_depth {
                            self.cut |= Cut::DEPTH;
                            break;
                        }
                        let ret = self.alloc(boundary, Frame { node: c.ret, ..fr });
                        self.closure[ret.index() - boundary].ret_fresh |= bit(fresh);
                        let start = pda.rules[c.callee.index()].start;
                        let child =
                            self.alloc(boundary, Frame { node: start, count: 0, parent: ret, depth: fr.depth + 1 });
                        work.push(Work::Visit(child, true));
                    }
                    if pda.nodes[fr.node.index()].is_final {
                        work.push(Work::Pop(f, fresh));
                    }
                }
                Work::Pop(f, fresh) => {
                    let p = self.arena[f.index()].parent;
                    if p == BOTTOM {
                        reached = true;
                        let count = self.arena[f.index()].count;
                        if !self.reached_counts.contains(&count) {
                            self.reached_counts.push(count);
                        }
                        continue;
                    }
                    let parent_is_loop = pda.nodes[self.arena[p.index()].node.index()].repeat.is_some();
                    if parent_is_loop && fresh {
                        // An empty loop iteration: never needed (loops over nullable bodies
                        // have min 0), and skipping it keeps the closure finite.
                        continue;
                    }
                    let count = self.arena[f.index()].count;
                    if count & RELAXED != 0 && !parent_is_loop {
                        // Leaving a relaxed loop: the parent carries its iteration count on.
                        let copy = self.alloc(boundary, Frame { count, ..self.arena[p.index()] });
                        work.push(Work::Visit(copy, false));
                        continue;
                    }
                    if p.index() >= boundary {
                        let rf = self.closure[p.index() - boundary].ret_fresh;
                        // The parent resumes as fresh as its caller was, unless this child
                        // consumed something.
                        if fresh {
                            if rf & FRESH != 0 {
                                work.push(Work::Visit(p, true));
                            }
                            if rf & CONSUMED != 0 {
                                work.push(Work::Visit(p, false));
                            }
                        } else {
                            work.push(Work::Visit(p, false));
                        }
                    } else {
                        work.push(Work::Visit(p, false));
                    }
                }
            }
        }
        self.fuel -= start_budget - budget;
        reached
    }
}

/// One result of [`Recognizer::push_byte`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteStep {
    alive: bool,
    reached_end: bool,
}

impl ByteStep {
    /// Some stack can still continue after this byte.
    #[inline]
    pub fn alive(&self) -> bool {
        self.alive
    }

    /// Some stack completed the bottom of the recognizer's context with this byte (for a
    /// matcher: the whole output may end here).
    #[inline]
    pub fn reached_end(&self) -> bool {
        self.reached_end
    }
}

/// The narrow interface the mask stage walks token tries with: push a byte, pop bytes.
pub(crate) trait Recognizer {
    /// Consumes one more byte after everything pushed so far.
    fn push_byte(&mut self, byte: u8) -> ByteStep;
    /// Forgets the last `n` pushed bytes (only bytes whose push was alive may be popped).
    fn pop_bytes(&mut self, n: usize);
}

/// A [`Recognizer`] over a [`Pda`] starting from a given configuration.
pub(crate) struct Runner<'p> {
    pda: &'p Pda,
    stacks: Stacks,
    /// Per pushed byte (the first level: the start), the stacks' tops after it and the arena
    /// length before it.
    levels: Levels<FrameId, usize>,
    accepting: bool,
}

impl<'p> Runner<'p> {
    /// A runner at the start of the grammar.
    pub fn new(pda: &'p Pda, limits: &Limits) -> Self {
        let mut stacks = Stacks::new(limits);
        let mut levels = Levels::new();
        let accepting = stacks.start(pda, levels.open(0));
        Runner { pda, stacks, levels, accepting }
    }

    /// A runner whose context is the given chain of frames (bottom first): the bottom's
    /// parent is cut, so completing it counts as reaching the end.
    pub fn with_context(pda: &'p Pda, limits: &Limits, chain: &[Frame]) -> Self {
        let mut stacks = Stacks::new(limits);
        let mut parent = BOTTOM;
        for f in chain {
            stacks.arena.push(Frame { parent, ..*f });
            parent = FrameId::at(stacks.arena.len() - 1);
        }
        let mut levels = Levels::new();
        let tops = levels.open(0);
        if !chain.is_empty() {
            tops.push(parent);
        }
        Runner { pda, stacks, levels, accepting: false }
    }

    /// Pushes a level made of `frames` (appended to the arena as they come, parents already
    /// pointing where they should) with the stacks `tops`, without consuming a byte (the mask
    /// walk materialises a configuration it interned); undone by one
    /// [`Recognizer::pop_bytes`].
    pub fn push_level(&mut self, frames: impl Iterator<Item = Frame>, tops: impl Iterator<Item = FrameId>) {
        let arena_len = self.stacks.arena.len();
        self.stacks.arena.tail_mut().extend(frames);
        self.levels.open(arena_len).extend(tops);
    }

    /// The runner's stacks (read only: the runner pushes and pops them).
    #[inline]
    pub fn stacks(&self) -> &Stacks {
        &self.stacks
    }

    /// Tops of the current level.
    pub fn current_tops(&self) -> &[FrameId] {
        self.levels.top()
    }

    /// Whether the bytes fed so far complete the start rule.
    pub fn is_accepting(&self) -> bool {
        self.accepting
    }

    /// Feeds bytes; false once no stack is alive (and the input is not complete).
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        for (i, &b) in bytes.iter().enumerate() {
            let s = self.push_byte(b);
            self.accepting = s.reached_end;
            // Dead, unless this last byte completed the start rule.
            if !(s.alive || s.reached_end && i + 1 == bytes.len()) {
                return false;
            }
        }
        true
    }
}

impl Recognizer for Runner<'_> {
    fn push_byte(&mut self, byte: u8) -> ByteStep {
        let arena_len = self.stacks.arena.len();
        // The new level's tops are appended to the arena the current level's live in, so
        // step from a copy of the current ones (small, usually inline).
        let cur = smallvec_like::Tops::from(self.levels.top());
        let reached = self.stacks.step(self.pda, cur.as_slice(), byte, self.levels.open(arena_len));
        ByteStep { alive: !self.levels.top().is_empty(), reached_end: reached }
    }

    fn pop_bytes(&mut self, n: usize) {
        for _ in 0..n {
            if self.levels.len() <= 1 {
                return;
            }
            if let Some(arena_len) = self.levels.pop() {
                self.stacks.arena.truncate(arena_len);
            }
        }
    }
}

/// A tiny inline buffer for a level's tops (usually one or two), avoiding an allocation per
/// byte on the hot path.
mod smallvec_like {
    use super::FrameId;

    pub(crate) enum Tops {
        Inline([FrameId; 8], usize),
        Heap(Vec<FrameId>),
    }

    impl Tops {
        pub(crate) fn from(s: &[FrameId]) -> Self {
            if s.len() <= 8 {
                let mut a = [FrameId::new(0); 8];
                a[..s.len()].copy_from_slice(s);
                Tops::Inline(a, s.len())
            } else {
                Tops::Heap(s.to_vec())
            }
        }

        pub(crate) fn as_slice(&self) -> &[FrameId] {
            match self {
                Tops::Inline(a, n) => &a[..*n],
                Tops::Heap(v) => v,
            }
        }
    }
}

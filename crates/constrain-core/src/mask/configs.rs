//! The parse states a trie walk passes through, interned and stepped through a lazily
//! filled table.
//!
//! Classifying a context walks up to every node of the vocabulary trie (≈ 270k nodes for a
//! 129k tokenizer), and the configuration after each node's bytes — the set of stacks above
//! the context's frames — keeps coming back: inside a pattern searched for anywhere every
//! character leads to the same few. So each walk interns its configurations and computes
//! each (configuration, byte) step once with the [`Runner`]; every later visit reads a
//! 256-entry row, one load whatever the number of stacks, where running the closure costs
//! ≈ 0.3 µs.
//!
//! The commonest state needs no interning at all: a single stack whose top sits on a node
//! that only consumes bytes (inside a string body, a property name, a number) steps by the
//! node's own table, and its closure is itself. [`Kind::Plain`] tracks such a stack as an
//! interned configuration with its top moved, so string bodies cost one automaton step per
//! trie node and nothing else.
//!
//! A configuration is stored as the frames its stacks hold above the context (parents
//! pointing either at another stored frame or at a context frame) and its tops. Two
//! configurations are the same one only if those are equal, so a step read from the table is
//! exactly the step the runner would take.

use super::relaxed::Cond;
use crate::automaton::exec::{Frame, Recognizer, Runner, BOTTOM, RELAXED};
use crate::automaton::{FrameId, NodeId, Pda};
use crate::util::ByteSet;
use rustc_hash::FxHashMap;
use std::hash::{Hash, Hasher};
use std::ops::Range;

/// A configuration of one walk; [`DEAD`] is the one without stacks.
pub(super) type ConfigId = u32;

/// The configuration without stacks: every stack died.
const DEAD: ConfigId = 0;

/// One parse state of the walk, unpacked (see [`State`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Every stack died.
    Dead,
    /// An interned configuration.
    Config(ConfigId),
    /// The single stack of configuration `base` with its top frame moved to `node`, a node
    /// that only consumes bytes.
    Plain { node: NodeId, base: ConfigId },
}

/// One parse state of the walk ([`Kind`]) packed in a word, so a step's result travels in
/// a register: 0 is dead, a configuration is its id, a plain stack is `(node + 1) << 32 |
/// base`. Bit 63 of a step's result says it completed the context's bottom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct State(u64);

/// In a [`State`] returned by [`Configs::step`]: the step completed the context's bottom.
const CROSSED: u64 = 1 << 63;

impl State {
    /// Every stack died.
    pub const DEAD: State = State(0);

    #[inline]
    fn pack(kind: Kind) -> State {
        match kind {
            Kind::Dead => State(0),
            Kind::Config(c) => State(c as u64),
            Kind::Plain { node, base } => State(((node.as_u32() as u64 + 1) << 32) | base as u64),
        }
    }

    #[inline]
    fn unpack(self) -> Kind {
        let high = (self.0 >> 32) as u32;
        let low = self.0 as u32;
        if high != 0 {
            Kind::Plain { node: NodeId::new(high - 1), base: low }
        } else if low == DEAD {
            Kind::Dead
        } else {
            Kind::Config(low)
        }
    }

    /// The single stack at a node that only consumes bytes: configuration `base`'s stack with
    /// its top moved to `node`.
    #[inline]
    pub fn plain(node: NodeId, base: ConfigId) -> State {
        State::pack(Kind::Plain { node, base })
    }

    /// `(node, base)` of a state made by [`State::plain`].
    #[inline]
    pub fn plain_parts(self) -> Option<(NodeId, ConfigId)> {
        match self.unpack() {
            Kind::Plain { node, base } => Some((node, base)),
            _ => None,
        }
    }

    /// Whether the step that returned this state completed the context's bottom (the
    /// conditions are then [`Configs::last_reached`]).
    #[inline]
    pub fn crossed(self) -> bool {
        self.0 & CROSSED != 0
    }

    /// The state itself, without the [`State::crossed`] flag.
    #[inline]
    pub fn state(self) -> State {
        State(self.0 & !CROSSED)
    }
}

/// In a table row: the step was not computed yet.
const UNKNOWN: u32 = u32::MAX;

/// In a table row: the step completed the context's bottom frame (the conditions are in
/// [`Configs::reached`]).
const REACHED: u32 = 1 << 31;

/// In a table row: the rest is a node, and the state is [`Kind::Plain`] over the row's
/// configuration.
const PLAIN: u32 = 1 << 30;

/// A configuration without a table row (not stepped from twice yet, or the table is full).
const NO_ROW: u32 = u32::MAX;

/// Rows of 256 steps allocated per walk at most (16 MB); configurations past it are stepped
/// with the runner every time (slower, never different).
const MAX_ROWS: usize = 1 << 14;

/// One interned configuration: ranges into [`Configs`]' flat vectors.
#[derive(Clone, Debug)]
struct Config {
    frames: Range<u32>,
    tops: Range<u32>,
    conds: Range<u32>,
    row: u32,
    /// Steps from this configuration computed so far.
    computed: u32,
}

/// The configurations of one walk and the steps between them (see the module docs). Reused
/// from walk to walk (see [`Configs::reset`]) to keep its buffers.
#[derive(Default)]
pub(super) struct Configs {
    configs: Vec<Config>,
    /// Stored frames; a `parent` (and a top) below `base_len` is a context frame, at or
    /// above it `base_len + k` is the `k`-th frame of the same configuration.
    frames: Vec<Frame>,
    tops: Vec<FrameId>,
    /// Per configuration, the conditions its stacks are valid under (see
    /// [`Configs::conds_of`]).
    conds: Vec<Cond>,
    /// Rows of 256 steps: the next configuration (or, with [`PLAIN`], node), with
    /// [`REACHED`] set when the step completed the context's bottom.
    table: Vec<u32>,
    /// The conditions of each configuration step that completed the context's bottom, as a
    /// range of `reached_conds`.
    reached: FxHashMap<(ConfigId, u8), Range<u32>>,
    /// Steps out of [`Kind::Plain`] onto nodes that are not plain: (node, base, byte) to
    /// the next state and its conditions as in `reached`.
    plain_exits: FxHashMap<(NodeId, ConfigId, u8), (Kind, Range<u32>)>,
    reached_conds: Vec<Cond>,
    /// Configurations by the hash of their frames and tops.
    by_hash: FxHashMap<u64, ConfigId>,
    /// The conditions of the last step that completed the context's bottom.
    last_reached: Range<u32>,
    /// Number of context frames at the bottom of the runner's arena.
    base_len: u32,
    /// Whether the walk counts a relaxed loop (conditions other than `Always`).
    relaxed: bool,
    /// Scratch: per arena frame above the context, its index in the configuration being
    /// interned.
    local_of: Vec<u32>,
    order: Vec<FrameId>,
    cond_scratch: Vec<Cond>,
}

impl Kind {
    fn of(c: ConfigId) -> Kind {
        if c == DEAD {
            Kind::Dead
        } else {
            Kind::Config(c)
        }
    }
}

impl Configs {
    /// Forgets the previous walk; `runner` holds just the context (its frames at the bottom
    /// of the arena). Returns the state of the context itself.
    pub fn reset(&mut self, pda: &Pda, runner: &Runner, relaxed: bool) -> State {
        self.configs.clear();
        self.frames.clear();
        self.tops.clear();
        self.conds.clear();
        self.table.clear();
        // Clearing a map costs its capacity: one a large walk grew is dropped instead.
        clear_small(&mut self.reached);
        clear_small(&mut self.plain_exits);
        clear_small(&mut self.by_hash);
        self.reached_conds.clear();
        self.base_len = runner.stacks().frames().len() as u32;
        self.relaxed = relaxed;
        self.configs.push(Config { frames: 0..0, tops: 0..0, conds: 0..0, row: NO_ROW, computed: 0 });
        State::pack(Kind::of(self.intern(pda, runner, runner.current_tops())))
    }

    /// Gives back memory a walk with unusually many configurations took.
    pub fn shrink(&mut self) {
        const KEEP: usize = 1 << 20;
        if self.table.capacity() > KEEP * 4 {
            self.table = Vec::new();
        }
        if self.frames.capacity() > KEEP {
            self.frames = Vec::new();
            self.by_hash = FxHashMap::default();
            self.configs = Vec::new();
        }
    }

    /// The conditions under which the stacks of `state` are valid.
    #[inline]
    pub fn conds(&self, state: State) -> &[Cond] {
        let c = match state.unpack() {
            Kind::Dead => DEAD,
            Kind::Config(c) | Kind::Plain { base: c, .. } => c,
        };
        let r = &self.configs[c as usize].conds;
        &self.conds[r.start as usize..r.end as usize]
    }

    /// The conditions under which the last step that [`State::crossed`] completed the
    /// context's bottom.
    #[inline]
    pub fn last_reached(&self) -> &[Cond] {
        &self.reached_conds[self.last_reached.start as usize..self.last_reached.end as usize]
    }

    /// The state after `byte` from `state`, flagged [`State::crossed`] if some stack
    /// completed the context's bottom on it. `runner` must hold just the context; it is
    /// left so.
    #[inline(always)]
    pub fn step(&mut self, pda: &Pda, runner: &mut Runner, state: State, byte: u8) -> State {
        let (next, reached) = match state.unpack() {
            Kind::Plain { node, base } => match pda.step_to_plain(pda.node(node), byte) {
                None => return State::DEAD,
                Some((t, true)) => return State::pack(Kind::Plain { node: t, base }),
                Some(_) => self.step_plain_exit(pda, runner, node, base, byte),
            },
            Kind::Config(c) => {
                let row = self.configs[c as usize].row;
                let e = if row != NO_ROW { self.table[row as usize * 256 + byte as usize] } else { UNKNOWN };
                if e == UNKNOWN {
                    self.step_config(pda, runner, c, byte)
                } else {
                    self.decode(c, byte, e)
                }
            }
            Kind::Dead => return State::DEAD,
        };
        let packed = State::pack(next);
        if reached.is_empty() {
            packed
        } else {
            self.last_reached = reached;
            State(packed.0 | CROSSED)
        }
    }

    /// The state a table entry of configuration `c` holds for `byte`.
    #[inline]
    fn decode(&self, c: ConfigId, byte: u8, e: u32) -> (Kind, Range<u32>) {
        if e & PLAIN != 0 {
            return (Kind::Plain { node: NodeId::new(e & !PLAIN), base: c }, 0..0);
        }
        let reached = if e & REACHED != 0 { self.reached.get(&(c, byte)).cloned().unwrap_or(0..0) } else { 0..0 };
        (Kind::of(e & !REACHED), reached)
    }

    /// Computes the step `(c, byte)` the table does not hold yet, and stores it.
    #[cold]
    fn step_config(&mut self, pda: &Pda, runner: &mut Runner, c: ConfigId, byte: u8) -> (Kind, Range<u32>) {
        let e = match self.quick_step(pda, runner, c, byte) {
            Some(e) => e,
            None => {
                let (next, reached) = self.step_runner(pda, runner, Kind::Config(c), byte);
                let crossed = !reached.is_empty();
                if crossed {
                    self.reached.insert((c, byte), reached);
                }
                let id = match next {
                    Kind::Config(id) => id,
                    _ => DEAD,
                };
                id | if crossed { REACHED } else { 0 }
            }
        };
        let config = &mut self.configs[c as usize];
        config.computed += 1;
        // A row costs 1 KB to clear: only for configurations stepped from more than once.
        if config.row == NO_ROW && config.computed >= 2 && self.table.len() < MAX_ROWS * 256 {
            config.row = (self.table.len() / 256) as u32;
            self.table.resize(self.table.len() + 256, UNKNOWN);
        }
        if config.row != NO_ROW {
            self.table[config.row as usize * 256 + byte as usize] = e;
        }
        self.decode(c, byte, e)
    }

    /// The bytes some stack of `state` has an edge on ([`Pda::edge_bytes`]): every other
    /// byte kills all its stacks, as in [`Configs::quick_step`]'s dead case. A walk skips
    /// the other first-byte subtrees without stepping into them.
    pub fn live_bytes(&self, pda: &Pda, runner: &Runner, state: State) -> ByteSet {
        let (c, moved) = match state.unpack() {
            Kind::Dead => return ByteSet::default(),
            Kind::Config(c) => (c, None),
            Kind::Plain { node, base } => (base, Some(node)),
        };
        let config = &self.configs[c as usize];
        match moved {
            Some(node) => pda.edge_bytes([node]),
            None => pda.edge_bytes(
                self.tops[config.tops.start as usize..config.tops.end as usize]
                    .iter()
                    .map(|&top| self.frame(runner, config.frames.start as usize, top).node()),
            ),
        }
    }

    /// The step from `c` on `byte` when it needs no closure: dead when no top has an edge
    /// on the byte (then nothing completes either), or the moved stack of a single-stack
    /// configuration landing on a node that only consumes bytes (its closure is itself, as
    /// in [`crate::automaton::exec::Stacks::step`]). `None` when the runner must decide.
    fn quick_step(&self, pda: &Pda, runner: &Runner, c: ConfigId, byte: u8) -> Option<u32> {
        let config = &self.configs[c as usize];
        let tops = &self.tops[config.tops.start as usize..config.tops.end as usize];
        let mut moving = None;
        for &top in tops {
            let frame = self.frame(runner, config.frames.start as usize, top);
            if let Some(t) = pda.step(pda.node(frame.node()), byte) {
                if moving.is_some() {
                    return None;
                }
                moving = Some(t);
            }
        }
        match moving {
            None => Some(DEAD),
            Some(t) if tops.len() == 1 && pda.node(t).is_plain() && t.as_u32() & (PLAIN | REACHED) == 0 => {
                Some(t.as_u32() | PLAIN)
            }
            Some(_) => None,
        }
    }

    /// Frame `f`: a context frame, or a stored frame of the configuration whose frames start
    /// at `frames_start`.
    #[inline]
    fn frame(&self, runner: &Runner, frames_start: usize, f: FrameId) -> Frame {
        if f.as_u32() < self.base_len {
            runner.stacks().frames()[f.index()]
        } else {
            self.frames[frames_start + (f.as_u32() - self.base_len) as usize]
        }
    }

    /// The step out of [`Kind::Plain`] onto a node that is not plain, run once by the
    /// runner and then looked up.
    #[cold]
    fn step_plain_exit(
        &mut self,
        pda: &Pda,
        runner: &mut Runner,
        node: NodeId,
        base: ConfigId,
        byte: u8,
    ) -> (Kind, Range<u32>) {
        if let Some((next, reached)) = self.plain_exits.get(&(node, base, byte)) {
            return (*next, reached.clone());
        }
        let (next, reached) = self.step_runner(pda, runner, Kind::Plain { node, base }, byte);
        self.plain_exits.insert((node, base, byte), (next, reached.clone()));
        (next, reached)
    }

    /// The step from `state` on `byte` run by the runner: the next state (a configuration
    /// or dead) and the conditions of the stacks that completed the context's bottom.
    fn step_runner(&mut self, pda: &Pda, runner: &mut Runner, state: Kind, byte: u8) -> (Kind, Range<u32>) {
        self.materialize(State::pack(state), runner);
        let step = runner.push_byte(byte);
        let start = self.reached_conds.len() as u32;
        if step.reached_end() {
            let counts = &runner.stacks().reached_counts();
            self.reached_conds.extend(counts.iter().map(|&count| Cond::of_count(count, false)));
        }
        let reached = start..self.reached_conds.len() as u32;
        let next = if step.alive() {
            let runner: &Runner = runner;
            Kind::of(self.intern(pda, runner, runner.current_tops()))
        } else {
            Kind::Dead
        };
        runner.pop_bytes(2);
        (next, reached)
    }

    /// Pushes `state` onto the runner as one level (undone by one `pop_bytes(1)`).
    pub fn materialize(&self, state: State, runner: &mut Runner) {
        let (c, moved) = match state.unpack() {
            Kind::Dead => (DEAD, None),
            Kind::Config(c) => (c, None),
            Kind::Plain { node, base } => (base, Some(node)),
        };
        let config = &self.configs[c as usize];
        let base = self.base_len;
        let offset = runner.stacks().frames().len() as u32;
        let frames = &self.frames[config.frames.start as usize..config.frames.end as usize];
        let tops = &self.tops[config.tops.start as usize..config.tops.end as usize];
        match (moved, tops) {
            // The single top is a context frame: the moved copy is the level's one frame.
            (Some(node), &[top]) if top.as_u32() < base => {
                let frame = runner.stacks().frames()[top.index()].with_node(node);
                runner.push_level(std::iter::once(frame), std::iter::once(FrameId::new(offset)));
            }
            _ => {
                let map = move |p: FrameId| {
                    if p == BOTTOM || p.as_u32() < base {
                        p
                    } else {
                        FrameId::new(p.as_u32() - base + offset)
                    }
                };
                // A moved top is the configuration's first stored frame.
                runner.push_level(
                    frames.iter().enumerate().map(|(k, f)| {
                        let node = if k == 0 { moved.unwrap_or(f.node()) } else { f.node() };
                        f.with_node(node).with_parent(map(f.parent()))
                    }),
                    tops.iter().map(|&t| map(t)),
                );
            }
        }
    }

    /// The configuration whose stacks are `tops` of the runner's arena: stored (frames above
    /// the context copied, renumbered) unless an equal one is.
    fn intern(&mut self, pda: &Pda, runner: &Runner, tops: &[FrameId]) -> ConfigId {
        if tops.is_empty() {
            return DEAD;
        }
        let arena = runner.stacks().frames();
        let base = self.base_len;
        // Number the frames the tops reach above the context, top first.
        self.order.clear();
        self.local_of.clear();
        self.local_of.resize(arena.len().saturating_sub(base as usize), u32::MAX);
        for &t in tops {
            let mut f = t;
            while f != BOTTOM && f.as_u32() >= base {
                let slot = &mut self.local_of[(f.as_u32() - base) as usize];
                if *slot != u32::MAX {
                    break;
                }
                *slot = self.order.len() as u32;
                self.order.push(f);
                f = arena[f.index()].parent();
            }
        }
        let local_of = &self.local_of;
        let renumber = |p: FrameId| {
            if p == BOTTOM || p.as_u32() < base {
                p
            } else {
                FrameId::new(base + local_of[(p.as_u32() - base) as usize])
            }
        };
        let frames_start = self.frames.len();
        self.frames.extend(self.order.iter().map(|&g| {
            let f = arena[g.index()];
            f.with_parent(renumber(f.parent()))
        }));
        let tops_start = self.tops.len();
        self.tops.extend(tops.iter().map(|&t| renumber(t)));
        self.finish_intern(pda, runner, frames_start, tops_start)
    }

    /// Appends to `conds` the conditions under which the stacks of the configuration being
    /// interned are valid: for each top, the first relaxed frame down its stack decides.
    fn conds_of(&mut self, pda: &Pda, runner: &Runner, frames_start: usize, tops_start: usize) {
        self.cond_scratch.clear();
        if !self.relaxed {
            self.conds.push(Cond::Always);
            return;
        }
        for &top in &self.tops[tops_start..] {
            let mut f = top;
            let mut cond = Cond::Always;
            while f != BOTTOM {
                let fr = self.frame(runner, frames_start, f);
                if fr.count() & RELAXED != 0 {
                    cond = Cond::of_count(fr.count(), pda.node(fr.node()).repeat().is_some());
                    break;
                }
                f = fr.parent();
            }
            if !self.cond_scratch.contains(&cond) {
                self.cond_scratch.push(cond);
            }
        }
        self.conds.extend_from_slice(&self.cond_scratch);
    }

    /// Interns the configuration just appended to `frames` and `tops` (from the given
    /// starts): removed again if an equal one is stored.
    fn finish_intern(&mut self, pda: &Pda, runner: &Runner, frames_start: usize, tops_start: usize) -> ConfigId {
        let frames = &self.frames[frames_start..];
        let new_tops = &self.tops[tops_start..];
        let mut h = rustc_hash::FxHasher::default();
        frames.hash(&mut h);
        new_tops.hash(&mut h);
        let hash = h.finish();
        if let Some(&existing) = self.by_hash.get(&hash) {
            let e = &self.configs[existing as usize];
            if &self.frames[e.frames.start as usize..e.frames.end as usize] == frames
                && &self.tops[e.tops.start as usize..e.tops.end as usize] == new_tops
            {
                self.frames.truncate(frames_start);
                self.tops.truncate(tops_start);
                return existing;
            }
        }
        let conds_start = self.conds.len() as u32;
        self.conds_of(pda, runner, frames_start, tops_start);
        let id = self.configs.len() as ConfigId;
        self.configs.push(Config {
            frames: frames_start as u32..self.frames.len() as u32,
            tops: tops_start as u32..self.tops.len() as u32,
            conds: conds_start..self.conds.len() as u32,
            row: NO_ROW,
            computed: 0,
        });
        // A hash shared by two different configurations keeps the first: the second is
        // stored but never found by hash (correct, only slower).
        self.by_hash.entry(hash).or_insert(id);
        id
    }
}

/// Empties `map`, dropping it when it has grown past a few thousand slots (clearing costs
/// its capacity, and most walks need only a few).
fn clear_small<K, V>(map: &mut FxHashMap<K, V>) {
    if map.capacity() > 4096 {
        *map = FxHashMap::default();
    } else {
        map.clear();
    }
}

//! Typed indices into a [`Pda`](super::Pda) and into the frame arena of its stacks: a node
//! id, a rule index and a frame id are all `u32` underneath, and the types keep one from
//! being passed where another is meant. Each is `#[repr(transparent)]`, so it costs what the
//! bare integer did.

/// Identifies a node (state) of a [`Pda`](super::Pda): its index in the automaton's node
/// list, so that node ids of one automaton are `0..num_states()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct NodeId(u32);

impl NodeId {
    /// The node at position `raw` of the automaton's node list.
    #[inline]
    pub const fn new(raw: u32) -> NodeId {
        NodeId(raw)
    }

    /// The position in the node list, for indexing per-node tables.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The raw number, for packing into words and hashing.
    #[inline]
    pub const fn as_u32(self) -> u32 {
        self.0
    }
}

/// Identifies a rule of a [`Pda`](super::Pda): its index in the automaton's rule list. The
/// grammar's rules keep their [`RuleId`](crate::grammar::RuleId) numbers; rules the build
/// adds (loop and loop-body rules) come after them. Not a `RuleId`: that one names a rule of
/// a [`Grammar`](crate::grammar::Grammar), this one a rule of the compiled automaton.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct RuleIdx(u32);

impl RuleIdx {
    /// The rule at position `raw` of the automaton's rule list.
    #[inline]
    pub const fn new(raw: u32) -> RuleIdx {
        RuleIdx(raw)
    }

    /// The position in the rule list, for indexing per-rule tables.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The raw number, for packing and hashing.
    #[inline]
    pub const fn as_u32(self) -> u32 {
        self.0
    }
}

/// Identifies a stack frame: its index in the frame arena of one `Stacks` (or, in the mask
/// stage, of a configuration laid out as if it continued that arena). [`FrameId::BOTTOM`]
/// is the parent of a stack's bottom frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub(crate) struct FrameId(u32);

impl FrameId {
    /// "No frame": the parent of a stack's bottom frame.
    pub const BOTTOM: FrameId = FrameId(u32::MAX);

    /// The frame at position `raw` of the arena.
    #[inline]
    pub const fn new(raw: u32) -> FrameId {
        FrameId(raw)
    }

    /// The frame at position `index` of the arena (arenas stay far below `u32::MAX`
    /// frames: their depth and width are bounded by [`crate::Limits`]).
    #[inline]
    pub const fn at(index: usize) -> FrameId {
        FrameId(index as u32)
    }

    /// The position in the arena.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The raw number, for packing, hashing and renumbering.
    #[inline]
    pub const fn as_u32(self) -> u32 {
        self.0
    }
}

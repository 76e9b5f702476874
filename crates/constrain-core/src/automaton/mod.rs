//! Stage 3: [`Grammar`] → [`Pda`], a byte-level pushdown automaton.
//!
//! Input: a [`Grammar`] (rules whose bodies are regular expressions over bytes and rule
//! references). Output: a [`Pda`], shared read-only by every matcher (`crate::Matcher`) and
//! by the mask precomputation (the `mask` stage, which depends on this one, not the reverse).
//!
//! ## How
//!
//! Every rule becomes one **deterministic** automaton: Thompson construction, then subset
//! construction over the rule's byte classes plus one symbol per called rule. A node of a rule
//! has byte edges (sorted, disjoint ranges), call edges (`callee`, `return node`) and a final
//! flag. Running the PDA keeps a stack of frames; a call pushes the return node and enters the
//! callee's start, reaching a final node pops. Different call edges out of one node make the
//! PDA nondeterministic, so the runtime keeps a small *set* of stacks (see `exec`).
//!
//! Counted repetition `e{m,n}` with small bounds (≤ [`Limits::unroll_limit`]) is unrolled.
//! Larger bounds become a *loop rule*: a single node that calls the body rule and keeps the
//! iteration count on its stack frame, so `maxLength: 100000` adds two nodes, not 100000.
//!
//! At build time the PDA is trimmed (nodes that cannot reach a final node, calls to rules that
//! match nothing), and rejected if it is empty or left-recursive (a rule that can reach itself
//! without consuming a byte: prediction would never terminate). Each rule gets a structural
//! **fingerprint** so that identical rules in different grammars (every JSON string, every
//! number) share their cached token masks in the mask stage's `TokenIndex`.
//! `keys` holds the one encoding of a node's shape that fingerprints and node keys share.
//!
//! Cost: linear in the grammar for most rules; subset construction is exponential in the worst
//! case, which [`Limits::max_automaton_states`] turns into an error.
//!
//! ## Example
//!
//! ```rust
//! use constrain::automaton::Pda;
//! use constrain::grammar::gbnf;
//! use constrain::Limits;
//!
//! // Recursion: nested brackets, any depth.
//! let g = gbnf::parse("root ::= \"[\" root* \"]\"\n").unwrap();
//! let pda = Pda::build(&g, &Limits::default()).unwrap();
//! assert!(pda.matches(b"[[][[]]]"));
//! assert!(pda.matches_prefix(b"[[]"));
//! assert!(!pda.matches(b"[[]"));
//! // A grammar that matches nothing is an error, not an automaton.
//! assert!(Pda::build(&gbnf::parse("root ::= root\n").unwrap(), &Limits::default()).is_err());
//! ```

pub(crate) mod build;
mod cut;
pub mod distance;
pub(crate) mod exec;
mod ids;
pub(crate) mod keys;

use crate::grammar::Grammar;
use crate::util::ByteSet;
use crate::Limits;

pub use build::{RuleCache, RULE_CACHE_BYTES};
pub use cut::{Cut, LimitHit, ParseLimit};
pub(crate) use exec::Recognizer;
pub(crate) use ids::FrameId;
pub use ids::{NodeId, RuleIdx};

/// "No limit" for a loop's maximum count.
pub(crate) const UNBOUNDED: u32 = u32::MAX;

/// One byte edge: bytes `lo..=hi` lead to `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ByteEdge {
    lo: u8,
    hi: u8,
    target: NodeId,
}

impl ByteEdge {
    /// The first byte of the range.
    #[inline]
    pub fn lo(&self) -> u8 {
        self.lo
    }

    /// The last byte of the range (inclusive).
    #[inline]
    pub fn hi(&self) -> u8 {
        self.hi
    }

    /// Where the bytes lead.
    #[inline]
    pub fn target(&self) -> NodeId {
        self.target
    }
}

/// One call edge: enter rule `callee`, continue at `ret` when it completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CallEdge {
    callee: RuleIdx,
    ret: NodeId,
}

impl CallEdge {
    /// The rule entered.
    #[inline]
    pub fn callee(&self) -> RuleIdx {
        self.callee
    }

    /// Where the caller continues once the callee completes.
    #[inline]
    pub fn ret(&self) -> NodeId {
        self.ret
    }
}

/// A counted loop: call `body` again while the count is below `max`, may stop once it
/// reaches `min`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Loop {
    body: RuleIdx,
    min: u32,
    max: u32,
}

impl Loop {
    /// The rule each iteration calls.
    #[inline]
    pub fn body(&self) -> RuleIdx {
        self.body
    }

    /// The fewest iterations that let the loop stop.
    #[inline]
    pub fn min(&self) -> u32 {
        self.min
    }

    /// The most iterations ([`UNBOUNDED`] for no limit).
    #[inline]
    pub fn max(&self) -> u32 {
        self.max
    }
}

/// Where a node's edges sit in its automaton's flat edge lists ([`Pda::bytes`],
/// [`Pda::calls`]): one list per kind for the whole automaton, so building one copies each
/// rule's edges in a single pass instead of allocating two lists per node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// The positions in the flat list.
    #[inline]
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }

    /// Whether the span holds no edge.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// How many edges the span holds.
    #[inline]
    pub fn len(self) -> usize {
        self.len as usize
    }
}

/// A node of the PDA.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    /// The rule this node belongs to.
    rule: RuleIdx,
    /// Reaching this node may complete the rule.
    is_final: bool,
    /// Byte edges ([`Pda::bytes`]), sorted by `lo`, disjoint.
    bytes: Span,
    /// Call edges ([`Pda::calls`]).
    calls: Span,
    /// Set on the single node of a loop rule.
    repeat: Option<Loop>,
    /// For nodes with many byte edges (string bodies, UTF-8 lead bytes): the target of every
    /// byte (`NO_TARGET` for none, [`PLAIN_TARGET`] set when the target is plain), so the
    /// mask walk's hottest step is one load instead of a binary search.
    dense: Option<Box<[u32; 256]>>,
}

/// In [`Node::dense`]: no edge for this byte.
pub(crate) const NO_TARGET: u32 = u32::MAX;

/// In [`Node::dense`]: set on an entry whose target [`Node::is_plain`] (node ids stay far
/// below it: see [`crate::Limits::max_automaton_states`]).
pub(crate) const PLAIN_TARGET: u32 = 1 << 31;

/// Nodes with more byte edges than this get a [`Node::dense`] table.
pub(crate) const DENSE_MIN_EDGES: usize = 8;

impl Node {
    /// The rule this node belongs to.
    #[inline]
    pub fn rule(&self) -> RuleIdx {
        self.rule
    }

    /// Whether reaching this node may complete its rule.
    #[inline]
    pub fn is_final(&self) -> bool {
        self.is_final
    }

    /// The loop of a loop rule's single node; `None` for every other node.
    #[inline]
    pub fn repeat(&self) -> Option<Loop> {
        self.repeat
    }

    /// Whether the node has byte edges (a stack whose top is here can consume a byte).
    #[inline]
    pub fn has_bytes(&self) -> bool {
        !self.bytes.is_empty()
    }

    /// How many call edges the node has.
    #[inline]
    pub fn num_calls(&self) -> usize {
        self.calls.len()
    }

    /// Whether the node only consumes bytes: it has byte edges, no calls, no loop, and
    /// cannot complete its rule — so its closure is itself.
    #[inline]
    pub fn is_plain(&self) -> bool {
        !self.is_final && self.calls.is_empty() && self.repeat.is_none() && !self.bytes.is_empty()
    }

    /// Whether the node can only complete its rule: final, with no edge and no loop. A frame
    /// here hands on to its parent whatever follows (the rest of a right-linear chain of
    /// rules, one frame per character, as `CharDfa::to_rules` writes a length-cut pattern).
    #[inline]
    pub fn only_returns(&self) -> bool {
        self.is_final && self.calls.is_empty() && self.repeat.is_none() && self.bytes.is_empty()
    }
}

impl Pda {
    /// The node `id` (an id from this automaton: its edges, frames and rules).
    #[inline]
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The node `id`, if this automaton has it.
    #[inline]
    pub(crate) fn get_node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// Every rule, by id.
    #[cfg(test)]
    pub(crate) fn rules(&self) -> &[RuleInfo] {
        &self.rules
    }

    /// The rule `id` (its name, start node and fingerprint), if this automaton has it.
    #[inline]
    pub(crate) fn rule(&self, id: RuleIdx) -> Option<&RuleInfo> {
        self.rules.get(id.index())
    }

    /// Where the grammar's string exclusions are (see [`ExcludedWords`]).
    #[inline]
    pub(crate) fn excluded(&self) -> &ExcludedWords {
        &self.excluded
    }

    /// The byte edges of `node`.
    #[inline]
    pub(crate) fn bytes(&self, node: &Node) -> &[ByteEdge] {
        self.edges.get(node.bytes.range()).unwrap_or(&[])
    }

    /// The call edges of `node`.
    #[inline]
    pub(crate) fn calls(&self, node: &Node) -> &[CallEdge] {
        self.call_edges.get(node.calls.range()).unwrap_or(&[])
    }

    /// Every byte one of `nodes` has an edge on. Over the tops of closed stacks these are the
    /// bytes that keep one alive: a byte no top consumes neither moves a stack nor completes
    /// a rule, so the mask walks skip it unstepped.
    pub(crate) fn edge_bytes(&self, nodes: impl IntoIterator<Item = NodeId>) -> ByteSet {
        let mut set = ByteSet::default();
        for node in nodes {
            for e in self.nodes.get(node.index()).map_or(&[][..], |n| self.bytes(n)) {
                set.insert_range(e.lo, e.hi);
            }
        }
        set
    }

    /// Where `byte` leads from `node`, if anywhere.
    #[inline]
    pub(crate) fn step(&self, node: &Node, byte: u8) -> Option<NodeId> {
        if let Some(dense) = &node.dense {
            let t = dense[byte as usize];
            return if t == NO_TARGET { None } else { Some(NodeId::new(t & !PLAIN_TARGET)) };
        }
        let e = self.bytes(node);
        if e.len() <= DENSE_MIN_EDGES {
            for edge in e.iter() {
                if byte < edge.lo {
                    return None;
                }
                if byte <= edge.hi {
                    return Some(edge.target);
                }
            }
            None
        } else {
            let i = e.partition_point(|edge| edge.hi < byte);
            match e.get(i) {
                Some(edge) if edge.lo <= byte => Some(edge.target),
                _ => None,
            }
        }
    }

    /// [`Pda::step`] and whether the target [`Node::is_plain`]: read from the dense table
    /// when the node has one, so the mask walk's hottest step (a string body) loads no second
    /// node.
    #[inline]
    pub(crate) fn step_to_plain(&self, node: &Node, byte: u8) -> Option<(NodeId, bool)> {
        if let Some(dense) = &node.dense {
            let t = dense[byte as usize];
            return if t == NO_TARGET { None } else { Some((NodeId::new(t & !PLAIN_TARGET), t & PLAIN_TARGET != 0)) };
        }
        let t = self.step(node, byte)?;
        Some((t, self.nodes.get(t.index()).is_some_and(Node::is_plain)))
    }
}

/// Per-rule facts.
#[derive(Clone, Debug)]
pub(crate) struct RuleInfo {
    name: String,
    start: NodeId,
    /// First node id of this rule (nodes of a rule are contiguous).
    first_node: NodeId,
    /// Structural fingerprint; equal fingerprints mean identical behaviour, also across
    /// grammars built over the same vocabulary.
    fingerprint: u128,
}

impl RuleInfo {
    /// The rule's name (as in the grammar, or derived for generated rules).
    #[cfg(test)]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node a call of the rule enters.
    #[inline]
    pub fn start(&self) -> NodeId {
        self.start
    }

    /// The rule's first node (its nodes are contiguous from here).
    #[inline]
    pub fn first_node(&self) -> NodeId {
        self.first_node
    }

    /// Structural fingerprint: equal fingerprints mean identical behaviour, also across
    /// grammars built over the same vocabulary.
    #[inline]
    pub fn fingerprint(&self) -> u128 {
        self.fingerprint
    }
}

/// A byte-level pushdown automaton compiled from a [`Grammar`]; immutable and shareable.
#[derive(Clone, Debug)]
pub struct Pda {
    nodes: Vec<Node>,
    /// Every node's byte edges, a rule's nodes' together ([`Node::bytes`]).
    edges: Vec<ByteEdge>,
    /// Every node's call edges ([`Node::calls`]).
    call_edges: Vec<CallEdge>,
    rules: Vec<RuleInfo>,
    start_rule: RuleIdx,
    excluded: ExcludedWords,
}

/// Where the grammar's [`StringExclusion`](crate::grammar::StringExclusion) rules are in the
/// automaton: each node reached from such a rule's start by a quote and a prefix `u` of some
/// excluded word, with the words starting with `u`. From such a node the rule matches what
/// a JSON string's rest matches except those words' remainders followed by a quote, which lets
/// the mask stage derive its masks from the shared string rest's (see the mask stage).
#[derive(Clone, Debug, Default)]
pub(crate) struct ExcludedWords {
    /// Sorted by node.
    at: Vec<ExcludedAt>,
    sets: Vec<ExcludedSet>,
}

/// One exclusion rule's words.
#[derive(Clone, Debug)]
struct ExcludedSet {
    /// The start node of the string rest its masks derive from.
    rest: NodeId,
    /// Sorted, distinct.
    words: Box<[Box<[u8]>]>,
}

#[derive(Clone, Copy, Debug)]
struct ExcludedAt {
    node: NodeId,
    set: u32,
    /// Bytes of the words read to reach the node.
    prefix: u32,
    /// The words with that prefix: `sets[set].words[lo..hi]`.
    lo: u32,
    hi: u32,
}

impl ExcludedWords {
    /// Finds the nodes of each exclusion by reading its words through the automaton.
    pub(crate) fn locate(pda: &Pda, exclusions: &[crate::grammar::StringExclusion]) -> ExcludedWords {
        let mut out = ExcludedWords::default();
        for ex in exclusions {
            let (Some(rule), Some(rest)) = (pda.rules.get(ex.rule.index()), pda.rules.get(ex.rest.index())) else {
                continue;
            };
            let Some(after_quote) = pda.step(pda.node(rule.start), b'"') else { continue };
            let set = out.sets.len() as u32;
            let words = &ex.words;
            // Words sharing a prefix are adjacent (sorted): one node per distinct prefix.
            for (w, word) in words.iter().enumerate() {
                let mut node = after_quote;
                for prefix in 0..=word.len() {
                    let shared = w > 0 && words[w - 1].get(..prefix) == word.get(..prefix);
                    if !shared {
                        let hi = w + words[w..].iter().take_while(|x| x.get(..prefix) == word.get(..prefix)).count();
                        out.at.push(ExcludedAt { node, set, prefix: prefix as u32, lo: w as u32, hi: hi as u32 });
                    }
                    let Some(&b) = word.get(prefix) else { break };
                    match pda.step(pda.node(node), b) {
                        Some(t) => node = t,
                        None => break,
                    }
                }
            }
            out.sets.push(ExcludedSet { rest: rest.start, words: words.clone().into_boxed_slice() });
        }
        // A node reached twice matches the same language each time: keep one record.
        out.at.sort_by_key(|a| a.node);
        out.at.dedup_by_key(|a| a.node);
        out
    }

    /// For a node of an exclusion rule (see [`ExcludedWords`]): the start node of the string
    /// rest it is derived from, and the remainders of the words to exclude from here.
    pub(crate) fn at(&self, node: NodeId) -> Option<(NodeId, impl Iterator<Item = &[u8]>)> {
        let a = self.at[self.at.binary_search_by_key(&node, |a| a.node).ok()?];
        let set = self.sets.get(a.set as usize)?;
        let words = set.words.get(a.lo as usize..a.hi as usize)?;
        Some((set.rest, words.iter().map(move |w| w.get(a.prefix as usize..).unwrap_or(&[]))))
    }

    fn memory_usage(&self) -> usize {
        self.at.len() * std::mem::size_of::<ExcludedAt>()
            + self.sets.iter().map(|s| s.words.iter().map(|w| w.len() + 16).sum::<usize>()).sum::<usize>()
    }
}

impl Pda {
    /// Compiles a grammar. Fails with a typed error when the grammar is empty (matches no
    /// string), left-recursive, or over a limit.
    /// Rules are determinised afresh (a private [`RuleCache`]); see [`Pda::build_with`].
    pub fn build(grammar: &Grammar, limits: &Limits) -> Result<Pda, Error> {
        build::build(grammar, limits, &RuleCache::default())
    }

    /// [`Pda::build`] sharing the determinised rules of `rules` (rules equal up to which
    /// rules they call are determinised once per cache), and drawing the salt of recursive
    /// rules' fingerprints from it.
    pub fn build_with(grammar: &Grammar, limits: &Limits, rules: &RuleCache) -> Result<Pda, Error> {
        build::build(grammar, limits, rules)
    }

    /// Whether `bytes` is, as a whole, a string of the grammar's language.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let mut r = exec::Runner::new(self, &Limits::default());
        r.feed(bytes) && r.is_accepting()
    }

    /// Whether `bytes` can be extended into a string of the language.
    pub fn matches_prefix(&self, bytes: &[u8]) -> bool {
        let mut r = exec::Runner::new(self, &Limits::default());
        r.feed(bytes)
    }

    /// Number of nodes over all rules.
    pub fn num_states(&self) -> usize {
        self.nodes.len()
    }

    /// Number of rules (including generated loop and body rules).
    pub fn num_rules(&self) -> usize {
        self.rules.len()
    }

    /// Approximate heap bytes held.
    pub fn memory_usage(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>()
            + self.edges.len() * std::mem::size_of::<ByteEdge>()
            + self.call_edges.len() * std::mem::size_of::<CallEdge>()
            + self.nodes.iter().map(|n| n.dense.as_ref().map_or(0, |d| std::mem::size_of_val(&**d))).sum::<usize>()
            + self.rules.iter().map(|r| std::mem::size_of::<RuleInfo>() + r.name.len()).sum::<usize>()
            + self.excluded.memory_usage()
    }

    /// A readable listing of every rule's automaton, for `constrain debug` and tests.
    pub fn listing(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (ri, rule) in self.rules.iter().enumerate() {
            let _ = writeln!(out, "rule {ri} `{}` start {}", rule.name, rule.start.as_u32());
            let end = self.rules.get(ri + 1).map_or(self.nodes.len(), |r| r.first_node.index());
            for id in rule.first_node.index()..end {
                let n = &self.nodes[id];
                let _ = write!(out, "  {id}{}", if n.is_final { " (final)" } else { "" });
                for e in self.bytes(n) {
                    if e.lo == e.hi {
                        let _ = write!(out, " {:?}->{}", e.lo as char, e.target.as_u32());
                    } else {
                        let _ = write!(out, " [{:?}-{:?}]->{}", e.lo as char, e.hi as char, e.target.as_u32());
                    }
                }
                for c in self.calls(n) {
                    let _ = write!(out, " call `{}`->{}", self.rules[c.callee.index()].name, c.ret.as_u32());
                }
                if let Some(l) = n.repeat {
                    let max = if l.max == UNBOUNDED { "inf".to_string() } else { l.max.to_string() };
                    let _ = write!(out, " loop `{}` {{{},{max}}}", self.rules[l.body.index()].name, l.min);
                }
                out.push('\n');
            }
        }
        out
    }
}

/// Why a grammar could not be compiled into an automaton.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The grammar matches no string at all (e.g. contradictory schema constraints, or a
    /// root `false`: the schema compiler's warnings say where).
    #[error("the grammar matches nothing (rule `{0}` can never complete): no output satisfies it; from a schema, no document satisfies the schema")]
    Empty(String),
    /// A rule can reach itself without consuming input.
    #[error("left recursion: rule `{0}` can call itself without consuming any byte; rewrite it right-recursively (e.g. `list ::= item (\",\" item)*`)")]
    LeftRecursion(String),
    /// The automaton would exceed [`Limits::max_automaton_states`].
    #[error("automaton too large: more than {limit} states (rule `{rule}`; raise Limits::max_automaton_states, flag --max-states)")]
    TooManyStates {
        /// The rule being determinised when the budget ran out.
        rule: String,
        /// The budget, [`Limits::max_automaton_states`].
        limit: usize,
    },
    /// The grammar exceeds [`Limits::max_grammar_size`] or nests too deeply.
    #[error("grammar too large or too deeply nested (rule `{0}`)")]
    TooLarge(String),
    /// A budget of [`Limits`] ran out while compiling `rule`.
    #[error("{limit}, compiling rule `{rule}`")]
    Budget {
        /// Which budget.
        limit: crate::limits::LimitExceeded,
        /// The rule being compiled when it ran out.
        rule: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{Expr, GrammarBuilder};

    fn pda(build: impl FnOnce(&mut GrammarBuilder) -> crate::grammar::RuleId) -> Result<Pda, Error> {
        let mut b = GrammarBuilder::new();
        let root = build(&mut b);
        Pda::build(&b.build(root).unwrap(), &Limits::default())
    }

    /// The dense tables' plain flag says what `is_plain` of the target says, and `step`
    /// never sees the flag: checked on a JSON string body (dense nodes whose targets are
    /// plain and not: the closing quote) for every node and byte.
    #[test]
    fn dense_steps_flag_plain_targets() {
        let schema = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let grammar = crate::test_support::default_schema_grammar(&schema);
        let p = Pda::build(&grammar, &Limits::default()).unwrap();
        let mut flagged = 0;
        for node in p.nodes.iter() {
            for byte in 0..=255u8 {
                let expected = p.step(node, byte).map(|t| (t, p.nodes[t.index()].is_plain()));
                assert_eq!(p.step_to_plain(node, byte), expected);
                assert!(p.step(node, byte).is_none_or(|t| t.index() < p.nodes.len()));
                flagged += usize::from(node.dense.is_some() && expected.is_some_and(|(_, plain)| plain));
            }
        }
        assert!(flagged > 0, "no dense step onto a plain node: the test checks nothing");
    }

    #[test]
    fn literals_alternation_and_repeats() {
        let p = pda(|b| {
            b.add(
                "root",
                Expr::seq([Expr::lit("a"), Expr::alt([Expr::lit("b"), Expr::lit("cd")]), Expr::star(Expr::lit("x"))]),
            )
        })
        .unwrap();
        for ok in ["ab", "acd", "abxxx", "acdx"] {
            assert!(p.matches(ok.as_bytes()), "{ok}");
        }
        for bad in ["", "a", "ac", "abx y", "abc", "xab"] {
            assert!(!p.matches(bad.as_bytes()), "{bad}");
        }
        assert!(p.matches_prefix(b"ac"));
        assert!(!p.matches_prefix(b"ad"));
    }

    #[test]
    fn recursion_through_rules() {
        // value ::= "[" (value ("," value)*)? "]" | "1"
        let p = pda(|b| {
            let v = b.declare("value");
            let items = Expr::seq([Expr::Ref(v), Expr::star(Expr::seq([Expr::lit(","), Expr::Ref(v)]))]);
            b.define(v, Expr::alt([Expr::seq([Expr::lit("["), Expr::opt(items), Expr::lit("]")]), Expr::lit("1")]));
            v
        })
        .unwrap();
        for ok in ["1", "[]", "[1]", "[1,[1,[]],1]", "[[[[]]]]"] {
            assert!(p.matches(ok.as_bytes()), "{ok}");
        }
        for bad in ["[", "[1,]", "[[]", "11", "[1]]"] {
            assert!(!p.matches(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn equal_bodies_calling_different_rules_share_an_automaton_but_not_callees() {
        // Both roots are `"<" R1 R2 R1 ">"` in canonical form; the rules they call differ.
        // Built one after the other, the second reuses the first's cached automaton, which
        // must call the second grammar's rules.
        let root = |first: crate::grammar::RuleId, second: crate::grammar::RuleId| {
            Expr::seq([Expr::lit("<"), Expr::Ref(first), Expr::Ref(second), Expr::Ref(first), Expr::lit(">")])
        };
        let p = pda(|b| {
            let a = b.add("a", Expr::alt([Expr::lit("a"), Expr::lit("aa")]));
            let c = b.add("c", Expr::alt([Expr::lit("c"), Expr::lit("cc")]));
            b.add("root", root(a, c))
        })
        .unwrap();
        assert!(p.matches(b"<aca>") && !p.matches(b"<cac>"));
        let q = pda(|b| {
            let a = b.add("a", Expr::alt([Expr::lit("a"), Expr::lit("aa")]));
            let c = b.add("c", Expr::alt([Expr::lit("c"), Expr::lit("cc")]));
            b.add("root", root(c, a))
        })
        .unwrap();
        assert!(q.matches(b"<cac>") && q.matches(b"<ccaac>"), "{}", q.listing());
        assert!(!q.matches(b"<aca>"), "{}", q.listing());
    }

    #[test]
    fn large_counts_use_a_loop_not_states() {
        let p = pda(|b| b.add("root", Expr::repeat(Expr::Chars(vec![('a', 'z')]), 3, Some(100_000)))).unwrap();
        assert!(p.num_states() < 10, "{}", p.listing());
        assert!(!p.matches(b"ab"));
        assert!(p.matches(b"abc"));
        assert!(p.matches("x".repeat(100_000).as_bytes()));
        assert!(!p.matches("x".repeat(100_001).as_bytes()));
        // Small counts are unrolled and exact as well.
        let p = pda(|b| b.add("root", Expr::repeat(Expr::lit("ab"), 2, Some(3)))).unwrap();
        assert!(p.matches(b"abab") && p.matches(b"ababab"));
        assert!(!p.matches(b"ab") && !p.matches(b"abababab"));
    }

    #[test]
    fn loops_over_nullable_bodies_terminate() {
        let p = pda(|b| {
            let item = b.add("item", Expr::opt(Expr::lit("a")));
            b.add("root", Expr::seq([Expr::repeat(Expr::Ref(item), 10, Some(20)), Expr::lit("!")]))
        })
        .unwrap();
        assert!(p.matches(b"!"));
        assert!(p.matches(b"aaa!"));
        assert!(p.matches(format!("{}!", "a".repeat(20)).as_bytes()));
        assert!(!p.matches(format!("{}!", "a".repeat(21)).as_bytes()));
    }

    #[test]
    fn wide_closures_keep_every_alternative_once() {
        // rest_k ::= ("," "x" k ";")? rest_{k+1}: forty optional members in order, the shape
        // of a long object's optional properties. Closures here make far more frames and
        // tops than the scan threshold of `Stacks::alloc`, so its hashed path decides.
        let p = pda(|b| {
            let n = 40;
            let ids: Vec<_> = (0..=n).map(|k| b.declare(&format!("rest_{k}"))).collect();
            for k in 0..n {
                let member = Expr::seq([Expr::lit(","), Expr::lit(&format!("x{k};"))]);
                b.define(ids[k], Expr::seq([Expr::opt(member), Expr::Ref(ids[k + 1])]));
            }
            b.define(ids[n], Expr::Empty);
            b.add("root", Expr::seq([Expr::lit("{"), Expr::Ref(ids[0]), Expr::lit("}")]))
        })
        .unwrap();
        for ok in ["{}", "{,x0;}", "{,x3;,x7;,x39;}", "{,x1;,x10;,x11;,x12;}"] {
            assert!(p.matches(ok.as_bytes()), "{ok}");
        }
        for bad in ["{,x7;,x3;}", "{,x3;,x3;}", "{,x40;}", "{,x1}", "{,x39;,x0;}"] {
            assert!(!p.matches(bad.as_bytes()), "{bad}");
        }
        assert!(p.matches_prefix(b"{,x1"));
    }

    #[test]
    fn unicode_classes_are_utf8() {
        let p = pda(|b| b.add("root", Expr::repeat(Expr::Chars(vec![('α', 'ω')]), 1, None))).unwrap();
        assert!(p.matches("αβγ".as_bytes()));
        assert!(!p.matches("abc".as_bytes()));
        assert!(!p.matches(&"α".as_bytes()[..1]));
    }

    #[test]
    fn empty_and_left_recursive_grammars_are_errors() {
        let e = pda(|b| b.add("root", Expr::Nothing)).unwrap_err();
        assert!(matches!(e, Error::Empty(_)));
        let e = pda(|b| {
            let r = b.declare("expr");
            b.define(r, Expr::alt([Expr::seq([Expr::Ref(r), Expr::lit("+1")]), Expr::lit("1")]));
            r
        })
        .unwrap_err();
        assert!(matches!(e, Error::LeftRecursion(ref n) if n == "expr"), "{e}");
    }

    #[test]
    fn identical_rules_share_fingerprints_across_grammars() {
        let make = |extra: &str| {
            pda(|b| {
                let s = b
                    .add("s", Expr::seq([Expr::lit("\""), Expr::star(Expr::Chars(vec![('a', 'z')])), Expr::lit("\"")]));
                b.add("root", Expr::seq([Expr::lit(extra), Expr::Ref(s)]))
            })
            .unwrap()
        };
        let (a, b) = (make("x"), make("y"));
        assert_eq!(a.rules[0].fingerprint, b.rules[0].fingerprint);
        assert_ne!(a.rules[1].fingerprint, b.rules[1].fingerprint);
    }
}

//! Stage 5: the compiled, shareable [`Constraint`] and the per-sequence [`Matcher`].
//!
//! Input: a [`crate::grammar::Grammar`] and a [`TokenIndex`]. Output: token masks, token acceptance,
//! rollback and completion for one generated sequence, usable from any decode loop.
//!
//! ## How
//!
//! The matcher keeps the parse as a set of stacks in an arena (`Stacks`): each accepted
//! token appends a *level* (the new stack tops) and rolling back truncates. A mask is the
//! union, over the current tops, of the cached [`crate::mask`] entry of each top's *context*:
//!
//! - the top frame itself (its rule's fingerprint and node),
//! - every counted-loop frame directly below it, with its count reduced to a *class* — the
//!   distance to the loop's bounds, capped at the longest token length + 1 (no token can
//!   tell two counts apart beyond that),
//! - and, when there was such a loop, the first ordinary frame below (so a string with
//!   `maxLength` is classified together with its closing quote).
//!
//! Tokens that run past the context are checked against the real stack at run time, from
//! the point where the context's bottom completes. EOS ids are allowed exactly where the
//! grammar accepts.
//!
//! ## Example
//!
//! Compile once, then per sequence: fill a mask, accept a token, roll back, detect the end.
//!
//! ```rust
//! use constrain::mask::is_allowed;
//! use constrain::schema::{self, Options};
//! use constrain::{Constraint, Limits, TokenId, TokenIndex, Vocabulary};
//!
//! let tokens = ["{", "}", "\"ok\"", ":", "true", "false", "<eos>"];
//! let tokens: Vec<Vec<u8>> = tokens.iter().map(|t| t.as_bytes().to_vec()).collect();
//! let index = TokenIndex::new(Vocabulary::new(tokens, &[], &[TokenId(6)]).unwrap());
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"ok": {"type": "boolean"}},
//!     "required": ["ok"],
//!     "additionalProperties": false
//! });
//! let options = Options::default().with_whitespace(schema::Whitespace::Compact);
//! let grammar = schema::compile(&schema, &options).unwrap();
//! let constraint = Constraint::new(&grammar, index.clone(), &Limits::default()).unwrap();
//!
//! let mut m = constraint.matcher();
//! let mut mask = vec![0u32; index.vocab().mask_words()];
//! m.fill_mask(&mut mask).unwrap();
//! assert!(is_allowed(&mask, TokenId(0)) && !is_allowed(&mask, TokenId(1))); // `{`, not `}`
//! for t in [0, 2, 3, 4] {
//!     m.accept_token(TokenId(t)).unwrap(); // {"ok":true
//! }
//! m.rollback(1).unwrap(); // back to {"ok":
//! m.accept_token(TokenId(5)).unwrap(); // {"ok":false
//! m.accept_token(TokenId(1)).unwrap(); // }
//! m.fill_mask(&mut mask).unwrap();
//! assert!(is_allowed(&mask, TokenId(6))); // only the end may follow
//! assert!(m.is_accepting());
//! ```
use crate::automaton::distance::{Distances, UNREACHABLE};
use crate::automaton::exec::{Mark, Stacks};
use crate::automaton::keys::NodeKeys;
use crate::automaton::{Cut, FrameId, LimitHit, Pda};
use crate::mask::{set_bit, Scratch, Target, TokenIndex};
use crate::util::Levels;
use crate::{Limits, TokenId};
use std::sync::{Arc, OnceLock};

mod cache;
mod closing;
mod hook;
mod live;
pub use cache::ConstraintCache;
pub use hook::{CheckTracker, ConstraintSource, RuntimeChecks};
pub use live::Liveness;

/// A grammar compiled against one tokenizer: the automaton plus the shared token index.
/// Cheap to clone (an `Arc`), `Send + Sync`; create one [`Matcher`] per sequence.
#[derive(Clone)]
pub struct Constraint {
    inner: Arc<Inner>,
    /// What generation prefers among the tokens this constraint allows ([`Constraint::with_order_hint`]).
    order_hint: Option<Arc<Constraint>>,
}

struct Inner {
    pda: Pda,
    index: Arc<TokenIndex>,
    limits: Limits,
    /// Per node: its mask-cache key, computed on first use.
    node_key: NodeKeys,
    /// Distances to the end (see [`crate::automaton::distance`]), over the bytes the
    /// vocabulary has single-byte tokens for; computed on first use (closing mode).
    distances: OnceLock<Distances>,
    /// [`single_byte_tokens`] of the vocabulary, computed on first use.
    single_bytes: OnceLock<[bool; 256]>,
    /// The run-time checks its front end attached ([`RuntimeChecks`]), if any.
    checks: Option<Arc<dyn RuntimeChecks>>,
}

impl Constraint {
    /// Attaches `hint`, a constraint over the same vocabulary whose language generation
    /// should prefer (a schema's properties in the order it lists them:
    /// the JSON Schema front end's `order_hint`). It changes nothing this constraint accepts; a decode
    /// loop may favour the tokens both allow, until the output leaves the hint's language.
    pub fn with_order_hint(mut self, hint: Constraint) -> Constraint {
        self.order_hint = Some(Arc::new(hint));
        self
    }

    /// The hint attached by [`Constraint::with_order_hint`].
    pub fn order_hint(&self) -> Option<&Constraint> {
        self.order_hint.as_deref()
    }

    /// Compiles `source`'s grammar into an automaton and binds it to the token index, with
    /// the run-time checks the source carries (a [`crate::grammar::Grammar`] carries none; a JSON Schema
    /// compile result carries what it left to run time).
    pub fn new<S: ConstraintSource + ?Sized>(
        source: &S,
        index: Arc<TokenIndex>,
        limits: &Limits,
    ) -> Result<Constraint, Error> {
        let pda = Pda::build_with(source.grammar(), limits, index.rule_cache())?;
        Ok(Constraint::bind(pda, index, limits, source.runtime_checks()))
    }

    /// Binds an already built automaton to the token index. Its recursive rules are salted
    /// again from the index's rule cache (one linear pass over the automaton), so that they
    /// never share a fingerprint, and so cached masks, with another grammar's.
    pub fn from_pda(mut pda: Pda, index: Arc<TokenIndex>, limits: &Limits) -> Constraint {
        pda.fingerprint(index.rule_cache().next_salt());
        Constraint::bind(pda, index, limits, None)
    }

    /// Binds `pda`, whose fingerprints were salted from `index`'s rule cache.
    fn bind(pda: Pda, index: Arc<TokenIndex>, limits: &Limits, checks: Option<Arc<dyn RuntimeChecks>>) -> Constraint {
        let node_key = NodeKeys::new(&pda);
        let inner = Inner {
            pda,
            index,
            limits: limits.clone(),
            node_key,
            distances: OnceLock::new(),
            single_bytes: OnceLock::new(),
            checks,
        };
        Constraint { inner: Arc::new(inner), order_hint: None }
    }

    /// The run-time checks every matcher of this constraint applies, if any.
    pub fn checks(&self) -> Option<&dyn RuntimeChecks> {
        self.inner.checks.as_deref()
    }

    /// A fresh matcher at the start of the grammar.
    pub fn matcher(&self) -> Matcher {
        Matcher::new(self.clone())
    }

    /// The limits this constraint was built with.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The token index (vocabulary and mask cache) this constraint uses.
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.inner.index
    }

    /// The compiled automaton.
    pub fn pda(&self) -> &Pda {
        &self.inner.pda
    }

    /// The distances to the end of every automaton state (computed on first call, then
    /// cached with the constraint). Paths use only bytes for which the vocabulary has a
    /// single-byte token, so `d` bytes are also at most `d` tokens.
    pub fn distances(&self) -> &Distances {
        let inner = &self.inner;
        inner.distances.get_or_init(|| Distances::compute(&inner.pda, self.single_byte_tokens()))
    }

    /// The bytes the vocabulary has a single-byte token for (computed on first call).
    fn single_byte_tokens(&self) -> &[bool; 256] {
        let inner = &self.inner;
        inner.single_bytes.get_or_init(|| single_byte_tokens(inner.index.vocab()))
    }

    /// The fewest bytes (and so tokens, see [`Constraint::distances`]) of any complete
    /// output: what a token budget must allow at least. `None` if no output can be spelled
    /// with this vocabulary's single-byte tokens.
    pub fn min_bytes_from_start(&self) -> Option<u64> {
        Some(self.distances().start(&self.inner.pda)).filter(|&d| d != UNREACHABLE)
    }

    /// The fewest tokens of this vocabulary that spell a shortest complete output (the one
    /// [`Matcher::shortest_completion`] gives from the start): a number of tokens that some
    /// complete output takes, so an upper bound on the fewest any takes, and at most
    /// [`Constraint::min_bytes_from_start`]. `None` when that is `None`. Costs a walk of the
    /// shortest output and a count over it: call it once, for the up-front budget check.
    pub fn min_tokens_from_start(&self) -> Result<Option<u64>, Error> {
        let mut shortest = Vec::new();
        if !self.matcher().shortest_completion(&mut shortest)? {
            return Ok(None);
        }
        let mut cost = Vec::new();
        self.inner.index.fewest_tokens(&shortest, &mut cost);
        Ok(cost.first().copied().filter(|&t| t != crate::mask::NO_SPELLING).map(u64::from))
    }

    /// Approximate heap bytes of this constraint (the shared mask cache excluded).
    pub fn memory_usage(&self) -> usize {
        self.inner.pda.memory_usage() + self.inner.node_key.memory_usage()
    }
}

/// The bytes `b` for which the vocabulary has an ordinary token spelling exactly `b`: the
/// steps a closing path may take one token at a time.
fn single_byte_tokens(vocab: &crate::Vocabulary) -> [bool; 256] {
    let mut out = [false; 256];
    for (id, bytes) in vocab.grammar_tokens() {
        if let [b] = bytes {
            if !vocab.is_special(id) && !vocab.is_eos(id) {
                out[*b as usize] = true;
            }
        }
    }
    out
}

/// One accepted token's worth of parse state (its stack tops are the level's items in
/// `Matcher::levels`).
#[derive(Clone, Copy, Debug)]
struct Level {
    /// The stacks before this level was built (rollback rewinds to it).
    mark: Mark,
    /// The output so far is a complete string of the grammar.
    accepting: bool,
    /// EOS was accepted.
    finished: bool,
    /// The parse limits that cut a path off at or before this level; a refusal after
    /// such a cut may be the limit's doing.
    cut: Cut,
}

/// Per-sequence matching state: what may come next, given the tokens accepted so far.
pub struct Matcher {
    constraint: Constraint,
    stacks: Stacks,
    /// Per accepted token (the first level: the start), its state and stack tops.
    levels: Levels<FrameId, Level>,
    cur: Vec<FrameId>,
    next: Vec<FrameId>,
    /// The buffers of mask computations.
    scratch: Scratch,
    /// Limits that cut a token's run-time check in the last [`Matcher::fill_mask`].
    mask_cut: Cut,
    /// The run-time checks' tracker, when the constraint has checks.
    checker: Option<Box<dyn CheckTracker>>,
    /// [`Matcher::min_bytes_to_finish_checked`]'s buffer of key endings.
    key_endings: Vec<Vec<u8>>,
}

impl Matcher {
    fn new(constraint: Constraint) -> Matcher {
        let stacks = Stacks::new(&constraint.inner.limits);
        let scratch = constraint.index().scratch();
        let checker = constraint.inner.checks.clone().map(|c| c.tracker(&constraint.inner.index));
        let mut m = Matcher {
            constraint,
            stacks,
            levels: Levels::new(),
            cur: Vec::new(),
            next: Vec::new(),
            scratch,
            mask_cut: Cut::NONE,
            checker,
            key_endings: Vec::new(),
        };
        m.reset();
        m
    }

    /// An independent matcher at the same point: same tokens accepted, same rollback
    /// history, its own state from here on (beam search keeps one per beam, a draft model
    /// proposes inside one). The parse state and the run-time checks' history are shared
    /// between the two, copy on write ([`crate::util::ForkVec`]), so a fork costs the same
    /// after ten tokens as after ten thousand: it copies under [`crate::util::CHUNK`] recent
    /// items of each kind, the stack tops of the current token, and the checks' open
    /// containers. The compiled constraint and the mask cache are shared; the fork starts
    /// with fresh mask buffers. Takes `&mut self` because the shared part is taken from
    /// this matcher's own recent state.
    pub fn fork(&mut self) -> Matcher {
        Matcher {
            constraint: self.constraint.clone(),
            stacks: self.stacks.fork(),
            levels: self.levels.fork(),
            cur: Vec::new(),
            next: Vec::new(),
            scratch: self.constraint.index().scratch(),
            mask_cut: self.mask_cut,
            checker: self.checker.as_mut().map(|c| c.fork()),
            key_endings: Vec::new(),
        }
    }

    /// Back to the start of the grammar (keeps the allocations).
    pub fn reset(&mut self) {
        self.stacks.reset();
        self.scratch.forget_stacks();
        self.levels.clear();
        self.mask_cut = Cut::NONE;
        self.stacks.refuel();
        self.cur.clear();
        let mut accepting = self.stacks.start(&self.constraint.inner.pda, &mut self.cur);
        if let Some(ch) = &mut self.checker {
            ch.reset();
            accepting = accepting && ch.end_ok();
        }
        let cut = self.stacks.cut();
        self.levels.open(Level { mark: Mark::default(), accepting, finished: false, cut }).extend_from_slice(&self.cur);
    }

    fn level(&self) -> Level {
        // `levels` is never empty: `reset` pushes the first level and rollback keeps it.
        debug_assert!(!self.levels.is_empty(), "a matcher without its first level");
        self.levels.last().copied().unwrap_or(Level {
            mark: Mark::default(),
            accepting: false,
            finished: true,
            cut: Cut::NONE,
        })
    }

    fn current_tops(&self) -> &[FrameId] {
        self.levels.top()
    }

    /// The constraint this matcher follows.
    pub fn constraint(&self) -> &Constraint {
        &self.constraint
    }

    /// Writes the allowed-token bitset: bit `i % 32` of word `i / 32` set = token `i` allowed.
    /// `mask.len()` must be the vocabulary's [`crate::Vocabulary::mask_words`]. EOS ids are set
    /// only where the grammar accepts; special tokens and ids past the tokenizer never are.
    pub fn fill_mask(&mut self, mask: &mut [u32]) -> Result<(), Error> {
        let inner = Arc::clone(&self.constraint.inner);
        let vocab = inner.index.vocab();
        if mask.len() != vocab.mask_words() {
            return Err(Error::MaskLength { got: mask.len(), expected: vocab.mask_words() });
        }
        let level = self.level();
        self.mask_cut = Cut::NONE;
        if level.finished {
            mask.fill(0);
            return Ok(());
        }
        self.stacks.clear_cut();
        self.stacks.refuel();
        let target = Target { pda: &inner.pda, keys: &inner.node_key, limits: &inner.limits };
        let tops = self.levels.top();
        let cut = inner.index.fill(&target, tops, &mut self.stacks, &mut self.scratch, mask);
        if let Some(ch) = &mut self.checker {
            ch.filter(mask, vocab);
        }
        if level.accepting {
            for &eos in vocab.eos_tokens() {
                set_bit(mask, eos.0);
            }
        }
        self.mask_cut = cut | self.stacks.cut();
        if self.mask_cut.out_of_fuel() {
            // A mask cut short by fuel may miss most of the valid tokens: an error, not a
            // narrower mask.
            mask.fill(0);
            return Err(Error::Limit(self.limit_hit(self.mask_cut)));
        }
        Ok(())
    }

    /// Advances by one token. An end-of-generation id is accepted only where the grammar may
    /// stop (the matcher is then finished). A rejected token leaves the state unchanged.
    pub fn accept_token(&mut self, token: TokenId) -> Result<(), Error> {
        let level = self.level();
        if level.finished {
            return Err(Error::Finished);
        }
        let vocab = self.constraint.inner.index.vocab();
        if vocab.is_eos(token) {
            if !level.accepting {
                return Err(Error::Rejected(token.0));
            }
            self.levels.open_copy(Level { mark: self.stacks.mark(), accepting: true, finished: true, cut: level.cut });
            return Ok(());
        }
        if token.index() >= vocab.len() || vocab.is_special(token) {
            return Err(Error::Rejected(token.0));
        }
        let inner = Arc::clone(&self.constraint.inner);
        let bytes = inner.index.vocab().token_bytes(token);
        self.advance(bytes).map_err(|e| match e {
            Error::Limit(m) => Error::Limit(m),
            _ => Error::Rejected(token.0),
        })
    }

    /// Advances by raw bytes, all or nothing; counts as one token for [`Matcher::rollback`].
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if self.level().finished {
            return Err(Error::Finished);
        }
        self.advance(bytes)
    }

    fn advance(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let level = self.level();
        let pda = &self.constraint.inner.pda;
        let mark = self.stacks.mark();
        self.cur.clear();
        self.cur.extend_from_slice(self.levels.top());
        let mut accepting = level.accepting;
        self.mask_cut = Cut::NONE;
        self.stacks.clear_cut();
        for (i, &b) in bytes.iter().enumerate() {
            self.next.clear();
            self.stacks.refuel();
            let reached = self.stacks.step(pda, &self.cur, b, &mut self.next);
            let last = i + 1 == bytes.len();
            if self.next.is_empty() && !(reached && last) {
                let cut = level.cut | self.stacks.cut();
                self.stacks.rewind(mark);
                if !cut.is_empty() {
                    return Err(Error::Limit(self.limit_hit(cut)));
                }
                return Err(Error::RejectedBytes);
            }
            accepting = reached;
            std::mem::swap(&mut self.cur, &mut self.next);
        }
        if let Some(ch) = &mut self.checker {
            if !ch.advance(bytes) {
                self.stacks.rewind(mark);
                return Err(Error::RejectedBytes);
            }
            accepting = accepting && ch.end_ok();
        }
        let cut = level.cut | self.stacks.cut();
        self.levels.open(Level { mark, accepting, finished: false, cut }).extend_from_slice(&self.cur);
        Ok(())
    }

    /// Undoes the last `n` accepted tokens (an [`Matcher::accept_bytes`] call counts as one).
    pub fn rollback(&mut self, n: usize) -> Result<(), Error> {
        let available = self.levels.len() - 1;
        if n > available {
            return Err(Error::Rollback { requested: n, available });
        }
        for _ in 0..n {
            if let Some(l) = self.levels.pop() {
                // The mask's memo of stack-dependent tokens learns of the dropped frames
                // from the stacks ([`Stacks::take_low_water`]).
                self.stacks.rewind(l.mark);
            }
        }
        if let Some(ch) = &mut self.checker {
            ch.rollback(n);
        }
        Ok(())
    }

    /// Number of tokens accepted so far (what [`Matcher::rollback`] can undo).
    pub fn num_tokens(&self) -> usize {
        self.levels.len() - 1
    }

    /// Whether the output so far is a complete string of the grammar (EOS allowed).
    pub fn is_accepting(&self) -> bool {
        self.level().accepting
    }

    /// Whether nothing but EOS can follow (or EOS was accepted): stop generating.
    pub fn is_finished(&self) -> bool {
        let l = self.level();
        l.finished || (l.accepting && self.current_tops().is_empty())
    }

    /// The bytes the grammar dictates next — the longest run where exactly one byte is
    /// possible and the output cannot end — for jump-forward decoding. Empty if there is a
    /// choice right away.
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        /// Longest run returned: a constant of the algorithm, not a user limit (the rest
        /// is forced again on the next call).
        const MAX_FORCED: usize = 4096;
        let level = self.level();
        let mut out = Vec::new();
        if level.finished {
            return out;
        }
        let pda = &self.constraint.inner.pda;
        let mark = self.stacks.mark();
        self.cur.clear();
        self.cur.extend_from_slice(self.levels.top());
        let mut accepting = level.accepting;
        while !accepting && out.len() < MAX_FORCED {
            let mut only: Option<u8> = None;
            let mut single = !self.cur.is_empty();
            for frame in self.cur.iter().filter_map(|&t| self.stacks.frame(t)) {
                for e in pda.bytes(pda.node(frame.node())) {
                    if e.lo() != e.hi() || only.is_some_and(|b| b != e.lo()) {
                        single = false;
                    }
                    only = Some(e.lo());
                }
            }
            let Some(b) = only.filter(|_| single) else { break };
            self.next.clear();
            self.stacks.refuel();
            accepting = self.stacks.step(pda, &self.cur, b, &mut self.next);
            out.push(b);
            std::mem::swap(&mut self.cur, &mut self.next);
            if self.cur.is_empty() {
                break;
            }
        }
        self.stacks.restore(mark);
        if let Some(ch) = &mut self.checker {
            // Bytes that would complete a checked value are left to the mask.
            let keep = ch.unchecked_prefix(&out);
            out.truncate(keep);
        }
        out
    }

    /// Whether a parse limit (stack depth, number of parallel stacks) cut a path off in the
    /// bytes accepted so far or in the last mask's run-time checks; the matcher then errs on
    /// the side of rejecting. Callers that see a refusal (a masked-out token, no EOS where
    /// the document should end) must check this before calling the refusal a verdict.
    pub fn hit_limit(&self) -> bool {
        !(self.level().cut | self.mask_cut).is_empty()
    }

    /// The limit error describing [`Matcher::hit_limit`] (which limit, and the [`Limits`]
    /// field that raises it); `None` when no limit was hit.
    pub fn limit_error(&self) -> Option<Error> {
        let cut = self.level().cut | self.mask_cut;
        (!cut.is_empty()).then(|| Error::Limit(self.limit_hit(cut)))
    }

    /// The error of the limits in `cut`, with the budgets of this matcher's [`Limits`].
    fn limit_hit(&self, cut: Cut) -> LimitHit {
        LimitHit::new(cut, &self.constraint.inner.limits)
    }
}

impl Drop for Matcher {
    /// Hands the mask scratch buffers back to the token index, for the next matcher.
    fn drop(&mut self) {
        let scratch = std::mem::take(&mut self.scratch);
        self.constraint.inner.index.recycle_scratch(scratch);
    }
}

/// Why a constraint could not be built or a matcher step failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The grammar could not be compiled into an automaton.
    #[error(transparent)]
    Automaton(#[from] crate::automaton::Error),
    /// The token is not allowed here (the state is unchanged).
    #[error("token {0} is not allowed here")]
    Rejected(u32),
    /// Bytes not allowed here (the state is unchanged).
    #[error("bytes not allowed here")]
    RejectedBytes,
    /// The mask slice has the wrong length.
    #[error("mask has {got} words, expected {expected}")]
    MaskLength {
        /// The slice's length, in `u32` words.
        got: usize,
        /// [`crate::Vocabulary::mask_words`].
        expected: usize,
    },
    /// Rolling back more tokens than were accepted.
    #[error("cannot roll back {requested} tokens: only {available} accepted")]
    Rollback {
        /// Tokens asked to roll back.
        requested: usize,
        /// Tokens accepted so far.
        available: usize,
    },
    /// The matcher already accepted EOS.
    #[error("the output is already finished")]
    Finished,
    /// Parse budget exceeded (stack too deep or too ambiguous): which limits cut a path.
    #[error("matching limit exceeded: {0}")]
    Limit(LimitHit),
    /// Bug guard: an internal inconsistency, reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{Expr, Grammar, GrammarBuilder, RuleId};
    use crate::mask::is_allowed;
    use crate::Vocabulary;
    use rand::{Rng, SeedableRng};

    /// A toy vocabulary with single bytes, multi-byte tokens that cross rule ends, duplicate
    /// byte strings, a special token and two EOS ids.
    fn vocab() -> Arc<TokenIndex> {
        vocab_with(crate::mask::IndexConfig::default())
    }

    /// [`vocab`] with the cache bounds of `config`.
    fn vocab_with(config: crate::mask::IndexConfig) -> Arc<TokenIndex> {
        let mut toks: Vec<Vec<u8>> = Vec::new();
        for b in [b'a', b'b', b'"', b',', b'[', b']', b'1', b'2', b' ', b'x', b'{', b'}', b':'] {
            toks.push(vec![b]);
        }
        for t in [
            "ab", "ba", "aaa", "abab", "\",", "\"]", "a\"", "ab\",", "1,", "12", ",\"", "[\"", "\"]]", "]]", "[[",
            "ab", "a\",\"b", "\":", "{\"", "\"}", "ε", "aaaaaaaa", "a,", "b ,", "a a", " ,a",
        ] {
            toks.push(t.as_bytes().to_vec());
        }
        let special = toks.len() as u32;
        toks.push(b"<s>".to_vec());
        let eos1 = toks.len() as u32;
        toks.push(Vec::new());
        let eos2 = toks.len() as u32;
        toks.push(Vec::new());
        let v = Vocabulary::new(toks, &[TokenId(special)], &[TokenId(eos1), TokenId(eos2)]).unwrap();
        TokenIndex::with_config(v.with_mask_len(70).unwrap(), config)
    }

    fn string_rule(b: &mut GrammarBuilder, min: u32, max: Option<u32>) -> RuleId {
        let ch = Expr::Chars(vec![('a', 'b'), ('x', 'x'), ('ε', 'ε')]);
        b.add("string", Expr::seq([Expr::lit("\""), Expr::repeat(ch, min, max), Expr::lit("\"")]))
    }

    /// Grammars exercising loops, recursion, crossings and ambiguity.
    fn grammars() -> Vec<Grammar> {
        let mut out = Vec::new();
        // A list of bounded strings: ["ab","a"] with 1..=3 items of length 0..=9.
        let mut b = GrammarBuilder::new();
        let s = string_rule(&mut b, 0, Some(9));
        let item = b.add("item", Expr::Ref(s));
        let list = Expr::seq([
            Expr::lit("["),
            Expr::Ref(item),
            Expr::repeat(Expr::seq([Expr::lit(","), Expr::Ref(item)]), 0, Some(2)),
            Expr::lit("]"),
        ]);
        let root = b.add("root", list);
        out.push(b.build(root).unwrap());
        // Nested arrays of numbers, recursive.
        let mut b = GrammarBuilder::new();
        let v = b.declare("value");
        let num = Expr::repeat(Expr::Bytes(vec![(b'1', b'2')]), 1, Some(3));
        let items = Expr::seq([Expr::Ref(v), Expr::star(Expr::seq([Expr::lit(","), Expr::Ref(v)]))]);
        b.define(v, Expr::alt([num, Expr::seq([Expr::lit("["), Expr::opt(items), Expr::lit("]")])]));
        out.push(b.build(v).unwrap());
        // An object with a long counted string (loop on the stack) and an optional key.
        let mut b = GrammarBuilder::new();
        let s = string_rule(&mut b, 2, Some(40));
        let root = b.add(
            "root",
            Expr::seq([
                Expr::lit("{\"a\":"),
                Expr::Ref(s),
                Expr::opt(Expr::seq([Expr::lit(",\"b\":"), Expr::Ref(s)])),
                Expr::lit("}"),
            ]),
        );
        out.push(b.build(root).unwrap());
        // Tight counted bounds (loop min 7, max 8) inside a repeated list: the derivation of
        // per-count entries from one relaxed classification must be exact at both ends.
        let mut b = GrammarBuilder::new();
        let s = string_rule(&mut b, 7, Some(8));
        let item = b.add("item", Expr::seq([Expr::Ref(s), Expr::opt(Expr::lit(" "))]));
        let root = b.add(
            "root",
            Expr::seq([
                Expr::lit("["),
                Expr::repeat(Expr::seq([Expr::Ref(item), Expr::lit(",")]), 0, Some(12)),
                Expr::lit("]"),
            ]),
        );
        out.push(b.build(root).unwrap());
        // Ambiguous alternatives through different rules.
        let mut b = GrammarBuilder::new();
        let x = b.add("x", Expr::repeat(Expr::lit("a"), 1, Some(20)));
        let y = b.add("y", Expr::seq([Expr::lit("a"), Expr::star(Expr::lit("b"))]));
        let root = b.add(
            "root",
            Expr::seq([Expr::alt([Expr::Ref(x), Expr::Ref(y)]), Expr::lit("\""), Expr::opt(Expr::lit(","))]),
        );
        out.push(b.build(root).unwrap());
        // The same word rule (optional trailing spaces) first as the whole grammar, where a
        // token running past its end is dead, then nested, where it continues after `,`: the
        // two contexts share node keys and must not share cache entries.
        for nested in [false, true] {
            let mut b = GrammarBuilder::new();
            let word = b.add(
                "word",
                Expr::seq([
                    Expr::repeat(Expr::Bytes(vec![(b'a', b'b')]), 1, Some(4)),
                    Expr::repeat(Expr::lit(" "), 0, Some(2)),
                ]),
            );
            let root = if nested {
                b.add(
                    "root",
                    Expr::seq([
                        Expr::Ref(word),
                        Expr::repeat(Expr::seq([Expr::lit(","), Expr::Ref(word)]), 0, Some(3)),
                    ]),
                )
            } else {
                word
            };
            out.push(b.build(root).unwrap());
        }
        out
    }

    /// The mask a brute-force check gives: token allowed iff prefix + token is still a prefix
    /// of the language (or complete).
    fn brute_mask(c: &Constraint, prefix: &[u8]) -> Vec<bool> {
        let vocab = c.index().vocab();
        (0..vocab.mask_len())
            .map(|i| {
                let id = TokenId(i as u32);
                if vocab.is_eos(id) {
                    return c.pda().matches(prefix);
                }
                if i >= vocab.len() || vocab.is_special(id) || vocab.token_bytes(id).is_empty() {
                    return false;
                }
                let mut p = prefix.to_vec();
                p.extend_from_slice(vocab.token_bytes(id));
                c.pda().matches_prefix(&p)
            })
            .collect()
    }

    #[test]
    fn masks_agree_with_brute_force_on_random_walks() {
        masks_agree_with_brute_force(vocab());
    }

    #[test]
    fn masks_agree_with_brute_force_while_the_cache_rotates() {
        // A budget of a few entries: generations rotate every few masks.
        masks_agree_with_brute_force(vocab_with(crate::mask::IndexConfig::default().with_cache_bytes(2_000)));
    }

    fn masks_agree_with_brute_force(index: Arc<TokenIndex>) {
        let limits = &Limits::default();
        let mask_words = index.vocab().mask_words();
        for (gi, g) in grammars().iter().enumerate() {
            let c = Constraint::new(g, index.clone(), limits).unwrap();
            let mut rng = rand::rngs::StdRng::seed_from_u64(gi as u64);
            for _walk in 0..30 {
                let mut m = c.matcher();
                let mut prefix = Vec::new();
                let mut mask = vec![0u32; mask_words];
                for _step in 0..60 {
                    m.fill_mask(&mut mask).unwrap();
                    let want = brute_mask(&c, &prefix);
                    let allowed: Vec<u32> = (0..want.len() as u32).filter(|&i| want[i as usize]).collect();
                    for (i, &w) in want.iter().enumerate() {
                        assert_eq!(
                            is_allowed(&mask, TokenId(i as u32)),
                            w,
                            "grammar {gi}, prefix {:?}, token {i}",
                            String::from_utf8_lossy(&prefix)
                        );
                    }
                    assert_eq!(m.is_accepting(), c.pda().matches(&prefix));
                    assert!(!allowed.is_empty(), "a trimmed grammar always allows something");
                    let t = TokenId(allowed[rng.random_range(0..allowed.len())]);
                    m.accept_token(t).unwrap();
                    if index.vocab().is_eos(t) {
                        assert!(m.is_finished());
                        m.fill_mask(&mut mask).unwrap();
                        assert!(mask.iter().all(|&w| w == 0));
                        break;
                    }
                    prefix.extend_from_slice(index.vocab().token_bytes(t));
                }
            }
        }
    }

    #[test]
    fn rejection_keeps_state_and_rollback_restores() {
        let index = vocab();
        let g = &grammars()[0];
        let c = Constraint::new(g, index.clone(), &Limits::default()).unwrap();
        let id = |s: &str| {
            TokenId(
                (0..index.vocab().len() as u32)
                    .find(|&i| index.vocab().token_bytes(TokenId(i)) == s.as_bytes())
                    .unwrap(),
            )
        };
        let mut m = c.matcher();
        assert!(matches!(m.accept_token(id("]")), Err(Error::Rejected(_))));
        m.accept_token(id("[\"")).unwrap();
        let mut before = vec![0u32; index.vocab().mask_words()];
        m.fill_mask(&mut before).unwrap();
        m.accept_token(id("ab")).unwrap();
        m.accept_token(id("\"]")).unwrap();
        assert!(m.is_accepting() && m.is_finished());
        assert!(m.accept_token(id("a")).is_err());
        m.rollback(2).unwrap();
        let mut after = vec![0u32; index.vocab().mask_words()];
        m.fill_mask(&mut after).unwrap();
        assert_eq!(before, after);
        assert!(m.rollback(5).is_err());
        assert_eq!(m.num_tokens(), 1);
        // EOS only where accepting; the special token never.
        let eos = index.vocab().eos_tokens()[0];
        assert!(m.accept_token(eos).is_err());
        assert!(m.accept_token(TokenId(index.vocab().len() as u32 - 3)).is_err());
        assert!(m.accept_token(TokenId(69)).is_err(), "ids past the tokenizer are rejected");
        m.reset();
        assert_eq!(m.num_tokens(), 0);
    }

    #[test]
    fn forced_bytes_follow_the_grammar() {
        let index = vocab();
        let c = Constraint::new(&grammars()[2], index, &Limits::default()).unwrap();
        let mut m = c.matcher();
        assert_eq!(m.forced_bytes(), b"{\"a\":\"");
        m.accept_bytes(b"{\"a\":\"ab").unwrap();
        assert_eq!(m.forced_bytes(), b"", "a choice: more characters or the closing quote");
        m.accept_bytes(b"\"").unwrap();
        assert_eq!(m.forced_bytes(), b"", "`,` or `}}`");
        m.accept_bytes(b",").unwrap();
        assert_eq!(m.forced_bytes(), b"\"b\":\"");
        assert!(m.accept_bytes(b"\"c").is_err());
    }

    #[test]
    fn matchers_and_constraints_cross_threads() {
        fn assert_send<T: Send>() {}
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send::<Matcher>();
        assert_send_sync::<Constraint>();
        assert_send_sync::<TokenIndex>();
        // Two threads share one constraint (and its mask cache) and agree.
        let c = Constraint::new(&grammars()[0], vocab(), &Limits::default()).unwrap();
        let words = c.index().vocab().mask_words();
        let masks: Vec<Vec<u32>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let c = c.clone();
                    s.spawn(move || {
                        let mut m = c.matcher();
                        m.accept_bytes(b"[\"ab").unwrap();
                        let mut mask = vec![0u32; words];
                        m.fill_mask(&mut mask).unwrap();
                        mask
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(masks[0], masks[1]);
        assert!(masks[0].iter().any(|&w| w != 0));
    }

    /// Recursive rules are fingerprinted with a salt: automata built apart (each with a
    /// fresh rule cache, so the same salt) are salted again when bound to one index, and
    /// constraints compiled against one index draw distinct salts, so equal fingerprints
    /// never alias two recursive grammars in the shared mask cache.
    #[test]
    fn recursive_rules_never_share_fingerprints_in_one_index() {
        let index = vocab();
        let g = &grammars()[1];
        let built = || Pda::build(g, &Limits::default()).unwrap();
        let (a, b) = (built(), built());
        let value = a.rules().iter().position(|r| r.name() == "value").expect("the recursive rule");
        assert_eq!(a.rules()[value].fingerprint(), b.rules()[value].fingerprint(), "same salt in fresh caches");
        let bound = [a, b].map(|p| Constraint::from_pda(p, index.clone(), &Limits::default()));
        let compiled = [(), ()].map(|()| Constraint::new(g, index.clone(), &Limits::default()).unwrap());
        let rule = crate::automaton::RuleIdx::new(value as u32);
        let fps: Vec<u128> =
            bound.iter().chain(&compiled).map(|c| c.pda().rule(rule).map_or(0, |r| r.fingerprint())).collect();
        for (i, x) in fps.iter().enumerate() {
            assert!(fps[i + 1..].iter().all(|y| y != x), "fingerprints {fps:x?}");
        }
    }

    #[test]
    fn wrong_mask_width_is_an_error() {
        let index = vocab();
        let c = Constraint::new(&grammars()[1], index, &Limits::default()).unwrap();
        let mut m = c.matcher();
        assert!(matches!(m.fill_mask(&mut [0u32; 1]), Err(Error::MaskLength { .. })));
    }
}

//! The incremental JSON tracker behind the run-time checks: where each open value is, which
//! checked positions apply to it, and the validation of each value the moment it completes.
//!
//! One [`Checker`] per matcher. It keeps the output text, a small stack of open containers
//! with the *set* of schema positions that apply to each (interned in [`Sets`]), and one
//! snapshot per accepted token for rollback (the text and the snapshots are one
//! [`Levels`]: a token's bytes are its level's items). The constraint's grammar guarantees
//! the text is JSON, so the tracker only follows structure; it never judges syntax.
//!
//! The parts: [`lex`] follows the JSON structure byte by byte (with the shared lexer,
//! [`constrain_core::json`]) and validates completed values; [`keys`] decides object keys
//! early (repeats, closed objects); [`filter`] clears a mask's tokens that would fail a
//! check; [`stats`] is the per-vocabulary token data the filter reads; [`sets`] interns the
//! sets of schema positions.

use crate::check::ValueChecks;
use constrain_core::util::Levels;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

mod filter;
mod keys;
mod lex;
mod sets;
mod stats;

use filter::Plan;
use filter::Reuse;
use keys::viable;
use keys::KeyMemo;
use lex::complete;
use lex::step;
use lex::Cx;
use lex::Lex;
use lex::State;
use lex::Step;
use lex::Verdicts;
use sets::Sets;
pub(crate) use stats::TokenStats;

/// The run-time checks of one sequence: the tracker state, the text, one snapshot per
/// accepted token.
pub(crate) struct Checker {
    checks: Arc<ValueChecks>,
    sets: Sets,
    state: State,
    /// The output text, a level per accepted token (its bytes; the first level: the start,
    /// no bytes), each with the tracker's state after it.
    levels: Levels<u8, Level>,
    /// Simulation scratch.
    sim: State,
    span: Vec<u8>,
    verdicts: Verdicts,
    /// The outcomes of the last mask's trials, reused while the state is alike.
    reuse: Reuse,
    /// [`Checker::plan`]'s buffer.
    plan_buf: Plan,
    /// See [`Cx::key_memo`]; cleared with `verdicts`.
    key_memo: KeyMemo,
    /// [`Checker::open_names`]'s buffer.
    names: Vec<(u32, u32, u32)>,
    /// `filter::gather`'s buffer.
    gathered: Vec<u32>,
}

/// One accepted token's worth of [`Checker`] state (the token's bytes are the level's items).
#[derive(Clone, Debug, Default)]
struct Level {
    /// The tracker's state after the token (behind an `Arc`, so that a fork copies a
    /// pointer per recent token, not the state).
    state: Arc<State>,
    /// Whether the document may end there (known `true` once computed so).
    end_ok: bool,
}

impl Checker {
    /// A checker at the start of the document.
    pub fn new(checks: Arc<ValueChecks>) -> Checker {
        let sets = Sets::new(&checks);
        let mut c = Checker {
            checks,
            sets,
            state: State::default(),
            levels: Levels::new(),
            sim: State::default(),
            span: Vec::new(),
            verdicts: HashMap::default(),
            reuse: Reuse::default(),
            plan_buf: Plan::default(),
            key_memo: HashMap::default(),
            names: Vec::new(),
            gathered: Vec::new(),
        };
        c.reset();
        c
    }

    /// An independent checker at the same point of the output: the text and the per-token
    /// snapshots are shared with this one, copy on write ([`Levels::fork`]); the interned
    /// sets (bounded by the schema) and the current state (the open containers) are copied;
    /// the caches and per-mask memos start empty.
    pub fn fork(&mut self) -> Checker {
        Checker {
            checks: Arc::clone(&self.checks),
            sets: self.sets.fork(),
            state: self.state.clone(),
            levels: self.levels.fork(),
            sim: State::default(),
            span: Vec::new(),
            verdicts: HashMap::default(),
            reuse: Reuse::default(),
            plan_buf: Plan::default(),
            key_memo: HashMap::default(),
            names: Vec::new(),
            gathered: Vec::new(),
        }
    }

    /// Back to the start (keeps the allocations and the interned sets).
    pub fn reset(&mut self) {
        self.state = State::default();
        self.levels.clear();
        // The empty document is not JSON: it never validates.
        self.levels.open(Level::default());
    }

    /// The context of steps over the text so far and then `tok` (the token being tried, or
    /// nothing when the bytes were appended to the text already).
    fn cx<'a>(&'a mut self, tok: &'a [u8], stop_at_check: bool) -> Cx<'a> {
        Cx {
            checks: &self.checks,
            sets: &mut self.sets,
            text: self.levels.items(),
            tok,
            span: &mut self.span,
            verdicts: &mut self.verdicts,
            stop_at_check,
            used_text: false,
            key_memo: &mut self.key_memo,
        }
    }

    /// Forgets the validation results and key outcomes, which hold for one text only.
    fn forget_outcomes(&mut self) {
        self.verdicts.clear();
        self.key_memo.clear();
    }

    /// Feeds `bytes` (one token's worth); all or nothing. Returns `false`, leaving the state
    /// unchanged, when they complete a value that fails its check.
    pub fn advance(&mut self, bytes: &[u8]) -> bool {
        self.forget_outcomes();
        let base = self.levels.items().len();
        // The token's level: its bytes now (the steps read them), its state once they pass.
        self.levels.open(Level::default()).extend_from_slice(bytes);
        let mut st = std::mem::take(&mut self.state);
        let ok = {
            let end = self.levels.items().len() as u32;
            let mut cx = self.cx(&[], false);
            (0..bytes.len()).all(|i| step(&mut st, bytes[i], (base + i) as u32, &mut cx) == Step::Ok)
                && viable(&st, end, &mut cx)
        };
        if !ok {
            self.levels.pop();
            self.state = self.levels.last().map(|l| State::clone(&l.state)).unwrap_or_default();
            return false;
        }
        self.state = st;
        if let Some(l) = self.levels.last_mut() {
            l.state = Arc::new(self.state.clone());
        }
        true
    }

    /// Whether the document may end after the bytes accepted so far, given that the grammar
    /// accepts there: a number at the top level is checked now, and the whole document is
    /// validated against the whole schema. Computed once per accepted token.
    pub fn end_ok(&mut self) -> bool {
        if self.levels.last().is_some_and(|l| l.end_ok) {
            return true;
        }
        let mut ok = true;
        self.forget_outcomes();
        if self.state.lex == Lex::Num && self.state.stack.is_empty() {
            let set = self.state.scalar_set;
            let start = self.state.scalar_start;
            let end = self.levels.items().len() as u32;
            let mut cx = self.cx(&[], false);
            ok = complete(set, start, end, &mut cx) == Step::Ok;
        }
        ok = ok && self.checks.whole_is_valid(&self.levels.items().as_contiguous());
        if let Some(l) = self.levels.last_mut() {
            l.end_ok = ok;
        }
        ok
    }

    /// Whether the output is between JSON tokens (not inside a string, a number or a
    /// literal): there whitespace changes no value, so a completion with whitespace here
    /// is valid only if the same completion without it is (where the grammar allows both).
    pub fn between_tokens(&self) -> bool {
        !self.state.lex.in_scalar()
    }

    /// Whether the document's value is complete: nothing but whitespace may follow, so
    /// whether the document passes is decided already ([`Checker::end_ok`]).
    pub fn document_done(&self) -> bool {
        self.state.lex == Lex::Done
    }

    /// Undoes the last `n` accepted tokens (the matcher has checked `n`).
    pub fn rollback(&mut self, n: usize) {
        for _ in 0..n.min(self.levels.len().saturating_sub(1)) {
            self.levels.pop();
        }
        if let Some(l) = self.levels.last() {
            self.state = State::clone(&l.state);
        }
    }

    /// Simulates `bytes`; returns the offset of the byte where a value fails its check (or,
    /// with `stop_at_check`, where any checked value would complete).
    fn run_sim(&mut self, bytes: &[u8], stop_at_check: bool) -> Option<usize> {
        self.sim.stack.clear();
        self.sim.stack.extend_from_slice(&self.state.stack);
        self.sim.lex = self.state.lex;
        self.sim.scalar_set = self.state.scalar_set;
        self.sim.scalar_start = self.state.scalar_start;
        self.sim.keys.clear();
        self.sim.keys.extend_from_slice(&self.state.keys);
        let base = self.levels.items().len();
        let mut sim = std::mem::take(&mut self.sim);
        let mut cx = self.cx(bytes, stop_at_check);
        let mut out = None;
        for (i, &b) in bytes.iter().enumerate() {
            if let Lex::Str { esc: 0, .. } = sim.lex {
                // Nothing completes before the next quote.
                if !bytes[i..].contains(&b'"') {
                    break;
                }
            }
            if step(&mut sim, b, (base + i) as u32, &mut cx) != Step::Ok {
                out = Some(i);
                break;
            }
        }
        if out.is_none() && !stop_at_check && !viable(&sim, (base + bytes.len()) as u32, &mut cx) {
            out = Some(bytes.len().saturating_sub(1));
        }
        let used_text = cx.used_text;
        self.sim = sim;
        self.reuse.used_text |= used_text;
        out
    }

    /// How many of `bytes` (bytes the grammar forces next) can be fed without completing a
    /// checked value: jump-forward stops there and leaves the choice to the mask.
    pub fn unchecked_prefix(&mut self, bytes: &[u8]) -> usize {
        let mut plan = std::mem::take(&mut self.plan_buf);
        self.plan(&mut plan);
        let nothing = plan.is_empty();
        self.plan_buf = plan;
        if nothing {
            return bytes.len();
        }
        self.run_sim(bytes, true).unwrap_or(bytes.len())
    }
}

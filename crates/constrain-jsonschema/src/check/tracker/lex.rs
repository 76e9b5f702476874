//! The byte-level JSON tracker: the stack of open containers with their schema positions,
//! and the validation of each checked value the moment it completes. The lexical state and
//! its transitions are the shared lexer's ([`constrain_core::json::Lex`]); this reacts to
//! its events.

use crate::check::ValueChecks;
use crate::util::hash128;
use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;

use super::{keys::end_key, keys::KeyMemo, sets::Sets};
pub(super) use constrain_core::json::is_ws;
pub(super) use constrain_core::json::Lex;
use constrain_core::json::{Container, Event};
use constrain_core::util::ForkVec;

/// An open object or array.
#[derive(Clone, Copy, Debug)]
pub(super) struct Open {
    pub(super) obj: bool,
    /// The positions that apply to this container.
    pub(super) set: u32,
    /// Byte offset of its opening bracket.
    pub(super) start: u32,
    /// Arrays: the index of the next element.
    pub(super) index: u32,
    /// Objects: byte offset of the current key's opening quote.
    pub(super) key_start: u32,
    /// Objects: the set of the current member's value (known once its key is complete).
    pub(super) child: u32,
    /// Checked objects: where this object's keys start in [`State::keys`].
    pub(super) keys_start: u32,
    /// Checked objects: bit `n % 64` set for each key of `n` bytes (decoded) written, so
    /// that a key of another length is known not to repeat one without hashing it.
    pub(super) key_lens: u64,
}

impl Container for Open {
    #[inline]
    fn is_object(&self) -> bool {
        self.obj
    }
}

/// The tracker's state after some prefix of the output.
#[derive(Clone, Debug, Default)]
pub(super) struct State {
    pub(super) stack: Vec<Open>,
    pub(super) lex: Lex,
    /// The set and start of the scalar being read (`Str` outside keys, `Num`, `Lit`).
    pub(super) scalar_set: u32,
    pub(super) scalar_start: u32,
    /// The keys (hashes of their decoded text) of the open checked objects, outermost
    /// first: a checked object may not repeat one.
    pub(super) keys: Vec<u128>,
}

/// What a step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Ok,
    /// A value completed that fails its check.
    Fails,
    /// (only when asked to stop there) A checked value would complete at this byte.
    Checked,
}

/// Validation results within one mask, by set, span bounds and the token bytes the span
/// takes.
pub(super) type Verdicts = HashMap<(u32, u32, u32, u128), bool>;

/// What a step reads besides the state.
pub(super) struct Cx<'a> {
    pub(super) checks: &'a ValueChecks,
    pub(super) sets: &'a mut Sets,
    /// The text accepted so far, then the token being tried (offsets run on from `text`).
    pub(super) text: &'a ForkVec<u8>,
    pub(super) tok: &'a [u8],
    pub(super) span: &'a mut Vec<u8>,
    pub(super) verdicts: &'a mut Verdicts,
    pub(super) stop_at_check: bool,
    /// Set when a span reached into `text`: the outcome then depends on more than the
    /// tracker's state.
    pub(super) used_text: bool,
    /// Keys begun before the token, by stack depth and the token bytes that end them: their
    /// hash, their value's set, whether they repeat a key (one mask's worth).
    pub(super) key_memo: &'a mut KeyMemo,
}

impl Cx<'_> {
    /// Copies bytes `start..end` (offsets over text then token) into `span`.
    pub(super) fn fill_span(&mut self, start: u32, end: u32) {
        self.span.clear();
        let (start, end) = (start as usize, end as usize);
        let n = self.text.len();
        if start < n {
            self.used_text = true;
            self.text.extend_into(start..end.min(n), self.span);
        }
        if end > n {
            let from = start.max(n) - n;
            self.span.extend_from_slice(self.tok.get(from..end - n).unwrap_or(&[]));
        }
    }
}

/// A value of `set` spanning `start..end` is complete: validate it if its set says so.
pub(super) fn complete(set: u32, start: u32, end: u32, cx: &mut Cx) -> Step {
    complete_with_keys(set, start, end, None, cx)
}

/// [`complete`], for an object whose (distinct) keys are `keys`: they may decide the check
/// without parsing.
fn complete_with_keys(set: u32, start: u32, end: u32, keys: Option<&[u128]>, cx: &mut Cx) -> Step {
    if !cx.sets.needs(set) {
        return Step::Ok;
    }
    if cx.stop_at_check {
        return Step::Checked;
    }
    if let Some(keys) = keys {
        match cx.checks.keys_decide(&cx.sets.members[set as usize], keys) {
            Some(true) => return Step::Ok,
            Some(false) => return Step::Fails,
            None => {}
        }
    }
    // Within one mask the text before the token is fixed: a span is its bounds and the
    // token bytes it takes.
    let n = cx.text.len() as u32;
    let taken = cx.tok.get(..end.saturating_sub(n) as usize).unwrap_or(&[]);
    let key = (set, start, end, if taken.is_empty() { 0 } else { hash128(taken) });
    if let Some(&ok) = cx.verdicts.get(&key) {
        return if ok { Step::Ok } else { Step::Fails };
    }
    cx.fill_span(start, end);
    let ok = match serde_json::from_slice::<Value>(cx.span) {
        Ok(v) => cx.checks.set_is_valid(&cx.sets.members[set as usize], &v),
        // The grammar keeps the output JSON; a span that is not means the tracker lost its
        // place, and refusing is the safe side.
        Err(_) => false,
    };
    cx.verdicts.insert(key, ok);
    if ok {
        Step::Ok
    } else {
        Step::Fails
    }
}

/// A value starts with byte `b` at `pos` (the lexer is inside it already).
fn start_value(st: &mut State, b: u8, pos: u32, cx: &mut Cx) -> Step {
    let set = match st.stack.last_mut() {
        None => cx.sets.root,
        Some(top) if top.obj => top.child,
        Some(top) => {
            let i = top.index;
            top.index += 1;
            let parent = top.set;
            cx.sets.for_index(cx.checks, parent, i)
        }
    };
    match b {
        b'{' | b'[' => {
            let keys_start = st.keys.len() as u32;
            st.stack.push(Open {
                obj: b == b'{',
                set,
                start: pos,
                index: 0,
                key_start: 0,
                child: 0,
                keys_start,
                key_lens: 0,
            });
        }
        _ => {
            st.scalar_set = set;
            st.scalar_start = pos;
        }
    }
    Step::Ok
}

/// Closes the innermost container with the byte at `pos` (the lexer is after it already).
fn close(st: &mut State, pos: u32, cx: &mut Cx) -> Step {
    let Some(open) = st.stack.pop() else { return Step::Ok };
    let r = if open.obj {
        let keys = st.keys.get(open.keys_start as usize..).unwrap_or(&[]);
        complete_with_keys(open.set, open.start, pos + 1, Some(keys), cx)
    } else {
        complete(open.set, open.start, pos + 1, cx)
    };
    st.keys.truncate(open.keys_start as usize);
    if r != Step::Ok {
        return r;
    }
    item_done(st, open.start, pos + 1, cx)
}

/// The scalar being read is complete at `end` (exclusive).
fn scalar_done(st: &mut State, end: u32, cx: &mut Cx) -> Step {
    let (set, start) = (st.scalar_set, st.scalar_start);
    let r = complete(set, start, end, cx);
    if r != Step::Ok {
        return r;
    }
    item_done(st, start, end, cx)
}

/// A value spanning `start..end` completed inside the innermost container: in an array
/// whose items must be unique, it must equal no earlier item (JSON equality: `1` and
/// `1.0` are equal, key order does not matter). A repeat is refused at once, since no
/// continuation could remove it.
fn item_done(st: &mut State, start: u32, end: u32, cx: &mut Cx) -> Step {
    let Some(top) = st.stack.last().copied() else { return Step::Ok };
    if top.obj || !cx.sets.unique(top.set) {
        return Step::Ok;
    }
    if cx.stop_at_check {
        return Step::Checked;
    }
    cx.fill_span(start, end);
    let Ok(v) = serde_json::from_slice::<Value>(cx.span) else { return Step::Fails };
    let mut canon = Vec::new();
    canonical(&v, &mut canon);
    let h = hash128(&canon);
    if st.keys.get(top.keys_start as usize..).unwrap_or(&[]).contains(&h) {
        return Step::Fails;
    }
    st.keys.push(h);
    Step::Ok
}

/// A spelling of `v` equal for values JSON Schema calls equal: numbers by exact decimal
/// value, object members sorted by key.
fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Number(n) => {
            let text = n.to_string();
            out.push(b'n');
            match crate::schema::number::Dec::parse(&text) {
                Some(d) => out.extend_from_slice(d.to_text().as_bytes()),
                None => out.extend_from_slice(text.as_bytes()),
            }
        }
        Value::Object(m) => {
            let mut members: Vec<(&String, &Value)> = m.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (k, v) in members {
                out.extend_from_slice(serde_json::to_string(k).unwrap_or_default().as_bytes());
                out.push(b':');
                canonical(v, out);
                out.push(b',');
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for x in a {
                canonical(x, out);
                out.push(b',');
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// Feeds one byte at offset `pos`: the shared lexer follows the structure, and each value
/// it completes is checked here.
#[inline]
pub(super) fn step(st: &mut State, b: u8, pos: u32, cx: &mut Cx) -> Step {
    match st.lex.step(b, &st.stack) {
        Event::None | Event::Comma => Step::Ok,
        Event::Begin => start_value(st, b, pos, cx),
        Event::KeyStart => {
            if let Some(top) = st.stack.last_mut() {
                top.key_start = pos;
            }
            Step::Ok
        }
        Event::KeyEnd => end_key(st, pos, cx),
        Event::Close => close(st, pos, cx),
        Event::ScalarEnd => scalar_done(st, pos + 1, cx),
        Event::NumberEnd => {
            let r = scalar_done(st, pos, cx);
            if r != Step::Ok {
                return r;
            }
            step(st, b, pos, cx)
        }
    }
}

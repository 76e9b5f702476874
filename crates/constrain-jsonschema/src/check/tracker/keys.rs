//! Object keys: the ways to end a key for closing mode, and the early refusal of a key that
//! repeats one of its object's or that no closed schema of the object allows.

use crate::util::hash128;
use constrain_core::util::Levels;
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;

use super::{lex::Cx, lex::Lex, lex::State, lex::Step, Checker};

impl Checker {
    /// For closing mode's distances ([`constrain_core::Matcher::min_bytes_to_finish_checked`]):
    /// whether the key being written (in a checked object) begins a property name written
    /// already. The grammar's distance may then run through that name, which this check
    /// refuses when the key closes; `out` gets the ways to end the key that the check does
    /// not refuse outright: each name not written yet that begins with the key so far (its
    /// rest and the closing quote), and the closing quote alone. After a comma the key is
    /// still to begin: the same, each with its opening quote. `false` (and `out` empty)
    /// elsewhere, and for keys with escapes.
    pub fn key_endings(&mut self, out: &mut Vec<Vec<u8>>) -> bool {
        out.clear();
        let Some(top) = self.state.stack.last().copied() else { return false };
        if !top.obj || !self.sets.needs(top.set) {
            return false;
        }
        let (prefix, lead) = match self.state.lex {
            Lex::Str { key: true, esc: 0 } => (key_so_far(&self.levels, top.key_start), &b""[..]),
            // After a comma: the key is still to begin.
            Lex::ObjKey => (Cow::Borrowed(&[][..]), &b"\""[..]),
            _ => return false,
        };
        if prefix.contains(&b'\\') {
            return false;
        }
        let keys = self.state.keys.get(top.keys_start as usize..).unwrap_or(&[]);
        self.checks.key_endings(&self.sets.members[top.set as usize], &prefix, keys, lead, out)
    }

    /// Inside a key (no escape pending): whether `part`, which ends it with its last byte
    /// (the quote), fails: the key repeats one of the object's, or no closed schema of the
    /// object allows it ([`end_key`]'s refusals). Decided from the key's hash when it has
    /// no escapes, by a trial otherwise.
    pub(super) fn key_end_fails(&mut self, part: &[u8], open: Option<u32>) -> bool {
        let Some(top) = self.state.stack.last().copied() else { return false };
        if !self.sets.needs(top.set) {
            return false;
        }
        let before = key_so_far(&self.levels, top.key_start);
        let body = part.get(..part.len().saturating_sub(1)).unwrap_or(&[]);
        if before.contains(&b'\\') || body.contains(&b'\\') {
            return self.run_sim(part, false).is_some();
        }
        if self.sets.names_only(top.set) {
            // The key must be a name every closed schema leaves open (so not a repeat).
            return match open {
                Some(ranks) => !self.key_is_open_name(ranks, before.len(), body),
                None => self.run_sim(part, false).is_some(),
            };
        }
        if top.key_lens & (1 << ((before.len() + body.len()) % 64)) == 0 {
            return false;
        }
        self.span.clear();
        self.span.extend_from_slice(&before);
        self.span.extend_from_slice(body);
        let h = hash128(&self.span);
        self.state.keys.get(top.keys_start as usize..).unwrap_or(&[]).contains(&h)
    }

    /// Whether the key written so far (`at` bytes), ended by `body`, is exactly a name that
    /// each of the `ranks` closed schemas leaves open ([`Checker::open_names`]).
    fn key_is_open_name(&self, ranks: u32, at: usize, body: &[u8]) -> bool {
        self.each_rank_has(ranks, at, |rest| rest == body)
    }

    /// Whether each of the `ranks` closed schemas has an open name ([`Checker::open_names`])
    /// whose bytes after the first `at` satisfy `fits`.
    #[inline]
    fn each_rank_has(&self, ranks: u32, at: usize, fits: impl Fn(&[u8]) -> bool) -> bool {
        (0..ranks).all(|r| {
            self.names
                .iter()
                .any(|&(rank, n, i)| rank == r && self.checks.closed_name(n, i).get(at..).is_some_and(&fits))
        })
    }

    /// Inside a key of an object whose schemas allow only their names: the names still
    /// open to the key written so far, for [`Checker::key_goes_on`]. `None` when the key
    /// is not such a key, or has escapes (its tokens are then tried).
    pub(super) fn open_names(&mut self) -> Option<u32> {
        let top = self.state.stack.last().copied()?;
        if self.state.lex != (Lex::Str { key: true, esc: 0 })
            || !self.sets.needs(top.set)
            || !self.sets.names_only(top.set)
        {
            return None;
        }
        let before = key_so_far(&self.levels, top.key_start);
        if before.contains(&b'\\') {
            return None;
        }
        let keys = self.state.keys.get(top.keys_start as usize..).unwrap_or(&[]);
        let ranks = self.checks.open_names(&self.sets.members[top.set as usize], &before, keys, &mut self.names);
        Some(ranks)
    }

    /// Whether a key continued by `tok` (no quote, no backslash) is still the prefix of a
    /// name that each of the `ranks` closed schemas leaves open ([`viable`], from the
    /// names [`Checker::open_names`] listed).
    pub(super) fn key_goes_on(&self, ranks: u32, tok: &[u8]) -> bool {
        let Some(top) = self.state.stack.last() else { return true };
        let at = self.levels.items().len().saturating_sub(top.key_start as usize + 1);
        self.each_rank_has(ranks, at, |rest| rest.starts_with(tok))
    }
}

/// The key being written in the innermost object, from `key_start` (its opening quote) on,
/// without the quote: a slice of the text while it is in one piece (see
/// [`constrain_core::util::ForkVec::slice`]).
fn key_so_far<M>(levels: &Levels<u8, M>, key_start: u32) -> Cow<'_, [u8]> {
    let text = levels.items();
    text.slice(key_start as usize + 1..text.len())
}

/// See [`Cx::key_memo`]: the key's hash, its value's set, whether it repeats, its length.
pub(super) type KeyMemo = HashMap<(u32, u128), (u128, u32, bool, u32)>;

/// The key of the innermost object ends at `pos`: find its value's set, and refuse a key the
/// object already has when the object is checked (its grammar may then allow repeats).
pub(super) fn end_key(st: &mut State, pos: u32, cx: &mut Cx) -> Step {
    let Some(top) = st.stack.last().copied() else { return Step::Ok };
    let checked = cx.sets.needs(top.set);
    if !checked && !cx.sets.kids(top.set) {
        if let Some(top) = st.stack.last_mut() {
            top.child = 0;
        }
        return Step::Ok;
    }
    if checked && cx.stop_at_check {
        return Step::Checked;
    }
    // While trying tokens, a key begun before the token is one of few spellings (the text
    // before it is fixed): many tokens close it alike.
    let n = cx.text.len() as u32;
    let memo_key = (!cx.tok.is_empty() && top.key_start < n)
        .then(|| (st.stack.len() as u32, hash128(cx.tok.get(..pos.saturating_sub(n) as usize).unwrap_or(&[]))));
    if let Some(&(h, child, dup, len)) = memo_key.and_then(|k| cx.key_memo.get(&k)) {
        cx.used_text = true;
        if dup {
            return Step::Fails;
        }
        if let Some(top) = st.stack.last_mut() {
            top.child = child;
            if checked {
                top.key_lens |= 1 << (len % 64);
            }
        }
        if checked {
            st.keys.push(h);
        }
        return Step::Ok;
    }
    // The key's text: its raw bytes unless it has escapes (then decoded), so that `"a"` and
    // `"\u0061"` are one key.
    cx.fill_span(top.key_start + 1, pos);
    if cx.span.contains(&b'\\') {
        cx.fill_span(top.key_start, pos + 1);
        let decoded: String = serde_json::from_slice(cx.span).unwrap_or_default();
        cx.span.clear();
        cx.span.extend_from_slice(decoded.as_bytes());
    }
    let h = hash128(cx.span);
    if checked {
        let keys = st.keys.get(top.keys_start as usize..).unwrap_or(&[]);
        let members = &cx.sets.members[top.set as usize];
        if keys.contains(&h) || (cx.sets.names_only(top.set) && !cx.checks.key_is_name(members, h)) {
            if let Some(k) = memo_key {
                cx.key_memo.insert(k, (h, 0, true, 0));
            }
            return Step::Fails;
        }
        st.keys.push(h);
    }
    let len = cx.span.len() as u32;
    let name = std::str::from_utf8(cx.span).unwrap_or("");
    let child = cx.sets.for_key(cx.checks, top.set, h, name);
    if let Some(k) = memo_key {
        cx.key_memo.insert(k, (h, child, false, len));
    }
    if let Some(top) = st.stack.last_mut() {
        top.child = child;
        if checked {
            top.key_lens |= 1 << (len % 64);
        }
    }
    Step::Ok
}

/// Whether the state after a token (at offset `end`) can still complete: a key of a checked
/// object whose schema allows only its named properties must remain a prefix of a name not
/// written yet (after a comma: some name must be left). Refusing the token that leads
/// into such a dead end loses no valid document.
pub(super) fn viable(st: &State, end: u32, cx: &mut Cx) -> bool {
    let Some(top) = st.stack.last().copied() else { return true };
    if !top.obj || !cx.sets.needs(top.set) {
        return true;
    }
    match st.lex {
        Lex::Str { key: true, esc: 0 } => {
            cx.fill_span(top.key_start + 1, end);
            if cx.span.contains(&b'\\') {
                return true;
            }
        }
        Lex::ObjKey => cx.span.clear(),
        _ => return true,
    }
    let keys = st.keys.get(top.keys_start as usize..).unwrap_or(&[]);
    cx.checks.key_may_continue(&cx.sets.members[top.set as usize], cx.span, keys)
}

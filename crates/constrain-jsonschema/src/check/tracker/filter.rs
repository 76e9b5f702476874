//! The mask filter: which allowed tokens could complete a failing value, tried on a copy
//! of the tracker's state, with their outcomes reused while the state stays alike.

use crate::util::hash128;
use crate::vocab::Vocabulary;
use crate::TokenId;
use rustc_hash::FxHashMap as HashMap;

use super::{lex::Lex, stats::Context, stats::Need, stats::TokenStats, Checker};

/// Which allowed tokens a mask's trial must run: every one, or those meeting one of the
/// needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Plan {
    pub(super) all: bool,
    pub(super) needs: Vec<Need>,
}

impl Plan {
    pub(super) fn is_empty(&self) -> bool {
        !self.all && self.needs.is_empty()
    }

    /// Drops each need that another implies (a token meeting it meets the other), so that
    /// no token is looked at twice for one reason.
    fn drop_implied(&mut self) {
        // `a` is met by every token that meets `b`.
        let weaker = |a: &Need, b: &Need| a.met_by([b.quotes, b.closers, b.commas, b.colons]);
        let mut i = 0;
        while i < self.needs.len() {
            let n = self.needs[i];
            let implied = self.needs.iter().enumerate().any(|(j, m)| j != i && weaker(m, &n) && (m != &n || j < i));
            if implied {
                self.needs.remove(i);
            } else {
                i += 1;
            }
        }
    }
}

/// The tokens the last mask tried and those that failed, valid for one tracker state (its
/// positions aside) as long as no trial read the text: consecutive masks inside one string
/// then skip the trials.
#[derive(Default)]
pub(super) struct Reuse {
    sig: u128,
    valid: bool,
    /// The tokens tried, with whether they failed.
    tried: HashMap<u32, bool>,
    /// Some trial of the current mask read the text.
    pub(super) used_text: bool,
    /// `tried` was matched to the current mask's signature (see [`Checker::sync_reuse`]).
    synced: bool,
    /// The signature's scratch bytes.
    buf: Vec<u8>,
}

impl Checker {
    /// Which tokens could complete a checked value (or a key of a checked object) from here:
    /// each need is necessary for what it guards. A string ends only at a quote, a
    /// container only at a closing bracket; a new member needs its key's quotes and colon,
    /// a next one a comma as well.
    pub(super) fn plan(&self, plan: &mut Plan) {
        plan.all = false;
        plan.needs.clear();
        let st = &self.state;
        let in_string = matches!(st.lex, Lex::Str { .. });
        let string_quote = in_string as u8;
        match st.lex {
            Lex::Done => return,
            Lex::Str { key: false, .. } if self.sets.needs(st.scalar_set) => plan.needs.push(Need::new(1, 0, 0, 0)),
            Lex::Num | Lex::Lit(_) if self.sets.needs(st.scalar_set) => plan.all = true,
            _ => {}
        }
        let Some(top) = st.stack.last() else {
            plan.all |= self.sets.flags(self.sets.root);
            return;
        };
        // A new key of the top object completing in this token (its value then starts).
        let key_need = |extra_colon: u8| match st.lex {
            Lex::Str { key: true, .. } => Need::new(1, 0, 0, extra_colon),
            Lex::ObjOpen | Lex::ObjKey => Need::new(2, 0, 0, extra_colon),
            Lex::Str { key: false, .. } => Need::new(3, 0, 1, extra_colon),
            _ => Need::new(2, 0, 1, extra_colon),
        };
        if self.sets.kids(top.set) {
            if top.obj {
                // The child completes after its key (and colon); a value being read
                // completes first.
                match st.lex {
                    Lex::Value => plan.all = true,
                    Lex::Colon => plan.needs.push(Need::new(0, 0, 0, 1)),
                    _ => plan.needs.push(key_need(1)),
                }
            } else {
                match st.lex {
                    Lex::Value | Lex::ArrOpen => plan.all = true,
                    _ => plan.needs.push(Need::new(string_quote, 0, 1, 0)),
                }
            }
        }
        // A key of a checked object that allows only its named properties must stay the
        // prefix of a name not written yet: every token that ends in a key, or after a
        // comma, is tried.
        if top.obj && self.sets.needs(top.set) && self.sets.names_only(top.set) {
            match st.lex {
                Lex::Str { key: true, .. } | Lex::ObjKey | Lex::ObjOpen => plan.all = true,
                Lex::Str { key: false, .. } => plan.needs.push(Need::new(1, 0, 1, 0)),
                _ => plan.needs.push(Need::new(0, 0, 1, 0)),
            }
        }
        // Keys of a checked object must not repeat.
        if top.obj && self.sets.needs(top.set) {
            if matches!(st.lex, Lex::Value | Lex::Colon) {
                plan.needs.push(Need::new(2, 0, 1, 0));
            } else {
                plan.needs.push(key_need(0));
            }
        }
        // An item of an array whose items must be unique, completing in this token.
        if !top.obj && self.sets.unique(top.set) {
            match st.lex {
                Lex::Str { key: false, .. } => plan.needs.push(Need::new(1, 0, 0, 0)),
                Lex::Num | Lex::Lit(_) | Lex::Value | Lex::ArrOpen => plan.all = true,
                _ => plan.needs.push(Need::new(0, 0, 1, 0)),
            }
        }
        // To complete an open checked value, or to reach a container whose new children
        // may be checked, a token must close the containers above it.
        let len = st.stack.len();
        let mut closers = u8::MAX;
        for (d, o) in st.stack.iter().enumerate() {
            // Below the top, climbing back to a container is enough for one of its checks to
            // apply (a key it already has, an item it already has, a new checked child); the
            // top itself must close.
            let watched = self.sets.needs(o.set) || self.sets.kids(o.set) || self.sets.unique(o.set);
            let c = if watched && d + 1 < len {
                len - 1 - d
            } else if self.sets.needs(o.set) {
                len - d
            } else {
                continue;
            };
            closers = closers.min(c.min(254) as u8);
        }
        if closers != u8::MAX {
            plan.needs.push(Need::new(string_quote, closers, 0, 0));
        }
        plan.drop_implied();
    }

    /// Clears from `mask` every token that would complete a value failing its check (or
    /// repeat a key of a checked object). Only the tokens [`Checker::plan`] names are tried;
    /// their outcomes are kept for the next mask while the state stays alike.
    pub fn filter(&mut self, mask: &mut [u32], vocab: &Vocabulary, stats: &TokenStats) {
        let mut plan = std::mem::take(&mut self.plan_buf);
        self.plan(&mut plan);
        if plan.is_empty() {
            self.plan_buf = plan;
            return;
        }
        self.forget_outcomes();
        self.reuse.used_text = false;
        self.reuse.synced = false;
        let context = Context::of(&self.state);
        let open = self.open_names();
        // A token no check can refuse from here is not tried; inside a key, a token that
        // ends it fails as the key alone does (one trial per spelling of the key); a token
        // tried already (in this mask, or in the last one with the same state) is not tried
        // again.
        let closed_top =
            self.state.stack.last().is_some_and(|o| o.obj && self.sets.needs(o.set) && self.sets.names_only(o.set));
        let loud = context.map(|c| stats.loud(c, closed_top));
        // Inside a string value whose end nothing checks (its set, or a unique array).
        let plain_string = match (context, self.state.stack.last()) {
            (Some(Context::Str), Some(top)) => {
                (!self.sets.needs(self.state.scalar_set) && (top.obj || !self.sets.unique(top.set))).then_some(!top.obj)
            }
            _ => None,
        };
        let try_token = |me: &mut Checker, t: u32, mask: &mut [u32]| {
            let (w, bit) = ((t / 32) as usize, 1u32 << (t % 32));
            if mask.get(w).is_none_or(|m| m & bit == 0) {
                return;
            }
            if loud.is_some_and(|l| l.get(w).is_some_and(|l| l & bit == 0)) {
                return;
            }
            if plain_string.is_some_and(|in_array| stats.quiet_after_string(t, in_array, closed_top)) {
                return;
            }
            if context == Some(Context::Key) {
                let bytes = vocab.token_bytes(TokenId(t));
                if let Some(part) = stats.key_end(t).and_then(|n| bytes.get(..n)) {
                    if me.key_end_fails(part, open) {
                        mask[w] &= !bit;
                    }
                    return;
                }
                if let Some(ranks) = open {
                    if !bytes.iter().any(|&b| b == b'"' || b == b'\\') {
                        if !me.key_goes_on(ranks, bytes) {
                            mask[w] &= !bit;
                        }
                        return;
                    }
                }
            }
            me.sync_reuse();
            let fails = match me.reuse.tried.get(&t) {
                Some(&f) => f,
                None => {
                    let f = !me.simulate(vocab, t);
                    me.reuse.tried.insert(t, f);
                    f
                }
            };
            if fails {
                mask[w] &= !bit;
            }
        };
        // Every allowed token that may need a trial.
        let try_all = |me: &mut Checker, mask: &mut [u32]| {
            let mut loud_allowed = std::mem::take(&mut me.gathered);
            gather(mask, loud, &mut loud_allowed);
            for &t in &loud_allowed {
                try_token(me, t, mask);
            }
            me.gathered = loud_allowed;
        };
        if plan.all {
            try_all(self, mask);
        } else {
            for need in &plan.needs {
                match stats.candidates(context, need) {
                    Some(list) => {
                        for &(t, c) in list {
                            let (w, bit) = ((t / 32) as usize, 1u32 << (t % 32));
                            let allowed = mask.get(w).is_some_and(|m| m & bit != 0)
                                && loud.is_none_or(|l| l.get(w).is_none_or(|l| l & bit != 0));
                            if allowed && need.met_by(c) {
                                try_token(self, t, mask);
                            }
                        }
                    }
                    // No kind asked for: every allowed token.
                    None => try_all(self, mask),
                }
            }
        }
        if self.reuse.synced {
            self.reuse.valid = !self.reuse.used_text;
        }
        self.plan_buf = plan;
    }

    /// Before the first trial of a mask: keeps the last mask's outcomes if they hold for
    /// this state, forgets them otherwise (the signature is computed only when some token
    /// needs a trial).
    fn sync_reuse(&mut self) {
        if self.reuse.synced {
            return;
        }
        let sig = self.signature();
        let r = &mut self.reuse;
        if !(r.valid && r.sig == sig) {
            r.tried.clear();
            r.sig = sig;
        }
        r.synced = true;
    }

    /// The tracker's state without its positions: what the trials' outcomes depend on
    /// when they read no text.
    fn signature(&mut self) -> u128 {
        let st = &self.state;
        let mut buf = std::mem::take(&mut self.reuse.buf);
        buf.clear();
        let lex: [u8; 3] = match st.lex {
            Lex::Value => [0, 0, 0],
            Lex::ArrOpen => [1, 0, 0],
            Lex::ObjOpen => [2, 0, 0],
            Lex::ObjKey => [3, 0, 0],
            Lex::Colon => [4, 0, 0],
            Lex::After => [5, 0, 0],
            Lex::Str { key, esc } => [6, key as u8, esc],
            Lex::Num => [7, 0, 0],
            Lex::Lit(n) => [8, n, 0],
            Lex::Done => [9, 0, 0],
        };
        buf.extend_from_slice(&lex);
        buf.extend_from_slice(&st.scalar_set.to_le_bytes());
        // How far back the string being read began, up to "before the last byte": a span
        // from further back reads the text (and voids the reuse), one from the last byte
        // does not, but whether the string so far is empty still decides (a key `""`).
        let n = self.levels.items().len();
        let began = match (st.lex, st.stack.last()) {
            (Lex::Str { key: true, .. }, Some(top)) => top.key_start as usize,
            (Lex::Str { .. } | Lex::Num | Lex::Lit(_), _) => st.scalar_start as usize,
            _ => n,
        };
        buf.push(n.saturating_sub(began).min(2) as u8);
        for o in &st.stack {
            buf.push(o.obj as u8);
            for x in [o.set, o.index, o.child] {
                buf.extend_from_slice(&x.to_le_bytes());
            }
        }
        buf.push(0xff);
        for k in &st.keys {
            buf.extend_from_slice(&k.to_le_bytes());
        }
        let h = hash128(&buf);
        self.reuse.buf = buf;
        h
    }

    /// Runs token `t` on a copy of the state: `false` if it completes a failing value.
    fn simulate(&mut self, vocab: &Vocabulary, t: u32) -> bool {
        let id = TokenId(t);
        if vocab.is_eos(id) || vocab.is_special(id) {
            return true;
        }
        self.run_sim(vocab.token_bytes(id), false).is_none()
    }
}

/// Lists in `out` the tokens set in `mask` and in `loud` (all of `mask` without `loud`),
/// skipping runs of empty words quickly.
fn gather(mask: &[u32], loud: Option<&[u32]>, out: &mut Vec<u32>) {
    const CHUNK: usize = 16;
    out.clear();
    let mut at = 0;
    for chunk in mask.chunks(CHUNK) {
        let l = loud.and_then(|l| l.get(at..at + chunk.len())).filter(|l| l.len() == chunk.len());
        let any = match l {
            Some(l) => chunk.iter().zip(l).fold(0, |a, (m, l)| a | (m & l)),
            None => chunk.iter().fold(0, |a, m| a | m),
        };
        if any != 0 {
            for (j, &m) in chunk.iter().enumerate() {
                let mut word = m & l.map_or(u32::MAX, |l| l[j]);
                while word != 0 {
                    let bit = word.trailing_zeros();
                    word &= word - 1;
                    out.push(((at + j) as u32) * 32 + bit);
                }
            }
        }
        at += chunk.len();
    }
}

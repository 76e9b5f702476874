//! The incremental JSON tracker behind the run-time checks: where each open value is, which
//! checked positions apply to it, and the validation of each value the moment it completes.
//!
//! One [`Checker`] per matcher. It keeps the output text, a small stack of open containers
//! with the *set* of schema positions that apply to each (interned in [`Sets`]), and one
//! snapshot per accepted token for rollback. The constraint's grammar guarantees the text is
//! JSON, so the tracker only follows structure; it never judges syntax.

use super::ValueChecks;
use crate::util::hash128;
use crate::vocab::Vocabulary;
use crate::TokenId;
use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;
use std::sync::Arc;

/// What the run-time checks need to know of each token of a vocabulary: how many quotes,
/// closing brackets, commas and colons it holds. Completing a value, a key or a member takes
/// some of each, so most tokens never need a trial.
pub(crate) struct TokenStats {
    /// Per lexical context (see [`Context`]; the last: any context), per set of kinds (bit
    /// 0 quote, 1 closer, 2 comma, 3 colon): the tokens holding at least one of each kind
    /// of the set, with their counts of each kind (saturating, in the order of [`Need`]'s
    /// fields), leaving out those the context makes impossible or quiet. A need looks only
    /// at the list of its context and kinds.
    lists: [[Box<[Candidate]>; 16]; Context::ALL.len() + 1],
    /// Per lexical context (see [`Context`]): a bitset of the tokens that, from there, may
    /// complete something or end inside a key. Every other token is *quiet* there: no
    /// check can refuse it.
    loud: [Box<[u32]>; Context::ALL.len()],
    /// As `loud`, without the tokens whose only effect is to end inside a key of the
    /// context's own object: for objects whose keys are free (only a closed object
    /// refuses a key before it ends, see [`viable`]).
    eventful: [Box<[u32]>; Context::ALL.len()],
    /// Per token, when its first quote ends a string value (no backslash before it): bit
    /// [`TAIL_QUIET`] (with [`TAIL_IN_ARRAY`] for arrays) when the rest is quiet after the
    /// value, [`TAIL_QUIET_BUT_KEY`] when it is but for ending in a key of the object.
    str_tail: Box<[u8]>,
    /// Per token: `q + 1` when, inside a key (no escape pending), its byte `q` is the quote
    /// that ends the key and the rest is quiet after a key: its outcome is that of the key
    /// it ends alone (`0` otherwise).
    key_end: Box<[u8]>,
}

/// A token of [`TokenStats::lists`], with its counts of quotes, closers, commas and colons.
type Candidate = (u32, [u8; 4]);

/// The lexical contexts a mask starts from that [`TokenStats::loud`] covers: the tracker's
/// [`Lex`], with the kind of the innermost container where it matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Context {
    Value,
    ArrOpen,
    ObjOpen,
    ObjKey,
    Colon,
    AfterInObject,
    AfterInArray,
    /// Inside a key, no escape pending.
    Key,
    /// Inside a string value, no escape pending.
    Str,
    Num,
}

impl Context {
    const ALL: [Context; 10] = [
        Context::Value,
        Context::ArrOpen,
        Context::ObjOpen,
        Context::ObjKey,
        Context::Colon,
        Context::AfterInObject,
        Context::AfterInArray,
        Context::Key,
        Context::Str,
        Context::Num,
    ];

    /// The context of `st`, if [`TokenStats::loud`] covers it.
    fn of(st: &State) -> Option<Context> {
        Some(match st.lex {
            Lex::Value => Context::Value,
            Lex::ArrOpen => Context::ArrOpen,
            Lex::ObjOpen => Context::ObjOpen,
            Lex::ObjKey => Context::ObjKey,
            Lex::Colon => Context::Colon,
            Lex::After if st.stack.last().is_some_and(|o| o.obj) => Context::AfterInObject,
            Lex::After => Context::AfterInArray,
            Lex::Str { key: true, esc: 0 } => Context::Key,
            Lex::Str { key: false, esc: 0 } => Context::Str,
            Lex::Num => Context::Num,
            Lex::Str { .. } | Lex::Lit(_) | Lex::Done => return None,
        })
    }

    /// The tracker's lexical state in this context, and whether the innermost container is
    /// an object (`None`: not known).
    fn start(self) -> (Lex, Option<bool>) {
        match self {
            Context::Value => (Lex::Value, None),
            Context::ArrOpen => (Lex::ArrOpen, Some(false)),
            Context::ObjOpen => (Lex::ObjOpen, Some(true)),
            Context::ObjKey => (Lex::ObjKey, Some(true)),
            Context::Colon => (Lex::Colon, Some(true)),
            Context::AfterInObject => (Lex::After, Some(true)),
            Context::AfterInArray => (Lex::After, Some(false)),
            Context::Key => (Lex::Str { key: true, esc: 0 }, Some(true)),
            Context::Str => (Lex::Str { key: false, esc: 0 }, None),
            Context::Num => (Lex::Num, None),
        }
    }
}

/// [`TokenStats::str_tail`]: the rest is quiet after a value in an object.
const TAIL_QUIET: u8 = 1;
/// [`TokenStats::str_tail`]: the rest is quiet but for ending in a key of the object.
const TAIL_QUIET_BUT_KEY: u8 = 2;
/// [`TokenStats::str_tail`]: shifts the bits for a value in an array.
const TAIL_IN_ARRAY: u8 = 2;

/// What [`read_token`] finds of a token read from a lexical context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reading {
    /// The token can follow there in JSON (`false` only where it surely cannot: the
    /// grammar, which keeps the output JSON, then never allows it there).
    possible: bool,
    /// The token completes nothing there (no string, key, number or literal ends, no
    /// bracket closes) and leaves the tracker outside a key: no check can refuse it.
    quiet: bool,
    /// As `quiet`, but the token may end inside a key of the context's own object (or
    /// after a comma there).
    quiet_but_key: bool,
}

/// Reads `bytes` from context `c` with the tracker's transitions ([`step`]) and JSON's
/// syntax: whether they are possible there, and quiet (see [`Reading`]). Where the reading
/// loses track (a bracket closes the context's own container), the token counts as
/// possible and not quiet: both answers err on the side of trying it.
fn read_token(c: Context, bytes: &[u8]) -> Reading {
    const IMPOSSIBLE: Reading = Reading { possible: false, quiet: false, quiet_but_key: false };
    const LOST: Reading = Reading { possible: true, quiet: false, quiet_but_key: false };
    let (mut lex, base) = c.start();
    // The literal's letters still to come.
    let mut letters: &[u8] = b"";
    // Containers opened by these bytes (`true`: an object), above the context's own.
    let mut opened: Vec<bool> = Vec::new();
    let mut quiet = true;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let in_object = opened.last().copied().or(base);
        // Closes the innermost container with `}` (`obj`) or `]`.
        let close = |opened: &mut Vec<bool>, obj: bool| -> Option<Reading> {
            if in_object.is_some_and(|o| o != obj) {
                return Some(IMPOSSIBLE);
            }
            opened.pop().is_none().then_some(LOST)
        };
        // A value starts with `b`: its state, or `None` when no value starts so.
        let start_value = |letters: &mut &[u8], opened: &mut Vec<bool>| -> Option<Lex> {
            Some(match b {
                b'{' => {
                    opened.push(true);
                    Lex::ObjOpen
                }
                b'[' => {
                    opened.push(false);
                    Lex::ArrOpen
                }
                b'"' => Lex::Str { key: false, esc: 0 },
                b't' | b'f' | b'n' => {
                    *letters = match b {
                        b't' => b"rue",
                        b'f' => b"alse",
                        _ => b"ull",
                    };
                    Lex::Lit(0)
                }
                b'-' | b'0'..=b'9' => Lex::Num,
                _ => return None,
            })
        };
        match lex {
            _ if is_ws(b) && !matches!(lex, Lex::Str { .. } | Lex::Num | Lex::Lit(_)) => {}
            Lex::Value | Lex::ArrOpen if b != b']' => match start_value(&mut letters, &mut opened) {
                Some(l) => lex = l,
                None => return IMPOSSIBLE,
            },
            Lex::Value => return IMPOSSIBLE,
            Lex::ArrOpen => {
                quiet = false;
                if let Some(r) = close(&mut opened, false) {
                    return r;
                }
                lex = Lex::After;
            }
            Lex::ObjOpen | Lex::ObjKey => match b {
                b'"' => lex = Lex::Str { key: true, esc: 0 },
                b'}' if lex == Lex::ObjOpen => {
                    quiet = false;
                    if let Some(r) = close(&mut opened, true) {
                        return r;
                    }
                    lex = Lex::After;
                }
                _ => return IMPOSSIBLE,
            },
            Lex::Colon => {
                if b != b':' {
                    return IMPOSSIBLE;
                }
                lex = Lex::Value;
            }
            Lex::After => match (b, in_object) {
                (b',', Some(true)) => lex = Lex::ObjKey,
                (b',', Some(false)) => lex = Lex::Value,
                (b',', None) => return LOST,
                (b']' | b'}', _) => {
                    quiet = false;
                    if let Some(r) = close(&mut opened, b == b'}') {
                        return r;
                    }
                    lex = Lex::After;
                }
                _ => return IMPOSSIBLE,
            },
            Lex::Str { key, esc } => {
                let esc = match esc {
                    0 if b == b'"' => {
                        quiet = false;
                        lex = if key { Lex::Colon } else { Lex::After };
                        i += 1;
                        continue;
                    }
                    0 if b == b'\\' => 1,
                    0 if b < 0x20 => return IMPOSSIBLE,
                    0 => 0,
                    1 if b == b'u' => 14,
                    1 if matches!(b, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => 0,
                    1 => return IMPOSSIBLE,
                    _ if !b.is_ascii_hexdigit() => return IMPOSSIBLE,
                    11 => 0,
                    n => n - 1,
                };
                lex = Lex::Str { key, esc };
            }
            Lex::Num => {
                if !matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    // The number ends before this byte, which is read again after it.
                    quiet = false;
                    lex = Lex::After;
                    continue;
                }
            }
            Lex::Lit(_) => match letters.split_first() {
                Some((&l, rest)) if l == b => {
                    letters = rest;
                    if letters.is_empty() {
                        quiet = false;
                        lex = Lex::After;
                    }
                }
                _ => return IMPOSSIBLE,
            },
            Lex::Done => return LOST,
        }
        i += 1;
    }
    let in_key = matches!(lex, Lex::Str { key: true, .. } | Lex::ObjKey);
    Reading { possible: true, quiet: quiet && !in_key, quiet_but_key: quiet && (!in_key || opened.is_empty()) }
}

impl TokenStats {
    /// Counts over every ordinary token of `vocab`.
    pub fn new(vocab: &Vocabulary) -> TokenStats {
        let mut lists: [[Vec<Candidate>; 16]; Context::ALL.len() + 1] = Default::default();
        // Tokens outside the grammar's (special ones) stay loud: they are tried.
        let mut loud: [Vec<u32>; Context::ALL.len()] = std::array::from_fn(|_| vec![u32::MAX; vocab.mask_words()]);
        let mut eventful = loud.clone();
        let mut key_end = vec![0u8; vocab.len()];
        let mut str_tail = vec![0u8; vocab.len()];
        for (id, bytes) in vocab.grammar_tokens() {
            let mut c = [0u8; 4];
            for &b in bytes {
                let i = match b {
                    b'"' => 0,
                    b']' | b'}' => 1,
                    b',' => 2,
                    b':' => 3,
                    _ => continue,
                };
                c[i] = c[i].saturating_add(1);
            }
            let kinds = (0..4).filter(|&i| c[i] > 0).fold(0usize, |k, i| k | 1 << i);
            // Per context (the last list set: any context), whether the token may need a
            // trial there.
            let mut tried_in = [true; Context::ALL.len() + 1];
            let (w, bit) = (id.index() / 32, 1u32 << (id.0 % 32));
            for (i, &cx) in Context::ALL.iter().enumerate() {
                let r = read_token(cx, bytes);
                tried_in[i] = r.possible && !r.quiet;
                if let (false, Some(word)) = (tried_in[i], loud[i].get_mut(w)) {
                    *word &= !bit;
                }
                if let (false, Some(word)) = (r.possible && !r.quiet_but_key, eventful[i].get_mut(w)) {
                    *word &= !bit;
                }
            }
            for (lists, _) in lists.iter_mut().zip(tried_in).filter(|(_, t)| *t) {
                for (set, list) in lists.iter_mut().enumerate().skip(1) {
                    if set & kinds == set {
                        list.push((id.0, c));
                    }
                }
            }
            // The first quote, when nothing escapes it: it ends a string value or a key.
            if let Some(at) = bytes.iter().position(|&b| b == b'"').filter(|&at| !bytes[..at].contains(&b'\\')) {
                let tail = &bytes[at + 1..];
                let mut flags = 0;
                for (cx, shift) in [(Context::AfterInObject, 0), (Context::AfterInArray, TAIL_IN_ARRAY)] {
                    let r = read_token(cx, tail);
                    if r.quiet {
                        flags |= TAIL_QUIET << shift;
                    }
                    if r.quiet_but_key {
                        flags |= TAIL_QUIET_BUT_KEY << shift;
                    }
                }
                if let Some(slot) = str_tail.get_mut(id.index()) {
                    *slot = flags;
                }
                let ends_key = at < u8::MAX as usize - 1 && read_token(Context::Colon, tail).quiet;
                if let (true, Some(slot)) = (ends_key, key_end.get_mut(id.index())) {
                    *slot = at as u8 + 1;
                }
            }
        }
        TokenStats {
            lists: lists.map(|l| l.map(Vec::into_boxed_slice)),
            loud: loud.map(Vec::into_boxed_slice),
            eventful: eventful.map(Vec::into_boxed_slice),
            key_end: key_end.into_boxed_slice(),
            str_tail: str_tail.into_boxed_slice(),
        }
    }

    /// The tokens that may need a trial from context `c` (see [`TokenStats::loud`]); `keys`:
    /// whether a key of the innermost object may be refused before it ends.
    fn loud(&self, c: Context, keys: bool) -> &[u32] {
        let sets = if keys { &self.loud } else { &self.eventful };
        sets.get(c as usize).map_or(&[][..], |l| &l[..])
    }

    /// Inside a string value whose end nothing checks, in an object (or an array, `in_array`)
    /// whose keys are free (or not, `keys`): whether token `t` is quiet, closing the string
    /// then quiet after it.
    fn quiet_after_string(&self, t: u32, in_array: bool, keys: bool) -> bool {
        let bit = if keys { TAIL_QUIET } else { TAIL_QUIET_BUT_KEY };
        let bit = if in_array { bit << TAIL_IN_ARRAY } else { bit };
        self.str_tail.get(t as usize).is_some_and(|f| f & bit != 0)
    }

    /// Inside a key: the length of token `t`'s part that ends the key, when the rest of it
    /// is quiet (see [`TokenStats::key_end`]).
    fn key_end(&self, t: u32) -> Option<usize> {
        self.key_end.get(t as usize).filter(|&&n| n > 0).map(|&n| n as usize)
    }

    /// The tokens holding every kind `need` asks for, with their counts (`None` when it
    /// asks for none).
    fn candidates(&self, context: Option<Context>, need: &Need) -> Option<&[Candidate]> {
        let kinds = [need.quotes, need.closers, need.commas, need.colons]
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .fold(0usize, |k, (i, _)| k | 1 << i);
        let lists = self.lists.get(context.map_or(Context::ALL.len(), |c| c as usize))?;
        (kinds != 0).then(|| lists.get(kinds).map_or(&[][..], |l| &l[..]))
    }
}

/// A necessary condition for a token to complete something checked: at least this many
/// quotes, closing brackets, commas and colons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Need {
    quotes: u8,
    closers: u8,
    commas: u8,
    colons: u8,
}

impl Need {
    const fn new(quotes: u8, closers: u8, commas: u8, colons: u8) -> Need {
        Need { quotes, closers, commas, colons }
    }

    /// Whether a token holding `c` quotes, closers, commas and colons meets the need.
    #[inline]
    fn met_by(&self, c: [u8; 4]) -> bool {
        c[0] >= self.quotes && c[1] >= self.closers && c[2] >= self.commas && c[3] >= self.colons
    }
}

/// Which allowed tokens a mask's trial must run: every one, or those meeting one of the
/// needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Plan {
    all: bool,
    needs: Vec<Need>,
}

impl Plan {
    fn is_empty(&self) -> bool {
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

/// The lexical state between two bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Lex {
    /// A value is expected (the document's start, after `:`, after `,` in an array).
    #[default]
    Value,
    /// Right after `[`: a value or `]`.
    ArrOpen,
    /// Right after `{`: a key or `}`.
    ObjOpen,
    /// After `,` in an object: a key.
    ObjKey,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    After,
    /// Inside a string; `esc` is 0, 1 after a backslash, or 10 + the hex digits left of a
    /// `\u` escape.
    Str { key: bool, esc: u8 },
    /// Inside a number (it completes at the first byte that cannot continue it, or the end).
    Num,
    /// Inside `true`/`false`/`null`, with this many letters left.
    Lit(u8),
    /// The document's value is complete.
    Done,
}

/// An open object or array.
#[derive(Clone, Copy, Debug)]
struct Open {
    obj: bool,
    /// The positions that apply to this container.
    set: u32,
    /// Byte offset of its opening bracket.
    start: u32,
    /// Arrays: the index of the next element.
    index: u32,
    /// Objects: byte offset of the current key's opening quote.
    key_start: u32,
    /// Objects: the set of the current member's value (known once its key is complete).
    child: u32,
    /// Checked objects: where this object's keys start in [`State::keys`].
    keys_start: u32,
    /// Checked objects: bit `n % 64` set for each key of `n` bytes (decoded) written, so
    /// that a key of another length is known not to repeat one without hashing it.
    key_lens: u64,
}

/// The tracker's state after some prefix of the output.
#[derive(Clone, Debug, Default)]
struct State {
    stack: Vec<Open>,
    lex: Lex,
    /// The set and start of the scalar being read (`Str` outside keys, `Num`, `Lit`).
    scalar_set: u32,
    scalar_start: u32,
    /// The keys (hashes of their decoded text) of the open checked objects, outermost
    /// first: a checked object may not repeat one.
    keys: Vec<u128>,
}

/// Interned sets of schema positions (each closed under `allOf` and `$ref`), with what the
/// tracker needs to know of each. Set 0 is the empty set: no check at or below.
pub(crate) struct Sets {
    members: Vec<Box<[u32]>>,
    /// Values of this set are validated when they complete.
    needs: Vec<bool>,
    /// Some value inside a value of this set may be.
    kids: Vec<bool>,
    /// Objects of this set allow only named properties (see [`viable`]).
    closed: Vec<bool>,
    /// Arrays of this set must have unique items (see [`item_done`]).
    unique: Vec<bool>,
    intern: HashMap<Box<[u32]>, u32>,
    /// Children by (set, hash of the key's bytes).
    by_key: HashMap<(u32, u128), u32>,
    by_index: HashMap<(u32, u32), u32>,
    root: u32,
}

/// Cached children per set stop growing past this many entries (a long free-form output
/// would otherwise grow them without bound); beyond it children are computed each time.
const MAX_CACHED_CHILDREN: usize = 1 << 16;

impl Sets {
    fn new(checks: &ValueChecks) -> Sets {
        let mut s = Sets {
            members: vec![Box::default()],
            needs: vec![false],
            kids: vec![false],
            closed: vec![false],
            unique: vec![false],
            intern: HashMap::default(),
            by_key: HashMap::default(),
            by_index: HashMap::default(),
            root: 0,
        };
        s.root = s.closed(checks, vec![checks.root]);
        s
    }

    /// Interns the closure of `start` under `also`.
    fn closed(&mut self, checks: &ValueChecks, mut list: Vec<u32>) -> u32 {
        let mut i = 0;
        while i < list.len() {
            if let Some(n) = checks.nodes.get(list[i] as usize) {
                for &a in &n.also {
                    if !list.contains(&a) {
                        list.push(a);
                    }
                }
            }
            i += 1;
        }
        list.sort_unstable();
        list.dedup();
        let needs = list.iter().any(|&n| checks.nodes.get(n as usize).is_some_and(|n| n.needs));
        let kids = list.iter().any(|&n| checks.nodes.get(n as usize).is_some_and(|n| n.kids));
        let closed = list.iter().any(|&n| checks.nodes.get(n as usize).is_some_and(|n| n.closed.is_some()));
        let unique = list.iter().any(|&n| checks.nodes.get(n as usize).is_some_and(|n| n.needs && n.unique));
        if !needs && !kids {
            return 0;
        }
        let list = list.into_boxed_slice();
        if let Some(&id) = self.intern.get(&list) {
            return id;
        }
        let id = self.members.len() as u32;
        self.intern.insert(list.clone(), id);
        self.members.push(list);
        self.needs.push(needs);
        self.kids.push(kids);
        self.closed.push(closed);
        self.unique.push(unique);
        id
    }

    fn flags(&self, set: u32) -> bool {
        let i = set as usize;
        self.needs.get(i).copied().unwrap_or(false) || self.kids.get(i).copied().unwrap_or(false)
    }

    fn needs(&self, set: u32) -> bool {
        self.needs.get(set as usize).copied().unwrap_or(false)
    }

    fn kids(&self, set: u32) -> bool {
        self.kids.get(set as usize).copied().unwrap_or(false)
    }

    fn unique(&self, set: u32) -> bool {
        self.unique.get(set as usize).copied().unwrap_or(false)
    }

    fn names_only(&self, set: u32) -> bool {
        self.closed.get(set as usize).copied().unwrap_or(false)
    }

    /// The set of the member named `key` of an object of `set`.
    fn for_key(&mut self, checks: &ValueChecks, set: u32, hash: u128, key: &str) -> u32 {
        if !self.kids.get(set as usize).copied().unwrap_or(false) {
            return 0;
        }
        let slot = (set, hash);
        if let Some(&c) = self.by_key.get(&slot) {
            return c;
        }
        let mut list = Vec::new();
        for &n in self.members[set as usize].iter() {
            let Some(node) = checks.nodes.get(n as usize) else { continue };
            let mut matched = false;
            if let Ok(i) = node.props.binary_search_by(|p| (*p.0).cmp(key)) {
                list.push(node.props[i].1);
                matched = true;
            }
            for (re, c) in &node.patterns {
                if re.is_match(key) {
                    list.push(*c);
                    matched = true;
                }
            }
            if !matched {
                list.extend(node.additional);
            }
        }
        let c = self.closed(checks, list);
        if self.by_key.len() < MAX_CACHED_CHILDREN {
            self.by_key.insert(slot, c);
        }
        c
    }

    /// The set of element `index` of an array of `set`.
    fn for_index(&mut self, checks: &ValueChecks, set: u32, index: u32) -> u32 {
        if !self.kids.get(set as usize).copied().unwrap_or(false) {
            return 0;
        }
        if let Some(&c) = self.by_index.get(&(set, index)) {
            return c;
        }
        let mut list = Vec::new();
        for &n in self.members[set as usize].iter() {
            let Some(node) = checks.nodes.get(n as usize) else { continue };
            match node.prefix.get(index as usize) {
                Some(&p) => list.push(p),
                None => list.extend(node.items),
            }
        }
        let c = self.closed(checks, list);
        if self.by_index.len() < MAX_CACHED_CHILDREN {
            self.by_index.insert((set, index), c);
        }
        c
    }
}

/// What a step found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Ok,
    /// A value completed that fails its check.
    Fails,
    /// (only when asked to stop there) A checked value would complete at this byte.
    Checked,
}

/// Validation results within one mask, by set, span bounds and the token bytes the span
/// takes.
type Verdicts = HashMap<(u32, u32, u32, u128), bool>;

/// The run-time checks of one sequence: the tracker state, the text, one snapshot per
/// accepted token.
pub(crate) struct Checker {
    checks: Arc<ValueChecks>,
    sets: Sets,
    state: State,
    text: Vec<u8>,
    /// The state and text length after each accepted token (index 0: the start).
    levels: Vec<(State, usize)>,
    /// Per level (parallel to `levels`): whether the document may end there.
    end_ok: Vec<bool>,
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
    /// [`gather`]'s buffer.
    gathered: Vec<u32>,
}

/// The tokens the last mask tried and those that failed, valid for one tracker state (its
/// positions aside) as long as no trial read the text: consecutive masks inside one string
/// then skip the trials.
#[derive(Default)]
struct Reuse {
    sig: u128,
    valid: bool,
    /// The tokens tried, with whether they failed.
    tried: HashMap<u32, bool>,
    /// Some trial of the current mask read the text.
    used_text: bool,
    /// `tried` was matched to the current mask's signature (see [`Checker::sync_reuse`]).
    synced: bool,
    /// The signature's scratch bytes.
    buf: Vec<u8>,
}

impl Checker {
    /// A checker at the start of the document.
    pub fn new(checks: Arc<ValueChecks>) -> Checker {
        let sets = Sets::new(&checks);
        let mut c = Checker {
            checks,
            sets,
            state: State::default(),
            text: Vec::new(),
            levels: Vec::new(),
            end_ok: Vec::new(),
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

    /// Back to the start (keeps the allocations and the interned sets).
    pub fn reset(&mut self) {
        self.state = State::default();
        self.text.clear();
        self.levels.clear();
        self.end_ok.clear();
        self.levels.push((State::default(), 0));
        // The empty document is not JSON: it never validates.
        self.end_ok.push(false);
    }

    /// The context of steps over the text so far and then `tok` (the token being tried, or
    /// nothing when the bytes were appended to the text already).
    fn cx<'a>(&'a mut self, tok: &'a [u8], stop_at_check: bool) -> Cx<'a> {
        Cx {
            checks: &self.checks,
            sets: &mut self.sets,
            text: &self.text,
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
        let base = self.text.len();
        self.text.extend_from_slice(bytes);
        let mut st = std::mem::take(&mut self.state);
        let ok = {
            let end = self.text.len() as u32;
            let mut cx = self.cx(&[], false);
            (0..bytes.len()).all(|i| step(&mut st, bytes[i], (base + i) as u32, &mut cx) == Step::Ok)
                && viable(&st, end, &mut cx)
        };
        if !ok {
            self.state = self.levels.last().map(|l| l.0.clone()).unwrap_or_default();
            self.text.truncate(base);
            return false;
        }
        self.state = st;
        self.levels.push((self.state.clone(), self.text.len()));
        self.end_ok.push(false);
        true
    }

    /// Whether the document may end after the bytes accepted so far, given that the grammar
    /// accepts there: a number at the top level is checked now, and the whole document is
    /// validated against the whole schema. Computed once per accepted token.
    pub fn end_ok(&mut self) -> bool {
        let n = self.levels.len() - 1;
        if let Some(&true) = self.end_ok.get(n) {
            return true;
        }
        let mut ok = true;
        self.forget_outcomes();
        if self.state.lex == Lex::Num && self.state.stack.is_empty() {
            let set = self.state.scalar_set;
            let start = self.state.scalar_start;
            let end = self.text.len() as u32;
            let mut cx = self.cx(&[], false);
            ok = complete(set, start, end, &mut cx) == Step::Ok;
        }
        ok = ok && self.checks.whole_is_valid(&self.text);
        if let Some(slot) = self.end_ok.get_mut(n) {
            *slot = ok;
        }
        ok
    }

    /// For closing mode's distances ([`crate::Matcher::min_bytes_to_finish_checked`]):
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
            Lex::Str { key: true, esc: 0 } => (self.text.get(top.key_start as usize + 1..).unwrap_or(&[]), &b""[..]),
            // After a comma: the key is still to begin.
            Lex::ObjKey => (&[][..], &b"\""[..]),
            _ => return false,
        };
        if prefix.contains(&b'\\') {
            return false;
        }
        let keys = self.state.keys.get(top.keys_start as usize..).unwrap_or(&[]);
        self.checks.key_endings(&self.sets.members[top.set as usize], prefix, keys, lead, out)
    }

    /// Whether the output is between JSON tokens (not inside a string, a number or a
    /// literal): there whitespace changes no value, so a completion with whitespace here
    /// is valid only if the same completion without it is (where the grammar allows both).
    pub fn between_tokens(&self) -> bool {
        !matches!(self.state.lex, Lex::Str { .. } | Lex::Num | Lex::Lit(_))
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
            self.end_ok.pop();
        }
        if let Some((st, len)) = self.levels.last() {
            self.state = st.clone();
            self.text.truncate(*len);
        }
    }

    /// Which tokens could complete a checked value (or a key of a checked object) from here:
    /// each need is necessary for what it guards. A string ends only at a quote, a
    /// container only at a closing bracket; a new member needs its key's quotes and colon,
    /// a next one a comma as well.
    fn plan(&self, plan: &mut Plan) {
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

    /// Inside a key (no escape pending): whether `part`, which ends it with its last byte
    /// (the quote), fails: the key repeats one of the object's, or no closed schema of the
    /// object allows it ([`end_key`]'s refusals). Decided from the key's hash when it has
    /// no escapes, by a trial otherwise.
    fn key_end_fails(&mut self, part: &[u8], open: Option<u32>) -> bool {
        let Some(top) = self.state.stack.last().copied() else { return false };
        if !self.sets.needs(top.set) {
            return false;
        }
        let before = self.text.get(top.key_start as usize + 1..).unwrap_or(&[]);
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
        self.span.extend_from_slice(before);
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
    fn open_names(&mut self) -> Option<u32> {
        let top = self.state.stack.last().copied()?;
        if self.state.lex != (Lex::Str { key: true, esc: 0 })
            || !self.sets.needs(top.set)
            || !self.sets.names_only(top.set)
        {
            return None;
        }
        let before = self.text.get(top.key_start as usize + 1..).unwrap_or(&[]);
        if before.contains(&b'\\') {
            return None;
        }
        let keys = self.state.keys.get(top.keys_start as usize..).unwrap_or(&[]);
        let ranks = self.checks.open_names(&self.sets.members[top.set as usize], before, keys, &mut self.names);
        Some(ranks)
    }

    /// Whether a key continued by `tok` (no quote, no backslash) is still the prefix of a
    /// name that each of the `ranks` closed schemas leaves open ([`viable`], from the
    /// names [`Checker::open_names`] listed).
    fn key_goes_on(&self, ranks: u32, tok: &[u8]) -> bool {
        let Some(top) = self.state.stack.last() else { return true };
        let at = self.text.len().saturating_sub(top.key_start as usize + 1);
        self.each_rank_has(ranks, at, |rest| rest.starts_with(tok))
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
        let n = self.text.len();
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
        let base = self.text.len();
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

/// What a step reads besides the state.
struct Cx<'a> {
    checks: &'a ValueChecks,
    sets: &'a mut Sets,
    /// The text accepted so far, then the token being tried (offsets run on from `text`).
    text: &'a [u8],
    tok: &'a [u8],
    span: &'a mut Vec<u8>,
    verdicts: &'a mut Verdicts,
    stop_at_check: bool,
    /// Set when a span reached into `text`: the outcome then depends on more than the
    /// tracker's state.
    used_text: bool,
    /// Keys begun before the token, by stack depth and the token bytes that end them: their
    /// hash, their value's set, whether they repeat a key (one mask's worth).
    key_memo: &'a mut KeyMemo,
}

/// See [`Cx::key_memo`]: the key's hash, its value's set, whether it repeats, its length.
type KeyMemo = HashMap<(u32, u128), (u128, u32, bool, u32)>;

impl Cx<'_> {
    /// Copies bytes `start..end` (offsets over text then token) into `span`.
    fn fill_span(&mut self, start: u32, end: u32) {
        self.span.clear();
        let (start, end) = (start as usize, end as usize);
        let n = self.text.len();
        if start < n {
            self.used_text = true;
            self.span.extend_from_slice(&self.text[start..end.min(n)]);
        }
        if end > n {
            let from = start.max(n) - n;
            self.span.extend_from_slice(self.tok.get(from..end - n).unwrap_or(&[]));
        }
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// A value of `set` spanning `start..end` is complete: validate it if its set says so.
fn complete(set: u32, start: u32, end: u32, cx: &mut Cx) -> Step {
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

/// The state after a complete value inside the current container (or at the top level).
fn after_value(st: &State) -> Lex {
    if st.stack.is_empty() {
        Lex::Done
    } else {
        Lex::After
    }
}

/// The key of the innermost object ends at `pos`: find its value's set, and refuse a key the
/// object already has when the object is checked (its grammar may then allow repeats).
fn end_key(st: &mut State, pos: u32, cx: &mut Cx) -> Step {
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
fn viable(st: &State, end: u32, cx: &mut Cx) -> bool {
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

/// A value starts with byte `b` at `pos`.
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
            st.lex = if b == b'{' { Lex::ObjOpen } else { Lex::ArrOpen };
        }
        b'"' => {
            st.lex = Lex::Str { key: false, esc: 0 };
            st.scalar_set = set;
            st.scalar_start = pos;
        }
        b't' | b'f' | b'n' => {
            st.lex = Lex::Lit(if b == b'f' { 4 } else { 3 });
            st.scalar_set = set;
            st.scalar_start = pos;
        }
        _ => {
            st.lex = Lex::Num;
            st.scalar_set = set;
            st.scalar_start = pos;
        }
    }
    Step::Ok
}

/// Closes the innermost container with the byte at `pos`.
fn close(st: &mut State, pos: u32, cx: &mut Cx) -> Step {
    let Some(open) = st.stack.pop() else { return Step::Ok };
    st.lex = after_value(st);
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

/// Feeds one byte at offset `pos`.
fn step(st: &mut State, b: u8, pos: u32, cx: &mut Cx) -> Step {
    match st.lex {
        Lex::Value => {
            if is_ws(b) {
                Step::Ok
            } else {
                start_value(st, b, pos, cx)
            }
        }
        Lex::ArrOpen => match b {
            _ if is_ws(b) => Step::Ok,
            b']' => close(st, pos, cx),
            _ => start_value(st, b, pos, cx),
        },
        Lex::ObjOpen | Lex::ObjKey => match b {
            b'"' => {
                if let Some(top) = st.stack.last_mut() {
                    top.key_start = pos;
                }
                st.lex = Lex::Str { key: true, esc: 0 };
                Step::Ok
            }
            b'}' if st.lex == Lex::ObjOpen => close(st, pos, cx),
            _ => Step::Ok,
        },
        Lex::Colon => {
            if b == b':' {
                st.lex = Lex::Value;
            }
            Step::Ok
        }
        Lex::After => match b {
            b',' => {
                st.lex = if st.stack.last().is_some_and(|o| o.obj) { Lex::ObjKey } else { Lex::Value };
                Step::Ok
            }
            b']' | b'}' => close(st, pos, cx),
            _ => Step::Ok,
        },
        Lex::Str { key, esc } => {
            let esc = match esc {
                0 if b == b'\\' => 1,
                0 if b == b'"' => {
                    if key {
                        st.lex = Lex::Colon;
                        return end_key(st, pos, cx);
                    }
                    st.lex = after_value(st);
                    return scalar_done(st, pos + 1, cx);
                }
                0 => 0,
                1 if b == b'u' => 14,
                1 => 0,
                11 => 0,
                n => n - 1,
            };
            st.lex = Lex::Str { key, esc };
            Step::Ok
        }
        Lex::Num => {
            if matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                return Step::Ok;
            }
            st.lex = after_value(st);
            let r = scalar_done(st, pos, cx);
            if r != Step::Ok {
                return r;
            }
            step(st, b, pos, cx)
        }
        Lex::Lit(left) => {
            if left <= 1 {
                st.lex = after_value(st);
                return scalar_done(st, pos + 1, cx);
            }
            st.lex = Lex::Lit(left - 1);
            Step::Ok
        }
        Lex::Done => Step::Ok,
    }
}

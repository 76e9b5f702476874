//! [`TokenStats`]: what the run-time checks know of each token of a vocabulary, so that a
//! mask tries only the tokens that could complete something checked.

use crate::vocab::Vocabulary;

use super::lex::{is_ws, Lex, State};

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
    pub(super) loud: [Box<[u32]>; Context::ALL.len()],
    /// As `loud`, without the tokens whose only effect is to end inside a key of the
    /// context's own object: for objects whose keys are free (only a closed object
    /// refuses a key before it ends, see [`viable`](super::keys::viable)).
    eventful: [Box<[u32]>; Context::ALL.len()],
    /// Per token, when its first quote ends a string value (no backslash before it): bit
    /// [`TAIL_QUIET`] (with [`TAIL_IN_ARRAY`] for arrays) when the rest is quiet after the
    /// value, [`TAIL_QUIET_BUT_KEY`] when it is but for ending in a key of the object.
    str_tail: Box<[u8]>,
    /// Per token: `q + 1` when, inside a key (no escape pending), its byte `q` is the quote
    /// that ends the key and the rest is quiet after a key: its outcome is that of the key
    /// it ends alone (`0` otherwise).
    pub(super) key_end: Box<[u8]>,
}

/// A token of [`TokenStats::lists`], with its counts of quotes, closers, commas and colons.
type Candidate = (u32, [u8; 4]);

/// The lexical contexts a mask starts from that [`TokenStats::loud`] covers: the tracker's
/// [`Lex`], with the kind of the innermost container where it matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Context {
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
    pub(super) fn of(st: &State) -> Option<Context> {
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
    pub(super) fn start(self) -> (Lex, Option<bool>) {
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

/// Reads `bytes` from context `c` with the tracker's transitions ([`step`](super::lex::step)) and JSON's
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
    pub(super) fn loud(&self, c: Context, keys: bool) -> &[u32] {
        let sets = if keys { &self.loud } else { &self.eventful };
        sets.get(c as usize).map_or(&[][..], |l| &l[..])
    }

    /// Inside a string value whose end nothing checks, in an object (or an array, `in_array`)
    /// whose keys are free (or not, `keys`): whether token `t` is quiet, closing the string
    /// then quiet after it.
    pub(super) fn quiet_after_string(&self, t: u32, in_array: bool, keys: bool) -> bool {
        let bit = if keys { TAIL_QUIET } else { TAIL_QUIET_BUT_KEY };
        let bit = if in_array { bit << TAIL_IN_ARRAY } else { bit };
        self.str_tail.get(t as usize).is_some_and(|f| f & bit != 0)
    }

    /// Inside a key: the length of token `t`'s part that ends the key, when the rest of it
    /// is quiet (see [`TokenStats::key_end`]).
    pub(super) fn key_end(&self, t: u32) -> Option<usize> {
        self.key_end.get(t as usize).filter(|&&n| n > 0).map(|&n| n as usize)
    }

    /// The tokens holding every kind `need` asks for, with their counts (`None` when it
    /// asks for none).
    pub(super) fn candidates(&self, context: Option<Context>, need: &Need) -> Option<&[Candidate]> {
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
pub(super) struct Need {
    pub(super) quotes: u8,
    pub(super) closers: u8,
    pub(super) commas: u8,
    pub(super) colons: u8,
}

impl Need {
    pub(super) const fn new(quotes: u8, closers: u8, commas: u8, colons: u8) -> Need {
        Need { quotes, closers, commas, colons }
    }

    /// Whether a token holding `c` quotes, closers, commas and colons meets the need.
    #[inline]
    pub(super) fn met_by(&self, c: [u8; 4]) -> bool {
        c[0] >= self.quotes && c[1] >= self.closers && c[2] >= self.commas && c[3] >= self.colons
    }
}

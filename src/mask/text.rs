//! Text tokens: the shortcuts that keep string bodies from walking the whole vocabulary.
//!
//! Most of a vocabulary is *text*: whole UTF-8 characters with no control character, quote,
//! backslash or line separator (124,895 of the DeepSeek tokenizer's 128k). Two kinds of
//! string body treat all text alike, so the walk only has to decide the rest — tokens with a
//! quote (where the string may end), an escape, a control character or a partial character —
//! from a trie of its own, about 3k tokens:
//!
//! - a body whose automaton takes any text character at every state it reaches that way,
//!   without completing (an unanchored `pattern`, a `format` searched for, a string with a
//!   `minLength`): every text token is accepted ([`text_closed`]);
//! - a counted loop each of whose iterations is exactly one text character or none it takes,
//!   followed by something that takes no text (`maxLength`, `.{1,255}`, `[^,]{1,255}`): a text
//!   token holding a character the loop refuses is rejected, and the others' conditions on
//!   the loop's count depend only on their number of characters ([`units_loop`]), so they are
//!   read off a walk of the probe tokens `a`, `aa`, `aaa`, … ([`ByChars`]).
//!
//! Either way the classification comes out the same as a walk of every token.

use super::trie::ByteTrie;
use super::{Accepted, Cond};
use crate::automaton::exec::Frame;
use crate::automaton::{Node, Pda};
use crate::vocab::Vocabulary;

/// A UTF-8 decoder's position between bytes (Unicode Table 3-7): [`BOUNDARY`] between
/// characters, otherwise which continuation bytes the character still needs.
type Utf8State = u8;

/// Between characters.
const BOUNDARY: Utf8State = 0;

/// The decoder's state after `byte`, for a text character: `None` when `byte` cannot come
/// next in valid UTF-8, or is a control character, `"` or `\`, or ends U+2028 or U+2029
/// (which never are text: an ECMA-262 `.` refuses these two line separators, and patterns
/// full of `.` are the loops [`units_loop`] is for).
fn text_step(state: Utf8State, byte: u8) -> Option<Utf8State> {
    // States 1–3 need that many more continuation bytes in 80–BF; 4–7 are the second byte
    // of E0, ED, F0 and F4 sequences, whose ranges are narrower; 8 and 9 follow E2 and
    // E2 80, where A8 and A9 would end a line separator.
    let next = match (state, byte) {
        (BOUNDARY, b'"' | b'\\') => return None,
        (BOUNDARY, 0x20..=0x7F) => BOUNDARY,
        (BOUNDARY, 0xC2..=0xDF) => 1,
        (BOUNDARY, 0xE0) => 4,
        (BOUNDARY, 0xE2) => 8,
        (8, 0x80) => 9,
        (8, 0x81..=0xBF) => 1,
        (9, 0xA8 | 0xA9) => return None,
        (9, 0x80..=0xBF) => BOUNDARY,
        (BOUNDARY, 0xE1 | 0xE3..=0xEC | 0xEE..=0xEF) => 2,
        (BOUNDARY, 0xED) => 5,
        (BOUNDARY, 0xF0) => 6,
        (BOUNDARY, 0xF1..=0xF3) => 3,
        (BOUNDARY, 0xF4) => 7,
        (1, 0x80..=0xBF) => BOUNDARY,
        (2 | 4, 0x80..=0xBF) if state == 2 || byte >= 0xA0 => 1,
        (5, 0x80..=0x9F) => 1,
        (3 | 6, 0x80..=0xBF) if state == 3 || byte >= 0x90 => 2,
        (7, 0x80..=0x8F) => 2,
        _ => return None,
    };
    Some(next)
}

/// Whether `bytes` is text: non-empty whole UTF-8 characters, none of them a control
/// character, `"`, `\`, U+2028 or U+2029.
fn is_text(bytes: &[u8]) -> bool {
    let mut state = BOUNDARY;
    for &b in bytes {
        match text_step(state, b) {
            Some(next) => state = next,
            None => return false,
        }
    }
    !bytes.is_empty() && state == BOUNDARY
}

/// The number of characters of `text` (its bytes that are no UTF-8 continuation byte).
fn characters(text: &[u8]) -> usize {
    text.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

/// The vocabulary split for the shortcuts: text tokens as a bitset and by length, every
/// other grammar token in a trie of its own.
#[derive(Debug)]
pub(crate) struct TextTokens {
    /// Over the mask width.
    pub bits: Box<[u32]>,
    pub count: usize,
    /// The grammar tokens that are not text.
    pub others: ByteTrie,
    /// The text tokens by number of characters: `by_chars[k - 1]` holds those of `k`.
    pub by_chars: Box<[Box<[u32]>]>,
    /// One probe token per length of `by_chars`: `a` repeated `k` times, with id `k - 1`.
    pub probe: ByteTrie,
    /// Per token id, the characters a text token holds, as [`Refused::bits`] would refuse
    /// them (0 for other tokens): a test of a whole token against a refused set.
    present: Box<[u128]>,
}

impl TextTokens {
    /// Splits `vocab`'s grammar tokens (once per tokenizer, with the [`super::TokenIndex`]).
    pub fn new(vocab: &Vocabulary) -> TextTokens {
        let mut bits = vec![0u32; vocab.mask_words()];
        let mut count = 0;
        let mut by_chars: Vec<Vec<u32>> = Vec::new();
        let mut present = vec![0u128; vocab.mask_words() * 32];
        let mut others: Vec<(&[u8], u32)> = Vec::new();
        for (id, bytes) in vocab.grammar_tokens() {
            if !is_text(bytes) {
                others.push((bytes, id.0));
            } else {
                super::set_bit(&mut bits, id.0);
                count += 1;
                if let Some(p) = present.get_mut(id.index()) {
                    *p = bytes.iter().fold(0, |p, &b| p | Refused::bit(b));
                }
                let k = characters(bytes);
                if by_chars.len() < k {
                    by_chars.resize_with(k, Vec::new);
                }
                by_chars[k - 1].push(id.0);
            }
        }
        let others = ByteTrie::build(others);
        let probes: Vec<Vec<u8>> = (1..=by_chars.len()).map(|k| vec![b'a'; k]).collect();
        let probe = ByteTrie::build(probes.iter().enumerate().map(|(k, p)| (p.as_slice(), k as u32)));
        let by_chars = by_chars.into_iter().map(Vec::into_boxed_slice).collect();
        TextTokens { bits: bits.into_boxed_slice(), count, others, by_chars, probe, present: present.into_boxed_slice() }
    }

    /// Heap bytes of the tables.
    pub fn memory_usage(&self) -> usize {
        self.bits.len() * 4
            + self.others.memory_usage()
            + self.by_chars.iter().map(|ids| ids.len() * 4).sum::<usize>()
            + self.probe.memory_usage()
            + self.present.len() * 16
    }

    /// Whether text token `id` holds a character `refused` refuses.
    fn holds(&self, refused: Refused, id: u32) -> bool {
        self.present.get(id as usize).is_some_and(|&p| p & refused.bits() != 0)
    }
}

/// A group of text tokens of [`super::ByCount`]: (smallest `Inside` iteration number, the
/// class's token list, its `Exited` numbers as a range of `ByCount::exits`).
pub(crate) type Group = (u32, u32, u32, u32);

/// What a walk of the probe tokens found for each length of text token: whether it is
/// accepted whatever the count, and its conditions on the count otherwise; the tokens
/// holding a `refused` character are rejected.
pub(crate) struct ByChars {
    /// Per length `k` (index `k - 1`).
    always: Vec<bool>,
    conds: Vec<Vec<Cond>>,
    refused: Refused,
}

impl ByChars {
    /// From the probe walk's accepted bitset (over probe ids) and conditional list.
    pub fn new(always: &[u32], conditional: &[(u32, Cond)], refused: Refused) -> ByChars {
        let lengths = always.len() * 32;
        let mut conds = vec![Vec::new(); lengths];
        for &(id, c) in conditional {
            if let Some(list) = conds.get_mut(id as usize) {
                list.push(c);
            }
        }
        let always = (0..lengths as u32).map(|id| super::is_allowed(always, crate::TokenId(id))).collect();
        ByChars { always, conds, refused }
    }

    /// Whether the tokens of length index `k` are accepted under some condition only (they
    /// make a group of [`super::ByCount`]).
    fn grouped(&self, k: usize) -> bool {
        self.conds.get(k).is_some_and(|c| !c.is_empty()) && !self.always.get(k).copied().unwrap_or(false)
    }

    /// Whether token `id` is in its length's share (not left out for a refused character).
    fn kept(&self, text: &TextTokens, id: u32) -> bool {
        self.refused.is_empty() || !text.holds(self.refused, id)
    }

    /// Adds the text tokens whose length's probe was accepted whatever the count to `acc`
    /// (which holds no text token yet: the walk that filled it was of
    /// [`TextTokens::others`]). The others are left to [`ByChars::groups`].
    pub fn add_always(&self, text: &TextTokens, acc: &mut Accepted) {
        for (ids, _) in text.by_chars.iter().zip(&self.always).filter(|(_, &always)| always) {
            for &id in ids.iter().filter(|&&id| self.kept(text, id)) {
                acc.add_fresh(id);
            }
        }
    }

    /// Every condition of every length.
    pub fn conds(&self) -> impl Iterator<Item = Cond> + '_ {
        self.conds.iter().flatten().copied()
    }

    /// The lengths that are accepted under some condition only, as groups of
    /// [`super::ByCount`] (ordered like its candidates: no `Inside` condition first, then by
    /// decreasing smallest `Inside` number), their `Exited` numbers appended to `exits`.
    pub fn groups(&self, exits: &mut Vec<u32>) -> Vec<Group> {
        let mut groups = Vec::new();
        for (k, conds) in self.conds.iter().enumerate().filter(|&(k, _)| self.grouped(k)) {
            let lo = exits.len() as u32;
            let mut inside = super::ONLY_EXITS;
            for &c in conds {
                match c {
                    Cond::Inside(n) => inside = inside.min(n),
                    Cond::Exited(n) => exits.push(n),
                    // In the probe's accepted set, not here.
                    Cond::Always => {}
                }
            }
            groups.push((inside, k as u32, lo, exits.len() as u32));
        }
        groups.sort_by_key(|&(inside, ..)| std::cmp::Reverse(inside));
        groups
    }

    /// Sets in `all` the tokens of the lengths [`ByChars::groups`] returns, but those
    /// holding a refused character; returns how many.
    pub fn set_grouped(&self, text: &TextTokens, all: &mut [u32]) -> usize {
        let mut count = 0;
        for (_, ids) in text.by_chars.iter().enumerate().filter(|&(k, _)| self.grouped(k)) {
            for &id in ids.iter().filter(|&&id| self.kept(text, id)) {
                super::set_bit(all, id);
                count += 1;
            }
        }
        count
    }
}

/// How many (node, decoder state) pairs [`walk_text`] explores before giving up (a rule
/// that large is no string body).
const MAX_PAIRS: usize = 4096;

/// Where [`walk_text`] goes from one node on one byte.
enum Flow {
    /// On to this node.
    Follow(u32),
    /// Not past this byte.
    Stop,
    /// The walk fails.
    Fail,
}

/// Walks the (node, decoder state) pairs that text characters reach from `node`: `visit`
/// gets each pair's node and state with each text byte the decoder allows next there (and
/// the state after it), and says where to go. Whether the walk ended without failing,
/// within [`MAX_PAIRS`] pairs.
fn walk_text(pda: &Pda, node: u32, mut visit: impl FnMut(&Node, Utf8State, u8, Utf8State) -> Flow) -> bool {
    let mut seen: rustc_hash::FxHashSet<(u32, Utf8State)> = Default::default();
    let mut todo = vec![(node, BOUNDARY)];
    seen.insert((node, BOUNDARY));
    while let Some((n, state)) = todo.pop() {
        let Some(at) = pda.nodes.get(n as usize) else { return false };
        for byte in 0..=255u8 {
            let Some(next) = text_step(state, byte) else { continue };
            match visit(at, state, byte, next) {
                Flow::Follow(t) => {
                    if seen.insert((t, next)) {
                        if seen.len() > MAX_PAIRS {
                            return false;
                        }
                        todo.push((t, next));
                    }
                }
                Flow::Stop => {}
                Flow::Fail => return false,
            }
        }
    }
    true
}

/// Whether every text token is consumed whole from `node` without leaving its rule: from
/// `node`, and from every node text characters lead to, every text byte the decoder allows
/// next has an edge, the node cannot complete its rule (so no stack below is consulted),
/// and no rule it calls can start with that byte (a string body calls its escapes, which
/// start with a backslash).
pub(crate) fn text_closed(pda: &Pda, node: u32) -> bool {
    walk_text(pda, node, |at, _, byte, _| {
        if at.is_final || at.repeat.is_some() || callee_takes(pda, at, byte) != Some(false) {
            return Flow::Fail;
        }
        at.step(byte).map_or(Flow::Fail, Flow::Follow)
    })
}

/// The first bytes of text characters that a loop body refuses outright: every text token
/// holding one is rejected, the others are classified by their number of characters. ASCII
/// bytes one by one; the lead bytes of other characters all together (refused or taken).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Refused {
    ascii: u128,
    non_ascii: bool,
}

impl Refused {
    /// The bit standing for `byte` in [`Refused::bits`]: its own for ASCII, bit 0 (a control
    /// character, never text) for the lead byte of any other character, none for a
    /// continuation byte.
    fn bit(byte: u8) -> u128 {
        match byte {
            0..=0x7F => 1 << byte,
            0xC0.. => 1,
            _ => 0,
        }
    }

    /// The refused characters as bits (see [`Refused::bit`]).
    fn bits(self) -> u128 {
        self.ascii | self.non_ascii as u128
    }

    /// Whether `text` holds a character this refuses.
    fn any_in(self, text: &[u8]) -> bool {
        text.iter().any(|&b| Refused::bit(b) & self.bits() != 0)
    }

    fn is_empty(self) -> bool {
        self == Refused::default()
    }
}

/// Whether, under the relaxed loop at `context[i]`, every text token's classes depend only
/// on its number of characters, except that those holding a character the loop's body
/// refuses are rejected (returned): each other text character read from the top (at the
/// loop, or at the body's start) and from the body's start completes one iteration exactly
/// ([`one_character`]), and what follows the loop in the frame below takes no text
/// character. (A loop at the bottom of the context is left to the probe walk: one that
/// leaves the context disqualifies itself, see [`super::Walk::probe`].) A loop followed by
/// text (a pattern searched for) is left to the walk: there every exit point is a stack of
/// its own, and the probes alone took milliseconds.
pub(crate) fn units_loop(pda: &Pda, context: &[Frame], i: usize) -> Option<Refused> {
    let repeat = context.get(i).and_then(|f| pda.nodes.get(f.node as usize))?.repeat?;
    let body = pda.rules.get(repeat.body as usize)?;
    let refused = one_character(pda, body.start)?;
    // The probe token's character.
    if refused.any_in(b"a") {
        return None;
    }
    match &context[i + 1..] {
        [] => {}
        [top] if top.node == body.start => {}
        _ => return None,
    }
    match i.checked_sub(1).and_then(|p| context.get(p)) {
        Some(parent) => takes_no_text(pda, pda.nodes.get(parent.node as usize)?).then_some(refused),
        None => Some(refused),
    }
}

/// Whether a rule `node` calls can start with `byte`: `None` when some callee could start
/// with a call or a loop, or end at once (its start node's edges are not all there is).
fn callee_takes(pda: &Pda, node: &Node, byte: u8) -> Option<bool> {
    let mut takes = false;
    for call in node.calls.iter() {
        let start = pda.rules.get(call.callee as usize).and_then(|r| pda.nodes.get(r.start as usize))?;
        if start.is_final || !start.calls.is_empty() || start.repeat.is_some() {
            return None;
        }
        takes |= start.step(byte).is_some();
    }
    Some(takes)
}

/// Whether `node` can neither consume a text character nor complete its rule.
fn takes_no_text(pda: &Pda, node: &Node) -> bool {
    !node.is_final
        && node.repeat.is_none()
        && (0..=255u8)
            .filter(|&b| text_step(BOUNDARY, b).is_some())
            .all(|b| node.step(b).is_none() && callee_takes(pda, node, b) == Some(false))
}

/// Whether every text character read from `node` either completes its rule exactly or is
/// refused at its first byte, and which are refused (`None` when neither holds for some):
/// no rule the node calls starts with a text byte, every byte of every character taken
/// has an edge, the nodes inside a character neither call nor complete, and each character
/// ends at a node that completes the rule and has no edge at all. The characters taken
/// then all do the same thing from `node`.
fn one_character(pda: &Pda, node: u32) -> Option<Refused> {
    let mut refused = Refused::default();
    let mut non_ascii_taken = false;
    let uniform = walk_text(pda, node, |at, state, byte, next| {
        let calls_fit = if state == BOUNDARY { callee_takes(pda, at, byte) == Some(false) } else { at.calls.is_empty() };
        if at.is_final || at.repeat.is_some() || !calls_fit {
            return Flow::Fail;
        }
        let Some(t) = at.step(byte) else {
            match (state, byte) {
                (BOUNDARY, 0..=0x7F) => refused.ascii |= 1 << byte,
                (BOUNDARY, _) => refused.non_ascii = true,
                _ => return Flow::Fail,
            }
            return Flow::Stop;
        };
        non_ascii_taken |= state == BOUNDARY && byte >= 0x80;
        if next != BOUNDARY {
            return Flow::Follow(t);
        }
        let end = pda.nodes.get(t as usize);
        if end.is_some_and(|e| e.is_final && e.bytes.is_empty() && e.calls.is_empty() && e.repeat.is_none()) {
            Flow::Stop
        } else {
            Flow::Fail
        }
    });
    (uniform && !(refused.non_ascii && non_ascii_taken)).then_some(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_whole_characters_without_quote_backslash_or_control() {
        for t in ["a", "hello world", "é", "日本", "😀", "\u{7F}", " "] {
            assert!(is_text(t.as_bytes()), "{t:?}");
        }
        for t in ["\"", "a\"", "\\n", "\n", "a\tb", "", "\u{2028}", "a\u{2029}"] {
            assert!(!is_text(t.as_bytes()), "{t:?}");
        }
        // Partial characters, stray continuation bytes, overlongs, surrogates, past U+10FFFF.
        let bad: [&[u8]; 8] =
            [b"\xC3", b"\xA9", b"\xC0\x80", b"\xE0\x80\x80", b"\xED\xA0\x80", b"\xF4\x90\x80\x80", b"\xF5", b"\xE6\x97"];
        for b in bad {
            assert!(!is_text(b), "{b:?}");
        }
        // Agrees with the standard library on every string of up to two bytes, and on
        // every three-byte string led by E0–EF.
        let std_text = |s: &[u8]| {
            std::str::from_utf8(s).is_ok_and(|s| s.chars().all(|c| c >= ' ' && !matches!(c, '"' | '\\' | '\u{2028}' | '\u{2029}')))
        };
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(is_text(&[a, b]), std_text(&[a, b]), "{:?}", [a, b]);
                for c in (0xE0..=0xEF).filter(|_| a >= 0x80) {
                    let s = [c, a, b];
                    assert_eq!(is_text(&s), std_text(&s), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn text_closed_only_where_every_character_is_taken() {
        let limits = crate::Limits::default();
        let pda_of = |schema: serde_json::Value| {
            let grammar = crate::schema::compile(&schema, &crate::schema::Options::default()).expect("compiles");
            Pda::build(&grammar, &limits).expect("automaton")
        };
        let closed_nodes = |pda: &Pda| (0..pda.nodes.len() as u32).filter(|&n| text_closed(pda, n)).count();
        // An unanchored pattern: its body takes any character until the match and after.
        let pda = pda_of(serde_json::json!({"type": "string", "pattern": "[0-9]{4}-[0-9]{2}"}));
        assert!(closed_nodes(&pda) > 0, "{}", pda.listing());
        // An anchored pattern or an enum: some character is refused somewhere.
        for schema in [
            serde_json::json!({"type": "string", "pattern": "^[a-z]+$"}),
            serde_json::json!({"enum": ["ab", "cd"]}),
            serde_json::json!({"type": "integer"}),
        ] {
            let pda = pda_of(schema.clone());
            assert_eq!(closed_nodes(&pda), 0, "{schema}: {}", pda.listing());
        }
    }

    #[test]
    fn loops_of_one_character_an_iteration() {
        let limits = crate::Limits::default();
        // What every loop body of the schema's automaton refuses (`None`: not one character
        // an iteration).
        let bodies = |schema: serde_json::Value| {
            // Compact: the pretty indent is a loop of its own.
            let options = crate::schema::Options { whitespace: crate::schema::Whitespace::Compact, ..Default::default() };
            let grammar = crate::schema::compile(&schema, &options).expect("compiles");
            let pda = Pda::build(&grammar, &limits).expect("automaton");
            let loops: Vec<_> = pda.nodes.iter().filter_map(|n| n.repeat).collect();
            assert!(!loops.is_empty(), "{schema}: no loop in {}", pda.listing());
            loops.iter().map(|l| one_character(&pda, pda.rules[l.body as usize].start)).collect::<Vec<_>>()
        };
        let string = |extra: serde_json::Value| {
            let mut schema = serde_json::json!({"type": "string"});
            schema.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            bodies(schema)
        };
        let none = Refused::default();
        assert_eq!(string(serde_json::json!({"maxLength": 40})), [Some(none)]);
        // ECMA `.` refuses U+2028 and U+2029, which are no text.
        assert_eq!(string(serde_json::json!({"pattern": "^.{1,25}$"})), [Some(none)]);
        let comma = Refused { ascii: 1 << b',', non_ascii: false };
        assert_eq!(string(serde_json::json!({"pattern": "^[^,]+$", "maxLength": 30})), [Some(comma)]);
        let [Some(ascii_only)] = string(serde_json::json!({"pattern": "^[ -~]{2,20}$"}))[..] else { panic!() };
        // DEL is text, and past `~`.
        assert!(ascii_only.non_ascii && ascii_only.ascii == 1 << 0x7F);
        assert!(ascii_only.any_in("aé".as_bytes()) && !ascii_only.any_in(b"a b"));
        // Two characters an iteration; some non-ASCII characters taken and others not.
        assert_eq!(string(serde_json::json!({"pattern": "^(ab){7,30}$"})), [None]);
        assert_eq!(string(serde_json::json!({"pattern": "^[aé]{7,30}$"})), [None]);
    }
}

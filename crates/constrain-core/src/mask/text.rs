//! Text tokens: the shortcuts that keep string bodies from walking the whole vocabulary.
//!
//! Most of a vocabulary is *text*: whole UTF-8 characters with no control character, quote,
//! backslash or line separator (124,895 of the DeepSeek tokenizer's 128k). Two kinds of
//! string body treat all text alike, so the walk only has to decide the rest — tokens with a
//! quote (where the string may end), an escape, a control character or a partial character —
//! from a trie of its own, about 3k tokens:
//!
//! - a body that takes any text once its first character is allowed (an unanchored
//!   `pattern`, a `format` searched for, a string with a `minLength`, the rest of a string
//!   searched for a run of characters after a character outside the run): every text token
//!   is accepted but those starting with a refused character ([`text_closed`] proves the
//!   common case from the node's edges, [`super::viable`] the rest);
//! - a counted loop each of whose iterations is exactly one text character or none it takes
//!   (`maxLength`, `.{1,255}`, `[^,]{1,255}`, `[0-9a-f]{24}`), followed by something that
//!   takes no text, or takes any text once its first character is allowed ([`units_loop`]).
//!   A text token's conditions on the loop's count then depend only on its number of
//!   characters if the loop refuses none of them, and otherwise on where the first refused
//!   one is ([`CharLists`]), so they are read off a walk of probe tokens: `a`, `aa`, `aaa`,
//!   …, and `,`, `a,`, `aa,`, … ([`probes`], [`ByChars`]). A loop that takes some non-ASCII
//!   characters and refuses others (`[a-zé]`, `[^£]`) counts them all as refused, and the
//!   text tokens holding a character whose lead byte it takes are walked with the rest (2.2k
//!   of the DeepSeek tokenizer's for é's lead byte, 101 for £'s).
//!
//! Either way the classification comes out the same as a walk of every token.

use super::relaxed::Cond;
use super::trie::ByteTrie;
use super::walk::Accepted;
use crate::automaton::exec::Frame;
use crate::automaton::{Node, NodeId, Pda};
use crate::vocab::Vocabulary;
use std::sync::Arc;

/// A UTF-8 decoder's position between bytes (Unicode Table 3-7): [`BOUNDARY`] between
/// characters, otherwise which continuation bytes the character still needs.
pub(super) type Utf8State = u8;

/// Between characters.
pub(super) const BOUNDARY: Utf8State = 0;

/// The number of decoder states ([`text_step`] knows states below it).
pub(super) const UTF8_STATES: Utf8State = 10;

/// The decoder's state after `byte`, for a text character: `None` when `byte` cannot come
/// next in valid UTF-8, or is a control character, `"` or `\`, or ends U+2028 or U+2029
/// (which never are text: an ECMA-262 `.` refuses these two line separators, and patterns
/// full of `.` are the loops [`units_loop`] is for).
pub(super) fn text_step(state: Utf8State, byte: u8) -> Option<Utf8State> {
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
    /// The grammar tokens that are not text.
    pub others: ByteTrie,
    /// The text tokens by number of characters: `by_chars[k - 1]` holds those of `k`.
    by_chars: Arc<[Box<[u32]>]>,
    /// The same for the text tokens holding no non-ASCII character.
    ascii_by_chars: Arc<[Box<[u32]>]>,
    /// Per token id, the characters a text token holds, as [`Refused::bits`] would refuse
    /// them (0 for other tokens): a test of a whole token against a refused set.
    present: Box<[u128]>,
    /// The low 32 bits of `present` (where the [`lead_bit`]s are), per position in the
    /// vocabulary trie's ids, for [`TextTokens::holding_leads`].
    leads_in_trie: Box<[u32]>,
    /// Per node of the vocabulary trie, the OR of `leads_in_trie` at it and below it: the
    /// subtrees [`TextTokens::holding_leads`] skips.
    leads_below: Box<[u32]>,
}

impl TextTokens {
    /// Splits `vocab`'s grammar tokens (once per tokenizer, with the [`super::TokenIndex`]),
    /// whose byte trie is `trie`.
    pub fn new(vocab: &Vocabulary, trie: &ByteTrie) -> TextTokens {
        let mut bits = vec![0u32; vocab.mask_words()];
        let mut by_chars: Vec<Vec<u32>> = Vec::new();
        let mut ascii_by_chars: Vec<Vec<u32>> = Vec::new();
        let mut present = vec![0u128; vocab.mask_words() * 32];
        let mut others: Vec<(&[u8], u32)> = Vec::new();
        for (id, bytes) in vocab.grammar_tokens() {
            if !is_text(bytes) {
                others.push((bytes, id.0));
            } else {
                super::set_bit(&mut bits, id.0);
                if let Some(p) = present.get_mut(id.index()) {
                    let lead = |b: u8| if b >= 0xC2 { lead_bit(b) } else { 0 };
                    *p = bytes.iter().fold(0, |p, &b| p | Refused::bit(b) | lead(b));
                }
                let k = characters(bytes);
                if by_chars.len() < k {
                    by_chars.resize_with(k, Vec::new);
                    ascii_by_chars.resize_with(k, Vec::new);
                }
                by_chars[k - 1].push(id.0);
                if bytes.is_ascii() {
                    ascii_by_chars[k - 1].push(id.0);
                }
            }
        }
        let others = ByteTrie::build(others);
        let lists = |lists: Vec<Vec<u32>>| lists.into_iter().map(Vec::into_boxed_slice).collect();
        let leads_in_trie: Box<[u32]> =
            trie.ids.iter().map(|&id| present.get(id as usize).map_or(0, |&p| p as u32)).collect();
        let leads_below = trie.or_below(|at| leads_in_trie.get(at).copied().unwrap_or(0));
        TextTokens {
            bits: bits.into_boxed_slice(),
            others,
            by_chars: lists(by_chars),
            ascii_by_chars: lists(ascii_by_chars),
            present: present.into_boxed_slice(),
            leads_in_trie,
            leads_below,
        }
    }

    /// Heap bytes of the tables.
    pub fn memory_usage(&self) -> usize {
        self.bits.len() * 4
            + self.others.memory_usage()
            + self.by_chars.iter().chain(self.ascii_by_chars.iter()).map(|ids| ids.len() * 4).sum::<usize>()
            + self.present.len() * 16
            + (self.leads_in_trie.len() + self.leads_below.len()) * 4
    }

    /// The text tokens holding a non-ASCII character led by one of `leads` ([`lead_bit`]s; and
    /// a few others), as a trie for the walk: `trie` (the vocabulary's) cut to them.
    pub fn holding_leads(&self, trie: &ByteTrie, leads: u128) -> ByteTrie {
        // Lead bits are bits 1 to 31 ([`lead_bit`]): the low word of `present` holds them.
        let leads = leads as u32;
        trie.filtered(
            |i| self.leads_below.get(i).is_some_and(|&l| l & leads != 0),
            |at| self.leads_in_trie.get(at).is_some_and(|&l| l & leads != 0),
        )
    }

    /// Whether text token `id` holds a character `refused` refuses.
    fn holds(&self, refused: Refused, id: u32) -> bool {
        self.present.get(id as usize).is_some_and(|&p| p & refused.bits() != 0)
    }
}

/// The text tokens as a loop of one character an iteration that refuses some characters
/// tells them apart: those holding no refused character by their number of characters, the
/// others by where their first refused character is.
#[derive(Debug)]
pub(crate) struct CharLists {
    /// `by_length[k - 1]`: the tokens of `k` characters (but those holding a `left_out`
    /// character, which belong to no group).
    by_length: Arc<[Box<[u32]>]>,
    left_out: Refused,
    /// `by_prefix[p]`: the tokens whose first refused character is their `p`-th (from 0).
    by_prefix: Box<[Box<[u32]>]>,
}

impl CharLists {
    /// The length groups alone, for a loop followed by nothing that takes text (a token
    /// holding a character it refuses is rejected): the tokenizer's own lists, filtered as
    /// they are read.
    pub fn lengths_only(text: &TextTokens, refused: Refused) -> CharLists {
        CharLists { by_length: text.by_chars.clone(), left_out: refused, by_prefix: Box::new([]) }
    }

    /// The length groups alone over the tokens holding no non-ASCII character, for such a
    /// loop that takes some non-ASCII characters and refuses others ([`one_character`]):
    /// the tokens holding one are walked.
    pub fn ascii_only(text: &TextTokens, refused: Refused) -> CharLists {
        CharLists { by_length: text.ascii_by_chars.clone(), left_out: refused, by_prefix: Box::new([]) }
    }

    /// Both kinds of group for a loop refusing `refused`, from one pass over `trie` (the
    /// vocabulary's): a subtree under a refused character is one prefix group whole, so only
    /// the paths of taken characters are walked. Made once per refused set and tokenizer
    /// ([`super::TokenIndex::char_lists`]).
    pub fn new(text: &TextTokens, trie: &ByteTrie, refused: Refused) -> CharLists {
        let lengths = text.by_chars.len();
        let mut by_length = vec![Vec::new(); lengths];
        let mut by_prefix = vec![Vec::new(); lengths];
        let is_text = |id: &&u32| super::is_allowed(&text.bits, crate::TokenId(**id));
        // `chars[d]`: the characters of the path down to depth `d`.
        let mut chars: Vec<usize> = vec![0];
        let mut i = 0;
        while let Some(node) = trie.nodes.get(i) {
            let depth = node.depth as usize;
            chars.truncate(depth);
            let before = chars.last().copied().unwrap_or(0);
            // No text token holds a control character, a quote or a backslash.
            if node.byte < 0x20 || node.byte == b'"' || node.byte == b'\\' {
                i = node.end as usize;
                continue;
            }
            let starts_char = node.byte & 0xC0 != 0x80;
            if starts_char && refused.refuses(node.byte) {
                let below = trie.descendant_ids(i).end.max(node.ids_end as usize);
                if let (Some(ids), Some(list)) =
                    (trie.ids.get(node.ids_start as usize..below), by_prefix.get_mut(before))
                {
                    list.extend(ids.iter().filter(is_text));
                }
                i = node.end as usize;
                continue;
            }
            let count = before + starts_char as usize;
            chars.push(count);
            if let Some(list) = count.checked_sub(1).and_then(|k| by_length.get_mut(k)) {
                list.extend(trie.ids_at(node).iter().filter(is_text));
            }
            i += 1;
        }
        CharLists {
            by_length: by_length.into_iter().map(Vec::into_boxed_slice).collect(),
            left_out: Refused::default(),
            by_prefix: by_prefix.into_iter().map(Vec::into_boxed_slice).collect(),
        }
    }

    /// The number of length groups (the longest text token, in characters).
    pub fn lengths(&self) -> usize {
        self.by_length.len()
    }

    /// Group `g`'s tokens: the length groups first (`g = k - 1`), then the prefix groups
    /// (`g = lengths + p`), numbered like the probes of [`probes`]. May hold tokens that
    /// belong to no group ([`CharLists::group_members`] leaves them out): clearing them from
    /// a set that never held them is harmless.
    pub fn group(&self, g: usize) -> &[u32] {
        match g.checked_sub(self.lengths()) {
            None => self.by_length.get(g),
            Some(p) => self.by_prefix.get(p),
        }
        .map_or(&[], |ids| ids)
    }

    /// Group `g`'s tokens, none left out.
    fn group_members<'a>(&'a self, text: &'a TextTokens, g: usize) -> impl Iterator<Item = u32> + 'a {
        let left_out = self.left_out;
        self.group(g).iter().copied().filter(move |&id| left_out.is_empty() || !text.holds(left_out, id))
    }

    /// Heap bytes, not counting the length lists shared with [`TextTokens`].
    pub fn memory_usage(&self) -> usize {
        let listed = |lists: &[Box<[u32]>]| lists.iter().map(|ids| ids.len() * 4).sum::<usize>();
        listed(&self.by_prefix) + if self.by_prefix.is_empty() { 0 } else { listed(&self.by_length) }
    }
}

/// The ASCII characters that are text, as [`Refused::ascii`] bits.
const TEXT_ASCII: u128 = !0u128 << 0x20 & !(1 << b'"') & !(1 << b'\\');

/// The probe tokens of a loop that refuses `refused`, for lists of `lengths` length groups:
/// `x` repeated `k` times for each length `k` (id `k - 1`), and with `prefixes`, `x` repeated
/// `p` times and then `z` for each `p` (id `lengths + p`), where the loop takes `x` and
/// refuses `z`. `None` when the loop takes no ASCII character.
pub(crate) fn probes(lengths: usize, refused: Refused, prefixes: bool) -> Option<ByteTrie> {
    let taken = |b: &u8| Refused::ALL.refuses(*b) && !refused.refuses(*b);
    let x = if taken(&b'a') { b'a' } else { (0x20..0x80u8).find(taken)? };
    let z: Vec<u8> = match (0x20..0x80u8).find(|&b| Refused::ALL.refuses(b) && refused.refuses(b)) {
        Some(b) => vec![b],
        // U+00E9: refused with every other non-ASCII character.
        None => "\u{e9}".as_bytes().to_vec(),
    };
    let mut probes: Vec<(Vec<u8>, u32)> = (1..=lengths).map(|k| (vec![x; k], k as u32 - 1)).collect();
    if prefixes && !refused.is_empty() {
        probes.extend((0..lengths).map(|p| ([vec![x; p].as_slice(), &z].concat(), (lengths + p) as u32)));
    }
    Some(ByteTrie::build(probes.iter().map(|(p, id)| (p.as_slice(), *id))))
}

/// A group of text tokens of [`super::ByCount`]: (smallest `Inside` iteration number, the
/// group's number in [`CharLists::group`], its `Exited` numbers as a range of
/// `ByCount::exits`).
pub(crate) type Group = (u32, u32, u32, u32);

/// What a walk of the [`probes`] found for each group of text tokens ([`CharLists`]):
/// whether it is accepted whatever the count, and its conditions on the count otherwise.
pub(crate) struct ByChars {
    /// Per group.
    always: Vec<bool>,
    conds: Vec<Vec<Cond>>,
    lists: Arc<CharLists>,
}

impl ByChars {
    /// From what the probe walk accepted (over probe ids) and left pending: a probe that left
    /// the loop's context has its remainder judged by `exit`, the
    /// first characters what follows the loop refuses (then taking any text), `None` when
    /// the loop is the context's bottom (the frames below would decide). `None` when the
    /// remainder's first character does not decide alike for all the characters it stands
    /// for.
    pub fn new(
        accepted: &Accepted,
        pending: &[(u32, u32, Cond)],
        refused: Refused,
        exit: Option<Refused>,
        lists: Arc<CharLists>,
    ) -> Option<ByChars> {
        let groups = lists.lengths() + lists.by_prefix.len();
        let mut conds = vec![Vec::new(); groups];
        for &(id, c) in &accepted.conditional {
            conds.get_mut(id as usize)?.push(c);
        }
        let mut always: Vec<bool> =
            (0..groups as u32).map(|id| super::is_allowed(&accepted.always, crate::TokenId(id))).collect();
        for &(id, j, c) in pending {
            // The remainder starts with the refused character of a prefix probe, or with a
            // taken one.
            let at_refused = (id as usize).checked_sub(lists.lengths()) == Some(j as usize);
            let first = if at_refused { refused } else { refused.complement() };
            if exit?.takes(first)? {
                match c {
                    Cond::Always => *always.get_mut(id as usize)? = true,
                    c => conds.get_mut(id as usize)?.push(c),
                }
            }
        }
        Some(ByChars { always, conds, lists })
    }

    /// The token lists the groups are numbered in.
    pub fn lists(&self) -> &Arc<CharLists> {
        &self.lists
    }

    /// Whether group `g` is accepted under some condition only (it makes a group of
    /// [`super::ByCount`]).
    fn grouped(&self, g: usize) -> bool {
        self.conds.get(g).is_some_and(|c| !c.is_empty()) && !self.always.get(g).copied().unwrap_or(false)
    }

    /// Adds the text tokens whose group's probe was accepted whatever the count to `acc`
    /// (which holds no text token yet: the walk that filled it was of
    /// [`TextTokens::others`]). The others are left to [`ByChars::groups`].
    pub fn add_always(&self, text: &TextTokens, acc: &mut Accepted) {
        for g in (0..self.always.len()).filter(|&g| self.always[g]) {
            for id in self.lists.group_members(text, g) {
                acc.add_fresh(id);
            }
        }
    }

    /// Every condition of every group.
    pub fn conds(&self) -> impl Iterator<Item = Cond> + '_ {
        self.conds.iter().flatten().copied()
    }

    /// The groups that are accepted under some condition only, as groups of
    /// [`super::ByCount`] (ordered like its candidates: no `Inside` condition first, then by
    /// decreasing smallest `Inside` number), their `Exited` numbers appended to `exits`.
    pub fn groups(&self, exits: &mut Vec<u32>) -> Vec<Group> {
        let mut groups = Vec::new();
        for (g, conds) in self.conds.iter().enumerate().filter(|&(g, _)| self.grouped(g)) {
            let lo = exits.len() as u32;
            let mut inside = super::relaxed::ONLY_EXITS;
            for &c in conds {
                match c {
                    Cond::Inside(n) => inside = inside.min(n),
                    Cond::Exited(n) => exits.push(n),
                    // In the probe's accepted set, not here.
                    Cond::Always => {}
                }
            }
            groups.push((inside, g as u32, lo, exits.len() as u32));
        }
        groups.sort_by_key(|&(inside, ..)| std::cmp::Reverse(inside));
        groups
    }

    /// Sets in `all` the tokens of the groups [`ByChars::groups`] returns; returns how many.
    pub fn set_grouped(&self, text: &TextTokens, all: &mut [u32]) -> usize {
        let mut count = 0;
        for g in (0..self.conds.len()).filter(|&g| self.grouped(g)) {
            for id in self.lists.group_members(text, g) {
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
    Follow(NodeId),
    /// Not past this byte.
    Stop,
    /// The walk fails.
    Fail,
}

/// Walks the (node, decoder state) pairs that text characters reach from `node`: `visit`
/// gets each pair's node and state with each text byte the decoder allows next there (and
/// the state after it), and says where to go. Whether the walk ended without failing,
/// within [`MAX_PAIRS`] pairs.
fn walk_text(pda: &Pda, node: NodeId, mut visit: impl FnMut(&Node, Utf8State, u8, Utf8State) -> Flow) -> bool {
    let mut seen: rustc_hash::FxHashSet<(NodeId, Utf8State)> = Default::default();
    let mut todo = vec![(node, BOUNDARY)];
    seen.insert((node, BOUNDARY));
    while let Some((n, state)) = todo.pop() {
        let Some(at) = pda.get_node(n) else { return false };
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

/// Whether every text token is consumed whole from `node` by byte edges alone (a quick
/// proof of what [`super::viable::first_char_refused`] explores): from `node`,
/// and from every node text characters lead to that way, every text byte the decoder allows
/// next has an edge. What else those nodes can do — call a rule (a pattern searched for
/// calls its counted loops at every character), complete their rule — only adds ways to
/// take a token, and each text token is already taken along the edges.
pub(crate) fn text_closed(pda: &Pda, node: NodeId) -> bool {
    walk_text(pda, node, |at, _, byte, _| pda.step(at, byte).map_or(Flow::Fail, Flow::Follow))
}

/// The first bytes of text characters that a loop body refuses outright: every text token
/// holding one is rejected, the others are classified by their number of characters. ASCII
/// bytes one by one; the lead bytes of other characters all together (refused or taken).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Refused {
    pub ascii: u128,
    pub non_ascii: bool,
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

    pub fn is_empty(self) -> bool {
        self == Refused::default()
    }

    /// Every text character.
    pub const ALL: Refused = Refused { ascii: TEXT_ASCII, non_ascii: true };

    /// The text characters this does not refuse.
    fn complement(self) -> Refused {
        Refused { ascii: TEXT_ASCII & !self.ascii, non_ascii: !self.non_ascii }
    }

    /// Whether characters of the set `chars` are taken (none refused here: `Some(true)`) or
    /// refused (all: `Some(false)`); `None` when some are and some are not.
    fn takes(self, chars: Refused) -> Option<bool> {
        let (ours, theirs) = (self.ascii & TEXT_ASCII, chars.ascii & TEXT_ASCII);
        if ours & theirs == 0 && !(self.non_ascii && chars.non_ascii) {
            Some(true)
        } else if theirs & !ours == 0 && (self.non_ascii || !chars.non_ascii) {
            Some(false)
        } else {
            None
        }
    }

    /// Whether a character starting with `byte` is refused (never a continuation byte).
    pub fn refuses(self, byte: u8) -> bool {
        Refused::bit(byte) & self.bits() != 0
    }
}

/// What follows a loop of one character an iteration ([`units_loop`]) in its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Nothing: the loop is the context's bottom, and the frames below decide.
    Below,
    /// A node that takes no text character.
    NoText,
    /// A node that only consumes bytes: what it does with text is to be explored
    /// ([`super::viable`]).
    Plain,
}

/// Whether, under the relaxed loop at `context[i]`, every text token's classes depend only
/// on its characters' being refused or not by the loop's body (returned, with the lead
/// bytes of the tokens to walk: see [`one_character`]): each character read from the top (at
/// the loop, or at the body's start) and from the body's start completes one iteration
/// exactly or is refused at once. Then a token holding no refused character is told apart by
/// its number of characters, and another by where its first refused character is, given what
/// follows the loop (the [`Exit`]).
pub(crate) fn units_loop(pda: &Pda, context: &[Frame], i: usize) -> Option<(Refused, u128, Exit)> {
    let repeat = context.get(i).and_then(|f| pda.get_node(f.node()))?.repeat()?;
    let body = pda.rule(repeat.body())?;
    let (refused, walked) = one_character(pda, body.start())?;
    match &context[i + 1..] {
        [] => {}
        [top] if top.node() == body.start() => {}
        _ => return None,
    }
    let exit = match i.checked_sub(1).and_then(|p| context.get(p)) {
        Some(parent) => {
            let node = pda.get_node(parent.node())?;
            if takes_no_text(pda, node) {
                Exit::NoText
            } else if node.is_plain() {
                Exit::Plain
            } else {
                return None;
            }
        }
        None => Exit::Below,
    };
    Some((refused, walked, exit))
}

/// Whether a rule `node` calls can start with `byte`: `None` when some callee could start
/// with a call or a loop, or end at once (its start node's edges are not all there is).
fn callee_takes(pda: &Pda, node: &Node, byte: u8) -> Option<bool> {
    let mut takes = false;
    for call in pda.calls(node) {
        let start = pda.rule(call.callee()).and_then(|r| pda.get_node(r.start()))?;
        if start.is_final() || start.num_calls() != 0 || start.repeat().is_some() {
            return None;
        }
        takes |= pda.step(start, byte).is_some();
    }
    Some(takes)
}

/// Whether `node` can neither consume a text character nor complete its rule.
fn takes_no_text(pda: &Pda, node: &Node) -> bool {
    !node.is_final()
        && node.repeat().is_none()
        && (0..=255u8)
            .filter(|&b| text_step(BOUNDARY, b).is_some())
            .all(|b| pda.step(node, b).is_none() && callee_takes(pda, node, b) == Some(false))
}

/// Whether every text character read from `node` either completes its rule exactly or is
/// refused at its first byte, and which are refused (`None` when neither holds for some):
/// no rule the node calls starts with a text byte, every byte of every character taken
/// has an edge, the nodes inside a character neither call nor complete, and each character
/// ends at a node that completes the rule and has no edge at all. The characters taken
/// then all do the same thing from `node`.
///
/// A node that takes some non-ASCII characters and refuses others (`[a-zé]`, `[^£]`) is
/// answered too, with every non-ASCII character counted as refused and the lead bytes of
/// those taken returned as [`lead_bit`]s: the text tokens holding such a character are left
/// to the walk, the others classified as usual.
fn one_character(pda: &Pda, node: NodeId) -> Option<(Refused, u128)> {
    let mut refused = Refused::default();
    let mut non_ascii_taken = false;
    // Some character refused after its lead byte was taken.
    let mut refused_inside = false;
    let uniform = walk_text(pda, node, |at, state, byte, next| {
        let calls_fit =
            if state == BOUNDARY { callee_takes(pda, at, byte) == Some(false) } else { at.num_calls() == 0 };
        if at.is_final() || at.repeat().is_some() || !calls_fit {
            return Flow::Fail;
        }
        let Some(t) = pda.step(at, byte) else {
            match (state, byte) {
                (BOUNDARY, 0..=0x7F) => refused.ascii |= 1 << byte,
                (BOUNDARY, _) => refused.non_ascii = true,
                _ => refused_inside = true,
            }
            return Flow::Stop;
        };
        non_ascii_taken |= state == BOUNDARY && byte >= 0x80;
        if next != BOUNDARY {
            return Flow::Follow(t);
        }
        let end = pda.get_node(t);
        if end.is_some_and(|e| e.is_final() && !e.has_bytes() && e.num_calls() == 0 && e.repeat().is_none()) {
            Flow::Stop
        } else {
            Flow::Fail
        }
    });
    if !uniform {
        return None;
    }
    let mixed = refused_inside || refused.non_ascii && non_ascii_taken;
    if !mixed {
        return Some((refused, 0));
    }
    let at = pda.get_node(node)?;
    let taken_leads = (0xC2..=0xF4u8).filter(|&b| pda.step(at, b).is_some()).fold(0, |leads, b| leads | lead_bit(b));
    Some((Refused { non_ascii: true, ..refused }, taken_leads))
}

/// The bit of [`TextTokens`]' per-token character set that stands for non-ASCII characters
/// led by `lead` (shared by every 31st lead byte: a test against it may answer yes for a few
/// more tokens, never no for one that holds such a character). Bits 1–31 stand for control
/// characters otherwise, which no text token holds.
pub(super) fn lead_bit(lead: u8) -> u128 {
    1 << (1 + (lead.wrapping_sub(0xC2) % 31))
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
        let bad: [&[u8]; 8] = [
            b"\xC3",
            b"\xA9",
            b"\xC0\x80",
            b"\xE0\x80\x80",
            b"\xED\xA0\x80",
            b"\xF4\x90\x80\x80",
            b"\xF5",
            b"\xE6\x97",
        ];
        for b in bad {
            assert!(!is_text(b), "{b:?}");
        }
        // Agrees with the standard library on every string of up to two bytes, and on
        // every three-byte string led by E0–EF.
        let std_text = |s: &[u8]| {
            std::str::from_utf8(s)
                .is_ok_and(|s| s.chars().all(|c| c >= ' ' && !matches!(c, '"' | '\\' | '\u{2028}' | '\u{2029}')))
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
            let grammar = crate::test_support::default_schema_grammar(&schema);
            Pda::build(&grammar, &limits).expect("automaton")
        };
        let closed_nodes =
            |pda: &Pda| (0..pda.num_states() as u32).map(NodeId::new).filter(|&n| text_closed(pda, n)).count();
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
        let with_leads = |schema: serde_json::Value| {
            // Compact: the pretty indent is a loop of its own.
            let options = constrain::schema::Options::default().with_whitespace(constrain::schema::Whitespace::Compact);
            let grammar = crate::test_support::schema_grammar(&schema, &options);
            let pda = Pda::build(&grammar, &limits).expect("automaton");
            let loops: Vec<_> =
                (0..pda.num_states() as u32).filter_map(|n| pda.node(NodeId::new(n)).repeat()).collect();
            assert!(!loops.is_empty(), "{schema}: no loop in {}", pda.listing());
            loops
                .iter()
                .map(|l| one_character(&pda, pda.rule(l.body()).map_or(NodeId::new(u32::MAX), |r| r.start())))
                .collect::<Vec<_>>()
        };
        let bodies = |schema: serde_json::Value| -> Vec<Option<Refused>> {
            with_leads(schema)
                .into_iter()
                .map(|b| {
                    b.map(|(refused, leads)| {
                        assert_eq!(leads, 0, "{refused:?}");
                        refused
                    })
                })
                .collect()
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
        assert!(ascii_only.refuses("é".as_bytes()[0]) && !ascii_only.refuses(b' '));
        // Two characters an iteration.
        assert_eq!(string(serde_json::json!({"pattern": "^(ab){7,30}$"})), [None]);
        // Some non-ASCII characters taken and others not: all counted as refused, and the
        // lead bytes of those taken (here é's, C3; ¿'s is C2) name the tokens to walk.
        let [Some((refused, leads))] = with_leads(serde_json::json!({"type": "string", "pattern": "^[aé]{7,30}$"}))[..]
        else {
            panic!()
        };
        assert!(refused.non_ascii && refused.ascii == TEXT_ASCII & !(1 << b'a'));
        assert!(leads & lead_bit(0xC3) != 0 && leads & lead_bit(0xC2) == 0);
    }
}

//! Stage 2 of the pipeline: the grammar, a context-free grammar over **bytes**.
//!
//! Input: built by the JSON Schema front end (`constrain::schema`) from a schema, by [`gbnf`] from GBNF text, or by
//! [`regex`] from a regular expression — or by hand with [`GrammarBuilder`].
//! Output: a [`Grammar`], consumed by [`crate::automaton`], which turns every rule into a
//! deterministic byte automaton and rule references into push/pop on a stack.
//!
//! A grammar is a list of named rules; each rule's body is an [`Expr`], a regular expression
//! whose atoms are bytes, Unicode character classes (matched as their UTF-8 bytes) and
//! references to other rules. Keeping rule bodies regular is what lets the automaton stage
//! determinise each rule on its own.
//!
//! Counted repetition ([`Expr::Repeat`]) is kept as a count, never unrolled here: the automaton
//! decides whether to unroll a small count or keep a run-time counter on the stack, so
//! `maxLength: 100000` costs as much to compile as `maxLength: 10`.
//!
//! Cost: building a grammar is linear in its size; [`Grammar::validate`] is linear too.
//!
//! ## Example
//!
//! A rule for `"` letters `"`, built by hand, printed as GBNF:
//!
//! ```rust
//! use constrain::grammar::{Expr, GrammarBuilder};
//!
//! let mut b = GrammarBuilder::new();
//! let body = Expr::repeat(Expr::Chars(vec![('a', 'z')]), 1, Some(8));
//! let root = b.add("root", Expr::seq([Expr::lit("\""), body, Expr::lit("\"")]));
//! let grammar = b.build(root).unwrap();
//! assert!(grammar.to_string().contains("root ::="));
//! ```

pub mod complement;
pub mod dfa;
pub mod gbnf;
pub mod regex;

use std::fmt;

/// Identifies one rule of a [`Grammar`]: an index into its rule list.
///
/// A `u32` keeps automaton tables small; a grammar with more than `u32::MAX` rules is
/// rejected by [`GrammarBuilder::build`] rather than wrapped silently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

impl RuleId {
    /// The rule's index in [`Grammar::rules`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A regular expression over bytes, characters and rule references: the body of one rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Matches only the empty string.
    Empty,
    /// Matches nothing at all (the empty language). Useful for contradictory schemas.
    Nothing,
    /// Matches exactly these bytes.
    Literal(Vec<u8>),
    /// Matches one byte inside any of these inclusive ranges.
    Bytes(Vec<(u8, u8)>),
    /// Matches one Unicode scalar value inside any of these inclusive ranges, as UTF-8 bytes.
    Chars(Vec<(char, char)>),
    /// Matches each expression in turn.
    Seq(Vec<Expr>),
    /// Matches any one of the expressions.
    Alt(Vec<Expr>),
    /// Matches `expr` between `min` and `max` times (`None`: unbounded).
    Repeat {
        /// The repeated expression.
        expr: Box<Expr>,
        /// The fewest repetitions.
        min: u32,
        /// The most repetitions; `None` for no bound.
        max: Option<u32>,
    },
    /// Matches whatever the referenced rule matches.
    Ref(RuleId),
}

impl Expr {
    /// A literal from a string's UTF-8 bytes.
    pub fn lit(s: &str) -> Expr {
        Expr::Literal(s.as_bytes().to_vec())
    }

    /// One byte of `bytes` (each its own range, in the order given: `b"048"` is `[048]`).
    pub fn one_of_bytes(bytes: &[u8]) -> Expr {
        Expr::Bytes(bytes.iter().map(|&b| (b, b)).collect())
    }

    /// A sequence, flattening nested sequences and dropping `Empty` parts.
    pub fn seq(parts: impl IntoIterator<Item = Expr>) -> Expr {
        let mut out = Vec::new();
        for p in parts {
            match p {
                Expr::Empty => {}
                Expr::Seq(inner) => out.extend(inner),
                Expr::Nothing => return Expr::Nothing,
                p => out.push(p),
            }
        }
        match out.len() {
            0 => Expr::Empty,
            1 => out.pop().unwrap_or(Expr::Empty),
            _ => Expr::Seq(out),
        }
    }

    /// An alternation, flattening nested alternations and dropping `Nothing` branches and
    /// repeated branches. Repeats are found through structural hashes, so building an
    /// alternation of n branches is linear in their total size (100k branches: milliseconds).
    pub fn alt(parts: impl IntoIterator<Item = Expr>) -> Expr {
        let mut out = Vec::new();
        let mut seen = BranchSet::default();
        for p in parts {
            match p {
                Expr::Nothing => {}
                Expr::Alt(inner) => out.extend(inner),
                p => {
                    if !seen.contains(&p, &out) {
                        out.push(p)
                    }
                }
            }
        }
        match out.len() {
            0 => Expr::Nothing,
            1 => out.pop().unwrap_or(Expr::Nothing),
            _ => Expr::Alt(out),
        }
    }

    /// `expr?`
    pub fn opt(expr: Expr) -> Expr {
        Expr::repeat(expr, 0, Some(1))
    }

    /// `expr*`
    pub fn star(expr: Expr) -> Expr {
        Expr::repeat(expr, 0, None)
    }

    /// `expr{min,max}`; `max = None` is unbounded. An impossible range (`min > max`) is `Nothing`.
    pub fn repeat(expr: Expr, min: u32, max: Option<u32>) -> Expr {
        match max {
            Some(m) if m < min => Expr::Nothing,
            Some(0) => Expr::Empty,
            Some(1) if min == 1 => expr,
            _ => match expr {
                // A repetition of a repetition that may be empty or is unbounded collapses:
                // `(x*){b,c}` is `x*`, `(x+){b,c}` is `x{b,}`, `(x?){b,}` is `x*` and
                // `(x?){b,c}` is `x{0,c}`. Left nested, `((x+)+)+…` would double at every
                // level when the automaton unrolls `x{1,}` as `x x*` (17 levels: 12 s).
                Expr::Repeat { expr: inner, min: 0, max: None } => Expr::Repeat { expr: inner, min: 0, max: None },
                Expr::Repeat { expr: inner, min: 1, max: None } => Expr::Repeat { expr: inner, min, max: None },
                Expr::Repeat { expr: inner, min: 0, max: Some(1) } => Expr::Repeat { expr: inner, min: 0, max },
                expr => Expr::Repeat { expr: Box::new(expr), min, max },
            },
        }
    }

    /// Number of nodes in this expression tree (a size estimate for limits).
    pub fn size(&self) -> usize {
        let mut n = 0;
        let mut todo = vec![self];
        while let Some(e) = todo.pop() {
            n += 1;
            match e {
                Expr::Seq(v) | Expr::Alt(v) => todo.extend(v.iter()),
                Expr::Repeat { expr, .. } => todo.push(expr),
                _ => {}
            }
        }
        n
    }
}

/// `parts` without repeats, first occurrences kept in order; linear in their total size
/// (structural hashing, see [`BranchSet`]).
pub(crate) fn distinct(parts: Vec<Expr>) -> Vec<Expr> {
    let mut out: Vec<Expr> = Vec::with_capacity(parts.len());
    let mut seen = BranchSet::default();
    for e in parts {
        if !seen.contains(&e, &out) {
            out.push(e);
        }
    }
    out
}

/// The branches of an alternation being built, by structural hash: index lists per hash, so
/// a membership test compares only branches with an equal hash. Small alternations (the
/// common case) are scanned instead, without hashing; branches are hashed lazily, when the
/// first test past that size needs them.
#[derive(Default)]
struct BranchSet {
    by_hash: rustc_hash::FxHashMap<u64, Vec<u32>>,
    /// How many of the branches (a prefix) are in `by_hash`.
    indexed: usize,
}

/// Alternations up to this many branches are scanned; larger ones are hashed.
///
/// A constant of the algorithm: it picks how duplicates are found, not which are.
const SCAN_BRANCHES: usize = 16;

impl BranchSet {
    fn hash(e: &Expr) -> u64 {
        use std::hash::BuildHasher;
        rustc_hash::FxBuildHasher.hash_one(e)
    }

    /// Whether `out` already holds `e`.
    fn contains(&mut self, e: &Expr, out: &[Expr]) -> bool {
        if out.len() <= SCAN_BRANCHES {
            return out.contains(e);
        }
        for (i, x) in out.iter().enumerate().skip(self.indexed) {
            self.by_hash.entry(Self::hash(x)).or_default().push(i as u32);
        }
        self.indexed = out.len();
        self.by_hash.get(&Self::hash(e)).is_some_and(|ids| ids.iter().any(|&i| out.get(i as usize) == Some(e)))
    }
}

/// One named rule: `name ::= expr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// A name for listings and error messages (unique within a grammar).
    pub name: String,
    /// What the rule matches.
    pub expr: Expr,
}

/// A context-free grammar over bytes, ready for [`crate::automaton`].
///
/// Build one with [`GrammarBuilder`], the JSON Schema front end (`constrain::schema::compile`) or [`gbnf::parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grammar {
    rules: Vec<Rule>,
    start: RuleId,
    /// What [`Grammar::measure`] found, kept so the automaton builder need not walk every
    /// expression again: the total expression size and per-rule [`RuleStats`].
    size: usize,
    stats: Vec<RuleStats>,
    /// Rules known to be a JSON string minus a few spellings (see [`StringExclusion`]).
    exclusions: Vec<StringExclusion>,
}

/// A fact the schema compiler records about one of its rules, for the mask stage: `rule`
/// matches a quote, then whatever `rest` matches except each of `words` followed by a closing
/// quote (`rest` being the rest of a JSON string, closing quote included). An object key that
/// must not be one of the declared property names is such a rule. Its masks are then derived
/// from `rest`'s, which every schema shares, instead of walking the vocabulary again for each
/// set of names (see [`crate::mask`]).
///
/// Words are printable ASCII without `"` or `\`, so each one has a single JSON spelling: its
/// own bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringExclusion {
    /// The rule: a quote, then what `rest` matches except each word and a quote.
    pub rule: RuleId,
    /// The rest of a JSON string, closing quote included.
    pub rest: RuleId,
    /// Sorted, distinct.
    pub words: Vec<Box<[u8]>>,
}

/// Facts about one rule's expression, found while the grammar is validated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RuleStats {
    /// The largest `min` or finite `max` of any repetition in it (0 without one): the
    /// automaton builder only looks for counts too large to unroll where this is large.
    pub max_count: u32,
    /// How deeply its expression nests (0 for a leaf), which recursive passes must bound.
    pub depth: u32,
    /// The most branches of any one alternation in it.
    pub max_alts: u32,
}

impl Grammar {
    /// All rules, indexed by [`RuleId`].
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule a whole output must match.
    pub fn start(&self) -> RuleId {
        self.start
    }

    /// One rule by id.
    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.index()]
    }

    /// Looks a rule up by name.
    pub fn rule_by_name(&self, name: &str) -> Option<RuleId> {
        self.rules.iter().position(|r| r.name == name).map(|i| RuleId(i as u32))
    }

    /// Total expression size over all rules: nodes plus literal bytes beyond the first.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The rules recorded as a JSON string minus a few spellings (facts a front end gives
    /// the mask stage: [`GrammarBuilder::note_exclusion`]).
    pub fn exclusions(&self) -> &[StringExclusion] {
        &self.exclusions
    }

    /// Size facts about one rule's expression.
    pub(crate) fn stats(&self, id: RuleId) -> RuleStats {
        self.stats.get(id.index()).copied().unwrap_or(RuleStats {
            max_count: u32::MAX,
            depth: u32::MAX,
            max_alts: u32::MAX,
        })
    }

    /// Checks that every reference names an existing rule and every range is well formed.
    pub fn validate(&self) -> Result<(), Error> {
        Self::measure(&self.rules).map(|_| ())
    }

    /// Validates the rules (see [`Grammar::validate`]) and returns the total expression
    /// size and each rule's [`RuleStats`], in one walk.
    fn measure(rules: &[Rule]) -> Result<(usize, Vec<RuleStats>), Error> {
        let mut size = 0;
        let mut stats = Vec::with_capacity(rules.len());
        let mut todo: Vec<(&Expr, u32)> = Vec::new();
        for rule in rules {
            let mut st = RuleStats::default();
            todo.clear();
            todo.push((&rule.expr, 0));
            while let Some((e, depth)) = todo.pop() {
                size += 1;
                st.depth = st.depth.max(depth);
                match e {
                    // A literal costs its bytes (each becomes an automaton state), so a 2 MB
                    // string is measured as large as it is.
                    Expr::Literal(b) => size += b.len().saturating_sub(1),
                    Expr::Ref(id) if id.index() >= rules.len() => {
                        return Err(Error::new(ErrorKind::UnknownRule(format!("#{}", id.0)), &rule.name))
                    }
                    Expr::Bytes(r) if r.iter().any(|&(a, b)| a > b) => {
                        return Err(Error::new(ErrorKind::BadRange, &rule.name))
                    }
                    Expr::Chars(r) if r.iter().any(|&(a, b)| a > b) => {
                        return Err(Error::new(ErrorKind::BadRange, &rule.name))
                    }
                    Expr::Alt(v) => {
                        st.max_alts = st.max_alts.max(u32::try_from(v.len()).unwrap_or(u32::MAX));
                        todo.extend(v.iter().map(|x| (x, depth + 1)))
                    }
                    Expr::Seq(v) => todo.extend(v.iter().map(|x| (x, depth + 1))),
                    Expr::Repeat { expr, min, max } => {
                        if max.is_some_and(|m| m < *min) {
                            return Err(Error::new(ErrorKind::BadRange, &rule.name));
                        }
                        st.max_count = st.max_count.max(*min).max(max.unwrap_or(0));
                        todo.push((expr, depth + 1))
                    }
                    _ => {}
                }
            }
            stats.push(st);
        }
        Ok((size, stats))
    }
}

/// Builds a [`Grammar`] rule by rule; rules may be declared first and defined later, which is
/// how recursive rules (`$ref` cycles, GBNF rules used before their definition) are made.
#[derive(Clone, Debug, Default)]
pub struct GrammarBuilder {
    rules: Vec<Option<Expr>>,
    rule_names: Vec<String>,
    names: rustc_hash::FxHashMap<String, RuleId>,
    /// Per base name, the suffix [`GrammarBuilder::fresh_name`] tries next, so generating
    /// thousands of `item_N` names stays linear.
    next_suffix: rustc_hash::FxHashMap<String, u32>,
    /// The names [`GrammarBuilder::fresh_name`] handed out, declared yet or not: a caller
    /// may name several rules after one (`{name}_i0`, …) before declaring it.
    handed_out: rustc_hash::FxHashSet<String>,
    exclusions: Vec<StringExclusion>,
}

impl GrammarBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a rule (or returns the existing one of that name) without defining it.
    pub fn declare(&mut self, name: &str) -> RuleId {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(None);
        self.rule_names.push(name.to_string());
        self.names.insert(name.to_string(), id);
        id
    }

    /// A fresh name `base`, `base_2`, `base_3`… neither declared nor handed out before in
    /// this builder (so two calls never return the same name, even if the first one's
    /// caller has not declared it yet).
    pub fn fresh_name(&mut self, base: &str) -> String {
        let taken = |b: &Self, n: &str| b.names.contains_key(n) || b.handed_out.contains(n);
        let name = if !taken(self, base) {
            base.to_string()
        } else {
            let mut next = self.next_suffix.get(base).copied().unwrap_or(2);
            let mut name = String::with_capacity(base.len() + 4);
            loop {
                use std::fmt::Write;
                name.clear();
                let _ = write!(name, "{base}_{next}");
                next += 1;
                if !taken(self, &name) {
                    break;
                }
            }
            self.next_suffix.insert(base.to_string(), next);
            name
        };
        self.handed_out.insert(name.clone());
        name
    }

    /// Defines a declared rule. Defining a rule twice replaces the earlier body.
    pub fn define(&mut self, id: RuleId, expr: Expr) {
        if let Some(slot) = self.rules.get_mut(id.index()) {
            *slot = Some(expr);
        }
    }

    /// Declares and defines a rule with a fresh name derived from `base`.
    pub fn add(&mut self, base: &str, expr: Expr) -> RuleId {
        let name = self.fresh_name(base);
        let id = self.declare(&name);
        self.define(id, expr);
        id
    }

    /// Records that `rule` is a JSON string whose content is anything `rest` matches except
    /// `words` (see [`StringExclusion`]). Ignored unless every word is printable ASCII without
    /// `"` or `\`: the fact then only saves work, it never changes what the grammar matches.
    pub fn note_exclusion(&mut self, rule: RuleId, rest: RuleId, words: &[&str]) {
        let plain = |w: &&str| w.bytes().all(|b| (0x20..0x7F).contains(&b) && b != b'"' && b != b'\\');
        if !words.iter().all(plain) || self.exclusions.iter().any(|e| e.rule == rule) {
            return;
        }
        let mut words: Vec<Box<[u8]>> = words.iter().map(|w| w.as_bytes().into()).collect();
        words.sort_unstable();
        words.dedup();
        self.exclusions.push(StringExclusion { rule, rest, words });
    }

    /// The rule's body, once defined.
    pub fn body(&self, id: RuleId) -> Option<&Expr> {
        self.rules.get(id.index()).and_then(|r| r.as_ref())
    }

    /// Whether the rule has been defined.
    pub fn is_defined(&self, id: RuleId) -> bool {
        self.rules.get(id.index()).is_some_and(|r| r.is_some())
    }

    /// Number of rules declared so far.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when no rule has been declared.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Finishes the grammar with `start` as the start rule. Fails if a declared rule was never
    /// defined or the grammar is malformed.
    pub fn build(self, start: RuleId) -> Result<Grammar, Error> {
        let mut rules = Vec::with_capacity(self.rules.len());
        for (slot, name) in self.rules.into_iter().zip(self.rule_names) {
            match slot {
                Some(expr) => rules.push(Rule { name, expr }),
                None => return Err(Error::new(ErrorKind::UndefinedRule, &name)),
            }
        }
        if rules.len() > u32::MAX as usize {
            return Err(Error::new(ErrorKind::Syntax("too many rules".into()), "<grammar>"));
        }
        if start.index() >= rules.len() {
            return Err(Error::new(ErrorKind::UnknownRule(format!("#{}", start.0)), "<start>"));
        }
        let (size, stats) = Grammar::measure(&rules)?;
        Ok(Grammar { rules, start, size, stats, exclusions: self.exclusions })
    }
}

/// Why a grammar could not be built or parsed. Carries the rule name and, for text input,
/// the line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} (in rule `{rule}`{pos})", pos = match self.position { Some((l, c)) => format!(" at line {l}, column {c}"), None => String::new() })]
pub struct Error {
    kind: ErrorKind,
    rule: String,
    position: Option<(usize, usize)>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, rule: &str) -> Self {
        Error { kind, rule: rule.to_string(), position: None }
    }

    pub(crate) fn at(mut self, line: usize, column: usize) -> Self {
        self.position = Some((line, column));
        self
    }

    /// The rule the error is in.
    pub fn rule(&self) -> &str {
        &self.rule
    }

    /// Line and column (1-based) in the grammar text, when the grammar came from text.
    pub fn position(&self) -> Option<(usize, usize)> {
        self.position
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

/// The kinds of grammar error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A rule was referenced but never defined.
    #[error("rule is referenced but never defined")]
    UndefinedRule,
    /// A reference names no rule.
    #[error("unknown rule {0}")]
    UnknownRule(String),
    /// A range's low end is above its high end.
    #[error("range is empty (low end above high end)")]
    BadRange,
    /// Text that does not parse.
    #[error("syntax error: {0}")]
    Syntax(String),
    /// A regular expression feature that cannot be compiled exactly.
    #[error("unsupported regex: {0}")]
    UnsupportedRegex(String),
}

impl fmt::Display for Grammar {
    /// Prints the grammar in GBNF (see [`gbnf::to_gbnf`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&gbnf::to_gbnf(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_names_are_never_handed_out_twice() {
        let mut b = GrammarBuilder::new();
        // Not declared in between: the second caller must still get another name.
        assert_eq!(b.fresh_name("multiple"), "multiple");
        assert_eq!(b.fresh_name("multiple"), "multiple_2");
        b.declare("x_2");
        assert_eq!(b.fresh_name("x"), "x");
        assert_eq!(b.fresh_name("x"), "x_3");
        let r = b.add("x", Expr::Empty);
        assert_eq!(b.rule_names[r.index()], "x_4");
    }

    #[test]
    fn builder_rejects_undefined_rules() {
        let mut b = GrammarBuilder::new();
        let root = b.declare("root");
        let other = b.declare("other");
        b.define(root, Expr::Ref(other));
        let err = b.build(root).unwrap_err();
        assert_eq!(err.kind(), &ErrorKind::UndefinedRule);
        assert_eq!(err.rule(), "other");
    }

    /// Collapsing nested repetitions keeps the language: every string over {a, b} up to
    /// length 7 is judged alike by the automaton and by regex-automata.
    #[test]
    fn nested_repetitions_collapse_exactly() {
        use regex_automata::meta::Regex;
        let patterns = [
            "(a+)+b",
            "(a+)*",
            "(a*)+",
            "(a*){2,3}",
            "(a+){2,3}",
            "(a+){0,2}b",
            "(a?)+",
            "(a?){2,3}",
            "(a?){0,2}",
            "((ab)+)+",
            "((ab)*){3}",
            "((a|b)+){2}a",
            "(a+)?",
            "(a*)?b",
            "((a+)+)+",
            "(((a?)+)?)+",
        ];
        let strings: Vec<Vec<u8>> = (0..=7usize)
            .flat_map(|n| {
                (0..1u32 << n).map(move |bits| (0..n).map(|i| if bits >> i & 1 == 1 { b'b' } else { b'a' }).collect())
            })
            .collect();
        for p in patterns {
            let g = crate::grammar::regex::compile_anchored(p).unwrap();
            let pda = crate::automaton::Pda::build(&g, &crate::Limits::default()).unwrap();
            let re = Regex::new(&format!("^(?:{p})$")).unwrap();
            for s in &strings {
                assert_eq!(pda.matches(s), re.is_match(s), "{p} on {:?}", String::from_utf8_lossy(s));
            }
        }
        let nested = Expr::repeat(Expr::repeat(Expr::repeat(Expr::lit("a"), 1, None), 1, None), 2, Some(5));
        assert_eq!(nested, Expr::repeat(Expr::lit("a"), 2, None));
    }

    #[test]
    fn smart_constructors_simplify() {
        assert_eq!(Expr::seq([Expr::Empty, Expr::lit("a")]), Expr::lit("a"));
        assert_eq!(Expr::alt([Expr::Nothing]), Expr::Nothing);
        assert_eq!(Expr::repeat(Expr::lit("a"), 3, Some(2)), Expr::Nothing);
        assert_eq!(Expr::seq([Expr::lit("a"), Expr::Nothing]), Expr::Nothing);
    }
}

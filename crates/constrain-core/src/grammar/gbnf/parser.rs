//! The GBNF parser: a hand-written recursive-descent parser over the text's characters.
//!
//! Recursion happens only for parenthesised groups and is capped at [`MAX_GROUP_DEPTH`];
//! everything else is a loop. Positions are byte offsets internally and turn into 1-based
//! line and column (in characters) only when an error is reported.

use super::charset;
use crate::grammar::{Error, ErrorKind, Expr, Grammar, GrammarBuilder, RuleId};
use std::collections::{HashMap, HashSet};

/// Deepest nesting of parenthesised groups accepted; deeper input is a syntax error rather
/// than a stack overflow.
///
/// A constant of the algorithm, not a user limit: it bounds the parser's recursion (the
/// thread's stack, which no setting grows).
pub const MAX_GROUP_DEPTH: usize = 128;

/// Most postfix operators accepted on one item (`"a"?*` is two); each one nests the
/// expression one level deeper, so this keeps the tree shallow.
///
/// A constant of the algorithm, not a user limit: more is a syntax error naming the item.
const MAX_POSTFIX: usize = 4;

/// Rule name used in errors that occur outside any rule.
const NO_RULE: &str = "<grammar>";

/// Parses GBNF text (see the module documentation of [`super`]).
pub(crate) fn parse(text: &str) -> Result<Grammar, Error> {
    let mut p = Parser {
        src: text,
        pos: 0,
        rule: NO_RULE.to_string(),
        builder: GrammarBuilder::new(),
        ids: HashMap::new(),
        defined_at: HashMap::new(),
        first_use: Vec::new(),
        used: HashSet::new(),
    };
    p.rules()?;
    p.finish()
}

/// Parser state: the text, the current offset and the grammar built so far.
struct Parser<'a> {
    src: &'a str,
    /// Byte offset of the next unread character.
    pos: usize,
    /// Name of the rule being parsed, for errors.
    rule: String,
    builder: GrammarBuilder,
    /// Rule ids by name (declared on first mention).
    ids: HashMap<String, RuleId>,
    /// Where each defined rule's definition starts.
    defined_at: HashMap<RuleId, usize>,
    /// First reference to each rule, in text order: (rule, offset, referencing rule).
    first_use: Vec<(RuleId, usize, String)>,
    /// Rules already in `first_use`.
    used: HashSet<RuleId>,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl Parser<'_> {
    // ---- errors and positions ----

    /// 1-based line and column (in characters) of a byte offset.
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let before = self.src.get(..offset).unwrap_or(self.src);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
        (line, col)
    }

    fn error_at(&self, offset: usize, kind: ErrorKind) -> Error {
        let (line, col) = self.line_col(offset);
        Error::new(kind, &self.rule).at(line, col)
    }

    fn syntax(&self, offset: usize, msg: impl Into<String>) -> Error {
        self.error_at(offset, ErrorKind::Syntax(msg.into()))
    }

    // ---- low-level reading ----

    fn rest(&self) -> &str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek2(&self) -> Option<char> {
        self.rest().chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// Skips whitespace (including newlines) and `#` comments.
    fn skip_space(&mut self) {
        while let Some(c) = self.peek() {
            if c == '#' {
                while let Some(c) = self.bump() {
                    if c == '\n' {
                        break;
                    }
                }
            } else if c.is_whitespace() || c == '\u{FEFF}' {
                // (U+FEFF: a byte order mark some editors put at the start of a file.)
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }

    /// Reads a rule name at the current position (possibly empty).
    fn name(&mut self) -> &str {
        let start = self.pos;
        while self.peek().is_some_and(is_name_char) {
            self.pos += 1;
        }
        self.src.get(start..self.pos).unwrap_or("")
    }

    /// Whether the text at the current position starts a new rule: `name` `::=` on one line.
    fn at_rule_start(&self) -> bool {
        let rest = self.rest();
        let name_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        if name_len == 0 {
            return false;
        }
        rest.get(name_len..).map(|r| r.trim_start_matches([' ', '\t']).starts_with("::=")).unwrap_or(false)
    }

    // ---- grammar structure ----

    /// `rule*` until the end of the text.
    fn rules(&mut self) -> Result<(), Error> {
        loop {
            self.skip_space();
            if self.pos >= self.src.len() {
                return Ok(());
            }
            self.rule = NO_RULE.to_string();
            let start = self.pos;
            let name = self.name().to_string();
            if name.is_empty() {
                let found = self.peek().map(|c| format!("`{c}`")).unwrap_or_default();
                return Err(self.syntax(
                    start,
                    format!("expected a rule name (letters, digits, `-`, `_`) followed by `::=`, found {found}"),
                ));
            }
            while matches!(self.peek(), Some(' ' | '\t')) {
                self.pos += 1;
            }
            if !self.rest().starts_with("::=") {
                return Err(self.syntax(self.pos, format!("expected `::=` after the rule name `{name}`")));
            }
            self.pos += 3;
            self.rule = name.clone();
            let id = self.rule_id(&name);
            if let Some(&first) = self.defined_at.get(&id) {
                let (l, c) = self.line_col(first);
                return Err(
                    self.syntax(start, format!("rule `{name}` is defined twice (first at line {l}, column {c})"))
                );
            }
            self.defined_at.insert(id, start);
            let body = self.alternatives(0)?;
            self.skip_space();
            match self.peek() {
                None => {}
                Some(_) if self.at_rule_start() => {}
                Some(')') => return Err(self.syntax(self.pos, "unmatched `)`")),
                Some(c) => return Err(self.syntax(self.pos, format!("unexpected `{c}`"))),
            }
            self.builder.define(id, body);
        }
    }

    fn rule_id(&mut self, name: &str) -> RuleId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.builder.declare(name);
        self.ids.insert(name.to_string(), id);
        id
    }

    /// Checks references and the start rule, then builds the grammar.
    fn finish(mut self) -> Result<Grammar, Error> {
        for (id, offset, from) in std::mem::take(&mut self.first_use) {
            if !self.defined_at.contains_key(&id) {
                let name = self.ids.iter().find(|(_, &v)| v == id).map(|(k, _)| k.clone()).unwrap_or_default();
                self.rule = from;
                return Err(
                    self.error_at(offset, ErrorKind::UnknownRule(format!("`{name}` (referenced but never defined)")))
                );
            }
        }
        let root = match self.ids.get("root") {
            Some(&id) if self.defined_at.contains_key(&id) => id,
            _ => {
                self.rule = NO_RULE.to_string();
                return Err(
                    self.syntax(self.src.len(), "the grammar has no `root` rule; GBNF starts matching at `root ::= …`")
                );
            }
        };
        self.builder.build(root)
    }

    /// `sequence ( "|" sequence )*`
    fn alternatives(&mut self, depth: usize) -> Result<Expr, Error> {
        let mut alts = vec![self.sequence(depth)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alts.push(self.sequence(depth)?);
        }
        // `Expr::alt` flattens nested groups without removing the duplicates that brings;
        // remove them so that printing and re-reading a grammar is stable.
        Ok(match Expr::alt(alts) {
            Expr::Alt(flat) => Expr::alt(crate::grammar::distinct(flat)),
            other => other,
        })
    }

    /// `( item postfix* )*`, stopping before `|`, `)`, the next rule or the end. Leaves the
    /// position after any trailing whitespace.
    fn sequence(&mut self, depth: usize) -> Result<Expr, Error> {
        let mut items = Vec::new();
        loop {
            self.skip_space();
            let start = self.pos;
            let Some(c) = self.peek() else { break };
            let mut item = match c {
                '|' | ')' => break,
                c if is_name_char(c) => {
                    if self.at_rule_start() {
                        break;
                    }
                    let name = self.name().to_string();
                    let id = self.rule_id(&name);
                    if self.used.insert(id) {
                        self.first_use.push((id, start, self.rule.clone()));
                    }
                    Expr::Ref(id)
                }
                '"' => self.string()?,
                '[' => self.class()?,
                '.' => {
                    self.pos += 1;
                    Expr::Chars(charset::to_chars(&charset::complement(&[])))
                }
                '%' => self.raw_bytes()?,
                '(' => {
                    if depth >= MAX_GROUP_DEPTH {
                        return Err(self.syntax(start, format!("groups nested deeper than {MAX_GROUP_DEPTH}")));
                    }
                    self.pos += 1;
                    let inner = self.alternatives(depth + 1)?;
                    self.skip_space();
                    if self.peek() != Some(')') {
                        return Err(self.syntax(start, "this `(` is never closed"));
                    }
                    self.pos += 1;
                    inner
                }
                '<' => return Err(self.syntax(start, "token references (`<…>`) are not supported")),
                '*' | '+' | '?' | '{' => {
                    return Err(self.syntax(start, format!("`{c}` must follow something to repeat")))
                }
                ':' if self.rest().starts_with("::=") => {
                    return Err(self.syntax(start, "`::=` must follow a rule name at the start of a rule"))
                }
                c => return Err(self.syntax(start, format!("unexpected `{c}`"))),
            };
            for applied in 0.. {
                self.skip_space();
                let op_start = self.pos;
                let (min, max) = match self.peek() {
                    Some('*') => (0, None),
                    Some('+') => (1, None),
                    Some('?') => (0, Some(1)),
                    Some('{') => self.counts()?,
                    _ => break,
                };
                if applied == MAX_POSTFIX {
                    return Err(self.syntax(op_start, format!("more than {MAX_POSTFIX} repetition operators in a row")));
                }
                if self.pos == op_start {
                    self.pos += 1;
                }
                item = Expr::repeat(item, min, max);
            }
            items.push(item);
        }
        Ok(Expr::seq(items))
    }

    /// `{m}`, `{m,}` or `{m,n}`; the position is at `{`.
    fn counts(&mut self) -> Result<(u32, Option<u32>), Error> {
        let open = self.pos;
        self.pos += 1;
        self.skip_space();
        let min = self.number()?;
        self.skip_space();
        let max = match self.bump() {
            Some('}') => return Ok((min, Some(min))),
            Some(',') => {
                self.skip_space();
                if self.peek() == Some('}') {
                    None
                } else {
                    Some(self.number()?)
                }
            }
            _ => return Err(self.syntax(self.pos.saturating_sub(1), "expected `,` or `}` in a repetition count")),
        };
        self.skip_space();
        if self.bump() != Some('}') {
            return Err(self.syntax(self.pos.saturating_sub(1), "expected `}` to close the repetition count"));
        }
        if let Some(m) = max {
            if m < min {
                return Err(self.error_at(open, ErrorKind::BadRange));
            }
        }
        Ok((min, max))
    }

    /// A decimal count that fits in `u32`.
    fn number(&mut self) -> Result<u32, Error> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = self.src.get(start..self.pos).unwrap_or("");
        if digits.is_empty() {
            return Err(self.syntax(start, "expected a number in the repetition count"));
        }
        digits
            .parse()
            .map_err(|_| self.syntax(start, format!("repetition count {digits} is too large (max {})", u32::MAX)))
    }

    /// `"…"`; the position is at the opening quote.
    fn string(&mut self) -> Result<Expr, Error> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            let at = self.pos;
            match self.bump() {
                None => return Err(self.syntax(open, "this string literal is never closed")),
                Some('"') => break,
                Some('\n') => return Err(self.syntax(at, "line break inside a string literal (write `\\n`)")),
                Some('\\') => text.push(self.escape(at)?),
                Some(c) => text.push(c),
            }
        }
        Ok(if text.is_empty() { Expr::Empty } else { Expr::lit(&text) })
    }

    /// The character after a backslash at offset `at` (the backslash is consumed).
    fn escape(&mut self, at: usize) -> Result<char, Error> {
        let (digits, name) = match self.bump() {
            Some('n') => return Ok('\n'),
            Some('t') => return Ok('\t'),
            Some('r') => return Ok('\r'),
            Some(c @ ('\\' | '"' | '[' | ']')) => return Ok(c),
            Some('x') => (2, "\\x"),
            Some('u') => (4, "\\u"),
            Some('U') => (8, "\\U"),
            Some(c) => {
                return Err(self.syntax(
                    at,
                    format!("unknown escape `\\{c}` (known: \\n \\t \\r \\\\ \\\" \\[ \\] \\xNN \\uNNNN \\UNNNNNNNN)"),
                ))
            }
            None => return Err(self.syntax(at, "the text ends after a backslash")),
        };
        let start = self.pos;
        let hex: String = self.rest().chars().take(digits).take_while(|c| c.is_ascii_hexdigit()).collect();
        if hex.len() != digits {
            return Err(self.syntax(at, format!("`{name}` needs exactly {digits} hex digits")));
        }
        self.pos = start + digits;
        let value = u32::from_str_radix(&hex, 16).map_err(|_| self.syntax(at, "bad hex escape"))?;
        char::from_u32(value).ok_or_else(|| {
            self.syntax(at, format!("`{name}{hex}` is not a Unicode scalar value (surrogate or above U+10FFFF)"))
        })
    }

    /// `[…]` or `[^…]`; the position is at `[`.
    fn class(&mut self) -> Result<Expr, Error> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            let at = self.pos;
            let lo = match self.class_char(open)? {
                None => break,
                Some(c) => c,
            };
            let hi = if self.peek() == Some('-') && !matches!(self.peek2(), Some(']') | None) {
                self.pos += 1;
                match self.class_char(open)? {
                    Some(c) => c,
                    None => return Err(self.syntax(open, "this character class is never closed")),
                }
            } else {
                lo
            };
            if hi < lo {
                return Err(self.error_at(at, ErrorKind::BadRange));
            }
            ranges.push((lo as u32, hi as u32));
        }
        let mut set = charset::normalize(ranges);
        if negated {
            set = charset::complement(&set);
        }
        Ok(if set.is_empty() { Expr::Nothing } else { Expr::Chars(charset::to_chars(&set)) })
    }

    /// One character of a class, or `None` at the closing `]` (consumed).
    fn class_char(&mut self, open: usize) -> Result<Option<char>, Error> {
        let at = self.pos;
        match self.bump() {
            None => Err(self.syntax(open, "this character class is never closed")),
            Some(']') => Ok(None),
            Some('\n') => Err(self.syntax(at, "line break inside a character class (write `\\n`)")),
            Some('\\') => self.escape(at).map(Some),
            Some(c) => Ok(Some(c)),
        }
    }

    /// `%xNN` or `%xNN-MM` (raw bytes); the position is at `%`.
    fn raw_bytes(&mut self) -> Result<Expr, Error> {
        let at = self.pos;
        if !self.rest().starts_with("%x") {
            return Err(self.syntax(at, "expected `%xNN` (a raw byte) after `%`"));
        }
        self.pos += 2;
        let lo = self.hex_byte(at)?;
        let hi = if self.peek() == Some('-') {
            self.pos += 1;
            self.hex_byte(at)?
        } else {
            lo
        };
        if hi < lo {
            return Err(self.error_at(at, ErrorKind::BadRange));
        }
        Ok(Expr::Bytes(vec![(lo, hi)]))
    }

    fn hex_byte(&mut self, at: usize) -> Result<u8, Error> {
        let hex = self.rest().get(..2).filter(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
        let value = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
        match value {
            Some(v) => {
                self.pos += 2;
                Ok(v)
            }
            None => Err(self.syntax(at, "a raw byte is written `%xNN` or `%xNN-MM` with two hex digits each")),
        }
    }
}

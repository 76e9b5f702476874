//! Printing a [`Grammar`] as GBNF.
//!
//! Expressions are printed with an explicit work stack (no recursion, so any nesting depth
//! prints), adding parentheses only where precedence needs them: alternation binds loosest,
//! then sequence, then postfix repetition.

use super::charset;
use crate::grammar::{Expr, Grammar};
use std::collections::HashSet;
use std::fmt::Write;

/// Precedence levels (alternation, sequence, postfix, atom): a context needs at least one.
const ALT: u8 = 0;
const SEQ: u8 = 1;
const POSTFIX: u8 = 2;
const ATOM: u8 = 3;

/// Prints a grammar (see [`super::to_gbnf`]).
pub(crate) fn to_gbnf(g: &Grammar) -> String {
    let names = rule_names(g);
    let mut out = String::new();
    let order = rule_order(g);
    for i in order {
        let (Some(rule), Some(name)) = (g.rules().get(i), names.get(i)) else { continue };
        out.push_str(name);
        out.push_str(" ::= ");
        write_expr(&mut out, &rule.expr, &names);
        out.push('\n');
    }
    out
}

/// The order rules are printed in: breadth-first from the start rule, references taken left
/// to right, then any unreachable rules (each followed by what it reaches). This is also the
/// order in which [`super::parse`] first meets the names, so printing a parsed printout gives
/// the same text again.
fn rule_order(g: &Grammar) -> Vec<usize> {
    let n = g.rules().len();
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let roots = std::iter::once(g.start().index()).chain(0..n);
    for root in roots {
        if root >= n || seen[root] {
            continue;
        }
        seen[root] = true;
        let mut next = order.len();
        order.push(root);
        while let Some(&rule) = order.get(next) {
            next += 1;
            for id in refs_left_to_right(&g.rules()[rule].expr) {
                if id < n && !seen[id] {
                    seen[id] = true;
                    order.push(id);
                }
            }
        }
    }
    order
}

/// The rule references in an expression, in the order they are printed.
fn refs_left_to_right(e: &Expr) -> Vec<usize> {
    let mut out = Vec::new();
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        match e {
            Expr::Ref(id) => out.push(id.index()),
            Expr::Seq(v) | Expr::Alt(v) => todo.extend(v.iter().rev()),
            Expr::Repeat { expr, .. } => todo.push(expr),
            _ => {}
        }
    }
    out
}

/// GBNF names for every rule: the start rule is `root`; other names keep their valid
/// characters (others become `-`) and get a `-N` suffix on a clash.
fn rule_names(g: &Grammar) -> Vec<String> {
    let mut used: HashSet<String> = HashSet::new();
    used.insert("root".to_string());
    g.rules()
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            if i == g.start().index() {
                return "root".to_string();
            }
            let mut base: String = rule
                .name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
                .collect();
            if base.is_empty() {
                base = "rule".to_string();
            }
            let mut name = base.clone();
            let mut n = 2;
            while used.contains(&name) {
                name = format!("{base}-{n}");
                n += 1;
            }
            used.insert(name.clone());
            name
        })
        .collect()
}

/// A piece of work for the printer.
enum Task<'a> {
    /// Print this expression in a context that needs at least this precedence.
    Expr(&'a Expr, u8),
    /// Print this text.
    Text(String),
}

/// Appends `e` as a GBNF expression.
fn write_expr(out: &mut String, e: &Expr, names: &[String]) {
    let mut todo = vec![Task::Expr(e, ALT)];
    while let Some(task) = todo.pop() {
        let (e, need) = match task {
            Task::Text(t) => {
                out.push_str(&t);
                continue;
            }
            Task::Expr(e, need) => (e, need),
        };
        // What to print (pieces joined by a separator) and the precedence of the result.
        let (parts, sep, own): (Vec<Task>, &str, u8) = match e {
            Expr::Empty => (vec![Task::Text("\"\"".into())], "", ATOM),
            Expr::Nothing => (vec![Task::Text(NOTHING.into())], "", ATOM),
            Expr::Ref(id) => {
                let name = names.get(id.index()).cloned().unwrap_or_else(|| format!("undefined-rule-{}", id.0));
                (vec![Task::Text(name)], "", ATOM)
            }
            Expr::Literal(bytes) => {
                let pieces = literal_pieces(bytes);
                let own = if pieces.len() > 1 { SEQ } else { ATOM };
                (pieces.into_iter().map(Task::Text).collect(), " ", own)
            }
            Expr::Chars(ranges) => {
                let set = charset::normalize(ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect());
                (vec![Task::Text(char_class(&set))], "", ATOM)
            }
            Expr::Bytes(ranges) => {
                let pieces = byte_pieces(ranges);
                let own = if pieces.len() > 1 { ALT } else { ATOM };
                (pieces.into_iter().map(Task::Text).collect(), " | ", own)
            }
            Expr::Seq(v) if v.is_empty() => (vec![Task::Text("\"\"".into())], "", ATOM),
            Expr::Alt(v) if v.is_empty() => (vec![Task::Text(NOTHING.into())], "", ATOM),
            Expr::Seq(v) | Expr::Alt(v) if v.len() == 1 => {
                todo.push(Task::Expr(&v[0], need));
                continue;
            }
            Expr::Seq(v) => (v.iter().map(|x| Task::Expr(x, POSTFIX)).collect(), " ", SEQ),
            Expr::Alt(v) => (v.iter().map(|x| Task::Expr(x, SEQ)).collect(), " | ", ALT),
            Expr::Repeat { expr, min, max } => {
                let suffix = match (min, max) {
                    (0, Some(1)) => "?".to_string(),
                    (0, None) => "*".to_string(),
                    (1, None) => "+".to_string(),
                    (m, None) => format!("{{{m},}}"),
                    (m, Some(n)) if m == n => format!("{{{m}}}"),
                    (m, Some(n)) => format!("{{{m},{n}}}"),
                };
                (vec![Task::Expr(expr, ATOM), Task::Text(suffix)], "", POSTFIX)
            }
        };
        let paren = own < need;
        if paren {
            todo.push(Task::Text(")".into()));
        }
        for (i, part) in parts.into_iter().enumerate().rev() {
            todo.push(part);
            if i > 0 && !sep.is_empty() {
                todo.push(Task::Text(sep.to_string()));
            }
        }
        if paren {
            todo.push(Task::Text("(".into()));
        }
    }
}

/// The empty language: a class with no characters.
const NOTHING: &str = "[]";

/// A literal as GBNF pieces: quoted strings for its UTF-8 runs, `%xNN` for other bytes.
fn literal_pieces(bytes: &[u8]) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                pieces.push(quote(s));
                rest = &[];
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                if let Ok(s) = std::str::from_utf8(good) {
                    if !s.is_empty() {
                        pieces.push(quote(s));
                    }
                }
                let n = e.error_len().unwrap_or(bad.len()).max(1).min(bad.len());
                for b in &bad[..n] {
                    pieces.push(format!("%x{b:02X}"));
                }
                rest = &bad[n..];
            }
        }
    }
    if pieces.is_empty() {
        pieces.push("\"\"".to_string());
    }
    pieces
}

/// A string literal with escapes.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => push_char(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// Appends one character, escaped unless it is plainly visible.
fn push_char(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        ' '..='~' => out.push(c),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02X}", c as u32);
        }
        c if c.is_alphanumeric() => out.push(c),
        c if (c as u32) <= 0xFFFF => {
            let _ = write!(out, "\\u{:04X}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08X}", c as u32);
        }
    }
}

/// Appends one character inside a class, escaping the class's own syntax characters.
fn push_class_char(out: &mut String, c: u32) {
    match char::from_u32(c) {
        Some('\\') => out.push_str("\\\\"),
        Some(']') => out.push_str("\\]"),
        Some('[') => out.push_str("\\["),
        Some('-') => out.push_str("\\x2D"),
        Some('^') => out.push_str("\\x5E"),
        Some(ch) => push_char(out, ch),
        // Not a scalar value (cannot come from a `char`); print the code point anyway.
        None => {
            let _ = write!(out, "\\U{c:08X}");
        }
    }
}

/// A character class for a normalized set of code point ranges: `.` for everything, `[^…]`
/// when the set runs up to U+10FFFF, `[]` for nothing.
fn char_class(set: &[(u32, u32)]) -> String {
    let complement = charset::complement(set);
    if complement.is_empty() {
        return ".".to_string();
    }
    // "Everything except …" reads better negated; a class reaching U+10FFFF means that.
    let negated = set.last().is_some_and(|r| r.1 == charset::MAX);
    let ranges: &[(u32, u32)] = if negated { &complement } else { set };
    let mut out = String::from(if negated { "[^" } else { "[" });
    for &(a, b) in ranges.iter() {
        push_class_char(&mut out, a);
        if b != a {
            if b > a + 1 {
                out.push('-');
            }
            push_class_char(&mut out, b);
        }
    }
    out.push(']');
    out
}

/// Byte ranges as GBNF pieces: one class for the ASCII part (ASCII bytes are characters),
/// `%xNN` / `%xNN-MM` for the rest. Several pieces are alternatives.
fn byte_pieces(ranges: &[(u8, u8)]) -> Vec<String> {
    let set = charset::normalize(ranges.iter().map(|&(a, b)| (a as u32, b as u32)).collect());
    let ascii: Vec<(u32, u32)> = set.iter().filter(|r| r.0 < 0x80).map(|&(a, b)| (a, b.min(0x7F))).collect();
    let mut pieces = Vec::new();
    if !ascii.is_empty() {
        let mut class = String::from("[");
        for &(a, b) in &ascii {
            push_class_char(&mut class, a);
            if b != a {
                if b > a + 1 {
                    class.push('-');
                }
                push_class_char(&mut class, b);
            }
        }
        class.push(']');
        pieces.push(class);
    }
    for &(a, b) in &set {
        if b < 0x80 {
            continue;
        }
        let a = a.max(0x80);
        if a == b {
            pieces.push(format!("%x{a:02X}"));
        } else {
            pieces.push(format!("%x{a:02X}-{b:02X}"));
        }
    }
    if pieces.is_empty() {
        pieces.push(NOTHING.to_string());
    }
    pieces
}

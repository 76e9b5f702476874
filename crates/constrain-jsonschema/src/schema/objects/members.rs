//! An object's free members: keys matching `patternProperties`, and other keys where
//! `additionalProperties` allows them.

use crate::grammar::complement::complement;
use crate::grammar::regex::RegexOptions;
use crate::grammar::Expr;
use crate::schema::ecma::{is_match, to_expr};
use crate::schema::{escape_pointer, json, Compiler, Error, SharedRule};
use serde_json::Value;

use super::{same_values, ObjectKeywords};

impl<'a> Compiler<'a> {
    /// Free members: keys matching a pattern, and any other key when allowed
    /// (`Expr::Nothing` when there are none); and how many named keys a free key may spell
    /// too (names a pattern matches, when they could not be taken out of it).
    pub(super) fn free_members(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<(Expr, usize), Error> {
        let (free, names_spelled) = if kw.patterns.is_empty() {
            let other =
                if *kw.additional != Value::Bool(false) { self.additional_member(kw, names, ptr)? } else { None };
            (other, 0)
        } else if *kw.additional == Value::Bool(false) {
            self.pattern_member(kw, names, ptr)?
        } else {
            self.pattern_and_other_members(kw, names, ptr)?
        };
        Ok((free.unwrap_or(Expr::Nothing), names_spelled))
    }

    /// The free members of an object with `patternProperties` whose other keys are allowed
    /// too (valued by `additionalProperties`, `true` when absent). When every value compiles
    /// alike, any free key takes it, exactly. Otherwise the keys that match no pattern are
    /// spelled as the complement of the patterns (and names), exactly; when that is over
    /// its budget, every free key takes any of the values and a run-time check holds each
    /// value to the schemas its key selects.
    fn pattern_and_other_members(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<(Option<Expr>, usize), Error> {
        let other = self.compile_value(&kw.additional, &format!("{ptr}/{}", kw.additional_key))?;
        if other == Expr::Nothing {
            return self.pattern_member(kw, names, ptr);
        }
        let mut values = vec![other.clone()];
        for p in &kw.patterns {
            if same_values(p.schema, &kw.additional) {
                continue;
            }
            let v = self.compile_value(p.schema, &format!("{ptr}/patternProperties/{}", escape_pointer(p.pattern)))?;
            if !values.contains(&v) {
                values.push(v);
            }
        }
        if values.len() > 1 {
            // The keys that match no pattern and name no property, spelled apart from the
            // others when their complement is small enough. A pattern the grammar cannot
            // spell leaves the keys to the run-time check.
            let taken: Option<Vec<Expr>> =
                kw.patterns.iter().map(|p| to_expr(p.pattern, &RegexOptions::search()).ok()).collect();
            let others = taken.and_then(|mut taken| {
                taken.extend(names.iter().chain(&kw.forbidden).map(|n| Expr::lit(n)));
                complement(&Expr::alt(taken))
            });
            if let Some(others) = others {
                let key = Expr::seq([Expr::lit("\""), json::escape_expr(&others), Expr::lit("\"")]);
                let key = self.rule("other_key", key);
                let (pattern, names_spelled) = self.pattern_member(kw, names, ptr)?;
                let mut free: Vec<Expr> = pattern.into_iter().collect();
                if key != Expr::Nothing {
                    free.push(Expr::seq([key, self.colon(), other]));
                }
                return Ok(((!free.is_empty()).then(|| Expr::alt(free)), names_spelled));
            }
            self.unsupported(
                ptr,
                "patternProperties",
                "patternProperties beside other allowed keys with other values cannot be compiled exactly",
            )?;
        }
        let value = Expr::alt(values);
        let key = self.free_key(kw, names, ptr)?;
        Ok(((key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])), 0))
    }

    /// The member whose key matches a `patternProperties` pattern (all patterns must share
    /// one schema); `None` when its value matches nothing. Its keys leave out the named ones
    /// where the complement's budget allows (the grammar stays unambiguous: one route per
    /// key); else the count of names it may spell too is returned.
    fn pattern_member(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<(Option<Expr>, usize), Error> {
        let Some(first) = kw.patterns.first() else {
            return Ok((None, 0));
        };
        let same_schema = kw.patterns.iter().all(|p| p.schema == first.schema);
        if kw.patterns.len() > 1 && !same_schema {
            self.unsupported(
                ptr,
                "patternProperties",
                "several patternProperties with different schemas cannot be compiled exactly",
            )?;
        }
        let mut key_alts = Vec::new();
        for p in &kw.patterns {
            match to_expr(p.pattern, &RegexOptions::search()) {
                Ok(e) => key_alts.push(e),
                Err(e) if self.relaxes("patternProperties") => {
                    // A pattern the grammar cannot spell (look-around): any free key takes
                    // any pattern's value, and the run-time check validates the object.
                    self.unsupported(ptr, "patternProperties", &e.to_string())?;
                    return self.any_pattern_member(kw, names, ptr);
                }
                Err(e) => return Err(Error::new(ptr, "patternProperties", e.to_string())),
            }
        }
        // Named keys must not be produced by a pattern route unless their value schema is
        // exactly the pattern's; those a pattern matches are taken out of its keys below.
        let mut matched: Vec<&String> = Vec::new();
        for name in names {
            let pats = self.matching(kw, name, ptr)?;
            let Some(&p) = pats.first() else { continue };
            matched.push(name);
            if kw.properties.get(name).is_some_and(|s| {
                s != kw.patterns[p].schema && *s != Value::Bool(true) && !s.as_object().is_some_and(|o| o.is_empty())
            }) {
                self.unsupported(
                    ptr,
                    "patternProperties",
                    &format!("property {name:?} also matches a patternProperties pattern"),
                )?;
            }
        }
        let mut keys = Expr::alt(key_alts);
        let mut names_spelled = 0;
        if !matched.is_empty() {
            // The pattern keys but the named ones: the complement of (not a pattern key, or a
            // name).
            let without = complement(&keys).and_then(|not_keys| {
                complement(&Expr::alt(std::iter::once(not_keys).chain(matched.iter().map(|n| Expr::lit(n)))))
            });
            match without {
                Some(e) => keys = e,
                None => names_spelled = matched.len(),
            }
        }
        let key = Expr::seq([Expr::lit("\""), json::escape_expr(&keys), Expr::lit("\"")]);
        let key = self.rule("pattern_key", key);
        let value = if same_schema || !self.relaxes("patternProperties") {
            self.compile_value(first.schema, &format!("{ptr}/patternProperties/{}", escape_pointer(first.pattern)))?
        } else {
            // Patterns with different schemas: any of them (the run-time check holds a key
            // to every schema whose pattern it matches).
            self.any_pattern_value(kw, ptr)?
        };
        Ok((
            (value != Expr::Nothing && key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])),
            names_spelled,
        ))
    }

    /// The positions in [`ObjectKeywords::patterns`] of the patterns `name` matches. A
    /// pattern that cannot be decided here (look-around) counts as not matching, which
    /// leaves its schema out of `name`'s value (a superset), and the object to the run-time
    /// check (an error without run-time checks).
    pub(super) fn matching(&self, kw: &ObjectKeywords, name: &str, ptr: &str) -> Result<Vec<usize>, Error> {
        let mut out = Vec::new();
        for (i, p) in kw.patterns.iter().enumerate() {
            match is_match(p.pattern, name) {
                Ok(true) => out.push(i),
                Ok(false) => {}
                Err(e) => self.unsupported(ptr, "patternProperties", &e.to_string())?,
            }
        }
        Ok(out)
    }

    /// [`Self::pattern_member`] when a pattern cannot be spelled: every free key (see
    /// [`Self::free_key`]) with the value of any pattern, a superset the run-time check
    /// makes exact (a key must match a pattern, and its value satisfy every pattern it
    /// matches).
    fn any_pattern_member(
        &mut self,
        kw: &ObjectKeywords,
        names: &[String],
        ptr: &str,
    ) -> Result<(Option<Expr>, usize), Error> {
        let value = self.any_pattern_value(kw, ptr)?;
        let key = self.free_key(kw, names, ptr)?;
        Ok(((value != Expr::Nothing && key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])), 0))
    }

    /// The value of a pattern key when which patterns it matches is left to the run-time
    /// check: any pattern's value.
    fn any_pattern_value(&mut self, kw: &ObjectKeywords, ptr: &str) -> Result<Expr, Error> {
        let mut values = Vec::new();
        for p in &kw.patterns {
            values
                .push(self.compile_value(p.schema, &format!("{ptr}/patternProperties/{}", escape_pointer(p.pattern)))?);
        }
        Ok(Expr::alt(values))
    }

    /// The member of any other key (not named, not forbidden; matching `propertyNames` when
    /// given), valued by the additional-properties schema; `None` when no key or no value is
    /// possible.
    fn additional_member(&mut self, kw: &ObjectKeywords, names: &[String], ptr: &str) -> Result<Option<Expr>, Error> {
        let value = self.compile_value(&kw.additional, &format!("{ptr}/{}", kw.additional_key))?;
        if value == Expr::Nothing {
            return Ok(None);
        }
        let key = self.free_key(kw, names, ptr)?;
        Ok((key != Expr::Nothing).then(|| Expr::seq([key, self.colon(), value])))
    }

    /// The key of a free member: any string but the named and forbidden properties,
    /// matching `propertyNames` when given.
    fn free_key(&mut self, kw: &ObjectKeywords, names: &[String], ptr: &str) -> Result<Expr, Error> {
        let mut excluded: Vec<String> = names.to_vec();
        excluded.extend(kw.forbidden.iter().cloned());
        Ok(if let (Some(ks), true) = (kw.key_schema, excluded.is_empty()) {
            let ks =
                self.merge_all(&[ks.clone(), serde_json::json!({"type": "string"})], &format!("{ptr}/propertyNames"))?;
            self.compile_value(&ks, &format!("{ptr}/propertyNames"))?
        } else if excluded.is_empty() {
            self.shared_rule(SharedRule::String)
        } else {
            self.other_key(&excluded, ptr)?
        })
    }
}

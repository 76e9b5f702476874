//! How an object's members are laid out between the braces: any order for small objects,
//! weights or tracked sets of required members for large ones, under the property counts.

use crate::grammar::Expr;
use crate::schema::{Compiler, Error, Note};
use rustc_hash::FxHashMap as HashMap;

use super::{
    DeferredLayout, Dependency, DependencyBits, Layout, Member, Members, ObjectKeywords, PropertyCounts, ANY_ORDER_MAX,
    LOOSE_STATES_MAX, REQUIRED_TRACKED_MAX, WEIGHTED_EDGES_MAX,
};

impl<'a> Compiler<'a> {
    /// Lays out the named and free members between the braces, under the property counts.
    pub(super) fn object_members(
        &mut self,
        kw: &ObjectKeywords,
        named: &[Member],
        free: Expr,
        names_spelled: usize,
        counts: PropertyCounts,
        ptr: &str,
    ) -> Result<Members, Error> {
        if named.is_empty() {
            return self.free_only_members(free, counts, ptr);
        }
        let has_free = free != Expr::Nothing;
        let free_tail = if has_free { Expr::star(Expr::seq([self.sep(), free.clone()])) } else { Expr::Empty };
        let n_required = named.iter().filter(|m| m.required).count() as u32;
        let n_named = named.len() as u32;
        if counts.min > n_required.max(1) {
            self.unsupported(
                ptr,
                "minProperties",
                "minProperties above the number of required properties cannot be compiled",
            )?;
        }
        if let Some(m) = counts.max {
            if has_free || m < n_named {
                self.unsupported(
                    ptr,
                    "maxProperties",
                    "maxProperties below the number of possible properties cannot be compiled",
                )?;
            }
        }
        let first_required = named.iter().any(|m| m.required);
        let n_req = named.iter().filter(|m| m.required).count();
        // The order hint's grammar (`schema_order`) takes the schema's order only.
        let any_order = !self.opts.schema_order;
        // A free key that may spell a named one makes that member ambiguous, and the parse
        // stacks double with each such member written: keep the ordered layout for many.
        let few_spelled = names_spelled <= ANY_ORDER_MAX;
        if any_order && named.len() > ANY_ORDER_MAX && few_spelled && self.relaxes("properties") {
            self.relax(ptr, "properties");
            let body = self.loose_members(named, &kw.required, &free, has_free, ptr);
            return Ok(Members::Body { body: Some(body), may_be_empty: n_req == 0 });
        }
        let body = if any_order && named.len() <= ANY_ORDER_MAX {
            let deps = dependency_bits(named, &kw.dependent);
            self.any_order(named, &deps, &free)
        } else {
            if any_order {
                let why = if few_spelled {
                    "no run-time checks: `--no-runtime-checks` or `--lenient`"
                } else {
                    "more than four of the names also match a patternProperties pattern"
                };
                self.notes.push(Note::new(
                    ptr,
                    "properties",
                    format!(
                        "an object of more than {ANY_ORDER_MAX} named properties is compiled with them in schema \
                         order or required-first order, other keys after them ({why})"
                    ),
                ));
            }
            let named_part =
                if any_order { self.ordered_members(named, &kw.required) } else { self.named_sequence(named) };
            if first_required || !has_free {
                Expr::seq([named_part, free_tail])
            } else {
                Expr::alt([Expr::seq([named_part, free_tail.clone()]), Expr::seq([free, free_tail])])
            }
        };
        Ok(Members::Body { body: Some(body), may_be_empty: !first_required })
    }

    /// Members in any order, for objects of any size, every required one exactly once and
    /// the optional and free ones any number of times (a run-time check refuses a repeated
    /// key when it closes, and what the keys cannot show, counts and dependencies, when the
    /// object closes). The grammar's state says how far the required members are written,
    /// so the object can close only once all are there and closing mode's distances see
    /// them.
    ///
    /// More than [`REQUIRED_TRACKED_MAX`] required members are tracked by weight
    /// ([`Compiler::weighted_layout`]). Fewer, or an object whose weights take too many
    /// edges (with a note at `ptr`), are tracked as a set of at most
    /// [`REQUIRED_TRACKED_MAX`]: those off the longest common subsequence of the schema's
    /// order and the order of `required` first; the others keep the schema's order or the
    /// order of `required` among themselves (one deterministic layout for both,
    /// [`Compiler::required_layout`]). Non-empty.
    fn loose_members(
        &mut self,
        named: &[Member],
        required_order: &[String],
        free: &Expr,
        has_free: bool,
        ptr: &str,
    ) -> Expr {
        let schema_order: Vec<&Member> = named.iter().filter(|m| m.required).collect();
        let optional = Expr::alt(
            named.iter().filter(|m| !m.required).map(|m| m.expr.clone()).chain(has_free.then(|| free.clone())),
        );
        let sep = self.sep();
        // The optional members between required ones: one rule, shared by every state.
        let optional_run = self.rule("optional_members", Expr::star(Expr::seq([sep.clone(), optional.clone()])));
        let exprs: Vec<Expr> = schema_order.iter().map(|m| self.rule("member", m.expr.clone())).collect();
        let n = schema_order.len();
        // Each member's place in `required` (its first mention; `required` names them all).
        let mut place: HashMap<&str, usize> = HashMap::default();
        for (i, r) in required_order.iter().enumerate() {
            place.entry(r.as_str()).or_insert(i);
        }
        let places: Vec<usize> =
            schema_order.iter().map(|m| place.get(m.name.as_str()).copied().unwrap_or(0)).collect();
        // Any-order members: off the common order first, then the earliest in schema order.
        let mut in_common = vec![false; n];
        for i in longest_increasing(&places) {
            in_common[i] = true;
        }
        let two_orders = in_common.iter().any(|&c| !c);
        let mut t = n.min(REQUIRED_TRACKED_MAX);
        while t > 0 && (1usize << t) * (n - t + 1) * if two_orders { 2 } else { 1 } > LOOSE_STATES_MAX {
            t -= 1;
        }
        let mut any: Vec<usize> = (0..n).filter(|&i| !in_common[i]).chain((0..n).filter(|&i| in_common[i])).collect();
        any.truncate(t);
        let mut is_any = vec![false; n];
        for &i in &any {
            is_any[i] = true;
        }
        let by_schema: Vec<usize> = (0..n).filter(|&i| !is_any[i]).collect();
        let mut by_required = by_schema.clone();
        by_required.sort_by_key(|&i| places[i]);
        let layout = Layout { any, orders: [by_schema, by_required] };
        if n > REQUIRED_TRACKED_MAX {
            let name = self.b.fresh_name("required_members");
            let rule = self.b.declare(&name);
            self.deferred.push(DeferredLayout {
                rule,
                exprs,
                optional,
                optional_run,
                fallback: layout,
                ptr: ptr.to_string(),
            });
            return Expr::Ref(rule);
        }
        self.required_layout(&layout, &exprs, &optional, &optional_run)
    }

    /// Defines the rules of the [`DeferredLayout`]s: by weight
    /// ([`Compiler::weighted_layout`]), or, over the edge budget, by the set-and-orders
    /// layout with a note.
    pub(in crate::schema) fn finish_layouts(&mut self) {
        let deferred = std::mem::take(&mut self.deferred);
        // Each layout's fewest bytes first, for the weights of the layouts around it.
        let mut memo = HashMap::default();
        for d in &deferred {
            // Remembered in `memo` by the call.
            self.min_len(&Expr::Ref(d.rule), &mut memo, &deferred, 0);
        }
        for d in &deferred {
            let body = match self.weighted_layout(&d.exprs, &d.optional, &d.optional_run, &mut memo) {
                Ok(body) => body,
                Err(size) => {
                    let n = d.exprs.len();
                    self.notes.push(Note::new(
                        &d.ptr,
                        "required",
                        format!(
                            "{n} required properties whose any-order layout would be too large ({size}; at most \
                             {WEIGHTED_EDGES_MAX} grammar edges): up to {REQUIRED_TRACKED_MAX} of them go in any \
                             order, the others keep the schema's order or that of `required` among themselves"
                        ),
                    ));
                    self.required_layout(&d.fallback, &d.exprs, &d.optional, &d.optional_run)
                }
            };
            self.b.define(d.rule, body);
        }
    }

    /// The required members `exprs` of [`Compiler::loose_members`] in any order, interleaved
    /// with `optional` members, tracked by weight: each member has a positive weight, and a
    /// state is the sum of the weights written so far (one rule per sum from which the total
    /// is still reachable). The object may close only at the total. The run-time check
    /// refuses a repeated key, so the members written are distinct, and distinct members
    /// whose weights sum to the total of all are all of them: the language is exact for any
    /// positive weights, with one state per reachable sum instead of one per subset.
    ///
    /// The weight is the member's fewest bytes with its separator, so that every way to the
    /// total from a state is as long as writing the members still missing: closing mode's
    /// distances (bytes, summed over the grammar) are then those of the missing members,
    /// never of a repeat the check would refuse. Weights are divided by their common
    /// divisor (equal weights give one state per count). Each key leads to one state, so
    /// parsing stays deterministic.
    ///
    /// Says how large the layout would be instead when it takes more than
    /// [`WEIGHTED_EDGES_MAX`] edges.
    fn weighted_layout(
        &mut self,
        exprs: &[Expr],
        optional: &Expr,
        optional_run: &Expr,
        memo: &mut HashMap<u32, Option<u64>>,
    ) -> Result<Expr, String> {
        let sep = self.sep();
        let sep_len = self.min_len(&sep, memo, &[], 0).unwrap_or(1);
        let lens: Vec<u64> =
            exprs.iter().map(|e| self.min_len(e, memo, &[], 0).unwrap_or(0).saturating_add(sep_len).max(1)).collect();
        let g = lens.iter().fold(0, |a, &b| gcd(a, b)).max(1);
        let total_len: u64 = lens.iter().map(|l| l / g).fold(0u64, |a, b| a.saturating_add(b));
        // A sum past the edge budget has more states than edges allowed: refuse before
        // allocating anything of that size.
        let total = match usize::try_from(total_len) {
            Ok(total) if total < WEIGHTED_EDGES_MAX => total,
            _ => return Err(format!("weights summing to {total_len}")),
        };
        let weights: Vec<usize> = lens.iter().map(|&l| (l / g) as usize).collect();
        // The sums reached from 0 that can still reach the total.
        let mut reach = vec![false; total + 1];
        reach[0] = true;
        for s in 0..total {
            if reach[s] {
                for &w in &weights {
                    if let Some(r) = reach.get_mut(s + w) {
                        *r = true;
                    }
                }
            }
        }
        let mut live = vec![false; total + 1];
        live[total] = true;
        for s in (0..total).rev() {
            live[s] = reach[s] && weights.iter().any(|&w| live.get(s + w) == Some(&true));
        }
        // Members of one weight lead to the same state: one rule for each weight's members,
        // so a state has an edge per weight, not per member.
        let mut by_weight: Vec<(usize, Vec<Expr>)> = Vec::new();
        for (&w, e) in weights.iter().zip(exprs) {
            match by_weight.iter_mut().find(|(v, _)| *v == w) {
                Some((_, es)) => es.push(e.clone()),
                None => by_weight.push((w, vec![e.clone()])),
            }
        }
        // Whether weight `w` may be written at sum `s`.
        let fits = |s: usize, w: usize| s + w <= total && live[s + w];
        let edges: usize =
            (0..=total).filter(|&s| live[s]).map(|s| by_weight.iter().filter(|(w, _)| fits(s, *w)).count()).sum();
        if edges > WEIGHTED_EDGES_MAX {
            return Err(format!("{edges} edges"));
        }
        let groups: Vec<(usize, Expr)> =
            by_weight.into_iter().map(|(w, es)| (w, self.rule("members_of_weight", Expr::alt(es)))).collect();
        let steps = |s: usize| groups.iter().filter(move |(w, _)| fits(s, *w));
        let mut after: Vec<Expr> = vec![Expr::Nothing; total + 1];
        for s in (0..=total).rev().filter(|&s| live[s]) {
            let mut alts: Vec<Expr> =
                steps(s).map(|(w, g)| Expr::seq([sep.clone(), g.clone(), after[s + w].clone()])).collect();
            if s == total {
                alts.push(Expr::Empty);
            }
            after[s] = self.rule("members", Expr::seq([optional_run.clone(), Expr::alt(alts)]));
        }
        let mut first: Vec<Expr> = steps(0).map(|(w, g)| Expr::seq([g.clone(), after[*w].clone()])).collect();
        if *optional != Expr::Nothing {
            first.push(Expr::seq([optional.clone(), after[0].clone()]));
        }
        Ok(Expr::alt(first))
    }

    /// The fewest bytes `e` matches (`None`: none, or a rule met again inside itself), for
    /// [`Compiler::weighted_layout`]'s weights. Rules are looked up in the builder and
    /// remembered in `memo` (where [`Compiler::finish_layouts`] puts the deferred layouts'
    /// lengths, from their members in `deferred`); a rule not defined, or a chain deeper
    /// than [`MIN_LEN_DEPTH`], counts as 0 (a weight only needs to be positive; a wrong
    /// length costs closing mode its exact distances, not the language its exactness).
    fn min_len(
        &self,
        e: &Expr,
        memo: &mut HashMap<u32, Option<u64>>,
        deferred: &[DeferredLayout],
        depth: usize,
    ) -> Option<u64> {
        if depth > MIN_LEN_DEPTH {
            return Some(0);
        }
        match e {
            Expr::Empty => Some(0),
            Expr::Nothing => None,
            Expr::Literal(b) => Some(b.len() as u64),
            Expr::Bytes(_) => Some(1),
            Expr::Chars(ranges) => ranges.iter().map(|&(lo, _)| lo.len_utf8() as u64).min(),
            Expr::Seq(parts) => parts
                .iter()
                .try_fold(0u64, |sum, p| Some(sum.saturating_add(self.min_len(p, memo, deferred, depth + 1)?))),
            Expr::Alt(parts) => parts.iter().filter_map(|p| self.min_len(p, memo, deferred, depth + 1)).min(),
            Expr::Repeat { expr, min, .. } => {
                if *min == 0 {
                    Some(0)
                } else {
                    self.min_len(expr, memo, deferred, depth + 1).map(|l| l.saturating_mul(u64::from(*min)))
                }
            }
            Expr::Ref(id) => {
                if let Some(&known) = memo.get(&id.0) {
                    return known;
                }
                let Some(body) = self.b.body(*id) else {
                    // A deferred layout (defined only by `finish_layouts`): its fewest
                    // bytes are its members' with the separators between them.
                    let Some(d) = deferred.iter().find(|d| d.rule == *id) else { return Some(0) };
                    memo.insert(id.0, None);
                    let sep = self.min_len(&self.sep(), memo, deferred, depth + 1).unwrap_or(1);
                    let body = d.exprs.iter().map(|e| self.min_len(e, memo, deferred, depth + 1));
                    let len = body.sum::<Option<u64>>().map(|l| l + sep * (d.exprs.len() as u64).saturating_sub(1));
                    memo.insert(id.0, len);
                    return len;
                };
                memo.insert(id.0, None);
                let len = self.min_len(body, memo, deferred, depth + 1);
                memo.insert(id.0, len);
                len
            }
        }
    }

    /// The members of [`Compiler::loose_members`] laid out by `layout`, all interleaved with
    /// `optional` members: one rule per state reached, a state being the set of any-order
    /// members written and how far along each fixed order still followed the others are
    /// (`None` once one is left). Each key leads to one state, so parsing stays
    /// deterministic.
    fn required_layout(&mut self, layout: &Layout, exprs: &[Expr], optional: &Expr, optional_run: &Expr) -> Expr {
        type State = (usize, Option<usize>, Option<usize>);
        let full = (1usize << layout.any.len()) - 1;
        let u = layout.orders[0].len();
        // The states reached from the start, in breadth-first order: each step writes one
        // more member, so every state's successors come after it.
        let start: State = (0, Some(0), Some(0));
        let mut states = vec![start];
        let mut index: HashMap<State, usize> = HashMap::default();
        index.insert(start, 0);
        let mut edges: Vec<Vec<(usize, usize)>> = Vec::new();
        // How far along `order` a step writing member `m` leaves `j` (`None`: off it).
        let next = |j: Option<usize>, order: &[usize], m: usize| j.filter(|&j| order.get(j) == Some(&m)).map(|j| j + 1);
        let mut at = 0;
        while at < states.len() {
            let (set, ja, jb) = states[at];
            let mut out = Vec::new();
            for (k, &m) in layout.any.iter().enumerate() {
                if set & (1 << k) == 0 {
                    out.push((m, (set | (1 << k), ja, jb)));
                }
            }
            let mut candidates: Vec<usize> = [(ja, 0), (jb, 1)]
                .into_iter()
                .filter_map(|(j, o)| j.and_then(|j| layout.orders[o].get(j).copied()))
                .collect();
            candidates.dedup();
            for m in candidates {
                out.push((m, (set, next(ja, &layout.orders[0], m), next(jb, &layout.orders[1], m))));
            }
            let mut targets = Vec::with_capacity(out.len());
            for (m, st) in out {
                let id = *index.entry(st).or_insert_with(|| {
                    states.push(st);
                    states.len() - 1
                });
                targets.push((m, id));
            }
            edges.push(targets);
            at += 1;
        }
        let sep = self.sep();
        let mut after: Vec<Expr> = vec![Expr::Nothing; states.len()];
        for id in (0..states.len()).rev() {
            let (set, ja, jb) = states[id];
            let mut alts: Vec<Expr> = edges[id]
                .iter()
                .map(|&(m, to)| Expr::seq([sep.clone(), exprs[m].clone(), after[to].clone()]))
                .collect();
            if set == full && (ja == Some(u) || jb == Some(u)) {
                alts.push(Expr::Empty);
            }
            after[id] = self.rule("members", Expr::seq([optional_run.clone(), Expr::alt(alts)]));
        }
        let mut first: Vec<Expr> =
            edges[0].iter().map(|&(m, to)| Expr::seq([exprs[m].clone(), after[to].clone()])).collect();
        if *optional != Expr::Nothing {
            first.push(Expr::seq([optional.clone(), after[0].clone()]));
        }
        Expr::alt(first)
    }

    /// The members of an object without named properties: free members only, within the
    /// property counts.
    fn free_only_members(&mut self, free: Expr, counts: PropertyCounts, ptr: &str) -> Result<Members, Error> {
        if free == Expr::Nothing {
            if counts.min > 0 {
                return Ok(Members::Done(Expr::Nothing));
            }
            return Ok(Members::Body { body: None, may_be_empty: true });
        }
        if counts.min > 1 {
            self.unsupported(
                ptr,
                "minProperties",
                "minProperties above 1 over free-form keys cannot be enforced (keys could repeat)",
            )?;
        }
        let lo = counts.min.max(1);
        let sep = self.sep();
        let body = Expr::seq([
            free.clone(),
            Expr::repeat(Expr::seq([sep, free]), lo - 1, counts.max.map(|m| m.saturating_sub(1))),
        ]);
        if counts.max == Some(0) {
            return Ok(Members::Done(Expr::seq([Expr::lit("{"), self.ws.clone(), Expr::lit("}")])));
        }
        Ok(Members::Body { body: Some(body), may_be_empty: counts.min == 0 })
    }

    /// Named members in schema order, and also in "required first" order (required names in
    /// the order of `required`, then the others in schema order), which is how many
    /// documents are written. Each order is exact on its own, so their union is too.
    fn ordered_members(&mut self, named: &[Member], required: &[String]) -> Expr {
        let mut named_part = self.named_sequence(named);
        // Hash lookups: linear in the number of properties (100k of them are hostile
        // input, not a quadratic hang).
        let mut req_first: Vec<Member> = Vec::new();
        let mut taken: rustc_hash::FxHashSet<&str> = Default::default();
        let by_name: HashMap<&str, &Member> = named.iter().map(|m| (m.name.as_str(), m)).collect();
        for r in required {
            if let Some(m) = by_name.get(r.as_str()) {
                if taken.insert(m.name.as_str()) {
                    req_first.push((*m).clone());
                }
            }
        }
        for m in named {
            if taken.insert(m.name.as_str()) {
                req_first.push(m.clone());
            }
        }
        if req_first.iter().map(|m| &m.name).ne(named.iter().map(|m| &m.name)) {
            let other = self.named_sequence(&req_first);
            named_part = Expr::alt([named_part, other]);
        }
        named_part
    }

    /// Named members in any order, each at most once, the required ones present, with free
    /// members (keys no name takes) anywhere between them: one rule per set of members already
    /// written (so only for a few members). The set may end only where each present member
    /// has what `deps` says it needs. Non-empty; the caller makes it optional when nothing is
    /// required.
    fn any_order(&mut self, named: &[Member], deps: &[DependencyBits], free: &Expr) -> Expr {
        let n = named.len();
        let required: usize = named.iter().enumerate().filter(|(_, m)| m.required).map(|(i, _)| 1 << i).sum();
        let may_end = |mask: usize| {
            mask & required == required && deps.iter().all(|d| mask & d.member == 0 || mask & d.needs == d.needs)
        };
        let full = (1usize << n) - 1;
        let sep = self.sep();
        let has_free = *free != Expr::Nothing;
        // Free members between named ones: one rule, shared by every set.
        let free_run = if has_free {
            self.rule("free_members", Expr::star(Expr::seq([sep.clone(), free.clone()])))
        } else {
            Expr::Empty
        };
        let mut after: Vec<Expr> = vec![Expr::Nothing; full + 1];
        for mask in (0..=full).rev() {
            if mask == 0 && !has_free {
                break;
            }
            let mut alts = Vec::new();
            for (k, m) in named.iter().enumerate() {
                if mask & (1 << k) == 0 {
                    alts.push(Expr::seq([sep.clone(), m.expr.clone(), after[mask | (1 << k)].clone()]));
                }
            }
            if may_end(mask) {
                alts.push(Expr::Empty);
            }
            after[mask] = self.rule("members", Expr::seq([free_run.clone(), Expr::alt(alts)]));
        }
        let mut alts: Vec<Expr> =
            named.iter().enumerate().map(|(k, m)| Expr::seq([m.expr.clone(), after[1 << k].clone()])).collect();
        if has_free {
            alts.push(Expr::seq([free.clone(), after[0].clone()]));
        }
        Expr::alt(alts)
    }

    /// Named members in order, separated by commas, optional ones omissible, at least one
    /// present.
    fn named_sequence(&mut self, named: &[Member]) -> Expr {
        let sep = self.sep();
        let n = named.len();
        if let Some(r0) = named.iter().position(|m| m.required) {
            let mut parts = Vec::new();
            for m in &named[..r0] {
                parts.push(Expr::opt(Expr::seq([m.expr.clone(), sep.clone()])));
            }
            parts.push(named[r0].expr.clone());
            for m in &named[r0 + 1..] {
                let e = Expr::seq([sep.clone(), m.expr.clone()]);
                parts.push(if m.required { e } else { Expr::opt(e) });
            }
            return Expr::seq(parts);
        }
        // All optional: the first present member, then any of the later ones.
        if n <= 3 {
            let tail =
                |k: usize| Expr::seq(named[k..].iter().map(|m| Expr::opt(Expr::seq([sep.clone(), m.expr.clone()]))));
            return Expr::alt((0..n).map(|j| Expr::seq([named[j].expr.clone(), tail(j + 1)])));
        }
        // Long lists: a chain of rules `rest_k ::= ("," member_k)? rest_{k+1}` keeps the
        // grammar linear in the number of members.
        let mut next = Expr::Empty;
        let mut rests = vec![Expr::Empty; n + 1];
        for k in (0..n).rev() {
            let body = Expr::seq([Expr::opt(Expr::seq([sep.clone(), named[k].expr.clone()])), next.clone()]);
            next = Expr::Ref(self.b.add("object_rest", body));
            rests[k] = next.clone();
        }
        Expr::alt((0..n).map(|j| Expr::seq([named[j].expr.clone(), rests[j + 1].clone()])))
    }
}

/// How deep [`Compiler::min_len`] follows expressions and rules.
const MIN_LEN_DEPTH: usize = 200;

/// The greatest common divisor (`gcd(0, b) = b`).
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The positions of a longest strictly increasing subsequence of `xs`, in order
/// (patience sorting, O(n log n)).
fn longest_increasing(xs: &[usize]) -> Vec<usize> {
    // `tails[k]`: the position of the smallest last value of an increasing run of length k+1.
    let mut tails: Vec<usize> = Vec::new();
    let mut prev: Vec<Option<usize>> = vec![None; xs.len()];
    for (i, &x) in xs.iter().enumerate() {
        let k = tails.partition_point(|&t| xs[t] < x);
        prev[i] = k.checked_sub(1).map(|k| tails[k]);
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut at = tails.last().copied();
    while let Some(i) = at {
        out.push(i);
        at = prev[i];
    }
    out.reverse();
    out
}

/// The `dependentRequired` entries whose member is named, as bits of `named` positions (a
/// needed name that can never be present makes the member impossible).
fn dependency_bits(named: &[Member], dependent: &[Dependency]) -> Vec<DependencyBits> {
    let bit = |n: &str| named.iter().position(|m| m.name == n).map(|i| 1usize << i);
    dependent
        .iter()
        .filter_map(|Dependency { name, needs }| {
            let member = bit(name)?;
            let need = needs.iter().map(|n| bit(n).unwrap_or(member)).fold(0, |x, y| x | y);
            Some(DependencyBits {
                member,
                needs: need | if needs.iter().any(|n| bit(n).is_none()) { usize::MAX } else { 0 },
            })
        })
        .collect()
}

//! Step 4 of the build, on the whole automaton: trim unproductive and unreachable parts,
//! refuse left recursion, add dense byte tables, fingerprint the rules.

use super::dfa::CoReach;
use super::nfa::Grouped;
use super::{retain, Shapes, TAG_SHAPE};
use crate::automaton::{Error, Node, NodeId, Pda, RuleIdx, DENSE_MIN_EDGES, NO_TARGET, PLAIN_TARGET};
use crate::util::hash128;
use rustc_hash::FxHashSet as HashSet;

impl Pda {
    pub(super) fn rule_nodes(&self, r: usize) -> std::ops::Range<usize> {
        let start = self.rules[r].first_node.index();
        let end = self.rules.get(r + 1).map(|x| x.first_node.index()).unwrap_or(self.nodes.len());
        start..end
    }

    /// Fixpoint over rules: `ok(rule)` given which callees count as usable; `via_bytes`
    /// says whether byte edges count (productive) or not (nullable). Runs in rounds: a rule
    /// is checked again only when one of its callees became `ok`.
    pub(super) fn rule_fixpoint(&self, via_bytes: bool, callers: &Grouped<u32>) -> Vec<bool> {
        let n = self.rules.len();
        let mut ok = vec![false; n];
        // Rounds over the rules still in question, from the last rule to the first (rules
        // are usually defined after the rules they call); a rule is in the next round only if
        // a callee became `ok` after it was checked.
        let mut queued = vec![true; n];
        let mut round: Vec<u32> = (0..n as u32).collect();
        let mut next: Vec<u32> = Vec::new();
        let mut seen = vec![0u32; self.nodes.len()];
        let mut generation = 0u32;
        let mut todo: Vec<usize> = Vec::new();
        while !round.is_empty() {
            round.sort_unstable();
            for r in round.drain(..).rev() {
                let r = r as usize;
                queued[r] = false;
                if ok[r] {
                    continue;
                }
                let start = self.rules[r].start.index();
                let reach = match self.nodes[start].repeat {
                    Some(l) => l.min == 0 || ok[l.body.index()],
                    None => {
                        generation += 1;
                        todo.clear();
                        todo.push(start);
                        seen[start] = generation;
                        let mut found = false;
                        while let Some(i) = todo.pop() {
                            let node = &self.nodes[i];
                            if node.is_final {
                                found = true;
                                break;
                            }
                            let nexts = self
                                .calls(node)
                                .iter()
                                .filter(|c| ok[c.callee.index()])
                                .map(|c| c.ret)
                                .chain(self.bytes(node).iter().filter(|_| via_bytes).map(|e| e.target));
                            for t in nexts {
                                if seen[t.index()] != generation {
                                    seen[t.index()] = generation;
                                    todo.push(t.index());
                                }
                            }
                        }
                        found
                    }
                };
                if reach {
                    ok[r] = true;
                    for &caller in callers.of(r as u32) {
                        if !ok[caller as usize] && !queued[caller as usize] {
                            queued[caller as usize] = true;
                            next.push(caller);
                        }
                    }
                }
            }
            std::mem::swap(&mut round, &mut next);
        }
        ok
    }

    /// For each rule, the rules that call it (or loop over it). A caller may be listed more
    /// than once, or after trimming removed its call: [`Pda::rule_fixpoint`] only uses it to
    /// know what to check again.
    pub(super) fn callers(&self) -> Grouped<u32> {
        let mut callers = Grouped::default();
        for node in &self.nodes {
            for c in self.calls(node).iter().map(|c| c.callee).chain(node.repeat.map(|l| l.body)) {
                callers.push(c.as_u32(), node.rule.as_u32());
            }
        }
        callers.seal(self.rules.len() as u32);
        callers
    }

    /// Removes the calls to rules that are not `productive` (marking their rules as no
    /// longer known live) and stops loops over them.
    pub(super) fn drop_unproductive(&mut self, productive: &[bool], live_rules: &mut [bool]) {
        for n in &mut self.nodes {
            let kept = retain(&mut self.call_edges, n.calls, |c| productive[c.callee.index()]);
            if kept != n.calls {
                // Fewer ways on: its nodes' liveness must be computed again.
                if let Some(l) = live_rules.get_mut(n.rule.index()) {
                    *l = false;
                }
                n.calls = kept;
            }
            if let Some(l) = &mut n.repeat {
                if !productive[l.body.index()] {
                    l.max = 0;
                }
            }
        }
    }

    /// Removes calls to rules that match nothing and edges into nodes that cannot complete
    /// their rule, so every live configuration can always be completed.
    /// Returns which rules are nullable (match the empty string), as trimmed.
    /// `live[r]`: rule `r`'s automaton, as built, has every node reach a final node; on
    /// return, also that trimming left it as it was.
    pub(super) fn trim(&mut self, live_rules: &mut [bool]) -> Result<Vec<bool>, Error> {
        let callers = self.callers();
        let productive = self.rule_fixpoint(true, &callers);
        if !productive[self.start_rule.index()] {
            return Err(Error::Empty(self.rules[self.start_rule.index()].name.clone()));
        }
        // Usually every rule is productive, and there is nothing to take out.
        if productive.iter().any(|&p| !p) {
            self.drop_unproductive(&productive, live_rules);
        }
        // Co-reachability within each normal rule (the buffers serve every rule).
        let mut co_reach = CoReach::default();
        for (r, &known_live) in live_rules.iter().enumerate() {
            let range = self.rule_nodes(r);
            if self.nodes[range.start].repeat.is_some() || known_live {
                continue;
            }
            let base = range.start;
            let local = |t: NodeId| t.as_u32() - base as u32;
            let edges = self.nodes[range.clone()].iter().enumerate().flat_map(|(i, n)| {
                let targets = self.bytes(n).iter().map(|e| e.target).chain(self.calls(n).iter().map(|c| c.ret));
                targets.map(move |t| (i as u32, local(t)))
            });
            let live = co_reach.run(range.len(), edges, |i| self.nodes[base + i].is_final);
            if live.iter().all(|&l| l) {
                continue;
            }
            let keep = |t: NodeId| live[t.index() - base];
            for n in &mut self.nodes[range] {
                n.bytes = retain(&mut self.edges, n.bytes, |e| keep(e.target));
                n.calls = retain(&mut self.call_edges, n.calls, |c| keep(c.ret));
            }
        }
        // Loops whose body can match the empty string: an empty iteration never helps, so
        // the matcher skips it, which is exact once `min` is 0.
        let nullable = self.rule_fixpoint(false, &callers);
        for n in &mut self.nodes {
            if let Some(l) = &mut n.repeat {
                if nullable[l.body.index()] {
                    l.min = 0;
                }
                n.is_final = l.min == 0;
            }
        }
        Ok(nullable)
    }

    /// Rejects grammars where a rule can call itself before consuming a byte.
    pub(super) fn check_left_recursion(&self, nullable: &[bool]) -> Result<(), Error> {
        // left[r] = rules r may enter before consuming anything.
        let mut left: Vec<Vec<u32>> = vec![Vec::new(); self.rules.len()];
        for (r, l) in left.iter_mut().enumerate() {
            let start = self.rules[r].start.index();
            if let Some(lp) = self.nodes[start].repeat {
                l.push(lp.body.as_u32());
                continue;
            }
            let mut seen = HashSet::default();
            let mut todo = vec![start];
            seen.insert(start);
            while let Some(n) = todo.pop() {
                for c in self.calls(&self.nodes[n]) {
                    l.push(c.callee.as_u32());
                    if nullable[c.callee.index()] && seen.insert(c.ret.index()) {
                        todo.push(c.ret.index());
                    }
                }
            }
        }
        // Cycle detection with an explicit stack (0 = new, 1 = on stack, 2 = done).
        let mut color = vec![0u8; self.rules.len()];
        for root in 0..self.rules.len() {
            if color[root] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            color[root] = 1;
            while let Some(&mut (r, ref mut i)) = stack.last_mut() {
                if let Some(&next) = left[r].get(*i) {
                    *i += 1;
                    match color[next as usize] {
                        0 => {
                            color[next as usize] = 1;
                            stack.push((next as usize, 0));
                        }
                        1 => return Err(Error::LeftRecursion(self.rules[next as usize].name.clone())),
                        _ => {}
                    }
                } else {
                    color[r] = 2;
                    stack.pop();
                }
            }
        }
        Ok(())
    }

    /// Gives nodes with many byte edges a byte-indexed target table (see [`Node::dense`]).
    pub(super) fn add_dense_tables(&mut self) {
        // Ids must leave the flag bit free (an automaton this large never fits in memory).
        if self.nodes.len() >= PLAIN_TARGET as usize {
            return;
        }
        let plain: Vec<bool> = self.nodes.iter().map(Node::is_plain).collect();
        for node in &mut self.nodes {
            if node.bytes.len() > DENSE_MIN_EDGES {
                let mut table = Box::new([NO_TARGET; 256]);
                for e in self.edges.get(node.bytes.range()).unwrap_or(&[]) {
                    let flag = if plain.get(e.target.index()) == Some(&true) { PLAIN_TARGET } else { 0 };
                    for b in e.lo..=e.hi {
                        table[b as usize] = e.target.as_u32() | flag;
                    }
                }
                node.dense = Some(table);
            }
        }
    }

    /// Gives every rule a structural fingerprint: rules outside call cycles hash their own
    /// structure plus their callees' fingerprints (so equal fingerprints ⇒ equal behaviour,
    /// across grammars too); rules in or above a cycle get `salt` (non-zero, unique per
    /// grammar among those sharing a [`RuleCache`]). Called again with a new salt when an
    /// automaton is bound to another cache's owner.
    pub(crate) fn fingerprint(&mut self, salt: u64) {
        self.fingerprint_with(salt, &Shapes::default());
    }

    /// [`Pda::fingerprint`], hashing the rules `shapes` knows by their shape instead of
    /// their nodes.
    pub(super) fn fingerprint_with(&mut self, salt: u64, shapes: &Shapes) {
        debug_assert!(salt != 0, "salt 0 is the one of rules outside cycles");
        let n = self.rules.len();
        // Callees before callers (Kahn's order over the call graph): linear, where repeated
        // sweeps until nothing changes were quadratic on a chain of 100k rules. A rule waits
        // for each of its calls (and its loop), and each is counted off once done.
        let mut done: Vec<Option<u128>> = vec![None; n];
        let mut pending: Vec<usize> = vec![0; n];
        for node in &self.nodes {
            pending[node.rule.index()] += self.calls(node).len() + usize::from(node.repeat.is_some());
        }
        let callers = self.callers();
        let mut ready: Vec<usize> = (0..n).filter(|&r| pending[r] == 0).collect();
        while let Some(r) = ready.pop() {
            done[r] = Some(self.hash_rule(r, |c| done[c.index()].unwrap_or(0), 0, shapes));
            for &caller in callers.of(r as u32) {
                let p = &mut pending[caller as usize];
                *p -= 1;
                if *p == 0 {
                    ready.push(caller as usize);
                }
            }
        }
        // Rules in or above cycles: salted, computed in two passes so callers still see a
        // (salted) value for their callees.
        let provisional: Vec<u128> = (0..n).map(|r| done[r].unwrap_or_else(|| hash128(&(salt, r as u64)))).collect();
        for (r, known) in done.iter().enumerate() {
            let fp = match known {
                Some(fp) => *fp,
                None => self.hash_rule(r, |c| provisional[c.index()], salt, shapes),
            };
            self.rules[r].fingerprint = fp;
        }
    }

    /// Rule `r`'s fingerprint: its shape (see [`Shapes`]) and its callees' fingerprints in
    /// their local order, or else its nodes' encoding, targets relative to the rule.
    pub(super) fn hash_rule(&self, r: usize, callee_fp: impl Fn(RuleIdx) -> u128, salt: u64, shapes: &Shapes) -> u128 {
        if let Some(Some((shape, refs))) = shapes.of.get(r) {
            let refs = shapes.refs.get(refs.range()).unwrap_or(&[]);
            let mut buf: Vec<u64> = Vec::with_capacity(4 + 2 * refs.len());
            buf.extend([TAG_SHAPE, salt, *shape as u64, (*shape >> 64) as u64]);
            for &c in refs {
                let fp = callee_fp(RuleIdx::new(c));
                buf.extend([fp as u64, (fp >> 64) as u64]);
            }
            return hash128(&buf);
        }
        let base = self.rules[r].first_node.as_u32();
        let mut buf: Vec<u64> = vec![salt, (self.rules[r].start.as_u32() - base) as u64];
        for i in self.rule_nodes(r) {
            let local = |t: NodeId| (t.as_u32() - base) as u64;
            crate::automaton::keys::encode_node(&mut buf, self, &self.nodes[i], local, &callee_fp);
        }
        hash128(&buf)
    }
}

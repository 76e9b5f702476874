//! [`Sets`]: the interned sets of schema positions that apply to a value, with their
//! children by key and by index.

use crate::check::ValueChecks;
use rustc_hash::FxHashMap as HashMap;

/// Interned sets of schema positions (each closed under `allOf` and `$ref`), with what the
/// tracker needs to know of each. Set 0 is the empty set: no check at or below.
pub(crate) struct Sets {
    pub(super) members: Vec<Box<[u32]>>,
    /// Values of this set are validated when they complete.
    pub(super) needs: Vec<bool>,
    /// Some value inside a value of this set may be.
    pub(super) kids: Vec<bool>,
    /// Objects of this set allow only named properties (see `keys::viable`).
    closed: Vec<bool>,
    /// Arrays of this set must have unique items (see `lex::item_done`).
    pub(super) unique: Vec<bool>,
    intern: HashMap<Box<[u32]>, u32>,
    /// Children by (set, hash of the key's bytes).
    by_key: HashMap<(u32, u128), u32>,
    by_index: HashMap<(u32, u32), u32>,
    pub(super) root: u32,
}

/// Cached children per set stop growing past this many entries (a long free-form output
/// would otherwise grow them without bound); beyond it children are computed each time.
///
/// A constant of the algorithm, not a user limit: a cache bound; past it the same
/// children are computed again, with the same results.
const MAX_CACHED_CHILDREN: usize = 1 << 16;

impl Sets {
    pub(super) fn new(checks: &ValueChecks) -> Sets {
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

    /// A copy for a forked checker: the interned sets (the ids the state refers to), without
    /// the caches of children, which grow with the keys and indices seen and are computed
    /// again on demand, to the same ids.
    pub(super) fn fork(&self) -> Sets {
        Sets {
            members: self.members.clone(),
            needs: self.needs.clone(),
            kids: self.kids.clone(),
            closed: self.closed.clone(),
            unique: self.unique.clone(),
            intern: self.intern.clone(),
            by_key: HashMap::default(),
            by_index: HashMap::default(),
            root: self.root,
        }
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

    pub(super) fn flags(&self, set: u32) -> bool {
        let i = set as usize;
        self.needs.get(i).copied().unwrap_or(false) || self.kids.get(i).copied().unwrap_or(false)
    }

    pub(super) fn needs(&self, set: u32) -> bool {
        self.needs.get(set as usize).copied().unwrap_or(false)
    }

    pub(super) fn kids(&self, set: u32) -> bool {
        self.kids.get(set as usize).copied().unwrap_or(false)
    }

    pub(super) fn unique(&self, set: u32) -> bool {
        self.unique.get(set as usize).copied().unwrap_or(false)
    }

    pub(super) fn names_only(&self, set: u32) -> bool {
        self.closed.get(set as usize).copied().unwrap_or(false)
    }

    /// The set of the member named `key` of an object of `set`.
    pub(super) fn for_key(&mut self, checks: &ValueChecks, set: u32, hash: u128, key: &str) -> u32 {
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
    pub(super) fn for_index(&mut self, checks: &ValueChecks, set: u32, index: u32) -> u32 {
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

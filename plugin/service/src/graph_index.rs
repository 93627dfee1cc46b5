//! Per-graph indexes: what the big answers need of every node of a graph, read once per graph
//! of a file version and kept in compact memory, under one bound for all files.
//!
//! The full node list, the matched relations, the precision filter and the name search each
//! concern every node of a graph. Read from the file per request, each was a full pass over the
//! graph's rows (whose tensor statistics make them large: about a second per side at a million
//! nodes). A [`GraphIndex`] holds, per node in node order, the name (and its lower-case form for
//! searching), whether it is a leaf, its micro step, its precision index and its match state;
//! about 100 bytes a node.
//!
//! Indexes live in their [`crate::catalog::GraphFile`], one per graph (a side of a step and a
//! rank), so a file changed on disk (a new size or modification time) gets a new `GraphFile` and
//! fresh indexes. Our own edits (matching) call [`IndexCache::invalidate`] as well, so that
//! nothing depends on the file system's timestamp resolution. The precision recomputed by
//! `updatePrecisionError` is not part of the index: the filter applies it on top
//! ([`crate::precision_overrides::PrecisionOverrides`]).
//!
//! An index is built on first use, or ahead of it by [`crate::catalog::GraphFile::prefetch`] (on
//! a background thread, when the page loads a file's configuration), so that the first search or
//! filter does not pay for it. Concurrent users of one graph wait for the one build. Only the
//! graphs a page looks at are indexed: a file of thousands of graphs (steps × ranks) costs the
//! memory of the few in use, since all indexes together stay under the sidecar's
//! [`IndexBudget`] (`serve --max-index-memory-mb`), least recently used out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use graph_ascend_visdb::store::{GraphKey, IndexRow, NodeRow};
use graph_ascend_visdb::{Store, StoreError};

use crate::layout::NodeSource;

/// Strings stored end to end, addressed by position.
#[derive(Default)]
struct Arena {
    text: String,
    /// `ends[i]` is where string `i` ends (and string `i + 1` starts).
    ends: Vec<u32>,
}

impl Arena {
    fn push(&mut self, s: &str) -> bool {
        self.text.push_str(s);
        self.end_string()
    }

    /// Ends the string pushed since the last end; false when the text no longer fits `u32`.
    fn end_string(&mut self) -> bool {
        match u32::try_from(self.text.len()) {
            Ok(end) => {
                self.ends.push(end);
                true
            }
            Err(_) => false,
        }
    }

    /// Pushes the lower-case form of `s` (without a temporary string for ASCII text).
    fn push_lowercase(&mut self, s: &str) -> bool {
        if s.is_ascii() {
            let start = self.text.len();
            self.text.push_str(s);
            self.text[start..].make_ascii_lowercase();
            self.end_string()
        } else {
            self.push(&s.to_lowercase())
        }
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// The string containing byte `pos`.
    fn index_of(&self, pos: usize) -> usize {
        self.ends.partition_point(|&end| end as usize <= pos)
    }

    fn heap_size(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * std::mem::size_of::<u32>()
    }

    fn shrink(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }
}

/// What an index costs besides its vectors: the index itself, its `Arc`, its slot (an `Arc`'d
/// mutex), the slot's map entry and the budget's record of it.
const SLOT_OVERHEAD: usize = 512;

/// How a node's partner (the last element of `matched_node_link`) is stored.
const LINK_NONE: u8 = 0;
/// The partner has the node's own name (by far the most common case).
const LINK_SAME: u8 = 1;
/// The partner's name is in `other_links`.
const LINK_OTHER: u8 = 2;

/// One graph's nodes in node order, as the big answers need them.
pub struct GraphIndex {
    names: Arena,
    lower: Arena,
    micro: Vec<i32>,
    leaf: Vec<bool>,
    linked: Vec<bool>,
    precision: Vec<Option<f64>>,
    link_kind: Vec<u8>,
    /// The partners of `LINK_OTHER` nodes, in node order.
    other_links: Vec<(u32, Box<str>)>,
}

/// A leaf of the target side as the precision filter sees it.
pub struct Leaf<'a> {
    pub name: &'a str,
    pub precision_index: Option<f64>,
    pub matched: bool,
}

impl GraphIndex {
    /// Reads one graph of `store`, calling `between` every
    /// [`crate::step_aside::ROWS_BETWEEN_LOOKS`] rows (where a background build pauses when
    /// asked to).
    pub fn build(
        store: &Store,
        graph: GraphKey,
        mut between: impl FnMut(),
    ) -> Result<GraphIndex, StoreError> {
        let mut index = GraphIndex {
            names: Arena::default(),
            lower: Arena::default(),
            micro: Vec::new(),
            leaf: Vec::new(),
            linked: Vec::new(),
            precision: Vec::new(),
            link_kind: Vec::new(),
            other_links: Vec::new(),
        };
        let mut fits = true;
        store.scan_index_rows(graph, |row: IndexRow<'_>| {
            let i = index.micro.len() as u32;
            if (i as usize + 1).is_multiple_of(crate::step_aside::ROWS_BETWEEN_LOOKS) {
                between();
            }
            fits &= index.names.push(row.name);
            fits &= index.lower.push_lowercase(row.name);
            index.micro.push(i32::try_from(row.micro_step_id).unwrap_or(
                if row.micro_step_id < 0 {
                    i32::MIN
                } else {
                    i32::MAX
                },
            ));
            index.leaf.push(row.is_leaf);
            index.linked.push(row.linked);
            index.precision.push(row.precision_index);
            index.link_kind.push(match row.link_last {
                None => LINK_NONE,
                Some(link) if link == row.name => LINK_SAME,
                Some(link) => {
                    index
                        .other_links
                        .push((i, link.into_owned().into_boxed_str()));
                    LINK_OTHER
                }
            });
        })?;
        if !fits {
            return Err(StoreError::Data {
                path: store.path().to_owned(),
                what: "node names".into(),
                reason: "more than 4 GB of names in one graph".into(),
            });
        }
        index.names.shrink();
        index.lower.shrink();
        index.micro.shrink_to_fit();
        index.leaf.shrink_to_fit();
        index.linked.shrink_to_fit();
        index.precision.shrink_to_fit();
        index.link_kind.shrink_to_fit();
        index.other_links.shrink_to_fit();
        Ok(index)
    }

    /// What this index holds on the heap, with what its slot in an [`IndexCache`] costs: the
    /// measure of the [`IndexBudget`].
    pub fn heap_size(&self) -> usize {
        use std::mem::size_of;
        let other_links: usize = self.other_links.iter().map(|(_, l)| l.len()).sum();
        SLOT_OVERHEAD
            + self.names.heap_size()
            + self.lower.heap_size()
            + self.micro.capacity() * size_of::<i32>()
            + self.leaf.capacity()
            + self.linked.capacity()
            + self.precision.capacity() * size_of::<Option<f64>>()
            + self.link_kind.capacity()
            + self.other_links.capacity() * size_of::<(u32, Box<str>)>()
            + other_links
    }

    /// The length of all names together, in bytes.
    pub fn names_bytes(&self) -> usize {
        self.names.text.len()
    }

    /// How many nodes the graph has.
    pub fn len(&self) -> usize {
        self.micro.len()
    }

    pub fn is_empty(&self) -> bool {
        self.micro.is_empty()
    }

    /// Whether node `i` belongs to `micro_step` (`-1`: every node belongs).
    fn in_micro_step(&self, i: usize, micro_step: i64) -> bool {
        micro_step == -1 || i64::from(self.micro[i]) == micro_step
    }

    /// The name of node `i`.
    pub fn name(&self, i: usize) -> &str {
        self.names.get(i)
    }

    /// The nodes of `micro_step` (`-1`: all), in node order.
    pub fn nodes(&self, micro_step: i64) -> impl Iterator<Item = usize> + '_ {
        (0..self.len()).filter(move |&i| self.in_micro_step(i, micro_step))
    }

    /// Node names of `micro_step` in node order (`Store::node_names`).
    pub fn names(&self, micro_step: i64) -> Vec<String> {
        self.nodes(micro_step)
            .map(|i| self.name(i).to_owned())
            .collect()
    }

    /// `(name, partner)` of the nodes of `micro_step` in node order (`Store::match_links`).
    pub fn links(&self, micro_step: i64) -> impl Iterator<Item = (&str, Option<&str>)> + '_ {
        let mut others = self.other_links.iter().peekable();
        (0..self.len()).filter_map(move |i| {
            let name = self.name(i);
            let link = match self.link_kind[i] {
                LINK_SAME => Some(name),
                LINK_OTHER => {
                    while others.peek().is_some_and(|(j, _)| (*j as usize) < i) {
                        others.next();
                    }
                    others
                        .peek()
                        .filter(|(j, _)| *j as usize == i)
                        .map(|(_, l)| &**l)
                }
                _ => None,
            };
            self.in_micro_step(i, micro_step).then_some((name, link))
        })
    }

    /// The leaves of `micro_step` in node order (`Store::leaf_precisions`).
    pub fn leaves(&self, micro_step: i64) -> impl Iterator<Item = Leaf<'_>> + '_ {
        self.nodes(micro_step)
            .filter(|&i| self.leaf[i])
            .map(|i| Leaf {
                name: self.name(i),
                precision_index: self.precision[i],
                matched: self.linked[i],
            })
    }

    /// The first `limit` names of `micro_step` containing `query` (ignoring case) in node order,
    /// and how many match in all. An empty query matches every name.
    pub fn search(&self, query: &str, limit: usize, micro_step: i64) -> (Vec<String>, usize) {
        let query = query.to_lowercase();
        let mut out = Vec::new();
        let mut total = 0;
        let mut hit = |i: usize| {
            if self.in_micro_step(i, micro_step) {
                total += 1;
                if out.len() < limit {
                    out.push(self.name(i).to_owned());
                }
            }
        };
        if query.is_empty() {
            (0..self.len()).for_each(&mut hit);
        } else {
            // One pass over all the lower-case names; a match is attributed to the name it starts
            // in if it also ends there (it never spans names unless it would cross a boundary).
            let text = &self.lower.text;
            let finder = memchr::memmem::Finder::new(query.as_bytes());
            let mut from = 0;
            while let Some(found) = finder.find(&text.as_bytes()[from..]) {
                let start = from + found;
                let i = self.lower.index_of(start);
                let end = self.lower.ends[i] as usize;
                if start + query.len() <= end {
                    hit(i);
                    from = end; // the next name
                } else {
                    // Crosses into the next name: look again from the next character.
                    from = start + text[start..].chars().next().map_or(1, char::len_utf8);
                }
                if from >= text.len() {
                    break;
                }
            }
        }
        (out, total)
    }
}

type Slot = Arc<Mutex<Option<Arc<GraphIndex>>>>;
type SlotMap = Mutex<HashMap<GraphKey, Slot>>;

/// The indexes of one file version, per graph, under the sidecar's [`IndexBudget`].
pub struct IndexCache {
    /// Names this cache in the budget.
    id: u64,
    slots: Arc<SlotMap>,
    budget: Arc<IndexBudget>,
}

impl IndexCache {
    /// An empty cache whose indexes count against `budget`.
    pub fn new(budget: Arc<IndexBudget>) -> IndexCache {
        IndexCache {
            id: budget.next_cache.fetch_add(1, Ordering::Relaxed),
            slots: Arc::default(),
            budget,
        }
    }

    fn slot(&self, graph: GraphKey) -> Slot {
        let mut slots = crate::sync::lock(&self.slots);
        slots.entry(graph).or_default().clone()
    }

    /// The index of `graph`, made by `build` on first use (other callers wait for it).
    pub fn get(
        &self,
        graph: GraphKey,
        build: impl FnOnce() -> Result<GraphIndex, StoreError>,
    ) -> Result<Arc<GraphIndex>, StoreError> {
        let slot = self.slot(graph);
        let mut guard = crate::sync::lock(&slot);
        if let Some(index) = guard.as_ref() {
            let index = index.clone();
            drop(guard);
            self.budget.touch(self.id, graph);
            return Ok(index);
        }
        let started = std::time::Instant::now();
        let index = Arc::new(build()?);
        tracing::debug!(
            "indexed {} nodes of {graph:?} in {:?}",
            index.len(),
            started.elapsed()
        );
        *guard = Some(index.clone());
        // Admitted before the slot is released, so that whoever waited for this build finds it
        // accounted for. (The budget never locks a slot: no lock order to keep.)
        self.budget.admit(Held {
            cache: self.id,
            graph,
            bytes: index.heap_size(),
            slots: Arc::downgrade(&self.slots),
            slot: Arc::downgrade(&slot),
            last_used: 0,
        });
        drop(guard);
        Ok(index)
    }

    /// Whether `graph` has a slot already (built, or being built).
    pub fn has(&self, graph: GraphKey) -> bool {
        crate::sync::lock(&self.slots).contains_key(&graph)
    }

    /// Forgets every index (after an edit of the file) and says which graphs had an index.
    /// Builds under way finish for their own callers; later callers build anew.
    pub fn invalidate(&self) -> Vec<GraphKey> {
        let graphs: Vec<GraphKey> = {
            let mut slots = crate::sync::lock(&self.slots);
            slots.drain().map(|(graph, _)| graph).collect()
        };
        self.budget.forget(self.id, &graphs);
        graphs
    }
}

impl Drop for IndexCache {
    fn drop(&mut self) {
        self.budget.forget_cache(self.id);
    }
}

/// Default bound on the memory of all indexes together (`serve --max-index-memory-mb`): about
/// 5 million nodes (a few 1M-node compare files, or thousands of small graphs).
pub const DEFAULT_MAX_INDEX_BYTES: usize = 512 << 20;

/// One built index as the budget knows it.
struct Held {
    cache: u64,
    graph: GraphKey,
    bytes: usize,
    /// The owning cache's slots, and the slot itself (to evict it, unless it was replaced).
    slots: std::sync::Weak<SlotMap>,
    slot: std::sync::Weak<Mutex<Option<Arc<GraphIndex>>>>,
    last_used: u64,
}

#[derive(Default)]
struct Ledger {
    /// Bumped by every use: the order of use.
    clock: u64,
    held: HashMap<(u64, GraphKey), Held>,
    bytes: usize,
}

/// The bound on what the indexes of all files hold together: built indexes are accounted by
/// their own heap size ([`GraphIndex::heap_size`]) and, past the bound, the least recently used
/// are dropped from their caches (to be built again when next asked for). So a file of thousands
/// of graphs (steps × ranks) costs memory for the graphs looked at lately, not for all of them.
/// The index just built stays even when it alone exceeds the bound: its caller is waiting.
pub struct IndexBudget {
    max_bytes: usize,
    next_cache: AtomicU64,
    ledger: Mutex<Ledger>,
}

impl Default for IndexBudget {
    fn default() -> IndexBudget {
        IndexBudget::with_max_bytes(DEFAULT_MAX_INDEX_BYTES)
    }
}

impl IndexBudget {
    /// A budget of about `max_bytes` for all indexes.
    pub fn with_max_bytes(max_bytes: usize) -> IndexBudget {
        IndexBudget {
            max_bytes,
            next_cache: AtomicU64::new(0),
            ledger: Mutex::default(),
        }
    }

    /// Bytes held by the indexes now.
    pub fn bytes(&self) -> usize {
        crate::sync::lock(&self.ledger).bytes
    }

    /// How many graphs have an index now.
    pub fn len(&self) -> usize {
        crate::sync::lock(&self.ledger).held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn touch(&self, cache: u64, graph: GraphKey) {
        let mut ledger = crate::sync::lock(&self.ledger);
        ledger.clock += 1;
        let now = ledger.clock;
        if let Some(held) = ledger.held.get_mut(&(cache, graph)) {
            held.last_used = now;
        }
    }

    /// Records a new index, then drops the least recently used others until all fit the bound.
    fn admit(&self, mut new: Held) {
        let key = (new.cache, new.graph);
        let mut ledger = crate::sync::lock(&self.ledger);
        ledger.clock += 1;
        new.last_used = ledger.clock;
        ledger.bytes += new.bytes;
        if let Some(old) = ledger.held.insert(key, new) {
            ledger.bytes -= old.bytes;
        }
        if ledger.bytes <= self.max_bytes {
            return;
        }
        let mut by_age: Vec<(u64, (u64, GraphKey))> = ledger
            .held
            .iter()
            .filter(|(k, _)| **k != key)
            .map(|(k, h)| (h.last_used, *k))
            .collect();
        by_age.sort_unstable_by_key(|(t, _)| *t);
        for (_, old) in by_age {
            if ledger.bytes <= self.max_bytes {
                break;
            }
            if let Some(held) = ledger.held.remove(&old) {
                ledger.bytes -= held.bytes;
                held.evict();
            }
        }
    }

    /// Forgets the indexes of `graphs` of one cache (dropped from it already).
    fn forget(&self, cache: u64, graphs: &[GraphKey]) {
        let mut ledger = crate::sync::lock(&self.ledger);
        for graph in graphs {
            if let Some(held) = ledger.held.remove(&(cache, *graph)) {
                ledger.bytes -= held.bytes;
            }
        }
    }

    /// Forgets every index of a cache that is gone (the file changed or left the logdir).
    fn forget_cache(&self, cache: u64) {
        let mut ledger = crate::sync::lock(&self.ledger);
        let mut freed = 0;
        ledger.held.retain(|(c, _), held| {
            let keep = *c != cache;
            if !keep {
                freed += held.bytes;
            }
            keep
        });
        ledger.bytes -= freed;
    }
}

impl Held {
    /// Removes this index's slot from its cache, if the slot there is still this one.
    fn evict(self) {
        let (Some(slots), Some(slot)) = (self.slots.upgrade(), self.slot.upgrade()) else {
            return;
        };
        let mut slots = crate::sync::lock(&slots);
        if slots
            .get(&self.graph)
            .is_some_and(|s| Arc::ptr_eq(s, &slot))
        {
            slots.remove(&self.graph);
        }
    }
}

/// At most this many rows are kept in a [`RowCache`] (a few hundred bytes each).
const CACHED_ROWS: usize = 50_000;

/// Recently read children lists of one file version (what expanding the root or a module reads),
/// so that expanding the same node again, or the root after a reset, does not query and parse the
/// rows again. Bounded (50 000 rows); when full it starts over.
#[derive(Default)]
pub struct RowCache {
    map: Mutex<RowMap>,
}

#[derive(Default)]
struct RowMap {
    rows: usize,
    children: HashMap<(GraphKey, String), Arc<Vec<NodeRow>>>,
}

impl RowCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, RowMap> {
        crate::sync::lock(&self.map)
    }

    /// Forgets everything (after an edit of the file).
    pub fn invalidate(&self) {
        let mut map = self.lock();
        map.children.clear();
        map.rows = 0;
    }
}

/// A store read through a file's [`RowCache`].
pub struct CachedRows<'a> {
    pub store: &'a Store,
    pub cache: &'a RowCache,
}

impl NodeSource for CachedRows<'_> {
    fn root(&self, graph: GraphKey) -> Result<Option<NodeRow>, StoreError> {
        self.store.root(graph)
    }

    fn children(&self, graph: GraphKey, parent: &str) -> Result<Arc<Vec<NodeRow>>, StoreError> {
        let key = (graph, parent.to_owned());
        if let Some(rows) = self.cache.lock().children.get(&key) {
            return Ok(rows.clone());
        }
        let rows = Arc::new(self.store.children(graph, parent)?);
        let mut map = self.cache.lock();
        if rows.len() <= CACHED_ROWS {
            if map.rows + rows.len() > CACHED_ROWS {
                map.children.clear();
                map.rows = 0;
            }
            map.rows += rows.len();
            map.children.insert(key, rows.clone());
        }
        Ok(rows)
    }

    fn ancestry(&self, graph: GraphKey, name: &str) -> Result<Vec<NodeRow>, StoreError> {
        self.store.ancestry(graph, name)
    }

    fn path(&self) -> &std::path::Path {
        self.store.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(names: &[&str], micro: &[i32]) -> GraphIndex {
        let mut idx = GraphIndex {
            names: Arena::default(),
            lower: Arena::default(),
            micro: micro.to_vec(),
            leaf: vec![true; names.len()],
            linked: vec![false; names.len()],
            precision: vec![None; names.len()],
            link_kind: vec![LINK_NONE; names.len()],
            other_links: Vec::new(),
        };
        for n in names {
            idx.names.push(n);
            idx.lower.push(&n.to_lowercase());
        }
        idx
    }

    #[test]
    fn search_is_a_substring_search_ignoring_case_in_node_order() {
        let idx = index(
            &[
                "Module.Attn.forward",
                "Functional.linear.0",
                "Module.attn.backward",
            ],
            &[0, 0, 1],
        );
        assert_eq!(
            idx.search("ATTN", 1, -1),
            (vec!["Module.Attn.forward".to_owned()], 2)
        );
        assert_eq!(
            idx.search("attn", 10, 1),
            (vec!["Module.attn.backward".to_owned()], 1)
        );
        assert_eq!(idx.search("", 10, -1).1, 3);
        // Never across two names.
        assert_eq!(idx.search("forwardfunc", 10, -1).1, 0);
        assert_eq!(idx.search("dfunctional", 10, -1).1, 0);
        // Several hits in one name count once.
        let idx = index(&["aaaa", "xa"], &[0, 0]);
        assert_eq!(idx.search("a", 10, -1).1, 2);
        assert_eq!(idx.search("aa", 10, -1).1, 1);
    }

    #[test]
    fn partners_are_returned_in_node_order() {
        let mut idx = index(&["a", "b", "c", "d"], &[0, 0, 0, 0]);
        idx.link_kind = vec![LINK_SAME, LINK_OTHER, LINK_NONE, LINK_OTHER];
        idx.other_links = vec![(1, "B".into()), (3, "D".into())];
        let links: Vec<_> = idx.links(-1).collect();
        assert_eq!(
            links,
            [
                ("a", Some("a")),
                ("b", Some("B")),
                ("c", None),
                ("d", Some("D"))
            ]
        );
    }
}

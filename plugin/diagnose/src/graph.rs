//! The typed graphs the rules work on: for one step and rank, both sides (target `NPU` and
//! golden `Bench`), each node with its parent, its children in the hierarchy's order, its match
//! and its entries; nodes found by name. Made by the load ([`crate::load`]), from the rows or
//! from our own table ([`crate::compact`]).

use foldhash::HashMap;

use crate::entry::Entry;

/// The pass a node belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Forward,
    Backward,
    /// The optimizer's step and gradient clipping (msprobe's `optimizer` and `clip_grad`
    /// nodes): after backward, fed by the gradients.
    Update,
}

/// One node of one side, without its name and entries: those are the side's
/// ([`SideGraph::name`], [`SideGraph::inputs`], [`SideGraph::outputs`], or [`NodeRef`]), each
/// kept in one block per side (a 1M-node side would otherwise hold two million allocations and
/// their pointers).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub parent: Option<u32>,
    /// Children in the hierarchy's order (`sub_nodes`), which is the order they ran in.
    pub children: List<u32>,
    /// Communication peers from `matched_distributed`: `(rank, node on that rank)`.
    pub peers: List<(i64, Box<str>)>,
    /// `micro_step_id`: the micro-batch it ran in (gradient accumulation; 0 without).
    pub micro_step: i64,
    /// msprobe's `NodeOp`: 0 module, 1 API, 9 API collection.
    pub node_type: i32,
    /// Where its entries start among the side's (they end where the next node's start).
    entries: u32,
    /// How many of them are inputs (`input_data`), before its outputs.
    inputs: u32,
    /// Its pass: `.backward` in the name, or inside an update node, else forward.
    pub direction: Direction,
    /// A `parameters_grad` node (the gradients of a module's parameters).
    pub param_grad: bool,
}

impl Node {
    /// A node without parent, children, peers or entries (they are given by
    /// [`SideGraph::push`]).
    pub fn new(node_type: i32, direction: Direction, param_grad: bool, micro_step: i64) -> Node {
        Node {
            parent: None,
            children: List::default(),
            peers: List::default(),
            micro_step,
            node_type,
            entries: 0,
            inputs: 0,
            direction,
            param_grad,
        }
    }
}

/// A node with its side: its name and entries besides its own fields.
#[derive(Clone, Copy)]
pub struct NodeRef<'a> {
    side: &'a SideGraph,
    index: u32,
}

impl<'a> NodeRef<'a> {
    pub fn index(self) -> u32 {
        self.index
    }

    pub fn name(self) -> &'a str {
        self.side.name(self.index)
    }

    /// `input_data` entries (arguments and parameters), in file order.
    pub fn inputs(self) -> &'a [Entry] {
        self.side.inputs(self.index)
    }

    /// `output_data` entries, in file order.
    pub fn outputs(self) -> &'a [Entry] {
        self.side.outputs(self.index)
    }

    /// The node's own fields.
    pub fn node(self) -> &'a Node {
        &self.side.nodes[self.index as usize]
    }
}

impl std::ops::Deref for NodeRef<'_> {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.side.nodes[self.index as usize]
    }
}

impl std::fmt::Debug for NodeRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRef")
            .field("name", &self.name())
            .field("node", &**self)
            .field("inputs", &self.inputs())
            .field("outputs", &self.outputs())
            .finish()
    }
}

/// A side is too large for 32-bit offsets (4 GiB of names, or 4 billion entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// The names of a side's nodes, one after the other in one text: node `i`'s ends at `ends[i]`
/// (and starts where node `i - 1`'s ends).
#[derive(Debug, Default)]
pub struct Names {
    text: String,
    ends: Vec<u32>,
}

impl Names {
    fn with_capacity(nodes: usize) -> Names {
        Names {
            // Reserved, not touched: a guess of the text's length, so that it is rarely
            // copied while it grows.
            text: String::with_capacity(nodes.saturating_mul(64)),
            ends: Vec::with_capacity(nodes),
        }
    }

    fn push(&mut self, name: &str) -> Result<(), TooLarge> {
        let end = u32::try_from(self.text.len() + name.len()).map_err(|_| TooLarge)?;
        self.text.push_str(name);
        self.ends.push(end);
        Ok(())
    }

    /// The name of node `i`.
    pub fn get(&self, i: u32) -> &str {
        let i = i as usize;
        let start = i
            .checked_sub(1)
            .map_or(0, |before| self.ends[before] as usize);
        &self.text[start..self.ends[i] as usize]
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The names in node order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.ends.len() as u32).map(|i| self.get(i))
    }
}

/// A list most nodes leave empty (children: only modules have them; peers: only communication
/// ops), behind one thin pointer: 8 bytes in the node, nothing allocated when empty.
#[derive(Clone, PartialEq)]
pub struct List<T>(Option<Box<Box<[T]>>>);

impl<T> Default for List<T> {
    fn default() -> List<T> {
        List(None)
    }
}

impl<T> std::ops::Deref for List<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.0.as_deref().map_or(&[], |items| items)
    }
}

impl<T> From<Vec<T>> for List<T> {
    fn from(items: Vec<T>) -> List<T> {
        if items.is_empty() {
            List(None)
        } else {
            List(Some(Box::new(items.into_boxed_slice())))
        }
    }
}

impl<T> FromIterator<T> for List<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> List<T> {
        items.into_iter().collect::<Vec<T>>().into()
    }
}

impl<'a, T> IntoIterator for &'a List<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for List<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Node indexes by name, without a second copy of the names: the names' hashes (their high 32
/// bits) sorted, each with the first node of that hash (the name itself is checked against the
/// node), and a map by name for the rare names whose hash another name already took. A 1M-node
/// side saves a million string copies, and the sorted slots (8 bytes a node) a hash map's 34.
#[derive(Debug, Default)]
pub struct NameIndex {
    slots: Vec<HashSlot>,
    collided: HashMap<Box<str>, u32>,
}

/// The high 32 bits of a name's hash and its node, 8 bytes. Names whose 32 bits another name
/// took first (about a hundred of a million) are filed by name.
#[derive(Debug, Clone, Copy)]
struct HashSlot {
    hash: u32,
    node: u32,
}

impl HashSlot {
    fn new(hash: u64, node: u32) -> HashSlot {
        HashSlot {
            hash: (hash >> 32) as u32,
            node,
        }
    }

    fn hash(self) -> u32 {
        self.hash
    }
}

pub(crate) fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x6e61_6d65).hash_one(name)
}

/// A name as two independent 64-bit hashes: how the load keeps the names of a node's parent and
/// children until they are resolved to indexes, instead of a copy of each name (a 1M-node side
/// lists two million). Two names with one key would need both hashes to collide (a chance of
/// about 2⁻¹²⁸ per pair), so resolving a key is resolving its name.
///
/// The second hash is never 0 (a 0 is taken as 1), so that an absent key costs nothing more
/// (`Option<NameKey>` is 16 bytes, not 24: the load holds one for each node's parent and
/// partner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NameKey {
    hash: u64,
    check: std::num::NonZeroU64,
}

impl NameKey {
    pub(crate) fn of(name: &str) -> NameKey {
        use std::hash::BuildHasher;
        let check = foldhash::quality::FixedState::with_seed(0x0063_6865_636b).hash_one(name);
        NameKey {
            hash: name_hash(name),
            check: std::num::NonZeroU64::new(check).unwrap_or(std::num::NonZeroU64::MIN),
        }
    }

    /// The first of the two hashes (a name's [`name_hash`]), for tables of keys.
    pub(crate) fn hash(self) -> u64 {
        self.hash
    }
}

impl NameIndex {
    /// Indexes `nodes` by name; the first of two nodes with one name wins.
    pub(crate) fn build(names: &Names) -> NameIndex {
        use rayon::prelude::*;
        let mut slots: Vec<HashSlot> = (0..names.len() as u32)
            .into_par_iter()
            .map(|i| HashSlot::new(name_hash(names.get(i)), i))
            .collect();
        slots.par_sort_unstable_by_key(|s| (s.hash(), s.node));
        // Of the nodes of one hash, the first keeps the slot; a later one of another name is
        // filed by name (the first of that name wins), one of the same name is not indexed.
        let mut collided: HashMap<Box<str>, u32> = HashMap::default();
        let mut kept = 0;
        for k in 0..slots.len() {
            let slot = slots[k];
            if kept > 0 && slots[kept - 1].hash() == slot.hash() {
                let first = slots[kept - 1].node;
                let name = names.get(slot.node);
                if names.get(first) != name {
                    collided.entry(name.into()).or_insert(slot.node);
                }
            } else {
                slots[kept] = slot;
                kept += 1;
            }
        }
        slots.truncate(kept);
        slots.shrink_to_fit();
        NameIndex { slots, collided }
    }

    /// The first node whose name has hash `hash` (its high 32 bits).
    fn by_hash(&self, hash: u64) -> Option<u32> {
        let hash = (hash >> 32) as u32;
        let k = self.slots.binary_search_by_key(&hash, |s| s.hash()).ok()?;
        Some(self.slots[k].node)
    }

    /// The index of `name` among `names` (the names it was built from).
    pub(crate) fn get(&self, names: &Names, name: &str) -> Option<u32> {
        let i = self.by_hash(name_hash(name))?;
        if names.get(i) == name {
            Some(i)
        } else {
            self.collided.get(name).copied()
        }
    }
}

/// All nodes of one side of one step and rank. Nodes are added by [`SideGraph::push`] only
/// (their names and entries are kept in node order); their fields may be changed in `nodes`.
#[derive(Debug, Default)]
pub struct SideGraph {
    pub nodes: Vec<Node>,
    names: Names,
    /// Every node's inputs then outputs, in node order.
    entries: Vec<Entry>,
    /// Built by [`SideGraph::index_names`].
    pub by_name: NameIndex,
    /// The node without a parent (`DefaultModel`).
    pub root: Option<u32>,
    /// Whether the run is PyTorch's, by its dtype spelling (`None`: no tensor at all).
    pub torch: Option<bool>,
}

impl SideGraph {
    /// An empty side sized for `nodes` nodes.
    pub fn with_capacity(nodes: usize) -> SideGraph {
        SideGraph {
            nodes: Vec::with_capacity(nodes),
            names: Names::with_capacity(nodes),
            // Reserved, not touched (a guess: most nodes have a few entries).
            entries: Vec::with_capacity(nodes.saturating_mul(4)),
            ..SideGraph::default()
        }
    }

    /// Makes room for `total` entries in all (a side whose count is known before it is read).
    pub fn reserve_entries(&mut self, total: usize) {
        self.entries
            .reserve_exact(total.saturating_sub(self.entries.len()));
    }

    /// Adds `node` named `name` with `entries`, its first `inputs` its inputs and the rest its
    /// outputs; its index.
    pub fn push(
        &mut self,
        name: &str,
        mut node: Node,
        entries: impl IntoIterator<Item = Entry>,
        inputs: usize,
    ) -> Result<u32, TooLarge> {
        let index = u32::try_from(self.nodes.len()).map_err(|_| TooLarge)?;
        let start = self.entries.len();
        self.entries.extend(entries);
        let count = self.entries.len() - start;
        node.entries = u32::try_from(start).map_err(|_| TooLarge)?;
        node.inputs = u32::try_from(inputs.min(count)).map_err(|_| TooLarge)?;
        u32::try_from(self.entries.len()).map_err(|_| TooLarge)?;
        self.names.push(name)?;
        self.nodes.push(node);
        Ok(index)
    }

    /// Indexes the nodes by name ([`SideGraph::find`]), once every node is pushed.
    pub fn index_names(&mut self) {
        self.by_name = NameIndex::build(&self.names);
    }

    /// The index of a node by name.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.by_name.get(&self.names, name)
    }

    /// Node `i` with its name and entries.
    pub fn node(&self, i: u32) -> NodeRef<'_> {
        NodeRef {
            side: self,
            index: i,
        }
    }

    /// Every node with its name and entries, in node order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = NodeRef<'_>> + '_ {
        (0..self.nodes.len() as u32).map(|i| self.node(i))
    }

    /// The name of node `i`.
    pub fn name(&self, i: u32) -> &str {
        self.names.get(i)
    }

    /// The names of the nodes, in node order.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// Node `i`'s entries, inputs then outputs.
    fn entries_of(&self, i: u32) -> (&[Entry], usize) {
        let i = i as usize;
        let start = self.nodes[i].entries as usize;
        let end = self
            .nodes
            .get(i + 1)
            .map_or(self.entries.len(), |next| next.entries as usize);
        (&self.entries[start..end], self.nodes[i].inputs as usize)
    }

    /// Node `i`'s `input_data` entries (arguments and parameters), in file order.
    pub fn inputs(&self, i: u32) -> &[Entry] {
        let (all, inputs) = self.entries_of(i);
        &all[..inputs]
    }

    /// Node `i`'s `output_data` entries, in file order.
    pub fn outputs(&self, i: u32) -> &[Entry] {
        let (all, inputs) = self.entries_of(i);
        &all[inputs..]
    }

    /// Every entry of the side, in node order.
    pub fn all_entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Nodes in execution order: a post-order walk of the hierarchy (children in their order,
    /// then the node, as a module finishes after what it calls), then any node the walk did not
    /// reach, in file order. Iterative, so a deep or corrupt hierarchy cannot overflow the stack.
    pub fn execution_order(&self) -> Vec<u32> {
        let n = self.nodes.len();
        let mut seen = vec![false; n];
        let mut order = Vec::with_capacity(n);
        let walk = |start: u32, seen: &mut Vec<bool>, order: &mut Vec<u32>| {
            if seen[start as usize] {
                return;
            }
            seen[start as usize] = true;
            let mut stack: Vec<(u32, usize)> = vec![(start, 0)];
            while let Some((node, next)) = stack.pop() {
                let children = &self.nodes[node as usize].children;
                if let Some(&child) = children.get(next) {
                    stack.push((node, next + 1));
                    if !seen[child as usize] {
                        seen[child as usize] = true;
                        stack.push((child, 0));
                    }
                } else {
                    order.push(node);
                }
            }
        };
        if let Some(root) = self.root {
            walk(root, &mut seen, &mut order);
        }
        for i in 0..n as u32 {
            if !seen[i as usize] {
                walk(i, &mut seen, &mut order);
            }
        }
        order
    }

    /// `node`'s ancestors, nearest first (bounded by the number of nodes: a cycle stops it).
    pub fn ancestors(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        let mut next = self.nodes[node as usize].parent;
        let mut left = self.nodes.len();
        std::iter::from_fn(move || {
            let current = next?;
            if left == 0 {
                return None;
            }
            left -= 1;
            next = self.nodes[current as usize].parent;
            Some(current)
        })
    }
}

/// Both sides of one step and rank.
#[derive(Debug)]
pub struct RankData {
    pub step: i64,
    pub rank: i64,
    pub npu: SideGraph,
    pub bench: SideGraph,
    /// The golden partner of each target node (by `matched_node_link`), if it exists.
    pub partners: Vec<Option<u32>>,
}

impl RankData {
    /// The two runs come from different frameworks (MindSpore against PyTorch).
    pub fn cross_framework(&self) -> bool {
        matches!((self.npu.torch, self.bench.torch), (Some(a), Some(b)) if a != b)
    }

    /// The golden partner of target node `i`, if it is matched and the partner exists.
    pub fn partner(&self, i: u32) -> Option<u32> {
        self.partners[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Names {
        let mut names = Names::default();
        for name in list {
            names.push(name).expect("small");
        }
        names
    }

    #[test]
    fn nodes_and_entries_stay_small() {
        // A 1M-node compare holds two million nodes and four million entries: every byte of
        // these is megabytes of the diagnosis's peak (docs/diagnosis.md, §8).
        assert!(std::mem::size_of::<Node>() <= 48);
        assert!(std::mem::size_of::<crate::entry::Entry>() <= 40);
        assert!(std::mem::size_of::<HashSlot>() <= 8);
        assert!(std::mem::size_of::<Option<NameKey>>() <= 16);
    }

    #[test]
    fn a_name_whose_hash_another_name_took_is_found_by_name() {
        let nodes = names(&["a", "b"]);
        // As if "b" hashed like "a": filed by name, behind "a" in the map by hash.
        let mut index = NameIndex::default();
        index.slots.push(HashSlot::new(name_hash("b"), 0));
        index.collided.insert("b".into(), 1);
        assert_eq!(index.get(&nodes, "b"), Some(1));
        assert_eq!(index.get(&nodes, "c"), None);
        // Without the collision, each name by itself.
        let index = NameIndex::build(&nodes);
        assert_eq!(index.get(&nodes, "a"), Some(0));
        assert_eq!(index.get(&nodes, "b"), Some(1));
    }

    #[test]
    fn names_and_entries_are_the_nodes_own() {
        let entry = |name: &str| {
            Entry::new(
                name,
                crate::entry::Role::Input,
                crate::entry::Kind::Tensor,
                crate::entry::DtypeClass::Float32,
                true,
                crate::entry::Stats::default(),
                0,
                Default::default(),
            )
        };
        let mut side = SideGraph::with_capacity(1);
        let node = || Node::new(0, Direction::Forward, false, 0);
        side.push("a", node(), [entry("input.0"), entry("output.0")], 1)
            .expect("small");
        side.push("bc", node(), [], 0).expect("small");
        side.push("", node(), [entry("output.0")], 0)
            .expect("small");
        side.index_names();
        let names: Vec<&str> = side.iter().map(|n| n.name()).collect();
        assert_eq!(names, ["a", "bc", ""]);
        let keys = |entries: &[Entry]| {
            entries
                .iter()
                .map(|e| e.name().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(side.inputs(0)), ["input.0"]);
        assert_eq!(keys(side.outputs(0)), ["output.0"]);
        assert!(side.inputs(1).is_empty() && side.outputs(1).is_empty());
        assert_eq!(keys(side.outputs(2)), ["output.0"]);
        assert_eq!(side.find("bc"), Some(1));
        assert_eq!(side.find(""), Some(2));
    }
}

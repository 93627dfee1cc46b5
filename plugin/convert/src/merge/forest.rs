//! The rank graphs while they are merged.
//!
//! msprobe merges graphs by moving node objects between them: a node of rank 1 is attached
//! under a node of rank 0 while rank 1's own id table still points at it, ids are rewritten in
//! place, and id tables keep their insertion order (which decides, for instance, which
//! `all_reduce` names the TP groups). To reproduce that exactly, the nodes of all ranks live in
//! one [`Forest`] (shared by index) and each rank graph is a root plus an ordered id table
//! ([`NodeMap`]) over it, as msprobe's `node_map` is.

use std::collections::HashMap;
use std::sync::Arc;

use graph_ascend_dump::{Item, PackedItem, PyVal};

use crate::graph::Graph;
use crate::node::{Node, NodeOp};

/// One node of a merge.
#[derive(Debug, Clone)]
pub struct MNode {
    pub id: String,
    pub op: NodeOp,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// Bumped when `children` is replaced by another list (not when it grows in place):
    /// msprobe's loops keep iterating the list object they started with.
    pub children_gen: u64,
    pub input: Vec<(String, Item)>,
    pub output: Vec<(String, Item)>,
    pub stack: Arc<Vec<String>>,
    pub micro_step_id: Option<i64>,
    pub overflow_level: Option<&'static str>,
    pub rank: i64,
    pub merge_info: Vec<String>,
    pub pp_merged: bool,
    pub pp_index: Option<i64>,
}

/// msprobe's `node_map`: id → node, in insertion order (a re-inserted id goes last).
#[derive(Debug, Clone, Default)]
pub struct NodeMap {
    entries: Vec<Option<(String, usize)>>,
    pos: HashMap<String, usize>,
}

impl NodeMap {
    pub fn get(&self, id: &str) -> Option<usize> {
        self.pos
            .get(id)
            .and_then(|&p| self.entries[p].as_ref().map(|(_, n)| *n))
    }

    pub fn contains(&self, id: &str) -> bool {
        self.pos.contains_key(id)
    }

    /// `map[id] = n`: an existing id keeps its place.
    pub fn insert(&mut self, id: &str, n: usize) {
        match self.pos.get(id) {
            Some(&p) => self.entries[p] = Some((id.to_string(), n)),
            None => {
                self.pos.insert(id.to_string(), self.entries.len());
                self.entries.push(Some((id.to_string(), n)));
            }
        }
    }

    pub fn remove(&mut self, id: &str) -> Option<usize> {
        let p = self.pos.remove(id)?;
        self.entries[p].take().map(|(_, n)| n)
    }

    /// The nodes in insertion order.
    pub fn values(&self) -> Vec<usize> {
        self.entries.iter().flatten().map(|(_, n)| *n).collect()
    }

    /// `(id, node)` in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        self.entries.iter().flatten().map(|(k, n)| (k.as_str(), *n))
    }
}

/// One rank's graph inside a merge (msprobe's `BuildGraphResult`).
#[derive(Debug, Clone)]
pub struct MGraph {
    pub root: usize,
    pub map: NodeMap,
    pub rank: i64,
    pub micro_steps: i64,
    pub micro_step_num: Option<i64>,
    /// `add_node(…, id_accumulation=True)` counters.
    pub id_counters: HashMap<String, i64>,
    /// Index of the rank's dump in the merge's list of dumps.
    pub dump: usize,
}

/// All nodes of all ranks of one side.
#[derive(Debug, Default)]
pub struct Forest {
    pub nodes: Vec<MNode>,
    /// Nodes whose items msprobe shares (the same dicts under renamed keys): `(taker, giver,
    /// output)`, the output items when `output`, else the input items. Of two such nodes
    /// written to one file, the later is formatted twice ([`crate::node::FormattedTwice`]).
    pub shared_items: Vec<(usize, usize, bool)>,
}

impl Forest {
    /// Moves one rank's graph into the forest.
    pub fn add_graph(&mut self, g: Graph, rank: i64, micro_steps: i64, dump: usize) -> MGraph {
        let base = self.nodes.len();
        let mut map = NodeMap::default();
        let (root, micro_step_num) = (g.root, g.micro_step_num);
        for (i, (id, mut n, children)) in g.into_nodes().enumerate() {
            map.insert(&id, base + i);
            let (input, output) = n.take_items();
            let (parent, overflow_level, micro_step_id) =
                (n.parent(), n.overflow_level(), n.micro_step_id());
            self.nodes.push(MNode {
                id,
                op: n.op,
                parent: parent.map(|p| p + base),
                children: children.into_iter().map(|c| c + base).collect(),
                children_gen: 0,
                input: unpack_items(input),
                output: unpack_items(output),
                stack: n.stack,
                micro_step_id,
                overflow_level,
                rank,
                merge_info: Vec::new(),
                pp_merged: false,
                pp_index: None,
            });
        }
        MGraph {
            root: root + base,
            map,
            rank,
            micro_steps,
            micro_step_num,
            id_counters: HashMap::new(),
            dump,
        }
    }

    /// Replaces a child list (a new list object in msprobe's terms).
    pub fn set_children(&mut self, n: usize, children: Vec<usize>) {
        self.nodes[n].children = children;
        self.nodes[n].children_gen += 1;
    }

    /// `get_ancestors`: ids from the root down to the parent (empty on a cycle).
    pub fn ancestors(&self, n: usize) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let mut cur = self.nodes[n].parent;
        let mut seen = std::collections::HashSet::new();
        while let Some(p) = cur {
            if !seen.insert(self.nodes[p].id.as_str()) {
                return Vec::new();
            }
            out.push(&self.nodes[p].id);
            cur = self.nodes[p].parent;
        }
        out.reverse();
        out
    }

    /// `graph.add_node(op, id, id_accumulation=True)`: a new node `<id>.<k>`.
    pub fn add_accumulated(&mut self, g: &mut MGraph, op: NodeOp, base: &str) -> usize {
        if g.map.contains(base) {
            g.id_counters.insert(base.to_string(), 0);
        }
        let k = match g.id_counters.get_mut(base) {
            Some(k) => {
                *k += 1;
                *k
            }
            None => {
                g.id_counters.insert(base.to_string(), 0);
                0
            }
        };
        let id = format!("{base}.{k}");
        let n = self.nodes.len();
        let node = Node::new(op);
        self.nodes.push(MNode {
            id: id.clone(),
            op,
            parent: None,
            children: Vec::new(),
            children_gen: 0,
            input: Vec::new(),
            output: Vec::new(),
            stack: node.stack,
            micro_step_id: None,
            overflow_level: None,
            rank: g.rank,
            merge_info: Vec::new(),
            pp_merged: false,
            pp_index: None,
        });
        g.map.insert(&id, n);
        n
    }

    /// Renames the item keys of a node after its id changed (`_update_node_data_key`).
    pub fn rename_keys(&mut self, n: usize, old: &str, new: &str) {
        if old == new {
            return;
        }
        let node = &mut self.nodes[n];
        for (k, _) in node.input.iter_mut().chain(node.output.iter_mut()) {
            if k.contains(old) {
                *k = k.replace(old, new);
            }
        }
    }

    /// A rank graph → the converter's [`Graph`]: the nodes msprobe's `get_sorted_nodes`
    /// reaches from the root (by id: of nodes sharing an id only the first finished one is
    /// kept, and the others' places point at it), ids looked up through the graph's id table as
    /// msprobe's comparator does.
    pub fn to_graph(&self, g: &MGraph) -> Graph {
        // msprobe's traversal: the first node of each id to finish is the one written.
        let mut kept: HashMap<&str, usize> = HashMap::new();
        let mut order: Vec<usize> = Vec::new();
        let mut stack: Vec<(usize, bool)> = vec![(g.root, false)];
        while let Some((n, processed)) = stack.pop() {
            let id = self.nodes[n].id.as_str();
            if kept.contains_key(id) {
                continue;
            }
            if processed {
                kept.insert(id, n);
                order.push(n);
            } else {
                stack.push((n, true));
                for &c in self.nodes[n].children.iter().rev() {
                    if !kept.contains_key(self.nodes[c].id.as_str()) {
                        stack.push((c, false));
                    }
                }
            }
        }
        // Root first, so that the converter's root index is 0.
        order.reverse();
        let local: HashMap<usize, usize> = order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let by_id = |c: usize| -> Option<usize> {
            kept.get(self.nodes[c].id.as_str())
                .and_then(|k| local.get(k).copied())
        };
        // A merged graph holds its items (no `source`).
        let mut graph = Graph::with_capacity(order.len());
        graph.micro_step_num = g.micro_step_num;
        for &n in &order {
            let m = &self.nodes[n];
            let i = graph.push_node(&m.id);
            graph.set_children(i, m.children.iter().filter_map(|&c| by_id(c)));
            let node = &mut graph.nodes[i];
            node.op = m.op;
            node.set_parent(m.parent.and_then(|p| local.get(&p).copied()));
            node.set_items(pack_items(&m.input), pack_items(&m.output));
            node.stack = Arc::clone(&m.stack);
            node.set_micro_step_id(m.micro_step_id);
            node.set_overflow_level(m.overflow_level);
            node.set_parallel_merge_info(m.merge_info.clone());
        }
        if let Some(r) = graph.nodes.first_mut() {
            r.set_parent(None);
        }
        // Local indexes run root first, the reverse of the post-order msprobe writes rows in:
        // of two nodes sharing items, the lower index is written later.
        for &(a, b, output) in &self.shared_items {
            if let (Some(&a), Some(&b)) = (local.get(&a), local.get(&b)) {
                let later = &mut graph.nodes[a.min(b)];
                let mut twice = later.formatted_twice();
                if output {
                    twice.output = true;
                } else {
                    twice.input = true;
                }
                later.set_formatted_twice(twice);
            }
        }
        for (id, n) in g.map.iter() {
            if let Some(&l) = local.get(&n) {
                graph.index_as(id, l);
            }
        }
        graph
    }
}

/// A Python number (`int`, `float`, `bool`) as f64, `None` for anything else.
pub fn number(v: Option<&PyVal>) -> Option<f64> {
    match v? {
        PyVal::Int(i) => Some(*i as f64),
        PyVal::Float(f) => Some(*f),
        PyVal::BigInt(s) => s.parse().ok(),
        PyVal::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// `LAYERS_PATTERN` = `(layers\.|layer\.)\d+(\.)`: the first match as
/// `(start, prefix end, digits end, end)`.
pub fn layers_match(s: &str) -> Option<(usize, usize, usize, usize)> {
    let b = s.as_bytes();
    for i in 0..b.len() {
        for prefix in ["layers.", "layer."] {
            if s[i..].starts_with(prefix) {
                let p = i + prefix.len();
                let mut d = p;
                while d < b.len() && b[d].is_ascii_digit() {
                    d += 1;
                }
                if d > p && d < b.len() && b[d] == b'.' {
                    return Some((i, p, d, d + 1));
                }
            }
        }
    }
    None
}

/// `LAYERS_PATTERN.sub(r"\1<index>\2", s)`: every match's number replaced.
pub fn layers_sub_all(s: &str, index: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some((_, p, d, end)) = layers_match(rest) {
        out.push_str(&rest[..p]);
        out.push_str(index);
        out.push_str(&rest[d..end]);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `MARK_PATTERN` = `%(\d+)%(\d+)$`: `(start, position, rank)`.
pub fn mark_match(s: &str) -> Option<(usize, i64, i64)> {
    let (head, rank) = s.rsplit_once('%')?;
    if rank.is_empty() || !rank.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (head2, pos) = head.rsplit_once('%')?;
    if pos.is_empty() || !pos.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((head2.len(), pos.parse().ok()?, rank.parse().ok()?))
}

/// The id without its `%position%rank` mark.
pub fn unmark(s: &str) -> &str {
    match mark_match(s) {
        Some((start, _, _)) => &s[..start],
        None => s,
    }
}

/// `RANK_PATTERN` = `_rank(\d+)\.`: the first rank number.
pub fn rank_mark(s: &str) -> Option<i64> {
    let mut from = 0;
    while let Some(i) = s[from..].find("_rank") {
        let p = from + i + 5;
        let b = s.as_bytes();
        let mut d = p;
        while d < b.len() && b[d].is_ascii_digit() {
            d += 1;
        }
        if d > p && d < b.len() && b[d] == b'.' {
            return s[p..d].parse().ok();
        }
        from = from + i + 1;
    }
    None
}

/// `RANK_PATTERN.sub("_rank<r>.", s)`.
pub fn rank_sub_all(s: &str, r: i64) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let b = s.as_bytes();
    let mut i = 0;
    let mut copied = 0;
    while let Some(f) = s[i..].find("_rank") {
        let start = i + f;
        let p = start + 5;
        let mut d = p;
        while d < b.len() && b[d].is_ascii_digit() {
            d += 1;
        }
        if d > p && d < b.len() && b[d] == b'.' {
            out.push_str(&s[copied..start]);
            out.push_str(&format!("_rank{r}."));
            copied = d + 1;
            i = d + 1;
        } else {
            i = start + 1;
        }
    }
    out.push_str(&s[copied..]);
    out
}

/// The forest edits items field by field, so it holds them unpacked; graphs hold them packed.
fn unpack_items(items: Vec<(String, PackedItem)>) -> Vec<(String, Item)> {
    items.into_iter().map(|(k, p)| (k, p.unpack())).collect()
}

fn pack_items(items: &[(String, Item)]) -> Vec<(String, PackedItem)> {
    items
        .iter()
        .map(|(k, i)| (k.clone(), PackedItem::pack(i)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_behave_like_msprobes_regexes() {
        assert_eq!(
            layers_sub_all("Module.layers.3.mlp.Linear.forward.0%2%1", "7"),
            "Module.layers.7.mlp.Linear.forward.0%2%1"
        );
        assert_eq!(
            layers_sub_all("Module.layer.3.x.layers.10.y", "1"),
            "Module.layer.1.x.layers.1.y"
        );
        assert_eq!(layers_match("Module.layersX.3."), None);
        assert_eq!(mark_match("A.b%12%3"), Some((3, 12, 3)));
        assert_eq!(mark_match("A.b%x%3"), None);
        assert_eq!(unmark("a%1%2%3"), "a%1");
        assert_eq!(rank_mark("Torch.matmul_rank4.32.forward"), Some(4));
        assert_eq!(
            rank_sub_all("Torch.matmul_rank4.32.forward", 5),
            "Torch.matmul_rank5.32.forward"
        );
        assert_eq!(rank_mark("Torch.matmul_rankx.32"), None);
    }

    #[test]
    fn node_map_keeps_python_dict_order() {
        let mut m = NodeMap::default();
        m.insert("a", 1);
        m.insert("b", 2);
        m.insert("a", 3);
        assert_eq!(m.values(), vec![3, 2]);
        m.remove("a");
        m.insert("a", 4);
        assert_eq!(m.values(), vec![2, 4]);
        assert_eq!(m.get("a"), Some(4));
    }
}

//! The model graph of one rank, built as msprobe's `GraphBuilder` builds it.
//!
//! Nodes live in an arena (`Vec<Node>`, children as indexes) so that a graph of a million nodes
//! is a few flat allocations. The rules that decide the shape are msprobe's and are documented in
//! `docs/msprobe-converter.md` §3: construct.json order decides child order, a
//! node only ever takes its first parent, backward nodes with a missing or wrong parent are
//! repaired from their forward twin, runs of root-level APIs are wrapped in
//! `Apis_Between_Modules.N`, and parameter gradients hang under their module's last backward call.
//!
//! The node itself is in [`crate::node`]; dump.json's entries, read into items, in
//! [`crate::dump_ops`].

use std::borrow::Cow;
use std::sync::Arc;

use rayon::prelude::*;

use crate::children::{ChildLists, Children};
use crate::dump_ops::DumpOps;
use crate::entries::{DumpSource, EntrySpan, ItemsOf, NodeItems};
use crate::ids::NodeIds;
use crate::names::NameIndex;
use crate::node::{empty_stack, is_parameters_grad_id, parameters_grad_prefix, Node, NodeOp};
use graph_ascend_dump::{Construct, EntryIndex, FastMap, PackedOp, StackMap, StackSink};

/// A graph made from construct.json and stack.json, waiting for dump.json's items.
#[derive(Debug)]
pub struct Skeleton {
    graph: Graph,
    /// The nodes made for construct.json ids (every node the hierarchy made but the root,
    /// before `Apis_Between_Modules`), in the order they were made: each takes its stack and
    /// its dump entry's items. A range, not a list (8 bytes a node).
    dumped: std::ops::Range<usize>,
    /// stack.json's frames of parameter gradients (the nodes [`Skeleton::attach`] adds).
    parameters_grad_stacks: StackMap,
}

impl StackSink for Skeleton {
    /// A node's own frames: kept on its node when not empty (an empty list counts as none), and
    /// apart for a parameter gradient.
    fn stack(&mut self, node: &str, frames: &Arc<Vec<String>>) {
        if is_parameters_grad_id(node) {
            self.parameters_grad_stacks.stack(node, frames);
        }
        // Only the nodes made for construct.json ids take a stack (`dumped` is in node order).
        if let Some(i) = self.graph.get(node) {
            if self.dumped.contains(&i) {
                self.graph.nodes[i].stack = if frames.is_empty() {
                    empty_stack()
                } else {
                    Arc::clone(frames)
                };
            }
        }
    }

    fn restart(&mut self) {
        self.parameters_grad_stacks.restart();
        for i in self.dumped.clone() {
            self.graph.nodes[i].stack = empty_stack();
        }
    }
}

impl Skeleton {
    /// Reads stack.json onto the nodes ([`StackSink`]), then completes their stacks.
    pub fn read_stacks(
        &mut self,
        path: &std::path::Path,
        confine: &graph_ascend_dump::Confine,
    ) -> Result<(), graph_ascend_dump::DumpError> {
        StackMap::read_into(path, confine, self)?;
        self.derive_stacks();
        Ok(())
    }

    /// The stack of each node made (`_create_or_get_node`), in the order they were made: its
    /// own non-empty stack.json entry (given before); otherwise, for a backward node
    /// (`….backward.N` module or `….backward` API), the stack of its forward node *already in
    /// the graph* when it was made (made before it: `….forward.0` for modules, whatever its own
    /// stack), or msprobe's note that there is none.
    pub fn derive_stacks(&mut self) {
        let g = &mut self.graph;
        let no_forward = Arc::new(vec![NO_FORWARD_STACK.to_string()]);
        for i in self.dumped.clone() {
            if !g.nodes[i].stack.is_empty() {
                continue;
            }
            let id = g.id(i);
            let forward = match module_backward(id) {
                Some((prefix, _)) => format!("{prefix}.forward.0"),
                None if id.ends_with(".backward") => id.replace("backward", "forward"),
                None => continue,
            };
            g.nodes[i].stack = match g.get(&forward).filter(|&f| f < i) {
                Some(f) => Arc::clone(&g.nodes[f].stack),
                None => Arc::clone(&no_forward),
            };
        }
    }

    /// stack.json's frames of parameter gradients, given to [`Skeleton::attach`] (the other
    /// nodes hold theirs).
    pub fn take_parameters_grad_stacks(&mut self) -> StackMap {
        std::mem::take(&mut self.parameters_grad_stacks)
    }

    /// Gives dump entry `name`'s span to its node, if it is one made for a construct.json id
    /// (not the root, not an `Apis_Between_Modules` node): `false` when there is none. Spans
    /// are placed on their nodes as dump.json is read, no list of them is kept (memory flat
    /// in dump size); a name given twice takes the last.
    pub fn place(&mut self, name: &str, span: EntrySpan) -> bool {
        let Some(i) = self.graph.get(name) else {
            return false;
        };
        let node = &mut self.graph.nodes[i];
        if i == self.graph.root || node.op == NodeOp::ApiCollection {
            return false;
        }
        node.entry = Some(span);
        true
    }

    /// Gives each node its items and overflow level, moves recomputed top-level modules under
    /// their backward call ([`Graph::reparent_recomputed`]; `framework`: dump.json's, which
    /// says whether their frames are looked at), wraps the top level's runs of APIs into
    /// `Apis_Between_Modules`, and adds the parameter-gradient nodes, in msprobe's order.
    pub fn attach(self, dump: &mut DumpOps, stacks: &StackMap, framework: &str) -> Graph {
        let Skeleton {
            mut graph, dumped, ..
        } = self;
        for i in dumped {
            let id = graph.ids.get(i);
            let node = &mut graph.nodes[i];
            // A node placed while dump.json was read keeps its span: placed spans were read
            // after those held or in `spans` (for a name given twice, the last wins).
            if node.entry.is_none() {
                if let Some(d) = dump.ops.remove(id) {
                    node.set_items(d.input, d.output);
                } else if let Some(span) = dump.spans.remove(id) {
                    node.entry = Some(span);
                }
            }
            node.set_overflow_level(dump.overflow.get(id).copied());
        }
        graph.reparent_recomputed(framework == PYTORCH);
        graph.collect_apis_between_modules();
        graph.add_parameters_grad(dump, stacks);
        graph.shrink_to_fit();
        graph
    }
}

/// The graph of one rank.
#[derive(Debug, Clone)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// Node `n`'s id is `ids.get(n)` ([`Graph::id`]).
    ids: NodeIds,
    /// Node `n`'s children are `children.of(n)` ([`Graph::children`]).
    children: ChildLists,
    pub index: NameIndex,
    pub root: usize,
    /// `megatron_micro_step_number` (Megatron construct.json).
    pub micro_step_num: Option<i64>,
    /// The dump.json that nodes with an `entry` read their items from.
    pub source: Option<Arc<DumpSource>>,
}

pub const ROOT_ID: &str = "DefaultModel";
/// dump.json's `framework` of PyTorch dumps (its default).
const PYTORCH: &str = "pytorch";
const NO_FORWARD_STACK: &str =
    "This backward node cannot find the forward node and cannot retrieve stack information.";

impl Graph {
    /// A graph of the root alone.
    pub(crate) fn empty() -> Graph {
        let mut g = Graph::with_capacity(1);
        g.add_node(ROOT_ID);
        g
    }

    /// A graph without nodes (not even a root), with room for `nodes`: filled by
    /// [`Graph::push_node`], its names given by [`Graph::index_as`].
    pub(crate) fn with_capacity(nodes: usize) -> Graph {
        let mut g = Graph {
            nodes: Vec::with_capacity(nodes),
            ids: NodeIds::default(),
            children: ChildLists::default(),
            index: NameIndex::with_capacity(nodes),
            root: 0,
            micro_step_num: None,
            source: None,
        };
        g.ids.reserve(nodes, 0);
        g.children.reserve_nodes(nodes);
        g
    }

    /// Names node `n` `name` (an alias when it is not the node's own id).
    pub(crate) fn index_as(&mut self, name: &str, n: usize) {
        self.index.insert_as(&self.ids, name, n);
    }

    /// The graph's nodes, each with its id and children, in node order.
    pub(crate) fn into_nodes(self) -> impl Iterator<Item = (String, Node, Vec<usize>)> {
        let Graph {
            nodes,
            ids,
            children,
            ..
        } = self;
        nodes
            .into_iter()
            .enumerate()
            .map(move |(n, node)| (ids.get(n).to_string(), node, children.of(n).collect()))
    }

    /// Node `n`'s id.
    pub fn id(&self, n: usize) -> &str {
        self.ids.get(n)
    }

    /// Node `n`'s children, in order.
    pub fn children(&self, n: usize) -> Children<'_> {
        self.children.of(n)
    }

    /// Node `n`'s `k`-th child.
    pub fn child(&self, n: usize, k: usize) -> Option<usize> {
        self.children.at(n, k)
    }

    /// Replaces node `n`'s children.
    pub(crate) fn set_children(&mut self, n: usize, children: impl IntoIterator<Item = usize>) {
        self.children.set(n, children);
    }

    /// Appends a node of id `id` (not indexed: see [`Graph::add_node`]); its number.
    pub(crate) fn push_node(&mut self, id: &str) -> usize {
        let i = self.nodes.len();
        self.nodes.push(Node::new(NodeOp::classify(id)));
        self.ids.push(id);
        self.children.push_node();
        i
    }

    /// Gives back the room the arenas did not use.
    fn shrink_to_fit(&mut self) {
        self.nodes.shrink_to_fit();
        self.ids.shrink_to_fit();
        self.children.shrink_to_fit();
    }

    /// The items of node `n`: held, or read again from the graph's dump.json.
    pub fn items(&self, n: usize) -> Result<ItemsOf<'_>, crate::error::ConvertError> {
        let node = &self.nodes[n];
        match (node.entry, self.source.as_deref()) {
            (Some(span), Some(source)) => {
                let (input, output) = source.items(self.id(n), span)?;
                Ok((Cow::Owned(input), Cow::Owned(output)))
            }
            _ => Ok((Cow::Borrowed(node.input()), Cow::Borrowed(node.output()))),
        }
    }

    /// Reads every node's items that are still in dump.json into the node (for the steps that
    /// change items: a parallel merge, a tensor compare); the graph then holds them all.
    pub fn hold_items(&mut self) -> Result<(), crate::error::ConvertError> {
        let Some(source) = self.source.take() else {
            return Ok(());
        };
        let held: Vec<(usize, NodeItems)> = (0..self.nodes.len())
            .into_par_iter()
            .filter_map(|n| {
                let node = &self.nodes[n];
                let span = node.entry?;
                Some(source.items(self.ids.get(n), span).map(|items| (n, items)))
            })
            .collect::<Result<_, _>>()?;
        for (n, (input, output)) in held {
            let node = &mut self.nodes[n];
            node.set_items(input, output);
            node.entry = None;
        }
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<usize> {
        self.index.get(&self.ids, id)
    }

    fn add_node(&mut self, id: &str) -> usize {
        if let Some(i) = self.get(id) {
            return i;
        }
        let i = self.push_node(id);
        self.index.insert(&self.ids, i);
        i
    }

    /// Makes `parent` the parent of `child` if `child` has none yet (a node only ever takes its
    /// first parent): `true` when it did, and `child` is then to be listed under `parent`.
    fn adopt(&mut self, child: usize, parent: usize) -> bool {
        if child == parent || self.nodes[child].parent().is_some() || child == self.root {
            return false;
        }
        self.nodes[child].set_parent(Some(parent));
        true
    }

    fn set_parent(&mut self, child: usize, parent: usize) {
        if self.adopt(child, parent) {
            self.children.push(parent, child);
        }
    }

    /// The graph of one dump folder before its stacks and items: hierarchy and micro steps,
    /// from construct.json alone. stack.json's frames are then given
    /// node by node as they are read ([`Skeleton::read_stacks`]), no map of stack.json ever
    /// held, and [`Skeleton::attach`] completes it once dump.json is read.
    pub fn hierarchy(construct: &Construct) -> Skeleton {
        let mut g = Graph::empty();
        // Room for every node at once: a node per entry, a few more for parents not listed and
        // `Apis_Between_Modules`, and the parameter gradients that `attach` adds (one a module
        // at most: room for one a module call). A growing arena would be copied (the
        // allocator's `realloc` of a large block copies it), the old and the new held at once:
        // 5M entries a side peaked so. Room never used is never touched: no resident memory.
        let (mut id_bytes, mut grads, mut grad_bytes) = (0, 0, 0);
        for (sub, _) in construct.entries.iter() {
            id_bytes += sub.len();
            if let Some((prefix, _)) = module_forward(sub) {
                grads += 1;
                grad_bytes += prefix.len() + ".parameters_grad".len();
            }
        }
        let entries = construct.entries.len();
        let room = entries + grads + entries / 32 + 64;
        g.nodes.reserve_exact(room);
        g.ids.reserve(room, id_bytes + id_bytes / 32 + grad_bytes);
        g.children.reserve_nodes(room);
        g.index = NameIndex::with_capacity(room);
        g.index.insert(&g.ids, g.root);
        g.micro_step_num = construct.micro_step_num;
        let parents = construct.entries.index();
        for (sub, up) in construct.entries.iter() {
            let up = match up {
                Some(up) => backward_inplace(&parents, sub, up),
                None => backward_upnode_missing(&parents, sub),
            };
            let parent = match up {
                Some(up) => g.create_node(&up, construct),
                None => g.root,
            };
            let node = g.create_node(sub, construct);
            g.adopt(node, parent);
        }
        // A node takes its parent at its own entry (an entry's node is listed once): each
        // parent's children are the nodes of the entries that it adopted, in file order. The
        // lists are made in one pass from there, not grown node by node nor from a list of
        // the links kept meanwhile (8 bytes an entry).
        let (nodes, ids, index) = (&g.nodes, &g.ids, &g.index);
        g.children.set_links(|| {
            construct
                .entries
                .iter()
                .filter_map(|(sub, _)| index.get(ids, sub))
                .filter_map(|n| nodes[n].parent().map(|p| (p, n)))
        });
        // Node 0 is the root; every node made since was made for a construct.json id.
        // (`Apis_Between_Modules` are made once the stacks are read: `Skeleton::attach`.)
        let dumped = 1..g.nodes.len();
        Skeleton {
            graph: g,
            dumped,
            parameters_grad_stacks: StackMap::default(),
        }
    }

    /// A node of the hierarchy (made once; later calls return it); its stack comes from
    /// stack.json ([`Skeleton::derive_stacks`]), its items from the dump
    /// ([`Skeleton::attach`]).
    fn create_node(&mut self, id: &str, construct: &Construct) -> usize {
        if let Some(i) = self.get(id) {
            return i;
        }
        let i = self.add_node(id);
        let node = &mut self.nodes[i];
        node.set_micro_step_id(construct.micro_step.get(id).copied());
        i
    }

    /// msprobe's `_handle_recompute`: each recomputed module call at the top level (its own
    /// frames, or for a backward call its forward twin's, show a recomputation, unless
    /// `check_stacks` is false (MindSpore, mindtorch); its id is not a top-level call's; its twin
    /// in the other direction is at the top level too, or was found so first) moves under the
    /// backward call of the parent of a forward call of the same module below the top level:
    /// the first such forward call for the first recomputed call of that module in that
    /// direction, the second for the second, and so on (forward and backward calls each take
    /// them from their own list, in node order). It is appended to that parent's children and
    /// leaves the top level, unless the parent is missing, is the node itself or lies inside
    /// it. [`crate::recompute`] has the recognition, docs/msprobe-converter.md §3 the rule.
    fn reparent_recomputed(&mut self, check_stacks: bool) {
        use crate::recompute::{called_from_recompute, looks_recomputed, module_of, twin_id};
        let root = self.root;
        let top: Vec<usize> = self.children(root).collect();
        let top_ids: foldhash::HashSet<&str> = top.iter().map(|&n| self.id(n)).collect();
        // `_get_recompute_map`: (node, its module, its place at the top level), in that order.
        let mut recomputed: Vec<(usize, String, usize)> = Vec::new();
        let mut twins_found: foldhash::HashSet<String> = foldhash::HashSet::default();
        for (place, &n) in top.iter().enumerate() {
            if self.nodes[n].op != NodeOp::Module {
                continue;
            }
            let id = self.id(n);
            if check_stacks {
                // A backward call has no frames of its own: its forward twin's are read.
                let judged = match module_backward(id) {
                    Some((prefix, k)) => self.get(&format!("{prefix}.forward.{k}")),
                    None => Some(n),
                };
                if !judged.is_some_and(|f| called_from_recompute(&self.nodes[f].stack)) {
                    continue;
                }
            }
            let segments: Vec<&str> = id.split('.').collect();
            let module = module_of(&segments);
            if twins_found.contains(id) {
                recomputed.push((n, module, place));
                continue;
            }
            if !looks_recomputed(&segments) {
                continue;
            }
            if let Some(twin) = twin_id(&segments).filter(|t| top_ids.contains(t.as_str())) {
                recomputed.push((n, module, place));
                twins_found.insert(twin);
            }
        }
        if recomputed.is_empty() {
            return;
        }
        // `_get_no_recompute_map`: the forward calls of those modules below the top level, in
        // node order, reversed to be popped.
        let modules: foldhash::HashSet<&str> =
            recomputed.iter().map(|(_, m, _)| m.as_str()).collect();
        let mut forward_calls: FastMap<String, Vec<usize>> = FastMap::default();
        for n in 0..self.nodes.len() {
            let below_top = self.nodes[n].parent().is_some_and(|p| p != root);
            if self.nodes[n].op != NodeOp::Module || !below_top {
                continue;
            }
            if let Some((module, _)) = module_forward(self.id(n)) {
                if modules.contains(module) {
                    forward_calls.entry(module.to_string()).or_default().push(n);
                }
            }
        }
        for calls in forward_calls.values_mut() {
            calls.reverse();
        }
        let mut for_backward = forward_calls.clone();
        let mut left: Vec<usize> = Vec::new();
        for (n, module, place) in recomputed {
            let calls = if module_forward(self.id(n)).is_some() {
                forward_calls.get_mut(&module)
            } else {
                for_backward.get_mut(&module)
            };
            let Some(call) = calls.and_then(Vec::pop) else {
                continue;
            };
            let Some(parent) = self.nodes[call].parent() else {
                continue;
            };
            let parent_id = self.id(parent);
            let new_parent = match module_forward(parent_id) {
                Some((prefix, k)) => self.get(&format!("{prefix}.backward.{k}")),
                None => Some(parent),
            };
            let Some(new_parent) = new_parent.filter(|&p| !self.is_within(p, n)) else {
                continue;
            };
            self.nodes[n].set_parent(Some(new_parent));
            self.children.push(new_parent, n);
            left.push(place);
        }
        if !left.is_empty() {
            let left: foldhash::HashSet<usize> = left.into_iter().collect();
            let stay: Vec<usize> = top
                .iter()
                .enumerate()
                .filter(|(place, _)| !left.contains(place))
                .map(|(_, &n)| n)
                .collect();
            self.set_children(root, stay);
        }
    }

    /// Whether node `n` is `ancestor` or lies inside it (a walk up that stops at a loop).
    fn is_within(&self, n: usize, ancestor: usize) -> bool {
        let mut at = Some(n);
        for _ in 0..=self.nodes.len() {
            match at {
                Some(a) if a == ancestor => return true,
                Some(a) => at = self.nodes[a].parent(),
                None => return false,
            }
        }
        false
    }

    /// Wraps runs of two or more consecutive root-level APIs into `Apis_Between_Modules.<k>`.
    fn collect_apis_between_modules(&mut self) {
        let root = self.root;
        let children: Vec<usize> = self.children(root).collect();
        let mut new_children = Vec::with_capacity(children.len());
        let mut counter = 0usize;
        let mut i = 0;
        while i < children.len() {
            let mut j = i;
            while j < children.len() && self.nodes[children[j]].op == NodeOp::FunctionApi {
                j += 1;
            }
            if j - i >= 2 {
                let id = format!("Apis_Between_Modules.{counter}");
                counter += 1;
                let c = self.add_node(&id);
                self.nodes[c].op = NodeOp::ApiCollection;
                self.nodes[c].set_parent(Some(root));
                let step = self.nodes[children[i]].micro_step_id();
                self.nodes[c].set_micro_step_id(step);
                for &api in &children[i..j] {
                    self.nodes[api].set_parent(Some(c));
                }
                self.set_children(c, children[i..j].iter().copied());
                new_children.push(c);
                i = j;
            } else {
                new_children.push(children[i]);
                i += 1;
            }
        }
        self.set_children(root, new_children);
    }

    /// Dump keys `<prefix>.parameters_grad[.N]` not yet in the graph become nodes under the
    /// module's last backward call `<prefix>.backward.<max N>`.
    fn add_parameters_grad(&mut self, dump: &mut DumpOps, stacks: &StackMap) {
        // Only the modules that have gradient entries matter.
        let wanted: FastMap<&str, ()> = dump
            .order
            .iter()
            .filter_map(|k| parameters_grad_prefix(k))
            .map(|p| (p, ()))
            .collect();
        if wanted.is_empty() {
            return;
        }
        let mut backward_max: FastMap<String, (u64, usize)> = FastMap::default();
        for i in 0..self.nodes.len() {
            let Some((prefix, num)) = self.id(i).rsplit_once(".backward.") else {
                continue;
            };
            if !wanted.contains_key(prefix) {
                continue;
            }
            if let Ok(num) = num.parse::<u64>() {
                match backward_max.get_mut(prefix) {
                    Some(e) if num >= e.0 => *e = (num, i),
                    Some(_) => {}
                    None => {
                        backward_max.insert(prefix.to_string(), (num, i));
                    }
                }
            }
        }
        drop(wanted);
        for key in &dump.order {
            let Some(prefix) = parameters_grad_prefix(key) else {
                continue;
            };
            if self.get(key).is_some() {
                continue;
            }
            let Some(&(_, parent)) = backward_max.get(prefix) else {
                continue;
            };
            let (d, span) = match dump.ops.remove(key) {
                Some(d) => (d, None),
                None => match dump.spans.remove(key) {
                    Some(span) => (PackedOp::default(), Some(span)),
                    None => continue,
                },
            };
            let i = self.add_node(key);
            self.nodes[i].set_items(d.input, d.output);
            self.nodes[i].entry = span;
            self.nodes[i].set_overflow_level(dump.overflow.get(key).copied());
            self.nodes[i].stack = stack_of(key, stacks);
            self.set_parent(i, parent);
        }
    }

    /// Nodes reachable from the root in post-order (children in order, then the node); a node
    /// listed under two parents (merged graphs) comes once.
    pub fn post_order(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.nodes.len());
        let mut done = vec![false; self.nodes.len()];
        let mut stack: Vec<(usize, usize)> = vec![(self.root, 0)];
        while let Some((n, next)) = stack.pop() {
            if let Some(c) = self.child(n, next) {
                stack.push((n, next + 1));
                if !done[c] {
                    stack.push((c, 0));
                }
            } else if !done[n] {
                done[n] = true;
                out.push(n);
            }
        }
        out
    }

    /// Breadth-first order from the root (msprobe's matching walk).
    pub fn bfs(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.nodes.len());
        out.push(self.root);
        let mut i = 0;
        while i < out.len() {
            let n = out[i];
            out.extend(self.children(n));
            i += 1;
        }
        out
    }

    /// Ids from the root down to the parent of `n`.
    pub fn ancestors(&self, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        let mut cur = self.nodes[n].parent();
        while let Some(p) = cur {
            ids.push(self.id(p).to_string());
            cur = self.nodes[p].parent();
        }
        ids.reverse();
        ids
    }

    /// Assigns micro steps (msprobe's `paging_by_micro_step`); returns their number.
    pub fn paging_by_micro_step(&mut self, other: Option<&mut Graph>) -> i64 {
        if let Some(n) = self.micro_step_num {
            return n + 1;
        }
        let root = self.root;
        let children: Vec<usize> = self.children(root).collect();
        let mut batch = 0i64;
        let mut seen_backward = false;
        let mut assigned: Vec<(usize, i64)> = Vec::with_capacity(children.len());
        for &c in &children {
            let node = &self.nodes[c];
            if node.op == NodeOp::Module {
                let id = self.id(c);
                if id.contains(".forward.") && seen_backward {
                    batch += 1;
                    seen_backward = false;
                } else if id.contains(".backward.") {
                    seen_backward = true;
                }
            }
            assigned.push((c, batch));
        }
        for &(c, b) in &assigned {
            self.set_micro_step_down(c, b);
        }
        if let Some(other) = other {
            // As msprobe: a golden partner of a root-level node takes that node's micro step
            // (the partner alone: it may sit deep in the golden hierarchy); golden root-level
            // nodes still without one take the number their id ends with (else 0); then every
            // golden node still without one takes its parent's. A step set on a node is never
            // overwritten by an ancestor's (differential seed 71258).
            for &(c, b) in &assigned {
                if let Some(m) = self.nodes[c].matched() {
                    other.nodes[m].set_micro_step_id(Some(b));
                }
            }
            let bench_children: Vec<usize> = other.children(other.root).collect();
            for c in bench_children {
                if other.nodes[c].micro_step_id().is_none() {
                    let b = other
                        .id(c)
                        .rsplit('.')
                        .next()
                        .and_then(|s| s.parse::<i64>().ok())
                        .unwrap_or(0);
                    other.nodes[c].set_micro_step_id(Some(b));
                }
            }
            other.fill_micro_step_down(other.root);
        }
        batch + 1
    }

    /// Gives every node below `n` without a micro step its parent's (msprobe's
    /// `propagate_micro_step_id`), walking iteratively.
    fn fill_micro_step_down(&mut self, n: usize) {
        let mut stack = vec![n];
        while let Some(x) = stack.pop() {
            let step = self.nodes[x].micro_step_id();
            for k in 0..self.children(x).len() {
                let Some(c) = self.child(x, k) else {
                    break;
                };
                if self.nodes[c].micro_step_id().is_none() {
                    self.nodes[c].set_micro_step_id(step);
                }
                stack.push(c);
            }
        }
    }

    fn set_micro_step_down(&mut self, n: usize, step: i64) {
        let mut stack = vec![n];
        while let Some(x) = stack.pop() {
            self.nodes[x].set_micro_step_id(Some(step));
            stack.extend(self.children(x));
        }
    }
}

fn stack_of(id: &str, stacks: &StackMap) -> Arc<Vec<String>> {
    if let Some(s) = stacks.get(id) {
        return Arc::clone(s);
    }
    if !id.contains("backward") {
        return empty_stack();
    }
    match module_backward(id) {
        Some((prefix, _)) => match stacks.get(&format!("{prefix}.forward.0")) {
            Some(s) => Arc::clone(s),
            None => Arc::new(vec![NO_FORWARD_STACK.to_string()]),
        },
        // API style: the forward call's stack, or none (msprobe writes `[]`).
        None => match stacks.get(&id.replace("backward", "forward")) {
            Some(s) => Arc::clone(s),
            None => empty_stack(),
        },
    }
}

/// `(prefix, N)` for ids ending in `.backward.N`.
fn module_backward(id: &str) -> Option<(&str, &str)> {
    let (prefix, num) = id.rsplit_once(".backward.")?;
    (!num.is_empty() && num.bytes().all(|b| b.is_ascii_digit())).then_some((prefix, num))
}

/// `(prefix, N)` for ids ending in `.forward.N`.
fn module_forward(id: &str) -> Option<(&str, &str)> {
    let (prefix, num) = id.rsplit_once(".forward.")?;
    (!num.is_empty() && num.bytes().all(|b| b.is_ascii_digit())).then_some((prefix, num))
}

/// msprobe's `forward_pattern.sub(r".backward.\2", id)`: `.forward.N` at the end becomes
/// `.backward.N`; any other id is left as it is.
fn backward_of_numbered(id: &str) -> String {
    match module_forward(id) {
        Some((prefix, num)) => format!("{prefix}.backward.{num}"),
        None => id.to_string(),
    }
}

/// construct.json's `node → parent`, looked up by node (5 bytes an entry: see
/// [`EntryIndex`]).
type Parents<'c> = EntryIndex<'c>;

/// msprobe's `_handle_backward_upnode_missing`: a backward node listed without a parent takes
/// the backward twin of its forward twin's parent, when construct.json lists that twin. A
/// module call (`….backward.N`) finds its forward as `….forward.N` and the parent's twin by the
/// same rule; an API (`….backward`) replaces every `backward` of its id by `forward`, and every
/// `forward` of the parent's id by `backward` (Python's `str.replace`).
fn backward_upnode_missing(parents: &Parents, sub: &str) -> Option<String> {
    let candidate = if let Some((prefix, num)) = module_backward(sub) {
        let fparent = parents.parent(format!("{prefix}.forward.{num}").as_str())??;
        backward_of_numbered(fparent)
    } else if sub.ends_with(".backward") {
        let fparent = parents.parent(sub.replace("backward", "forward").as_str())??;
        fparent.replace("forward", "backward")
    } else {
        return None;
    };
    parents
        .find(candidate.as_str())
        .is_some()
        .then_some(candidate)
}

/// msprobe's `_handle_backward_inplace`: a module backward call (`….backward.N`) whose parent
/// is not at its own path's level takes the backward twin of its forward twin's parent instead
/// (no parent when that forward sits at the top level), but only when construct.json lists
/// that twin; otherwise it keeps the parent it was given.
fn backward_inplace(parents: &Parents, sub: &str, up: &str) -> Option<String> {
    let Some((prefix, num)) = module_backward(sub) else {
        return Some(up.to_string());
    };
    let sub_segs: Vec<&str> = sub.split('.').collect();
    let up_segs: Vec<&str> = up.split('.').collect();
    if sub_segs.len() < 5 || up_segs.len() < 4 {
        return Some(up.to_string());
    }
    if sub_segs[..sub_segs.len() - 4] == up_segs[..up_segs.len() - 3] {
        return Some(up.to_string());
    }
    match parents.parent(format!("{prefix}.forward.{num}").as_str()) {
        Some(None) => None,
        Some(Some("")) => None,
        Some(Some(fparent)) => {
            let candidate = backward_of_numbered(fparent);
            if parents.find(candidate.as_str()).is_some() {
                Some(candidate)
            } else {
                Some(up.to_string())
            }
        }
        None => Some(up.to_string()),
    }
}

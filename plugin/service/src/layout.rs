//! The laid-out hierarchy of one graph as one client sees it: which modules are expanded, and
//! where every visible box goes.
//!
//! This reproduces msprobe's plugin (`docs/msprobe-api.md` §3) exactly, because
//! existing pages and users' eyes expect the same boxes: the same constants, the same integer
//! arithmetic (floor division when centring), the same grouping of consecutive children of one
//! kind, and the same forgetting of collapsed subtrees. Only the children of expanded nodes are
//! ever fetched, so the cost of a step depends on what is visible, not on the graph's size.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use graph_ascend_visdb::store::{
    too_deep, GraphKey, NodeRow, Store, StoreError, MAX_HIERARCHY_DEPTH,
};

/// Where a hierarchy reads nodes: a [`Store`], or a store behind a cache of children lists
/// ([`crate::graph_index::CachedRows`]).
pub trait NodeSource {
    /// The root of a graph, if the graph exists.
    fn root(&self, graph: GraphKey) -> Result<Option<NodeRow>, StoreError>;
    /// The children of `parent` in node order.
    fn children(&self, graph: GraphKey, parent: &str) -> Result<Arc<Vec<NodeRow>>, StoreError>;
    /// A node and its ancestors, the node first.
    fn ancestry(&self, graph: GraphKey, name: &str) -> Result<Vec<NodeRow>, StoreError>;
    /// The file read, for errors.
    fn path(&self) -> &Path;
}

impl NodeSource for Store {
    fn root(&self, graph: GraphKey) -> Result<Option<NodeRow>, StoreError> {
        Store::root(self, graph)
    }

    fn children(&self, graph: GraphKey, parent: &str) -> Result<Arc<Vec<NodeRow>>, StoreError> {
        Store::children(self, graph, parent).map(Arc::new)
    }

    fn ancestry(&self, graph: GraphKey, name: &str) -> Result<Vec<NodeRow>, StoreError> {
        Store::ancestry(self, graph, name)
    }

    fn path(&self) -> &Path {
        Store::path(self)
    }
}

/// Leaf box size.
const LEAF_WIDTH: i64 = 50;
const LEAF_HEIGHT: i64 = 15;
/// Gap between boxes in a row, and between stacked boxes.
const HORIZONTAL_SPACING: i64 = 5;
const VERTICAL_SPACING: i64 = 10;
/// Leaves per row.
const MAX_PER_ROW: usize = 5;
/// msprobe's text width estimate: six units per character.
const CHAR_WIDTH: i64 = 6;
/// The render kind of a box that cannot expand.
pub const LEAF_KIND: i32 = 1;

/// One box, as msprobe's render info.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderInfo {
    pub x: i64,
    pub y: i64,
    pub width: i64,
    pub height: i64,
    pub expand: bool,
    pub is_root: bool,
    pub parent: String,
    pub label: String,
    pub name: String,
    /// The node's kind, or [`LEAF_KIND`] when it has no children.
    pub kind: i32,
    pub matched_node_link: Vec<String>,
    pub precision_index: Option<f64>,
    pub overflow_level: Option<String>,
    pub matched_distributed: serde_json::Value,
    /// Names of the children in display order.
    pub children: Vec<String>,
}

impl RenderInfo {
    /// Heap bytes held by this box's strings, lists and JSON.
    fn heap_size(&self) -> usize {
        let strings = |v: &Vec<String>| {
            v.capacity() * std::mem::size_of::<String>()
                + v.iter().map(String::capacity).sum::<usize>()
        };
        self.parent.capacity()
            + self.label.capacity()
            + self.name.capacity()
            + strings(&self.matched_node_link)
            + strings(&self.children)
            + self.overflow_level.as_ref().map_or(0, String::capacity)
            + json_heap_size(&self.matched_distributed)
    }
}

/// Heap bytes of a JSON value (walked with a stack: a file's JSON may nest deeply).
fn json_heap_size(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    let mut total = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => total += s.capacity(),
            Value::Array(a) => {
                total += a.capacity() * std::mem::size_of::<Value>();
                stack.extend(a);
            }
            Value::Object(m) => {
                // An ordered map: entries (hash, key, value) plus an index table.
                total += m.len() * (std::mem::size_of::<(u64, String, Value)>() + 8);
                for (k, x) in m {
                    total += k.capacity();
                    stack.push(x);
                }
            }
            _ => {}
        }
    }
    total
}

/// The boxes held, by node name.
type BoxMap = indexmap::IndexMap<String, RenderInfo, foldhash::fast::RandomState>;

/// The expansion state and layout of one graph for one client.
#[derive(Debug)]
pub struct Hierarchy {
    graph: GraphKey,
    micro_step: i64,
    /// `"N___"`, `"B___"` or `""`: prefixed to `name` so both panes' names stay distinct.
    prefix: &'static str,
    root: String,
    /// An index map, so that a layout looks each box up by name once and then goes by position
    /// (see [`Hierarchy::relayout`]); hashed with foldhash, not SipHash: names come from the
    /// served files, not from the network.
    nodes: BoxMap,
    /// Heap bytes of the boxes in `nodes` (names, strings, lists, JSON), kept up to date as
    /// boxes come, go or change their lists, so that [`Hierarchy::heap_size`], asked after every
    /// request to keep the views under their memory bound, does not walk every box.
    boxes_bytes: usize,
}

impl Clone for Hierarchy {
    /// A copy whose size is measured anew: copied strings and lists have no spare capacity.
    fn clone(&self) -> Hierarchy {
        let nodes = self.nodes.clone();
        let boxes_bytes = nodes.iter().map(|(name, info)| box_size(name, info)).sum();
        Hierarchy {
            graph: self.graph,
            micro_step: self.micro_step,
            prefix: self.prefix,
            root: self.root.clone(),
            nodes,
            boxes_bytes,
        }
    }
}

/// Heap bytes of one box held under `name`.
#[allow(clippy::ptr_arg)] // the key's capacity, not its length
fn box_size(name: &String, info: &RenderInfo) -> usize {
    name.capacity() + info.heap_size()
}

/// Why a walk of a hierarchy stopped, with the box (by its position in the hierarchy's `nodes`).
enum Refused {
    /// The box was met again below itself (a corrupt file's `sub_nodes` loop).
    Cycle(usize),
    /// The box lies more than [`MAX_HIERARCHY_DEPTH`] levels below the root.
    TooDeep(usize),
}

impl Hierarchy {
    /// Builds the hierarchy with the root expanded. `None` if the graph has no root.
    pub fn new(
        store: &dyn NodeSource,
        graph: GraphKey,
        micro_step: i64,
        prefix: &'static str,
    ) -> Result<Option<Hierarchy>, StoreError> {
        let Some(root) = store.root(graph)? else {
            return Ok(None);
        };
        let mut h = Hierarchy {
            graph,
            micro_step,
            prefix,
            root: root.name.clone(),
            nodes: Default::default(),
            boxes_bytes: 0,
        };
        let info = h.render_info(store, &root, true)?;
        h.insert_box(root.name.clone(), info);
        let root_name = h.root.clone();
        h.click_expand(store, &root_name)?;
        h.relayout(store)?;
        Ok(Some(h))
    }

    /// The graph this hierarchy shows.
    pub fn graph(&self) -> GraphKey {
        self.graph
    }

    /// The micro step it is filtered to (`-1`: all).
    pub fn micro_step(&self) -> i64 {
        self.micro_step
    }

    /// The root node's name.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Toggles a visible node, or (for a node not on screen) expands all its ancestors so that
    /// it becomes visible. Unknown names change nothing. A hierarchy that loops (a corrupt file)
    /// is an error naming the node, and leaves only the root open.
    pub fn toggle_or_reveal(
        &mut self,
        store: &dyn NodeSource,
        name: &str,
    ) -> Result<(), StoreError> {
        if name == self.root || self.nodes.contains_key(name) {
            self.click_expand(store, name)?;
        } else {
            self.reveal(store, name)?;
        }
        if let Err(e) = self.relayout(store) {
            let root = self.root.clone();
            for (name, info) in self.nodes.iter_mut() {
                info.expand &= *name == root;
            }
            // With only the root open, the walk cannot meet a node twice on one path.
            let _ = self.relayout(store);
            return Err(e);
        }
        Ok(())
    }

    /// Patches the match state of boxes already present (after a match or unmatch).
    pub fn patch_match(
        &mut self,
        name: &str,
        matched_node_link: Vec<String>,
        precision_index: Option<f64>,
    ) {
        if let Some(info) = self.nodes.get_mut(name) {
            let before = info.heap_size();
            info.matched_node_link = matched_node_link;
            info.precision_index = precision_index;
            self.boxes_bytes = self.boxes_bytes - before + info.heap_size();
        }
    }

    /// Replaces the precision index of the boxes present that `values` names.
    pub fn patch_precision(&mut self, values: &HashMap<String, f64>) {
        for (name, info) in self.nodes.iter_mut() {
            if let Some(v) = values.get(name) {
                info.precision_index = Some(*v);
            }
        }
    }

    /// The visible boxes in depth-first order (parents before children); also forgets the
    /// nodes of collapsed subtrees, as msprobe does, so they are fetched again when reopened.
    pub fn visible(&mut self) -> Vec<(String, RenderInfo)> {
        self.visible_names()
            .into_iter()
            .filter_map(|name| self.nodes.get(&name).cloned().map(|info| (name, info)))
            .collect()
    }

    /// The names of [`Hierarchy::visible`]'s boxes (read them with [`Hierarchy::info`]); also
    /// forgets the nodes of collapsed subtrees.
    pub fn visible_names(&mut self) -> Vec<String> {
        let count = self.nodes.len();
        let mut order: Vec<usize> = Vec::new();
        let mut seen = vec![false; count];
        let mut stack: Vec<usize> = self
            .nodes
            .get_index_of(self.root.as_str())
            .into_iter()
            .collect();
        while let Some(at) = stack.pop() {
            if std::mem::replace(&mut seen[at], true) {
                continue;
            }
            let Some((_, info)) = self.nodes.get_index(at) else {
                continue;
            };
            if info.expand {
                let first = stack.len();
                stack.extend(
                    info.children
                        .iter()
                        .filter_map(|c| self.nodes.get_index_of(c.as_str())),
                );
                stack[first..].reverse();
            }
            order.push(at);
        }
        let names = order
            .iter()
            .filter_map(|&at| self.nodes.get_index(at).map(|(name, _)| name.clone()))
            .collect();
        if order.len() < count {
            let mut keep = vec![false; count];
            for &at in &order {
                keep[at] = true;
            }
            let mut forgotten = 0;
            let mut at = 0;
            self.nodes.retain(|name, info| {
                let kept = keep.get(at).copied().unwrap_or(false);
                at += 1;
                if !kept {
                    forgotten += box_size(name, info);
                }
                kept
            });
            self.boxes_bytes -= forgotten;
        }
        names
    }

    /// Heap bytes held: every box with its strings, lists and JSON, and the map's table
    /// (an estimate from capacities, as the allocator would count them; see
    /// `tests/views_memory.rs`, which checks it against a counting allocator).
    pub fn heap_size(&self) -> usize {
        self.table_and_root_size() + self.boxes_bytes
    }

    /// The heap bytes besides the boxes' own: the map's table and the root's name.
    fn table_and_root_size(&self) -> usize {
        // indexmap: each entry (hash, key, value) in a list, and its position in a hash table
        // (one control byte per bucket beside each position).
        let entry = std::mem::size_of::<(u64, String, RenderInfo)>();
        let table = self.nodes.capacity() * (entry + std::mem::size_of::<usize>() + 1);
        table + self.root.capacity()
    }

    /// Adds a box (replacing one of the same name), counting its size.
    fn insert_box(&mut self, name: String, info: RenderInfo) {
        use indexmap::map::Entry;
        let added = info.heap_size();
        match self.nodes.entry(name) {
            Entry::Vacant(slot) => {
                self.boxes_bytes += slot.key().capacity() + added;
                slot.insert(info);
            }
            Entry::Occupied(mut slot) => {
                // The map keeps its own key (the new one is dropped).
                let replaced = slot.insert(info);
                self.boxes_bytes = self.boxes_bytes + added - replaced.heap_size();
            }
        }
    }

    /// [`Hierarchy::heap_size`] counted box by box (what the running count must equal).
    #[cfg(test)]
    pub(crate) fn walked_heap_size(&self) -> usize {
        let boxes: usize = self.nodes.iter().map(|(n, i)| box_size(n, i)).sum();
        self.table_and_root_size() + boxes
    }

    /// The box of a node held.
    pub fn info(&self, name: &str) -> Option<&RenderInfo> {
        self.nodes.get(name)
    }

    /// Every node currently held, children lists included (msprobe's `updateHierarchyData`).
    pub fn all(&self) -> Vec<(String, RenderInfo)> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.clone()];
        let mut seen = HashSet::new();
        while let Some(name) = stack.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let Some(info) = self.nodes.get(&name) else {
                continue;
            };
            stack.extend(info.children.iter().rev().cloned());
            out.push((name, info.clone()));
        }
        out
    }

    fn render_info(
        &self,
        store: &dyn NodeSource,
        node: &NodeRow,
        is_root: bool,
    ) -> Result<RenderInfo, StoreError> {
        let children = if is_root {
            store
                .children(self.graph, &node.name)?
                .iter()
                .filter(|child| {
                    self.micro_step == -1
                        || child.micro_step_id == -1
                        || child.micro_step_id == self.micro_step
                })
                .map(|child| child.name.clone())
                .collect()
        } else {
            node.sub_nodes.clone()
        };
        let label = if is_root || node.up_node == self.root {
            node.name.clone()
        } else {
            short_label(&node.name, node.node_type)
        };
        Ok(RenderInfo {
            x: 0,
            y: 0,
            width: text_width(&node.name) + 10,
            height: LEAF_HEIGHT,
            expand: false,
            is_root,
            parent: node.up_node.clone(),
            label,
            name: format!("{}{}", self.prefix, node.name),
            kind: if node.sub_nodes.is_empty() {
                LEAF_KIND
            } else {
                node.node_type
            },
            matched_node_link: node.matched_node_link.clone(),
            precision_index: node.precision_index,
            overflow_level: node.overflow_level.clone(),
            matched_distributed: node.matched_distributed.clone(),
            children,
        })
    }

    /// msprobe's `process_click_expand`: open a closed node (fetching its children), close an
    /// open one; the root never closes.
    fn click_expand(&mut self, store: &dyn NodeSource, name: &str) -> Result<(), StoreError> {
        let Some(info) = self.nodes.get(name) else {
            return Ok(());
        };
        if info.children.is_empty() {
            return Ok(());
        }
        if info.expand {
            if !info.is_root {
                if let Some(info) = self.nodes.get_mut(name) {
                    info.expand = false;
                }
            }
            return Ok(());
        }
        for child in store.children(self.graph, name)?.iter() {
            if !self.nodes.contains_key(&child.name) {
                let info = self.render_info(store, child, false)?;
                self.insert_box(child.name.clone(), info);
            }
        }
        if let Some(info) = self.nodes.get_mut(name) {
            info.expand = true;
        }
        Ok(())
    }

    /// msprobe's `process_select_expand`: expand the closed or missing ancestors of `name`,
    /// nearest first, up to the first one that is open (or the root).
    fn reveal(&mut self, store: &dyn NodeSource, name: &str) -> Result<(), StoreError> {
        let chain = store.ancestry(self.graph, name)?;
        let by_name: HashMap<&str, &NodeRow> = chain.iter().map(|n| (n.name.as_str(), n)).collect();
        let Some(target) = by_name.get(name) else {
            return Ok(());
        };
        let mut parent = target.up_node.clone();
        while !parent.is_empty() {
            let open = self.nodes.get(&parent).is_some_and(|info| info.expand);
            if open {
                break;
            }
            if !self.nodes.contains_key(&parent) {
                let Some(row) = by_name.get(parent.as_str()) else {
                    break;
                };
                let info = self.render_info(store, row, parent == self.root)?;
                self.insert_box(parent.clone(), info);
            }
            self.click_expand(store, &parent)?;
            if parent == self.root {
                break;
            }
            parent = by_name
                .get(parent.as_str())
                .map(|row| row.up_node.clone())
                .unwrap_or_default();
        }
        Ok(())
    }

    /// Sizes every open box from the leaves up, then places them from the root down. Both walks
    /// are iterative (a hierarchy may be thousands of levels deep); a node met again below itself
    /// is an error naming it, and a node listed under two parents is laid out once.
    ///
    /// Boxes are addressed by their position in `nodes` here: each box's children held are looked
    /// up by name once, and both walks and every sizing and placing step then go by position
    /// (names were hashed and compared about ten times a box before, the most of a module
    /// expansion's time in the sidecar).
    fn relayout(&mut self, store: &dyn NodeSource) -> Result<(), StoreError> {
        let Some(root) = self.nodes.get_index_of(self.root.as_str()) else {
            return Ok(());
        };
        let refused = |why: Refused| {
            let name_of = |at: usize| {
                self.nodes
                    .get_index(at)
                    .map_or("?", |(name, _)| name.as_str())
            };
            StoreError::Data {
                path: store.path().to_owned(),
                what: "hierarchy".into(),
                reason: match why {
                    Refused::Cycle(at) => format!(
                        "{} is its own ancestor (its sub_nodes lead back to it)",
                        name_of(at)
                    ),
                    Refused::TooDeep(at) => too_deep(name_of(at)),
                },
            }
        };
        let mut kids = HeldChildren::new(self.nodes.len());
        // msprobe's `resize_hierarchy` descends into open boxes that are not leaves; its
        // `layout_hierarchy` into every open box.
        let sized = self.walk(root, &mut kids, |info| {
            info.expand && info.kind != LEAF_KIND
        });
        let placed = self.walk(root, &mut kids, |info| info.expand);
        let (sized, placed) = match (sized, placed) {
            (Ok(sized), Ok(placed)) => (sized, placed),
            (Err(why), _) | (_, Err(why)) => return Err(refused(why)),
        };
        for &at in sized.iter().rev() {
            self.resize(at, kids.of(at));
        }
        if let Some((_, info)) = self.nodes.get_index_mut(root) {
            info.x = 0;
            info.y = 0;
        }
        for &at in &placed {
            self.position(at, kids.of(at));
        }
        Ok(())
    }

    /// The boxes held under `root` in depth-first order (parents before children), descending
    /// into those for which `open` holds; refused if a box is reached again below itself, or
    /// lies more than [`MAX_HIERARCHY_DEPTH`] levels below `root`.
    /// Each box's children held are resolved into `kids` on first need.
    fn walk(
        &self,
        root: usize,
        kids: &mut HeldChildren,
        open: impl Fn(&RenderInfo) -> bool,
    ) -> Result<Vec<usize>, Refused> {
        let count = self.nodes.len();
        let mut order = Vec::new();
        let mut seen = vec![false; count];
        let mut on_path = vec![false; count];
        // The current path from the root: each box with the position of its next child.
        let mut path: Vec<(usize, usize)> = Vec::new();
        let mut next = Some(root);
        loop {
            if let Some(at) = next.take() {
                if on_path[at] {
                    return Err(Refused::Cycle(at));
                }
                if path.len() > MAX_HIERARCHY_DEPTH {
                    return Err(Refused::TooDeep(at));
                }
                if !seen[at] {
                    seen[at] = true;
                    order.push(at);
                    if self.nodes.get_index(at).is_some_and(|(_, info)| open(info)) {
                        kids.resolve(at, &self.nodes);
                        on_path[at] = true;
                        path.push((at, 0));
                    }
                }
            }
            let Some((at, child)) = path.last_mut() else {
                break;
            };
            match kids.of(*at).get(*child) {
                Some(&held) => {
                    *child += 1;
                    next = Some(held);
                }
                None => {
                    on_path[*at] = false;
                    path.pop();
                }
            }
        }
        Ok(order)
    }

    /// The kind, width and height of each child held, in order: what one layout step of their
    /// parent reads.
    fn held(&self, children: &[usize]) -> Vec<Held> {
        children
            .iter()
            .filter_map(|&at| {
                let (_, info) = self.nodes.get_index(at)?;
                Some(Held {
                    at,
                    kind: info.kind,
                    width: info.width,
                    height: info.height,
                })
            })
            .collect()
    }

    /// msprobe's `resize_hierarchy` for one box, its children (`children`, held) already sized.
    fn resize(&mut self, at: usize, children: &[usize]) {
        let Some((_, info)) = self.nodes.get_index(at) else {
            return;
        };
        let (kind, expand, label_width) = (info.kind, info.expand, text_width(&info.label) + 10);
        if kind == LEAF_KIND || !expand {
            let width = if kind == LEAF_KIND {
                LEAF_WIDTH
            } else {
                label_width
            };
            if let Some((_, info)) = self.nodes.get_index_mut(at) {
                info.width = width;
                info.height = LEAF_HEIGHT;
            }
            return;
        }
        let children = self.held(children);
        let mut total_height = LEAF_HEIGHT;
        let mut max_child_width = 0;
        for group in groups(&children) {
            if is_leaf_group(group) {
                let rows = group.len().div_ceil(MAX_PER_ROW) as i64;
                if rows > 1 {
                    let full_row = MAX_PER_ROW as i64 * LEAF_WIDTH
                        + (MAX_PER_ROW as i64 - 1) * HORIZONTAL_SPACING;
                    max_child_width = max_child_width.max(full_row);
                    total_height += (LEAF_HEIGHT + VERTICAL_SPACING) * rows;
                } else {
                    let row: i64 = group.iter().map(|c| c.width).sum::<i64>()
                        + HORIZONTAL_SPACING * (group.len() as i64 - 1);
                    max_child_width = max_child_width.max(row);
                    total_height += LEAF_HEIGHT + VERTICAL_SPACING;
                }
            } else {
                let widest = group.iter().map(|c| c.width).max().unwrap_or(0);
                max_child_width = max_child_width.max(widest);
                total_height += group.iter().map(|c| c.height).sum::<i64>()
                    + VERTICAL_SPACING * group.len() as i64;
            }
        }
        if let Some((_, info)) = self.nodes.get_index_mut(at) {
            info.width = (max_child_width + 10).max(label_width);
            info.height = total_height + 10;
        }
    }

    /// msprobe's `layout_hierarchy` for one box: place the children (`children`, held) of an
    /// expanded box, itself already placed.
    fn position(&mut self, at: usize, children: &[usize]) {
        let Some((_, info)) = self.nodes.get_index(at) else {
            return;
        };
        if !info.expand {
            return;
        }
        let (x, y, width) = (info.x, info.y, info.width);
        let children = self.held(children);
        let mut cur_y = y + LEAF_HEIGHT + VERTICAL_SPACING;
        for group in groups(&children) {
            if is_leaf_group(group) {
                for row in group.chunks(MAX_PER_ROW) {
                    let row_width = row.iter().map(|c| c.width).sum::<i64>()
                        + HORIZONTAL_SPACING * (row.len() as i64 - 1);
                    let mut cur_x = x + (width - row_width).div_euclid(2);
                    for child in row {
                        if let Some((_, info)) = self.nodes.get_index_mut(child.at) {
                            info.x = cur_x;
                            info.y = cur_y;
                        }
                        cur_x += child.width + HORIZONTAL_SPACING;
                    }
                    cur_y += LEAF_HEIGHT + VERTICAL_SPACING;
                }
            } else {
                for child in group {
                    let Some((_, info)) = self.nodes.get_index_mut(child.at) else {
                        continue;
                    };
                    info.x = x + (width - info.width).div_euclid(2);
                    info.y = cur_y;
                    cur_y += info.height + VERTICAL_SPACING;
                }
            }
        }
    }
}

/// The children held of the boxes a layout visits, by position in the hierarchy's `nodes`:
/// each box's list resolved from its names once per layout (a collapsed subtree's nodes are
/// forgotten, so a child named may not be held).
struct HeldChildren {
    /// Where each box's run starts in `list` and how long it is; `None`: not resolved yet.
    runs: Vec<Option<(usize, usize)>>,
    list: Vec<usize>,
}

impl HeldChildren {
    fn new(boxes: usize) -> HeldChildren {
        HeldChildren {
            runs: vec![None; boxes],
            list: Vec::new(),
        }
    }

    /// Resolves the children held of the box at `at`, once.
    fn resolve(&mut self, at: usize, nodes: &BoxMap) {
        if self.runs.get(at).is_some_and(Option::is_some) {
            return;
        }
        let Some((_, info)) = nodes.get_index(at) else {
            return;
        };
        let start = self.list.len();
        self.list.extend(
            info.children
                .iter()
                .filter_map(|c| nodes.get_index_of(c.as_str())),
        );
        if let Some(run) = self.runs.get_mut(at) {
            *run = Some((start, self.list.len() - start));
        }
    }

    /// The children held of the box at `at` (none if not resolved).
    fn of(&self, at: usize) -> &[usize] {
        match self.runs.get(at) {
            Some(Some((start, len))) => self.list.get(*start..start + len).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// A child held, as its parent's layout step reads it ([`Hierarchy::held`]).
struct Held {
    /// Its position in the hierarchy's `nodes`.
    at: usize,
    kind: i32,
    width: i64,
    height: i64,
}

/// Runs of consecutive children of the same render kind.
fn groups(children: &[Held]) -> impl Iterator<Item = &[Held]> {
    children.chunk_by(|a, b| a.kind == b.kind)
}

fn is_leaf_group(group: &[Held]) -> bool {
    group.first().is_some_and(|c| c.kind == LEAF_KIND)
}

/// msprobe's text width: six units per character (Python `len`, so per code point).
fn text_width(text: &str) -> i64 {
    text.chars().count() as i64 * CHAR_WIDTH
}

/// msprobe's `extract_label_name`: the tail of a dotted name that identifies a node within its
/// parent (module names keep four or five parts, others two or three).
pub fn short_label(name: &str, node_type: i32) -> String {
    let parts: Vec<&str> = name.split('.').collect();
    let n = parts.len();
    let is_digit = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let tail = |k: usize| parts[n - k..].join(".");
    if node_type == 0 {
        if n < 4 {
            name.to_owned()
        } else if !is_digit(parts[n - 4]) {
            tail(4)
        } else if n > 4 {
            tail(5)
        } else {
            name.to_owned()
        }
    } else if n < 2 {
        name.to_owned()
    } else if !is_digit(parts[n - 2]) {
        tail(2)
    } else if n > 2 {
        tail(3)
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::short_label;

    #[test]
    fn module_labels_keep_four_or_five_parts() {
        assert_eq!(
            short_label("Module.layers.0.block.attn.Attention.forward.0", 0),
            "attn.Attention.forward.0"
        );
        assert_eq!(
            short_label("Module.layers.0.Block.forward.0", 0),
            "layers.0.Block.forward.0"
        );
        assert_eq!(short_label("Module.fc1.forward", 0), "Module.fc1.forward");
    }

    #[test]
    fn api_labels_keep_two_or_three_parts() {
        assert_eq!(
            short_label("Functional.linear.3.forward", 1),
            "linear.3.forward"
        );
        assert_eq!(short_label("Tensor.add.forward", 1), "add.forward");
        assert_eq!(short_label("single", 1), "single");
    }
}

#[cfg(test)]
mod size_tests {
    use graph_ascend_testkit::synthetic_visdb::{self, Shape};
    use graph_ascend_visdb::store::{GraphKey, Side};
    use graph_ascend_visdb::Store;

    use super::Hierarchy;

    /// The running count of the boxes' size equals a walk over them after boxes come (expand,
    /// reveal), go (collapse), change their lists (a match patched in) and are copied.
    #[test]
    fn the_running_size_equals_a_walk_over_the_boxes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = synthetic_visdb::write(
            &dir.path().join("s.vis.db"),
            Shape::with_nodes(3000, 8, true),
        )
        .expect("synthetic file");
        let store = Store::open(&path).expect("open");
        let graph = GraphKey {
            side: Side::Npu,
            step: 0,
            rank: 0,
        };
        let mut h = Hierarchy::new(&store, graph, -1, "N___")
            .expect("layout")
            .expect("a root");
        assert_eq!(h.heap_size(), h.walked_heap_size());
        let names = store.node_names(graph, -1).expect("names");
        let modules: Vec<&String> = names.iter().filter(|n| n.starts_with("Module.")).collect();
        assert!(modules.len() > 4, "{modules:?}");
        let deep = names.last().expect("a node").clone();
        for name in [modules[1], modules[2], &deep, modules[1], modules[3]] {
            h.toggle_or_reveal(&store, name).expect("toggle");
            h.visible_names();
            assert_eq!(h.heap_size(), h.walked_heap_size(), "after {name}");
        }
        h.patch_match(
            &deep,
            vec!["a much longer partner name than before".into()],
            None,
        );
        assert_eq!(h.heap_size(), h.walked_heap_size());
        let copy = h.clone();
        assert_eq!(copy.heap_size(), copy.walked_heap_size());
    }
}

//! The model graph of one rank, built as msprobe's `GraphBuilder` builds it.
//!
//! Nodes live in an arena (`Vec<Node>`, children as indexes) so that a graph of a million nodes
//! is a few flat allocations. The rules that decide the shape are msprobe's and are documented in
//! `docs/msprobe-converter.md` §3: construct.json order decides child order, a
//! node only ever takes its first parent, backward nodes with a missing or wrong parent are
//! repaired from their forward twin, runs of root-level APIs are wrapped in
//! `Apis_Between_Modules.N`, and parameter gradients hang under their module's last backward call.

use std::borrow::Cow;
use std::sync::Arc;

use rayon::prelude::*;

use crate::children::{ChildLists, Children};
use crate::entries::{DumpSource, EntrySpan, ItemsOf, NodeItems};
use crate::ids::NodeIds;
use crate::names::NameIndex;
use graph_ascend_dump::fastjson::EntryBatch;
use graph_ascend_dump::{
    parse_op, parse_op_packed, Construct, DumpFile, EntryIndex, FastMap, PackedItem, PackedOp,
    StackMap, StackSink,
};

/// msprobe's `NodeOp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOp {
    Module = 0,
    FunctionApi = 1,
    ApiCollection = 9,
}

impl NodeOp {
    /// `NodeOp.get_node_op`: module prefixes first, then API prefixes (dots match any char).
    pub fn classify(id: &str) -> NodeOp {
        const MODULE: [&str; 5] = ["Module.", "Cell.", "optimizer", "clip_grad", "DefaultModel"];
        const API: [&str; 12] = [
            "Tensor.",
            "Torch.",
            "Functional.",
            "NPU.",
            "VF.",
            "Distributed.",
            "Aten.",
            "Mint.",
            "Primitive.",
            "Jit.",
            "MintFunctional.",
            "MindSpeed.",
        ];
        if MODULE.iter().any(|p| wildcard_prefix(id, p)) {
            NodeOp::Module
        } else if API.iter().any(|p| wildcard_prefix(id, p)) {
            NodeOp::FunctionApi
        } else {
            NodeOp::Module
        }
    }
}

/// `re.match(pattern, id)` for a literal pattern whose dots are regex wildcards.
fn wildcard_prefix(id: &str, pattern: &str) -> bool {
    let mut chars = id.chars();
    pattern.chars().all(|p| match chars.next() {
        Some(c) => p == '.' || p == c,
        None => false,
    })
}

/// Raw JSON per parallel parsing batch of dump.json (memory: a few batches plus their parsed
/// ops).
const PARSE_BATCH_BYTES: usize = 1 << 20;

/// Batches the scanner may cut ahead of the parser.
const BATCHES_AHEAD: usize = 2;

/// The entries of one dump.json, already flattened into items (see [`DumpOps::read`]).
#[derive(Debug, Default)]
pub struct DumpOps {
    /// `op name → items` (packed); the graph takes each op's items when it creates the node.
    pub ops: FastMap<String, PackedOp>,
    /// `op name → where its entry lies in dump.json`, for the ops whose items are read again
    /// when needed (see [`crate::entries`]) instead of held in `ops`.
    pub spans: FastMap<String, EntrySpan>,
    /// Op names in file order.
    pub order: Vec<String>,
    /// Overflow level of each anomalous op (filled only when asked for).
    pub overflow: FastMap<String, &'static str>,
    /// Whether any tensor carries an `md5` (msprobe's md5 summary mode).
    pub md5: bool,
}

impl DumpOps {
    /// Streams `dump.json`: each entry is flattened (and graded for overflow when
    /// `overflow_check`) as soon as it is parsed, so no parsed tree of the whole file is ever
    /// held. The fast reader is tried first; a file it does not accept is read again by the
    /// `serde_json` reader, which reports the problem. `on_bytes` is told how many more bytes
    /// of the file were read, as batches are parsed (the whole file in the end); when it answers
    /// `false` the reading stops with [`ConvertError::Cancelled`] (a conversion is cancelled
    /// within a batch, not after the whole file).
    pub fn read(
        path: &std::path::Path,
        confine: &graph_ascend_dump::Confine,
        overflow_check: bool,
        on_bytes: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<(DumpFile, DumpOps), crate::error::ConvertError> {
        DumpOps::read_with(
            path,
            confine,
            overflow_check,
            false,
            &mut |_, _| false,
            on_bytes,
        )
    }

    /// [`DumpOps::read`]; with `spans`, the entries the fast reader accepts are kept as their
    /// places in the file (`spans`), not as items (`ops`), except those that `place` takes
    /// (it answers `true`: a skeleton's node took the span, see [`Skeleton::place`]; their
    /// names are not kept at all).
    pub fn read_with(
        path: &std::path::Path,
        confine: &graph_ascend_dump::Confine,
        overflow_check: bool,
        spans: bool,
        place: &mut dyn FnMut(&str, EntrySpan) -> bool,
        on_bytes: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<(DumpFile, DumpOps), crate::error::ConvertError> {
        let mut ops = DumpOps::default();
        let mut reported: u64 = 0;
        let mut report_to = |offset: u64| {
            let delta = offset.saturating_sub(reported);
            reported = reported.max(offset);
            on_bytes(delta)
        };
        let mut stopped = false;
        // A scanner thread cuts the file into batches of entries (a sequential walk over the
        // JSON) while this one parses and packs the previous batch on every core, then takes
        // its entries in file order.
        let (tx, rx) = std::sync::mpsc::sync_channel::<EntryBatch>(BATCHES_AHEAD);
        let (scanned, parsed) = std::thread::scope(|scope| {
            let scanner = scope.spawn(move || {
                DumpFile::read_fast_batches(path, confine, PARSE_BATCH_BYTES, &mut |batch| {
                    tx.send(batch.take(PARSE_BATCH_BYTES + PARSE_BATCH_BYTES / 4))
                        .map_err(|_| graph_ascend_dump::fastjson::FastError {
                            offset: 0,
                            message: "the parser stopped",
                        })
                })
            });
            let mut parsed = Ok(());
            for batch in rx.iter() {
                if let Err(e) = ops.add_batch(&batch, overflow_check, spans, place) {
                    // Dropping the receiver stops the scanner at its next batch.
                    parsed = Err(e);
                    break;
                }
                if !report_to(batch.end_offset() as u64) {
                    stopped = true;
                    break;
                }
            }
            drop(rx);
            let scanned = scanner.join().unwrap_or(Ok(None));
            (scanned, parsed)
        });
        if stopped {
            return Err(crate::error::ConvertError::Cancelled);
        }
        let fast = match (scanned?, parsed) {
            (Some(header), Ok(())) => Some(header),
            // The fast reader refused the file, or the parser an entry: the full reader decides.
            _ => None,
        };
        let file_size = std::fs::metadata(path).map_or(0, |m| m.len());
        if let Some(header) = fast {
            return if report_to(file_size) {
                Ok((header, ops))
            } else {
                Err(crate::error::ConvertError::Cancelled)
            };
        }
        let mut ops = DumpOps::default();
        let header = DumpFile::read_streaming(path, confine, &mut |name, entry| {
            if !ops.md5 && graph_ascend_dump::dumpfile::entry_has_md5(&entry) {
                ops.md5 = true;
            }
            if overflow_check {
                if let Some(level) = crate::overflow::level_of(&name, &entry) {
                    ops.overflow.insert(name.clone(), level);
                }
            }
            let data = PackedOp::pack(parse_op(&name, &entry));
            ops.order.push(name.clone());
            ops.ops.insert(name, data);
        })?;
        if !report_to(file_size) {
            return Err(crate::error::ConvertError::Cancelled);
        }
        Ok((header, ops))
    }

    /// Parses and packs a batch of entries in parallel, then adds them in file order.
    fn add_batch(
        &mut self,
        batch: &EntryBatch,
        overflow_check: bool,
        spans: bool,
        place: &mut dyn FnMut(&str, EntrySpan) -> bool,
    ) -> Result<(), graph_ascend_dump::fastjson::FastError> {
        let parsed: Vec<_> = (0..batch.len())
            .into_par_iter()
            .map(|i| {
                let entry = batch.parse(i)?;
                let name = batch.name(i);
                let md5 = graph_ascend_dump::dumpfile::jval_has_md5(&entry);
                let level = if overflow_check {
                    crate::overflow::level_of(name, &entry.to_value())
                } else {
                    None
                };
                let data = parse_op_packed(name, &entry);
                let has_items = !(data.input.is_empty() && data.output.is_empty());
                let span = batch
                    .span(i)
                    .filter(|_| spans)
                    .and_then(|(offset, len)| EntrySpan::new(offset, len, has_items));
                let data = match span {
                    Some(span) => Err(span),
                    None => Ok(data),
                };
                Ok((md5, level, data))
            })
            .collect::<Result<_, graph_ascend_dump::fastjson::FastError>>()?;
        for (i, (md5, level, data)) in parsed.into_iter().enumerate() {
            let name = batch.name(i);
            self.md5 |= md5;
            if let Some(level) = level {
                self.overflow.insert(name.to_string(), level);
            }
            // Only parameter-gradient keys are looked up in file order (`add_parameters_grad`);
            // a reading that keeps spans keeps no other name twice.
            if !spans || parameters_grad_prefix(name).is_some() {
                self.order.push(name.to_string());
            }
            match data {
                Ok(items) => {
                    self.ops.insert(name.to_string(), items);
                }
                Err(span) => {
                    if !place(name, span) {
                        self.spans.insert(name.to_string(), span);
                    }
                }
            }
        }
        Ok(())
    }
}

/// One node. What most nodes of a plain conversion lack (held items, a matched link that is not
/// the node's own path, a merge's notes) is boxed apart ([`Rare`]); links to other nodes are
/// `u32` numbers, the overflow level a one-byte code, the optional numbers flagged by bits; its
/// id and its children are held by its graph ([`Graph::id`], [`Graph::children`]): a node is
/// 56 bytes (256 at first, then 168, then 96 with its id and children in it), and a graph of a
/// million nodes keeps a few flat allocations (issue 16, item 1).
#[derive(Debug, Clone)]
pub struct Node {
    pub op: NodeOp,
    /// The `matched_node_link` is the node's own path (its ancestors' ids, then its own), as
    /// the default matching makes it on both sides: made when the row is written rather than
    /// held ([`Node::matched_link`] is then empty).
    pub matched_link_is_path: bool,
    /// [`Node::overflow_level`] as its place in [`OVERFLOW_LEVELS`] plus one (0: none).
    overflow: u8,
    /// [`Node::parent`], [`NO_NODE`] for none.
    parent: u32,
    /// [`Node::matched`], [`NO_NODE`] for none.
    matched: u32,
    /// Where the node's entry lies in its graph's dump.json, when its items are read from there
    /// when needed (it holds none then; see [`crate::entries`]).
    pub entry: Option<EntrySpan>,
    pub stack: Arc<Vec<String>>,
    /// [`Node::micro_step_id`], when [`HAS_MICRO_STEP`] is in `has`.
    micro_step_id: i64,
    /// [`Node::precision_index`], when [`HAS_PRECISION`] is in `has`.
    precision_index: f64,
    /// Which of the optional numbers above are set (an `Option` of each would take 16 bytes).
    has: u8,
    rare: Option<Box<Rare>>,
}

const HAS_MICRO_STEP: u8 = 1;
const HAS_PRECISION: u8 = 2;

/// A link to no node. A graph holds fewer than `u32::MAX` nodes: each takes over 100 bytes, so
/// that many would need 400 GB.
const NO_NODE: u32 = u32::MAX;

/// A node number as held in a link.
fn link(n: Option<usize>) -> u32 {
    n.and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n != NO_NODE)
        .unwrap_or(NO_NODE)
}

fn unlink(n: u32) -> Option<usize> {
    (n != NO_NODE).then_some(n as usize)
}

/// The overflow levels a node may carry ([`crate::overflow::level_of`]'s answers).
const OVERFLOW_LEVELS: [&str; 3] = [
    crate::overflow::LEVEL_MEDIUM,
    crate::overflow::LEVEL_HIGH,
    crate::overflow::LEVEL_CRITICAL,
];

/// The empty stack, one for every node without frames (not an allocation a node).
fn empty_stack() -> Arc<Vec<String>> {
    static EMPTY: std::sync::LazyLock<Arc<Vec<String>>> =
        std::sync::LazyLock::new(|| Arc::new(Vec::new()));
    Arc::clone(&EMPTY)
}

/// The parts of a node that most nodes do not have (all empty: no box at all).
#[derive(Debug, Clone, Default)]
struct Rare {
    /// Input items (inputs, keyword inputs, parameters), packed: see
    /// [`PackedItem::unpack`] / [`PackedItem::fields`].
    input: Vec<(String, PackedItem)>,
    output: Vec<(String, PackedItem)>,
    /// Ids from root to the matched node on the other side (`matched_node_link`).
    matched_link: Vec<String>,
    /// Notes of a parallel merge (`parallel_merge_info`).
    parallel_merge_info: Vec<String>,
}

impl Rare {
    fn is_empty(&self) -> bool {
        self.input.is_empty()
            && self.output.is_empty()
            && self.matched_link.is_empty()
            && self.parallel_merge_info.is_empty()
    }
}

impl Node {
    /// The node has dump data: items held or an entry with items in dump.json.
    pub fn has_items(&self) -> bool {
        !(self.input().is_empty() && self.output().is_empty())
            || self.entry.is_some_and(|e| e.has_items())
    }

    /// The node's parent.
    pub fn parent(&self) -> Option<usize> {
        unlink(self.parent)
    }

    pub fn set_parent(&mut self, parent: Option<usize>) {
        self.parent = link(parent);
    }

    /// The matched node in the other graph.
    pub fn matched(&self) -> Option<usize> {
        unlink(self.matched)
    }

    pub fn set_matched(&mut self, matched: Option<usize>) {
        self.matched = link(matched);
    }

    /// The node's micro step.
    pub fn micro_step_id(&self) -> Option<i64> {
        (self.has & HAS_MICRO_STEP != 0).then_some(self.micro_step_id)
    }

    pub fn set_micro_step_id(&mut self, step: Option<i64>) {
        self.micro_step_id = step.unwrap_or(0);
        self.has = (self.has & !HAS_MICRO_STEP) | if step.is_some() { HAS_MICRO_STEP } else { 0 };
    }

    /// The node's `precision_index` (compared target nodes).
    pub fn precision_index(&self) -> Option<f64> {
        (self.has & HAS_PRECISION != 0).then_some(self.precision_index)
    }

    pub fn set_precision_index(&mut self, index: Option<f64>) {
        self.precision_index = index.unwrap_or(0.0);
        self.has = (self.has & !HAS_PRECISION) | if index.is_some() { HAS_PRECISION } else { 0 };
    }

    /// msprobe's overflow level of the node's entry (`-oc`), if any.
    pub fn overflow_level(&self) -> Option<&'static str> {
        OVERFLOW_LEVELS
            .get(usize::from(self.overflow).checked_sub(1)?)
            .copied()
    }

    pub fn set_overflow_level(&mut self, level: Option<&'static str>) {
        self.overflow = level
            .and_then(|l| OVERFLOW_LEVELS.iter().position(|&k| k == l))
            .map_or(0, |i| i as u8 + 1);
    }

    /// The input items the node holds (inputs, keyword inputs, parameters), packed.
    pub fn input(&self) -> &[(String, PackedItem)] {
        self.rare.as_deref().map_or(&[], |r| &r.input)
    }

    /// The output items the node holds, packed.
    pub fn output(&self) -> &[(String, PackedItem)] {
        self.rare.as_deref().map_or(&[], |r| &r.output)
    }

    /// Ids from root to the matched node on the other side, when held (see
    /// [`Node::matched_link_is_path`]).
    pub fn matched_link(&self) -> &[String] {
        self.rare.as_deref().map_or(&[], |r| &r.matched_link)
    }

    /// Notes of a parallel merge (`parallel_merge_info`), empty otherwise.
    pub fn parallel_merge_info(&self) -> &[String] {
        self.rare.as_deref().map_or(&[], |r| &r.parallel_merge_info)
    }

    /// Holds `input` and `output` as the node's items.
    pub fn set_items(
        &mut self,
        input: Vec<(String, PackedItem)>,
        output: Vec<(String, PackedItem)>,
    ) {
        self.change(|r| {
            r.input = input;
            r.output = output;
        });
    }

    /// The items the node holds, taken from it: `(input, output)`.
    pub fn take_items(&mut self) -> NodeItems {
        let mut items = NodeItems::default();
        self.change(|r| {
            items = (std::mem::take(&mut r.input), std::mem::take(&mut r.output));
        });
        items
    }

    pub fn set_matched_link(&mut self, link: Vec<String>) {
        self.change(|r| r.matched_link = link);
    }

    pub fn set_parallel_merge_info(&mut self, info: Vec<String>) {
        self.change(|r| r.parallel_merge_info = info);
    }

    /// Changes the rare parts, boxing them only while one is not empty.
    fn change(&mut self, f: impl FnOnce(&mut Rare)) {
        let mut rare = self.rare.take().unwrap_or_default();
        f(&mut rare);
        if !rare.is_empty() {
            self.rare = Some(rare);
        }
    }

    /// A node of kind `op`, alone.
    pub(crate) fn new(op: NodeOp) -> Node {
        Node {
            op,
            matched_link_is_path: false,
            overflow: 0,
            parent: NO_NODE,
            matched: NO_NODE,
            entry: None,
            stack: empty_stack(),
            micro_step_id: 0,
            precision_index: 0.0,
            has: 0,
            rare: None,
        }
    }
}

/// A graph made from construct.json and stack.json, waiting for dump.json's items.
#[derive(Debug)]
pub struct Skeleton {
    graph: Graph,
    /// The nodes made for construct.json ids (every node the hierarchy made but the root,
    /// before `Apis_Between_Modules`), in the order they were made: each takes its stack and
    /// its dump entry's items. A range, not a list (8 bytes a node; issue 16, item 1).
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
    /// are placed on their nodes as dump.json is read, no list of them is kept (issue 16,
    /// item 1); a name given twice takes the last.
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

    /// Gives each node its items and overflow level, and adds the parameter-gradient nodes.
    pub fn attach(self, dump: &mut DumpOps, stacks: &StackMap) -> Graph {
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

    /// The graph of one dump folder before its stacks and items: hierarchy, micro steps and
    /// `Apis_Between_Modules`, from construct.json alone. stack.json's frames are then given
    /// node by node as they are read ([`Skeleton::read_stacks`]), no map of stack.json ever
    /// held (issue 16, item 1), and [`Skeleton::attach`] completes it once dump.json is read.
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
        let dumped = 1..g.nodes.len();
        g.collect_apis_between_modules();
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

/// `true` for `…parameters_grad[.N]` node ids.
pub fn is_parameters_grad_id(id: &str) -> bool {
    parameters_grad_prefix(id).is_some()
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

/// The forward twin of a backward id (module or API style).
fn forward_twin(sub: &str) -> Option<String> {
    if let Some((prefix, num)) = module_backward(sub) {
        return Some(format!("{prefix}.forward.{num}"));
    }
    sub.strip_suffix(".backward")
        .map(|p| format!("{p}.forward"))
}

/// The backward twin of a forward parent id.
fn backward_of_parent(parent: &str) -> String {
    match module_forward(parent) {
        Some((prefix, num)) => format!("{prefix}.backward.{num}"),
        None => match parent.strip_suffix(".forward") {
            Some(p) => format!("{p}.backward"),
            None => parent.to_string(),
        },
    }
}

/// construct.json's `node → parent`, looked up by node (5 bytes an entry: see
/// [`EntryIndex`]).
type Parents<'c> = EntryIndex<'c>;

/// msprobe's `_handle_backward_upnode_missing`.
fn backward_upnode_missing(parents: &Parents, sub: &str) -> Option<String> {
    let forward = forward_twin(sub)?;
    let fparent = parents.parent(forward.as_str())??;
    let candidate = backward_of_parent(fparent);
    parents
        .find(candidate.as_str())
        .is_some()
        .then_some(candidate)
}

/// msprobe's `_handle_backward_inplace`.
fn backward_inplace(parents: &Parents, sub: &str, up: &str) -> Option<String> {
    let sub_segs: Vec<&str> = sub.split('.').collect();
    let up_segs: Vec<&str> = up.split('.').collect();
    let is_backward = sub_segs.len() >= 2 && sub_segs[sub_segs.len() - 2] == "backward";
    if !is_backward || sub_segs.len() < 5 || up_segs.len() < 4 {
        return Some(up.to_string());
    }
    if sub_segs[..sub_segs.len() - 4] == up_segs[..up_segs.len() - 3] {
        return Some(up.to_string());
    }
    let Some(forward) = forward_twin(sub) else {
        return Some(up.to_string());
    };
    match parents.parent(forward.as_str()) {
        Some(Some(fparent)) => Some(backward_of_parent(fparent)),
        Some(None) => None,
        None => Some(up.to_string()),
    }
}

/// `<prefix>` of ids matching `<prefix>.parameters_grad` or `<prefix>.parameters_grad.N`.
fn parameters_grad_prefix(key: &str) -> Option<&str> {
    if let Some(p) = key.strip_suffix(".parameters_grad") {
        return Some(p);
    }
    let (head, num) = key.rsplit_once('.')?;
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    head.strip_suffix(".parameters_grad")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump.json of `n` entries (several parsing batches for a few thousand).
    fn big_dump(n: usize, bad_entry: Option<usize>) -> String {
        let mut text = String::from("{\"task\": \"statistics\", \"level\": \"mix\", \"data\": {");
        for i in 0..n {
            if i > 0 {
                text.push_str(", ");
            }
            if bad_entry == Some(i) {
                text.push_str(&format!("\"Torch.bad.{i}.forward\": 5"));
                continue;
            }
            text.push_str(&format!(
                "\"Functional.linear.{i}.forward\": {{\"input_args\": [{{\"type\": \"torch.Tensor\", \"dtype\": \"torch.float32\", \"shape\": [{i}, 64], \"Max\": {}.5, \"Min\": -1.25, \"Mean\": 0.1, \"Norm\": 3.0, \"requires_grad\": true, \"data_name\": \"-1\"}}, {{\"type\": \"int\", \"value\": {i}}}], \"output\": [{{\"type\": \"torch.Tensor\", \"dtype\": \"torch.bfloat16\", \"shape\": [64], \"Max\": 1e-{}, \"Min\": null, \"Mean\": NaN, \"Norm\": Infinity, \"requires_grad\": false}}], \"padding\": \"{}\"}}",
                i % 97,
                i % 300,
                "x".repeat(200)
            ));
        }
        text.push_str("}}");
        text
    }

    /// Regression for the pipelined reader: many batches arrive in file order and equal the
    /// entry-by-entry reader's items; an entry the fast reader refuses, far into the file, gets
    /// the full reader's error.
    #[test]
    fn pipelined_reading_equals_the_full_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        let text = big_dump(12_000, None);
        assert!(text.len() > 4 * PARSE_BATCH_BYTES, "{}", text.len());
        std::fs::write(&path, &text).unwrap();
        // Issue 13, item 5: bytes are reported batch by batch, growing, and add up to the file.
        let reports = std::sync::Mutex::new(Vec::new());
        let (_, fast) = DumpOps::read(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            false,
            &|n| {
                reports.lock().unwrap().push(n);
                true
            },
        )
        .unwrap();
        let reports = reports.into_inner().unwrap();
        assert!(reports.len() > 4, "{} reports", reports.len());
        assert_eq!(reports.iter().sum::<u64>(), text.len() as u64);
        let mut full = DumpOps::default();
        DumpFile::read_streaming(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            &mut |name, entry| {
                full.md5 |= graph_ascend_dump::dumpfile::entry_has_md5(&entry);
                full.order.push(name.clone());
                full.ops
                    .insert(name.clone(), PackedOp::pack(parse_op(&name, &entry)));
            },
        )
        .unwrap();
        assert_eq!(full.order.len(), 12_000);
        assert_eq!(fast.order, full.order);
        assert_eq!(fast.ops, full.ops);
        assert_eq!(fast.md5, full.md5);

        std::fs::write(&path, big_dump(12_000, Some(11_000))).unwrap();
        let err = DumpOps::read(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            false,
            &|_| true,
        )
        .expect_err("an entry that is a number");
        assert!(err.to_string().contains("dump.json"), "{err}");
    }

    /// Issue 13, item 2: a cancel stops the reading of a big dump.json within a batch.
    #[test]
    fn reading_stops_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        std::fs::write(&path, big_dump(12_000, None)).unwrap();
        let batches = std::sync::atomic::AtomicUsize::new(0);
        let err = DumpOps::read(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            false,
            &|_| batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 1,
        )
        .expect_err("stopped");
        assert!(
            matches!(err, crate::error::ConvertError::Cancelled),
            "{err}"
        );
        assert_eq!(
            batches.into_inner(),
            2,
            "stopped at the batch after the answer"
        );
    }

    /// Issue 16, item 1: every node of a graph is this record (168 bytes before links became
    /// `u32`, the overflow level a byte code, the entry's span 12 bytes, the micro step and
    /// `precision_index` numbers with a bit each for whether they are set; 96 before its id
    /// and children moved to the graph's arenas).
    #[test]
    fn a_node_is_a_compact_record() {
        assert!(
            std::mem::size_of::<Node>() <= 56,
            "{}",
            std::mem::size_of::<Node>()
        );
        assert_eq!(std::mem::size_of::<Option<EntrySpan>>(), 12);
        let mut n = Node::new(NodeOp::Module);
        assert_eq!(
            (n.parent(), n.matched(), n.overflow_level()),
            (None, None, None)
        );
        n.set_parent(Some(7));
        n.set_matched(Some(0));
        for level in OVERFLOW_LEVELS {
            n.set_overflow_level(Some(level));
            assert_eq!(n.overflow_level(), Some(level));
        }
        assert_eq!((n.parent(), n.matched()), (Some(7), Some(0)));
        assert_eq!((n.micro_step_id(), n.precision_index()), (None, None));
        n.set_micro_step_id(Some(i64::MIN));
        n.set_precision_index(Some(f64::NAN));
        assert_eq!(n.micro_step_id(), Some(i64::MIN));
        assert!(n.precision_index().is_some_and(f64::is_nan));
        n.set_micro_step_id(None);
        assert_eq!(
            (n.micro_step_id(), n.precision_index().is_some()),
            (None, true)
        );
        let span = EntrySpan::new((5 << 32) + 3, 1 << 20, true).expect("a span");
        assert_eq!(
            (span.offset(), span.len(), span.has_items()),
            ((5 << 32) + 3, 1 << 20, true)
        );
        assert!(!EntrySpan::new(9, 1, false).expect("a span").has_items());
        assert_eq!(EntrySpan::new(0, 0, true), None);
        assert_eq!(EntrySpan::new(0, 1 << 31, true), None);
    }

    #[test]
    fn classifies_like_msprobe() {
        assert_eq!(
            NodeOp::classify("Module.fc.Linear.forward.0"),
            NodeOp::Module
        );
        assert_eq!(
            NodeOp::classify("Torch.matmul.0.forward"),
            NodeOp::FunctionApi
        );
        assert_eq!(NodeOp::classify("optimizer"), NodeOp::Module);
        assert_eq!(NodeOp::classify("Something.else"), NodeOp::Module);
        assert_eq!(NodeOp::classify("TensorXadd"), NodeOp::FunctionApi);
    }

    #[test]
    fn parameters_grad_names() {
        assert_eq!(
            parameters_grad_prefix("Module.fc.Linear.parameters_grad.0"),
            Some("Module.fc.Linear")
        );
        assert_eq!(
            parameters_grad_prefix("Module.fc.Linear.parameters_grad"),
            Some("Module.fc.Linear")
        );
        assert_eq!(parameters_grad_prefix("Module.fc.Linear.forward.0"), None);
    }
}

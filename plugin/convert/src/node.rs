//! A graph's node ([`Node`]), and msprobe's kinds of node ([`NodeOp`]).

use std::sync::Arc;

use graph_ascend_dump::PackedItem;

use crate::entries::{EntrySpan, NodeItems};

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

/// One node. What most nodes of a plain conversion lack (held items, a matched link that is not
/// the node's own path, a merge's notes) is boxed apart ([`Rare`]); links to other nodes are
/// `u32` numbers, the overflow level a one-byte code, the optional numbers flagged by bits; its
/// id and its children are held by its graph ([`crate::graph::Graph::id`],
/// [`crate::graph::Graph::children`]): a node is 56 bytes (256 at first, then 168, then 96 with
/// its id and children in it), and a graph of a million nodes keeps a few flat allocations.
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
pub(crate) fn empty_stack() -> Arc<Vec<String>> {
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
    /// Which of the node's data msprobe formats a second time when it writes the row
    /// ([`Node::formatted_twice`]).
    formatted_twice: FormattedTwice,
}

/// The node's input and output data that msprobe formats twice: its items share their dicts
/// with a node written before (a VPP merge gives chunk 0's modules the last chunk's items), and
/// `format_node_data` formats them in place, so the second row gets the first one's text
/// formatted again (long decimals rounded to 6 places).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FormattedTwice {
    pub input: bool,
    pub output: bool,
}

impl Rare {
    fn is_empty(&self) -> bool {
        self.input.is_empty()
            && self.output.is_empty()
            && self.matched_link.is_empty()
            && self.parallel_merge_info.is_empty()
            && self.formatted_twice == FormattedTwice::default()
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

    /// Which of the node's data msprobe formats twice ([`FormattedTwice`]).
    pub fn formatted_twice(&self) -> FormattedTwice {
        self.rare
            .as_deref()
            .map_or(FormattedTwice::default(), |r| r.formatted_twice)
    }

    pub fn set_formatted_twice(&mut self, twice: FormattedTwice) {
        self.change(|r| r.formatted_twice = twice);
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

/// `true` for `…parameters_grad[.N]` node ids.
pub fn is_parameters_grad_id(id: &str) -> bool {
    parameters_grad_prefix(id).is_some()
}

/// `<prefix>` of ids matching `<prefix>.parameters_grad` or `<prefix>.parameters_grad.N`.
pub(crate) fn parameters_grad_prefix(key: &str) -> Option<&str> {
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

    /// Every node of a graph is this record (168 bytes before links became
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

//! What the reads return and the edits take: plain structs, one per shape of answer.

use std::borrow::Cow;

use serde_json::Value;

use crate::schema;

/// The `tb_config` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRow {
    /// `"compare"` or `"build"`.
    pub graph_type: String,
    /// `"summary"`, `"md5"` or `"all"`.
    pub task: String,
    pub tool_tip: Value,
    pub micro_steps: i64,
    pub overflow_check: bool,
    /// `{"#RRGGBB": {"value": ..., "description": ..., ...}}` in file order.
    pub node_colors: Value,
    pub ranks: Vec<i64>,
    pub steps: Vec<i64>,
}

impl ConfigRow {
    /// Whether the file holds a target/golden comparison.
    pub fn is_compare(&self) -> bool {
        self.graph_type == "compare"
    }
}

/// Which graph of a file: msprobe's `data_source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The target ("debug") run, `data_source = 'NPU'`.
    Npu,
    /// The golden ("bench") run, `data_source = 'Bench'`.
    Bench,
}

impl Side {
    /// The `data_source` column value.
    pub fn data_source(self) -> &'static str {
        match self {
            Side::Npu => schema::NPU,
            Side::Bench => schema::BENCH,
        }
    }

    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::Npu => Side::Bench,
            Side::Bench => Side::Npu,
        }
    }
}

/// Selects one graph of a file: a side, a step and a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GraphKey {
    pub side: Side,
    pub step: i64,
    pub rank: i64,
}

/// The columns of a node that navigation needs (no input/output data).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub name: String,
    pub up_node: String,
    pub sub_nodes: Vec<String>,
    pub node_type: i32,
    /// `micro_step_id` (msprobe writes 0 when a node has none).
    pub micro_step_id: i64,
    pub matched_node_link: Vec<String>,
    pub precision_index: Option<f64>,
    pub overflow_level: Option<String>,
    pub matched_distributed: Value,
}

/// Everything about one node, for the details panel.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDetailRow {
    pub node: NodeRow,
    pub input_data: Value,
    pub output_data: Value,
    pub stack_info: Vec<String>,
    pub parallel_merge_info: Vec<String>,
    pub modified: i64,
}

/// One node as [`Store::scan_data_rows`](super::Store::scan_data_rows) reads it: the navigation
/// columns and the raw JSON texts.
#[derive(Debug, Clone, PartialEq)]
pub struct DataRow {
    pub node: NodeRow,
    pub input_data: String,
    pub output_data: String,
}

/// One node as [`Store::scan_index_rows`](super::Store::scan_index_rows) reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexRow<'a> {
    pub name: &'a str,
    /// `sub_nodes` is empty (a candidate of the filters).
    pub is_leaf: bool,
    pub micro_step_id: i64,
    pub precision_index: Option<f64>,
    /// `matched_node_link` is not empty text or `[]` (the filters' notion of matched).
    pub linked: bool,
    /// The last element of `matched_node_link` (the partner, for the matched relations):
    /// borrowed from the row unless the JSON text escapes characters of it.
    pub link_last: Option<Cow<'a, str>>,
}

/// A candidate of the precision filter.
#[derive(Debug, Clone, PartialEq)]
pub struct LeafPrecision {
    pub name: String,
    pub precision_index: Option<f64>,
    pub matched: bool,
}

/// One node's new match state, as a manual match or unmatch writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchUpdate {
    pub graph: GraphKey,
    pub name: String,
    /// `json.dumps` of the new `matched_node_link` list.
    pub matched_node_link: String,
    /// The new `input_data` / `output_data` JSON text.
    pub input_data: String,
    pub output_data: String,
    pub precision_index: Option<f64>,
}

/// What `updatePrecisionError` needs of one target node.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRow {
    pub name: String,
    pub matched: bool,
    pub output_data: Value,
    pub precision_index: Option<f64>,
}

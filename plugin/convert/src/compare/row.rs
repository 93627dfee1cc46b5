//! One compared row: what the metrics and the checkers read.

use graph_ascend_dump::Item;

/// One compared row: the target item and its paired golden item, if any.
pub struct Row<'a> {
    pub npu_name: &'a str,
    pub npu: &'a Item,
    pub bench_name: Option<&'a str>,
    pub bench: Option<&'a Item>,
    pub is_output: bool,
    /// Position of the target item in its node's input or output list.
    pub index: usize,
}

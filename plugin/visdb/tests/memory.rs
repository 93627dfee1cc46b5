//! The bulk writer's memory does not grow with the rows.
//!
//! A counting global allocator measures the writer's own peak of live heap bytes while it writes
//! `N` and then `4N` generated rows (made a batch at a time, so that only the writer's memory
//! grows). Before the index entries were spilled, each row kept them until `finish`: 910 bytes a
//! row at the peak here (the entries, then their sort order); now the writer peaks at 58 MB for
//! either file (the 32 MB budget, and the room its buffers grew to).

use graph_ascend_visdb::bulk::BulkWriter;
use graph_ascend_visdb::writer::NodeRow;

#[path = "../../service/tests/common/counting.rs"]
mod counting;

/// Rows like a conversion's: every index gets a key of some tens of bytes.
fn batch(first: usize, len: usize) -> Vec<NodeRow> {
    (first..first + len)
        .map(|i| {
            let name = format!("Module.layers.{}.mlp.Linear.forward.{i}", i % 97);
            NodeRow {
                id: format!("NPU_{name}"),
                graph_id: "NPU".into(),
                node_order: i as i64,
                up_node: format!("Module.layers.{}.mlp.forward", i % 97),
                matched_node_link: format!("[\"Bench_{name}\"]"),
                input_data: "{}".into(),
                output_data: "{}".into(),
                data_source: "NPU".into(),
                node_name: name,
                ..Default::default()
            }
        })
        .collect()
}

/// Peak live heap bytes above the level before, while writing `rows` rows.
fn peak_of_writing(rows: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let before = counting::live();
    counting::reset_peak();
    let mut w = BulkWriter::create(&dir.path().join("rows.vis.db")).unwrap();
    for first in (0..rows).step_by(BATCH) {
        w.insert_nodes(&batch(first, BATCH.min(rows - first)))
            .unwrap();
    }
    w.finish().unwrap();
    counting::peak() - before
}

const BATCH: usize = 1_024;

#[test]
fn index_memory_does_not_grow_with_the_rows() {
    const N: usize = 100_000;
    let small = peak_of_writing(N);
    let large = peak_of_writing(4 * N);
    let per_row = (large as f64 - small as f64) / (3 * N) as f64;
    eprintln!(
        "{N} rows: peak {small} B; {}: {large} B; {per_row:.1} B a row",
        4 * N
    );
    assert!(
        per_row < 40.0,
        "{per_row:.1} bytes a row more: the index entries are kept?"
    );
}

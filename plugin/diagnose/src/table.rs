//! Writing our own table of what the diagnosis reads ([`crate::compact`]) into a compare file:
//! what the converter and `gather` do once msprobe's tables are written. The only write this
//! crate makes, and never to msprobe's tables.

use std::path::Path;

use graph_ascend_visdb::store::{GraphKey, Side};
use graph_ascend_visdb::Store;

use crate::compact::encode_side;
use crate::error::DiagnoseError;
use crate::load::load_rows_on;

/// Writes the table into the compare file at `path` (replacing what it held): every graph read
/// from its rows, both sides, each graph in a transaction of its own (a graph not written yet is
/// read from its rows meanwhile). Returns the number of graphs written; a file that is not a
/// compare, or a structure-only one, is left as it is (0).
pub fn write_compact_table(path: &Path) -> Result<usize, DiagnoseError> {
    let store = Store::open_for_edit(path)?;
    let config = store.config()?;
    // A structure-only compare holds no data: nothing to diagnose, so no table.
    if !config.is_compare() || config.task == crate::load::STRUCTURE_TASK {
        return Ok(0);
    }
    let graphs = store.graphs_present()?;
    for &(step, rank) in &graphs {
        let data = load_rows_on(&store, step, rank)?;
        let npu = encode_side(&data.npu, Some(&data.partners));
        let bench = encode_side(&data.bench, None);
        drop(data);
        let key = |side| GraphKey { side, step, rank };
        store.write(|s| {
            s.put_diagnosis_parts(key(Side::Npu), &npu)?;
            s.put_diagnosis_parts(key(Side::Bench), &bench)
        })?;
    }
    Ok(graphs.len())
}

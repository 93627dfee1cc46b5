//! Writing our own table of what the diagnosis reads ([`crate::compact`]) into a compare file:
//! what the converter and `gather` do once msprobe's tables are written. The only write this
//! crate makes, and never to msprobe's tables.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use graph_ascend_visdb::store::{GraphKey, GraphRow, Side};
use graph_ascend_visdb::writer::NodeRow;
use graph_ascend_visdb::Store;

use crate::compact::encode_side;
use crate::error::DiagnoseError;
use crate::load::{built, load_rows_on, SideBuilder};

/// Writes the table into the compare file at `path` (replacing what it held): every graph read
/// from its rows, both sides, in one transaction stamped with the file version its commit gives
/// (`docs/visdb.md` §5). A side with a node too big for a part is left out (read from its rows).
/// Returns the number of graphs written; a file that is not a compare, or a structure-only one,
/// is left as it is (0).
pub fn write_compact_table(path: &Path) -> Result<usize, DiagnoseError> {
    let store = Store::open_for_edit(path)?;
    let config = store.config()?;
    // A structure-only compare holds no data: nothing to diagnose, so no table.
    if !config.is_compare() || config.task == crate::load::STRUCTURE_TASK {
        return Ok(0);
    }
    let graphs = store.graphs_present()?;
    let mut sides = Vec::with_capacity(graphs.len() * 2);
    for &(step, rank) in &graphs {
        let data = load_rows_on(&store, step, rank)?;
        let key = |side| GraphKey { side, step, rank };
        let encoded = (
            encode_side(&data.npu, Some(&data.partners)),
            encode_side(&data.bench, None),
        );
        if let (Some(npu), Some(bench)) = encoded {
            sides.push((key(Side::Npu), npu));
            sides.push((key(Side::Bench), bench));
        }
    }
    store.write_diagnosis_table(sides.iter().map(|(k, parts)| (*k, &parts[..])))?;
    Ok(graphs.len())
}

/// A side whose rows are coming: its graph's (step, rank, side), its builder, and the two counts
/// the builder keeps beside it.
type ComingSide = ((i64, i64, Side), SideBuilder, i64, usize);

/// Our table made of the rows as they are written (the converter's writer gives it each row it
/// writes, in the order written), so that the file is not read back: each side parsed by the
/// load's own reader of rows ([`GraphRow::of_written`] is what reading the row back would
/// lend), each graph encoded as soon as both its sides are complete (their typed nodes then
/// freed). A graph whose rows did not come as the load reads them (out of `node_order`, split,
/// not parsed, or not as many as the file holds) is read back from the file instead, as
/// [`write_compact_table`] reads every graph.
#[derive(Default)]
pub struct TableBuilder {
    /// The side whose rows are coming.
    current: Option<ComingSide>,
    /// Complete sides waiting for the other side of their graph, with their row counts.
    waiting: HashMap<(i64, i64, Side), (SideBuilder, usize)>,
    /// Graphs encoded: both sides' parts and row counts.
    done: HashMap<(i64, i64), Encoded>,
    /// Graphs that must be read back from the file.
    read_back: HashSet<(i64, i64)>,
}

/// Both sides of a graph encoded, with the rows each side was made of.
struct Encoded {
    npu: (Vec<Vec<u8>>, usize),
    bench: (Vec<Vec<u8>>, usize),
}

impl TableBuilder {
    pub fn new() -> TableBuilder {
        TableBuilder::default()
    }

    /// The next row written.
    pub fn push(&mut self, row: &NodeRow) {
        let side = match row.data_source.as_str() {
            s if s == Side::Npu.data_source() => Side::Npu,
            s if s == Side::Bench.data_source() => Side::Bench,
            _ => return,
        };
        let key = (row.step, row.rank, side);
        if self.current.as_ref().is_some_and(|c| c.0 != key) {
            self.side_done();
        }
        if self.read_back.contains(&(key.0, key.1)) {
            return;
        }
        let current = self.current.get_or_insert_with(|| {
            (
                key,
                SideBuilder::new(Path::new(""), 0, side == Side::Npu),
                i64::MIN,
                0,
            )
        });
        let (_, builder, last_order, rows) = current;
        let pushed = row.node_order > *last_order
            && GraphRow::of_written(row)
                .ok()
                .is_some_and(|r| builder.push(&r).is_ok());
        *last_order = row.node_order;
        *rows += 1;
        if !pushed {
            self.current = None;
            self.read_back.insert((key.0, key.1));
        }
    }

    /// The current side is complete: it waits for its graph's other side, or both are encoded.
    fn side_done(&mut self) {
        let Some(((step, rank, side), builder, _, rows)) = self.current.take() else {
            return;
        };
        if self.read_back.contains(&(step, rank))
            || self.done.contains_key(&(step, rank))
            || self.waiting.contains_key(&(step, rank, side))
        {
            // A side given twice (its rows split): read back.
            self.waiting.remove(&(step, rank, side.other()));
            self.done.remove(&(step, rank));
            self.read_back.insert((step, rank));
            return;
        }
        let Some((other, other_rows)) = self.waiting.remove(&(step, rank, side.other())) else {
            self.waiting.insert((step, rank, side), (builder, rows));
            return;
        };
        let ((npu, npu_rows), (bench, bench_rows)) = match side {
            Side::Npu => ((builder, rows), (other, other_rows)),
            Side::Bench => ((other, other_rows), (builder, rows)),
        };
        let data = built(step, rank, npu, bench);
        match (
            encode_side(&data.npu, Some(&data.partners)),
            encode_side(&data.bench, None),
        ) {
            (Some(npu), Some(bench)) => {
                self.done.insert(
                    (step, rank),
                    Encoded {
                        npu: (npu, npu_rows),
                        bench: (bench, bench_rows),
                    },
                );
            }
            // A node too big for a part: no table for this graph (it is read from its rows).
            _ => {
                self.read_back.insert((step, rank));
            }
        }
    }

    /// Writes the table into the compare file at `path` (complete, not yet renamed), as
    /// [`write_compact_table`] does: the graphs built from the rows given, any other graph the
    /// file holds read from its rows. Returns the number of graphs written.
    pub fn write_into(mut self, path: &Path) -> Result<usize, DiagnoseError> {
        self.side_done();
        let store = Store::open_for_edit(path)?;
        let config = store.config()?;
        if !config.is_compare() || config.task == crate::load::STRUCTURE_TASK {
            return Ok(0);
        }
        let graphs = store.graphs_present()?;
        let mut sides = Vec::with_capacity(graphs.len() * 2);
        for &(step, rank) in &graphs {
            let key = |side| GraphKey { side, step, rank };
            let built = match self.done.remove(&(step, rank)) {
                Some(Encoded { npu, bench })
                    if store.count_graph_rows(key(Side::Npu))? == npu.1
                        && store.count_graph_rows(key(Side::Bench))? == bench.1 =>
                {
                    Some((npu.0, bench.0))
                }
                _ => None,
            };
            let encoded = match built {
                Some((npu, bench)) => (Some(npu), Some(bench)),
                None => {
                    let data = load_rows_on(&store, step, rank)?;
                    (
                        encode_side(&data.npu, Some(&data.partners)),
                        encode_side(&data.bench, None),
                    )
                }
            };
            if let (Some(npu), Some(bench)) = encoded {
                sides.push((key(Side::Npu), npu));
                sides.push((key(Side::Bench), bench));
            }
        }
        store.write_diagnosis_table(sides.iter().map(|(k, parts)| (*k, &parts[..])))?;
        Ok(graphs.len())
    }
}

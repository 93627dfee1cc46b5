//! Per-tensor comparison of matched nodes and their `precision_index` (msprobe's compare).
//!
//! Items of a matched pair are paired by position inside each group (inputs, parameters,
//! outputs, parameter gradients). Each target item gets msprobe's result columns appended
//! (statistics diffs, md5 result, or tensor metrics), then msprobe's checker rules grade every row
//! pass / warning / error; the node's `precision_index` is its worst row (0, 0.5, 1).

use graph_ascend_dump::{FieldName, Item, PackedItem, PyVal};

use crate::entries::NodeItems;
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::node::NodeOp;
use crate::rank_dump::RankDump;

pub mod checkers;
pub mod metrics;
mod mode;
mod row;

pub use mode::CompareMode;
pub use row::Row;

/// Which group an item belongs to for positional pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Input,
    Params,
    Output,
    ParamsGrad,
}

/// The group of an item of node `id`.
pub fn group_of(node_id: &str, item_name: &str, output: bool) -> Group {
    if crate::node::is_parameters_grad_id(node_id) {
        return Group::ParamsGrad;
    }
    if output {
        return Group::Output;
    }
    let rest = item_name
        .strip_prefix(node_id)
        .and_then(|r| r.strip_prefix('.'))
        .unwrap_or(item_name);
    if rest.starts_with("parameters") {
        Group::Params
    } else {
        Group::Input
    }
}

/// Compares every matched pair and sets `precision_index` on the target graph;
/// `parallel_merge`: graphs merged across ranks (msprobe then skips the shape checker and reads
/// API names without their `_rank<N>` suffix). Each compared target item keeps its result
/// columns. (A graph whose items stay in dump.json is compared as its rows are written
/// instead: [`compared_items`], see [`crate::entries`].)
pub(crate) fn compare_graphs(
    mode: CompareMode,
    parallel_merge: bool,
    npu_dump: &RankDump,
    bench_dump: &RankDump,
    npu: &mut Graph,
    bench: &Graph,
) -> Result<(), ConvertError> {
    let tensors = if mode == CompareMode::Tensor {
        Some(metrics::TensorDirs {
            npu: npu_dump.tensor_dir().unwrap_or_default(),
            bench: bench_dump.tensor_dir().unwrap_or_default(),
            confine: npu_dump.confine.clone(),
        })
    } else {
        None
    };
    // Only nodes with dump data are compared; the others keep a NULL precision index.
    let pairs: Vec<(usize, usize)> = (0..npu.nodes.len())
        .filter(|&i| npu.nodes[i].has_items())
        .filter_map(|i| npu.nodes[i].matched().map(|b| (i, b)))
        .collect();
    // Each pair is unpacked, compared, and the target's items packed again with their result
    // columns, in parallel.
    // In chunks, so that the old items of a chunk are freed before the next one is packed.
    for chunk in pairs.chunks(4096) {
        let results: Vec<(usize, NodeItems, f64)> = {
            use rayon::prelude::*;
            let graphs = (&*npu, bench);
            chunk
                .par_iter()
                .map(|&(n, b)| {
                    let (items, p) =
                        compare_pair(mode, parallel_merge, graphs, (n, b), tensors.as_ref())?;
                    Ok((n, items, p))
                })
                .collect::<Result<_, ConvertError>>()?
        };
        for (n, (ins, outs), p) in results {
            let node = &mut npu.nodes[n];
            node.set_items(ins, outs);
            node.set_precision_index(Some(p));
        }
    }
    // api_collection nodes: the worst of their children. In tensor mode msprobe takes that
    // maximum before the real-data metrics grade the children (`_postcompare`), so it is 0.
    for i in 0..npu.nodes.len() {
        if npu.nodes[i].op == NodeOp::ApiCollection {
            let worst = if mode == CompareMode::Tensor {
                0.0
            } else {
                collection_precision(npu, i)
            };
            npu.nodes[i].set_precision_index(Some(worst));
        }
    }
    Ok(())
}

/// The precision index of an `api_collection` node: the worst of its children's (which must be
/// known: in post-order they come first).
pub(crate) fn collection_precision(g: &Graph, n: usize) -> f64 {
    g.children(n)
        .filter_map(|c| g.nodes[c].precision_index())
        .fold(0.0, f64::max)
}

/// The result columns appended to one item.
pub type Extra = Vec<(FieldName, PyVal)>;

/// The comparison columns of every row in `mode` (none for md5), in row order.
pub fn row_columns(
    mode: CompareMode,
    rows: &[Row],
    tensors: Option<&metrics::TensorDirs>,
) -> Result<Vec<Extra>, ConvertError> {
    rows.iter()
        .map(|row| {
            Ok(match mode {
                CompareMode::Summary => metrics::summary_columns(row),
                CompareMode::Md5 | CompareMode::Structure => Vec::new(),
                CompareMode::Tensor => metrics::tensor_columns(row, tensors)?,
            })
        })
        .collect()
}

/// One side of a pair as item lists: a graph node, or rows read back from a `.vis.db`.
#[derive(Clone, Copy)]
pub struct ItemsRef<'a> {
    pub id: &'a str,
    pub input: &'a [(String, Item)],
    pub output: &'a [(String, Item)],
}

type Unpacked = Vec<(String, Item)>;

/// The items of target node `n` with their result columns against its partner in `bench`, and
/// its precision index, as [`compare_graphs`] leaves them (`None`: a node that is not
/// compared). For the rows of a graph compared as they are written (summary and md5 modes, not
/// merged; `api_collection` nodes then take [`collection_precision`] as rows are written).
pub(crate) fn compared_items(
    mode: CompareMode,
    npu: &Graph,
    n: usize,
    bench: &Graph,
) -> Result<Option<(NodeItems, f64)>, ConvertError> {
    let node = &npu.nodes[n];
    let Some(b) = node.matched().filter(|_| node.has_items()) else {
        return Ok(None);
    };
    compare_pair(mode, false, (npu, bench), (n, b), None).map(Some)
}

/// Compares target node `n` with golden node `b`: the target's items with their result
/// columns appended, and its precision index.
fn compare_pair(
    mode: CompareMode,
    parallel_merge: bool,
    (npu, bench): (&Graph, &Graph),
    (n, b): (usize, usize),
    tensors: Option<&metrics::TensorDirs>,
) -> Result<(NodeItems, f64), ConvertError> {
    let unpack = |v: &[(String, PackedItem)]| -> Unpacked {
        v.iter().map(|(n, it)| (n.clone(), it.unpack())).collect()
    };
    let (ni, no) = {
        let (i, o) = npu.items(n)?;
        (unpack(&i), unpack(&o))
    };
    let (bi, bo) = {
        let (i, o) = bench.items(b)?;
        (unpack(&i), unpack(&o))
    };
    let (ins, outs, p) = compare_node(
        mode,
        parallel_merge,
        ItemsRef {
            id: npu.id(n),
            input: &ni,
            output: &no,
        },
        ItemsRef {
            id: bench.id(b),
            input: &bi,
            output: &bo,
        },
        tensors,
    )?;
    let repack = |items: Unpacked, extras: Vec<Extra>| -> Vec<(String, PackedItem)> {
        items
            .into_iter()
            .zip(extras)
            .map(|((name, mut item), extra)| {
                item.fields.extend(extra);
                (name, PackedItem::pack(&item))
            })
            .collect()
    };
    Ok(((repack(ni, ins), repack(no, outs)), p))
}

/// Compares one pair given as item lists: the columns to append to each target input and
/// output item, and the target's `precision_index`. This is the converter's own per-node
/// comparison, public so that a manual match in the service grades pairs the same way.
pub fn compare_items(
    mode: CompareMode,
    npu: ItemsRef,
    bench: ItemsRef,
    tensors: Option<&metrics::TensorDirs>,
) -> Result<(Vec<Extra>, Vec<Extra>, f64), ConvertError> {
    compare_node(mode, false, npu, bench, tensors)
}

/// Compares one matched pair: the extra fields of each input and output item, and the node's
/// precision index.
fn compare_node(
    mode: CompareMode,
    parallel_merge: bool,
    npu: ItemsRef,
    bench: ItemsRef,
    tensors: Option<&metrics::TensorDirs>,
) -> Result<(Vec<Extra>, Vec<Extra>, f64), ConvertError> {
    let groups = |node: ItemsRef| {
        let mut g: Vec<(Group, usize, bool)> = Vec::new();
        for (i, (name, _)) in node.input.iter().enumerate() {
            g.push((group_of(node.id, name, false), i, false));
        }
        for (i, (name, _)) in node.output.iter().enumerate() {
            g.push((group_of(node.id, name, true), i, true));
        }
        g
    };
    let ng = groups(npu);
    let bg = groups(bench);
    fn item<'b>(node: ItemsRef<'b>, i: usize, out: bool) -> &'b (String, Item) {
        if out {
            &node.output[i]
        } else {
            &node.input[i]
        }
    }
    let mut rows: Vec<Row> = Vec::with_capacity(ng.len());
    for group in [
        Group::Input,
        Group::Params,
        Group::Output,
        Group::ParamsGrad,
    ] {
        let bench_items: Vec<&(Group, usize, bool)> =
            bg.iter().filter(|(g, _, _)| *g == group).collect();
        for (k, &(_, i, out)) in ng.iter().filter(|(g, _, _)| *g == group).enumerate() {
            let (name, it) = item(npu, i, out);
            let b = bench_items
                .get(k)
                .map(|&&(_, j, bout)| item(bench, j, bout));
            rows.push(Row {
                npu_name: name,
                npu: it,
                bench_name: b.map(|(n, _)| n.as_str()),
                bench: b.map(|(_, it)| it),
                is_output: out,
                index: i,
            });
        }
    }
    let extras = row_columns(mode, &rows, tensors)?;
    let graded = checkers::grade_with(mode, parallel_merge, npu.id, &rows, &extras);
    let mut worst = checkers::Level::Pass;
    let mut ins: Vec<Extra> = vec![Vec::new(); npu.input.len()];
    let mut outs: Vec<Extra> = vec![Vec::new(); npu.output.len()];
    let positions: Vec<(usize, bool)> = rows.iter().map(|r| (r.index, r.is_output)).collect();
    for (((mut extra, (level, messages)), row), (idx, out)) in
        extras.into_iter().zip(graded).zip(&rows).zip(positions)
    {
        worst = worst.max(level);
        let rg = requires_grad_consistent(row);
        let msg = PyVal::Str(crate::pyjson::str_list(&messages));
        match mode {
            CompareMode::Md5 => {
                extra.push(("Result".into(), PyVal::Str(level.name().into())));
                extra.push(("Requires_grad Consistent".into(), rg));
                extra.push(("Err_message".into(), msg));
            }
            _ => {
                extra.push(("Requires_grad Consistent".into(), rg));
                extra.push(("Result".into(), PyVal::Str(level.name().into())));
                extra.push(("Err_message".into(), msg));
            }
        }
        if out {
            outs[idx] = extra;
        } else {
            ins[idx] = extra;
        }
    }
    let mut p = worst.index();
    let api = npu.id.split('.').nth(1).unwrap_or("");
    if checkers::IGNORE_PRECISION.contains(&api) {
        p = if mode == CompareMode::Md5 { 1.0 } else { 0.0 };
    }
    Ok((ins, outs, p))
}

fn requires_grad_consistent(row: &Row) -> PyVal {
    let n = row.npu.get("requires_grad").cloned().unwrap_or(PyVal::None);
    let b = row
        .bench
        .map(|b| b.get("requires_grad").cloned().unwrap_or(PyVal::None))
        .unwrap_or(PyVal::Str("Nan".into()));
    PyVal::Bool(n == b)
}

//! Step 3, match and compare: the target ("NPU") and golden ("Bench") graphs of one unit are
//! paired node by node ([`crate::matcher`]), their matched items compared
//! ([`crate::compare`]). The caller gives the nodes their micro-step batches (a plain pair
//! and a merged one are batched differently). A merged pair (parallel merge) is matched with
//! the options its caller gives (fuzzily) and compared as msprobe compares merged graphs.

use std::sync::atomic::AtomicBool;

use graph_ascend_visdb::schema::{BENCH, NPU};

use crate::compare::{self, CompareMode};
use crate::error::ConvertError;
use crate::export::ExportContext;
use crate::graph::Graph;
use crate::matcher;
use crate::options::ConvertOptions;
use crate::rank_dump::RankDump;
use crate::timing;

/// One side of a pair: its graph, and the dump it was built from.
pub(crate) struct Side<'a> {
    pub dump: &'a RankDump,
    /// The dump is an md5 one.
    pub md5: bool,
    pub graph: Graph,
}

/// A compared pair, ready to write.
pub(crate) struct Paired {
    /// The target's graph then the golden's, with where their rows go (the target's rows may be
    /// compared with the golden graph as they are written: keep the two in this order).
    pub graphs: [(Graph, ExportContext); 2],
    /// `tb_config.task`: `md5`, `summary`, `all` or `structure`.
    pub task: &'static str,
}

/// msprobe compares a structure-only pair node by node like any other, but its indicator
/// calculator knows no mode `structure`: a matched target node with data (whose items give
/// compare rows) stops the whole conversion, and no file is written. A golden node's data alone
/// gives no row (msprobe pairs rows from the target's items).
fn refuse_structure_with_data(npu: &RankDump, graph: &Graph) -> Result<(), ConvertError> {
    let Some(n) = (0..graph.nodes.len())
        .find(|&i| graph.nodes[i].has_items() && graph.nodes[i].matched().is_some())
    else {
        return Ok(());
    };
    Err(ConvertError::Usage(format!(
        "{}: task \"structure\", yet node {} has data and is matched: a structure-only compare \
         compares no data, and msprobe refuses a pair with data (its compare of a node takes \
         only modes summary, all and md5)",
        npu.dump.path.display(),
        graph.id(n)
    )))
}

/// Matches (with `match_opts`) and compares one pair of step `step`, rank `rank`; `merged`:
/// graphs merged across ranks (their items were moved by the merge and are held; msprobe
/// compares them as `parallel_merge`). `matched` is called between matching and comparing
/// (progress); the matching stops soon after `cancel` is set.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pair(
    match_opts: &ConvertOptions,
    merged: bool,
    step: i64,
    rank: i64,
    npu: Side,
    bench: Side,
    matched: &dyn Fn(),
    cancel: &AtomicBool,
) -> Result<Paired, ConvertError> {
    let Side {
        dump: nd,
        md5: nm,
        graph: mut ng,
    } = npu;
    let Side {
        dump: bd,
        md5: bm,
        graph: mut bg,
    } = bench;
    let mode = CompareMode::detect(&nd.dump, &bd.dump, nm, bm)?;
    let p = timing::phase(|| "match".into());
    matcher::match_graphs(match_opts, nd, bd, &mut ng, &mut bg, cancel)?;
    p.done();
    if mode == CompareMode::Structure {
        refuse_structure_with_data(nd, &ng)?;
    }
    matched();
    let p = timing::phase(|| "compare".into());
    // A merged pair's items were moved by the merge, and a tensor compare reads tensor files
    // (too slow to do twice): both are compared now and keep their result columns. Otherwise
    // the items stay in dump.json and the target's rows are compared as they are written
    // (`crate::entries`).
    let keep_columns = merged || mode == CompareMode::Tensor;
    if keep_columns {
        ng.hold_items()?;
        bg.hold_items()?;
        compare::compare_graphs(mode, merged, nd, bd, &mut ng, &bg)?;
    }
    p.done();
    let keep_md5 = mode == CompareMode::Md5;
    let mut npu_ctx = ExportContext::of(nd, NPU, step, rank, keep_md5);
    npu_ctx.compare_with_next = (!keep_columns).then_some(mode);
    Ok(Paired {
        graphs: [
            (ng, npu_ctx),
            (bg, ExportContext::of(bd, BENCH, step, rank, keep_md5)),
        ],
        task: mode.task_name(),
    })
}

//! A plain conversion (no parallel merge): [`plan`](super::plan) the units (one rank of one
//! step), then per unit, in parallel, [`read and build`](super::build) each side and, in a
//! compare, [`pair`](super::pair) them; then [`write`](super::write) every graph into one
//! `.vis.db` (or a shard's units into a part).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use rayon::prelude::*;

use graph_ascend_visdb::schema::NPU;

use super::build::{read_and_build, Built};
use super::pair::{pair, Side};
use super::plan::{self, Job};
use super::run::{bytes_to_read, Run};
use super::write::{self, Graphs};
use crate::error::ConvertError;
use crate::export::{self, ExportContext};
use crate::layer_mapping;
use crate::layout::Layout;
use crate::options::ConvertOptions;
use crate::part::{self, InputDirs};
use crate::progress::{ProgressFn, Stage};
use crate::shard::ShardSpec;
use crate::timing;

/// A plain conversion: every unit into a `.vis.db`, or one shard's units into a part.
pub(crate) fn convert_plain(
    opts: &ConvertOptions,
    shard: Option<ShardSpec>,
    progress: ProgressFn,
    cancel: &AtomicBool,
) -> Result<PathBuf, ConvertError> {
    let _total_phase = timing::phase(|| "total".into());
    let plan = plan::plan(opts)?;
    let range = shard.map_or(0..plan.jobs.len(), |s| s.units(plan.jobs.len()));
    let share = &plan.jobs[range.clone()];
    let jobs = share.len();
    let dirs = share
        .iter()
        .flat_map(|j| std::iter::once(j.target.as_path()).chain(j.golden.as_deref()));
    let run = Run::start(
        progress,
        cancel,
        opts.golden.is_some(),
        bytes_to_read(dirs),
        // A compare's job counts twice: matched, then compared.
        jobs as u64 * if opts.golden.is_some() { 2 } else { 1 },
        format!("{jobs} graph(s) to convert"),
    );
    if let Some(warning) =
        layer_mapping::preflight(&opts.layer_mapping, &opts.confine, run.cancel_flag())?
    {
        run.note(Stage::Reading, format!("warning: {warning}"));
    }
    let units: Vec<Unit> = share
        .par_iter()
        .map(|job| {
            run.check()?;
            let unit = convert_job(opts, job, &run);
            run.check()?;
            run.tick(
                Stage::Comparing,
                format!("step {} rank {} done", job.step, job.rank),
            );
            unit
        })
        .collect::<Result<_, _>>()?;
    let first = units.first();
    let config = export::config_row(
        opts.golden.is_some(),
        first.map_or("", |u| u.task),
        first.map_or(1, |u| u.micro_steps),
        opts.overflow_check,
        &plan.ranks,
        &plan.steps,
    );
    let graphs: Graphs = units.into_iter().flat_map(|u| u.graphs).collect();
    let link_distributed = plan.layout != Layout::Files;
    match shard {
        None => write::write(&run, opts, graphs, &config, link_distributed),
        Some(s) => {
            let folders: Vec<InputDirs> = plan.jobs.iter().map(Job::input_dirs).collect();
            let manifest =
                part::Manifest::of(opts, &folders, plan.jobs.len(), s, &range, link_distributed);
            write::write_part(&run, opts, &manifest, graphs, &config)
        }
    }
}

/// The finished graphs of one job, ready to be written.
struct Unit {
    graphs: Graphs,
    micro_steps: i64,
    task: &'static str,
}

/// Read and build one job's folders, then match and compare them in a compare.
///
/// The two sides are read one after the other, not side by side: reading a side already keeps
/// both cores busy (dump.json is parsed in parallel batches, construct.json and stack.json side
/// by side), so reading both at once saves little time, while their transient peaks (the
/// skeletons being made beside construct.json's and stack.json's entries) would add up. One
/// after the other, a compare's peak is one side's built graph plus the other's skeleton being
/// made.
fn convert_job(opts: &ConvertOptions, job: &Job, run: &Run) -> Result<Unit, ConvertError> {
    let npu = read_and_build(opts, &job.target, run);
    let bench = match (&npu, job.golden.as_deref()) {
        (Ok(_), Some(g)) => Some(read_and_build(opts, g, run)),
        _ => None,
    };
    let Built {
        dump: npu_dump,
        graph: mut npu_graph,
        md5: npu_md5,
    } = npu?;
    run.note(
        Stage::Building,
        format!(
            "built {} ({} nodes)",
            job.target.display(),
            npu_graph.nodes.len()
        ),
    );
    run.check()?;
    let Some(bench) = bench.transpose()? else {
        let micro_steps = npu_graph.paging_by_micro_step(None);
        let ctx = ExportContext::of(&npu_dump, NPU, job.step, job.rank, false);
        return Ok(Unit {
            graphs: vec![(npu_graph, ctx)],
            micro_steps,
            task: "",
        });
    };
    let mut paired = pair(
        opts,
        false,
        job.step,
        job.rank,
        Side {
            dump: &npu_dump,
            md5: npu_md5,
            graph: npu_graph,
        },
        Side {
            dump: &bench.dump,
            md5: bench.md5,
            graph: bench.graph,
        },
        &|| {
            run.tick(
                Stage::Comparing,
                format!("step {} rank {} matched", job.step, job.rank),
            )
        },
        run.cancel_flag(),
    )?;
    let [(npu_graph, _), (bench_graph, _)] = &mut paired.graphs;
    let micro_steps = npu_graph.paging_by_micro_step(Some(bench_graph));
    Ok(Unit {
        graphs: paired.graphs.into(),
        micro_steps,
        task: paired.task,
    })
}

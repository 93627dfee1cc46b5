//! The conversion engine: msprobe dump folders → `.vis.db` (msprobe `graph_visualize`).
//!
//! A conversion goes through named steps, in this order ([`stage`]): **plan** the rank
//! folders to read, **read** each one and **build** its graph, **match** the target's nodes to
//! the golden's and **compare** their items, and **write** every graph's rows into one new
//! `.vis.db`. Units (one rank of one step) run in parallel (rayon). A parallel merge
//! (`--rank_size …`, [`merge`]) goes through the same steps, merging the rank graphs of each
//! side between build and match.
//!
//! # Layout
//! - [`options`], [`progress`]: what a caller asks for and what it is told;
//! - `stage`: the steps (`plan`, `read`, `build`, `pair`, `write`);
//! - `layout`: msprobe's folder classification; `graph`: a rank's graph built from its dump
//!   (its nodes' ids in `ids`, their children in `children`, looked up by id through `names`);
//!   `matcher` and `layer_mapping`: node pairing; [`compare`]: the item comparison and
//!   `precision_index` (also used by the service's precision answers); `overflow`: anomaly
//!   levels; `export` and `format`: graphs → rows; `distributed`: communication links across
//!   ranks; [`pyjson`]: Python's `json.dumps` layout; `timing`: phase timings (`GA_TIMING=1`);
//! - sharded conversion (`docs/scale.md`): [`shard`] (which units a shard converts), [`part`]
//!   (what a shard writes: a `.vis.part` with its manifest), [`gather`] (parts → the one
//!   `.vis.db` an unsharded run writes, communication links made across every rank).

pub(crate) mod children;
pub mod compare;
pub(crate) mod distributed;
pub(crate) mod entries;
pub(crate) mod error;
pub(crate) mod export;
pub(crate) mod format;
pub mod gather;
pub(crate) mod graph;
pub(crate) mod ids;
pub mod layer_mapping;
pub(crate) mod layout;
pub(crate) mod matcher;
pub mod merge;
pub(crate) mod names;
pub(crate) mod options;
pub(crate) mod overflow;
pub mod part;
pub(crate) mod progress;
pub mod pyjson;
pub mod shard;
pub(crate) mod stage;
pub(crate) mod timing;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use rayon::prelude::*;

pub use error::ConvertError;
pub use options::{ConvertOptions, LayerMapping};
pub use progress::{Progress, ProgressFn, Stage};
pub use shard::ShardSpec;
pub use stage::RankDump;

use export::ExportContext;
use graph_ascend_visdb::schema::NPU;
use layout::Layout;
use stage::build::{read_and_build, Built};
use stage::pair::{pair, Side};
use stage::plan::Job;
use stage::write::Graphs;
use stage::Run;

/// Runs one conversion and returns the path of the `.vis.db` written.
pub fn convert(opts: &ConvertOptions, progress: ProgressFn) -> Result<PathBuf, ConvertError> {
    convert_cancellable(opts, progress, &AtomicBool::new(false))
}

/// [`convert`] that stops with [`ConvertError::Cancelled`] soon after `cancel` becomes true
/// (checked before and after each rank's work and between written graphs); the temporary
/// output is removed, nothing is left behind.
pub fn convert_cancellable(
    opts: &ConvertOptions,
    progress: ProgressFn,
    cancel: &AtomicBool,
) -> Result<PathBuf, ConvertError> {
    if !opts.parallel.is_empty() {
        return merge::convert_merged(opts, None, progress, cancel);
    }
    convert_plain(opts, None, progress, cancel)
}

/// [`convert_cancellable`] of only `shard`'s share of the work units, written as a part into the
/// output folder (see [`part`]); returns the part's path. [`gather::gather`] combines the parts.
pub fn convert_shard(
    opts: &ConvertOptions,
    shard: ShardSpec,
    progress: ProgressFn,
    cancel: &AtomicBool,
) -> Result<PathBuf, ConvertError> {
    if opts.json_output {
        return Err(ConvertError::Usage(
            "--shard writes a part of a .vis.db: it does not apply to --file_type json".into(),
        ));
    }
    if !opts.parallel.is_empty() {
        return merge::convert_merged(opts, Some(shard), progress, cancel);
    }
    convert_plain(opts, Some(shard), progress, cancel)
}

/// A plain conversion: every unit into a `.vis.db`, or one shard's units into a part.
fn convert_plain(
    opts: &ConvertOptions,
    shard: Option<ShardSpec>,
    progress: ProgressFn,
    cancel: &AtomicBool,
) -> Result<PathBuf, ConvertError> {
    let _total_phase = timing::phase(|| "total".into());
    let plan = stage::plan::plan(opts)?;
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
        stage::bytes_to_read(dirs),
        // A compare's job counts twice: matched, then compared.
        jobs as u64 * if opts.golden.is_some() { 2 } else { 1 },
        format!("{jobs} graph(s) to convert"),
    );
    if let Some(warning) = layer_mapping::preflight(&opts.layer_mapping, &opts.confine, cancel)? {
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
        None => stage::write::write(&run, opts, graphs, &config, link_distributed),
        Some(s) => {
            let manifest = part::Manifest::of(
                opts,
                &plan.jobs,
                plan.jobs.len(),
                s,
                &range,
                link_distributed,
            );
            part::write(&run, opts, &manifest, graphs, &config)
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
/// made (issue 16, item 1).
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
    let paired = pair(
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
    Ok(Unit {
        graphs: paired.graphs.into(),
        micro_steps: paired.micro_steps,
        task: paired.task,
    })
}

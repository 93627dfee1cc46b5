//! A conversion with parallel merge (`--rank_size …`): [`plan`](super::plan) the steps, then
//! step by step [`build`](super::build) every rank folder of each side, merge each side's rank
//! graphs ([`crate::merge`]) into one graph per data-parallel replica, and in a compare
//! [`pair`](super::pair) the replicas; then [`write`](super::write) them (or `--file_type json`
//! folders, [`crate::merge::json_out`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use rayon::prelude::*;

use graph_ascend_visdb::schema::NPU;

use super::build::{read_and_build, Built};
use super::pair::{pair, Side};
use super::plan::{self, StepDirs};
use super::run::{bytes_to_read, Run};
use super::write::{self, Graphs};
use crate::error::ConvertError;
use crate::export::{self, ExportContext};
use crate::layout;
use crate::merge::{self, json_out, params, Merged};
use crate::options::{ConvertOptions, LayerMapping};
use crate::parallel::ParallelParams;
use crate::part::{InputDirs, Manifest};
use crate::progress::{ProgressFn, Stage};
use crate::rank_dump::RankDump;
use crate::shard::ShardSpec;

/// One rank folder read and built.
struct RankGraph {
    rank: i64,
    built: Built,
    micro_steps: i64,
}

/// The rank folders of one side of one step, built.
fn build_side(
    opts: &ConvertOptions,
    dir: &Path,
    params: &ParallelParams,
    side: &str,
    run: &Run,
) -> Result<Vec<RankGraph>, ConvertError> {
    let ranks = rank_folders(dir)?;
    params::validate(params, ranks.len(), side)?;
    ranks
        .par_iter()
        .map(|(rank, path)| {
            run.check()?;
            let mut built = read_and_build(opts, path, run)?;
            if built.dump.dump.task == "tensor" {
                return Err(ConvertError::Input {
                    path: built.dump.dump.path.clone(),
                    message: "parallel merge needs statistics dumps (task \"statistics\"); this \
                              is a tensor dump"
                        .into(),
                });
            }
            let micro_steps = built.graph.paging_by_micro_step(None);
            run.note(Stage::Building, format!("built {}", path.display()));
            Ok(RankGraph {
                rank: *rank,
                built,
                micro_steps,
            })
        })
        .collect()
}

/// The `rankN` folders of a step folder (msprobe counts only these for `--rank_size`).
fn rank_folders(dir: &Path) -> Result<Vec<(i64, PathBuf)>, ConvertError> {
    let ranks = layout::ranks(dir)?;
    let named: Vec<(i64, PathBuf)> = ranks
        .into_iter()
        .filter(|(_, p)| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rank"))
        })
        .collect();
    if named.is_empty() {
        return Err(ConvertError::Input {
            path: dir.to_path_buf(),
            message: "parallel merge needs rankN/ folders (one per rank)".into(),
        });
    }
    // Ranks must be 0..rank_size-1: a gap means a missing rank.
    for (i, (r, _)) in named.iter().enumerate() {
        if *r != i as i64 {
            return Err(ConvertError::Input {
                path: dir.to_path_buf(),
                message: format!("rank{i} is missing (found rank{r} instead)"),
            });
        }
    }
    Ok(named)
}

/// The merged graphs of one side, and the rank dumps they were built from.
struct MergedSide<'a> {
    merged: Merged<'a>,
    dumps: Vec<RankDump>,
    md5: Vec<bool>,
}

impl MergedSide<'_> {
    /// The `i`-th merged graph as a plain graph, with its dump, ready to pair.
    fn side(&self, i: usize) -> Side<'_> {
        let mg = &self.merged.graphs[i];
        Side {
            dump: &self.dumps[mg.dump],
            md5: self.md5[mg.dump],
            graph: self.merged.to_graph(mg),
        }
    }
}

fn merge_side(
    built: Vec<RankGraph>,
    params: &ParallelParams,
) -> Result<MergedSide<'_>, ConvertError> {
    let mut ranks = Vec::with_capacity(built.len());
    let mut dumps = Vec::with_capacity(built.len());
    let mut md5 = Vec::with_capacity(built.len());
    for rg in built {
        ranks.push((rg.built.graph, rg.rank, rg.micro_steps));
        dumps.push(rg.built.dump);
        md5.push(rg.built.md5);
    }
    Ok(MergedSide {
        merged: merge::merge_ranks(ranks, params)?,
        dumps,
        md5,
    })
}

/// One step's merged graphs, ready to write.
struct MergedStep {
    step: i64,
    /// The rows to write (`.vis.db` output).
    graphs: Graphs,
    /// `(rank, files)` of each merged graph (`--file_type json` output).
    json: Vec<(i64, json_out::JsonGraph)>,
    micro_steps: i64,
    task: &'static str,
    ranks: Vec<i64>,
}

/// Runs a conversion with parallel merge (`opts.parallel` set), or with `shard` only that
/// shard's share of it, written as a part ([`crate::part`]).
///
/// The unit of a sharded merge is a step: every merge group (data-parallel replica) of a step
/// goes into one part, whole. A finer unit (one replica) is not possible without reading every
/// rank: msprobe takes the groups from the dumps themselves (each rank's first
/// `all_reduce`/`reduce_scatter` names its TP group, the first `send` its PP peer), so which
/// ranks make a replica is known only once all of the step's ranks are built.
pub(crate) fn convert_merged(
    opts: &ConvertOptions,
    shard: Option<ShardSpec>,
    progress: ProgressFn,
    cancel: &AtomicBool,
) -> Result<PathBuf, ConvertError> {
    check_options(opts)?;
    let compare = opts.golden.is_some();
    let (steps, step_list) = plan::merged_steps(opts)?;
    let range = shard.map_or(0..steps.len(), |s| s.units(steps.len()));
    let share = &steps[range.clone()];
    // Folders that cannot be listed count no bytes: building them reports the error.
    let rank_dirs: Vec<PathBuf> = share
        .iter()
        .flat_map(|s| std::iter::once(&s.target).chain(&s.golden))
        .flat_map(|d| rank_folders(d).unwrap_or_default())
        .map(|(_, p)| p)
        .collect();
    let run = Run::start(
        progress,
        cancel,
        compare,
        bytes_to_read(rank_dirs.iter().map(PathBuf::as_path)),
        share.len() as u64 * 3,
        format!("{} step(s) to merge", share.len()),
    );
    let mut ready: Vec<MergedStep> = Vec::new();
    for step in share {
        run.check()?;
        ready.push(merge_step(opts, step, &run)?);
    }
    run.check()?;
    if opts.json_output {
        write_json(opts, &ready)?;
        run.finish(format!("written {}", opts.output.display()));
        return Ok(opts.output.clone());
    }
    let first = ready.first();
    let config = export::config_row(
        compare,
        first.map_or("", |r| r.task),
        first.map_or(1, |r| r.micro_steps),
        opts.overflow_check,
        first.map_or(&[][..], |r| &r.ranks),
        &step_list,
    );
    let graphs: Graphs = ready.into_iter().flat_map(|r| r.graphs).collect();
    match shard {
        None => write::write(&run, opts, graphs, &config, false),
        Some(s) => {
            // The config row of a part without the first step is not the run's: the gather
            // takes the one of the part holding the first unit.
            let folders = step_folders(&steps);
            let folders: Vec<InputDirs> = folders
                .iter()
                .map(|(step, rank, target)| InputDirs {
                    step: *step,
                    rank: *rank,
                    target,
                    golden: None,
                })
                .collect();
            let manifest = Manifest::of(opts, &folders, steps.len(), s, &range, false);
            write::write_part(&run, opts, &manifest, graphs, &config)
        }
    }
}

/// The options a parallel merge refuses: a layout per side, `--file_type json` only for a
/// build, no layer mapping file.
fn check_options(opts: &ConvertOptions) -> Result<(), ConvertError> {
    let compare = opts.golden.is_some();
    let want = if compare { 2 } else { 1 };
    if opts.parallel.len() != want {
        return Err(ConvertError::Usage(format!(
            "parallel merge: {} layout(s) given, a {} needs {want}",
            opts.parallel.len(),
            if compare { "compare" } else { "build" }
        )));
    }
    if opts.json_output && compare {
        return Err(ConvertError::Usage(
            "--file_type json is only for a merged build, not a compare (-gp)".into(),
        ));
    }
    if let LayerMapping::File(path) = &opts.layer_mapping {
        return Err(ConvertError::Input {
            path: path.clone(),
            message: "layer mapping YAML files are not supported yet (bare -lm is)".into(),
        });
    }
    Ok(())
}

/// Writes the `--file_type json` folders of every merged graph; on an error, removes the files
/// already written.
fn write_json(opts: &ConvertOptions, ready: &[MergedStep]) -> Result<(), ConvertError> {
    std::fs::create_dir_all(&opts.output).map_err(|source| ConvertError::Output {
        path: opts.output.clone(),
        source,
    })?;
    let mut written: Vec<PathBuf> = Vec::new();
    for r in ready {
        for (rank, files) in &r.json {
            match json_out::write(&opts.output, r.step, *rank, files) {
                Ok(w) => written.extend(w),
                Err(e) => {
                    for p in &written {
                        let _ = std::fs::remove_file(p);
                    }
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Every rank folder of every step, both sides (the run's fingerprint in a part's manifest);
/// a folder that cannot be listed is left out (building it reports the error).
fn step_folders(steps: &[StepDirs]) -> Vec<(i64, i64, PathBuf)> {
    let mut out = Vec::new();
    for s in steps {
        for dir in std::iter::once(&s.target).chain(&s.golden) {
            for (rank, target) in rank_folders(dir).unwrap_or_default() {
                out.push((s.step, rank, target));
            }
        }
    }
    out
}

/// One step: both sides' ranks built and merged, then (in a compare) each data-parallel pair of
/// merged graphs matched and compared.
fn merge_step(
    opts: &ConvertOptions,
    dirs: &StepDirs,
    run: &Run,
) -> Result<MergedStep, ConvertError> {
    let step = dirs.step;
    let (t, g) = rayon::join(
        || build_side(opts, &dirs.target, &opts.parallel[0], "target", run),
        || {
            dirs.golden
                .as_ref()
                .map(|g| build_side(opts, g, &opts.parallel[1], "golden", run))
        },
    );
    let t = t?;
    let g = g.transpose()?;
    run.tick(Stage::Building, format!("step {step}: ranks built"));
    let npu = merge_side(t, &opts.parallel[0])?;
    let bench = match g {
        Some(g) => Some(merge_side(g, &opts.parallel[1])?),
        None => None,
    };
    run.tick(Stage::Building, format!("step {step}: ranks merged"));
    run.check()?;
    let mut r = MergedStep {
        step,
        graphs: Vec::new(),
        json: Vec::new(),
        micro_steps: 1,
        task: "",
        ranks: npu.merged.graphs.iter().map(|g| g.rank).collect(),
    };
    match bench {
        None => build_ready(opts, &npu, &mut r)?,
        Some(bench) => compare_ready(opts, &npu, &bench, &mut r, run)?,
    }
    run.tick(
        Stage::Comparing,
        format!("step {step}: merged graphs ready"),
    );
    Ok(r)
}

/// A merged build's graphs ready to write: rows, or `--file_type json` files.
fn build_ready(
    opts: &ConvertOptions,
    npu: &MergedSide,
    r: &mut MergedStep,
) -> Result<(), ConvertError> {
    let step = r.step;
    r.micro_steps = npu.merged.graphs.first().map_or(1, |g| g.micro_steps);
    for mg in &npu.merged.graphs {
        let graph = npu.merged.to_graph(mg);
        let dump = &npu.dumps[mg.dump];
        if opts.json_output {
            let raw =
                graph_ascend_dump::DumpFile::read(&dump.dir.join("dump.json"), &dump.confine)?;
            let header = json_out::DumpHeader {
                task: &dump.dump.task,
                level: &dump.dump.level,
                framework: &dump.dump.framework,
                dump_data_dir: dump.dump.dump_data_dir.as_deref(),
            };
            r.json
                .push((mg.rank, json_out::render(&graph, &raw.data, &header)));
        } else {
            let ctx = ExportContext::of(dump, NPU, step, mg.rank, false);
            r.graphs.push((graph, ctx));
        }
    }
    Ok(())
}

/// A merged compare's graphs ready to write: each data-parallel pair matched and compared.
fn compare_ready(
    opts: &ConvertOptions,
    npu: &MergedSide,
    bench: &MergedSide,
    r: &mut MergedStep,
    run: &Run,
) -> Result<(), ConvertError> {
    let step = r.step;
    if npu.merged.graphs.len() != bench.merged.graphs.len() {
        return Err(ConvertError::Usage(format!(
            "parallel merge: the target merges into {} data-parallel graph(s) but the \
             golden into {}; both sides need the same data parallelism \
             (rank_size / (tp × pp))",
            npu.merged.graphs.len(),
            bench.merged.graphs.len()
        )));
    }
    let sides: Vec<(Side, Side, i64)> = (0..npu.merged.graphs.len())
        .map(|i| (npu.side(i), bench.side(i), npu.merged.graphs[i].rank))
        .collect();
    // msprobe matches merged graphs fuzzily, without a layer mapping.
    let mut match_opts = opts.clone();
    match_opts.fuzzy_match = true;
    match_opts.layer_mapping = LayerMapping::None;
    let compared: Vec<_> = sides
        .into_par_iter()
        .map(|(n, b, rank)| {
            let mut paired = pair(
                &match_opts,
                true,
                step,
                rank,
                n,
                b,
                &|| {},
                run.cancel_flag(),
            )?;
            let [(npu_graph, _), (bench_graph, _)] = &mut paired.graphs;
            merge::all_ranks_index(npu_graph);
            let micro_steps = merge::paging(npu_graph, bench_graph);
            Ok::<_, ConvertError>((paired, micro_steps))
        })
        .collect::<Result<_, _>>()?;
    for (paired, micro_steps) in compared {
        if r.task.is_empty() {
            r.task = paired.task;
            r.micro_steps = micro_steps;
        }
        r.graphs.extend(paired.graphs);
    }
    Ok(())
}

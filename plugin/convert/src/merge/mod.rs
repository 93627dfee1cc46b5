//! Parallel merge (`--rank_size --tp --pp [--vpp] [--order]`, msprobe's `GraphMerger`): the
//! graphs of the ranks of a Megatron-style run are merged into one graph per data-parallel
//! replica, so that runs with different parallel layouts can be viewed and compared.
//!
//! - [`params`]: the layout flags, their checks, Megatron's default rank groups;
//! - [`forest`]: the rank graphs while they are merged (shared nodes, ordered id tables);
//! - [`tp`]: tensor-parallel merging of statistics; [`pp`]: pipeline (and virtual pipeline)
//!   merging of the hierarchy;
//! - [`json_out`]: `--file_type json`.
//!
//! The strategy follows msprobe's `_select_strategy`: TP only, PP (or VPP) only, TP then PP
//! inside one model replica (`tp·pp = rank_size`), or PP per pipeline then TP per tensor group
//! (with data parallelism). The merged graph of each replica is written under the first rank of
//! its group, with `parallel_merge_info` notes; no communication links are computed.

pub(crate) mod forest;
pub(crate) mod json_out;
pub mod params;
pub(crate) mod pp;
pub(crate) mod tp;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use rayon::prelude::*;

use graph_ascend_visdb::schema::NPU;

pub use params::ParallelParams;

use crate::export::{self, ExportContext};
use crate::graph::{Graph, NodeOp};
use crate::layout::{self, Layout};
use crate::part::Manifest;
use crate::shard::ShardSpec;
use crate::stage::build::{read_and_build, Built};
use crate::stage::pair::{pair, Side};
use crate::stage::plan::{self, StepDirs};
use crate::stage::write::{self, Graphs};
use crate::stage::Run;
use crate::{ConvertError, ConvertOptions, ProgressFn, RankDump, Stage};
use forest::{Forest, MGraph};

const ALL_RANKS: &str = "Apis_Between_Modules_All_Ranks";
const APIS: &str = "Apis_Between_Modules";

/// One side's merge: the forest of its ranks and its layout.
pub(crate) struct Merger<'a> {
    pub forest: Forest,
    pub params: &'a ParallelParams,
}

impl Merger<'_> {
    /// `merge_graph_api_collection`: every rank's `Apis_Between_Modules.k` goes under one
    /// `Apis_Between_Modules_All_Ranks.k` of the first graph, renamed
    /// `Apis_Between_Modules_Rank<r>.k`; other ranks' APIs get `_rank<r>` in their names.
    fn merge_api_collection(&mut self, graphs: &mut [MGraph]) {
        let Some((main, others)) = graphs.split_first_mut() else {
            return;
        };
        let f = &mut self.forest;
        let root = main.root;
        let children = f.nodes[root].children.clone();
        let mut new_children = Vec::with_capacity(children.len());
        for n in children {
            let id = f.nodes[n].id.clone();
            if id.starts_with(ALL_RANKS) {
                new_children.push(n);
                for o in others.iter() {
                    let Some(on) = o.map.get(&id) else {
                        continue;
                    };
                    let subs = f.nodes[on].children.clone();
                    for &s in &subs {
                        f.nodes[s].parent = Some(n);
                        let sid = f.nodes[s].id.clone();
                        main.map.insert(&sid, s);
                        for ss in f.nodes[s].children.clone() {
                            let ssid = f.nodes[ss].id.clone();
                            main.map.insert(&ssid, ss);
                        }
                    }
                    f.nodes[n].children.extend(subs);
                }
            } else if id.starts_with(APIS) {
                let all = f.add_accumulated(main, NodeOp::ApiCollection, ALL_RANKS);
                f.nodes[all].parent = Some(root);
                new_children.push(all);
                let last = id.rsplit('.').next().unwrap_or("").to_string();
                let new_id = format!("{APIS}_Rank{}.{last}", main.rank);
                f.nodes[n].id = new_id.clone();
                f.set_children(all, vec![n]);
                f.nodes[n].parent = Some(all);
                main.map.insert(&new_id, n);
                main.map.remove(&id);
                for o in others.iter() {
                    let Some(on) = o.map.get(&id) else {
                        continue;
                    };
                    let oid = format!("{APIS}_Rank{}.{last}", o.rank);
                    f.nodes[on].id = oid.clone();
                    main.map.insert(&oid, on);
                    for s in f.nodes[on].children.clone() {
                        let old = f.nodes[s].id.clone();
                        let mut parts: Vec<String> = old.split('.').map(str::to_string).collect();
                        if parts.len() >= 2 {
                            parts[1].push_str(&format!("_rank{}", o.rank));
                        }
                        let new = parts.join(".");
                        f.rename_keys(s, &old, &new);
                        f.nodes[s].id = new.clone();
                        main.map.insert(&new, s);
                    }
                    f.nodes[all].children.push(on);
                    f.nodes[on].parent = Some(all);
                }
            } else {
                new_children.push(n);
            }
        }
        f.set_children(root, new_children);
    }

    /// `sort_merged_api_collection`: the rank collections of each `…_All_Ranks.k` by rank.
    fn sort_api_collections(&mut self, g: &MGraph) {
        let f = &mut self.forest;
        for n in f.nodes[g.root].children.clone() {
            if f.nodes[n].op == NodeOp::ApiCollection && f.nodes[n].id.starts_with(ALL_RANKS) {
                let mut subs = f.nodes[n].children.clone();
                subs.sort_by_key(|&s| rank_of_collection(&f.nodes[s].id));
                f.set_children(n, subs);
            }
        }
    }

    /// Merges the rank graphs of one side (`GraphMerger.merge_graph`).
    fn merge(&mut self, graphs: Vec<MGraph>) -> Result<Vec<MGraph>, ConvertError> {
        let p = self.params;
        let mut graphs = graphs;
        if p.tp == 1 && p.pp == 1 && p.rank_size == 1 {
            self.merge_api_collection(&mut graphs);
            return Ok(graphs);
        }
        let tp_only = p.tp == p.rank_size || (p.pp != p.rank_size && p.pp == 1);
        let pp_only = !tp_only && (p.pp == p.rank_size || p.tp == 1);
        if tp_only {
            let groups = self.tp_groups(&graphs)?;
            let mut out = Vec::new();
            for mut group in take_groups(graphs, &groups)? {
                self.merge_api_collection(&mut group);
                out.extend(self.merge_tp_graphs(group, &[]));
            }
            return Ok(out);
        }
        if pp_only {
            let groups = self.pp_groups(&graphs)?;
            let mut out = Vec::new();
            for mut group in take_groups(graphs, &groups)? {
                self.merge_api_collection(&mut group);
                out.extend(self.merge_pp_graphs(group));
            }
            return Ok(out);
        }
        let pp_groups = self.pp_groups(&graphs)?;
        let tp_groups = self.tp_groups(&graphs)?;
        let mapping: Vec<(i64, Vec<i64>)> = tp_groups
            .iter()
            .skip(1)
            .filter_map(|g| g.split_first().map(|(a, rest)| (*a, rest.to_vec())))
            .collect();
        if p.tp * p.pp == p.rank_size {
            // One model replica: TP across the merged pipelines.
            self.merge_api_collection(&mut graphs);
            let mut pp_results = Vec::new();
            for group in take_groups(graphs, &pp_groups)? {
                pp_results.extend(self.merge_pp_graphs(group));
            }
            let out = self.merge_tp_graphs(pp_results, &mapping);
            if let Some(first) = out.first() {
                self.sort_api_collections(first);
            }
            return Ok(out);
        }
        // Data parallel too: pipelines first, then each TP group of pipeline results.
        let mut pp_results: Vec<MGraph> = Vec::new();
        for mut group in take_groups(graphs, &pp_groups)? {
            self.merge_api_collection(&mut group);
            let merged = self.merge_pp_graphs(group);
            if let Some(first) = merged.into_iter().next() {
                match pp_results.iter_mut().find(|g| g.rank == first.rank) {
                    Some(slot) => *slot = first,
                    None => pp_results.push(first),
                }
            }
        }
        let mut out = Vec::new();
        for tp_group in &tp_groups {
            let mut list: Vec<MGraph> = Vec::new();
            for r in tp_group {
                if let Some(i) = pp_results.iter().position(|g| g.rank == *r) {
                    list.push(pp_results.swap_remove(i));
                }
            }
            if list.is_empty() {
                continue;
            }
            self.merge_api_collection(&mut list);
            let merged = self.merge_tp_graphs(list, &mapping);
            if let Some(first) = merged.first() {
                self.sort_api_collections(first);
            }
            out.extend(merged);
        }
        Ok(out)
    }
}

/// The rank number in `Apis_Between_Modules_Rank<r>.k`.
fn rank_of_collection(id: &str) -> Option<i64> {
    let rest = &id[id.find("_Rank")? + 5..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// `split_graph_results_by_groups`: the rank graphs of each group, in group order.
fn take_groups(graphs: Vec<MGraph>, groups: &[Vec<i64>]) -> Result<Vec<Vec<MGraph>>, ConvertError> {
    let mut slots: Vec<Option<MGraph>> = graphs.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        let mut list = Vec::with_capacity(group.len());
        for r in group {
            let slot = slots
                .iter_mut()
                .find(|s| s.as_ref().is_some_and(|g| g.rank == *r));
            match slot.and_then(Option::take) {
                Some(g) => list.push(g),
                None => {
                    return Err(ConvertError::Usage(format!(
                    "rank group {group:?} names rank {r}, which has no rank{r} folder (or is in \
                         two groups)"
                )))
                }
            }
        }
        out.push(list);
    }
    Ok(out)
}

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

/// The merged graphs of one side: the forest, the merged graphs, and the rank dumps.
struct MergedSide<'a> {
    merger: Merger<'a>,
    graphs: Vec<MGraph>,
    dumps: Vec<RankDump>,
    md5: Vec<bool>,
}

impl MergedSide<'_> {
    /// The `i`-th merged graph as a plain graph, with its dump, ready to pair.
    fn side(&self, i: usize) -> Side<'_> {
        let mg = &self.graphs[i];
        Side {
            dump: &self.dumps[mg.dump],
            md5: self.md5[mg.dump],
            graph: self.merger.forest.to_graph(mg),
        }
    }
}

fn merge_side<'a>(
    built: Vec<RankGraph>,
    params: &'a ParallelParams,
) -> Result<MergedSide<'a>, ConvertError> {
    let mut merger = Merger {
        forest: Forest::default(),
        params,
    };
    let mut graphs = Vec::with_capacity(built.len());
    let mut dumps = Vec::with_capacity(built.len());
    let mut md5 = Vec::with_capacity(built.len());
    for (i, rg) in built.into_iter().enumerate() {
        graphs.push(
            merger
                .forest
                .add_graph(rg.built.graph, rg.rank, rg.micro_steps, i),
        );
        dumps.push(rg.built.dump);
        md5.push(rg.built.md5);
    }
    let graphs = merger.merge(graphs)?;
    Ok(MergedSide {
        merger,
        graphs,
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
    if let crate::LayerMapping::File(path) = &opts.layer_mapping {
        return Err(ConvertError::Input {
            path: path.clone(),
            message: "layer mapping YAML files are not supported yet (bare -lm is)".into(),
        });
    }
    let (steps, step_list) = match plan::layout(opts)? {
        Layout::Files => {
            return Err(ConvertError::Input {
                path: opts.target.clone(),
                message: "parallel merge (--rank_size) needs a folder of rankN/ folders (or of \
                          stepN/ folders of them), not a single rank's dump"
                    .into(),
            })
        }
        Layout::Ranks => {
            let step = if compare {
                0
            } else {
                opts.target
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix("step"))
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(0)
            };
            let one = StepDirs {
                step,
                target: opts.target.clone(),
                golden: opts.golden.clone(),
            };
            (vec![one], vec![0])
        }
        Layout::Steps => {
            let steps = plan::common_steps(opts)?;
            let list = steps.iter().map(|s| s.step).collect();
            (steps, list)
        }
    };
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
        crate::stage::bytes_to_read(rank_dirs.iter().map(PathBuf::as_path)),
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
        std::fs::create_dir_all(&opts.output).map_err(|source| ConvertError::Output {
            path: opts.output.clone(),
            source,
        })?;
        let mut written: Vec<PathBuf> = Vec::new();
        for r in &ready {
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
            let manifest = Manifest::of(opts, &folders, steps.len(), s, &range, false);
            crate::part::write(&run, opts, &manifest, graphs, &config)
        }
    }
}

/// Every rank folder of every step, both sides (the run's fingerprint in a part's manifest);
/// a folder that cannot be listed is left out (building it reports the error).
fn step_folders(steps: &[StepDirs]) -> Vec<plan::Job> {
    let mut out = Vec::new();
    for s in steps {
        for dir in std::iter::once(&s.target).chain(&s.golden) {
            for (rank, target) in rank_folders(dir).unwrap_or_default() {
                out.push(plan::Job {
                    step: s.step,
                    rank,
                    target,
                    golden: None,
                });
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
        ranks: npu.graphs.iter().map(|g| g.rank).collect(),
    };
    match bench {
        None => {
            r.micro_steps = npu.graphs.first().map_or(1, |g| g.micro_steps);
            for mg in &npu.graphs {
                let graph = npu.merger.forest.to_graph(mg);
                let dump = &npu.dumps[mg.dump];
                if opts.json_output {
                    let raw = graph_ascend_dump::DumpFile::read(
                        &dump.dir.join("dump.json"),
                        &dump.confine,
                    )?;
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
        }
        Some(bench) => {
            if npu.graphs.len() != bench.graphs.len() {
                return Err(ConvertError::Usage(format!(
                    "parallel merge: the target merges into {} data-parallel graph(s) but the \
                     golden into {}; both sides need the same data parallelism \
                     (rank_size / (tp × pp))",
                    npu.graphs.len(),
                    bench.graphs.len()
                )));
            }
            let sides: Vec<(Side, Side, i64)> = (0..npu.graphs.len())
                .map(|i| (npu.side(i), bench.side(i), npu.graphs[i].rank))
                .collect();
            let compared: Vec<_> = sides
                .into_par_iter()
                .map(|(n, b, rank)| pair(opts, true, step, rank, n, b, &|| {}, run.cancel_flag()))
                .collect::<Result<_, _>>()?;
            for paired in compared {
                if r.task.is_empty() {
                    r.task = paired.task;
                    r.micro_steps = paired.micro_steps;
                }
                r.graphs.extend(paired.graphs);
            }
        }
    }
    run.tick(
        Stage::Comparing,
        format!("step {step}: merged graphs ready"),
    );
    Ok(r)
}

/// `_handle_api_collection_index` for merged graphs: each `Apis_Between_Modules_Rank<r>.k`
/// takes the worst of its APIs, then `…_All_Ranks.k` the worst of those.
pub(crate) fn all_ranks_index(g: &mut Graph) {
    let worst = |g: &Graph, n: usize| {
        g.children(n)
            .map(|c| g.nodes[c].precision_index().unwrap_or(0.0))
            .fold(0.0, f64::max)
    };
    for n in g.children(g.root).collect::<Vec<_>>() {
        if g.nodes[n].op == NodeOp::ApiCollection && g.id(n).starts_with(ALL_RANKS) {
            for s in g.children(n).collect::<Vec<_>>() {
                let w = worst(g, s);
                g.nodes[s].set_precision_index(Some(w));
            }
            let w = worst(g, n);
            g.nodes[n].set_precision_index(Some(w));
        }
    }
}

/// msprobe's `paging_by_micro_step(graph_b)` on merged graphs: root children get their batch
/// (and their matched golden nodes too); nodes without one inherit their parent's.
pub(crate) fn paging(npu: &mut Graph, bench: &mut Graph) -> i64 {
    if let Some(n) = npu.micro_step_num {
        return n + 1;
    }
    let mut batch = 0i64;
    let mut seen_backward = false;
    let mut batches = 0i64;
    for c in npu.children(npu.root).collect::<Vec<_>>() {
        let node = &npu.nodes[c];
        if node.op == NodeOp::Module {
            let id = npu.id(c);
            if id.contains(".forward.") && seen_backward {
                batch += 1;
                seen_backward = false;
            } else if id.contains(".backward.") {
                seen_backward = true;
            }
        }
        batches = batches.max(batch + 1);
        npu.nodes[c].set_micro_step_id(Some(batch));
        if let Some(last) = npu.nodes[c].matched_link().last() {
            if let Some(b) = bench.get(last) {
                bench.nodes[b].set_micro_step_id(Some(batch));
            }
        }
    }
    inherit(npu);
    let root = bench.root;
    for c in bench.children(root).collect::<Vec<_>>() {
        if bench.nodes[c].micro_step_id().is_none() {
            let v = bench
                .id(c)
                .rsplit('.')
                .next()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0);
            bench.nodes[c].set_micro_step_id(Some(v));
        }
    }
    inherit(bench);
    batches
}

fn inherit(g: &mut Graph) {
    let mut stack = vec![g.root];
    while let Some(n) = stack.pop() {
        let ms = g.nodes[n].micro_step_id();
        for c in g.children(n).collect::<Vec<_>>() {
            if g.nodes[c].micro_step_id().is_none() {
                g.nodes[c].set_micro_step_id(ms);
            }
            stack.push(c);
        }
    }
}

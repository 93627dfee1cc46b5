//! The conversion engine: msprobe dump folders → `.vis.db` (msprobe `graph_visualize`).
//!
//! Data flows one way: [`layout`] finds the rank folders, `graph_ascend_dump` reads them,
//! [`graph`] builds each rank's graph, [`matcher`] pairs target and golden nodes, [`compare`]
//! computes the per-tensor comparison and `precision_index`, [`overflow`] marks anomalies,
//! [`export`] turns graphs into rows, [`distributed`] links communication ops across ranks, and
//! the `graph_ascend_visdb` writer commits everything in one transaction and renames the file
//! into place. Ranks are processed in parallel (rayon).

pub mod compare;
pub mod distributed;
pub mod error;
pub mod export;
pub mod format;
pub mod graph;
pub mod layer_mapping;
pub mod layout;
pub mod matcher;
pub mod merge;
pub mod overflow;
pub mod pyjson;
pub mod timing;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use graph::DumpOps;
use graph_ascend_dump::{Construct, DumpFile, FastMap, StackMap};
use graph_ascend_visdb::bulk::BulkWriter;
use graph_ascend_visdb::writer::NodeRow;

pub use error::ConvertError;
use graph::Graph;
use layout::Layout;

/// `-lm`: none, bare (empty mapping) or a YAML file.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum LayerMapping {
    #[default]
    None,
    Bare,
    File(PathBuf),
}

/// The options of `msprobe graph_visualize` that this engine implements.
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// `-tp`: target ("NPU") dump folder.
    pub target: PathBuf,
    /// `-gp`: golden ("Bench") dump folder; compare mode when set.
    pub golden: Option<PathBuf>,
    /// `-o`: output folder (created if missing).
    pub output: PathBuf,
    /// `-lm`.
    pub layer_mapping: LayerMapping,
    /// `-oc`.
    pub overflow_check: bool,
    /// `-fm`.
    pub fuzzy_match: bool,
    /// `--rank_size/--tp/--pp/--vpp/--order`: empty, or the parallel layout of the target (and
    /// of the golden in a compare); see [`merge`].
    pub parallel: Vec<merge::ParallelParams>,
    /// `--file_type json` (merged builds only): JSON dump folders instead of a `.vis.db`.
    pub json_output: bool,
}

/// Stages reported to the progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Reading,
    Building,
    Comparing,
    Writing,
    Done,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Reading => "reading",
            Stage::Building => "building",
            Stage::Comparing => "comparing",
            Stage::Writing => "writing",
            Stage::Done => "done",
        }
    }
}

/// One progress report: `done` of `total` units of the whole conversion.
#[derive(Debug, Clone)]
pub struct Progress {
    pub stage: Stage,
    pub done: u64,
    pub total: u64,
    pub message: String,
}

impl Progress {
    /// One machine-readable line: `{"stage": …, "done": …, "total": …, "percent": …, "message": …}`.
    pub fn json_line(&self) -> String {
        let percent = if self.total == 0 {
            0.0
        } else {
            (self.done as f64 * 1000.0 / self.total as f64).round() / 10.0
        };
        serde_json::json!({
            "stage": self.stage.name(),
            "done": self.done,
            "total": self.total,
            "percent": percent,
            "message": self.message,
        })
        .to_string()
    }
}

/// Where progress goes; called from worker threads.
pub type ProgressFn<'a> = &'a (dyn Fn(&Progress) + Sync);

/// One unit of work: one rank of one step (one side or both).
struct Job {
    step: i64,
    rank: i64,
    target: PathBuf,
    golden: Option<PathBuf>,
}

/// The finished graphs of one job, ready to be written.
struct JobOutput {
    graphs: Vec<(Graph, export::ExportContext)>,
    micro_steps: i64,
    task: String,
}

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
        return merge::convert_merged(opts, progress, cancel);
    }
    let check = || {
        if cancel.load(Ordering::Relaxed) {
            Err(ConvertError::Cancelled)
        } else {
            Ok(())
        }
    };
    let _total_phase = timing::phase(|| "total".into());
    let (jobs, layout, rank_list, step_list) = plan(opts)?;
    let total = jobs.len() as u64 * 2 + 1;
    let counter = std::sync::atomic::AtomicU64::new(0);
    let tick = |stage: Stage, message: String| {
        let done = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        progress(&Progress {
            stage,
            done,
            total,
            message,
        });
    };
    progress(&Progress {
        stage: Stage::Reading,
        done: 0,
        total,
        message: format!("{} graph(s) to convert", jobs.len()),
    });
    if let Some(warning) = layer_mapping::preflight(&opts.layer_mapping)? {
        progress(&Progress {
            stage: Stage::Reading,
            done: 0,
            total,
            message: format!("warning: {warning}"),
        });
    }
    let outputs: Vec<JobOutput> = jobs
        .par_iter()
        .map(|job| {
            check()?;
            let out = run_job(opts, job, &tick);
            check()?;
            tick(
                Stage::Comparing,
                format!("step {} rank {} done", job.step, job.rank),
            );
            out
        })
        .collect::<Result<_, _>>()?;

    let micro_steps = outputs.first().map_or(1, |o| o.micro_steps);
    let task = outputs.first().map(|o| o.task.clone()).unwrap_or_default();
    let compare = opts.golden.is_some();
    let config = export::config_row(
        compare,
        &task,
        micro_steps,
        opts.overflow_check,
        &rank_list,
        &step_list,
    );

    std::fs::create_dir_all(&opts.output).map_err(|source| ConvertError::Output {
        path: opts.output.clone(),
        source,
    })?;
    let kind = if compare { "compare" } else { "build" };
    let dest = opts.output.join(format!("{kind}_{}.vis.db", timestamp()));
    let write_phase = timing::phase(|| "write rows".into());
    let writer = BulkWriter::create(&dest)?;
    let plans: Vec<Vec<export::GraphPlan>> = outputs
        .iter()
        .map(|o| {
            o.graphs
                .iter()
                .map(|(g, ctx)| export::plan_graph(g, ctx))
                .collect()
        })
        .collect();
    // Communication links need every rank's Distributed.* rows; they are few, so they are made
    // (and linked) first, and every row leaves for the file complete.
    let links = if layout == Layout::Files {
        FastMap::default()
    } else {
        distributed_links(&outputs, &plans, opts.overflow_check)
    };
    // Rows are made in parallel, chunk by chunk, while a writer thread writes them into the
    // file's pages (`BulkWriter`: the SQLite format without SQLite's one-row-at-a-time inserts
    // and index builds). Each graph is freed as soon as its rows
    // are made.
    let (tx, rx) = std::sync::mpsc::sync_channel::<WriteMsg>(2);
    let path = std::thread::scope(|scope| {
        let writer_thread = scope.spawn(move || write_rows(writer, rx, &config));
        let produced = (|| -> Result<(), ConvertError> {
            for (out, plans) in outputs.into_iter().zip(plans) {
                for ((mut graph, ctx), mut plan) in out.graphs.into_iter().zip(plans) {
                    check()?;
                    let stacks = std::mem::take(&mut plan.stacks);
                    if tx.send(WriteMsg::Stacks(stacks)).is_err() {
                        return Ok(());
                    }
                    let n = plan.order.len();
                    let mut lo = 0;
                    while lo < n {
                        check()?;
                        let hi = (lo + ROW_CHUNK).min(n);
                        let rows: Vec<NodeRow> = (lo..hi)
                            .into_par_iter()
                            .map(|k| {
                                let mut row = export::node_row(&graph, &ctx, &plan, k);
                                if let Some(link) = links.get(&row.id) {
                                    row.matched_distributed.clone_from(link);
                                }
                                row
                            })
                            .collect();
                        if tx.send(WriteMsg::Nodes(rows)).is_err() {
                            // The writer failed: its error is returned below.
                            return Ok(());
                        }
                        // A node's items (most of a graph's memory) are only in its own row:
                        // free them now, to make room for the writer's index entries.
                        for &n in &plan.order[lo..hi] {
                            let node = &mut graph.nodes[n];
                            node.input = Vec::new();
                            node.output = Vec::new();
                        }
                        lo = hi;
                    }
                    drop(graph);
                }
            }
            check()?;
            let _ = tx.send(WriteMsg::Finish);
            Ok(())
        })();
        drop(tx);
        let written = writer_thread.join().unwrap_or_else(|_| {
            Err(ConvertError::Usage(
                "internal: the writer thread panicked".into(),
            ))
        });
        produced?;
        written
    })?;
    write_phase.done();
    tick(Stage::Done, format!("written {}", path.display()));
    Ok(path)
}

/// `matched_distributed` of every linked `Distributed.*` row, by row id (msprobe's
/// `distributed_analyzer`, across all ranks and steps of the conversion).
fn distributed_links(
    outputs: &[JobOutput],
    plans: &[Vec<export::GraphPlan>],
    overflow_check: bool,
) -> FastMap<String, String> {
    let mut rows: Vec<NodeRow> = Vec::new();
    for (out, plans) in outputs.iter().zip(plans) {
        for ((graph, ctx), plan) in out.graphs.iter().zip(plans) {
            for (k, &n) in plan.order.iter().enumerate() {
                if graph.nodes[n].id.starts_with("Distributed") {
                    rows.push(export::node_row(graph, ctx, plan, k));
                }
            }
        }
    }
    distributed::link(&mut rows, overflow_check);
    rows.into_iter()
        .filter(|r| r.matched_distributed != "{}")
        .map(|r| (r.id, r.matched_distributed))
        .collect()
}

/// Rows formatted per parallel chunk (and per message to the writer thread).
const ROW_CHUNK: usize = 1024;

/// What the row producer sends to the writer thread.
enum WriteMsg {
    Nodes(Vec<NodeRow>),
    Stacks(Vec<(String, String)>),
    /// Every row was sent: index, commit. A channel closed without it means the run
    /// stopped (cancelled or failed) and the temporary file is dropped.
    Finish,
}

/// The writer thread: inserts what it receives, then writes the config row, builds the
/// indexes, commits and renames.
fn write_rows(
    mut writer: BulkWriter,
    rx: std::sync::mpsc::Receiver<WriteMsg>,
    config: &graph_ascend_visdb::writer::ConfigRow,
) -> Result<PathBuf, ConvertError> {
    let mut finished = false;
    for msg in rx {
        match msg {
            WriteMsg::Nodes(rows) => writer.insert_nodes(&rows)?,
            WriteMsg::Stacks(stacks) => {
                writer.insert_stacks(stacks.iter().map(|(a, b)| (a.as_str(), b.as_str())))?;
            }
            WriteMsg::Finish => {
                finished = true;
                break;
            }
        }
    }
    if !finished {
        return Err(ConvertError::Cancelled);
    }
    writer.insert_config(config)?;
    let p = timing::phase(|| "indexes + commit".into());
    let path = writer.finish()?;
    p.done();
    Ok(path)
}

type Plan = (Vec<Job>, Layout, Vec<i64>, Vec<i64>);

fn plan(opts: &ConvertOptions) -> Result<Plan, ConvertError> {
    let layout = layout::classify(&opts.target)?;
    if let Some(g) = &opts.golden {
        let gl = layout::classify(g)?;
        if gl != layout {
            return Err(ConvertError::Usage(format!(
                "the directory structures of {} and {} are inconsistent",
                opts.target.display(),
                g.display()
            )));
        }
    }
    let mut jobs = Vec::new();
    let rank_jobs = |step: i64, t: &Path, g: Option<&Path>, jobs: &mut Vec<Job>| {
        let tr = layout::ranks(t)?;
        let ranks: Vec<(i64, PathBuf, Option<PathBuf>)> = match g {
            None => tr.into_iter().map(|(r, p)| (r, p, None)).collect(),
            Some(g) => {
                let gr = layout::ranks(g)?;
                let both: Vec<_> = tr
                    .into_iter()
                    .filter_map(|(r, p)| {
                        gr.iter()
                            .find(|(r2, _)| *r2 == r)
                            .map(|(_, gp)| (r, p, Some(gp.clone())))
                    })
                    .collect();
                if both.is_empty() {
                    return Err(ConvertError::Usage(format!(
                        "{} and {} have no rank in common",
                        t.display(),
                        g.display()
                    )));
                }
                both
            }
        };
        for (rank, target, golden) in ranks {
            jobs.push(Job {
                step,
                rank,
                target,
                golden,
            });
        }
        Ok::<(), ConvertError>(())
    };
    match layout {
        Layout::Files => jobs.push(Job {
            step: 0,
            rank: 0,
            target: opts.target.clone(),
            golden: opts.golden.clone(),
        }),
        Layout::Ranks => rank_jobs(0, &opts.target, opts.golden.as_deref(), &mut jobs)?,
        Layout::Steps => {
            let ts = layout::steps(&opts.target)?;
            let gs = match &opts.golden {
                Some(g) => Some(layout::steps(g)?),
                None => None,
            };
            for (step, tdir) in ts {
                let gdir = match &gs {
                    None => None,
                    Some(gs) => match gs.iter().find(|(s, _)| *s == step) {
                        Some((_, d)) => Some(d.clone()),
                        None => continue,
                    },
                };
                rank_jobs(step, &tdir, gdir.as_deref(), &mut jobs)?;
            }
            if jobs.is_empty() {
                return Err(ConvertError::Usage(
                    "no step in common between the two dumps".into(),
                ));
            }
        }
    }
    let mut ranks: Vec<i64> = jobs.iter().map(|j| j.rank).collect();
    ranks.sort();
    ranks.dedup();
    let mut steps: Vec<i64> = jobs.iter().map(|j| j.step).collect();
    steps.sort();
    steps.dedup();
    Ok((jobs, layout, ranks, steps))
}

/// A rank folder read from disk.
pub struct RankDump {
    pub dir: PathBuf,
    /// dump.json's header (task, framework, …); its entries are in `ops`.
    pub dump: DumpFile,
    pub ops: DumpOps,
    pub construct: Construct,
    pub stacks: StackMap,
}

impl RankDump {
    /// Reads the three mandatory files of a rank folder (overflow levels under `overflow_check`).
    pub fn read(dir: &Path, overflow_check: bool) -> Result<RankDump, ConvertError> {
        RankDump::read_parts(dir, overflow_check, false).map(|(dump, _)| dump)
    }

    /// [`RankDump::read`] and the folder's graph: its skeleton is made from construct.json and
    /// stack.json while dump.json is still being read, then the items are attached.
    pub fn read_and_build(
        dir: &Path,
        overflow_check: bool,
    ) -> Result<(RankDump, Graph), ConvertError> {
        let (mut dump, skeleton) = RankDump::read_parts(dir, overflow_check, true)?;
        let p = timing::phase(|| format!("attach items {}", dir.display()));
        let skeleton = match skeleton {
            Some(s) => s,
            None => Graph::skeleton(&dump.construct, &dump.stacks),
        };
        let graph = skeleton.attach(&mut dump.ops, &dump.stacks);
        p.done();
        Ok((dump, graph))
    }

    fn read_parts(
        dir: &Path,
        overflow_check: bool,
        skeleton: bool,
    ) -> Result<(RankDump, Option<graph::Skeleton>), ConvertError> {
        let file = |name: &str| {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(ConvertError::Input {
                    path: p,
                    message:
                        "missing (every rank folder needs dump.json, construct.json and stack.json)"
                            .into(),
                })
            }
        };
        let (dump_p, construct_p, stack_p) = (
            file("dump.json")?,
            file("construct.json")?,
            file("stack.json")?,
        );
        // The two small files are read (and the graph's skeleton made) while dump.json is.
        let (dump_side, (construct, stacks, sk)) = rayon::join(
            || DumpOps::read(&dump_p, overflow_check),
            || {
                let construct = Construct::read(&construct_p);
                let stacks = StackMap::read(&stack_p);
                let sk = match (&construct, &stacks) {
                    (Ok(c), Ok(s)) if skeleton => {
                        let p = timing::phase(|| format!("skeleton {}", dir.display()));
                        let sk = Graph::skeleton(c, s);
                        p.done();
                        Some(sk)
                    }
                    _ => None,
                };
                (construct, stacks, sk)
            },
        );
        let construct = construct?;
        let (dump, ops) = dump_side?;
        let stacks = stacks?;
        let dump = RankDump {
            dir: dir.to_path_buf(),
            dump,
            ops,
            construct,
            stacks,
        };
        Ok((dump, sk))
    }

    /// The tensor folder msprobe records in `dump_data_dir` (`None` for statistics dumps):
    /// the recorded one when it is this rank folder's, else `<rank folder>/dump_tensor_data`
    /// (dumps moved to another place).
    pub fn tensor_dir(&self) -> Option<String> {
        let d = self
            .dump
            .dump_data_dir
            .as_deref()
            .filter(|d| !d.is_empty())?;
        let recorded = Path::new(d).parent().and_then(|p| p.canonicalize().ok());
        let here = self.dir.canonicalize().ok();
        if recorded.is_some() && recorded == here {
            Some(d.to_string())
        } else {
            Some(
                self.dir
                    .join("dump_tensor_data")
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    }
}

fn run_job(
    opts: &ConvertOptions,
    job: &Job,
    tick: &(dyn Fn(Stage, String) + Sync),
) -> Result<JobOutput, ConvertError> {
    // Both sides are read and built at once (the two halves of a compare are independent).
    let (npu_side, bench_side) = rayon::join(
        || read_and_build(opts, &job.target),
        || job.golden.as_deref().map(|g| read_and_build(opts, g)),
    );
    let (npu, mut npu_graph, npu_md5) = npu_side?;
    tick(
        Stage::Building,
        format!(
            "built {} ({} nodes)",
            job.target.display(),
            npu_graph.nodes.len()
        ),
    );
    let ctx = |data_source, dump: &RankDump, keep_md5| export::ExportContext {
        data_source,
        step: job.step,
        rank: job.rank,
        dump_data_dir: dump.tensor_dir(),
        keep_md5,
    };
    match &job.golden {
        None => {
            let micro_steps = npu_graph.paging_by_micro_step(None);
            let c = ctx(graph_ascend_visdb::schema::NPU, &npu, false);
            Ok(JobOutput {
                graphs: vec![(npu_graph, c)],
                micro_steps,
                task: String::new(),
            })
        }
        Some(_) => {
            let Some(bench_side) = bench_side else {
                return Err(ConvertError::Usage("internal: golden side not read".into()));
            };
            let (bench, mut bench_graph, bench_md5) = bench_side?;
            let mode = compare::CompareMode::detect(&npu.dump, &bench.dump, npu_md5, bench_md5)?;
            let p = timing::phase(|| "match".into());
            matcher::match_graphs(opts, &npu, &bench, &mut npu_graph, &mut bench_graph)?;
            p.done();
            let p = timing::phase(|| "compare".into());
            compare::compare_graphs(mode, &npu, &bench, &mut npu_graph, &bench_graph)?;
            p.done();
            let micro_steps = npu_graph.paging_by_micro_step(Some(&mut bench_graph));
            let keep_md5 = mode == compare::CompareMode::Md5;
            Ok(JobOutput {
                graphs: vec![
                    (
                        npu_graph,
                        ctx(graph_ascend_visdb::schema::NPU, &npu, keep_md5),
                    ),
                    (
                        bench_graph,
                        ctx(graph_ascend_visdb::schema::BENCH, &bench, keep_md5),
                    ),
                ],
                micro_steps,
                task: mode.task_name().to_string(),
            })
        }
    }
}

/// Reads a rank folder and builds its graph (with overflow levels under `-oc`); the graph takes
/// the dump's items, and the stacks are freed once the nodes hold theirs. Also returns whether
/// the dump is an md5 one.
pub(crate) fn read_and_build(
    opts: &ConvertOptions,
    dir: &Path,
) -> Result<(RankDump, Graph, bool), ConvertError> {
    let p = timing::phase(|| format!("read and build {}", dir.display()));
    let (mut dump, graph) = RankDump::read_and_build(dir, opts.overflow_check)?;
    p.done();
    let md5 = dump.ops.md5;
    dump.ops = DumpOps::default();
    dump.stacks = StackMap::default();
    Ok((dump, graph, md5))
}

/// `YYYYmmddHHMMSS` of now (UTC), as in msprobe's output names.
pub(crate) fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

//! Conversion on demand: dump folders under the logdir → a new `.vis.db`, inside the sidecar.
//!
//! msprobe's plugin ran `msprobe graph_visualize` as a subprocess, one at a time, with one
//! global progress that any page saw (and that said "building" forever before the first build).
//! Here each conversion is a job with an id, run by the converter engine
//! (`graph_ascend_convert::convert`) on its own thread; at most `max` run at once, more are
//! refused with a clear error. Progress goes through a `tokio::sync::watch` channel, so any
//! number of event streams can follow one job and a late subscriber first gets the latest
//! state. Each client's newest job answers msprobe's id-less `getConvertProgress`.
//!
//! The engine writes into a hidden staging folder under the output folder (the catalog skips
//! hidden folders); only a successful, not cancelled job's file is moved into the output folder,
//! so the catalog never lists a half-written or cancelled result; a finished file whose name is
//! taken in the output folder (another conversion into the same folder) gets the next numbered
//! name, `_2`, `_3`, … as the CLI's ([`graph_ascend_visdb::files::persist_new`]). Cancelling
//! frees the job's slot at once and asks the engine to stop: every stage looks at the flag often
//! (the layer mapping's reading and matching too), so it returns within a second. The job says
//! `cancelling` (stage) meanwhile and `cancelled` only once the engine has returned and its
//! output is deleted. Until then it still counts against a hard bound of twice the limit, so
//! that starting and cancelling cannot pile up engines. An engine
//! that panics ends its job as failed (the panic's message is the job's error) and frees its
//! slot: no input can leave a job "building" forever or block the conversions of others.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use graph_ascend_convert::{ConvertOptions, LayerMapping, Progress};
use graph_ascend_proto as pb;
use tokio::sync::watch;

use crate::paths::{self, Kind};

/// Conversions that may run at once unless the server is told otherwise.
pub const DEFAULT_MAX_CONVERSIONS: usize = 2;
/// Finished jobs kept for late viewers.
const KEEP_FINISHED: usize = 64;
pub use graph_ascend_visdb::stale::STAGING_PREFIX;

/// The stage a cancelled job shows until its engine has returned.
pub const CANCELLING: &str = "cancelling";

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Building,
    Done,
    Error,
    Cancelled,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Building => "building",
            Status::Done => "done",
            Status::Error => "error",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn is_final(self) -> bool {
        self != Status::Building
    }
}

/// What viewers of a job see.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub progress: i32,
    pub status: Status,
    pub errors: Vec<String>,
    /// The output file relative to the logdir, once done.
    pub output_file: Option<String>,
    /// What the engine measured last.
    pub measured: Measured,
}

/// The engine's last measures: bytes read, rows written, the time left (see
/// [`graph_ascend_convert::Progress`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    pub stage: &'static str,
    pub bytes_read: u64,
    pub bytes_total: u64,
    pub rows_written: u64,
    pub rows_total: u64,
    pub eta_secs: Option<f64>,
}

impl Measured {
    fn of(p: &Progress) -> Measured {
        Measured {
            stage: p.stage.name(),
            bytes_read: p.bytes_read,
            bytes_total: p.bytes_total,
            rows_written: p.rows_written,
            rows_total: p.rows_total,
            // Whole tenths of a second: a finer estimate is noise, and every change is an event.
            eta_secs: p.eta_secs.map(|s| (s * 10.0).round() / 10.0),
        }
    }
}

impl Snapshot {
    pub fn to_message(&self, job_id: &str) -> pb::ConvertProgress {
        pb::ConvertProgress {
            progress: self.progress,
            status: self.status.name().to_owned(),
            error: self.errors.clone(),
            job_id: Some(job_id.to_owned()),
            output_file: self.output_file.clone(),
            bytes_read: self.measured.bytes_read as f64,
            bytes_total: self.measured.bytes_total as f64,
            rows_written: self.measured.rows_written as f64,
            rows_total: self.measured.rows_total as f64,
            eta_seconds: self.measured.eta_secs,
            stage: self.measured.stage.to_owned(),
        }
    }
}

/// One conversion.
pub struct Job {
    pub id: String,
    cancelled: AtomicBool,
    /// Whether the job still holds one of the table's slots (until it ends or is cancelled).
    holds_slot: AtomicBool,
    state: watch::Sender<Snapshot>,
}

impl Job {
    /// Follows the job's state.
    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.state.subscribe()
    }

    /// The state now.
    pub fn snapshot(&self) -> Snapshot {
        self.state.borrow().clone()
    }

    fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        self.state.send_if_modified(|s| {
            if s.status.is_final() {
                return false;
            }
            let before = s.clone();
            f(s);
            *s != before
        });
    }
}

/// Why a conversion could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Path(#[from] paths::PathError),
    #[error("{0}")]
    Invalid(String),
    #[error(
        "{running} conversions are already running (the limit is {max}); try again when one ends"
    )]
    Busy { running: usize, max: usize },
    #[error(
        "{running} conversions, some of them cancelled, are still finishing; try again when \
         one ends"
    )]
    Draining { running: usize },
    #[error("cannot prepare the output folder {path}: {source}")]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Default)]
struct Table {
    jobs: HashMap<String, Arc<Job>>,
    /// Ids in start order (oldest first), to drop old finished jobs.
    order: Vec<String>,
    newest_by_client: HashMap<String, String>,
    next: u64,
}

/// The converter engine a job runs: [`graph_ascend_convert::convert_cancellable`] (tests give
/// one that fails in ways the real engine should not, to check that the job table survives).
type Engine = fn(
    &ConvertOptions,
    graph_ascend_convert::ProgressFn,
    &AtomicBool,
) -> Result<PathBuf, graph_ascend_convert::ConvertError>;

/// The job table.
pub struct Conversions {
    engine: Engine,
    max: usize,
    table: Mutex<Table>,
    /// Engine threads still working (a cancelled job's thread counts until it returns).
    active: Arc<std::sync::atomic::AtomicUsize>,
    /// Jobs building and not cancelled: what `max` limits.
    slots: Arc<std::sync::atomic::AtomicUsize>,
}

/// A validated request.
struct Plan {
    options: ConvertOptions,
    /// The output folder (inside the logdir).
    output_dir: PathBuf,
    /// The staging folder the engine writes into.
    staging: PathBuf,
    /// Whether the output folder did not exist before (it is removed again if nothing lands).
    new_output: bool,
}

fn validate(logdir: &Path, req: &pb::ConvertRequest, id: &str) -> Result<Plan, StartError> {
    let parallel = parallel_params(req)?;
    let target = paths::resolve(logdir, "npu_path", &req.npu_path, Kind::Dir)?;
    let golden = if req.bench_path.trim().is_empty() {
        None
    } else {
        Some(paths::resolve(
            logdir,
            "bench_path",
            &req.bench_path,
            Kind::Dir,
        )?)
    };
    let layer_mapping = if req.layer_mapping.trim().is_empty() {
        LayerMapping::None
    } else {
        LayerMapping::File(paths::resolve(
            logdir,
            "layer_mapping",
            &req.layer_mapping,
            Kind::File,
        )?)
    };
    // Every file the engine will open by name must resolve inside the logdir too.
    paths::check_tree(logdir, "npu_path", &req.npu_path, &target)?;
    if let Some(golden) = &golden {
        paths::check_tree(logdir, "bench_path", &req.bench_path, golden)?;
    }
    let output_dir = paths::resolve(logdir, "output_path", &req.output_path, Kind::NewDir)?;
    let staging = output_dir.join(format!(
        "{STAGING_PREFIX}{}.{id}",
        graph_ascend_visdb::stale::owner_tag()
    ));
    let new_output = !output_dir.exists();
    Ok(Plan {
        new_output,
        options: ConvertOptions {
            target,
            golden,
            output: staging.clone(),
            layer_mapping,
            overflow_check: req.overflow_check,
            fuzzy_match: req.fuzzy_match,
            parallel,
            json_output: false,
            // Every file the engine opens must resolve inside the logdir when it is opened:
            // the tree check above cannot see a link swapped in later.
            confine: graph_ascend_dump::Confine::under(logdir)
                .map_err(|e| StartError::Invalid(e.to_string()))?,
        },
        output_dir,
        staging,
    })
}

/// The page's parallel-merge fields (`is_parallel_merge`, `parallel_merge.npu/bench`) → the
/// engine's layouts (one for a build, target and golden for a compare), as msprobe's plugin
/// turns them into `--rank_size/--tp/--pp/--vpp/--order` (a 0 or empty value means the flag's
/// default).
fn parallel_params(
    req: &pb::ConvertRequest,
) -> Result<Vec<graph_ascend_convert::ParallelParams>, StartError> {
    use graph_ascend_convert::parallel::{ParallelParams, DEFAULT_ORDER};
    if !req.is_parallel_merge {
        return Ok(Vec::new());
    }
    let compare = !req.bench_path.trim().is_empty();
    let pm = req.parallel_merge.as_ref();
    let one = |p: Option<&pb::ParallelParams>, field: &str| -> Result<ParallelParams, StartError> {
        let p = p.ok_or_else(|| {
            StartError::Invalid(format!(
                "parallel_merge.{field}: the parallel layout is missing"
            ))
        })?;
        let order = p.order.trim();
        Ok(ParallelParams {
            rank_size: i64::from(p.rank_size),
            tp: i64::from(p.tp),
            pp: i64::from(p.pp),
            vpp: if p.vpp == 0 { 1 } else { i64::from(p.vpp) },
            order: if order.is_empty() {
                DEFAULT_ORDER.to_string()
            } else {
                order.to_string()
            },
        })
    };
    let mut out = vec![one(pm.and_then(|m| m.npu.as_ref()), "npu")?];
    if compare {
        out.push(one(pm.and_then(|m| m.bench.as_ref()), "bench")?);
    }
    Ok(out)
}

/// Percent of a progress report; 100 only when the job is done.
fn percent(p: &Progress) -> i32 {
    if p.total == 0 {
        return 0;
    }
    ((p.done.min(p.total) * 100 / p.total) as i32).min(99)
}

impl Conversions {
    pub fn new(max: usize) -> Conversions {
        Conversions {
            engine: graph_ascend_convert::convert_cancellable,
            max: max.max(1),
            table: Mutex::new(Table::default()),
            active: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            slots: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        }
    }

    /// Gives back the slot of `job` if it still holds one.
    fn release_slot(slots: &std::sync::atomic::AtomicUsize, job: &Job) {
        if job.holds_slot.swap(false, Ordering::SeqCst) {
            slots.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// How many engine runs are in progress (cancelled ones until their engine returns).
    pub fn running(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// A job by id.
    pub fn job(&self, id: &str) -> Option<Arc<Job>> {
        crate::sync::lock(&self.table).jobs.get(id).cloned()
    }

    /// The newest job `client` started; for a client that started none (msprobe's page opens
    /// its progress stream with `EventSource`, which sends no client header), the newest job
    /// of all, as msprobe's single global progress.
    pub fn newest(&self, client: &str) -> Option<Arc<Job>> {
        let t = crate::sync::lock(&self.table);
        t.newest_by_client
            .get(client)
            .or_else(|| t.order.last())
            .and_then(|id| t.jobs.get(id))
            .cloned()
    }

    /// Checks a request and starts its job on a thread of its own.
    pub fn start(
        &self,
        logdir: &Path,
        client: &str,
        req: &pb::ConvertRequest,
    ) -> Result<Arc<Job>, StartError> {
        let mut table = crate::sync::lock(&self.table);
        let building = self.slots.load(Ordering::SeqCst);
        if building >= self.max {
            return Err(StartError::Busy {
                running: building,
                max: self.max,
            });
        }
        let running = self.running();
        if running >= 2 * self.max {
            return Err(StartError::Draining { running });
        }
        table.next += 1;
        let id = format!("c{}-{}", std::process::id(), table.next);
        let plan = validate(logdir, req, &id)?;
        graph_ascend_visdb::stale::remove_stale(&plan.output_dir, STAGING_PREFIX);
        std::fs::create_dir_all(&plan.staging).map_err(|source| StartError::Output {
            path: plan.staging.clone(),
            source,
        })?;
        let (tx, _rx) = watch::channel(Snapshot {
            progress: 0,
            status: Status::Building,
            errors: Vec::new(),
            output_file: None,
            measured: Measured::default(),
        });
        let job = Arc::new(Job {
            id: id.clone(),
            cancelled: AtomicBool::new(false),
            holds_slot: AtomicBool::new(true),
            state: tx,
        });
        self.slots.fetch_add(1, Ordering::SeqCst);
        table.jobs.insert(id.clone(), job.clone());
        table.order.push(id.clone());
        table.newest_by_client.insert(client.to_owned(), id.clone());
        // Drop the oldest finished jobs beyond the limit.
        while table.order.len() > KEEP_FINISHED + self.max {
            let Some(pos) = table.order.iter().position(|i| {
                table
                    .jobs
                    .get(i)
                    .is_none_or(|j| j.snapshot().status.is_final())
            }) else {
                break;
            };
            let old = table.order.remove(pos);
            table.jobs.remove(&old);
            table.newest_by_client.retain(|_, v| *v != old);
        }
        drop(table);
        let runner = job.clone();
        let logdir = logdir.to_path_buf();
        let active = self.active.clone();
        let slots = self.slots.clone();
        active.fetch_add(1, Ordering::SeqCst);
        let engine = self.engine;
        let spawned = std::thread::Builder::new()
            .name(format!("convert-{id}"))
            .spawn(move || {
                let (staging, output) = (plan.staging.clone(), plan.output_dir.clone());
                let new_output = plan.new_output;
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run(&runner, &logdir, plan, engine)
                }));
                if let Err(panic) = ran {
                    let _ = std::fs::remove_dir_all(&staging);
                    if new_output {
                        let _ = std::fs::remove_dir(&output);
                    }
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    tracing::error!("conversion {} panicked: {what}", runner.id);
                    runner.update(|s| {
                        s.status = Status::Error;
                        s.errors
                            .push(format!("the converter failed unexpectedly: {what}"));
                    });
                }
                Self::release_slot(&slots, &runner);
                active.fetch_sub(1, Ordering::SeqCst);
                // Said only now that the engine has returned and its output is gone.
                if runner.cancelled.load(Ordering::SeqCst) {
                    runner.update(|s| s.status = Status::Cancelled);
                }
            });
        if let Err(e) = spawned {
            self.active.fetch_sub(1, Ordering::SeqCst);
            Self::release_slot(&self.slots, &job);
            job.update(|s| {
                s.status = Status::Error;
                s.errors
                    .push(format!("cannot start the conversion thread: {e}"));
            });
        }
        Ok(job)
    }

    /// Cancels a building job: its slot is free at once, its output never appears, and it
    /// ends `cancelled` once its engine has returned (stage `cancelling` until then). Returns
    /// false for an unknown or already finished job.
    pub fn cancel(&self, id: &str) -> bool {
        let Some(job) = self.job(id) else {
            return false;
        };
        if job.snapshot().status.is_final() {
            return false;
        }
        job.cancelled.store(true, Ordering::SeqCst);
        job.update(|s| s.measured.stage = CANCELLING);
        Self::release_slot(&self.slots, &job);
        true
    }
}

/// The job's thread: runs the engine, then publishes or discards its output.
fn run(job: &Job, logdir: &Path, plan: Plan, engine: Engine) {
    let report = |p: &Progress| {
        if job.cancelled.load(Ordering::Relaxed) {
            return;
        }
        let pct = percent(p);
        job.update(|s| {
            s.progress = s.progress.max(pct);
            // Reports come from several threads: keep the furthest measures.
            let m = Measured::of(p);
            if m.bytes_read >= s.measured.bytes_read && m.rows_written >= s.measured.rows_written {
                s.measured = m;
            }
        });
    };
    let result = engine(&plan.options, &report, &job.cancelled);
    let published = match result {
        Ok(written) if !job.cancelled.load(Ordering::SeqCst) => publish(&written, &plan.output_dir)
            .map_err(|e| {
                format!(
                    "cannot move {} into {}: {e}",
                    written.display(),
                    plan.output_dir.display()
                )
            }),
        // Cancelled: whatever the engine says (done, or stopped), nothing is published.
        _ if job.cancelled.load(Ordering::SeqCst) => Err(String::new()),
        Ok(_) => Err(String::new()),
        Err(e) => Err(e.to_string()),
    };
    // The staging folder goes before anyone is told the job ended.
    if let Err(e) = std::fs::remove_dir_all(&plan.staging) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("cannot remove {}: {e}", plan.staging.display());
        }
    }
    match published {
        Ok(dest) if job.cancelled.load(Ordering::SeqCst) => {
            // Cancelled while the file was being moved: take it back out.
            let _ = std::fs::remove_file(&dest);
        }
        Ok(dest) => {
            let root = logdir
                .canonicalize()
                .unwrap_or_else(|_| logdir.to_path_buf());
            let rel = dest
                .strip_prefix(&root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| dest.to_string_lossy().into_owned());
            job.update(|s| {
                s.progress = 100;
                s.status = Status::Done;
                s.output_file = Some(rel);
            });
        }
        // Cancelled: the thread says so once this returns.
        Err(msg) if msg.is_empty() => remove_if_new(&plan),
        Err(msg) => {
            remove_if_new(&plan);
            job.update(|s| {
                s.status = Status::Error;
                s.errors.push(msg);
            })
        }
    }
}

/// Removes an output folder this job created, if nothing landed in it.
fn remove_if_new(plan: &Plan) {
    if plan.new_output {
        let _ = std::fs::remove_dir(&plan.output_dir);
    }
}

/// Moves a finished file from staging into the output folder (same file system: a rename),
/// under the next numbered name (`_2`, …) when its name is taken, as the CLI does; never over a
/// file. Returns the name taken.
fn publish(written: &Path, output_dir: &Path) -> std::io::Result<PathBuf> {
    let name = written
        .file_name()
        .ok_or_else(|| std::io::Error::other("the engine returned a path without a file name"))?;
    let temp = tempfile::TempPath::try_from_path(written)?;
    graph_ascend_visdb::files::persist_new(temp, &output_dir.join(name))
}

/// msprobe's `loadConvertedGraphData`: folders (candidate dumps) and `*.yaml` files under the
/// logdir, four levels deep, relative to it. Unlike msprobe, an unreadable entry or a broken
/// symlink is skipped instead of failing the whole listing, symlinks are not followed, and
/// hidden entries are left out.
pub fn candidates(logdir: &Path) -> pb::ConvertCandidates {
    let mut out = pb::ConvertCandidates::default();
    walk(logdir, logdir, 0, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut pb::ConvertCandidates) {
    const MAX_DEPTH: usize = 3;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).collect();
    entries.sort_by(|a, b| {
        crate::catalog::natural_cmp(
            &a.file_name().to_string_lossy(),
            &b.file_name().to_string_lossy(),
        )
    });
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        let rel = path
            .strip_prefix(root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if kind.is_dir() {
            out.dirs.push(rel);
            if depth < MAX_DEPTH {
                walk(root, &path, depth + 1, out);
            }
        } else if kind.is_file() && (name.ends_with(".yaml") || name.ends_with(".yml")) {
            out.yaml_files.push(rel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panicking_engine(
        _: &ConvertOptions,
        progress: graph_ascend_convert::ProgressFn,
        _: &AtomicBool,
    ) -> Result<PathBuf, graph_ascend_convert::ConvertError> {
        progress(&Progress {
            stage: graph_ascend_convert::Stage::Reading,
            done: 1,
            total: 3,
            message: String::new(),
            bytes_read: 0,
            bytes_total: 0,
            rows_written: 0,
            rows_total: 0,
            eta_secs: None,
        });
        panic!("index out of bounds: the len is 3 but the index is 7");
    }

    fn stuck_engine(
        _: &ConvertOptions,
        _: graph_ascend_convert::ProgressFn,
        _: &AtomicBool,
    ) -> Result<PathBuf, graph_ascend_convert::ConvertError> {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        Err(graph_ascend_convert::ConvertError::Cancelled)
    }

    fn logdir_with_dump() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("dump")).expect("mkdir");
        dir
    }

    fn request(output: &str) -> pb::ConvertRequest {
        pb::ConvertRequest {
            npu_path: "dump".into(),
            output_path: output.into(),
            ..Default::default()
        }
    }

    fn wait_final(job: &Job) -> Snapshot {
        for _ in 0..200 {
            let s = job.snapshot();
            if s.status.is_final() {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        job.snapshot()
    }

    /// Regression: a `dump.json` inside the accepted folder that links
    /// outside the logdir was read; now the conversion does not start and nothing is created.
    #[test]
    fn a_dump_file_linking_outside_the_logdir_is_refused() {
        let logdir = logdir_with_dump();
        let outside = tempfile::tempdir().expect("tempdir");
        let secret = outside.path().join("dump.json");
        std::fs::write(&secret, "{}").expect("write");
        std::os::unix::fs::symlink(&secret, logdir.path().join("dump/dump.json")).expect("link");
        let Err(err) = Conversions::new(1).start(logdir.path(), "client", &request("out")) else {
            panic!("a conversion reading a file outside the logdir started");
        };
        assert!(
            matches!(&err, StartError::Path(paths::PathError::LinkEscapes { path, .. }) if path == "dump/dump.json"),
            "{err}"
        );
        assert!(!logdir.path().join("out").exists());
    }

    /// Regression: a job whose engine panicked stayed "building" forever
    /// and kept its slot, so two of them blocked every conversion until a restart.
    #[test]
    fn a_panicking_engine_ends_the_job_as_failed_and_frees_its_slot() {
        let dir = logdir_with_dump();
        let mut jobs = Conversions::new(1);
        jobs.engine = panicking_engine;
        for output in ["out1", "out2", "out3"] {
            let job = jobs
                .start(dir.path(), "page", &request(output))
                .expect("a free slot");
            let end = wait_final(&job);
            assert_eq!(end.status, Status::Error, "{end:?}");
            assert!(
                end.errors.iter().any(|e| e.contains("index out of bounds")),
                "{end:?}"
            );
            assert!(
                !dir.path().join(output).exists(),
                "no output folder is left"
            );
        }
    }

    /// Regression: the staging folders of a killed sidecar stayed forever.
    /// Starting a job in an output folder removes them, and only them.
    #[test]
    fn a_killed_sidecars_staging_folders_are_removed() {
        let dir = logdir_with_dump();
        let out = dir.path().join("out");
        let dead = graph_ascend_visdb::stale::dead_owner_tag();
        let stale = out.join(format!("{STAGING_PREFIX}{dead}.c9-1"));
        let other_host = out.join(format!("{STAGING_PREFIX}other{dead}.c9-1"));
        let live = out.join(format!(
            "{STAGING_PREFIX}{}.c0-1",
            graph_ascend_visdb::stale::owner_tag()
        ));
        for d in [&stale, &other_host, &live] {
            std::fs::create_dir_all(d.join("rank0")).expect("mkdir");
        }
        let mut jobs = Conversions::new(1);
        jobs.engine = panicking_engine;
        let job = jobs
            .start(dir.path(), "page", &request("out"))
            .expect("start");
        wait_final(&job);
        assert!(
            !stale.exists(),
            "a dead sidecar's staging folder is removed"
        );
        assert!(other_host.exists() && live.exists());
    }

    /// Regression: a finished page conversion whose name was taken in the output folder (another
    /// conversion into the same folder) failed with "already exists"; it is numbered as the
    /// CLI numbers it, and the file there stays as it was.
    #[test]
    fn a_taken_output_name_is_numbered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let staging = dir.path().join(".staging");
        std::fs::create_dir_all(&staging).expect("mkdir");
        std::fs::write(dir.path().join("build_1.vis.db"), "first").expect("write");
        let written = staging.join("build_1.vis.db");
        std::fs::write(&written, "second").expect("write");
        let dest = publish(&written, dir.path()).expect("published");
        assert_eq!(dest, dir.path().join("build_1_2.vis.db"));
        assert_eq!(std::fs::read_to_string(&dest).expect("read"), "second");
        let first = std::fs::read_to_string(dir.path().join("build_1.vis.db")).expect("read");
        assert_eq!(first, "first");
    }

    /// Cancelling a job frees its slot at once, even if the engine does not return.
    #[test]
    fn cancel_frees_the_slot_of_a_stuck_engine() {
        let dir = logdir_with_dump();
        let mut jobs = Conversions::new(1);
        jobs.engine = stuck_engine;
        let job = jobs
            .start(dir.path(), "page", &request("out1"))
            .expect("a free slot");
        assert!(matches!(
            jobs.start(dir.path(), "page", &request("out2")),
            Err(StartError::Busy { .. })
        ));
        assert!(jobs.cancel(&job.id));
        // The engine has not returned: the job does not say `cancelled` yet.
        let now = job.snapshot();
        assert_eq!(now.status, Status::Building);
        assert_eq!(now.measured.stage, CANCELLING);
        jobs.start(dir.path(), "page", &request("out2"))
            .expect("the cancelled job's slot is free");
    }
}

//! One call replayed and judged, and a whole dump's calls.
//!
//! For a forward API call: its tensors loaded, its inputs cast to the output dtype when the
//! output is below them (autocast), the op's exact result computed, and each floating output
//! judged twice: msprobe's numbers ([`crate::msprobe`]) and ours ([`crate::verdict`]).

use std::path::{Path, PathBuf};

use graph_ascend_dump::Confine;
use rayon::prelude::*;
use serde::Serialize;

use crate::call::{Call, CallName, Direction, Missing};
use crate::dtype::Dtype;
use crate::error::{ReplayError, Result};
use crate::msprobe::{self, Numbers};
use crate::ops::{self, Context};
use crate::reference::Budget;
use crate::verdict::{self, Ours};

/// The outcome of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every judged output is within a correct kernel's budget.
    Pass,
    /// An output is beyond its budget (or biased).
    Fail,
    /// Not replayed; the reason says why.
    NotReplayed,
}

/// One output judged.
#[derive(Debug, Clone, Serialize)]
pub struct OutputReport {
    /// Position among the call's flattened outputs.
    pub index: usize,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub budget: Budget,
    pub ours: Ours,
    pub msprobe: Numbers,
}

/// One call's replay.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    pub name: String,
    pub api: String,
    pub status: Status,
    /// Why it was not replayed (in words a user understands), when it was not.
    pub reason: Option<String>,
    /// The dtype the call's inputs ran in.
    pub ran_in: Option<Dtype>,
    /// What the replay did that the user should know (an autocast cast, outputs not judged).
    pub notes: Vec<String>,
    pub outputs: Vec<OutputReport>,
}

impl CallReport {
    fn not_replayed(name: &str, api: &str, reason: impl Into<String>) -> CallReport {
        CallReport {
            name: name.to_string(),
            api: api.to_string(),
            status: Status::NotReplayed,
            reason: Some(reason.into()),
            ran_in: None,
            notes: Vec::new(),
            outputs: Vec::new(),
        }
    }
}

/// The msprobe ULP standard's APIs: the matmul family.
fn is_matmul_family(api: &str) -> bool {
    matches!(
        api,
        "linear" | "matmul" | "mm" | "bmm" | "addmm" | "baddbmm"
    )
}

/// Replays one `dump.json` entry whose tensors are in `tensor_dir`.
pub fn replay_entry(
    name: &str,
    entry: &serde_json::Value,
    tensor_dir: &Path,
    confine: &Confine,
) -> CallReport {
    if name.contains(".parameters_grad") {
        return CallReport::not_replayed(
            name,
            "",
            "a module's parameter gradients (a backward result): not replayed yet",
        );
    }
    let Some(parsed) = CallName::parse(name) else {
        return CallReport::not_replayed(name, "", "not a call name msprobe writes");
    };
    if parsed.is_module {
        return CallReport::not_replayed(
            name,
            "",
            "a module's record: its API calls are replayed one by one",
        );
    }
    let api = parsed.api.clone();
    if let Some(reason) = ops::form_reason(&parsed.prefix, &api) {
        return CallReport::not_replayed(name, &api, reason);
    }
    if parsed.direction == Direction::Backward {
        return CallReport::not_replayed(name, &api, "backward records are not replayed yet");
    }
    let mut call = match Call::from_entry(parsed, entry) {
        Ok(c) => c,
        Err(e) => {
            return CallReport::not_replayed(name, &api, format!("cannot read the record: {e}"))
        }
    };
    if let Some(reason) = ops::random_reason(&api, &call.inputs) {
        return CallReport::not_replayed(name, &api, reason);
    }
    if ops::lookup(&api).is_none() {
        return CallReport::not_replayed(name, &api, format!("no CPU reference yet for {api}"));
    }
    match call.load(tensor_dir, confine) {
        Ok(Ok(())) => {}
        Ok(Err(Missing::NotDumped(dtype))) => {
            return CallReport::not_replayed(
                name,
                &api,
                format!("a tensor was not dumped (a {dtype} recorded by its statistics only)"),
            )
        }
        Ok(Err(Missing::NotFound(dir))) => {
            return CallReport::not_replayed(
                name,
                &api,
                format!("tensors not found at {}", dir.display()),
            )
        }
        Err(e) => {
            return CallReport::not_replayed(name, &api, format!("cannot read a tensor: {e}"))
        }
    }
    replay_call(call)
}

/// Replays a call whose tensors are loaded.
pub fn replay_call(mut call: Call) -> CallReport {
    let name = call.name.full.clone();
    let api = call.name.api.clone();
    let mut notes = Vec::new();
    let out_dtype = call
        .outputs
        .iter()
        .filter_map(|o| o.as_tensor().and_then(|t| t.dtype))
        .next();
    let Some(out_dtype) = out_dtype else {
        return CallReport::not_replayed(&name, &api, "no floating-point output to judge");
    };
    let in_dtype = call
        .inputs
        .all_tensors()
        .iter()
        .filter_map(|t| t.dtype)
        .max_by_key(|d| d.mantissa_bits());
    let mut ran_in = in_dtype.unwrap_or(out_dtype);
    if let Some(in_dtype) = in_dtype {
        if out_dtype.mantissa_bits() < in_dtype.mantissa_bits() {
            // Autocast: msprobe recorded the inputs from before the cast.
            for t in call.inputs.all_tensors_mut() {
                if let (Some(d), Some(data)) = (t.dtype, t.data.as_mut()) {
                    if d.mantissa_bits() > out_dtype.mantissa_bits() {
                        data.mapv_inplace(|v| out_dtype.round(v));
                    }
                }
            }
            notes.push(format!(
                "inputs cast from {in_dtype} to {out_dtype} first (autocast: the output is {out_dtype})"
            ));
            ran_in = out_dtype;
        }
    }
    let ctx = Context {
        below_fp32: out_dtype.mantissa_bits() < Dtype::F32.mantissa_bits(),
        ran_in: Some(ran_in),
    };
    let references = match ops::replay(&api, &call.inputs, ctx) {
        None => {
            return CallReport::not_replayed(&name, &api, format!("no CPU reference yet for {api}"))
        }
        Some(Err(e)) => {
            return CallReport::not_replayed(
                &name,
                &api,
                format!("the arguments cannot be replayed: {e}"),
            )
        }
        Some(Ok(r)) => r,
    };
    let (normalized, _) = ops::normalize(&api);
    let mut outputs = Vec::new();
    for (index, (reference, out)) in references.iter().zip(&call.outputs).enumerate() {
        let Some(t) = out.as_tensor() else { continue };
        let (Some(dtype), Some(device)) = (t.dtype, t.data.as_ref()) else {
            notes.push(format!("output {index} ({}) is not judged", t.dtype_name));
            continue;
        };
        if reference.exact.shape() != device.shape() {
            notes.push(format!(
                "output {index}: the dump's shape {:?} is not the replay's {:?}",
                device.shape(),
                reference.exact.shape()
            ));
            return CallReport {
                name,
                api,
                status: Status::Fail,
                reason: None,
                ran_in: Some(ran_in),
                notes,
                outputs,
            };
        }
        let device: Vec<f64> = device.iter().copied().collect();
        let compute = if dtype == Dtype::F64 {
            Dtype::F64
        } else {
            Dtype::F32
        };
        let ours = verdict::judge(reference, &device, dtype, compute);
        let bench_dtype = msprobe::bench_dtype(dtype);
        let bench: Vec<f64> = reference
            .exact
            .iter()
            .map(|&v| bench_dtype.round(v))
            .collect();
        let numbers = msprobe::numbers(&bench, &device, dtype, is_matmul_family(&normalized));
        outputs.push(OutputReport {
            index,
            dtype,
            shape: t.shape.clone(),
            budget: reference.budget,
            ours,
            msprobe: numbers,
        });
    }
    if call.outputs.len() > references.len() {
        notes.push(format!(
            "outputs {}.. are not judged (indices or extra results)",
            references.len()
        ));
    }
    if outputs.is_empty() {
        return CallReport {
            reason: Some("no output could be judged".into()),
            notes,
            ..CallReport::not_replayed(&name, &api, "")
        };
    }
    let status = if outputs.iter().all(|o| o.ours.pass) {
        Status::Pass
    } else {
        Status::Fail
    };
    CallReport {
        name,
        api,
        status,
        reason: None,
        ran_in: Some(ran_in),
        notes,
        outputs,
    }
}

/// One dump folder (a rank's `dump.json` and its tensors).
#[derive(Debug, Clone)]
pub struct DumpRun {
    pub dump_json: PathBuf,
    pub tensor_dir: PathBuf,
}

impl DumpRun {
    /// The dump under `path`: `path` itself when it holds `dump.json`, else the one folder
    /// below it that does (`step0/rank0/`, `step0/proc123/`); several are an error naming them.
    pub fn find(path: &Path) -> Result<DumpRun> {
        let mut found = Vec::new();
        find_dumps(path, 0, &mut found);
        match found.len() {
            0 => Err(ReplayError::Folder {
                path: path.to_path_buf(),
                message: "no dump.json in it or in the folders below it (3 levels)".into(),
            }),
            1 => Ok(DumpRun::at(found.remove(0))),
            _ => Err(ReplayError::Folder {
                path: path.to_path_buf(),
                message: format!(
                    "{} dumps below it (one step and rank at a time): {}",
                    found.len(),
                    found
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    /// The dump whose `dump.json` is in `dir`; its tensors are in `dump_tensor_data` beside it.
    pub fn at(dir: PathBuf) -> DumpRun {
        DumpRun {
            dump_json: dir.join("dump.json"),
            tensor_dir: dir.join("dump_tensor_data"),
        }
    }
}

fn find_dumps(path: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    if path.join("dump.json").is_file() {
        found.push(path.to_path_buf());
        return;
    }
    if depth >= 3 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        find_dumps(&d, depth + 1, found);
    }
}

/// Replays every call of a dump whose name contains `api_filter` (all when `None`), in the
/// dump's order; `progress(done, total)` is called as calls finish.
pub fn replay_dump(
    run: &DumpRun,
    confine: &Confine,
    api_filter: Option<&str>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<CallReport>> {
    let keep = |name: &str| api_filter.is_none_or(|f| name.contains(f));
    replay_dump_where(run, confine, &keep, progress)
}

/// Replays every call of a dump whose record name `keep` accepts, in the dump's order, on the
/// current rayon pool ([`with_workers`] chooses its size); `progress(done, total)` is called as
/// calls finish.
pub fn replay_dump_where(
    run: &DumpRun,
    confine: &Confine,
    keep: &(dyn Fn(&str) -> bool + Sync),
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<CallReport>> {
    let doc = graph_ascend_dump::json::read_json_file(&run.dump_json, confine)?;
    let data = doc
        .get("data")
        .and_then(|d| d.as_object())
        .ok_or_else(|| ReplayError::Folder {
            path: run.dump_json.clone(),
            message: "no \"data\" object (not an msprobe dump.json)".into(),
        })?;
    if let Some(task) = doc.get("task").and_then(|t| t.as_str()) {
        if task != "tensor" {
            return Err(ReplayError::Folder {
                path: run.dump_json.clone(),
                message: format!(
                    "a {task} dump records statistics only: replay needs a tensor dump (task \"tensor\")"
                ),
            });
        }
    }
    let entries: Vec<(&String, &serde_json::Value)> =
        data.iter().filter(|(name, _)| keep(name)).collect();
    let total = entries.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    Ok(entries
        .par_iter()
        .map(|(name, entry)| {
            let r = replay_entry(name, entry, &run.tensor_dir, confine);
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(n, total);
            r
        })
        .collect())
}

/// Runs `work` on a pool of `workers` threads (the replays' parallelism); `None`: rayon's
/// global pool (one thread a core).
pub fn with_workers<T: Send>(workers: Option<usize>, work: impl FnOnce() -> T + Send) -> Result<T> {
    match workers {
        None => Ok(work()),
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .map(|pool| pool.install(work))
            .map_err(|e| ReplayError::args(format!("cannot start {n} workers: {e}"))),
    }
}

//! msprobe's compare modes, and which one a pair of dumps is compared in.

use graph_ascend_dump::DumpFile;

use crate::error::ConvertError;

/// msprobe's compare modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareMode {
    /// `summary`: statistics.
    Summary,
    /// `md5`: CRC-32 of every tensor.
    Md5,
    /// `all`: real tensors (`task: tensor`).
    Tensor,
    /// `structure`: the model's structure only (`task: structure`, `"data": {}`): nodes are
    /// matched, nothing is compared.
    Structure,
}

impl CompareMode {
    /// `get_compare_mode`: each dump needs a task and its `data` (target first, then golden);
    /// both dumps must have the same task, one of `tensor`, `structure` and `statistics`; md5
    /// must be on both sides or none.
    /// `npu_md5` / `bench_md5`: whether each dump carries `md5` keys ([`DumpFile::has_md5`]).
    pub fn detect(
        npu: &DumpFile,
        bench: &DumpFile,
        npu_md5: bool,
        bench_md5: bool,
    ) -> Result<CompareMode, ConvertError> {
        // msprobe's `check_dump_json_key`, on the target then the golden (a build reads a dump
        // without a task or without data as it is).
        for dump in [npu, bench] {
            if dump.task.is_empty() {
                return Err(ConvertError::Usage(format!(
                    "{}: the dump's \"task\" is empty or missing: a dump without a task can be \
                     built but not compared",
                    dump.path.display()
                )));
            }
            if !dump.has_data {
                return Err(ConvertError::Usage(format!(
                    "{}: no \"data\" key: a dump without data can be built but not compared",
                    dump.path.display()
                )));
            }
        }
        if npu.task != bench.task {
            return Err(ConvertError::Usage(format!(
                "the two dumps have different tasks ({}: {}, {}: {})",
                npu.path.display(),
                npu.task,
                bench.path.display(),
                bench.task
            )));
        }
        match npu.task.as_str() {
            "tensor" => return Ok(CompareMode::Tensor),
            "structure" => return Ok(CompareMode::Structure),
            "statistics" => {}
            other => {
                return Err(ConvertError::Usage(format!(
                    "{} and {}: task {other:?}: only dumps of task tensor, statistics or \
                     structure can be compared",
                    npu.path.display(),
                    bench.path.display()
                )))
            }
        }
        match (npu_md5, bench_md5) {
            (true, true) => Ok(CompareMode::Md5),
            (false, false) => Ok(CompareMode::Summary),
            _ => Err(ConvertError::Usage(format!(
                "only one of {} and {} was dumped with summary_mode md5",
                npu.path.display(),
                bench.path.display()
            ))),
        }
    }

    /// `tb_config.task`.
    pub fn task_name(self) -> &'static str {
        match self {
            CompareMode::Summary => "summary",
            CompareMode::Md5 => "md5",
            CompareMode::Tensor => "all",
            CompareMode::Structure => "structure",
        }
    }

    /// The mode whose [`task_name`](CompareMode::task_name) is `task` (a compare file's
    /// `tb_config.task`).
    pub fn of_task_name(task: &str) -> Option<CompareMode> {
        [
            CompareMode::Summary,
            CompareMode::Md5,
            CompareMode::Tensor,
            CompareMode::Structure,
        ]
        .into_iter()
        .find(|m| m.task_name() == task)
    }
}

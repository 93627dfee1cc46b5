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
}

impl CompareMode {
    /// `get_compare_mode`: both dumps must have the same task; md5 must be on both sides or none.
    /// `npu_md5` / `bench_md5`: whether each dump carries `md5` keys ([`DumpFile::has_md5`]).
    pub fn detect(
        npu: &DumpFile,
        bench: &DumpFile,
        npu_md5: bool,
        bench_md5: bool,
    ) -> Result<CompareMode, ConvertError> {
        // msprobe's `check_dump_json_key`: a compare needs both dumps' `data` (a build reads a
        // dump without it as empty).
        if let Some(dump) = [npu, bench].into_iter().find(|d| !d.has_data) {
            return Err(ConvertError::Usage(format!(
                "{}: no \"data\" key: a dump without data can be built but not compared",
                dump.path.display()
            )));
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
        if npu.task == "tensor" {
            return Ok(CompareMode::Tensor);
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
        }
    }
}

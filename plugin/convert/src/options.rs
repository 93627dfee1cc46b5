//! What a conversion is asked to do: the options of `msprobe graph_visualize`.

use std::path::PathBuf;

use crate::parallel::ParallelParams;

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
    /// of the golden in a compare); see [`crate::merge`].
    pub parallel: Vec<ParallelParams>,
    /// `--file_type json` (merged builds only): JSON dump folders instead of a `.vis.db`.
    pub json_output: bool,
    /// Where every file the conversion reads must lie: anywhere for the command line, the
    /// logdir for a conversion the sidecar starts (checked on the opened file, so a link
    /// swapped in after the service's checks cannot lead outside).
    pub confine: graph_ascend_dump::Confine,
}

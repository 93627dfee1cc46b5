//! The one error type of the crate: every variant names the file and what is wrong with it.

use std::path::PathBuf;

use graph_ascend_visdb::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    /// The file cannot be opened or read as a `.vis.db`.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A `.vis.db` that holds no comparison.
    #[error("{path}: not a compare file: {reason}")]
    NotCompare { path: PathBuf, reason: String },
    /// A structure-only compare (`task: structure`): its dumps held the model's structure and
    /// no data, so no node has anything to judge.
    #[error(
        "{path}: a structure-only comparison (task \"structure\"): its dumps hold the model's \
         structure but no data, so there is nothing to diagnose"
    )]
    StructureOnly { path: PathBuf },
    #[error("{path}: no step {step} (the file has steps {known:?})")]
    UnknownStep {
        path: PathBuf,
        step: i64,
        known: Vec<i64>,
    },
    #[error("{path}: no rank {rank} (the file has ranks {known:?})")]
    UnknownRank {
        path: PathBuf,
        rank: i64,
        known: Vec<i64>,
    },
    /// A file given as the reference of tolerances that cannot be one.
    #[error("{path}: cannot be the reference of tolerances: {reason}")]
    Reference { path: PathBuf, reason: String },
    /// A column that cannot be read.
    #[error("{path}: bad {what}: {reason}")]
    Data {
        path: PathBuf,
        what: String,
        reason: String,
    },
    /// Writing an export failed.
    #[error("cannot write {what}: {source}")]
    Write {
        what: String,
        source: std::io::Error,
    },
}

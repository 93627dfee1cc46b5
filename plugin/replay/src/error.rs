//! Why a call could not be read or replayed: one error type for the crate.
//!
//! A [`ReplayError`] is about the *input* (a dump entry, an argument, a tensor file); an op the
//! crate has no reference for is not an error but a [`crate::replay::Skip`] with its reason.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A tensor or `dump.json` that cannot be read (missing, outside the folder, undecodable).
    #[error(transparent)]
    Dump(#[from] graph_ascend_dump::DumpError),
    /// A `dump.json` entry that is not the shape msprobe writes.
    #[error("{name}: {message}")]
    Entry { name: String, message: String },
    /// A call whose arguments the op cannot take (wrong count, type or shape).
    #[error("{0}")]
    Args(String),
    /// A folder that is not a dump (no `dump.json`).
    #[error("{path}: {message}")]
    Folder { path: PathBuf, message: String },
}

impl ReplayError {
    pub fn args(message: impl Into<String>) -> Self {
        ReplayError::Args(message.into())
    }
}

pub type Result<T> = std::result::Result<T, ReplayError>;

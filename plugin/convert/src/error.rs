//! Errors of a conversion: each names the file or folder at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A dump file is missing, unreadable or malformed.
    #[error(transparent)]
    Dump(#[from] graph_ascend_dump::DumpError),
    /// A folder or argument that does not fit msprobe's rules.
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    /// Arguments that do not go together.
    #[error("{0}")]
    Usage(String),
    /// The output could not be written.
    #[error(transparent)]
    Write(#[from] graph_ascend_visdb::writer::WriteError),
    /// Stopped by the caller ([`crate::convert_cancellable`]); nothing was written.
    #[error("conversion cancelled")]
    Cancelled,
    /// The output folder could not be created.
    #[error("cannot create output folder {path}: {source}")]
    Output {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

//! The one error type of the dump readers: every variant names the file it is about.

use std::path::PathBuf;

/// A dump file that cannot be read or does not have the expected shape.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The file is missing or unreadable.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON (e.g. truncated).
    #[error("{path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// Valid JSON, but not the structure msprobe writes.
    #[error("{path}: {message}")]
    Shape { path: PathBuf, message: String },
    /// A file of a confined conversion that resolves outside its folder (a symbolic link
    /// leading out of the logdir).
    #[error(
        "{path} resolves to {real}, outside {root}: conversions started from the page read \
         only files inside the logdir"
    )]
    Outside {
        path: PathBuf,
        real: PathBuf,
        root: PathBuf,
    },
    /// A tensor file (`.npy`/`.pt`) that cannot be decoded.
    #[error("cannot read tensor {path}: {source}")]
    Tensor {
        path: PathBuf,
        /// Boxed: the reasons are large, and every `Result` of the readers would carry them.
        #[source]
        source: Box<crate::tensor_error::TensorFormatError>,
    },
}

impl DumpError {
    pub(crate) fn shape(path: &std::path::Path, message: impl Into<String>) -> Self {
        DumpError::Shape {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    pub(crate) fn tensor(
        path: &std::path::Path,
        source: crate::tensor_error::TensorFormatError,
    ) -> Self {
        DumpError::Tensor {
            path: path.to_path_buf(),
            source: Box::new(source),
        }
    }
}

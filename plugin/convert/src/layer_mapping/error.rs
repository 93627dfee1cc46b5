//! Why a layer mapping could not be made, and what that means for the conversion.

use std::path::PathBuf;

use crate::error::ConvertError;

/// Why a mapping could not be made. `File` stops the conversion; the others make msprobe drop
/// the mapping with a warning ([`LayerMappingError::drops_mapping`]), and every node then looks
/// for its own id.
#[derive(Debug, thiserror::Error)]
pub enum LayerMappingError {
    /// The mapping file is missing, unreadable or not a `.yaml` file.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A dump file's entries or stacks cannot be read for a mapping.
    #[error("{path}: {message}")]
    Dump { path: PathBuf, message: String },
    /// The mapping file's content is not a mapping of mappings of strings.
    #[error("{0}")]
    Content(String),
    /// A dump entry, its parent or its stack does not fit msprobe's scope rules.
    #[error("{0}")]
    Scope(String),
    /// The conversion was cancelled while the mapping was being read or used.
    #[error("cancelled")]
    Cancelled,
}

impl LayerMappingError {
    /// msprobe goes on without the mapping (a warning), rather than stopping.
    pub fn drops_mapping(&self) -> bool {
        !matches!(
            self,
            LayerMappingError::File { .. } | LayerMappingError::Cancelled
        )
    }
}

impl From<LayerMappingError> for ConvertError {
    fn from(e: LayerMappingError) -> Self {
        match e {
            LayerMappingError::File { path, message }
            | LayerMappingError::Dump { path, message } => ConvertError::Input { path, message },
            LayerMappingError::Content(message) | LayerMappingError::Scope(message) => {
                ConvertError::Usage(message)
            }
            LayerMappingError::Cancelled => ConvertError::Cancelled,
        }
    }
}

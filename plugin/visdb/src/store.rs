//! Indexed reads (and the few in-place edits msprobe's plugin makes) over one `.vis.db` file.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

/// What can go wrong reading a `.vis.db`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: cannot open: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("{path}: not a msprobe .vis.db: {reason}")]
    Schema { path: PathBuf, reason: String },
    #[error("{path}: query failed: {source}")]
    Query {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("{path}: bad {what}: {reason}")]
    Data {
        path: PathBuf,
        what: String,
        reason: String,
    },
}

/// One open `.vis.db`.
pub struct Store {
    path: PathBuf,
    conn: Connection,
}

impl Store {
    /// Opens `path` read-only and checks that it has msprobe's tables and columns.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        let store = Store {
            path: path.to_owned(),
            conn,
        };
        Ok(store)
    }

    /// The file this store reads.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

//! The crate's one error type: every variant names the file (or folder) and the problem.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: line {line}: {problem}", path.display())]
    Csv {
        path: PathBuf,
        line: u64,
        problem: String,
    },
    #[error("{}: {source}", path.display())]
    Db {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{}: {problem}", path.display())]
    Format { path: PathBuf, problem: String },
    #[error("{}: no msprobe monitor output here (v1 `<time>-rank<R>-<uid>` folders, v2 `rank_<R>` folders or a `*.trend.db`)", path.display())]
    NotARun { path: PathBuf },
    #[error("{what}: {problem}")]
    Pair { what: String, problem: String },
}

impl MonitorError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> MonitorError {
        MonitorError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn db(path: impl Into<PathBuf>, source: rusqlite::Error) -> MonitorError {
        MonitorError::Db {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, problem: impl Into<String>) -> MonitorError {
        MonitorError::Format {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

//! One open `.vis.db`: opening it (immutable, or read-write when its log holds commits or it is
//! to be edited), checking its schema, and the errors of its queries and columns.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::schema;

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

/// The page cache of one connection, in KiB (SQLite's `cache_size` takes negative KiB).
pub(super) const PAGE_CACHE_KIB: i64 = -8 * 1024;

/// How [`Store::open_with`] opens a file.
#[derive(Clone, Copy)]
enum Access {
    ReadWrite,
    Immutable,
}

/// `<file>-wal`, where SQLite keeps the commits of a file in WAL mode until a checkpoint.
fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// The `file:` URI that opens `path` immutable (every byte that is not unreserved in a URI is
/// percent-encoded, so `?`, `#` and `%` in a path are read as part of it).
fn immutable_uri(path: &Path) -> String {
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    let mut uri = String::from("file:");
    for &b in &bytes {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// One open `.vis.db`.
pub struct Store {
    path: PathBuf,
    pub(super) conn: Connection,
}

impl Store {
    /// Opens `path` for reading only, and checks that it has msprobe's tables and columns and
    /// can be read to its end.
    ///
    /// Reading must leave nothing behind in the logdir: a file in WAL mode (msprobe writes them)
    /// opened by SQLite the usual way gets a `-wal` and a `-shm` file beside it, removed only when
    /// the last read-write connection closes cleanly (never by a read-only one, nor by a process
    /// that is stopped). So a file without a `-wal` beside it is opened as `immutable`: no lock,
    /// no shared memory, no log. Its readers must not outlive an edit of the file: the catalog
    /// replaces a changed file's handle, and an edit drops the handle's pooled readers. A file
    /// with a `-wal` beside it (commits not yet in the main file) is opened read-write, so that
    /// those commits are read, and checkpointed when the connection closes.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if wal_path(path).exists() {
            return Store::open_with(path, Access::ReadWrite);
        }
        Store::open_with(path, Access::Immutable)
    }

    /// Opens `path` for the in-place edits of matching (and for reading): read-write when the
    /// file is writable, read-only otherwise (the edit then fails with SQLite's error).
    pub fn open_for_edit(path: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, Access::ReadWrite)
    }

    fn open_with(path: &Path, access: Access) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        if !path.is_file() {
            return Err(StoreError::Schema {
                path: path.to_owned(),
                reason: "not a regular file".into(),
            });
        }
        let read_only = || {
            Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        };
        let conn = match access {
            Access::ReadWrite => Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .or_else(|_| read_only())
            .map_err(open_err)?,
            Access::Immutable => Connection::open_with_flags(
                immutable_uri(path),
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(open_err)?,
        };
        // Readers wait for a writer (another tab matching nodes) instead of failing at once.
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(open_err)?;
        // A bigger page cache than SQLite's 2 MB default: the rows of `tb_nodes` are large (their
        // tensor statistics), so expanding a module with a thousand children reads many pages.
        conn.pragma_update(None, "cache_size", PAGE_CACHE_KIB)
            .map_err(open_err)?;
        let store = Store {
            path: path.to_owned(),
            conn,
        };
        store.check_schema()?;
        Ok(store)
    }

    /// The file this store reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A failed query of this file (see [`QueryResult::or_query_err`]).
    pub(super) fn query_err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Query {
            path: self.path.clone(),
            source,
        }
    }

    /// A column of this file that does not hold what it should: `what` names the column and the
    /// node, `reason` says what is wrong.
    pub(super) fn data_err(
        &self,
        what: impl Into<String>,
        reason: impl Into<String>,
    ) -> StoreError {
        StoreError::Data {
            path: self.path.clone(),
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// Checks tables and columns, and touches the last page of `tb_nodes` so that a truncated
    /// file is found now rather than in the middle of a request.
    fn check_schema(&self) -> Result<(), StoreError> {
        let schema_err = |reason: String| StoreError::Schema {
            path: self.path.clone(),
            reason,
        };
        for (table, columns) in schema::REQUIRED {
            let mut stmt = self
                .conn
                .prepare(&format!("PRAGMA table_info({table})"))
                .map_err(|e| schema_err(e.to_string()))?;
            let present: Vec<String> = stmt
                .query_map([], |row| row.get::<_, String>(1))
                .and_then(|rows| rows.collect())
                .map_err(|e| schema_err(e.to_string()))?;
            if present.is_empty() {
                return Err(schema_err(format!("table {table} is missing")));
            }
            let missing: Vec<&str> = columns
                .iter()
                .copied()
                .filter(|c| !present.iter().any(|p| p == c))
                .collect();
            if !missing.is_empty() {
                return Err(schema_err(format!(
                    "table {table} lacks column(s) {}",
                    missing.join(", ")
                )));
            }
        }
        self.conn
            .query_row("SELECT max(rowid), count(*) FROM tb_config", [], |_| Ok(()))
            .and_then(|()| {
                self.conn
                    .query_row("SELECT max(rowid) FROM tb_nodes", [], |_| Ok(()))
            })
            .map_err(|e| schema_err(format!("cannot be read ({e}); is it truncated?")))?;
        Ok(())
    }

    /// Whether the writer finished: msprobe (and our writer) create the indexes last, so a file
    /// without them is still being written, or was left behind by a writer that died.
    pub fn has_indexes(&self) -> Result<bool, StoreError> {
        let count: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type='index' AND tbl_name='tb_nodes' \
                 AND name IN ('index1','index2','index3','index4','index5','index6','index7')",
                [],
                |row| row.get(0),
            )
            .or_query_err(self)?;
        Ok(count == 7)
    }
}

/// A SQLite result of a query on a store's file: its error becomes [`StoreError::Query`] naming
/// the file, so that each query says `.or_query_err(self)?`.
pub(super) trait QueryResult<T> {
    fn or_query_err(self, store: &Store) -> Result<T, StoreError>;
}

impl<T> QueryResult<T> for rusqlite::Result<T> {
    fn or_query_err(self, store: &Store) -> Result<T, StoreError> {
        self.map_err(|e| store.query_err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of an example file written by msprobe (WAL mode), alone in a temp folder whose
    /// name needs percent-encoding in a URI.
    fn wal_mode_copy() -> (tempfile::TempDir, PathBuf) {
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/build_tf_stats");
        let src = std::fs::read_dir(&examples)
            .expect("examples/build_tf_stats")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".vis.db"))
            .expect("an example .vis.db");
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("run #1 ?100%");
        std::fs::create_dir(&sub).expect("mkdir");
        let path = sub.join("build.vis.db");
        std::fs::copy(&src, &path).expect("copy");
        let header = std::fs::read(&path).expect("read");
        assert_eq!(header[18..20], [2, 2], "the example is in WAL mode");
        (dir, path)
    }

    fn names_beside(path: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn reading_leaves_no_log_files_beside_the_file() {
        let (_dir, path) = wal_mode_copy();
        let store = Store::open(&path).expect("open");
        store.config().expect("config");
        assert_eq!(names_beside(&path), ["build.vis.db"], "while open");
        drop(store);
        assert_eq!(names_beside(&path), ["build.vis.db"], "after close");
    }

    #[test]
    fn commits_still_in_the_log_are_read() {
        let (_dir, path) = wal_mode_copy();
        // Another program edits the file and keeps its connection open: the commit stays in
        // the -wal file, as msprobe's plugin leaves it.
        let writer = Connection::open(&path).expect("writer");
        writer
            .execute_batch(
                "PRAGMA wal_autocheckpoint=0; UPDATE tb_config SET node_colors='{\"#123456\": {}}'",
            )
            .expect("edit");
        assert!(wal_path(&path).exists());
        let store = Store::open(&path).expect("open");
        let colors = store.config().expect("config").node_colors;
        assert!(colors.get("#123456").is_some(), "{colors}");
        drop(store);
        drop(writer);
        assert_eq!(
            names_beside(&path),
            ["build.vis.db"],
            "checkpointed on close"
        );
    }

    #[test]
    fn an_edit_is_read_by_a_reader_opened_after_it() {
        let (_dir, path) = wal_mode_copy();
        let editor = Store::open_for_edit(&path).expect("open for edit");
        editor
            .write(|s| s.set_node_colors("{\"#654321\": {}}"))
            .expect("write");
        drop(editor);
        let colors = Store::open(&path)
            .expect("open")
            .config()
            .expect("config")
            .node_colors;
        assert!(colors.get("#654321").is_some(), "{colors}");
        assert_eq!(names_beside(&path), ["build.vis.db"]);
    }
}

//! One open `.vis.db`: opening it (immutable, or through SQLite's locks when a log or a journal
//! is beside it or it is to be edited), checking its schema, and the errors of its queries and
//! columns.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::config::DbConfig;
use rusqlite::limits::Limit;
use rusqlite::trace::{TraceEvent, TraceEventCodes};
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
    /// There is no file at `path` (or a link to nothing), or it cannot be looked at.
    #[error("{path}: {reason}")]
    Missing { path: PathBuf, reason: String },
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
    #[error("{path}: read-only: {reason}")]
    ReadOnly { path: PathBuf, reason: String },
    #[error(
        "{path}: an edit of this file was cut short (its rollback journal {} is still beside it) \
         and cannot be rolled back here ({reason}); it is not read until a program that can write \
         the file and its folder opens it once (graph-ascend serve, or sqlite3 FILE 'PRAGMA \
         integrity_check')",
        journal.display()
    )]
    Unrecovered {
        path: PathBuf,
        journal: PathBuf,
        reason: String,
    },
    #[error("{path}: busy: {reason}")]
    Busy { path: PathBuf, reason: String },
    #[error(
        "{path}: one query did more than {MAX_STATEMENT_STEPS} steps of work and was stopped \
         (a damaged or hostile file?)"
    )]
    TooMuchWork { path: PathBuf },
}

/// How many steps of SQLite's virtual machine one statement may run before it is stopped.
/// The longest statements we run are the passes over a whole graph: about 13 steps a row (4,482
/// for the 344 rows of `examples/build_tf_stats`, sqlite3's `.stats`), so this leaves room for
/// graphs of hundreds of millions of nodes, and stops a statement that runs away (a loop that a
/// hostile file's schema would start) within about a minute (1e8 rows of a recursive query, about
/// 1e9 steps, ran 13 s).
pub const MAX_STATEMENT_STEPS: u64 = 4_000_000_000;
/// Steps between two calls of the progress handler that counts them.
const PROGRESS_PERIOD: u64 = 100_000;
/// The longest string or blob a connection reads or makes (SQLite's default is 1 GB).
const MAX_VALUE_BYTES: i32 = 256 << 20;

/// The work the statement running on one connection has done, counted by SQLite's progress
/// handler in periods of [`PROGRESS_PERIOD`] steps and reset when a statement starts.
struct StatementBudget {
    periods: AtomicU64,
    max_periods: AtomicU64,
}

impl StatementBudget {
    fn new() -> Arc<StatementBudget> {
        Arc::new(StatementBudget {
            periods: AtomicU64::new(0),
            max_periods: AtomicU64::new(MAX_STATEMENT_STEPS / PROGRESS_PERIOD),
        })
    }

    /// One more period of work; whether the statement is over its budget (it is interrupted).
    fn spend(&self) -> bool {
        self.periods.fetch_add(1, Ordering::Relaxed) + 1 > self.max_periods.load(Ordering::Relaxed)
    }

    fn exhausted(&self) -> bool {
        self.periods.load(Ordering::Relaxed) > self.max_periods.load(Ordering::Relaxed)
    }
}

/// Opens every file as SQLite's advice for files from strangers says ("Defense Against The Dark
/// Arts"): the defensive flag (no writes to the schema, no corruption through the journal
/// mode), an untrusted schema (functions with side effects are refused where the schema names
/// them), no triggers and no views at all (msprobe's files have neither; a trigger turned one
/// edit into an endless write), no attached files, checked cell sizes, bounded values, and at
/// most [`MAX_STATEMENT_STEPS`] steps per statement. Also the query planner's stability guarantee
/// (QPSG): a plan does not depend on the values bound to it, so a cached statement is not
/// compiled again each time a new value is bound (without it, every `node_detail` and children
/// query was parsed and planned anew: a seventh of the report's time on the 48-layer pair).
fn harden(conn: &mut Connection, budget: &Arc<StatementBudget>) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)?;
    conn.pragma_update(None, "cell_size_check", true)?;
    let started = budget.clone();
    conn.trace_v2(
        TraceEventCodes::SQLITE_TRACE_STMT,
        Some(move |event: TraceEvent<'_>| {
            // A trigger's program also reports here, as a comment: it is part of its statement.
            if let TraceEvent::Stmt(_, sql) = event {
                if !sql.starts_with("--") {
                    started.periods.store(0, Ordering::Relaxed);
                }
            }
        }),
    )?;
    let spent = budget.clone();
    conn.progress_handler(
        i32::try_from(PROGRESS_PERIOD).unwrap_or(i32::MAX),
        Some(move || spent.spend()),
    )
}

/// The page cache of one connection, in KiB (SQLite's `cache_size` takes negative KiB).
pub(super) const PAGE_CACHE_KIB: i64 = -8 * 1024;

/// How [`Store::open_with`] opens a file.
#[derive(Clone, Copy)]
enum Access {
    ReadWrite,
    /// Read-only through SQLite's locks and the log of the program that has the file open.
    ReadOnly,
    Immutable,
}

/// The files SQLite keeps beside a file while it is open or after its writer died: the log of
/// WAL mode, its shared-memory index, and the rollback journal.
const JOURNAL_SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `<file><suffix>`, beside the file that `path` names after following links (SQLite names its
/// journals after the real file).
fn journal_path(path: &Path, suffix: &str) -> PathBuf {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mut journal = real.into_os_string();
    journal.push(suffix);
    PathBuf::from(journal)
}

/// What sits at a journal's name: nothing, a regular file, or something else (a FIFO, a
/// folder, a device: opening it could block or read without end). Links are not followed.
#[derive(PartialEq)]
enum JournalKind {
    Absent,
    Regular,
    Other,
}

fn journal_kind(path: &Path, suffix: &str) -> JournalKind {
    match std::fs::symlink_metadata(journal_path(path, suffix)) {
        Err(_) => JournalKind::Absent,
        Ok(meta) if meta.file_type().is_file() => JournalKind::Regular,
        Ok(_) => JournalKind::Other,
    }
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

/// The error of the first read of a connection through SQLite's locks: a hot journal that it
/// cannot roll back becomes [`StoreError::Unrecovered`], anything else [`StoreError::Open`].
fn unrecovered(path: &Path, source: rusqlite::Error) -> StoreError {
    let cannot_roll_back = matches!(
        &source,
        rusqlite::Error::SqliteFailure(e, _)
            if e.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK
                || e.code == rusqlite::ErrorCode::ReadOnly
                || e.code == rusqlite::ErrorCode::CannotOpen
    ) && journal_kind(path, "-journal") == JournalKind::Regular;
    if cannot_roll_back {
        return StoreError::Unrecovered {
            path: path.to_owned(),
            journal: journal_path(path, "-journal"),
            reason: source.to_string(),
        };
    }
    StoreError::Open {
        path: path.to_owned(),
        source,
    }
}

/// One open `.vis.db`.
pub struct Store {
    path: PathBuf,
    pub(super) conn: Connection,
    budget: Arc<StatementBudget>,
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
    ///
    /// A read never writes, and never touches the log of another program: a file with a
    /// regular `-wal` and `-shm` beside it (a program has it open in WAL mode, or died with it
    /// open) is opened read-only, through SQLite's locks, so the log's commits are read but
    /// neither merged into the file nor removed; a file with a regular `-journal` beside it
    /// (an edit in rollback-journal mode, our files' mode, under way or cut short) is opened
    /// through SQLite's locks first, which rolls a hot journal back
    /// ([`Store::open_past_journal`]); any other file is opened immutable (SQLite
    /// then opens no journal at all: a `-wal` without its `-shm`, whose commits are not read
    /// until a program that edits the file opens it, and a FIFO or other special file at a
    /// journal's name, which would block or never end).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let [wal, shm, journal] = JOURNAL_SUFFIXES.map(|suffix| journal_kind(path, suffix));
        if wal == JournalKind::Regular && shm == JournalKind::Regular {
            if let Ok(store) = Store::open_with(path, Access::ReadOnly) {
                return Ok(store);
            }
        }
        if journal == JournalKind::Regular {
            return Store::open_past_journal(path);
        }
        Store::open_with(path, Access::Immutable)
    }

    /// Opens a file with a rollback journal beside it: an edit in rollback-journal mode (ours,
    /// or another program's) is under way, or was cut short (a kill, a crash, a full disk) and
    /// left a *hot* journal, which holds the pages the edit overwrote. An `immutable` read would
    /// ignore the journal and read the half-edited file, so the file is opened through SQLite's
    /// locks, read-write when it can be: SQLite's first read then rolls a hot journal back (and
    /// removes it), and waits for a live writer's commit instead. When the journal is gone
    /// afterwards, the file is opened as any other (immutable); when it stays (a live writer
    /// holds its lock), the locked connection is kept, so that reads wait for that writer. A
    /// hot journal that cannot be rolled back (the file or its folder is read-only to us) is
    /// refused, naming the journal ([`StoreError::Unrecovered`]): the half-edited file is
    /// never read.
    fn open_past_journal(path: &Path) -> Result<Store, StoreError> {
        let store = Store::open_with(path, Access::ReadWrite)?;
        if journal_kind(path, "-journal") == JournalKind::Regular {
            return Ok(store);
        }
        drop(store);
        Store::open_with(path, Access::Immutable)
    }

    /// Opens `path` for the in-place edits of matching (and for reading): read-write when the
    /// file is writable, read-only otherwise (the edit then fails with SQLite's error). A
    /// journal's name holding anything but a regular file is refused (SQLite would open it).
    pub fn open_for_edit(path: &Path) -> Result<Store, StoreError> {
        for suffix in JOURNAL_SUFFIXES {
            if journal_kind(path, suffix) == JournalKind::Other {
                return Err(StoreError::Schema {
                    path: path.to_owned(),
                    reason: format!(
                        "{} is not a regular file, so the file cannot be edited",
                        journal_path(path, suffix).display()
                    ),
                });
            }
        }
        Store::open_with(path, Access::ReadWrite)
    }

    fn open_with(path: &Path, access: Access) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => {
                return Err(StoreError::Schema {
                    path: path.to_owned(),
                    reason: "not a regular file".into(),
                })
            }
            Err(e) => {
                return Err(StoreError::Missing {
                    path: path.to_owned(),
                    reason: if e.kind() == std::io::ErrorKind::NotFound {
                        "no such file".into()
                    } else {
                        format!("cannot be read: {e}")
                    },
                })
            }
        }
        let read_only = || {
            Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        };
        let mut conn = match access {
            Access::ReadWrite => Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .or_else(|_| read_only())
            .map_err(open_err)?,
            Access::ReadOnly => read_only().map_err(open_err)?,
            Access::Immutable => Connection::open_with_flags(
                immutable_uri(path),
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(open_err)?,
        };
        let budget = StatementBudget::new();
        harden(&mut conn, &budget).map_err(open_err)?;
        if !matches!(access, Access::Immutable) {
            // The first read of a connection through SQLite's locks rolls back a hot journal;
            // one that cannot (a read-only file or folder) fails here, and says so.
            conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
                .map_err(|source| unrecovered(path, source))?;
        }
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
            budget,
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
        if source.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted)
            && self.budget.exhausted()
        {
            return StoreError::TooMuchWork {
                path: self.path.clone(),
            };
        }
        StoreError::Query {
            path: self.path.clone(),
            source,
        }
    }

    /// Opens `path` read-only through SQLite's locks, as [`Store::open`] does when it cannot
    /// write the file (tests of a hot journal that cannot be rolled back: a test running as
    /// root can write any file).
    #[cfg(test)]
    pub(super) fn open_read_only_for_test(path: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, Access::ReadOnly)
    }

    /// Lowers the work one statement may do to about `steps` (tests of the bound).
    #[cfg(test)]
    fn limit_statement_steps(&self, steps: u64) {
        self.budget
            .max_periods
            .store(steps / PROGRESS_PERIOD, Ordering::Relaxed);
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
        self.check_schema_objects().map_err(schema_err)?;
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

    /// Refuses what msprobe's files never hold and what would make SQLite do the work of a
    /// request for whoever wrote the file: any trigger, and anything but a plain table (a view, a
    /// virtual table) or a generated column where msprobe's tables should be.
    fn check_schema_objects(&self) -> Result<(), String> {
        let objects: Vec<(String, String, String, Option<String>)> = self
            .conn
            .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master")
            .and_then(|mut stmt| {
                stmt.query_map([], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })?
                .collect()
            })
            .map_err(|e| format!("its schema cannot be read ({e})"))?;
        if let Some((_, name, table, _)) = objects.iter().find(|(kind, ..)| kind == "trigger") {
            return Err(format!(
                "it holds a trigger ({name} on {table}); msprobe's files have none, and a \
                 trigger runs on every edit"
            ));
        }
        for (table, _) in schema::REQUIRED {
            let Some((kind, _, _, sql)) = objects.iter().find(|(_, name, ..)| name == table) else {
                continue; // reported as missing by the column check
            };
            let is_virtual = sql.as_deref().is_some_and(|sql| {
                sql.trim_start()
                    .get(..20)
                    .is_some_and(|head| head.eq_ignore_ascii_case("CREATE VIRTUAL TABLE"))
            });
            if kind != "table" || is_virtual {
                let what = if is_virtual { "a virtual table" } else { kind };
                return Err(format!("{table} is {what}, not a table"));
            }
            let generated: Vec<String> = self
                .conn
                .prepare(&format!("PRAGMA table_xinfo({table})"))
                .and_then(|mut stmt| {
                    stmt.query_map([], |row| {
                        Ok((row.get::<_, String>(1)?, row.get::<_, i64>(6)?))
                    })?
                    .filter_map(|col| match col {
                        Ok((name, hidden)) if hidden != 0 => Some(Ok(name)),
                        Ok(_) => None,
                        Err(e) => Some(Err(e)),
                    })
                    .collect()
                })
                .map_err(|e| format!("the columns of {table} cannot be read ({e})"))?;
            if !generated.is_empty() {
                return Err(format!(
                    "{table} has generated or hidden column(s) {}",
                    generated.join(", ")
                ));
            }
        }
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

    /// `<file>-wal`, where SQLite keeps the commits of a file in WAL mode until a checkpoint.
    fn wal_path(path: &Path) -> PathBuf {
        journal_path(path, "-wal")
    }

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

    /// A copy of the example changed by `sql` (run with SQLite's ordinary settings, as whoever
    /// made the file would), in WAL mode as msprobe leaves its files, with no log beside it.
    fn altered_copy(sql: &str) -> (tempfile::TempDir, PathBuf) {
        let (dir, path) = wal_mode_copy();
        let conn = Connection::open(&path).expect("open the copy");
        conn.execute_batch(sql).expect("alter the copy");
        drop(conn);
        (dir, path)
    }

    fn refusal(path: &Path) -> String {
        match Store::open(path) {
            Ok(_) => panic!("{} was opened", path.display()),
            Err(e) => e.to_string(),
        }
    }

    fn refusal_for_edit(path: &Path) -> String {
        match Store::open_for_edit(path) {
            Ok(_) => panic!("{} was opened for edit", path.display()),
            Err(e) => e.to_string(),
        }
    }

    /// Regression: a trigger on `tb_nodes` turned one edit into an endless write.
    #[test]
    fn a_file_with_a_trigger_is_refused_naming_it() {
        let (_dir, path) = altered_copy(
            "CREATE TRIGGER grow AFTER UPDATE ON tb_nodes BEGIN \
             UPDATE tb_nodes SET modified = modified + 1; END",
        );
        let message = refusal(&path);
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("trigger (grow on tb_nodes)"), "{message}");
        let message = refusal_for_edit(&path);
        assert!(message.contains("trigger"), "{message}");
    }

    #[test]
    fn a_view_virtual_table_or_generated_column_in_place_of_a_table_is_refused() {
        let cases = [
            (
                "ALTER TABLE tb_nodes RENAME TO real_nodes; \
                 CREATE VIEW tb_nodes AS SELECT * FROM real_nodes",
                "tb_nodes is view, not a table",
            ),
            (
                "DROP TABLE tb_stack; CREATE VIRTUAL TABLE tb_stack USING fts5(id, stack_info)",
                "tb_stack is a virtual table, not a table",
            ),
            (
                "ALTER TABLE tb_stack ADD COLUMN g AS (length(stack_info)) VIRTUAL",
                "tb_stack has generated or hidden column(s) g",
            ),
        ];
        for (sql, expected) in cases {
            let (_dir, path) = altered_copy(sql);
            let message = refusal(&path);
            assert!(message.contains(expected), "{sql}: {message}");
            assert!(message.contains(&path.display().to_string()), "{message}");
        }
    }

    /// Regression: a 200 MB tooltip took the sidecar to 839 MB, read on every request; a
    /// 2M-entry rank list made a diagnosis run past 90 s. What `tb_config` holds is bounded,
    /// and a file past a bound is refused naming the column, before the text is read.
    #[test]
    fn tb_config_texts_and_lists_are_bounded() {
        let cases = [
            (
                "UPDATE tb_config SET tool_tip = '\"' || printf('%.*c', 8000000, 'x') || '\"'",
                "tb_config.tool_tip: it holds 8000002 bytes, more than the 4194304 it may",
            ),
            (
                "UPDATE tb_config SET rank_list = '[' || printf('%.*c', 2000000, '0') || ']'",
                "tb_config.rank_list: it holds 2000002 bytes",
            ),
            (
                "UPDATE tb_config SET step_list = (WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL \
                 SELECT i + 1 FROM n WHERE i < 65536) SELECT '[' || group_concat(0) || ']' FROM n)",
                "tb_config.step_list: it lists 65537 entries, more than the 65536 it may",
            ),
        ];
        for (sql, expected) in cases {
            let (_dir, path) = altered_copy(sql);
            let store = Store::open(&path).expect("open");
            let err = store.config().expect_err("refused").to_string();
            assert!(err.contains(expected), "{err}");
            assert!(err.contains(&path.display().to_string()), "{err}");
        }
        // At the bounds, a file is read.
        let (_dir, path) = altered_copy(
            "UPDATE tb_config SET step_list = (WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL \
             SELECT i + 1 FROM n WHERE i < 65535) SELECT '[' || group_concat(i) || ']' FROM n)",
        );
        let config = Store::open(&path).expect("open").config().expect("config");
        assert_eq!(config.steps.len(), 65_536);
    }

    /// A trigger added after the file was checked (while a connection is open) never runs.
    #[test]
    fn a_trigger_added_after_the_check_does_not_run() {
        let (_dir, path) = wal_mode_copy();
        let editor = Store::open_for_edit(&path).expect("open for edit");
        let other = Connection::open(&path).expect("another program");
        other
            .execute_batch(
                "CREATE TRIGGER mark AFTER UPDATE ON tb_config BEGIN \
                 UPDATE tb_config SET task = 'triggered'; END",
            )
            .expect("add a trigger");
        editor
            .write(|s| s.set_node_colors("{\"#654321\": {}}"))
            .expect("write");
        let task: String = other
            .query_row("SELECT task FROM tb_config", [], |r| r.get(0))
            .expect("task");
        assert_ne!(task, "triggered");
    }

    /// A statement that runs away (here a query of our own that loops, as a hostile schema
    /// could make one) is stopped past its budget, with an error naming the file.
    #[test]
    fn a_runaway_statement_is_stopped() {
        let (_dir, path) = wal_mode_copy();
        let store = Store::open(&path).expect("open");
        store.limit_statement_steps(1_000_000);
        let endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n \
                       WHERE i < 100000000) SELECT count(*) FROM n";
        let err = store
            .conn
            .query_row(endless, [], |r| r.get::<_, i64>(0))
            .map_err(|e| store.query_err(e))
            .expect_err("stopped");
        assert!(matches!(err, StoreError::TooMuchWork { .. }), "{err}");
        assert!(err.to_string().contains(&path.display().to_string()));
        // The next statement has a budget of its own.
        store.config().expect("config after a stopped statement");
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

    /// Regression: a read of a file with another program's log beside it opened it read-write,
    /// merged the log into the file and removed it. A writer that died leaves its log and
    /// shared memory: the read sees the log's commits, and the file and the log stay as they were.
    #[test]
    fn a_read_leaves_a_dead_writers_log_and_the_file_unchanged() {
        let (dir, path) = wal_mode_copy();
        let writer = Connection::open(&path).expect("writer");
        writer
            .execute_batch(
                "PRAGMA wal_autocheckpoint=0; UPDATE tb_config SET node_colors='{\"#abcdef\": {}}'",
            )
            .expect("edit");
        // What a writer killed now leaves: the file, its log and its shared memory.
        let left = dir.path().join("left");
        std::fs::create_dir(&left).expect("mkdir");
        let copy = left.join("build.vis.db");
        for suffix in ["", "-wal", "-shm"] {
            let from = format!("{}{suffix}", path.display());
            std::fs::copy(&from, format!("{}{suffix}", copy.display())).expect("copy");
        }
        drop(writer);
        let bytes =
            |suffix: &str| std::fs::read(format!("{}{suffix}", copy.display())).expect("read");
        let (file, log) = (bytes(""), bytes("-wal"));
        let store = Store::open(&copy).expect("open");
        let colors = store.config().expect("config").node_colors;
        assert!(
            colors.get("#abcdef").is_some(),
            "the log's commit is read: {colors}"
        );
        drop(store);
        assert!(bytes("") == file, "the file is unchanged");
        assert!(bytes("-wal") == log, "the log is unchanged");
    }

    /// Regression: a FIFO named `<file>-wal` was deleted by a read (and could block it).
    #[test]
    fn a_fifo_at_the_logs_name_is_neither_opened_nor_removed() {
        let (_dir, path) = wal_mode_copy();
        let wal = wal_path(&path);
        let made = std::process::Command::new("mkfifo")
            .arg(&wal)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let (send, answer) = std::sync::mpsc::channel();
        let reader = path.clone();
        std::thread::spawn(move || {
            let read = Store::open(&reader).and_then(|s| s.config()).map(|_| ());
            let edit = Store::open_for_edit(&reader).map(|_| ());
            let _ = send.send((read, edit));
        });
        let (read, edit) = answer
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the open returns instead of blocking on the FIFO");
        read.expect("the file is read");
        let refused = match edit {
            Ok(()) => panic!("an edit was allowed"),
            Err(e) => e.to_string(),
        };
        assert!(refused.contains("-wal is not a regular file"), "{refused}");
        let kind = std::fs::symlink_metadata(&wal)
            .expect("still there")
            .file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind));
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

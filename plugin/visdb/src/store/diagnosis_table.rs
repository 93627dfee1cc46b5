//! Our own table of what the diagnosis reads, [`crate::schema::DIAGNOSIS_TABLE`]: its parts
//! read with the blobs borrowed from SQLite (each bounded in size, [`MAX_DIAGNOSIS_PART_BYTES`]),
//! written (by the converter and `gather`, after msprobe's tables), dropped for a graph by our
//! edits, and the checks that say whether it is still true of the rows: its stamp, the file
//! version it was written at ([`Store::diagnosis_table_current`]). What a part holds is the
//! diagnosis's business (its `compact` module); here it is bytes.
//!
//! **The stamp.** SQLite adds one to the file change counter of the database header (offset 24)
//! on every transaction that writes a rollback-journal file, whatever program makes it (msprobe's
//! plugin, the `sqlite3` shell, Python, us), and a switch to WAL mode (whose commits do not
//! count) is itself such a write and leaves the header saying WAL. So the table carries the
//! counter the file has once the table's own transaction committed, and is believed only while
//! the header still says that counter in rollback mode: any later write of the file by anyone
//! makes the diagnosis read the rows, until the table is written again. Our own edits keep a
//! current stamp current ([`Store::write`] moves it on with the counter, after dropping the
//! edited graph's parts). What a stamp cannot do: tell a table that a program forged together with
//! a matching counter from ours (anyone who can write the file can write its rows too), or see
//! bytes changed without SQLite (a hex editor). See `docs/visdb.md` §5.

use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::types::ValueRef;
use rusqlite::OptionalExtension;

use super::open::{QueryResult, Store, StoreError};
use super::rows::GraphKey;
use crate::schema::{BENCH, CREATE_DIAGNOSIS_TABLE, DIAGNOSIS_TABLE, NPU};

/// The columns [`DIAGNOSIS_TABLE`] must have, in order.
const COLUMNS: [&str; 5] = ["step", "rank", "data_source", "part", "data"];

/// The most bytes one part of [`DIAGNOSIS_TABLE`] may hold (the writer cuts parts at a quarter
/// of it). A bigger part is refused before SQLite hands its bytes over (its size comes from the
/// record header), and the graph side is read from its rows.
pub const MAX_DIAGNOSIS_PART_BYTES: usize = 4 << 20;

/// Where the stamp is kept: a row of [`DIAGNOSIS_TABLE`] that is no graph side (no graph has
/// this step and rank, and no side this `data_source`).
const STAMP_KEY: (i64, i64, &str, i64) = (-1, -1, "", 0);

/// The stamp's first bytes (then the change counter, 4 bytes big-endian).
const STAMP_MAGIC: &[u8; 4] = b"gas1";

/// Held while this process reads a file's header through a handle of its own and while it
/// writes a file ([`Store::write`]): closing any handle of a file drops every POSIX lock the
/// process holds on it (SQLite's included), so the header is never read while one of our
/// connections holds a write lock.
static HEADER_READS: Mutex<()> = Mutex::new(());

/// One part as [`Store::scan_diagnosis_parts`] hands it.
#[derive(Debug, Clone, Copy)]
pub enum DiagnosisPart<'a> {
    /// Its bytes, borrowed from SQLite (a part that is not a blob is handed as empty bytes).
    Bytes(&'a [u8]),
    /// More than [`MAX_DIAGNOSIS_PART_BYTES`]: not read.
    TooLarge(u64),
}

/// The file change counter of the database header of `path`, when the header is SQLite's and
/// says rollback-journal mode (read and write versions 1); `None` otherwise (WAL mode, a short
/// or foreign header, an unreadable file). Read through a handle of its own: see [`HEADER_READS`].
fn change_counter(path: &Path) -> Option<u32> {
    let _held = HEADER_READS.lock().unwrap_or_else(|e| e.into_inner());
    change_counter_unguarded(path)
}

/// [`change_counter`] for a caller that holds [`HEADER_READS`].
fn change_counter_unguarded(path: &Path) -> Option<u32> {
    // A `-wal` beside the file: a connection in WAL mode may hold a lock on it.
    let wal = {
        let mut name = path.as_os_str().to_owned();
        name.push("-wal");
        std::path::PathBuf::from(name)
    };
    if std::fs::symlink_metadata(&wal).is_ok() {
        return None;
    }
    let mut header = [0u8; 100];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .ok()?;
    if &header[..16] != b"SQLite format 3\0" || header[18] != 1 || header[19] != 1 {
        return None;
    }
    Some(u32::from_be_bytes([
        header[24], header[25], header[26], header[27],
    ]))
}

fn stamp_bytes(counter: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(STAMP_MAGIC);
    b[4..].copy_from_slice(&counter.to_be_bytes());
    b
}

/// The file version [`Store::write`] saw before its transaction: the change counter, when the
/// file was in rollback mode.
#[derive(Debug, Clone, Copy)]
pub(super) struct VersionBefore(Option<u32>);

/// What [`Store::write`] holds during its transaction (see [`HEADER_READS`]).
pub(super) struct WriteGuard {
    _held: std::sync::MutexGuard<'static, ()>,
    pub(super) before: VersionBefore,
}

impl Store {
    /// Whether the file holds [`DIAGNOSIS_TABLE`] as we write it: a plain table (not a view or a
    /// virtual table) with its columns, none generated, and its index. A file where the name
    /// is something else is read as if the table were absent.
    pub fn has_diagnosis_table(&self) -> Result<bool, StoreError> {
        let sql: Option<String> = self
            .conn
            .prepare_cached("SELECT sql FROM sqlite_master WHERE type='table' AND name=?")
            .and_then(|mut stmt| {
                let mut rows = stmt.query([DIAGNOSIS_TABLE])?;
                rows.next()?.map(|row| row.get(0)).transpose()
            })
            .or_query_err(self)?;
        let Some(sql) = sql else {
            return Ok(false);
        };
        if sql
            .trim_start()
            .get(..20)
            .is_some_and(|head| head.eq_ignore_ascii_case("CREATE VIRTUAL TABLE"))
        {
            return Ok(false);
        }
        let columns: Vec<(String, i64)> = self
            .conn
            .prepare(&format!("PRAGMA table_xinfo({DIAGNOSIS_TABLE})"))
            .and_then(|mut stmt| {
                stmt.query_map([], |row| Ok((row.get(1)?, row.get(6)?)))?
                    .collect()
            })
            .or_query_err(self)?;
        let plain = columns.len() == COLUMNS.len()
            && columns
                .iter()
                .zip(COLUMNS)
                .all(|((name, hidden), want)| name == want && *hidden == 0);
        let indexed: bool = self
            .conn
            .query_row(
                "SELECT count(*) = 1 FROM sqlite_master WHERE type='index' AND tbl_name=?",
                [DIAGNOSIS_TABLE],
                |row| row.get(0),
            )
            .or_query_err(self)?;
        Ok(plain && indexed)
    }

    /// Whether any row of the graph at `step` and `rank` (either side) was edited after the
    /// converter wrote it (`modified = 1`, which msprobe's plugin and our matching set; `index6`
    /// answers it without reading the rows).
    pub fn graph_edited(&self, step: i64, rank: i64) -> Result<bool, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM tb_nodes WHERE step=? AND rank=? AND modified=1)",
            )
            .and_then(|mut stmt| stmt.query_row([step, rank], |row| row.get(0)))
            .or_query_err(self)
    }

    /// The number of parts of `graph` in [`DIAGNOSIS_TABLE`] and their bytes in all, from the
    /// record headers (no part is read): what a decoder may size itself by.
    pub fn diagnosis_parts_size(&self, graph: GraphKey) -> Result<(u64, u64), StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT count(*), coalesce(sum(length(data)), 0) FROM {DIAGNOSIS_TABLE} \
                 WHERE step=? AND rank=? AND data_source=?"
            ))
            .and_then(|mut stmt| {
                stmt.query_row(
                    rusqlite::params![graph.step, graph.rank, graph.side.data_source()],
                    |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
                )
            })
            .map(|(n, bytes)| (n.max(0) as u64, bytes.max(0) as u64))
            .or_query_err(self)
    }

    /// Calls `f` with each part of `graph` in [`DIAGNOSIS_TABLE`], in part order, with its number
    /// and its bytes borrowed from SQLite; a part bigger than [`MAX_DIAGNOSIS_PART_BYTES`] is
    /// handed as [`DiagnosisPart::TooLarge`] without being read. The caller checks
    /// [`Store::has_diagnosis_table`] and [`Store::diagnosis_table_current`] first.
    pub fn scan_diagnosis_parts<E: From<StoreError>>(
        &self,
        graph: GraphKey,
        mut f: impl FnMut(i64, DiagnosisPart<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        // `length` of a blob and `typeof` read the record header only; the CASE hands the
        // bytes over only when they are few enough.
        let sql = format!(
            "SELECT part, length(data), CASE WHEN typeof(data) = 'blob' AND length(data) <= \
             {MAX_DIAGNOSIS_PART_BYTES} THEN data END FROM {DIAGNOSIS_TABLE} \
             WHERE step=? AND rank=? AND data_source=? ORDER BY part"
        );
        self.each_graph_row(&sql, graph, |row| {
            let part = match row.get_ref(0).or_query_err(self)? {
                ValueRef::Integer(i) => i,
                _ => -1,
            };
            let size = match row.get_ref(1).or_query_err(self)? {
                ValueRef::Integer(i) => i.max(0) as u64,
                _ => 0,
            };
            let data = match row.get_ref(2).or_query_err(self)? {
                ValueRef::Blob(b) => DiagnosisPart::Bytes(b),
                _ if size > MAX_DIAGNOSIS_PART_BYTES as u64 => DiagnosisPart::TooLarge(size),
                _ => DiagnosisPart::Bytes(&[]),
            };
            f(part, data)
        })?;
        Ok(self.shrink_page_cache()?)
    }

    /// Whether the table's stamp says the file version the file has: no write by any program
    /// since the table was written (or moved on by our own edits). `false` for a table without a
    /// stamp (written before stamps), a file in WAL mode, or one whose header cannot be read.
    pub fn diagnosis_table_current(&self) -> Result<bool, StoreError> {
        let Some(stamp) = self.diagnosis_stamp()? else {
            return Ok(false);
        };
        Ok(change_counter(self.path()).is_some_and(|counter| stamp == stamp_bytes(counter)))
    }

    /// The stamp row's bytes, when the table has one.
    fn diagnosis_stamp(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let (step, rank, source, part) = STAMP_KEY;
        self.conn
            .prepare_cached(&format!(
                "SELECT data FROM {DIAGNOSIS_TABLE} WHERE step=? AND rank=? AND data_source=? \
                 AND part=? AND typeof(data) = 'blob' AND length(data) = 8"
            ))
            .and_then(|mut stmt| {
                stmt.query_row(rusqlite::params![step, rank, source, part], |row| {
                    row.get::<_, Vec<u8>>(0)
                })
                .optional()
            })
            .or_query_err(self)
    }

    /// Sets the stamp to `counter`.
    fn put_diagnosis_stamp(&self, counter: u32) -> Result<(), StoreError> {
        let (step, rank, source, part) = STAMP_KEY;
        self.conn
            .prepare_cached(&format!(
                "INSERT OR REPLACE INTO {DIAGNOSIS_TABLE} (step, rank, data_source, part, data) \
                 VALUES (?, ?, ?, ?, ?)"
            ))
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![
                    step,
                    rank,
                    source,
                    part,
                    &stamp_bytes(counter)[..]
                ])
            })
            .or_query_err(self)?;
        Ok(())
    }

    /// Before [`Store::write`] begins its transaction: holds [`HEADER_READS`] and reads the
    /// file version (no connection of this process holds a write lock on the file then).
    pub(super) fn before_write(&self) -> WriteGuard {
        let held = HEADER_READS.lock().unwrap_or_else(|e| e.into_inner());
        WriteGuard {
            _held: held,
            before: VersionBefore(change_counter_unguarded(self.path())),
        }
    }

    /// Last in [`Store::write`]'s transaction, before it commits: a table that was current
    /// before the transaction (its stamp said `before`) stays current after it (stamped with the
    /// counter the commit gives, one more), and a table written in this transaction
    /// ([`Store::stamp_diagnosis_table`]) keeps its stamp. Any other stamp is left as it is
    /// (stale). Graphs whose rows the transaction changed had their parts dropped by then.
    pub(super) fn carry_diagnosis_stamp(&self, before: VersionBefore) -> Result<(), StoreError> {
        let Some(counter) = before.0 else {
            return Ok(());
        };
        if !self.has_table_named(DIAGNOSIS_TABLE)? {
            return Ok(());
        }
        if self.diagnosis_stamp()?.as_deref() == Some(&stamp_bytes(counter)[..]) {
            self.put_diagnosis_stamp(counter.wrapping_add(1))?;
        }
        Ok(())
    }

    /// Stamps the table (created when missing) as written in this transaction of
    /// [`Store::write`], whose version before is `before`: the stamp is the counter the commit
    /// gives. Without a version before (WAL mode, no header), no stamp: the table is never read.
    fn stamp_diagnosis_table(&self, before: VersionBefore) -> Result<(), StoreError> {
        if let Some(counter) = before.0 {
            self.put_diagnosis_stamp(counter.wrapping_add(1))?;
        }
        Ok(())
    }

    fn has_table_named(&self, name: &str) -> Result<bool, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type='table' AND name=?)",
            )
            .and_then(|mut stmt| stmt.query_row([name], |row| row.get(0)))
            .or_query_err(self)
    }

    /// Writes every graph side of `sides` (key and parts each) into [`DIAGNOSIS_TABLE`] in one
    /// transaction, replacing what the table held, stamped with the file version the commit
    /// gives. Run it on a store opened with [`Store::open_for_edit`]. A file in WAL mode
    /// (msprobe writes them so) is put in rollback-journal mode first: a WAL commit does not
    /// move the change counter, so a stamp in WAL mode would say nothing.
    pub fn write_diagnosis_table<'p>(
        &self,
        sides: impl IntoIterator<Item = (GraphKey, &'p [Vec<u8>])>,
    ) -> Result<(), StoreError> {
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .or_query_err(self)?;
        if mode.eq_ignore_ascii_case("wal") {
            self.conn
                .query_row("PRAGMA journal_mode=DELETE", [], |row| {
                    row.get::<_, String>(0)
                })
                .or_query_err(self)?;
        }
        self.write_with_version(|s, before| {
            s.conn
                .execute_batch(CREATE_DIAGNOSIS_TABLE)
                .or_query_err(s)?;
            s.conn
                .execute_batch(&format!("DELETE FROM {DIAGNOSIS_TABLE}"))
                .or_query_err(s)?;
            // First, before any page of this transaction can reach the file.
            s.stamp_diagnosis_table(before)?;
            for (graph, parts) in sides {
                s.put_diagnosis_parts(graph, parts)?;
            }
            Ok(())
        })
    }

    /// Writes `parts` as `graph`'s rows of [`DIAGNOSIS_TABLE`] (part 0, 1, … in order), replacing
    /// any it had, and creates the table first when the file has none. Run it inside
    /// [`Store::write`], on a store opened with [`Store::open_for_edit`]; the table is believed
    /// only once stamped ([`Store::write_diagnosis_table`] does both).
    pub fn put_diagnosis_parts(
        &self,
        graph: GraphKey,
        parts: &[Vec<u8>],
    ) -> Result<(), StoreError> {
        self.conn
            .execute_batch(CREATE_DIAGNOSIS_TABLE)
            .or_query_err(self)?;
        self.drop_diagnosis_side(graph)?;
        let mut insert = self
            .conn
            .prepare_cached(&format!(
                "INSERT INTO {DIAGNOSIS_TABLE} (step, rank, data_source, part, data) \
                 VALUES (?, ?, ?, ?, ?)"
            ))
            .or_query_err(self)?;
        for (part, data) in parts.iter().enumerate() {
            insert
                .execute(rusqlite::params![
                    graph.step,
                    graph.rank,
                    graph.side.data_source(),
                    part as i64,
                    data
                ])
                .or_query_err(self)?;
        }
        Ok(())
    }

    /// Deletes one side's rows of [`DIAGNOSIS_TABLE`].
    fn drop_diagnosis_side(&self, graph: GraphKey) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(&format!(
                "DELETE FROM {DIAGNOSIS_TABLE} WHERE step=? AND rank=? AND data_source=?"
            ))
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![
                    graph.step,
                    graph.rank,
                    graph.side.data_source()
                ])
            })
            .or_query_err(self)?;
        Ok(())
    }

    /// Deletes both sides' rows of [`DIAGNOSIS_TABLE`] for the graph at `step` and `rank`, when
    /// the file has the table: what an edit of that graph's rows does in its own transaction, so
    /// that the diagnosis reads the edited rows.
    pub(super) fn drop_diagnosis_graph(&self, step: i64, rank: i64) -> Result<(), StoreError> {
        if self.has_table_named(DIAGNOSIS_TABLE)? {
            // Graph sides only, never the stamp.
            self.conn
                .prepare_cached(&format!(
                    "DELETE FROM {DIAGNOSIS_TABLE} WHERE step=? AND rank=? \
                     AND data_source IN ('{NPU}', '{BENCH}')"
                ))
                .and_then(|mut stmt| stmt.execute([step, rank]))
                .or_query_err(self)?;
        }
        Ok(())
    }
}

//! Our own table of what the diagnosis reads, [`crate::schema::DIAGNOSIS_TABLE`]: its parts
//! read with the blobs borrowed from SQLite, written (by the converter and `gather`, after
//! msprobe's tables), dropped for a graph by our edits, and the checks that say whether it is
//! still true of the rows. What a part holds is the diagnosis's business (its `compact` module);
//! here it is bytes.

use rusqlite::types::ValueRef;

use super::open::{QueryResult, Store, StoreError};
use super::rows::GraphKey;
use crate::schema::{CREATE_DIAGNOSIS_TABLE, DIAGNOSIS_TABLE};

/// The columns [`DIAGNOSIS_TABLE`] must have, in order.
const COLUMNS: [&str; 5] = ["step", "rank", "data_source", "part", "data"];

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

    /// Calls `f` with each part of `graph` in [`DIAGNOSIS_TABLE`], in part order, with its number
    /// and its bytes borrowed from SQLite (a part that is not a blob is handed as empty bytes).
    /// The caller checks [`Store::has_diagnosis_table`] first.
    pub fn scan_diagnosis_parts<E: From<StoreError>>(
        &self,
        graph: GraphKey,
        mut f: impl FnMut(i64, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let sql = format!(
            "SELECT part, data FROM {DIAGNOSIS_TABLE} WHERE step=? AND rank=? AND data_source=? \
             ORDER BY part"
        );
        self.each_graph_row(&sql, graph, |row| {
            let part = match row.get_ref(0).or_query_err(self)? {
                ValueRef::Integer(i) => i,
                _ => -1,
            };
            let data = match row.get_ref(1).or_query_err(self)? {
                ValueRef::Blob(b) => b,
                _ => &[],
            };
            f(part, data)
        })?;
        Ok(self.shrink_page_cache()?)
    }

    /// Writes `parts` as `graph`'s rows of [`DIAGNOSIS_TABLE`] (part 0, 1, … in order), replacing
    /// any it had, and creates the table first when the file has none. Run it inside
    /// [`Store::write`], on a store opened with [`Store::open_for_edit`].
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
        let exists: bool = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type='table' AND name=?)",
            )
            .and_then(|mut stmt| stmt.query_row([DIAGNOSIS_TABLE], |row| row.get(0)))
            .or_query_err(self)?;
        if exists {
            self.conn
                .prepare_cached(&format!(
                    "DELETE FROM {DIAGNOSIS_TABLE} WHERE step=? AND rank=?"
                ))
                .and_then(|mut stmt| stmt.execute([step, rank]))
                .or_query_err(self)?;
        }
        Ok(())
    }
}

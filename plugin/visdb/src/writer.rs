//! Writes a `.vis.db` the way msprobe does: one transaction into a temporary file beside the
//! destination, indexes last, then an atomic rename.
//!
//! Nothing appears under the final name until every row is in, so a failed or interrupted
//! conversion never leaves a half-written `.vis.db` for the catalog to pick up; the temporary file
//! is removed when the writer is dropped without [`VisDbWriter::finish`].

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use crate::schema::{CREATE_INDEXES, CREATE_TABLES, INSERT_NODE_SQL};

/// Errors of the writer; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot create a temporary file in {dir}: {source}")]
    Temp {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("SQLite error writing {path}: {source}")]
    Sql {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot move the finished file to {path}: {source}")]
    Persist {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: UNIQUE constraint failed: tb_nodes.id {id:?} appears twice")]
    Duplicate { path: PathBuf, id: String },
    #[error("the bulk writer cannot build schema.rs's statements: {detail}")]
    Schema { detail: String },
}

/// One `tb_nodes` row (columns in msprobe's order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeRow {
    pub id: String,
    pub graph_id: String,
    pub node_order: i64,
    pub node_name: String,
    pub node_type: String,
    pub up_node: String,
    pub sub_nodes: String,
    /// 0, 0.5, 1 or NULL.
    pub precision_index: Option<f64>,
    pub overflow_level: Option<String>,
    pub micro_step_id: i64,
    pub matched_node_link: String,
    pub stack_id: String,
    pub parallel_merge_info: String,
    pub matched_distributed: String,
    pub modified: i64,
    pub input_data: String,
    pub output_data: String,
    pub data_source: String,
    /// The tensor folder (`NULL` for statistics dumps).
    pub dump_data_dir: Option<String>,
    pub step: i64,
    pub rank: i64,
    pub is_distributed: i64,
}

/// The single `tb_config` row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigRow {
    pub graph_type: String,
    pub task: String,
    /// `NULL` for build graphs.
    pub tool_tip: Option<String>,
    pub micro_steps: i64,
    pub overflow_check: i64,
    pub node_colors: String,
    pub rank_list: String,
    pub step_list: String,
}

/// An open, not yet visible `.vis.db`.
pub struct VisDbWriter {
    conn: Option<Connection>,
    temp: Option<tempfile::TempPath>,
    dest: PathBuf,
}

impl VisDbWriter {
    /// Starts a file that will become `dest` on [`finish`](Self::finish).
    pub fn create(dest: &Path) -> Result<VisDbWriter, WriteError> {
        let dir = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let temp = crate::stale::vis_db_temp_in(&dir)
            .map_err(|source| WriteError::Temp {
                dir: dir.clone(),
                source,
            })?
            .into_temp_path();
        let sql = |source| WriteError::Sql {
            path: dest.to_path_buf(),
            source,
        };
        let conn = Connection::open(&temp).map_err(sql)?;
        conn.execute_batch(
            // 32 KiB pages: rows of a few KiB stay off overflow chains, which makes both the
            // inserts and the index builds (a table scan each) about a third cheaper than with
            // the default 4 KiB. Readers need no setting: the page size is in the file header.
            "PRAGMA page_size=32768; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; \
             PRAGMA temp_store=MEMORY;",
        )
        .map_err(sql)?;
        conn.execute_batch("BEGIN;").map_err(sql)?;
        conn.execute_batch(CREATE_TABLES).map_err(sql)?;
        Ok(VisDbWriter {
            conn: Some(conn),
            temp: Some(temp),
            dest: dest.to_path_buf(),
        })
    }

    fn sql_err(&self, source: rusqlite::Error) -> WriteError {
        WriteError::Sql {
            path: self.dest.clone(),
            source,
        }
    }

    fn conn(&self) -> &Connection {
        // Only `finish` takes the connection, and it consumes `self`.
        self.conn.as_ref().expect("connection present until finish")
    }

    /// Inserts `tb_nodes` rows.
    pub fn insert_nodes<'a>(
        &mut self,
        rows: impl IntoIterator<Item = &'a NodeRow>,
    ) -> Result<(), WriteError> {
        let mut stmt = self
            .conn()
            .prepare_cached(INSERT_NODE_SQL)
            .map_err(|e| self.sql_err(e))?;
        for r in rows {
            stmt.execute(params![
                r.id,
                r.graph_id,
                r.node_order,
                r.node_name,
                r.node_type,
                r.up_node,
                r.sub_nodes,
                r.precision_index,
                r.overflow_level,
                r.micro_step_id,
                r.matched_node_link,
                r.stack_id,
                r.parallel_merge_info,
                r.matched_distributed,
                r.modified,
                r.input_data,
                r.output_data,
                r.data_source,
                r.dump_data_dir,
                r.step,
                r.rank,
                r.is_distributed,
            ])
            .map_err(|e| WriteError::Sql {
                path: self.dest.clone(),
                source: e,
            })?;
        }
        Ok(())
    }

    /// Inserts `tb_stack` rows `(id, stack_info)`.
    pub fn insert_stacks<'a>(
        &mut self,
        rows: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), WriteError> {
        let mut stmt = self
            .conn()
            .prepare_cached("INSERT OR IGNORE INTO tb_stack (id, stack_info) VALUES (?1, ?2)")
            .map_err(|e| self.sql_err(e))?;
        for (id, info) in rows {
            stmt.execute(params![id, info])
                .map_err(|e| WriteError::Sql {
                    path: self.dest.clone(),
                    source: e,
                })?;
        }
        Ok(())
    }

    /// Inserts the `tb_config` row (`id = '1'`; the first writer wins, as in msprobe).
    pub fn insert_config(&mut self, c: &ConfigRow) -> Result<(), WriteError> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO tb_config (id, graph_type, task, tool_tip, micro_steps, \
                 overflow_check, node_colors, rank_list, step_list) \
                 VALUES ('1', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    c.graph_type,
                    c.task,
                    c.tool_tip,
                    c.micro_steps,
                    c.overflow_check,
                    c.node_colors,
                    c.rank_list,
                    c.step_list
                ],
            )
            .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Adds the indexes, commits and moves the file to its final name: `dest`, or the next free
    /// numbered name when `dest` is taken ([`crate::files::persist_new`]; returned).
    pub fn finish(mut self) -> Result<PathBuf, WriteError> {
        let conn = self.conn.take().expect("connection present until finish");
        let sql = |source| WriteError::Sql {
            path: self.dest.clone(),
            source,
        };
        conn.execute_batch(CREATE_INDEXES).map_err(sql)?;
        conn.execute_batch("COMMIT;").map_err(sql)?;
        conn.close().map_err(|(_, e)| sql(e))?;
        let temp = self.temp.take().expect("temp path present until finish");
        // The temporary file is private (0600); the finished one is readable like any output.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o644));
        }
        crate::files::persist_new(temp, &self.dest).map_err(|source| WriteError::Persist {
            path: self.dest.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_file_has_rows_and_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("build_1.vis.db");
        let mut w = VisDbWriter::create(&dest).unwrap();
        let row = NodeRow {
            id: "NPU_0_0_a".into(),
            node_name: "a".into(),
            node_type: "0".into(),
            precision_index: Some(0.5),
            ..Default::default()
        };
        w.insert_nodes([&row]).unwrap();
        w.insert_stacks([("NPU_0_0_0", "[]")]).unwrap();
        w.insert_config(&ConfigRow {
            graph_type: "build".into(),
            ..Default::default()
        })
        .unwrap();
        assert!(!dest.exists(), "nothing visible before finish");
        w.finish().unwrap();
        let conn = Connection::open(&dest).unwrap();
        let n: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'index%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 7);
        let p: f64 = conn
            .query_row("SELECT precision_index FROM tb_nodes", [], |r| r.get(0))
            .unwrap();
        assert_eq!(p, 0.5);
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "only the final file remains");
    }

    #[test]
    fn dropped_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("build_1.vis.db");
        let w = VisDbWriter::create(&dest).unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

//! Indexed reads (and the few in-place edits msprobe's plugin makes) over one `.vis.db` file.
//!
//! Every method is one query on one of msprobe's indexes (`index1`: children of a node,
//! `index2`: a node by name, `index3`/`index5`: a graph in node order), so the cost of a request
//! depends on what it returns, never on the size of the file (except [`Store::scan_index_rows`],
//! the one pass over a whole graph that the service makes once per file version; in the files we
//! write it reads our own covering index, [`schema::NODE_LIST_INDEX`], instead of every row's
//! page). Rows come back as plain structs; the JSON columns are parsed leniently (see
//! [`crate::json`]) and a column that cannot be read becomes a [`StoreError::Data`] naming the
//! file, the node and the column.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Row};
use serde_json::Value;

use crate::json::parse_lenient;
use crate::schema::{self, is_leaf_sql};

mod graph_rows;
pub use graph_rows::GraphRow;

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

/// The `tb_config` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRow {
    /// `"compare"` or `"build"`.
    pub graph_type: String,
    /// `"summary"`, `"md5"` or `"all"`.
    pub task: String,
    pub tool_tip: Value,
    pub micro_steps: i64,
    pub overflow_check: bool,
    /// `{"#RRGGBB": {"value": ..., "description": ..., ...}}` in file order.
    pub node_colors: Value,
    pub ranks: Vec<i64>,
    pub steps: Vec<i64>,
}

impl ConfigRow {
    /// Whether the file holds a target/golden comparison.
    pub fn is_compare(&self) -> bool {
        self.graph_type == "compare"
    }
}

/// Which graph of a file: msprobe's `data_source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The target ("debug") run, `data_source = 'NPU'`.
    Npu,
    /// The golden ("bench") run, `data_source = 'Bench'`.
    Bench,
}

impl Side {
    /// The `data_source` column value.
    pub fn data_source(self) -> &'static str {
        match self {
            Side::Npu => schema::NPU,
            Side::Bench => schema::BENCH,
        }
    }

    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::Npu => Side::Bench,
            Side::Bench => Side::Npu,
        }
    }
}

/// Selects one graph of a file: a side, a step and a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GraphKey {
    pub side: Side,
    pub step: i64,
    pub rank: i64,
}

/// The columns of a node that navigation needs (no input/output data).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub name: String,
    pub up_node: String,
    pub sub_nodes: Vec<String>,
    pub node_type: i32,
    /// `micro_step_id` (msprobe writes 0 when a node has none).
    pub micro_step_id: i64,
    pub matched_node_link: Vec<String>,
    pub precision_index: Option<f64>,
    pub overflow_level: Option<String>,
    pub matched_distributed: Value,
}

/// Everything about one node, for the details panel.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDetailRow {
    pub node: NodeRow,
    pub input_data: Value,
    pub output_data: Value,
    pub stack_info: Vec<String>,
    pub parallel_merge_info: Vec<String>,
    pub modified: i64,
}

/// The page cache of one connection, in KiB (SQLite's `cache_size` takes negative KiB).
const PAGE_CACHE_KIB: i64 = -8 * 1024;
/// The page cache during a pass over a whole graph ([`Store::scan_index_rows`]), in KiB.
const SCAN_PAGE_CACHE_KIB: i64 = -512;

const NODE_COLUMNS: &str = "node_name, up_node, sub_nodes, node_type, micro_step_id, \
     matched_node_link, precision_index, overflow_level, matched_distributed";

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
    conn: Connection,
}

/// The index pass ([`Store::scan_index_rows`]): read from our covering index
/// [`schema::NODE_LIST_INDEX`] alone where the file has it (ours), else through `index3` and the
/// rows (msprobe's files).
const INDEX_PASS_SQL: &str = concat!(
    "SELECT node_name, ",
    is_leaf_sql!(),
    ", micro_step_id, precision_index, matched_node_link FROM tb_nodes \
     WHERE step=? AND rank=? AND data_source=? ORDER BY node_order"
);

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

    fn query_err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Query {
            path: self.path.clone(),
            source,
        }
    }

    fn data_err(&self, what: impl Into<String>, reason: impl Into<String>) -> StoreError {
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
            .map_err(|e| self.query_err(e))?;
        Ok(count == 7)
    }

    /// The `tb_config` row. Read by every request of the service (which checks the selection
    /// against it): the statement is prepared once per connection.
    pub fn config(&self) -> Result<ConfigRow, StoreError> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT graph_type, task, tool_tip, micro_steps, overflow_check, node_colors, \
                 rank_list, step_list FROM tb_config LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([], |row| {
                    Ok((
                        row.get::<_, Option<String>>(0)?,
                        row.get::<_, Option<String>>(1)?,
                        row.get::<_, Option<String>>(2)?,
                        row.get::<_, Option<i64>>(3)?,
                        row.get::<_, Option<i64>>(4)?,
                        row.get::<_, Option<String>>(5)?,
                        row.get::<_, Option<String>>(6)?,
                        row.get::<_, Option<String>>(7)?,
                    ))
                })
                .optional()
            })
            .map_err(|e| self.query_err(e))?
            .ok_or_else(|| self.data_err("tb_config", "the table is empty"))?;
        let (graph_type, task, tool_tip, micro_steps, overflow, colors, ranks, steps) = row;
        let json = |what: &str, text: Option<String>| -> Result<Value, StoreError> {
            match text {
                None => Ok(Value::Null),
                Some(t) => parse_lenient(&t)
                    .map(|v| v.unwrap_or(Value::Null))
                    .map_err(|e| self.data_err(format!("tb_config.{what}"), e.to_string())),
            }
        };
        let int_list = |what: &str, text: Option<String>| -> Result<Vec<i64>, StoreError> {
            match json(what, text)? {
                Value::Array(items) => items
                    .iter()
                    .map(|v| {
                        v.as_i64().ok_or_else(|| {
                            self.data_err(format!("tb_config.{what}"), format!("{v} is not an int"))
                        })
                    })
                    .collect(),
                Value::Null => Ok(Vec::new()),
                other => Err(self.data_err(
                    format!("tb_config.{what}"),
                    format!("expected a list, found {other}"),
                )),
            }
        };
        Ok(ConfigRow {
            graph_type: graph_type.unwrap_or_default(),
            task: task.unwrap_or_default(),
            tool_tip: json("tool_tip", tool_tip)?,
            micro_steps: micro_steps.unwrap_or(0),
            overflow_check: overflow.unwrap_or(0) != 0,
            node_colors: json("node_colors", colors)?,
            ranks: int_list("rank_list", ranks)?,
            steps: int_list("step_list", steps)?,
        })
    }

    fn node_from_row(&self, row: &Row<'_>) -> Result<NodeRow, StoreError> {
        let get = |i: usize| -> Result<SqlValue, StoreError> {
            row.get::<_, SqlValue>(i).map_err(|e| self.query_err(e))
        };
        let name = text(get(0)?);
        let what = |col: &str| format!("{col} of node {name}");
        let sub_nodes = string_list(&text(get(2)?))
            .map_err(|reason| self.data_err(what("sub_nodes"), reason))?;
        let node_type_text = text(get(3)?);
        let node_type = node_type_text.trim().parse::<i32>().map_err(|_| {
            self.data_err(
                what("node_type"),
                format!("{node_type_text:?} is not a number"),
            )
        })?;
        let matched_node_link = string_list(&text(get(5)?))
            .map_err(|reason| self.data_err(what("matched_node_link"), reason))?;
        let matched_distributed = match parse_lenient(&text(get(8)?)) {
            Ok(Some(v)) => v,
            Ok(None) => Value::Object(Default::default()),
            Err(e) => return Err(self.data_err(what("matched_distributed"), e.to_string())),
        };
        Ok(NodeRow {
            up_node: text(get(1)?),
            sub_nodes,
            node_type,
            micro_step_id: integer(get(4)?).unwrap_or(0),
            matched_node_link,
            precision_index: number(get(6)?),
            overflow_level: match get(7)? {
                SqlValue::Null => None,
                v => Some(text(v)).filter(|s| !s.is_empty()),
            },
            matched_distributed,
            name,
        })
    }

    fn nodes(
        &self,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<NodeRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| self.query_err(e))?;
        let mut rows = stmt.query(params).map_err(|e| self.query_err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.query_err(e))? {
            out.push(self.node_from_row(row)?);
        }
        Ok(out)
    }

    /// The root of a graph (`up_node = ''`), if the graph exists.
    pub fn root(&self, graph: GraphKey) -> Result<Option<NodeRow>, StoreError> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
             AND up_node='' ORDER BY node_order LIMIT 1"
        );
        Ok(self
            .nodes(&sql, &[&graph.step, &graph.rank, &graph.side.data_source()])?
            .into_iter()
            .next())
    }

    /// The children of `parent` in node order (index1).
    pub fn children(&self, graph: GraphKey, parent: &str) -> Result<Vec<NodeRow>, StoreError> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
             AND up_node=? ORDER BY node_order"
        );
        self.nodes(
            &sql,
            &[&graph.step, &graph.rank, &graph.side.data_source(), &parent],
        )
    }

    /// One node by name (index2).
    pub fn node(&self, graph: GraphKey, name: &str) -> Result<Option<NodeRow>, StoreError> {
        let sql = format!(
            "SELECT {NODE_COLUMNS} FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
             AND node_name=? LIMIT 1"
        );
        Ok(self
            .nodes(
                &sql,
                &[&graph.step, &graph.rank, &graph.side.data_source(), &name],
            )?
            .into_iter()
            .next())
    }

    /// A node and its ancestors, the node first and the root last. Empty if the node is unknown.
    /// A cycle in `up_node` (a corrupt file) stops the walk instead of looping.
    pub fn ancestry(&self, graph: GraphKey, name: &str) -> Result<Vec<NodeRow>, StoreError> {
        let mut chain: Vec<NodeRow> = Vec::new();
        let mut next = Some(name.to_owned());
        while let Some(current) = next.take() {
            if chain.iter().any(|n| n.name == current) {
                return Err(self.data_err(
                    format!("up_node chain of {name}"),
                    format!("{current} is its own ancestor"),
                ));
            }
            let Some(node) = self.node(graph, &current)? else {
                break;
            };
            if !node.up_node.is_empty() {
                next = Some(node.up_node.clone());
            }
            chain.push(node);
        }
        Ok(chain)
    }

    /// Everything about one node, with its stack (an absent stack row is an empty stack).
    pub fn node_detail(
        &self,
        graph: GraphKey,
        name: &str,
    ) -> Result<Option<NodeDetailRow>, StoreError> {
        let sql = "SELECT n.node_name, n.up_node, n.sub_nodes, n.node_type, n.micro_step_id, \
             n.matched_node_link, n.precision_index, n.overflow_level, n.matched_distributed, \
             n.input_data, n.output_data, n.parallel_merge_info, n.modified, s.stack_info \
             FROM tb_nodes n LEFT JOIN tb_stack s ON n.stack_id = s.id \
             WHERE n.step=? AND n.rank=? AND n.data_source=? AND n.node_name=? LIMIT 1";
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| self.query_err(e))?;
        let mut rows = stmt
            .query(rusqlite::params![
                graph.step,
                graph.rank,
                graph.side.data_source(),
                name
            ])
            .map_err(|e| self.query_err(e))?;
        let Some(row) = rows.next().map_err(|e| self.query_err(e))? else {
            return Ok(None);
        };
        let node = self.node_from_row(row)?;
        let get = |i: usize| -> Result<SqlValue, StoreError> {
            row.get::<_, SqlValue>(i).map_err(|e| self.query_err(e))
        };
        let what = |col: &str| format!("{col} of node {name}");
        let object = |col: &str, v: SqlValue| -> Result<Value, StoreError> {
            match parse_lenient(&text(v)) {
                Ok(Some(v @ Value::Object(_))) => Ok(v),
                Ok(Some(Value::Null)) | Ok(None) => Ok(Value::Object(Default::default())),
                Ok(Some(other)) => Err(self.data_err(
                    what(col),
                    format!("expected an object, found {}", kind(&other)),
                )),
                Err(e) => Err(self.data_err(what(col), e.to_string())),
            }
        };
        let input_data = object("input_data", get(9)?)?;
        let output_data = object("output_data", get(10)?)?;
        let parallel_merge_info = loose_string_list(&text(get(11)?))
            .map_err(|reason| self.data_err(what("parallel_merge_info"), reason))?;
        let modified = integer(get(12)?).unwrap_or(0);
        let stack_info = loose_string_list(&text(get(13)?))
            .map_err(|reason| self.data_err(what("stack_info"), reason))?;
        Ok(Some(NodeDetailRow {
            node,
            input_data,
            output_data,
            stack_info,
            parallel_merge_info,
            modified,
        }))
    }

    /// Node names of one side in node order, optionally of one micro step (`-1`: all).
    pub fn node_names(&self, graph: GraphKey, micro_step: i64) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT node_name FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
                 AND (?4 = -1 OR micro_step_id = ?4) ORDER BY node_order",
            )
            .map_err(|e| self.query_err(e))?;
        let names = stmt
            .query_map(
                rusqlite::params![graph.step, graph.rank, graph.side.data_source(), micro_step],
                |row| row.get::<_, SqlValue>(0).map(text),
            )
            .and_then(|rows| rows.collect())
            .map_err(|e| self.query_err(e))?;
        Ok(names)
    }

    /// Every node of one graph in node order, with what the service's per-graph indexes keep
    /// (see [`IndexRow`]); `f` is called once per node. One pass over the graph's rows, the one
    /// read whose cost grows with the graph: columns are borrowed from SQLite's row (no text is
    /// copied but a partner named with JSON escapes), and only the partner of
    /// `matched_node_link` is parsed out of it.
    pub fn scan_index_rows(
        &self,
        graph: GraphKey,
        mut f: impl FnMut(IndexRow<'_>),
    ) -> Result<(), StoreError> {
        // Each page is read once: a small page cache for the pass saves filling (and faulting
        // in) the connection's 8 MB with pages that are then dropped.
        self.set_page_cache(SCAN_PAGE_CACHE_KIB)?;
        let scanned = self.each_graph_row(INDEX_PASS_SQL, graph, |row| -> Result<(), StoreError> {
            let get = |i: usize| row.get_ref(i).map_err(|e| self.query_err(e));
            let name = text_ref(get(0)?);
            let is_leaf = integer_ref(get(1)?).unwrap_or(0) != 0;
            let micro_step_id = integer_ref(get(2)?).unwrap_or(0);
            let precision_index = number_ref(get(3)?);
            let link = text_ref(get(4)?);
            let linked = !matches!(link.trim(), "" | "[]");
            let link_last = if linked {
                last_string(&link).map_err(|reason| {
                    self.data_err(format!("matched_node_link of node {name}"), reason)
                })?
            } else {
                None
            };
            f(IndexRow {
                name: &name,
                is_leaf,
                micro_step_id,
                precision_index,
                linked,
                link_last,
            });
            Ok(())
        });
        self.set_page_cache(PAGE_CACHE_KIB)?;
        scanned?;
        self.shrink_page_cache()
    }

    fn set_page_cache(&self, kib: i64) -> Result<(), StoreError> {
        self.conn
            .pragma_update(None, "cache_size", kib)
            .map_err(|e| self.query_err(e))
    }

    /// Runs `sql`, whose three parameters are a graph's step, rank and side, and hands each row
    /// to `f` in turn.
    fn each_graph_row<E: From<StoreError>>(
        &self,
        sql: &str,
        graph: GraphKey,
        mut f: impl FnMut(&Row<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(|e| self.query_err(e))?;
        let mut rows = stmt
            .query(rusqlite::params![
                graph.step,
                graph.rank,
                graph.side.data_source()
            ])
            .map_err(|e| self.query_err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.query_err(e))? {
            f(row)?;
        }
        Ok(())
    }

    /// After a pass over a whole graph: the pass filled this connection's page cache with pages
    /// nobody will read soon.
    fn shrink_page_cache(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("PRAGMA shrink_memory")
            .map_err(|e| self.query_err(e))
    }

    /// `(name, last element of matched_node_link)` of every node of one side in node order,
    /// with `None` for unmatched nodes.
    pub fn match_links(
        &self,
        graph: GraphKey,
        micro_step: i64,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT node_name, matched_node_link FROM tb_nodes WHERE step=? AND rank=? \
                 AND data_source=? AND (?4 = -1 OR micro_step_id = ?4) ORDER BY node_order",
            )
            .map_err(|e| self.query_err(e))?;
        let mut rows = stmt
            .query(rusqlite::params![
                graph.step,
                graph.rank,
                graph.side.data_source(),
                micro_step
            ])
            .map_err(|e| self.query_err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.query_err(e))? {
            let name = text(row.get::<_, SqlValue>(0).map_err(|e| self.query_err(e))?);
            let link = text(row.get::<_, SqlValue>(1).map_err(|e| self.query_err(e))?);
            let link = string_list(&link).map_err(|reason| {
                self.data_err(format!("matched_node_link of node {name}"), reason)
            })?;
            out.push((name, link.last().cloned()));
        }
        Ok(out)
    }

    /// Leaf nodes of the target side (`sub_nodes` empty) in node order with their precision
    /// index and whether they are matched: the candidates of the precision filter.
    pub fn leaf_precisions(
        &self,
        step: i64,
        rank: i64,
        micro_step: i64,
    ) -> Result<Vec<LeafPrecision>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(concat!(
                "SELECT node_name, precision_index, matched_node_link FROM tb_nodes \
                 WHERE step=? AND rank=? AND data_source='NPU' AND (?3 = -1 OR micro_step_id = ?3) \
                 AND ",
                is_leaf_sql!(),
                " ORDER BY node_order"
            ))
            .map_err(|e| self.query_err(e))?;
        let mut rows = stmt
            .query(rusqlite::params![step, rank, micro_step])
            .map_err(|e| self.query_err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.query_err(e))? {
            let get = |i: usize| row.get::<_, SqlValue>(i).map_err(|e| self.query_err(e));
            let name = text(get(0)?);
            let link = text(get(2)?);
            let matched = !matches!(link.trim(), "" | "[]");
            out.push(LeafPrecision {
                precision_index: number(get(1)?),
                matched,
                name,
            });
        }
        Ok(out)
    }

    /// Leaf nodes of the target side whose overflow level is one of `levels`, in node order.
    pub fn leaf_overflows(
        &self,
        step: i64,
        rank: i64,
        micro_step: i64,
        levels: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        if levels.is_empty() {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(concat!(
                "SELECT node_name, overflow_level FROM tb_nodes \
                 WHERE step=? AND rank=? AND data_source='NPU' AND (?3 = -1 OR micro_step_id = ?3) \
                 AND ",
                is_leaf_sql!(),
                " AND overflow_level IS NOT NULL AND overflow_level != '' ORDER BY node_order"
            ))
            .map_err(|e| self.query_err(e))?;
        let rows: Vec<(String, String)> = stmt
            .query_map(rusqlite::params![step, rank, micro_step], |row| {
                Ok((
                    row.get::<_, SqlValue>(0).map(text)?,
                    row.get::<_, SqlValue>(1).map(text)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.query_err(e))?;
        Ok(rows
            .into_iter()
            .filter(|(_, level)| levels.iter().any(|l| l == level))
            .collect())
    }
}

/// One node's new match state, as a manual match or unmatch writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchUpdate {
    pub graph: GraphKey,
    pub name: String,
    /// `json.dumps` of the new `matched_node_link` list.
    pub matched_node_link: String,
    /// The new `input_data` / `output_data` JSON text.
    pub input_data: String,
    pub output_data: String,
    pub precision_index: Option<f64>,
}

/// What `updatePrecisionError` needs of one target node.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputRow {
    pub name: String,
    pub matched: bool,
    pub output_data: Value,
    pub precision_index: Option<f64>,
}

/// The writes of matching, colours and precision (`docs/visdb.md` §4).
///
/// Every write runs inside [`Store::write`], one `BEGIN IMMEDIATE` transaction: two clients
/// editing one file at once are serialized by SQLite's write lock (the other waits up to the
/// busy timeout), reads inside the transaction see its own earlier writes, and a failure rolls
/// everything back, so a file is never left half-edited.
impl Store {
    /// Runs `f` in one write transaction; commits when it returns `Ok`, rolls back otherwise.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.query_err(e))?;
        match f(self) {
            Ok(v) => {
                if let Err(e) = self.conn.execute_batch("COMMIT") {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(self.query_err(e));
                }
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Every node of one graph in node order with its raw `input_data` and `output_data` texts,
    /// handed to `f` one at a time (the texts of a large graph are too big to hold at once).
    /// The one full read that diagnosis makes of a graph.
    pub fn scan_data_rows<E: From<StoreError>>(
        &self,
        graph: GraphKey,
        mut f: impl FnMut(DataRow) -> Result<(), E>,
    ) -> Result<(), E> {
        let sql = format!(
            "SELECT {NODE_COLUMNS}, input_data, output_data FROM tb_nodes \
             WHERE step=? AND rank=? AND data_source=? ORDER BY node_order"
        );
        self.each_graph_row(&sql, graph, |row| {
            let node = self.node_from_row(row)?;
            let get = |i: usize| row.get::<_, SqlValue>(i).map_err(|e| self.query_err(e));
            let input_data = text(get(9)?);
            let output_data = text(get(10)?);
            f(DataRow {
                node,
                input_data,
                output_data,
            })
        })?;
        Ok(self.shrink_page_cache()?)
    }

    /// The raw `input_data` and `output_data` texts of a node (for rewriting them in order).
    pub fn node_data_text(
        &self,
        graph: GraphKey,
        name: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT input_data, output_data FROM tb_nodes WHERE step=? AND rank=? \
                 AND data_source=? AND node_name=? LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
                    rusqlite::params![graph.step, graph.rank, graph.side.data_source(), name],
                    |row| {
                        Ok((
                            row.get::<_, SqlValue>(0).map(text)?,
                            row.get::<_, SqlValue>(1).map(text)?,
                        ))
                    },
                )
                .optional()
            })
            .map_err(|e| self.query_err(e))
    }

    /// The `dump_data_dir` of a node (where tensor-mode files are), if any.
    pub fn dump_data_dir(&self, graph: GraphKey, name: &str) -> Result<Option<String>, StoreError> {
        let dir: Option<Option<String>> = self
            .conn
            .prepare_cached(
                "SELECT dump_data_dir FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
                 AND node_name=? LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
                    rusqlite::params![graph.step, graph.rank, graph.side.data_source(), name],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()
            })
            .map_err(|e| self.query_err(e))?;
        Ok(dir.flatten().filter(|d| !d.is_empty()))
    }

    /// Writes one node's match state and marks it `modified = 1` (msprobe's `update_nodes_info`).
    pub fn update_match(&self, u: &MatchUpdate) -> Result<(), StoreError> {
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE tb_nodes SET matched_node_link=?, input_data=?, output_data=?, \
                 precision_index=?, modified=1 WHERE step=? AND rank=? AND data_source=? \
                 AND node_name=?",
            )
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![
                    u.matched_node_link,
                    u.input_data,
                    u.output_data,
                    u.precision_index,
                    u.graph.step,
                    u.graph.rank,
                    u.graph.side.data_source(),
                    u.name
                ])
            })
            .map_err(|e| self.query_err(e))?;
        if changed == 0 {
            return Err(self.data_err(format!("node {}", u.name), "no such node to update"));
        }
        Ok(())
    }

    /// Sets the precision index of one target node.
    pub fn set_precision(
        &self,
        graph: GraphKey,
        name: &str,
        precision_index: Option<f64>,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE tb_nodes SET precision_index=? WHERE step=? AND rank=? \
                 AND data_source=? AND node_name=?",
            )
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![
                    precision_index,
                    graph.step,
                    graph.rank,
                    graph.side.data_source(),
                    name
                ])
            })
            .map_err(|e| self.query_err(e))?;
        Ok(())
    }

    /// Replaces `tb_config.node_colors` (JSON text).
    pub fn set_node_colors(&self, colors_json: &str) -> Result<(), StoreError> {
        let changed = self
            .conn
            .execute("UPDATE tb_config SET node_colors=?", [colors_json])
            .map_err(|e| self.query_err(e))?;
        if changed == 0 {
            return Err(self.data_err("tb_config", "the table is empty"));
        }
        Ok(())
    }

    /// `(name, last link)` of every manually edited, matched node of a step and rank, both
    /// sides, in node order (msprobe's `query_modify_matched_nodes_list`, the `.vis.config`).
    pub fn modified_links(
        &self,
        step: i64,
        rank: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT node_name, matched_node_link FROM tb_nodes WHERE step=? AND rank=? \
                 AND modified=1 AND matched_node_link IS NOT NULL AND matched_node_link != '[]' \
                 AND matched_node_link != '' ORDER BY data_source DESC, node_order",
            )
            .map_err(|e| self.query_err(e))?;
        let rows: Vec<(String, String)> = stmt
            .query_map(rusqlite::params![step, rank], |row| {
                Ok((
                    row.get::<_, SqlValue>(0).map(text)?,
                    row.get::<_, SqlValue>(1).map(text)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.query_err(e))?;
        let mut out = Vec::with_capacity(rows.len());
        for (name, link) in rows {
            let link = string_list(&link).map_err(|reason| {
                self.data_err(format!("matched_node_link of node {name}"), reason)
            })?;
            if let Some(last) = link.last() {
                out.push((name, last.clone()));
            }
        }
        Ok(out)
    }

    /// Every target node of a step and rank with its output data (msprobe's query 15).
    pub fn target_outputs(&self, step: i64, rank: i64) -> Result<Vec<OutputRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT node_name, matched_node_link, output_data, precision_index FROM tb_nodes \
                 WHERE step=? AND rank=? AND data_source='NPU' ORDER BY node_order",
            )
            .map_err(|e| self.query_err(e))?;
        let mut rows = stmt
            .query(rusqlite::params![step, rank])
            .map_err(|e| self.query_err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.query_err(e))? {
            let get = |i: usize| row.get::<_, SqlValue>(i).map_err(|e| self.query_err(e));
            let name = text(get(0)?);
            let matched = !matches!(text(get(1)?).trim(), "" | "[]");
            let output_data = match parse_lenient(&text(get(2)?)) {
                Ok(Some(v)) => v,
                Ok(None) => Value::Object(Default::default()),
                Err(e) => {
                    return Err(self.data_err(format!("output_data of node {name}"), e.to_string()))
                }
            };
            out.push(OutputRow {
                matched,
                output_data,
                precision_index: number(get(3)?),
                name,
            });
        }
        Ok(out)
    }
}

/// One node as [`Store::scan_data_rows`] reads it: the navigation columns and the raw JSON texts.
#[derive(Debug, Clone, PartialEq)]
pub struct DataRow {
    pub node: NodeRow,
    pub input_data: String,
    pub output_data: String,
}

/// One node as [`Store::scan_index_rows`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexRow<'a> {
    pub name: &'a str,
    /// `sub_nodes` is empty (a candidate of the filters).
    pub is_leaf: bool,
    pub micro_step_id: i64,
    pub precision_index: Option<f64>,
    /// `matched_node_link` is not empty text or `[]` (the filters' notion of matched).
    pub linked: bool,
    /// The last element of `matched_node_link` (the partner, for the matched relations):
    /// borrowed from the row unless the JSON text escapes characters of it.
    pub link_last: Option<Cow<'a, str>>,
}

/// A candidate of the precision filter.
#[derive(Debug, Clone, PartialEq)]
pub struct LeafPrecision {
    pub name: String,
    pub precision_index: Option<f64>,
    pub matched: bool,
}

/// SQLite value as text (numbers printed, NULL empty).
fn text(v: SqlValue) -> String {
    match v {
        SqlValue::Null => String::new(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => f.to_string(),
        SqlValue::Text(t) => t,
        SqlValue::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
    }
}

fn integer(v: SqlValue) -> Option<i64> {
    match v {
        SqlValue::Integer(i) => Some(i),
        SqlValue::Real(f) => Some(f as i64),
        SqlValue::Text(t) => t.trim().parse().ok(),
        _ => None,
    }
}

/// A numeric column; NULL, empty text and non-numbers are `None`.
fn number(v: SqlValue) -> Option<f64> {
    match v {
        SqlValue::Integer(i) => Some(i as f64),
        SqlValue::Real(f) => Some(f),
        SqlValue::Text(t) => t.trim().parse().ok(),
        _ => None,
    }
}

/// A borrowed SQLite value as text, as [`text`] prints it: borrowed when it is (valid UTF-8)
/// text, printed otherwise.
fn text_ref(v: ValueRef<'_>) -> Cow<'_, str> {
    match v {
        ValueRef::Null => Cow::Borrowed(""),
        ValueRef::Integer(i) => Cow::Owned(i.to_string()),
        ValueRef::Real(f) => Cow::Owned(f.to_string()),
        // Checked with `from_utf8` first: its ASCII fast path is several times quicker than the
        // lossy decoder, which showed as a tenth of an index build; the lossy one only for bad text.
        ValueRef::Text(t) | ValueRef::Blob(t) => match std::str::from_utf8(t) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(t),
        },
    }
}

/// [`integer`] of a borrowed value.
fn integer_ref(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// [`number`] of a borrowed value.
fn number_ref(v: ValueRef<'_>) -> Option<f64> {
    match v {
        ValueRef::Integer(i) => Some(i as f64),
        ValueRef::Real(f) => Some(f),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// One string of a JSON list, borrowed from the text when it has no escapes.
#[derive(serde::Deserialize)]
struct ListItem<'a>(#[serde(borrow)] Cow<'a, str>);

/// The last string of a JSON list of strings, the others read and dropped as they come.
struct LastItem<'a>(Option<Cow<'a, str>>);

impl<'de> serde::Deserialize<'de> for LastItem<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items;
        impl<'de> serde::de::Visitor<'de> for Items {
            type Value = LastItem<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of strings")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<LastItem<'de>, A::Error> {
                let mut last = None;
                while let Some(ListItem(item)) = seq.next_element()? {
                    last = Some(item);
                }
                Ok(LastItem(last))
            }
        }
        d.deserialize_seq(Items)
    }
}

/// The last element of a JSON list of strings ([`string_list`]'s reading, same errors), without
/// building the list: a strict list of strings is read borrowing from `text`; anything else
/// (bare `NaN`, `null`, a wrong type) goes through [`string_list`].
fn last_string(text: &str) -> Result<Option<Cow<'_, str>>, ListError> {
    match serde_json::from_str::<LastItem<'_>>(text.trim()) {
        Ok(LastItem(last)) => Ok(last),
        Err(_) => Ok(string_list(text)?.pop().map(Cow::Owned)),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Why a column that holds a JSON list of names does not (the `reason` of a
/// [`StoreError::Data`] naming the column and the node).
#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("expected strings, found {0}")]
    NotStrings(&'static str),
    #[error("expected a list, found {0}")]
    NotAList(&'static str),
}

impl From<ListError> for String {
    fn from(e: ListError) -> String {
        e.to_string()
    }
}

/// A JSON list of strings; empty text or `null` is an empty list.
fn string_list(text: &str) -> Result<Vec<String>, ListError> {
    match parse_lenient(text)? {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                other => Err(ListError::NotStrings(kind(&other))),
            })
            .collect(),
        Some(other) => Err(ListError::NotAList(kind(&other))),
    }
}

/// Like [`string_list`] but any item is printed as text, and a bare string is one item
/// (stack and merge info come in several shapes across msprobe versions).
fn loose_string_list(text: &str) -> Result<Vec<String>, ListError> {
    match parse_lenient(text)? {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect()),
        Some(Value::String(s)) => Ok(vec![s]),
        Some(other) => Ok(vec![other.to_string()]),
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

    /// Every row of the index pass, both sides: (name, leaf, micro step, precision, linked,
    /// partner).
    type PassRow = (String, bool, i64, Option<f64>, bool, Option<String>);

    fn index_pass(path: &Path) -> Vec<PassRow> {
        let store = Store::open(path).expect("open");
        let mut rows = Vec::new();
        for side in [Side::Npu, Side::Bench] {
            let graph = GraphKey {
                side,
                step: 0,
                rank: 0,
            };
            store
                .scan_index_rows(graph, |r| {
                    rows.push((
                        r.name.to_owned(),
                        r.is_leaf,
                        r.micro_step_id,
                        r.precision_index,
                        r.linked,
                        r.link_last.map(Cow::into_owned),
                    ))
                })
                .expect("index pass");
        }
        rows
    }

    fn index_pass_plan(conn: &Connection) -> String {
        conn.query_row(
            &format!("EXPLAIN QUERY PLAN {INDEX_PASS_SQL}"),
            rusqlite::params![0, 0, "NPU"],
            |r| r.get(3),
        )
        .expect("plan")
    }

    /// The index pass reads our files from `ga_node_list` alone, and a file without that index
    /// (msprobe's) gives the same rows through `index3`; SQLite keeps our index right through
    /// another program's edits.
    #[test]
    fn the_index_pass_reads_our_covering_index_and_the_same_rows_without_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shape = crate::synthetic::Shape::with_nodes(400, 3, true);
        let ours = crate::synthetic::write(&dir.path().join("ours.vis.db"), shape).expect("write");
        let conn = Connection::open(&ours).expect("open");
        // Another program's edits, through SQLite: each shape of "no sub nodes", a new partner
        // and a new precision.
        conn.execute_batch(
            "UPDATE tb_nodes SET sub_nodes = '[]' WHERE node_order = 1;
             UPDATE tb_nodes SET sub_nodes = NULL WHERE node_order = 2;
             UPDATE tb_nodes SET sub_nodes = '[\"x\"]' WHERE node_order = 3 AND sub_nodes = '';
             UPDATE tb_nodes SET matched_node_link = '[\"elsewhere\"]', precision_index = 0.25
                 WHERE node_order = 5;",
        )
        .expect("edit");
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .expect("integrity");
        assert_eq!(ok, "ok");
        let plan = index_pass_plan(&conn);
        let covering = format!("COVERING INDEX {}", schema::NODE_LIST_INDEX);
        assert!(plan.contains(&covering), "{plan}");
        drop(conn);
        let theirs = dir.path().join("theirs.vis.db");
        std::fs::copy(&ours, &theirs).expect("copy");
        let conn = Connection::open(&theirs).expect("open");
        conn.execute_batch(&format!("DROP INDEX {}", schema::NODE_LIST_INDEX))
            .expect("drop");
        assert!(index_pass_plan(&conn).contains("index3"));
        drop(conn);
        let rows = index_pass(&ours);
        assert_eq!(rows.len(), 2 * shape.nodes_per_side(), "both sides");
        assert_eq!(rows, index_pass(&theirs));
        let leaf = |order: usize| rows[order].1;
        assert!(leaf(1) && leaf(2), "[] and NULL are leaves");
        assert_eq!(rows[5].5.as_deref(), Some("elsewhere"));
        assert_eq!(rows[5].3, Some(0.25));
    }

    /// The index pass reads the partner without building the list: it must read every shape
    /// exactly as `string_list` does (escapes, bare NaN, `null`) and fail where it fails.
    #[test]
    fn the_last_string_of_a_list_reads_as_string_list_does() {
        for text in [
            r#"["up", "name"]"#,
            r#" ["a\"b", "c\u00e9\n"] "#,
            "[]",
            "null",
            r#"["x"]"#,
            "[NaN]",
            r#"["a", 1]"#,
            r#"{"a": "b"}"#,
            "not json",
        ] {
            let expected = string_list(text)
                .map(|mut l| l.pop())
                .map_err(|e| e.to_string());
            let got = last_string(text)
                .map(|l| l.map(Cow::into_owned))
                .map_err(|e| e.to_string());
            assert_eq!(got, expected, "{text}");
        }
        assert!(string_list(r#"["a", 1]"#).is_err());
        assert!(matches!(
            last_string(r#"["up", "name"]"#),
            Ok(Some(Cow::Borrowed("name")))
        ));
    }
}

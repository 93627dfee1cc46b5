//! The [`BulkWriter`]: its tables' b-trees filled as rows arrive, its indexes written at
//! [`finish`](BulkWriter::finish) (sorted in memory or spilled, [`super::spill`]) or given
//! already sorted by the caller ([`BulkWriter::create_sorted`], cut by [`super::sorted`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::file::PageFile;
use super::format::{db_header, encode_record, Geometry, Value, DB_HEADER, PAGE_SIZE};
use super::index::{self, IndexRows};
use super::sorted::{index_key, SortedError, SortedIndex};
use super::spill::{self, SpilledEntries};
use super::table::{self, TableTree};
use crate::schema::{CREATE_INDEXES, CREATE_TABLES, NODE_COLUMNS};
use crate::writer::{ConfigRow, NodeRow, WriteError};

/// Indexes whose entries one parallel task makes, row by row (each row's columns are read once
/// per task).
const INDEXES_PER_TASK: usize = 3;

/// An open, not yet visible `.vis.db`, written without SQLite.
pub struct BulkWriter {
    // Declared before `temp` so the file is closed before the temporary path is removed.
    file: PageFile,
    temp: tempfile::TempPath,
    dest: PathBuf,
    geo: Geometry,
    schema: Schema,
    nodes: TableTree,
    /// Entries of [`Schema::node_indexes`], in that order, since the last spill.
    node_indexes: Vec<IndexRows>,
    /// Where `node_indexes` go past [`index_budget`](Self::index_budget) bytes (created then).
    spilled: Option<SpilledEntries>,
    index_budget: usize,
    stacks: TableTree,
    stack_ids: HashSet<Box<str>>,
    stack_index: IndexRows,
    config: TableTree,
    config_index: IndexRows,
    /// `tb_nodes`' indexes come sorted from the caller ([`BulkWriter::create_sorted`]): the
    /// writer keeps no entries of its own, and these are the roots of those written so far.
    sorted_roots: Option<HashMap<String, u32>>,
    /// A write failed: the trees no longer match their indexes, so nothing more is accepted.
    broken: bool,
}

impl BulkWriter {
    /// Starts a file that will become `dest` on [`finish`](Self::finish); until then it is a
    /// temporary file beside `dest` (`.graph-ascend-<host>.<pid>.*.vis.db.tmp`; the stale ones
    /// of killed writers are removed first, see [`crate::stale`]).
    pub fn create(dest: &Path) -> Result<BulkWriter, WriteError> {
        BulkWriter::with_page_size(dest, PAGE_SIZE)
    }

    /// [`create`](Self::create) with another page size (tests use small pages for deep trees).
    pub(crate) fn with_page_size(dest: &Path, page_size: usize) -> Result<BulkWriter, WriteError> {
        let io = |source| WriteError::Io {
            path: dest.to_path_buf(),
            source,
        };
        if !page_size.is_power_of_two() || !(512..=65_536).contains(&page_size) {
            return Err(io(std::io::Error::other("unsupported page size")));
        }
        let schema = Schema::parse()?;
        let dir = dest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let (handle, temp) = crate::stale::vis_db_temp_in(&dir)
            .map_err(|source| WriteError::Temp { dir, source })?
            .into_parts();
        let geo = Geometry { page_size };
        Ok(BulkWriter {
            file: PageFile::new(handle, page_size).map_err(io)?,
            temp,
            dest: dest.to_path_buf(),
            geo,
            node_indexes: schema
                .node_indexes
                .iter()
                .map(|_| IndexRows::default())
                .collect(),
            spilled: None,
            index_budget: spill::DEFAULT_BUDGET,
            schema,
            nodes: TableTree::new(geo),
            stacks: TableTree::new(geo),
            stack_ids: HashSet::new(),
            stack_index: IndexRows::default(),
            config: TableTree::new(geo),
            config_index: IndexRows::default(),
            sorted_roots: None,
            broken: false,
        })
    }

    /// The index entries spilled so far (tests: how many runs).
    #[cfg(test)]
    pub(super) fn spilled(&self) -> Option<&SpilledEntries> {
        self.spilled.as_ref()
    }

    /// Marks the writer broken by `source`, and names the file.
    fn fail(&mut self, source: std::io::Error) -> WriteError {
        self.broken = true;
        WriteError::Io {
            path: self.dest.clone(),
            source,
        }
    }

    /// Refuses to go on after a failed write.
    fn check(&self) -> Result<(), WriteError> {
        if self.broken {
            return Err(WriteError::Io {
                path: self.dest.clone(),
                source: std::io::Error::other("an earlier write to this file failed"),
            });
        }
        Ok(())
    }

    /// Appends `tb_nodes` rows (rowids 1, 2, 3, … in arrival order). This thread serializes
    /// them straight into leaf pages, which go to the file as they fill, while the other threads
    /// make each index's entries (of each row only these stay in memory).
    pub fn insert_nodes(&mut self, rows: &[NodeRow]) -> Result<(), WriteError> {
        self.check()?;
        let first = self.nodes.rows() + 1;
        let (nodes, file) = (&mut self.nodes, &mut self.file);
        let (indexes, entries) = (&self.schema.node_indexes, &mut self.node_indexes);
        if self.sorted_roots.is_some() {
            let written = write_nodes(rows, nodes, file);
            return written.map_err(|e| self.fail(e));
        }
        let (spilled, budget) = (&mut self.spilled, self.index_budget);
        let temp_dir = self.temp.parent().unwrap_or(Path::new("."));
        let (written, indexed) = rayon::join(
            || write_nodes(rows, nodes, file),
            || {
                entries
                    .par_chunks_mut(INDEXES_PER_TASK)
                    .zip(indexes.par_chunks(INDEXES_PER_TASK))
                    .for_each(|(e, ix)| add_entries(e, ix, rows, first));
                if entries.iter().map(IndexRows::bytes).sum::<usize>() <= budget {
                    return Ok(());
                }
                let runs = match spilled {
                    Some(runs) => runs,
                    None => spilled.insert(SpilledEntries::create(temp_dir, entries.len())?),
                };
                runs.spill(entries)
            },
        );
        written.and(indexed).map_err(|e| self.fail(e))
    }

    /// Keeps at most `bytes` of index entries in memory before spilling them (tests: many runs).
    #[cfg(test)]
    pub(crate) fn set_index_budget(&mut self, bytes: usize) {
        self.index_budget = bytes;
    }

    /// Appends `tb_stack` rows `(id, stack_info)`; a repeated id is skipped (`INSERT OR IGNORE`).
    pub fn insert_stacks<'a>(
        &mut self,
        rows: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), WriteError> {
        self.check()?;
        let mut record = Vec::new();
        for (id, info) in rows {
            if self.stack_ids.contains(id) {
                continue;
            }
            record.clear();
            encode_record(&[Value::Text(id), Value::Text(info)], &mut record);
            if let Err(e) = self.stacks.append(&record, &mut self.file) {
                return Err(self.fail(e));
            }
            self.stack_ids.insert(id.into());
            let rowid = self.stacks.rows();
            self.stack_index.push(&[Value::Text(id), Value::Int(rowid)]);
        }
        Ok(())
    }

    /// Sets the `tb_config` row (`id = '1'`); the first call wins (`INSERT OR IGNORE`).
    pub fn insert_config(&mut self, c: &ConfigRow) -> Result<(), WriteError> {
        self.check()?;
        if self.config.rows() > 0 {
            return Ok(());
        }
        let mut record = Vec::new();
        encode_record(
            &[
                Value::Text("1"),
                Value::Text(&c.graph_type),
                Value::Text(&c.task),
                c.tool_tip.as_deref().map_or(Value::Null, Value::Text),
                Value::Int(c.micro_steps),
                Value::Int(c.overflow_check),
                Value::Text(&c.node_colors),
                Value::Text(&c.rank_list),
                Value::Text(&c.step_list),
            ],
            &mut record,
        );
        if let Err(e) = self.config.append(&record, &mut self.file) {
            return Err(self.fail(e));
        }
        self.config_index.push(&[Value::Text("1"), Value::Int(1)]);
        Ok(())
    }

    /// Builds the indexes, writes `sqlite_schema` and the header on page 1, and moves the file
    /// to its final name (mode 0644): `dest`, or the next free numbered name when `dest` is
    /// taken ([`crate::files::persist_new`]; returned). A repeated `tb_nodes.id` fails here, as
    /// SQLite's UNIQUE constraint would, and leaves nothing behind.
    pub fn finish(self) -> Result<PathBuf, WriteError> {
        self.finish_with(|_| Ok(()))
    }

    /// [`BulkWriter::finish`], with `before_rename` run on the complete temporary file just
    /// before it takes its name (the converter adds our own diagnosis table there, so that no
    /// reader sees the file without it); its error leaves nothing behind.
    pub fn finish_with(
        self,
        before_rename: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> Result<PathBuf, WriteError> {
        self.check()?;
        let BulkWriter {
            mut file,
            temp,
            dest,
            geo,
            schema,
            nodes,
            mut node_indexes,
            spilled,
            stacks,
            stack_index,
            config,
            config_index,
            sorted_roots,
            ..
        } = self;
        let io = |source| WriteError::Io {
            path: dest.clone(),
            source,
        };
        let mut roots = HashMap::new();
        for (name, tree) in [
            ("tb_nodes", nodes),
            ("tb_stack", stacks),
            ("tb_config", config),
        ] {
            roots.insert(name.to_owned(), tree.finish(&mut file).map_err(io)?);
        }
        let (stack_name, config_name) = (autoindex_name("tb_stack"), autoindex_name("tb_config"));
        let duplicate = |id| WriteError::Duplicate {
            path: dest.clone(),
            id,
        };
        let mut jobs: Vec<(&str, IndexRows, bool)> = Vec::new();
        match (sorted_roots, spilled) {
            (None, Some(mut runs)) => {
                runs.spill(&mut node_indexes).map_err(io)?;
                for (i, ix) in schema.node_indexes.iter().enumerate() {
                    let mut index = SortedIndex::new(geo, ix.unique);
                    runs.merge(i, &mut index, &mut file).map_err(|e| match e {
                        SortedError::Io(source) => io(source),
                        SortedError::Duplicate(id) => duplicate(id),
                        SortedError::Order(what) => io(std::io::Error::other(format!(
                            "internal error: index {} merged out of order ({what}) from {}",
                            ix.name,
                            runs.path().display()
                        ))),
                    })?;
                    roots.insert(ix.name.clone(), index.finish(&mut file).map_err(io)?);
                }
            }
            (None, None) => jobs.extend(
                (schema.node_indexes.iter())
                    .zip(node_indexes)
                    .map(|(ix, rows)| (ix.name.as_str(), rows, ix.unique)),
            ),
            (Some(sorted), _) => {
                for ix in &schema.node_indexes {
                    let root = sorted.get(&ix.name).ok_or_else(|| {
                        io(std::io::Error::other(format!(
                            "index {} was not given its sorted entries",
                            ix.name
                        )))
                    })?;
                    roots.insert(ix.name.clone(), *root);
                }
            }
        }
        jobs.push((&stack_name, stack_index, true));
        jobs.push((&config_name, config_index, true));
        write_indexes(jobs, geo, &mut file, &mut roots).map_err(|e| match e {
            IndexError::Io(source) => io(source),
            IndexError::Duplicate(id) => duplicate(id),
        })?;
        let page1 = schema.page1(&roots, geo, file.pages()).ok_or_else(|| {
            io(std::io::Error::other(
                "sqlite_schema does not fit on page 1",
            ))
        })?;
        file.finish(&page1).map_err(io)?;
        // The temporary file is private (0600); the finished one is readable like any output.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o644));
        }
        before_rename(&temp).map_err(io)?;
        crate::files::persist_new(temp, &dest).map_err(|source| WriteError::Persist {
            path: dest.clone(),
            source,
        })
    }
}

/// Appends `rows` to the `tb_nodes` tree.
fn write_nodes(rows: &[NodeRow], tree: &mut TableTree, file: &mut PageFile) -> std::io::Result<()> {
    rows.iter()
        .try_for_each(|row| tree.append_values(&node_values(row), file))
}

/// Adds the entries of `rows` (rowids from `first_rowid`) to `entries`, those of `indexes`.
fn add_entries(
    entries: &mut [IndexRows],
    indexes: &[NodeIndex],
    rows: &[NodeRow],
    first_rowid: i64,
) {
    let mut entry = Vec::new();
    for (row, rowid) in rows.iter().zip(first_rowid..) {
        let values = node_values(row);
        for (e, ix) in entries.iter_mut().zip(indexes) {
            entry.clear();
            entry.extend(ix.cols.iter().map(|&c| values[c]));
            entry.push(Value::Int(rowid));
            e.push(&entry);
        }
    }
}

/// `row`'s columns in [`NODE_COLUMNS`] order, as SQLite stores them.
fn node_values(r: &NodeRow) -> [Value<'_>; NODE_COLUMNS.len()] {
    [
        Value::Text(&r.id),
        Value::Text(&r.graph_id),
        Value::Int(r.node_order),
        Value::Text(&r.node_name),
        Value::Text(&r.node_type),
        Value::Text(&r.up_node),
        Value::Text(&r.sub_nodes),
        Value::integer_affinity(r.precision_index),
        optional(&r.overflow_level),
        Value::Int(r.micro_step_id),
        Value::Text(&r.matched_node_link),
        Value::Text(&r.stack_id),
        Value::Text(&r.parallel_merge_info),
        Value::Text(&r.matched_distributed),
        Value::Int(r.modified),
        Value::Text(&r.input_data),
        Value::Text(&r.output_data),
        Value::Text(&r.data_source),
        optional(&r.dump_data_dir),
        Value::Int(r.step),
        Value::Int(r.rank),
        Value::Int(r.is_distributed),
    ]
}

fn optional(s: &Option<String>) -> Value<'_> {
    s.as_deref().map_or(Value::Null, Value::Text)
}

enum IndexError {
    Io(std::io::Error),
    Duplicate(String),
}

/// Sorts, plans and appends the indexes, [`INDEXES_AT_ONCE`] at a time (sorting and planning
/// side by side, rendering pages in parallel), recording each root page in `roots`. Each index is
/// freed once written: the writer's memory peaks at the entries plus a couple of indexes'
/// records and pages.
fn write_indexes(
    jobs: Vec<(&str, IndexRows, bool)>,
    geo: Geometry,
    file: &mut PageFile,
    roots: &mut HashMap<String, u32>,
) -> Result<(), IndexError> {
    let mut jobs = jobs.into_iter();
    loop {
        let batch: Vec<_> = jobs.by_ref().take(INDEXES_AT_ONCE).collect();
        if batch.is_empty() {
            return Ok(());
        }
        let plans: Vec<_> = batch
            .into_par_iter()
            .map(|(name, rows, unique)| {
                index::sorted_records(rows, unique)
                    .map(|records| (name, index::plan(records, geo)))
                    .map_err(|e| match e {
                        index::SortError::Duplicate(id) => IndexError::Duplicate(id),
                        index::SortError::BadKey => IndexError::Io(std::io::Error::other(
                            "internal error: an index key could not be read back",
                        )),
                    })
            })
            .collect::<Result<_, _>>()?;
        for (name, plan) in plans {
            let base = file.next_page();
            let pages = index::render(&plan, geo, base);
            let root = geo.page_at(base, plan.root());
            drop(plan);
            file.append(&pages).map_err(IndexError::Io)?;
            roots.insert(name.to_owned(), root);
        }
    }
}

/// Indexes finished side by side (the converter's machines have a few cores; each index in
/// flight holds its records and pages).
const INDEXES_AT_ONCE: usize = 2;

fn autoindex_name(table: &str) -> String {
    format!("sqlite_autoindex_{table}_1")
}

/// [`CREATE_TABLES`] and [`CREATE_INDEXES`] as `sqlite_schema` holds them.
struct Schema {
    tables: Vec<TableSql>,
    indexes: Vec<IndexSql>,
    /// The indexes on `tb_nodes`: its autoindex on `id`, then those of [`CREATE_INDEXES`].
    node_indexes: Vec<NodeIndex>,
}

struct TableSql {
    name: String,
    sql: String,
}

struct IndexSql {
    name: String,
    table: String,
    sql: String,
}

struct NodeIndex {
    name: String,
    /// Indexed columns, as [`NODE_COLUMNS`] positions.
    cols: Vec<usize>,
    unique: bool,
}

/// Statements of a script, as SQLite stores each: from `CREATE` up to, not including, the `;`.
pub(super) fn statements(script: &str) -> impl Iterator<Item = &str> {
    script.split(';').map(str::trim).filter(|s| !s.is_empty())
}

impl Schema {
    /// Our own schema script (`schema.rs`) as the writer needs it; an error means the script has
    /// a statement this writer does not know how to build.
    fn parse() -> Result<Schema, WriteError> {
        let bad = |detail: String| WriteError::Schema { detail };
        let mut tables = Vec::new();
        for sql in statements(CREATE_TABLES) {
            let name = sql
                .strip_prefix("CREATE TABLE ")
                .and_then(|rest| rest.split(|c: char| c == '(' || c.is_whitespace()).next())
                .ok_or_else(|| bad(format!("unexpected table statement: {sql}")))?;
            tables.push(TableSql {
                name: name.to_owned(),
                sql: sql.to_owned(),
            });
        }
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        if names != ["tb_nodes", "tb_stack", "tb_config"] {
            return Err(bad(format!(
                "tables {names:?}, expected tb_nodes, tb_stack, tb_config"
            )));
        }
        let mut node_indexes = vec![NodeIndex {
            name: autoindex_name("tb_nodes"),
            cols: vec![0],
            unique: true,
        }];
        let mut indexes = Vec::new();
        for sql in statements(CREATE_INDEXES) {
            let (name, table, cols) = parse_index(sql)
                .ok_or_else(|| bad(format!("unexpected index statement: {sql}")))?;
            if table != "tb_nodes" {
                return Err(bad(format!(
                    "index on {table}: only tb_nodes indexes are built"
                )));
            }
            let cols = cols
                .iter()
                .map(|col| {
                    NODE_COLUMNS
                        .iter()
                        .position(|n| n == col)
                        .ok_or_else(|| bad(format!("{name}: unknown tb_nodes column {col}")))
                })
                .collect::<Result<_, _>>()?;
            node_indexes.push(NodeIndex {
                name: name.to_owned(),
                cols,
                unique: false,
            });
            indexes.push(IndexSql {
                name: name.to_owned(),
                table: table.to_owned(),
                sql: sql.to_owned(),
            });
        }
        Ok(Schema {
            tables,
            indexes,
            node_indexes,
        })
    }

    /// `sqlite_schema` rows in SQLite's order: each table and its autoindex, then the indexes.
    fn records(&self, roots: &HashMap<String, u32>) -> Vec<Vec<u8>> {
        let root = |name: &str| Value::Int(roots.get(name).copied().unwrap_or(0).into());
        let mut rows = Vec::new();
        let mut push = |values: [Value<'_>; 5]| {
            let mut record = Vec::new();
            encode_record(&values, &mut record);
            rows.push(record);
        };
        for t in &self.tables {
            let auto = autoindex_name(&t.name);
            push([
                Value::Text("table"),
                Value::Text(&t.name),
                Value::Text(&t.name),
                root(&t.name),
                Value::Text(&t.sql),
            ]);
            push([
                Value::Text("index"),
                Value::Text(&auto),
                Value::Text(&t.name),
                root(&auto),
                Value::Null,
            ]);
        }
        for ix in &self.indexes {
            push([
                Value::Text("index"),
                Value::Text(&ix.name),
                Value::Text(&ix.table),
                root(&ix.name),
                Value::Text(&ix.sql),
            ]);
        }
        rows
    }

    /// Page 1: the database header, then `sqlite_schema` as a single leaf.
    fn page1(&self, roots: &HashMap<String, u32>, geo: Geometry, pages: u32) -> Option<Vec<u8>> {
        let mut page = table::single_leaf(&self.records(roots), geo, DB_HEADER)?;
        page[..DB_HEADER].copy_from_slice(&db_header(geo.page_size, pages));
        Some(page)
    }
}

/// `CREATE INDEX name ON table (a, b, …)` → (name, table, columns).
pub(super) fn parse_index(sql: &str) -> Option<(&str, &str, Vec<&str>)> {
    let rest = sql.strip_prefix("CREATE INDEX ")?;
    let (name, rest) = rest.split_once(" ON ")?;
    let (table, cols) = rest.split_once('(')?;
    let cols = cols.trim().strip_suffix(')')?;
    Some((
        name.trim(),
        table.trim(),
        cols.split(',').map(str::trim).collect(),
    ))
}

/// One index of `tb_nodes`, as [`BulkWriter::sorted_node_indexes`] lists them.
#[derive(Debug, Clone)]
pub struct NodeIndexSpec {
    pub name: String,
    /// The indexed columns, in order.
    pub columns: Vec<&'static str>,
    pub unique: bool,
}

/// A `tb_nodes` index being written by [`BulkWriter::push_sorted`].
pub struct SortedNodeIndex {
    name: String,
    index: SortedIndex,
}

/// Sorted runs of one index's entries being written ([`BulkWriter::begin_runs`]).
pub struct SortedNodeRuns {
    runs: SpilledEntries,
    /// Room for an entry's sort key.
    key: Vec<u8>,
}

impl BulkWriter {
    /// [`BulkWriter::create`] for a caller that gives `tb_nodes`' index entries itself, each
    /// index already sorted ([`push_sorted`](Self::push_sorted)): the writer keeps none, so its
    /// memory does not grow with the rows. Every index of
    /// [`sorted_node_indexes`](Self::sorted_node_indexes) must be written before
    /// [`finish`](Self::finish).
    pub fn create_sorted(dest: &Path) -> Result<BulkWriter, WriteError> {
        BulkWriter::sorted_with_page_size(dest, PAGE_SIZE)
    }

    /// [`create_sorted`](Self::create_sorted) with another page size (tests: deep trees).
    pub(crate) fn sorted_with_page_size(
        dest: &Path,
        page_size: usize,
    ) -> Result<BulkWriter, WriteError> {
        let mut w = BulkWriter::with_page_size(dest, page_size)?;
        w.node_indexes = Vec::new();
        w.sorted_roots = Some(HashMap::new());
        Ok(w)
    }

    /// `tb_nodes`' indexes: its autoindex on `id`, then those of
    /// [`CREATE_INDEXES`](crate::schema::CREATE_INDEXES).
    pub fn sorted_node_indexes(&self) -> Vec<NodeIndexSpec> {
        self.schema
            .node_indexes
            .iter()
            .map(|ix| NodeIndexSpec {
                name: ix.name.clone(),
                columns: ix.cols.iter().map(|&c| NODE_COLUMNS[c]).collect(),
                unique: ix.unique,
            })
            .collect()
    }

    /// Starts writing the index `spec` (one of [`sorted_node_indexes`](Self::sorted_node_indexes)).
    pub fn begin_sorted(&self, spec: &NodeIndexSpec) -> SortedNodeIndex {
        SortedNodeIndex {
            name: spec.name.clone(),
            index: SortedIndex::new(self.geo, spec.unique),
        }
    }

    /// Adds the entry (`values` of the index's columns, `rowid`) to `index`: entries must come
    /// in SQLite's order (by values, then rowid); a UNIQUE index refuses an equal key.
    pub fn push_sorted(
        &mut self,
        index: &mut SortedNodeIndex,
        values: &[Value<'_>],
        rowid: i64,
    ) -> Result<(), WriteError> {
        self.check()?;
        let pushed = index.index.push(values, rowid, &mut self.file);
        pushed.map_err(|e| self.sorted_error(&index.name, e))
    }

    /// A [`SortedError`] of index `name` as the writer reports it (the writer is then broken).
    fn sorted_error(&mut self, name: &str, e: SortedError) -> WriteError {
        match e {
            SortedError::Io(e) => self.fail(e),
            SortedError::Duplicate(id) => {
                self.broken = true;
                WriteError::Duplicate {
                    path: self.dest.clone(),
                    id,
                }
            }
            SortedError::Order(what) => self.fail(std::io::Error::other(format!(
                "index {name}: entries out of order ({what})"
            ))),
        }
    }

    /// Starts runs of index entries, for a caller whose entries come sorted in more streams
    /// than it may read at once (the gather of more parts than it may hold open): each stream
    /// is appended as one run ([`push_run`](Self::push_run), [`end_run`](Self::end_run)), in a
    /// temporary file beside the output (one file, whatever the runs), and
    /// [`merge_runs`](Self::merge_runs) feeds them, merged, to an index.
    pub fn begin_runs(&self) -> Result<SortedNodeRuns, WriteError> {
        let dir = self.temp.parent().unwrap_or(Path::new("."));
        let runs = SpilledEntries::create(dir, 1).map_err(|source| WriteError::Io {
            path: self.dest.clone(),
            source,
        })?;
        Ok(SortedNodeRuns {
            runs,
            key: Vec::new(),
        })
    }

    /// Appends the entry (`values` of the index's columns, `rowid`) to the run being written:
    /// within a run, entries come in SQLite's order.
    pub fn push_run(
        &mut self,
        runs: &mut SortedNodeRuns,
        values: &[Value<'_>],
        rowid: i64,
    ) -> Result<(), WriteError> {
        self.check()?;
        runs.key.clear();
        index_key(values, &mut runs.key);
        let pushed = runs.runs.push(&runs.key, index::reals_mask(values), rowid);
        pushed.map_err(|e| self.fail(e))
    }

    /// Ends the run being written.
    pub fn end_run(&mut self, runs: &mut SortedNodeRuns) {
        runs.runs.end_run(0);
    }

    /// Feeds every run of `runs`, merged, to `index` (then their temporary file is removed).
    pub fn merge_runs(
        &mut self,
        index: &mut SortedNodeIndex,
        mut runs: SortedNodeRuns,
    ) -> Result<(), WriteError> {
        self.check()?;
        let merged = runs.runs.merge(0, &mut index.index, &mut self.file);
        merged.map_err(|e| self.sorted_error(&index.name, e))
    }

    /// Writes the rest of `index`; it must hold one entry per `tb_nodes` row.
    pub fn end_sorted(&mut self, index: SortedNodeIndex) -> Result<(), WriteError> {
        self.check()?;
        let rows = self.nodes.rows() as u64;
        if index.index.entries() != rows {
            return Err(self.fail(std::io::Error::other(format!(
                "index {} has {} entries for {rows} rows",
                index.name,
                index.index.entries()
            ))));
        }
        let root = index
            .index
            .finish(&mut self.file)
            .map_err(|e| self.fail(e))?;
        let Some(roots) = self.sorted_roots.as_mut() else {
            return Err(self.fail(std::io::Error::other(
                "push_sorted on a writer made by create, not create_sorted",
            )));
        };
        roots.insert(index.name, root);
        Ok(())
    }
}

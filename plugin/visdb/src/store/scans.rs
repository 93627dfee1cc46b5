//! The passes over a whole graph, one row at a time, and the page cache around them.

use rusqlite::types::Value as SqlValue;
use rusqlite::Row;

use super::decode::{integer_ref, last_string, number_ref, text, text_ref};
use super::open::{QueryResult, Store, StoreError, PAGE_CACHE_KIB};
use super::reads::NAVIGATION_COLUMNS;
use super::rows::{DataRow, GraphKey, IndexRow};
use crate::schema::is_leaf_sql;

/// The index pass ([`Store::scan_index_rows`]): read from our covering index
/// [`crate::schema::NODE_LIST_INDEX`] alone where the file has it (ours), else through `index3`
/// and the rows (msprobe's files).
const INDEX_PASS_SQL: &str = concat!(
    "SELECT node_name, ",
    is_leaf_sql!(),
    ", micro_step_id, precision_index, matched_node_link FROM tb_nodes \
     WHERE step=? AND rank=? AND data_source=? ORDER BY node_order"
);

/// The page cache during a pass over a whole graph ([`Store::scan_index_rows`]), in KiB.
const SCAN_PAGE_CACHE_KIB: i64 = -512;

impl Store {
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
            let get = |i: usize| row.get_ref(i).or_query_err(self);
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
            .or_query_err(self)
    }

    /// Runs `sql`, whose three parameters are a graph's step, rank and side, and hands each row
    /// to `f` in turn.
    pub(super) fn each_graph_row<E: From<StoreError>>(
        &self,
        sql: &str,
        graph: GraphKey,
        mut f: impl FnMut(&Row<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut stmt = self.conn.prepare_cached(sql).or_query_err(self)?;
        let mut rows = stmt
            .query(rusqlite::params![
                graph.step,
                graph.rank,
                graph.side.data_source()
            ])
            .or_query_err(self)?;
        while let Some(row) = rows.next().or_query_err(self)? {
            f(row)?;
        }
        Ok(())
    }

    /// After a pass over a whole graph: the pass filled this connection's page cache with pages
    /// nobody will read soon.
    pub(super) fn shrink_page_cache(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("PRAGMA shrink_memory")
            .or_query_err(self)
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
            "SELECT {NAVIGATION_COLUMNS}, input_data, output_data FROM tb_nodes \
             WHERE step=? AND rank=? AND data_source=? ORDER BY node_order"
        );
        self.each_graph_row(&sql, graph, |row| {
            let node = self.node_from_row(row)?;
            let get = |i: usize| row.get::<_, SqlValue>(i).or_query_err(self);
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
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::path::Path;

    use rusqlite::Connection;

    use super::*;
    use crate::schema;
    use crate::store::rows::Side;

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
        let shape = graph_ascend_testkit::synthetic_visdb::Shape::with_nodes(400, 3, true);
        let ours =
            graph_ascend_testkit::synthetic_visdb::write(&dir.path().join("ours.vis.db"), shape)
                .expect("write");
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
}

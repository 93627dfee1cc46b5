//! One pass over every row of a graph with the row's texts borrowed from SQLite, for readers
//! of a whole graph that keep only what they parse out of each row (the diagnosis reads both
//! sides of a 1M-node compare this way). [`Store::scan_data_rows`] copies every text of every
//! row into owned strings and parses the lists and JSON of columns such readers never use;
//! here a row costs no allocation unless a value needs unescaping.
//!
//! The values are read as [`Store::scan_data_rows`] reads them (same lenient parsing, same
//! errors naming the file, the column and the node).

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use rusqlite::OptionalExtension;
use serde_json::Value;

use super::decode::{string_list_ref, text_ref, value_or_empty_object};

use super::open::{QueryResult, Store, StoreError};
use super::rows::GraphKey;
use crate::writer::NodeRow;

/// One node's row, lent to the callback of [`Store::scan_graph_rows`].
#[derive(Debug, Clone, PartialEq)]
pub struct GraphRow<'r> {
    pub name: Cow<'r, str>,
    /// msprobe's `NodeOp`.
    pub node_type: i32,
    pub up_node: Cow<'r, str>,
    /// `sub_nodes`, in the hierarchy's order.
    pub sub_nodes: Vec<Cow<'r, str>>,
    /// The last element of `matched_node_link`: the partner on the other side.
    pub link: Option<Cow<'r, str>>,
    pub matched_distributed: Value,
    /// The stringified JSON of the node's inputs and outputs, as stored.
    pub input_data: Cow<'r, str>,
    pub output_data: Cow<'r, str>,
    /// `micro_step_id`: the micro-batch the node ran in (0 when the file has none).
    pub micro_step_id: i64,
}

impl<'r> GraphRow<'r> {
    /// The row made of the texts of its columns as SQLite stores them (`node_name`, `up_node`,
    /// `sub_nodes`, `node_type`, `matched_node_link`, `matched_distributed`, `input_data`,
    /// `output_data`) and its `micro_step_id`: the one decoding of [`Store::scan_graph_rows`].
    /// An error names the column and says why.
    fn from_columns(
        [name, up_node, sub_text, node_type_text, link_text, distributed, input_data, output_data]: [&'r str; 8],
        micro_step_id: i64,
    ) -> Result<GraphRow<'r>, (&'static str, String)> {
        let sub_nodes = string_list_ref(sub_text).map_err(|reason| ("sub_nodes", reason))?;
        let node_type = node_type_text
            .trim()
            .parse::<i32>()
            .map_err(|_| ("node_type", format!("{node_type_text:?} is not a number")))?;
        let link = string_list_ref(link_text)
            .map_err(|reason| ("matched_node_link", reason))?
            .pop();
        let matched_distributed = value_or_empty_object(distributed)
            .map_err(|e| ("matched_distributed", e.to_string()))?;
        Ok(GraphRow {
            name: Cow::Borrowed(name),
            node_type,
            up_node: Cow::Borrowed(up_node),
            sub_nodes,
            link,
            matched_distributed,
            input_data: Cow::Borrowed(input_data),
            output_data: Cow::Borrowed(output_data),
            micro_step_id,
        })
    }

    /// The row [`Store::scan_graph_rows`] lends for `row` once the bulk writer wrote it (the
    /// writer stores every text as it is and `micro_step_id` as an integer), without reading it
    /// back: what the converter makes the diagnosis's table of while it writes the rows.
    pub fn of_written(row: &'r NodeRow) -> Result<GraphRow<'r>, String> {
        GraphRow::from_columns(
            [
                &row.node_name,
                &row.up_node,
                &row.sub_nodes,
                &row.node_type,
                &row.matched_node_link,
                &row.matched_distributed,
                &row.input_data,
                &row.output_data,
            ],
            row.micro_step_id,
        )
        .map_err(|(column, reason)| format!("{column} of node {}: {reason}", row.node_name))
    }
}

impl Store {
    /// The `(step, rank)` of every graph the file holds (of either side), in order. Read from
    /// `index4` one graph at a time (each the first entry past the previous graph), so the cost
    /// is the number of graphs, not of rows: what a file's `rank_list` and `step_list` claim is
    /// checked against it, so that long lists of graphs that are not there cost nothing.
    pub fn graphs_present(&self) -> Result<Vec<(i64, i64)>, StoreError> {
        let mut first = self
            .conn
            .prepare_cached("SELECT step, rank FROM tb_nodes ORDER BY step, rank LIMIT 1")
            .or_query_err(self)?;
        let mut next = self
            .conn
            .prepare_cached(
                "SELECT step, rank FROM tb_nodes WHERE (step, rank) > (?1, ?2) \
                 ORDER BY step, rank LIMIT 1",
            )
            .or_query_err(self)?;
        let pair = |row: &rusqlite::Row<'_>| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?));
        let mut graphs = Vec::new();
        let mut at = first.query_row([], pair).optional().or_query_err(self)?;
        while let Some((step, rank)) = at {
            graphs.push((step, rank));
            at = next
                .query_row([step, rank], pair)
                .optional()
                .or_query_err(self)?;
        }
        Ok(graphs)
    }

    /// How many rows `graph` has (read from an index, without the rows).
    pub fn count_graph_rows(&self, graph: GraphKey) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT count(*) FROM tb_nodes WHERE step=? AND rank=? AND data_source=?",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
                    rusqlite::params![graph.step, graph.rank, graph.side.data_source()],
                    |row| row.get::<_, i64>(0),
                )
            })
            .map(|n| usize::try_from(n).unwrap_or(0))
            .or_query_err(self)
    }

    /// Calls `f` with every row of `graph` in `node_order`, its texts borrowed (see the module).
    pub fn scan_graph_rows<E: From<StoreError>>(
        &self,
        graph: GraphKey,
        mut f: impl FnMut(GraphRow<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        const SQL: &str = "SELECT node_name, up_node, sub_nodes, node_type, matched_node_link, \
             matched_distributed, input_data, output_data, micro_step_id FROM tb_nodes \
             WHERE step=? AND rank=? AND data_source=? ORDER BY node_order";
        self.each_graph_row(SQL, graph, |row| {
            let get = |i: usize| row.get_ref(i).map(text_ref).or_query_err(self);
            let texts = [
                get(0)?,
                get(1)?,
                get(2)?,
                get(3)?,
                get(4)?,
                get(5)?,
                get(6)?,
                get(7)?,
            ];
            let micro_step_id = match row.get_ref(8).or_query_err(self)? {
                ValueRef::Integer(i) => i,
                v => text_ref(v).trim().parse::<i64>().unwrap_or(0),
            };
            let row = GraphRow::from_columns(texts.each_ref().map(|t| &**t), micro_step_id)
                .map_err(|(column, reason)| {
                    self.data_err(format!("{column} of node {}", texts[0]), reason)
                })?;
            f(row)
        })?;
        Ok(self.shrink_page_cache()?)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::store::rows::Side;

    /// Every row of a compare file msprobe wrote reads the same lent as copied.
    #[test]
    fn borrowed_rows_read_as_the_owned_scan_reads_them() {
        let examples =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/compare_tf_stats");
        let src = std::fs::read_dir(&examples)
            .expect("examples/compare_tf_stats")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".vis.db"))
            .expect("an example .vis.db");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("compare.vis.db");
        std::fs::copy(&src, &path).expect("copy");
        let store = Store::open(&path).expect("open");
        for side in [Side::Npu, Side::Bench] {
            let graph = GraphKey {
                side,
                step: 0,
                rank: 0,
            };
            let mut owned = Vec::new();
            store
                .scan_data_rows(graph, |r| -> Result<(), StoreError> {
                    owned.push(r);
                    Ok(())
                })
                .expect("owned scan");
            let mut k = 0;
            store
                .scan_graph_rows(graph, |r| -> Result<(), StoreError> {
                    let o = &owned[k];
                    k += 1;
                    assert_eq!(*r.name, *o.node.name);
                    assert_eq!(*r.up_node, *o.node.up_node);
                    let subs: Vec<&str> = r.sub_nodes.iter().map(|s| &**s).collect();
                    assert_eq!(subs, o.node.sub_nodes);
                    assert_eq!(r.node_type, o.node.node_type);
                    assert_eq!(
                        r.link.as_deref(),
                        o.node.matched_node_link.last().map(|s| &**s)
                    );
                    assert_eq!(r.matched_distributed, o.node.matched_distributed);
                    assert_eq!(*r.input_data, *o.input_data);
                    assert_eq!(*r.output_data, *o.output_data);
                    assert_eq!(r.micro_step_id, o.node.micro_step_id);
                    Ok(())
                })
                .expect("borrowed scan");
            assert_eq!(k, owned.len());
            assert!(k > 100, "{k} rows");
            assert_eq!(store.count_graph_rows(graph).expect("count"), k);
        }
    }
}

//! The in-place edits: matching, colours and precision (`docs/visdb.md` §4).

use super::open::{QueryResult, Store, StoreError};
use super::rows::{GraphKey, MatchUpdate};

/// The writes of matching, colours and precision (`docs/visdb.md` §4).
///
/// Every write runs inside [`Store::write`], one `BEGIN IMMEDIATE` transaction: two clients
/// editing one file at once are serialized by SQLite's write lock (the other waits up to the
/// busy timeout), reads inside the transaction see its own earlier writes, and a failure rolls
/// everything back, so a file is never left half-edited.
impl Store {
    /// Runs `f` in one write transaction; commits when it returns `Ok`, rolls back otherwise.
    /// A current diagnosis table stays current through it (its stamp moves on with the file's
    /// version: `diagnosis_table.rs`).
    pub fn write<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.write_with_version(|s, _| f(s))
    }

    /// [`Store::write`], `f` given the file version before the transaction.
    pub(super) fn write_with_version<T>(
        &self,
        f: impl FnOnce(&Store, super::diagnosis_table::VersionBefore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let guard = self.before_write();
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .or_query_err(self)?;
        match f(self, guard.before).and_then(|v| {
            self.carry_diagnosis_stamp(guard.before)?;
            Ok(v)
        }) {
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

    /// Writes one node's match state and marks it `modified = 1` (msprobe's `update_nodes_info`);
    /// the graph's rows of our diagnosis table go (its entries and match changed).
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
            .or_query_err(self)?;
        if changed == 0 {
            return Err(self.data_err(format!("node {}", u.name), "no such node to update"));
        }
        self.drop_diagnosis_graph(u.graph.step, u.graph.rank)
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
            .or_query_err(self)?;
        Ok(())
    }

    /// Replaces `tb_config.node_colors` (JSON text).
    pub fn set_node_colors(&self, colors_json: &str) -> Result<(), StoreError> {
        let changed = self
            .conn
            .execute("UPDATE tb_config SET node_colors=?", [colors_json])
            .or_query_err(self)?;
        if changed == 0 {
            return Err(self.data_err("tb_config", "the table is empty"));
        }
        Ok(())
    }
}

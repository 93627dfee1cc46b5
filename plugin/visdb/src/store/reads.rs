//! The indexed reads: the config, a node, its children and ancestors, its details, the names
//! and links of a graph, the candidates of the filters.

use rusqlite::types::Value as SqlValue;
use rusqlite::{OptionalExtension, Row};
use serde_json::Value;

use super::decode::{
    integer, kind, loose_string_list, number, string_list, text, value_or_empty_object,
};
use super::open::{QueryResult, Store, StoreError};
use super::rows::{ConfigRow, GraphKey, LeafPrecision, NodeDetailRow, NodeRow, OutputRow};
use crate::json::parse_lenient;
use crate::schema::is_leaf_sql;

/// The columns of a [`NodeRow`], in the order [`Store::node_from_row`] reads them.
pub(super) const NAVIGATION_COLUMNS: &str = "node_name, up_node, sub_nodes, node_type, \
     micro_step_id, matched_node_link, precision_index, overflow_level, matched_distributed";

/// The most bytes a text column of `tb_config` may hold. msprobe's are a few KB (the legend, the
/// metrics' help texts); an edit through the page (the legend) is at most a request body, 4 MB.
pub const MAX_CONFIG_TEXT_BYTES: i64 = 4 << 20;
/// The most bytes of `rank_list` and `step_list` each.
pub const MAX_CONFIG_LIST_BYTES: i64 = 1 << 20;
/// The most entries of `rank_list` and `step_list` each.
pub const MAX_CONFIG_LIST_ENTRIES: usize = 65_536;

/// The text columns of `tb_config`, with the most bytes each may hold.
const CONFIG_TEXT_BOUNDS: [(&str, i64); 6] = [
    ("graph_type", MAX_CONFIG_TEXT_BYTES),
    ("task", MAX_CONFIG_TEXT_BYTES),
    ("tool_tip", MAX_CONFIG_TEXT_BYTES),
    ("node_colors", MAX_CONFIG_TEXT_BYTES),
    ("rank_list", MAX_CONFIG_LIST_BYTES),
    ("step_list", MAX_CONFIG_LIST_BYTES),
];

impl Store {
    /// Refuses a `tb_config` whose texts are bigger than what the service reads of them
    /// ([`CONFIG_TEXT_BOUNDS`]), before reading them: their sizes come from the record header.
    fn check_config_sizes(&self) -> Result<(), StoreError> {
        let sizes: Option<Vec<Option<i64>>> = self
            .conn
            .prepare_cached(
                "SELECT octet_length(graph_type), octet_length(task), octet_length(tool_tip), \
                 octet_length(node_colors), octet_length(rank_list), octet_length(step_list) \
                 FROM tb_config LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([], |row| {
                    (0..CONFIG_TEXT_BOUNDS.len())
                        .map(|i| row.get::<_, Option<i64>>(i))
                        .collect()
                })
                .optional()
            })
            .or_query_err(self)?;
        for ((column, bound), size) in CONFIG_TEXT_BOUNDS.iter().zip(sizes.unwrap_or_default()) {
            if let Some(size) = size.filter(|size| size > bound) {
                return Err(self.data_err(
                    format!("tb_config.{column}"),
                    format!("it holds {size} bytes, more than the {bound} it may"),
                ));
            }
        }
        Ok(())
    }

    /// The `tb_config` row. Read by every request of the service (which checks the selection
    /// against it): the statements are prepared once per connection. Its texts are bounded
    /// ([`MAX_CONFIG_TEXT_BYTES`], [`MAX_CONFIG_LIST_BYTES`], [`MAX_CONFIG_LIST_ENTRIES`]): a
    /// file that holds more is refused, naming the column.
    pub fn config(&self) -> Result<ConfigRow, StoreError> {
        self.check_config_sizes()?;
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
            .or_query_err(self)?
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
                Value::Array(items) if items.len() > MAX_CONFIG_LIST_ENTRIES => Err(self.data_err(
                    format!("tb_config.{what}"),
                    format!(
                        "it lists {} entries, more than the {MAX_CONFIG_LIST_ENTRIES} it may",
                        items.len()
                    ),
                )),
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

    /// A [`NodeRow`] from the first columns of `row`, [`NAVIGATION_COLUMNS`].
    pub(super) fn node_from_row(&self, row: &Row<'_>) -> Result<NodeRow, StoreError> {
        let get = |i: usize| -> Result<SqlValue, StoreError> {
            row.get::<_, SqlValue>(i).or_query_err(self)
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
        let matched_distributed = value_or_empty_object(&text(get(8)?))
            .map_err(|e| self.data_err(what("matched_distributed"), e.to_string()))?;
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
        let mut stmt = self.conn.prepare_cached(sql).or_query_err(self)?;
        let mut rows = stmt.query(params).or_query_err(self)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().or_query_err(self)? {
            out.push(self.node_from_row(row)?);
        }
        Ok(out)
    }

    /// The root of a graph (`up_node = ''`), if the graph exists.
    pub fn root(&self, graph: GraphKey) -> Result<Option<NodeRow>, StoreError> {
        let sql = format!(
            "SELECT {NAVIGATION_COLUMNS} FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
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
            "SELECT {NAVIGATION_COLUMNS} FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
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
            "SELECT {NAVIGATION_COLUMNS} FROM tb_nodes WHERE step=? AND rank=? AND data_source=? \
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
        let mut stmt = self.conn.prepare_cached(sql).or_query_err(self)?;
        let mut rows = stmt
            .query(rusqlite::params![
                graph.step,
                graph.rank,
                graph.side.data_source(),
                name
            ])
            .or_query_err(self)?;
        let Some(row) = rows.next().or_query_err(self)? else {
            return Ok(None);
        };
        let node = self.node_from_row(row)?;
        let get = |i: usize| -> Result<SqlValue, StoreError> {
            row.get::<_, SqlValue>(i).or_query_err(self)
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
            .or_query_err(self)?;
        let names = stmt
            .query_map(
                rusqlite::params![graph.step, graph.rank, graph.side.data_source(), micro_step],
                |row| row.get::<_, SqlValue>(0).map(text),
            )
            .and_then(|rows| rows.collect())
            .or_query_err(self)?;
        Ok(names)
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
            .or_query_err(self)?;
        let mut rows = stmt
            .query(rusqlite::params![
                graph.step,
                graph.rank,
                graph.side.data_source(),
                micro_step
            ])
            .or_query_err(self)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().or_query_err(self)? {
            let name = text(row.get::<_, SqlValue>(0).or_query_err(self)?);
            let link = text(row.get::<_, SqlValue>(1).or_query_err(self)?);
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
            .or_query_err(self)?;
        let mut rows = stmt
            .query(rusqlite::params![step, rank, micro_step])
            .or_query_err(self)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().or_query_err(self)? {
            let get = |i: usize| row.get::<_, SqlValue>(i).or_query_err(self);
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
            .or_query_err(self)?;
        let rows: Vec<(String, String)> = stmt
            .query_map(rusqlite::params![step, rank, micro_step], |row| {
                Ok((
                    row.get::<_, SqlValue>(0).map(text)?,
                    row.get::<_, SqlValue>(1).map(text)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .or_query_err(self)?;
        Ok(rows
            .into_iter()
            .filter(|(_, level)| levels.iter().any(|l| l == level))
            .collect())
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
            .or_query_err(self)
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
            .or_query_err(self)?;
        Ok(dir.flatten().filter(|d| !d.is_empty()))
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
            .or_query_err(self)?;
        let rows: Vec<(String, String)> = stmt
            .query_map(rusqlite::params![step, rank], |row| {
                Ok((
                    row.get::<_, SqlValue>(0).map(text)?,
                    row.get::<_, SqlValue>(1).map(text)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .or_query_err(self)?;
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
            .or_query_err(self)?;
        let mut rows = stmt
            .query(rusqlite::params![step, rank])
            .or_query_err(self)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().or_query_err(self)? {
            let get = |i: usize| row.get::<_, SqlValue>(i).or_query_err(self);
            let name = text(get(0)?);
            let matched = !matches!(text(get(1)?).trim(), "" | "[]");
            let output_data = value_or_empty_object(&text(get(2)?))
                .map_err(|e| self.data_err(format!("output_data of node {name}"), e.to_string()))?;
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

//! Indexed reads (and the few in-place edits msprobe's plugin makes) over one `.vis.db` file.
//!
//! Every method is one query on one of msprobe's indexes (`index1`: children of a node,
//! `index2`: a node by name, `index3`/`index5`: a graph in node order), so the cost of a request
//! depends on what it returns, never on the size of the file (except the passes over a whole
//! graph: [`Store::scan_index_rows`], which the service makes once per file version and which in
//! the files we write reads our own covering index, [`crate::schema::NODE_LIST_INDEX`], instead of
//! every row's page; [`Store::scan_data_rows`] and [`Store::scan_graph_rows`], the diagnosis's).
//! Rows come back as plain structs; the JSON columns are parsed leniently (see [`crate::json`])
//! and a column that cannot be read becomes a [`StoreError::Data`] naming the file, the node and
//! the column.
//!
//! # Layout
//!
//! Each module below adds methods to [`Store`]; none imports from this root.
//!
//! - `open`: [`Store`], [`StoreError`], opening a file (immutable or read-write) and checking
//!   its schema; the errors of a query or a column, built in one place.
//! - `rows`: what the reads return and the edits take ([`NodeRow`], [`GraphKey`], ...).
//! - `decode`: SQLite values and JSON columns as the rows hold them (text, numbers, lists).
//! - `reads`: the indexed reads of one node, its children, its details, names and filters.
//! - `scans`: the passes over a whole graph ([`Store::scan_index_rows`],
//!   [`Store::scan_data_rows`]) and the page cache around them.
//! - `graph_rows`: the pass over a graph with its texts borrowed ([`Store::scan_graph_rows`]).
//! - `edits`: the writes of matching, colours and precision, in one transaction each.
//! - `torn` (tests): edits cut short by a kill are read as before or after, never half-written.
//! - `diagnosis_table`: our own table of what the diagnosis reads
//!   ([`crate::schema::DIAGNOSIS_TABLE`]): its parts read and written, dropped by an edit, and
//!   whether a graph was edited since it was written.

mod decode;
mod diagnosis_table;
mod edits;
mod graph_rows;
mod open;
mod reads;
mod rows;
mod scans;
#[cfg(test)]
mod torn;

pub use diagnosis_table::{DiagnosisPart, MAX_DIAGNOSIS_PART_BYTES};
pub use graph_rows::GraphRow;
pub use open::{Store, StoreError};
pub use reads::{
    too_deep, MAX_CONFIG_LIST_BYTES, MAX_CONFIG_LIST_ENTRIES, MAX_CONFIG_TEXT_BYTES,
    MAX_HIERARCHY_DEPTH,
};
pub use rows::{
    ConfigRow, DataRow, GraphKey, IndexRow, LeafPrecision, MatchUpdate, NodeDetailRow, NodeRow,
    OutputRow, Side,
};

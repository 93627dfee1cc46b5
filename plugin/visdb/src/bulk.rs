//! Writes a `.vis.db` straight in the SQLite 3 file format, without SQLite.
//!
//! # Why
//! Through [`VisDbWriter`](crate::writer::VisDbWriter), SQLite inserts the rows one at a time on
//! one thread and then builds the eight indexes one after the other, each by a full table scan
//! and sort: about 0.8 s of a 1.25 s conversion. Here the rows arrive in rowid order, so the
//! table b-trees are bulk-loaded page by page as rows come in, while other threads (rayon) make
//! each row's index entries; at [`finish`] every index is sorted in memory and cut into pages in
//! parallel. On 50k rows of ~1.8 KB (the `bulk_vs_sqlite_timing` test) that is ~3.5x faster.
//!
//! Memory: one leaf page per table (a row longer than its page's share is written piece by
//! piece into its overflow pages, never assembled), plus the index entries (the sort key of each
//! index, about 900 bytes a row with the nine indexes) up to a budget of 32 MB: past it they
//! are spilled as sorted runs to a temporary file beside the output and merged at [`finish`]
//! (`spill.rs`), so memory does not grow with the rows. The big columns are not kept.
//!
//! # What the file is
//! Exactly what SQLite would hold after the writer's statements: the same `sqlite_schema` rows in
//! the same order (each table, then its `sqlite_autoindex_<table>_1`, then `index1`..`index7`
//! and `ga_node_list`, with the `sql` text SQLite stores: the statement from `CREATE` up to its
//! `;`), the same rowids (1, 2, … in arrival order; `id TEXT PRIMARY KEY` is not a rowid alias)
//! and the same stored types. The format facts it relies on
//! (<https://www.sqlite.org/fileformat2.html>):
//! - Header: page size, file format 1/1 (rollback journal), payload fractions 64/32/32, change
//!   counter = version-valid-for (so the page count in the header is trusted), schema format 4,
//!   UTF-8, no auto-vacuum, no free pages: every page belongs to a b-tree or an overflow chain.
//! - Records: varint header of serial types; integers in the smallest type (0 and 1 as types 8
//!   and 9), text as 2n+13. `precision_index` is an `INTEGER` column, so a REAL that is exactly
//!   an integer is stored as that integer (see `format::Value::integer_affinity`).
//! - Table b-trees: leaves 0x0D with (payload size, rowid, payload); interior 0x05 with (left
//!   child, largest rowid in it). Index b-trees: records (key columns…, rowid) in SQLite's order
//!   (NULL < numbers < text by memcmp < blob, then rowid); leaves 0x0A, interior 0x02 whose cells
//!   are entries of their own, stored nowhere else. All leaves of a tree at one depth; no page
//!   but a root without cells; cells packed at the end of the page (no freeblocks, no fragments,
//!   none shorter than 4 bytes).
//! - Payloads beyond a page's share (table leaf: U-35; index: (U-12)·64/255-23; spill size
//!   M+((P-M) mod (U-4)) if it fits, else M = (U-12)·32/255-23) go to an overflow chain.
//!
//! The file stays an ordinary SQLite database: SQLite can update and extend it afterwards.
//!
//!
//! # Layout
//! - `writer`: the [`BulkWriter`] (its tables, its indexes sorted in memory or given sorted).
//! - `format`: the file format's constants, records and sort keys; `file`: the pages on disk.
//! - `table`, `index`, `pack`: table and index b-trees cut into pages; `spill`: index
//!   entries beyond the memory budget; `sorted`: an index b-tree written as sorted entries arrive.
//!
//! [`finish`]: BulkWriter::finish

mod file;
mod format;
mod index;
mod pack;
mod sorted;
mod spill;
mod table;
mod writer;

#[cfg(test)]
mod tests;

pub use format::Value;
pub use sorted::{index_key, SortedIndex};
pub use writer::{BulkWriter, NodeIndexSpec, SortedNodeIndex, SortedNodeRuns};

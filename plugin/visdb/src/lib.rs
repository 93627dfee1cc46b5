//! The `.vis.db` file: msprobe 26.2's SQLite format for hierarchical precision graphs.
//!
//! - [`schema`]: the tables and indexes, as msprobe writes them.
//! - [`store`]: the reader the service uses. Every question is one indexed query; the one pass over
//!   a whole graph ([`store::Store::scan_index_rows`]) feeds the service's per-graph indexes.
//! - [`writer`]: the converter's output side (temporary file, one transaction, atomic rename).
//! - [`bulk`]: the same file written directly in SQLite's format, in parallel and much faster.
//! - [`files`]: finished files put in place whole, new outputs never over an existing file.
//! - [`json`]: JSON text as Python writes it (bare `NaN`, `Infinity`), read.
//! - [`stale`]: temporary names tagged with host and process, and the cleaning of a killed
//!   process's leftovers.
//!
//! Synthetic files for tests and benchmarks are the test-support crate's
//! (`graph_ascend_testkit::synthetic_visdb`), never this crate's.

#![deny(unsafe_code)]

pub mod bulk;
pub mod diff;
pub mod files;
pub mod json;
pub mod schema;
pub mod stale;
pub mod store;
pub mod writer;

pub use store::{Store, StoreError};

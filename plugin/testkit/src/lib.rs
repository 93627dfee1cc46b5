//! Test support for graph-ascend: what the tests, benchmarks and fuzz targets need and the
//! product never runs. No product crate depends on this one except as a dev-dependency (the
//! `graph-ascend` binary and the wheel do not contain it: `cargo tree -e normal -p graph-ascend`).
//!
//! # Layout
//!
//! - [`fuzzing`]: one entry point per fuzz target of `fuzz/` (a cargo-fuzz crate outside the
//!   workspace), taking raw bytes, and [`fuzzing::replay`], which `tests/fuzz_corpus.rs` runs over
//!   their corpora and crash cases on stable Rust:
//!   - `fuzzing/dump.rs`: the dump readers, and the fast JSON reader against `serde_json`;
//!   - `fuzzing/service.rs`: a `.vis.db` file and a request through the sidecar's handlers, and
//!     the browser's JSON writer against `serde_json`.
//! - [`synthetic_visdb`]: synthetic `.vis.db` files of any size (the tests of the store and the
//!   service, the service and diagnosis benchmarks); its command line is `src/bin/gen_visdb.rs`.
//! - [`synthetic_dump`]: synthetic msprobe dumps of any size, ranks and steps (the converter's
//!   memory and sharding tests, the converter and scale benchmarks); its command line is
//!   `src/bin/gen_dump.rs`.
//!
//! - [`special_files`]: a FIFO where a regular file is expected.
//!
//! Everything here reaches the product crates through their public API only.

#![deny(unsafe_code)]

pub mod fuzzing;
pub mod graph_copies;
pub mod special_files;
pub mod synthetic_dump;
pub mod synthetic_visdb;

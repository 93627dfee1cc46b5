//! The conversion engine: msprobe dump folders → `.vis.db` (msprobe `graph_visualize`).
//!
//! A conversion goes through named steps, in this order ([`stage`]): **plan** the rank
//! folders to read, **read** each one and **build** its graph, **match** the target's nodes to
//! the golden's and **compare** their items, and **write** every graph's rows into one new
//! `.vis.db`. Units (one rank of one step) run in parallel (rayon). A parallel merge
//! (`--rank_size …`) goes through the same steps, merging the rank graphs of each side
//! ([`merge`]) between build and match.
//!
//! # Layout
//!
//! This file only declares the modules and re-exports the public face. A module uses only
//! modules beside or below it (never its parent, never this root), and no two use each other;
//! from the top down:
//!
//! - `stage`: the orchestration, the only place that knows the order of the steps.
//!   `stage::convert` (the entry points [`convert`], [`convert_cancellable`],
//!   [`convert_shard`]) runs `stage::plain` (one unit per rank of a step) or `stage::merged`
//!   (a parallel merge, one unit per step), which go through the steps `stage::plan`,
//!   `stage::build`, `stage::pair`, `stage::write`, sharing `stage::run` (progress and the
//!   cancel flag);
//! - [`gather`]: the other command, a sharded conversion's parts → the one `.vis.db`
//!   (`docs/scale.md`);
//! - what the steps call, by concern:
//!   - reading: `rank_dump` (a rank folder's three files, [`RankDump`]), `layout` (msprobe's
//!     folder classification);
//!   - the graph: `graph` (a rank's graph built from its dump: the hierarchy from
//!     construct.json, then stack.json's frames and dump.json's entries placed on its nodes),
//!     `node` (a node, msprobe's node kinds, the ids' naming rules), `dump_ops` (dump.json
//!     read into its ops' items, batch by batch), the nodes' items kept as places in dump.json
//!     in `entries`, their ids in `ids`, children in `children`, names looked up in `names`;
//!     `overflow`: anomaly levels;
//!   - pairing: `matcher` and [`layer_mapping`]: node pairing; [`compare`]: the item
//!     comparison and `precision_index` (also used by the service's precision answers);
//!   - [`merge`]: the merging of a side's rank graphs (parallel merge), and its
//!     `--file_type json` output;
//!   - writing: `export` and `format` (graphs → rows), `distributed` (communication links
//!     across ranks), `output` (the `.vis.db`'s name), [`part`] (what a shard writes: a
//!     `.vis.part` with its manifest), [`shard`] (which units a shard converts),
//!     `diagnosis_table` (our own table of what the diagnosis reads, added to a compare file
//!     before it takes its name);
//! - at the bottom, what a caller gives and is told: [`options`] (with [`parallel`], the
//!   parallel layout), [`progress`], `error` ([`ConvertError`]); and helpers: [`pyjson`]
//!   (Python's `json.dumps` layout), `timing` (phase timings, `GA_TIMING=1`).

#![deny(unsafe_code)]

pub(crate) mod children;
pub mod compare;
pub(crate) mod diagnosis_table;
pub(crate) mod distributed;
pub(crate) mod dump_ops;
pub(crate) mod entries;
pub(crate) mod error;
pub(crate) mod export;
pub(crate) mod format;
pub mod gather;
pub(crate) mod graph;
pub(crate) mod ids;
pub mod layer_mapping;
pub(crate) mod layout;
pub(crate) mod matcher;
pub mod merge;
pub(crate) mod names;
pub(crate) mod node;
pub(crate) mod open_files;
pub(crate) mod options;
pub(crate) mod output;
pub(crate) mod overflow;
pub mod parallel;
pub mod part;
pub(crate) mod progress;
pub mod pyjson;
pub(crate) mod rank_dump;
pub(crate) mod recompute;
pub mod shard;
pub(crate) mod stage;
pub(crate) mod timing;

pub use error::ConvertError;
pub use options::{ConvertOptions, LayerMapping};
pub use output::utc_now_fields;
pub use parallel::ParallelParams;
pub use progress::{Progress, ProgressFn, Stage};
pub use rank_dump::RankDump;
pub use shard::ShardSpec;
pub use stage::convert::{convert, convert_cancellable, convert_shard};

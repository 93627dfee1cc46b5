//! Where did a compare first go wrong? Diagnosis over the stored rows of any compare `.vis.db`
//! (ours or msprobe's), read-only: msprobe's tables are never written (the one write is our own
//! table of what the load reads, [`table::write_compact_table`], which the converter asks for).
//!
//! For each matched node the rules decide whether its error is *introduced* there (its inputs
//! agree with golden within the noise of their dtypes while its outputs jump), *caused* by a
//! differing weight or argument, *amplified*, or *inherited*; then the sources are ranked: the
//! first step whose forward differs, forward before backward, in execution order, the
//! innermost culprit of a module leading its group, the rank where it started. The rules and
//! their reasoning are in `docs/diagnosis.md`.
//!
//! ```no_run
//! use graph_ascend_diagnose::{diagnose, CompareFile, Options};
//! let file = CompareFile::open("compare.vis.db".as_ref())?;
//! let found = diagnose(&file, &Options::default())?;
//! for s in &found.sources {
//!     println!("{} {}: {}", s.rank, s.node, s.reason);
//! }
//! # Ok::<(), graph_ascend_diagnose::DiagnoseError>(())
//! ```
//!
//! # Layout
//! - [`graph`]: the typed graphs of one step and rank (both sides): nodes, names, partners.
//! - [`compact`]: our own table of what the load reads, its binary form (`.vis.db` files we
//!   write hold it; the load reads it instead of the rows' JSON).
//! - [`load`]: a compare file's graphs of one step and rank, from our table or from the rows.
//! - [`table`]: writing our table into a compare file (the converter's and `gather`'s last step).
//! - [`entry`]: one tensor / argument entry of a node, its dtype class.
//! - [`api`]: which argument of an API is a weight, what non-tensor arguments are called.
//! - [`options`]: tolerances per dtype class and the jump ratios.
//! - [`tolerance`]: a tolerance's two thresholds, and those learned per op kind.
//! - [`learn`]: learning them from a reference compare, or tightening them from the compare
//!   itself.
//! - [`judge`]: the per-node rules (how far an entry is from golden, the node's verdict).
//! - [`unseen`]: computation the dump did not see: a module that changed the output of the
//!   dumped call that produced it (forward and backward).
//! - [`diagnose`](mod@diagnose): ranking, grouping, steps and ranks: the [`Diagnosis`].
//! - [`group`]: the sources of one call site across micro-batches, ranks and steps: one line
//!   per fault.
//! - [`source`]: one source of error, what the ranking and the grouping pass around.
//! - [`site`]: a node's call site (the same in every micro-batch, rank and step) and which ranks
//!   hold the same layers under the same names.
//! - [`reason`]: why a node is a source, as data (kinds with values) and as English words.
//! - [`report`]: the diagnosis as text, JSON or CSV.
//! - [`map`]: the divergence map: per module and step × rank, the output error against its
//!   tolerance, with the sources and peer inheritance the diagnosis found.
//! - [`map_report`]: the map as a grid of symbols (text), JSON or CSV.
//! - [`csv`]: the one writer of CSV lines: quoting, and text cells a spreadsheet would run as
//!   formulas neutralised.
//! - [`export`]: every matched pair of a compare as CSV, with msprobe's compare columns.

#![deny(unsafe_code)]

pub mod api;
pub mod compact;
pub mod csv;
pub mod diagnose;
pub mod dump_config;
pub mod entry;
pub mod error;
pub mod export;
pub mod graph;
pub mod group;
pub mod judge;
pub mod learn;
pub mod load;
pub mod map;
pub mod map_report;
pub mod options;
pub mod reason;
pub mod report;
pub mod site;
pub mod source;
pub mod table;
pub mod tolerance;
pub mod unseen;

pub use diagnose::{
    diagnose, diagnose_step, differing_nodes, sources_inside, Diagnosis, Direction, Source,
    SourceKind,
};
pub use error::DiagnoseError;
pub use group::SourceGroup;
pub use load::{CompareFile, Mode, RankData};
pub use map::{
    divergence_map, divergence_map_with_progress, fine_map_with_progress, DivergenceMap, FineMap,
    MapOptions, MapProgress, MapShape,
};
pub use options::{Options, Tolerance};
pub use reason::ReasonPart;
pub use site::CallSite;
pub use table::{write_compact_table, TableBuilder};
pub use tolerance::{LearnedFrom, LearnedTolerances};

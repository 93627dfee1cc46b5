//! The orchestration of a conversion: the steps, in the order data flows through them, and the
//! two conversions that go through them.
//!
//! 1. [`plan`]: which folders to read — the units of work (one rank of one step, one side or
//!    both) and the rank and step lists of the output;
//! 2. [`build`]: a rank folder read ([`crate::rank_dump`]) and its graph built
//!    ([`build::read_and_build`]; the graph's skeleton is made from construct.json and
//!    stack.json before dump.json is read, so each entry of dump.json goes to its node as it
//!    is read, and reading and building overlap on purpose);
//! 3. [`pair`]: **match** the target and golden graphs of a unit, then **compare** their items
//!    (`precision_index`), returning the two graphs ready to export;
//! 4. [`write`]: rows into the `.vis.db` under its one output name, never replacing a file (or
//!    a shard's part).
//!
//! [`convert`] holds the entry points; the plain conversion ([`plain`]) and the parallel merge
//! ([`merged`]) both go through these steps; the merge adds its merging of rank graphs
//! ([`crate::merge`]) between build and pair, and gives the pair step what differs for merged
//! graphs (the matching options, the micro-step batches). [`run`] carries what every step
//! shares: progress reports and the cancel flag.

pub(crate) mod build;
pub(crate) mod convert;
pub(crate) mod merged;
pub(crate) mod pair;
pub(crate) mod plain;
pub(crate) mod plan;
pub(crate) mod run;
pub(crate) mod write;

//! Readers for msprobe dump folders.
//!
//! A dump folder (`rankN/` or `proc<pid>/`) holds `dump.json` (per-op statistics), `construct.json`
//! (the module hierarchy), `stack.json` (call stacks) and, for `task: tensor`, real tensors in
//! `dump_tensor_data/` (`.pt` for PyTorch, `.npy` for MindSpore).
//!
//! Every reader returns a [`DumpError`] that names the file and the problem, so a bad dump is a
//! clear message for the user and never a panic.
//!
//! # Which value type is for what
//!
//! A dump value passes through these types, each for one job, in the order data flows:
//!
//! - [`fastjson::JVal`]: `dump.json` parsed in place (borrowed strings, bare `NaN` as floats).
//!   The fast path: every entry of a conversion is read as a `JVal` and flattened at once.
//! - [`serde_json::Value`]: the full reader's values ([`DumpFile::read`], `construct.json`,
//!   `stack.json`). It decides what a bad `dump.json` means (the fast path falls back to it and
//!   never words an error itself), reads the small files, and serves the few callers that need
//!   a whole entry or file (`--file_type json` output, overflow levels on the fallback path,
//!   layer mapping's raw stacks).
//! - [`PyVal`]: one field's value as Python holds it (`int`, `float`, `str`, `None`, lists,
//!   dicts), so that `str()` of it is exactly msprobe's text in a `.vis.db` column.
//! - [`Item`]: one flattened input/output/parameter of an op (`<op>.input.0`): its fields, in
//!   msprobe's order, as `(name, PyVal)`. What the comparison reads and extends (the
//!   converter's `compare` and the service's manual matches).
//! - [`PackedItem`] (and [`PackedOp`], an op's items): the same item in one small byte buffer,
//!   how a graph holds its items between reading and writing (a sixth of the memory);
//!   [`ValRef`] is a field read in place from it, for the row formatter. Packing is lossless:
//!   [`PackedItem::unpack`] gives the `Item` back.
//!
//! All five stay: `JVal` and `Value` are the two readers (fast and authoritative), `PyVal`/`Item`
//! are what the comparison works on, `PackedItem`/`ValRef` what a big graph can afford to keep.
//!
//! # Layout
//!
//! This file only declares the modules and re-exports the public face; a module uses only
//! modules beside it, never this root, and no two use each other. From the top down:
//!
//! - the readers of a rank folder's files: [`dumpfile`] (`dump.json`, fast and full),
//!   `construct` (`construct.json`), `stack` (`stack.json`), [`tensor`] (`.npy`/`.pt`);
//! - what they read into: `items` (an op's flattened items, the metric table), [`packed`]
//!   (the same items packed, and an op parsed straight into them), [`pyval`] (Python's values
//!   and their text);
//! - the parsers: [`fastjson`] (`dump.json` in place), [`json`] (`serde_json` streaming, Python's
//!   JSON dialect);
//! - at the bottom: [`confine`] (where files may be read from), `error` ([`DumpError`]),
//!   `tensor_error` (why a tensor file cannot be read, the tensor reader's bounds), `fast_map`
//!   ([`FastMap`], [`FastSet`]).
//!
//! # Streaming
//!
//! No reader holds a file's parsed tree. The fast reader cuts `dump.json` into batches of raw
//! entries ([`DumpFile::read_fast_batches`]); the `serde_json` path streams a JSON object member
//! by member through one visitor, `json::Members`, behind both [`json::stream_object`]
//! (`construct.json`, `stack.json`) and [`DumpFile::read_streaming`] (`dump.json`'s `data`).

#![deny(unsafe_code)]

pub mod confine;
pub(crate) mod construct;
pub mod dumpfile;
pub(crate) mod error;
pub(crate) mod fast_map;
pub mod fastjson;
pub(crate) mod items;
pub mod json;
pub mod packed;
pub mod pyval;
pub(crate) mod stack;
pub mod tensor;
pub(crate) mod tensor_error;

pub use confine::Confine;
pub use construct::{Construct, Entries as ConstructEntries, EntryIndex};
pub use dumpfile::DumpFile;
pub use error::DumpError;
pub use fast_map::{FastMap, FastSet};
pub use items::{
    detail_columns, field_name, metric_rule, parse_op, parse_op_fast, FieldName, Item, MetricRule,
    OpData, Worse, COMPARE_COLUMNS, METRIC_RULES, STATISTICS_METRIC_COLUMNS, TENSOR_METRIC_COLUMNS,
};
pub use packed::{parse_op_packed, PackedItem, PackedOp, ValRef};
pub use pyval::PyVal;
pub use stack::{StackMap, StackSink};

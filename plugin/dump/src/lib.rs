//! Readers for msprobe dump folders.
//!
//! A dump folder (`rankN/` or `proc<pid>/`) holds `dump.json` (per-op statistics), `construct.json`
//! (the module hierarchy), `stack.json` (call stacks) and, for `task: tensor`, real tensors in
//! `dump_tensor_data/` (`.pt` for PyTorch, `.npy` for MindSpore).
//!
//! Every reader returns a [`DumpError`] that names the file and the problem, so a bad dump is a
//! clear message for the user and never a panic.

pub mod construct;
pub mod dumpfile;
pub mod error;
pub mod fastjson;
pub mod fuzzing;
pub mod items;
pub mod json;
pub mod packed;
pub mod pyval;
pub mod stack;
pub mod tensor;

pub use construct::Construct;
pub use dumpfile::DumpFile;
pub use error::DumpError;
pub use items::{field_name, parse_op, parse_op_fast, parse_op_packed, FieldName, Item, OpData};
pub use packed::{PackedItem, PackedOp, ValRef};
pub use pyval::PyVal;
pub use stack::StackMap;

/// A `HashMap` with a fast non-cryptographic hash (foldhash): the readers and the graph builder
/// look up every op and node name several times, and SipHash was a tenth of building a graph.
/// Names come from local files, not from the network, so flooding is not a concern.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

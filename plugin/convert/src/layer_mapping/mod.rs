//! Layer mapping (`-lm [YAML]`): msprobe's scope-based pairing of target and golden dump entries
//! (`msprobe/core/compare/layer_mapping`).
//!
//! Every entry of each side's `dump.json` gets a *scope*: the dotted module path it ran under
//! (from its own name for modules and parameter gradients, from its parent in `construct.json` for
//! APIs), then — with old-form `stack.json` only — the framework function that called it, then its
//! own short name. Backward entries borrow the scope of their forward twin, and the `layers` of a
//! `ParallelTransformer` are renumbered from 0 (pipeline stages number them globally). The scopes
//! of a side form a trie; each trie node remembers its class (the type name of the last entry put
//! there) and, per direction (`forward`, `backward`, `parameters_grad`, …), the entries in dump
//! order.
//!
//! A target entry is translated by walking its scope down the target trie: at each step the
//! child's name is rewritten by the YAML rules of the current node's class (`{Class: {child:
//! golden_child}}`, where the child may span several levels, `a.b.c: new_c`; the old class key
//! `Cell` stands for the top level, `TopLayer`). The golden entry is the one at the translated scope
//! with the same direction and the same position. A bare `-lm` is the same walk with no rules,
//! which pairs entries by scope and position alone.
//!
//! Graph nodes are then matched by id through that table: a node whose id is a dumped target entry
//! takes its golden entry (or nothing when there is none); any other node (modules only present in
//! `construct.json`, `Apis_Between_Modules`, the root) looks for its own id. No ancestor check.
//!
//! Like msprobe, a mapping file whose content is not a mapping of mappings of strings, and dumps
//! whose names break the scope rules, do not stop the conversion: the mapping is dropped (a warning
//! says so) and every node looks for its own id. Unlike msprobe, a mapping file that is missing,
//! unreadable or not named `*.yaml` is an error naming it (msprobe warns and goes on without it).
//!
//! msprobe reads `stack.json` raw here: in the new form (`{"0": [[names], [frames]]}`, written by
//! every recent msprobe) no entry finds its frames, so scopes carry no function part. We do the
//! same.
//!
//! - [`rules`]: the mapping file;
//! - [`side`]: one side's entries, their scopes and the trie;
//! - [`mapping`]: the mapping of a pair and the matching of graph nodes through it.

mod mapping;
mod rules;
mod side;
#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde_json::Value;

use crate::graph::Graph;
use crate::{ConvertError, LayerMapping, RankDump};

pub use mapping::{api_mapping, mapping_for, match_graphs, ApiMapping};
pub use rules::{load_rules, preflight, Rules};
pub use side::Side;
// What the parts share with each other.
use rules::*;

/// The top of every scope (`Const.TOP_LAYER`).
const TOP_LAYER: &str = "TopLayer";
/// The old name of the top level in mapping files (`Const.CELL`).
const OLD_TOP_KEY: &str = "Cell";
const PARAMS_GRAD: &str = "parameters_grad";
/// Path fragments of framework files (`Const.FRAME_FILE_LIST`).
const FRAMEWORK_FILES: [&str; 4] = [
    "site-packages/torch",
    "package/torch",
    "site-packages/mindspore",
    "package/mindspore",
];
/// Frames from these files are not scope parts (`Const.FILE_SKIP_LIST`).
const SKIPPED_FILES: [&str; 2] = ["msprobe", "MindSpeed"];
/// Frames of these functions are not scope parts (`Const.FUNC_SKIP_LIST`).
const SKIPPED_FUNCS: [&str; 2] = ["construct", "__call__"];

/// Why a mapping could not be made. `File` stops the conversion; the others make msprobe drop
/// the mapping with a warning ([`LayerMappingError::drops_mapping`]), and every node then looks
/// for its own id.
#[derive(Debug, thiserror::Error)]
pub enum LayerMappingError {
    /// The mapping file is missing, unreadable or not a `.yaml` file.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A dump file's entries or stacks cannot be read for a mapping.
    #[error("{path}: {message}")]
    Dump { path: PathBuf, message: String },
    /// The mapping file's content is not a mapping of mappings of strings.
    #[error("{0}")]
    Content(String),
    /// A dump entry, its parent or its stack does not fit msprobe's scope rules.
    #[error("{0}")]
    Scope(String),
    /// The conversion was cancelled while the mapping was being read or used.
    #[error("cancelled")]
    Cancelled,
}

impl LayerMappingError {
    /// msprobe goes on without the mapping (a warning), rather than stopping.
    pub fn drops_mapping(&self) -> bool {
        !matches!(
            self,
            LayerMappingError::File { .. } | LayerMappingError::Cancelled
        )
    }
}

impl From<LayerMappingError> for ConvertError {
    fn from(e: LayerMappingError) -> Self {
        match e {
            LayerMappingError::File { path, message }
            | LayerMappingError::Dump { path, message } => ConvertError::Input { path, message },
            LayerMappingError::Content(message) | LayerMappingError::Scope(message) => {
                ConvertError::Usage(message)
            }
            LayerMappingError::Cancelled => ConvertError::Cancelled,
        }
    }
}

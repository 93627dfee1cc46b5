//! One function per RPC: a request message in, a response message out, no sockets.
//!
//! Handlers are synchronous. Where each runs is the proto's `blocking` option on its RPC, read by
//! the generated wrappers ([`crate::service`]): those that may wait long (index builds, file
//! writes, conversions, the logdir walk) on tokio's blocking pool, the others (the page's opening
//! requests and clicks, whose work is bounded by the answer) inline on the runtime's worker. A new
//! RPC is its proto entry (with `blocking` if it may wait long), its handler here, and one line in
//! `service.rs`'s `graph_ascend_service!`. Each is
//! a named function returning [`Result`], and the public handler wraps it with [`answer`], the one
//! place where failures become msprobe's `{"success": false, "error": "<text>"}` in the page's
//! language; only a failure of the server itself becomes a gRPC status (at the edge, in
//! `service`). Answers about a few nodes come from indexed queries on the file; answers about every
//! node of a graph (node lists, matched relations, precision filter, search) from the file's
//! in-memory indexes ([`crate::graph_index`]), read once per file version.
//!
//! # Layout
//!
//! - [`catalog`]: which files there are, loading one, its configuration;
//! - [`navigation`]: node lists, expanding and collapsing, the laid-out hierarchy, node details;
//! - [`finding`]: the precision and overflow filters, name search;
//! - [`matching`]: matched relations, manual matches and their configuration files;
//! - [`colors`]: the colour legend;
//! - [`precision_errors`]: precision recomputed from chosen error metrics;
//! - [`conversions`]: conversions started, followed and cancelled from the page;
//! - [`diagnosis`]: where a compare first went wrong, and the compare as CSV (beyond msprobe).

mod catalog;
mod colors;
mod conversions;
mod diagnosis;
mod finding;
mod matching;
mod navigation;
mod precision_errors;

use std::sync::Arc;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::{GraphKey, Side};
use graph_ascend_visdb::{Store, StoreError};

use crate::catalog::GraphFile;
use crate::messages::{Lang, Msg};
use crate::State;

pub use catalog::{load_graph_config_info, load_graph_data, load_meta_dir};
pub use colors::update_colors;
pub use conversions::{
    cancel_convert, convert_state, convert_to_graph, load_converted_graph_data, progress_stream,
};
pub use diagnosis::{diagnose, export_csv, CSV_CONTENT_TYPE};
pub use finding::{filter_nodes, search_nodes};
pub use matching::{
    add_match_nodes, add_match_nodes_by_config, delete_match_nodes, load_graph_matched_relations,
    save_data, save_matched_relations,
};
pub use navigation::{
    change_node_expand_state, get_node_info, load_graph_all_node_list, update_hierarchy_data,
};
pub use precision_errors::{update_precision_error, PrecisionOverrides};

/// Why a request could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The request is malformed or names something that does not exist; `Msg` is shown.
    #[error("{}", .0.text(Lang::En))]
    Invalid(Msg),
    /// The file could not be read; the message names the file.
    #[error("{1}")]
    Store(Msg, StoreError),
    /// A colour legend msprobe refuses (its texts are English in both languages).
    #[error(transparent)]
    Colors(colors::ColorsError),
    /// A conversion that cannot start (the text names the path or the limit).
    #[error(transparent)]
    Conversion(crate::convert_jobs::StartError),
    /// A file that cannot be diagnosed (not a compare file, no such step); the text names it.
    #[error("{1}")]
    Diagnosis(Msg, graph_ascend_diagnose::DiagnoseError),
}

impl HandlerError {
    /// The text for the page: the message, plus the file-level reason when there is one.
    pub fn text(&self, lang: Lang) -> String {
        match self {
            HandlerError::Invalid(msg) => msg.text(lang).to_owned(),
            HandlerError::Store(msg, err) => format!("{} {err}", msg.text(lang)),
            HandlerError::Colors(err) => err.to_string(),
            HandlerError::Conversion(err) => err.to_string(),
            HandlerError::Diagnosis(msg, err) => format!("{} {err}", msg.text(lang)),
        }
    }
}

type Result<T> = std::result::Result<T, HandlerError>;

/// Attaches a user-facing message to store failures.
pub(crate) trait StoreContext<T> {
    fn context(self, msg: Msg) -> Result<T>;
}

impl<T> StoreContext<T> for std::result::Result<T, StoreError> {
    fn context(self, msg: Msg) -> Result<T> {
        self.map_err(|e| HandlerError::Store(msg, e))
    }
}

/// A response type that can carry msprobe's `{success: false, error}`.
pub(crate) trait Failure: Default {
    fn failure(error: String) -> Self;
}

macro_rules! failure {
    ($($t:ty),*) => {$(
        impl Failure for $t {
            #[allow(clippy::needless_update)]
            fn failure(error: String) -> Self {
                Self { success: false, error: Some(error), ..Default::default() }
            }
        }
    )*};
}

failure!(
    pb::StatusResponse,
    pb::ConfigInfoResponse,
    pb::NodeListResponse,
    pb::HierarchyResponse,
    pb::NodeInfoResponse,
    pb::FilterNodesResponse,
    pb::SearchNodesResponse,
    pb::MatchedRelationsResponse,
    pb::MatchResultResponse,
    pb::SaveMatchedRelationsResponse,
    pb::ConvertCandidatesResponse,
    pb::ConvertStartResponse,
    pb::DiagnoseResponse,
    pb::FileChunk
);

/// Turns a handler result into the response message, failures included: the one place where
/// errors become msprobe's answers.
fn answer<T: Failure>(lang: Lang, result: Result<T>) -> T {
    match result {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!("request failed: {e}");
            T::failure(e.text(lang))
        }
    }
}

/// A request's selection, checked and resolved to a file.
pub(crate) struct Selection {
    pub file: Arc<GraphFile>,
    pub step: i64,
    pub rank: i64,
    pub micro_step: i64,
    /// Whether the file is a comparison, from the configuration [`select`] read.
    compare: bool,
}

impl Selection {
    /// Whether the selected file is a comparison (two graphs) rather than a single build.
    pub(crate) fn is_compare(&self) -> Result<bool> {
        Ok(self.compare)
    }

    pub(crate) fn graph(&self, side: Side) -> GraphKey {
        GraphKey {
            side,
            step: self.step,
            rank: self.rank,
        }
    }
}

/// The language of a request (for its error texts), before anything else is checked.
pub(crate) fn lang_of(meta: Option<&pb::MetaData>) -> Lang {
    Lang::parse(meta.map_or("en", |m| m.lang.as_str()))
}

/// msprobe's `check_file_type` + `safe_get_meta_data`: the file must exist, and step, rank and
/// micro step must be among the file's.
pub(crate) fn select(state: &State, meta: Option<&pb::MetaData>) -> Result<Selection> {
    // A request about a file: the answer before it has arrived, so the background work of
    // opening a file need not pause for it any longer (`step_aside`).
    state.step_aside.resume();
    let meta = meta.ok_or(HandlerError::Invalid(Msg::MetaData))?;
    let file = file_of(state, &meta.run, &meta.tag, &meta.r#type)?;
    let config = file.with_store(Store::config).context(Msg::LoadConfig)?;
    let selection = Selection {
        file,
        step: i64::from(meta.step.unwrap_or(0)),
        rank: i64::from(meta.rank.unwrap_or(0)),
        micro_step: i64::from(meta.micro_step.unwrap_or(-1)),
        compare: config.is_compare(),
    };
    let micro_ok = selection.micro_step == -1
        || (0..config.micro_steps.max(1)).contains(&selection.micro_step);
    let rank_ok = config.ranks.is_empty() || config.ranks.contains(&selection.rank);
    let step_ok = config.steps.is_empty() || config.steps.contains(&selection.step);
    if !(micro_ok && rank_ok && step_ok) {
        return Err(HandlerError::Invalid(Msg::MetaData));
    }
    Ok(selection)
}

/// The served file named by a request's run, tag and type (msprobe's `check_file_type`).
pub(crate) fn file_of(state: &State, run: &str, tag: &str, kind: &str) -> Result<Arc<GraphFile>> {
    if run.is_empty() || tag.is_empty() {
        return Err(HandlerError::Invalid(Msg::MetaData));
    }
    if !kind.is_empty() && kind != "db" {
        return Err(HandlerError::Invalid(Msg::Type));
    }
    state
        .catalog
        .file(run, tag)
        .ok_or(HandlerError::Invalid(Msg::DbInit))
}

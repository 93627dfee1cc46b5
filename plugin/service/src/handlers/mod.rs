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
//! - [`diagnosis`]: where a compare first went wrong, and the compare as CSV (beyond msprobe);
//!
//! and below them all, what they share:
//!
//! - [`selection`]: the file, step and rank a request names, checked;
//! - [`reply`]: the handlers' errors, and the one place they become msprobe's answers.

mod catalog;
mod colors;
mod conversions;
mod diagnosis;
mod divergence_map;
mod finding;
mod matching;
mod navigation;
mod precision_errors;
mod reply;
mod report;
mod selection;

pub use catalog::{load_graph_config_info, load_graph_data, load_meta_dir};
pub use colors::update_colors;
pub use conversions::{
    cancel_convert, convert_state, convert_to_graph, load_converted_graph_data, progress_stream,
};
pub use diagnosis::{diagnose, export_csv, CSV_CONTENT_TYPE};
pub use divergence_map::divergence_map;
pub use finding::{filter_nodes, search_nodes};
pub use matching::{
    add_match_nodes, add_match_nodes_by_config, delete_match_nodes, load_graph_matched_relations,
    save_data, save_matched_relations,
};
pub use navigation::{
    change_node_expand_state, get_node_info, load_graph_all_node_list, update_hierarchy_data,
};
pub use precision_errors::update_precision_error;
pub use reply::HandlerError;
pub use report::{
    export_report, report_data, report_data_with_progress, ReportData, ReportOptions,
    ReportProgress, DEFAULT_REPORT_BYTES, REPORT_CONTENT_TYPE,
};

//! The graph-ascend sidecar: everything the GRAPH_ASCEND page asks of TensorBoard.
//!
//! Data flows one way: `.vis.db` files → [`catalog`] (which files exist and open) → a request's
//! selection → [`layout`] (the client's expanded hierarchy, laid out as msprobe lays it out) and
//! the store's indexed queries → [`handlers`] (one function per RPC, answers in msprobe 26.2's
//! shapes) → [`service`] (the tonic edge) → [`server`] (a private Unix socket, graceful
//! shutdown; over the loopback TCP fallback, a per-launch token checked before every call).
//! [`views`] keeps view state per browser client, [`root_layouts`] the root view every client
//! starts from, [`step_aside`] has that background work pause while the answers to opening a
//! file travel back, [`background`] runs the work no request waits for (the diagnosis started
//! when a compare file is opened) below every answer; [`graph_index`] keeps what the
//! whole-graph answers (node lists, matched relations, filters, name search) need, per graph,
//! under one memory bound for all files;
//! [`diagnosis_cache`] the diagnoses of compare files (`graph_ascend_diagnose`), per file version;
//! [`map_progress`] how far the divergence maps under computation are;
//! `handlers::report_data` and [`report_page`] the self-contained report (one HTML file).
//!
//! # Layout
//!
//! From the edge down: each module imports only from modules listed below it, never from one
//! above it nor from the root, and no two modules import each other (`make lint-imports` checks
//! this with `tools/check_imports.py`). This file only declares the modules and re-exports the
//! public face.
//!
//! ```text
//! server               the listener, graceful shutdown, the TCP token; serves a State
//! service              the tonic edge: one method per RPC, run quick, on the blocking pool or
//!                      on the heavy lane
//! heavy_lane           the few threads that run long requests (layouts, huge answers)
//! handlers/            one function per RPC; below its routes, `selection` and `reply`
//! state                State: everything the handlers share, one per sidecar
//! background           work no request waits for, on lowered threads and a rayon pool of its own
//! convert_jobs         conversions on demand
//! map_progress         how far the divergence maps under computation are
//! diagnosis_cache      diagnoses per file version
//! root_layouts         the root view every client starts from, per file version
//! catalog              the served files, opened and pooled
//! edit_gate            one file's gate: no read of it while an edit of it writes
//! graph_index          per-graph in-memory indexes, under one memory bound
//! views                each client's expanded hierarchy, under one memory bound
//! matching             manual matching edits
//! precision_overrides  precision indexes recomputed by `updatePrecisionError`
//! layout               a laid-out hierarchy
//! precision            a matched pair's precision, by the converter's comparison
//! step_aside           background work pausing while the opening answers travel
//! paths                request paths resolved inside the logdir
//! regular_file         a file a request names, opened once, checked on the handle, bounded
//! messages             the page's error texts, in both languages
//! values               JSON <-> protobuf `Value`
//! watch                the logdir watched for new and changed files
//! sync                 `lock`: the one policy for poisoned mutexes
//! report_page          the self-contained report's HTML: the page's assets inlined, the data embedded
//! ```

#![deny(unsafe_code)]

pub mod background;
pub(crate) mod catalog;
pub(crate) mod convert_jobs;
pub(crate) mod diagnosis_cache;
pub(crate) mod edit_gate;
pub(crate) mod graph_index;
pub mod handlers;
pub(crate) mod heavy_lane;
pub(crate) mod layout;
pub(crate) mod map_progress;
pub(crate) mod matching;
pub(crate) mod messages;
pub(crate) mod paths;
pub(crate) mod precision;
pub(crate) mod precision_overrides;
pub(crate) mod regular_file;
pub mod report_page;
pub(crate) mod root_layouts;
pub mod server;
pub mod service;
pub(crate) mod state;
pub(crate) mod step_aside;
pub(crate) mod sync;
pub(crate) mod values;
pub(crate) mod views;
pub(crate) mod watch;

pub use catalog::GraphFile;
pub use convert_jobs::STAGING_PREFIX;
pub use graph_index::DEFAULT_MAX_INDEX_BYTES;
pub use layout::NodeSource;
pub use precision_overrides::PrecisionOverrides;
pub use server::{run, run_checked, Listener, PrivateSocket, ServeError, TokenCheck};
pub use service::GraphService;
pub use state::State;
pub use values::{json_to_prost, prost_to_json};
pub use views::{ViewKey, DEFAULT_MAX_VIEW_BYTES};

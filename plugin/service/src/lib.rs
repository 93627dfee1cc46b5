//! The graph-ascend sidecar: everything the GRAPH_ASCEND page asks of TensorBoard.
//!
//! Data flows one way: `.vis.db` files → [`catalog`] (which files exist and open) → a request's
//! selection → [`layout`] (the client's expanded hierarchy, laid out as msprobe lays it out) and
//! the store's indexed queries → [`handlers`] (one function per RPC, answers in msprobe 26.2's
//! shapes) → [`service`] (the tonic edge) → [`server`] (a private Unix socket, graceful
//! shutdown; over the loopback TCP fallback, a per-launch token checked before every call).
//! [`views`] keeps view state per browser client, [`root_layouts`] the root view every client
//! starts from, [`step_aside`] has that background work pause while the answers to opening a
//! file travel back; [`graph_index`] keeps what the
//! whole-graph answers (node lists, matched relations, filters, name search) need, per graph,
//! under one memory bound for all files;
//! [`diagnosis_cache`] the diagnoses of compare files (`graph_ascend_diagnose`), per file version.

pub(crate) mod catalog;
pub(crate) mod convert_jobs;
pub(crate) mod diagnosis_cache;
pub mod fuzzing;
pub(crate) mod graph_index;
pub mod handlers;
pub(crate) mod layout;
pub(crate) mod matching;
pub(crate) mod messages;
pub(crate) mod paths;
pub(crate) mod precision;
pub(crate) mod precision_overrides;
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
pub use values::json_to_prost;
pub use views::DEFAULT_MAX_VIEW_BYTES;

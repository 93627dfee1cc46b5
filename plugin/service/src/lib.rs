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
pub(crate) mod graph_index;
pub mod handlers;
pub(crate) mod layout;
pub(crate) mod matching;
pub(crate) mod messages;
pub(crate) mod paths;
pub(crate) mod precision;
pub(crate) mod root_layouts;
pub mod server;
pub mod service;
pub(crate) mod step_aside;
pub(crate) mod values;
pub(crate) mod views;
pub(crate) mod watch;

pub use catalog::GraphFile;
pub use convert_jobs::STAGING_PREFIX;
pub use graph_index::DEFAULT_MAX_INDEX_BYTES;
pub use layout::NodeSource;
pub use server::{run, run_checked, Listener, PrivateSocket, ServeError, TokenCheck};
pub use service::GraphService;
pub use values::{json_to_prost, prost_to_json};
pub use views::DEFAULT_MAX_VIEW_BYTES;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// Locks a mutex of the sidecar, recovering it if a thread panicked while holding it.
///
/// The one policy for poisoned locks: every mutex here guards a cache or a client's view state,
/// each left whole between statements, so the data is still usable; refusing it would turn one
/// failed request into a file or view that stays broken until a restart.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Everything the handlers share.
pub struct State {
    pub catalog: catalog::Catalog,
    pub views: views::Views,
    /// The root layouts shared by clients, per file version (`root_layouts`).
    pub root_layouts: Arc<root_layouts::RootLayouts>,
    /// Pauses the background work of opening a file while its first answers travel (`step_aside`).
    pub step_aside: Arc<step_aside::StepAside>,
    pub watch: watch::LogdirWatch,
    pub precision_overrides: handlers::PrecisionOverrides,
    pub conversions: convert_jobs::Conversions,
    /// Diagnoses per file version (`handlers::diagnose`).
    pub diagnoses: diagnosis_cache::DiagnosisCache,
}

impl State {
    /// The state of a sidecar serving `logdir`.
    pub fn new(logdir: PathBuf) -> State {
        State::with_max_conversions(logdir, convert_jobs::DEFAULT_MAX_CONVERSIONS)
    }

    /// The state of a sidecar serving `logdir` that runs at most `max_conversions` at once.
    pub fn with_max_conversions(logdir: PathBuf, max_conversions: usize) -> State {
        State {
            precision_overrides: handlers::PrecisionOverrides::default(),
            conversions: convert_jobs::Conversions::new(max_conversions),
            watch: watch::LogdirWatch::start(&logdir),
            catalog: catalog::Catalog::new(logdir),
            views: views::Views::default(),
            root_layouts: Arc::default(),
            step_aside: Arc::default(),
            diagnoses: diagnosis_cache::DiagnosisCache::default(),
        }
    }

    /// This state with the views of all clients bounded to about `bytes` together (default
    /// [`DEFAULT_MAX_VIEW_BYTES`]; the least recently used go first).
    pub fn with_view_memory(mut self, bytes: usize) -> State {
        self.views = views::Views::with_max_bytes(bytes);
        self
    }

    /// This state with the indexes of all files bounded to about `bytes` together (default
    /// [`DEFAULT_MAX_INDEX_BYTES`]; the least recently used go first).
    pub fn with_index_memory(mut self, bytes: usize) -> State {
        self.catalog = self.catalog.with_index_memory(bytes);
        self
    }

    /// Bytes held by the indexes of all files, by their own measure.
    pub fn index_bytes(&self) -> usize {
        self.catalog.index_budget().bytes()
    }

    /// How many graphs (a side of a step and rank of a file) have an index now.
    pub fn indexed_graphs(&self) -> usize {
        self.catalog.index_budget().len()
    }

    /// Bytes held by the views of all clients, as last measured.
    pub fn view_bytes(&self) -> usize {
        self.views.bytes()
    }
}

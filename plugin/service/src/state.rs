//! What the handlers share: one [`State`] per sidecar, built by the server.

use std::path::PathBuf;
use std::sync::Arc;

use crate::background::Background;
use crate::catalog::Catalog;
use crate::convert_jobs::{Conversions, DEFAULT_MAX_CONVERSIONS};
use crate::diagnosis_cache::DiagnosisCache;
use crate::map_progress::MapProgressBoard;
use crate::precision_overrides::PrecisionOverrides;
use crate::root_layouts::RootLayouts;
use crate::step_aside::StepAside;
use crate::views::Views;
use crate::watch::LogdirWatch;

/// Everything the handlers share.
pub struct State {
    pub catalog: Catalog,
    pub views: Views,
    /// The root layouts shared by clients, per file version (`root_layouts`).
    pub root_layouts: Arc<RootLayouts>,
    /// Pauses the background work of opening a file while its first answers travel (`step_aside`).
    pub step_aside: Arc<StepAside>,
    /// Where work that no request waits for runs: lowered threads of their own (`background`;
    /// the diagnosis started when the page opens a compare file).
    pub background: Arc<Background>,
    pub watch: LogdirWatch,
    pub precision_overrides: PrecisionOverrides,
    pub conversions: Conversions,
    /// Diagnoses per file version (`handlers::diagnose`; shared with the diagnoses started when
    /// the page opens a compare file).
    pub diagnoses: Arc<DiagnosisCache>,
    /// Whether opening a compare file starts its diagnosis in the background (default; `serve
    /// --no-diagnosis-prefetch` turns it off: the panel's first request computes it).
    pub diagnosis_prefetch: bool,
    /// The page's build, inlined into the reports the page downloads (`handlers::export_report`).
    pub page_assets: Option<PathBuf>,
    /// How far the divergence maps under computation are (`handlers::divergence_map`; shared
    /// with the diagnoses started when the page opens a compare file, which compute the default
    /// map on the way).
    pub map_progress: Arc<MapProgressBoard>,
}

impl State {
    /// The state of a sidecar serving `logdir`.
    pub fn new(logdir: PathBuf) -> State {
        State::with_max_conversions(logdir, DEFAULT_MAX_CONVERSIONS)
    }

    /// The state of a sidecar serving `logdir` that runs at most `max_conversions` at once.
    pub fn with_max_conversions(logdir: PathBuf, max_conversions: usize) -> State {
        State {
            precision_overrides: PrecisionOverrides::default(),
            conversions: Conversions::new(max_conversions),
            watch: LogdirWatch::start(&logdir),
            catalog: Catalog::new(logdir),
            views: Views::default(),
            root_layouts: Arc::default(),
            step_aside: Arc::default(),
            background: Arc::default(),
            diagnoses: Arc::default(),
            diagnosis_prefetch: true,
            page_assets: None,
            map_progress: Arc::default(),
        }
    }

    /// This state with the views of all clients bounded to about `bytes` together (default
    /// [`DEFAULT_MAX_VIEW_BYTES`](crate::DEFAULT_MAX_VIEW_BYTES); the least recently used go first).
    pub fn with_view_memory(mut self, bytes: usize) -> State {
        self.views = Views::with_max_bytes(bytes);
        self
    }

    /// This state with the page's build in `dir` (for the reports the page downloads).
    pub fn with_page_assets(mut self, dir: Option<PathBuf>) -> State {
        self.page_assets = dir;
        self
    }

    /// This state with the diagnosis of a compare file started when the file is opened (`true`,
    /// the default) or only when the Diagnosis panel asks for it (`false`).
    pub fn with_diagnosis_prefetch(mut self, prefetch: bool) -> State {
        self.diagnosis_prefetch = prefetch;
        self
    }

    /// This state with the indexes of all files bounded to about `bytes` together (default
    /// [`DEFAULT_MAX_INDEX_BYTES`](crate::DEFAULT_MAX_INDEX_BYTES); the least recently used go first).
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

//! How far the divergence maps under computation are, per file version and map of full
//! resolution ([`Key::FineMap`]), so that the page can show progress (graphs read of total) and
//! the map of the steps judged so far while its request for the map is under way (the
//! `divergenceMap` route with `progress`).
//!
//! The computation itself is here too ([`compute`]), for the `divergenceMap` route and for the
//! file's diagnosis started when the page opens a file of several graphs, which makes the default
//! map on the way ([`diagnosis_with_default_map`]): a request for a map under way waits for it
//! ([`MapProgressBoard::wait_for`]) and takes the map from its entry, rather than reading every
//! graph a second time beside it.
//!
//! An entry is made when a computation starts and marked done when it ends (its map is then in
//! [`crate::diagnosis_cache`]); entries of older file versions are dropped the next time the
//! board is touched, and at most [`MAX_ENTRIES`] are kept, oldest out first.

use std::sync::{Arc, Mutex, Weak};

use graph_ascend_diagnose::map::{fine_map_with_progress, MapOptions, MapShape};
use graph_ascend_diagnose::{CompareFile, DiagnoseError, Diagnosis, FineMap, Options};

use crate::catalog::GraphFile;
use crate::diagnosis_cache::{DiagnosisCache, Key};

/// Computations (under way or done) remembered over all files.
pub const MAX_ENTRIES: usize = 32;

/// One computation's progress.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub graphs_read: usize,
    pub graphs_total: usize,
    pub done: bool,
    /// The map of the steps judged so far, at full resolution, or while the first step is read
    /// the map of its graphs read so far (dropped once done: the cache holds the whole map).
    pub partial: Option<Arc<FineMap>>,
    /// Once done, the whole map, until it is in the cache: a request for the map that waited for
    /// this computation (one it did not start: the file's diagnosis computes the default map on
    /// the way) takes it from here.
    pub result: Option<Arc<FineMap>>,
}

struct Entry {
    file: Weak<GraphFile>,
    edits: u64,
    key: Key,
    progress: Arc<Mutex<Progress>>,
}

impl Entry {
    fn is(&self, file: &Arc<GraphFile>, key: Key) -> bool {
        self.key == key
            && self.edits == file.edit_count()
            && std::ptr::eq(self.file.as_ptr(), Arc::as_ptr(file))
    }
}

/// The board (one per sidecar, in [`crate::state::State`]).
#[derive(Default)]
pub struct MapProgressBoard {
    /// Oldest first.
    entries: Mutex<Vec<Entry>>,
}

impl MapProgressBoard {
    /// The progress of a computation of `key` starting now on this version of `file` (a new
    /// entry: a computation that starts again after a failure starts from nothing).
    pub fn start(&self, file: &Arc<GraphFile>, key: Key) -> Arc<Mutex<Progress>> {
        let mut entries = crate::sync::lock(&self.entries);
        entries.retain(|e| {
            e.file.upgrade().is_some_and(|f| f.edit_count() == e.edits) && !e.is(file, key)
        });
        let progress = Arc::<Mutex<Progress>>::default();
        entries.push(Entry {
            file: Arc::downgrade(file),
            edits: file.edit_count(),
            key,
            progress: progress.clone(),
        });
        let excess = entries.len().saturating_sub(MAX_ENTRIES);
        entries.drain(..excess);
        progress
    }

    /// The progress of the newest computation of `key` on this version of `file`, if any.
    pub fn get(&self, file: &Arc<GraphFile>, key: Key) -> Option<Progress> {
        let p = self.shared(file, key)?;
        let p = crate::sync::lock(&p).clone();
        Some(p)
    }

    /// The newest computation of `key` on this version of `file` itself (to wait for it), if any.
    pub fn shared(&self, file: &Arc<GraphFile>, key: Key) -> Option<Arc<Mutex<Progress>>> {
        let entries = crate::sync::lock(&self.entries);
        let e = entries.iter().rev().find(|e| e.is(file, key))?;
        Some(e.progress.clone())
    }

    /// The map of `key` from a computation under way or done on this version of `file` that
    /// left it on the board, once it is done; `None` when there is none, or it failed.
    pub fn wait_for(&self, file: &Arc<GraphFile>, key: Key) -> Option<FineMap> {
        let shared = self.shared(file, key)?;
        loop {
            {
                let p = crate::sync::lock(&shared);
                if p.done {
                    return p.result.as_deref().cloned();
                }
            }
            std::thread::sleep(POLL);
        }
    }
}

/// How often a request polls a computation of its map made elsewhere
/// ([`MapProgressBoard::wait_for`]).
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Computes the diagnosis and the map of full resolution in `shape` of `file`, telling `progress`
/// (graphs read, the map so far) and marking it done, with the map, at the end.
pub fn compute(
    progress: &Mutex<Progress>,
    file: &Arc<GraphFile>,
    shape: MapShape,
) -> Result<(Diagnosis, FineMap), DiagnoseError> {
    /// Marks the computation done however it ends (a request may be waiting for it).
    struct Done<'p>(&'p Mutex<Progress>);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            let mut shown = crate::sync::lock(self.0);
            shown.done = true;
            shown.partial = None;
        }
    }
    let done = Done(progress);
    // No edit of the sidecar writes the file while the map reads it (`crate::edit_gate`).
    let pass = file.read_pass();
    let built = CompareFile::open(&file.path).and_then(|compare| {
        fine_map_with_progress(&compare, &Options::default(), shape, true, &mut |p| {
            // The judged steps so far, or (while the first step is read) the map of its graphs
            // read so far.
            let partial = p.partial.or(p.preview).map(|m| Arc::new(m.clone()));
            let mut shown = crate::sync::lock(progress);
            shown.graphs_read = p.graphs_read;
            shown.graphs_total = p.graphs_total;
            if partial.is_some() {
                shown.partial = partial;
            }
        })
    });
    drop(pass);
    crate::sync::lock(progress).result =
        built.as_ref().ok().map(|(_, fine)| Arc::new(fine.clone()));
    drop(done);
    built
}

/// The map the Map panel asks for first: the default depth, ranks as columns.
const DEFAULT_MAP: Key = Key::FineMap {
    depth: 0,
    micro_batches: false,
};

/// The file's diagnosis (as `diagnose`), computed with its default map from the same judgements
/// (some 2 % more time), the map's progress on `board`: when the page opens a file of several
/// graphs, its diagnosis starts at once, and the Map panel, asked for afterwards, shows it
/// filling in and takes it from the board ([`MapProgressBoard::wait_for`]) instead of reading
/// every graph a second time beside it. Keep the map with [`keep_default_map`] once the
/// diagnosis is kept.
pub fn diagnosis_with_default_map(
    board: &MapProgressBoard,
    file: &Arc<GraphFile>,
) -> Result<(Diagnosis, FineMap), DiagnoseError> {
    let progress = board.start(file, DEFAULT_MAP);
    compute(&progress, file, MapOptions::default().shape())
}

/// Keeps the default map made by [`diagnosis_with_default_map`] in the cache, then drops it from
/// the board. Called with no other slot of `cache` held: a request for the map may hold the map's
/// slot while it waits for the computation (it takes the map from the board), and then its own
/// map is kept.
pub fn keep_default_map(
    cache: &DiagnosisCache,
    board: &MapProgressBoard,
    file: &Arc<GraphFile>,
    fine: FineMap,
) {
    let _ = cache.get(file, DEFAULT_MAP, || {
        Ok::<_, std::convert::Infallible>(fine)
    });
    if let Some(shared) = board.shared(file, DEFAULT_MAP) {
        crate::sync::lock(&shared).result = None;
    }
}

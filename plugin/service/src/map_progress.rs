//! How far the divergence maps under computation are, per file version and map of full
//! resolution ([`Key::FineMap`]), so that the page can show progress (graphs read of total) and
//! the map of the steps judged so far while its request for the map is under way (the
//! `divergenceMap` route with `progress`).
//!
//! An entry is made when a computation starts and marked done when it ends (its map is then in
//! [`crate::diagnosis_cache`]); entries of older file versions are dropped the next time the
//! board is touched, and at most [`MAX_ENTRIES`] are kept, oldest out first.

use std::sync::{Arc, Mutex, Weak};

use graph_ascend_diagnose::FineMap;

use crate::catalog::GraphFile;
use crate::diagnosis_cache::Key;

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
}

//! Laid-out root views, shared by the clients of a file version.
//!
//! Opening a file, and every click on "root", lays a graph out anew with only its root expanded
//! (msprobe's `changeNodeExpandState` for "root"). That view is the same for every client until
//! the file or its edits change, and it is the costliest of the first answers: the root's children
//! are read whole from the file (on the 48-layer compare file, 865 rows spread over most of the
//! file's pages). So it is laid out once per (file version, graph, micro step, pane) and each
//! client's view starts as a copy of it. When the page opens a file, `loadGraphData` starts
//! laying out the roots in the background as soon as the graph's index is built
//! ([`RootLayouts::prefetch`]; pausing while the opening answers travel, [`crate::step_aside`]),
//! so that the page's first root request finds it ready.
//!
//! An entry is valid for one version of the file (the catalog makes a new [`GraphFile`] for a
//! changed file) and one edit count ([`GraphFile::edit_count`]); a stale entry is laid out anew.
//! The cache is bounded by count and by memory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use graph_ascend_visdb::store::{GraphKey, StoreError};

use crate::catalog::GraphFile;
use crate::layout::Hierarchy;
use crate::step_aside::StepAside;

/// At most this many root layouts are kept; the least recently used go first.
const MAX_LAYOUTS: usize = 32;
/// Bound on the memory of all kept layouts together; a larger layout is not kept at all.
const MAX_BYTES: usize = 128 << 20;

/// Which root layout: a file, a graph of it, a micro step (`-1`: all) and the pane's name prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    file: PathBuf,
    graph: GraphKey,
    micro_step: i64,
    prefix: &'static str,
}

/// A layout, or the place where one is being made (callers wait for it).
type Cell = Arc<Mutex<Option<Arc<Option<Hierarchy>>>>>;

struct Entry {
    /// The file version the layout was made from.
    file: Weak<GraphFile>,
    edits: u64,
    cell: Cell,
    bytes: usize,
    last_used: Instant,
}

/// The root layouts of every open file.
#[derive(Default)]
pub struct RootLayouts {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl RootLayouts {
    /// The root layout of `graph` in `file` for `micro_step` and the pane of `prefix` (`None`
    /// when the graph has no root), made by `lay_out` unless a valid one is kept. Concurrent
    /// callers of one key wait for the first one's layout.
    pub fn get(
        &self,
        file: &Arc<GraphFile>,
        graph: GraphKey,
        micro_step: i64,
        prefix: &'static str,
        lay_out: impl FnOnce() -> Result<Option<Hierarchy>, StoreError>,
    ) -> Result<Arc<Option<Hierarchy>>, StoreError> {
        let key = Key {
            file: file.path.clone(),
            graph,
            micro_step,
            prefix,
        };
        let edits = file.edit_count();
        let cell = self.cell(&key, file, edits);
        let mut guard = crate::sync::lock(&cell);
        if let Some(layout) = guard.as_ref() {
            return Ok(layout.clone());
        }
        let layout = Arc::new(lay_out()?);
        *guard = Some(layout.clone());
        drop(guard);
        let bytes = layout.as_ref().as_ref().map_or(0, Hierarchy::heap_size);
        self.record_size(&key, &cell, bytes);
        Ok(layout)
    }

    /// Whether a layout of this key is kept or being made for this version of the file.
    fn has(&self, file: &Arc<GraphFile>, key: &Key) -> bool {
        crate::sync::lock(&self.entries).get(key).is_some_and(|e| {
            e.edits == file.edit_count() && Weak::ptr_eq(&e.file, &Arc::downgrade(file))
        })
    }

    /// The cell of `key` for this version of the file: the kept one, or a new empty one.
    fn cell(&self, key: &Key, file: &Arc<GraphFile>, edits: u64) -> Cell {
        let mut entries = crate::sync::lock(&self.entries);
        let now = Instant::now();
        let version = Arc::downgrade(file);
        if let Some(entry) = entries.get_mut(key) {
            if entry.edits == edits && Weak::ptr_eq(&entry.file, &version) {
                entry.last_used = now;
                return entry.cell.clone();
            }
        }
        entries.retain(|_, e| e.file.strong_count() > 0);
        while entries.len() >= MAX_LAYOUTS {
            let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            entries.remove(&oldest);
        }
        let cell = Cell::default();
        entries.insert(
            key.clone(),
            Entry {
                file: version,
                edits,
                cell: cell.clone(),
                bytes: 0,
                last_used: now,
            },
        );
        cell
    }

    /// Records the size of a layout just made, then drops the least recently used others until
    /// all fit [`MAX_BYTES`]; a layout larger than that on its own is not kept.
    fn record_size(&self, key: &Key, cell: &Cell, bytes: usize) {
        let mut entries = crate::sync::lock(&self.entries);
        match entries.get_mut(key) {
            Some(entry) if Arc::ptr_eq(&entry.cell, cell) => entry.bytes = bytes,
            _ => return,
        }
        if bytes > MAX_BYTES {
            entries.remove(key);
            return;
        }
        let mut total: usize = entries.values().map(|e| e.bytes).sum();
        while total > MAX_BYTES {
            let Some((oldest, size)) = entries
                .iter()
                .filter(|(k, _)| *k != key)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, e)| (k.clone(), e.bytes))
            else {
                break;
            };
            entries.remove(&oldest);
            total -= size;
        }
    }

    /// Lays out the roots of `graphs` (with their pane prefixes) in the background, each once
    /// its index is built (the first node list waits for the indexes: the layouts must not slow
    /// it down), unless they are kept or being made already; each after a pause `gate` asks for.
    pub fn prefetch(
        self: &Arc<Self>,
        file: &Arc<GraphFile>,
        graphs: Vec<(GraphKey, &'static str)>,
        micro_step: i64,
        gate: &Arc<StepAside>,
    ) {
        let wanted: Vec<(GraphKey, &'static str)> = graphs
            .into_iter()
            .filter(|(graph, prefix)| {
                let key = Key {
                    file: file.path.clone(),
                    graph: *graph,
                    micro_step,
                    prefix,
                };
                !self.has(file, &key)
            })
            .collect();
        if wanted.is_empty() {
            return;
        }
        let layouts = self.clone();
        let file = file.clone();
        let gate = gate.clone();
        let spawned = std::thread::Builder::new()
            .name("graph-ascend-root-layout".into())
            .spawn(move || {
                for (graph, prefix) in wanted {
                    let laid_out = file.index(graph).and_then(|_| {
                        gate.wait();
                        layouts.get(&file, graph, micro_step, prefix, || {
                            file.with_cached_rows(|rows| {
                                Hierarchy::new(rows, graph, micro_step, prefix)
                            })
                        })
                    });
                    if let Err(e) = laid_out {
                        tracing::debug!("laying out {} failed: {e}", file.path.display());
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("cannot start a layout thread: {e}");
        }
    }

    /// How many layouts are kept (for tests).
    pub fn len(&self) -> usize {
        crate::sync::lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

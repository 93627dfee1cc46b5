//! Diagnoses kept per file version, so that the panel, the colour mode and a second tab do not
//! judge the same file again.
//!
//! A version is a [`GraphFile`] (the catalog makes a new one when the file or its `-wal` log
//! changes on disk) plus its edit count (matching edits rewrite the compare columns the rules
//! read). Entries of an older version are never answered: they are dropped the next time the
//! cache is touched, and the whole cache holds at most [`MAX_ENTRIES`] results and about
//! [`MAX_BYTES`] (the verdicts of a million-node graph are tens of MB), least recently used first
//! out. Only successes are kept (a failure may be a busy file; it is computed again).
//! Callers that ask for the same entry at once wait for one computation. A computation started
//! ahead of the first request (the file's diagnosis when the page opens a compare file) [`claim`]s
//! its entry first, so that a second one is not started meanwhile.
//!
//! [`claim`]: DiagnosisCache::claim

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::catalog::GraphFile;

/// How many results the cache keeps over all files (each is a few KB to a few MB: the sources
/// of a file, or the verdicts of one graph's differing nodes).
pub const MAX_ENTRIES: usize = 16;
/// About how many bytes the results may take in all (the newest is kept whatever its size).
pub const MAX_BYTES: usize = 256 << 20;

/// What a cached result weighs, roughly (its heap bytes).
pub trait Weight {
    fn weight(&self) -> usize;
}

/// What is cached about a file version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The file's diagnosis: the first step whose forward differs, every rank.
    File,
    /// The diagnosis of one step, every rank.
    Step(i64),
    /// The verdicts of one step and rank's nodes.
    States { step: i64, rank: i64 },
    /// The divergence map of the file at a depth (0: the repeated blocks), per rank or per
    /// micro-batch, at full resolution: every map of that depth and axis is aggregated from it.
    FineMap { depth: u32, micro_batches: bool },
    /// The divergence map of the file at a depth (0: the repeated blocks), per rank or per
    /// micro-batch, with at most about `max_columns` columns.
    Map {
        depth: u32,
        micro_batches: bool,
        max_columns: u32,
    },
    /// The file's diagnosis with tolerances learned from a reference compare (`reference`: a
    /// hash of its path), or with `view`, the verdicts of that step and rank made so.
    Referenced {
        reference: u64,
        view: Option<(i64, i64)>,
    },
}

type Value = Arc<dyn Any + Send + Sync>;
type Slot = Arc<Mutex<Option<Value>>>;

struct Entry {
    file: Weak<GraphFile>,
    edits: u64,
    key: Key,
    slot: Slot,
    /// The result's weight once computed.
    bytes: Arc<AtomicUsize>,
    /// Whether a computation of it has been started ([`DiagnosisCache::claim`]).
    claimed: Arc<AtomicBool>,
}

impl Entry {
    fn is_current(&self) -> bool {
        self.file
            .upgrade()
            .is_some_and(|f| f.edit_count() == self.edits)
    }
}

/// The cache (one per sidecar, in [`crate::state::State`]).
#[derive(Default)]
pub struct DiagnosisCache {
    /// Least recently used first.
    entries: Mutex<Vec<Entry>>,
}

impl DiagnosisCache {
    /// The slot of `key` for this version of `file`, made (and moved to the back) as needed;
    /// entries of older versions are dropped on the way.
    fn slot(&self, file: &Arc<GraphFile>, key: Key) -> (Slot, Arc<AtomicUsize>) {
        let (slot, bytes, _) = self.entry(file, key);
        (slot, bytes)
    }

    /// [`Self::slot`] and whether a computation of it was claimed.
    fn entry(&self, file: &Arc<GraphFile>, key: Key) -> (Slot, Arc<AtomicUsize>, Arc<AtomicBool>) {
        let edits = file.edit_count();
        let mut entries = crate::sync::lock(&self.entries);
        entries.retain(Entry::is_current);
        let found = entries.iter().position(|e| {
            e.key == key && e.edits == edits && std::ptr::eq(e.file.as_ptr(), Arc::as_ptr(file))
        });
        let entry = match found {
            Some(i) => entries.remove(i),
            None => Entry {
                file: Arc::downgrade(file),
                edits,
                key,
                slot: Slot::default(),
                bytes: Arc::default(),
                claimed: Arc::default(),
            },
        };
        let found = (
            entry.slot.clone(),
            entry.bytes.clone(),
            entry.claimed.clone(),
        );
        entries.push(entry);
        let excess = entries.len().saturating_sub(MAX_ENTRIES);
        entries.drain(..excess);
        // Oldest out until the rest fits (the newest stays).
        let mut total: usize = entries
            .iter()
            .map(|e| e.bytes.load(Ordering::Relaxed))
            .sum();
        let mut drop = 0;
        while total > MAX_BYTES && drop + 1 < entries.len() {
            total -= entries[drop].bytes.load(Ordering::Relaxed);
            drop += 1;
        }
        entries.drain(..drop);
        found
    }

    /// The cached value of `key` for this version of `file`, or `compute`d and kept.
    pub fn get<T: Weight + Send + Sync + 'static, E>(
        &self,
        file: &Arc<GraphFile>,
        key: Key,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let (slot, bytes) = self.slot(file, key);
        let mut guard = crate::sync::lock(&slot);
        if let Some(value) = guard.as_ref().and_then(|v| v.clone().downcast::<T>().ok()) {
            return Ok(value);
        }
        let value = Arc::new(compute()?);
        bytes.store(value.weight(), Ordering::Relaxed);
        *guard = Some(value.clone());
        Ok(value)
    }

    /// Claims the computation of `key` for this version of `file`: `None` when its value is kept
    /// or another claim holds it (until that claim is dropped). The claimer computes it through
    /// [`Self::get`] or [`Self::holding`] as usual; the claim only keeps a second one from starting.
    pub fn claim(&self, file: &Arc<GraphFile>, key: Key) -> Option<Claim> {
        let (slot, _, claimed) = self.entry(file, key);
        // A slot being computed is locked: taken, whoever computes it.
        let kept = match slot.try_lock() {
            Ok(value) => value.is_some(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().is_some(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        };
        if kept || claimed.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Claim(claimed))
    }

    /// Runs `first` while holding `key`'s slot (for this version of `file`), then keeps
    /// `then(&result)` there unless the slot has a value already or `then` gives none: whoever
    /// asks for `key` meanwhile waits for it instead of computing it too. `first` may take other
    /// slots (the order is always this one, then those: no caller takes this one while holding
    /// one of them).
    pub fn holding<T: Weight + Send + Sync + 'static, R, E>(
        &self,
        file: &Arc<GraphFile>,
        key: Key,
        first: impl FnOnce() -> Result<R, E>,
        then: impl FnOnce(&R) -> Option<T>,
    ) -> Result<R, E> {
        let (slot, bytes) = self.slot(file, key);
        let mut guard = crate::sync::lock(&slot);
        let result = first()?;
        if guard.is_none() {
            if let Some(value) = then(&result) {
                let value = Arc::new(value);
                bytes.store(value.weight(), Ordering::Relaxed);
                *guard = Some(value);
            }
        }
        Ok(result)
    }

    /// How many results are kept now (for tests).
    pub fn len(&self) -> usize {
        let mut entries = crate::sync::lock(&self.entries);
        entries.retain(Entry::is_current);
        entries
            .iter()
            .filter(|e| crate::sync::lock(&e.slot).is_some())
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many computations are claimed now ([`Self::claim`]; for tests: a diagnosis started
    /// when a file is opened holds its claim from the moment it is started).
    pub fn claimed(&self) -> usize {
        let mut entries = crate::sync::lock(&self.entries);
        entries.retain(Entry::is_current);
        entries
            .iter()
            .filter(|e| e.claimed.load(Ordering::Acquire))
            .count()
    }
}

/// A computation claimed ([`DiagnosisCache::claim`]); another may be claimed once it is dropped.
pub struct Claim(Arc<AtomicBool>);

impl Drop for Claim {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::catalog::Catalog;

    /// A result of a chosen weight, numbered by its computation.
    struct Result(usize, usize);

    impl Weight for Result {
        fn weight(&self) -> usize {
            self.1
        }
    }

    /// A catalog serving a copy of the example build file, and that file.
    fn served() -> (tempfile::TempDir, Catalog, Arc<GraphFile>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/build_tf_stats");
        let source = std::fs::read_dir(&example)
            .expect("examples/build_tf_stats")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.to_string_lossy().ends_with(".vis.db"))
            .expect("an example .vis.db");
        std::fs::create_dir(dir.path().join("run")).expect("mkdir");
        std::fs::copy(&source, dir.path().join("run/a.vis.db")).expect("copy");
        let catalog = Catalog::new(dir.path().to_path_buf());
        let file = catalog.file("run", "a").expect("served");
        (dir, catalog, file)
    }

    fn get(
        cache: &DiagnosisCache,
        file: &Arc<GraphFile>,
        key: Key,
        n: usize,
        bytes: usize,
    ) -> usize {
        cache
            .get(file, key, || Ok::<_, ()>(Result(n, bytes)))
            .expect("computed")
            .0
    }

    #[test]
    fn results_are_kept_per_version_and_recomputed_after_an_edit() {
        let (_dir, _catalog, file) = served();
        let cache = DiagnosisCache::default();
        assert_eq!(get(&cache, &file, Key::File, 1, 10), 1);
        assert_eq!(get(&cache, &file, Key::File, 2, 10), 1, "cached");
        assert_eq!(get(&cache, &file, Key::Step(3), 3, 10), 3, "another key");
        // An edit through the sidecar makes another version: nothing of the old one is answered.
        file.with_writable_store(|_| Ok(())).expect("edit");
        assert_eq!(cache.len(), 0);
        assert_eq!(get(&cache, &file, Key::File, 4, 10), 4);
        // Failures are not kept.
        let failed = cache.get(&file, Key::Step(9), || Err::<Result, _>("busy"));
        assert!(failed.is_err());
        assert_eq!(get(&cache, &file, Key::Step(9), 5, 10), 5);
    }

    #[test]
    fn the_cache_is_bounded_in_entries_and_bytes() {
        let (_dir, _catalog, file) = served();
        let cache = DiagnosisCache::default();
        for step in 0..(MAX_ENTRIES as i64 + 10) {
            get(&cache, &file, Key::Step(step), 0, 1);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        // The oldest went first; the newest are here.
        assert_eq!(get(&cache, &file, Key::Step(0), 7, 1), 7);
        assert_eq!(get(&cache, &file, Key::Step(25), 8, 1), 0);
        // Two results of most of the budget cannot stay together; the newest does.
        get(
            &cache,
            &file,
            Key::States { step: 0, rank: 0 },
            1,
            MAX_BYTES / 2 + 1,
        );
        get(
            &cache,
            &file,
            Key::States { step: 0, rank: 1 },
            2,
            MAX_BYTES / 2 + 1,
        );
        get(&cache, &file, Key::File, 3, 1);
        assert_eq!(
            get(&cache, &file, Key::States { step: 0, rank: 1 }, 9, 1),
            2
        );
        assert_eq!(
            get(&cache, &file, Key::States { step: 0, rank: 0 }, 9, 1),
            9,
            "evicted"
        );
    }

    #[test]
    fn a_claim_starts_one_computation_and_a_held_slot_is_waited_for() {
        let (_dir, _catalog, file) = served();
        let cache = Arc::new(DiagnosisCache::default());
        let claim = cache.claim(&file, Key::File).expect("first claim");
        assert!(cache.claim(&file, Key::File).is_none(), "claimed already");
        drop(claim);
        let claim = cache
            .claim(&file, Key::File)
            .expect("free again once dropped");
        // The verdicts' slot held while the diagnosis is computed: a request for the verdicts made
        // meanwhile waits, and gets what the holder kept (it does not compute them again).
        let (held, hear) = std::sync::mpsc::channel();
        let holder = {
            let cache = cache.clone();
            let file = file.clone();
            std::thread::spawn(move || {
                cache
                    .holding(
                        &file,
                        Key::States { step: 0, rank: 0 },
                        || {
                            let _ = held.send(());
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            cache.get(&file, Key::File, || Ok::<_, ()>(Result(1, 10)))
                        },
                        |d| Some(Result(d.0 + 1, 10)),
                    )
                    .expect("held")
                    .0
            })
        };
        hear.recv().expect("holding");
        assert_eq!(
            get(&cache, &file, Key::States { step: 0, rank: 0 }, 9, 1),
            2
        );
        assert_eq!(holder.join().expect("joined"), 1);
        assert!(cache.claim(&file, Key::File).is_none(), "kept");
        drop(claim);
        assert!(
            cache.claim(&file, Key::File).is_none(),
            "kept, claimed or not"
        );
    }
}

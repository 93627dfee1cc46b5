//! Diagnoses kept per file version, so that the panel, the colour mode and a second tab do not
//! judge the same file again.
//!
//! A version is a [`GraphFile`] (the catalog makes a new one when the file or its `-wal` log
//! changes on disk) plus its edit count (matching edits rewrite the compare columns the rules
//! read). Entries of an older version are never answered: they are dropped the next time the
//! cache is touched, and the whole cache holds at most [`MAX_ENTRIES`] results, least recently
//! used first out. Only successes are kept (a failure may be a busy file; it is computed again).
//! Callers that ask for the same entry at once wait for one computation.

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

use crate::catalog::GraphFile;

/// How many results the cache keeps over all files (each is a few KB to a few MB: the sources
/// of a file, or the verdicts of one graph's differing nodes).
pub const MAX_ENTRIES: usize = 16;

/// What is cached about a file version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The file's diagnosis: the first step whose forward differs, every rank.
    File,
    /// The diagnosis of one step, every rank.
    Step(i64),
    /// The verdicts of one step and rank's nodes.
    States { step: i64, rank: i64 },
}

type Value = Arc<dyn Any + Send + Sync>;
type Slot = Arc<Mutex<Option<Value>>>;

struct Entry {
    file: Weak<GraphFile>,
    edits: u64,
    key: Key,
    slot: Slot,
}

impl Entry {
    fn is_current(&self) -> bool {
        self.file
            .upgrade()
            .is_some_and(|f| f.edit_count() == self.edits)
    }
}

/// The cache (one per sidecar, in [`crate::State`]).
#[derive(Default)]
pub struct DiagnosisCache {
    /// Least recently used first.
    entries: Mutex<Vec<Entry>>,
}

impl DiagnosisCache {
    /// The slot of `key` for this version of `file`, made (and moved to the back) as needed;
    /// entries of older versions are dropped on the way.
    fn slot(&self, file: &Arc<GraphFile>, key: Key) -> Slot {
        let edits = file.edit_count();
        let mut entries = crate::lock(&self.entries);
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
            },
        };
        let slot = entry.slot.clone();
        entries.push(entry);
        let excess = entries.len().saturating_sub(MAX_ENTRIES);
        entries.drain(..excess);
        slot
    }

    /// The cached value of `key` for this version of `file`, or `compute`d and kept.
    pub fn get<T: Send + Sync + 'static, E>(
        &self,
        file: &Arc<GraphFile>,
        key: Key,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let slot = self.slot(file, key);
        let mut guard = crate::lock(&slot);
        if let Some(value) = guard.as_ref().and_then(|v| v.clone().downcast::<T>().ok()) {
            return Ok(value);
        }
        let value = Arc::new(compute()?);
        *guard = Some(value.clone());
        Ok(value)
    }

    /// How many results are kept now (for tests).
    pub fn len(&self) -> usize {
        let mut entries = crate::lock(&self.entries);
        entries.retain(Entry::is_current);
        entries
            .iter()
            .filter(|e| crate::lock(&e.slot).is_some())
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

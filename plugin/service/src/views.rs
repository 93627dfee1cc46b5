//! View state per browser client: which nodes each client has expanded, in which file and graph.
//!
//! msprobe's plugin kept one global hierarchy for every browser tab, so two tabs (or two people)
//! saw each other's expansions. Here each client id (sent by the page; requests without one share
//! a default client) owns its hierarchies. A client's state that is not used for
//! [`IDLE_LIMIT`] is dropped, and the total is capped, by count and by memory (the least recently
//! used views go first), so that a flood of ids cannot exhaust memory (4,000
//! invented client ids held 3.8 GB before the memory bound).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::layout::Hierarchy;

/// Idle client state older than this is dropped.
pub const IDLE_LIMIT: Duration = Duration::from_secs(30 * 60);
/// At most this many hierarchies are kept; the least recently used go first.
const MAX_VIEWS: usize = 4096;
/// Default bound on the memory of all views together (`serve --max-view-memory-mb`).
pub const DEFAULT_MAX_VIEW_BYTES: usize = 512 << 20;
/// What a slot costs besides its hierarchy and key text: the map entry, the slot's `Arc` and
/// mutex.
const SLOT_OVERHEAD: usize = 256;

/// Identifies one hierarchy: a client, a file, and a pane ("NPU", "Bench" or "Single").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewKey {
    pub client: String,
    pub file: PathBuf,
    pub pane: String,
}

impl ViewKey {
    /// Heap bytes of the key, plus the slot's fixed cost.
    fn cost(&self) -> usize {
        SLOT_OVERHEAD + self.client.capacity() + self.file.capacity() + self.pane.capacity()
    }
}

struct Slot {
    hierarchy: Arc<Mutex<Option<Hierarchy>>>,
    last_used: Instant,
    /// The hierarchy's heap size when last measured ([`Views::record_size`]).
    bytes: usize,
}

/// All clients' hierarchies.
pub struct Views {
    slots: Mutex<HashMap<ViewKey, Slot>>,
    /// Bound on the memory of all views (keys, slots and hierarchies).
    max_bytes: usize,
}

impl Default for Views {
    fn default() -> Views {
        Views::with_max_bytes(DEFAULT_MAX_VIEW_BYTES)
    }
}

impl Views {
    /// Views that hold at most about `max_bytes` together.
    pub fn with_max_bytes(max_bytes: usize) -> Views {
        Views {
            slots: Mutex::new(HashMap::new()),
            max_bytes,
        }
    }

    /// Records the size of `key`'s hierarchy after a request changed it, then drops the least
    /// recently used other views until all of them fit the memory bound (the view just used
    /// stays, even alone above the bound: its client is waiting for it).
    pub fn record_size(&self, key: &ViewKey, hierarchy: Option<&Hierarchy>) {
        let bytes = hierarchy.map_or(0, Hierarchy::heap_size);
        let mut slots = crate::sync::lock(&self.slots);
        if let Some(slot) = slots.get_mut(key) {
            slot.bytes = bytes;
        }
        self.fit(&mut slots, key);
    }

    /// Drops the least recently used views other than `keep` until all fit the memory bound.
    fn fit(&self, slots: &mut HashMap<ViewKey, Slot>, keep: &ViewKey) {
        let mut total: usize = slots.iter().map(|(k, s)| k.cost() + s.bytes).sum();
        if total <= self.max_bytes {
            return;
        }
        let mut by_age: Vec<(Instant, ViewKey)> = slots
            .iter()
            .filter(|(k, _)| *k != keep)
            .map(|(k, s)| (s.last_used, k.clone()))
            .collect();
        by_age.sort_by_key(|(t, _)| *t);
        for (_, old) in by_age {
            if total <= self.max_bytes {
                break;
            }
            if let Some(slot) = slots.remove(&old) {
                total -= old.cost() + slot.bytes;
            }
        }
    }

    /// Bytes held by all views, as last measured.
    pub fn bytes(&self) -> usize {
        crate::sync::lock(&self.slots)
            .iter()
            .map(|(k, s)| k.cost() + s.bytes)
            .sum()
    }

    /// The hierarchy slot of `key` (empty if the client has none yet). Callers lock it for the
    /// duration of one request, so one client's concurrent requests on one pane are serialized
    /// while different clients never wait for each other.
    pub fn slot(&self, key: ViewKey) -> Arc<Mutex<Option<Hierarchy>>> {
        let mut slots = crate::sync::lock(&self.slots);
        let now = Instant::now();
        slots.retain(|_, slot| now.duration_since(slot.last_used) < IDLE_LIMIT);
        if slots.len() >= MAX_VIEWS && !slots.contains_key(&key) {
            if let Some(oldest) = slots
                .iter()
                .min_by_key(|(_, slot)| slot.last_used)
                .map(|(k, _)| k.clone())
            {
                slots.remove(&oldest);
            }
        }
        let slot = slots.entry(key.clone()).or_insert_with(|| Slot {
            hierarchy: Arc::new(Mutex::new(None)),
            last_used: now,
            bytes: 0,
        });
        slot.last_used = now;
        let hierarchy = slot.hierarchy.clone();
        self.fit(&mut slots, &key);
        hierarchy
    }

    /// Every client's hierarchy of one pane of `file` (to patch them after an edit of the file,
    /// as msprobe patched its one global hierarchy).
    pub fn slots_of(
        &self,
        file: &std::path::Path,
        pane: &str,
    ) -> Vec<Arc<Mutex<Option<Hierarchy>>>> {
        let slots = crate::sync::lock(&self.slots);
        slots
            .iter()
            .filter(|(k, _)| k.file == file && k.pane == pane)
            .map(|(_, slot)| slot.hierarchy.clone())
            .collect()
    }

    /// How many hierarchies are held (for tests and metrics).
    pub fn len(&self) -> usize {
        crate::sync::lock(&self.slots).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

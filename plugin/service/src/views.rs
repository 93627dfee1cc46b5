//! View state per browser client: which nodes each client has expanded, in which file and graph.
//!
//! msprobe's plugin kept one global hierarchy for every browser tab, so two tabs (or two people)
//! saw each other's expansions. Here each client id (sent by the page; requests without one share
//! a default client) owns its hierarchies. A client's state that is not used for
//! [`IDLE_LIMIT`] is dropped, and the total is capped so that a flood of ids cannot exhaust memory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::layout::Hierarchy;

/// Idle client state older than this is dropped.
pub const IDLE_LIMIT: Duration = Duration::from_secs(30 * 60);
/// At most this many hierarchies are kept; the least recently used go first.
const MAX_VIEWS: usize = 4096;

/// Identifies one hierarchy: a client, a file, and a pane ("NPU", "Bench" or "Single").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewKey {
    pub client: String,
    pub file: PathBuf,
    pub pane: String,
}

struct Slot {
    hierarchy: Arc<Mutex<Option<Hierarchy>>>,
    last_used: Instant,
}

/// All clients' hierarchies.
#[derive(Default)]
pub struct Views {
    slots: Mutex<HashMap<ViewKey, Slot>>,
}

impl Views {
    /// The hierarchy slot of `key` (empty if the client has none yet). Callers lock it for the
    /// duration of one request, so one client's concurrent requests on one pane are serialized
    /// while different clients never wait for each other.
    pub fn slot(&self, key: ViewKey) -> Arc<Mutex<Option<Hierarchy>>> {
        let mut slots = crate::lock(&self.slots);
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
        let slot = slots.entry(key).or_insert_with(|| Slot {
            hierarchy: Arc::new(Mutex::new(None)),
            last_used: now,
        });
        slot.last_used = now;
        slot.hierarchy.clone()
    }

    /// Every client's hierarchy of one pane of `file` (to patch them after an edit of the file,
    /// as msprobe patched its one global hierarchy).
    pub fn slots_of(
        &self,
        file: &std::path::Path,
        pane: &str,
    ) -> Vec<Arc<Mutex<Option<Hierarchy>>>> {
        let slots = crate::lock(&self.slots);
        slots
            .iter()
            .filter(|(k, _)| k.file == file && k.pane == pane)
            .map(|(_, slot)| slot.hierarchy.clone())
            .collect()
    }

    /// How many hierarchies are held (for tests and metrics).
    pub fn len(&self) -> usize {
        crate::lock(&self.slots).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

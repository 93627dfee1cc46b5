//! The process's open `dump.json` files, bounded whatever the number of graphs.
//!
//! A plain conversion reads each node's entry again from its graph's `dump.json`
//! ([`crate::entries::DumpSource`]). Holding every graph's file open from reading to writing made
//! the open files grow with the run: a compare of 1,024 ranks × 10 steps holds 20,480 graphs and
//! passed the usual limit of 1,024 open files ("Too many open files"). The files are kept instead
//! in one pool for the whole process, the least recently read closed first when it is full: a
//! graph's file is opened again when it is next read (and checked to be the same file).
//!
//! The pool holds at most a quarter of the soft limit of open files (`/proc/self/limits`; between [`MIN_OPEN`] and
//! [`MAX_OPEN`]), leaving the rest to the output, SQLite, the sidecar's sockets; a file closed
//! while a thread still reads it stays open until that read ends, so at worst one more a
//! reading thread.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use graph_ascend_dump::FastMap;

/// The fewest files the pool keeps open (when the limit is very low).
const MIN_OPEN: usize = 8;
/// The most files the pool keeps open (when the limit is high or none).
const MAX_OPEN: usize = 256;

/// A source's key in the pool: unique in the process.
pub(crate) fn new_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The open files, by their source's key, each with when it was last read.
#[derive(Debug)]
pub(crate) struct OpenFiles {
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    files: FastMap<u64, (Arc<File>, u64)>,
    clock: u64,
}

impl OpenFiles {
    pub(crate) fn with_capacity(capacity: usize) -> OpenFiles {
        OpenFiles {
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
        }
    }

    /// The process's pool, sized from the soft limit of open files.
    pub(crate) fn global() -> &'static OpenFiles {
        static POOL: OnceLock<OpenFiles> = OnceLock::new();
        POOL.get_or_init(|| OpenFiles::with_capacity(budget()))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves the map whole: go on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file of `key` if it is open, marked as just read.
    pub(crate) fn get(&self, key: u64) -> Option<Arc<File>> {
        let mut state = self.state();
        state.clock += 1;
        let now = state.clock;
        let (file, last) = state.files.get_mut(&key)?;
        *last = now;
        Some(Arc::clone(file))
    }

    /// Keeps `file` open for `key`, closing the least recently read file when the pool is full.
    pub(crate) fn insert(&self, key: u64, file: Arc<File>) {
        let mut state = self.state();
        state.clock += 1;
        let now = state.clock;
        if !state.files.contains_key(&key) && state.files.len() >= self.capacity {
            let oldest = state
                .files
                .iter()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(&k, _)| k);
            if let Some(oldest) = oldest {
                state.files.remove(&oldest);
            }
        }
        state.files.insert(key, (file, now));
    }

    /// Closes the file of `key` (its source is gone).
    pub(crate) fn remove(&self, key: u64) {
        self.state().files.remove(&key);
    }

    /// How many files the pool holds open.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.state().files.len()
    }
}

/// The files a task of this process may hold open at once: the pool's size, and the parts
/// the gather reads at once ([`crate::gather`]).
pub(crate) fn budget() -> usize {
    capacity_for(soft_limit())
}

/// The pool's size for a soft limit of `limit` open files (`None`: no limit).
fn capacity_for(limit: Option<u64>) -> usize {
    limit.map_or(MAX_OPEN, |l| {
        usize::try_from(l / 4)
            .unwrap_or(MAX_OPEN)
            .clamp(MIN_OPEN, MAX_OPEN)
    })
}

/// The process's soft limit of open files (`/proc/self/limits`), `None` when there is none;
/// where it cannot be read, the usual 1,024.
fn soft_limit() -> Option<u64> {
    const USUAL: u64 = 1024;
    let Ok(limits) = std::fs::read_to_string("/proc/self/limits") else {
        return Some(USUAL);
    };
    soft_limit_in(&limits).unwrap_or(Some(USUAL))
}

/// The soft limit of open files in the text of `/proc/self/limits` (`Some(None)`: unlimited),
/// `None` when the text has no such line.
fn soft_limit_in(limits: &str) -> Option<Option<u64>> {
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        Some(None)
    } else {
        soft.parse().ok().map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Arc<File> {
        Arc::new(File::open("/dev/null").expect("/dev/null opens"))
    }

    #[test]
    fn the_least_recently_read_file_is_closed_first() {
        let pool = OpenFiles::with_capacity(2);
        pool.insert(1, file());
        pool.insert(2, file());
        assert!(pool.get(1).is_some()); // 2 is now the least recently read
        pool.insert(3, file());
        assert_eq!(pool.len(), 2);
        assert!(pool.get(2).is_none());
        assert!(pool.get(1).is_some() && pool.get(3).is_some());
        pool.remove(1);
        assert!(pool.get(1).is_none());
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn a_file_inserted_again_takes_no_more_room() {
        let pool = OpenFiles::with_capacity(2);
        pool.insert(1, file());
        pool.insert(2, file());
        pool.insert(2, file());
        assert!(pool.get(1).is_some() && pool.get(2).is_some());
    }

    #[test]
    fn the_pool_takes_a_quarter_of_the_limit_within_its_bounds() {
        assert_eq!(capacity_for(Some(1024)), 256);
        assert_eq!(capacity_for(Some(400)), 100);
        assert_eq!(capacity_for(Some(20)), MIN_OPEN);
        assert_eq!(capacity_for(Some(1 << 20)), MAX_OPEN);
        assert_eq!(capacity_for(None), MAX_OPEN);
    }

    #[test]
    fn the_soft_limit_is_read_from_proc_self_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             63706                63706                processes \n\
                      Max open files            64                   1048576              files     \n";
        assert_eq!(soft_limit_in(limits), Some(Some(64)));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(soft_limit_in(unlimited), Some(None));
        assert_eq!(soft_limit_in("Max processes 10 10 processes\n"), None);
    }
}

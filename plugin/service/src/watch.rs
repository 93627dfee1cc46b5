//! Keeps the catalog live: file-system events (notify) where the platform has them, and a
//! periodic rescan always (network file systems deliver no events, and a file that was still
//! being written becomes ready without any new event).
//!
//! Events only bump a generation counter; whoever wants the listing (a `watchMetaDir` stream)
//! rescans after a short quiet period and sends it only when it changed, so a burst of writes
//! costs one scan.

use std::path::Path;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::watch;

/// How long to wait after an event for more before rescanning.
pub const QUIET: Duration = Duration::from_millis(300);
/// Rescan at least this often, events or not.
pub const POLL: Duration = Duration::from_secs(5);

/// Generation counter bumped by file-system events under the logdir.
pub struct LogdirWatch {
    generation: watch::Receiver<u64>,
    _sender: watch::Sender<u64>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl LogdirWatch {
    /// Starts watching `logdir` recursively. Without native events (or if they cannot be set
    /// up) the periodic rescan of the consumers still keeps the catalog live.
    pub fn start(logdir: &Path) -> LogdirWatch {
        let (tx, rx) = watch::channel(0u64);
        let events_tx = tx.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event {
                let relevant = event.paths.iter().any(|p| {
                    let name = p.to_string_lossy();
                    !name.ends_with("-wal")
                        && !name.ends_with("-shm")
                        && !name.ends_with("-journal")
                });
                if relevant {
                    events_tx.send_modify(|g| *g += 1);
                }
            }
        })
        .and_then(|mut w| w.watch(logdir, RecursiveMode::Recursive).map(|()| w));
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(
                    "no file-system events for {} ({e}); rescanning every {}s",
                    logdir.display(),
                    POLL.as_secs()
                );
                None
            }
        };
        LogdirWatch {
            generation: rx,
            _sender: tx,
            _watcher: watcher,
        }
    }

    /// A receiver that sees every bump.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.clone()
    }
}

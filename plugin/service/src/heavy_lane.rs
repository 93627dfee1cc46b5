//! The heavy lane: a few threads of their own for the requests whose work grows with the file
//! rather than with a click (the RPCs the proto marks `option (heavy) = true`: laying out a
//! hierarchy and answering its boxes, which a root of 100,000 children makes take seconds).
//!
//! Quick requests (a file's configuration, a node's details, the page's opening answers) run on
//! the runtime's worker threads; the blocking pool holds whatever waits (index builds, writes,
//! conversions). Heavy work on the workers made every other client wait for it (two expansions
//! of a 100,000-level chain held a configuration read of another file for 14–40 s on a 2-core
//! host); on the blocking pool it would have no bound at all, each request one more busy thread.
//! Here at most [`HeavyLane::default_threads`] heavy requests run at once (half the cores, at least one),
//! the others queue in arrival order, and the workers stay free for the quick ones: a quick
//! request waits for a core, never for a heavy request. The same few threads run every layout,
//! so consecutive clicks find their caches and allocator memory warm, as on the workers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// A job of the lane: the request's work, which sends its own answer.
type Job = Box<dyn FnOnce() + Send>;

/// The lane's threads and their queue. Dropping the lane ends the threads once the queue is
/// empty.
pub struct HeavyLane {
    queue: Mutex<mpsc::Sender<Job>>,
    threads: usize,
    /// Jobs queued and not started yet.
    waiting: Arc<AtomicUsize>,
}

/// A heavy job that ended without an answer (its thread could not be started, or it panicked
/// outside the handler's own guard).
#[derive(Debug, thiserror::Error)]
#[error("the heavy lane dropped the request")]
pub struct Dropped;

impl HeavyLane {
    /// The default size: half the cores, at least one (on a 2-core host, one core always stays
    /// for quick answers and TensorBoard).
    pub fn default_threads() -> usize {
        std::thread::available_parallelism()
            .map(|n| n.get() / 2)
            .unwrap_or(1)
            .max(1)
    }

    /// A lane of `threads` threads (at least one), started now.
    pub fn new(threads: usize) -> HeavyLane {
        let threads = threads.max(1);
        let (queue, jobs) = mpsc::channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        let mut started = 0;
        for i in 0..threads {
            let jobs = jobs.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("graph-ascend-heavy-{i}"))
                .spawn(move || loop {
                    // One thread waits in `recv` at a time; the lock is released before the job
                    // runs.
                    let job = crate::sync::lock(&jobs).recv();
                    let Ok(job) = job else { return };
                    // A job catches its handler's panics itself; this keeps the thread alive
                    // should anything else panic.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::warn!("cannot start a heavy-lane thread: {e}"),
            }
        }
        HeavyLane {
            queue: Mutex::new(queue),
            threads: started,
            waiting: Arc::default(),
        }
    }

    /// How many jobs are queued behind the running ones (what a test waits on to know that a
    /// request reached the lane).
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Runs `f` on the lane (after the heavy jobs queued before it) and awaits its result,
    /// holding no runtime worker meanwhile.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Dropped> {
        if self.threads == 0 {
            // No thread could be started: the blocking pool, rather than no answer.
            return tokio::task::spawn_blocking(f).await.map_err(|_| Dropped);
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        let waiting = self.waiting.clone();
        let job: Job = Box::new(move || {
            waiting.fetch_sub(1, Ordering::SeqCst);
            let _ = answer.send(f());
        });
        self.waiting.fetch_add(1, Ordering::SeqCst);
        if crate::sync::lock(&self.queue).send(job).is_err() {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Dropped);
        }
        answered.await.map_err(|_| Dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn jobs_beyond_the_threads_queue_and_all_answer() {
        let lane = Arc::new(HeavyLane::new(1));
        assert_eq!(lane.threads, 1);
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let first = {
            let lane = lane.clone();
            tokio::spawn(async move {
                lane.run(move || {
                    started.send(()).expect("the test waits");
                    held.recv().expect("released");
                    1
                })
                .await
            })
        };
        // The lane's only thread has taken the first job (on a loaded host it may take a while:
        // until then both jobs would count as waiting).
        while running.try_recv().is_err() {
            tokio::task::yield_now().await;
        }
        let second = {
            let lane = lane.clone();
            tokio::spawn(async move { lane.run(|| 2).await })
        };
        // The runtime's only worker is free while the lane's only thread is held.
        assert_eq!(tokio::spawn(async { 3 }).await.expect("worker free"), 3);
        assert!(!second.is_finished(), "queued behind the held job");
        while lane.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(lane.waiting(), 1, "the second job waits");
        release.send(()).expect("release");
        assert_eq!(first.await.expect("join").expect("answer"), 1);
        assert_eq!(second.await.expect("join").expect("answer"), 2);
    }

    #[tokio::test]
    async fn a_panicking_job_leaves_the_lane_working() {
        let lane = HeavyLane::new(1);
        let panicked = lane.run(|| -> u8 { panic!("boom") }).await;
        assert!(panicked.is_err());
        assert_eq!(lane.run(|| 7).await.expect("answer"), 7);
    }
}

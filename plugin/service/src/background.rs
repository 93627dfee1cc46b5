//! Background work runs below the answers the page waits for.
//!
//! Opening a compare file starts its diagnosis ahead of the Diagnosis panel's first request
//! (`handlers::diagnosis::start`). That work is nobody's answer yet, and it is long (a second or
//! two of CPU on a million-node file, its statistics judged on every core through rayon): run at
//! the same priority as the page's requests it took the cores they and TensorBoard's Python
//! needed, which on a 2-core host made the first node list and module expansion about half as
//! fast. So it runs here: on a thread and a rayon pool of their own, whose threads are at the
//! OS's idle priority (Linux's `SCHED_IDLE`; `nice` 19 where that is refused), which take only
//! the cycles nothing else of the process group wants. A request, TensorBoard's handling of an
//! answer, an index build or a root layout preempts them at once and runs as if they were not
//! there; when the page is idle they run at full speed. They never use the global rayon pool,
//! which the diagnoses the page asks for use at normal priority, so a request's own
//! parallel work never queues behind them either.
//!
//! Not here: the indexes and root layouts of a file being opened. The page's first node list
//! and root views wait for those, so they keep the normal priority (lowered, they would have to
//! wait for themselves) and step aside only while the opening answers travel
//! ([`crate::step_aside`]).
//!
//! What is given up: a request that waits for a diagnosis already under way here (the panel
//! opened while it runs) waits for idle-priority threads; they then have every cycle that the
//! page does not use, which on a quiet host is all of them (the priority is per thread and
//! cannot be raised again by an unprivileged process). Processes of other sessions compete with
//! this process as a group (the kernel's autogroups, or cgroups), not with these threads alone.

use std::sync::{Condvar, Mutex, OnceLock};

/// What a thread was lowered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lowered {
    /// `SCHED_IDLE`: runs only when nothing else on its core wants to.
    Idle,
    /// `nice` 19 (where `SCHED_IDLE` was refused).
    Nice,
    /// Not lowered (not Linux, or both were refused).
    No,
}

/// The niceness of the fallback.
const LOWEST_NICE: libc::c_int = 19;

/// Lowers the calling thread (and only it) to the idle priority, or to `nice` 19 where that is
/// refused. Threads it starts afterwards inherit it.
pub fn lower_this_thread() -> Lowered {
    if os::set_idle_policy() {
        Lowered::Idle
    } else if os::set_nice(LOWEST_NICE) {
        Lowered::Nice
    } else {
        Lowered::No
    }
}

/// Whether the calling thread runs at a lowered priority (see [`lower_this_thread`]).
pub fn this_thread_is_lowered() -> bool {
    os::has_idle_policy() || os::nice() >= LOWEST_NICE
}

/// The calls into the OS, about the calling thread only.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod os {
    /// Sets the calling thread's policy to `SCHED_IDLE`; whether that was done.
    pub fn set_idle_policy() -> bool {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 names the calling thread (Linux schedules threads, not processes), and
        // `param` is a valid `sched_param` for SCHED_IDLE (priority 0) that outlives the call.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
    }

    /// Sets the calling thread's niceness; whether that was done. With PRIO_PROCESS and a
    /// thread id, setpriority sets that thread's niceness only (Linux's per-thread nice values).
    pub fn set_nice(nice: libc::c_int) -> bool {
        // SAFETY: setpriority takes any values.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, thread_id(), nice) == 0 }
    }

    /// The calling thread's id, through the system call: glibc has no `gettid` wrapper before
    /// 2.30, and the wheel links against 2.17 (docs/packaging.md).
    fn thread_id() -> libc::id_t {
        // SAFETY: SYS_gettid has no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as libc::id_t }
    }

    pub fn has_idle_policy() -> bool {
        // SAFETY: a plain query about the calling thread (pid 0).
        unsafe { libc::sched_getscheduler(0) == libc::SCHED_IDLE }
    }

    pub fn nice() -> libc::c_int {
        // SAFETY: a plain query about the calling thread (its own thread id).
        unsafe { libc::getpriority(libc::PRIO_PROCESS, thread_id()) }
    }
}

/// Elsewhere `setpriority(PRIO_PROCESS, 0)` would lower the whole sidecar: nothing is changed.
#[cfg(not(target_os = "linux"))]
mod os {
    pub fn set_idle_policy() -> bool {
        false
    }

    pub fn set_nice(_: libc::c_int) -> bool {
        false
    }

    pub fn has_idle_policy() -> bool {
        false
    }

    pub fn nice() -> libc::c_int {
        0
    }
}

/// The background lane: a rayon pool of lowered threads (started on first use) and a hold that
/// keeps new work from starting.
#[derive(Default)]
pub struct Background {
    pool: OnceLock<Option<rayon::ThreadPool>>,
    /// How many holds are taken ([`Background::hold`]).
    holds: Mutex<usize>,
    released: Condvar,
}

/// Background work kept from starting while this lives ([`Background::hold`]).
pub struct Hold<'a>(&'a Background);

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut holds = crate::sync::lock(&self.0.holds);
        *holds = holds.saturating_sub(1);
        if *holds == 0 {
            self.0.released.notify_all();
        }
    }
}

impl Background {
    /// The lane's pool: as many lowered threads as cores (they take idle cycles only), or `None`
    /// when no thread could be started (the work then runs on its own lowered thread).
    fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool
            .get_or_init(|| {
                let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("graph-ascend-background-{i}"))
                    .start_handler(|_| {
                        lower_this_thread();
                    })
                    .build()
                    .map_err(|e| tracing::warn!("cannot start the background pool: {e}"))
                    .ok()
            })
            .as_ref()
    }

    /// Starts `work` on a lowered thread named `name`, its parallel iterators on the lane's
    /// pool, once no [`Background::hold`] is taken. Errs when no thread could be started.
    pub fn spawn<F>(self: &std::sync::Arc<Self>, name: &str, work: F) -> std::io::Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        // Both pools are started from this thread (a request's, at normal priority), never from
        // a lowered one: threads inherit their starter's priority, and the global pool, which
        // the page's own diagnoses use, must not be born lowered.
        let _ = rayon::current_num_threads();
        let _ = self.pool();
        let lane = self.clone();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                lower_this_thread();
                lane.wait_unheld();
                match lane.pool() {
                    Some(pool) => pool.install(work),
                    None => work(),
                }
            })
            .map(drop)
    }

    fn wait_unheld(&self) {
        let mut holds = crate::sync::lock(&self.holds);
        while *holds > 0 {
            holds = self
                .released
                .wait(holds)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Keeps background work from starting until the hold is dropped (work under way goes on).
    /// What a test takes to show that the page's answers never wait for background work.
    pub fn hold(&self) -> Hold<'_> {
        *crate::sync::lock(&self.holds) += 1;
        Hold(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{mpsc, Arc};

    use rayon::prelude::*;

    use super::*;

    #[test]
    fn background_work_and_its_parallel_parts_run_lowered_and_the_caller_does_not() {
        let lane = Arc::new(Background::default());
        let (sent, heard) = mpsc::channel();
        lane.spawn("graph-ascend-test-background", move || {
            // The work itself, each part of a parallel iterator, and every thread of the pool.
            let parts: Vec<bool> = (0..256)
                .into_par_iter()
                .map(|_| this_thread_is_lowered())
                .collect();
            let threads = rayon::broadcast(|_| this_thread_is_lowered());
            let _ = sent.send((this_thread_is_lowered(), parts, threads));
        })
        .expect("spawned");
        let (work, parts, threads) = heard.recv().expect("the work ran");
        if cfg!(target_os = "linux") {
            assert!(work, "the work runs lowered");
            assert!(parts.iter().all(|&p| p), "every part runs lowered");
            assert!(
                !threads.is_empty() && threads.iter().all(|&t| t),
                "{threads:?}"
            );
        }
        // The priority stays with the lane's threads: this one (a request's, say) and the global
        // pool, which the page's own diagnoses use, keep theirs.
        assert!(!this_thread_is_lowered());
        assert!(rayon::broadcast(|_| this_thread_is_lowered())
            .iter()
            .all(|&t| !t));
    }

    #[test]
    fn held_work_waits_and_runs_once_released() {
        let lane = Arc::new(Background::default());
        let hold = lane.hold();
        let second = lane.hold();
        let (sent, heard) = mpsc::channel();
        lane.spawn("graph-ascend-test-background", move || {
            let _ = sent.send(());
        })
        .expect("spawned");
        drop(second);
        // Still held by the first: the work has not started (it would have sent by now or never;
        // what is checked is the order: nothing before the release, then the work).
        assert!(heard.try_recv().is_err(), "held work started");
        drop(hold);
        heard.recv().expect("the work ran once released");
    }
}

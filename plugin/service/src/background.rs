//! Work done ahead of requests, on threads of its own at a lower CPU priority.
//!
//! Opening a file starts its indexes and root layouts in the background (`loadGraphData`,
//! [`crate::catalog::GraphFile::prefetch`], [`crate::root_layouts::RootLayouts::prefetch`]), so
//! that the node list and the first layouts find them ready. On a small machine those threads
//! took every core just when the page's next answers (the open itself, the configuration) were
//! on their way back through the shim and TensorBoard: measured on 2 cores, the open and the
//! first configuration took 11–17 ms with the work ahead running beside them and 3–4 ms without
//! it. So work ahead runs at nice [`NICE`]: it still gets every idle cycle (the page's next
//! request, the node list, waits for it and leaves the cores idle), but an answer in flight, in
//! the sidecar or in TensorBoard's process, goes first.
//!
//! The price: a machine kept busy by other programs gives the work ahead less time, so a request
//! that waits for it (the first node list) waits longer than at normal priority. A thread cannot
//! raise its priority again without privileges, so a waiting request cannot lend it its own.

/// How much lower than the sidecar's own priority the work ahead runs (Linux nice values: 0 is
/// normal, 19 the lowest). 5 weighs about a third of a normal thread: against a busy thread of
/// normal priority, the work ahead keeps about a quarter of a core and an answer in flight gets
/// the rest, so the work ahead is not starved on a machine busy with other programs.
pub const NICE: i32 = 5;

/// Runs `work` on a new thread named `name` at the lower priority.
pub fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            lower_priority();
            work();
        })
        .map(drop)
}

/// Lowers the calling thread's priority by [`NICE`] (Linux gives each thread its own nice
/// value); elsewhere nothing is done. A failure only leaves the thread at normal priority.
#[cfg(target_os = "linux")]
fn lower_priority() {
    // SAFETY: `gettid` and `setpriority` take no pointers and only affect this thread.
    let changed = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICE)
    };
    if changed != 0 {
        tracing::debug!(
            "cannot lower the priority of {:?}: {}",
            std::thread::current().name(),
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The work runs, at the lower priority, and the caller's priority is left as it was.
    #[test]
    fn work_ahead_runs_niced_and_leaves_the_caller_alone() {
        let nice_of_thread = || {
            // SAFETY: as in `lower_priority`.
            unsafe {
                *libc::__errno_location() = 0;
                libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t)
            }
        };
        let before = nice_of_thread();
        let (tx, rx) = std::sync::mpsc::channel();
        super::spawn("test-work-ahead", move || {
            let _ = tx.send(nice_of_thread());
        })
        .expect("spawned");
        let inside = rx.recv().expect("the work ran");
        assert_eq!(inside, (before + super::NICE).min(19));
        assert_eq!(nice_of_thread(), before);
    }
}

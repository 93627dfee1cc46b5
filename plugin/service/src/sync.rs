//! The sidecar's one policy for poisoned locks.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex of the sidecar, recovering it if a thread panicked while holding it.
///
/// The one policy for poisoned locks: every mutex here guards a cache or a client's view state,
/// each left whole between statements, so the data is still usable; refusing it would turn one
/// failed request into a file or view that stays broken until a restart.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

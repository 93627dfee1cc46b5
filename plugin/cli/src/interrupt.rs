//! Temporary files and folders a command removes when it is interrupted.
//!
//! A batch command that writes its output to a temporary name (renamed into place once whole)
//! registers that name here; Ctrl-C (SIGINT), SIGTERM and SIGHUP then remove every registered
//! path before the process exits with `128 + signal`, as a shell reports a killed command. A
//! SIGKILL cannot be caught: the names carry the writer's host and process id
//! (`graph_ascend_visdb::stale`), and the next run removes those of dead processes.
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

/// The paths to remove on a signal, in the order registered.
static REGISTERED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes `path` (a file, or a folder with what it holds) if this process is interrupted, until
/// [`forget`] is called with it. The first call starts the thread that waits for the signals.
pub fn remove_on_signal(path: &Path) {
    static LISTENER: Once = Once::new();
    LISTENER.call_once(start_listener);
    lock().push(path.to_path_buf());
}

/// No longer removes `path` on a signal (it was renamed into place, or removed already).
pub fn forget(path: &Path) {
    lock().retain(|p| p != path);
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts a thread with a small runtime of its own that waits for SIGINT, SIGTERM or SIGHUP,
/// removes the registered paths and exits; returns once the handlers are in place (a signal
/// before that would end the process with nothing removed). Without the thread the command runs
/// as before, and its leftovers are the next run's to remove.
fn start_listener() {
    let (ready, wait) = std::sync::mpsc::channel::<()>();
    let started = std::thread::Builder::new()
        .name("graph-ascend-signals".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let handlers = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                    signal(SignalKind::hangup()),
                );
                let _ = ready.send(());
                let (Ok(mut int), Ok(mut term), Ok(mut hup)) = handlers else {
                    return;
                };
                let number = tokio::select! {
                    _ = int.recv() => 2,
                    _ = term.recv() => 15,
                    _ = hup.recv() => 1,
                };
                remove_registered();
                std::process::exit(128 + number);
            });
        });
    match started {
        // Waits for the handlers (or the thread's end, when it could not make them).
        Ok(_) => {
            let _ = wait.recv();
        }
        Err(e) => tracing::debug!("cannot start the signal thread: {e}"),
    }
}

/// Removes every registered path (best effort: one that is gone already is skipped).
fn remove_registered() {
    let paths = std::mem::take(&mut *lock());
    for path in paths.iter().rev() {
        let removed = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
            Ok(_) => std::fs::remove_file(path),
            Err(_) => continue,
        };
        if let Err(e) = removed {
            eprintln!("graph-ascend: cannot remove {}: {e}", path.display());
        }
    }
}

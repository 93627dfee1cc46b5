//! One file's gate between the sidecar's reads and its edits: no read of a file runs while an
//! edit of it writes.
//!
//! Readers open a file `immutable` (`Store::open`: no lock, no journal, a page cache that is
//! never checked against the file), so SQLite itself does not keep them off the pages an edit
//! is writing: a cache spill or the commit of an edit (or, for a file in WAL mode, the
//! checkpoint when the edit's connection closes) rewrites pages of the main file while a read
//! may be half-way through them, and that read sees a torn file ("database disk image is
//! malformed", or a wrong answer without an error). So every read of a file in the sidecar
//! holds a [`ReadPass`] of the file's gate for as long as it reads (one answer, one index build,
//! one diagnosis), and an edit waits until no pass is held, keeps new ones back while it runs
//! (from its first write to its connection's close), and then drops the pooled readers before
//! letting them in again: each answer sees the file before the edit or after it, never between.
//!
//! The gate belongs to the file's path (the catalog keeps one per path), not to the catalog's
//! handle of one version of it, which a rescan may replace while an edit runs. A waiting edit
//! keeps new passes back (so that readers cannot starve it), except on a thread that holds a
//! pass of the same gate already (a read within a read goes on, or it would wait for an edit
//! that waits for it). An edit waits at most [`EDIT_WAIT`] for the reads in flight, then fails
//! as busy, as SQLite's busy timeout does; an edit on a thread that holds a pass of the file
//! fails at once (it would wait for itself).

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long an edit waits for the reads of its file in flight (SQLite's busy timeout for the
/// writes of another connection, `Store::open`, is the same).
pub const EDIT_WAIT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Counts {
    /// Passes held.
    readers: usize,
    /// An edit is under way.
    editing: bool,
    /// Edits waiting for the passes in flight.
    waiting: usize,
}

/// The gate of one file (see the module's documentation).
#[derive(Default)]
pub struct EditGate {
    counts: Mutex<Counts>,
    changed: Condvar,
    /// Bumped by every edit: readers opened before it are not reused (their page cache holds
    /// pages of the file before the edit).
    generation: std::sync::atomic::AtomicU64,
}

thread_local! {
    /// The gates this thread holds passes of, by address, with how many.
    static HELD: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
}

fn held_here(gate: &EditGate) -> usize {
    let key = gate as *const EditGate as usize;
    HELD.with(|held| {
        held.borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, n)| *n)
    })
}

fn note_held(gate: &EditGate, delta: isize) {
    let key = gate as *const EditGate as usize;
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        match held.iter_mut().position(|(k, _)| *k == key) {
            Some(i) => {
                let n = held[i].1.saturating_add_signed(delta);
                if n == 0 {
                    held.swap_remove(i);
                } else {
                    held[i].1 = n;
                }
            }
            None if delta > 0 => held.push((key, delta.unsigned_abs())),
            None => {}
        }
    });
}

/// A read of one file under way: no edit of the file writes while it is held. Held by one
/// thread (it is not `Send`), released when dropped.
pub struct ReadPass {
    gate: Arc<EditGate>,
    _one_thread: PhantomData<*const ()>,
}

impl Drop for ReadPass {
    fn drop(&mut self) {
        note_held(&self.gate, -1);
        let mut counts = crate::sync::lock(&self.gate.counts);
        counts.readers -= 1;
        if counts.readers == 0 {
            self.gate.changed.notify_all();
        }
    }
}

/// Why an edit did not run.
#[derive(Debug, PartialEq, Eq)]
pub enum EditRefused {
    /// Reads of the file were still in flight after [`EDIT_WAIT`].
    Busy,
    /// This thread holds a read pass of the file: the edit would wait for itself.
    ReadingHere,
}

impl EditGate {
    /// A pass for one read: waits while an edit runs, and while one waits unless this thread
    /// holds a pass of this gate already.
    pub fn read(self: &Arc<Self>) -> ReadPass {
        let nested = held_here(self) > 0;
        let mut counts = crate::sync::lock(&self.counts);
        while counts.editing || (counts.waiting > 0 && !nested) {
            counts = self
                .changed
                .wait(counts)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        counts.readers += 1;
        drop(counts);
        note_held(self, 1);
        ReadPass {
            gate: self.clone(),
            _one_thread: PhantomData,
        }
    }

    /// Runs `edit` once no read is in flight, with new reads kept back until it returns; the
    /// generation is bumped before they are let in again.
    pub fn edit<T>(&self, edit: impl FnOnce() -> T) -> Result<T, EditRefused> {
        if held_here(self) > 0 {
            return Err(EditRefused::ReadingHere);
        }
        let deadline = Instant::now() + EDIT_WAIT;
        let mut counts = crate::sync::lock(&self.counts);
        counts.waiting += 1;
        while counts.editing || counts.readers > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                counts.waiting -= 1;
                self.changed.notify_all();
                return Err(EditRefused::Busy);
            }
            counts = self
                .changed
                .wait_timeout(counts, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        counts.waiting -= 1;
        counts.editing = true;
        drop(counts);
        /// Lets the readers in again however the edit ends (a panic included).
        struct Done<'a>(&'a EditGate);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0
                    .generation
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                crate::sync::lock(&self.0.counts).editing = false;
                self.0.changed.notify_all();
            }
        }
        let _done = Done(self);
        Ok(edit())
    }

    /// How many edits ran through this gate (a reader opened at one generation is not reused
    /// at another).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn an_edit_waits_for_reads_and_keeps_new_ones_back() {
        let gate = Arc::new(EditGate::default());
        let pass = gate.read();
        let editing = Arc::new(AtomicBool::new(false));
        let (g, e) = (gate.clone(), editing.clone());
        let editor = std::thread::spawn(move || {
            g.edit(|| {
                e.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
                e.store(false, Ordering::SeqCst);
            })
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !editing.load(Ordering::SeqCst),
            "the edit waited for the read"
        );
        // A read within a read goes on while the edit waits.
        drop(gate.read());
        drop(pass);
        // A new read (on a thread holding none) waits for the edit to end.
        let (g, e) = (gate.clone(), editing.clone());
        let reader = std::thread::spawn(move || {
            while !e.load(Ordering::SeqCst) && g.generation() == 0 {
                std::thread::yield_now();
            }
            let _pass = g.read();
            e.load(Ordering::SeqCst)
        });
        assert_eq!(editor.join().unwrap(), Ok(()));
        assert!(!reader.join().unwrap(), "no read while the edit ran");
        assert_eq!(gate.generation(), 1);
    }

    #[test]
    fn an_edit_under_a_read_of_the_same_thread_is_refused() {
        let gate = Arc::new(EditGate::default());
        let _pass = gate.read();
        assert_eq!(gate.edit(|| ()), Err(EditRefused::ReadingHere));
    }
}

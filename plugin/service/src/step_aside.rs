//! The background work of opening a file steps aside while the opening answers travel back.
//!
//! `loadGraphData` starts building the file's indexes (one thread per side of a compare) and then
//! laying out its roots, so that the page's first node list and root layouts find them ready. The
//! sidecar answers `loadGraphData` and `loadGraphConfigInfo` in a fraction of a millisecond, but
//! each answer still travels back through the shim and TensorBoard, whose Python needs a core for
//! it: on a 2-core host the two build threads took both cores meanwhile, and those two answers were
//! about twice as slow as msprobe's. Holding the work back until they had gone cost the first node
//! list its head start instead (it waits for the indexes), which made it twice as slow. So the work
//! starts at once and pauses instead: each opening answer asks it to step aside for [`PAUSE`] (its
//! way back) or until the next request about a file comes (which shows that the answer has
//! arrived), and the builds look before they open the file and every [`ROWS_BETWEEN_LOOKS`]
//! rows whether to wait. The gaps between the page's requests, and everything after its
//! opening, stay theirs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long background work pauses after an opening answer: about that answer's way back
/// through the shim and TensorBoard on a busy host (4 ms was measured too short on a 2-core
/// host at load 3).
pub(crate) const PAUSE: Duration = Duration::from_millis(8);

/// How many rows an index build reads between two looks at [`StepAside::wait`] (a few tens of
/// microseconds of work).
pub(crate) const ROWS_BETWEEN_LOOKS: usize = 64;

/// How often a paused build looks whether the pause has ended early ([`StepAside::resume`]).
const LOOK_AGAIN: Duration = Duration::from_millis(1);

/// Until when background work pauses.
pub struct StepAside {
    start: Instant,
    /// Microseconds after `start` until which background work pauses.
    until_us: AtomicU64,
}

impl Default for StepAside {
    fn default() -> StepAside {
        StepAside {
            start: Instant::now(),
            until_us: AtomicU64::new(0),
        }
    }
}

impl StepAside {
    fn now_us(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Asks background work to pause for [`PAUSE`] from now (an answer is on its way).
    pub fn pause(&self) {
        let until = self.now_us().saturating_add(PAUSE.as_micros() as u64);
        self.until_us.fetch_max(until, Ordering::Relaxed);
    }

    /// Ends a pause early: the next request has come, so the answer before it has arrived.
    pub fn resume(&self) {
        self.until_us.store(0, Ordering::Relaxed);
    }

    /// Called by background work between steps: sleeps while it is asked to pause, looking
    /// again every millisecond (at most [`PAUSE`] per call, so a stream of opening requests
    /// slows the work down, never stops it).
    pub fn wait(&self) {
        let started = Instant::now();
        while let Some(nap) = next_nap(
            self.until_us.load(Ordering::Relaxed),
            self.now_us(),
            started.elapsed(),
        ) {
            std::thread::sleep(nap);
        }
    }

    /// Whether background work is asked to pause now (for tests).
    pub fn is_pausing(&self) -> bool {
        self.until_us.load(Ordering::Relaxed) > self.now_us()
    }
}

/// How long a waiting build sleeps next, when it is asked to pause until `until_us` and it is
/// `now_us` (both in microseconds on the gate's clock), having waited `waited` in this call:
/// `None` once the pause is over or the call has waited its [`PAUSE`].
fn next_nap(until_us: u64, now_us: u64, waited: Duration) -> Option<Duration> {
    let left = PAUSE.saturating_sub(waited);
    if until_us <= now_us || left.is_zero() {
        return None;
    }
    Some(
        Duration::from_micros(until_us - now_us)
            .min(left)
            .min(LOOK_AGAIN),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nap_lasts_until_the_pause_ends_and_at_most_a_pause_per_call() {
        let pause_us = PAUSE.as_micros() as u64;
        let look_us = LOOK_AGAIN.as_micros() as u64;
        // No pause asked for, or one already over: no nap.
        assert_eq!(next_nap(0, 5, Duration::ZERO), None);
        assert_eq!(next_nap(100, 100, Duration::ZERO), None);
        // Asked to pause: naps of at most LOOK_AGAIN, shorter at the pause's end.
        assert_eq!(
            next_nap(pause_us, 0, Duration::ZERO),
            Some(LOOK_AGAIN.min(PAUSE))
        );
        assert_eq!(
            next_nap(1_000 + look_us / 2, 1_000, Duration::ZERO),
            Some(Duration::from_micros(look_us / 2))
        );
        // A call that has waited a whole pause goes on, however long the pause asked for.
        assert_eq!(next_nap(u64::MAX, 0, PAUSE), None);
        assert_eq!(
            next_nap(u64::MAX, 0, PAUSE - Duration::from_micros(300)),
            Some(Duration::from_micros(300).min(LOOK_AGAIN))
        );
    }

    #[test]
    fn pause_and_resume_set_and_clear_the_gate() {
        let gate = StepAside::default();
        assert!(!gate.is_pausing());
        gate.pause();
        // PAUSE from now: still pausing unless this thread slept that long in between.
        let until = gate.until_us.load(Ordering::Relaxed);
        assert!(until >= PAUSE.as_micros() as u64, "{until}");
        // A later pause never shortens an earlier one.
        gate.until_us.store(u64::MAX, Ordering::Relaxed);
        gate.pause();
        assert_eq!(gate.until_us.load(Ordering::Relaxed), u64::MAX);
        assert!(gate.is_pausing());
        // The next request ends a pause early, and a wait then returns without a nap.
        gate.resume();
        assert!(!gate.is_pausing());
        assert_eq!(
            next_nap(
                gate.until_us.load(Ordering::Relaxed),
                gate.now_us(),
                Duration::ZERO
            ),
            None
        );
        gate.wait();
    }
}

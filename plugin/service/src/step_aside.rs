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
        loop {
            let until = self.until_us.load(Ordering::Relaxed);
            let now = self.now_us();
            let left = PAUSE.saturating_sub(started.elapsed());
            if until <= now || left.is_zero() {
                return;
            }
            let nap = Duration::from_micros(until - now).min(left).min(LOOK_AGAIN);
            std::thread::sleep(nap);
        }
    }

    /// Whether background work is asked to pause now (for tests).
    pub fn is_pausing(&self) -> bool {
        self.until_us.load(Ordering::Relaxed) > self.now_us()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_ends_and_each_wait_is_bounded() {
        let gate = StepAside::default();
        let started = Instant::now();
        gate.wait();
        assert!(started.elapsed() < PAUSE, "waited without a pause");
        gate.pause();
        assert!(gate.is_pausing());
        let started = Instant::now();
        gate.wait();
        let waited = started.elapsed();
        assert!(waited + Duration::from_millis(1) >= PAUSE / 2, "{waited:?}");
        assert!(!gate.is_pausing());
        // The next request ends a pause early.
        gate.pause();
        gate.resume();
        assert!(!gate.is_pausing());
        let started = Instant::now();
        gate.wait();
        assert!(started.elapsed() < PAUSE, "waited after the pause ended");
        // Pauses asked for again and again: one wait still ends.
        let gate = std::sync::Arc::new(gate);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pauser = std::thread::spawn({
            let (gate, stop) = (gate.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    gate.pause();
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        while !gate.is_pausing() {
            std::thread::yield_now();
        }
        let started = Instant::now();
        gate.wait();
        let waited = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        pauser.join().expect("the pauser");
        assert!(waited < PAUSE * 20, "{waited:?}");
    }
}

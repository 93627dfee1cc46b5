//! What every step of a conversion shares ([`Run`]): where progress goes, how far the
//! conversion is, and whether to stop; and the bytes a conversion reads.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::error::ConvertError;
use crate::progress::{eta, Progress, ProgressFn, Stage, Weights, PROGRESS_TOTAL};

/// The files of a rank folder a conversion reads (their sizes are the bytes it reports).
pub(crate) const RANK_FILES: [&str; 3] = ["dump.json", "construct.json", "stack.json"];

/// The bytes a conversion of these rank folders reads (files that cannot be read count 0:
/// reading them reports the error).
pub(crate) fn bytes_to_read<'p>(dirs: impl IntoIterator<Item = &'p Path>) -> u64 {
    dirs.into_iter()
        .flat_map(|d| RANK_FILES.iter().map(move |f| d.join(f)))
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// One conversion in progress: where progress goes, how far it is, and whether to stop.
pub(crate) struct Run<'a> {
    progress: ProgressFn<'a>,
    cancel: &'a AtomicBool,
    started: Instant,
    weights: Weights,
    bytes_total: u64,
    bytes_read: AtomicU64,
    /// Units of the middle step (a job's graphs matched and compared, a step merged).
    units_total: u64,
    units_done: AtomicU64,
    rows_total: AtomicU64,
    rows_written: AtomicU64,
}

impl<'a> Run<'a> {
    /// A run that reads `bytes_total` bytes and pairs `units` units (a compare when
    /// `compare`); `message` is the first report (0 done).
    pub fn start(
        progress: ProgressFn<'a>,
        cancel: &'a AtomicBool,
        compare: bool,
        bytes_total: u64,
        units: u64,
        message: String,
    ) -> Run<'a> {
        let run = Run {
            progress,
            cancel,
            started: Instant::now(),
            weights: Weights::of(compare),
            bytes_total,
            bytes_read: AtomicU64::new(0),
            units_total: units,
            units_done: AtomicU64::new(0),
            rows_total: AtomicU64::new(0),
            rows_written: AtomicU64::new(0),
        };
        run.note(Stage::Reading, message);
        run
    }

    /// The cancel flag, for loops that look at it themselves.
    pub fn cancel_flag(&self) -> &AtomicBool {
        self.cancel
    }

    /// [`ConvertError::Cancelled`] once the caller asked to stop.
    pub fn check(&self) -> Result<(), ConvertError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(ConvertError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Reports `n` more input bytes read; `false` once the caller asked to stop (readers stop
    /// then, mid-file).
    pub fn read_bytes(&self, n: u64) -> bool {
        if n > 0 {
            self.bytes_read.fetch_add(n, Ordering::Relaxed);
            self.note(Stage::Reading, String::new());
        }
        !self.cancel.load(Ordering::Relaxed)
    }

    /// Reports one more unit of the middle step done.
    pub fn tick(&self, stage: Stage, message: String) {
        self.units_done.fetch_add(1, Ordering::Relaxed);
        self.note(stage, message);
    }

    /// The number of rows the output will have (known once the graphs are ready).
    pub fn rows_to_write(&self, n: u64) {
        self.rows_total.store(n, Ordering::Relaxed);
        self.note(Stage::Writing, format!("{n} rows to write"));
    }

    /// Reports `n` more rows written.
    pub fn rows_written(&self, n: u64) {
        self.rows_written.fetch_add(n, Ordering::Relaxed);
        self.note(Stage::Writing, String::new());
    }

    /// Reports a message without counting anything.
    pub fn note(&self, stage: Stage, message: String) {
        let share = |done: u64, total: u64| {
            if total == 0 {
                0.0
            } else {
                (done as f64 / total as f64).min(1.0)
            }
        };
        let bytes_read = self.bytes_read.load(Ordering::Relaxed);
        let rows_written = self.rows_written.load(Ordering::Relaxed);
        let rows_total = self.rows_total.load(Ordering::Relaxed);
        let done = self.weights.share(
            share(bytes_read, self.bytes_total),
            share(self.units_done.load(Ordering::Relaxed), self.units_total),
            share(rows_written, rows_total),
        );
        let elapsed = self.started.elapsed().as_secs_f64();
        self.report(Progress {
            stage,
            // Only `finish` reports the whole.
            done: ((done * PROGRESS_TOTAL as f64) as u64).min(PROGRESS_TOTAL - 1),
            total: PROGRESS_TOTAL,
            message,
            bytes_read: bytes_read.min(self.bytes_total),
            bytes_total: self.bytes_total,
            rows_written,
            rows_total,
            eta_secs: eta(elapsed, done),
        });
    }

    /// Reports the conversion done.
    pub fn finish(&self, message: String) {
        let rows = self.rows_total.load(Ordering::Relaxed);
        self.report(Progress {
            stage: Stage::Done,
            done: PROGRESS_TOTAL,
            total: PROGRESS_TOTAL,
            message,
            bytes_read: self.bytes_total,
            bytes_total: self.bytes_total,
            rows_written: rows,
            rows_total: rows,
            eta_secs: Some(0.0),
        });
    }

    fn report(&self, p: Progress) {
        (self.progress)(&p);
    }
}

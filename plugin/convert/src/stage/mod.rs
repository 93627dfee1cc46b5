//! The steps of a conversion, in the order data flows through them:
//!
//! 1. [`plan`]: which folders to read — the units of work (one rank of one step, one side or
//!    both) and the rank and step lists of the output;
//! 2. [`read`]: a rank folder's three files ([`RankDump`]), and **build**: its graph
//!    ([`build::read_and_build`]; the graph's skeleton is made from construct.json and
//!    stack.json while dump.json is still being read, so the two steps overlap on purpose);
//! 3. [`pair`]: **match** the target and golden graphs of a unit, then **compare** their items
//!    (`precision_index`), returning the two graphs ready to export;
//! 4. [`write`]: rows into the `.vis.db` under its one output name, never replacing a file.
//!
//! The plain conversion ([`crate::convert`]) and the parallel merge ([`crate::merge`]) both go
//! through these steps; the merge only adds its merging of rank graphs between build and pair.
//! [`Run`] carries what every step shares: progress reports and the cancel flag.

pub(crate) mod build;
pub(crate) mod pair;
pub(crate) mod plan;
pub(crate) mod read;
pub(crate) mod write;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{ConvertError, Progress, ProgressFn, Stage};

pub use read::RankDump;

/// One conversion in progress: where progress goes, how far it is, and whether to stop.
pub(crate) struct Run<'a> {
    progress: ProgressFn<'a>,
    cancel: &'a AtomicBool,
    done: AtomicU64,
    total: u64,
}

impl<'a> Run<'a> {
    /// A run of `total` progress units; `message` is the first report (0 done).
    pub fn start(
        progress: ProgressFn<'a>,
        cancel: &'a AtomicBool,
        total: u64,
        message: String,
    ) -> Run<'a> {
        let run = Run {
            progress,
            cancel,
            done: AtomicU64::new(0),
            total,
        };
        run.note(Stage::Reading, message);
        run
    }

    /// [`ConvertError::Cancelled`] once the caller asked to stop.
    pub fn check(&self) -> Result<(), ConvertError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(ConvertError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Reports one more unit done.
    pub fn tick(&self, stage: Stage, message: String) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        self.report(stage, done.min(self.total), message);
    }

    /// Reports a message without counting a unit.
    pub fn note(&self, stage: Stage, message: String) {
        self.report(stage, self.done.load(Ordering::Relaxed), message);
    }

    fn report(&self, stage: Stage, done: u64, message: String) {
        (self.progress)(&Progress {
            stage,
            done,
            total: self.total,
            message,
        });
    }
}

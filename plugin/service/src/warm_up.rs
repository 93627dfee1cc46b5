//! The work that opening a file starts (its graphs' indexes, then each pane's root layout),
//! held back until the page's first answers have gone.
//!
//! Opening a file costs the sidecar a fraction of a millisecond, but the page's first two
//! answers (`loadGraphData`, then `loadGraphConfigInfo`) still travel back through the shim and
//! TensorBoard, whose Python needs a core for it. Started at once, the index threads (one per
//! side of a compare) and the root layouts took both cores of a small host while those answers
//! travelled, and made them slower than msprobe's. So opening a file only records the work
//! ([`WarmUp::defer`]), which starts at the first of:
//!
//! - a request that reads the file's graphs (any handler that selects a file other than the
//!   opening two: node lists, expansions, filters, …; [`WarmUp::start`]): it needs that work
//!   and waits for it anyway;
//! - [`Wait::Config`] after `loadGraphConfigInfo`, the last answer of the page's opening: long
//!   enough for that answer to leave through the shim and TensorBoard, short enough to leave the
//!   work a head start over the page's next request;
//! - [`Wait::Opened`] after `loadGraphData` when the configuration is not asked for: the page asks
//!   for it next, and the work waits for that answer too.
//!
//! Only the last opened selection is held: a page that opens another file has moved on (and
//! everything here is a head start; a request that finds no index or layout makes its own).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use graph_ascend_visdb::store::GraphKey;

use crate::catalog::GraphFile;
use crate::root_layouts::RootLayouts;

/// How long held work waits for a request that needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// After `loadGraphData`: until the page's `loadGraphConfigInfo` has come and gone.
    Opened,
    /// After `loadGraphConfigInfo`: until its answer is on its way.
    Config,
}

impl Wait {
    fn duration(self) -> Duration {
        match self {
            Wait::Opened => Duration::from_millis(20),
            Wait::Config => Duration::from_millis(3),
        }
    }
}

/// The work of opening one selection: index `panes`' graphs, then lay out their roots.
pub(crate) struct Opening {
    pub file: Arc<GraphFile>,
    /// Each pane's graph and name prefix.
    pub panes: Vec<(GraphKey, &'static str)>,
    pub micro_step: i64,
}

impl Opening {
    /// Starts the work in the background (threads of [`GraphFile::prefetch`] and
    /// [`RootLayouts::prefetch`]).
    fn run(self, layouts: &Arc<RootLayouts>) {
        self.file
            .prefetch(self.panes.iter().map(|(graph, _)| *graph).collect());
        layouts.prefetch(&self.file, self.panes, self.micro_step);
    }
}

#[derive(Default)]
struct Pending {
    opening: Option<Opening>,
    /// When the work starts if nothing starts it sooner.
    due: Option<Instant>,
    /// Whether a timer thread is waiting for `due`.
    timer: bool,
}

/// The held-back opening work of a sidecar.
pub struct WarmUp {
    layouts: Arc<RootLayouts>,
    pending: Mutex<Pending>,
}

impl WarmUp {
    /// Held-back work that lays out roots into `layouts`.
    pub(crate) fn new(layouts: Arc<RootLayouts>) -> WarmUp {
        WarmUp {
            layouts,
            pending: Mutex::default(),
        }
    }

    /// Holds `opening` back until a request needs it or for `wait` (it replaces any opening
    /// still held).
    pub(crate) fn defer(self: &Arc<Self>, opening: Opening, wait: Wait) {
        let mut pending = crate::lock(&self.pending);
        pending.opening = Some(opening);
        pending.due = Some(Instant::now() + wait.duration());
        if pending.timer {
            return;
        }
        let warm_up = self.clone();
        let spawned = std::thread::Builder::new()
            .name("graph-ascend-warm-up".into())
            .spawn(move || warm_up.wait_until_due());
        match spawned {
            Ok(_) => pending.timer = true,
            Err(e) => {
                tracing::debug!("cannot start the warm-up timer: {e}");
                let opening = pending.opening.take();
                drop(pending);
                if let Some(opening) = opening {
                    opening.run(&self.layouts);
                }
            }
        }
    }

    /// Starts the held work now, if any (a request needs the file's graphs).
    pub(crate) fn start(&self) {
        let opening = crate::lock(&self.pending).opening.take();
        if let Some(opening) = opening {
            opening.run(&self.layouts);
        }
    }

    /// Whether work is held back (for tests).
    pub fn is_pending(&self) -> bool {
        crate::lock(&self.pending).opening.is_some()
    }

    /// The timer thread: sleeps until the work is due (the due time may move later meanwhile),
    /// then starts it, unless a request took it first.
    fn wait_until_due(&self) {
        loop {
            let mut pending = crate::lock(&self.pending);
            let now = Instant::now();
            match pending.due {
                Some(due) if pending.opening.is_some() && due > now => {
                    drop(pending);
                    std::thread::sleep(due - now);
                }
                _ => {
                    pending.timer = false;
                    pending.due = None;
                    let opening = pending.opening.take();
                    drop(pending);
                    if let Some(opening) = opening {
                        opening.run(&self.layouts);
                    }
                    return;
                }
            }
        }
    }
}

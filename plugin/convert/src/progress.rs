//! Progress reports of a conversion (the CLI prints them, the service streams them).
//!
//! A conversion reports what it measures as it goes: input bytes read (dump.json as it is
//! parsed, batch by batch; construct.json and stack.json once read), graphs matched and
//! compared, and rows written into the `.vis.db`. The whole conversion's share done
//! ([`Progress::done`] of [`Progress::total`]) weighs these by the time each step takes (see
//! [`Weights`]), so a conversion of one big rank moves steadily instead of jumping by thirds;
//! the estimate of the time left follows from it.

/// Stages reported to the progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Reading,
    Building,
    Comparing,
    Writing,
    Done,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Reading => "reading",
            Stage::Building => "building",
            Stage::Comparing => "comparing",
            Stage::Writing => "writing",
            Stage::Done => "done",
        }
    }
}

/// [`Progress::total`]: shares are reported in thousandths.
pub const PROGRESS_TOTAL: u64 = 1000;

/// One progress report.
#[derive(Debug, Clone)]
pub struct Progress {
    pub stage: Stage,
    /// The whole conversion's share done, of `total` ([`PROGRESS_TOTAL`]); `total` only once
    /// the output is written.
    pub done: u64,
    pub total: u64,
    pub message: String,
    /// Input bytes read, of all the conversion reads.
    pub bytes_read: u64,
    pub bytes_total: u64,
    /// Rows written into the output; `rows_total` is 0 until the graphs are built.
    pub rows_written: u64,
    pub rows_total: u64,
    /// Estimated seconds left (`None` until there is enough to estimate from).
    pub eta_secs: Option<f64>,
}

impl Progress {
    /// The share done in percent (one decimal).
    pub fn percent(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            (self.done as f64 * 1000.0 / self.total as f64).round() / 10.0
        }
    }

    /// One machine-readable line: `{"stage": …, "done": …, "total": …, "percent": …,
    /// "message": …, "bytes_read": …, "bytes_total": …, "rows_written": …, "rows_total": …,
    /// "eta_secs": …|null}`.
    pub fn json_line(&self) -> String {
        serde_json::json!({
            "stage": self.stage.name(),
            "done": self.done,
            "total": self.total,
            "percent": self.percent(),
            "message": self.message,
            "bytes_read": self.bytes_read,
            "bytes_total": self.bytes_total,
            "rows_written": self.rows_written,
            "rows_total": self.rows_total,
            "eta_secs": self.eta_secs.map(|s| (s * 10.0).round() / 10.0),
        })
        .to_string()
    }
}

/// How much of a conversion's time each measured step takes, measured on generated 100k-entry
/// compares and builds (`GA_TIMING=1`): reading and building the graphs about 40%, matching and
/// comparing 20% (a build has none: a few percent for finishing its graphs), writing the rows
/// 30%, the indexes and commit that follow the last row 10%.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Weights {
    pub read: f64,
    pub pair: f64,
    pub rows: f64,
    pub finish: f64,
}

impl Weights {
    pub fn of(compare: bool) -> Weights {
        Weights {
            read: 0.4,
            pair: if compare { 0.2 } else { 0.05 },
            rows: 0.3,
            finish: 0.1,
        }
    }

    /// The share done (0..1) of a conversion that has read `read`, paired `pair` and written
    /// `rows` (each a share 0..1); the finish counts only when it is over.
    pub fn share(&self, read: f64, pair: f64, rows: f64) -> f64 {
        let all = self.read + self.pair + self.rows + self.finish;
        (self.read * read + self.pair * pair + self.rows * rows) / all
    }
}

/// Estimated seconds left, from the time spent so far and the share done; `None` while too
/// little is done (or too little time has passed) for the rate to mean anything.
pub(crate) fn eta(elapsed_secs: f64, share: f64) -> Option<f64> {
    if share < 0.02 || elapsed_secs < 0.5 || share >= 1.0 {
        return None;
    }
    Some(elapsed_secs * (1.0 - share) / share)
}

/// Where progress goes; called from worker threads.
pub type ProgressFn<'a> = &'a (dyn Fn(&Progress) + Sync);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_grow_with_each_measure_and_stop_short_of_done() {
        let w = Weights::of(true);
        assert_eq!(w.share(0.0, 0.0, 0.0), 0.0);
        let half_read = w.share(0.5, 0.0, 0.0);
        assert!(half_read > 0.0 && half_read < w.share(1.0, 0.0, 0.0));
        let written = w.share(1.0, 1.0, 1.0);
        assert!(written < 1.0 && written > 0.85, "{written}");
    }

    #[test]
    fn eta_needs_something_to_go_on() {
        assert_eq!(eta(0.1, 0.5), None);
        assert_eq!(eta(5.0, 0.0), None);
        assert_eq!(eta(4.0, 0.5), Some(4.0));
        assert_eq!(eta(4.0, 1.0), None);
    }
}

//! Progress reports of a conversion (the CLI prints them, the service streams them).

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

/// One progress report: `done` of `total` units of the whole conversion.
#[derive(Debug, Clone)]
pub struct Progress {
    pub stage: Stage,
    pub done: u64,
    pub total: u64,
    pub message: String,
}

impl Progress {
    /// One machine-readable line: `{"stage": …, "done": …, "total": …, "percent": …, "message": …}`.
    pub fn json_line(&self) -> String {
        let percent = if self.total == 0 {
            0.0
        } else {
            (self.done as f64 * 1000.0 / self.total as f64).round() / 10.0
        };
        serde_json::json!({
            "stage": self.stage.name(),
            "done": self.done,
            "total": self.total,
            "percent": percent,
            "message": self.message,
        })
        .to_string()
    }
}

/// Where progress goes; called from worker threads.
pub type ProgressFn<'a> = &'a (dyn Fn(&Progress) + Sync);

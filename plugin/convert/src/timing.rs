//! Phase timings for profiling: with `GA_TIMING=1` in the environment, each finished phase
//! prints `[timing] <phase> <ms> ms` on stderr. Off (and free) otherwise.

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("GA_TIMING").is_some_and(|v| !v.is_empty() && v != "0"))
}

/// A running phase; reports when dropped (or when [`Phase::done`] is called).
pub struct Phase {
    name: String,
    start: Option<Instant>,
}

impl Phase {
    pub fn done(self) {}
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(start) = self.start {
            eprintln!(
                "[timing] {} {:.1} ms (rss {} peak {})",
                self.name,
                start.elapsed().as_secs_f64() * 1000.0,
                status_field("VmRSS:"),
                status_field("VmHWM:")
            );
        }
    }
}

/// Starts timing a phase (a no-op unless `GA_TIMING` is set).
pub fn phase(name: impl FnOnce() -> String) -> Phase {
    if enabled() {
        Phase {
            name: name(),
            start: Some(Instant::now()),
        }
    } else {
        Phase {
            name: String::new(),
            start: None,
        }
    }
}

/// A line of `/proc/self/status` (Linux), e.g. `VmHWM:` → `"123456 kB"`.
fn status_field(key: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .map(|l| l[key.len()..].trim().to_string())
        })
        .unwrap_or_default()
}

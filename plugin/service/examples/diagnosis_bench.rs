//! Times the `diagnosis` route directly (no gRPC, no TensorBoard) on the first file of a logdir,
//! and the memory it adds to the sidecar.
//!
//! ```text
//! cargo run --release -p graph-ascend-service --example diagnosis_bench -- <logdir> [repeat]
//! ```
//! Prints the first call (the file is read and judged, then cached), the cached calls (median and
//! worst of `repeat`, default 5), each with and without the node verdicts (`states`), answers
//! rendered as the browser's JSON as `CallJson` does; then the resident memory before the first
//! call, after the calls, and the peak (Linux).

use std::sync::Arc;
use std::time::{Duration, Instant};

use graph_ascend_proto as pb;
use graph_ascend_proto::json::to_vec;
use graph_ascend_service::{handlers, State};

// The sidecar's allocator (the `graph-ascend` binary's), so that the first call costs what it
// costs there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn ms(d: Duration) -> String {
    format!("{:8.2} ms", d.as_secs_f64() * 1000.0)
}

/// A field of /proc/self/status in MB (Linux), 0 elsewhere.
fn status_mb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let logdir = args
        .first()
        .ok_or("usage: diagnosis_bench <logdir> [repeat]")?;
    let repeat: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let state = Arc::new(State::new(logdir.into()));
    let listing = handlers::load_meta_dir(&state);
    let run = listing.data.first().ok_or("no runs")?;
    let tag = run.tags.first().ok_or("no files")?;
    let request = |states: bool| pb::DiagnoseRequest {
        run: run.run.clone(),
        tag: tag.clone(),
        r#type: "db".into(),
        lang: "en".into(),
        micro_step: Some(-1),
        step: Some(0),
        rank: Some(0),
        top: 0,
        states,
        reference_run: String::new(),
        reference_tag: String::new(),
        client_id: String::new(),
    };
    let before = status_mb("VmRSS:");
    println!(
        "{}/{}: resident before the first call {before} MB",
        run.run, tag
    );
    for states in [false, true] {
        let label = if states {
            "with verdicts"
        } else {
            "sources only"
        };
        let t = Instant::now();
        let answer = handlers::diagnose(&state, request(states));
        let bytes = to_vec(&answer).len();
        let first = t.elapsed();
        if !answer.success {
            return Err(answer.error.unwrap_or_default().into());
        }
        let mut times: Vec<Duration> = (0..repeat)
            .map(|_| {
                let t = Instant::now();
                let _ = to_vec(&handlers::diagnose(&state, request(states)));
                t.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "{label:14} first {}  cached median {}  max {}  {bytes:>9} bytes",
            ms(first),
            ms(times[times.len() / 2]),
            ms(times[times.len() - 1]),
        );
    }
    println!(
        "resident after {} MB (+{} MB kept: the cache and what the allocator holds), peak {} MB",
        status_mb("VmRSS:"),
        status_mb("VmRSS:").saturating_sub(before),
        status_mb("VmHWM:")
    );
    Ok(())
}

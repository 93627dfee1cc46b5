//! Times the build of the per-graph indexes (`graph_index`) of one `.vis.db`: what the first
//! node list, filter or search of a fresh sidecar waits for. Not a test: a measurement.
//!
//! usage: cargo run --release -p graph-ascend-service --example index_build -- FILE [RUNS]
//!
//! Prints, over RUNS (default 9) fresh builds, the median and the range of the build of each
//! side alone and of both sides at once (one thread a side, as the sidecar prefetches them): the
//! time waited, and the processor time spent (from `/proc/thread-self/schedstat`; steadier than
//! the time waited on a shared machine).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use graph_ascend_service::{GraphFile, State};
use graph_ascend_visdb::store::{GraphKey, Side};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = PathBuf::from(args.next().ok_or("usage: index_build FILE [RUNS]")?);
    let runs: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(9);
    let dir = file.parent().ok_or("FILE has no folder")?;
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("FILE has no name")?;
    let tag = name
        .strip_suffix(".vis.db")
        .ok_or("FILE is not a .vis.db")?;
    let run = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("FILE's folder has no name")?;
    let state = State::new(dir.to_path_buf());
    let handle = state
        .catalog
        .file(run, tag)
        .ok_or_else(|| format!("{} is not servable", file.display()))?;
    let compare = handle.with_store(|s| s.config())?.is_compare();
    let graph = |side| GraphKey {
        side,
        step: 0,
        rank: 0,
    };
    let mut sides = vec![Side::Npu];
    if compare {
        sides.push(Side::Bench);
    }
    for side in &sides {
        let times = measure(runs, || {
            handle.invalidate_indexes();
            let cpu = thread_cpu();
            let index = handle.index(graph(*side)).map_err(|e| e.to_string())?;
            Ok((index.len(), thread_cpu().saturating_sub(cpu)))
        })?;
        report(&format!("{side:?} alone"), &times);
    }
    let handle: Arc<GraphFile> = handle;
    let times = measure(runs, || {
        handle.invalidate_indexes();
        let threads: Vec<_> = sides
            .iter()
            .map(|&side| {
                let file = handle.clone();
                std::thread::spawn(move || {
                    let cpu = thread_cpu();
                    let nodes = file.index(graph(side)).map(|i| i.len());
                    nodes.map(|n| (n, thread_cpu().saturating_sub(cpu)))
                })
            })
            .collect();
        let (mut nodes, mut cpu) = (0, Duration::ZERO);
        for t in threads {
            let (n, c) = t
                .join()
                .map_err(|_| "an indexing thread panicked".to_owned())?
                .map_err(|e| e.to_string())?;
            nodes += n;
            cpu += c;
        }
        Ok((nodes, cpu))
    })?;
    report("both sides at once", &times);
    Ok(())
}

/// Processor time of the calling thread so far (zero where `/proc` does not tell).
fn thread_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// Timings of `runs` calls of `f`, which returns how many nodes it indexed and the processor
/// time it took: (wall times, processor times, nodes), times sorted.
type Timings = (Vec<Duration>, Vec<Duration>, usize);

fn measure(
    runs: usize,
    mut f: impl FnMut() -> Result<(usize, Duration), String>,
) -> Result<Timings, String> {
    let mut wall = Vec::with_capacity(runs);
    let mut cpu = Vec::with_capacity(runs);
    let mut nodes = 0;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let (n, spent) = f()?;
        wall.push(started.elapsed());
        cpu.push(spent);
        nodes = n;
    }
    wall.sort();
    cpu.sort();
    Ok((wall, cpu, nodes))
}

fn report(label: &str, (wall, cpu, nodes): &Timings) {
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let line = |times: &[Duration]| {
        format!(
            "median {:7.2} ms (min {:.2}, max {:.2})",
            ms(&times[times.len() / 2]),
            ms(&times[0]),
            ms(&times[times.len() - 1])
        )
    };
    println!(
        "{label:<20} {nodes:>8} nodes  waited {}  cpu {}  {} runs",
        line(wall),
        line(cpu),
        wall.len()
    );
}

//! Times diagnosis of one file: the load (reading and parsing both sides of every rank of the
//! first step) and the rules after load (best of N runs), as the service would cache the one
//! and repeat the other. The rules' time is given as wall time and as CPU time summed over threads
//! (on a shared machine the wall time includes waiting for a core).
//!
//! `cargo run --release -p graph-ascend-diagnose --example diagnose_bench -- FILE.vis.db [RUNS]`

use std::time::Instant;

use graph_ascend_diagnose::{diagnose_step, CompareFile, Options, RankData};

// The allocator of the `graph-ascend` binary (and so of the sidecar).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// CPU time of the process (all threads), in seconds.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: diagnose_bench FILE.vis.db [RUNS]")?;
    let runs: usize = args.next().map_or(Ok(5), |r| r.parse())?;
    let opts = Options::default();
    let (t, load_cpu) = (Instant::now(), thread_cpu());
    let file = CompareFile::open(path.as_ref())?;
    let step = file.steps()[0];
    let data: Vec<RankData> = file
        .ranks()
        .iter()
        .map(|&rank| file.load(step, rank))
        .collect::<Result<_, _>>()?;
    let load = t.elapsed();
    let load_cpu = thread_cpu() - load_cpu;
    let nodes: usize = data.iter().map(|d| d.npu.nodes.len()).sum();
    let mut best = f64::INFINITY;
    let mut best_cpu = f64::INFINITY;
    let mut sources = 0;
    for _ in 0..runs.max(1) {
        let (t, cpu) = (Instant::now(), thread_cpu());
        let d = diagnose_step(file.mode(), &opts, &data);
        best_cpu = best_cpu.min(thread_cpu() - cpu);
        best = best.min(t.elapsed().as_secs_f64());
        sources = d.sources.len();
    }
    println!(
        "{path}: {nodes} target nodes, load {:.3} s wall / {:.3} s CPU, rules {:.1} ms wall / {:.1} ms CPU \
         (best of {runs}), {sources} sources",
        load.as_secs_f64(),
        load_cpu,
        best * 1e3,
        best_cpu * 1e3
    );
    Ok(())
}

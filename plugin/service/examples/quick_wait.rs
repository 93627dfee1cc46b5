//! How long a quick request waits while heavy ones run (a benchmark, not a test;
//! `bench/quick_wait.sh` runs it for `make bench`).
//!
//! `cargo run --release -p graph-ascend-service --example quick_wait -- BINARY [SECONDS] [HEAVY]`
//!
//! Starts `BINARY serve` (a `graph-ascend` binary: this tree's, or an older build to compare) on
//! a logdir of three generated files: `wide` (a root with 100,000 children: a legitimately huge
//! answer), `deep` (a chain 20,000 levels deep: a crafted file) and `small` (2,000 nodes). Then,
//! over the sidecar's socket and the shim's own path (`CallJson`, the answer rendered as the
//! browser's JSON):
//!
//! 1. alone, one quick client reads the configuration of `small` in a loop for SECONDS / 2;
//! 2. the same while HEAVY clients (default 3) each expand the root of `wide` and reveal the
//!    deepest node of `deep` in turn, for SECONDS (default 10).
//!
//! Reported per phase: quick requests, their median, 99th percentile and worst wait, and the
//! heavy requests answered with their median time (an error answer counts: the deep one is
//! refused by a sidecar that bounds the depth).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use graph_ascend_proto as pb;
use graph_ascend_testkit::synthetic_visdb::{chain_node, write, write_chain, Shape};
use live_sidecar::{call, meta, Client, Sidecar};
use prost::Message;

mod live_sidecar;

const WIDE_CHILDREN: usize = 100_000;
const DEEP_LEVELS: usize = 20_000;

fn expand(run: &str, node: &str, client: &str) -> Vec<u8> {
    pb::NodeRequest {
        node_info: Some(pb::NodeRef {
            node_name: node.into(),
            node_type: "Single".into(),
        }),
        meta_data: Some(meta(run)),
        client_id: client.into(),
    }
    .encode_to_vec()
}

/// The quick client's loop until `stop`: every wait, in order.
async fn quick_loop(mut client: Client, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let request = pb::MetaRequest {
        meta_data: Some(meta("small")),
        client_id: "quick".into(),
    }
    .encode_to_vec();
    let mut waits = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let (took, answered) = call(&mut client, "LoadGraphConfigInfo", request.clone()).await;
        assert!(answered.is_some(), "the configuration read failed");
        waits.push(took);
    }
    waits
}

/// One heavy client's loop until `stop`: the time of every request.
async fn heavy_loop(mut client: Client, id: usize, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let name = format!("heavy-{id}");
    let deepest = chain_node(DEEP_LEVELS - 1);
    let mut times = Vec::new();
    let mut turn = id;
    while !stop.load(Ordering::Relaxed) {
        let request = if turn.is_multiple_of(2) {
            expand("wide", "root", &name)
        } else {
            expand("deep", &deepest, &name)
        };
        turn += 1;
        let (took, _) = call(&mut client, "ChangeNodeExpandState", request).await;
        times.push(took);
    }
    times
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let at = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

async fn phase(
    sidecar: &Sidecar,
    heavy: usize,
    seconds: f64,
) -> Result<String, Box<dyn std::error::Error>> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut heavies = Vec::new();
    for id in 0..heavy {
        heavies.push(tokio::spawn(heavy_loop(
            sidecar.connect().await?,
            id,
            stop.clone(),
        )));
    }
    // Let the heavy requests start first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let quick = tokio::spawn(quick_loop(sidecar.connect().await?, stop.clone()));
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut waits = quick.await?;
    let mut heavy_times = Vec::new();
    for h in heavies {
        heavy_times.extend(h.await?);
    }
    waits.sort();
    heavy_times.sort();
    Ok(format!(
        "| {heavy} | {} | {:.1} | {:.1} | {:.1} | {} | {:.0} |",
        waits.len(),
        ms(quantile(&waits, 0.5)),
        ms(quantile(&waits, 0.99)),
        ms(waits.last().copied().unwrap_or_default()),
        heavy_times.len(),
        ms(quantile(&heavy_times, 0.5)),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(binary) = args.first().map(PathBuf::from) else {
        return Err("usage: quick_wait BINARY [SECONDS] [HEAVY]".into());
    };
    let seconds: f64 = args.get(1).map_or(Ok(10.0), |s| s.parse())?;
    let heavy: usize = args.get(2).map_or(Ok(3), |s| s.parse())?;

    let dir = tempfile::tempdir()?;
    let logdir = dir.path().join("logdir");
    for run in ["wide", "deep", "small"] {
        std::fs::create_dir_all(logdir.join(run))?;
    }
    let wide = Shape {
        layers: WIDE_CHILDREN,
        modules: 0,
        leaves: 0,
        compare: false,
        steps: 1,
        ranks: 1,
    };
    write(&logdir.join("wide/wide.vis.db"), wide)?;
    write_chain(&logdir.join("deep/deep.vis.db"), DEEP_LEVELS)?;
    write(
        &logdir.join("small/small.vis.db"),
        Shape::with_nodes(2_000, 5, false),
    )?;

    let sidecar = Sidecar::start(&binary, &logdir, dir.path()).await?;

    println!("{}", binary.display());
    println!("| heavy clients | quick requests | quick p50 ms | quick p99 ms | quick worst ms | heavy answered | heavy p50 ms |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    println!("{}", phase(&sidecar, 0, seconds / 2.0).await?);
    println!("{}", phase(&sidecar, heavy, seconds).await?);
    drop(sidecar);
    Ok(())
}

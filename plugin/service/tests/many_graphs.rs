//! A file of thousands of graphs: a gathered run's `.vis.db` holds a graph per
//! step and rank. Opening it must not read every graph (the catalog reads the schema and the
//! configuration, the indexes are built per graph on first use), and the indexes of all graphs
//! looked at stay under the memory bound however many there are: checked by the indexes' own
//! measure, and that measure against a counting allocator.

mod common;
#[path = "common/counting.rs"]
mod counting;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{meta, Probe};
use graph_ascend_proto as pb;
use graph_ascend_service::State;
use graph_ascend_testkit::synthetic_visdb::{self, Shape};

const STEPS: usize = 10;
const RANKS: usize = 100;
const RUN: &str = "gathered";
const TAG: &str = "many";

/// A folder with `RUN/TAG.vis.db`: 1,000 single graphs (10 steps × 100 ranks) of 22 nodes each.
fn logdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join(RUN);
    std::fs::create_dir(&run).expect("mkdir");
    let shape = Shape::with_nodes(22, 1, false).with_graphs(STEPS, RANKS);
    synthetic_visdb::write(&run.join(format!("{TAG}.vis.db")), shape).expect("write the file");
    dir
}

fn at(step: usize, rank: usize) -> pb::MetaData {
    pb::MetaData {
        step: Some(step as i32),
        rank: Some(rank as i32),
        ..meta(RUN, TAG)
    }
}

fn node_count(probe: &Probe, m: &pb::MetaData) -> usize {
    let lists = probe.node_lists(m);
    assert_eq!(lists["success"], true, "{lists}");
    lists["data"]["npuNodeList"]
        .as_array()
        .expect("a node list")
        .len()
}

/// Asks for the node list of every graph of the file; returns the heap growth it caused.
fn touch_all(probe: &Probe) -> usize {
    let before = counting::live();
    for step in 0..STEPS {
        for rank in 0..RANKS {
            assert_eq!(
                node_count(probe, &at(step, rank)),
                22,
                "step {step} rank {rank}"
            );
        }
    }
    counting::live().saturating_sub(before)
}

#[test]
fn a_file_of_a_thousand_graphs_opens_without_reading_them_and_stays_under_the_bound() {
    let dir = logdir();

    // Opening: the page's first requests read one graph, not the file's thousand.
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let probe = Probe::new(state.clone());
    let started = Instant::now();
    let listing = probe.load_meta_dir();
    assert_eq!(listing["data"][RUN]["tags"][0], TAG, "{listing}");
    let m = at(STEPS - 1, RANKS - 1);
    let config = probe.config(&m);
    assert_eq!(config["success"], true, "{config}");
    assert_eq!(
        config["data"]["ranks"].as_array().map(Vec::len),
        Some(RANKS)
    );
    assert_eq!(node_count(&probe, &m), 22);
    let root = probe.expand(&m, "root", "Single");
    assert_eq!(root["success"], true, "{root}");
    let opened = started.elapsed();
    eprintln!("1,000 graphs: listed, configured, node list and root layout in {opened:?}");
    assert_eq!(state.indexed_graphs(), 1, "opening indexed other graphs");
    // Generous: the real check is the count above; this catches a pass over the whole file.
    assert!(opened < Duration::from_secs(10), "{opened:?}");

    // Unbounded: every graph touched gets an index, and the indexes' measure of themselves
    // follows what the allocator holds.
    let grown = touch_all(&probe);
    let measured = state.index_bytes();
    assert_eq!(state.indexed_graphs(), STEPS * RANKS);
    eprintln!("1,000 indexes: heap +{grown} B, measured {measured} B");
    let ratio = measured as f64 / grown as f64;
    assert!(
        (0.7..1.4).contains(&ratio),
        "measured {measured} B vs {grown} B allocated"
    );
    let per_index = measured / (STEPS * RANKS);
    drop((probe, state));

    // Bounded to about 50 indexes: touching all 1,000 graphs leaves no more than that.
    let bound = 50 * per_index;
    let state = Arc::new(State::new(dir.path().to_path_buf()).with_index_memory(bound));
    let probe = Probe::new(state.clone());
    assert_eq!(node_count(&probe, &at(0, 0)), 22);
    let grown = touch_all(&probe);
    let measured = state.index_bytes();
    eprintln!("bound {bound} B: heap +{grown} B, measured {measured} B");
    assert!(measured <= bound, "{measured} > {bound}");
    assert!(
        (40..=50).contains(&state.indexed_graphs()),
        "{} indexes held",
        state.indexed_graphs()
    );
    assert!(
        grown <= bound + bound / 2,
        "heap grew {grown} B, bound {bound} B"
    );

    // Least recently used out: the last graphs touched are still indexed (no rebuild), the
    // first ones were dropped and come back when asked for.
    let held = state.indexed_graphs();
    assert_eq!(node_count(&probe, &at(STEPS - 1, RANKS - 1)), 22);
    assert_eq!(state.indexed_graphs(), held);
    assert_eq!(node_count(&probe, &at(0, 0)), 22);
    assert!(state.index_bytes() <= bound);
}

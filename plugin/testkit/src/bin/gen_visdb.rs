//! `gen_visdb --out FILE [--nodes N] [--leaves L] [--single] [--steps S] [--ranks R]
//! [--no-diagnosis-table]`: a synthetic `.vis.db` of about N nodes per side
//! (`graph_ascend_testkit::synthetic_visdb`), for the service and diagnosis benchmarks; a compare
//! file gets our own diagnosis table, as `convert` writes it, unless told not to.
use std::path::PathBuf;

use clap::Parser;
use graph_ascend_testkit::synthetic_visdb::{self, Shape};

/// Write a synthetic .vis.db of about N nodes per side (for benchmarks).
#[derive(Parser)]
#[command(name = "gen_visdb")]
struct GenArgs {
    /// About this many nodes per side.
    #[arg(long, default_value_t = 500_000)]
    nodes: usize,
    /// API calls per module (the children of one module box).
    #[arg(long, default_value_t = 1000)]
    leaves: usize,
    /// Write a single graph instead of a compare file.
    #[arg(long)]
    single: bool,
    /// Steps 0..N, each with a graph per rank (a file of many graphs, as a gathered run's).
    #[arg(long, default_value_t = 1)]
    steps: usize,
    /// Ranks 0..N of each step.
    #[arg(long, default_value_t = 1)]
    ranks: usize,
    /// Leave out our own diagnosis table (a compare file then reads as msprobe's do).
    #[arg(long)]
    no_diagnosis_table: bool,
    /// Output file (.vis.db).
    #[arg(long)]
    out: PathBuf,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = GenArgs::parse();
    let shape = Shape::with_nodes(args.nodes, args.leaves, !args.single)
        .with_graphs(args.steps, args.ranks);
    let path = synthetic_visdb::write(&args.out, shape)
        .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    if !args.single && !args.no_diagnosis_table {
        graph_ascend_diagnose::write_compact_table(&path)
            .map_err(|e| format!("cannot add the diagnosis table to {}: {e}", path.display()))?;
    }
    println!(
        "{}: {} steps x {} ranks, {} nodes per side ({} layers x {} modules x {} calls)",
        path.display(),
        shape.steps,
        shape.ranks,
        shape.nodes_per_side(),
        shape.layers,
        shape.modules,
        shape.leaves
    );
    Ok(())
}

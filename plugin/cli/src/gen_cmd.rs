//! `graph-ascend gen-visdb`: synthetic `.vis.db` files for benchmarks.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use graph_ascend_visdb::synthetic::{self, Shape};

#[derive(clap::Args)]
pub struct GenArgs {
    /// About this many nodes per side.
    #[arg(long, default_value_t = 500_000)]
    pub nodes: usize,
    /// API calls per module (the children of one module box).
    #[arg(long, default_value_t = 1000)]
    pub leaves: usize,
    /// Write a single graph instead of a compare file.
    #[arg(long)]
    pub single: bool,
    /// Steps 0..N, each with a graph per rank (a file of many graphs, as a gathered run's).
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Ranks 0..N of each step.
    #[arg(long, default_value_t = 1)]
    pub ranks: usize,
    /// Output file (.vis.db).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: GenArgs) -> anyhow::Result<ExitCode> {
    let shape = Shape::with_nodes(args.nodes, args.leaves, !args.single)
        .with_graphs(args.steps, args.ranks);
    let path = synthetic::write(&args.out, shape)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
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
    Ok(ExitCode::SUCCESS)
}

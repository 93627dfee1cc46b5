//! `graph-ascend diagnose FILE --map`: the divergence map, the whole run on one screen
//! (`graph_ascend_diagnose::map`, docs/diagnosis.md "The divergence map").

use std::io::IsTerminal;

use graph_ascend_diagnose::map::{
    divergence_map_with_progress, ColumnAxis, DivergenceMap, MapOptions, DEFAULT_MAX_COLUMNS,
};
use graph_ascend_diagnose::{CompareFile, DiagnoseError, Diagnosis, Options};

/// What the columns of a step are.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum MapColumns {
    /// One column per rank (a module's micro-batches aggregate to the worst).
    Ranks,
    /// One column per rank and micro-batch.
    MicroBatches,
}

/// The map's flags of `diagnose`.
#[derive(clap::Args)]
pub struct MapArgs {
    /// Print the divergence map instead of the list: rows are modules (forward, backward and
    /// the update as separate bands, in execution order), columns the steps x ranks; a cell is
    /// the module's output error divided by its tolerance, marked where a source lies inside
    /// the module or the error came from a peer rank. With --format: text (a grid of symbols
    /// with its legend), json (every cell with its numbers and the node a click opens), csv
    /// (one line per cell).
    #[arg(long)]
    pub map: bool,
    /// The rows' depth in the module hierarchy (1: top-level modules). Default: the repeated
    /// blocks (the shallowest depth where sibling modules of one class differ only by an index,
    /// e.g. layers.0, layers.1, ...).
    #[arg(long, value_name = "N", requires = "map", value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: Option<u32>,
    /// Columns of a step: one per rank, or one per rank and micro-batch.
    #[arg(long, value_enum, default_value_t = MapColumns::Ranks, requires = "map")]
    pub map_columns: MapColumns,
    /// At most about this many columns: a step's ranks beyond its share aggregate, contiguous,
    /// to the worst (source marks kept).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_COLUMNS as u32, requires = "map",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_columns: u32,
}

impl MapArgs {
    pub fn options(&self) -> MapOptions {
        MapOptions {
            depth: self.depth,
            columns: match self.map_columns {
                MapColumns::Ranks => ColumnAxis::Ranks,
                MapColumns::MicroBatches => ColumnAxis::MicroBatches,
            },
            max_columns: self.max_columns as usize,
        }
    }
}

/// The map, computed from every graph of the file, with progress (graphs read of total) on
/// stderr when it is a terminal, as `convert` shows its own.
pub fn map_with_progress(
    file: &CompareFile,
    opts: &Options,
    map: &MapOptions,
) -> Result<(Diagnosis, DivergenceMap), DiagnoseError> {
    let bar = std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new(1);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "[Map] {bar:40} {pos}/{len} graphs read [{elapsed_precise}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb
    });
    let made = divergence_map_with_progress(file, opts, map, false, &mut |p| {
        if let Some(pb) = &bar {
            pb.set_length(p.graphs_total as u64);
            pb.set_position(p.graphs_read as u64);
        }
    });
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    made
}

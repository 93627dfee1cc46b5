//! `graph-ascend diff-visdb A B`: compares two `.vis.db` files node by node.
//!
//! Rows are keyed by (data_source, step, rank, node_name); every column must agree, node data
//! numerically to a relative tolerance, stacks by text. Exit status 0 when equal, 1 when not.
use std::path::PathBuf;
use std::process::ExitCode;

use graph_ascend_visdb::diff::{diff_files, DiffOptions};

#[derive(clap::Args)]
pub struct DiffArgs {
    /// First file (e.g. ours).
    left: PathBuf,
    /// Second file (e.g. msprobe's).
    right: PathBuf,
    /// Relative tolerance for numbers in node data.
    #[arg(long, default_value_t = 1e-6)]
    tolerance: f64,
    /// Print at most this many differences.
    #[arg(long, default_value_t = 50)]
    max: usize,
    /// Do not compare `dump_data_dir` (an absolute path of the machine that converted).
    #[arg(long)]
    ignore_dump_dir: bool,
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let opts = DiffOptions {
        rel_tol: args.tolerance,
        max_differences: args.max,
        ignore_columns: if args.ignore_dump_dir {
            &["dump_data_dir"]
        } else {
            &[]
        },
    };
    let report = diff_files(&args.left, &args.right, opts)?;
    for line in &report.differences {
        println!("{line}");
    }
    if report.is_equal() {
        println!("equal: {} rows on each side", report.rows_left);
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "{} difference(s) ({} rows left, {} rows right)",
            report.total, report.rows_left, report.rows_right
        );
        Ok(ExitCode::from(1))
    }
}

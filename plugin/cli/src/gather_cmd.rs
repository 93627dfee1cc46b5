//! `graph-ascend gather PARTS… -o OUT`: the parts of a sharded conversion into one `.vis.db`
//! (see `graph_ascend_convert::gather` and docs/scale.md).

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `graph-ascend gather`.
#[derive(clap::Args)]
pub struct GatherArgs {
    /// Part files (`shard-*.vis.part`), or folders holding them.
    #[arg(required = true, value_name = "PARTS")]
    parts: Vec<PathBuf>,
    /// Output: a folder (the file is named as `convert` names it) or a `….vis.db` file name.
    #[arg(short = 'o', long = "output_path", value_name = "OUT")]
    output: PathBuf,
}

pub fn run(args: GatherArgs) -> anyhow::Result<ExitCode> {
    Ok(crate::convert_cmd::written(
        graph_ascend_convert::gather::gather(&args.parts, &args.output),
    ))
}

//! `graph-ascend convert`: msprobe `graph_visualize`'s command line (issue 3 fills this in).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ConvertArgs {}

pub fn run(_args: ConvertArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("convert is not built yet")
}

//! `graph-ascend diff-visdb A B` (issue 3 fills this in).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DiffArgs {}

pub fn run(_args: DiffArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("diff-visdb is not built yet")
}

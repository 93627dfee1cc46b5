//! `graph-ascend serve`: the sidecar's launch contract with the Python shim.
use std::path::PathBuf;
use std::process::ExitCode;

/// Launch contract (kept stable for `python_shim`): the sidecar binds a Unix socket in a fresh
/// private directory (0700, socket 0600), writes `<socket path>\n` to `--ready-file` once it
/// accepts connections, writes the reason to `--error-file` and exits non-zero if it cannot start,
/// and with `--die-after-stdin` exits when its standard input closes (TensorBoard died).
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Folder whose .vis.db files (and dump folders, for conversion) are served.
    #[arg(long)]
    pub logdir: PathBuf,
    /// Where to write the socket path followed by a newline once serving.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Where to write the reason when start-up fails.
    #[arg(long)]
    pub error_file: Option<PathBuf>,
    /// Exit when standard input reaches end of file.
    #[arg(long)]
    pub die_after_stdin: bool,
    /// Directory in which to create the private socket directory (default: the system temp dir).
    #[arg(long)]
    pub socket_parent: Option<PathBuf>,
    /// Serve on this loopback TCP port instead of a Unix socket (0: any free port).
    #[arg(long)]
    pub tcp_port: Option<u16>,
    /// How many conversions may run at once.
    #[arg(long, default_value_t = 2)]
    pub max_conversions: usize,
    /// Log filter, e.g. `info` or `graph_ascend_service=debug`.
    #[arg(long, default_value = "info")]
    pub log: String,
}

pub fn run(_args: ServeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("serve is not built yet")
}

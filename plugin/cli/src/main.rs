//! `graph-ascend`: a thin command line over the library crates.
//!
//! - `serve`: the TensorBoard sidecar (gRPC over a Unix socket), see `graph_ascend_service`.
//! - `convert`: msprobe `graph_visualize`'s flags, see `graph_ascend_convert`.
//! - `diff-visdb`: compares two `.vis.db` files node by node (the converter's acceptance tool).
//! - `proto-descriptor`: writes the API's FileDescriptorSet for the Python shim.

mod convert_cmd;
mod diff_cmd;
mod gen_cmd;
mod serve_cmd;

use std::process::ExitCode;

// The converter allocates many small objects from several threads: mimalloc is markedly faster
// than glibc malloc for that and keeps less memory around.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "graph-ascend",
    version,
    about = "Model hierarchy precision graphs for msprobe dumps: convert dumps to .vis.db, serve them to TensorBoard.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve every .vis.db under a logdir to the GRAPH_ASCEND TensorBoard plugin (gRPC sidecar).
    Serve(serve_cmd::ServeArgs),
    /// Convert msprobe dump folders into a .vis.db (the flags of `msprobe graph_visualize`).
    Convert(convert_cmd::ConvertArgs),
    /// Compare two .vis.db files node by node; exit status 1 when they differ.
    DiffVisdb(diff_cmd::DiffArgs),
    /// Write a synthetic .vis.db of about N nodes per side (for benchmarks).
    #[command(hide = true)]
    GenVisdb(gen_cmd::GenArgs),
    /// Write the API's protobuf FileDescriptorSet (used by the Python shim).
    #[command(hide = true)]
    ProtoDescriptor {
        /// Output file.
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve_cmd::run(args),
        Command::Convert(args) => convert_cmd::run(args),
        Command::DiffVisdb(args) => diff_cmd::run(args),
        Command::GenVisdb(args) => gen_cmd::run(args),
        Command::ProtoDescriptor { out } => {
            std::fs::write(&out, graph_ascend_proto::FILE_DESCRIPTOR_SET)
                .map(|()| ExitCode::SUCCESS)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))
        }
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("graph-ascend: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

//! `graph-ascend`: a thin command line over the library crates.
//!
//! - `serve`: the TensorBoard sidecar (gRPC over a Unix socket), see `graph_ascend_service`.
//! - `convert`: msprobe `graph_visualize`'s flags, see `graph_ascend_convert`.
//! - `gather`: the parts of a sharded conversion (`convert --shard`) into one `.vis.db`.
//! - `diagnose`: where a compare first went wrong, see `graph_ascend_diagnose`.
//! - `export-csv`: every matched pair of a compare with its metrics, as CSV.
//! - `report`: the self-contained report, one HTML file that opens with no server (docs/report.md).
//! - `trend`: two runs' msprobe monitor output, where they part, see `graph_ascend_monitor`.
//! - `diff-visdb`: compares two `.vis.db` files node by node (the converter's acceptance tool).
//! - `proto-descriptor`: writes the API's FileDescriptorSet for the Python shim.

mod convert_cmd;
mod diagnose_cmd;
mod diff_cmd;
mod gather_cmd;
mod interrupt;
mod map_cmd;
mod precheck_cmd;
mod report_cmd;
mod serve_cmd;
mod trend_cmd;
mod write_new;

use std::process::ExitCode;

// The converter allocates many small objects from several threads: mimalloc is markedly faster
// than glibc malloc for that. Two settings keep its memory near what is in use (measured on the
// 20,758-entry compare: peak 179 MB with mimalloc's defaults, about 95 MB with these, 124 MB with
// glibc): no transparent huge pages (the `no_thp` build feature: a 2 MiB huge page is resident as
// soon as one byte of it is touched) and, for the batch commands, freed memory returned to the OS
// after 20 ms instead of 1 s ([`set_purge_delay`]), so that the graph's freed memory does not stay
// resident while the writer's grows. (0 ms saves a few MB more but costs about 10% in time: memory
// freed and soon needed again is faulted in anew.)
//
// `serve` is the opposite case: each answer (a laid-out view, a node list of megabytes) is built,
// sent and freed, and the next request needs the same amount again. With a 20 ms delay the pages
// went back to the OS between two clicks and were faulted in (and zeroed) anew for every answer; a
// longer delay keeps them while the page is in use, and an idle sidecar still gives them back.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its position in `mi_option_e` of the bundled mimalloc 3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The purge delay of the batch commands (convert, gather, diagnose, ...), in ms.
const BATCH_PURGE_DELAY_MS: std::os::raw::c_long = 20;

/// The purge delay of `serve`, in ms: freed memory is kept while requests come, and given back
/// within seconds of the last one.
const SERVE_PURGE_DELAY_MS: std::os::raw::c_long = 5_000;

/// Sets mimalloc's purge delay. The option's number is checked first by its default (1000 ms
/// in this build; 10 ms in mimalloc's docs): another mimalloc version with another numbering is
/// left as it is, and so is a delay set with `MIMALLOC_PURGE_DELAY`.
fn set_purge_delay(ms: std::os::raw::c_long) {
    // SAFETY: plain calls into mimalloc's option API, which is thread-safe and takes any value.
    unsafe {
        if matches!(
            libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
            10 | 1000
        ) {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms);
        }
    }
}

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
    /// Combine the parts of a sharded conversion (convert --shard I/N) into one .vis.db.
    Gather(gather_cmd::GatherArgs),
    /// Where a compare first went wrong: the ranked sources of error (exit status 1 when found).
    Diagnose(diagnose_cmd::DiagnoseArgs),
    /// Every matched pair of a compare with its metrics as CSV, one row per input/output.
    ExportCsv(diagnose_cmd::ExportCsvArgs),
    /// A self-contained HTML report of a .vis.db (graph, diagnosis, details) that opens from disk.
    Report(report_cmd::ReportArgs),
    /// Replay every API call of tensor dumps on the CPU from its own inputs (exit status 1 when one fails).
    Precheck(precheck_cmd::PrecheckArgs),
    /// Two runs' msprobe monitor output: the first step and module where they part (exit status 1 when found).
    Trend(trend_cmd::TrendArgs),
    /// Compare two .vis.db files node by node; exit status 1 when they differ.
    DiffVisdb(diff_cmd::DiffArgs),
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
    set_purge_delay(match cli.command {
        Command::Serve(_) => SERVE_PURGE_DELAY_MS,
        _ => BATCH_PURGE_DELAY_MS,
    });
    let result = match cli.command {
        Command::Serve(args) => serve_cmd::run(args),
        Command::Convert(args) => convert_cmd::run(args),
        Command::Gather(args) => gather_cmd::run(args),
        Command::Diagnose(args) => diagnose_cmd::run(args),
        Command::ExportCsv(args) => diagnose_cmd::run_export(args),
        Command::Report(args) => report_cmd::run(args),
        Command::DiffVisdb(args) => diff_cmd::run(args),
        Command::Precheck(args) => precheck_cmd::run(args),
        Command::Trend(args) => trend_cmd::run(args),
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

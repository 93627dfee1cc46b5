//! `copy_steps FILE STEPS`: copies step 0 of the compare FILE (every rank, and our own diagnosis
//! table's rows when it has one) to steps 1 … STEPS-1 in the file
//! (`graph_ascend_testkit::graph_copies`): a run of several steps made from one, for the benches.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use graph_ascend_testkit::graph_copies;

/// Copy step 0 of a compare .vis.db to more steps (for benchmarks).
#[derive(Parser)]
#[command(name = "copy_steps")]
struct Args {
    /// The .vis.db, changed in place.
    file: PathBuf,
    /// Steps the file holds afterwards (0 … STEPS-1).
    steps: i64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let copied = rusqlite::Connection::open(&args.file).and_then(|db| {
        db.execute_batch("BEGIN")?;
        graph_copies::copy_step_zero(&db, args.steps, true)?;
        db.execute_batch("COMMIT")
    });
    match copied {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("copy_steps: {}: {e}", args.file.display());
            ExitCode::FAILURE
        }
    }
}

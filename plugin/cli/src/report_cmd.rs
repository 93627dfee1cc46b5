//! `graph-ascend report FILE.vis.db -o report.html`: the self-contained report, one HTML file
//! that opens from disk in a browser with no server and no network (docs/report.md).
//!
//! The data are the sidecar's own answers, worked out in advance by its handlers over a catalog
//! that holds only this file (`graph_ascend_service::handlers::report_data`); the page is the
//! page's own build, as the wheel installs it beside the plugin (`report_page`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use graph_ascend_service::handlers::{
    report_data_with_progress, ReportOptions, DEFAULT_REPORT_BYTES,
};
use graph_ascend_service::report_page::{has_page_assets, page_assets, report_html, utc_now};
use graph_ascend_service::State;

#[derive(clap::Args)]
#[command(after_help = "\
The report holds the page itself (its drawing code and styles), the grouped diagnosis, the root \
view and each top-level module opened, every path to a source of the shown step and rank laid out \
in advance, the details of the nodes it shows, search among them, and where it came from. What \
did not fit its size bound, and what a report never holds (other steps and ranks, other \
expansions, matching, filters), is listed in the report. See docs/report.md.

The page's built assets are looked for in --assets, then where the graph-ascend wheel installs \
them (the graph_ascend_tb package's static/ folder beside this binary), then in the source \
checkout this binary was built in (python_shim/graph_ascend_tb/static, made by `make frontend`).")]
pub struct ReportArgs {
    /// A .vis.db (a compare, or a single graph).
    file: PathBuf,
    /// The HTML file to write (whole: it appears only when complete); an existing file is never
    /// replaced.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// The step shown (default: the diagnosis's step, else the file's first).
    #[arg(long)]
    step: Option<i32>,
    /// The rank shown (default: the rank of the diagnosis's first source, else the file's first).
    #[arg(long)]
    rank: Option<i32>,
    /// Leave out stacks and paths (they can name private folders): no stack in the details, the
    /// file named without its folder.
    #[arg(long)]
    no_paths: bool,
    /// The folder of the page's build (index.html and assets/).
    #[arg(long, value_name = "DIR")]
    assets: Option<PathBuf>,
    /// About how many MB the report's data may take (the page adds about 0.15 MB).
    #[arg(long, default_value_t = DEFAULT_REPORT_BYTES >> 20)]
    max_mb: usize,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    if args.output.symlink_metadata().is_ok() {
        bail!(
            "{} exists; the report never replaces a file: name another with -o",
            args.output.display()
        );
    }
    let assets_dir = find_assets(args.assets.as_deref())?;
    let assets = page_assets(&assets_dir)?;
    let file = args
        .file
        .canonicalize()
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.ends_with(".vis.db"))
        .with_context(|| format!("{} is not a .vis.db file", args.file.display()))?
        .to_owned();
    let tag = name.trim_end_matches(".vis.db").to_owned();
    let run = if args.no_paths {
        "report".to_owned()
    } else {
        file.parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty() && !n.starts_with('.'))
            .unwrap_or("report")
            .to_owned()
    };
    // A catalog of this file only: a link to it in a folder of its own, removed on the way out,
    // on Ctrl-C or SIGTERM too, and by the next report when this one was killed outright.
    let temp_root = std::env::temp_dir();
    graph_ascend_visdb::stale::remove_stale(&temp_root, TEMP_FOLDER_PREFIX);
    let logdir = tempfile::Builder::new()
        .prefix(&format!(
            "{TEMP_FOLDER_PREFIX}{}.",
            graph_ascend_visdb::stale::owner_tag()
        ))
        .tempdir_in(&temp_root)
        .context("cannot create a temporary folder")?;
    crate::interrupt::remove_on_signal(logdir.path());
    let run_dir = logdir.path().join(&run);
    std::fs::create_dir(&run_dir).context("cannot create a temporary folder")?;
    std::os::unix::fs::symlink(&file, run_dir.join(&name))
        .context("cannot link the file into a temporary folder")?;
    hold_for_tests("data");
    let state = State::new(logdir.path().to_path_buf());
    let options = ReportOptions {
        step: args.step,
        rank: args.rank,
        no_paths: args.no_paths,
        max_bytes: args.max_mb.saturating_mul(1 << 20),
        source: if args.no_paths {
            name.clone()
        } else {
            file.display().to_string()
        },
        tool: format!("graph-ascend {}", env!("CARGO_PKG_VERSION")),
        created: utc_now(),
    };
    // A bar on a terminal (as convert's): what is being made, done of all; silent otherwise.
    let bar = std::io::stderr().is_terminal().then(|| {
        let pb = indicatif::ProgressBar::new(1);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "[Report] {bar:40} {pos}/{len} [{elapsed_precise}] {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb.enable_steady_tick(std::time::Duration::from_millis(250));
        pb
    });
    let progress = |what: &str, done: usize, total: usize| {
        if let Some(pb) = &bar {
            if pb.message() != what {
                pb.set_message(what.to_owned());
            }
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        }
    };
    let data = report_data_with_progress(&state, &run, &tag, &options, &progress);
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    let data = data.map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let html = report_html(&assets, &data.json, &format!("GRAPH_ASCEND report: {name}"));
    crate::write_new::write_new(&args.output, html.as_bytes(), ".html.tmp", |file| {
        if std::env::var_os(HOLD_FOR_TESTS).is_some() {
            file.sync_all()?;
            hold_for_tests("write");
        }
        Ok(())
    })?;
    let folder = logdir.path().to_path_buf();
    drop(state);
    drop(logdir);
    crate::interrupt::forget(&folder);
    eprintln!(
        "wrote {} ({:.1} MB): {} views laid out, details of {} nodes{}",
        args.output.display(),
        html.len() as f64 / 1e6,
        data.views,
        data.details,
        if data.left_out.is_empty() {
            String::new()
        } else {
            format!("; left out: {}", data.left_out.join("; "))
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The prefix of the temporary folder of a report (in the temp dir), followed by this
/// process's `<host>.<pid>.` tag so that a killed report's folder is found and removed
/// ([`graph_ascend_visdb::stale`]).
const TEMP_FOLDER_PREFIX: &str = "graph-ascend-report-";

/// For the tests of an interrupted report (`tests/report.rs`): with this variable set to
/// `data`, the report stops once its temporary folder is made; set to `write`, after writing
/// the first half of the file under its temporary name; and waits there to be killed.
const HOLD_FOR_TESTS: &str = "GRAPH_ASCEND_TEST_HOLD_REPORT";

/// Waits for ever when [`HOLD_FOR_TESTS`] names `point`.
fn hold_for_tests(point: &str) {
    if std::env::var_os(HOLD_FOR_TESTS).is_some_and(|v| v == point) {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    }
}

/// The page's build: `--assets`, else the wheel's (beside this binary), else the source
/// checkout's; an error naming where it looked and how to get it.
pub fn find_assets(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_path_buf());
    }
    let mut tried = Vec::new();
    if let Ok(exe) = std::env::current_exe().and_then(|p| p.canonicalize()) {
        if let Some(bin) = exe.parent() {
            // The wheel: <prefix>/bin/graph-ascend and <prefix>/lib/pythonX.Y/site-packages/graph_ascend_tb/static.
            let lib = bin.join("../lib");
            if let Ok(entries) = std::fs::read_dir(&lib) {
                for entry in entries.flatten() {
                    tried.push(entry.path().join("site-packages/graph_ascend_tb/static"));
                }
            } else {
                tried.push(lib.join("pythonX.Y/site-packages/graph_ascend_tb/static"));
            }
            // A source checkout: target/release/graph-ascend.
            tried.push(bin.join("../../python_shim/graph_ascend_tb/static"));
        }
    }
    if let Some(found) = tried.iter().find(|d| has_page_assets(d)) {
        return Ok(found.clone());
    }
    let looked: Vec<String> = tried.iter().map(|d| d.display().to_string()).collect();
    bail!(
        "the page's built assets (index.html and assets/) are not found; looked in: {}. They come \
         with the graph-ascend wheel (pip install graph-ascend); in a source checkout, build them \
         with `make frontend` (needs Node.js and npm); or point at a build with --assets DIR",
        looked.join(", ")
    )
}

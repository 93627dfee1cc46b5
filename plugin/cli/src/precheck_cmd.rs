//! `graph-ascend precheck`: every API call of a tensor dump replayed on the CPU from its own
//! inputs (plugin/replay), judged against the exact result; the target's and, when given, the
//! golden's run, their calls paired by name. Exit status 1 when a call fails, 2 on an error.
//!
//! Takes `-tp`/`-gp` as `convert` does (msprobe's single-dash words), one dump folder, or a
//! compare `.vis.db` (its nodes point at both runs' dumps: [`inputs`]). With `-o DIR` it writes
//! msprobe's CSV files ([`msprobe_csv`]) and ours ([`verdict_csv`]).

mod api_filter;
mod graph_replay;
mod inputs;
mod msprobe_csv;
mod text;
mod verdict_csv;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use graph_ascend_dump::Confine;
use graph_ascend_replay::{replay_dump_where, with_workers, Status};

use api_filter::ApiFilter;
use graph_replay::{GraphReplay, Run};
use inputs::{DumpRoot, RunSource};

/// Arguments as typed (see `graph-ascend precheck --help`).
#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct PrecheckArgs {
    /// -tp TARGET [-gp GOLDEN] | FILE.vis.db | DUMP, [--dump-root OLD=NEW] [--api PATTERN]
    /// [--workers N] [-o DIR] [--json] [--all] [--progress].
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

#[derive(Parser, Debug)]
#[command(
    name = "graph-ascend precheck",
    about = "Replay every API call of tensor dumps on the CPU from its own inputs and judge its outputs (exit status 1 when a call fails, 2 on an error)."
)]
struct Flags {
    /// A compare `.vis.db` of tensor dumps, or a dump folder (a rank folder with dump.json, or a
    /// folder with one below it).
    #[arg(value_name = "VISDB_OR_DUMP")]
    input: Option<PathBuf>,
    /// Target dump folder (as `convert -tp`), or a `.vis.db`.
    #[arg(long = "target_path", value_name = "TARGET")]
    target_path: Option<PathBuf>,
    /// Golden dump folder (as `convert -gp`).
    #[arg(long = "golden_path", value_name = "GOLDEN")]
    golden_path: Option<PathBuf>,
    /// A `.vis.db`'s `dump_data_dir` under OLD is read under NEW (the dumps moved since the
    /// conversion); repeatable, the longest OLD wins.
    #[arg(long = "dump-root", value_name = "OLD=NEW")]
    dump_root: Vec<String>,
    /// Only the records whose name matches: a glob over the whole name when it holds `*` or `?`
    /// (`Functional.linear.*`), else a substring (`softmax.2.`).
    #[arg(long, value_name = "PATTERN")]
    api: Option<String>,
    /// Replay on N threads (default: one a core).
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Write msprobe's accuracy_checking_result/details CSV files and ours into DIR.
    #[arg(short = 'o', long = "output_path", value_name = "DIR")]
    output_path: Option<PathBuf>,
    /// JSON on stdout (every call, both sets of numbers, the pairs) instead of text.
    #[arg(long)]
    json: bool,
    /// Text: list every replayed call, not only the failing ones.
    #[arg(long)]
    all: bool,
    /// Progress on stderr as lines even when it is not a terminal (a terminal gets a bar).
    #[arg(long)]
    progress: bool,
}

fn normalize(args: &[String]) -> Vec<String> {
    let mut out = vec!["graph-ascend precheck".to_string()];
    for a in args {
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) if !f.starts_with("--") => (f, Some(v)),
            _ => (a.as_str(), None),
        };
        let long = match flag {
            "-tp" => Some("--target_path"),
            "-gp" => Some("--golden_path"),
            "-h" => Some("--help"),
            _ => None,
        };
        out.push(match (long, value) {
            (Some(l), Some(v)) => format!("{l}={v}"),
            (Some(l), None) => l.to_string(),
            (None, _) => a.clone(),
        });
    }
    out
}

pub fn run(args: PrecheckArgs) -> anyhow::Result<ExitCode> {
    let flags = match Flags::try_parse_from(normalize(&args.args)) {
        Ok(f) => f,
        Err(e) => {
            let _ = e.print();
            return Ok(ExitCode::from(if e.use_stderr() { 2 } else { 0 }));
        }
    };
    let roots = flags
        .dump_root
        .iter()
        .map(|r| DumpRoot::parse(r))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let first = flags
        .target_path
        .clone()
        .or(flags.input.clone())
        .context("name a compare .vis.db, a dump folder, or -tp TARGET [-gp GOLDEN]")?;
    let pairings = if inputs::is_visdb(&first) {
        if flags.golden_path.is_some() {
            anyhow::bail!("a .vis.db names both runs itself: -gp is for dump folders");
        }
        inputs::from_visdb(&first, &roots)?
    } else {
        inputs::from_folders(&first, flags.golden_path.as_deref())?
    };
    if pairings.is_empty() {
        anyhow::bail!("{}: no target graph to replay", first.display());
    }
    let filter = ApiFilter::new(flags.api.as_deref());
    let progress = Progress::new(flags.progress);
    let mut graphs = Vec::new();
    for mut pairing in pairings {
        let label = pairing.label.clone();
        let target = replay_run(
            &pairing.target,
            label.as_deref(),
            &filter,
            flags.workers,
            &progress,
        )?;
        let golden = match pairing.golden.take() {
            Some(g) => {
                let run = replay_run(&g, label.as_deref(), &filter, flags.workers, &progress)?;
                pairing.golden = Some(g);
                Some(run)
            }
            None => None,
        };
        graphs.push(GraphReplay {
            pairing,
            target,
            golden,
        });
    }
    if let Some(dir) = &flags.output_path {
        write_csv_files(dir, &graphs)?;
    }
    let failed = graphs
        .iter()
        .flat_map(|g| g.runs())
        .any(|r| r.calls.iter().any(|c| c.status == Status::Fail));
    let mut out = std::io::stdout().lock();
    if flags.json {
        serde_json::to_writer_pretty(&mut out, &text::json(&graphs))?;
        writeln!(out)?;
    } else {
        for g in &graphs {
            text::write(&mut out, g, flags.all)?;
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Replays one run's records (those of its graph's nodes, from a `.vis.db`) that the filter keeps.
fn replay_run(
    source: &RunSource,
    label: Option<&str>,
    filter: &ApiFilter,
    workers: Option<usize>,
    progress: &Progress,
) -> anyhow::Result<Run> {
    let keep =
        |name: &str| filter.keeps(name) && source.nodes.as_ref().is_none_or(|n| n.contains(name));
    let title = match label {
        Some(l) => format!("{} ({l})", source.role.word()),
        None => source.role.word().to_string(),
    };
    let bar = progress.start(&title);
    let report = |done: usize, total: usize| progress.step(bar.as_ref(), &title, done, total);
    let calls = with_workers(workers, || {
        replay_dump_where(&source.dump, &Confine::anywhere(), &keep, &report)
    })?
    .with_context(|| format!("cannot replay {}", source.dump.dump_json.display()))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(Run {
        role: source.role,
        dump: source.dump.clone(),
        calls,
    })
}

/// msprobe's files per run (in `DIR`, or `DIR/target` and `DIR/golden` for a pair, under
/// `step{S}_rank{R}` when a `.vis.db` holds several graphs), ours once in `DIR`.
fn write_csv_files(dir: &std::path::Path, graphs: &[GraphReplay]) -> anyhow::Result<()> {
    let [year, month, day, hour, minute, second] = graph_ascend_convert::utc_now_fields();
    let stamp = format!("{year:04}{month:02}{day:02}{hour:02}{minute:02}{second:02}");
    let mut ours = Vec::new();
    for g in graphs {
        let base = dir.join(&g.pairing.subdir);
        for r in g.runs() {
            let run_dir = if g.golden.is_some() {
                base.join(r.role.word())
            } else {
                base.clone()
            };
            msprobe_csv::write(&run_dir, &stamp, &r.calls)?;
        }
        ours.push((g.pairing.label.clone().unwrap_or_default(), g.pairs()));
    }
    verdict_csv::write(dir, &stamp, &ours)?;
    Ok(())
}

/// Progress on stderr: a bar on a terminal, lines with `--progress` elsewhere, else nothing.
struct Progress {
    bar: bool,
    lines: bool,
}

impl Progress {
    fn new(lines: bool) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        Progress {
            bar: terminal,
            lines: lines && !terminal,
        }
    }

    fn start(&self, title: &str) -> Option<indicatif::ProgressBar> {
        self.bar.then(|| {
            let pb = indicatif::ProgressBar::new(1);
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "[Precheck] {prefix} {bar:40} {pos}/{len} records [{elapsed_precise}]",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            pb.set_prefix(title.to_string());
            pb
        })
    }

    fn step(&self, bar: Option<&indicatif::ProgressBar>, title: &str, done: usize, total: usize) {
        if let Some(pb) = bar {
            pb.set_length(total as u64);
            // Reports come from several threads: the bar never goes back.
            pb.set_position((done as u64).max(pb.position()));
        }
        if self.lines && (done == total || done.is_multiple_of(16)) {
            eprintln!("{title}: {done}/{total} records");
        }
    }
}

//! `graph-ascend precheck`: every API call of a tensor dump replayed on the CPU from its own
//! inputs (plugin/replay), judged against the exact result; the target's and, when given, the
//! golden's run. Exit status 1 when a call fails.
//!
//! Takes `-tp`/`-gp` as `convert` does (msprobe's single-dash words), or one dump folder.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use graph_ascend_dump::Confine;
use graph_ascend_replay::{replay_dump, CallReport, DumpRun, Status};

/// Arguments as typed (see `graph-ascend precheck --help`).
#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct PrecheckArgs {
    /// -tp TARGET [-gp GOLDEN] [--api NAME] [--json] [--all] [--progress], or one dump folder.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

#[derive(Parser, Debug)]
#[command(
    name = "graph-ascend precheck",
    about = "Replay every API call of tensor dumps on the CPU from its own inputs and judge its outputs (exit status 1 when a call fails)."
)]
struct Flags {
    /// A dump folder (a rank folder with dump.json, or a folder with one below it).
    #[arg(value_name = "DUMP")]
    dump: Option<PathBuf>,
    /// Target dump folder (as `convert -tp`).
    #[arg(long = "target_path", value_name = "TARGET")]
    target_path: Option<PathBuf>,
    /// Golden dump folder (as `convert -gp`).
    #[arg(long = "golden_path", value_name = "GOLDEN")]
    golden_path: Option<PathBuf>,
    /// Only the calls whose name contains this (`Functional.linear`, `softmax.2.`).
    #[arg(long)]
    api: Option<String>,
    /// JSON on stdout (every call, both sets of numbers) instead of text.
    #[arg(long)]
    json: bool,
    /// Text: list every replayed call, not only the failing ones.
    #[arg(long)]
    all: bool,
    /// Progress on stderr even when it is not a terminal.
    #[arg(long)]
    progress: bool,
}

fn normalize(args: &[String]) -> Vec<String> {
    let mut out = vec!["graph-ascend precheck".to_string()];
    for a in args {
        out.push(match a.as_str() {
            "-tp" => "--target_path".into(),
            "-gp" => "--golden_path".into(),
            "-h" => "--help".into(),
            _ => a.clone(),
        });
    }
    out
}

/// One run's replay.
struct Run {
    role: &'static str,
    dump: DumpRun,
    calls: Vec<CallReport>,
}

pub fn run(args: PrecheckArgs) -> anyhow::Result<ExitCode> {
    let flags = match Flags::try_parse_from(normalize(&args.args)) {
        Ok(f) => f,
        Err(e) => {
            let _ = e.print();
            return Ok(ExitCode::from(if e.use_stderr() { 2 } else { 0 }));
        }
    };
    let target = flags
        .target_path
        .clone()
        .or(flags.dump.clone())
        .context("name a dump folder (or -tp TARGET [-gp GOLDEN])")?;
    let mut folders = vec![("target", target)];
    if let Some(g) = flags.golden_path.clone() {
        folders.push(("golden", g));
    }
    let show_progress = flags.progress || std::io::stderr().is_terminal();
    let mut runs = Vec::new();
    for (role, folder) in folders {
        let dump = DumpRun::find(&folder)?;
        let progress = |done: usize, total: usize| {
            if show_progress && (done == total || done.is_multiple_of(16)) {
                eprint!("\r{role}: {done}/{total} records");
                if done == total {
                    eprintln!();
                }
            }
        };
        let calls = replay_dump(&dump, &Confine::anywhere(), flags.api.as_deref(), &progress)
            .with_context(|| format!("cannot replay {}", dump.dump_json.display()))?;
        runs.push(Run { role, dump, calls });
    }
    let failed = runs
        .iter()
        .any(|r| r.calls.iter().any(|c| c.status == Status::Fail));
    let mut out = std::io::stdout().lock();
    if flags.json {
        let doc = serde_json::json!({
            "runs": runs.iter().map(|r| serde_json::json!({
                "role": r.role,
                "dump": r.dump.dump_json,
                "summary": summary(&r.calls),
                "calls": r.calls,
            })).collect::<Vec<_>>(),
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        for r in &runs {
            write_text(&mut out, r, flags.all)?;
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Counts of one run: API forward calls, replayed, passed, failed, and the reasons of the rest.
fn summary(calls: &[CallReport]) -> serde_json::Value {
    let api: Vec<&CallReport> = calls.iter().filter(|c| is_api_forward(c)).collect();
    let pass = api.iter().filter(|c| c.status == Status::Pass).count();
    let fail = api.iter().filter(|c| c.status == Status::Fail).count();
    let reasons = |calls: &mut dyn Iterator<Item = &CallReport>| -> Vec<serde_json::Value> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for c in calls.filter(|c| c.status == Status::NotReplayed) {
            let r = c.reason.clone().unwrap_or_default();
            match counts.iter_mut().find(|(k, _)| *k == r) {
                Some((_, n)) => *n += 1,
                None => counts.push((r, 1)),
            }
        }
        counts
            .into_iter()
            .map(|(r, n)| serde_json::json!({"reason": r, "calls": n}))
            .collect()
    };
    serde_json::json!({
        "api_forward_calls": api.len(),
        "replayed": pass + fail,
        "pass": pass,
        "fail": fail,
        "not_replayed": reasons(&mut api.iter().copied()),
        "other_records": reasons(&mut calls.iter().filter(|c| !is_api_forward(c))),
        "records": calls.len(),
    })
}

/// An API call's forward record (not a module's, not a backward one).
fn is_api_forward(c: &CallReport) -> bool {
    !c.api.is_empty() && c.name.contains(".forward")
}

fn write_text(out: &mut impl Write, run: &Run, all: bool) -> anyhow::Result<()> {
    let s = summary(&run.calls);
    writeln!(
        out,
        "{}: {} — {} API calls (forward), {} replayed: {} pass, {} fail",
        run.role,
        run.dump.dump_json.display(),
        s["api_forward_calls"],
        s["replayed"],
        s["pass"],
        s["fail"]
    )?;
    for r in s["not_replayed"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "  not replayed ({} calls): {}",
            r["calls"],
            r["reason"].as_str().unwrap_or("")
        )?;
    }
    for r in s["other_records"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "  other records ({}): {}",
            r["calls"],
            r["reason"].as_str().unwrap_or("")
        )?;
    }
    let mut shown: Vec<&CallReport> = run
        .calls
        .iter()
        .filter(|c| c.status == Status::Fail || (all && c.status == Status::Pass))
        .collect();
    shown.sort_by_key(|c| c.status != Status::Fail);
    for c in shown {
        let tag = if c.status == Status::Fail {
            "FAIL"
        } else {
            "pass"
        };
        let dtype = c.ran_in.map(|d| d.to_string()).unwrap_or_default();
        writeln!(out, "  {tag} {} ({dtype})", c.name)?;
        for n in &c.notes {
            writeln!(out, "       note: {n}")?;
        }
        for o in &c.outputs {
            let m = &o.msprobe;
            writeln!(
                out,
                "       output {}: {}; msprobe: {} (cosine {}, max abs {}, RMSE {:.3e}, EB {:.4})",
                o.index,
                o.ours.why,
                m.status,
                m.cosine.map_or("-".into(), |c| format!("{c:.6}")),
                m.max_abs_err.map_or("-".into(), |e| format!("{e:.3e}")),
                m.rmse,
                m.error_balance,
            )?;
        }
    }
    Ok(())
}

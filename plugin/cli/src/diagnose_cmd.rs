//! `graph-ascend diagnose FILE.vis.db`: where a compare first went wrong, and
//! `graph-ascend export-csv FILE.vis.db`: every matched pair with its metrics as CSV.
//!
//! Both read the file only; the rules live in `graph_ascend_diagnose` (docs/diagnosis.md).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use graph_ascend_diagnose::dump_config::{self, DumpTask, Framework, Suspect, SuspectKind};
use graph_ascend_diagnose::{
    map_report, report, CompareFile, Diagnosis, LearnedTolerances, Options, Tolerance,
};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Faults (one line per call site), then the ranked sources with their reasons.
    Text,
    /// The whole diagnosis as JSON (`groups` and `sources`, at most N each).
    Json,
    /// One row per source, with its micro-batch and its fault (`group`, `fault`).
    Csv,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum DumpTaskArg {
    /// Task tensor, tensor.list: the suspects alone, with their tensors.
    Tensor,
    /// Task statistics, statistics.tensor_list: every call's statistics, the suspects' tensors.
    Statistics,
}

#[derive(clap::Args)]
#[command(after_help = "\
A node is a source when a weight or non-tensor argument differs (and its output with it), when \
its inputs agree with golden while its outputs jump above the noise of their dtypes, or when its \
outputs are far worse than its already differing inputs. When the inputs carry an error from \
upstream, an output's Max or Min counts only by the whole-tensor error it implies (divided by the \
tensor's dynamic range Norm/max|x|). Every step is judged; after the first step with a source, \
a weight that differs is inherited from the optimizer's update. Sources are listed step by step, \
forward first in execution order, then backward; the innermost culprit leads its enclosing \
modules. They are grouped into faults, one line per call site (module without its call index, \
API and its position among that API's calls in the module, pass) across micro-batches, ranks \
(those holding the same layers) and steps. The first inf/NaN of each rank is flagged on its own: \
the innermost node whose outputs hold inf/NaN while its activations are finite (an overflowing \
weight is named as its cause). Rules and tolerances: docs/diagnosis.md.

With --map, the divergence map instead of the list (see --map).

With --dump-config OUT.json, also msprobe's config.json for a second run that keeps the suspects' \
input and output tensors (the sources and their golden partners, each rank's first inf/NaN; \
without either, the first calls whose outputs differ beyond the noise) at level mix, in their \
steps and ranks: by default task tensor with the suspects in tensor.list (only they are dumped; \
convert builds the graph, precheck replays them); with --dump-task statistics, the statistics \
dump again with the suspects in statistics.tensor_list. Names msprobe would also match (it matches by substring) are listed. \
See docs/diagnosis.md, \"What to dump next\".

Exit status: 0 when no source is found, 1 when there are sources, 2 on error.")]
pub struct DiagnoseArgs {
    /// A compare .vis.db (ours or msprobe's).
    file: PathBuf,
    /// Only this step, judged alone (default: every step; the first with a source is shown).
    #[arg(long)]
    step: Option<i64>,
    /// Only this rank (default: all ranks of the step).
    #[arg(long)]
    rank: Option<i64>,
    /// Show at most N faults (groups) and N sources.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Override a dtype's tolerances: DTYPE=AGREE:JUMP, DTYPE one of float64, float32, float16,
    /// bfloat16 (relative errors; e.g. float32=1e-3:1e-2). Repeatable.
    #[arg(long = "tolerance", value_name = "DTYPE=AGREE:JUMP")]
    tolerances: Vec<String>,
    /// An output must be this many times worse than the inputs to be a jump.
    #[arg(long)]
    jump_ratio: Option<f64>,
    /// A node with differing inputs is a source when its outputs are this many times worse.
    #[arg(long)]
    amplify_ratio: Option<f64>,
    /// Learn the tolerance of each op kind (API, module class) and dtype from REF: a compare,
    /// made from other data or seeds, of a fault-free run at the target's dtype against the
    /// golden (e.g. GPU bf16 against GPU fp32). It measures precision noise; the learned
    /// tolerances replace the dtype table for the op kinds it holds (docs/diagnosis.md,
    /// "Tolerances from data").
    #[arg(long, value_name = "REF.vis.db")]
    reference: Option<PathBuf>,
    /// Judge with the dtype table only. By default, without --reference, the table is tightened
    /// per op kind where the compare's own noise is lower (never loosened).
    #[arg(long, conflicts_with = "reference")]
    fixed_tolerances: bool,
    /// Also write msprobe's config.json for a second run that dumps the suspects' tensors
    /// (never replaces a file).
    #[arg(long, value_name = "OUT.json", conflicts_with = "map")]
    dump_config: Option<PathBuf>,
    /// The dump that config asks for: `tensor` (task tensor, the suspects alone with their
    /// tensors: what `precheck` replays) or `statistics` (every call's statistics again, plus
    /// the suspects' tensors).
    #[arg(long, value_enum, requires = "dump_config", default_value_t = DumpTaskArg::Tensor)]
    dump_task: DumpTaskArg,
    /// The dump_path written into that config: where the second run dumps.
    #[arg(long, value_name = "DIR", requires = "dump_config", default_value = dump_config::DEFAULT_DUMP_PATH)]
    dump_path: String,
    #[command(flatten)]
    map: crate::map_cmd::MapArgs,
}

fn parse_tolerance(opts: &mut Options, spec: &str) -> anyhow::Result<()> {
    let bad =
        || format!("bad --tolerance {spec:?}: expected DTYPE=AGREE:JUMP, e.g. float32=1e-3:1e-2");
    let (dtype, values) = spec.split_once('=').with_context(bad)?;
    let (agree, jump) = values.split_once(':').with_context(bad)?;
    let (agree, jump): (f64, f64) = (
        agree.trim().parse().with_context(bad)?,
        jump.trim().parse().with_context(bad)?,
    );
    if !(agree >= 0.0 && jump >= agree) {
        anyhow::bail!("{}: need 0 <= AGREE <= JUMP", bad());
    }
    let slot = match dtype.trim() {
        "float64" => &mut opts.float64,
        "float32" => &mut opts.float32,
        "float16" => &mut opts.float16,
        "bfloat16" => &mut opts.bfloat16,
        other => anyhow::bail!("{}: unknown dtype {other:?}", bad()),
    };
    *slot = Tolerance { agree, jump };
    Ok(())
}

pub fn run(args: DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let mut opts = Options {
        step: args.step,
        rank: args.rank,
        ..Options::default()
    };
    for spec in &args.tolerances {
        parse_tolerance(&mut opts, spec)?;
    }
    if let Some(r) = args.jump_ratio {
        opts.jump_ratio = r;
    }
    if let Some(r) = args.amplify_ratio {
        opts.amplify_ratio = r;
    }
    if let Some(out) = &args.dump_config {
        if out.symlink_metadata().is_ok() {
            anyhow::bail!(
                "{} exists; graph-ascend never replaces a file: name another with --dump-config",
                out.display()
            );
        }
    }
    let file = CompareFile::open(&args.file)?;
    if let Some(reference) = &args.reference {
        opts.learned = Some(Arc::new(LearnedTolerances::from_reference(
            reference, &file,
        )?));
    }
    opts.tighten = !args.fixed_tolerances;
    if args.map.map {
        let (found, map) = crate::map_cmd::map_with_progress(&file, &opts, &args.map.options())?;
        let text = match args.format {
            Format::Text => map_report::text(&map),
            Format::Json => map_report::json(&map) + "\n",
            Format::Csv => map_report::csv(&map),
        };
        return finish(&text, &found);
    }
    let found = graph_ascend_diagnose::diagnose(&file, &opts)?;
    if let Some(out) = &args.dump_config {
        let task = match args.dump_task {
            DumpTaskArg::Tensor => DumpTask::Tensor,
            DumpTaskArg::Statistics => DumpTask::Statistics,
        };
        write_dump_config(&file, &opts, &found, out, task, &args.dump_path)?;
    }
    let text = match args.format {
        Format::Text => report::text(&found, args.top),
        Format::Json => report::json(&found, args.top) + "\n",
        Format::Csv => report::csv(&found, args.top),
    };
    finish(&text, &found)
}

/// How many calls per rank a config names when the diagnosis found no source and no inf/NaN:
/// the first that differ beyond the noise, in execution order.
const CALLS_WITHOUT_SOURCE: usize = 5;

/// Writes msprobe's config.json keeping the suspects' tensors to `out` (a new file), and says on
/// standard error what it will dump.
fn write_dump_config(
    file: &CompareFile,
    opts: &Options,
    found: &Diagnosis,
    out: &std::path::Path,
    task: DumpTask,
    dump_path: &str,
) -> anyhow::Result<()> {
    let mut suspects = dump_config::suspects(found);
    let without_source = suspects.is_empty();
    let mut graphs: Vec<(i64, i64)> = Vec::new();
    if without_source {
        for &rank in &found.ranks {
            graphs.push((found.step, rank));
            let data = file.load(found.step, rank)?;
            let differs = graph_ascend_diagnose::differing_nodes(file.mode(), opts, &data);
            let first = data
                .npu
                .execution_order()
                .into_iter()
                .filter(|&i| differs.get(i as usize).copied().unwrap_or(false))
                .filter(|&i| data.npu.nodes[i as usize].children.is_empty())
                .take(CALLS_WITHOUT_SOURCE);
            for i in first {
                let node = &data.npu.nodes[i as usize];
                suspects.push(Suspect {
                    step: found.step,
                    rank,
                    node: data.npu.name(i).to_string(),
                    direction: node.direction,
                    kind: SuspectKind::Differs,
                });
            }
        }
    } else {
        for s in &suspects {
            if !graphs.contains(&(s.step, s.rank)) {
                graphs.push((s.step, s.rank));
            }
        }
    }
    let mut names: Vec<String> = Vec::new();
    let mut framework = None;
    for &(step, rank) in &graphs {
        let data = file.load(step, rank)?;
        for side in [&data.npu, &data.bench] {
            names.extend(side.names().iter().map(str::to_string));
        }
        framework = framework
            .or_else(|| Framework::of_names(data.npu.names().iter()))
            .or(match data.npu.torch {
                Some(true) => Some(Framework::PyTorch),
                Some(false) => Some(Framework::MindSpore),
                None => None,
            });
    }
    let config = dump_config::dump_config(
        task,
        &suspects,
        names.iter().map(String::as_str),
        &file.ranks(),
        dump_path,
    )
    .map_err(|e| {
        let hint = match e {
            dump_config::DumpConfigError::NoSuspect => {
                ". A fault below the noise is replayable only from a tensor dump of every call \
                 (task \"tensor\", level \"mix\", one step)"
            }
            dump_config::DumpConfigError::NothingNamed(_) => "",
        };
        anyhow::anyhow!(
            "no dump config written for {}: {e}{hint}",
            file.path().display()
        )
    })?;
    let mut text = serde_json::to_string_pretty(&config.config)
        .context("cannot write the dump config as JSON")?;
    text.push('\n');
    crate::write_new::write_new(out, text.as_bytes(), ".json.tmp", |_| Ok(()))?;
    let list = |what: &str, v: &[i64]| {
        if v.is_empty() {
            format!("every {what}")
        } else {
            let v: Vec<String> = v.iter().map(i64::to_string).collect();
            format!("{what} {}", v.join(", "))
        }
    };
    eprintln!(
        "wrote {}: msprobe config for a {} run keeping the tensors of {} call(s) ({}) in {}, {}",
        out.display(),
        framework.map_or("PyTorch or MindSpore", Framework::name),
        config.intended.len(),
        if without_source {
            "no source: the first calls whose outputs differ beyond the noise"
        } else {
            "the sources, their golden partners, the first inf/NaN"
        },
        list("step", &config.steps),
        list("rank", &config.ranks),
    );
    if !config.also_matched.is_empty() {
        eprintln!(
            "  msprobe matches names by substring: it also keeps the tensors of {}",
            config.also_matched.join(", ")
        );
    }
    let module = |n: &String| n.starts_with("Module.") || n.starts_with("Cell.");
    if task == DumpTask::Tensor && config.intended.iter().any(module) {
        eprintln!(
            "  a module in tensor.list also dumps every call inside it (msprobe's mix scope)"
        );
    }
    if !config.left_out.is_empty() {
        eprintln!(
            "  left out (not a call msprobe dumps by name): {}",
            config.left_out.join(", ")
        );
    }
    Ok(())
}

/// Writes `text` and gives the exit status: 1 when `found` has sources.
fn finish(text: &str, found: &graph_ascend_diagnose::Diagnosis) -> anyhow::Result<ExitCode> {
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("cannot write to stdout")?;
    Ok(if found.sources.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(clap::Args)]
pub struct ExportCsvArgs {
    /// A compare .vis.db (ours or msprobe's).
    file: PathBuf,
    /// Output file (default: standard output). Written whole or not at all.
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// Only this step (default: all).
    #[arg(long)]
    step: Option<i64>,
    /// Only this rank (default: all).
    #[arg(long)]
    rank: Option<i64>,
}

pub fn run_export(args: ExportCsvArgs) -> anyhow::Result<ExitCode> {
    let file = CompareFile::open(&args.file)?;
    match &args.out {
        Some(dest) => {
            let rows =
                graph_ascend_diagnose::export::write_csv_file(&file, args.step, args.rank, dest)?;
            eprintln!("wrote {rows} rows to {}", dest.display());
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            graph_ascend_diagnose::export::write_csv(&file, args.step, args.rank, &mut w)?;
            w.flush().context("cannot write to stdout")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `graph-ascend trend -t TARGET -g GOLDEN`: two runs' msprobe monitor output side by side,
//! the first step and module where they part, and a summary per module (docs/monitor.md).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use graph_ascend_monitor::{analyze, report, Rule, Run};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// The first divergence, then one line per module or parameter.
    Text,
    /// The whole analysis as JSON.
    Json,
    /// One row per module or parameter (`first_divergence` 1 on the one named).
    Csv,
}

#[derive(clap::Args)]
#[command(after_help = "\
A run is msprobe monitor output: a folder of v1 `<time>-rank<R>-<uid>` folders (TrainerMon \
CSVs), of v2 `rank_<R>` folders (TrainerMonitorV2 CSVs), one such rank folder, or a \
`*.trend.db` (msprobe data2db). Ranks pair by number, modules and parameters by name (also \
through msprobe's name squashing), steps by number; each cell keeps the worst rank.

Per step, every module's forward (its outputs against its inputs), backward (the gradient of \
its inputs against that of its outputs), and every parameter's gradient reduction and update \
is a unit: its growth is how much more its output differs between the runs than its input. \
The first divergence is the earliest step, and in it the earliest unit (forward in execution \
order, backward, weight gradients, optimizer), whose growth is above the noise learned from \
its own previous steps and stays above for most of the next steps. --reference-target/-golden \
(two correct runs) raise the threshold to the growth of their natural drift. Rule and \
numbers: docs/monitor.md.

Exit status: 0 when the runs do not part, 1 when a first divergence is found, 2 on error.")]
pub struct TrendArgs {
    /// The target run's monitor output.
    #[arg(short = 't', long = "target")]
    target: PathBuf,
    /// The golden run's monitor output.
    #[arg(short = 'g', long = "golden")]
    golden: PathBuf,
    /// A correct run whose difference from --reference-golden is natural drift (another seed or
    /// numerics).
    #[arg(long, requires = "reference_golden")]
    reference_target: Option<PathBuf>,
    /// The golden of the reference pair.
    #[arg(long, requires = "reference_target")]
    reference_golden: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// The statistic compared: a column of the monitor's ops (norm, max, min, mean, ...).
    #[arg(long, default_value = "norm")]
    statistic: String,
    /// Steps of history the noise is learned from.
    #[arg(long, default_value_t = Rule::default().window)]
    window: usize,
    /// The threshold is the history's median plus K times its robust spread.
    #[arg(long, default_value_t = Rule::default().k)]
    k: f64,
    /// A divergence stays: at least --stay-needed of the --stay steps from it exceed too.
    #[arg(long, default_value_t = Rule::default().stay)]
    stay: usize,
    /// See --stay.
    #[arg(long, default_value_t = Rule::default().stay_needed)]
    stay_needed: usize,
}

pub fn run(args: TrendArgs) -> anyhow::Result<ExitCode> {
    if args.stay_needed == 0 || args.stay_needed > args.stay {
        anyhow::bail!("need 1 <= --stay-needed <= --stay");
    }
    if args.window == 0 || args.k.is_nan() || args.k < 0.0 {
        anyhow::bail!("need --window >= 1 and --k >= 0");
    }
    let rule = Rule {
        window: args.window,
        min_history: Rule::default().min_history.min(args.window),
        k: args.k,
        stay: args.stay,
        stay_needed: args.stay_needed,
        ..Rule::default()
    };
    let target = Run::open(&args.target)?;
    let golden = Run::open(&args.golden)?;
    let reference = match (&args.reference_target, &args.reference_golden) {
        (Some(a), Some(b)) => Some((Run::open(a)?, Run::open(b)?)),
        _ => None,
    };
    let ranks = target.ranks.len();
    let mut done = 0;
    let trend = analyze(
        &target,
        &golden,
        reference.as_ref().map(|(a, b)| (a, b)),
        &args.statistic,
        &rule,
        |rank| {
            done += 1;
            if ranks > 8 {
                eprintln!("rank {rank} compared ({done}/{ranks})");
            }
        },
    )?;
    let text = match args.format {
        Format::Text => report::text(&trend),
        Format::Json => report::json(&trend) + "\n",
        Format::Csv => report::csv(&trend),
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("cannot write to stdout")?;
    Ok(if trend.first_divergence.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

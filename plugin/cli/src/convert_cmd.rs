//! `graph-ascend convert`: msprobe `graph_visualize`'s command line.
//!
//! msprobe spells its flags as single-dash words (`-tp`, `-gp`, `-lm`, `-oc`, `-fm`,
//! `-progress_log`), which clap cannot express (a short flag is one character, and `--tp` is a
//! different msprobe flag). The subcommand therefore takes its arguments raw, rewrites msprobe's
//! single-dash words to their long forms, and parses the result with [`Flags`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use graph_ascend_convert::{
    convert, convert_shard, ConvertOptions, LayerMapping, Progress, ShardSpec,
};

/// Arguments as typed (see `graph-ascend convert --help`).
#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub struct ConvertArgs {
    /// msprobe graph_visualize flags: -tp TARGET [-gp GOLDEN] -o OUT [-lm [YAML]] [-oc] [-fm]
    /// [-progress_log] [-tensor_log] (long forms --target_path, --golden_path, … also accepted).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

/// The flags of `msprobe graph_visualize`.
#[derive(Parser, Debug)]
#[command(
    name = "graph-ascend convert",
    about = "Convert msprobe dump folders into a .vis.db (the flags of msprobe graph_visualize)."
)]
pub struct Flags {
    /// Target ("NPU") dump folder: a rank folder, a step folder of ranks, or a folder of steps.
    #[arg(long = "target_path", value_name = "TARGET")]
    target_path: PathBuf,
    /// Golden ("Bench") dump folder, same layout: compare mode.
    #[arg(long = "golden_path", value_name = "GOLDEN")]
    golden_path: Option<PathBuf>,
    /// Output folder (created if missing).
    #[arg(short = 'o', long = "output_path", value_name = "OUT")]
    output_path: PathBuf,
    /// Layer mapping: a YAML file, or bare for structural matching.
    #[arg(long = "layer_mapping", num_args = 0..=1, default_missing_value = "", value_name = "YAML")]
    layer_mapping: Option<String>,
    /// Mark overflowing nodes (inf/nan) with overflow levels.
    #[arg(long = "overflow_check")]
    overflow_check: bool,
    /// Fuzzy matching: APIs paired by name and order inside matched modules.
    #[arg(long = "fuzzy_match")]
    fuzzy_match: bool,
    /// Per-tensor compare logs (accepted for compatibility).
    #[arg(long = "is_print_compare_log")]
    is_print_compare_log: bool,
    /// Machine-readable progress lines (JSON, one per line, on stderr).
    #[arg(long = "is_print_progress_log")]
    is_print_progress_log: bool,
    /// Parallel merge: number of ranks (one value for a build, two for a compare: target, golden).
    #[arg(long = "rank_size", num_args = 1..)]
    rank_size: Vec<i64>,
    /// Tensor-parallel size (with --rank_size).
    #[arg(long = "tp", num_args = 1..)]
    tp: Vec<i64>,
    /// Pipeline-parallel size (with --rank_size).
    #[arg(long = "pp", num_args = 1..)]
    pp: Vec<i64>,
    /// Virtual pipeline chunks (default 1; needs --pp of at least 2).
    #[arg(long = "vpp", num_args = 1..)]
    vpp: Vec<i64>,
    /// Megatron rank order (default tp-cp-ep-dp-pp).
    #[arg(long = "order", num_args = 1..)]
    order: Vec<String>,
    /// `db` (default) or `json` (merged builds: step<S>/rank<R>/{construct,dump,stack}.json).
    #[arg(long = "file_type", default_value = "db", value_parser = ["db", "json"])]
    file_type: String,
    /// Convert only shard I of N of the work units (the (step, rank) graphs; with --rank_size, the
    /// steps) into a part in OUT, for `graph-ascend gather` (docs/scale.md). Bare: I and N from the job array
    /// (SLURM_ARRAY_TASK_ID/_MIN/_STEP/_COUNT, or JOB_COMPLETION_INDEX with --shard-count).
    #[arg(long = "shard", num_args = 0..=1, default_missing_value = "", value_name = "I/N")]
    shard: Option<String>,
    /// The shard count N for a bare --shard (needed in a Kubernetes Indexed Job: its completions).
    #[arg(long = "shard-count", value_name = "N")]
    shard_count: Option<u32>,
}

/// msprobe's single-dash words → long forms.
const SINGLE_DASH: [(&str, &str); 8] = [
    ("-tp", "--target_path"),
    ("-gp", "--golden_path"),
    ("-lm", "--layer_mapping"),
    ("-oc", "--overflow_check"),
    ("-fm", "--fuzzy_match"),
    ("-progress_log", "--is_print_progress_log"),
    ("-tensor_log", "--is_print_compare_log"),
    ("-h", "--help"),
];

/// Rewrites msprobe's single-dash words (also in `-tp=X` form) to their long forms.
pub fn normalize(args: &[String]) -> Vec<String> {
    let mut out = vec!["graph-ascend convert".to_string()];
    for a in args {
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) if !f.starts_with("--") => (f, Some(v)),
            _ => (a.as_str(), None),
        };
        match SINGLE_DASH.iter().find(|(s, _)| *s == flag) {
            Some((_, long)) => match value {
                Some(v) => out.push(format!("{long}={v}")),
                None => out.push(long.to_string()),
            },
            None => out.push(a.clone()),
        }
    }
    out
}

pub fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    let flags = match Flags::try_parse_from(normalize(&args.args)) {
        Ok(f) => f,
        Err(e) => {
            let _ = e.print();
            return Ok(ExitCode::from(if e.use_stderr() { 2 } else { 0 }));
        }
    };
    let merging = !flags.rank_size.is_empty() || !flags.tp.is_empty() || !flags.pp.is_empty();
    let parallel = if merging {
        match graph_ascend_convert::parallel::from_flags(
            &flags.rank_size,
            &flags.tp,
            &flags.pp,
            &flags.vpp,
            &flags.order,
            flags.golden_path.is_some(),
        ) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("graph-ascend: error: {e}");
                return Ok(ExitCode::from(1));
            }
        }
    } else {
        if !flags.vpp.is_empty() || !flags.order.is_empty() {
            eprintln!("graph-ascend: warning: --vpp/--order only apply with --rank_size/--tp/--pp");
        }
        Vec::new()
    };
    let json_output = flags.file_type == "json";
    if json_output && !merging {
        eprintln!("graph-ascend: warning: --file_type json only applies to parallel merge; writing a .vis.db");
    }
    let _ = flags.is_print_compare_log;
    let shard = match shard_of(flags.shard.as_deref(), flags.shard_count) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("graph-ascend: error: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    let opts = ConvertOptions {
        target: flags.target_path,
        golden: flags.golden_path,
        output: flags.output_path,
        layer_mapping: match flags.layer_mapping.as_deref() {
            None => LayerMapping::None,
            Some("") => LayerMapping::Bare,
            Some(p) => LayerMapping::File(PathBuf::from(p)),
        },
        overflow_check: flags.overflow_check,
        fuzzy_match: flags.fuzzy_match,
        parallel,
        json_output: json_output && merging,
        // The command line reads wherever the user points it.
        confine: Default::default(),
    };
    let bar = (!flags.is_print_progress_log && std::io::stderr().is_terminal()).then(|| {
        let pb = indicatif::ProgressBar::new(1);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "[Graph] {bar:40} {percent:>3}% [{elapsed_precise}] {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb
    });
    let log = flags.is_print_progress_log;
    let report = |p: &Progress| {
        if log {
            eprintln!("{}", p.json_line());
        } else if let Some(w) = p.message.strip_prefix("warning: ") {
            // The converter's warnings (e.g. an unusable -lm file) ride on progress messages.
            let print = || eprintln!("graph-ascend: warning: {w}");
            match &bar {
                Some(pb) => pb.suspend(print),
                None => print(),
            }
        }
        if let Some(pb) = &bar {
            pb.set_length(p.total);
            // Reports come from several threads: the bar never goes back.
            pb.set_position(p.done.max(pb.position()));
            pb.set_message(bar_message(p));
        }
    };
    let result = match shard {
        None => convert(&opts, &report),
        Some(s) => convert_shard(
            &opts,
            s,
            &report,
            &std::sync::atomic::AtomicBool::new(false),
        ),
    };
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    Ok(written(result))
}

/// The path written on stdout (status 0), or the error on stderr (status 1): what `convert` and
/// `gather` answer.
pub fn written(result: Result<PathBuf, graph_ascend_convert::ConvertError>) -> ExitCode {
    match result {
        Ok(path) => {
            println!("{}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("graph-ascend: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The shard asked for: `--shard I/N`, or a bare `--shard` read from the job array's variables.
fn shard_of(
    flag: Option<&str>,
    count: Option<u32>,
) -> Result<Option<ShardSpec>, graph_ascend_convert::ConvertError> {
    match flag {
        None if count.is_some() => Err(graph_ascend_convert::ConvertError::Usage(
            "--shard-count needs --shard".into(),
        )),
        None => Ok(None),
        Some("") => ShardSpec::from_env(|k| std::env::var(k).ok(), count).map(Some),
        Some(text) => {
            let s = ShardSpec::parse(text)?;
            match count {
                Some(n) if n != s.count => Err(graph_ascend_convert::ConvertError::Usage(format!(
                    "--shard {text} and --shard-count {n} disagree"
                ))),
                _ => Ok(Some(s)),
            }
        }
    }
}

/// The bar's text: the stage, what was measured, and the time left, e.g.
/// `writing  read 140.2/140.2 MB  rows 51200/200016  ~3 s left`.
fn bar_message(p: &Progress) -> String {
    const MB: f64 = 1024.0 * 1024.0;
    let mut out = format!(
        "{:<9} read {:.1}/{:.1} MB",
        p.stage.name(),
        p.bytes_read as f64 / MB,
        p.bytes_total as f64 / MB
    );
    if p.rows_total > 0 {
        out.push_str(&format!("  rows {}/{}", p.rows_written, p.rows_total));
    }
    if let Some(eta) = p.eta_secs {
        out.push_str(&format!("  ~{} left", duration_text(eta)));
    }
    out
}

/// `42 s`, `3 min 5 s`.
fn duration_text(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {} s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_shows_bytes_rows_and_time_left() {
        let p = Progress {
            stage: graph_ascend_convert::Stage::Writing,
            done: 700,
            total: 1000,
            message: String::new(),
            bytes_read: 3 * 1024 * 1024,
            bytes_total: 3 * 1024 * 1024,
            rows_written: 10,
            rows_total: 40,
            eta_secs: Some(65.4),
        };
        assert_eq!(
            bar_message(&p),
            "writing   read 3.0/3.0 MB  rows 10/40  ~1 min 5 s left"
        );
    }

    fn parse(args: &[&str]) -> Flags {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Flags::try_parse_from(normalize(&args)).unwrap()
    }

    #[test]
    fn msprobe_single_dash_flags_parse() {
        let f = parse(&[
            "-tp",
            "a",
            "-gp",
            "b",
            "-o",
            "out",
            "-lm",
            "-oc",
            "-fm",
            "-progress_log",
        ]);
        assert_eq!(f.target_path, PathBuf::from("a"));
        assert_eq!(f.golden_path, Some(PathBuf::from("b")));
        assert_eq!(f.output_path, PathBuf::from("out"));
        assert_eq!(f.layer_mapping.as_deref(), Some(""));
        assert!(f.overflow_check && f.fuzzy_match && f.is_print_progress_log);
    }

    #[test]
    fn long_forms_parse() {
        let f = parse(&[
            "--target_path",
            "a",
            "--golden_path",
            "b",
            "--output_path",
            "out",
            "--layer_mapping",
            "map.yaml",
            "--overflow_check",
            "--fuzzy_match",
            "--is_print_progress_log",
        ]);
        assert_eq!(f.layer_mapping.as_deref(), Some("map.yaml"));
        assert!(f.overflow_check && f.fuzzy_match && f.is_print_progress_log);
        let f = parse(&["-tp", "a", "-o", "out", "-lm", "m.yaml"]);
        assert_eq!(f.layer_mapping.as_deref(), Some("m.yaml"));
        assert!(!f.overflow_check);
        assert_eq!(f.golden_path, None);
    }

    #[test]
    fn parallel_flags_take_several_values() {
        let f = parse(&[
            "-tp",
            "a",
            "-gp",
            "b",
            "-o",
            "out",
            "--rank_size",
            "4",
            "8",
            "--tp",
            "4",
            "2",
            "--pp",
            "1",
            "2",
            "--vpp",
            "1",
            "2",
            "--order",
            "tp-cp-ep-dp-pp",
            "tp-pp-dp",
        ]);
        assert_eq!(f.rank_size, [4, 8]);
        assert_eq!(f.tp, [4, 2]);
        assert_eq!(f.pp, [1, 2]);
        assert_eq!(f.vpp, [1, 2]);
        assert_eq!(f.order, ["tp-cp-ep-dp-pp", "tp-pp-dp"]);
        let f = parse(&[
            "-tp",
            "a",
            "-o",
            "o",
            "--rank_size",
            "2",
            "--tp",
            "2",
            "--pp",
            "1",
            "--file_type",
            "json",
        ]);
        assert_eq!(f.file_type, "json");
        assert_eq!(f.target_path, PathBuf::from("a"));
    }

    #[test]
    fn target_is_required() {
        let args: Vec<String> = vec!["-o".into(), "out".into()];
        assert!(Flags::try_parse_from(normalize(&args)).is_err());
    }
}

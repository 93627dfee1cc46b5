//! Every matched pair of a compare as CSV, one row per input, parameter and output, with the
//! columns of msprobe's own compare tables (`CompareConst`: the basic information, then the
//! mode's metrics, then `Requires_grad Consistent`, `Result`, `Err_message`), preceded by the
//! step, the rank, both node names and the entry's role, and followed by the diagnosis of the
//! node (its verdict, score and reason, [`DIAGNOSIS_COLUMNS`]) — for users who continue in a
//! spreadsheet or pandas. A `None` argument (msprobe stores it as `{"value": "null"}`) says
//! `None` in its dtype columns rather than leaving the row blank. The same writer serves the CLI
//! and the page's download.

use std::io::Write;
use std::path::Path;

use foldhash::HashMap;
use graph_ascend_dump::{STATISTICS_METRIC_COLUMNS, TENSOR_METRIC_COLUMNS};
use graph_ascend_visdb::store::{GraphKey, Side};
use serde_json::{Map, Value};

use crate::csv::csv_line;
use crate::diagnose::{diagnose_visiting, reason, Diagnosis, RankJudgements};
use crate::entry::{role_of, Role};
use crate::error::DiagnoseError;
use crate::load::{CompareFile, Mode};
use crate::options::Options;
use crate::reason::sentence;
use crate::source::SourceKind;

/// Columns added before msprobe's.
const LEAD: [&str; 5] = ["Step", "Rank", "NPU Node", "Bench Node", "Role"];

/// msprobe's `BASIC_INFO`.
const BASIC_INFO: [&str; 8] = [
    "NPU Name",
    "Bench Name",
    "NPU Dtype",
    "Bench Dtype",
    "NPU Tensor Shape",
    "Bench Tensor Shape",
    "NPU Requires_grad",
    "Bench Requires_grad",
];

/// Columns after msprobe's: the diagnosis of the node the row belongs to (docs/diagnosis.md).
/// `Diagnosis` is `cause`, `introduced` or `amplified` for a source (and for the modules that
/// are sources only through it), `inherited` for a node whose error comes from upstream,
/// `agrees` for one within the noise, empty where nothing was judged (a parameter gradient).
/// `Diagnosis Score`: how many times worse the outputs are than the inputs (empty in md5 mode
/// or without outputs); `Diagnosis Reason`: the reason in English (empty for `agrees`).
pub const DIAGNOSIS_COLUMNS: [&str; 3] = ["Diagnosis", "Diagnosis Score", "Diagnosis Reason"];

/// One node's diagnosis, as [`DIAGNOSIS_COLUMNS`] say it.
#[derive(Debug, Clone, Default)]
struct Verdict {
    label: &'static str,
    score: String,
    reason: String,
}

fn kind_label(kind: &SourceKind) -> &'static str {
    match kind {
        SourceKind::Cause => "cause",
        SourceKind::Introduced => "introduced",
        SourceKind::Amplified => "amplified",
    }
}

fn score_text(score: Option<f64>) -> String {
    score.map(|v| format!("{v:.1}")).unwrap_or_default()
}

/// The verdict of every judged target node of one rank, by name: its sources (from the step's
/// diagnosis `d`) and the modules that are sources only through them, then every other node
/// as the colour mode paints it (`inherited` when it differs beyond the noise).
fn verdicts(mode: Mode, r: &RankJudgements<'_>, d: &Diagnosis) -> HashMap<String, Verdict> {
    let rank = r.data.rank;
    let mut out: HashMap<String, Verdict> = HashMap::default();
    for s in d.sources.iter().filter(|s| s.rank == rank) {
        let label = kind_label(&s.kind);
        for module in &s.enclosing {
            out.entry(module.clone()).or_insert_with(|| Verdict {
                label,
                score: String::new(),
                reason: format!("holds the source {}: {}", s.node, s.reason),
            });
        }
        out.insert(
            s.node.clone(),
            Verdict {
                label,
                score: score_text(s.score),
                reason: s.reason.clone(),
            },
        );
    }
    for (i, node) in r.data.npu.iter().enumerate() {
        let Some(j) = r.judgement(i as u32) else {
            continue;
        };
        out.entry(node.name().to_string()).or_insert_with(|| {
            if j.differs() {
                Verdict {
                    label: "inherited",
                    score: score_text(j.score()),
                    reason: sentence(&reason(mode, &SourceKind::Introduced, &j)),
                }
            } else {
                Verdict {
                    label: "agrees",
                    score: score_text(j.score()),
                    reason: String::new(),
                }
            }
        });
    }
    out
}

/// Where a column's value comes from.
#[derive(Clone, Copy)]
enum From {
    /// A key of the target entry (msprobe stores the compare columns there).
    Npu(&'static str),
    /// A key of the golden entry.
    Bench(&'static str),
}

const SUMMARY_STATS: [(&str, From); 8] = [
    ("NPU max", From::Npu("Max")),
    ("NPU min", From::Npu("Min")),
    ("NPU mean", From::Npu("Mean")),
    ("NPU l2norm", From::Npu("Norm")),
    ("Bench max", From::Bench("Max")),
    ("Bench min", From::Bench("Min")),
    ("Bench mean", From::Bench("Mean")),
    ("Bench l2norm", From::Bench("Norm")),
];

const RESULT: [(&str, From); 3] = [
    (
        "Requires_grad Consistent",
        From::Npu("Requires_grad Consistent"),
    ),
    ("Result", From::Npu("Result")),
    ("Err_message", From::Npu("Err_message")),
];

/// The mode's columns after `BASIC_INFO`.
fn mode_columns(mode: Mode) -> Vec<(&'static str, From)> {
    let mut cols: Vec<(&'static str, From)> = match mode {
        Mode::Statistics => STATISTICS_METRIC_COLUMNS
            .iter()
            .copied()
            .map(|c| (c, From::Npu(c)))
            .chain(SUMMARY_STATS)
            .collect(),
        Mode::Tensor => TENSOR_METRIC_COLUMNS
            .into_iter()
            .map(|c| (c, From::Npu(c)))
            .chain(SUMMARY_STATS)
            .collect(),
        Mode::Md5 => vec![
            ("NPU MD5", From::Npu("md5")),
            ("BENCH MD5", From::Bench("md5")),
        ],
    };
    cols.extend(RESULT);
    cols
}

fn cell(entry: Option<&Value>, key: &str) -> String {
    match entry.and_then(|e| e.get(key)) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// An argument that was `None`: msprobe stores it as `{"value": "null"}` (or plain `null`).
fn is_none_argument(entry: Option<&Value>) -> bool {
    match entry {
        Some(Value::Null) => true,
        Some(Value::Object(m)) => {
            m.len() == 1 && matches!(m.get("value"), Some(Value::String(v)) if v == "null")
        }
        _ => false,
    }
}

/// The dtype column of an entry: its dtype, or `None` for a `None` argument.
fn dtype_cell(entry: Option<&Value>) -> String {
    if is_none_argument(entry) {
        "None".to_owned()
    } else {
        cell(entry, "dtype")
    }
}

/// The entries of one role, as `(key, value)` in file order.
fn of_role<'a>(
    node: &str,
    data: &'a Map<String, Value>,
    output: bool,
    role: Role,
) -> Vec<(&'a str, &'a Value)> {
    data.iter()
        .filter(|(k, _)| {
            let suffix = k
                .strip_prefix(node)
                .and_then(|s| s.strip_prefix('.'))
                .unwrap_or(k);
            role_of(suffix, output) == role
        })
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

fn object(
    path: &Path,
    node: &str,
    what: &str,
    text: &str,
) -> Result<Map<String, Value>, DiagnoseError> {
    match graph_ascend_visdb::json::parse_lenient(text) {
        Ok(Some(Value::Object(m))) => Ok(m),
        Ok(_) => Ok(Map::new()),
        Err(e) => Err(DiagnoseError::Data {
            path: path.to_owned(),
            what: format!("{what} of node {node}"),
            reason: e.to_string(),
        }),
    }
}

/// Writes the CSV of the selected steps and ranks (all when `None`) to `out`; returns the
/// number of data rows. Each step is diagnosed first (as `graph-ascend diagnose` with the same
/// selection), then its rows written with each node's verdict.
pub fn write_csv(
    file: &CompareFile,
    step: Option<i64>,
    rank: Option<i64>,
    out: &mut dyn Write,
) -> Result<usize, DiagnoseError> {
    file.check_selection(step, rank)?;
    let columns = mode_columns(file.mode());
    let mut buf = String::new();
    csv_line(
        &mut buf,
        LEAD.iter()
            .chain(BASIC_INFO.iter())
            .copied()
            .chain(columns.iter().map(|(c, _)| *c))
            .chain(DIAGNOSIS_COLUMNS),
    );
    let mut count = 0;
    let mut failed: Option<DiagnoseError> = None;
    let options = Options {
        step,
        rank,
        ..Options::default()
    };
    diagnose_visiting(
        file,
        &options,
        &mut |judged: &[RankJudgements<'_>], d: &Diagnosis| {
            if failed.is_some() {
                return;
            }
            for r in judged {
                let verdicts = verdicts(file.mode(), r, d);
                let written = write_graph(
                    file,
                    (r.data.step, r.data.rank),
                    &columns,
                    &verdicts,
                    &mut buf,
                    out,
                );
                match written {
                    Ok(n) => count += n,
                    Err(e) => {
                        failed = Some(e);
                        return;
                    }
                }
            }
        },
    )?;
    if let Some(e) = failed {
        return Err(e);
    }
    out.write_all(buf.as_bytes()).map_err(write_error)?;
    Ok(count)
}

fn write_error(source: std::io::Error) -> DiagnoseError {
    DiagnoseError::Write {
        what: "the CSV".into(),
        source,
    }
}

/// The rows of one step and rank into `buf`, written out to `out` each time it passes 1 MB;
/// returns how many.
fn write_graph(
    file: &CompareFile,
    (step, rank): (i64, i64),
    columns: &[(&'static str, From)],
    verdicts: &HashMap<String, Verdict>,
    buf: &mut String,
    out: &mut dyn Write,
) -> Result<usize, DiagnoseError> {
    let path = file.path().to_owned();
    let mut count = 0;
    let none = Verdict::default();
    // The golden side, by name (its rows are looked up from the target's links).
    let mut golden: HashMap<String, (String, String)> = HashMap::default();
    file.store().scan_data_rows(
        GraphKey {
            side: Side::Bench,
            step,
            rank,
        },
        |row| -> Result<(), DiagnoseError> {
            golden.insert(row.node.name, (row.input_data, row.output_data));
            Ok(())
        },
    )?;
    file.store().scan_data_rows(
        GraphKey {
            side: Side::Npu,
            step,
            rank,
        },
        |row| -> Result<(), DiagnoseError> {
            let Some(link) = row.node.matched_node_link.last() else {
                return Ok(());
            };
            let Some((b_in, b_out)) = golden.get(link) else {
                return Ok(());
            };
            let name = &row.node.name;
            let verdict = verdicts.get(name).unwrap_or(&none);
            let n_in = object(&path, name, "input_data", &row.input_data)?;
            let n_out = object(&path, name, "output_data", &row.output_data)?;
            let b_in = object(&path, link, "input_data", b_in)?;
            let b_out = object(&path, link, "output_data", b_out)?;
            for (role, label, n_data, b_data, output) in [
                (Role::Input, "input", &n_in, &b_in, false),
                (Role::Parameter, "parameter", &n_in, &b_in, false),
                (Role::Output, "output", &n_out, &b_out, true),
            ] {
                let bench = of_role(link, b_data, output, role);
                for (k, (key, npu)) in of_role(name, n_data, output, role).into_iter().enumerate() {
                    let b = bench.get(k);
                    let b_val = b.map(|(_, v)| *v);
                    let fixed = [
                        step.to_string(),
                        rank.to_string(),
                        name.clone(),
                        link.clone(),
                        label.to_owned(),
                        key.to_owned(),
                        b.map(|(k, _)| (*k).to_owned()).unwrap_or_default(),
                        dtype_cell(Some(npu)),
                        dtype_cell(b_val),
                        cell(Some(npu), "shape"),
                        cell(b_val, "shape"),
                        cell(Some(npu), "requires_grad"),
                        cell(b_val, "requires_grad"),
                    ];
                    let metrics: Vec<String> = columns
                        .iter()
                        .map(|(_, from)| match from {
                            From::Npu(key) => cell(Some(npu), key),
                            From::Bench(key) => cell(b_val, key),
                        })
                        .collect();
                    csv_line(
                        buf,
                        fixed
                            .iter()
                            .chain(metrics.iter())
                            .map(String::as_str)
                            .chain([verdict.label, &verdict.score, &verdict.reason]),
                    );
                    count += 1;
                }
            }
            if buf.len() > 1 << 20 {
                out.write_all(buf.as_bytes()).map_err(write_error)?;
                buf.clear();
            }
            Ok(())
        },
    )?;
    Ok(count)
}

/// Writes the CSV to `dest` through a temporary file in the same folder, renamed at the end:
/// never a half-written or clobbered file on error. The file gets the mode of any new file (0666
/// less the umask); a killed run's temporary file is removed by the next one into that folder
/// ([`graph_ascend_visdb::files::output_temp_in`]).
pub fn write_csv_file(
    file: &CompareFile,
    step: Option<i64>,
    rank: Option<i64>,
    dest: &Path,
) -> Result<usize, DiagnoseError> {
    let what = || dest.display().to_string();
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = graph_ascend_visdb::files::output_temp_in(dir, ".csv.tmp").map_err(|source| {
        DiagnoseError::Write {
            what: what(),
            source,
        }
    })?;
    let count = {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        let count = write_csv(file, step, rank, &mut w)?;
        w.flush().map_err(|source| DiagnoseError::Write {
            what: what(),
            source,
        })?;
        count
    };
    tmp.persist(dest).map_err(|e| DiagnoseError::Write {
        what: what(),
        source: e.error,
    })?;
    Ok(count)
}

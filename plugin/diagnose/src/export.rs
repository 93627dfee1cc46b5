//! Every matched pair of a compare as CSV, one row per input, parameter and output, with the
//! columns of msprobe's own compare tables (`CompareConst`: the basic information, then the
//! mode's metrics, then `Requires_grad Consistent`, `Result`, `Err_message`), preceded by the
//! step, the rank, both node names and the entry's role — for users who continue in a
//! spreadsheet or pandas. The same writer serves the CLI and (later) the page's download.

use std::io::Write;
use std::path::Path;

use foldhash::HashMap;
use graph_ascend_dump::{STATISTICS_METRIC_COLUMNS, TENSOR_METRIC_COLUMNS};
use graph_ascend_visdb::store::{GraphKey, Side};
use serde_json::{Map, Value};

use crate::entry::{role_of, Role};
use crate::error::DiagnoseError;
use crate::load::{CompareFile, Mode};

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

/// Appends one CSV line (RFC 4180: fields with a comma, quote or line break are quoted).
pub fn csv_line<'a>(out: &mut String, fields: impl IntoIterator<Item = &'a str>) {
    for (k, f) in fields.into_iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        if f.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&f.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(f);
        }
    }
    out.push_str("\r\n");
}

fn cell(entry: Option<&Value>, key: &str) -> String {
    match entry.and_then(|e| e.get(key)) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
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
/// number of data rows.
pub fn write_csv(
    file: &CompareFile,
    step: Option<i64>,
    rank: Option<i64>,
    out: &mut dyn Write,
) -> Result<usize, DiagnoseError> {
    file.check_selection(step, rank)?;
    let path = file.path().to_owned();
    let write_err = |source| DiagnoseError::Write {
        what: "the CSV".into(),
        source,
    };
    let columns = mode_columns(file.mode());
    let mut buf = String::new();
    csv_line(
        &mut buf,
        LEAD.iter()
            .chain(BASIC_INFO.iter())
            .copied()
            .chain(columns.iter().map(|(c, _)| *c)),
    );
    let mut count = 0;
    for (step, ranks) in file.graphs_to_visit(step, rank)? {
        for rank in ranks {
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
                        for (k, (key, npu)) in
                            of_role(name, n_data, output, role).into_iter().enumerate()
                        {
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
                                cell(Some(npu), "dtype"),
                                cell(b_val, "dtype"),
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
                                &mut buf,
                                fixed.iter().chain(metrics.iter()).map(String::as_str),
                            );
                            count += 1;
                        }
                    }
                    if buf.len() > 1 << 20 {
                        out.write_all(buf.as_bytes()).map_err(write_err)?;
                        buf.clear();
                    }
                    Ok(())
                },
            )?;
        }
    }
    out.write_all(buf.as_bytes()).map_err(write_err)?;
    Ok(count)
}

/// Writes the CSV to `dest` through a temporary file in the same folder, renamed at the end:
/// never a half-written or clobbered file on error.
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
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|source| DiagnoseError::Write {
        what: what(),
        source,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        let mut s = String::new();
        csv_line(&mut s, ["a", "b,c", "say \"hi\"", "x\ny"]);
        assert_eq!(s, "a,\"b,c\",\"say \"\"hi\"\"\",\"x\ny\"\r\n");
    }
}

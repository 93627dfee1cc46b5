//! msprobe 26.2's pre-check CSV files, as `msprobe acc_check` writes them
//! (`api_accuracy_checker/compare/compare.py`'s `Comparator`, `compare_utils.py`'s
//! `DETAIL_TEST_ROWS`): `accuracy_checking_result_<YYYYmmddHHMMSS>.csv`, one row per API forward
//! call, and `accuracy_checking_details_<…>.csv`, one row per output. UTF-8 with a byte-order mark
//! and CR LF line ends (msprobe's `write_csv`: `utf-8-sig`, Python's `csv.writer`), numbers as
//! `{:.14f}` (its `precision: 14`), a blank metric as one space (`CompareConst.SPACE`), a call
//! not replayed as `SKIP` with its reason. Only msprobe's columns: our verdicts are in
//! [`super::verdict_csv`]. Every line goes through the project's CSV writer
//! (`graph_ascend_diagnose::csv::csv_line`, which neutralises formula-like cells).

use std::path::{Path, PathBuf};

use anyhow::Context;
use graph_ascend_diagnose::csv::csv_line;
use graph_ascend_replay::{msprobe::bench_dtype, CallReport, Dtype, Status};

/// `accuracy_checking_result_*.csv`'s header (`Comparator.write_csv_title`).
pub const RESULT_COLUMNS: [&str; 4] = [
    "API name",
    "Forward Test Success",
    "Backward Test Success",
    "Message",
];

/// `accuracy_checking_details_*.csv`'s header (`DETAIL_TEST_ROWS`).
pub const DETAILS_COLUMNS: [&str; 23] = [
    "API Name",
    "Bench Dtype",
    "DEVICE Dtype",
    "Shape",
    "余弦相似度",
    "最大绝对误差",
    "双百指标",
    "双千指标",
    "双万指标",
    "二进制一致错误率",
    "误差均衡性",
    "均方根误差",
    "小值域错误占比",
    "相对误差最大值",
    "相对误差平均值",
    "inf/nan错误率",
    "相对误差错误率",
    "绝对误差错误率",
    "ULP误差最大值",
    "ULP误差平均值",
    "ULP误差大于阈值占比",
    "Status",
    "Message",
];

/// msprobe's blank cell.
const SPACE: &str = " ";
/// msprobe's status of a call it did not run.
const SKIP: &str = "SKIP";

/// The UTF-8 byte-order mark `utf-8-sig` writes first.
pub const BOM: &str = "\u{feff}";

/// Writes both files of one run's calls into `dir` (created if missing); returns their paths.
pub fn write(dir: &Path, stamp: &str, calls: &[CallReport]) -> anyhow::Result<[PathBuf; 2]> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut result = String::from(BOM);
    let mut details = String::from(BOM);
    csv_line(&mut result, RESULT_COLUMNS);
    csv_line(&mut details, DETAILS_COLUMNS);
    for c in calls.iter().filter(|c| super::is_api_forward(c)) {
        add_call(&mut result, &mut details, c);
    }
    let paths = [
        dir.join(format!("accuracy_checking_result_{stamp}.csv")),
        dir.join(format!("accuracy_checking_details_{stamp}.csv")),
    ];
    for (path, text) in paths.iter().zip([result, details]) {
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(paths)
}

/// msprobe's name of a call: the dump's record name without `.forward`.
fn api_name(c: &CallReport) -> &str {
    c.name.strip_suffix(".forward").unwrap_or(&c.name)
}

/// A torch dtype's name, as msprobe writes `str(tensor.dtype)`.
fn torch_dtype(d: Dtype) -> &'static str {
    match d {
        Dtype::Bf16 => "torch.bfloat16",
        Dtype::F16 => "torch.float16",
        Dtype::F32 => "torch.float32",
        Dtype::F64 => "torch.float64",
    }
}

/// A Python tuple's text: `(2, 16)`, `(5,)`, `()`.
fn python_tuple(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A float as msprobe writes it (`"{:.14f}".format`): Python's `nan`, `inf`, `-inf`.
fn number(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:.14}")
    }
}

fn optional(v: Option<f64>) -> String {
    v.map_or_else(|| SPACE.to_string(), number)
}

/// The worst of msprobe's stage-1 statuses (`error` over `warning` over `pass`).
fn worst_status<'a>(statuses: impl Iterator<Item = &'a str>) -> &'a str {
    let rank = |s: &str| match s {
        "error" => 2,
        "warning" => 1,
        _ => 0,
    };
    statuses.max_by_key(|s| rank(s)).unwrap_or("error")
}

fn add_call(result: &mut String, details: &mut String, c: &CallReport) {
    let name = api_name(c);
    let first_output = format!("{name}.forward.output.0");
    if c.status == Status::NotReplayed {
        let reason = c.reason.clone().unwrap_or_default();
        csv_line(result, [name, SKIP, SKIP, reason.as_str()]);
        let mut row = vec![first_output.as_str()];
        row.extend([SPACE; 20]);
        row.extend([SKIP, reason.as_str()]);
        csv_line(details, row);
        return;
    }
    if c.outputs.is_empty() {
        // Replayed but not comparable (the dump's shape is not the replay's): msprobe's error.
        let message = c.notes.join("\n");
        csv_line(result, [name, "error", SPACE, message.as_str()]);
        let mut row = vec![first_output.as_str()];
        row.extend([SPACE; 20]);
        row.extend(["error", message.as_str()]);
        csv_line(details, row);
        return;
    }
    let status = worst_status(c.outputs.iter().map(|o| o.msprobe.status));
    csv_line(result, [name, status, SPACE, ""]);
    for o in &c.outputs {
        let m = &o.msprobe;
        let ulp = m.ulp.as_ref();
        let cells: Vec<String> = vec![
            format!("{name}.forward.output.{}", o.index),
            torch_dtype(bench_dtype(o.dtype)).into(),
            torch_dtype(o.dtype).into(),
            python_tuple(&o.shape),
            optional(m.cosine),
            optional(m.max_abs_err),
            optional(m.rel_err_hundredth),
            optional(m.rel_err_thousandth),
            optional(m.rel_err_ten_thousandth),
            SPACE.into(),
            number(m.error_balance),
            number(m.rmse),
            number(m.small_value_err_ratio),
            number(m.max_rel_err),
            number(m.mean_rel_err),
            SPACE.into(),
            SPACE.into(),
            SPACE.into(),
            optional(ulp.map(|u| u.max)),
            optional(ulp.map(|u| u.mean)),
            optional(ulp.map(|u| u.share_above_threshold)),
            m.status.into(),
            m.message.clone(),
        ];
        csv_line(details, cells.iter().map(String::as_str));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_as_python_writes_them() {
        assert_eq!(python_tuple(&[2, 16]), "(2, 16)");
        assert_eq!(python_tuple(&[5]), "(5,)");
        assert_eq!(python_tuple(&[]), "()");
        assert_eq!(number(0.5), "0.50000000000000");
        assert_eq!(number(f64::NAN), "nan");
        assert_eq!(number(f64::NEG_INFINITY), "-inf");
        assert_eq!(
            worst_status(["pass", "warning", "pass"].into_iter()),
            "warning"
        );
    }
}

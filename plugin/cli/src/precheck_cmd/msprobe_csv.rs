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
    for c in calls
        .iter()
        .filter(|c| super::graph_replay::is_api_forward(c))
    {
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

/// A numpy float32 as Python's `str` writes it (msprobe's CSV writer formats only Python
/// floats, and a float32 is not one): the shortest digits that read back, positional from
/// 1e-4 to 1e16 (`0.48506546`, `1.0`), else scientific with a two-digit exponent (`1e-05`).
fn numpy_f32(v: f64) -> String {
    let v = v as f32;
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = v.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        let t = format!("{v}");
        return if t.contains('.') { t } else { format!("{t}.0") };
    }
    let t = format!("{v:e}");
    match t.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ("-", d),
                None => ("+", exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => t,
    }
}

/// A metric msprobe computes in the work dtype (`np.max`, `np.mean` of the error arrays): a
/// numpy float32 for a 16-bit output, a float64 otherwise; the Python int `0` when msprobe
/// returns one.
fn work_number(v: f64, dtype: Dtype, int_zero: bool) -> String {
    if int_zero {
        "0".into()
    } else if matches!(dtype, Dtype::Bf16 | Dtype::F16) {
        numpy_f32(v)
    } else {
        number(v)
    }
}

/// msprobe's word for a status (`CompareConst.SKIP` is upper case).
fn msprobe_status(s: &str) -> &str {
    if s == "skip" {
        SKIP
    } else {
        s
    }
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
    // msprobe writes a call it ran as three cells (its message only for a skipped one).
    let status = worst_status(c.outputs.iter().map(|o| msprobe_status(o.msprobe.status)));
    csv_line(result, [name, status, SPACE]);
    for o in &c.outputs {
        let m = &o.msprobe;
        let ulp = m.ulp.as_ref();
        let cells: Vec<String> = vec![
            format!("{name}.forward.output.{}", o.index),
            torch_dtype(bench_dtype(o.dtype)).into(),
            torch_dtype(o.dtype).into(),
            python_tuple(&o.shape),
            optional(m.cosine),
            m.max_abs_err
                .map_or_else(|| SPACE.to_string(), |v| work_number(v, o.dtype, false)),
            optional(m.rel_err_hundredth),
            optional(m.rel_err_thousandth),
            optional(m.rel_err_ten_thousandth),
            SPACE.into(),
            number(m.error_balance),
            number(m.rmse),
            if m.int_zeros.small_value_err_ratio {
                "0".into()
            } else {
                number(m.small_value_err_ratio)
            },
            work_number(m.max_rel_err, o.dtype, m.int_zeros.max_rel_err),
            work_number(m.mean_rel_err, o.dtype, m.int_zeros.mean_rel_err),
            SPACE.into(),
            SPACE.into(),
            SPACE.into(),
            optional(ulp.map(|u| u.max)),
            optional(ulp.map(|u| u.mean)),
            optional(ulp.map(|u| u.share_above_threshold)),
            msprobe_status(m.status).into(),
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
        // str(np.float32(x)) as the oracle venv's numpy writes them.
        assert_eq!(numpy_f32(0.48506546), "0.48506546");
        assert_eq!(numpy_f32(0.003918141), "0.003918141");
        assert_eq!(numpy_f32(1.0), "1.0");
        assert_eq!(numpy_f32(0.0), "0.0");
        assert_eq!(numpy_f32(1e-5), "1e-05");
        assert_eq!(numpy_f32(1.2345e-5), "1.2345e-05");
        assert_eq!(numpy_f32(3e20), "3e+20");
    }
}

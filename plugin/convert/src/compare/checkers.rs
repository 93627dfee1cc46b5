//! msprobe's pass / warning / error rules for compared rows (`indicator_analysis`).
//!
//! Checkers run in msprobe's order and can only raise a row's level; their messages are kept in
//! that order in `Err_message`. Thresholds apply to fractions (`"12.5%"` is 0.125).

use graph_ascend_dump::{FieldName, PyVal};

use super::{CompareMode, Row};

/// A row's or node's grade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Pass,
    Warning,
    Error,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Pass => "pass",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }

    /// `precision_index` of this level.
    pub fn index(self) -> f64 {
        match self {
            Level::Pass => 0.0,
            Level::Warning => 0.5,
            Level::Error => 1.0,
        }
    }
}

/// APIs whose rows are never graded.
pub const IGNORE_ALL: [&str; 9] = [
    "empty",
    "empty_like",
    "numpy",
    "to",
    "__setitem__",
    "empty_with_format",
    "new_empty_strided",
    "new_empty",
    "empty_strided",
];
/// APIs whose input rows are not graded.
pub const IGNORE_INPUT: [&str; 4] = [
    "_reduce_scatter_base",
    "_all_gather_base",
    "all_to_all_single",
    "batch_isend_irecv",
];
/// APIs whose `precision_index` is forced (`_ignore_precision_index`).
pub const IGNORE_PRECISION: [&str; 6] = [
    "empty",
    "empty_like",
    "empty_with_format",
    "new_empty_strided",
    "new_empty",
    "empty_strided",
];

const MSG_INF_NAN: &str = "error: There is nan/inf/-inf in the maximum or minimum value of NPU.";
const MSG_NORM_REL: &str = "error: The NormRelativeErr of output is greater than 0.5.";
const MSG_REQ_GRAD: &str = "error: The requires_grad of NPU and Bench are inconsistent.";
const MSG_PARAMS: &str = "error: The scalar parameters of NPU and Bench are inconsistent.";
const MSG_DTYPE: &str = "error: The dtype of NPU and Bench are inconsistent.";
const MSG_SHAPE: &str = "error: The shape of NPU and Bench are inconsistent.";
const MSG_NORM_WARN: &str = "warning: The norm relative error of output is 10 times that of input.";
const MSG_CRC: &str = "error: The CRC-32 value of NPU differs from that of the bench.";
const MSG_CRC_WARN: &str = "warning: The CRC-32 value of NPU or bench is missing.";
const MSG_NO_BENCH: &str = "warning: The parameter of NPU does not match the bench.";
const MSG_ONE_THOUSANDTH: &str =
    "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6.";
const MSG_COSINE: &str =
    "warning: The input/parameters of Cosine > 0.9 while the output is 0.1 lower than the input.";

struct Grade {
    level: Level,
    messages: Vec<String>,
}

impl Grade {
    fn raise(&mut self, level: Level, msg: &str) {
        self.level = self.level.max(level);
        self.messages.push(msg.to_string());
    }
}

fn extra<'a>(extra: &'a [(FieldName, PyVal)], key: &str) -> Option<&'a PyVal> {
    extra.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A relative error cell as a fraction (`"12.5%"` → 0.125); `None` for `N/A`, `Nan`, text.
fn fraction(v: Option<&PyVal>) -> Option<f64> {
    match v? {
        PyVal::Str(s) => {
            let t = s.trim_end_matches('\t');
            let n = t.strip_suffix('%')?;
            n.parse::<f64>().ok().map(|f| f / 100.0)
        }
        PyVal::Float(f) => Some(*f),
        PyVal::Int(i) => Some(*i as f64),
        _ => None,
    }
}

/// A metric cell as a number (`None` for `unsupported`, `N/A`, …).
fn number(v: Option<&PyVal>) -> Option<f64> {
    match v? {
        PyVal::Float(f) => Some(*f),
        PyVal::Int(i) => Some(*i as f64),
        PyVal::Str(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

fn is_inf_nan(v: Option<&PyVal>) -> bool {
    match v {
        Some(PyVal::Float(f)) => !f.is_finite(),
        Some(PyVal::Str(s)) => matches!(s.trim().to_lowercase().as_str(), "inf" | "-inf" | "nan"),
        _ => false,
    }
}

fn text(item: Option<&graph_ascend_dump::Item>, key: &str) -> String {
    item.and_then(|i| i.get(key))
        .map(PyVal::py_str)
        .unwrap_or_else(|| "N/A".into())
}

/// Grades every row: `(level, messages)` per row, in row order.
pub fn grade(
    mode: CompareMode,
    node_id: &str,
    rows: &[Row],
    extras: &[Vec<(FieldName, PyVal)>],
) -> Vec<(Level, Vec<String>)> {
    grade_with(mode, false, node_id, rows, extras)
}

/// [`grade`] for graphs merged across parallel ranks (`parallel_merge`: no shape checker, API
/// names read without their `_rank<N>` suffix).
pub fn grade_with(
    mode: CompareMode,
    parallel_merge: bool,
    node_id: &str,
    rows: &[Row],
    extras: &[Vec<(FieldName, PyVal)>],
) -> Vec<(Level, Vec<String>)> {
    let mut grades: Vec<Grade> = rows
        .iter()
        .map(|_| Grade {
            level: Level::Pass,
            messages: Vec::new(),
        })
        .collect();
    let mut api = node_id.split('.').nth(1).unwrap_or("");
    if parallel_merge {
        // `_rank<N>` at the end of the API name (merged graphs) is not part of the name.
        if let Some((head, n)) = api.rsplit_once("_rank") {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                api = head;
            }
        }
    }
    let skip = |r: &Row| IGNORE_ALL.contains(&api) || (!r.is_output && IGNORE_INPUT.contains(&api));
    let first_output = rows.iter().position(|r| r.is_output);

    match mode {
        CompareMode::Md5 => {
            for (r, g) in rows.iter().zip(grades.iter_mut()) {
                if skip(r) {
                    continue;
                }
                if r.bench.is_none() {
                    g.raise(Level::Warning, MSG_NO_BENCH);
                    continue;
                }
                let n = text(Some(r.npu), "md5");
                let b = text(r.bench, "md5");
                if n != b {
                    if ["N/A", "Nan", ""].contains(&n.as_str())
                        || ["N/A", "Nan", ""].contains(&b.as_str())
                    {
                        g.raise(Level::Warning, MSG_CRC_WARN);
                    } else {
                        g.raise(Level::Error, MSG_CRC);
                    }
                }
            }
        }
        CompareMode::Summary | CompareMode::Tensor => {
            let tensor = mode == CompareMode::Tensor;
            // InfNanErrChecker
            for (r, g) in rows.iter().zip(grades.iter_mut()) {
                if skip(r) || r.bench.is_none() {
                    continue;
                }
                let b = r.bench;
                let bench_bad = is_inf_nan(b.and_then(|b| b.get("Max")))
                    || is_inf_nan(b.and_then(|b| b.get("Min")));
                let npu_bad = is_inf_nan(r.npu.get("Max")) || is_inf_nan(r.npu.get("Min"));
                if !bench_bad && npu_bad {
                    g.raise(Level::Error, MSG_INF_NAN);
                }
            }
            if tensor {
                // OneThousandthErrChecker (on the first output row)
                if let Some(o) = first_output {
                    let key = "One Thousandth Err Ratio";
                    let min_in = rows
                        .iter()
                        .zip(extras)
                        .filter(|(r, _)| !r.is_output)
                        .filter_map(|(_, e)| number(extra(e, key)))
                        .fold(1.0, f64::min);
                    let min_out = rows
                        .iter()
                        .zip(extras)
                        .filter(|(r, _)| r.is_output)
                        .filter_map(|(_, e)| number(extra(e, key)))
                        .fold(1.0, f64::min);
                    // msprobe tests `< 0.1` although its message says 0.6.
                    if !skip(&rows[o]) && min_in > 0.9 && min_out < 0.1 {
                        grades[o].raise(Level::Error, MSG_ONE_THOUSANDTH);
                    }
                }
            } else {
                // RelativeErrChecker
                let max_in = rows
                    .iter()
                    .zip(extras)
                    .filter(|(r, _)| !r.is_output)
                    .filter_map(|(_, e)| fraction(extra(e, "NormRelativeErr")))
                    .map(f64::abs)
                    .fold(0.0, f64::max);
                if max_in < 0.1 {
                    for ((r, e), g) in rows.iter().zip(extras).zip(grades.iter_mut()) {
                        if r.is_output && !skip(r) {
                            if let Some(f) = fraction(extra(e, "NormRelativeErr")) {
                                if f.abs() > 0.5 {
                                    g.raise(Level::Error, MSG_NORM_REL);
                                }
                            }
                        }
                    }
                }
            }
            for (r, g) in rows.iter().zip(grades.iter_mut()) {
                if skip(r) {
                    continue;
                }
                let Some(b) = r.bench else {
                    // No golden counterpart: its dtype and shape count as "Nan".
                    if text(Some(r.npu), "dtype") != "Nan" {
                        g.raise(Level::Error, MSG_DTYPE);
                    }
                    if text(Some(r.npu), "shape") != "Nan" {
                        g.raise(Level::Error, MSG_SHAPE);
                    }
                    continue;
                };
                // RequiresGradErrChecker
                let nrg = r.npu.get("requires_grad");
                let brg = b.get("requires_grad");
                let present =
                    |v: Option<&PyVal>| v.is_some_and(|v| !v.is_none() && !v.py_str().is_empty());
                if present(nrg) && present(brg) && nrg != brg {
                    g.raise(Level::Error, MSG_REQ_GRAD);
                }
                let ndt = text(Some(r.npu), "dtype");
                let bdt = text(Some(b), "dtype");
                // ParametersErrChecker
                if !r.is_output
                    && ndt.contains("class")
                    && bdt.contains("class")
                    && text(Some(r.npu), "shape") == "[]"
                    && !same_value(r.npu.get("Max"), b.get("Max"))
                {
                    g.raise(Level::Error, MSG_PARAMS);
                }
                // DTypeErrChecker
                let bname = r.bench_name.unwrap_or("");
                if !(bname.contains("qkv") || bname.contains("gate_up")) && ndt != bdt {
                    g.raise(Level::Error, MSG_DTYPE);
                }
                // ShapeErrChecker (not run on merged graphs)
                if !parallel_merge && text(Some(r.npu), "shape") != text(Some(b), "shape") {
                    g.raise(Level::Error, MSG_SHAPE);
                }
            }
            if let Some(o) = first_output {
                if tensor {
                    // CosineWarnChecker
                    let min_of = |out: bool| {
                        rows.iter()
                            .zip(extras)
                            .filter(|(r, _)| r.is_output == out)
                            .filter_map(|(_, e)| number(extra(e, "Cosine")))
                            .fold(f64::INFINITY, f64::min)
                    };
                    let (min_in, min_out) = (min_of(false), min_of(true));
                    if !skip(&rows[o])
                        && min_in.is_finite()
                        && min_out.is_finite()
                        && min_in > 0.9
                        && min_in - min_out > 0.1
                    {
                        grades[o].raise(Level::Warning, MSG_COSINE);
                    }
                } else if !skip(&rows[o]) {
                    // RelativeWarnChecker
                    let max_abs = |out: bool| {
                        rows.iter()
                            .zip(extras)
                            .filter(|(r, _)| r.is_output == out)
                            .filter_map(|(_, e)| fraction(extra(e, "NormRelativeErr")))
                            .map(f64::abs)
                            .fold(0.0, f64::max)
                    };
                    let (inp, out) = (max_abs(false), max_abs(true));
                    let warn = if inp == 0.0 {
                        out > 0.1
                    } else {
                        out / inp > 10.0
                    };
                    if warn {
                        grades[o].raise(Level::Warning, MSG_NORM_WARN);
                    }
                }
            }
        }
    }
    grades.into_iter().map(|g| (g.level, g.messages)).collect()
}

fn same_value(a: Option<&PyVal>, b: Option<&PyVal>) -> bool {
    match (a.and_then(PyVal::as_number), b.and_then(PyVal::as_number)) {
        (Some(x), Some(y)) => x == y,
        _ => a.map(PyVal::py_str) == b.map(PyVal::py_str),
    }
}

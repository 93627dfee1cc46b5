//! msprobe's pass / warning / error rules for compared rows (`indicator_analysis`).
//!
//! Checkers run in msprobe's order and can only raise a row's level; their messages are kept in
//! that order in `Err_message`. Thresholds apply to fractions (`"12.5%"` is 0.125).

use graph_ascend_dump::{FieldName, PyVal};

use super::mode::CompareMode;
use super::row::Row;

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
const MSG_REQ_GRAD: &str = "error: The Required_Grad of NPU and Bench are inconsistent";
const MSG_PARAMS: &str = "error: The scalar parameters of NPU and Bench are inconsistent.";
const MSG_DTYPE: &str = "error: The dtype of NPU and Bench are inconsistent.";
const MSG_SHAPE: &str = "error: The shape of NPU and Bench are inconsistent.";
const MSG_NORM_WARN: &str = "warning: The norm relative error of output is 10 times that of input.";
const MSG_CRC: &str = "error: The CRC-32 value of NPU differs from that of the bench.";
const MSG_NO_BENCH: &str = "warning: The parameter of NPU does not match the bench.";
const MSG_ONE_THOUSANDTH: &str =
    "error: The input/parameters of One Thousandth Err Ratio > 0.9 while the output < 0.6.";
const MSG_COSINE: &str =
    "warning: The input/parameters of Cosine > 0.9, and input/parameters - output > 0.1";

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

/// Which rows of a node the checkers look at (`get_api_ignore_info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ignore {
    /// Every row is graded.
    No,
    /// Only the output rows are graded, and the checkers that weigh inputs against outputs
    /// do not run.
    Input,
    /// No row is graded.
    All,
}

/// msprobe reads the API name from the target name of the node's *first input row*
/// (`name.split('.')[1]`), not from the node id: a node without input rows (`Torch.empty`
/// called with no tensor or scalar argument) is never ignored and is graded like any API.
fn ignore_of(parallel_merge: bool, rows: &[Row], outputs: &[bool]) -> Ignore {
    let Some(first) = rows.iter().zip(outputs).find(|(_, out)| !**out) else {
        return Ignore::No;
    };
    let Some(mut api) = first.0.npu_name.split('.').nth(1) else {
        return Ignore::No;
    };
    if parallel_merge {
        // `_rank<N>` at the end of the API name (merged graphs) is not part of the name.
        if let Some((head, n)) = api.rsplit_once("_rank") {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                api = head;
            }
        }
    }
    if IGNORE_ALL.contains(&api) {
        Ignore::All
    } else if IGNORE_INPUT.contains(&api) {
        Ignore::Input
    } else {
        Ignore::No
    }
}

fn extra<'a>(extra: &'a [(FieldName, PyVal)], key: &str) -> Option<&'a PyVal> {
    extra.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Python's `float(text)`: surrounding blanks allowed, `inf`/`nan` in any case.
fn py_float(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    t.parse::<f64>().ok()
}

/// msprobe's `str2float`: a percentage text as a fraction (`"12.5%"` → 0.125); 0 for anything
/// else, a number cell included.
fn str2float(v: Option<&PyVal>) -> f64 {
    match v {
        Some(PyVal::Str(s)) => py_float(s.trim_matches('%')).map_or(0.0, |f| f / 100.0),
        _ => 0.0,
    }
}

/// msprobe's `get_min_or_max_value`: the minimum (from 1.0) or maximum (from 0.0) of a metric
/// over the input or output rows. `None`, `Nan`, `N/A` and texts are skipped; percentages are
/// read as fractions.
fn min_or_max(
    outputs: &[bool],
    extras: &[Vec<(FieldName, PyVal)>],
    key: &str,
    output: bool,
    is_min: bool,
) -> f64 {
    let init = if is_min { 1.0 } else { 0.0 };
    outputs
        .iter()
        .zip(extras)
        .filter(|(out, _)| **out == output)
        .filter_map(|(_, e)| match extra(e, key)? {
            PyVal::Str(s) if s.ends_with('%') => Some(str2float(Some(&PyVal::Str(s.clone())))),
            PyVal::Float(f) => Some(*f),
            PyVal::Int(i) => Some(*i as f64),
            PyVal::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        })
        // Python's `min(acc, v)` / `max(acc, v)`: a NaN never replaces the running value.
        .fold(init, |acc, v| {
            if (is_min && v < acc) || (!is_min && v > acc) {
                v
            } else {
                acc
            }
        })
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

/// Python's truth value of a cell (`not value`).
fn truthy(v: Option<&PyVal>) -> bool {
    match v {
        None | Some(PyVal::None) => false,
        Some(PyVal::Bool(b)) => *b,
        Some(PyVal::Int(i)) => *i != 0,
        Some(PyVal::Float(f)) => *f != 0.0,
        Some(PyVal::BigInt(_)) => true,
        Some(PyVal::Str(s)) => !s.is_empty(),
        Some(PyVal::List(l)) => !l.is_empty(),
        Some(PyVal::Dict(d)) => !d.is_empty(),
    }
}

/// Python's `==` of two cells: numbers by value, lists element by element, a list never equal
/// to a text (a scalar's shape is the text `'[]'`, a 0-d tensor's the list `[]`).
fn py_eq(a: &PyVal, b: &PyVal) -> bool {
    match (a, b) {
        (PyVal::List(x), PyVal::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (
            PyVal::Int(_) | PyVal::Float(_) | PyVal::Bool(_),
            PyVal::Int(_) | PyVal::Float(_) | PyVal::Bool(_),
        ) => {
            let num = |v: &PyVal| match v {
                PyVal::Bool(b) => Some(f64::from(u8::from(*b))),
                other => other.as_number(),
            };
            match (a, b) {
                (PyVal::Int(x), PyVal::Int(y)) => x == y,
                _ => num(a) == num(b),
            }
        }
        _ => a == b,
    }
}

/// The golden side of a row's cell as msprobe holds it: an unmatched target item has `'Nan'`
/// in every golden column (`get_accuracy`, `n_len > b_len`).
fn bench_cell<'a>(r: &'a Row, key: &str) -> Option<&'a PyVal> {
    static NAN: std::sync::OnceLock<PyVal> = std::sync::OnceLock::new();
    match r.bench {
        Some(b) => b.get(key),
        None => Some(NAN.get_or_init(|| PyVal::Str("Nan".into()))),
    }
}

/// The golden name of a row: `'Nan'` for an unmatched target item.
fn bench_name<'a>(r: &'a Row) -> &'a str {
    match r.bench {
        Some(_) => r.bench_name.unwrap_or(""),
        None => "Nan",
    }
}

/// The positions where `keep` is true.
fn kept(keep: &[bool]) -> Vec<usize> {
    keep.iter()
        .enumerate()
        .filter_map(|(i, &k)| k.then_some(i))
        .collect()
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
///
/// Each checker runs over every row in msprobe's order (`TENSOR_CHECKERS`,
/// `STATISTICS_CHECKERS`, `MD5_CHECKERS`), so a row's messages are in checker order. Rows are
/// inputs or outputs by their target name (`'.output.'` in it), as msprobe's `ApiData` splits
/// them; the checkers that weigh inputs against outputs mark the first output row.
pub fn grade_with(
    mode: CompareMode,
    parallel_merge: bool,
    _node_id: &str,
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
    let outputs: Vec<bool> = rows
        .iter()
        .map(|r| r.npu_name.contains(".output."))
        .collect();
    let ignore = ignore_of(parallel_merge, rows, &outputs);
    // `get_data_list_by_ignore_info`: the rows the per-row checkers look at.
    let graded = kept(
        &outputs
            .iter()
            .map(|&out| match ignore {
                Ignore::No => true,
                Ignore::Input => out,
                Ignore::All => false,
            })
            .collect::<Vec<_>>(),
    );
    // The checkers that weigh inputs against outputs run only when nothing is ignored; they
    // mark the first output row.
    let whole = ignore == Ignore::No;
    let first_output = outputs.iter().position(|&o| o).filter(|_| whole);
    let min_or_max =
        |key: &str, output: bool, is_min: bool| min_or_max(&outputs, extras, key, output, is_min);
    match mode {
        // A structure-only compare grades nothing: msprobe refuses one in which a matched
        // target node has data (`stage::pair`), so no row reaches here.
        CompareMode::Structure => {}
        CompareMode::Md5 => check_rows(&mut grades, rows, &graded, crc32_err),
        CompareMode::Summary | CompareMode::Tensor => {
            let tensor = mode == CompareMode::Tensor;
            check_rows(&mut grades, rows, &graded, inf_nan_err);
            if tensor {
                if let Some(o) = first_output.filter(|_| one_thousandth_err(&min_or_max)) {
                    grades[o].raise(Level::Error, MSG_ONE_THOUSANDTH);
                }
            } else if whole {
                // RelativeErrChecker
                if min_or_max("NormRelativeErr", false, false).abs() < 0.1 {
                    for i in kept(&outputs) {
                        if str2float(extra(&extras[i], "NormRelativeErr")).abs() > 0.5 {
                            grades[i].raise(Level::Error, MSG_NORM_REL);
                        }
                    }
                }
            }
            check_rows(&mut grades, rows, &graded, requires_grad_err);
            if whole {
                let inputs: Vec<bool> = outputs.iter().map(|&o| !o).collect();
                check_rows(&mut grades, rows, &kept(&inputs), parameters_err);
            }
            check_rows(&mut grades, rows, &graded, dtype_err);
            if !parallel_merge {
                check_rows(&mut grades, rows, &graded, shape_err);
            }
            if let Some(o) = first_output {
                if tensor && cosine_warn(&min_or_max) {
                    grades[o].raise(Level::Warning, MSG_COSINE);
                } else if !tensor && relative_warn(&min_or_max) {
                    grades[o].raise(Level::Warning, MSG_NORM_WARN);
                }
            }
        }
    }
    grades.into_iter().map(|g| (g.level, g.messages)).collect()
}

/// The min (`is_min`) or max of a column over the input or the `output` rows.
type MinOrMax<'a> = dyn Fn(&str, bool, bool) -> f64 + 'a;

/// `OneThousandthErrChecker` (on the first output row; msprobe tests `< 0.1` although its
/// message says 0.6).
fn one_thousandth_err(min_or_max: &MinOrMax) -> bool {
    let key = "One Thousandth Err Ratio";
    min_or_max(key, false, true) > 0.9 && min_or_max(key, true, true) < 0.1
}

/// `CosineWarnChecker` (on the first output row).
fn cosine_warn(min_or_max: &MinOrMax) -> bool {
    let (min_in, min_out) = (
        min_or_max("Cosine", false, true),
        min_or_max("Cosine", true, true),
    );
    min_in > 0.9 && min_in - min_out > 0.1
}

/// `RelativeWarnChecker` (on the first output row).
fn relative_warn(min_or_max: &MinOrMax) -> bool {
    let inp = min_or_max("NormRelativeErr", false, false).abs();
    let out = min_or_max("NormRelativeErr", true, false).abs();
    if inp == 0.0 {
        out > 0.1
    } else {
        out / inp > 10.0
    }
}

/// A checker of one row: the grade it raises, if any.
type RowChecker = fn(&Row) -> Option<(Level, &'static str)>;

/// The target's and the golden's `key` of a row when both are truthy (the checkers skip the
/// row otherwise).
fn both_truthy<'r>(r: &'r Row, key: &str) -> Option<(&'r PyVal, &'r PyVal)> {
    let (n, b) = (r.npu.get(key), bench_cell(r, key));
    if !truthy(n) || !truthy(b) {
        return None;
    }
    Some((n?, b?))
}

/// Runs `check` on the rows `which`, in order.
fn check_rows(grades: &mut [Grade], rows: &[Row], which: &[usize], check: RowChecker) {
    for &i in which {
        if let Some((level, msg)) = check(&rows[i]) {
            grades[i].raise(level, msg);
        }
    }
}

/// `CRC32ErrChecker`.
fn crc32_err(r: &Row) -> Option<(Level, &'static str)> {
    let n = text(Some(r.npu), "md5");
    let b = bench_cell(r, "md5")
        .map(PyVal::py_str)
        .unwrap_or_else(|| "N/A".into());
    if n == b {
        None
    } else if ["N/A", "Nan", ""].contains(&n.as_str()) || ["N/A", "Nan", ""].contains(&b.as_str()) {
        Some((Level::Warning, MSG_NO_BENCH))
    } else {
        Some((Level::Error, MSG_CRC))
    }
}

/// `InfNanErrChecker`.
fn inf_nan_err(r: &Row) -> Option<(Level, &'static str)> {
    if is_inf_nan(bench_cell(r, "Max")) || is_inf_nan(bench_cell(r, "Min")) {
        return None;
    }
    (is_inf_nan(r.npu.get("Max")) || is_inf_nan(r.npu.get("Min")))
        .then_some((Level::Error, MSG_INF_NAN))
}

/// `RequiresGradErrChecker`.
fn requires_grad_err(r: &Row) -> Option<(Level, &'static str)> {
    if ["", "N/A"].contains(&bench_name(r)) {
        return None;
    }
    let (n, b) = both_truthy(r, "requires_grad")?;
    (!py_eq(n, b)).then_some((Level::Error, MSG_REQ_GRAD))
}

/// `ParametersErrChecker` (input rows).
fn parameters_err(r: &Row) -> Option<(Level, &'static str)> {
    if ["", "N/A"].contains(&bench_name(r)) {
        return None;
    }
    let (nd, bd) = both_truthy(r, "dtype")?;
    let class = |v: &PyVal| v.as_str().is_some_and(|s| s.contains("class"));
    if !class(nd) || !class(bd) || text(Some(r.npu), "shape") != "[]" {
        return None;
    }
    (!same_value(r.npu.get("Max"), bench_cell(r, "Max"))).then_some((Level::Error, MSG_PARAMS))
}

/// `DTypeErrChecker`.
fn dtype_err(r: &Row) -> Option<(Level, &'static str)> {
    let bname = bench_name(r);
    if ["", "N/A"].contains(&bname) || r.npu_name == "N/A" {
        return None;
    }
    if bname.contains("qkv") || bname.contains("gate_up") {
        return None;
    }
    let (nd, bd) = both_truthy(r, "dtype")?;
    (!py_eq(nd, bd)).then_some((Level::Error, MSG_DTYPE))
}

/// `ShapeErrChecker` (not run on merged graphs).
fn shape_err(r: &Row) -> Option<(Level, &'static str)> {
    if ["", "N/A"].contains(&bench_name(r)) {
        return None;
    }
    let (ns, bs) = (r.npu.get("shape")?, bench_cell(r, "shape")?);
    if ns.is_none() || bs.is_none() {
        return None;
    }
    (!py_eq(ns, bs)).then_some((Level::Error, MSG_SHAPE))
}

fn same_value(a: Option<&PyVal>, b: Option<&PyVal>) -> bool {
    match (a.and_then(PyVal::as_number), b.and_then(PyVal::as_number)) {
        (Some(x), Some(y)) => x == y,
        _ => a.map(PyVal::py_str) == b.map(PyVal::py_str),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_ascend_dump::{parse_op, OpData};
    use serde_json::{json, Value};

    fn tensor(shape: Value, rg: bool) -> Value {
        json!({"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape,
               "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": rg})
    }

    /// Rows of two ops paired by position (inputs, then outputs), graded in statistics mode.
    fn graded(name: &str, npu: &OpData, bench: &OpData) -> Vec<(Level, Vec<String>)> {
        let mut rows = Vec::new();
        for (out, n, b) in [
            (false, &npu.input, &bench.input),
            (true, &npu.output, &bench.output),
        ] {
            for (i, (name, item)) in n.iter().enumerate() {
                rows.push(Row {
                    npu_name: name,
                    npu: item,
                    bench_name: b.get(i).map(|(n, _)| n.as_str()),
                    bench: b.get(i).map(|(_, it)| it),
                    is_output: out,
                    index: i,
                });
            }
        }
        let extras = vec![Vec::new(); rows.len()];
        grade(CompareMode::Summary, name, &rows, &extras)
    }

    #[test]
    fn an_ignored_api_without_input_rows_is_graded() {
        // FINDINGS.md rule 3: msprobe names the API from the first input row.
        let n = parse_op(
            "Torch.empty.0.forward",
            &json!({"output": [tensor(json!([2]), false)]}),
        );
        let b = parse_op(
            "Torch.empty.0.forward",
            &json!({"output": [tensor(json!([3]), false)]}),
        );
        assert_eq!(graded("Torch.empty.0.forward", &n, &b)[0].1, [MSG_SHAPE]);
        let with_input = |shape| json!({"input_args": [tensor(json!([1]), false)], "output": [tensor(shape, false)]});
        let n = parse_op("Torch.empty.0.forward", &with_input(json!([2])));
        let b = parse_op("Torch.empty.0.forward", &with_input(json!([3])));
        assert!(graded("Torch.empty.0.forward", &n, &b)[1].1.is_empty());
    }

    #[test]
    fn an_unmatched_target_item_and_a_none_argument() {
        // FINDINGS.md rules 2 and 6: an extra target item meets 'Nan' golden cells; a golden None
        // argument has no dtype or shape to compare.
        let n = parse_op(
            "Tensor.add.0.forward",
            &json!({"input_args": [tensor(json!([2]), true), tensor(json!([2]), true)],
                    "output": [tensor(json!([2]), true)]}),
        );
        let b = parse_op(
            "Tensor.add.0.forward",
            &json!({"input_args": [null], "output": [tensor(json!([2]), true)]}),
        );
        let g = graded("Tensor.add.0.forward", &n, &b);
        assert!(g[0].1.is_empty(), "{:?}", g[0]);
        assert_eq!(g[1].1, [MSG_REQ_GRAD, MSG_DTYPE, MSG_SHAPE]);
        assert!(g[2].1.is_empty());
    }

    #[test]
    fn a_scalar_against_a_0d_tensor_differs_in_shape() {
        // FINDINGS.md rule 4: '[]' (a scalar's shape text) is not [] (a 0-d tensor's shape).
        let n = parse_op(
            "Mint.cat.0.forward",
            &json!({"input_args": [{"type": "float", "value": 1e-5}]}),
        );
        let b = parse_op(
            "Mint.cat.0.forward",
            &json!({"input_args": [tensor(json!([]), false)]}),
        );
        let g = graded("Mint.cat.0.forward", &n, &b);
        assert!(g[0].1.contains(&MSG_SHAPE.to_string()), "{:?}", g[0]);
    }
}

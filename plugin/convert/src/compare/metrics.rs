//! The numbers of a compared row: statistics differences and real-tensor metrics.
//!
//! Statistics (`get_rela_diff_summary_mode`): `diff = npu - bench` for Max/Min/Mean/Norm and the
//! relative error `|diff / bench * 100|%` (`N/A` for a zero bench value or non-numbers, `Nan`
//! when the difference is NaN). Tensor metrics follow msprobe's `npy_compare` and builtin
//! algorithms: Cosine, EucDist, MaxAbsErr, MaxRelativeErr and the one/five-thousandths ratios.
//!
//! Why plain slices and not `ndarray` (it was asked): every metric is one pass over two
//! contiguous `f64` slices of equal length (a sum, a maximum or a count), so an array type adds
//! views and shapes that nothing here uses, and without a BLAS backend its `dot`/`sum` are
//! its own unrolled loops, not faster kernels. Those loops add in another order (several
//! accumulators, pairwise sums), which moves the last bits of Cosine and EucDist; the values
//! are kept to 12 decimals ([`format_value`]), so a reordered sum can change a stored digit and
//! the parity tests pin the sequential sums. The unused `ndarray` entry was removed from the
//! workspace's dependencies.

use graph_ascend_dump::{FieldName, PyVal, TENSOR_METRIC_COLUMNS as TENSOR_COLUMNS};

use super::row::Row;
use crate::error::ConvertError;

/// Where the two sides' real tensors are.
pub struct TensorDirs {
    pub npu: String,
    pub bench: String,
    /// Where the tensor files may be read from.
    pub confine: graph_ascend_dump::Confine,
}

const STATS: [(&str, &str, &str); 4] = [
    ("Max", "Max diff", "MaxRelativeErr"),
    ("Min", "Min diff", "MinRelativeErr"),
    ("Mean", "Mean diff", "MeanRelativeErr"),
    ("Norm", "L2norm diff", "NormRelativeErr"),
];

/// A cell, with msprobe's trailing tab on `inf`/`-inf`/`nan` text.
fn cell(v: PyVal) -> PyVal {
    // Only a float or those very texts print as one of the three; the check formats nothing.
    let special = match &v {
        PyVal::Float(f) => !f.is_finite(),
        PyVal::Str(s) => matches!(s.as_str(), "inf" | "-inf" | "nan"),
        _ => false,
    };
    if special {
        PyVal::Str(format!("{}\t", v.py_str()))
    } else {
        v
    }
}

/// The eight statistics columns of a row.
pub fn summary_columns(row: &Row) -> Vec<(FieldName, PyVal)> {
    if row.bench.is_none() {
        // A target item with no golden counterpart: msprobe leaves the cells blank.
        return STATS
            .iter()
            .map(|(_, d, _)| (FieldName::Borrowed(*d), PyVal::Str(" ".into())))
            .chain(
                STATS
                    .iter()
                    .map(|(_, _, r)| (FieldName::Borrowed(*r), PyVal::Str(" ".into()))),
            )
            .collect();
    }
    let mut diffs = Vec::with_capacity(4);
    let mut rels = Vec::with_capacity(4);
    for (stat, _, _) in STATS {
        let n = row.npu.get(stat);
        let b = row.bench.and_then(|b| b.get(stat));
        let (d, r) = stat_diff(n, b);
        diffs.push(cell(d));
        rels.push(cell(r));
    }
    let mut out = Vec::with_capacity(8);
    for ((_, name, _), d) in STATS.iter().zip(diffs) {
        out.push((FieldName::Borrowed(*name), d));
    }
    for ((_, _, name), r) in STATS.iter().zip(rels) {
        out.push((FieldName::Borrowed(*name), r));
    }
    out
}

/// `(diff, relative error)` of one statistic.
pub fn stat_diff(n: Option<&PyVal>, b: Option<&PyVal>) -> (PyVal, PyVal) {
    let na = || (PyVal::Str("N/A".into()), PyVal::Str("N/A".into()));
    let (Some(n), Some(b)) = (n, b) else {
        return na();
    };
    let diff = match (n, b) {
        (PyVal::Int(x), PyVal::Int(y)) => match x.checked_sub(*y) {
            Some(d) => PyVal::Int(d),
            None => PyVal::Float(*x as f64 - *y as f64),
        },
        (PyVal::Int(_) | PyVal::Float(_), PyVal::Int(_) | PyVal::Float(_)) => {
            let (Some(x), Some(y)) = (n.as_number(), b.as_number()) else {
                return na();
            };
            PyVal::Float(x - y)
        }
        _ => return na(),
    };
    let d = diff.as_number().unwrap_or(f64::NAN);
    if d.is_nan() {
        return (PyVal::Str("Nan".into()), PyVal::Str("Nan".into()));
    }
    let bench = b.as_number().unwrap_or(f64::NAN);
    let rel = if bench != 0.0 {
        let r = (d / bench * 100.0).abs();
        PyVal::Str(format!("{}%", graph_ascend_dump::pyval::float_repr(r)))
    } else {
        PyVal::Str("N/A".into())
    };
    (diff, rel)
}

/// msprobe's `format_value`: 12 decimals, back to a float.
fn format_value(v: f64) -> f64 {
    format!("{v:.12}").parse().unwrap_or(v)
}

/// Result of one metric: a number or one of msprobe's text markers.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    Value(f64),
    Text(&'static str),
}

impl Metric {
    fn into_pyval(self) -> PyVal {
        match self {
            Metric::Value(v) => PyVal::Float(v),
            Metric::Text(t) => PyVal::Str(t.into()),
        }
    }
}

/// Cosine similarity (`unsupported` for fewer than 2 elements).
pub fn cosine(a: &[f64], b: &[f64]) -> Metric {
    if a.len() <= 1 || b.len() <= 1 {
        return Metric::Text("unsupported");
    }
    let na = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    let eps = f64::EPSILON;
    if na <= eps && nb <= eps {
        return Metric::Value(1.0);
    }
    if na <= eps || nb <= eps {
        return Metric::Text("Nan");
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let c = dot / (na * nb);
    if c.is_nan() {
        return Metric::Text("Nan");
    }
    let c = if c > 0.9999 {
        (c * 1e6).round() / 1e6
    } else {
        c
    };
    Metric::Value(format_value(c))
}

/// Euclidean distance `||a - b||`, unrounded: msprobe's EucDist is the only metric it does not
/// pass through `format_value`.
pub fn euc_dist(a: &[f64], b: &[f64]) -> Metric {
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    Metric::Value(d)
}

/// `max |a - b|`.
pub fn max_abs_err(a: &[f64], b: &[f64]) -> Metric {
    let mut m = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        let d = (x - y).abs();
        if d.is_nan() {
            return Metric::Text("Nan");
        }
        m = m.max(d);
    }
    Metric::Value(format_value(m))
}

/// The float type msprobe computes relative errors in (`get_relative_err`): integer and bool
/// data are first made float64, then `np.result_type(n, b, float32)`; so float32 for two
/// float16/float32/bfloat16 tensors (bfloat16 is read as float32), float64 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelType {
    F32,
    F64,
}

impl RelType {
    /// The type for two tensors of these dtypes.
    pub fn of(n: &str, b: &str) -> RelType {
        let small = |d: &str| matches!(d, "float16" | "float32" | "bfloat16");
        if small(n) && small(b) {
            RelType::F32
        } else {
            RelType::F64
        }
    }
}

/// Relative errors `|(n - b) / b|` computed in `ty`, with that type's epsilon added to both
/// sides where `b == 0`.
fn relative_errors<'a>(a: &'a [f64], b: &'a [f64], ty: RelType) -> impl Iterator<Item = f64> + 'a {
    a.iter().zip(b).map(move |(&x, &y)| match ty {
        RelType::F64 => {
            let (x, y) = if y == 0.0 {
                (x + f64::EPSILON, y + f64::EPSILON)
            } else {
                (x, y)
            };
            ((x - y) / y).abs()
        }
        RelType::F32 => {
            let (mut x, mut y) = (x as f32, y as f32);
            if y == 0.0 {
                x += f32::EPSILON;
                y += f32::EPSILON;
            }
            f64::from(((x - y) / y).abs())
        }
    })
}

/// `max |(n - b) / b|`.
pub fn max_relative_err(a: &[f64], b: &[f64], ty: RelType) -> Metric {
    let mut m = 0.0f64;
    for r in relative_errors(a, b, ty) {
        if r.is_nan() {
            return Metric::Text("Nan");
        }
        m = m.max(r);
    }
    Metric::Value(format_value(m))
}

/// Fraction of elements whose relative error is below `threshold`.
pub fn err_ratio(a: &[f64], b: &[f64], ty: RelType, threshold: f64) -> Metric {
    if a.is_empty() {
        return Metric::Text("unsupported");
    }
    let n = relative_errors(a, b, ty).filter(|r| *r < threshold).count();
    Metric::Value(format_value(n as f64 / a.len() as f64))
}

/// All six metrics of two tensors, with msprobe's validation (`ValidateTensor.check_tensor`) in
/// its order: an empty target tensor, then shapes (after `np.squeeze`), then 0-d tensors, then
/// NaN/Inf positions.
///
/// A tensor that squeezes to 0-d stops the validation before the NaN/Inf rule: Cosine, EucDist
/// and both ratios are `unsupported`, MaxAbsErr and MaxRelativeErr are computed from the raw
/// values (so NaN gives `Nan`).
pub fn tensor_metrics(
    n: &graph_ascend_dump::tensor::Tensor,
    b: &graph_ascend_dump::tensor::Tensor,
) -> Vec<Metric> {
    let text = |t: &'static str| vec![Metric::Text(t); 6];
    if n.data.is_empty() {
        return text("unsupported");
    }
    if n.squeezed_shape() != b.squeezed_shape() {
        return text("shape unmatched");
    }
    let ty = RelType::of(n.dtype, b.dtype);
    let unsupported = || Metric::Text("unsupported");
    if n.squeezed_shape().is_empty() {
        return vec![
            unsupported(),
            unsupported(),
            scalar_abs_err(n, b),
            max_relative_err(&n.data, &b.data, ty),
            unsupported(),
            unsupported(),
        ];
    }
    let mut a = n.data.clone();
    let mut c = b.data.clone();
    let bad_a: Vec<bool> = a.iter().map(|x| !x.is_finite()).collect();
    let bad_c: Vec<bool> = c.iter().map(|x| !x.is_finite()).collect();
    if bad_a.iter().any(|x| *x) || bad_c.iter().any(|x| *x) {
        let same = a.iter().zip(&c).all(|(x, y)| {
            x.is_finite() == y.is_finite()
                && (x.is_finite() || x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
        });
        if !same {
            return text("N/A");
        }
        for (i, bad) in bad_a.iter().enumerate() {
            if *bad {
                a[i] = 0.0;
                c[i] = 0.0;
            }
        }
    }
    vec![
        cosine(&a, &c),
        euc_dist(&a, &c),
        max_abs_err(&a, &c),
        max_relative_err(&a, &c, ty),
        err_ratio(&a, &c, ty, 0.001),
        err_ratio(&a, &c, ty, 0.005),
    ]
}

/// MaxAbsErr of two 0-d tensors: msprobe does not widen them to float64 (`flatten_numpy` keeps
/// a 0-d array), so the difference is rounded to the tensors' common type.
fn scalar_abs_err(
    n: &graph_ascend_dump::tensor::Tensor,
    b: &graph_ascend_dump::tensor::Tensor,
) -> Metric {
    let (Some(&x), Some(&y)) = (n.data.first(), b.data.first()) else {
        return Metric::Text("unsupported");
    };
    let d = x - y;
    let d = match (n.dtype, b.dtype) {
        ("float16", "float16") => half::f16::from_f64(d).to_f64(),
        (p, q) if RelType::of(p, q) == RelType::F32 => f64::from(d as f32),
        _ => d,
    };
    max_abs_err(&[d], &[0.0])
}

/// The six tensor columns of a row (reads the two tensor files).
pub fn tensor_columns(
    row: &Row,
    dirs: Option<&TensorDirs>,
) -> Result<Vec<(FieldName, PyVal)>, ConvertError> {
    let named = |vals: Vec<Metric>| {
        TENSOR_COLUMNS
            .iter()
            .zip(vals)
            .map(|(k, v)| (FieldName::Borrowed(*k), v.into_pyval()))
            .collect()
    };
    let data_name = |it: Option<&graph_ascend_dump::Item>| {
        it.and_then(|i| i.get("data_name"))
            .and_then(PyVal::as_str)
            .filter(|s| *s != "-1")
            .map(str::to_string)
    };
    // Scalars and other non-tensor items have no data file: nothing to compute.
    let (Some(dirs), Some(nd), Some(bd)) = (dirs, data_name(Some(row.npu)), data_name(row.bench))
    else {
        return Ok(named(vec![Metric::Text("unsupported"); 6]));
    };
    let (np, bp) = (
        std::path::Path::new(&dirs.npu).join(&nd),
        std::path::Path::new(&dirs.bench).join(&bd),
    );
    if !np.is_file() || !bp.is_file() {
        return Ok(named(vec![Metric::Text("No real data"); 6]));
    }
    let n = graph_ascend_dump::tensor::Tensor::read(&np, &dirs.confine)?;
    let b = graph_ascend_dump::tensor::Tensor::read(&bp, &dirs.confine)?;
    Ok(named(tensor_metrics(&n, &b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(m: Metric) -> f64 {
        match m {
            Metric::Value(v) => v,
            Metric::Text(t) => panic!("expected a value, got {t}"),
        }
    }

    #[test]
    fn cosine_against_hand_values() {
        // a·b = 1*2 + 2*1 = 4; |a| = |b| = sqrt(5) → 0.8
        assert!((v(cosine(&[1.0, 2.0], &[2.0, 1.0])) - 0.8).abs() < 1e-12);
        assert_eq!(v(cosine(&[0.0, 0.0], &[0.0, 0.0])), 1.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), Metric::Text("Nan"));
        assert_eq!(cosine(&[1.0], &[1.0]), Metric::Text("unsupported"));
        // Rounded to 6 decimals above 0.9999.
        let c = v(cosine(&[1.0, 1.0, 1.0], &[1.0, 1.0, 1.00001]));
        assert_eq!(c, 1.0);
    }

    #[test]
    fn distances_against_hand_values() {
        // (3,4) apart → 5
        assert_eq!(v(euc_dist(&[0.0, 0.0], &[3.0, 4.0])), 5.0);
        assert_eq!(v(max_abs_err(&[1.0, -2.0], &[1.5, 1.0])), 3.0);
        assert_eq!(max_abs_err(&[f64::NAN], &[1.0]), Metric::Text("Nan"));
    }

    #[test]
    fn relative_errors_against_hand_values() {
        let eps = RelType::F64;
        // |(1.1-1)/1| = 0.1, |(2-4)/4| = 0.5
        assert!((v(max_relative_err(&[1.1, 2.0], &[1.0, 4.0], eps)) - 0.5).abs() < 1e-12);
        // zero bench: eps added to both sides → (0+eps - eps)/eps = 0
        assert_eq!(v(max_relative_err(&[0.0], &[0.0], eps)), 0.0);
        // zero bench, non-zero target: the epsilon of the computing type divides
        // (FINDINGS.md rule 16: msprobe's float64 for integer data, float32 for float32 data).
        assert_eq!(
            v(max_relative_err(&[1.0], &[0.0], RelType::F64)),
            format_value(1.0 / f64::EPSILON)
        );
        let f32_err = f64::from((1.0f32 + f32::EPSILON - f32::EPSILON) / f32::EPSILON);
        assert_eq!(
            v(max_relative_err(&[1.0], &[0.0], RelType::F32)),
            format_value(f32_err)
        );
        assert_eq!(RelType::of("int64", "int64"), RelType::F64);
        assert_eq!(RelType::of("float32", "bfloat16"), RelType::F32);
        assert_eq!(RelType::of("float32", "float64"), RelType::F64);
        // errors 0.0005, 0.003, 0.01 → below 0.001: 1 of 3; below 0.005: 2 of 3
        let a = [1.0005, 1.003, 1.01];
        let b = [1.0, 1.0, 1.0];
        assert!((v(err_ratio(&a, &b, eps, 0.001)) - 0.333333333333).abs() < 1e-12);
        assert!((v(err_ratio(&a, &b, eps, 0.005)) - 0.666666666667).abs() < 1e-12);
    }

    #[test]
    fn statistics_diffs() {
        let (d, r) = stat_diff(Some(&PyVal::Float(1.5)), Some(&PyVal::Float(1.0)));
        assert_eq!(d, PyVal::Float(0.5));
        assert_eq!(r, PyVal::Str("50.0%".into()));
        let (d, r) = stat_diff(Some(&PyVal::Int(64)), Some(&PyVal::Int(64)));
        assert_eq!(d, PyVal::Int(0));
        assert_eq!(r, PyVal::Str("0.0%".into()));
        let (_, r) = stat_diff(Some(&PyVal::Float(1.0)), Some(&PyVal::Float(0.0)));
        assert_eq!(r, PyVal::Str("N/A".into()));
        let (d, r) = stat_diff(
            Some(&PyVal::Float(f64::INFINITY)),
            Some(&PyVal::Float(f64::INFINITY)),
        );
        assert_eq!((d, r), (PyVal::Str("Nan".into()), PyVal::Str("Nan".into())));
        let (d, _) = stat_diff(Some(&PyVal::Str("x".into())), Some(&PyVal::Float(1.0)));
        assert_eq!(d, PyVal::Str("N/A".into()));
    }
}

//! msprobe 26.2's pre-check numbers for one output, computed as its code computes them.
//!
//! Source: the `mindstudio-probe==26.2.0` wheel, `msprobe/pytorch/api_accuracy_checker/`:
//! `compare/algorithm.py` (the metric functions), `precision_standard/benchmark_compare.py`
//! and `standard_config.py` (small-value thresholds), `precision_standard/ulp_compare.py`,
//! and `compare/compare.py` (`_compare_float_tensor`: the stage-1 status).
//!
//! msprobe runs these on numpy arrays: the bench (CPU) output one precision up (fp32 for a
//! bf16/fp16 device output, fp64 for fp32) and the device output (bf16 widened to fp32, fp16
//! kept). numpy computes in the wider of the two (fp32 for 16-bit outputs), so this module
//! rounds every intermediate to that dtype, sums with numpy's pairwise summation, and compares
//! against thresholds rounded to it: its counts and shares equal msprobe's exactly (checked by
//! `make test-differential-replay`, a frozen slice in `cargo test`).

use serde::Serialize;

use crate::dtype::Dtype;

/// msprobe's numbers for one output (a `DETAIL_TEST_ROWS` row without names and dtypes).
/// `None` where msprobe leaves the column blank (its stage 1 stopped before it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Numbers {
    /// 余弦相似度 (`None`: msprobe writes a blank, e.g. for a single element).
    pub cosine: Option<f64>,
    /// 最大绝对误差.
    pub max_abs_err: Option<f64>,
    /// 双百指标, 双千指标, 双万指标: shares of elements with relative error below 1 %, 0.1 %, 0.01 %.
    pub rel_err_hundredth: Option<f64>,
    pub rel_err_thousandth: Option<f64>,
    pub rel_err_ten_thousandth: Option<f64>,
    /// 误差均衡性.
    pub error_balance: f64,
    /// 均方根误差.
    pub rmse: f64,
    /// 小值域错误占比.
    pub small_value_err_ratio: f64,
    /// 相对误差最大值, 相对误差平均值.
    pub max_rel_err: f64,
    pub mean_rel_err: f64,
    /// ULP误差最大值, ULP误差平均值, ULP误差大于阈值占比 (msprobe's ULP standard: the matmul
    /// family only).
    pub ulp: Option<UlpNumbers>,
    /// Stage 1: `pass`, `warning` or `error`.
    pub status: &'static str,
    /// msprobe's message for the status, its text as `_compare_float_tensor` writes it.
    pub message: String,
    /// Which metrics msprobe returns as the Python int `0` rather than a float (its CSV then
    /// writes `0`, not `0.00000000000000`).
    #[serde(skip)]
    pub int_zeros: IntZeros,
}

/// The metrics msprobe's functions return as the Python int `0` for want of elements:
/// `get_small_value_err_ratio` without small values, `get_max_rel_err` and
/// `get_mean_rel_err` when every element is small or inf/NaN.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntZeros {
    pub small_value_err_ratio: bool,
    pub max_rel_err: bool,
    pub mean_rel_err: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UlpNumbers {
    pub max: f64,
    pub mean: f64,
    pub share_above_threshold: f64,
}

/// The dtype numpy computes in: the wider of the bench's and the device's arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    F32,
    F64,
}

impl Work {
    /// For a device output of `dtype` (bench one precision up).
    pub fn of(dtype: Dtype) -> Work {
        match dtype {
            Dtype::Bf16 | Dtype::F16 => Work::F32,
            Dtype::F32 | Dtype::F64 => Work::F64,
        }
    }

    #[inline]
    pub fn round(self, x: f64) -> f64 {
        match self {
            Work::F32 => x as f32 as f64,
            Work::F64 => x,
        }
    }
}

/// `np.max`'s pairwise maximum: NaN wins.
fn nan_max(m: f64, x: f64) -> f64 {
    if m.is_nan() || x.is_nan() {
        f64::NAN
    } else {
        m.max(x)
    }
}

/// The bench dtype msprobe runs the CPU reference in for a device output of `dtype`.
pub fn bench_dtype(dtype: Dtype) -> Dtype {
    match dtype {
        Dtype::Bf16 | Dtype::F16 => Dtype::F32,
        Dtype::F32 | Dtype::F64 => Dtype::F64,
    }
}

/// numpy's pairwise summation (`@TYPE@_pairwise_sum`, blocks of 8 up to 128 elements), every
/// addition rounded to `w`.
pub fn pairwise_sum(a: &[f64], w: Work) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for &x in a {
            res = w.round(res + x);
        }
        res
    } else if n <= 128 {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - (n % 8) {
            for j in 0..8 {
                r[j] = w.round(r[j] + a[i + j]);
            }
            i += 8;
        }
        let s01 = w.round(r[0] + r[1]);
        let s23 = w.round(r[2] + r[3]);
        let s45 = w.round(r[4] + r[5]);
        let s67 = w.round(r[6] + r[7]);
        let mut res = w.round(w.round(s01 + s23) + w.round(s45 + s67));
        while i < n {
            res = w.round(res + a[i]);
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        w.round(pairwise_sum(&a[..n2], w) + pairwise_sum(&a[n2..], w))
    }
}

/// `np.mean` of an array in `w` (`sum / n`, rounded to `w`).
pub fn np_mean(a: &[f64], w: Work) -> f64 {
    if a.is_empty() {
        return f64::NAN;
    }
    w.round(pairwise_sum(a, w) / a.len() as f64)
}

/// `cosine_sim(bench, device)`: `(value, passes, message)`; `None` is msprobe's blank.
pub fn cosine(bench: &[f64], device: &[f64]) -> (Option<f64>, bool, &'static str) {
    if bench.len() != device.len() {
        return (
            Some(-1.0),
            false,
            "Shape of device and bench outputs don't match.",
        );
    }
    if device.len() == 1 {
        return (
            None,
            true,
            "All the data in device dump data is scalar. Please refer to other compare algorithms.",
        );
    }
    let max_abs = |v: &[f64]| {
        v.iter().fold(0.0f64, |m, x| {
            if m.is_nan() || x.is_nan() {
                f64::NAN
            } else {
                m.max(x.abs())
            }
        })
    };
    let (n_max, b_max) = (max_abs(device), max_abs(bench));
    let eps = f64::EPSILON;
    if n_max <= eps && b_max <= eps {
        return (
            None,
            true,
            "All the data in device and bench outputs are zero.",
        );
    } else if n_max <= eps {
        return (None, false, "All the data is zero in device dump data.");
    } else if b_max <= eps {
        return (None, false, "All the data is zero in bench dump data.");
    }
    let (mut dot, mut nn, mut bb) = (0.0, 0.0, 0.0);
    for (&b, &d) in bench.iter().zip(device) {
        let (x, y) = (d / n_max, b / b_max);
        dot += x * y;
        nn += x * x;
        bb += y * y;
    }
    let cos = dot / (nn.sqrt() * bb.sqrt());
    if cos.is_nan() {
        return (
            Some(f64::NAN),
            true,
            "Dump data has NaN when comparing with Cosine Similarity.",
        );
    }
    let cos = cos.clamp(-1.0, 1.0);
    (Some(cos), cos > 0.99, "")
}

/// Elementwise arrays msprobe derives from the two outputs.
struct Derived {
    abs_err: Vec<f64>,
    /// `abs_err / (|bench| + eps)` (`get_rel_err_origin`).
    rel_err_origin: Vec<f64>,
    abs_bench: Vec<f64>,
    inf_nan: Vec<bool>,
    both_finite: Vec<bool>,
}

fn derive(bench: &[f64], device: &[f64], dtype: Dtype) -> Derived {
    let w = Work::of(dtype);
    let eps = match dtype {
        Dtype::Bf16 => (-8f64).exp2(),
        other => {
            // np.finfo(bench.dtype).eps
            let b = bench_dtype(other);
            (-(b.mantissa_bits() as f64)).exp2()
        }
    };
    let mut d = Derived {
        abs_err: Vec::with_capacity(bench.len()),
        rel_err_origin: Vec::with_capacity(bench.len()),
        abs_bench: Vec::with_capacity(bench.len()),
        inf_nan: Vec::with_capacity(bench.len()),
        both_finite: Vec::with_capacity(bench.len()),
    };
    for (&b, &x) in bench.iter().zip(device) {
        let abs_err = w.round((x - b).abs());
        let abs_bench = b.abs();
        let with_eps = w.round(abs_bench + eps);
        d.abs_err.push(abs_err);
        d.rel_err_origin.push(w.round(abs_err / with_eps).abs());
        d.abs_bench.push(abs_bench);
        // `bench.astype(device.dtype)`: fp16 overflows where fp32 did not.
        let b_dev = if dtype == Dtype::F16 {
            dtype.round(b)
        } else {
            b
        };
        let finite = x.is_finite() && b_dev.is_finite();
        d.both_finite.push(finite);
        d.inf_nan.push(!finite);
    }
    d
}

/// `get_rel_err_ratio(rel_err, thr)`: the share below `thr` (compared in the work dtype) and
/// whether it exceeds `1 − thr`.
pub fn rel_err_ratio(rel_err: &[f64], thr: f64, w: Work) -> (f64, bool) {
    let ratio = if rel_err.is_empty() {
        1.0
    } else {
        let t = w.round(thr);
        rel_err.iter().filter(|&&r| r < t).count() as f64 / rel_err.len() as f64
    };
    (ratio, ratio > 1.0 - thr)
}

/// `get_error_balance`: `|#(d > b) − #(d < b)| / N`, `b` cast to the device dtype first.
pub fn error_balance(bench: &[f64], device: &[f64], dtype: Dtype) -> f64 {
    if bench.is_empty() {
        return 0.0;
    }
    let (mut larger, mut smaller) = (0i64, 0i64);
    for (&b, &d) in bench.iter().zip(device) {
        let b = match dtype {
            Dtype::F16 => Dtype::F16.round(b),
            Dtype::Bf16 => b, // widened to fp32 beside an fp32 bench
            Dtype::F32 => Dtype::F32.round(b),
            Dtype::F64 => b,
        };
        if d > b {
            larger += 1;
        } else if d < b {
            smaller += 1;
        }
    }
    (larger - smaller).abs() as f64 / bench.len() as f64
}

/// `StandardConfig.get_small_value` and the benchmark's `get_small_value_atol`.
pub fn small_value_thresholds(dtype: Dtype) -> (f64, f64) {
    match dtype {
        Dtype::F16 | Dtype::Bf16 => ((-10f64).exp2(), 1e-16),
        Dtype::F32 | Dtype::F64 => ((-20f64).exp2(), (-30f64).exp2()),
    }
}

/// The benchmark standard's metrics (`BenchmarkCompare._compute_metrics`):
/// `(small_value_err_ratio, rmse, eb, max_rel_err, mean_rel_err)` and which of them are the
/// Python int `0`.
pub fn benchmark(
    bench: &[f64],
    device: &[f64],
    dtype: Dtype,
) -> ((f64, f64, f64, f64, f64), IntZeros) {
    let w = Work::of(dtype);
    let d = derive(bench, device, dtype);
    let (small, atol) = small_value_thresholds(dtype);
    // abs_bench is in the bench dtype (fp32 or fp64), compared with a Python float.
    let small_t = bench_dtype(dtype).round(small);
    let atol_t = w.round(atol);
    let small_mask: Vec<bool> = d
        .abs_bench
        .iter()
        .zip(&d.both_finite)
        .map(|(&a, &f)| a <= small_t && f)
        .collect();
    let small_count = small_mask.iter().filter(|&&s| s).count();
    let small_err = small_mask
        .iter()
        .zip(&d.abs_err)
        .filter(|(&s, &e)| s && e > atol_t)
        .count();
    let small_value_err_ratio = if small_count == 0 {
        0.0
    } else {
        small_err as f64 / small_count as f64
    };
    // get_rmse(abs_err, inf_nan | small)
    let masked: Vec<f64> = d
        .abs_err
        .iter()
        .zip(d.inf_nan.iter().zip(&small_mask))
        .map(|(&e, (&bad, &s))| if bad || s { 0.0 } else { w.round(e * e) })
        .collect();
    let mse = np_mean(&masked, w);
    let masked_count = d
        .inf_nan
        .iter()
        .zip(&small_mask)
        .filter(|(&b, &s)| b || s)
        .count();
    let size = d.abs_err.len() as f64;
    // `inf_nan_cnt` is a numpy int64, so the factor and the product are float64.
    let factor = size / (size - masked_count as f64 + 0.0001) + 0.0001;
    let rmse = (mse * factor).sqrt();
    let eb = error_balance(bench, device, dtype);
    // get_rel_err: -1 where small or inf/nan.
    let rel: Vec<f64> = d
        .abs_err
        .iter()
        .zip(&d.rel_err_origin)
        .zip(small_mask.iter().zip(&d.inf_nan))
        .map(|((_, &r), (&s, &bad))| if s || bad { -1.0 } else { r })
        .collect();
    let max_rel = rel.iter().copied().fold(f64::NEG_INFINITY, |m, r| {
        if m.is_nan() || r.is_nan() {
            f64::NAN
        } else {
            m.max(r)
        }
    });
    let max_rel_err = if max_rel >= 0.0 || max_rel.is_nan() {
        max_rel
    } else {
        0.0
    };
    let non_negative: Vec<f64> = rel.iter().copied().filter(|&r| r >= 0.0).collect();
    let mean_rel_err = if non_negative.is_empty() {
        0.0
    } else {
        np_mean(&non_negative, w)
    };
    let int_zeros = IntZeros {
        small_value_err_ratio: small_count == 0,
        max_rel_err: !(max_rel >= 0.0 || max_rel.is_nan()),
        mean_rel_err: non_negative.is_empty(),
    };
    (
        (small_value_err_ratio, rmse, eb, max_rel_err, mean_rel_err),
        int_zeros,
    )
}

/// `get_ulp_err` and `UlpCompare`'s three numbers (`max`, `mean`, share above 32 ULP for
/// fp32, above 1 ULP for fp16/bf16).
pub fn ulp(bench: &[f64], device: &[f64], dtype: Dtype) -> UlpNumbers {
    let (min_eb, mantissa, w) = match dtype {
        Dtype::F16 => (-14.0, 10.0, Work::F32),
        Dtype::Bf16 => (-126.0, 7.0, Work::F32),
        Dtype::F32 | Dtype::F64 => (-126.0, 23.0, Work::F64),
    };
    let errs: Vec<f64> = bench
        .iter()
        .zip(device)
        .map(|(&b, &d)| {
            let a = b.abs();
            let eb = if a == 0.0 {
                0.0
            } else {
                Work::of(dtype).round(a.log2()).floor()
            };
            let eb = eb.max(min_eb);
            let diff = w.round(w.round(d) - b);
            w.round(diff * w.round((mantissa - eb).exp2())).abs()
        })
        .collect();
    let threshold = if matches!(dtype, Dtype::F32 | Dtype::F64) {
        32.0
    } else {
        1.0
    };
    let max = errs.iter().copied().fold(f64::NEG_INFINITY, nan_max);
    let above = errs.iter().filter(|&&e| e > threshold).count();
    UlpNumbers {
        max,
        mean: np_mean(&errs, w),
        share_above_threshold: if errs.is_empty() {
            0.0
        } else {
            above as f64 / errs.len() as f64
        },
    }
}

/// All of msprobe's numbers for one output and its stage-1 status.
/// `bench` must hold values of the bench dtype, `device` values of `dtype`.
pub fn numbers(bench: &[f64], device: &[f64], dtype: Dtype, with_ulp: bool) -> Numbers {
    let w = Work::of(dtype);
    let ((small_value_err_ratio, rmse, error_balance, max_rel_err, mean_rel_err), int_zeros) =
        benchmark(bench, device, dtype);
    let mut n = Numbers {
        cosine: None,
        max_abs_err: None,
        rel_err_hundredth: None,
        rel_err_thousandth: None,
        rel_err_ten_thousandth: None,
        error_balance,
        rmse,
        small_value_err_ratio,
        max_rel_err,
        mean_rel_err,
        ulp: with_ulp.then(|| ulp(bench, device, dtype)),
        status: "pass",
        message: String::new(),
        int_zeros,
    };
    if bench.is_empty() {
        n.status = "skip";
        n.message = "There is not bench calculation result.".into();
        return n;
    }
    let (cos, cos_ok, msg) = cosine(bench, device);
    n.cosine = cos;
    n.message.push_str(msg);
    n.message.push('\n');
    if !cos_ok {
        n.status = "error";
        n.message.push_str(
            "Cosine similarity is less than 0.99, consider as error, skip other check and set to SPACE.\n",
        );
        return n;
    }
    let d = derive(bench, device, dtype);
    let max_abs = d.abs_err.iter().copied().fold(f64::NEG_INFINITY, |m, e| {
        if m.is_nan() || e.is_nan() {
            f64::NAN
        } else {
            m.max(e)
        }
    });
    n.max_abs_err = Some(max_abs);
    if max_abs < w.round(0.001) {
        n.message.push_str(
            "Max abs error is less than 0.001, consider as pass, skip other check and set to SPACE.\n",
        );
        return n;
    }
    let rel = &d.rel_err_origin;
    let half = matches!(dtype, Dtype::F16 | Dtype::Bf16);
    if half {
        let (r, ok) = rel_err_ratio(rel, 0.01, w);
        n.rel_err_hundredth = Some(r);
        if !ok {
            n.status = "error";
            n.message.push_str(
                "Relative error is greater than 0.01, consider as error, skip other check and set to SPACE.\n",
            );
            return n;
        }
    }
    let (r, thousand_ok) = rel_err_ratio(rel, 0.001, w);
    n.rel_err_thousandth = Some(r);
    if half {
        if thousand_ok {
            n.message.push_str(
                "Relative error is less than 0.001, consider as pass, skip other check and set to SPACE.\n",
            );
        } else {
            n.status = "warning";
            n.message.push_str(
                "Relative error is greater than 0.001, consider as warning, skip other check and set to SPACE.\n",
            );
        }
        return n;
    }
    let (r, ten_ok) = rel_err_ratio(rel, 0.0001, w);
    n.rel_err_ten_thousandth = Some(r);
    if !thousand_ok {
        n.status = "error";
        n.message.push_str(
            "Relative error is greater than 0.001, consider as error, skip other check and set to SPACE.\n",
        );
    } else if !ten_ok {
        n.status = "warning";
        n.message.push_str(
            "Relative error is greater than 0.0001, consider as warning, skip other check and set to SPACE.\n",
        );
    } else {
        n.message
            .push_str("Relative error is less than 0.0001, consider as pass.\n");
    }
    n
}

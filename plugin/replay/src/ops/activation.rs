//! Activations: `gelu` (erf and tanh), `npu_fast_gelu`, `silu`, `npu_swiglu`, `relu`,
//! `sigmoid`, `tanh`.
//!
//! Budget: one rounding (two for `npu_swiglu` below fp32, whose kernel rounds `silu(a)` to the
//! output dtype before multiplying, as msprobe's CPU reference does), and 8 roundings at the
//! compute precision scaled by `|x|` plus `|y|` (`1 + tanh` and `1 + erf` cancel for negative
//! inputs: the error there is relative to `x`, not to the tiny result).

use std::f64::consts::{FRAC_2_SQRT_PI, SQRT_2};

use ndarray::{ArrayD, Axis};

use super::common::norm_dim;
use crate::args::CallArgs;
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

const TRANSCENDENTAL: f64 = 8.0;

fn budget() -> Budget {
    Budget::one_rounding(TRANSCENDENTAL).named("activation")
}

fn pointwise(
    x: &ArrayD<f64>,
    f: impl Fn(f64) -> f64,
    scale: impl Fn(f64, f64) -> f64,
) -> Reference {
    let exact = x.mapv(&f);
    let scale = ndarray::Zip::from(x)
        .and(&exact)
        .map_collect(|&x, &y| scale(x, y));
    Reference {
        exact,
        scale,
        budget: budget(),
    }
}

pub fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / SQRT_2))
}

pub fn gelu_tanh(x: f64) -> f64 {
    let c = (FRAC_2_SQRT_PI / SQRT_2) * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + c.tanh())
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// `gelu(input, approximate='none'|'tanh')`.
pub fn gelu(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let f = match args.str(1, "approximate").unwrap_or("none") {
        "none" => gelu_erf,
        "tanh" => gelu_tanh,
        other => return Err(ReplayError::args(format!("gelu approximate={other:?}"))),
    };
    Ok(vec![pointwise(x, f, |x, y| x.abs() + y.abs())])
}

/// `npu_fast_gelu(x)`: `x·exp(0.851(x − |x|)) / (1 + exp(−1.702|x|))` (msprobe's
/// `bench_functions/fast_gelu`).
pub fn fast_gelu(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let f = |x: f64| x * (0.851 * (x - x.abs())).exp() / (1.0 + (-1.702 * x.abs()).exp());
    Ok(vec![pointwise(x, f, |x, y| {
        y.abs() * (1.0 + 1.702 * x.abs())
    })])
}

/// `silu(input)`: `x·σ(x)`.
pub fn silu_op(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    Ok(vec![pointwise(x, silu, |x, y| {
        y.abs() + x.abs() * sigmoid(x) * sigmoid(-x) * x.abs()
    })])
}

/// `relu(input)`: exact.
pub fn relu(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    Ok(vec![Reference::exact(x.mapv(|v| v.max(0.0)))])
}

/// `sigmoid(input)`.
pub fn sigmoid_op(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    Ok(vec![pointwise(x, sigmoid, |x, y| {
        y.abs() * (1.0 + x.abs())
    })])
}

/// `tanh(input)`.
pub fn tanh_op(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    Ok(vec![pointwise(x, f64::tanh, |x, y| {
        y.abs() + x.abs() * (1.0 - y * y)
    })])
}

/// `npu_swiglu(x, dim=-1)`: `silu(a)·b` for `a, b = x.chunk(2, dim)`.
pub fn swiglu(args: &CallArgs, below_fp32: bool) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "x")?;
    let dim = args
        .ints(1, "dim")?
        .and_then(|d| d.first().copied())
        .unwrap_or(-1);
    let dim = norm_dim(dim, x.ndim())?;
    let n = x.shape()[dim];
    if n % 2 != 0 {
        return Err(ReplayError::args(format!(
            "npu_swiglu: dim {dim} has odd size {n}"
        )));
    }
    let a = x.slice_axis(Axis(dim), (0..n / 2).into());
    let b = x.slice_axis(Axis(dim), (n / 2..n).into());
    let exact = ndarray::Zip::from(&a)
        .and(&b)
        .map_collect(|&a, &b| silu(a) * b);
    let scale = ndarray::Zip::from(&a).and(&b).map_collect(|&a, &b| {
        (silu(a).abs() + a.abs() * sigmoid(a) * sigmoid(-a) * a.abs()) * b.abs()
    });
    let mut budget = budget();
    if below_fp32 {
        budget.output_ulps = 2.0;
    }
    Ok(vec![Reference {
        exact,
        scale,
        budget,
    }])
}

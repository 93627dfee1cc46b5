//! The matmul family: `matmul`/`mm`/`bmm`/`@`, `linear`, `addmm`, `baddbmm`.
//!
//! Budget: one rounding of the output plus `k + 2` roundings at the compute precision scaled
//! by `Σ_k |a_ik·b_kj|` (+ the added terms): the worst-case bound of a sum of `k` products
//! in any order or split, so a split-K or tiled kernel stays inside it.

use ndarray::{Array2, ArrayD, Axis, IxDyn};
use rayon::prelude::*;

use super::common::{broadcast_shape, broadcast_to, zip2};
use crate::args::CallArgs;
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

fn budget(k: usize, extra: f64) -> Budget {
    Budget {
        output_ulps: 1.0,
        internal: k as f64 + extra,
        family: "matmul",
    }
}

/// `torch.matmul(a, b)` and its scale `|a| @ |b|`, with torch's rules for 1-D and batched
/// operands.
pub fn matmul_pair(a: &ArrayD<f64>, b: &ArrayD<f64>) -> Result<(ArrayD<f64>, ArrayD<f64>, usize)> {
    if a.ndim() == 0 || b.ndim() == 0 {
        return Err(ReplayError::args("matmul of a 0-dim tensor"));
    }
    let a_vec = a.ndim() == 1;
    let b_vec = b.ndim() == 1;
    let a3 = if a_vec {
        a.clone().insert_axis(Axis(0))
    } else {
        a.clone()
    };
    let b3 = if b_vec {
        b.clone().insert_axis(Axis(1))
    } else {
        b.clone()
    };
    let (m, k) = (a3.shape()[a3.ndim() - 2], a3.shape()[a3.ndim() - 1]);
    let (k2, n) = (b3.shape()[b3.ndim() - 2], b3.shape()[b3.ndim() - 1]);
    if k != k2 {
        return Err(ReplayError::args(format!(
            "matmul shapes {:?} and {:?} do not match",
            a.shape(),
            b.shape()
        )));
    }
    let batch = broadcast_shape(&a3.shape()[..a3.ndim() - 2], &b3.shape()[..b3.ndim() - 2])?;
    let mut a_full = batch.clone();
    a_full.extend([m, k]);
    let mut b_full = batch.clone();
    b_full.extend([k, n]);
    let a_b = broadcast_to(&a3, &a_full)?;
    let b_b = broadcast_to(&b3, &b_full)?;
    let count: usize = batch.iter().product();
    let a_flat = a_b
        .into_shape_with_order((count, m, k))
        .map_err(|e| ReplayError::args(e.to_string()))?;
    let b_flat = b_b
        .into_shape_with_order((count, k, n))
        .map_err(|e| ReplayError::args(e.to_string()))?;
    let products: Vec<(Array2<f64>, Array2<f64>)> = (0..count)
        .into_par_iter()
        .map(|i| {
            let x = a_flat.index_axis(Axis(0), i);
            let y = b_flat.index_axis(Axis(0), i);
            let value = x.dot(&y);
            let scale = x.mapv(f64::abs).dot(&y.mapv(f64::abs));
            (value, scale)
        })
        .collect();
    let mut out_shape = batch;
    out_shape.extend([m, n]);
    let mut value = Vec::with_capacity(count * m * n);
    let mut scale = Vec::with_capacity(count * m * n);
    for (v, s) in products {
        value.extend(v.iter());
        scale.extend(s.iter());
    }
    let shape_err = |e: ndarray::ShapeError| ReplayError::args(e.to_string());
    let mut value = ArrayD::from_shape_vec(IxDyn(&out_shape), value).map_err(shape_err)?;
    let mut scale = ArrayD::from_shape_vec(IxDyn(&out_shape), scale).map_err(shape_err)?;
    let nd = out_shape.len();
    if b_vec {
        value = value.remove_axis(Axis(nd - 1));
        scale = scale.remove_axis(Axis(nd - 1));
    }
    if a_vec {
        let ax = value.ndim() - if b_vec { 1 } else { 2 };
        value = value.remove_axis(Axis(ax));
        scale = scale.remove_axis(Axis(ax));
    }
    Ok((value, scale, k))
}

/// `matmul`, `mm`, `bmm`, `__matmul__`, `__rmatmul__` (operands swapped).
pub fn matmul(args: &CallArgs, swapped: bool) -> Result<Vec<Reference>> {
    let (a, b) = (args.tensor(0, "input")?, args.tensor(1, "other")?);
    let (a, b) = if swapped { (b, a) } else { (a, b) };
    let (exact, scale, k) = matmul_pair(a, b)?;
    Ok(vec![Reference {
        exact,
        scale,
        budget: budget(k, 1.0),
    }])
}

/// `linear(input, weight, bias=None)`: `input @ weight.T + bias`.
pub fn linear(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let w = args.tensor(1, "weight")?;
    let wt = if w.ndim() == 2 {
        w.t().to_owned().into_dyn()
    } else {
        w.clone()
    };
    let (mut exact, mut scale, k) = matmul_pair(x, &wt)?;
    if let Some(bias) = args.opt_tensor(2, "bias")? {
        exact = zip2(&exact, bias, |p, b| p + b)?;
        scale = zip2(&scale, bias, |s, b| s + b.abs())?;
    }
    Ok(vec![Reference {
        exact,
        scale,
        budget: budget(k, 2.0),
    }])
}

/// `addmm(input, mat1, mat2, beta=1, alpha=1)` and `baddbmm` (batched): `β·input + α·(m1 @ m2)`.
pub fn addmm(args: &CallArgs) -> Result<Vec<Reference>> {
    let c = args.tensor(0, "input")?;
    let m1 = args
        .tensor(1, "mat1")
        .or_else(|_| args.tensor(1, "batch1"))?;
    let m2 = args
        .tensor(2, "mat2")
        .or_else(|_| args.tensor(2, "batch2"))?;
    let beta = args.f64_or(3, "beta", 1.0)?;
    let alpha = args.f64_or(4, "alpha", 1.0)?;
    let (p, s, k) = matmul_pair(m1, m2)?;
    let exact = zip2(&p, c, |p, c| {
        if beta == 0.0 {
            alpha * p
        } else {
            alpha * p + beta * c
        }
    })?;
    let scale = zip2(&s, c, |s, c| alpha.abs() * s + (beta * c).abs())?;
    Ok(vec![Reference {
        exact,
        scale,
        budget: budget(k, 3.0),
    }])
}

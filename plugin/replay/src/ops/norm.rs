//! Normalizations: `layer_norm`, `rms_norm`, `npu_rms_norm`, `npu_add_rms_norm`,
//! `group_norm`, `batch_norm`.
//!
//! Budget: one rounding, and `n + 8` roundings at the compute precision (the mean and the
//! variance are sums of `n`) scaled by what each error is multiplied by: for layer_norm
//! `|w|·((|x| + mean|x|)/σ + |x̂|·mean(x²)/σ²) + |b|` (a one-pass variance loses to
//! cancellation in `mean(x²) − mean²`), for rms_norm `|y|`.

use ndarray::{ArrayD, IxDyn};

use crate::args::CallArgs;
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

/// The input as `(outer, inner)` rows over its last `k` dims.
fn last_dims(x: &ArrayD<f64>, k: usize) -> Result<(usize, usize)> {
    if k > x.ndim() {
        return Err(ReplayError::args(format!(
            "normalized over {k} dims of a {}-dim tensor",
            x.ndim()
        )));
    }
    let inner: usize = x.shape()[x.ndim() - k..].iter().product();
    Ok((x.len() / inner.max(1), inner))
}

fn flat(w: Option<&ArrayD<f64>>, inner: usize, what: &str) -> Result<Option<Vec<f64>>> {
    match w {
        None => Ok(None),
        Some(w) if w.len() == inner => Ok(Some(w.iter().copied().collect())),
        Some(w) => Err(ReplayError::args(format!(
            "{what} has {} elements, the normalized shape {inner}",
            w.len()
        ))),
    }
}

fn shaped(v: Vec<f64>, shape: &[usize]) -> Result<ArrayD<f64>> {
    ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| ReplayError::args(e.to_string()))
}

/// `layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)`.
pub fn layer_norm(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let k = args
        .ints(1, "normalized_shape")?
        .map(|s| s.len())
        .ok_or_else(|| ReplayError::args("layer_norm without normalized_shape"))?;
    let (outer, inner) = last_dims(x, k)?;
    let w = flat(args.opt_tensor(2, "weight")?, inner, "weight")?;
    let b = flat(args.opt_tensor(3, "bias")?, inner, "bias")?;
    let eps = args.f64_or(4, "eps", 1e-5)?;
    let src: Vec<f64> = x.iter().copied().collect();
    let mut out = vec![0.0; src.len()];
    let mut scale = vec![0.0; src.len()];
    for r in 0..outer {
        let row = &src[r * inner..(r + 1) * inner];
        let n = inner as f64;
        let mean = row.iter().sum::<f64>() / n;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let mean_abs = row.iter().map(|v| v.abs()).sum::<f64>() / n;
        let mean_sq = row.iter().map(|v| v * v).sum::<f64>() / n;
        let sigma = (var + eps).sqrt();
        for j in 0..inner {
            let xhat = (row[j] - mean) / sigma;
            let wj = w.as_ref().map_or(1.0, |w| w[j]);
            let bj = b.as_ref().map_or(0.0, |b| b[j]);
            out[r * inner + j] = xhat * wj + bj;
            scale[r * inner + j] = wj.abs()
                * ((row[j].abs() + mean_abs) / sigma + xhat.abs() * mean_sq / (sigma * sigma))
                + bj.abs();
        }
    }
    Ok(vec![Reference {
        exact: shaped(out, x.shape())?,
        scale: shaped(scale, x.shape())?,
        budget: Budget::one_rounding(inner as f64 + 8.0).named("norm"),
    }])
}

/// `y = x / sqrt(mean(x²) + eps) · w` over the last `k` dims, and `rstd` per row.
fn rms(
    x: &ArrayD<f64>,
    k: usize,
    w: Option<&ArrayD<f64>>,
    eps: f64,
) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let (outer, inner) = last_dims(x, k)?;
    let w = flat(w, inner, "weight")?;
    let src: Vec<f64> = x.iter().copied().collect();
    let mut out = vec![0.0; src.len()];
    let mut scale = vec![0.0; src.len()];
    let mut rstds = vec![0.0; outer];
    for r in 0..outer {
        let row = &src[r * inner..(r + 1) * inner];
        let ms = row.iter().map(|v| v * v).sum::<f64>() / inner as f64;
        let rstd = 1.0 / (ms + eps).sqrt();
        rstds[r] = rstd;
        for j in 0..inner {
            let wj = w.as_ref().map_or(1.0, |w| w[j]);
            let y = row[j] * rstd * wj;
            out[r * inner + j] = y;
            scale[r * inner + j] = y.abs();
        }
    }
    Ok((out, scale, rstds))
}

/// `rms_norm(input, normalized_shape, weight=None, eps=None)` (torch ≥ 2.4).
pub fn rms_norm(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let k = args
        .ints(1, "normalized_shape")?
        .map(|s| s.len())
        .ok_or_else(|| ReplayError::args("rms_norm without normalized_shape"))?;
    let w = args.opt_tensor(2, "weight")?;
    // torch's default eps is the input dtype's machine epsilon; the dump records the
    // argument when it was given.
    let eps = args.f64_or(3, "eps", f32::EPSILON as f64)?;
    let inner: usize = x.shape()[x.ndim().saturating_sub(k)..].iter().product();
    let (out, scale, _) = rms(x, k, w, eps)?;
    Ok(vec![Reference {
        exact: shaped(out, x.shape())?,
        scale: shaped(scale, x.shape())?,
        budget: Budget::one_rounding(inner as f64 + 6.0).named("norm"),
    }])
}

/// `npu_rms_norm(x, gamma, epsilon=1e-6)` → `(y, rstd)`, normalized over gamma's dims
/// (as msprobe's `bench_functions/npu_rms_norm` computes it; rstd keeps x's leading dims
/// with size-1 normalized dims).
pub fn npu_rms_norm(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "x")?;
    let gamma = args.tensor(1, "gamma")?;
    let eps = args.f64_or(2, "epsilon", 1e-6)?;
    let k = gamma.ndim().max(1);
    let inner: usize = gamma.len();
    let (out, scale, rstd) = rms(x, k, Some(gamma), eps)?;
    let mut rstd_shape: Vec<usize> = x.shape().to_vec();
    let nd = rstd_shape.len();
    for d in rstd_shape.iter_mut().skip(nd.saturating_sub(k)) {
        *d = 1;
    }
    let rstd_scale: Vec<f64> = rstd.iter().map(|v| v.abs()).collect();
    let budget = Budget::one_rounding(inner as f64 + 6.0).named("norm");
    Ok(vec![
        Reference {
            exact: shaped(out, x.shape())?,
            scale: shaped(scale, x.shape())?,
            budget,
        },
        Reference {
            exact: shaped(rstd, &rstd_shape)?,
            scale: shaped(rstd_scale, &rstd_shape)?,
            budget,
        },
    ])
}

/// `npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6)` → `(y, rstd, x)`: `x = x1 + x2`, then
/// `npu_rms_norm(x, gamma, epsilon)`.
///
/// Budget (internal roundings all in the scale): `y` one rounding and
/// `(n + 7)·(|y| + rstd·|γ|·(|x1| + |x2|)) + 2ρ·|y|`; `rstd` one rounding and
/// `(n + 6 + ρ)·|rstd|`; `x` one rounding (the add's). `ρ = u_in/u` (2¹⁶ for bf16) covers a
/// kernel that normalizes the sum after rounding it to the input dtype (its `x` output) rather
/// than in fp32: that moves `y` by up to two input-dtype roundings and `rstd` by one.
pub fn npu_add_rms_norm(args: &CallArgs, ctx: super::context::Context) -> Result<Vec<Reference>> {
    let x1 = args.tensor(0, "x1")?;
    let x2 = args.tensor(1, "x2")?;
    let gamma = args.tensor(2, "gamma")?;
    let eps = args.f64_or(3, "epsilon", 1e-6)?;
    if x1.shape() != x2.shape() {
        return Err(ReplayError::args(format!(
            "x1 {:?} and x2 {:?} differ in shape",
            x1.shape(),
            x2.shape()
        )));
    }
    let x = x1 + x2;
    let x_mag = x1.mapv(f64::abs) + x2.mapv(f64::abs);
    let k = gamma.ndim().max(1);
    let n = gamma.len() as f64;
    let rho = ctx.input_rounding();
    let (out, _, rstd) = rms(&x, k, Some(gamma), eps)?;
    let (_, inner) = last_dims(&x, k)?;
    let g: Vec<f64> = gamma.iter().copied().collect();
    let y_scale: Vec<f64> = out
        .iter()
        .zip(x_mag.iter())
        .enumerate()
        .map(|(i, (&y, &m))| {
            let r = rstd[i / inner.max(1)];
            (n + 7.0) * (y.abs() + r * g[i % inner.max(1)].abs() * m) + 2.0 * rho * y.abs()
        })
        .collect();
    let mut rstd_shape: Vec<usize> = x.shape().to_vec();
    let nd = rstd_shape.len();
    for d in rstd_shape.iter_mut().skip(nd.saturating_sub(k)) {
        *d = 1;
    }
    let rstd_scale: Vec<f64> = rstd.iter().map(|v| (n + 6.0 + rho) * v.abs()).collect();
    let budget = Budget::one_rounding(1.0).named("norm");
    Ok(vec![
        Reference {
            exact: shaped(out, x.shape())?,
            scale: shaped(y_scale, x.shape())?,
            budget,
        },
        Reference {
            exact: shaped(rstd, &rstd_shape)?,
            scale: shaped(rstd_scale, &rstd_shape)?,
            budget,
        },
        Reference {
            exact: x,
            scale: x_mag,
            budget: Budget::one_rounding(1.0),
        },
    ])
}

/// Normalizes each row of `rows` (`rows × m`, standard layout) by its own mean and variance,
/// then `· w[channel] + b[channel]` with `channel(j)` the row element's channel; returns the
/// values and the layer_norm scale of each element.
fn standardize(
    src: &[f64],
    m: usize,
    eps: f64,
    affine: impl Fn(usize, usize) -> (f64, f64) + Sync,
) -> (Vec<f64>, Vec<f64>) {
    use rayon::prelude::*;
    let mut out = vec![0.0; src.len()];
    let mut scale = vec![0.0; src.len()];
    if m == 0 {
        return (out, scale);
    }
    out.par_chunks_mut(m)
        .zip(scale.par_chunks_mut(m))
        .zip(src.par_chunks(m))
        .enumerate()
        .for_each(|(r, ((o, s), row))| {
            let n = m as f64;
            let mean = row.iter().sum::<f64>() / n;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            let mean_abs = row.iter().map(|v| v.abs()).sum::<f64>() / n;
            let mean_sq = row.iter().map(|v| v * v).sum::<f64>() / n;
            let sigma = (var + eps).sqrt();
            for j in 0..m {
                let (w, b) = affine(r, j);
                let xhat = (row[j] - mean) / sigma;
                o[j] = xhat * w + b;
                s[j] = w.abs()
                    * ((row[j].abs() + mean_abs) / sigma + xhat.abs() * mean_sq / (sigma * sigma))
                    + b.abs();
            }
        });
    (out, scale)
}

/// The `(N, C, spatial)` sizes of a `(N, C, *)` input.
fn channels(x: &ArrayD<f64>, what: &str) -> Result<(usize, usize, usize)> {
    if x.ndim() < 2 {
        return Err(ReplayError::args(format!(
            "{what} of a {}-dim input (expected (N, C, …))",
            x.ndim()
        )));
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    Ok((n, c, x.shape()[2..].iter().product()))
}

/// `group_norm(input, num_groups, weight=None, bias=None, eps=1e-5)`: each sample's channels
/// in `num_groups` groups, each group normalized over its channels and positions, then the
/// per-channel affine. Budget as layer_norm's over the group's `C/G · spatial` elements.
pub fn group_norm(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let (_, c, spatial) = channels(x, "group_norm")?;
    let groups = args.f64_or(1, "num_groups", 0.0)? as usize;
    if groups == 0 || !c.is_multiple_of(groups) {
        return Err(ReplayError::args(format!(
            "{c} channels in {groups} groups"
        )));
    }
    let w = flat(args.opt_tensor(2, "weight")?, c, "weight")?;
    let b = flat(args.opt_tensor(3, "bias")?, c, "bias")?;
    let eps = args.f64_or(4, "eps", 1e-5)?;
    let per_group = c / groups;
    let m = per_group * spatial;
    let src: Vec<f64> = x.iter().copied().collect();
    let (out, scale) = standardize(&src, m, eps, |r, j| {
        let ch = (r % groups) * per_group + j / spatial.max(1);
        (
            w.as_ref().map_or(1.0, |w| w[ch]),
            b.as_ref().map_or(0.0, |b| b[ch]),
        )
    });
    Ok(vec![Reference {
        exact: shaped(out, x.shape())?,
        scale: shaped(scale, x.shape())?,
        budget: Budget::one_rounding(m as f64 + 8.0).named("norm"),
    }])
}

/// `batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
/// momentum=0.1, eps=1e-5)` (`torch.nn.functional`'s argument order). Not training: each
/// channel normalized by the running statistics, `(x − mean)/√(var + eps)·w + b` (one
/// rounding and 8 of `|w|·(|x| + |mean|)/σ + |b| + |y|`). Training: by the batch's own
/// statistics per channel (mean and biased variance over `N` and the positions, as torch
/// normalizes; the running statistics' update is not an output), budgeted as layer_norm over
/// those `N · spatial` elements.
pub fn batch_norm(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let (n, c, spatial) = channels(x, "batch_norm")?;
    let w = flat(args.opt_tensor(3, "weight")?, c, "weight")?;
    let b = flat(args.opt_tensor(4, "bias")?, c, "bias")?;
    let training = args.bool_or(5, "training", false)?;
    let eps = args.f64_or(7, "eps", 1e-5)?;
    let affine = |ch: usize| {
        (
            w.as_ref().map_or(1.0, |w| w[ch]),
            b.as_ref().map_or(0.0, |b| b[ch]),
        )
    };
    let src: Vec<f64> = x.iter().copied().collect();
    let index = |bn: usize, ch: usize, p: usize| (bn * c + ch) * spatial + p;
    if training {
        // Channel-major rows: every sample's positions of one channel.
        let m = n * spatial;
        let mut rows = Vec::with_capacity(src.len());
        for ch in 0..c {
            for bn in 0..n {
                rows.extend_from_slice(&src[index(bn, ch, 0)..index(bn, ch, 0) + spatial]);
            }
        }
        let (vals, scales) = standardize(&rows, m, eps, |ch, _| affine(ch));
        let mut out = vec![0.0; src.len()];
        let mut scale = vec![0.0; src.len()];
        for ch in 0..c {
            for bn in 0..n {
                for p in 0..spatial {
                    let from = ch * m + bn * spatial + p;
                    out[index(bn, ch, p)] = vals[from];
                    scale[index(bn, ch, p)] = scales[from];
                }
            }
        }
        return Ok(vec![Reference {
            exact: shaped(out, x.shape())?,
            scale: shaped(scale, x.shape())?,
            budget: Budget::one_rounding(m as f64 + 8.0).named("norm"),
        }]);
    }
    let missing = || ReplayError::args("batch_norm not in training without running statistics");
    let mean = flat(args.opt_tensor(1, "running_mean")?, c, "running_mean")?.ok_or_else(missing)?;
    let var = flat(args.opt_tensor(2, "running_var")?, c, "running_var")?.ok_or_else(missing)?;
    let mut out = vec![0.0; src.len()];
    let mut scale = vec![0.0; src.len()];
    for bn in 0..n {
        for ch in 0..c {
            let (wc, bc) = affine(ch);
            let sigma = (var[ch] + eps).sqrt();
            for p in 0..spatial {
                let i = index(bn, ch, p);
                let y = (src[i] - mean[ch]) / sigma * wc + bc;
                out[i] = y;
                scale[i] = wc.abs() * (src[i].abs() + mean[ch].abs()) / sigma + bc.abs() + y.abs();
            }
        }
    }
    Ok(vec![Reference {
        exact: shaped(out, x.shape())?,
        scale: shaped(scale, x.shape())?,
        budget: Budget::one_rounding(8.0).named("norm"),
    }])
}

//! Convolutions: `conv1d`, `conv2d` (`stride`, `padding` as numbers or `'same'`/`'valid'`,
//! `dilation`, `groups`, `bias`; batched or not).
//!
//! A 1-d convolution is computed as a 2-d one of height 1. Budget, as the matmul family's:
//! one rounding of the output plus `K + 2` roundings (`K + 3` with a bias) at the compute
//! precision, `K = C_in/groups · kernel size`, scaled by `Σ |x·w|` (+ `|bias|`): the
//! worst-case bound of the dot product in any order (im2col, Winograd-free direct or split).

use ndarray::{Array4, ArrayD, IxDyn};
use rayon::prelude::*;

use crate::args::{CallArgs, Value};
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

/// A per-dim argument (`stride=2`, `padding=(1, 0)`) as `spatial` values.
fn per_dim(
    args: &CallArgs,
    position: usize,
    name: &str,
    spatial: usize,
    default: i64,
) -> Result<Vec<i64>> {
    let v = args.ints(position, name)?.unwrap_or_else(|| vec![default]);
    match v.len() {
        1 => Ok(vec![v[0]; spatial]),
        n if n == spatial => Ok(v),
        n => Err(ReplayError::args(format!(
            "{name} has {n} values for a {spatial}-d convolution"
        ))),
    }
}

fn to4(x: &ArrayD<f64>, shape: [usize; 4], what: &str) -> Result<Array4<f64>> {
    x.as_standard_layout()
        .into_owned()
        .into_shape_with_order(shape)
        .map_err(|e| ReplayError::args(format!("{what}: {e}")))
}

/// `conv1d`/`conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)`
/// with `spatial` = 1 or 2.
pub fn conv(args: &CallArgs, spatial: usize) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let w = args.tensor(1, "weight")?;
    let bias = args.opt_tensor(2, "bias")?;
    let batched = match x.ndim() {
        n if n == spatial + 2 => true,
        n if n == spatial + 1 => false,
        n => {
            return Err(ReplayError::args(format!(
                "conv{spatial}d of a {n}-dim input (expected {} or {})",
                spatial + 1,
                spatial + 2
            )))
        }
    };
    if w.ndim() != spatial + 2 {
        return Err(ReplayError::args(format!(
            "conv{spatial}d weight of shape {:?}",
            w.shape()
        )));
    }
    let xs = x.shape();
    let lead = if batched { 0 } else { 1 };
    let (n, c) = if batched { (xs[0], xs[1]) } else { (1, xs[0]) };
    let (h, wd) = if spatial == 1 {
        (1, xs[2 - lead])
    } else {
        (xs[2 - lead], xs[3 - lead])
    };
    let ws = w.shape();
    let (o, cg) = (ws[0], ws[1]);
    let (kh, kw) = if spatial == 1 {
        (1, ws[2])
    } else {
        (ws[2], ws[3])
    };
    let groups = args.f64_or(6, "groups", 1.0)? as usize;
    if groups == 0 || cg * groups != c || !o.is_multiple_of(groups) {
        return Err(ReplayError::args(format!(
            "weight {ws:?} with groups={groups} does not fit {c} input channels"
        )));
    }
    let stride = per_dim(args, 3, "stride", spatial, 1)?;
    let dilation = per_dim(args, 5, "dilation", spatial, 1)?;
    let kernel: Vec<usize> = if spatial == 1 { vec![kw] } else { vec![kh, kw] };
    // Padding per dim as (before, after); 'same' puts the odd one after, as torch does.
    let padding: Vec<(i64, i64)> = match args.get(4, "padding") {
        Some(Value::Str(s)) if s == "valid" => vec![(0, 0); spatial],
        Some(Value::Str(s)) if s == "same" => {
            if stride.iter().any(|&s| s != 1) {
                return Err(ReplayError::args(
                    "padding='same' with a stride other than 1",
                ));
            }
            kernel
                .iter()
                .zip(&dilation)
                .map(|(&k, &d)| {
                    let total = d * (k as i64 - 1);
                    (total / 2, total - total / 2)
                })
                .collect()
        }
        Some(Value::Str(s)) => {
            return Err(ReplayError::args(format!(
                "padding {s:?} is not 'same' or 'valid'"
            )))
        }
        _ => per_dim(args, 4, "padding", spatial, 0)?
            .into_iter()
            .map(|p| (p, p))
            .collect(),
    };
    if stride.iter().chain(&dilation).any(|&v| v < 1) || padding.iter().any(|p| p.0 < 0) {
        return Err(ReplayError::args(
            "stride and dilation must be at least 1 and padding not negative",
        ));
    }
    // As 2-d: height first (1-d: a height of 1, no padding, stride and dilation 1).
    let two = |v: &[i64], unit: i64| -> (i64, i64) {
        if spatial == 1 {
            (unit, v[0])
        } else {
            (v[0], v[1])
        }
    };
    let (sh, sw) = two(&stride, 1);
    let (dh, dw) = two(&dilation, 1);
    let (ph, pw) = if spatial == 1 {
        ((0, 0), padding[0])
    } else {
        (padding[0], padding[1])
    };
    let out_len = |len: usize, k: usize, s: i64, d: i64, p: (i64, i64)| -> Result<usize> {
        let span = len as i64 + p.0 + p.1 - d * (k as i64 - 1) - 1;
        if span < 0 {
            return Err(ReplayError::args(
                "the kernel is larger than the padded input",
            ));
        }
        Ok((span / s + 1) as usize)
    };
    let oh = out_len(h, kh, sh, dh, ph)?;
    let ow = out_len(wd, kw, sw, dw, pw)?;
    let x4 = to4(x, [n, c, h, wd], "input")?;
    let w4 = to4(w, [o, cg, kh, kw], "weight")?;
    let b: Vec<f64> = match bias {
        Some(b) if b.len() == o => b.iter().copied().collect(),
        Some(b) => {
            return Err(ReplayError::args(format!(
                "bias of {} elements for {o} output channels",
                b.len()
            )))
        }
        None => vec![0.0; o],
    };
    let per_group = o / groups;
    let plane = oh * ow;
    let mut value = vec![0.0; n * o * plane];
    let mut scale = vec![0.0; n * o * plane];
    if plane > 0 {
        value
            .par_chunks_mut(plane)
            .zip(scale.par_chunks_mut(plane))
            .enumerate()
            .for_each(|(no, (val, sc))| {
                let (bn, oc) = (no / o, no % o);
                let c0 = (oc / per_group) * cg;
                for i in 0..oh {
                    for j in 0..ow {
                        let (mut s, mut a) = (b[oc], b[oc].abs());
                        for ci in 0..cg {
                            for u in 0..kh {
                                let ih = i as i64 * sh - ph.0 + u as i64 * dh;
                                if ih < 0 || ih >= h as i64 {
                                    continue;
                                }
                                for t in 0..kw {
                                    let iw = j as i64 * sw - pw.0 + t as i64 * dw;
                                    if iw < 0 || iw >= wd as i64 {
                                        continue;
                                    }
                                    let p = x4[[bn, c0 + ci, ih as usize, iw as usize]]
                                        * w4[[oc, ci, u, t]];
                                    s += p;
                                    a += p.abs();
                                }
                            }
                        }
                        val[i * ow + j] = s;
                        sc[i * ow + j] = a;
                    }
                }
            });
    }
    let mut shape = Vec::new();
    if batched {
        shape.push(n);
    }
    shape.push(o);
    if spatial == 2 {
        shape.push(oh);
    }
    shape.push(ow);
    let err = |e: ndarray::ShapeError| ReplayError::args(e.to_string());
    let k = cg * kh * kw;
    Ok(vec![Reference {
        exact: ArrayD::from_shape_vec(IxDyn(&shape), value).map_err(err)?,
        scale: ArrayD::from_shape_vec(IxDyn(&shape), scale).map_err(err)?,
        budget: Budget {
            output_ulps: 1.0,
            internal: k as f64 + if bias.is_some() { 3.0 } else { 2.0 },
            family: "conv",
        },
    }])
}

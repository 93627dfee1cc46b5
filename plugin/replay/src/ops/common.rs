//! Helpers every op family uses: dims, broadcasting, rows along a dim.

use ndarray::{ArrayD, Axis, IxDyn};

use crate::error::{ReplayError, Result};

/// A torch dim (negative counts from the end) as an axis of an `ndim`-dim array (a 0-dim
/// array has one dim, 0 or -1, as in torch).
pub fn norm_dim(dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    let d = if dim < 0 { dim + n } else { dim };
    if d < 0 || d >= n {
        return Err(ReplayError::args(format!(
            "dim {dim} is out of range for a {ndim}-dim tensor"
        )));
    }
    Ok(d as usize)
}

/// The broadcast shape of two shapes (numpy/torch rules).
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for (i, o) in out.iter_mut().enumerate() {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        *o = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(ReplayError::args(format!(
                    "shapes {a:?} and {b:?} do not broadcast"
                )))
            }
        };
    }
    Ok(out)
}

/// `a` broadcast to `shape` (owned, standard layout).
pub fn broadcast_to(a: &ArrayD<f64>, shape: &[usize]) -> Result<ArrayD<f64>> {
    a.broadcast(IxDyn(shape))
        .map(|v| v.as_standard_layout().into_owned())
        .ok_or_else(|| {
            ReplayError::args(format!(
                "shape {:?} does not broadcast to {shape:?}",
                a.shape()
            ))
        })
}

/// `f` applied elementwise to `a` and `b` broadcast together.
pub fn zip2(a: &ArrayD<f64>, b: &ArrayD<f64>, f: impl Fn(f64, f64) -> f64) -> Result<ArrayD<f64>> {
    let shape = broadcast_shape(a.shape(), b.shape())?;
    let a = broadcast_to(a, &shape)?;
    let b = broadcast_to(b, &shape)?;
    Ok(ndarray::Zip::from(&a).and(&b).map_collect(|&x, &y| f(x, y)))
}

/// `f` applied elementwise to three arrays broadcast together.
pub fn zip3(
    a: &ArrayD<f64>,
    b: &ArrayD<f64>,
    c: &ArrayD<f64>,
    f: impl Fn(f64, f64, f64) -> f64,
) -> Result<ArrayD<f64>> {
    let shape = broadcast_shape(&broadcast_shape(a.shape(), b.shape())?, c.shape())?;
    let a = broadcast_to(a, &shape)?;
    let b = broadcast_to(b, &shape)?;
    let c = broadcast_to(c, &shape)?;
    Ok(ndarray::Zip::from(&a)
        .and(&b)
        .and(&c)
        .map_collect(|&x, &y, &z| f(x, y, z)))
}

/// `x` with the axes `reduced` moved last, as a 2-D `(kept elements, reduced elements)` table,
/// and the shape of the kept axes in their order.
pub fn rows(x: &ArrayD<f64>, reduced: &[usize]) -> (ndarray::Array2<f64>, Vec<usize>) {
    let kept: Vec<usize> = (0..x.ndim()).filter(|a| !reduced.contains(a)).collect();
    let order: Vec<usize> = kept.iter().chain(reduced.iter()).copied().collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&a| x.shape()[a]).collect();
    let outer: usize = kept_shape.iter().product();
    let inner: usize = reduced.iter().map(|&a| x.shape()[a]).product();
    let permuted = x.view().permuted_axes(IxDyn(&order));
    let table: Vec<f64> = permuted.iter().copied().collect();
    let table = ndarray::Array2::from_shape_vec((outer, inner), table)
        .unwrap_or_else(|_| ndarray::Array2::zeros((outer, inner)));
    (table, kept_shape)
}

/// Applies `f(row, out, scale)` to every row of `x` along `dim` and puts the results back in
/// `x`'s shape: the exact values and their scales.
pub fn map_rows(
    x: &ArrayD<f64>,
    dim: usize,
    f: impl Fn(&[f64], &mut [f64], &mut [f64]) + Sync,
) -> (ArrayD<f64>, ArrayD<f64>) {
    use rayon::prelude::*;
    if x.ndim() == 0 {
        let row = [x.iter().next().copied().unwrap_or(0.0)];
        let (mut o, mut s) = ([0.0], [0.0]);
        f(&row, &mut o, &mut s);
        return (
            ArrayD::from_elem(IxDyn(&[]), o[0]),
            ArrayD::from_elem(IxDyn(&[]), s[0]),
        );
    }
    let (table, kept_shape) = rows(x, &[dim]);
    let inner = table.ncols().max(1);
    let mut out = vec![0.0; table.len()];
    let mut scale = vec![0.0; table.len()];
    let src: Vec<f64> = table.iter().copied().collect();
    out.par_chunks_mut(inner)
        .zip(scale.par_chunks_mut(inner))
        .zip(src.par_chunks(inner))
        .for_each(|((o, s), r)| f(r, o, s));
    let mut permuted_shape = kept_shape;
    permuted_shape.push(x.shape()[dim]);
    // Back from (kept..., dim) to x's axis order.
    let mut order: Vec<usize> = (0..x.ndim()).filter(|&a| a != dim).collect();
    order.push(dim);
    let mut inverse = vec![0; order.len()];
    for (i, &a) in order.iter().enumerate() {
        inverse[a] = i;
    }
    let back = |v: Vec<f64>| -> ArrayD<f64> {
        let a = ArrayD::from_shape_vec(IxDyn(&permuted_shape), v)
            .unwrap_or_else(|_| ArrayD::zeros(IxDyn(&permuted_shape)));
        a.permuted_axes(IxDyn(&inverse))
            .as_standard_layout()
            .into_owned()
    };
    (back(out), back(scale))
}

/// The sum along `axis` keeping it (for scales of reductions).
pub fn sum_keep(x: &ArrayD<f64>, axis: usize) -> ArrayD<f64> {
    x.sum_axis(Axis(axis)).insert_axis(Axis(axis))
}

/// The tensor's shape checked against an expected one.
pub fn expect_shape(what: &str, got: &[usize], want: &[usize]) -> Result<()> {
    if got != want {
        return Err(ReplayError::args(format!(
            "{what} has shape {got:?}, expected {want:?}"
        )));
    }
    Ok(())
}

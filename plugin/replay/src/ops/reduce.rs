//! Reductions: `sum`, `mean`, `max`/`min`/`amax`/`amin`, `var`, `std`, `norm`, `cumsum`.
//!
//! Budget: one rounding, and `n + 2` roundings at the compute precision for a reduction of `n`
//! elements (the worst-case bound of a sum in any order or tree) scaled by `Σ|x|` (sum, mean),
//! by `Σx²/(n − c)` (var; `std` half of it relative), by the result (norm). max and min are
//! exact.

use ndarray::{ArrayD, IxDyn};

use super::common::{norm_dim, rows, zip2};
use crate::args::{CallArgs, Value};
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

/// The reduced axes (`None`: all) and the result's shape.
fn reduced_axes(x: &ArrayD<f64>, dims: Option<Vec<i64>>) -> Result<Vec<usize>> {
    let mut axes = match dims {
        None => (0..x.ndim()).collect(),
        Some(d) if d.is_empty() => (0..x.ndim()).collect(),
        Some(d) => d
            .iter()
            .map(|&d| norm_dim(d, x.ndim()))
            .collect::<Result<Vec<_>>>()?,
    };
    axes.sort_unstable();
    axes.dedup();
    if x.ndim() == 0 {
        axes.clear();
    }
    Ok(axes)
}

fn out_shape(x: &ArrayD<f64>, axes: &[usize], keepdim: bool) -> Vec<usize> {
    (0..x.ndim())
        .filter_map(|a| match (axes.contains(&a), keepdim) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(x.shape()[a]),
        })
        .collect()
}

/// `f(row) -> (value, scale)` over the reduced axes of every kept position.
fn reduce(
    x: &ArrayD<f64>,
    axes: &[usize],
    keepdim: bool,
    f: impl Fn(&[f64]) -> (f64, f64),
) -> Result<(ArrayD<f64>, ArrayD<f64>, usize)> {
    let (table, _) = rows(x, axes);
    let n = table.ncols();
    let mut values = Vec::with_capacity(table.nrows());
    let mut scales = Vec::with_capacity(table.nrows());
    for row in table.rows() {
        let row: Vec<f64> = row.iter().copied().collect();
        let (v, s) = f(&row);
        values.push(v);
        scales.push(s);
    }
    let shape = out_shape(x, axes, keepdim);
    let err = |e: ndarray::ShapeError| ReplayError::args(e.to_string());
    Ok((
        ArrayD::from_shape_vec(IxDyn(&shape), values).map_err(err)?,
        ArrayD::from_shape_vec(IxDyn(&shape), scales).map_err(err)?,
        n,
    ))
}

fn keepdim(args: &CallArgs, position: usize) -> Result<bool> {
    args.bool_or(position, "keepdim", false)
}

/// The reductions with a sum inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sum {
    Sum,
    Mean,
}

/// `sum(input, dim=None, keepdim=False)`, `mean(...)`.
pub fn sum(args: &CallArgs, kind: Sum) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let axes = reduced_axes(x, args.ints(1, "dim")?)?;
    let (exact, scale, n) = reduce(x, &axes, keepdim(args, 2)?, |row| {
        let total: f64 = row.iter().sum();
        let abs: f64 = row.iter().map(|v| v.abs()).sum();
        let div = if kind == Sum::Mean {
            row.len().max(1) as f64
        } else {
            1.0
        };
        (total / div, abs / div)
    })?;
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(n as f64 + 2.0).named("reduction"),
    }])
}

/// `max`/`min`/`amax`/`amin`: of all elements, along a dim (values; the indices are not
/// judged), or elementwise against another tensor.
pub fn extremum(args: &CallArgs, is_max: bool) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let pick = move |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else if is_max {
            a.max(b)
        } else {
            a.min(b)
        }
    };
    if let Some(Value::Tensor(_)) = args.get(1, "other") {
        let y = args.tensor(1, "other")?;
        return Ok(vec![Reference::exact(zip2(x, y, pick)?)]);
    }
    let axes = reduced_axes(x, args.ints(1, "dim")?)?;
    let (exact, _, _) = reduce(x, &axes, keepdim(args, 2)?, |row| {
        let init = if is_max {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        (row.iter().copied().fold(init, pick), 0.0)
    })?;
    Ok(vec![Reference::exact(exact)])
}

/// `var`/`std(input, dim=None, unbiased=True | correction=1, keepdim=False)`.
pub fn variance(args: &CallArgs, is_std: bool) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let axes = reduced_axes(x, args.ints(1, "dim")?)?;
    let (correction, keep_pos) = match (args.kwarg("correction"), args.args.get(2)) {
        (Some(c), _) => (c.as_f64().unwrap_or(1.0), 3),
        (None, Some(Value::Bool(unbiased))) => (if *unbiased { 1.0 } else { 0.0 }, 3),
        (None, _) => (
            if args.bool_or(99, "unbiased", true)? {
                1.0
            } else {
                0.0
            },
            2,
        ),
    };
    let keep = args.bool_or(keep_pos, "keepdim", false)?;
    let (exact, scale, n) = reduce(x, &axes, keep, |row| {
        let n = row.len() as f64;
        let mean = row.iter().sum::<f64>() / n;
        let denom = (n - correction).max(0.0);
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / denom;
        let sq = row.iter().map(|v| v * v).sum::<f64>() / denom;
        if is_std {
            let s = var.sqrt();
            (s, if s > 0.0 { sq / (2.0 * s) } else { sq.sqrt() })
        } else {
            (var, sq)
        }
    })?;
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(n as f64 + 4.0).named("reduction"),
    }])
}

/// `norm(input, p='fro', dim=None, keepdim=False)` for p = 2/'fro', 1, inf.
pub fn norm(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let p = match args.get(1, "p") {
        None => 2.0,
        Some(Value::Str(s)) if s == "fro" => 2.0,
        Some(Value::Str(s)) if s == "inf" => f64::INFINITY,
        Some(v) => v
            .as_f64()
            .ok_or_else(|| ReplayError::args("norm with p other than a number, 'fro' or 'inf'"))?,
    };
    let axes = reduced_axes(x, args.ints(2, "dim")?)?;
    let (exact, scale, n) = reduce(x, &axes, keepdim(args, 3)?, |row| {
        let v = if p.is_infinite() {
            row.iter().map(|v| v.abs()).fold(0.0, f64::max)
        } else if p == 1.0 {
            row.iter().map(|v| v.abs()).sum()
        } else if p == 2.0 {
            row.iter().map(|v| v * v).sum::<f64>().sqrt()
        } else {
            row.iter()
                .map(|v| v.abs().powf(p))
                .sum::<f64>()
                .powf(1.0 / p)
        };
        (v, v.abs())
    })?;
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(n as f64 + 4.0).named("reduction"),
    }])
}

/// `cumsum(input, dim)`: the running sums along `dim`. Budget: one rounding, and `n + 2`
/// roundings (`n` the length along `dim`, a bound for every prefix, whatever the scan's
/// order or blocking) scaled by the running `Σ|x|`.
pub fn cumsum(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let dim = args
        .ints(1, "dim")?
        .and_then(|d| d.first().copied())
        .ok_or_else(|| ReplayError::args("cumsum without a dim"))?;
    let dim = norm_dim(dim, x.ndim())?;
    let n = x.shape().get(dim).copied().unwrap_or(1);
    let (exact, scale) = super::common::map_rows(x, dim, |row, out, scale| {
        let (mut s, mut a) = (0.0, 0.0);
        for ((o, sc), &v) in out.iter_mut().zip(scale.iter_mut()).zip(row) {
            s += v;
            a += v.abs();
            *o = s;
            *sc = a;
        }
    });
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(n as f64 + 2.0).named("reduction"),
    }])
}

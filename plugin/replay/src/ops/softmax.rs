//! `softmax` and `log_softmax` along a dim.
//!
//! Budget: one rounding, and `n + 6` roundings at the compute precision (the exponentials,
//! a sum of `n`, a division or log) scaled by the output and by how far the inputs are from
//! the row's maximum (an error in `x − max` is amplified by `exp`).

use super::common::{map_rows, norm_dim};
use crate::args::CallArgs;
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

fn dim_of(args: &CallArgs) -> Result<usize> {
    let x = args.tensor(0, "input")?;
    let dim = args
        .ints(1, "dim")?
        .and_then(|d| d.first().copied())
        .ok_or_else(|| {
            ReplayError::args(
                "softmax without a dim (the implicit dim is deprecated and not replayed)",
            )
        })?;
    norm_dim(dim, x.ndim())
}

/// `softmax(input, dim)`.
pub fn softmax(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let dim = dim_of(args)?;
    let n = x.shape().get(dim).copied().unwrap_or(1);
    let (exact, scale) = map_rows(x, dim, |row, out, scale| {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut total = 0.0;
        for (o, &v) in out.iter_mut().zip(row) {
            *o = (v - m).exp();
            total += *o;
        }
        let mut spread = 0.0;
        for (o, &v) in out.iter_mut().zip(row) {
            *o /= total;
            spread += *o * (v - m).abs();
        }
        for ((s, &o), &v) in scale.iter_mut().zip(out.iter()).zip(row) {
            *s = o * (1.0 + (v - m).abs() + spread);
        }
    });
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(n as f64 + 6.0).named("softmax"),
    }])
}

/// `log_softmax(input, dim)`.
pub fn log_softmax(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let dim = dim_of(args)?;
    let n = x.shape().get(dim).copied().unwrap_or(1);
    let (exact, scale) = map_rows(x, dim, |row, out, scale| {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = row.iter().map(|&v| (v - m).exp()).sum();
        let log_total = total.ln();
        for ((o, s), &v) in out.iter_mut().zip(scale.iter_mut()).zip(row) {
            *o = v - m - log_total;
            *s = (v - m).abs() + log_total.abs() + 1.0;
        }
    });
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(n as f64 + 6.0).named("softmax"),
    }])
}

//! Elementwise arithmetic and math: `add`/`sub`/`mul`/`div` (and their `Tensor.__op__`,
//! reflected and in-place forms), `pow`, `exp`, `log`, `sqrt`, `rsqrt`, `neg`, `abs`,
//! `where`, `masked_fill`, `npu_rotary_mul`.
//!
//! Budget: one rounding of the output; one internal rounding (a scalar operand rounded to the
//! compute precision) scaled by `|a| + |b|` for add/sub, `|y|` for mul/div/sqrt; 8 for the
//! transcendentals (`exp`, `log`, `pow`, `rsqrt` have library or hardware approximations of a
//! few compute-precision ULPs). `neg`, `abs`, `where` are exact; `masked_fill` rounds its fill
//! value once.

use ndarray::{ArrayD, IxDyn};

use super::common::{broadcast_shape, broadcast_to, zip2, zip3};
use crate::args::{CallArgs, Value};
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

/// A tensor or a number argument as an array (a number as a 0-dim array).
fn operand(args: &CallArgs, position: usize, name: &str) -> Result<ArrayD<f64>> {
    match args.get(position, name) {
        Some(Value::Tensor(_)) => Ok(args.tensor(position, name)?.clone()),
        Some(v) => v
            .as_f64()
            .map(|x| ArrayD::from_elem(IxDyn(&[]), x))
            .ok_or_else(|| {
                ReplayError::args(format!("argument {name} is neither a tensor nor a number"))
            }),
        None => Err(ReplayError::args(format!("argument {name} is missing"))),
    }
}

fn two(args: &CallArgs, swapped: bool) -> Result<(ArrayD<f64>, ArrayD<f64>)> {
    let a = operand(args, 0, "input")?;
    let b = operand(args, 1, "other")?;
    Ok(if swapped { (b, a) } else { (a, b) })
}

/// The binary arithmetic ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
}

/// `a op b` (`swapped`: the reflected form `b op a`, as `__radd__`, `__rsub__`, `rsub`).
pub fn arith(args: &CallArgs, op: Arith, swapped: bool) -> Result<Vec<Reference>> {
    let (a, b) = two(args, swapped)?;
    let alpha = args.f64_or(2, "alpha", 1.0).unwrap_or(1.0);
    if op == Arith::Div {
        if let Some(mode) = args.str(2, "rounding_mode") {
            return Err(ReplayError::args(format!(
                "div with rounding_mode={mode:?} (no CPU reference yet)"
            )));
        }
    }
    let reference = match op {
        Arith::Add | Arith::Sub => {
            let sign = if op == Arith::Add { alpha } else { -alpha };
            let exact = zip2(&a, &b, |x, y| x + sign * y)?;
            let scale = zip2(&a, &b, |x, y| x.abs() + (sign * y).abs())?;
            Reference {
                exact,
                scale,
                budget: Budget::one_rounding(1.0),
            }
        }
        Arith::Mul => Reference::relative(zip2(&a, &b, |x, y| x * y)?, Budget::one_rounding(1.0)),
        Arith::Div => Reference::relative(zip2(&a, &b, |x, y| x / y)?, Budget::one_rounding(1.0)),
        Arith::Pow => {
            let exact = zip2(&a, &b, f64::powf)?;
            let scale = zip2(&a, &b, |x, y| {
                x.powf(y).abs() * (1.0 + (y * x.abs().ln()).abs())
            })?;
            Reference {
                exact,
                scale: scale.mapv(|s| if s.is_finite() { s } else { 0.0 }),
                budget: Budget::one_rounding(8.0),
            }
        }
    };
    Ok(vec![reference])
}

/// The unary math ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unary {
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Neg,
    Abs,
}

pub fn unary(args: &CallArgs, op: Unary) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    Ok(vec![match op {
        Unary::Exp => Reference::relative(x.mapv(f64::exp), Budget::one_rounding(8.0)),
        Unary::Log => {
            let exact = x.mapv(f64::ln);
            let scale = exact.mapv(|v| v.abs() + 1.0);
            Reference {
                exact,
                scale,
                budget: Budget::one_rounding(8.0),
            }
        }
        Unary::Sqrt => Reference::relative(x.mapv(f64::sqrt), Budget::one_rounding(1.0)),
        Unary::Rsqrt => Reference::relative(x.mapv(|v| 1.0 / v.sqrt()), Budget::one_rounding(8.0)),
        Unary::Neg => Reference::exact(x.mapv(|v| -v)),
        Unary::Abs => Reference::exact(x.mapv(f64::abs)),
    }])
}

/// `where(condition, input, other)`: exact selection.
pub fn where_op(args: &CallArgs) -> Result<Vec<Reference>> {
    let cond = args.tensor(0, "condition")?;
    let x = operand(args, 1, "input")?;
    let y = operand(args, 2, "other")?;
    let exact = zip3(cond, &x, &y, |c, x, y| if c != 0.0 { x } else { y })?;
    Ok(vec![Reference::exact(exact)])
}

/// `masked_fill(input, mask, value)`: the fill value is rounded once to the output dtype.
pub fn masked_fill(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let mask = args.tensor(1, "mask")?;
    let value = operand(args, 2, "value")?;
    let v = value.iter().next().copied().unwrap_or(f64::NAN);
    let exact = zip2(x, mask, |x, m| if m != 0.0 { v } else { x })?;
    let scale = ArrayD::zeros(exact.raw_dim());
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(0.0).named("exact"),
    }])
}

/// `npu_rotary_mul(input, r1, r2, rotary_mode='half')`: `r1·x + r2·rotate_half(x)` with
/// `rotate_half(x) = cat(−x₂, x₁)` over the last dim's halves (msprobe's
/// `bench_functions/rotary_mul.py`), `r1` and `r2` broadcast against `x`. Budget: one
/// rounding, and 3 roundings (two products and their sum) of `|r1·x| + |r2·rotate_half(x)|`.
pub fn rotary_mul(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let r1 = args.tensor(1, "r1")?;
    let r2 = args.tensor(2, "r2")?;
    if let Some(mode) = args.str(3, "rotary_mode").filter(|m| *m != "half") {
        return Err(ReplayError::args(format!(
            "rotary_mode {mode:?} is not replayed (msprobe's CPU reference is the rotate-half form)"
        )));
    }
    let d = x.shape().last().copied().unwrap_or(0);
    if x.ndim() == 0 || d % 2 != 0 {
        return Err(ReplayError::args(format!(
            "npu_rotary_mul of shape {:?}: the last dim must be even",
            x.shape()
        )));
    }
    let half = d / 2;
    let mut rotated = x.clone();
    for (mut out, row) in rotated.rows_mut().into_iter().zip(x.rows()) {
        for j in 0..half {
            out[j] = -row[j + half];
            out[j + half] = row[j];
        }
    }
    let shape = broadcast_shape(&broadcast_shape(x.shape(), r1.shape())?, r2.shape())?;
    let (x, rotated) = (broadcast_to(x, &shape)?, broadcast_to(&rotated, &shape)?);
    let (r1, r2) = (broadcast_to(r1, &shape)?, broadcast_to(r2, &shape)?);
    let exact = ndarray::Zip::from(&x)
        .and(&rotated)
        .and(&r1)
        .and(&r2)
        .map_collect(|&x, &xr, &a, &b| a * x + b * xr);
    let scale = ndarray::Zip::from(&x)
        .and(&rotated)
        .and(&r1)
        .and(&r2)
        .map_collect(|&x, &xr, &a, &b| (a * x).abs() + (b * xr).abs());
    Ok(vec![Reference {
        exact,
        scale,
        budget: Budget::one_rounding(3.0),
    }])
}

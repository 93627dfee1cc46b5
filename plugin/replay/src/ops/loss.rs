//! Losses: `cross_entropy` and `nll_loss` over class scores `[N, C]` (or `[C]`) with class
//! indices, reductions `mean`/`sum`/`none`, `ignore_index`; class weights and label
//! smoothing are not replayed yet.
//!
//! Budget: one rounding, and `C + n + 8` roundings at the compute precision (a log-sum-exp
//! over `C` classes per row, then a sum of `n` rows) scaled by the mean of each row's
//! `|x_t − max| + |log Σ exp| + 1`.

use ndarray::{ArrayD, IxDyn};

use super::common::map_rows;
use crate::args::CallArgs;
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

/// Per row: the loss `−log p[target]`, its scale, whether the row counts (not
/// `ignore_index`); and the number of classes.
struct Rows {
    losses: Vec<f64>,
    scales: Vec<f64>,
    kept: Vec<bool>,
    classes: usize,
}

/// The rows' losses from logits, or from log-probabilities when `from_logits` is false.
fn per_row(args: &CallArgs, from_logits: bool) -> Result<Rows> {
    let x = args.tensor(0, "input")?;
    let target = args.tensor(1, "target")?;
    if args.get(2, "weight").is_some() {
        return Err(ReplayError::args("class weights are not replayed yet"));
    }
    if args.f64_or(99, "label_smoothing", 0.0)? != 0.0 {
        return Err(ReplayError::args("label smoothing is not replayed yet"));
    }
    let x2 = match x.ndim() {
        1 => x.clone().insert_axis(ndarray::Axis(0)),
        2 => x.clone(),
        n => {
            return Err(ReplayError::args(format!(
                "class scores of {n} dims are not replayed yet (only [N, C])"
            )))
        }
    };
    let classes = x2.shape()[1];
    let (logp, scale) = if from_logits {
        map_rows(&x2, 1, |row, out, scale| {
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = row.iter().map(|&v| (v - m).exp()).sum::<f64>().ln();
            for ((o, s), &v) in out.iter_mut().zip(scale.iter_mut()).zip(row) {
                *o = v - m - lse;
                *s = (v - m).abs() + lse.abs() + 1.0;
            }
        })
    } else {
        (x2.clone(), x2.mapv(f64::abs))
    };
    let ignore = args.f64_or(4, "ignore_index", -100.0)?;
    let targets: Vec<f64> = target.iter().copied().collect();
    if targets.len() != x2.shape()[0] {
        return Err(ReplayError::args("one target per row expected"));
    }
    let (mut losses, mut scales, mut kept) = (Vec::new(), Vec::new(), Vec::new());
    for (i, &t) in targets.iter().enumerate() {
        if t == ignore {
            losses.push(0.0);
            scales.push(0.0);
            kept.push(false);
            continue;
        }
        if t < 0.0 || t as usize >= classes || t.fract() != 0.0 {
            return Err(ReplayError::args(format!(
                "target {t} is not a class of {classes}"
            )));
        }
        let j = t as usize;
        losses.push(-logp[[i, j]]);
        scales.push(scale[[i, j]]);
        kept.push(true);
    }
    Ok(Rows {
        losses,
        scales,
        kept,
        classes,
    })
}

fn reduce(args: &CallArgs, from_logits: bool) -> Result<Vec<Reference>> {
    let Rows {
        losses,
        scales,
        kept,
        classes,
    } = per_row(args, from_logits)?;
    let reduction = args.str(99, "reduction").unwrap_or("mean");
    let n = kept.iter().filter(|&&k| k).count();
    let budget = Budget::one_rounding((classes + losses.len()) as f64 + 8.0).named("loss");
    let scalar = |v: f64| ArrayD::from_elem(IxDyn(&[]), v);
    let total: f64 = losses.iter().sum();
    let total_scale: f64 = scales.iter().sum();
    let (exact, scale) = match reduction {
        "mean" => {
            let d = n as f64;
            (scalar(total / d), scalar(total_scale / d))
        }
        "sum" => (scalar(total), scalar(total_scale)),
        "none" => {
            let shape = [losses.len()];
            (
                ArrayD::from_shape_vec(IxDyn(&shape), losses)
                    .map_err(|e| ReplayError::args(e.to_string()))?,
                ArrayD::from_shape_vec(IxDyn(&shape), scales)
                    .map_err(|e| ReplayError::args(e.to_string()))?,
            )
        }
        other => return Err(ReplayError::args(format!("reduction={other:?}"))),
    };
    Ok(vec![Reference {
        exact,
        scale,
        budget,
    }])
}

/// `cross_entropy(input, target, weight=None, size_average, ignore_index=-100, reduce,
/// reduction='mean', label_smoothing=0.0)`.
pub fn cross_entropy(args: &CallArgs) -> Result<Vec<Reference>> {
    reduce(args, true)
}

/// `nll_loss(input, target, weight=None, size_average, ignore_index=-100, reduce,
/// reduction='mean')`: `input` holds log-probabilities.
pub fn nll_loss(args: &CallArgs) -> Result<Vec<Reference>> {
    reduce(args, false)
}

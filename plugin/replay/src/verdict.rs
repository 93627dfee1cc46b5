//! Our verdict on one output: its error against the exact result in ULPs of the output dtype,
//! its bias, and whether a correct kernel could have produced it (its budget).
//!
//! An element passes when `|d − e| ≤ output_ulps·ulp(e) + internal·u·scale` (see
//! [`crate::reference::Budget`]). The output fails when any element is beyond its budget, or
//! when its errors are *biased*: over the elements whose budget is the output rounding alone,
//! the mean signed error exceeds a quarter ULP with a z-score above 8 (a correct rounding errs
//! both ways; a kernel that truncates, or adds a constant, does not). What a correct kernel
//! does is defined per op in `docs/replay.md`.

use serde::Serialize;

use crate::dtype::Dtype;
use crate::reference::Reference;

/// The bias rule's figures: mean signed error (ULPs) and z-score, over at least this many
/// elements.
const BIAS_MEAN_ULPS: f64 = 0.25;
const BIAS_Z: f64 = 8.0;
const BIAS_MIN_ELEMENTS: usize = 64;

/// Our numbers and verdict for one output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ours {
    /// Largest `|d − e| / ulp(e)`.
    pub max_ulp: f64,
    /// Mean `|d − e| / ulp(e)`.
    pub mean_ulp: f64,
    /// Mean signed `(d − e) / ulp(e)` over the elements whose budget is the rounding alone.
    pub bias_ulp: f64,
    /// Its z-score (`Σs / √Σs²`).
    pub bias_z: f64,
    /// Mean signed error toward larger magnitude (`s·sign(e)`: a kernel that truncates
    /// leans toward zero whatever the signs), and its z-score.
    pub magnitude_bias_ulp: f64,
    pub magnitude_bias_z: f64,
    /// Largest error over budget (`1`: at the budget).
    pub worst_budget_ratio: f64,
    /// The budget at the worst element, in ULPs of the output dtype.
    pub budget_ulp_at_worst: f64,
    /// Elements beyond their budget.
    pub over_budget: usize,
    /// Flat index of the worst element.
    pub worst_index: usize,
    pub elements: usize,
    pub pass: bool,
    /// In words, why it passes or fails.
    pub why: String,
}

/// Judges `device` (values of `dtype`) against `reference`; `compute` is the precision the
/// kernel computes in (its unit roundoff scales the internal roundings).
pub fn judge(reference: &Reference, device: &[f64], dtype: Dtype, compute: Dtype) -> Ours {
    let u = compute.unit_roundoff();
    let b = reference.budget;
    let n = device.len();
    let mut max_ulp: f64 = 0.0;
    let mut sum_ulp = 0.0;
    let (mut bias_sum, mut bias_sq, mut bias_n) = (0.0, 0.0, 0usize);
    let mut mag_sum = 0.0;
    let mut worst = (0.0f64, 0usize, 0.0f64);
    let mut over = 0usize;
    for (i, ((&e, &s), &d)) in reference
        .exact
        .iter()
        .zip(reference.scale.iter())
        .zip(device)
        .enumerate()
    {
        let ulp = dtype.ulp(e);
        let (err_ulp, ratio, allowed_ulp, signed) = if e.is_nan() || d.is_nan() {
            let same = e.is_nan() && d.is_nan();
            (
                if same { 0.0 } else { f64::INFINITY },
                if same { 0.0 } else { f64::INFINITY },
                0.0,
                0.0,
            )
        } else if !dtype.round(e).is_finite() || !d.is_finite() {
            // Overflow: a correct kernel gives the same infinity as the rounded exact result.
            let same = dtype.round(e) == d;
            (
                if same { 0.0 } else { f64::INFINITY },
                if same { 0.0 } else { f64::INFINITY },
                0.0,
                0.0,
            )
        } else {
            let err = (d - e).abs();
            let allowed = b.output_ulps * ulp + b.internal * u * s;
            let ratio = if err == 0.0 {
                0.0
            } else if allowed == 0.0 {
                f64::INFINITY
            } else {
                err / allowed
            };
            let rounding_dominates = b.output_ulps * ulp >= b.internal * u * s;
            let signed = if rounding_dominates && b.output_ulps > 0.0 {
                bias_n += 1;
                (d - e) / ulp
            } else {
                0.0
            };
            (err / ulp, ratio, allowed / ulp, signed)
        };
        bias_sum += signed;
        bias_sq += signed * signed;
        mag_sum += if e < 0.0 { -signed } else { signed };
        max_ulp = max_ulp.max(err_ulp);
        sum_ulp += err_ulp;
        if ratio > 1.0 {
            over += 1;
        }
        if ratio > worst.0 || i == 0 {
            worst = (ratio, i, allowed_ulp);
        }
    }
    let bias_ulp = if bias_n > 0 {
        bias_sum / bias_n as f64
    } else {
        0.0
    };
    let bias_z = if bias_sq > 0.0 {
        bias_sum / bias_sq.sqrt()
    } else {
        0.0
    };
    let magnitude_bias_ulp = if bias_n > 0 {
        mag_sum / bias_n as f64
    } else {
        0.0
    };
    let magnitude_bias_z = if bias_sq > 0.0 {
        mag_sum / bias_sq.sqrt()
    } else {
        0.0
    };
    let leans = |mean: f64, z: f64| mean.abs() > BIAS_MEAN_ULPS && z.abs() > BIAS_Z;
    let biased = bias_n >= BIAS_MIN_ELEMENTS
        && (leans(bias_ulp, bias_z) || leans(magnitude_bias_ulp, magnitude_bias_z));
    let pass = over == 0 && !biased;
    let why = if over > 0 {
        format!(
            "{over} of {n} elements beyond a correct {family} kernel's budget: up to {max:.3} ULP of {dtype}, {ratio:.3}x the budget ({budget:.3} ULP there)",
            family = b.family,
            max = max_ulp,
            ratio = worst.0,
            budget = worst.2,
        )
    } else if biased {
        let (what, mean, z) = if leans(bias_ulp, bias_z) {
            ("the errors lean", bias_ulp, bias_z)
        } else {
            ("the magnitudes lean", magnitude_bias_ulp, magnitude_bias_z)
        };
        format!(
            "within budget but biased: {what} {mean:+.3} ULP of {dtype} on average (z = {z:.1}); a correct rounding errs both ways"
        )
    } else if max_ulp == 0.0 {
        "exact".to_string()
    } else {
        format!(
            "within a correct {family} kernel's budget: up to {max:.3} ULP of {dtype}, {ratio:.3}x the budget",
            family = b.family,
            max = max_ulp,
            ratio = worst.0,
        )
    };
    Ours {
        max_ulp,
        mean_ulp: if n > 0 { sum_ulp / n as f64 } else { 0.0 },
        bias_ulp,
        bias_z,
        magnitude_bias_ulp,
        magnitude_bias_z,
        worst_budget_ratio: worst.0,
        budget_ulp_at_worst: worst.2,
        over_budget: over,
        worst_index: worst.1,
        elements: n,
        pass,
        why,
    }
}

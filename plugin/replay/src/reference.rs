//! What an op's replay produces for one output: the exact result, and what a correct kernel
//! may differ from it by (its budget).

use ndarray::ArrayD;
use serde::Serialize;

/// The budget of a correct kernel for one output, per element `i`:
/// `|device_i − exact_i| ≤ output_ulps · ulp(exact_i) + internal · u · scale_i`,
/// where `ulp` is the output dtype's spacing at the exact value and `u` the unit roundoff of
/// the precision the kernel computes in (fp32 for bf16/fp16/fp32 kernels). `docs/replay.md`
/// gives each op's figures and why.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    /// Roundings to the output dtype (1: one rounding, with room for a double rounding).
    pub output_ulps: f64,
    /// How many internal roundings at the compute precision (a sum of `k` terms: `k`).
    pub internal: f64,
    /// The op family the budget is that of (`elementwise`, `reduction`, `matmul`, …).
    pub family: &'static str,
}

impl Budget {
    /// An op that copies or selects values: the output must equal the exact result.
    pub const EXACT: Budget = Budget {
        output_ulps: 0.0,
        internal: 0.0,
        family: "exact",
    };

    /// One rounding of the result (add, mul, div, where the only error is the final rounding).
    pub fn one_rounding(internal: f64) -> Budget {
        Budget {
            output_ulps: 1.0,
            internal,
            family: "elementwise",
        }
    }

    /// The same budget under another family name.
    pub fn named(self, family: &'static str) -> Budget {
        Budget { family, ..self }
    }
}

/// The exact result of one output and its budget.
#[derive(Debug, Clone)]
pub struct Reference {
    pub exact: ArrayD<f64>,
    /// Per element, the magnitude the kernel's internal roundings scale with (`Σ|a·b|` for a
    /// dot product, `Σ|x|` for a sum, `|exact|` for most elementwise ops).
    pub scale: ArrayD<f64>,
    pub budget: Budget,
}

impl Reference {
    /// A result whose internal roundings scale with its own magnitude.
    pub fn relative(exact: ArrayD<f64>, budget: Budget) -> Reference {
        let scale = exact.mapv(f64::abs);
        Reference {
            exact,
            scale,
            budget,
        }
    }

    /// A copied or selected result: no rounding at all.
    pub fn exact(exact: ArrayD<f64>) -> Reference {
        let scale = ArrayD::zeros(exact.raw_dim());
        Reference {
            exact,
            scale,
            budget: Budget::EXACT,
        }
    }
}

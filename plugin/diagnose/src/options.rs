//! The knobs of diagnosis: tolerances per dtype class and the jump ratios, with defaults chosen
//! from the precision of each dtype (see `docs/diagnosis.md` for the reasoning).

use std::sync::Arc;

use crate::entry::DtypeClass;
use crate::tolerance::LearnedTolerances;
pub use crate::tolerance::Tolerance;

/// What a diagnosis looks for and where.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Options {
    /// Float64 against anything at least as precise.
    pub float64: Tolerance,
    pub float32: Tolerance,
    pub float16: Tolerance,
    /// Also used for unknown (fp8…) dtypes.
    pub bfloat16: Tolerance,
    /// An output must also be this many times worse than the inputs to be a jump.
    pub jump_ratio: f64,
    /// A node whose inputs already differ is still a source when its outputs are this many
    /// times worse than its inputs (and above the jump tolerance): a second fault downstream.
    pub amplify_ratio: f64,
    /// Only this step (default: the first step whose forward differs beyond noise).
    pub step: Option<i64>,
    /// Only this rank (default: every rank of the step).
    pub rank: Option<i64>,
    /// Tolerances learned per op kind from a reference compare
    /// ([`LearnedTolerances::from_reference`]): they replace the dtype table for the kinds
    /// they hold.
    #[serde(skip)]
    pub learned: Option<Arc<LearnedTolerances>>,
    /// Without `learned`: tighten the dtype table per op kind from the compare itself where its
    /// noise is lower ([`LearnedTolerances::tightened`]; never looser than the table).
    pub tighten: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            float64: Tolerance {
                agree: 1e-6,
                jump: 1e-4,
            },
            float32: Tolerance {
                agree: 1e-3,
                jump: 1e-2,
            },
            float16: Tolerance {
                agree: 1e-2,
                jump: 5e-2,
            },
            bfloat16: Tolerance {
                agree: 5e-2,
                jump: 2e-1,
            },
            jump_ratio: 10.0,
            amplify_ratio: 100.0,
            step: None,
            rank: None,
            learned: None,
            tighten: true,
        }
    }
}

impl Options {
    /// The tolerance of a comparison between the two dtype classes (the coarser one decides).
    pub fn tolerance(&self, npu: DtypeClass, bench: DtypeClass) -> Tolerance {
        match npu.coarser(bench) {
            DtypeClass::Exact => Tolerance {
                agree: 0.0,
                jump: 0.0,
            },
            DtypeClass::Float64 => self.float64,
            DtypeClass::Float32 => self.float32,
            DtypeClass::Float16 => self.float16,
            DtypeClass::BFloat16 | DtypeClass::Other => self.bfloat16,
        }
    }
}

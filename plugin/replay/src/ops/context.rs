//! What the replay knows of a call beyond its arguments, handed to every op.

/// What the replay knows of the call beyond its arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// The output dtype is below fp32 (bf16/fp16 kernels that round intermediates).
    pub below_fp32: bool,
    /// The dtype the inputs ran in (after an autocast cast), when known: a fused kernel that
    /// rounds an intermediate to it (flash attention's `P`) is budgeted for that rounding.
    pub ran_in: Option<crate::dtype::Dtype>,
}

impl Context {
    /// How many compute-precision (fp32) roundings one rounding to the dtype the inputs ran in
    /// is: `u_in / u` (2¹⁶ for bf16, 2¹³ for fp16), 1 at fp32 and above or when unknown. A
    /// fused kernel that rounds an intermediate to the input dtype is budgeted with it.
    pub fn input_rounding(&self) -> f64 {
        match self.ran_in {
            Some(d) if d.mantissa_bits() < crate::dtype::Dtype::F32.mantissa_bits() => {
                d.unit_roundoff() / crate::dtype::Dtype::F32.unit_roundoff()
            }
            _ => 1.0,
        }
    }
}

//! The floating-point formats a call ran in: parsing their names, rounding to them, their ULP.
//!
//! ULP here is the spacing of the format at the *exact* value (exponent taken from the exact
//! result, clamped at the smallest normal exponent), as msprobe's `get_ulp_err` takes it.

use serde::Serialize;

/// A floating-point format (the output dtype of a call, or the dtype its inputs ran in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Bf16,
    F16,
    F32,
    F64,
}

impl Dtype {
    /// Parses a dtype as a dump writes it: `torch.bfloat16`, `BFloat16` (MindSpore), `float32`,
    /// `torch.half`, … `None` for integer, boolean and other types.
    pub fn parse(name: &str) -> Option<Dtype> {
        let lower = name.to_ascii_lowercase();
        let bare = lower
            .strip_prefix("torch.")
            .or_else(|| lower.strip_prefix("mindspore."))
            .unwrap_or(&lower);
        match bare {
            "bfloat16" | "bf16" => Some(Dtype::Bf16),
            "float16" | "half" | "fp16" => Some(Dtype::F16),
            "float32" | "float" | "fp32" => Some(Dtype::F32),
            "float64" | "double" | "fp64" => Some(Dtype::F64),
            _ => None,
        }
    }

    /// The name torch gives it (`torch.bfloat16`), as msprobe's CSVs write it.
    pub fn torch_name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "torch.bfloat16",
            Dtype::F16 => "torch.float16",
            Dtype::F32 => "torch.float32",
            Dtype::F64 => "torch.float64",
        }
    }

    /// Short name (`bf16`).
    pub fn short(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::F16 => "fp16",
            Dtype::F32 => "fp32",
            Dtype::F64 => "fp64",
        }
    }

    /// Explicit mantissa bits.
    pub fn mantissa_bits(self) -> i32 {
        match self {
            Dtype::Bf16 => 7,
            Dtype::F16 => 10,
            Dtype::F32 => 23,
            Dtype::F64 => 52,
        }
    }

    /// Exponent of the smallest normal number.
    pub fn min_exponent(self) -> i32 {
        match self {
            Dtype::Bf16 | Dtype::F32 => -126,
            Dtype::F16 => -14,
            Dtype::F64 => -1022,
        }
    }

    /// Unit roundoff (half the machine epsilon).
    pub fn unit_roundoff(self) -> f64 {
        (-(self.mantissa_bits() + 1) as f64).exp2()
    }

    /// `x` rounded to nearest (ties to even) in this format, overflowing to ±inf.
    pub fn round(self, x: f64) -> f64 {
        match self {
            Dtype::Bf16 => half::bf16::from_f64(x).to_f64(),
            Dtype::F16 => half::f16::from_f64(x).to_f64(),
            Dtype::F32 => x as f32 as f64,
            Dtype::F64 => x,
        }
    }

    /// The spacing of this format at the exact value `x` (for `x = 0` the subnormal spacing).
    pub fn ulp(self, x: f64) -> f64 {
        let a = x.abs();
        let e = if a == 0.0 || !a.is_finite() {
            self.min_exponent()
        } else {
            (a.log2().floor() as i32).max(self.min_exponent())
        };
        ((e - self.mantissa_bits()) as f64).exp2()
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.short())
    }
}

#[cfg(test)]
mod tests {
    use super::Dtype;

    #[test]
    fn names_of_both_frameworks_parse() {
        assert_eq!(Dtype::parse("torch.bfloat16"), Some(Dtype::Bf16));
        assert_eq!(Dtype::parse("BFloat16"), Some(Dtype::Bf16));
        assert_eq!(Dtype::parse("Float32"), Some(Dtype::F32));
        assert_eq!(Dtype::parse("torch.int64"), None);
    }

    #[test]
    fn rounding_and_ulp() {
        assert_eq!(Dtype::Bf16.round(1.0 + 1.0 / 256.0), 1.0); // tie to even
        assert_eq!(Dtype::Bf16.round(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
        assert_eq!(Dtype::Bf16.ulp(1.5), 1.0 / 128.0);
        assert_eq!(Dtype::F32.ulp(1.0), f32::EPSILON as f64);
        assert_eq!(Dtype::F16.ulp(0.0), (-24f64).exp2());
    }
}

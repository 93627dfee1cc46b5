//! One entry of a node's `input_data` / `output_data`: a tensor's statistics, a non-tensor
//! argument's value, or a process group, read from the stringified JSON msprobe stores.
//!
//! Only what the rules need is kept, as numbers: the four statistics of each side, the tensor
//! mode metrics and the md5 text. Values are strings in msprobe's files (`"0.25"`, `"inf"`,
//! `"null"`) and sometimes numbers in other writers; both are read.

use serde_json::{Map, Value};

/// Where an entry sits in the node's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// An argument of the call (tensor or not), `…input.N` / `…input.<kwarg>`.
    Input,
    /// A module's own parameter, `…parameters.<name>`.
    Parameter,
    /// A result, `…output.N`.
    Output,
}

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tensor with statistics.
    Tensor,
    /// A Python / MindSpore scalar, string, slice…: compared by value.
    Scalar,
    /// A process group, `None`, or anything else the rules do not compare.
    Ignored,
}

/// The numeric class of a dtype, which decides the noise a comparison tolerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DtypeClass {
    /// Integers and booleans: exact.
    Exact,
    Float64,
    Float32,
    Float16,
    BFloat16,
    /// Unknown names (fp8 and such): treated as the least precise float.
    Other,
}

impl DtypeClass {
    /// Classifies a dtype name of either framework, ignoring how it is spelled
    /// (`torch.float32`, `Float32`, `float32` are the same: msprobe compares them as text and
    /// reports a false error; we do not).
    pub fn of(dtype: &str) -> DtypeClass {
        let lower = dtype.to_ascii_lowercase();
        let name = lower
            .rsplit(['.', ' '])
            .next()
            .unwrap_or(&lower)
            .trim_end_matches(['>', '\'']);
        match name {
            "float64" | "double" => DtypeClass::Float64,
            "float32" | "float" | "tensorfloat32" => DtypeClass::Float32,
            "float16" | "half" => DtypeClass::Float16,
            "bfloat16" => DtypeClass::BFloat16,
            n if n.starts_with("int") || n.starts_with("uint") || n == "bool" || n == "long" => {
                DtypeClass::Exact
            }
            _ => DtypeClass::Other,
        }
    }

    /// The unit round-off of the class: the smallest relative difference it can show.
    pub fn epsilon(self) -> f64 {
        match self {
            DtypeClass::Exact => 0.0,
            DtypeClass::Float64 => f64::EPSILON,
            DtypeClass::Float32 => f32::EPSILON as f64,
            DtypeClass::Float16 => 9.765_625e-4,
            DtypeClass::BFloat16 | DtypeClass::Other => 7.812_5e-3,
        }
    }

    /// The less precise of two classes (the one whose noise a comparison must tolerate).
    pub fn coarser(self, other: DtypeClass) -> DtypeClass {
        self.max(other)
    }
}

/// `Max`, `Min`, `Mean`, `Norm` of one tensor (any may be absent; non-finite values are kept).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    pub max: Option<f64>,
    pub min: Option<f64>,
    pub mean: Option<f64>,
    pub norm: Option<f64>,
}

impl Stats {
    /// Whether any statistic is NaN or infinite (a Norm overflows before Max or Min do).
    pub fn has_non_finite(&self) -> bool {
        [self.max, self.min, self.mean, self.norm]
            .into_iter()
            .flatten()
            .any(|v| !v.is_finite())
    }
}

/// The tensor-mode metrics msprobe stores on the target side of a matched pair.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TensorMetrics {
    pub cosine: Option<f64>,
    pub max_abs_err: Option<f64>,
}

/// One entry, as the rules see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The key without the node's name: `input.0`, `input.eps`, `parameters.weight`, `output.0`.
    pub name: Box<str>,
    pub role: Role,
    pub kind: Kind,
    pub dtype: DtypeClass,
    pub stats: Stats,
    /// A scalar's value as text.
    pub value: Option<Box<str>>,
    /// The md5 (CRC32) text in md5 mode.
    pub md5: Option<Box<str>>,
    /// Tensor-mode metrics, when stored (boxed: most files have none, and a 1M-node file holds
    /// millions of entries).
    pub metrics: Option<Box<TensorMetrics>>,
    /// A hash of the shape as written without spaces (`[2,16]`); 0 when absent. Only compared
    /// for equality.
    pub shape: u64,
    /// The dtype is spelled the PyTorch way (`torch.float32`), not MindSpore's (`Float32`).
    pub torch_dtype: bool,
}

/// A hash of a shape's text without whitespace (never 0).
pub fn shape_hash(shape: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0x5ea9e).build_hasher();
    for b in shape.bytes().filter(|b| !b.is_ascii_whitespace()) {
        h.write_u8(b);
    }
    h.finish().max(1)
}

/// A value as a number: JSON numbers, and strings such as `"0.25"`, `"inf"`, `"-inf"`, `"nan"`
/// (msprobe may append a tab to non-finite cells). `null`, `"null"`, `"N/A"`, booleans: none.
pub fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim();
            match t.to_ascii_lowercase().as_str() {
                "inf" | "infinity" | "+inf" => Some(f64::INFINITY),
                "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
                "nan" => Some(f64::NAN),
                _ => t.parse::<f64>().ok(),
            }
        }
        _ => None,
    }
}

fn text(v: Option<&Value>) -> Option<Box<str>> {
    match v? {
        Value::String(s) => Some(s.as_str().into()),
        Value::Null => None,
        other => Some(other.to_string().into()),
    }
}

/// The role of a key, from the part after the node's name.
pub fn role_of(suffix: &str, in_output_data: bool) -> Role {
    if suffix.starts_with("parameters") || suffix.contains(".parameters.") {
        Role::Parameter
    } else if in_output_data || suffix.starts_with("output") {
        Role::Output
    } else {
        Role::Input
    }
}

/// Reads the entries of one JSON object (`input_data` or `output_data`) of node `node`.
pub fn parse_entries(node: &str, data: &Map<String, Value>, in_output_data: bool) -> Vec<Entry> {
    data.iter()
        .map(|(key, v)| {
            let suffix = key
                .strip_prefix(node)
                .and_then(|s| s.strip_prefix('.'))
                .unwrap_or(key);
            parse_entry(suffix, role_of(suffix, in_output_data), v)
        })
        .collect()
}

fn parse_entry(name: &str, role: Role, v: &Value) -> Entry {
    let empty = Map::new();
    let obj = v.as_object().unwrap_or(&empty);
    let get = |k: &str| obj.get(k);
    let type_name = get("type").and_then(Value::as_str).unwrap_or("");
    let dtype_text = get("dtype").and_then(Value::as_str).unwrap_or("");
    let kind =
        if type_name.ends_with("ProcessGroup") || type_name.is_empty() && get("Max").is_none() {
            Kind::Ignored
        } else if type_name.ends_with("Tensor") || type_name.ends_with("Parameter") {
            Kind::Tensor
        } else if get("value").is_some() || dtype_text.contains("class") {
            Kind::Scalar
        } else if get("shape").is_some() && get("Max").is_some() {
            Kind::Tensor
        } else {
            Kind::Ignored
        };
    let stats = Stats {
        max: number(get("Max")),
        min: number(get("Min")),
        mean: number(get("Mean")),
        norm: number(get("Norm")),
    };
    let metrics = (get("Cosine").is_some() || get("MaxAbsErr").is_some()).then(|| {
        Box::new(TensorMetrics {
            cosine: number(get("Cosine")),
            max_abs_err: number(get("MaxAbsErr")),
        })
    });
    let value = match kind {
        Kind::Scalar => text(get("value")).or_else(|| text(get("Max"))),
        _ => None,
    };
    Entry {
        name: name.into(),
        role,
        kind,
        dtype: if kind == Kind::Scalar {
            DtypeClass::Exact
        } else {
            DtypeClass::of(dtype_text)
        },
        stats,
        value,
        md5: text(get("md5")),
        metrics,
        shape: get("shape").and_then(Value::as_str).map_or(0, shape_hash),
        torch_dtype: dtype_text.starts_with("torch."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dtype_names_of_both_frameworks_are_the_same_class() {
        assert_eq!(DtypeClass::of("torch.float32"), DtypeClass::Float32);
        assert_eq!(DtypeClass::of("Float32"), DtypeClass::Float32);
        assert_eq!(DtypeClass::of("torch.bfloat16"), DtypeClass::BFloat16);
        assert_eq!(DtypeClass::of("BFloat16"), DtypeClass::BFloat16);
        assert_eq!(DtypeClass::of("torch.int64"), DtypeClass::Exact);
        assert_eq!(DtypeClass::of("Int64"), DtypeClass::Exact);
        assert_eq!(DtypeClass::of("torch.float8_e4m3fn"), DtypeClass::Other);
    }

    #[test]
    fn numbers_are_read_from_msprobe_strings() {
        assert_eq!(number(Some(&json!("0.25"))), Some(0.25));
        assert_eq!(number(Some(&json!("inf\t"))), Some(f64::INFINITY));
        assert_eq!(number(Some(&json!("-inf"))), Some(f64::NEG_INFINITY));
        assert!(number(Some(&json!("nan"))).is_some_and(f64::is_nan));
        assert_eq!(number(Some(&json!("null"))), None);
        assert_eq!(number(Some(&json!("N/A"))), None);
        assert_eq!(number(Some(&json!(3))), Some(3.0));
    }

    #[test]
    fn entries_get_their_role_and_kind() {
        let data = json!({
            "F.layer_norm.0.forward.input.0": {"type": "torch.Tensor", "dtype": "torch.float32",
                "shape": "[2]", "Max": "1.0", "Min": "-1.0", "Mean": "0.0", "Norm": "1.4"},
            "F.layer_norm.0.forward.input.4": {"type": "float", "value": "1e-05",
                "dtype": "<class float>", "shape": "[]", "Max": "1e-05"},
            "F.layer_norm.0.forward.input.group": {"type": "torch.ProcessGroup", "group_ranks": "[0, 1]"},
            "F.layer_norm.0.forward.parameters.weight": {"type": "torch.Tensor",
                "dtype": "torch.float32", "shape": "[2]", "Max": "1.0"},
            "F.layer_norm.0.forward.input.3": {"value": "null"}
        });
        let entries = parse_entries("F.layer_norm.0.forward", data.as_object().unwrap(), false);
        let kinds: Vec<(&str, Role, Kind)> =
            entries.iter().map(|e| (&*e.name, e.role, e.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                ("input.0", Role::Input, Kind::Tensor),
                ("input.4", Role::Input, Kind::Scalar),
                ("input.group", Role::Input, Kind::Ignored),
                ("parameters.weight", Role::Parameter, Kind::Tensor),
                ("input.3", Role::Input, Kind::Ignored),
            ]
        );
        assert_eq!(entries[1].value.as_deref(), Some("1e-05"));
        assert_eq!(entries[0].stats.norm, Some(1.4));
    }
}

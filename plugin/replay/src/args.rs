//! A call's arguments as the dump recorded them: tensors (their values once loaded) and the
//! non-tensor values (ints, floats, bools, strings, lists), by position and by keyword.

use ndarray::ArrayD;

use crate::dtype::Dtype;
use crate::error::{ReplayError, Result};

/// A tensor argument or output.
#[derive(Debug, Clone)]
pub struct TensorValue {
    /// The dtype as `dump.json` names it (`torch.bfloat16`, `BFloat16`, `torch.int64`).
    pub dtype_name: String,
    /// The floating-point format, `None` for integer and boolean tensors.
    pub dtype: Option<Dtype>,
    pub shape: Vec<usize>,
    /// The file holding its values (relative to the dump's `dump_tensor_data`), when dumped.
    pub data_name: Option<String>,
    /// The values, widened to f64, once loaded.
    pub data: Option<ArrayD<f64>>,
}

/// One recorded value.
#[derive(Debug, Clone)]
pub enum Value {
    Tensor(TensorValue),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    None,
    List(Vec<Value>),
    /// A value the replay does not model (its recorded type name).
    Other(String),
}

impl Value {
    pub fn as_tensor(&self) -> Option<&TensorValue> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// An int or a list of ints (`dim=1`, `dim=[0, 2]`, `normalized_shape=(16,)`).
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        match self {
            Value::Int(i) => Some(vec![*i]),
            Value::List(items) => items.iter().map(Value::as_i64).collect(),
            _ => None,
        }
    }

    /// Every tensor inside (a list of tensors for `cat`).
    pub fn tensors(&self) -> Vec<&TensorValue> {
        match self {
            Value::Tensor(t) => vec![t],
            Value::List(items) => items.iter().flat_map(Value::tensors).collect(),
            _ => Vec::new(),
        }
    }

    /// Every tensor inside, mutably (to load or cast them).
    pub fn tensors_mut(&mut self) -> Vec<&mut TensorValue> {
        match self {
            Value::Tensor(t) => vec![t],
            Value::List(items) => items.iter_mut().flat_map(Value::tensors_mut).collect(),
            _ => Vec::new(),
        }
    }

    /// Reads one recorded value (`{"type": "int", "value": 3}`, a tensor's record, a list, `null`).
    pub fn from_json(v: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match v {
            J::Null => Value::None,
            J::Array(items) => Value::List(items.iter().map(Value::from_json).collect()),
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => n
                .as_i64()
                .map(Value::Int)
                .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(f64::NAN))),
            J::String(s) => Value::Str(s.clone()),
            J::Object(map) => {
                let ty = map.get("type").and_then(J::as_str).unwrap_or("");
                let is_tensor = ty.ends_with("Tensor") || ty.ends_with("Parameter");
                if is_tensor || (map.contains_key("shape") && map.contains_key("dtype")) {
                    let dtype_name = map
                        .get("dtype")
                        .and_then(J::as_str)
                        .unwrap_or("")
                        .to_string();
                    let shape = map
                        .get("shape")
                        .and_then(J::as_array)
                        .map(|s| {
                            s.iter()
                                .filter_map(|d| d.as_u64().map(|d| d as usize))
                                .collect()
                        })
                        .unwrap_or_default();
                    return Value::Tensor(TensorValue {
                        dtype: Dtype::parse(&dtype_name),
                        dtype_name,
                        shape,
                        data_name: map
                            .get("data_name")
                            .and_then(J::as_str)
                            .filter(|s| !s.is_empty() && *s != "-1")
                            .map(str::to_string),
                        data: None,
                    });
                }
                let value = map.get("value");
                match (ty, value) {
                    ("int", Some(J::Number(n))) => {
                        n.as_i64().map_or(Value::Other(ty.into()), Value::Int)
                    }
                    ("float", Some(J::Number(n))) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
                    ("float", Some(J::String(s))) => Value::Float(parse_non_finite(s)),
                    ("bool", Some(J::Bool(b))) => Value::Bool(*b),
                    ("str", Some(J::String(s))) => Value::Str(s.clone()),
                    (_, Some(J::Null)) | ("NoneType", _) => Value::None,
                    ("slice" | "ellipsis", _) | (_, None) => Value::Other(ty.to_string()),
                    (_, Some(other)) => match Value::from_json(other) {
                        v @ (Value::Int(_) | Value::Float(_) | Value::Bool(_) | Value::List(_)) => {
                            v
                        }
                        _ => Value::Other(ty.to_string()),
                    },
                }
            }
        }
    }
}

fn parse_non_finite(s: &str) -> f64 {
    match s.to_ascii_lowercase().as_str() {
        "inf" | "infinity" | "+inf" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or(f64::NAN),
    }
}

/// A call's inputs: positional arguments and keyword arguments, tensors loaded.
#[derive(Debug, Clone, Default)]
pub struct CallArgs {
    pub args: Vec<Value>,
    pub kwargs: Vec<(String, Value)>,
}

impl CallArgs {
    /// The argument at `position`, else the keyword `name` (`None` when neither is given or it
    /// is `None`).
    pub fn get(&self, position: usize, name: &str) -> Option<&Value> {
        self.args
            .get(position)
            .or_else(|| self.kwarg(name))
            .filter(|v| !matches!(v, Value::None))
    }

    /// The keyword argument `name` only.
    pub fn kwarg(&self, name: &str) -> Option<&Value> {
        self.kwargs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .filter(|v| !matches!(v, Value::None))
    }

    /// The loaded tensor at `position` (or keyword `name`), an error naming it otherwise.
    pub fn tensor(&self, position: usize, name: &str) -> Result<&ArrayD<f64>> {
        let v = self
            .get(position, name)
            .ok_or_else(|| ReplayError::args(format!("argument {name} is missing")))?;
        tensor_of(v, name)
    }

    /// The optional tensor at `position`/`name`.
    pub fn opt_tensor(&self, position: usize, name: &str) -> Result<Option<&ArrayD<f64>>> {
        match self.get(position, name) {
            None => Ok(None),
            Some(v) => tensor_of(v, name).map(Some),
        }
    }

    /// A number, `default` when absent.
    pub fn f64_or(&self, position: usize, name: &str, default: f64) -> Result<f64> {
        match self.get(position, name) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| ReplayError::args(format!("argument {name} is not a number"))),
        }
    }

    /// An int or list of ints, `None` when absent.
    pub fn ints(&self, position: usize, name: &str) -> Result<Option<Vec<i64>>> {
        match self.get(position, name) {
            None => Ok(None),
            Some(v) => v.as_ints().map(Some).ok_or_else(|| {
                ReplayError::args(format!("argument {name} is not an int or list of ints"))
            }),
        }
    }

    /// A bool, `default` when absent.
    pub fn bool_or(&self, position: usize, name: &str, default: bool) -> Result<bool> {
        match self.get(position, name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::Int(i)) => Ok(*i != 0),
            Some(_) => Err(ReplayError::args(format!("argument {name} is not a bool"))),
        }
    }

    /// A string, `None` when absent.
    pub fn str(&self, position: usize, name: &str) -> Option<&str> {
        match self.get(position, name) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// Every tensor of the call (positional, then keyword).
    pub fn all_tensors(&self) -> Vec<&TensorValue> {
        self.args
            .iter()
            .chain(self.kwargs.iter().map(|(_, v)| v))
            .flat_map(Value::tensors)
            .collect()
    }

    /// Every tensor of the call, mutably.
    pub fn all_tensors_mut(&mut self) -> Vec<&mut TensorValue> {
        self.args
            .iter_mut()
            .chain(self.kwargs.iter_mut().map(|(_, v)| v))
            .flat_map(Value::tensors_mut)
            .collect()
    }
}

fn tensor_of<'a>(v: &'a Value, name: &str) -> Result<&'a ArrayD<f64>> {
    match v {
        Value::Tensor(t) => t
            .data
            .as_ref()
            .ok_or_else(|| ReplayError::args(format!("tensor {name} is not loaded"))),
        _ => Err(ReplayError::args(format!(
            "argument {name} is not a tensor"
        ))),
    }
}

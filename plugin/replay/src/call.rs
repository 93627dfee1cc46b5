//! One call of a tensor dump: its `dump.json` entry read into arguments and outputs, its
//! tensors loaded from the dump's `dump_tensor_data` folder.

use std::path::{Path, PathBuf};

use graph_ascend_dump::tensor::Tensor;
use graph_ascend_dump::Confine;
use ndarray::{ArrayD, IxDyn};

use crate::args::{CallArgs, TensorValue, Value};
use crate::error::{ReplayError, Result};

/// Forward or backward record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Forward,
    Backward,
}

/// A call's name taken apart: `Functional.linear.0.forward` → prefix `Functional`, api
/// `linear`, index `0`, forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallName {
    pub full: String,
    pub prefix: String,
    pub api: String,
    pub direction: Direction,
    /// `Module.…` / `Cell.…` records (a module's own inputs and outputs, not an API call).
    pub is_module: bool,
}

impl CallName {
    pub fn parse(full: &str) -> Option<CallName> {
        let parts: Vec<&str> = full.split('.').collect();
        let is_module = matches!(parts.first(), Some(&"Module") | Some(&"Cell"));
        let direction = if parts.contains(&"backward") {
            Direction::Backward
        } else if parts.contains(&"forward") {
            Direction::Forward
        } else {
            return None;
        };
        if is_module {
            return Some(CallName {
                full: full.to_string(),
                prefix: parts[0].to_string(),
                api: String::new(),
                direction,
                is_module,
            });
        }
        // prefix . api(.overload)? . index . direction
        if parts.len() < 4 {
            return None;
        }
        let middle = &parts[1..parts.len() - 2];
        let api = match middle {
            [.., api, overload] if *overload == "default" || overload.starts_with("Tensor") => api,
            [.., api] => api,
            [] => return None,
        };
        Some(CallName {
            full: full.to_string(),
            prefix: parts[0].to_string(),
            api: api.to_string(),
            direction,
            is_module,
        })
    }
}

/// A forward call: its inputs and outputs as recorded.
#[derive(Debug, Clone)]
pub struct Call {
    pub name: CallName,
    pub inputs: CallArgs,
    /// The outputs, flattened (a tuple output's items in order).
    pub outputs: Vec<Value>,
}

/// Why a call's tensors could not all be loaded (reported as the reason it is not replayed).
#[derive(Debug, Clone, PartialEq)]
pub enum Missing {
    /// A tensor the dump recorded statistics of only (no `data_name`).
    NotDumped(String),
    /// The file named by `data_name` is not in the folder.
    NotFound(PathBuf),
}

fn flatten_outputs(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::List(items) => items.iter().for_each(|i| flatten_outputs(i, out)),
        other => out.push(other.clone()),
    }
}

impl Call {
    /// Reads a forward entry (`input_args`, `input_kwargs`, `output`).
    pub fn from_entry(name: CallName, entry: &serde_json::Value) -> Result<Call> {
        let obj = entry.as_object().ok_or_else(|| ReplayError::Entry {
            name: name.full.clone(),
            message: "the entry is not a JSON object".into(),
        })?;
        let args = match obj.get("input_args") {
            Some(serde_json::Value::Array(a)) => a.iter().map(Value::from_json).collect(),
            Some(serde_json::Value::Null) | None => Vec::new(),
            Some(_) => {
                return Err(ReplayError::Entry {
                    name: name.full.clone(),
                    message: "input_args is not a list".into(),
                })
            }
        };
        let kwargs = match obj.get("input_kwargs") {
            Some(serde_json::Value::Object(m)) => m
                .iter()
                .map(|(k, v)| (k.clone(), Value::from_json(v)))
                .collect(),
            _ => Vec::new(),
        };
        let mut outputs = Vec::new();
        if let Some(o) = obj.get("output") {
            flatten_outputs(&Value::from_json(o), &mut outputs);
        }
        Ok(Call {
            name,
            inputs: CallArgs { args, kwargs },
            outputs,
        })
    }

    /// Loads every tensor of the call from `dir`. `Ok(Err(missing))` when one is not there.
    pub fn load(
        &mut self,
        dir: &Path,
        confine: &Confine,
    ) -> Result<std::result::Result<(), Missing>> {
        let mut all: Vec<&mut TensorValue> = self.inputs.all_tensors_mut();
        for o in self.outputs.iter_mut() {
            all.extend(o.tensors_mut());
        }
        for t in all {
            let Some(data_name) = t.data_name.clone() else {
                return Ok(Err(Missing::NotDumped(t.dtype_name.clone())));
            };
            let path = dir.join(&data_name);
            if !path.is_file() {
                return Ok(Err(Missing::NotFound(dir.to_path_buf())));
            }
            let tensor = Tensor::read(&path, confine)?;
            let shape = if tensor.shape.iter().product::<usize>() == tensor.data.len() {
                tensor.shape.clone()
            } else {
                return Err(ReplayError::Entry {
                    name: data_name,
                    message: format!(
                        "the file holds {} values for shape {:?}",
                        tensor.data.len(),
                        tensor.shape
                    ),
                });
            };
            let array = ArrayD::from_shape_vec(IxDyn(&shape), tensor.data).map_err(|e| {
                ReplayError::Entry {
                    name: data_name.clone(),
                    message: e.to_string(),
                }
            })?;
            t.data = Some(array);
        }
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::{CallName, Direction};

    #[test]
    fn names_parse() {
        let n = CallName::parse("Tensor.__add__.3.forward").unwrap();
        assert_eq!((n.prefix.as_str(), n.api.as_str()), ("Tensor", "__add__"));
        assert_eq!(n.direction, Direction::Forward);
        let n = CallName::parse("Aten.mm.default.0.forward").unwrap();
        assert_eq!(n.api, "mm");
        let n = CallName::parse("Module.layers.0.Block.forward.0").unwrap();
        assert!(n.is_module);
        assert_eq!(
            CallName::parse("Functional.linear.1.backward")
                .unwrap()
                .direction,
            Direction::Backward
        );
    }
}

//! The precision of a manually matched pair, computed by the converter's own comparison.
//!
//! msprobe's plugin hands the two nodes' stored data to msprobe's compare code. Here the same
//! job is done by `graph_ascend_convert::compare` (its metrics and its checkers' `grade`), so a
//! pair matched by hand gets exactly the columns and `precision_index` a conversion would have
//! given it. This module is only the adapter: it turns the stored JSON (every statistic is text
//! in a `.vis.db`) back into the dump items the engine compares ([`compare::compare_items`]
//! pairs them and grades the pair), and turns the engine's result columns back into JSON.

use graph_ascend_convert::compare::{self, metrics, CompareMode, Extra, ItemsRef};
use graph_ascend_convert::ConvertError;
use graph_ascend_dump::{Item, PyVal, COMPARE_COLUMNS};
use serde_json::{Map, Value};

/// The statistics stored as text that the comparison needs as numbers.
const NUMERIC_KEYS: [&str; 4] = ["Max", "Min", "Mean", "Norm"];

/// One side of a pair: its node name and stored input and output data.
pub struct NodeData<'a> {
    pub name: &'a str,
    pub input: &'a Value,
    pub output: &'a Value,
}

/// The outcome for the target node.
pub struct PairResult {
    /// 0 (pass), 0.5 (warning) or 1 (error).
    pub precision_index: f64,
    /// The target's input and output data with the comparison columns (summary and tensor
    /// modes; md5 leaves the data as it is).
    pub input: Value,
    pub output: Value,
}

/// A stored value as the dump had it: numeric statistics back to numbers.
fn stored_to_pyval(key: &str, v: &Value) -> PyVal {
    match v {
        Value::String(s) if NUMERIC_KEYS.contains(&key) => {
            let t = s.trim();
            if let Ok(i) = t.parse::<i64>() {
                PyVal::Int(i)
            } else if let Ok(f) = t.parse::<f64>() {
                PyVal::Float(f)
            } else if t == "null" || t == "None" {
                PyVal::None
            } else {
                PyVal::Str(s.clone())
            }
        }
        other => PyVal::from_json(other),
    }
}

/// The items of a stored `input_data`/`output_data` object, in stored order, without earlier
/// comparison columns.
fn items(data: &Value) -> Vec<(String, Item)> {
    let Value::Object(slots) = data else {
        return Vec::new();
    };
    slots
        .iter()
        .map(|(name, fields)| {
            let fields = match fields {
                Value::Object(map) => map
                    .iter()
                    .filter(|(k, _)| !COMPARE_COLUMNS.contains(&k.as_str()))
                    .map(|(k, v)| (graph_ascend_dump::field_name(k), stored_to_pyval(k, v)))
                    .collect(),
                other => vec![("value".into(), PyVal::from_json(other))],
            };
            (name.clone(), Item { fields })
        })
        .collect()
}

/// A result column as msprobe's plugin stores it: numbers as numbers, the rest as text.
fn pyval_to_stored(v: &PyVal) -> Value {
    match v {
        PyVal::Int(i) => Value::from(*i),
        PyVal::Float(f) if f.is_finite() => Value::from(*f),
        PyVal::Float(f) if f.is_nan() => Value::String("NaN".into()),
        PyVal::Float(f) if *f > 0.0 => Value::String("Infinity".into()),
        PyVal::Float(_) => Value::String("-Infinity".into()),
        PyVal::None => Value::Null,
        other => Value::String(other.py_str()),
    }
}

/// `data` with every comparison column removed from every item (an unmatch).
pub fn strip_compare_columns(data: &Value) -> Value {
    let Value::Object(slots) = data else {
        return data.clone();
    };
    Value::Object(
        slots
            .iter()
            .map(|(name, fields)| {
                let fields = match fields {
                    Value::Object(map) => Value::Object(
                        map.iter()
                            .filter(|(k, _)| !COMPARE_COLUMNS.contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    ),
                    other => other.clone(),
                };
                (name.clone(), fields)
            })
            .collect(),
    )
}

/// Compares a matched pair as the converter compares one ([`compare::compare_items`]): the
/// target's data with the mode's columns added, and its `precision_index`.
pub fn compare_pair(
    mode: CompareMode,
    npu: &NodeData,
    bench: &NodeData,
    tensors: Option<&metrics::TensorDirs>,
) -> Result<PairResult, ConvertError> {
    let (n_in, n_out) = (items(npu.input), items(npu.output));
    let (b_in, b_out) = (items(bench.input), items(bench.output));
    let (in_extra, out_extra, p) = compare::compare_items(
        mode,
        ItemsRef {
            id: npu.name,
            input: &n_in,
            output: &n_out,
        },
        ItemsRef {
            id: bench.name,
            input: &b_in,
            output: &b_out,
        },
        tensors,
    )?;
    let merge = |data: &Value, extras: &[Extra]| -> Value {
        if mode == CompareMode::Md5 {
            return data.clone();
        }
        let base = strip_compare_columns(data);
        let Value::Object(slots) = base else {
            return base;
        };
        let mut out = Map::new();
        for (i, (name, fields)) in slots.into_iter().enumerate() {
            let fields = match (fields, extras.get(i)) {
                (Value::Object(mut map), Some(extra)) => {
                    for (k, v) in extra {
                        map.insert(k.to_string(), pyval_to_stored(v));
                    }
                    Value::Object(map)
                }
                (other, _) => other,
            };
            out.insert(name, fields);
        }
        Value::Object(out)
    };
    Ok(PairResult {
        precision_index: p,
        input: merge(npu.input, &in_extra),
        output: merge(npu.output, &out_extra),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summary_columns_come_from_stored_text() {
        let npu_out = json!({"A.add.0.forward.output.0": {"dtype": "torch.float32", "shape": "[2]",
            "Max": "2.0", "Min": "1.0", "Mean": "1.5", "Norm": "3.0", "requires_grad": "False"}});
        let bench_out = json!({"A.add.0.forward.output.0": {"dtype": "torch.float32", "shape": "[2]",
            "Max": "1.0", "Min": "1.0", "Mean": "1.0", "Norm": "2.0", "requires_grad": "False"}});
        let empty = json!({});
        let r = compare_pair(
            CompareMode::Summary,
            &NodeData {
                name: "A.add.0.forward",
                input: &empty,
                output: &npu_out,
            },
            &NodeData {
                name: "A.add.0.forward",
                input: &empty,
                output: &bench_out,
            },
            None,
        )
        .expect("compare");
        let item = &r.output["A.add.0.forward.output.0"];
        assert_eq!(item["Max diff"], json!(1.0));
        assert_eq!(item["MaxRelativeErr"], json!("100.0%"));
        assert_eq!(item["Requires_grad Consistent"], json!("True"));
        // Output norm error 50% with no inputs: the relative-error warning rule fires.
        assert_eq!(r.precision_index, 0.5);
        // Unmatching removes every added column again.
        assert_eq!(strip_compare_columns(&r.output), npu_out);
    }

    #[test]
    fn a_dtype_mismatch_is_an_error() {
        let n = json!({"A.mul.0.forward.output.0": {"dtype": "torch.float16", "shape": "[2]",
            "Max": "1", "Min": "1", "Mean": "1", "Norm": "1"}});
        let b = json!({"A.mul.0.forward.output.0": {"dtype": "torch.float32", "shape": "[2]",
            "Max": "1", "Min": "1", "Mean": "1", "Norm": "1"}});
        let empty = json!({});
        let r = compare_pair(
            CompareMode::Summary,
            &NodeData {
                name: "A.mul.0.forward",
                input: &empty,
                output: &n,
            },
            &NodeData {
                name: "A.mul.0.forward",
                input: &empty,
                output: &b,
            },
            None,
        )
        .expect("compare");
        assert_eq!(r.precision_index, 1.0);
        assert_eq!(
            r.output["A.mul.0.forward.output.0"]["Result"],
            json!("error")
        );
    }
}

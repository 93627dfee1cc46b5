//! Overflow levels (`-oc`): msprobe's anomaly scenes over the raw dump entries.
//!
//! A tensor is anomalous when its Max, Min or Mean is inf/-inf/nan. In order, the first scene
//! that applies wins: normal inputs with anomalous outputs → `critical`; anomalous inputs and
//! outputs → `high`; anomalous inputs with normal outputs → `medium`; output norm more than 100×
//! the input norm → `high`.

use graph_ascend_dump::PyVal;
use serde_json::Value;

fn anomalous(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.iter().any(anomalous),
        Value::Object(m) if m.get("type").is_some_and(Value::is_string) => ["Max", "Min", "Mean"]
            .iter()
            .any(|k| m.get(*k).is_some_and(is_inf_nan)),
        Value::Object(m) => m.values().any(anomalous),
        _ => false,
    }
}

fn is_inf_nan(v: &Value) -> bool {
    let s = PyVal::from_json(v).py_str().to_lowercase();
    matches!(s.as_str(), "inf" | "-inf" | "nan")
}

fn norms(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| norms(x, out)),
        Value::Object(m) if m.get("type").is_some_and(Value::is_string) => {
            let tensor = m.get("type").and_then(Value::as_str) == Some("torch.Tensor");
            let norm = m
                .get("Norm")
                .map(PyVal::from_json)
                .and_then(|p| p.as_number());
            if let (true, Some(n)) = (tensor, norm) {
                if !n.is_nan() {
                    out.push(n);
                }
            }
        }
        Value::Object(m) => m.values().for_each(|x| norms(x, out)),
        _ => {}
    }
}

/// The overflow level of one dump entry.
pub fn level_of(entry: &Value) -> Option<&'static str> {
    let Value::Object(e) = entry else {
        return None;
    };
    let inputs: Vec<&Value> = ["input_args", "input", "input_kwargs"]
        .iter()
        .filter(|k| **k != "input" || !e.contains_key("input_args"))
        .filter_map(|k| e.get(*k))
        .collect();
    let outputs: Vec<&Value> = e.get("output").into_iter().collect();
    let in_bad = inputs.iter().any(|v| anomalous(v));
    let out_bad = outputs.iter().any(|v| anomalous(v));
    match (in_bad, out_bad) {
        (false, true) => return Some("critical"),
        (true, true) => return Some("high"),
        (true, false) => return Some("medium"),
        _ => {}
    }
    let (mut i, mut o) = (Vec::new(), Vec::new());
    inputs.iter().for_each(|v| norms(v, &mut i));
    outputs.iter().for_each(|v| norms(v, &mut o));
    if i.is_empty() || o.is_empty() {
        return None;
    }
    let max_in = i.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let max_out = o.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mutation = if max_in == 0.0 {
        max_out > 100.0
    } else {
        max_out / max_in > 100.0
    };
    mutation.then_some("high")
}

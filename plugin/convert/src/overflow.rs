//! Overflow levels (`-oc`): msprobe's anomaly scenes over the raw dump entries
//! (`core/overflow_check`).
//!
//! An item is anomalous when it is a dict whose own `Max`, `Min` or `Mean` prints as
//! inf/-inf/nan; a list is anomalous when one of its elements is (dicts are not searched
//! further). Inputs are the elements of `input_args` (or `input`) and the values of
//! `input_kwargs`; outputs the elements of `output`. In order, the first scene that applies
//! wins: normal inputs with anomalous outputs → `critical`; anomalous inputs and outputs →
//! `high`; anomalous inputs with normal outputs → `medium`; the largest output norm more than
//! 100× the largest input norm → `high`. Only top-level `torch.Tensor` items count for norms,
//! not tensors inside nested tuples.
//!
//! Then msprobe's ignore rules (`ignore_rules.yaml`) drop every scene of a listed API (named by
//! the first two parts of the dump key, lowercased: `Torch.empty.1.forward` → `torch.empty`)
//! unless a listed side holds an anomalous item at a position or name the rule does not list.
//! So a numerical-mutation scene of `torch.empty` is always dropped.

use graph_ascend_dump::PyVal;
use serde_json::{Map, Value};

/// One entry of msprobe's `ignore_rules.yaml`: the API, and the input indices, input keyword
/// names and output indices whose NaN/Inf is expected.
struct IgnoreRule {
    api: &'static str,
    input_index: &'static [usize],
    input_name: &'static [&'static str],
    output_index: &'static [usize],
}

const IGNORE_RULES: [IgnoreRule; 10] = [
    IgnoreRule {
        api: "torch.empty",
        input_index: &[],
        input_name: &[],
        output_index: &[0],
    },
    IgnoreRule {
        api: "torch.empty_like",
        input_index: &[],
        input_name: &[],
        output_index: &[0],
    },
    IgnoreRule {
        api: "torch.empty_strided",
        input_index: &[],
        input_name: &[],
        output_index: &[0],
    },
    IgnoreRule {
        api: "distributed.recv",
        input_index: &[0],
        input_name: &["tensor"],
        output_index: &[],
    },
    IgnoreRule {
        api: "distributed.all_gather",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    IgnoreRule {
        api: "distributed.reduce_scatter",
        input_index: &[0],
        input_name: &["output"],
        output_index: &[],
    },
    IgnoreRule {
        api: "distributed._reduce_scatter_base",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    IgnoreRule {
        api: "distributed.all_gather_into_tensor",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    IgnoreRule {
        api: "distributed.reduce_scatter_tensor",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
    IgnoreRule {
        api: "tensor.masked_fill_",
        input_index: &[0],
        input_name: &[],
        output_index: &[],
    },
];

/// `has_nan_inf`: a dict's own Max/Min/Mean.
fn has_nan_inf(v: &Value) -> bool {
    let Value::Object(m) = v else {
        return false;
    };
    ["Max", "Min", "Mean"].iter().any(|k| {
        m.get(*k).is_some_and(|x| {
            let s = PyVal::from_json(x).py_str().to_lowercase();
            matches!(s.as_str(), "inf" | "-inf" | "nan")
        })
    })
}

/// `_has_anomaly`: a dict by its own fields, a list by any element (iteratively, no depth limit).
fn anomalous(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(_) if has_nan_inf(v) => return true,
            Value::Array(a) => stack.extend(a.iter()),
            _ => {}
        }
    }
    false
}

/// The elements Python's `for x in value` visits for a list; a dict yields its keys (texts,
/// never anomalous) and is treated as empty, as is anything else.
fn elements(v: Option<&Value>) -> &[Value] {
    match v {
        Some(Value::Array(a)) => a,
        _ => &[],
    }
}

/// The norms of the top-level `torch.Tensor` items (`_get_tensor_norms`), NaN skipped.
fn norms<'a>(items: impl Iterator<Item = &'a Value>) -> Vec<f64> {
    items
        .filter_map(|v| match v {
            Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("torch.Tensor") => {
                PyVal::from_json(m.get("Norm")?).as_number()
            }
            _ => None,
        })
        .filter(|n| !n.is_nan())
        .collect()
}

/// msprobe's overflow levels, the only answers of [`level_of`].
pub const LEVEL_MEDIUM: &str = "medium";
pub const LEVEL_HIGH: &str = "high";
pub const LEVEL_CRITICAL: &str = "critical";

/// The overflow level of dump entry `name`, after msprobe's ignore rules.
pub fn level_of(name: &str, entry: &Value) -> Option<&'static str> {
    let Value::Object(e) = entry else {
        return None;
    };
    let args = elements(e.get("input_args").or_else(|| e.get("input")));
    let empty = Map::new();
    let kwargs = match e.get("input_kwargs") {
        Some(Value::Object(m)) => m,
        _ => &empty,
    };
    let outputs = elements(e.get("output"));
    let in_bad = args.iter().any(anomalous) || kwargs.values().any(anomalous);
    let out_bad = outputs.iter().any(anomalous);
    let level = match (in_bad, out_bad) {
        (false, true) => LEVEL_CRITICAL,
        (true, true) => LEVEL_HIGH,
        (true, false) => LEVEL_MEDIUM,
        (false, false) => {
            let i = norms(args.iter().chain(kwargs.values()));
            let o = norms(outputs.iter());
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
            if !mutation {
                return None;
            }
            LEVEL_HIGH
        }
    };
    if ignored(name, args, kwargs, outputs) {
        return None;
    }
    Some(level)
}

/// `IgnoreFilter.apply_filter`: whether a scene of `name` is dropped as expected.
fn ignored(name: &str, args: &[Value], kwargs: &Map<String, Value>, outputs: &[Value]) -> bool {
    let api = name
        .split('.')
        .take(2)
        .collect::<Vec<_>>()
        .join(".")
        .to_lowercase();
    let Some(rule) = IGNORE_RULES.iter().find(|r| r.api == api) else {
        return false;
    };
    let unlisted_args = !rule.input_index.is_empty()
        && args
            .iter()
            .enumerate()
            .any(|(i, a)| anomalous(a) && !rule.input_index.contains(&i));
    let unlisted_kwargs = !rule.input_name.is_empty()
        && kwargs
            .iter()
            .any(|(k, v)| anomalous(v) && !rule.input_name.contains(&k.as_str()));
    let unlisted_outputs = !rule.output_index.is_empty()
        && outputs
            .iter()
            .enumerate()
            .any(|(i, o)| anomalous(o) && !rule.output_index.contains(&i));
    !(unlisted_args || unlisted_kwargs || unlisted_outputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(norm: f64) -> Value {
        json!({"type": "torch.Tensor", "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": norm})
    }

    #[test]
    fn nested_tensors_do_not_count_for_norms() {
        // FINDINGS.md rule 11: the tuple's tensors are not inputs of the mutation scene.
        let e = json!({"input_args": [[t(0.0068), t(-0.0026)]], "output": [t(2.0)]});
        assert_eq!(level_of("Tensor.reshape.0.forward", &e), None);
        let e = json!({"input_args": [t(0.0068)], "output": [t(2.0)]});
        assert_eq!(level_of("Tensor.reshape.0.forward", &e), Some("high"));
    }

    #[test]
    fn ignore_rules_drop_every_scene_of_their_api() {
        // FINDINGS.md rule 12: torch.empty lists output 0, so a mutation is dropped too.
        let e = json!({"input_args": [t(0.0086)], "output": [t(43.4)]});
        assert_eq!(level_of("Torch.empty.1.backward", &e), None);
        assert_eq!(level_of("Mint.empty.1.backward", &e), Some("high"));
        // NaN at an output index the rule does not list: kept.
        let nan =
            json!({"type": "torch.Tensor", "Max": "NaN", "Min": 0.0, "Mean": 0.5, "Norm": 1.0});
        let e = json!({"input_args": [t(1.0)], "output": [t(1.0), nan.clone()]});
        assert_eq!(level_of("Torch.empty.0.forward", &e), Some("critical"));
        let e = json!({"input_args": [t(1.0)], "output": [nan]});
        assert_eq!(level_of("Torch.empty.0.forward", &e), None);
    }
}

//! Every supported op against its oracle rows: torch on the CPU at float64 (and msprobe's
//! `bench_functions/` for the NPU-only ops), written by `tests/replay/make_op_oracle.py`.

use graph_ascend_replay::args::{CallArgs, Value};
use graph_ascend_replay::ops::{self, Context};
use ndarray::{ArrayD, IxDyn};
use serde_json::Value as J;

/// Every tensor's inline values in the order `Value::tensors` visits them (depth first).
fn inline_values(v: &J, out: &mut Vec<ArrayD<f64>>) {
    match v {
        J::Array(items) => items.iter().for_each(|i| inline_values(i, out)),
        J::Object(m) if m.contains_key("values") => {
            let shape: Vec<usize> = m["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            let values: Vec<f64> = m["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    x.as_f64()
                        .or_else(|| x.as_bool().map(|b| f64::from(u8::from(b))))
                        .unwrap()
                })
                .collect();
            out.push(ArrayD::from_shape_vec(IxDyn(&shape), values).unwrap());
        }
        _ => {}
    }
}

fn loaded(record: &J) -> Value {
    let mut v = Value::from_json(record);
    let mut arrays = Vec::new();
    inline_values(record, &mut arrays);
    for (t, a) in v.tensors_mut().into_iter().zip(arrays) {
        t.data = Some(a);
    }
    v
}

#[test]
fn every_op_matches_torch_at_f64() {
    let text = include_str!("oracle/ops.json");
    let doc: J = serde_json::from_str(text).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 70);
    let mut failures = Vec::new();
    for case in cases {
        let api = case["api"].as_str().unwrap();
        let label = format!("{api} {}", case["note"].as_str().unwrap_or(""));
        let rtol = case["rtol"].as_f64().unwrap();
        let args = CallArgs {
            args: case["input_args"]
                .as_array()
                .unwrap()
                .iter()
                .map(loaded)
                .collect(),
            kwargs: case["input_kwargs"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), loaded(v)))
                .collect(),
        };
        let refs = match ops::replay(api, &args, Context::default()) {
            None => {
                failures.push(format!("{label}: no reference"));
                continue;
            }
            Some(Err(e)) => {
                failures.push(format!("{label}: {e}"));
                continue;
            }
            Some(Ok(r)) => r,
        };
        for (i, out) in case["output"].as_array().unwrap().iter().enumerate() {
            let expected = loaded(out);
            let Some(expected) = expected.as_tensor().and_then(|t| t.data.clone()) else {
                continue;
            };
            if out["dtype"] == "torch.int64" {
                continue; // indices are not judged
            }
            let Some(r) = refs.get(i) else {
                failures.push(format!("{label}: output {i} missing"));
                continue;
            };
            if r.exact.shape() != expected.shape() {
                failures.push(format!(
                    "{label}: output {i} shape {:?}, torch {:?}",
                    r.exact.shape(),
                    expected.shape()
                ));
                continue;
            }
            for (j, (&a, &b)) in r.exact.iter().zip(expected.iter()).enumerate() {
                let tol = rtol * (1.0 + b.abs());
                if !((a - b).abs() <= tol || (a.is_nan() && b.is_nan())) {
                    failures.push(format!("{label}: output {i}[{j}] = {a}, torch {b}"));
                    break;
                }
            }
            // The budget's scale is a magnitude: finite and non-negative.
            assert!(
                r.scale.iter().all(|s| *s >= 0.0 && s.is_finite()),
                "{label}: scale"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} ops differ from torch:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// docs/replay.md's table names every op of `ops::OPS`.
#[test]
fn the_docs_list_every_op() {
    let docs = include_str!("../../../docs/replay.md");
    let missing: Vec<&str> = ops::OPS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !docs.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/replay.md does not name {missing:?}"
    );
}

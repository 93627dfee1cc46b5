//! Every supported op against its oracle rows: torch on the CPU at float64 (and msprobe's
//! `bench_functions/` for the NPU-only ops), written by `tests/replay/make_op_oracle.py`.

use graph_ascend_replay::args::{CallArgs, Value};
use graph_ascend_replay::ops::{self, Context};
use ndarray::{ArrayD, IxDyn};
use serde_json::Value as J;

/// One inline value (a number or a bool).
fn number(x: &J) -> f64 {
    x.as_f64()
        .or_else(|| x.as_bool().map(|b| f64::from(u8::from(b))))
        .unwrap()
}

/// Every tensor's inline values (`values`, or `runs` of `[value, count]` for large masks) in
/// the order `Value::tensors` visits them (depth first).
fn inline_values(v: &J, out: &mut Vec<ArrayD<f64>>) {
    match v {
        J::Array(items) => items.iter().for_each(|i| inline_values(i, out)),
        J::Object(m) if m.contains_key("values") || m.contains_key("runs") => {
            let shape: Vec<usize> = m["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            let values: Vec<f64> = match m.get("values") {
                Some(values) => values.as_array().unwrap().iter().map(number).collect(),
                None => m["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|run| {
                        let count = run[1].as_u64().unwrap() as usize;
                        std::iter::repeat_n(number(&run[0]), count)
                    })
                    .collect(),
            };
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

fn tensor_of(shape: &[usize]) -> Value {
    let n = shape.iter().product();
    Value::Tensor(graph_ascend_replay::args::TensorValue {
        dtype_name: "torch.float32".into(),
        dtype: graph_ascend_replay::Dtype::parse("torch.float32"),
        shape: shape.to_vec(),
        data_name: None,
        data: Some(
            ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| i as f64 * 0.01).collect())
                .unwrap(),
        ),
    })
}

/// TND, dropout (`keep_prob < 1`, `dropout_p > 0`) and sparse_mode 5+ are not replayed, each
/// with its reason.
#[test]
fn attention_calls_not_replayed_say_why() {
    let qkv = |layout: &str| CallArgs {
        args: vec![
            tensor_of(&[6, 2, 4]),
            tensor_of(&[6, 2, 4]),
            tensor_of(&[6, 2, 4]),
            Value::Int(2),
            Value::Str(layout.into()),
        ],
        kwargs: Vec::new(),
    };
    let err = ops::replay("npu_fusion_attention", &qkv("TND"), Context::default())
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(err.contains("TND") && err.contains("msprobe"), "{err}");
    let mut dropout = qkv("BSH");
    dropout.kwargs.push(("keep_prob".into(), Value::Float(0.9)));
    let reason = ops::random_reason("npu_fusion_attention", &dropout).unwrap();
    assert!(reason.contains("keep_prob=0.9"), "{reason}");
    let mut sparse = qkv("BSH");
    sparse.kwargs.push(("sparse_mode".into(), Value::Int(6)));
    let err = ops::replay("npu_fusion_attention", &sparse, Context::default())
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(err.contains("sparse_mode 6"), "{err}");
    let mut sdpa = qkv("BSH");
    sdpa.args.truncate(3);
    sdpa.args.push(Value::None);
    sdpa.args.push(Value::Float(0.1));
    let reason = ops::random_reason("scaled_dot_product_attention", &sdpa);
    assert!(reason.is_some_and(|r| r.contains("dropout_p=0.1")));
    assert!(ops::random_reason("npu_fusion_attention", &qkv("BSH")).is_none());
}

/// `torch.batch_norm` puts weight and bias before the running statistics: not read in
/// `torch.nn.functional.batch_norm`'s order, but refused with that reason.
#[test]
fn torch_batch_norm_order_is_refused() {
    let reason = ops::form_reason("Torch", "batch_norm").unwrap();
    assert!(reason.contains("argument order"), "{reason}");
    assert!(ops::form_reason("Functional", "batch_norm").is_none());
    assert!(ops::form_reason("Torch", "layer_norm").is_none());
}

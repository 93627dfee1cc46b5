//! Our msprobe numbers against msprobe's own functions on the same arrays: counts, shares and
//! the stage-1 status exactly, continuous metrics to 1e-9 relative.
//!
//! The frozen slice (`oracle/msprobe_metrics.json`) is written by
//! `tests/replay/msprobe_metrics.py` in the oracle venv; `make test-differential-replay` writes
//! fresh cases and points `GA_REPLAY_METRIC_CASES` at them.

use graph_ascend_replay::msprobe;
use graph_ascend_replay::Dtype;
use serde_json::Value as J;

fn num(v: &J) -> Option<f64> {
    match v {
        J::Null => None,
        J::String(s) if s == "nan" => Some(f64::NAN),
        J::String(s) if s == "inf" => Some(f64::INFINITY),
        J::String(s) if s == "-inf" => Some(f64::NEG_INFINITY),
        J::Number(n) => n.as_f64(),
        other => panic!("not a number: {other}"),
    }
}

fn array(v: &J) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| num(x).unwrap())
        .collect()
}

fn same(ours: Option<f64>, theirs: Option<f64>, rel: f64) -> bool {
    match (ours, theirs) {
        (None, None) => true,
        (Some(a), Some(b)) if a.is_nan() && b.is_nan() => true,
        (Some(a), Some(b)) if a == b => true,
        (Some(a), Some(b)) => (a - b).abs() <= rel * b.abs().max(f64::MIN_POSITIVE),
        _ => false,
    }
}

#[test]
fn numbers_equal_msprobe_functions() {
    let text = match std::env::var("GA_REPLAY_METRIC_CASES") {
        Ok(path) => std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        Err(_) => include_str!("oracle/msprobe_metrics.json").to_string(),
    };
    let doc: J = serde_json::from_str(&text).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let dtype = Dtype::parse(case["dtype"].as_str().unwrap()).unwrap();
        let bench = array(&case["bench"]);
        let device = array(&case["device"]);
        let e = &case["expected"];
        let n = msprobe::numbers(&bench, &device, dtype, true);
        let ulp = n.ulp.clone().unwrap();
        let exact = [
            ("small_value_err_ratio", Some(n.small_value_err_ratio)),
            ("eb", Some(n.error_balance)),
            ("ulp_error_proportion", Some(ulp.share_above_threshold)),
            ("rel_err_hundredth", n.rel_err_hundredth),
            ("rel_err_thousandth", n.rel_err_thousandth),
            ("rel_err_ten_thousandth", n.rel_err_ten_thousandth),
            ("max_abs_err", n.max_abs_err),
        ];
        let continuous = [
            ("cosine", n.cosine),
            ("rmse", Some(n.rmse)),
            ("max_rel_error", Some(n.max_rel_err)),
            ("mean_rel_error", Some(n.mean_rel_err)),
            ("max_ulp_error", Some(ulp.max)),
            ("mean_ulp_error", Some(ulp.mean)),
        ];
        let label = format!(
            "case {i} ({} {}, {} elements)",
            case["dtype"],
            case["kind"],
            bench.len()
        );
        for (key, ours) in exact {
            if !same(ours, num(&e[key]), 0.0) {
                failures.push(format!("{label}: {key} ours {ours:?}, msprobe {}", e[key]));
            }
        }
        for (key, ours) in continuous {
            if !same(ours, num(&e[key]), 1e-9) {
                failures.push(format!("{label}: {key} ours {ours:?}, msprobe {}", e[key]));
            }
        }
        if e["status"].as_str() != Some(n.status) {
            failures.push(format!(
                "{label}: status ours {}, msprobe {}",
                n.status, e["status"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences from msprobe over {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

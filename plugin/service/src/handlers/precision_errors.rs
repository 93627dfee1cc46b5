//! The precision recomputation route, `updatePrecisionError` (`docs/msprobe-api.md`
//! §4); the recomputed indexes are kept in [`crate::precision_overrides`].

use std::collections::HashMap;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::Side;
use serde_json::Value;

use super::reply::{answer, HandlerError, Result, StoreContext};
use super::selection::{lang_of, select};
use crate::messages::Msg;
use crate::state::State;

/// The metrics `updatePrecisionError` may use, by the page's codes.
const ERROR_METRICS: [(&str, &str); 4] = [
    ("0", "MaxRelativeErr"),
    ("1", "MinRelativeErr"),
    ("2", "MeanRelativeErr"),
    ("3", "NormRelativeErr"),
];

/// One metric value as a fraction: `"12.5%"` → 0.125, text after a comma dropped; `None` for
/// values msprobe skips (empty, zero-like falsy, `"N/A"`); `Some(1.0)` for nan/inf markers.
fn metric_value(v: &Value) -> Option<f64> {
    let text = match v {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    if text.is_empty() || text == "N/A" {
        return None;
    }
    if matches!(
        text.to_ascii_lowercase().as_str(),
        "nan" | "inf" | "-inf" | "infinity" | "-infinity"
    ) {
        return Some(1.0);
    }
    let text = text.split(',').next().unwrap_or_default().trim();
    let (body, scale) = match text.strip_suffix('%') {
        Some(b) => (b, 0.01),
        None => (text, 1.0),
    };
    let f = body.parse::<f64>().ok()? * scale;
    if f == 0.0 && matches!(v, Value::Number(_)) {
        return None;
    }
    Some(f)
}

/// `updatePrecisionError`: recomputes the precision index of matched nodes from the chosen
/// error metrics (kept in memory, as msprobe does, see [`crate::precision_overrides`]).
pub fn update_precision_error(
    state: &State,
    req: pb::UpdatePrecisionErrorRequest,
) -> pb::StatusResponse {
    answer(lang_of(req.meta_data.as_ref()), recompute(state, &req))
}

fn recompute(state: &State, req: &pb::UpdatePrecisionErrorRequest) -> Result<pb::StatusResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let keys: Vec<&str> = ERROR_METRICS
        .iter()
        .filter(|(code, _)| req.filter_value.iter().any(|v| v == code))
        .map(|(_, key)| *key)
        .collect();
    if keys.is_empty() {
        return Err(HandlerError::Invalid(Msg::NoUpdateNodesFound));
    }
    let rows = sel
        .file
        .with_store(|s| s.target_outputs(sel.step, sel.rank))
        .context(Msg::UpdateNodeAccuracy)?;
    let mut values = HashMap::new();
    for row in rows {
        let Value::Object(slots) = &row.output_data else {
            continue;
        };
        if !row.matched || slots.is_empty() {
            continue;
        }
        let mut worst: Option<f64> = None;
        for fields in slots.values() {
            for key in &keys {
                if let Some(v) = fields.get(*key).and_then(metric_value) {
                    worst = Some(worst.map_or(v, |w: f64| w.max(v)));
                }
            }
        }
        if let Some(w) = worst {
            values.insert(row.name, w.min(1.0));
        }
    }
    if values.is_empty() {
        return Err(HandlerError::Invalid(Msg::NoUpdateNodesFound));
    }
    for slot in state.views.slots_of(&sel.file.path, "NPU") {
        let mut guard = crate::sync::lock(&slot);
        if let Some(h) = guard.as_mut() {
            if h.graph() == sel.graph(Side::Npu) {
                h.patch_precision(&values);
            }
        }
    }
    state
        .precision_overrides
        .set(&sel.file.path, sel.step, sel.rank, values);
    Ok(pb::StatusResponse {
        success: true,
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_values_are_fractions() {
        assert_eq!(metric_value(&Value::from("12.5%")), Some(0.125));
        assert_eq!(metric_value(&Value::from("N/A")), None);
        assert_eq!(metric_value(&Value::from("inf")), Some(1.0));
        assert_eq!(metric_value(&Value::from("0.5, extra")), Some(0.5));
    }
}

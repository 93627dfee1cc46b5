//! The precision recomputation route, `updatePrecisionError` (`docs/msprobe-api.md`
//! §4), and the recomputed indexes it keeps.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::Side;
use serde_json::Value;

use super::{answer, lang_of, select, HandlerError, Result, StoreContext};
use crate::messages::Msg;
use crate::State;

/// Precision indexes recomputed by `updatePrecisionError`, per file, step and rank.
///
/// msprobe keeps these in memory only (the file keeps the converter's values) and drops them
/// when the root is expanded again; so does this cache. The precision filter reads through it.
#[derive(Default)]
pub struct PrecisionOverrides {
    map: Mutex<OverrideMap>,
}

/// `(file, step, rank)` → node name → recomputed precision index.
type OverrideMap = HashMap<(PathBuf, i64, i64), HashMap<String, f64>>;

impl PrecisionOverrides {
    fn lock(&self) -> std::sync::MutexGuard<'_, OverrideMap> {
        crate::lock(&self.map)
    }

    /// The recomputed index of `name`, if any.
    pub fn get(&self, file: &Path, step: i64, rank: i64) -> Option<HashMap<String, f64>> {
        self.lock().get(&(file.to_owned(), step, rank)).cloned()
    }

    fn set(&self, file: &Path, step: i64, rank: i64, values: HashMap<String, f64>) {
        self.lock().insert((file.to_owned(), step, rank), values);
    }

    /// Forgets a file's recomputed indexes (a root expansion, or an edit of the file).
    pub fn clear(&self, file: &Path) {
        self.lock().retain(|(f, _, _), _| f != file);
    }
}

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
/// error metrics (kept in memory, as msprobe does, see [`PrecisionOverrides`]).
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
        let mut guard = crate::lock(&slot);
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

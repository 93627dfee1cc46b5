//! The finding routes: the precision and overflow filters, and name search.

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::Side;
use serde_json::Value;

use super::reply::{answer, HandlerError, Result, StoreContext};
use super::selection::{lang_of, select, Selection};
use crate::messages::Msg;
use crate::state::State;

/// The precision bands of the filter: `lower <= precision_index < upper`.
const PRECISION_BANDS: [(&str, f64, f64); 3] = [
    ("pass", 0.0, 0.3),
    ("warning", 0.3, 0.6),
    ("error", 0.6, 1.1),
];

/// `filterNodes` (and `screen`): the leaves in the chosen precision bands or overflow levels.
pub fn filter_nodes(state: &State, req: pb::FilterNodesRequest) -> pb::FilterNodesResponse {
    answer(lang_of(req.meta_data.as_ref()), filter(state, &req))
}

fn filter(state: &State, req: &pb::FilterNodesRequest) -> Result<pb::FilterNodesResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let values: Vec<Value> = req
        .values
        .as_ref()
        .map(|l| l.values.iter().map(crate::values::prost_to_json).collect())
        .unwrap_or_default();
    let data = match req.r#type.as_str() {
        "precision" => precision_hits(state, &sel, &values)?,
        "overflow" => overflow_hits(&sel, &values)?,
        _ => return Err(HandlerError::Invalid(Msg::SearchType)),
    };
    Ok(pb::FilterNodesResponse {
        success: true,
        error: None,
        data,
    })
}

/// The matched leaves whose precision is in one of the bands named in `values`, and the
/// unmatched ones (all of them when `values` holds -1, else those with a precision in a band).
fn precision_hits(state: &State, sel: &Selection, values: &[Value]) -> Result<Vec<pb::FilterHit>> {
    let want_unmatched = values
        .iter()
        .any(|v| v.as_f64() == Some(-1.0) || v.as_str() == Some("-1"));
    let bands: Vec<_> = PRECISION_BANDS
        .iter()
        .filter(|(name, _, _)| values.iter().any(|v| v.as_str() == Some(name)))
        .collect();
    let index = sel
        .file
        .index(sel.graph(Side::Npu))
        .context(Msg::SearchNode)?;
    // Indexes recomputed by updatePrecisionError win until the next root view.
    let over = state
        .precision_overrides
        .get(&sel.file.path, sel.step, sel.rank);
    Ok(index
        .leaves(sel.micro_step)
        .filter_map(|leaf| {
            let precision = over
                .as_ref()
                .and_then(|o| o.get(leaf.name).copied())
                .or(leaf.precision_index);
            let band = precision.and_then(|p| bands.iter().find(|(_, lo, hi)| *lo <= p && p < *hi));
            let status = match (leaf.matched, band) {
                (false, _) if want_unmatched => "unmatched",
                (false, Some(_)) => "unmatched",
                (true, Some((name, _, _))) => name,
                _ => return None,
            };
            Some(pb::FilterHit {
                name: leaf.name.to_owned(),
                status: status.to_owned(),
            })
        })
        .collect())
}

/// The leaves whose overflow level is one of the levels in `values`.
fn overflow_hits(sel: &Selection, values: &[Value]) -> Result<Vec<pb::FilterHit>> {
    let levels: Vec<String> = values
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    Ok(sel
        .file
        .with_store(|s| s.leaf_overflows(sel.step, sel.rank, sel.micro_step, &levels))
        .context(Msg::SearchNode)?
        .into_iter()
        .map(|(name, status)| pb::FilterHit { name, status })
        .collect())
}

/// Default and largest number of names a search returns.
const SEARCH_LIMIT: usize = 1000;

/// `searchNodes` (beyond msprobe): node names of one side containing the query, any case.
pub fn search_nodes(state: &State, req: pb::SearchNodesRequest) -> pb::SearchNodesResponse {
    answer(lang_of(req.meta_data.as_ref()), search(state, &req))
}

fn search(state: &State, req: &pb::SearchNodesRequest) -> Result<pb::SearchNodesResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let side = if req.graph_type == "Bench" {
        Side::Bench
    } else {
        Side::Npu
    };
    let index = sel.file.index(sel.graph(side)).context(Msg::SearchNode)?;
    let limit = match usize::try_from(req.limit) {
        Ok(0) | Err(_) => SEARCH_LIMIT,
        Ok(n) => n.min(SEARCH_LIMIT * 100),
    };
    let (names, total) = index.search(&req.query, limit, sel.micro_step);
    Ok(pb::SearchNodesResponse {
        success: true,
        error: None,
        data: Some(pb::SearchNodesData {
            names,
            total: i32::try_from(total).unwrap_or(i32::MAX),
        }),
    })
}

//! The navigation routes: node lists, expanding and collapsing, the laid-out hierarchy, and
//! a node's details.

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::{NodeDetailRow, Side};
use graph_ascend_visdb::StoreError;
use serde_json::Value;

use super::reply::{answer, HandlerError, Result, StoreContext};
use super::selection::{lang_of, select, Selection};
use crate::graph_index::CachedRows;
use crate::layout::{Hierarchy, RenderInfo};
use crate::messages::Msg;
use crate::state::State;
use crate::values::{json_to_prost, json_to_struct};
use crate::views::ViewKey;

/// `loadGraphAllNodeList`: every node name of each graph, in node order.
pub fn load_graph_all_node_list(state: &State, req: pb::MetaRequest) -> pb::NodeListResponse {
    answer(lang_of(req.meta_data.as_ref()), node_lists(state, &req))
}

fn node_lists(state: &State, req: &pb::MetaRequest) -> Result<pb::NodeListResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let compare = sel.is_compare()?;
    let list = |name: &str, side| -> Result<pb::NamedNodeList> {
        let index = sel.file.index(sel.graph(side)).context(Msg::LoadNode)?;
        Ok(pb::NamedNodeList {
            name: name.to_owned(),
            names: index.names(sel.micro_step),
        })
    };
    let mut data = vec![list("npuNodeList", Side::Npu)?];
    if compare {
        data.push(list("benchNodeList", Side::Bench)?);
    }
    Ok(pb::NodeListResponse {
        success: true,
        error: None,
        data,
    })
}

/// The pane a request addresses: its side, its name prefix and its view-state name.
pub(super) fn pane(compare: bool, node_type: &str) -> Option<(Side, &'static str, &'static str)> {
    if !compare {
        return Some((Side::Npu, "", "Single"));
    }
    match node_type {
        "NPU" => Some((Side::Npu, "N___", "NPU")),
        "Bench" => Some((Side::Bench, "B___", "Bench")),
        _ => None,
    }
}

/// `changeNodeExpandState`: expands or collapses a node ("root": lays the graph out anew) of
/// the client's view and answers the visible boxes.
pub fn change_node_expand_state(
    state: &State,
    client: &str,
    req: pb::NodeRequest,
) -> pb::HierarchyResponse {
    answer(lang_of(req.meta_data.as_ref()), expand(state, client, &req))
}

fn expand(state: &State, client: &str, req: &pb::NodeRequest) -> Result<pb::HierarchyResponse> {
    let node = req.node_info.as_ref().ok_or_else(|| {
        HandlerError::Because(Msg::ExpandNode, "the request names no node".into())
    })?;
    let sel = select(state, req.meta_data.as_ref())?;
    let compare = sel.is_compare()?;
    let Some((side, prefix, pane_name)) = pane(compare, &node.node_type) else {
        return Ok(pb::HierarchyResponse {
            success: true,
            ..Default::default()
        });
    };
    let key = ViewKey {
        client: client.to_owned(),
        file: sel.file.path.clone(),
        pane: pane_name.to_owned(),
    };
    let slot = state.views.slot(key.clone());
    let mut guard = crate::sync::lock(&slot);
    let graph = sel.graph(side);
    if node.node_name == "root" {
        state.precision_overrides.clear(&sel.file.path);
    }
    let stale = guard
        .as_ref()
        .is_none_or(|h| h.graph() != graph || h.micro_step() != sel.micro_step);
    let data = sel
        .file
        .with_cached_rows(|store| {
            if node.node_name == "root" || stale {
                let root =
                    state
                        .root_layouts
                        .get(&sel.file, graph, sel.micro_step, prefix, || {
                            Hierarchy::new(store, graph, sel.micro_step, prefix)
                        })?;
                *guard = root.as_ref().clone();
            }
            let Some(h) = guard.as_mut() else {
                return Ok(None);
            };
            if node.node_name != "root" {
                h.toggle_or_reveal(store, &node.node_name)?;
            }
            Ok(Some(boxes(h)))
        })
        .context(Msg::ExpandNode);
    state.views.record_size(&key, guard.as_ref());
    Ok(pb::HierarchyResponse {
        success: true,
        error: None,
        data: data?.ok_or_else(|| no_root(&sel, pane_name))?,
    })
}

/// The failure of a pane whose graph has no root node.
fn no_root(sel: &Selection, pane_name: &str) -> HandlerError {
    HandlerError::Because(
        Msg::ExpandNode,
        format!(
            "{}: the {pane_name} graph of step {}, rank {} has no root node",
            sel.file.path.display(),
            sel.step,
            sel.rank
        ),
    )
}

/// What the report's view functions tell: `(i, boxes)`, the `i`th view reached, and what gives
/// its boxes when they are wanted.
pub(super) type EachView<'a> = &'a mut dyn FnMut(usize, &mut dyn FnMut() -> Vec<pb::RenderNode>);

/// The views of a chain of expansions, for the report (`handlers::report`): from a fresh root
/// view of a pane, each node of `path` toggled (or revealed) in turn, exactly as
/// `changeNodeExpandState` lays them out after "root" and each of them, but on a view of its own
/// (no client's view state) and without answering the steps nobody reads. `each(i, boxes)` is
/// told after the first `i` nodes (0: the root view) and calls `boxes()` when it wants that
/// view's boxes, so a chain of `n` views costs one layout each instead of `n` from the root.
pub(super) fn views_in_turn(
    state: &State,
    meta: Option<&pb::MetaData>,
    node_type: &str,
    path: &[&str],
    each: EachView<'_>,
) -> Result<()> {
    with_root_view(state, meta, node_type, &mut |store, h| {
        each(0, &mut || boxes(h));
        for (i, name) in path.iter().enumerate() {
            h.toggle_or_reveal(store, name)?;
            each(i + 1, &mut || boxes(h));
        }
        Ok(())
    })
}

/// The views of the root view's modules opened one at a time, for the report: from the root
/// view of a pane, `modules[i]` opened (as `changeNodeExpandState` after "root"), its boxes
/// answered, and closed again before the next, instead of a copy of the root view each.
/// `each(i, open)` calls `open()` when it wants the view with `modules[i]` open.
pub(super) fn views_of_each(
    state: &State,
    meta: Option<&pb::MetaData>,
    node_type: &str,
    modules: &[&str],
    each: EachView<'_>,
) -> Result<()> {
    with_root_view(state, meta, node_type, &mut |store, h| {
        let mut failed = None;
        for (i, name) in modules.iter().enumerate() {
            each(i, &mut || {
                let opened = h.toggle_or_reveal(store, name).map(|()| boxes(h));
                let closed = h.toggle_or_reveal(store, name);
                match opened.and_then(|b| closed.map(|()| b)) {
                    Ok(b) => b,
                    Err(e) => {
                        failed = Some(e);
                        Vec::new()
                    }
                }
            });
            if let Some(e) = failed.take() {
                return Err(e);
            }
        }
        Ok(())
    })
}

/// Runs `f` on a fresh copy of a pane's root view (for the report's views); no pane (a side a
/// single graph does not have): `f` is not run.
fn with_root_view(
    state: &State,
    meta: Option<&pb::MetaData>,
    node_type: &str,
    f: &mut dyn FnMut(&CachedRows<'_>, &mut Hierarchy) -> std::result::Result<(), StoreError>,
) -> Result<()> {
    let sel = select(state, meta)?;
    let compare = sel.is_compare()?;
    let Some((side, prefix, pane_name)) = pane(compare, node_type) else {
        return Ok(());
    };
    let graph = sel.graph(side);
    let laid_out = sel
        .file
        .with_cached_rows(|store| {
            let root = state
                .root_layouts
                .get(&sel.file, graph, sel.micro_step, prefix, || {
                    Hierarchy::new(store, graph, sel.micro_step, prefix)
                })?;
            let Some(mut h) = root.as_ref().clone() else {
                return Ok(false);
            };
            f(store, &mut h)?;
            Ok(true)
        })
        .context(Msg::ExpandNode)?;
    if !laid_out {
        return Err(no_root(&sel, pane_name));
    }
    Ok(())
}

/// The visible boxes of a view, as `changeNodeExpandState` answers them.
fn boxes(h: &mut Hierarchy) -> Vec<pb::RenderNode> {
    h.visible_names()
        .into_iter()
        .filter_map(|name| {
            let info = h.info(&name)?;
            Some(render_node(name, info, false))
        })
        .collect()
}

/// `updateHierarchyData`: every box of the client's view of one pane, with its children.
pub fn update_hierarchy_data(
    state: &State,
    client: &str,
    req: pb::UpdateHierarchyRequest,
) -> pb::HierarchyResponse {
    answer(
        lang_of(req.meta_data.as_ref()),
        hierarchy(state, client, &req),
    )
}

fn hierarchy(
    state: &State,
    client: &str,
    req: &pb::UpdateHierarchyRequest,
) -> Result<pb::HierarchyResponse> {
    if req.graph_type != "NPU" && req.graph_type != "Bench" {
        return Err(HandlerError::Invalid(Msg::GraphType));
    }
    let sel = select(state, req.meta_data.as_ref())?;
    let slot = state.views.slot(ViewKey {
        client: client.to_owned(),
        file: sel.file.path.clone(),
        pane: req.graph_type.clone(),
    });
    let guard = crate::sync::lock(&slot);
    let data = guard.as_ref().map(Hierarchy::all).unwrap_or_default();
    Ok(pb::HierarchyResponse {
        success: true,
        error: None,
        data: data
            .into_iter()
            .map(|(key, info)| render_node(key, &info, true))
            .collect(),
    })
}

/// One box of a hierarchy answer; `key` is the node's name, moved in (a module expansion
/// answers thousands of boxes).
fn render_node(key: String, info: &RenderInfo, with_children: bool) -> pb::RenderNode {
    let clamp = |v: i64| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    pb::RenderNode {
        key,
        x: clamp(info.x),
        y: clamp(info.y),
        width: clamp(info.width),
        height: clamp(info.height),
        expand: info.expand,
        is_root: info.is_root,
        parent_node: info.parent.clone(),
        label: info.label.clone(),
        name: info.name.clone(),
        node_type: info.kind,
        matched_node_link: info.matched_node_link.clone(),
        precision_index: info.precision_index,
        overflow_level: info.overflow_level.clone(),
        matched_distributed: Some(json_to_struct(&info.matched_distributed)),
        children: with_children.then(|| prost_types::ListValue {
            values: info
                .children
                .iter()
                .map(|c| prost_types::Value {
                    kind: Some(prost_types::value::Kind::StringValue(c.clone())),
                })
                .collect(),
        }),
    }
}

/// `getNodeInfo`: a node's details, and those of its matched node on the other side.
pub fn get_node_info(state: &State, req: pb::NodeRequest) -> pb::NodeInfoResponse {
    answer(lang_of(req.meta_data.as_ref()), node_info(state, &req))
}

fn node_info(state: &State, req: &pb::NodeRequest) -> Result<pb::NodeInfoResponse> {
    let node = req
        .node_info
        .as_ref()
        .ok_or(HandlerError::Invalid(Msg::GetNodeInfo))?;
    let sel = select(state, req.meta_data.as_ref())?;
    let compare = sel.is_compare()?;
    let single = !compare || node.node_type == "Single";
    let side = if node.node_type == "Bench" && !single {
        Side::Bench
    } else {
        Side::Npu
    };
    let (this, matched) = sel
        .file
        .with_store(|store| {
            let this = store.node_detail(sel.graph(side), &node.node_name)?;
            let matched = match (&this, single) {
                (Some(row), false) => match row.node.matched_node_link.last() {
                    Some(other) => store.node_detail(sel.graph(side.other()), other)?,
                    None => None,
                },
                _ => None,
            };
            Ok((this, matched))
        })
        .context(Msg::GetNodeInfo)?;
    let this = this.map(node_detail);
    let matched = matched.map(node_detail);
    let entry = |side: &str, detail| pb::SideDetail {
        side: side.to_owned(),
        detail,
    };
    let data = match side {
        _ if single => vec![entry("npu", this)],
        Side::Npu => vec![entry("npu", this), entry("bench", matched)],
        Side::Bench => vec![entry("npu", matched), entry("bench", this)],
    };
    Ok(pb::NodeInfoResponse {
        success: true,
        error: None,
        data,
    })
}

fn tensor_slots(data: &Value) -> Vec<pb::TensorSlot> {
    let Value::Object(slots) = data else {
        return Vec::new();
    };
    slots
        .iter()
        .map(|(name, fields)| pb::TensorSlot {
            name: name.clone(),
            fields: match fields {
                Value::Object(map) => map
                    .iter()
                    .map(|(key, value)| pb::DataField {
                        key: key.clone(),
                        value: Some(json_to_prost(value)),
                    })
                    .collect(),
                other => vec![pb::DataField {
                    key: "value".into(),
                    value: Some(json_to_prost(other)),
                }],
            },
        })
        .collect()
}

fn node_detail(row: NodeDetailRow) -> pb::NodeDetail {
    let node = row.node;
    pb::NodeDetail {
        id: node.name.clone(),
        node_type: node.node_type,
        output_data: tensor_slots(&row.output_data),
        input_data: tensor_slots(&row.input_data),
        upnode: node.up_node,
        subnodes: node.sub_nodes,
        matched_node_link: node.matched_node_link,
        stack_info: row.stack_info,
        micro_step_id: node.micro_step_id as i32,
        data: Some(pb::NodeStatus {
            precision_index: node.precision_index,
            overflow_level: node.overflow_level,
        }),
        parallel_merge_info: row.parallel_merge_info,
        matched_distributed: Some(json_to_struct(&node.matched_distributed)),
        modified: row.modified as i32,
        node_name: node.name,
    }
}

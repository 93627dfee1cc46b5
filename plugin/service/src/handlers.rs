//! One function per RPC: a request message in, a response message out, no sockets.
//!
//! Handlers are synchronous (they run on tokio's blocking pool, see [`crate::service`]) and
//! answer failures the way msprobe's API does, as `{"success": false, "error": "<text>"}` in the
//! page's language; only a failure of the server itself becomes a gRPC status (at the edge, in
//! `service`). Answers about a few nodes come from indexed queries on the file; answers about every
//! node of a graph (node lists, matched relations, precision filter, search) from the file's
//! in-memory indexes ([`crate::graph_index`]), read once per file version.

use std::path::Path;
use std::sync::Arc;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::{GraphKey, NodeDetailRow, Side};
use graph_ascend_visdb::{Store, StoreError};
use serde_json::Value;

use crate::catalog::GraphFile;
use crate::layout::{Hierarchy, RenderInfo};
use crate::messages::{Lang, Msg};
use crate::values::{json_to_prost, json_to_struct};
use crate::views::ViewKey;
use crate::State;

/// Why a request could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The request is malformed or names something that does not exist; `Msg` is shown.
    #[error("{}", .0.text(Lang::En))]
    Invalid(Msg),
    /// The file could not be read; the message names the file.
    #[error("{1}")]
    Store(Msg, StoreError),
}

impl HandlerError {
    /// The text for the page: the message, plus the file-level reason when there is one.
    pub fn text(&self, lang: Lang) -> String {
        match self {
            HandlerError::Invalid(msg) => msg.text(lang).to_owned(),
            HandlerError::Store(msg, err) => format!("{} {err}", msg.text(lang)),
        }
    }
}

type Result<T> = std::result::Result<T, HandlerError>;

/// Attaches a user-facing message to store failures.
pub(crate) trait StoreContext<T> {
    fn context(self, msg: Msg) -> Result<T>;
}

impl<T> StoreContext<T> for std::result::Result<T, StoreError> {
    fn context(self, msg: Msg) -> Result<T> {
        self.map_err(|e| HandlerError::Store(msg, e))
    }
}

/// A response type that can carry msprobe's `{success: false, error}`.
pub trait Failure: Default {
    fn failure(error: String) -> Self;
}

macro_rules! failure {
    ($($t:ty),*) => {$(
        impl Failure for $t {
            #[allow(clippy::needless_update)]
            fn failure(error: String) -> Self {
                Self { success: false, error: Some(error), ..Default::default() }
            }
        }
    )*};
}

failure!(
    pb::StatusResponse,
    pb::ConfigInfoResponse,
    pb::NodeListResponse,
    pb::HierarchyResponse,
    pb::NodeInfoResponse,
    pb::FilterNodesResponse,
    pb::SearchNodesResponse,
    pb::MatchedRelationsResponse,
    pb::MatchResultResponse,
    pb::SaveMatchedRelationsResponse,
    pb::ConvertCandidatesResponse,
    pb::ConvertStartResponse
);

/// Turns a handler result into the response message, failures included.
pub fn answer<T: Failure>(lang: Lang, result: Result<T>) -> T {
    match result {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!("request failed: {e}");
            T::failure(e.text(lang))
        }
    }
}

/// A request's selection, checked and resolved to a file.
pub struct Selection {
    pub file: Arc<GraphFile>,
    pub lang: Lang,
    pub step: i64,
    pub rank: i64,
    pub micro_step: i64,
}

impl Selection {
    /// Whether the selected file is a comparison (two graphs) rather than a single build.
    pub fn is_compare(&self) -> Result<bool> {
        Ok(self
            .file
            .with_store(Store::config)
            .context(Msg::LoadConfig)?
            .is_compare())
    }

    pub fn graph(&self, side: Side) -> GraphKey {
        GraphKey {
            side,
            step: self.step,
            rank: self.rank,
        }
    }
}

/// The language of a request (for its error texts), before anything else is checked.
pub fn lang_of(meta: Option<&pb::MetaData>) -> Lang {
    Lang::parse(meta.map_or("en", |m| m.lang.as_str()))
}

/// msprobe's `check_file_type` + `safe_get_meta_data`: the file must exist, and step, rank and
/// micro step must be among the file's.
pub fn select(state: &State, meta: Option<&pb::MetaData>) -> Result<Selection> {
    let meta = meta.ok_or(HandlerError::Invalid(Msg::MetaData))?;
    let lang = Lang::parse(&meta.lang);
    if meta.run.is_empty() || meta.tag.is_empty() {
        return Err(HandlerError::Invalid(Msg::MetaData));
    }
    if !meta.r#type.is_empty() && meta.r#type != "db" {
        return Err(HandlerError::Invalid(Msg::Type));
    }
    let file = state
        .catalog
        .file(&meta.run, &meta.tag)
        .ok_or(HandlerError::Invalid(Msg::DbInit))?;
    let selection = Selection {
        file,
        lang,
        step: i64::from(meta.step.unwrap_or(0)),
        rank: i64::from(meta.rank.unwrap_or(0)),
        micro_step: i64::from(meta.micro_step.unwrap_or(-1)),
    };
    let config = selection
        .file
        .with_store(Store::config)
        .context(Msg::LoadConfig)?;
    let micro_ok = selection.micro_step == -1
        || (0..config.micro_steps.max(1)).contains(&selection.micro_step);
    let rank_ok = config.ranks.is_empty() || config.ranks.contains(&selection.rank);
    let step_ok = config.steps.is_empty() || config.steps.contains(&selection.step);
    if !(micro_ok && rank_ok && step_ok) {
        return Err(HandlerError::Invalid(Msg::MetaData));
    }
    Ok(selection)
}

// ---------------------------------------------------------------------------------------------
// Catalog.

pub fn load_meta_dir(state: &State) -> pb::LoadMetaDirResponse {
    let listing = state.catalog.scan();
    pb::LoadMetaDirResponse {
        data: listing
            .runs
            .into_iter()
            .map(|(run, tags)| pb::RunFiles {
                run,
                r#type: "db".into(),
                tags,
            })
            .collect(),
        error: listing
            .errors
            .into_iter()
            .map(|e| pb::CatalogError {
                run: e.run,
                tag: e.tag,
                info: e.info,
            })
            .collect(),
    }
}

pub fn load_graph_data(state: &State, req: pb::LoadGraphDataRequest) -> pb::StatusResponse {
    let lang = Lang::parse(&req.lang);
    let meta = pb::MetaData {
        run: req.run,
        tag: req.tag,
        r#type: req.r#type,
        lang: req.lang,
        micro_step: req.micro_step,
        step: req.step,
        rank: req.rank,
    };
    answer(
        lang,
        select(state, Some(&meta)).and_then(|sel| {
            prefetch_indexes(&sel)?;
            Ok(pb::StatusResponse {
                success: true,
                error: None,
            })
        }),
    )
}

pub fn load_graph_config_info(state: &State, req: pb::MetaRequest) -> pb::ConfigInfoResponse {
    let lang = lang_of(req.meta_data.as_ref());
    if let Ok(sel) = select(state, req.meta_data.as_ref()) {
        let _ = prefetch_indexes(&sel);
    }
    answer(lang, config_info(state, req.meta_data.as_ref()))
}

/// Starts indexing the graphs of a selection in the background (see [`crate::graph_index`]).
fn prefetch_indexes(sel: &Selection) -> Result<()> {
    let compare = sel.is_compare()?;
    let mut graphs = vec![sel.graph(Side::Npu)];
    if compare {
        graphs.push(sel.graph(Side::Bench));
    }
    sel.file.prefetch(graphs);
    Ok(())
}

fn config_info(state: &State, meta: Option<&pb::MetaData>) -> Result<pb::ConfigInfoResponse> {
    let meta = meta.ok_or(HandlerError::Invalid(Msg::MetaData))?;
    let file = state
        .catalog
        .file(&meta.run, &meta.tag)
        .ok_or(HandlerError::Invalid(Msg::DbInit))?;
    let config = file.with_store(Store::config).context(Msg::LoadConfig)?;
    let colors = match &config.node_colors {
        Value::Object(map) => map
            .iter()
            .map(|(color, legend)| pb::ColorLegend {
                color: color.clone(),
                value: legend.get("value").map(json_to_prost),
                description: legend
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                accuracy_level: legend
                    .get("accuracy_level")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
            .collect(),
        _ => Vec::new(),
    };
    let to_i32 = |v: &[i64]| v.iter().map(|&x| x as i32).collect();
    Ok(pb::ConfigInfoResponse {
        success: true,
        error: None,
        data: Some(pb::ConfigInfo {
            micro_steps: config.micro_steps as i32,
            tooltips: Some(json_to_struct(&config.tool_tip)),
            overflow_check: config.overflow_check,
            is_single_graph: !config.is_compare(),
            colors,
            matched_config_files: match_config_files(file.path.parent()),
            task: config.task.clone(),
            ranks: to_i32(&config.ranks),
            steps: to_i32(&config.steps),
        }),
    })
}

/// `*.vis.config` files beside a file, in natural order.
fn match_config_files(dir: Option<&Path>) -> Vec<String> {
    let Some(entries) = dir.and_then(|d| std::fs::read_dir(d).ok()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".vis.config"))
        .collect();
    names.sort_by(|a, b| crate::catalog::natural_cmp(a, b));
    names
}

// ---------------------------------------------------------------------------------------------
// Navigation.

pub fn load_graph_all_node_list(state: &State, req: pb::MetaRequest) -> pb::NodeListResponse {
    node_list(state, req, false)
}

/// [`load_graph_all_node_list`] with a successful answer rendered as JSON ([`crate::rawjson`]).
pub fn load_graph_all_node_list_json(state: &State, req: pb::MetaRequest) -> pb::NodeListResponse {
    node_list(state, req, true)
}

fn node_list(state: &State, req: pb::MetaRequest, json: bool) -> pb::NodeListResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
            let sel = select(state, req.meta_data.as_ref())?;
            let compare = sel.is_compare()?;
            let index = |side| sel.file.index(sel.graph(side)).context(Msg::LoadNode);
            if json {
                fn list(index: &crate::graph_index::GraphIndex, micro_step: i64) -> Vec<&str> {
                    index.nodes(micro_step).map(|i| index.name(i)).collect()
                }
                // The same for every request on this version of the file: rendered once.
                let key = format!("node list {} {} {}", sel.step, sel.rank, sel.micro_step);
                let rendered = sel
                    .file
                    .rendered(key, || {
                        let npu = sel.file.index(sel.graph(Side::Npu))?;
                        let bench = if compare {
                            Some(sel.file.index(sel.graph(Side::Bench))?)
                        } else {
                            None
                        };
                        let mut lists = vec![("npuNodeList", list(&npu, sel.micro_step))];
                        if let Some(bench) = &bench {
                            lists.push(("benchNodeList", list(bench, sel.micro_step)));
                        }
                        Ok(crate::rawjson::node_list_json(&lists))
                    })
                    .context(Msg::LoadNode)?;
                return Ok(pb::NodeListResponse {
                    success: true,
                    raw_json: Some(rendered.to_vec()),
                    ..Default::default()
                });
            }
            let names = |side| index(side).map(|index| index.names(sel.micro_step));
            Ok(pb::NodeListResponse {
                success: true,
                error: None,
                raw_json: None,
                data: {
                    let mut lists = vec![pb::NamedNodeList {
                        name: "npuNodeList".into(),
                        names: names(Side::Npu)?,
                    }];
                    if compare {
                        lists.push(pb::NamedNodeList {
                            name: "benchNodeList".into(),
                            names: names(Side::Bench)?,
                        });
                    }
                    lists
                },
            })
        })(),
    )
}

/// The pane a request addresses: its side, its name prefix and its view-state name.
fn pane(compare: bool, node_type: &str) -> Option<(Side, &'static str, &'static str)> {
    if !compare {
        return Some((Side::Npu, "", "Single"));
    }
    match node_type {
        "NPU" => Some((Side::Npu, "N___", "NPU")),
        "Bench" => Some((Side::Bench, "B___", "Bench")),
        _ => None,
    }
}

pub fn change_node_expand_state(
    state: &State,
    client: &str,
    req: pb::NodeRequest,
) -> pb::HierarchyResponse {
    expand_answer(state, client, req, false)
}

/// [`change_node_expand_state`] with a successful answer rendered as JSON ([`crate::rawjson`]).
pub fn change_node_expand_state_json(
    state: &State,
    client: &str,
    req: pb::NodeRequest,
) -> pb::HierarchyResponse {
    expand_answer(state, client, req, true)
}

fn expand_answer(
    state: &State,
    client: &str,
    req: pb::NodeRequest,
    json: bool,
) -> pb::HierarchyResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
            let node = req
                .node_info
                .as_ref()
                .ok_or(HandlerError::Invalid(Msg::ExpandNode))?;
            let sel = select(state, req.meta_data.as_ref())?;
            let compare = sel.is_compare()?;
            let Some((side, prefix, pane_name)) = pane(compare, &node.node_type) else {
                return Ok(pb::HierarchyResponse {
                    success: true,
                    raw_json: json.then(|| crate::rawjson::hierarchy_json(std::iter::empty())),
                    ..Default::default()
                });
            };
            let slot = state.views.slot(ViewKey {
                client: client.to_owned(),
                file: sel.file.path.clone(),
                pane: pane_name.to_owned(),
            });
            let mut guard = match slot.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let graph = sel.graph(side);
            if node.node_name == "root" {
                state.precision_overrides.clear(&sel.file.path);
            }
            let stale = guard
                .as_ref()
                .is_none_or(|h| h.graph() != graph || h.micro_step() != sel.micro_step);
            let names = sel
                .file
                .with_cached_rows(|store| {
                    if node.node_name == "root" || stale {
                        *guard = Hierarchy::new(store, graph, sel.micro_step, prefix)?;
                    }
                    let Some(h) = guard.as_mut() else {
                        return Ok(None);
                    };
                    if node.node_name != "root" {
                        h.toggle_or_reveal(store, &node.node_name)?;
                    }
                    Ok(Some(h.visible_names()))
                })
                .context(Msg::ExpandNode)?
                .ok_or(HandlerError::Invalid(Msg::ExpandNode))?;
            let Some(h) = guard.as_ref() else {
                return Err(HandlerError::Invalid(Msg::ExpandNode));
            };
            let boxes = names
                .iter()
                .filter_map(|name| h.info(name).map(|info| (name.as_str(), info)));
            if json {
                return Ok(pb::HierarchyResponse {
                    success: true,
                    raw_json: Some(crate::rawjson::hierarchy_json(boxes)),
                    ..Default::default()
                });
            }
            Ok(pb::HierarchyResponse {
                success: true,
                error: None,
                raw_json: None,
                data: boxes
                    .map(|(key, info)| render_node(key.to_owned(), info.clone(), false))
                    .collect(),
            })
        })(),
    )
}

pub fn update_hierarchy_data(
    state: &State,
    client: &str,
    req: pb::UpdateHierarchyRequest,
) -> pb::HierarchyResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
            if req.graph_type != "NPU" && req.graph_type != "Bench" {
                return Err(HandlerError::Invalid(Msg::GraphType));
            }
            let sel = select(state, req.meta_data.as_ref())?;
            let slot = state.views.slot(ViewKey {
                client: client.to_owned(),
                file: sel.file.path.clone(),
                pane: req.graph_type.clone(),
            });
            let guard = match slot.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            let data = guard.as_ref().map(Hierarchy::all).unwrap_or_default();
            Ok(pb::HierarchyResponse {
                success: true,
                error: None,
                raw_json: None,
                data: data
                    .into_iter()
                    .map(|(key, info)| render_node(key, info, true))
                    .collect(),
            })
        })(),
    )
}

fn render_node(key: String, info: RenderInfo, with_children: bool) -> pb::RenderNode {
    let clamp = |v: i64| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    pb::RenderNode {
        key,
        x: clamp(info.x),
        y: clamp(info.y),
        width: clamp(info.width),
        height: clamp(info.height),
        expand: info.expand,
        is_root: info.is_root,
        parent_node: info.parent,
        label: info.label,
        name: info.name,
        node_type: info.kind,
        matched_node_link: info.matched_node_link,
        precision_index: info.precision_index,
        overflow_level: info.overflow_level,
        matched_distributed: Some(json_to_struct(&info.matched_distributed)),
        children: with_children.then(|| prost_types::ListValue {
            values: info
                .children
                .into_iter()
                .map(|c| prost_types::Value {
                    kind: Some(prost_types::value::Kind::StringValue(c)),
                })
                .collect(),
        }),
    }
}

pub fn get_node_info(state: &State, req: pb::NodeRequest) -> pb::NodeInfoResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
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
        })(),
    )
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

// ---------------------------------------------------------------------------------------------
// Finding.

/// The precision bands of the filter: `lower <= precision_index < upper`.
const PRECISION_BANDS: [(&str, f64, f64); 3] = [
    ("pass", 0.0, 0.3),
    ("warning", 0.3, 0.6),
    ("error", 0.6, 1.1),
];

pub fn filter_nodes(state: &State, req: pb::FilterNodesRequest) -> pb::FilterNodesResponse {
    filter_answer(state, req, false)
}

/// [`filter_nodes`] with a successful answer rendered as JSON ([`crate::rawjson`]).
pub fn filter_nodes_json(state: &State, req: pb::FilterNodesRequest) -> pb::FilterNodesResponse {
    filter_answer(state, req, true)
}

fn filter_answer(
    state: &State,
    req: pb::FilterNodesRequest,
    json: bool,
) -> pb::FilterNodesResponse {
    use std::borrow::Cow;
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
            let sel = select(state, req.meta_data.as_ref())?;
            let values: Vec<Value> = req
                .values
                .as_ref()
                .map(|l| l.values.iter().map(crate::values::prost_to_json).collect())
                .unwrap_or_default();
            let answer = match req.r#type.as_str() {
                "precision" => {
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
                    let hits: Vec<(Cow<'_, str>, Cow<'static, str>)> = index
                        .leaves(sel.micro_step)
                        .filter_map(|leaf| {
                            let precision = over
                                .as_ref()
                                .and_then(|o| o.get(leaf.name).copied())
                                .or(leaf.precision_index);
                            let band = precision
                                .and_then(|p| bands.iter().find(|(_, lo, hi)| *lo <= p && p < *hi));
                            let status = match (leaf.matched, band) {
                                (false, _) if want_unmatched => "unmatched",
                                (false, Some(_)) => "unmatched",
                                (true, Some((name, _, _))) => name,
                                _ => return None,
                            };
                            Some((Cow::Borrowed(leaf.name), Cow::Borrowed(status)))
                        })
                        .collect();
                    filter_hits(hits, json)
                }
                "overflow" => {
                    let levels: Vec<String> = values
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect();
                    let hits: Vec<(Cow<'_, str>, Cow<'static, str>)> = sel
                        .file
                        .with_store(|s| {
                            s.leaf_overflows(sel.step, sel.rank, sel.micro_step, &levels)
                        })
                        .context(Msg::SearchNode)?
                        .into_iter()
                        .map(|(name, status)| (Cow::Owned(name), Cow::Owned(status)))
                        .collect();
                    filter_hits(hits, json)
                }
                _ => return Err(HandlerError::Invalid(Msg::SearchType)),
            };
            Ok(answer)
        })(),
    )
}

/// The filter's answer: the hits as messages, or rendered as JSON.
fn filter_hits(
    hits: Vec<(std::borrow::Cow<'_, str>, std::borrow::Cow<'static, str>)>,
    json: bool,
) -> pb::FilterNodesResponse {
    if json {
        return pb::FilterNodesResponse {
            success: true,
            raw_json: Some(crate::rawjson::filter_json(&hits)),
            ..Default::default()
        };
    }
    pb::FilterNodesResponse {
        success: true,
        error: None,
        raw_json: None,
        data: hits
            .into_iter()
            .map(|(name, status)| pb::FilterHit {
                name: name.into_owned(),
                status: status.into_owned(),
            })
            .collect(),
    }
}

/// Default and largest number of names a search returns.
const SEARCH_LIMIT: usize = 1000;

pub fn search_nodes(state: &State, req: pb::SearchNodesRequest) -> pb::SearchNodesResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
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
        })(),
    )
}

// ---------------------------------------------------------------------------------------------
// Matching (read side).

/// Splits `(name, partner)` pairs into msprobe's matched pairs and unmatched names.
fn split_links<'a>(
    rows: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> (Vec<pb::NamePair>, Vec<String>) {
    let mut matched = Vec::new();
    let mut unmatched = Vec::new();
    for (name, link) in rows {
        match link {
            Some(other) => matched.push(pb::NamePair {
                key: name.to_owned(),
                value: other.to_owned(),
            }),
            None => unmatched.push(name.to_owned()),
        }
    }
    (matched, unmatched)
}

/// msprobe's four lists of matched and unmatched nodes of a selection, from the file itself (for
/// the answers of edits, right after their transaction).
pub(crate) fn matched_relations(sel: &Selection) -> Result<pb::MatchedRelations> {
    let links = |side| {
        sel.file
            .with_store(|s| s.match_links(sel.graph(side), sel.micro_step))
            .context(Msg::LoadMatchedRelations)
    };
    let split = |rows: Vec<(String, Option<String>)>| {
        split_links(rows.iter().map(|(n, l)| (n.as_str(), l.as_deref())))
    };
    let (npu_match_nodes, npu_un_match_nodes) = split(links(Side::Npu)?);
    let (bench_match_nodes, bench_un_match_nodes) = split(links(Side::Bench)?);
    Ok(pb::MatchedRelations {
        npu_match_nodes,
        bench_match_nodes,
        npu_un_match_nodes,
        bench_un_match_nodes,
        matched_total: None,
        matched_success: None,
    })
}

/// The same lists from the file's indexes.
fn indexed_matched_relations(sel: &Selection) -> Result<pb::MatchedRelations> {
    let index = |side| {
        sel.file
            .index(sel.graph(side))
            .context(Msg::LoadMatchedRelations)
    };
    let npu = index(Side::Npu)?;
    let bench = index(Side::Bench)?;
    let (npu_match_nodes, npu_un_match_nodes) = split_links(npu.links(sel.micro_step));
    let (bench_match_nodes, bench_un_match_nodes) = split_links(bench.links(sel.micro_step));
    Ok(pb::MatchedRelations {
        npu_match_nodes,
        bench_match_nodes,
        npu_un_match_nodes,
        bench_un_match_nodes,
        matched_total: None,
        matched_success: None,
    })
}

pub fn load_graph_matched_relations(
    state: &State,
    req: pb::MetaRequest,
) -> pb::MatchedRelationsResponse {
    matched_relations_answer(state, req, false)
}

/// [`load_graph_matched_relations`] with a successful answer rendered as JSON
/// ([`crate::rawjson`]).
pub fn load_graph_matched_relations_json(
    state: &State,
    req: pb::MetaRequest,
) -> pb::MatchedRelationsResponse {
    matched_relations_answer(state, req, true)
}

fn matched_relations_answer(
    state: &State,
    req: pb::MetaRequest,
    json: bool,
) -> pb::MatchedRelationsResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
            let sel = select(state, req.meta_data.as_ref())?;
            if json {
                let index = |side| {
                    sel.file
                        .index(sel.graph(side))
                        .context(Msg::LoadMatchedRelations)
                };
                let (npu, bench) = (index(Side::Npu)?, index(Side::Bench)?);
                let capacity = 2 * (npu.names_bytes() + bench.names_bytes())
                    + 8 * (npu.len() + bench.len())
                    + 128;
                return Ok(pb::MatchedRelationsResponse {
                    success: true,
                    raw_json: Some(crate::rawjson::matched_relations_json(
                        || npu.links(sel.micro_step),
                        || bench.links(sel.micro_step),
                        capacity,
                    )),
                    ..Default::default()
                });
            }
            Ok(pb::MatchedRelationsResponse {
                success: true,
                error: None,
                raw_json: None,
                data: Some(indexed_matched_relations(&sel)?),
            })
        })(),
    )
}

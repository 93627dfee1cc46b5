//! The catalog routes: which files there are, loading one, and its configuration.

use std::path::Path;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::GraphKey;
use graph_ascend_visdb::Store;
use serde_json::Value;

use super::navigation::pane;
use super::reply::{answer, HandlerError, Result, StoreContext};
use super::selection::{lang_of, select, unserved, Selection};
use crate::messages::{Lang, Msg};
use crate::state::State;
use crate::values::{json_to_prost, json_to_struct};

/// `load_meta_dir`: every run and its files, and the files that cannot be served, with reasons.
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

/// `loadGraphData`: checks the selection (flat in the query string) and starts indexing it.
pub fn load_graph_data(state: &State, req: pb::LoadGraphDataRequest) -> pb::StatusResponse {
    let lang = Lang::parse(&req.lang);
    answer(lang, load_selection(state, req))
}

fn load_selection(state: &State, req: pb::LoadGraphDataRequest) -> Result<pb::StatusResponse> {
    let meta = pb::MetaData {
        run: req.run,
        tag: req.tag,
        r#type: req.r#type,
        lang: req.lang,
        micro_step: req.micro_step,
        step: req.step,
        rank: req.rank,
    };
    let sel = select(state, Some(&meta))?;
    prefetch(state, &sel)?;
    // This answer's way back is not the background work's to slow down.
    state.step_aside.pause();
    Ok(pb::StatusResponse {
        success: true,
        error: None,
    })
}

/// `loadGraphConfigInfo`: the file's configuration (and, when the selection is valid, its
/// indexes start building in the background).
pub fn load_graph_config_info(state: &State, req: pb::MetaRequest) -> pb::ConfigInfoResponse {
    let lang = lang_of(req.meta_data.as_ref());
    if let Ok(sel) = select(state, req.meta_data.as_ref()) {
        // This request ended the pause for the answer before it (`select`); its own handling,
        // like its way back, is not the background work's to slow down either.
        state.step_aside.pause();
        let _ = prefetch(state, &sel);
    }
    let answered = answer(lang, config_info(state, req.meta_data.as_ref()));
    state.step_aside.pause();
    answered
}

/// Starts indexing the graphs of a selection in the background (see [`crate::graph_index`]),
/// and laying out their roots after that (see [`crate::root_layouts`]): the page asks for the
/// node lists, then for each pane's root; and, for a compare, its diagnosis (see
/// [`super::diagnosis::start`]; unless [`State::diagnosis_prefetch`] is off). All wait while the
/// opening answers travel ([`crate::step_aside`]).
fn prefetch(state: &State, sel: &Selection) -> Result<()> {
    let compare = sel.is_compare()?;
    let panes: Vec<(GraphKey, &'static str)> = ["NPU", "Bench"]
        .into_iter()
        .filter_map(|node_type| pane(compare, node_type))
        .map(|(side, prefix, _)| (sel.graph(side), prefix))
        .take(if compare { 2 } else { 1 })
        .collect();
    sel.file.prefetch(
        panes.iter().map(|(graph, _)| *graph).collect(),
        &state.step_aside,
    );
    state
        .root_layouts
        .prefetch(&sel.file, panes, sel.micro_step, &state.step_aside);
    // The file's diagnosis too, so that the Diagnosis panel finds it ready (or under way).
    if compare && state.diagnosis_prefetch {
        let _ = super::diagnosis::start(state, &sel.file, super::diagnosis::Ahead::Prefetch);
    }
    Ok(())
}

pub(super) fn config_info(
    state: &State,
    meta: Option<&pb::MetaData>,
) -> Result<pb::ConfigInfoResponse> {
    let meta = meta.ok_or(HandlerError::Invalid(Msg::MetaData))?;
    let file = state
        .catalog
        .file(&meta.run, &meta.tag)
        .ok_or_else(|| unserved(state, &meta.run, &meta.tag))?;
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
            detail_columns: detail_columns(),
        }),
    })
}

/// The details table's known columns, metrics with their rules
/// ([`graph_ascend_dump::METRIC_RULES`]: the one table the converter and the diagnosis use).
fn detail_columns() -> Vec<pb::DetailColumn> {
    graph_ascend_dump::detail_columns()
        .map(|name| {
            let rule = graph_ascend_dump::metric_rule(name);
            pb::DetailColumn {
                name: name.to_owned(),
                worse: rule.map_or("", |r| r.worse.name()).to_owned(),
                threshold: rule.map_or(0.0, |r| r.threshold),
            }
        })
        .collect()
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

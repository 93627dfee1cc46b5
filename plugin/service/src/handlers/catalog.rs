//! The catalog routes: which files there are, loading one, and its configuration.

use std::path::Path;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::GraphKey;
use graph_ascend_visdb::Store;
use serde_json::Value;

use super::navigation::pane;
use super::{answer, lang_of, select_for_opening, HandlerError, Result, Selection, StoreContext};
use crate::messages::{Lang, Msg};
use crate::values::{json_to_prost, json_to_struct};
use crate::warm_up::{Opening, Wait};
use crate::State;

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

/// `loadGraphData`: checks the selection (flat in the query string); indexing it starts once
/// the first answers have gone (see [`crate::warm_up`]).
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
    let sel = select_for_opening(state, Some(&meta))?;
    prefetch(state, &sel, Wait::Opened)?;
    Ok(pb::StatusResponse {
        success: true,
        error: None,
    })
}

/// `loadGraphConfigInfo`: the file's configuration (and, when the selection is valid, its
/// indexes are built in the background once the first answers have gone).
pub fn load_graph_config_info(state: &State, req: pb::MetaRequest) -> pb::ConfigInfoResponse {
    let lang = lang_of(req.meta_data.as_ref());
    if let Ok(sel) = select_for_opening(state, req.meta_data.as_ref()) {
        let _ = prefetch(state, &sel, Wait::Config);
    }
    answer(lang, config_info(state, req.meta_data.as_ref()))
}

/// Has the graphs of a selection indexed in the background (see [`crate::graph_index`]), and
/// their roots laid out after that (see [`crate::root_layouts`]), once the page's first answers
/// have gone ([`crate::warm_up`]): the page asks for the node lists, then for each pane's root.
fn prefetch(state: &State, sel: &Selection, wait: Wait) -> Result<()> {
    let compare = sel.is_compare()?;
    let panes: Vec<(GraphKey, &'static str)> = ["NPU", "Bench"]
        .into_iter()
        .filter_map(|node_type| pane(compare, node_type))
        .map(|(side, prefix, _)| (sel.graph(side), prefix))
        .take(if compare { 2 } else { 1 })
        .collect();
    let indexed = panes.iter().all(|(graph, _)| sel.file.has_index(*graph));
    if indexed
        && state
            .root_layouts
            .has_all(&sel.file, &panes, sel.micro_step)
    {
        return Ok(());
    }
    state.warm_up.defer(
        Opening {
            file: sel.file.clone(),
            panes,
            micro_step: sel.micro_step,
        },
        wait,
    );
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

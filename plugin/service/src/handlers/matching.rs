//! The matching routes: matched relations, manual matches and their configuration files
//! (`docs/msprobe-api.md` §4).
//!
//! Every edit of a `.vis.db` is one write transaction ([`Store::write`]) and is committed before
//! the answer goes out, so edits survive a restart and two clients editing one file at once are
//! serialized by SQLite. After a commit, every client's laid-out view of the file is patched
//! (msprobe patched its single global view), so boxes show the new colours without a reload.

use graph_ascend_proto as pb;
use graph_ascend_visdb::files::write_atomically;
use graph_ascend_visdb::store::Side;
use graph_ascend_visdb::{Store, StoreError};
use serde_json::Value;

use super::reply::{answer, HandlerError, Result, StoreContext};
use super::selection::{lang_of, select, Selection};
use crate::matching::{opposite, Editor, Outcome};
use crate::messages::Msg;
use crate::regular_file::read_regular;
use crate::state::State;

// ---------------------------------------------------------------------------------------------
// Reading.

/// `loadGraphMatchedRelations`: msprobe's four lists of matched and unmatched nodes.
pub fn load_graph_matched_relations(
    state: &State,
    req: pb::MetaRequest,
) -> pb::MatchedRelationsResponse {
    answer(
        lang_of(req.meta_data.as_ref()),
        relations_answer(state, &req),
    )
}

fn relations_answer(state: &State, req: &pb::MetaRequest) -> Result<pb::MatchedRelationsResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    Ok(pb::MatchedRelationsResponse {
        success: true,
        error: None,
        data: Some(indexed_matched_relations(&sel)?),
    })
}

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

/// msprobe's four lists from the `(name, partner)` rows of each side.
fn relations<'a>(
    npu: impl Iterator<Item = (&'a str, Option<&'a str>)>,
    bench: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> pb::MatchedRelations {
    let (npu_match_nodes, npu_un_match_nodes) = split_links(npu);
    let (bench_match_nodes, bench_un_match_nodes) = split_links(bench);
    pb::MatchedRelations {
        npu_match_nodes,
        bench_match_nodes,
        npu_un_match_nodes,
        bench_un_match_nodes,
        matched_total: None,
        matched_success: None,
    }
}

/// msprobe's four lists of matched and unmatched nodes of a selection, from the file itself (for
/// the answers of edits, right after their transaction).
pub(crate) fn matched_relations(sel: &Selection) -> Result<pb::MatchedRelations> {
    let links = |side| {
        sel.file
            .with_store(|s| s.match_links(sel.graph(side), sel.micro_step))
            .context(Msg::LoadMatchedRelations)
    };
    let (npu, bench) = (links(Side::Npu)?, links(Side::Bench)?);
    Ok(relations(
        npu.iter().map(|(n, l)| (n.as_str(), l.as_deref())),
        bench.iter().map(|(n, l)| (n.as_str(), l.as_deref())),
    ))
}

/// The same lists from the file's indexes.
fn indexed_matched_relations(sel: &Selection) -> Result<pb::MatchedRelations> {
    let index = |side| {
        sel.file
            .index(sel.graph(side))
            .context(Msg::LoadMatchedRelations)
    };
    let (npu, bench) = (index(Side::Npu)?, index(Side::Bench)?);
    Ok(relations(
        npu.links(sel.micro_step),
        bench.links(sel.micro_step),
    ))
}

// ---------------------------------------------------------------------------------------------
// Editing.

/// The compare task of a selection, or `taskTypeError`.
fn task_mode(
    sel: &Selection,
    allowed: &[&str],
) -> Result<graph_ascend_convert::compare::CompareMode> {
    let config = sel
        .file
        .with_store(Store::config)
        .context(Msg::LoadConfig)?;
    if !config.is_compare() || !allowed.contains(&config.task.as_str()) {
        return Err(HandlerError::Invalid(Msg::TaskType));
    }
    graph_ascend_convert::compare::CompareMode::of_task_name(&config.task)
        .ok_or(HandlerError::Invalid(Msg::TaskType))
}

/// Runs one request's edits in one transaction, patches the views, answers msprobe's shape.
fn edit(
    state: &State,
    sel: &Selection,
    mode: graph_ascend_convert::compare::CompareMode,
    f: impl FnOnce(&mut Editor) -> std::result::Result<(), StoreError>,
) -> Result<pb::MatchResultResponse> {
    let graph = sel.graph(Side::Npu);
    let outcome: Outcome = sel
        .file
        .with_writable_store(|store| {
            store.write(|s| {
                let mut editor = Editor::new(s, graph, mode);
                f(&mut editor)?;
                Ok(editor.outcome)
            })
        })
        .context(Msg::UpdateDatabase)?;
    // Whatever the outcome, the transaction committed: the indexes of the file may be stale.
    // Those that were in use are rebuilt in the background, for the file as the catalog now
    // sees it (a file in WAL mode has a new version after any commit).
    let indexed = sel.file.invalidate_indexes();
    if !indexed.is_empty() {
        if let Some(current) = state.catalog.file(&sel.file.run, &sel.file.tag) {
            current.prefetch(indexed, &state.step_aside);
        }
    }
    if outcome.success == 0 {
        return Err(HandlerError::Invalid(Msg::SelectedNodeCantMatched));
    }
    state.precision_overrides.clear(&sel.file.path);
    for side in [Side::Npu, Side::Bench] {
        let pane = match side {
            Side::Npu => "NPU",
            Side::Bench => "Bench",
        };
        for slot in state.views.slots_of(&sel.file.path, pane) {
            let mut guard = crate::sync::lock(&slot);
            let Some(h) = guard.as_mut() else { continue };
            if h.graph() != sel.graph(side) {
                continue;
            }
            for p in outcome.patches.iter().filter(|p| p.side == side) {
                h.patch_match(&p.name, p.link.clone(), p.precision_index);
            }
        }
    }
    let mut data = matched_relations(sel)?;
    data.matched_total = Some(outcome.total);
    data.matched_success = Some(outcome.success);
    Ok(pb::MatchResultResponse {
        success: true,
        error: None,
        data: Some(data),
    })
}

/// `addMatchNodes`: matches two nodes (and, when asked, their children).
pub fn add_match_nodes(state: &State, req: pb::MatchNodesRequest) -> pb::MatchResultResponse {
    answer(lang_of(req.meta_data.as_ref()), add_match(state, &req))
}

fn add_match(state: &State, req: &pb::MatchNodesRequest) -> Result<pb::MatchResultResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let mode = task_mode(&sel, &["md5", "summary", "all"])?;
    if req.npu_node_name.is_empty() || req.bench_node_name.is_empty() {
        return Err(HandlerError::Invalid(Msg::SelectedNodeCantMatched));
    }
    let npu = [req.npu_node_name.clone(), opposite(&req.npu_node_name)];
    let bench = [req.bench_node_name.clone(), opposite(&req.bench_node_name)];
    edit(state, &sel, mode, |e| {
        if req.is_match_children {
            let n = e.subtree(Side::Npu, &npu)?;
            let b = e.subtree(Side::Bench, &bench)?;
            e.set_scope(Side::Npu, n);
            e.set_scope(Side::Bench, b);
            e.add_with_children(&req.npu_node_name, &req.bench_node_name)?;
        } else {
            e.set_scope(Side::Npu, npu);
            e.set_scope(Side::Bench, bench);
            e.add_pair(&req.npu_node_name, &req.bench_node_name)?;
        }
        Ok(())
    })
}

/// `deleteMatchNodes`: unmatches two nodes (and, when asked, their children).
pub fn delete_match_nodes(state: &State, req: pb::MatchNodesRequest) -> pb::MatchResultResponse {
    answer(lang_of(req.meta_data.as_ref()), delete_match(state, &req))
}

fn delete_match(state: &State, req: &pb::MatchNodesRequest) -> Result<pb::MatchResultResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let mode = task_mode(&sel, &["md5", "summary", "all"])?;
    edit(state, &sel, mode, |e| {
        if req.is_un_match_children {
            e.delete_with_children(&req.npu_node_name, &req.bench_node_name)?;
        } else {
            e.delete_pair(&req.npu_node_name, &req.bench_node_name)?;
        }
        Ok(())
    })
}

/// The largest matching configuration read (a pair of names is about 200 bytes: some 300,000
/// pairs); a bigger file is refused before its text is held.
pub const MAX_MATCH_CONFIG_BYTES: u64 = 64 << 20;

/// A plain file name (no folders): letters, digits, `_`, `-` and `.`, at most 255 bytes.
/// Letters and digits of any script count, so a run tagged `模型` saves its matches as
/// `模型_0_0.vis.config` (UTF-8): msprobe 26.2's `safe_save_data` refuses that name ("Invalid
/// data": its pattern `^[a-zA-Z0-9_\-\.]+$` is ASCII) but loads it, as it loads any name.
/// Never a separator, a space, a control or formatting character, `.` or `..`.
fn plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `addMatchNodesByConfig`: matches the pairs of a `.vis.config` file beside the graph file.
pub fn add_match_nodes_by_config(
    state: &State,
    req: pb::MatchByConfigRequest,
) -> pb::MatchResultResponse {
    answer(
        lang_of(req.meta_data.as_ref()),
        match_by_config(state, &req),
    )
}

fn match_by_config(
    state: &State,
    req: &pb::MatchByConfigRequest,
) -> Result<pb::MatchResultResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let mode = task_mode(&sel, &["md5", "summary"])?;
    let failed = |reason: String| HandlerError::Because(Msg::LoadConfigFile, reason);
    if !plain_file_name(&req.config_file) {
        return Err(failed(format!(
            "{:?} is not a file name of the run's folder (letters, digits, '_', '-' and '.')",
            req.config_file
        )));
    }
    let dir = sel
        .file
        .path
        .parent()
        .ok_or_else(|| failed(format!("{} lies in no folder", sel.file.path.display())))?;
    let path = dir.join(&req.config_file);
    // Opened once, never following a link nor waiting on a FIFO, and read with a bound.
    // msprobe answers "match node failed" when the file cannot be read: kept, with the reason.
    let text = read_regular(&path, MAX_MATCH_CONFIG_BYTES)
        .map_err(|e| HandlerError::Because(Msg::MatchNode, e.to_string()))?;
    let pairs = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => config_pairs(
            map.into_iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_owned()))),
        ),
        Ok(_) => {
            return Err(failed(format!(
                "{}: not a JSON object of NPU node names to Bench node names",
                path.display()
            )))
        }
        Err(e) => return Err(failed(format!("{}: not JSON: {e}", path.display()))),
    };
    if pairs.is_empty() {
        return Err(HandlerError::Invalid(Msg::MatchNodeLinksNull));
    }
    edit(state, &sel, mode, |e| {
        e.set_scope(Side::Npu, pairs.iter().map(|(n, _)| n.clone()));
        e.set_scope(Side::Bench, pairs.iter().map(|(_, b)| b.clone()));
        for (npu, bench) in &pairs {
            e.add_from_config(npu, bench)?;
        }
        Ok(())
    })
}

/// A `.vis.config`'s pairs, target name → golden name, in file order, each pair once: msprobe
/// saved both sides' rows, so its files hold every pair also backwards (golden → target); the
/// entry mirroring an earlier one is that copy, not a pair of its own (matching it would fail,
/// or pair the wrong nodes where the golden name is also a target node's).
fn config_pairs(entries: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut pairs = Vec::new();
    for (npu, bench) in entries {
        if npu != bench && seen.contains(&(bench.clone(), npu.clone())) {
            continue;
        }
        seen.insert((npu.clone(), bench.clone()));
        pairs.push((npu, bench));
    }
    pairs
}

/// `saveMatchedRelations`: writes the manual matches to `<tag>_<step>_<rank>.vis.config`.
pub fn save_matched_relations(
    state: &State,
    req: pb::MetaRequest,
) -> pb::SaveMatchedRelationsResponse {
    answer(lang_of(req.meta_data.as_ref()), save_relations(state, &req))
}

fn save_relations(
    state: &State,
    req: &pb::MetaRequest,
) -> Result<pb::SaveMatchedRelationsResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let links = sel
        .file
        .with_store(|s| s.modified_links(sel.step, sel.rank))
        .context(Msg::SaveMatchRelationship)?;
    let mut map = serde_json::Map::new();
    for (name, other) in links {
        map.insert(name, Value::String(other));
    }
    let failed = |reason: String| HandlerError::Because(Msg::SaveMatchRelationship, reason);
    let mut text = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut text, formatter);
    serde::Serialize::serialize(&Value::Object(map), &mut ser)
        .map_err(|e| failed(format!("the matches could not be written as JSON: {e}")))?;
    let text =
        String::from_utf8(text).map_err(|_| failed("the matches are not UTF-8 text".into()))?;
    let name = format!("{}_{}_{}.vis.config", sel.file.tag, sel.step, sel.rank);
    if !plain_file_name(&name) {
        return Err(failed(format!(
            "{name:?} is not a plain file name (letters, digits, '_', '-' and '.')"
        )));
    }
    let dir = sel
        .file
        .path
        .parent()
        .ok_or_else(|| failed(format!("{} lies in no folder", sel.file.path.display())))?;
    let path = dir.join(&name);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(failed(format!(
            "{} is a symbolic link, which is never written through",
            path.display()
        )));
    }
    write_atomically(&path, &text)
        .map_err(|e| failed(format!("{} cannot be written: {e}", path.display())))?;
    Ok(pb::SaveMatchedRelationsResponse {
        success: true,
        error: None,
        data: Some(name),
    })
}

/// `saveData`: msprobe's always failed (it called a method its database service lacks). Every
/// edit here is already committed when its answer goes out, so there is nothing left to write:
/// the route checks the selection and says so.
pub fn save_data(state: &State, req: pb::MetaRequest) -> pb::StatusResponse {
    answer(
        lang_of(req.meta_data.as_ref()),
        select(state, req.meta_data.as_ref()).map(|_| pb::StatusResponse {
            success: true,
            error: None,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_pair_saved_both_ways_is_one_pair() {
        let entry = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        let pairs = config_pairs([
            entry("Torch.add.3.forward", "Torch.add.7.forward"),
            entry("Module.a.forward.0", "Module.a.forward.0"),
            entry("Torch.add.7.forward", "Torch.add.3.forward"),
            entry("Torch.mul.1.forward", "Torch.mul.2.forward"),
        ]);
        assert_eq!(
            pairs,
            [
                entry("Torch.add.3.forward", "Torch.add.7.forward"),
                entry("Module.a.forward.0", "Module.a.forward.0"),
                entry("Torch.mul.1.forward", "Torch.mul.2.forward"),
            ]
        );
    }

    #[test]
    fn config_file_names_are_plain() {
        assert!(plain_file_name("a_0_0.vis.config"));
        assert!(!plain_file_name("../x.vis.config"));
        assert!(!plain_file_name("a/b"));
        assert!(!plain_file_name(".."));
        // Regression (issue 42, item 12): a run tagged in Chinese could not save its matches.
        assert!(plain_file_name("模型对比_0_0.vis.config"));
        assert!(plain_file_name("café_1_2.vis.config"));
        for refused in [
            "a b",
            "a\u{202e}b",
            "a\u{0}b",
            "a\\b",
            "a\u{ff0f}b",
            "a\u{200b}b",
        ] {
            assert!(!plain_file_name(refused), "{refused:?}");
        }
    }
}

//! The write side of the API: matching, the match configuration file, colours, precision
//! recomputation and `saveData` (`docs/msprobe-api.md` §4).
//!
//! Every edit of a `.vis.db` is one write transaction ([`Store::write`]) and is committed before
//! the answer goes out, so edits survive a restart and two clients editing one file at once are
//! serialized by SQLite. After a commit, every client's laid-out view of the file is patched
//! (msprobe patched its single global view), so boxes show the new colours without a reload.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::Side;
use graph_ascend_visdb::Store;
use serde_json::Value;

use crate::handlers::{
    answer, lang_of, matched_relations, select, HandlerError, Selection, StoreContext,
};
use crate::matching::{opposite, Editor, Outcome};
use crate::messages::Msg;
use crate::precision::mode_of_task;
use crate::State;

type Result<T> = std::result::Result<T, HandlerError>;

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
        match self.map.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        }
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
    mode_of_task(&config.task).ok_or(HandlerError::Invalid(Msg::TaskType))
}

/// Runs one request's edits in one transaction, patches the views, answers msprobe's shape.
fn edit(
    state: &State,
    sel: &Selection,
    mode: graph_ascend_convert::compare::CompareMode,
    f: impl FnOnce(&mut Editor) -> std::result::Result<(), graph_ascend_visdb::StoreError>,
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
            current.prefetch(indexed);
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
            let mut guard = match slot.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
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

pub fn add_match_nodes(state: &State, req: pb::MatchNodesRequest) -> pb::MatchResultResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
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
        })(),
    )
}

pub fn delete_match_nodes(state: &State, req: pb::MatchNodesRequest) -> pb::MatchResultResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
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
        })(),
    )
}

/// A plain file name (no folders), as msprobe requires of configuration files.
fn plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

pub fn add_match_nodes_by_config(
    state: &State,
    req: pb::MatchByConfigRequest,
) -> pb::MatchResultResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
            let sel = select(state, req.meta_data.as_ref())?;
            let mode = task_mode(&sel, &["md5", "summary"])?;
            if !plain_file_name(&req.config_file) {
                return Err(HandlerError::Invalid(Msg::LoadConfigFile));
            }
            let dir = sel
                .file
                .path
                .parent()
                .ok_or(HandlerError::Invalid(Msg::LoadConfigFile))?;
            let path = dir.join(&req.config_file);
            let is_plain = std::fs::symlink_metadata(&path)
                .map(|m| m.file_type().is_file())
                .unwrap_or(false);
            if !is_plain {
                return Err(HandlerError::Invalid(Msg::MatchNode));
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|_| HandlerError::Invalid(Msg::LoadConfigFile))?;
            let pairs: Vec<(String, String)> = match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map
                    .into_iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_owned())))
                    .collect(),
                _ => return Err(HandlerError::Invalid(Msg::LoadConfigFile)),
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
        })(),
    )
}

/// Writes `text` to `path` through a temporary file in the same folder and a rename, so a
/// reader never sees half a file. The file gets the mode of any new file (0666 less the process
/// umask, 0644 under the usual 022), not the temporary file's private 0600: colleagues sharing
/// the logdir load it too.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder.tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

pub fn save_matched_relations(
    state: &State,
    req: pb::MetaRequest,
) -> pb::SaveMatchedRelationsResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
            let sel = select(state, req.meta_data.as_ref())?;
            let links = sel
                .file
                .with_store(|s| s.modified_links(sel.step, sel.rank))
                .context(Msg::SaveMatchRelationship)?;
            let mut map = serde_json::Map::new();
            for (name, other) in links {
                map.insert(name, Value::String(other));
            }
            let mut text = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            let mut ser = serde_json::Serializer::with_formatter(&mut text, formatter);
            serde::Serialize::serialize(&Value::Object(map), &mut ser)
                .map_err(|_| HandlerError::Invalid(Msg::SaveMatchRelationship))?;
            let text = String::from_utf8(text)
                .map_err(|_| HandlerError::Invalid(Msg::SaveMatchRelationship))?;
            let name = format!("{}_{}_{}.vis.config", sel.file.tag, sel.step, sel.rank);
            if !plain_file_name(&name) {
                return Err(HandlerError::Invalid(Msg::SaveMatchRelationship));
            }
            let dir = sel
                .file
                .path
                .parent()
                .ok_or(HandlerError::Invalid(Msg::SaveMatchRelationship))?;
            let path = dir.join(&name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(HandlerError::Invalid(Msg::SaveMatchRelationship));
            }
            write_atomically(&path, &text).map_err(|e| {
                tracing::warn!("cannot write {}: {e}", path.display());
                HandlerError::Invalid(Msg::SaveMatchRelationship)
            })?;
            Ok(pb::SaveMatchedRelationsResponse {
                success: true,
                error: None,
                data: Some(name),
            })
        })(),
    )
}

/// msprobe's `saveData` always failed (it called a method its database service lacks). Every
/// edit here is already committed when its answer goes out, so there is nothing left to write:
/// the route checks the selection and says so.
pub fn save_data(state: &State, req: pb::MetaRequest) -> pb::StatusResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        select(state, req.meta_data.as_ref()).map(|_| pb::StatusResponse {
            success: true,
            error: None,
        }),
    )
}

/// Strings msprobe's `is_safe_string` refuses in a colour description.
const UNSAFE_MARKERS: [&str; 8] = [
    "<script",
    "<img",
    "<iframe",
    "javascript:",
    "onerror=",
    "onload=",
    "<svg",
    "eval(",
];

/// The unmatched-node markers a colour's value may be instead of a range.
const UNMATCHED_MARKERS: [&str; 3] = ["无匹配节点", "N/A", "No matching nodes"];

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

/// msprobe's `validate_colors_param`; the error texts are msprobe's (English in both languages).
pub fn validate_colors(text: &str) -> std::result::Result<Value, String> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return Err("Colors must be an object".into());
    };
    if map.is_empty() {
        return Err("Colors cannot be empty".into());
    }
    let mut out = serde_json::Map::new();
    for (key, value) in map {
        let hex = key.len() == 7
            && key.starts_with('#')
            && key[1..].bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            return Err(format!("Illegal color key: {key}"));
        }
        let Value::Object(mut entry) = value else {
            return Err(format!("The value of {key} must be an object"));
        };
        let Some(range) = entry.get("value") else {
            return Err(format!("The value of {key} lacks the value field"));
        };
        match range {
            Value::Array(items) => {
                if items.len() != 2 {
                    return Err(format!("The value of {key} must be an array of length 2"));
                }
                let (Some(lo), Some(hi)) = (items[0].as_f64(), items[1].as_f64()) else {
                    return Err(format!("The value of {key} must consist of numbers"));
                };
                if lo >= hi {
                    return Err(format!("The value range of {key} is invalid"));
                }
            }
            Value::String(s) if UNMATCHED_MARKERS.contains(&s.as_str()) => {}
            Value::String(s) => return Err(format!("Unsupported value: {s}")),
            _ => return Err(format!("The value of {key} has the wrong type")),
        }
        if let Some(d) = entry.get("description") {
            let Some(d) = d.as_str() else {
                return Err(format!("The description of {key} is not a string"));
            };
            let lower = d.to_ascii_lowercase();
            if d.len() > 4096 || UNSAFE_MARKERS.iter().any(|m| lower.contains(m)) {
                return Err(format!("The description of {key} is not allowed"));
            }
            entry.insert("description".into(), Value::String(html_escape(d)));
        }
        out.insert(key, Value::Object(entry));
    }
    Ok(Value::Object(out))
}

pub fn update_colors(state: &State, req: pb::UpdateColorsRequest) -> pb::StatusResponse {
    let lang = lang_of(req.meta_data.as_ref());
    let sel = match select(state, req.meta_data.as_ref()) {
        Ok(sel) => sel,
        Err(e) => return answer(lang, Err(e)),
    };
    let colors = match validate_colors(&req.colors) {
        Ok(c) => c,
        Err(text) => {
            return pb::StatusResponse {
                success: false,
                error: Some(text),
            }
        }
    };
    let text = graph_ascend_convert::pyjson::value(&colors);
    answer(
        lang,
        sel.file
            .with_writable_store(|s| s.write(|s| s.set_node_colors(&text)))
            .context(Msg::UpdateColor)
            .map(|()| pb::StatusResponse {
                success: true,
                error: None,
            }),
    )
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

pub fn update_precision_error(
    state: &State,
    req: pb::UpdatePrecisionErrorRequest,
) -> pb::StatusResponse {
    let lang = lang_of(req.meta_data.as_ref());
    answer(
        lang,
        (|| {
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
                let mut guard = match slot.lock() {
                    Ok(g) => g,
                    Err(poisoned) => poisoned.into_inner(),
                };
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
        })(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A saved `.vis.config` has the mode of any file the process creates (0644 under umask
    /// 022), not a temporary file's 0600, so colleagues on a shared server can load it.
    #[cfg(unix)]
    #[test]
    fn saved_files_get_the_usual_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).expect("create");
        let saved = dir.path().join("a_0_0.vis.config");
        write_atomically(&saved, "{}").expect("write");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&saved), mode(&plain));
        assert_eq!(std::fs::read_to_string(&saved).expect("read"), "{}");
    }

    #[test]
    fn colours_are_validated_as_msprobe_does() {
        assert_eq!(
            validate_colors("{\"red\": {\"value\": [0, 1]}}").unwrap_err(),
            "Illegal color key: red"
        );
        assert!(validate_colors("[]").is_err());
        assert!(validate_colors("{\"#FFFFFF\": {\"value\": [1, 0]}}").is_err());
        assert!(validate_colors(
            "{\"#FFFFFF\": {\"value\": [0, 1], \"description\": \"<script>\"}}"
        )
        .is_err());
        let ok = validate_colors("{\"#FFFFFF\": {\"value\": [0, 1], \"description\": \"a<b\"}, \"#C7C7C7\": {\"value\": \"N/A\"}}")
            .expect("valid");
        assert_eq!(ok["#FFFFFF"]["description"], "a&lt;b");
    }

    #[test]
    fn metric_values_are_fractions() {
        assert_eq!(metric_value(&Value::from("12.5%")), Some(0.125));
        assert_eq!(metric_value(&Value::from("N/A")), None);
        assert_eq!(metric_value(&Value::from("inf")), Some(1.0));
        assert_eq!(metric_value(&Value::from("0.5, extra")), Some(0.5));
    }

    #[test]
    fn config_file_names_are_plain() {
        assert!(plain_file_name("a_0_0.vis.config"));
        assert!(!plain_file_name("../x.vis.config"));
        assert!(!plain_file_name("a/b"));
        assert!(!plain_file_name(".."));
    }
}

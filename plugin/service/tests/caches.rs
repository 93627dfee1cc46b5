//! The per-file caches (`graph_index`: node lists, matched relations, precision filter, name
//! search; children rows of layouts) never serve stale answers: after a match or unmatch, after
//! `updatePrecisionError`, and after the file is changed on disk, every answer equals what a
//! fresh sidecar (no caches yet) gives for the same file, as the browser sees them.

mod common;

use std::sync::Arc;

use graph_ascend_proto as pb;
use graph_ascend_service::GraphFile;
use graph_ascend_service::NodeSource;
use graph_ascend_service::{handlers, State};
use graph_ascend_visdb::store::{GraphKey, Side};
use serde_json::{json, Value};

use common::{browser_json, meta, unpack};

fn meta_req(m: &pb::MetaData) -> pb::MetaRequest {
    pb::MetaRequest {
        meta_data: Some(m.clone()),
        client_id: String::new(),
    }
}

fn node_req(m: &pb::MetaData, name: &str, client: &str) -> pb::NodeRequest {
    pb::NodeRequest {
        meta_data: Some(m.clone()),
        node_info: Some(pb::NodeRef {
            node_name: name.into(),
            node_type: "NPU".into(),
        }),
        client_id: client.into(),
    }
}

fn filter_req(m: &pb::MetaData) -> pb::FilterNodesRequest {
    let text = |s: &str| prost_types::Value {
        kind: Some(prost_types::value::Kind::StringValue(s.into())),
    };
    pb::FilterNodesRequest {
        meta_data: Some(m.clone()),
        r#type: "precision".into(),
        values: Some(prost_types::ListValue {
            values: vec![
                text("pass"),
                text("warning"),
                text("error"),
                prost_types::Value {
                    kind: Some(prost_types::value::Kind::NumberValue(-1.0)),
                },
            ],
        }),
        client_id: String::new(),
    }
}

fn match_req(m: &pb::MetaData, npu: &str, bench: &str) -> pb::MatchNodesRequest {
    pb::MatchNodesRequest {
        npu_node_name: npu.into(),
        bench_node_name: bench.into(),
        meta_data: Some(m.clone()),
        is_match_children: false,
        is_un_match_children: false,
        client_id: "editor".into(),
    }
}

/// Everything the caches serve, as comparable JSON: node lists, matched relations, the precision
/// filter, a name search, and the root layout of a new client (with matched links and precision).
fn snapshot(state: &State, m: &pb::MetaData, client: &str) -> Value {
    let lists = handlers::load_graph_all_node_list(state, meta_req(m));
    assert!(lists.success, "{:?}", lists.error);
    let lists = browser_json(&lists)["data"].take();

    let rel = handlers::load_graph_matched_relations(state, meta_req(m));
    assert!(rel.success, "{:?}", rel.error);
    let relations = browser_json(&rel)["data"].take();

    let filter = handlers::filter_nodes(state, filter_req(m));
    assert!(filter.success, "{:?}", filter.error);
    let filter = browser_json(&filter)["data"].take();

    let search = handlers::search_nodes(
        state,
        pb::SearchNodesRequest {
            meta_data: Some(m.clone()),
            graph_type: "NPU".into(),
            query: "forward".into(),
            limit: 5,
            client_id: String::new(),
        },
    )
    .data
    .expect("search");

    let root = handlers::change_node_expand_state(state, client, node_req(m, "root", client));
    assert!(root.success, "{:?}", root.error);
    let root: Value = root
        .data
        .iter()
        .map(|n| {
            json!([
                n.key,
                n.matched_node_link,
                n.precision_index,
                n.x,
                n.y,
                n.width
            ])
        })
        .collect();
    json!({
        "lists": lists,
        "relations": relations,
        "filter": filter,
        "search": [search.names, search.total],
        "root": root,
    })
}

/// Runs an edit, then puts the file's modification time back: if its size did not change either,
/// the catalog keeps its `GraphFile` (and caches), so only the edit's own invalidation can keep
/// the answers right.
fn keeping_mtime<T>(file: &std::path::Path, edit: impl FnOnce() -> T) -> T {
    let modified = std::fs::metadata(file)
        .and_then(|m| m.modified())
        .expect("mtime");
    let out = edit();
    std::fs::File::options()
        .write(true)
        .open(file)
        .and_then(|f| f.set_modified(modified))
        .expect("set mtime");
    out
}

/// The same questions of a fresh sidecar on the same logdir: no cache can be involved.
fn fresh(dir: &std::path::Path, m: &pb::MetaData) -> Value {
    let state = Arc::new(State::new(dir.to_path_buf()));
    handlers::load_meta_dir(&state);
    snapshot(&state, m, "fresh")
}

/// A logdir holding the compare fixture as the run "run": (the logdir, the file, its tag, the
/// `metaData` selecting it).
fn compare_logdir() -> (tempfile::TempDir, std::path::PathBuf, String, pb::MetaData) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = unpack("compare_tf_stats", dir.path(), "run");
    let tag = file
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".vis.db"))
        .expect("tag")
        .to_owned();
    let m = meta("run", &tag);
    (dir, file, tag, m)
}

#[test]
fn edits_and_file_changes_invalidate_the_caches() {
    let (dir, file, tag, m) = compare_logdir();
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    handlers::load_meta_dir(&state);
    assert!(handlers::load_graph_config_info(&state, meta_req(&m)).success);

    // Fill every cache (twice: the second answers come from them).
    let before = snapshot(&state, &m, "a");
    assert_eq!(snapshot(&state, &m, "b"), before);
    assert_eq!(fresh(dir.path(), &m), before);

    // A matched leaf that the root layout shows (its link is in the cached children rows).
    let relations = handlers::load_graph_matched_relations(&state, meta_req(&m))
        .data
        .expect("relations");
    let root_children: Vec<String> = before["root"]
        .as_array()
        .expect("root")
        .iter()
        .filter_map(|b| b[0].as_str().map(str::to_owned))
        .collect();
    let leaves: Vec<String> = before["filter"]
        .as_array()
        .expect("filter")
        .iter()
        .filter_map(|h| h["name"].as_str().map(str::to_owned))
        .collect();
    let pair = relations
        .npu_match_nodes
        .iter()
        .find(|p| root_children.contains(&p.key) && leaves.contains(&p.key))
        .or_else(|| {
            relations
                .npu_match_nodes
                .iter()
                .find(|p| leaves.contains(&p.key))
        })
        .expect("a matched leaf")
        .clone();

    // The handle of this version of the file, with its caches filled: edits must clear them
    // even when the catalog does not (yet) see the file as changed.
    let handle = state.catalog.file("run", &tag).expect("the file");
    let npu = GraphKey {
        side: Side::Npu,
        step: 0,
        rank: 0,
    };
    let link_in_index = |h: &GraphFile| -> Option<String> {
        let index = h.index(npu).expect("index");
        let link = index
            .links(-1)
            .find(|(name, _)| *name == pair.key)
            .and_then(|(_, link)| link.map(str::to_owned));
        link
    };
    let root_name = handle
        .with_store(|s| s.root(npu))
        .expect("root")
        .expect("a root")
        .name;
    let parent = handle
        .with_store(|s| s.node(npu, &pair.key))
        .expect("node")
        .expect("the leaf")
        .up_node;
    let link_in_rows = |h: &GraphFile| -> Vec<String> {
        h.with_cached_rows(|rows| rows.children(npu, &parent))
            .expect("children")
            .iter()
            .find(|r| r.name == pair.key)
            .map(|r| r.matched_node_link.clone())
            .expect("the leaf among its parent's children")
    };
    assert!(!root_name.is_empty());
    assert_eq!(link_in_index(&handle), Some(pair.value.clone()));
    assert!(!link_in_rows(&handle).is_empty());

    // Unmatch: every cached answer follows.
    let r = keeping_mtime(&file, || {
        handlers::delete_match_nodes(&state, match_req(&m, &pair.key, &pair.value))
    });
    assert!(r.success, "{:?}", r.error);
    assert_eq!(link_in_index(&handle), None, "stale index after an unmatch");
    assert!(
        link_in_rows(&handle).is_empty(),
        "stale rows after an unmatch"
    );
    let unmatched = snapshot(&state, &m, "c");
    assert_ne!(unmatched, before, "the unmatch changed nothing");
    assert!(unmatched["relations"]["npuUnMatchNodes"]
        .as_array()
        .expect("list")
        .contains(&json!(pair.key)));
    assert!(unmatched["filter"]
        .as_array()
        .expect("filter")
        .contains(&json!({"name": pair.key, "status": "unmatched"})));
    assert_eq!(fresh(dir.path(), &m), unmatched);

    // Match again: back to the start (the catalog may have a new handle since the last edit).
    let handle = state.catalog.file("run", &tag).expect("the file");
    assert_eq!(link_in_index(&handle), None);
    assert!(link_in_rows(&handle).is_empty());
    let r = keeping_mtime(&file, || {
        handlers::add_match_nodes(&state, match_req(&m, &pair.key, &pair.value))
    });
    assert!(r.success, "{:?}", r.error);
    assert_eq!(link_in_index(&handle), Some(pair.value.clone()));
    assert!(
        !link_in_rows(&handle).is_empty(),
        "stale rows after a match"
    );
    let rematched = snapshot(&state, &m, "d");
    assert_eq!(rematched["relations"], before["relations"]);
    assert_eq!(fresh(dir.path(), &m), rematched);

    // updatePrecisionError: the filter uses the recomputed indexes (until the next root view).
    let r = handlers::update_precision_error(
        &state,
        pb::UpdatePrecisionErrorRequest {
            meta_data: Some(m.clone()),
            filter_value: vec!["0".into(), "1".into(), "2".into(), "3".into()],
            client_id: String::new(),
        },
    );
    if r.success {
        let filtered = handlers::filter_nodes(&state, filter_req(&m));
        let uncached = {
            // The overrides on top of a fresh index give the same answer.
            let s2 = Arc::new(State::new(dir.path().to_path_buf()));
            handlers::load_meta_dir(&s2);
            let r2 = handlers::update_precision_error(
                &s2,
                pb::UpdatePrecisionErrorRequest {
                    meta_data: Some(m.clone()),
                    filter_value: vec!["0".into(), "1".into(), "2".into(), "3".into()],
                    client_id: String::new(),
                },
            );
            assert!(r2.success);
            handlers::filter_nodes(&s2, filter_req(&m))
        };
        assert_eq!(filtered.data, uncached.data);
    }

    // Expanding the root drops the recomputed indexes (msprobe's rule).
    handlers::change_node_expand_state(&state, "a", node_req(&m, "root", "a"));

    // A change of the file on disk by someone else (msprobe rewrites in place): new answers.
    {
        let conn = rusqlite::Connection::open(&file).expect("open");
        conn.execute(
            "UPDATE tb_nodes SET matched_node_link = '[]', precision_index = NULL \
             WHERE data_source = 'NPU' AND node_name = ?",
            [&pair.key],
        )
        .expect("update");
    }
    let changed = snapshot(&state, &m, "e");
    assert_eq!(changed["lists"], before["lists"]);
    assert!(changed["relations"]["npuUnMatchNodes"]
        .as_array()
        .expect("list")
        .contains(&json!(pair.key)));
    let uncached = fresh(dir.path(), &m);
    for key in ["lists", "relations", "filter", "search", "root"] {
        assert_eq!(uncached[key], changed[key], "{key} after the file changed");
    }
}

/// The page's `loadGraphData` for `m`, from client "a".
fn open_req(m: &pb::MetaData) -> pb::LoadGraphDataRequest {
    pb::LoadGraphDataRequest {
        run: m.run.clone(),
        tag: m.tag.clone(),
        r#type: m.r#type.clone(),
        lang: m.lang.clone(),
        micro_step: m.micro_step,
        step: m.step,
        rank: m.rank,
        client_id: "a".into(),
    }
}

/// Waits up to a minute for `done`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_opening_answers_have_the_background_work_pause_and_it_still_gets_done() {
    let (dir, _file, _tag, m) = compare_logdir();
    let state = State::new(dir.path().to_path_buf());
    handlers::load_meta_dir(&state);
    assert!(!state.step_aside.is_pausing());

    // Each opening answer asks for a pause of a few ms (checked when this thread got here
    // sooner than that).
    let paused_after = |what: &str, started: std::time::Instant| {
        if started.elapsed() < std::time::Duration::from_millis(2) {
            assert!(state.step_aside.is_pausing(), "{what} asked for no pause");
        }
    };
    let started = std::time::Instant::now();
    let opened = handlers::load_graph_data(&state, open_req(&m));
    assert!(opened.success, "{:?}", opened.error);
    paused_after("loadGraphData", started);
    let started = std::time::Instant::now();
    let config = handlers::load_graph_config_info(&state, meta_req(&m));
    assert!(config.success, "{:?}", config.error);
    paused_after("the configuration", started);

    // Paused, not stopped: both indexes and both roots are made in the background.
    eventually("the background work never finished", || {
        state.indexed_graphs() == 2 && state.root_layouts.len() == 2
    });
    assert!(!state.step_aside.is_pausing());
    let lists = handlers::load_graph_all_node_list(&state, meta_req(&m));
    assert!(lists.success, "{:?}", lists.error);
    assert_eq!(
        snapshot(&state, &m, "a")["lists"],
        fresh(dir.path(), &m)["lists"],
        "the lists of paused builds differ from a fresh sidecar's"
    );
}

/// Opening a file (`loadGraphData`) lays out each pane's root in the background, shared by every
/// client: the page's first root requests then answer what a sidecar that laid nothing out ahead
/// answers, for each pane, and a client's expansion does not change another client's root view.
#[test]
fn roots_laid_out_ahead_answer_as_laid_out_on_request() {
    let (dir, _file, _tag, m) = compare_logdir();
    let root_of = |state: &State, client: &str, side: &str| -> Value {
        let mut req = node_req(&m, "root", client);
        if let Some(node) = req.node_info.as_mut() {
            node.node_type = side.into();
        }
        let answer = handlers::change_node_expand_state(state, client, req);
        assert!(answer.success, "{:?}", answer.error);
        browser_json(&answer)
    };

    // Laid out on request only: no file opened through loadGraphData.
    let plain = State::new(dir.path().to_path_buf());
    handlers::load_meta_dir(&plain);
    let expected: Vec<Value> = ["NPU", "Bench"]
        .iter()
        .map(|side| root_of(&plain, "x", side))
        .collect();
    assert_ne!(
        expected[0], expected[1],
        "the panes differ (N___/B___ names)"
    );

    let state = State::new(dir.path().to_path_buf());
    handlers::load_meta_dir(&state);
    let opened = handlers::load_graph_data(&state, open_req(&m));
    assert!(opened.success, "{:?}", opened.error);
    eventually("the roots were not laid out ahead", || {
        state.root_layouts.len() == 2
    });
    for (side, expected) in ["NPU", "Bench"].iter().zip(&expected) {
        assert_eq!(&root_of(&state, "a", side), expected, "{side}");
    }
    // Client a opens a module; client b's root view is still the shared one.
    let module = expected[0]["data"]
        .as_object()
        .expect("boxes")
        .iter()
        .find(|(_, b)| b["nodeType"] == 0 && !b["isRoot"].as_bool().unwrap_or(true))
        .map(|(key, _)| key.clone())
        .expect("a module under the root");
    let opened = handlers::change_node_expand_state(&state, "a", node_req(&m, &module, "a"));
    assert!(opened.success, "{:?}", opened.error);
    assert_ne!(
        browser_json(&opened),
        expected[0],
        "the module did not open"
    );
    assert_eq!(root_of(&state, "b", "NPU"), expected[0]);
    assert_eq!(state.root_layouts.len(), 2);
}

//! One request never holds the others: a heavy request (a layout) runs on the heavy lane, so a
//! quick one (another file's configuration) is answered while it runs, and a hierarchy deeper
//! than the bound is refused at once, naming the file, the node and the bound.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use graph_ascend_proto as pb;
use graph_ascend_service::server::{run, PrivateSocket};
use graph_ascend_service::{State, ViewKey};
use graph_ascend_testkit::synthetic_visdb::{chain_node, write, write_chain, Shape};
use graph_ascend_visdb::store::MAX_HIERARCHY_DEPTH;

fn meta(run: &str) -> pb::MetaData {
    common::meta(run, run)
}

fn expand(run: &str, node: &str, client: &str) -> pb::NodeRequest {
    pb::NodeRequest {
        node_info: Some(pb::NodeRef {
            node_name: node.into(),
            node_type: "Single".into(),
        }),
        meta_data: Some(meta(run)),
        client_id: client.into(),
    }
}

/// A logdir with `<run>/<run>.vis.db` for a `wide` file (a root of 1,000 children) and a
/// `small` one, served by a state.
fn served() -> (tempfile::TempDir, Arc<State>, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let logdir = dir.path().canonicalize().expect("real path");
    for run in ["wide", "small"] {
        std::fs::create_dir_all(logdir.join(run)).expect("run folder");
    }
    let wide = Shape {
        layers: 1_000,
        modules: 0,
        leaves: 0,
        compare: false,
        steps: 1,
        ranks: 1,
    };
    let wide = write(&logdir.join("wide/wide.vis.db"), wide).expect("wide file");
    write(
        &logdir.join("small/small.vis.db"),
        Shape::with_nodes(200, 3, false),
    )
    .expect("small file");
    (dir, Arc::new(State::new(logdir)), wide)
}

/// The heavy request is made slow deterministically: the test holds the lock of the heavy
/// client's view, which the layout takes first, for as long as it likes (a stand-in for the
/// seconds a big layout takes). It waits until the heavy request has reached that lock (it holds
/// a handle on the view), then asks for another file's configuration. On one runtime worker,
/// a layout run on the worker would hold it, and the quick answer would never come.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[expect(
    clippy::await_holding_lock,
    reason = "the held view lock is what keeps the heavy request running"
)]
async fn a_quick_request_is_answered_while_a_heavy_one_runs() {
    let (_dir, state, wide) = served();
    let sockets = tempfile::tempdir().expect("tempdir");
    let mut socket = PrivateSocket::bind(sockets.path()).expect("bind");
    let listener = socket.take_listener().expect("listener");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, state.clone(), async {
        let _ = stopped.await;
    }));
    let mut quick = common::connect(socket.path()).await;
    let mut heavy = common::connect(socket.path()).await;

    let view = state.views.slot(ViewKey {
        client: "heavy".into(),
        file: wide.clone(),
        pane: "Single".into(),
    });
    let held = view.lock().expect("view lock");
    let heavy_answer = tokio::spawn(async move {
        heavy
            .change_node_expand_state(expand("wide", "root", "heavy"))
            .await
    });
    // The progress signal: the heavy request holds its own handle on the view (the views' table
    // and this test hold the other two) once it is about to take the lock.
    let reached = async {
        while Arc::strong_count(&view) < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), reached)
        .await
        .expect("the heavy request reaches the view");

    let config = tokio::time::timeout(
        Duration::from_secs(60),
        quick.load_graph_config_info(pb::MetaRequest {
            meta_data: Some(meta("small")),
            client_id: "quick".into(),
        }),
    )
    .await
    .expect("the quick request is answered while the heavy one is held")
    .expect("answer")
    .into_inner();
    assert!(config.success, "{:?}", config.error);
    assert!(
        !heavy_answer.is_finished(),
        "the heavy request was still running when the quick one was answered"
    );

    drop(held);
    let boxes = heavy_answer
        .await
        .expect("join")
        .expect("heavy answer")
        .into_inner();
    assert!(boxes.success, "{:?}", boxes.error);
    assert_eq!(boxes.data.len(), 1_001, "the root and its 1,000 children");

    stop.send(()).expect("stop");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("server stops")
        .expect("join")
        .expect("serve");
}

fn depth_error(answer: &serde_json::Value, file: &Path, node: &str) {
    assert_eq!(answer["success"], false, "{answer}");
    let error = answer["error"].as_str().expect("error text");
    assert!(
        error.contains(&file.display().to_string()),
        "names the file: {error}"
    );
    assert!(error.contains(node), "names the node: {error}");
    assert!(
        error.contains(&MAX_HIERARCHY_DEPTH.to_string()),
        "names the bound: {error}"
    );
}

/// A chain far deeper than the bound (each expansion of a 100,000-level chain took 14–54 s):
/// revealing its deepest node is refused without reading the chain (the refusal costs what the
/// bound costs), as is clicking one level past the bound; every level above it opens.
#[test]
fn a_hierarchy_deeper_than_the_bound_is_refused_naming_file_node_and_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("deep")).expect("run folder");
    let depth = MAX_HIERARCHY_DEPTH + 2;
    let file = write_chain(&dir.path().join("deep/deep.vis.db"), depth).expect("chain");
    let probe = common::Probe::new(Arc::new(State::new(dir.path().to_path_buf())));
    let m = meta("deep");
    assert_eq!(probe.expand(&m, "root", "Single")["success"], true);

    let deepest = chain_node(depth - 1);
    depth_error(&probe.expand(&m, &deepest, "Single"), &file, &deepest);
    // The view is usable afterwards.
    assert_eq!(probe.expand(&m, "root", "Single")["success"], true);

    // Revealing the last node within the bound opens every level above it.
    let last_shown = chain_node(MAX_HIERARCHY_DEPTH - 1);
    let answer = probe.expand(&m, &last_shown, "Single");
    assert_eq!(answer["success"], true, "{}", answer["error"]);
    let boxes = answer["data"].as_object().expect("boxes");
    assert!(boxes.contains_key(&last_shown));
    assert_eq!(
        boxes.len(),
        MAX_HIERARCHY_DEPTH + 1,
        "the root and every level down to it"
    );
    // Opening it would show a level past the bound: refused too.
    depth_error(
        &probe.expand(&m, &last_shown, "Single"),
        &file,
        &chain_node(MAX_HIERARCHY_DEPTH),
    );
}

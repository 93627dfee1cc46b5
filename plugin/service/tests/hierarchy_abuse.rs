//! A `.vis.db` whose hierarchy loops or is thousands of levels deep is an error answer naming the
//! file and the node: never a stack overflow that takes the sidecar and every user's view down
//! with it, nor seconds of work on every expansion.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{meta, unpack, Probe};
use graph_ascend_service::State;
use serde_json::Value;

/// The build case used below: `DefaultModel` → three modules (`Module.fc1.Linear.forward.0`, …)
/// each holding one API call.
const CASE: &str = "build_mlp_step0";
const FC1: &str = "Module.fc1.Linear.forward.0";
const ACT: &str = "Module.act.ReLU.forward.0";

/// A logdir holding [`CASE`] changed by `sql`, a state serving it, and the file's tag.
fn corrupted(sql: impl FnOnce(&rusqlite::Connection)) -> (tempfile::TempDir, Arc<State>, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = unpack(CASE, dir.path(), "run");
    {
        let conn = rusqlite::Connection::open(&file).expect("open");
        sql(&conn);
    }
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    (dir, state, file)
}

fn tag(file: &Path) -> String {
    let name = file.file_name().and_then(|n| n.to_str()).expect("name");
    name.strip_suffix(".vis.db").expect("suffix").to_owned()
}

fn set_sub_nodes(conn: &rusqlite::Connection, node: &str, sub_nodes: &[&str]) {
    let list = serde_json::to_string(sub_nodes).expect("json");
    let changed = conn
        .execute(
            "UPDATE tb_nodes SET sub_nodes=?1 WHERE node_name=?2",
            (list, node),
        )
        .expect("update");
    assert_eq!(changed, 1, "{node} exists");
}

/// The answer is an error naming the file and the node, and the file still answers afterwards.
fn assert_cycle_answer(probe: &Probe, file: &Path, answer: &Value, node: &str) {
    assert_eq!(answer["success"], false, "{answer}");
    let error = answer["error"].as_str().expect("error text");
    assert!(error.contains(&tag(file)), "names the file: {error}");
    assert!(error.contains(node), "names the node: {error}");
    let root = probe.expand(&meta("run", &tag(file)), "root", "Single");
    assert_eq!(root["success"], true, "{root}");
}

#[test]
fn a_node_listed_among_its_own_sub_nodes_is_an_error_answer() {
    let (_dir, state, file) = corrupted(|conn| {
        set_sub_nodes(conn, FC1, &["Functional.linear.0.forward", FC1]);
    });
    let probe = Probe::new(state);
    let m = meta("run", &tag(&file));
    assert_eq!(probe.expand(&m, "root", "Single")["success"], true);
    let answer = probe.expand(&m, FC1, "Single");
    assert_cycle_answer(&probe, &file, &answer, FC1);
}

#[test]
fn a_two_node_cycle_is_an_error_answer() {
    let (_dir, state, file) = corrupted(|conn| {
        conn.execute(
            "UPDATE tb_nodes SET up_node=?1 WHERE node_name=?2",
            (FC1, ACT),
        )
        .expect("update");
        set_sub_nodes(conn, FC1, &["Functional.linear.0.forward", ACT]);
        set_sub_nodes(conn, ACT, &["Functional.relu.0.forward", FC1]);
    });
    let probe = Probe::new(state);
    let m = meta("run", &tag(&file));
    assert_eq!(probe.expand(&m, "root", "Single")["success"], true);
    assert_eq!(probe.expand(&m, FC1, "Single")["success"], true);
    let answer = probe.expand(&m, ACT, "Single");
    assert_cycle_answer(&probe, &file, &answer, FC1);
}

/// Levels of the deep chain: far more than a recursive walk survives on a 2 MB thread stack, and
/// than the layout's bound.
const DEPTH: usize = 20_000;

/// Adds a chain of `DEPTH` modules under the root, each the only child of the one before.
fn add_deep_chain(conn: &rusqlite::Connection) {
    let name = |i: usize| format!("Module.deep.{i}.Deep.forward.0");
    let tx = conn.unchecked_transaction().expect("transaction");
    // The rows copy one template row (read once: `node_name` alone is not indexed).
    tx.execute(
        "CREATE TEMP TABLE template AS SELECT * FROM tb_nodes WHERE node_name=?1",
        [FC1],
    )
    .expect("template");
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO tb_nodes (id, graph_id, node_order, node_name, node_type, up_node, \
                 sub_nodes, precision_index, overflow_level, micro_step_id, matched_node_link, \
                 stack_id, parallel_merge_info, matched_distributed, modified, input_data, \
                 output_data, data_source, dump_data_dir, step, rank, is_distributed) \
                 SELECT graph_id || '_' || ?1, graph_id, ?2, ?1, node_type, ?3, ?4, \
                 precision_index, overflow_level, micro_step_id, matched_node_link, stack_id, \
                 parallel_merge_info, matched_distributed, modified, input_data, output_data, \
                 data_source, dump_data_dir, step, rank, is_distributed \
                 FROM temp.template",
            )
            .expect("prepare");
        for i in 0..DEPTH {
            let up = if i == 0 {
                "DefaultModel".to_owned()
            } else {
                name(i - 1)
            };
            let sub = if i + 1 < DEPTH {
                serde_json::to_string(&[name(i + 1)]).expect("json")
            } else {
                String::new()
            };
            insert
                .execute((name(i), 1000 + i as i64, up, sub))
                .expect("insert");
        }
    }
    tx.commit().expect("commit");
}

/// Far deeper than the layout's bound (`MAX_HIERARCHY_DEPTH`, laid out up to it: see
/// `quick_lane.rs`): revealing the deepest node is an error answer naming the file and the node,
/// not a stack overflow nor seconds of work, and the file still answers.
#[test]
fn a_hierarchy_thousands_of_levels_deep_is_refused_naming_file_and_node() {
    let (_dir, state, file) = corrupted(add_deep_chain);
    let probe = Probe::new(state);
    let m = meta("run", &tag(&file));
    assert_eq!(probe.expand(&m, "root", "Single")["success"], true);
    let deepest = format!("Module.deep.{}.Deep.forward.0", DEPTH - 1);
    let answer = probe.expand(&m, &deepest, "Single");
    assert_cycle_answer(&probe, &file, &answer, &deepest);
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.contains("levels below the root"), "{error}");
}

/// The sidecar itself, over its real socket: a looping hierarchy answers an error (twice, as
/// the shim retries), and the sidecar goes on serving the file and the logdir.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_survives_a_looping_hierarchy() {
    use graph_ascend_proto as pb;
    use graph_ascend_service::server::{run, PrivateSocket};

    let (_dir, state, file) = corrupted(|conn| {
        set_sub_nodes(conn, FC1, &["Functional.linear.0.forward", FC1]);
    });
    let sockets = tempfile::tempdir().expect("tempdir");
    let mut socket = PrivateSocket::bind(sockets.path()).expect("bind");
    let listener = socket.take_listener().expect("listener");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, state, async {
        let _ = stopped.await;
    }));
    let mut client = common::connect(socket.path()).await;
    let expand = |name: &str| pb::NodeRequest {
        node_info: Some(pb::NodeRef {
            node_name: name.into(),
            node_type: "Single".into(),
        }),
        meta_data: Some(meta("run", &tag(&file))),
        client_id: "abuse".into(),
    };
    let root = client
        .change_node_expand_state(expand("root"))
        .await
        .expect("answer")
        .into_inner();
    assert!(root.success, "{:?}", root.error);
    for _ in 0..2 {
        let looped = client
            .change_node_expand_state(expand(FC1))
            .await
            .expect("an answer, not a dead sidecar")
            .into_inner();
        assert!(!looped.success);
        let error = looped.error.unwrap_or_default();
        assert!(
            error.contains(FC1) && error.contains(&tag(&file)),
            "{error}"
        );
    }
    let listing = client
        .load_meta_dir(pb::LoadMetaDirRequest::default())
        .await
        .expect("still serving")
        .into_inner();
    assert_eq!(listing.data.len(), 1);
    let root = client
        .change_node_expand_state(expand("root"))
        .await
        .expect("still serving")
        .into_inner();
    assert!(root.success, "{:?}", root.error);

    drop(client);
    stop.send(()).expect("stop");
    tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("server stops")
        .expect("join")
        .expect("serve");
}

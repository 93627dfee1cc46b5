//! A live logdir: files added, replaced and removed show up in the `watchMetaDir` stream without
//! a restart, and a file still being written is not offered until it is complete.

mod common;

use std::sync::Arc;
use std::time::Duration;

use graph_ascend_proto as pb;
use graph_ascend_service::GraphService;
use graph_ascend_service::State;
use pb::graph_ascend_server::GraphAscend;
use tokio_stream::StreamExt;

fn tags(listing: &pb::LoadMetaDirResponse) -> Vec<String> {
    let mut t: Vec<String> = listing
        .data
        .iter()
        .flat_map(|r| r.tags.iter().map(move |t| format!("{}/{}", r.run, t)))
        .collect();
    t.sort();
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_replaced_and_removed_files_are_streamed() {
    let dir = tempfile::tempdir().unwrap();
    common::unpack("build_mlp_step0", dir.path(), "a");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let service = GraphService::new(state);
    let mut stream = service
        .watch_meta_dir(tonic::Request::new(pb::LoadMetaDirRequest::default()))
        .await
        .unwrap()
        .into_inner();
    macro_rules! next {
        () => {
            tokio::time::timeout(Duration::from_secs(20), stream.next())
                .await
                .expect("a listing within 20 s")
                .expect("stream open")
                .expect("listing")
        };
    }
    let first = next!();
    assert_eq!(tags(&first), ["a/build_20261122085003"]);

    // Added: a new run appears.
    let added = common::unpack("build_tf_stats", dir.path(), "b");
    let second = next!();
    assert_eq!(
        tags(&second),
        ["a/build_20261122085003", "b/build_20261122090317"]
    );

    // Replaced by something broken: withdrawn at once, listed as an error once its size settled
    // (a file that cannot be opened yet may be a copy under way).
    let tmp = dir.path().join("b").join(".replacement");
    std::fs::write(&tmp, b"not a database any more").unwrap();
    std::fs::rename(&tmp, &added).unwrap();
    let mut third = next!();
    assert_eq!(tags(&third), ["a/build_20261122085003"]);
    if third.error.is_empty() {
        third = next!();
        assert_eq!(tags(&third), ["a/build_20261122085003"]);
    }
    assert_eq!(third.error.len(), 1);
    assert_eq!(third.error[0].tag, "build_20261122090317");

    // Removed.
    std::fs::remove_dir_all(dir.path().join("b")).unwrap();
    let fourth = next!();
    assert_eq!(tags(&fourth), ["a/build_20261122085003"]);
    assert!(fourth.error.is_empty());
}

#[test]
fn a_file_without_its_indexes_is_not_offered_until_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::unpack("build_mlp_step0", dir.path(), "run");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DROP INDEX index7;").unwrap();
    let state = State::new(dir.path().to_path_buf());
    let listing = graph_ascend_service::handlers::load_meta_dir(&state);
    assert!(listing.data.is_empty(), "half-written file offered");
    assert!(
        listing.error.is_empty(),
        "half-written file is not an error"
    );
    conn.execute_batch("CREATE INDEX index7 ON tb_nodes (is_distributed);")
        .unwrap();
    drop(conn);
    let listing = graph_ascend_service::handlers::load_meta_dir(&state);
    assert_eq!(listing.data.len(), 1);
}

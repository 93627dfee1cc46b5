//! `frontend/src/generated/proto.ts`, the page's answer and request types and route table, is
//! generated from the proto (`build/page_ts.rs`) and committed, so that the page builds without
//! cargo. This test fails while the committed copy differs from what the proto gives (`make test`
//! runs it); `GRAPH_ASCEND_UPDATE_GENERATED=1` rewrites the copy instead.

use std::path::PathBuf;

#[test]
fn the_pages_generated_types_are_current() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../frontend/src/generated/proto.ts");
    let generated = graph_ascend_proto::PAGE_PROTO_TS;
    if std::env::var_os("GRAPH_ASCEND_UPDATE_GENERATED").is_some_and(|v| v == "1") {
        std::fs::write(&path, generated).expect("frontend/src/generated/proto.ts written");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale (or missing): the proto changed. Rewrite it with\n  \
         GRAPH_ASCEND_UPDATE_GENERATED=1 cargo test --release -p graph-ascend-proto --test generated_ts\n\
         and commit it with the proto.",
        path.display()
    );
}

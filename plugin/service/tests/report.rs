//! The `exportReport` download (the page's "Download report"): the self-contained report made by
//! the sidecar's handlers, in chunks, with its type and name; without the page's build, a failure
//! that says so. The report's content is tested through the CLI (`plugin/cli/tests/report.rs`)
//! and in Chromium (`tests/e2e/report.test.mjs`).

mod common;

use graph_ascend_proto as pb;
use graph_ascend_service::{handlers, State};

fn request(tag: &str) -> pb::ExportReportRequest {
    pb::ExportReportRequest {
        run: "run".into(),
        tag: tag.into(),
        r#type: String::new(),
        lang: "en".into(),
        step: None,
        rank: None,
        no_paths: false,
        client_id: String::new(),
    }
}

fn export(state: &State, req: pb::ExportReportRequest) -> Vec<pb::FileChunk> {
    let mut chunks = Vec::new();
    handlers::export_report(state, req, "2026-01-01T00:00:00Z".into(), &mut |chunk| {
        chunks.push(chunk);
        true
    });
    chunks
}

#[test]
fn the_report_download_comes_in_chunks_with_its_type_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::unpack("compare_tf_stats", dir.path(), "run");
    let tag = db
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".vis.db"))
        .unwrap()
        .to_owned();
    let build = tempfile::tempdir().unwrap();
    std::fs::create_dir(build.path().join("assets")).unwrap();
    std::fs::write(
        build.path().join("index.html"),
        "<script type=\"module\" src=\"./assets/a.js\"></script><link rel=\"stylesheet\" href=\"./assets/a.css\">",
    )
    .unwrap();
    std::fs::write(build.path().join("assets/a.js"), "/* the page */").unwrap();
    std::fs::write(build.path().join("assets/a.css"), "body{}").unwrap();

    // Without the page's build: a failure that says what is missing.
    let without = State::new(dir.path().to_path_buf());
    let chunks = export(&without, request(&tag));
    assert_eq!(chunks.len(), 1);
    assert!(!chunks[0].success);
    assert!(
        chunks[0]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("page's built assets"),
        "{:?}",
        chunks[0]
    );

    let state =
        State::new(dir.path().to_path_buf()).with_page_assets(Some(build.path().to_path_buf()));
    let chunks = export(&state, request(&tag));
    let head = &chunks[0];
    assert!(head.success, "{head:?}");
    assert_eq!(head.content_type, handlers::REPORT_CONTENT_TYPE);
    assert_eq!(head.file_name, format!("{tag}_report.html"));
    let html: Vec<u8> = chunks[1..].iter().flat_map(|c| c.data.clone()).collect();
    let html = String::from_utf8(html).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("/* the page */"));
    assert!(html.contains("Functional.layer_norm.3.forward"));
    // The provenance names the run and the file, not the server's folders.
    assert!(html.contains(&format!("\"file\":\"run/{tag}.vis.db\"")));
    assert!(!html.contains(dir.path().to_str().unwrap()));

    // A file that is not served: a failure.
    let chunks = export(&state, request("nope"));
    assert!(!chunks[0].success);

    // `no_paths` (the page's "Without stacks and paths"): no stack in the details, and it says so.
    let stacks_of = |req: pb::ExportReportRequest| -> (usize, serde_json::Value) {
        let chunks = export(&state, req);
        assert!(chunks[0].success, "{:?}", chunks[0]);
        let html: Vec<u8> = chunks[1..].iter().flat_map(|c| c.data.clone()).collect();
        let html = String::from_utf8(html).unwrap();
        let open = "id=\"graph-ascend-report\">";
        let start = html.find(open).expect("the data element") + open.len();
        let len = html[start..].find("</script>").expect("its end");
        let data: serde_json::Value = serde_json::from_str(&html[start..start + len]).unwrap();
        let stacks = ["NPU", "Bench"]
            .iter()
            .filter_map(|side| data["points"][0]["panes"][side]["details"].as_object())
            .flat_map(|details| details.values())
            .map(|d| d["stack_info"].as_array().map_or(0, Vec::len))
            .sum();
        (stacks, data)
    };
    let (with, data) = stacks_of(request(&tag));
    assert!(with > 0, "the fixture has stacks");
    assert_eq!(data["provenance"]["noPaths"], false);
    let (without, data) = stacks_of(pb::ExportReportRequest {
        no_paths: true,
        ..request(&tag)
    });
    assert_eq!(without, 0);
    assert_eq!(data["provenance"]["noPaths"], true);
    assert!(data["leftOut"].to_string().contains("stacks and paths"));
}

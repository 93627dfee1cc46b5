//! The `divergenceMap` route through its handler (no sockets), on a file msprobe wrote: the map
//! as the browser sees it, the same cells as the crate's, the cache per file version, a clear
//! error for a file that is not a compare.

mod common;

use std::path::Path;
use std::sync::Arc;

use graph_ascend_diagnose::{divergence_map, CompareFile, MapOptions, Options};
use graph_ascend_proto as pb;
use graph_ascend_service::{handlers, State};

use common::{browser_json, unpack};

fn request(tag: &str, depth: i32, micro_batches: bool) -> pb::DivergenceMapRequest {
    pb::DivergenceMapRequest {
        run: "run".into(),
        tag: tag.into(),
        r#type: "db".into(),
        lang: "en".into(),
        depth,
        micro_batches,
        max_columns: 0,
        progress: false,
        client_id: String::new(),
    }
}

fn tag_of(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    name.strip_suffix(".vis.db").expect("a .vis.db").to_owned()
}

#[test]
fn the_map_of_a_two_rank_file_marks_its_faults_and_is_cached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("compare_dist_ranks", dir.path(), "run");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let before = std::fs::read(&path).expect("read");
    // Nothing computed yet: a question about progress computes nothing and knows nothing.
    let asked = || pb::DivergenceMapRequest {
        progress: true,
        ..request(&tag_of(&path), 0, false)
    };
    let unknown = browser_json(&handlers::divergence_map(&state, asked()));
    assert_eq!(unknown["success"], true, "{unknown}");
    assert!(unknown.get("progress").is_none(), "{unknown}");
    assert!(unknown.get("data").is_none(), "{unknown}");
    assert_eq!(state.diagnoses.len(), 0);
    let answer = browser_json(&handlers::divergence_map(
        &state,
        request(&tag_of(&path), 0, false),
    ));
    assert_eq!(answer["success"], true, "{answer}");
    let data = &answer["data"];
    assert_eq!(data["depth_rule"], "repeated_blocks");
    assert_eq!(data["axis"], "ranks");
    assert_eq!(data["columns"].as_array().map(Vec::len), Some(2));
    assert_eq!(data["bands"][0]["direction"], "forward");
    // The same cells as the crate's map.
    let (_, want) = divergence_map(
        &CompareFile::open(&path).expect("open"),
        &Options::default(),
        &MapOptions::default(),
    )
    .expect("map");
    for (b, band) in want.bands.iter().enumerate() {
        for (r, row) in band.rows.iter().enumerate() {
            let got = &data["bands"][b]["rows"][r];
            assert_eq!(got["label"], row.label.as_str());
            for (c, cell) in row.cells.iter().enumerate() {
                let g = &got["cells"][c];
                assert_eq!(g["held"], cell.is_some(), "{g}");
                if let Some(cell) = cell {
                    assert_eq!(g["sources"], cell.sources, "{g}");
                    assert_eq!(g["node"], cell.node.as_str());
                    assert_eq!(g["ratio"].as_f64(), cell.ratio, "{g}");
                }
            }
        }
    }
    // The first source's cell holds it.
    let f = &data["first_source"];
    assert_eq!(f["node"], "Functional.layer_norm.1.forward");
    let cell = &data["bands"][0]["rows"][f["row"].as_u64().expect("row") as usize]["cells"]
        [f["column"].as_u64().expect("column") as usize];
    assert!(cell["sources"].as_u64().expect("sources") > 0, "{cell}");
    // Cached: the map, the map of full resolution it is aggregated from, and the file's
    // diagnosis made on the way.
    assert_eq!(state.diagnoses.len(), 3);
    // Its computation is done: both graphs (one step, two ranks) read; no partial map kept.
    let done = browser_json(&handlers::divergence_map(&state, asked()));
    assert_eq!(
        done["progress"],
        serde_json::json!({"graphs_read": 2, "graphs_total": 2, "done": true}),
        "{done}"
    );
    assert!(done.get("data").is_none(), "{done}");
    let again = browser_json(&handlers::divergence_map(
        &state,
        request(&tag_of(&path), 0, false),
    ));
    assert_eq!(again, answer);
    assert_eq!(state.diagnoses.len(), 3);
    // Another number of columns (a zoom) is aggregated from the map of full resolution: one more
    // entry (the aggregated map), no graph read again.
    let narrow = browser_json(&handlers::divergence_map(
        &state,
        pb::DivergenceMapRequest {
            max_columns: 1,
            ..request(&tag_of(&path), 0, false)
        },
    ));
    let columns = &narrow["data"]["columns"];
    assert_eq!(columns.as_array().map(Vec::len), Some(1), "{narrow}");
    assert_eq!(columns[0]["width"], 2, "{narrow}");
    let first = &narrow["data"]["first_source"];
    assert_eq!(first["node"], "Functional.layer_norm.1.forward", "{narrow}");
    // (proto3's JSON leaves a zero out)
    assert_eq!(first["column"].as_u64().unwrap_or(0), 0, "{narrow}");
    assert_eq!(state.diagnoses.len(), 4);
    // Another depth is another map (and another map of full resolution).
    let deeper = browser_json(&handlers::divergence_map(
        &state,
        request(&tag_of(&path), 2, false),
    ));
    assert_eq!(deeper["data"]["depth"], 2);
    assert_eq!(deeper["data"]["depth_rule"], "chosen");
    assert_eq!(state.diagnoses.len(), 6);
    assert_eq!(std::fs::read(&path).expect("read"), before, "never written");
}

/// The file's diagnosis (started when the page opens a file of several graphs) makes the default
/// map on the way: the Map panel's request takes it, and reads no graph again.
#[test]
fn the_diagnosis_of_a_file_of_several_graphs_makes_its_default_map() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("compare_dist_ranks", dir.path(), "run");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let diagnosis = browser_json(&handlers::diagnose(
        &state,
        pb::DiagnoseRequest {
            run: "run".into(),
            tag: tag_of(&path),
            r#type: "db".into(),
            lang: "en".into(),
            micro_step: Some(-1),
            ..pb::DiagnoseRequest::default()
        },
    ));
    assert_eq!(diagnosis["success"], true, "{diagnosis}");
    // The diagnosis and the default map of full resolution (kept right after the diagnosis).
    let t0 = std::time::Instant::now();
    while state.diagnoses.len() < 2 && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(state.diagnoses.len(), 2);
    let asked = pb::DivergenceMapRequest {
        progress: true,
        ..request(&tag_of(&path), 0, false)
    };
    let done = browser_json(&handlers::divergence_map(&state, asked.clone()));
    assert_eq!(
        done["progress"],
        serde_json::json!({"graphs_read": 2, "graphs_total": 2, "done": true}),
        "{done}"
    );
    let answer = browser_json(&handlers::divergence_map(
        &state,
        request(&tag_of(&path), 0, false),
    ));
    assert_eq!(answer["success"], true, "{answer}");
    // One more entry: the map aggregated to the request's columns, from the kept one.
    assert_eq!(state.diagnoses.len(), 3);
    // The map a request computes itself, on a fresh sidecar.
    let fresh = Arc::new(State::new(dir.path().to_path_buf()));
    let own = browser_json(&handlers::divergence_map(
        &fresh,
        request(&tag_of(&path), 0, false),
    ));
    assert_eq!(answer, own);
    assert_eq!(browser_json(&handlers::divergence_map(&state, asked)), done);
}

#[test]
fn a_build_file_gets_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("build_tf_stats", dir.path(), "run");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let answer = browser_json(&handlers::divergence_map(
        &state,
        request(&tag_of(&path), 0, false),
    ));
    assert_eq!(answer["success"], false);
    let error = answer["error"].as_str().expect("error");
    assert!(error.contains("not a compare file"), "{error}");
}

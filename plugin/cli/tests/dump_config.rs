//! `graph-ascend diagnose FILE --dump-config OUT.json`: msprobe's config.json for a second run
//! that keeps the suspects' tensors, on committed compares, its `tensor_list` matched as
//! msprobe matches it (a substring of the recorded name) against every name of the real
//! msprobe dumps the compare was converted from. The config run by real msprobe is checked by
//! `tests/replay/check_dump_config.py` (outside `make test`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

mod common;
use common::{fixtures, ga, unpack};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("JSON")
}

/// The names a committed dump recorded in `step` (its `dump.json` keys).
fn dump_names(dump: &str, step: i64) -> Vec<String> {
    let step_dir = fixtures().join(format!("dumps/{dump}/step{step}"));
    let rank_dir = std::fs::read_dir(&step_dir)
        .expect("step folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
        .expect("a rank folder");
    let v = json_file(&rank_dir.join("dump.json"));
    v["data"]
        .as_object()
        .expect("data")
        .keys()
        .cloned()
        .collect()
}

/// The config's items: `tensor.list` or `statistics.tensor_list`, as its task says.
fn tensor_list(config: &serde_json::Value) -> Vec<String> {
    let items = match config["task"].as_str() {
        Some("tensor") => &config["tensor"]["list"],
        _ => &config["statistics"]["tensor_list"],
    };
    items
        .as_array()
        .expect("tensor_list")
        .iter()
        .map(|v| v.as_str().expect("a name").to_string())
        .collect()
}

#[test]
fn the_config_keeps_exactly_the_sources_tensors_in_the_real_dumps() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let db = db.to_str().unwrap();
    let found = ga(&["diagnose", db, "--format", "json"]);
    let found: serde_json::Value = serde_json::from_slice(&found.stdout).expect("JSON");
    let sources = found["sources"].as_array().expect("sources");
    assert!(!sources.is_empty());

    let out = dir.path().join("config.json");
    let run = ga(&[
        "diagnose",
        db,
        "--dump-config",
        out.to_str().unwrap(),
        "--dump-path",
        "./tensors",
    ]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("msprobe config for a PyTorch run"),
        "{}",
        stderr(&run)
    );
    let config = json_file(&out);
    assert_eq!(config["task"], "tensor");
    assert_eq!(config["level"], "mix");
    assert_eq!(config["dump_path"], "./tensors");
    // One rank in the file: no rank list (a run without distribution has no rank id).
    assert_eq!(config["rank"], serde_json::json!([]));
    let steps: BTreeSet<i64> = sources
        .iter()
        .map(|s| s["step"].as_i64().unwrap())
        .collect();
    assert_eq!(
        config["step"],
        serde_json::json!(steps.iter().collect::<Vec<_>>())
    );

    // Every source here is a forward API call: its forward record alone is meant.
    assert!(sources.iter().all(|s| s["direction"] == "forward"));
    let intended: BTreeSet<String> = sources
        .iter()
        .flat_map(|s| [&s["node"], &s["golden_node"]])
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert!(intended.contains("Functional.linear.10.forward"));
    let list = tensor_list(&config);
    for dump in ["tf_stats_a", "tf_stats_b"] {
        for &step in &steps {
            let names = dump_names(dump, step);
            // The dump has the neighbours a substring would also match.
            assert!(names.iter().any(|n| n == "Functional.linear.1.forward"));
            let kept: BTreeSet<String> = names
                .into_iter()
                .filter(|n| list.iter().any(|item| n.contains(item.as_str())))
                .collect();
            assert_eq!(kept, intended, "{dump} step {step}: {list:?}");
        }
    }

    // The statistics variant: the same items, in statistics.tensor_list, every low-risk call kept.
    let stats = dir.path().join("stats.json");
    let run = ga(&[
        "diagnose",
        db,
        "--dump-config",
        stats.to_str().unwrap(),
        "--dump-task",
        "statistics",
    ]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let stats = json_file(&stats);
    assert_eq!(stats["task"], "statistics");
    assert_eq!(stats["risk_level"], "ALL");
    assert_eq!(stats["statistics"]["list"], serde_json::json!([]));
    assert_eq!(tensor_list(&stats), list);
}

#[test]
fn an_existing_file_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let out = dir.path().join("config.json");
    std::fs::write(&out, "mine").unwrap();
    let run = ga(&[
        "diagnose",
        db.to_str().unwrap(),
        "--dump-config",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(stderr(&run).contains("never replaces"), "{}", stderr(&run));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
}

#[test]
fn nothing_to_dump_is_refused_and_no_file_is_written() {
    // A run compared with itself: no source, nothing differs.
    let dir = tempfile::tempdir().unwrap();
    let rank_dir = std::fs::read_dir(fixtures().join("dumps/tf_stats_a/step0"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
        .unwrap();
    let rank_dir = rank_dir.to_str().unwrap();
    let conv = dir.path().join("conv");
    let convert = ga(&[
        "convert",
        "--target_path",
        rank_dir,
        "--golden_path",
        rank_dir,
        "-o",
        conv.to_str().unwrap(),
    ]);
    assert!(convert.status.success(), "{}", stderr(&convert));
    let db = std::fs::read_dir(&conv)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .unwrap();
    let out = dir.path().join("config.json");
    let run = ga(&[
        "diagnose",
        db.to_str().unwrap(),
        "--dump-config",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("no suspect to dump"),
        "{}",
        stderr(&run)
    );
    assert!(!out.exists());
}

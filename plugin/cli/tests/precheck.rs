//! `graph-ascend precheck` on real msprobe tensor dumps (tests/fixtures/replay/): text and JSON,
//! both runs, the `--api` filter, exit status 1 when a call fails, 2 on an error.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/replay")
        .join(name)
}

fn precheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graph-ascend"))
        .arg("precheck")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_correct_run_passes_with_its_counts() {
    let a = fixture("tf_small_a");
    let o = precheck(&[a.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    let t = text(&o);
    assert!(
        t.contains("9 API calls (forward), 9 replayed: 9 pass, 0 fail"),
        "{t}"
    );
    assert!(t.contains("a module's record"), "{t}");
    assert!(!t.contains("FAIL"), "{t}");
}

#[test]
fn the_faulty_call_fails_in_text_and_json() {
    let (faulty, golden) = (fixture("tf_small_a_faulty"), fixture("tf_small_b"));
    let o = precheck(&[
        "-tp",
        faulty.to_str().unwrap(),
        "-gp",
        golden.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(t.contains("FAIL Tensor.__add__.0.forward"), "{t}");
    assert!(t.contains("golden:"), "{t}");
    assert_eq!(t.matches("FAIL").count(), 1, "{t}");

    let o = precheck(&["-tp", faulty.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = &doc["runs"][0];
    assert_eq!(run["summary"]["fail"], 1);
    let add = run["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Tensor.__add__.0.forward")
        .unwrap();
    assert_eq!(add["status"], "fail");
    assert_eq!(add["outputs"][0]["msprobe"]["status"], "pass");
    assert!(add["outputs"][0]["ours"]["max_ulp"].as_f64().unwrap() >= 3.0);
}

#[test]
fn the_api_filter_keeps_the_named_calls() {
    let a = fixture("tf_small_a_faulty");
    let o = precheck(&[a.to_str().unwrap(), "--api", "softmax", "--json"]);
    assert_eq!(o.status.code(), Some(0), "the faulty add is filtered out");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let calls = doc["runs"][0]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "Functional.softmax.0.forward");
}

#[test]
fn errors_name_the_folder() {
    let o = precheck(&["/nonexistent/dump"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/dump"));
}

//! `graph-ascend diagnose` and `graph-ascend export-csv`, run as the user runs them.

use std::process::Output;

mod common;
use common::{convert_48_layer_pair, fixtures, ga, unpack};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn text_json_and_csv_name_the_injected_faults() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let db = db.to_str().unwrap();

    let text = ga(&["diagnose", db]);
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    let out = stdout(&text);
    assert!(
        out.contains("1. rank 0 Functional.layer_norm.3.forward"),
        "{out}"
    );
    assert!(
        out.contains("argument eps differs: 0.1 vs golden 1e-05; inputs are equal"),
        "{out}"
    );
    assert!(
        out.contains("inside: Module.layers.1.ln2.LayerNorm.forward.0"),
        "{out}"
    );
    assert!(
        out.contains("2. rank 0 Functional.linear.10.forward"),
        "{out}"
    );

    let json = ga(&["diagnose", db, "--format", "json", "--top", "1"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["step"], 0);
    assert_eq!(v["sources"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["sources"][0]["node"], "Functional.layer_norm.3.forward");
    assert_eq!(v["sources"][0]["causes"][0]["kind"], "argument");
    assert_eq!(v["sources"][0]["causes"][0]["name"], "eps");

    let csv = ga(&[
        "diagnose", db, "--format", "csv", "--rank", "0", "--step", "0",
    ]);
    let out = stdout(&csv);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "rank,step,direction,kind,node,golden_node,score,reason,enclosing,micro_step,group,fault"
    );
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[2].starts_with("0,0,forward,cause,Functional.linear.10.forward,"));
}

#[test]
fn a_fault_free_pair_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_ms_vs_pt_lm_bare", dir.path());
    let o = ga(&["diagnose", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("no source of error above the noise"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let build = unpack("build_tf_stats", dir.path());
    let o = ga(&["diagnose", build.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a compare file"), "{}", stderr(&o));

    let missing = dir.path().join("missing.vis.db");
    let o = ga(&["diagnose", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.vis.db"), "{}", stderr(&o));

    let db = unpack("compare_tf_stats", dir.path());
    let db = db.to_str().unwrap();
    let o = ga(&["diagnose", db, "--step", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no step 5 (the file has steps [0])"),
        "{}",
        stderr(&o)
    );
    let o = ga(&["diagnose", db, "--rank", "2"]);
    assert!(stderr(&o).contains("no rank 2"), "{}", stderr(&o));
    let o = ga(&["diagnose", db, "--tolerance", "float32=1e-2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("DTYPE=AGREE:JUMP"), "{}", stderr(&o));
    let o = ga(&["export-csv", db, "--rank", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no rank 4"), "{}", stderr(&o));
}

#[test]
fn tolerances_can_be_overridden() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    // With float32 noise allowed up to 30%, the 2.4% LayerNorm change is noise; the weight that
    // differs by 58% (and the output with it, by 42%) is still a cause.
    let o = ga(&[
        "diagnose",
        db.to_str().unwrap(),
        "--format",
        "json",
        "--tolerance",
        "float32=0.3:0.3",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let nodes: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["node"].as_str())
        .collect();
    assert_eq!(nodes, vec!["Functional.linear.10.forward"], "{v}");
}

#[test]
fn export_csv_writes_a_file_or_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_md5", dir.path());
    let db = db.to_str().unwrap();
    let dest = dir.path().join("pairs.csv");
    let o = ga(&["export-csv", db, "-o", dest.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&dest).unwrap();
    assert!(text.starts_with("Step,Rank,NPU Node,Bench Node,Role,NPU Name,"));
    assert!(text.lines().count() > 300);
    let o = ga(&["export-csv", db, "--step", "0"]);
    assert_eq!(stdout(&o), text);
}

#[test]
fn the_first_step_that_differs_is_reported() {
    // Target: step 0 of the fault-free MindSpore run, step 1 of the perturbed one; golden: the
    // fault-free run. Step 0 agrees exactly, so step 1 is the answer.
    let dir = tempfile::tempdir().unwrap();
    let dumps = fixtures().join("dumps");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(dumps.join("ms_stats_a/step0"), target.join("step0")).unwrap();
    std::os::unix::fs::symlink(dumps.join("ms_stats_b/step1"), target.join("step1")).unwrap();
    let out = dir.path().join("out");
    let o = ga(&[
        "convert",
        "-tp",
        target.to_str().unwrap(),
        "-gp",
        dumps.join("ms_stats_a").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .expect("a .vis.db");
    let o = ga(&["diagnose", db.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["step"], 1, "{v}");
    assert_eq!(v["steps_checked"][0]["step"], 0);
    assert_eq!(v["steps_checked"][0]["forward_differs"], false);
    assert_eq!(v["steps_checked"][1]["forward_differs"], true);
    assert!(!v["sources"].as_array().unwrap().is_empty());
    // Asking for step 0 gives its (empty) answer.
    let o = ga(&["diagnose", db.to_str().unwrap(), "--step", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

/// The real 48-layer pair (`tests/fixtures/big`: 8 micro-batches, an `eps` argument and a weight
/// changed) converted as a user would: exactly its 2 faults, each one group of 8 micro-batches.
#[test]
fn the_48_layer_pair_gives_its_two_faults_as_two_groups_of_eight_micro_batches() {
    let dir = tempfile::tempdir().unwrap();
    let db = convert_48_layer_pair(dir.path());
    let run = ga(&["diagnose", db.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
    let groups = v["groups"].as_array().expect("groups");
    let summaries: Vec<&str> = groups
        .iter()
        .filter_map(|g| g["summary"].as_str())
        .collect();
    assert_eq!(groups.len(), 2, "{summaries:#?}");
    assert_eq!(
        groups[0]["site"]["api"], "Functional.layer_norm",
        "{summaries:#?}"
    );
    assert_eq!(
        groups[1]["site"]["api"], "Functional.linear",
        "{summaries:#?}"
    );
    for g in groups {
        assert_eq!(g["occurrences"], 8, "{summaries:#?}");
        assert_eq!(
            g["micro_steps"],
            serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]),
            "{summaries:#?}"
        );
    }
    assert_eq!(
        summaries[1],
        "`Functional.linear` (1st call) in `layers.2.mlp.fc1` — weight differs — 8 micro-batches, \
         rank 0, step 0"
    );
    // Nothing else: every source belongs to one of the two.
    assert_eq!(v["sources"].as_array().map(Vec::len), Some(16));
}

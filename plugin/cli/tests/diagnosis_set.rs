//! The generated diagnosis set (`tests/diagnosis/`, made once by `generate/gen_cases.py` with
//! real torch and msprobe): real dumps of a tiny transformer, a bfloat16 target with one injected
//! fault against a float32 golden, and fault-free pairs (bfloat16 against float32, noise only).
//! Each pair is converted with our converter and diagnosed as a user would; the head of the
//! ranked list must be the injected node (the faulty API or its module) in its step and rank in
//! at least 96.6 % of the faulty cases (57 of 59), and every fault-free case must give no source.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::{convert_pair, write_run};

fn cases_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/diagnosis/cases.json.xz")
}

/// Converts one pair and returns the diagnosis as JSON.
fn diagnose(dir: &Path, name: &str, target: &Path, golden: &Path) -> Value {
    let db = convert_pair(target, golden, &dir.join("out").join(name));
    // Read from our own diagnosis table, and the same from the rows.
    let run = common::diagnose_json_both_ways(&db);
    assert!(
        matches!(run.status.code(), Some(0 | 1)),
        "{name}: diagnose failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&run.stdout).expect("diagnosis JSON")
}

/// `None` when the head is the injected node, else what was found instead.
fn miss(expect: &Value, found: &Value) -> Option<String> {
    let head = &found["sources"][0];
    if head.is_null() {
        return Some("no source".into());
    }
    let nodes: Vec<&str> = expect["nodes"]
        .as_array()
        .expect("expected nodes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let node = head["node"].as_str().unwrap_or("");
    if found["step"] == expect["step"] && head["rank"] == expect["rank"] && nodes.contains(&node) {
        return None;
    }
    Some(format!(
        "head is step {} rank {} {} ({}: {})",
        found["step"], head["rank"], node, head["kind"], head["reason"]
    ))
}

#[test]
fn the_head_is_the_injected_node_and_fault_free_cases_are_empty() {
    let mut xz = std::io::BufReader::new(std::fs::File::open(cases_file()).expect("cases file"));
    let mut json = Vec::new();
    lzma_rs::xz_decompress(&mut xz, &mut json).expect("decompress");
    let set: Value = serde_json::from_slice(&json).expect("cases JSON");
    let runs = set["runs"].as_object().expect("runs");
    let cases = set["cases"].as_array().expect("cases");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut paths = std::collections::HashMap::new();
    for (run, files) in runs {
        let files = files.as_object().expect("files of a run");
        paths.insert(run.as_str(), write_run(dir.path(), run, files));
    }

    let (mut faulty, mut hits, mut misses, mut noisy) = (0, 0, Vec::new(), Vec::new());
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let target = &paths[case["target"].as_str().expect("target")];
        let golden = &paths[case["golden"].as_str().expect("golden")];
        let found = diagnose(dir.path(), name, target, golden);
        if case["fault"].is_null() {
            let sources = found["sources"].as_array().map_or(0, Vec::len);
            let non_finite = found["first_non_finite"].as_array().map_or(0, Vec::len);
            if sources + non_finite > 0 {
                noisy.push(format!(
                    "{name}: {sources} sources, first {}",
                    found["sources"][0]["node"]
                ));
            }
            continue;
        }
        faulty += 1;
        match miss(&case["expect"], &found) {
            None => hits += 1,
            Some(why) => misses.push(format!(
                "{name}: expected {} in step {} rank {}; {why}",
                case["expect"]["nodes"], case["expect"]["step"], case["expect"]["rank"]
            )),
        }
    }
    println!(
        "diagnosis set: head right in {hits} of {faulty} faulty cases ({:.1} %), {} of {} \
         fault-free cases empty",
        100.0 * hits as f64 / faulty.max(1) as f64,
        cases.len() - faulty - noisy.len(),
        cases.len() - faulty
    );
    for m in &misses {
        println!("  miss: {m}");
    }
    for n in &noisy {
        println!("  fault-free case with sources: {n}");
    }
    assert!(faulty >= 50, "only {faulty} faulty cases in the set");
    assert!(cases.len() - faulty >= 5, "too few fault-free cases");
    // 57 of 59 (96.6 %) since the precision floor and peer inheritance (docs/diagnosis.md §9).
    assert!(
        hits * 1000 >= faulty * 966,
        "head right in {hits} of {faulty}: {misses:#?}"
    );
    assert!(
        noisy.is_empty(),
        "fault-free cases with sources: {noisy:#?}"
    );
}

//! Tolerances from data, on the committed sweep (`tests/diagnosis/sweep.json.xz`, made once by
//! `generate/gen_sweep.py` with real torch and msprobe): one small transformer, a bfloat16 target
//! with one fault against a float32 golden; forward and backward kernel faults and weight noise,
//! in an early and a late layer, at 1.5–30 times the noise of the faulty op's kind; noise-only
//! pairs; an operator wrong on every call; an fp16 activation overflow; and a reference compare
//! (fault-free bfloat16 against float32, other seeds).
//!
//! Each pair is converted and diagnosed as a user would: with `--reference`, by default (the dtype
//! table tightened from the compare itself) and with `--fixed-tolerances`. A fault is *found* when
//! a source is listed at the faulty API node itself (not its module, not its backward). Its size
//! is measured here, independently of the engine: the error of the faulty node's outputs (the
//! statistics measure of docs/diagnosis.md §1) divided by the reference's noise of its op kind
//! (the sweep's `noise`: the p95 of the reference's output errors per API and pass).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::Value;

mod common;
use common::{
    convert_pair, diagnose_json as diagnose, ga, generated_set, output_err, sources, stored_dump,
    write_run,
};

/// With the reference, every fault at least this many times the reference's noise is found.
const FOUND_FROM: f64 = 3.0;

/// `Functional.linear.2.forward` → `Functional.linear.forward`, the sweep's noise key.
fn noise_key(api_node: &str) -> String {
    let parts: Vec<&str> = api_node.split('.').collect();
    format!(
        "{}.{}.{}",
        parts[0],
        parts[1],
        parts.last().expect("a pass")
    )
}

/// Whether the diagnosis lists a source at `node`.
fn finds(found: &Value, node: &str) -> bool {
    sources(found).contains(&node)
}

/// The first API node, in the target's dump order (execution order), whose outputs hold inf/NaN
/// while the golden's do not.
fn first_overflow(
    target: &serde_json::Map<String, Value>,
    golden: &serde_json::Map<String, Value>,
) -> Option<String> {
    let non_finite = |d: &serde_json::Map<String, Value>, name: &str| {
        d.get(name)
            .and_then(|n| n["output"].as_array())
            .is_some_and(|outs| {
                outs.iter().any(|e| {
                    ["Max", "Min", "Mean", "Norm"]
                        .iter()
                        .any(|k| match e.get(*k) {
                            Some(Value::String(s)) => {
                                let s = s.to_ascii_lowercase();
                                s.contains("inf") || s.contains("nan")
                            }
                            Some(v) => v.as_f64().is_some_and(|x| !x.is_finite()),
                            None => false,
                        })
                })
            })
    };
    target
        .keys()
        .filter(|name| !name.starts_with("Module.") && name.ends_with(".forward"))
        .find(|name| non_finite(target, name) && !non_finite(golden, name))
        .cloned()
}

#[test]
fn learned_tolerances_find_kernel_faults_above_three_times_the_noise_and_no_noise() {
    let set = generated_set("sweep.json.xz");
    let runs = set["runs"].as_object().expect("runs");
    let noise = set["noise"].as_object().expect("noise");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut paths: HashMap<&str, PathBuf> = HashMap::new();
    for (run, files) in runs {
        paths.insert(
            run.as_str(),
            write_run(dir.path(), run, files.as_object().expect("files")),
        );
    }
    let out = dir.path().join("out");
    let reference = convert_pair(
        &paths[set["reference"]["target"]
            .as_str()
            .expect("reference target")],
        &paths[set["reference"]["golden"]
            .as_str()
            .expect("reference golden")],
        &out.join("reference"),
    );
    let reference = reference.to_str().expect("UTF-8 path");

    // nominal ratio (tenths) → (faults, found with the reference, by default, with the table
    // alone)
    let mut curve: BTreeMap<u32, [usize; 4]> = BTreeMap::new();
    let (mut missed, mut noisy, mut checked_from_3) = (Vec::new(), Vec::new(), 0);
    let mut every_call_found = None;
    let mut overflow = None;
    for case in set["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let group = case["group"].as_str().expect("group");
        let (target, golden) = (
            case["target"].as_str().expect("target"),
            case["golden"].as_str().expect("golden"),
        );
        let db = convert_pair(&paths[target], &paths[golden], &out.join(name));
        let with_ref = diagnose(&db, &["--reference", reference]);
        let tightened = diagnose(&db, &[]);
        match group {
            "noise" => {
                for (how, found) in [("reference", &with_ref), ("tightened", &tightened)] {
                    let nf = found["first_non_finite"].as_array().map_or(0, Vec::len);
                    if !sources(found).is_empty() || nf > 0 {
                        noisy.push(format!("{name} ({how}): {:?}", sources(found)));
                    }
                }
                continue;
            }
            "every_call" => {
                let node = case["expect"]["nodes"][0].as_str().expect("node");
                every_call_found = Some((finds(&tightened, node), sources(&tightened).len()));
                continue;
            }
            "overflow" => {
                let (t, g) = (
                    stored_dump(&runs[target], 0, 0),
                    stored_dump(&runs[golden], 0, 0),
                );
                let first = tightened["first_non_finite"][0]["node"]
                    .as_str()
                    .map(str::to_owned);
                overflow = Some((first_overflow(&t, &g), first, with_ref.clone()));
                continue;
            }
            _ => {}
        }
        let node = case["expect"]["nodes"][0]
            .as_str()
            .expect("faulty API node");
        let (t, g) = (
            stored_dump(&runs[target], 0, 0),
            stored_dump(&runs[golden], 0, 0),
        );
        let reference_noise = noise[&noise_key(node)].as_f64().expect("noise of the op");
        let ratio = output_err(&t, &g, node) / reference_noise;
        let fixed = diagnose(&db, &["--fixed-tolerances"]);
        let nominal = case["fault"]["ratio"].as_f64().expect("nominal ratio");
        let row = curve.entry((nominal * 10.0).round() as u32).or_default();
        row[0] += 1;
        for (k, found) in [&with_ref, &tightened, &fixed].into_iter().enumerate() {
            row[k + 1] += usize::from(finds(found, node));
        }
        if ratio >= FOUND_FROM {
            checked_from_3 += 1;
            if !finds(&with_ref, node) {
                missed.push(format!(
                    "{name}: output {ratio:.2} x the reference's noise, not found at {node} \
                     (sources {:?})",
                    sources(&with_ref)
                ));
            }
        }
    }
    println!("found by nominal ratio: faults, with the reference, tightened, fixed table");
    for (ratio, [n, r, t, f]) in &curve {
        println!(
            "  {:>4}x: {n} faults: {r} / {t} / {f}",
            f64::from(*ratio) / 10.0
        );
    }
    assert!(
        checked_from_3 >= 20,
        "only {checked_from_3} faults at 3x or more"
    );
    assert!(
        missed.is_empty(),
        "faults at 3x the noise or more not found: {missed:#?}"
    );
    assert!(
        noisy.is_empty(),
        "noise-only pairs with sources: {noisy:#?}"
    );
    // An operator wrong on every call does not teach the tightening that it is normal.
    let (found, count) = every_call_found.expect("the every-call case");
    assert!(
        found,
        "the every-call gelu fault is not found without a reference ({count} sources)"
    );
    // fp16 activations overflowing: the first overflowing op, not its module.
    let (expected, flagged, with_ref) = overflow.expect("the overflow case");
    let expected = expected.expect("an overflowing op in the target's dump");
    assert_eq!(flagged.as_deref(), Some(expected.as_str()));
    assert_eq!(
        with_ref["first_non_finite"][0]["node"].as_str(),
        Some(expected.as_str())
    );
}

#[test]
fn a_reference_that_is_not_a_compare_of_the_same_model_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let set = generated_set("sweep.json.xz");
    let runs = set["runs"].as_object().expect("runs");
    let golden = write_run(
        dir.path(),
        "golden",
        runs["golden"].as_object().expect("files"),
    );
    let target = write_run(
        dir.path(),
        "noise_601",
        runs["noise_601"].as_object().expect("files"),
    );
    let db = convert_pair(&target, &golden, &dir.path().join("out"));
    // A build file (one run, no golden) is no compare.
    let build_out = dir.path().join("build");
    let build = ga(&[
        "convert",
        "--target_path",
        golden.to_str().expect("UTF-8 path"),
        "-o",
        build_out.to_str().expect("UTF-8 path"),
    ]);
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let build_db = std::fs::read_dir(&build_out)
        .expect("build output")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .expect("a .vis.db");
    // A compare of another model: one of the upstream fixtures.
    let other = common::unpack("compare_mlp_overflow_oc", dir.path());
    for bad in [&build_db, &other] {
        let run = ga(&[
            "diagnose",
            db.to_str().expect("UTF-8 path"),
            "--reference",
            bad.to_str().expect("UTF-8 path"),
        ]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&*bad.to_string_lossy())
                && stderr.contains("cannot be the reference of tolerances"),
            "{stderr}"
        );
    }
}

//! One line per fault: sources grouped by call site across micro-batches, ranks and steps; every
//! step judged, weights updated from an earlier difference inherited; the first inf/NaN on the
//! innermost node whose activations are finite.

mod common;

use common::{diagnose_case, edit_stat, golden_equals_target, listing, replicate, unpack};
use graph_ascend_diagnose::{diagnose, CompareFile, Options};
use rusqlite::Connection;

#[test]
fn two_ranks_with_the_same_faults_give_one_group_per_fault() {
    let d = diagnose_case("compare_dist_ranks");
    assert_eq!(d.groups.len(), 2, "{}", listing(&d));
    for g in &d.groups {
        assert_eq!(g.ranks, [(0, 1)], "{}", listing(&d));
        assert_eq!(g.occurrences, 2, "{}", listing(&d));
    }
    assert!(d.sources.iter().all(|s| s.group < 2));
}

#[test]
fn a_weight_changed_on_every_rank_is_one_group_and_the_updated_weights_after_it_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = unpack("compare_tf_stats", dir.path());
    {
        let db = Connection::open(&path).unwrap();
        golden_equals_target(&db, 0);
        // Step 0: layer 2's fc1 weight differs (and so its output).
        let times = |k: f64| move |v: f64| (v * k).to_string();
        let fc1 = "Functional.linear.10.forward";
        edit_stat(&db, 0, "Bench", fc1, "input.1", "Norm", times(1.5));
        edit_stat(&db, 0, "Bench", fc1, "output.0", "Norm", times(1.5));
        replicate(&db, 3, 64);
        // Steps 1 and 2: another weight carries the update of step 0's difference.
        let qkv = "Functional.linear.4.forward";
        edit_stat(&db, 1, "Bench", qkv, "input.1", "Norm", times(1.2));
        edit_stat(&db, 1, "Bench", qkv, "output.0", "Norm", times(1.2));
        // Step 2: a kernel starts to compute wrongly (a fault that starts later).
        let gelu = "Functional.gelu.0.forward";
        edit_stat(&db, 2, "Bench", gelu, "output.0", "Norm", times(1.5));
    }
    let file = CompareFile::open(&path).unwrap();
    let d = diagnose(&file, &Options::default()).unwrap();
    let text = listing(&d);
    assert_eq!(d.groups.len(), 2, "{text}");
    let weight = &d.groups[0];
    assert_eq!(weight.first.node, "Functional.linear.10.forward", "{text}");
    assert_eq!(
        (
            weight.ranks.clone(),
            weight.steps.clone(),
            weight.occurrences
        ),
        (vec![(0, 63)], vec![(0, 0)], 64),
        "{text}"
    );
    assert!(weight.summary.contains("in `layers.2.mlp.fc1`"), "{text}");
    assert!(weight.summary.contains("ranks 0–63"), "{text}");
    let later = &d.groups[1];
    assert_eq!(later.first.node, "Functional.gelu.0.forward", "{text}");
    assert_eq!(
        (later.ranks.clone(), later.steps.clone()),
        (vec![(0, 63)], vec![(2, 2)]),
        "{text}"
    );
    assert!(
        d.sources
            .iter()
            .all(|s| s.node != "Functional.linear.4.forward"),
        "{text}"
    );
    assert_eq!(d.step, 0);
    assert_eq!(d.steps_checked.len(), 3);
    // The JSON is bounded: at most `top` groups, each listing a bounded number of others.
    let json: serde_json::Value =
        serde_json::from_str(&graph_ascend_diagnose::report::json(&d, 1)).unwrap();
    assert_eq!(json["groups"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        json["groups"][0]["others"].as_array().map(Vec::len),
        Some(graph_ascend_diagnose::group::MAX_LISTED.min(63))
    );
}

#[test]
fn a_weight_that_overflows_flags_the_api_that_uses_it_and_is_named_as_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let path = unpack("compare_tf_stats", dir.path());
    {
        // The weight of layer 2's fc1 scaled by 1e30 on the target: its Norm and the output's
        // overflow float32, its Max does not; the module and its parent see the same.
        let db = Connection::open(&path).unwrap();
        let inf = |_: f64| "inf".to_string();
        let big = |v: f64| (v * 1e30).to_string();
        let api = "Functional.linear.10.forward";
        edit_stat(&db, 0, "NPU", api, "input.1", "Norm", inf);
        edit_stat(&db, 0, "NPU", api, "input.1", "Max", big);
        edit_stat(&db, 0, "NPU", api, "output.0", "Norm", inf);
        let module = "Module.layers.2.mlp.fc1.Linear.forward.0";
        edit_stat(&db, 0, "NPU", module, "parameters.weight", "Norm", inf);
        edit_stat(&db, 0, "NPU", module, "output.0", "Norm", inf);
        edit_stat(
            &db,
            0,
            "NPU",
            "Module.layers.2.mlp.FeedForward.forward.0",
            "output.0",
            "Norm",
            inf,
        );
    }
    let d = diagnose(&CompareFile::open(&path).unwrap(), &Options::default()).unwrap();
    let nf = d.first_non_finite.first().expect("a first inf/NaN");
    assert_eq!(nf.node, "Functional.linear.10.forward", "{}", listing(&d));
    assert!(
        nf.reason
            .starts_with("weight's Norm overflows to inf; inputs are finite"),
        "{}",
        nf.reason
    );
    let source = d
        .sources
        .iter()
        .find(|s| s.node == "Functional.linear.10.forward")
        .expect("the API is a source");
    assert!(
        source.reason.starts_with("weight's Norm overflows to inf"),
        "{}",
        source.reason
    );
}

//! Replay on real msprobe tensor dumps (a small slice of `tf_small_tensor_a`/`_b`, committed
//! under tests/fixtures/replay/): every replayed call passes, every other call says why, and a
//! faulty variant (one call's output moved a few ULPs with numpy) fails at that call only.

use std::path::{Path, PathBuf};

use graph_ascend_dump::Confine;
use graph_ascend_replay::{replay_dump, CallReport, DumpRun, Status};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/replay")
        .join(name)
}

fn replay(path: &Path) -> Vec<CallReport> {
    let run = DumpRun::find(path).unwrap();
    replay_dump(&run, &Confine::anywhere(), None, &|_, _| {}).unwrap()
}

fn print(calls: &[CallReport]) {
    for c in calls {
        eprintln!(
            "{:?} {} {:?} {}",
            c.status,
            c.name,
            c.reason,
            c.outputs
                .iter()
                .map(|o| o.ours.why.clone())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}

/// `GA_REPLAY_DUMP=/path/to/dump cargo test -p graph-ascend-replay --test real_dump -- --ignored --nocapture`
#[test]
#[ignore]
fn any_dump_from_the_environment() {
    let path = std::env::var("GA_REPLAY_DUMP").expect("GA_REPLAY_DUMP");
    let calls = replay(Path::new(&path));
    print(&calls);
    let api: Vec<_> = calls
        .iter()
        .filter(|c| !c.api.is_empty() && c.name.ends_with(".forward"))
        .collect();
    let judged = api
        .iter()
        .filter(|c| c.status != Status::NotReplayed)
        .count();
    eprintln!("{judged} of {} API forward calls replayed", api.len());
}

fn api_forward(calls: &[CallReport]) -> Vec<&CallReport> {
    calls
        .iter()
        .filter(|c| !c.api.is_empty() && c.name.ends_with(".forward"))
        .collect()
}

#[test]
fn every_call_of_a_real_dump_is_replayed_and_passes() {
    for run in ["tf_small_a", "tf_small_b"] {
        let calls = replay(&fixture(run));
        print(&calls);
        let api = api_forward(&calls);
        assert!(api.len() >= 4, "{run}");
        for c in &api {
            assert_eq!(c.status, Status::Pass, "{run} {}: {:?}", c.name, c.outputs);
            assert_eq!(c.ran_in, Some(graph_ascend_replay::Dtype::F32));
            // msprobe's stage 1 agrees on a correct fp32 run.
            for o in &c.outputs {
                assert_eq!(o.msprobe.status, "pass", "{run} {}", c.name);
            }
        }
        // Every record not replayed says why.
        for c in calls.iter().filter(|c| c.status == Status::NotReplayed) {
            let reason = c.reason.as_deref().unwrap_or("");
            assert!(
                reason.contains("module") || reason.contains("backward"),
                "{}: {reason}",
                c.name
            );
        }
    }
}

#[test]
fn a_few_ulps_in_one_output_fail_that_call_only() {
    let calls = replay(&fixture("tf_small_a_faulty"));
    print(&calls);
    for c in api_forward(&calls) {
        if c.name == "Tensor.__add__.0.forward" {
            assert_eq!(c.status, Status::Fail);
            let ours = &c.outputs[0].ours;
            assert!(ours.over_budget > 0 && ours.max_ulp >= 3.0, "{ours:?}");
            // msprobe's stage 1 passes it: max abs error far below 0.001.
            assert_eq!(c.outputs[0].msprobe.status, "pass");
        } else {
            assert_eq!(c.status, Status::Pass, "{}", c.name);
        }
    }
}

/// The statistics of the faulty output (recomputed by the fixture script) against the
/// original's: the relative changes are below 1e-6, far under any statistics rule's noise.
#[test]
fn the_statistics_cannot_see_the_fault() {
    let stats = |run: &str| -> serde_json::Value {
        let path = fixture(run).join("step0/proc10848/dump.json");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        doc["data"]["Tensor.__add__.0.forward"]["output"][0].clone()
    };
    let (clean, faulty) = (stats("tf_small_a"), stats("tf_small_a_faulty"));
    let mut moved = 0.0f64;
    for key in ["Max", "Min", "Mean", "Norm"] {
        let (a, b) = (clean[key].as_f64().unwrap(), faulty[key].as_f64().unwrap());
        moved = moved.max((a - b).abs() / a.abs().max(1e-30));
    }
    assert!(moved < 1e-5, "{moved}");
}

#[test]
fn a_statistics_dump_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("dump.json"),
        r#"{"task": "statistics", "level": "mix", "dump_data_dir": null, "data": {}}"#,
    )
    .unwrap();
    let run = DumpRun::find(dir.path()).unwrap();
    let err = replay_dump(&run, &Confine::anywhere(), None, &|_, _| {}).unwrap_err();
    assert!(err.to_string().contains("tensor dump"), "{err}");
}

#[test]
fn missing_tensors_are_a_reason_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("tf_small_b").join("step0/proc10852/dump.json");
    std::fs::copy(src, dir.path().join("dump.json")).unwrap();
    let calls = replay(dir.path());
    for c in api_forward(&calls) {
        assert_eq!(c.status, Status::NotReplayed);
        assert!(
            c.reason
                .as_deref()
                .unwrap()
                .starts_with("tensors not found at "),
            "{:?}",
            c.reason
        );
    }
}

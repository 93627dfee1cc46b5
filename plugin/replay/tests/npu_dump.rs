//! Replay on a synthetic msprobe tensor dump of NPU-only calls (`tests/fixtures/npu_dump`, written
//! by `tests/replay/make_npu_dump_fixture.py` in msprobe's dump format, bf16 `.pt` files): the
//! calls a correct bf16 kernel computed pass, and the faulty variant (one attention head +4 ULP)
//! fails at npu_fusion_attention only.

use std::path::{Path, PathBuf};

use graph_ascend_dump::Confine;
use graph_ascend_replay::{replay_dump, CallReport, DumpRun, Status};

fn replay(name: &str) -> Vec<CallReport> {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let run = DumpRun::find(&path).unwrap();
    replay_dump(&run, &Confine::anywhere(), None, &|_, _| {}).unwrap()
}

fn status(calls: &[CallReport], api: &str) -> Status {
    let call = calls.iter().find(|c| c.api == api).unwrap();
    for o in &call.outputs {
        eprintln!("{} output {}: {}", call.name, o.index, o.ours.why);
    }
    call.status
}

#[test]
fn npu_calls_of_correct_kernels_pass() {
    let calls = replay("npu_dump");
    assert_eq!(calls.len(), 3);
    for api in ["npu_fusion_attention", "npu_rotary_mul", "npu_add_rms_norm"] {
        assert_eq!(status(&calls, api), Status::Pass, "{api}");
    }
    let fa = calls
        .iter()
        .find(|c| c.api == "npu_fusion_attention")
        .unwrap();
    // The attention output only; softmax_max/sum/out and the ints are listed as not judged.
    assert_eq!(fa.outputs.len(), 1);
    assert!(
        fa.notes.iter().any(|n| n.contains("outputs 1..")),
        "{:?}",
        fa.notes
    );
    let norm = calls.iter().find(|c| c.api == "npu_add_rms_norm").unwrap();
    assert_eq!(norm.outputs.len(), 3, "y, rstd and x are judged");
}

#[test]
fn one_attention_head_four_ulps_off_fails_there_only() {
    let calls = replay("npu_dump_faulty");
    assert_eq!(status(&calls, "npu_fusion_attention"), Status::Fail);
    assert_eq!(status(&calls, "npu_rotary_mul"), Status::Pass);
    assert_eq!(status(&calls, "npu_add_rms_norm"), Status::Pass);
}

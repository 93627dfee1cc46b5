//! Views are bounded by memory, not only by count: 4,000 invented client
//! ids made the sidecar hold 3.8 GB. A counting allocator checks both that the views' own
//! estimate of their size is honest and that a flood of ids stays under the bound.

mod common;
#[path = "common/counting.rs"]
mod counting;

use std::sync::Arc;

use common::{meta, unpack, Probe};
use graph_ascend_service::State;

/// `clients` invented clients each open the root and one module of the NPU pane; returns the
/// heap growth they caused and the views' own measure.
fn flood(state: &Arc<State>, clients: usize) -> (usize, usize) {
    let m = meta("run", "compare_20261122090320");
    let warm = Probe {
        state: state.clone(),
        client: "warm-up".into(),
    };
    warm.expand(&m, "root", "NPU");
    warm.expand(&m, "Module.embed.Embedding.forward.0", "NPU");
    let before = counting::live();
    for i in 0..clients {
        let p = Probe {
            state: state.clone(),
            client: format!("invented-client-{i:06}"),
        };
        p.expand(&m, "root", "NPU");
        let v = p.expand(&m, "Module.embed.Embedding.forward.0", "NPU");
        assert_eq!(v["success"], true, "{v}");
    }
    let grown = counting::live().saturating_sub(before);
    (grown, state.view_bytes())
}

fn state(dir: &std::path::Path, view_bytes: usize) -> Arc<State> {
    Arc::new(State::new(dir.to_path_buf()).with_view_memory(view_bytes))
}

#[test]
fn a_flood_of_client_ids_stays_under_the_memory_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    unpack("compare_tf_stats", dir.path(), "run");

    // Unbounded: the estimate follows what the allocator really holds.
    let open = state(dir.path(), usize::MAX);
    let (grown, measured) = flood(&open, 200);
    let ratio = measured as f64 / grown as f64;
    eprintln!("200 views: heap +{grown} B, estimated {measured} B");
    assert!(
        (0.7..1.4).contains(&ratio),
        "estimate {measured} B vs {grown} B allocated"
    );
    let per_view = grown / 200;
    drop(open);

    // Bounded to about 50 views: 2,000 clients leave no more than that.
    let bound = 50 * per_view;
    let bounded = state(dir.path(), bound);
    let (grown, measured) = flood(&bounded, 2000);
    eprintln!("2000 clients, bound {bound} B: heap +{grown} B, estimated {measured} B");
    assert!(measured <= bound, "{measured} > {bound}");
    assert!(
        grown <= bound + bound / 2,
        "heap grew {grown} B, bound {bound} B"
    );
}

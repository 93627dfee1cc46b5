//! Replays the sidecar's fuzz targets' corpora and crash cases (`fuzz/corpus/<target>/`,
//! `fuzz/artifacts/<target>/` for `vis_db` and `request`) on stable Rust: every input that ever
//! made the sidecar panic stays a test, and `make test` needs no nightly toolchain.

use std::path::Path;

use graph_ascend_dump::fuzzing::{replay, Reader};
use graph_ascend_service::fuzzing;

#[test]
fn every_corpus_and_crash_input_is_answered_without_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let targets: [(&str, Reader); 2] = [("vis_db", fuzzing::vis_db), ("request", fuzzing::request)];
    for (target, read) in targets {
        let replayed = replay(&fuzz, target, read).unwrap_or_else(|e| panic!("{e}"));
        // The seed corpora are part of the repository: an empty replay would prove nothing.
        assert!(replayed > 0, "no {target} input replayed");
    }
}

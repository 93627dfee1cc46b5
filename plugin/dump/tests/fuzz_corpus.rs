//! Replays the fuzz targets' corpora and crash cases (`fuzz/corpus/<target>/`,
//! `fuzz/artifacts/<target>/`) through the readers on stable Rust: every input that ever made a
//! reader panic stays a test, and `make test` needs no nightly toolchain.

use std::path::Path;

use graph_ascend_dump::fuzzing::{replay, TARGETS};

#[test]
fn every_corpus_and_crash_input_is_read_without_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = 0;
    for (target, read) in TARGETS {
        replayed += replay(&fuzz, target, read).unwrap_or_else(|e| panic!("{e}"));
    }
    // The seed corpora are part of the repository: an empty replay would prove nothing.
    assert!(replayed >= TARGETS.len(), "only {replayed} inputs replayed");
}

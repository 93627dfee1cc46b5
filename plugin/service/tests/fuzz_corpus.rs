//! Replays the sidecar's fuzz targets' corpora and crash cases (`fuzz/corpus/<target>/`,
//! `fuzz/artifacts/<target>/` for `vis_db` and `request`) on stable Rust: every input that ever
//! made the sidecar panic stays a test, and `make test` needs no nightly toolchain.

use std::path::Path;

use graph_ascend_service::fuzzing;

#[test]
fn every_corpus_and_crash_input_is_answered_without_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let targets: [(&str, fn(&[u8])); 2] =
        [("vis_db", fuzzing::vis_db), ("request", fuzzing::request)];
    for (target, read) in targets {
        let mut replayed = 0;
        for kind in ["corpus", "artifacts"] {
            let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join(target)) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if !path.is_file() {
                    continue;
                }
                let bytes = std::fs::read(&path).expect("read a corpus file");
                let ok = std::panic::catch_unwind(|| read(&bytes)).is_ok();
                assert!(ok, "{target} panicked on {}", path.display());
                replayed += 1;
            }
        }
        // The seed corpora are part of the repository: an empty replay would prove nothing.
        assert!(replayed > 0, "no {target} input replayed");
    }
}

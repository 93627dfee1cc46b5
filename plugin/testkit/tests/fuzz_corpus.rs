//! Replays the fuzz targets' corpora and crash cases (`fuzz/corpus/<target>/`,
//! `fuzz/artifacts/<target>/`) through their entry points on stable Rust: every input that ever
//! made a reader or the sidecar panic (or the browser's JSON differ from serde_json's) stays a
//! test, and `make test` needs no nightly toolchain.

use std::path::Path;

use graph_ascend_testkit::fuzzing::{json_strings, replay, TARGETS};

#[test]
fn every_corpus_and_crash_input_is_read_without_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (target, read) in TARGETS {
        let replayed = replay(&fuzz, target, read).unwrap_or_else(|e| panic!("{e}"));
        // The seed corpora are part of the repository: an empty replay would prove nothing.
        assert!(replayed > 0, "no {target} input replayed");
    }
}

/// Every recorded browser answer of msprobe's plugin (`tests/fixtures/golden_api26/`), whole and
/// section by section, through `json_strings`: as JSON values held by the sidecar, the browser's
/// JSON writer must write them as serde_json does.
#[test]
fn every_golden_answer_is_written_as_serde_json_writes_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/golden_api26");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("the golden answers") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read(&path).expect("a golden answer");
        json_strings(&text);
        let value: serde_json::Value = serde_json::from_slice(&text).expect("golden JSON");
        for section in value["answers"]
            .as_object()
            .into_iter()
            .flat_map(|a| a.values())
        {
            json_strings(&serde_json::to_vec(section).expect("a section"));
        }
        files += 1;
    }
    assert!(
        files >= 25,
        "expected the golden answers in {}",
        dir.display()
    );
}

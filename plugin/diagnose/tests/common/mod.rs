//! Fixture helpers: the real msprobe outputs in `tests/fixtures/upstream_vis`, unpacked.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use graph_ascend_diagnose::{diagnose, CompareFile, Diagnosis, Options};

/// `tests/fixtures` of the repository.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Decompresses upstream case `case`'s `.vis.db` into `dir`.
pub fn unpack(case: &str, dir: &Path) -> PathBuf {
    let case_dir = fixtures().join("upstream_vis").join(case);
    let xz = std::fs::read_dir(&case_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", case_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db.xz"))
        .unwrap_or_else(|| panic!("no .vis.db.xz for {case}"));
    let out_path = dir.join(format!("{case}.vis.db"));
    let mut input = std::io::BufReader::new(std::fs::File::open(&xz).expect("open xz"));
    let mut out = std::fs::File::create(&out_path).expect("create");
    lzma_rs::xz_decompress(&mut input, &mut out).expect("decompress");
    out_path
}

/// The diagnosis of an upstream case with default options.
pub fn diagnose_case(case: &str) -> Diagnosis {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack(case, dir.path());
    let file = CompareFile::open(&path).expect("open");
    diagnose(&file, &Options::default()).expect("diagnose")
}

/// Whether source `k` is `node` or has it among its enclosing modules.
pub fn source_covers(d: &Diagnosis, k: usize, node: &str) -> bool {
    d.sources
        .get(k)
        .is_some_and(|s| s.node == node || s.enclosing.iter().any(|e| e == node))
}

/// The sources, printed for failure messages.
pub fn listing(d: &Diagnosis) -> String {
    graph_ascend_diagnose::report::text(d, 50)
}

//! Helpers shared by the CLI's tests: the repository's fixtures, an upstream case's `.vis.db`
//! unpacked, and the `graph-ascend` binary run as the user runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `tests/fixtures` of the repository.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Decompresses an upstream case's `.vis.db` into `dir`.
pub fn unpack(case: &str, dir: &Path) -> PathBuf {
    let case_dir = fixtures().join("upstream_vis").join(case);
    let xz = std::fs::read_dir(&case_dir)
        .expect("case dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db.xz"))
        .expect("a .vis.db.xz");
    let out_path = dir.join(format!("{case}.vis.db"));
    let mut input = std::io::BufReader::new(std::fs::File::open(&xz).expect("open"));
    let mut out = std::fs::File::create(&out_path).expect("create");
    lzma_rs::xz_decompress(&mut input, &mut out).expect("decompress");
    out_path
}

/// Runs `graph-ascend ARGS`.
pub fn ga(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graph-ascend"))
        .args(args)
        .output()
        .expect("run graph-ascend")
}

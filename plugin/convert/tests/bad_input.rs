//! Bad input gets a clear error naming the file and the problem, a failed conversion, and no
//! `.vis.db` (nor a temporary file) left in the output folder.

use std::path::{Path, PathBuf};

use graph_ascend_convert::{convert, ConvertOptions};

fn good_rank() -> PathBuf {
    let step =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/dumps/mlp_stats/step0");
    std::fs::read_dir(&step)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap()
}

/// A copy of a good rank folder in which `file` is replaced by `content`.
fn broken(file: &str, content: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let rank = tmp.path().join("rank0");
    std::fs::create_dir_all(&rank).unwrap();
    for f in ["dump.json", "construct.json", "stack.json"] {
        std::fs::copy(good_rank().join(f), rank.join(f)).unwrap();
    }
    std::fs::write(rank.join(file), content).unwrap();
    (tmp, rank)
}

fn fails(target: PathBuf, out: &Path, needles: &[&str]) {
    let opts = ConvertOptions {
        target,
        output: out.to_path_buf(),
        ..Default::default()
    };
    let err = convert(&opts, &|_| {}).expect_err("must fail").to_string();
    for n in needles {
        assert!(err.contains(n), "error {err:?} should mention {n:?}");
    }
    let left = std::fs::read_dir(out).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "no file may be left in {}", out.display());
}

#[test]
fn truncated_dump_json() {
    let good = std::fs::read(good_rank().join("dump.json")).unwrap();
    let (tmp, rank) = broken("dump.json", &good[..good.len() / 2]);
    fails(
        rank,
        &tmp.path().join("out"),
        &["dump.json", "not valid JSON"],
    );
}

#[test]
fn empty_construct_json() {
    let (tmp, rank) = broken("construct.json", b"{}");
    fails(rank, &tmp.path().join("out"), &["construct.json", "empty"]);
}

#[test]
fn missing_construct_json() {
    let (tmp, rank) = broken("construct.json", b"{}");
    std::fs::remove_file(rank.join("construct.json")).unwrap();
    fails(
        rank,
        &tmp.path().join("out"),
        &["construct.json", "missing"],
    );
}

#[test]
fn garbage_stack_json() {
    let (tmp, rank) = broken("stack.json", b"\x00\x01garbage");
    fails(rank, &tmp.path().join("out"), &["stack.json"]);
    let (tmp, rank) = broken("stack.json", br#"{"0": 5}"#);
    fails(rank, &tmp.path().join("out"), &["stack.json", "\"0\""]);
}

#[test]
fn wrong_json_shape() {
    let (tmp, rank) = broken("dump.json", b"[1, 2, 3]");
    fails(rank, &tmp.path().join("out"), &["dump.json", "object"]);
    let (tmp, rank) = broken("dump.json", br#"{"task": "statistics", "data": {"x": 3}}"#);
    fails(rank, &tmp.path().join("out"), &["dump.json", "\"x\""]);
    let (tmp, rank) = broken("construct.json", br#"{"a": 5}"#);
    fails(rank, &tmp.path().join("out"), &["construct.json", "\"a\""]);
}

#[test]
fn missing_folder() {
    let tmp = tempfile::tempdir().unwrap();
    fails(
        tmp.path().join("nope"),
        &tmp.path().join("out"),
        &["nope", "no such folder"],
    );
}

#[test]
fn unreadable_pt_file() {
    let tensor = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/dumps/tf_small_tensor_a/step0");
    let rank = std::fs::read_dir(&tensor)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let copy = |name: &str| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(d.join("dump_tensor_data")).unwrap();
        for f in ["dump.json", "construct.json", "stack.json"] {
            std::fs::copy(rank.join(f), d.join(f)).unwrap();
        }
        for e in std::fs::read_dir(rank.join("dump_tensor_data"))
            .unwrap()
            .flatten()
        {
            std::fs::copy(e.path(), d.join("dump_tensor_data").join(e.file_name())).unwrap();
        }
        d
    };
    let (a, b) = (copy("a"), copy("b"));
    let victim = b.join("dump_tensor_data/Functional.linear.0.forward.output.0.pt");
    std::fs::write(&victim, b"this is not a zip").unwrap();
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        target: b,
        golden: Some(a),
        output: out.clone(),
        ..Default::default()
    };
    let err = convert(&opts, &|_| {}).expect_err("must fail").to_string();
    assert!(
        err.contains("Functional.linear.0.forward.output.0.pt"),
        "{err}"
    );
    assert!(err.contains("zip"), "{err}");
    assert_eq!(std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0), 0);
}
